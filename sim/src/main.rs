//! `turnsim`: run seeded scenario suites, replay one seed, list what the
//! harness knows.
//!
//! Environment variables read:
//! - `MADSIM_TEST_SEED`: the first seed of `run` (madsim's convention);
//!   `--seed-start` wins over it.
//! - `MADSIM_TEST_NUM`: seeds per scenario for `run`; `--seeds` wins over it.
//!
//! Exit codes: 0 all passed, 1 a check failed, 2 bad input (unreadable or
//! malformed scenario, bad flag, nothing to run), 130 interrupted (Ctrl-C,
//! after a partial summary). The exit code is the verdict whether or not
//! stdout could be written (a closed pipe, a full disk).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mimalloc::MiMalloc;
use turnsim::applicable::NotApplicableMode;
use turnsim::cli::crash_points::Sweep;
use turnsim::cli::explore::ExploreFlags;
use turnsim::cli::list::ListWhat;
use turnsim::cli::replay::ReplayFormat;
use turnsim::cli::run::RunFormat;
use turnsim::cli::{self, exit_with};
use turnsim::runner::Shard;
use turnsim::{errln, outln, output};
use turnsim_engine::{Regression, RegressionSet};

/// Sweeps build and drop a runtime per seed; mimalloc keeps that churn in
/// user space (glibc's arena trimming made it syscall-bound).
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

#[derive(Parser)]
#[command(name = "turnsim", version, about = "Deterministic simulation and fault injection for chat turn engines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Drive the engine this shell command starts, over the engine protocol
    /// (docs/protocol.md), instead of the built-in engine in-process.
    #[arg(long, global = true, value_name = "CMD")]
    engine_cmd: Option<String>,
    /// The engine runs in real time (a live bridge, adapters/live/): each
    /// run gets a scratch directory (`init.scratch_dir`), the engine may be
    /// silent for 120 s, and `run` goes one run at a time unless `--jobs`
    /// says otherwise. Verdicts are rates over `--repeat`; see the README's
    /// "Live runs".
    #[arg(long, global = true, requires = "engine_cmd")]
    live: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run every scenario over its seeds and check every invariant.
    ///
    /// A scenario that needs a capability the engine does not declare is
    /// not run: it is reported as not applicable, apart from pass and fail
    /// (docs/protocol.md, Capabilities). A run where none applies fails.
    Run {
        /// Scenario files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Seeds per scenario (default: each file's `seeds`).
        #[arg(long)]
        seeds: Option<u64>,
        /// First seed.
        #[arg(long)]
        seed_start: Option<u64>,
        /// Parallel runs, 1 to 256 (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only slice K of N of the (scenario, seed) work, e.g. 2/4.
        #[arg(long)]
        shard: Option<Shard>,
        /// Report format: text for people, json for tools, junit for CI
        /// dashboards, github for workflow annotations on the scenario files.
        #[arg(long, value_enum, default_value_t = RunFormat::Text)]
        format: RunFormat,
        /// Bring back a historical bug (repeatable); see `list regressions`.
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
        /// Run each (scenario, seed) this many times; a scenario is reported
        /// with its pass rate, and fails if any run fails (for live runs,
        /// whose interleavings differ from run to run).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
        repeat: u64,
        /// A scenario that needs what the engine does not declare: skip it
        /// (reported N/A), run it too, or run only those. Run, only the
        /// violations its missing capabilities do not explain count.
        #[arg(long, value_enum, default_value_t = NotApplicableMode::Skip)]
        not_applicable: NotApplicableMode,
    },
    /// Run one seed and print its whole timeline.
    Replay {
        /// The scenario file.
        file: PathBuf,
        /// The seed to replay (default: `MADSIM_TEST_SEED`).
        #[arg(long)]
        seed: Option<u64>,
        /// Output: the numbered timeline and transcript (text), the events
        /// (json), a sequence diagram (mermaid), or one self-contained page
        /// to open from a CI artifact (html).
        #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
        format: ReplayFormat,
        /// Bring back a historical bug (repeatable); see `list regressions`.
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
    },
    /// Run each seed twice and report the first event where the traces differ.
    ///
    /// A scenario the engine's capabilities do not cover is skipped and
    /// counted as not applicable, as `run` does.
    CheckDeterminism {
        /// Scenario files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Seeds per scenario, from 0.
        #[arg(long, default_value_t = 8)]
        seeds: u64,
        /// Seeds checked at once, 1 to 256 (default: the machine's cores);
        /// the report is the same at any count.
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Generate random scenarios, run them, shrink the first failure and
    /// write it as a YAML scenario.
    ///
    /// Its scenarios name no `needs`: over an engine that lacks a
    /// capability, a case that exercises it fails like any other.
    Explore {
        /// Cases to try.
        #[arg(long, default_value_t = 2000)]
        cases: usize,
        /// Seed of the sweep: case i is generated from (seed, i).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Parallel cases, 1 to 256 (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Bring back a historical bug (repeatable); exploration is not told which.
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
        /// Where the shrunk failing scenario is written.
        #[arg(long, default_value = "explored")]
        out: PathBuf,
        /// Shrink runs at most.
        #[arg(long, default_value_t = 2000)]
        max_shrink_iters: usize,
        /// Also draw the host's faults: a refused commit, the process dying
        /// as a commit returns, the chat surface refusing or delaying posts,
        /// the recovery hook throwing, slow and racy client and caller links.
        #[arg(long)]
        store_faults: bool,
    },
    /// Evict the engine after each durable write of each scenario's run (one
    /// run per write boundary) and check every invariant.
    ///
    /// A scenario the engine's capabilities do not cover is skipped and
    /// counted as not applicable, as `run` does.
    CrashPoints {
        /// Scenario files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The seed each scenario runs at.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Instead of evicting after each write, have the store refuse each
        /// commit in turn (a failed write the engine must survive and report).
        #[arg(long)]
        store_errors: bool,
        /// The process dies as each commit returns, not at its next await:
        /// every commit boundary is a crash point, even mid-step.
        #[arg(long, conflicts_with = "store_errors")]
        at_commit: bool,
        /// Each eviction takes only the process's memory: client
        /// connections stay open through it (with or without --at-commit).
        #[arg(long, conflicts_with = "store_errors")]
        memory_only: bool,
        /// Replay one crash point (the number a failure line names) of one
        /// scenario and print its whole timeline, judged as the sweep judges it.
        #[arg(long, value_name = "WRITE")]
        replay: Option<usize>,
        /// Bring back a historical bug (repeatable); see `list regressions`.
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
    },
    /// Measure seeded runs per second, time compression and exploration speed.
    Bench {
        /// text, or json for the named figures.
        #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
        format: ReplayFormat,
        /// Directory holding the benchmark scenarios.
        #[arg(long, default_value = "scenarios")]
        scenarios: PathBuf,
        /// Instead of the figures: the ratios a run measures on itself (a
        /// standard run over the floor, the checks' share, the protocol over
        /// in-process, each Node engine over the Node floor) against this
        /// file of committed bounds; exit 1 past a bound, 2 when a bounded
        /// ratio cannot be measured here.
        #[arg(long, value_name = "BOUNDS", num_args = 0..=1, default_missing_value = turnsim::bench::ratios::DEFAULT_BOUNDS)]
        check: Option<PathBuf>,
        /// Instead of the figures: each part of a run (the simulation, each
        /// check) timed per traced event, on the standard scenario and on the
        /// growth shapes, short and long; and a standard run over the
        /// protocol (against --engine-cmd, or the built-in engine served)
        /// split into the harness's own work, writing inputs, waiting for
        /// the engine and taking its lines.
        #[arg(long, conflicts_with = "check")]
        by_part: bool,
        /// Instead of the figures: the growth figures counted in
        /// instructions under valgrind (the same to a thousandth on every
        /// run, whatever the machine's load); exit 1 when either grows past
        /// 1.5.
        #[arg(long, conflicts_with_all = ["check", "by_part"])]
        instructions: bool,
        /// With --instructions: judge every run with a check quadratic in
        /// the history too (what the guard must fail on; CI proves it does).
        #[arg(long, requires = "instructions", hide = true)]
        quadratic_check: bool,
    },
    /// Runs seeds of one form of a growth shape and prints the traced
    /// events (what `bench --instructions` counts under valgrind).
    #[command(hide = true)]
    GrowthProbe {
        #[arg(long, value_enum)]
        shape: turnsim::bench::growth::Shape,
        #[arg(long, value_enum)]
        form: turnsim::bench::growth::Form,
        #[arg(long)]
        seeds: u64,
        #[arg(long)]
        quadratic_check: bool,
    },
    /// Rewrite what the engine sends out with named mutation operators, one
    /// site per run, and report which checks notice (the kill matrix).
    Adversary(turnsim::adversary::cli::AdversaryArgs),
    /// Serve the built-in engine over the engine protocol on stdin/stdout
    /// (what `--engine-cmd` starts; see docs/protocol.md).
    Engine {
        /// Declare only these capabilities (comma-separated; every one when
        /// not given): the suite as an engine without the others sees it.
        #[arg(long, value_enum, value_delimiter = ',', num_args = 0..)]
        capabilities: Option<Vec<turnsim::capability::Capability>>,
    },
    /// Print the JSON Schema of the scenario format (for editor validation).
    Schema,
    /// List scenarios, invariants, regressions, fault kinds or the adversary's operators.
    List {
        /// What to list.
        #[arg(value_enum)]
        what: ListWhat,
        /// Where `list scenarios` looks.
        #[arg(default_value = "scenarios")]
        paths: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let _stop_engines = cli::StopEngines;
    let arguments = Cli::parse();
    cli::stop_on_ctrl_c();
    if arguments.engine_cmd.as_deref().is_some_and(|command| command.trim().is_empty()) {
        errln!("error: --engine-cmd is empty: give the command that starts your engine");
        return ExitCode::from(2);
    }
    if !matches!(arguments.command, Command::Bench { .. }) {
        turnsim::world::use_engine_command(arguments.engine_cmd.clone());
    }
    turnsim::live::use_live(arguments.live);
    if std::env::var("TURNSIM_ENGINE_FRESH_PROCESSES").is_ok_and(|value| value.trim() == "1") {
        turnsim::protocol::proxy::use_fresh_processes(true);
    }
    let result = match arguments.command {
        Command::Engine { capabilities } => return cli::engine::serve(capabilities),
        Command::Run { paths, seeds, seed_start, jobs, shard, format, regressions, repeat, not_applicable } => {
            let selection = cli::run::Selection { seeds, seed_start, jobs, shard, repeat, not_applicable };
            cli::run::run(paths, selection, format, RegressionSet::of(regressions))
        }
        Command::Replay { file, seed, format, regressions } => {
            cli::replay::replay(&file, seed, format, &RegressionSet::of(regressions))
        }
        Command::CheckDeterminism { paths, seeds, jobs } => cli::determinism::check_determinism(&paths, seeds, jobs),
        Command::List { what, paths } => cli::list::list(what, &paths),
        Command::Explore { cases, seed, jobs, regressions, out, max_shrink_iters, store_faults } => {
            let options = ExploreFlags { cases, seed, jobs, regressions, max_shrink_iters, store_faults };
            cli::explore::explore_command(options, &out)
        }
        Command::CrashPoints { paths, seed, store_errors, at_commit, memory_only, replay, regressions } => {
            let mode = Sweep { store_errors, at_commit, memory_only, regressions: RegressionSet::of(regressions) };
            match replay {
                Some(write) => cli::crash_points::replay_crash_point(&paths, seed, &mode, write),
                None => cli::crash_points::crash_points(&paths, seed, mode),
            }
        }
        Command::Adversary(args) => turnsim::adversary::cli::run(args),
        Command::Bench { by_part: true, format, scenarios, .. } => {
            cli::bench::by_part(&scenarios, arguments.engine_cmd, format)
        }
        Command::Bench { instructions: true, quadratic_check, format, .. } => {
            cli::bench::instructions(quadratic_check, format)
        }
        Command::GrowthProbe { shape, form, seeds, quadratic_check } => {
            outln!("{}", turnsim::bench::instructions::probe(shape, form, seeds, quadratic_check));
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { format, scenarios, check: Some(bounds), .. } => cli::bench::check(&scenarios, &bounds, format),
        Command::Bench { format, scenarios, .. } => cli::bench::bench(&scenarios, arguments.engine_cmd, format),
        Command::Schema => {
            outln!("{}", turnsim::scenario::json_schema());
            Ok(ExitCode::SUCCESS)
        }
    };
    turnsim::protocol::proxy::stop_waiting_processes();
    let code = result.unwrap_or_else(exit_with);
    output::finish();
    code
}

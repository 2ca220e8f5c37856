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

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mimalloc::MiMalloc;
use turnsim::check::invariants::{DETERMINISM_RULE, INVARIANTS};
use turnsim::protocol::fault::EngineFault;
use turnsim::runner::{self, Plan, Shard};
use turnsim::scenario::{load_paths, load_scenario, ScenarioError, ScenarioFile};
use turnsim::{errln, outln, output, report};
use turnsim_engine::{Regression, RegressionSet, ALL_REGRESSIONS};

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
}

#[derive(Subcommand)]
enum Command {
    /// Run every scenario over its seeds and check every invariant.
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
    CheckDeterminism {
        /// Scenario files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Seeds per scenario, from 0.
        #[arg(long, default_value_t = 8)]
        seeds: u64,
    },
    /// Generate random scenarios, run them, shrink the first failure and
    /// write it as a YAML scenario.
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
        /// Exit 1 when a figure falls below its floor (or a growth figure
        /// rises above its ceiling) in this file of committed bounds.
        #[arg(long, value_name = "FLOORS", num_args = 0..=1, default_missing_value = turnsim::bench::floors::DEFAULT_FLOORS)]
        check: Option<PathBuf>,
    },
    /// Rewrite what the engine sends out with named mutation operators, one
    /// site per run, and report which checks notice (the kill matrix).
    Adversary(turnsim::adversary::cli::AdversaryArgs),
    /// Serve the built-in engine over the engine protocol on stdin/stdout
    /// (what `--engine-cmd` starts; see docs/protocol.md).
    Engine,
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

#[derive(Clone, Copy, ValueEnum)]
enum RunFormat {
    Text,
    Json,
    Junit,
    Github,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReplayFormat {
    Text,
    Json,
    Mermaid,
    /// One self-contained page: lanes side by side, the violation, the transcript.
    Html,
}

#[derive(Clone, Copy, ValueEnum)]
enum ListWhat {
    Scenarios,
    Invariants,
    Regressions,
    Faults,
    /// The adversary's mutation operators.
    Operators,
}

/// Fault kinds a scenario can script (`faults:` and `actions:`).
const FAULT_KINDS: [(&str, &str); 8] = [
    ("stall", "the model stream parks after chunk k of call n (the watchdog's case)"),
    ("cut", "the provider connection drops after chunk k of call n"),
    ("truncate", "the provider ends the step after chunk k: finish-step unknown, 0 tokens"),
    ("http_error", "call n answers an HTTP status (429 and 5xx are retried)"),
    ("evict", "the engine process is killed at a time or trigger and restarted later"),
    ("disconnect", "the client drops its connection and reconnects later"),
    ("park", "a model step that never resolves, written in the script itself"),
    ("random", "per seed: each kind above happens with a probability, at a point the seed picks"),
];

/// Stops every engine process still running when `main` ends, however it
/// ends (a harness panic unwinds through it).
struct StopEngines;

impl Drop for StopEngines {
    fn drop(&mut self) {
        turnsim::protocol::proxy::stop_waiting_processes();
    }
}

fn main() -> ExitCode {
    let _stop_engines = StopEngines;
    let cli = Cli::parse();
    // The first Ctrl-C stops taking new runs and leaves a partial summary; a second one quits.
    let _ = ctrlc::set_handler(|| {
        if runner::interrupted() {
            turnsim::protocol::proxy::stop_waiting_processes();
            std::process::exit(130);
        }
        runner::interrupt();
    });
    if cli.engine_cmd.as_deref().is_some_and(|command| command.trim().is_empty()) {
        errln!("error: --engine-cmd is empty: give the command that starts your engine");
        return ExitCode::from(2);
    }
    if !matches!(cli.command, Command::Bench { .. }) {
        turnsim::world::use_engine_command(cli.engine_cmd.clone());
    }
    let result = match cli.command {
        Command::Engine => {
            return match turnsim::protocol::serve::serve() {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("turnsim engine: {error}");
                    ExitCode::from(2)
                }
            };
        }
        Command::Run { paths, seeds, seed_start, jobs, shard, format, regressions } => {
            run(paths, seeds, seed_start, jobs, shard, format, RegressionSet::of(regressions))
        }
        Command::Replay { file, seed, format, regressions } => {
            replay(&file, seed, format, &RegressionSet::of(regressions))
        }
        Command::CheckDeterminism { paths, seeds } => check_determinism(&paths, seeds),
        Command::List { what, paths } => list(what, &paths),
        Command::Explore { cases, seed, jobs, regressions, out, max_shrink_iters, store_faults } => {
            let options = ExploreFlags { cases, seed, jobs, regressions, max_shrink_iters, store_faults };
            explore_command(options, &out)
        }
        Command::CrashPoints { paths, seed, store_errors, at_commit, memory_only, replay, regressions } => {
            let mode = Sweep { store_errors, at_commit, memory_only, regressions: RegressionSet::of(regressions) };
            match replay {
                Some(write) => replay_crash_point(&paths, seed, &mode, write),
                None => crash_points(&paths, seed, mode),
            }
        }
        Command::Adversary(args) => turnsim::adversary::cli::run(args),
        Command::Bench { format, scenarios, check } => bench(&scenarios, cli.engine_cmd, format, check.as_deref()),
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

/// `turnsim bench`; with `floors`, exit 1 when a figure is past its bound.
fn bench(
    scenarios: &Path,
    engine_cmd: Option<String>,
    format: ReplayFormat,
    floors: Option<&Path>,
) -> Result<ExitCode, ScenarioError> {
    let bounds = floors.map(turnsim::bench::floors::load).transpose()?;
    let report = turnsim::bench::run(scenarios, engine_cmd)?;
    match format {
        ReplayFormat::Json => outln!("{}", serde_json::to_string_pretty(&report).expect("serialises")),
        _ => output::emit(&turnsim::bench::text(&report)),
    }
    let (Some(path), Some(floors)) = (floors, bounds) else { return Ok(ExitCode::SUCCESS) };
    match turnsim::bench::floors::breaches(&report, &floors) {
        Err(error) => Err(ScenarioError::new(path, error)),
        Ok(breaches) if breaches.is_empty() => {
            errln!("bench: every figure within the bounds measured on {}", floors.machine);
            Ok(ExitCode::SUCCESS)
        }
        Ok(breaches) => {
            breaches.iter().for_each(|breach| errln!("bench: {breach} (bounds measured on {})", floors.machine));
            Ok(ExitCode::FAILURE)
        }
    }
}

fn exit_with(error: ScenarioError) -> ExitCode {
    errln!("error: {error}");
    ExitCode::from(2)
}

/// 130, as a shell reports a process ended by Ctrl-C.
fn interrupted_exit() -> ExitCode {
    ExitCode::from(130)
}

/// `turnsim explore`'s flags.
struct ExploreFlags {
    cases: usize,
    seed: u64,
    jobs: Option<usize>,
    regressions: Vec<Regression>,
    max_shrink_iters: usize,
    store_faults: bool,
}

fn explore_command(flags: ExploreFlags, out: &std::path::Path) -> Result<ExitCode, ScenarioError> {
    if flags.cases == 0 {
        return Err(usage_error("nothing to explore: --cases 0"));
    }
    let options = turnsim::explore::ExploreOptions {
        cases: flags.cases,
        seed: flags.seed,
        jobs: jobs_flag(flags.jobs)?,
        regressions: RegressionSet::of(flags.regressions),
        max_shrink_iters: flags.max_shrink_iters,
        store_faults: flags.store_faults,
    };
    explore(&options, out)
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

/// Parallel runs: 1 to [`MAX_JOBS`]; the machine's cores when not given.
const MAX_JOBS: usize = 256;

fn jobs_flag(jobs: Option<usize>) -> Result<usize, ScenarioError> {
    match jobs {
        None => Ok(default_jobs()),
        Some(jobs) if (1..=MAX_JOBS).contains(&jobs) => Ok(jobs),
        Some(jobs) => Err(usage_error(&format!("--jobs {jobs}: give 1 to {MAX_JOBS} parallel runs"))),
    }
}

/// A bad flag or environment value, reported like a bad file (exit 2).
fn usage_error(message: &str) -> ScenarioError {
    ScenarioError::new(std::path::Path::new("turnsim"), message)
}

/// The scenarios under `paths`; none at all is an error, not a green run.
fn load_some(paths: &[PathBuf]) -> Result<Vec<ScenarioFile>, ScenarioError> {
    let files = load_paths(paths)?;
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|path| path.display().to_string()).collect();
        return Err(usage_error(&format!("no scenario files (*.yaml, *.yml) in {}", shown.join(" "))));
    }
    Ok(files)
}

/// Every seed of the sweep is a u64: the last one must not wrap around.
fn check_seed_ranges(plan: &Plan) -> Result<(), ScenarioError> {
    for file in &plan.files {
        let seeds = plan.seeds.unwrap_or(file.scenario.seeds);
        let start = plan.seed_start.unwrap_or(file.scenario.seed_start);
        if seeds > 0 && start.checked_add(seeds - 1).is_none() {
            let message = format!("{seeds} seeds from seed {start} run past the last seed, {}", u64::MAX);
            return Err(match (plan.seed_start, plan.seeds) {
                (Some(_), Some(_)) => usage_error(&format!("--seed-start and --seeds: {message}")),
                (Some(_), None) => {
                    turnsim::scenario::error_at(&file.path, "seeds", format!("{message} (--seed-start)"))
                }
                (None, _) => turnsim::scenario::error_at(&file.path, "seed_start", message),
            });
        }
    }
    Ok(())
}

fn explore(options: &turnsim::explore::ExploreOptions, out: &std::path::Path) -> Result<ExitCode, ScenarioError> {
    let names: Vec<&str> = options.regressions.iter().map(Regression::name).collect();
    errln!(
        "turnsim explore: seed {}, up to {} cases, {} jobs, regressions: {}",
        options.seed,
        options.cases,
        options.jobs,
        if names.is_empty() { "none".to_string() } else { names.join(" ") }
    );
    let started = turnsim::bench::wall_now();
    let progress = Progress::new(options.cases as u64, "cases");
    let (finding, coverage) = turnsim::explore::explore_with_coverage(options, &|_| progress.step());
    progress.finish();
    output::emit(&format!("fault coverage (turn phase x fault kind):\n{}\n", coverage.render()));
    let Some(finding) = finding else {
        if runner::interrupted() {
            outln!("explore: interrupted, no failure in the cases run");
            return Ok(interrupted_exit());
        }
        outln!("explore: {} cases, no failure", options.cases);
        return Ok(ExitCode::SUCCESS);
    };
    // The finding is printed before anything is written, so a failed write loses nothing.
    outln!(
        "FAIL case {} after {:.1}s: {}: {}",
        finding.case_index,
        started.elapsed().as_secs_f64(),
        finding.check,
        finding.message
    );
    outln!(
        "  shrunk in {} runs to {} tools and {} faults (sim seed {})",
        finding.shrink_steps,
        finding.shrunk.tools.len(),
        finding.shrunk.faults.len(),
        finding.shrunk.sim_seed
    );
    match turnsim::explore::write_finding(out, &finding) {
        Ok(path) => {
            outln!("  written: {}", path.display());
            let mut replay = format!(
                "cargo run --release -p turnsim -- replay {} --seed {}",
                path.display(),
                finding.shrunk.sim_seed
            );
            for name in &names {
                replay.push_str(&format!(" --regression {name}"));
            }
            replay.push_str(&turnsim::world::engine_flag());
            outln!("  replay: {replay}");
        }
        Err(error) => {
            errln!("error: cannot write the shrunk scenario under {}: {error}", out.display());
            output::emit(&format!("  the shrunk scenario:\n{}", finding.yaml));
        }
    }
    Ok(ExitCode::FAILURE)
}

/// Which crash-point sweep to run.
struct Sweep {
    store_errors: bool,
    at_commit: bool,
    memory_only: bool,
    regressions: RegressionSet,
}

impl Sweep {
    /// How a failure line names the crash point.
    fn what(&self) -> &'static str {
        match (self.store_errors, self.at_commit, self.memory_only) {
            (true, ..) => "the store refused commit",
            (false, true, false) => "died as it returned from commit",
            (false, false, false) => "evicted after write",
            (false, true, true) => "lost its memory as it returned from commit",
            (false, false, true) => "lost its memory after write",
        }
    }

    /// The scenario with the fault of crash point `write` added.
    fn fault_at(&self) -> fn(&ScenarioFile, usize) -> ScenarioFile {
        use turnsim::crash_points::*;
        match (self.store_errors, self.at_commit, self.memory_only) {
            (true, ..) => with_refused_commit,
            (false, true, true) => with_memory_loss_at_commit,
            (false, false, true) => with_memory_loss_after,
            (false, true, false) => with_crash_at_commit,
            (false, false, false) => with_crash_after,
        }
    }

    /// The command that replays crash point `write` of `file`.
    fn replay_command(&self, file: &ScenarioFile, seed: u64, write: usize) -> String {
        let flags = [
            (self.store_errors, " --store-errors"),
            (self.at_commit, " --at-commit"),
            (self.memory_only, " --memory-only"),
        ];
        let flags: String = flags.iter().filter(|(on, _)| *on).map(|(_, flag)| *flag).collect();
        let path = file.path.display();
        let mut command =
            format!("cargo run --release -p turnsim -- crash-points {path} --seed {seed}{flags} --replay {write}");
        for regression in self.regressions.iter() {
            command.push_str(&format!(" --regression {regression}"));
        }
        command.push_str(&turnsim::world::engine_flag());
        command
    }
}

fn crash_points(paths: &[PathBuf], seed: u64, mode: Sweep) -> Result<ExitCode, ScenarioError> {
    use turnsim::crash_points::{refusal_sweep, sweep, sweep_at_commit, sweep_memory_only, CrashOutcome};
    let files = load_some(paths)?;
    let what = mode.what();
    let run_sweep = |file: &ScenarioFile| -> Vec<CrashOutcome> {
        let regressions = &mode.regressions;
        match (mode.store_errors, mode.at_commit, mode.memory_only) {
            (true, ..) => refusal_sweep(file, seed, regressions),
            (false, at_once, true) => sweep_memory_only(file, seed, regressions, at_once),
            (false, true, false) => sweep_at_commit(file, seed, regressions),
            (false, false, false) => sweep(file, seed, regressions),
        }
    };
    let mut failed = 0;
    let mut runs = 0;
    for file in &files {
        for outcome in run_sweep(file) {
            runs += 1;
            if !outcome.violations.is_empty() {
                failed += 1;
                if outcome.write == 0 {
                    outln!("FAIL {} seed {seed}, the run without a crash point:", file.path.display());
                } else {
                    outln!("FAIL {} seed {seed} {what} {}:", file.path.display(), outcome.write);
                }
                for violation in &outcome.violations {
                    outln!("    {}: {}", violation.check, violation.message);
                }
                let replay = match outcome.write {
                    0 => runner::replay_command(file, seed, &mode.regressions),
                    write => mode.replay_command(file, seed, write),
                };
                outln!("    replay: {replay}");
            }
        }
    }
    if runs == 0 {
        return Err(usage_error("no crash points: the scenarios made no durable writes"));
    }
    outln!("crash-points: {} passed, {failed} failed", runs - failed);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One crash point's whole timeline, as `replay` prints a seed's.
fn replay_crash_point(paths: &[PathBuf], seed: u64, mode: &Sweep, write: usize) -> Result<ExitCode, ScenarioError> {
    let [path] = paths else {
        return Err(usage_error("crash-points --replay takes one scenario file"));
    };
    if write == 0 {
        return Err(usage_error("crash points are numbered from 1"));
    }
    let file = load_scenario(path)?;
    let regressions = &mode.regressions;
    let (record, violations) = turnsim::crash_points::run_one(&file, seed, regressions, write, mode.fault_at());
    outln!("crash point: {} {write}", mode.what());
    let again = mode.replay_command(&file, seed, write);
    print_replay(&file, seed, regressions, &record, &violations, &again);
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn env_u64(name: &str) -> Result<Option<u64>, ScenarioError> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map(Some).map_err(|_| {
            ScenarioError::new(std::path::Path::new(&format!("${name}")), format!("`{value}` is not a seed number"))
        }),
        Err(_) => Ok(None),
    }
}

fn run(
    paths: Vec<PathBuf>,
    seeds: Option<u64>,
    seed_start: Option<u64>,
    jobs: Option<usize>,
    shard: Option<Shard>,
    format: RunFormat,
    regressions: RegressionSet,
) -> Result<ExitCode, ScenarioError> {
    let files = load_some(&paths)?;
    let plan = Plan {
        seeds: seeds.or(env_u64("MADSIM_TEST_NUM")?),
        seed_start: seed_start.or(env_u64("MADSIM_TEST_SEED")?),
        jobs: jobs_flag(jobs)?,
        shard,
        regressions,
        files,
    };
    check_seed_ranges(&plan)?;
    let total = plan.runs();
    if total == 0 {
        return Err(usage_error("nothing to run: 0 seeds selected (check `--seeds`, `MADSIM_TEST_NUM` and `--shard`)"));
    }
    let seeds_from = plan.seed_start.map_or("each file's seed_start".to_string(), |start| start.to_string());
    errln!(
        "turnsim: {}, {}, seeds from {seeds_from}, {}{}",
        report::plural(plan.files.len() as u64, "scenario"),
        report::plural(total, "run"),
        report::plural(plan.jobs as u64, "job"),
        describe(&plan)
    );
    let progress = Progress::new(total, "runs");
    let results = runner::sweep(&plan, &|_, _| progress.step());
    progress.finish();
    let summary = report::summarise(&plan.files, &results, &plan.regressions);
    match format {
        RunFormat::Text => output::emit(&report::text(&plan.files, &results, &plan.regressions)),
        RunFormat::Json => output::emit(&format!("{}\n", report::json(&summary))),
        RunFormat::Junit => output::emit(&report::junit(&plan.files, &results, &plan.regressions)),
        RunFormat::Github => output::emit(&report::github(&plan.files, &results, &plan.regressions)),
    }
    if matches!(format, RunFormat::Text) {
        if plan.files.len() > 1 {
            outln!("\nfault coverage (turn phase x fault kind, over all runs):\n{}", results.coverage.render());
        }
        output::emit(&report::failing_list(&plan.files, &results, &plan.regressions));
        if runner::interrupted() {
            outln!("interrupted after {} of {}", summary.runs, report::plural(total, "run"));
        }
        outln!("suite: {} passed, {} failed", summary.passed, summary.failed);
    }
    if runner::interrupted() {
        return Ok(interrupted_exit());
    }
    Ok(if summary.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn describe(plan: &Plan) -> String {
    let mut extra = String::new();
    if let Some(shard) = plan.shard {
        extra.push_str(&format!(", shard {}/{}", shard.index, shard.count));
    }
    let regressions: Vec<&str> = plan.regressions.iter().map(Regression::name).collect();
    if !regressions.is_empty() {
        extra.push_str(&format!(", regressions: {}", regressions.join(" ")));
    }
    extra
}

/// A progress bar on stderr when it is a terminal (rate-limited redraws, an
/// ETA, a count that only goes up), nothing otherwise.
struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    fn new(total: u64, unit: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { bar: indicatif::ProgressBar::hidden() };
        }
        let style = indicatif::ProgressStyle::with_template(&format!(
            "  {{bar:30}} {{pos}}/{{len}} {unit}  {{per_sec}}  ETA {{eta}}"
        ))
        .expect("a valid progress template");
        Self { bar: indicatif::ProgressBar::new(total).with_style(style) }
    }

    fn step(&self) {
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn replay(
    file: &std::path::Path,
    seed: Option<u64>,
    format: ReplayFormat,
    regressions: &RegressionSet,
) -> Result<ExitCode, ScenarioError> {
    let seed = match seed.or(env_u64("MADSIM_TEST_SEED")?) {
        Some(seed) => seed,
        None => return Err(usage_error("replay needs `--seed N` (or `MADSIM_TEST_SEED`)")),
    };
    let scenario = load_scenario(file)?;
    let (record, violations) = runner::run_one(&scenario, seed, regressions);
    match format {
        ReplayFormat::Json => {
            let json = serde_json::json!({
                "scenario": scenario.scenario.name,
                "seed": seed,
                "regressions": regressions.iter().map(Regression::name).collect::<Vec<_>>(),
                "end": record.end,
                "sim_ms": record.sim_ms,
                "events": record.events,
                "violations": violations,
            });
            outln!("{}", serde_json::to_string_pretty(&json).expect("serialises"));
        }
        ReplayFormat::Text => {
            let again = runner::replay_command(&scenario, seed, regressions);
            print_replay(&scenario, seed, regressions, &record, &violations, &again);
        }
        ReplayFormat::Mermaid => output::emit(&turnsim::mermaid::render(&record.events, &violations)),
        ReplayFormat::Html => output::emit(&turnsim::html::render(&scenario, seed, regressions, &record, &violations)),
    }
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_replay(
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    record: &turnsim::world::RunRecord,
    violations: &[turnsim::check::Violation],
    replay: &str,
) {
    use std::fmt::Write as _;
    let names: Vec<&str> = regressions.iter().map(Regression::name).collect();
    let regressions_shown = if names.is_empty() { "none".into() } else { names.join(",") };
    let mut out = format!("SEED={seed} scenario={} regressions={regressions_shown}\n", scenario.scenario.name);
    out.push_str(&report::numbered_timeline(record, violations));
    let _ =
        writeln!(out, "end: {:?} after {} ms of sim time, {} events", record.end, record.sim_ms, record.events.len());
    out.push_str("final transcript (stored):\n");
    out.push_str(&turnsim::transcript_view::render(&record.final_state.messages));
    if let Some(expected) = &scenario.scenario.expect.expect_failure {
        // A canary passes by failing: show the failure it exists to produce.
        for violation in turnsim::check::raw_violations(scenario, record).iter().filter(|v| &v.check == expected) {
            let _ = writeln!(out, "EXPECTED FAILURE {}: {}", violation.check, violation.message);
        }
    }
    if violations.is_empty() {
        out.push_str("all checks passed\n");
    }
    for violation in violations {
        let at = violation.at_event.map(|at| format!(" (event {})", at + 1)).unwrap_or_default();
        let _ = writeln!(out, "FAILED {}: {}{at}", violation.check, violation.message);
    }
    if !violations.is_empty() {
        let _ = writeln!(out, "replay: {replay}");
    }
    output::emit(&out);
}

fn check_determinism(paths: &[PathBuf], seeds: u64) -> Result<ExitCode, ScenarioError> {
    if seeds == 0 {
        return Err(usage_error("nothing to check: --seeds 0"));
    }
    let files = load_some(paths)?;
    let mut diverged = 0;
    for file in &files {
        for seed in 0..seeds {
            if let Some(report) = turnsim::determinism::first_divergence(file, seed) {
                let verdict = if report.starts_with(EngineFault::CHECK) { "FAIL" } else { "DIVERGED" };
                outln!("{verdict} {} seed {seed}: {report}", file.path.display());
                diverged += 1;
            }
        }
    }
    outln!("determinism: {} passed, {diverged} failed", files.len() as u64 * seeds - diverged);
    Ok(if diverged == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn list(what: ListWhat, paths: &[PathBuf]) -> Result<ExitCode, ScenarioError> {
    match what {
        ListWhat::Regressions => {
            for regression in ALL_REGRESSIONS {
                outln!("{:<30} {}", regression.name(), regression.symptom());
            }
        }
        ListWhat::Invariants => {
            for invariant in &INVARIANTS {
                outln!("{:<24} {}", invariant.name, invariant.rule);
            }
            outln!("{:<24} {}", DETERMINISM_RULE.0, DETERMINISM_RULE.1);
        }
        ListWhat::Operators => {
            for operator in turnsim::adversary::ALL_OPERATORS {
                outln!("{:<28} {}", operator.name(), operator.wrong());
            }
        }
        ListWhat::Faults => {
            for (name, what) in FAULT_KINDS {
                outln!("{name:<12} {what}");
            }
        }
        ListWhat::Scenarios => {
            for file in load_some(paths)? {
                outln!("{:<48} {} seeds  {}", file.path.display(), file.scenario.seeds, file.scenario.name);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `turnsim`: run seeded scenario suites, replay one seed, list what the
//! harness knows.
//!
//! Environment variables read:
//! - `MADSIM_TEST_SEED`: the first seed of `run` (madsim's convention);
//!   `--seed-start` wins over it.
//! - `MADSIM_TEST_NUM`: seeds per scenario for `run`; `--seeds` wins over it.
//!
//! Exit codes: 0 all passed, 1 a check failed, 2 bad input (unreadable or
//! malformed scenario, bad flag).

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mimalloc::MiMalloc;
use turnsim::check::invariants::{DETERMINISM_RULE, INVARIANTS};
use turnsim::runner::{self, Plan, Shard};
use turnsim::scenario::{load_paths, load_scenario, ScenarioError, ScenarioFile};
use turnsim::{report, trace};
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
        /// Parallel runs (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only slice K of N of the (scenario, seed) work, e.g. 2/4.
        #[arg(long)]
        shard: Option<Shard>,
        #[arg(long, value_enum, default_value_t = RunFormat::Text)]
        format: RunFormat,
        /// Bring back a historical bug (repeatable); see `list regressions`.
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
    },
    /// Run one seed and print its whole timeline.
    Replay {
        file: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
        format: ReplayFormat,
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
    },
    /// Run each seed twice and report the first event where the traces differ.
    CheckDeterminism {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
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
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long = "regression")]
        regressions: Vec<Regression>,
        /// Where the shrunk failing scenario is written.
        #[arg(long, default_value = "explored")]
        out: PathBuf,
        /// Shrink runs at most.
        #[arg(long, default_value_t = 2000)]
        max_shrink_iters: usize,
    },
    /// Evict the engine after each durable write of each scenario's run (one
    /// run per write boundary) and check every invariant.
    CrashPoints {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The seed each scenario runs at.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Measure seeded runs per second, time compression and exploration speed.
    Bench {
        #[arg(long, value_enum, default_value_t = ReplayFormat::Text)]
        format: ReplayFormat,
        /// Directory holding the benchmark scenarios.
        #[arg(long, default_value = "scenarios")]
        scenarios: PathBuf,
    },
    /// Print the JSON Schema of the scenario format (for editor validation).
    Schema,
    /// List scenarios, invariants, regressions or fault kinds.
    List {
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
}

#[derive(Clone, Copy, ValueEnum)]
enum ReplayFormat {
    Text,
    Json,
    Mermaid,
}

#[derive(Clone, Copy, ValueEnum)]
enum ListWhat {
    Scenarios,
    Invariants,
    Regressions,
    Faults,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { paths, seeds, seed_start, jobs, shard, format, regressions } => {
            run(paths, seeds, seed_start, jobs, shard, format, RegressionSet::of(regressions))
        }
        Command::Replay { file, seed, format, regressions } => {
            replay(&file, seed, format, &RegressionSet::of(regressions))
        }
        Command::CheckDeterminism { paths, seeds } => check_determinism(&paths, seeds),
        Command::List { what, paths } => list(what, &paths),
        Command::Explore { cases, seed, jobs, regressions, out, max_shrink_iters } => {
            let options = turnsim::explore::ExploreOptions {
                cases,
                seed,
                jobs: jobs.unwrap_or_else(default_jobs),
                regressions: RegressionSet::of(regressions),
                max_shrink_iters,
            };
            explore(&options, &out)
        }
        Command::CrashPoints { paths, seed } => crash_points(&paths, seed),
        Command::Bench { format, scenarios } => turnsim::bench::run(&scenarios).map(|report| {
            match format {
                ReplayFormat::Json => println!("{}", serde_json::to_string_pretty(&report).expect("serialises")),
                _ => print!("{}", turnsim::bench::text(&report)),
            }
            ExitCode::SUCCESS
        }),
        Command::Schema => {
            println!("{}", turnsim::scenario::json_schema());
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::from(2)
    })
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

fn explore(options: &turnsim::explore::ExploreOptions, out: &std::path::Path) -> Result<ExitCode, ScenarioError> {
    let names: Vec<&str> = options.regressions.iter().map(Regression::name).collect();
    eprintln!(
        "turnsim explore: seed {}, up to {} cases, {} jobs, regressions: {}",
        options.seed,
        options.cases,
        options.jobs,
        if names.is_empty() { "none".to_string() } else { names.join(" ") }
    );
    let started = turnsim::bench::wall_now();
    let progress = progress_printer(options.cases);
    let (finding, coverage) = turnsim::explore::explore_with_coverage(options, &|done| progress(done, options.cases));
    emit(&format!("fault coverage (turn phase x fault kind):\n{}\n", coverage.render()));
    let Some(finding) = finding else {
        println!("explore: {} cases, no failure", options.cases);
        return Ok(ExitCode::SUCCESS);
    };
    let path = turnsim::explore::write_finding(out, &finding).map_err(|error| ScenarioError {
        path: out.to_path_buf(),
        line: None,
        column: None,
        message: format!("cannot write the finding: {error}"),
    })?;
    println!(
        "FAIL case {} after {:.1}s: {}: {}",
        finding.case_index,
        started.elapsed().as_secs_f64(),
        finding.check,
        finding.message
    );
    println!(
        "  shrunk in {} runs to {} tools and {} faults",
        finding.shrink_steps,
        finding.shrunk.tools.len(),
        finding.shrunk.faults.len()
    );
    println!("  written: {}", path.display());
    let mut replay =
        format!("cargo run --release -p turnsim -- replay {} --seed {}", path.display(), finding.shrunk.sim_seed);
    for name in &names {
        replay.push_str(&format!(" --regression {name}"));
    }
    println!("  replay: {replay}");
    Ok(ExitCode::FAILURE)
}

fn crash_points(paths: &[PathBuf], seed: u64) -> Result<ExitCode, ScenarioError> {
    let files = load_paths(paths)?;
    let mut failed = 0;
    let mut runs = 0;
    for file in &files {
        for outcome in turnsim::crash_points::sweep(file, seed, &RegressionSet::default()) {
            runs += 1;
            if !outcome.violations.is_empty() {
                failed += 1;
                println!("FAIL {} seed {seed} evicted after write {}:", file.path.display(), outcome.write);
                for violation in &outcome.violations {
                    println!("    {}: {}", violation.check, violation.message);
                }
            }
        }
    }
    println!("crash-points: {} passed, {failed} failed", runs - failed);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn env_u64(name: &str) -> Result<Option<u64>, ScenarioError> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map(Some).map_err(|_| ScenarioError {
            path: PathBuf::from(format!("${name}")),
            line: None,
            column: None,
            message: format!("`{value}` is not a seed number"),
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
    let files = load_paths(&paths)?;
    let plan = Plan {
        seeds: seeds.or(env_u64("MADSIM_TEST_NUM")?),
        seed_start: seed_start.or(env_u64("MADSIM_TEST_SEED")?),
        jobs: jobs.unwrap_or_else(default_jobs),
        shard,
        regressions,
        files,
    };
    let total = plan.work_count();
    let seeds_from = plan.seed_start.map_or("each file's seed_start".to_string(), |start| start.to_string());
    eprintln!(
        "turnsim: {} scenarios, {total} runs, seeds from {seeds_from}, {} jobs{}",
        plan.files.len(),
        plan.jobs,
        describe(&plan)
    );
    let results = runner::sweep(&plan, &progress_printer(total));
    let summary = report::summarise(&plan.files, &results, &plan.regressions);
    match format {
        RunFormat::Text => emit(&report::text(&plan.files, &results, &plan.regressions)),
        RunFormat::Json => emit(&format!("{}\n", report::json(&summary))),
        RunFormat::Junit => emit(&report::junit(&plan.files, &results, &plan.regressions)),
    }
    if matches!(format, RunFormat::Text) {
        let coverage = &results.coverage;
        emit(&format!("\nfault coverage (turn phase x fault kind, over all runs):\n{}", coverage.render()));
        emit(&format!("suite: {} passed, {} failed\n", summary.passed, summary.failed));
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

/// A redrawn counter on a terminal; a line every tenth of the work otherwise.
fn progress_printer(total: usize) -> impl Fn(usize, usize) + Sync {
    let terminal = std::io::stderr().is_terminal();
    move |done, _| {
        if terminal {
            eprint!("\r  {done}/{total} runs");
            if done == total {
                eprintln!();
            }
        } else if total >= 100 && done % (total / 10) == 0 {
            eprintln!("  {done}/{total} runs");
        }
        let _ = std::io::stderr().flush();
    }
}

fn replay(
    file: &std::path::Path,
    seed: u64,
    format: ReplayFormat,
    regressions: &RegressionSet,
) -> Result<ExitCode, ScenarioError> {
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
            println!("{}", serde_json::to_string_pretty(&json).expect("serialises"));
        }
        ReplayFormat::Text => print_replay(&scenario, seed, regressions, &record, &violations),
        ReplayFormat::Mermaid => emit(&turnsim::mermaid::render(&record.events)),
    }
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_replay(
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    record: &turnsim::world::RunRecord,
    violations: &[turnsim::check::Violation],
) {
    use std::fmt::Write as _;
    let names: Vec<&str> = regressions.iter().map(Regression::name).collect();
    let regressions_shown = if names.is_empty() { "none".into() } else { names.join(",") };
    let mut out = format!("SEED={seed} scenario={} regressions={regressions_shown}\n", scenario.scenario.name);
    out.push_str(&trace::render_timeline(&record.events));
    let _ =
        writeln!(out, "end: {:?} after {} ms of sim time, {} events", record.end, record.sim_ms, record.events.len());
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
        let _ = writeln!(out, "replay: {}", runner::replay_command(scenario, seed, regressions));
    }
    emit(&out);
}

/// Writes to stdout; a closed pipe (`| head`) ends the program quietly.
fn emit(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() {
        std::process::exit(0);
    }
}

fn check_determinism(paths: &[PathBuf], seeds: u64) -> Result<ExitCode, ScenarioError> {
    let files = load_paths(paths)?;
    let mut diverged = 0;
    for file in &files {
        for seed in 0..seeds {
            if let Some(report) = turnsim::determinism::first_divergence(file, seed) {
                println!("DIVERGED {} seed {seed}: {report}", file.path.display());
                diverged += 1;
            }
        }
    }
    println!("determinism: {} passed, {diverged} failed", files.len() as u64 * seeds - diverged);
    Ok(if diverged == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn list(what: ListWhat, paths: &[PathBuf]) -> Result<ExitCode, ScenarioError> {
    match what {
        ListWhat::Regressions => {
            for regression in ALL_REGRESSIONS {
                println!("{:<30} {}", regression.name(), regression.symptom());
            }
        }
        ListWhat::Invariants => {
            for invariant in &INVARIANTS {
                println!("{:<24} {}", invariant.name, invariant.rule);
            }
            println!("{:<24} {}", DETERMINISM_RULE.0, DETERMINISM_RULE.1);
        }
        ListWhat::Faults => {
            for (name, what) in FAULT_KINDS {
                println!("{name:<12} {what}");
            }
        }
        ListWhat::Scenarios => {
            for file in load_paths(paths)? {
                println!("{:<48} {} seeds  {}", file.path.display(), file.scenario.seeds, file.scenario.name);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

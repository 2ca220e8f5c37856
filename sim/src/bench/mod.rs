//! `turnsim bench`: how many seeded runs a CI minute buys.
//!
//! Wall-clock time is read here, outside any simulation, only to time whole
//! batches of runs; nothing it measures reaches a trace. Each figure is the
//! median of several rounds, because this machine is noisy.

pub mod bare;
pub mod breakdown;
pub mod growth;
pub mod instructions;
pub mod node_floor;
pub mod protocol_parts;
pub mod ratios;

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnsim_engine::RegressionSet;

use crate::runner::{self, Plan};
use crate::scenario::{load_paths, load_scenario, ScenarioError, ScenarioFile};

/// The standard scenario: a parallel batch with a late sibling, a stall
/// routed to recovery, an eviction and a messenger delivery.
pub const STANDARD_SCENARIO: &str = "bench-standard-story.yaml";
/// A parallel batch with a late sibling and no eviction: what a run over
/// the protocol costs when every generation is the run's first.
pub const NO_EVICTION_SCENARIO: &str = "barrier-late-sibling.yaml";
/// The Cloudflare engine, from the repository root (next to the scenarios).
pub const CLOUDFLARE_ENGINE: &str = "adapters/cloudflare-agents/engine.mjs";
/// The AI SDK engine (no recovery, no messenger: measured on the scenario
/// without eviction only).
pub const AI_SDK_ENGINE: &str = "adapters/ai-sdk-chat/engine.mjs";
/// The Node floor: the SDK's protocol loop with no handler behind it.
pub const NODE_FLOOR_ENGINE: &str = "adapters/node/examples/noop.mjs";
/// About 130 s of recovery attempts with stable timeouts and reschedules.
pub const LONG_RECOVERY_SCENARIO: &str = "recovery-stable-timeout-exhausts.yaml";
const ROUNDS: usize = 5;
/// Tool steps in the short and the long session of `step_growth`.
pub const STEP_CHAIN_SHORT: usize = 20;
pub const STEP_CHAIN_LONG: usize = 320;
/// Client tools in the narrow and the wide batch of `batch_growth`.
pub const BATCH_NARROW: usize = 10;
pub const BATCH_WIDE: usize = 400;
pub(crate) const ROUND_TIME: Duration = Duration::from_millis(600);

#[derive(Debug, Default, Serialize)]
pub struct BenchReport {
    /// Standard scenario, seeded runs per second on one thread.
    pub runs_per_sec: f64,
    /// The floor: a bare simulation of the standard scenario's shape (its
    /// nodes, messages, timers and eviction under madsim, nothing else;
    /// `bare`), runs per second of CPU time on one thread.
    pub floor_runs_per_sec: f64,
    /// A standard run's CPU time over the floor's, the two measured in
    /// alternating rounds of this process (median of the rounds' ratios):
    /// what the engine, the world's logic, the history and the checks cost
    /// on top of what any run of this design pays.
    pub floor_ratio: f64,
    /// The whole committed suite, runs per second on one thread.
    pub suite_runs_per_sec: f64,
    /// The suite with `--jobs 2`, as a ratio to one thread.
    pub jobs2_speedup: f64,
    /// Simulated seconds per wall second on the long recovery story.
    pub sim_seconds_per_wall_second: f64,
    /// Exploration cases per second on one thread (generate, run, check).
    pub explore_cases_per_sec: f64,
    /// CPU time per traced event of a session with a chain of 320 tool
    /// steps over that of one with 20 (1.0: cost per event is flat).
    pub step_growth: f64,
    /// CPU time per traced event with 400 client tools in one batch over
    /// that with 10.
    pub batch_growth: f64,
    /// The checks' share of a standard run's CPU time (deriving the shared
    /// facts, every invariant, the expectations), each run timed as the
    /// simulation, then every check at once (`breakdown::checks_share`).
    pub checks_share: f64,
    /// The standard scenario with the built-in engine served over the
    /// process protocol (`turnsim engine`), runs per second on one thread.
    pub protocol_runs_per_sec: f64,
    /// `protocol_runs_per_sec` over `runs_per_sec`: the protocol's rate as
    /// a fraction of in-process.
    pub protocol_ratio: f64,
    /// The standard scenario against `--engine-cmd`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_cmd_runs_per_sec: Option<f64>,
    /// The standard scenario (it evicts) against the Cloudflare engine
    /// (`node adapters/cloudflare-agents/engine.mjs`), when Node and the
    /// adapters' packages are there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_runs_per_sec: Option<f64>,
    /// `barrier-late-sibling` (no eviction) against the Cloudflare engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_no_eviction_runs_per_sec: Option<f64>,
    /// Why the Node figures (the Cloudflare engine's, the AI SDK engine's,
    /// the Node floor's) are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_skipped: Option<String>,
    /// `barrier-late-sibling` against the AI SDK engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ai_sdk_no_eviction_runs_per_sec: Option<f64>,
    /// The Node floor (`adapters/node/examples/noop.mjs`: the SDK's loop,
    /// no handler) fed the lines the Cloudflare engine was sent on the
    /// standard scenario (`node_floor`), wall-clock runs per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_node_floor_runs_per_sec: Option<f64>,
    /// The same, fed what the AI SDK engine was sent on `barrier-late-sibling`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ai_sdk_node_floor_runs_per_sec: Option<f64>,
    /// Each Node engine's rate over the Node floor's on the same lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_node_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ai_sdk_no_eviction_node_fraction: Option<f64>,
    pub suite_runs: usize,
    pub rounds: usize,
}

/// Runs every measurement against the scenarios in `scenarios_dir`; with
/// `engine_cmd`, the standard scenario against that engine too.
pub fn run(scenarios_dir: &Path, engine_cmd: Option<String>) -> Result<BenchReport, ScenarioError> {
    let standard = load_scenario(&scenarios_dir.join(STANDARD_SCENARIO))?;
    let no_eviction = load_scenario(&scenarios_dir.join(NO_EVICTION_SCENARIO))?;
    let long = load_scenario(&scenarios_dir.join(LONG_RECOVERY_SCENARIO))?;
    let suite = load_paths(&[scenarios_dir.to_path_buf()])?;
    let suite_runs = Plan {
        files: suite.clone(),
        seeds: None,
        seed_start: None,
        jobs: 1,
        shard: None,
        repeat: 1,
        regressions: RegressionSet::default(),
    }
    .runs() as usize;
    let served = served_engine().ok();
    let over_protocol_judged = |command: Option<String>, file: &ScenarioFile, judged: bool| {
        let command = command?;
        crate::world::use_engine_command(Some(command));
        // One run first: the engine's processes start (and a Node engine
        // loads its packages) once per invocation, not once per run.
        let _ = runner::run_one(file, 0, &RegressionSet::default());
        let rate = median(ROUNDS, || match judged {
            true => seeded_rate(file).0,
            false => unjudged_rate(file),
        });
        crate::world::use_engine_command(None);
        crate::protocol::proxy::stop_waiting_processes();
        Some(rate)
    };
    let over_protocol = |command: Option<String>, file: &ScenarioFile| over_protocol_judged(command, file, true);
    let protocol_runs_per_sec = over_protocol(served, &standard).unwrap_or(0.0);
    let engine_cmd_runs_per_sec = over_protocol(engine_cmd, &standard);
    let node = |engine: &str| node_command(scenarios_dir, engine);
    let (cloudflare, cloudflare_skipped) = match node(CLOUDFLARE_ENGINE) {
        Ok(command) => (Some(command), None),
        Err(why) => (None, Some(why)),
    };
    let cloudflare_runs_per_sec = over_protocol(cloudflare.clone(), &standard);
    let cloudflare_no_eviction_runs_per_sec = over_protocol(cloudflare, &no_eviction);
    // The AI SDK engine fails `barrier-late-sibling` (it is not on its
    // passing list) and the Node floor fails everything: their cost is
    // measured, not their verdicts.
    let ai_sdk_no_eviction_runs_per_sec = over_protocol_judged(node(AI_SDK_ENGINE).ok(), &no_eviction, false);
    let node_floor_rate = |engine: &str, file: &ScenarioFile| {
        let (engine, floor) = (node(engine).ok()?, node(NODE_FLOOR_ENGINE).ok()?);
        let runs = node_floor::inputs(&engine, file, NODE_FLOOR_SEEDS);
        let rates: Result<Vec<f64>, String> =
            (0..ROUNDS).map(|_| node_floor::rate(&floor, &runs, ROUND_TIME)).collect();
        let mut rates = rates.ok()?;
        rates.sort_by(f64::total_cmp);
        Some(rates[rates.len() / 2])
    };
    let cloudflare_node_floor_runs_per_sec = node_floor_rate(CLOUDFLARE_ENGINE, &standard);
    let ai_sdk_node_floor_runs_per_sec = node_floor_rate(AI_SDK_ENGINE, &no_eviction);
    let fraction = |rate: Option<f64>, floor: Option<f64>| Some(rate? / floor?);
    let floor = measure_floor(&standard, ROUNDS);
    let growth = growth::measure(crate::check::check_run, growth::GrowthPlan { rounds: ROUNDS, ..Default::default() });
    let one_thread = median(ROUNDS, || suite_rate(&suite, 1));
    let two_threads = median(ROUNDS, || suite_rate(&suite, 2));
    let runs_per_sec = median(ROUNDS, || seeded_rate(&standard).0);
    Ok(BenchReport {
        runs_per_sec,
        floor_runs_per_sec: floor.floor_runs_per_sec,
        floor_ratio: floor.ratio,
        suite_runs_per_sec: one_thread,
        jobs2_speedup: two_threads / one_thread,
        sim_seconds_per_wall_second: median(ROUNDS, || seeded_rate(&long).1),
        explore_cases_per_sec: median(ROUNDS, || {
            std::thread::scope(|scope| scope.spawn(crate::explore::bench_rate).join().expect("bench thread"))
        }),
        step_growth: growth.step,
        batch_growth: growth.batch,
        checks_share: breakdown::checks_share(&standard),
        protocol_runs_per_sec,
        protocol_ratio: protocol_runs_per_sec / runs_per_sec.max(f64::MIN_POSITIVE),
        engine_cmd_runs_per_sec,
        cloudflare_runs_per_sec,
        cloudflare_no_eviction_runs_per_sec,
        cloudflare_skipped,
        ai_sdk_no_eviction_runs_per_sec,
        cloudflare_node_floor_runs_per_sec,
        ai_sdk_node_floor_runs_per_sec,
        cloudflare_node_fraction: fraction(cloudflare_runs_per_sec, cloudflare_node_floor_runs_per_sec),
        ai_sdk_no_eviction_node_fraction: fraction(ai_sdk_no_eviction_runs_per_sec, ai_sdk_node_floor_runs_per_sec),
        suite_runs,
        rounds: ROUNDS,
    })
}

/// Seeds whose shapes the floor replays in turn (the standard runs it is
/// compared with run the same seeds).
const FLOOR_SEEDS: u64 = 16;
/// Seeds whose lines the Node floor is fed in turn.
const NODE_FLOOR_SEEDS: u64 = 4;

pub struct FloorFigures {
    pub floor_runs_per_sec: f64,
    pub ratio: f64,
}

/// The floor and a standard run, in alternating rounds on one thread:
/// CPU time per run of each, and the median of the rounds' ratios.
pub fn measure_floor(standard: &ScenarioFile, rounds: usize) -> FloorFigures {
    let shapes = bare::shapes(standard, FLOOR_SEEDS);
    let half = ROUND_TIME / 2;
    let rounds: Vec<(f64, f64)> = (0..rounds)
        .map(|_| {
            let run = bare::standard_seconds_per_run(standard, FLOOR_SEEDS, half);
            let floor = bare::floor_seconds_per_run(&shapes, half);
            (run, floor)
        })
        .collect();
    let mut floors: Vec<f64> = rounds.iter().map(|(_, floor)| *floor).collect();
    floors.sort_by(f64::total_cmp);
    let mut ratios: Vec<f64> = rounds.iter().map(|(run, floor)| run / floor).collect();
    ratios.sort_by(f64::total_cmp);
    FloorFigures { floor_runs_per_sec: 1.0 / floors[floors.len() / 2], ratio: ratios[ratios.len() / 2] }
}

/// The command that runs the Node engine `engine` (a path from the root of
/// the repository the scenarios are in), or why it cannot run here.
fn node_command(scenarios_dir: &Path, engine: &str) -> Result<String, String> {
    let root = scenarios_dir.parent().filter(|root| !root.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let engine = root.join(engine);
    if !engine.is_file() {
        return Err(format!("no {}", engine.display()));
    }
    if !root.join("adapters/node_modules/agents").is_dir() {
        return Err("the adapters' packages are not installed (`npm ci --prefix adapters`)".to_string());
    }
    let node = std::process::Command::new("node").arg("--version").output();
    if !node.is_ok_and(|output| output.status.success()) {
        return Err("no `node` on the PATH".to_string());
    }
    Ok(format!("node '{}'", engine.display().to_string().replace('\'', "'\\''")))
}

/// Runs consecutive seeds for about one round on a worker thread (as
/// `turnsim run` does); returns (runs per second, simulated seconds per wall
/// second).
fn seeded_rate(file: &ScenarioFile) -> (f64, f64) {
    std::thread::scope(|scope| scope.spawn(|| seeded_rate_here(file)).join().expect("bench thread"))
}

/// Runs per second of consecutive seeds, whatever their verdicts.
fn unjudged_rate(file: &ScenarioFile) -> f64 {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let started = wall_now();
                let mut runs = 0u64;
                while started.elapsed() < ROUND_TIME {
                    let _ = crate::world::run(file, runs, &RegressionSet::default());
                    runs += 1;
                }
                runs as f64 / started.elapsed().as_secs_f64()
            })
            .join()
            .expect("bench thread")
    })
}

fn seeded_rate_here(file: &ScenarioFile) -> (f64, f64) {
    let regressions = RegressionSet::default();
    let started = wall_now();
    let (mut runs, mut sim_ms) = (0u64, 0u64);
    while started.elapsed() < ROUND_TIME {
        let (record, violations) = runner::run_one(file, runs, &regressions);
        assert!(
            violations.is_empty(),
            "benchmark scenario {} failed on seed {runs}: {violations:?}",
            file.path.display()
        );
        sim_ms += record.sim_ms;
        runs += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    (runs as f64 / seconds, sim_ms as f64 / 1000.0 / seconds)
}

fn suite_rate(suite: &[ScenarioFile], jobs: usize) -> f64 {
    let plan = Plan {
        files: suite.to_vec(),
        seeds: None,
        seed_start: None,
        jobs,
        shard: None,
        repeat: 1,
        regressions: RegressionSet::default(),
    };
    let started = wall_now();
    let results = runner::sweep(&plan, &|_, _| {});
    results.total_runs() as f64 / started.elapsed().as_secs_f64()
}

pub fn median(rounds: usize, mut measure: impl FnMut() -> f64) -> f64 {
    let mut values: Vec<f64> = (0..rounds).map(|_| measure()).collect();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The command that serves the built-in engine over the protocol: this
/// binary's `engine`.
pub fn served_engine() -> std::io::Result<String> {
    std::env::current_exe().map(|exe| format!("'{}' engine", exe.display()))
}

/// Wall-clock, for timing batches of runs from outside the simulation.
#[allow(clippy::disallowed_methods)]
pub fn wall_now() -> Instant {
    Instant::now()
}

pub fn text(report: &BenchReport) -> String {
    let mut text = format!(
        "standard scenario        {:>12.0} runs/s (one thread)\n\
         floor                    {:>12.0} runs/s (the standard scenario's shape, bare; CPU time)\n\
         floor ratio              {:>12.2}x a standard run's CPU time over the floor's (target 1.5)\n\
         checks' share            {:>12.2} of a standard run's CPU time (target 0.25)\n\
         over the protocol        {:>12.0} runs/s (standard scenario, `turnsim engine`), {:.2} of in-process (target 0.5)\n",
        report.runs_per_sec,
        report.floor_runs_per_sec,
        report.floor_ratio,
        report.checks_share,
        report.protocol_runs_per_sec,
        report.protocol_ratio
    );
    if let Some(rate) = report.engine_cmd_runs_per_sec {
        text.push_str(&format!("--engine-cmd             {rate:>12.0} runs/s (standard scenario)\n"));
    }
    let no_eviction = NO_EVICTION_SCENARIO.trim_end_matches(".yaml");
    let of_floor = |fraction: Option<f64>| {
        fraction.map_or_else(String::new, |fraction| format!(", {fraction:.2} of the Node floor (target 0.5)"))
    };
    match (report.cloudflare_runs_per_sec, report.cloudflare_no_eviction_runs_per_sec) {
        (Some(standard), Some(no_eviction_rate)) => text.push_str(&format!(
            "Cloudflare engine        {standard:>12.1} runs/s (standard scenario, it evicts{})\n\
             Cloudflare engine        {no_eviction_rate:>12.1} runs/s ({no_eviction}, no eviction{})\n",
            of_floor(report.cloudflare_node_fraction),
            "",
        )),
        _ => text.push_str(&format!(
            "Cloudflare engine        {:>12} ({})\n",
            "skipped",
            report.cloudflare_skipped.as_deref().unwrap_or("not measured")
        )),
    }
    if let Some(rate) = report.ai_sdk_no_eviction_runs_per_sec {
        let fraction = of_floor(report.ai_sdk_no_eviction_node_fraction);
        text.push_str(&format!("AI SDK engine            {rate:>12.1} runs/s ({no_eviction}, unjudged{fraction})\n"));
    }
    if let (Some(cloudflare), Some(ai_sdk)) =
        (report.cloudflare_node_floor_runs_per_sec, report.ai_sdk_node_floor_runs_per_sec)
    {
        text.push_str(&format!(
            "Node floor               {cloudflare:>12.1} runs/s (the SDK's loop, no handlers, fed the Cloudflare \
             engine's lines; {ai_sdk:.1} fed the AI SDK engine's)\n"
        ));
    }
    text.push_str(&format!(
        "whole suite              {:>12.0} runs/s (one thread, {} runs)\n\
         --jobs 2 speedup         {:>12.2}x\n\
         long recovery story      {:>12.0} sim-s per wall-s\n\
         exploration              {:>12.0} cases/s (one thread)\n\
         step growth              {:>12.2}x cost per event, {} vs {} tool steps\n\
         batch growth             {:>12.2}x cost per event, {} vs {} tools in one batch\n\
         (median of {} rounds)\n",
        report.suite_runs_per_sec,
        report.suite_runs,
        report.jobs2_speedup,
        report.sim_seconds_per_wall_second,
        report.explore_cases_per_sec,
        report.step_growth,
        STEP_CHAIN_LONG,
        STEP_CHAIN_SHORT,
        report.batch_growth,
        BATCH_WIDE,
        BATCH_NARROW,
        report.rounds
    ));
    text
}

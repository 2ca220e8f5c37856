//! `turnsim bench`: how many seeded runs a CI minute buys.
//!
//! Wall-clock time is read here, outside any simulation, only to time whole
//! batches of runs; nothing it measures reaches a trace. Each figure is the
//! median of several rounds, because this machine is noisy.

pub mod breakdown;
pub mod floors;
pub mod growth;
pub mod instructions;

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
/// About 130 s of recovery attempts with stable timeouts and reschedules.
pub const LONG_RECOVERY_SCENARIO: &str = "recovery-stable-timeout-exhausts.yaml";
const ROUNDS: usize = 5;
/// Tool steps in the short and the long session of `step_growth`.
pub const STEP_CHAIN_SHORT: usize = 20;
pub const STEP_CHAIN_LONG: usize = 320;
/// Client tools in the narrow and the wide batch of `batch_growth`.
pub const BATCH_NARROW: usize = 10;
pub const BATCH_WIDE: usize = 400;
const ROUND_TIME: Duration = Duration::from_millis(600);

#[derive(Debug, Default, Serialize)]
pub struct BenchReport {
    /// Standard scenario, seeded runs per second on one thread.
    pub runs_per_sec: f64,
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
    /// The standard scenario with the built-in engine served over the
    /// process protocol (`turnsim engine`), runs per second on one thread.
    pub protocol_runs_per_sec: f64,
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
    /// Why the Cloudflare figures are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_skipped: Option<String>,
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
    let served = std::env::current_exe().map(|exe| format!("'{}' engine", exe.display())).ok();
    let over_protocol = |command: Option<String>, file: &ScenarioFile| {
        let command = command?;
        crate::world::use_engine_command(Some(command));
        // One run first: the engine's processes start (and a Node engine
        // loads its packages) once per invocation, not once per run.
        let _ = runner::run_one(file, 0, &RegressionSet::default());
        let rate = median(ROUNDS, || seeded_rate(file).0);
        crate::world::use_engine_command(None);
        crate::protocol::proxy::stop_waiting_processes();
        Some(rate)
    };
    let protocol_runs_per_sec = over_protocol(served, &standard).unwrap_or(0.0);
    let engine_cmd_runs_per_sec = over_protocol(engine_cmd, &standard);
    let (cloudflare, cloudflare_skipped) = match cloudflare_command(scenarios_dir) {
        Ok(command) => (Some(command), None),
        Err(why) => (None, Some(why)),
    };
    let cloudflare_runs_per_sec = over_protocol(cloudflare.clone(), &standard);
    let cloudflare_no_eviction_runs_per_sec = over_protocol(cloudflare, &no_eviction);
    let growth = growth::measure(crate::check::check_run, growth::GrowthPlan { rounds: ROUNDS, ..Default::default() });
    let one_thread = median(ROUNDS, || suite_rate(&suite, 1));
    let two_threads = median(ROUNDS, || suite_rate(&suite, 2));
    Ok(BenchReport {
        runs_per_sec: median(ROUNDS, || seeded_rate(&standard).0),
        suite_runs_per_sec: one_thread,
        jobs2_speedup: two_threads / one_thread,
        sim_seconds_per_wall_second: median(ROUNDS, || seeded_rate(&long).1),
        explore_cases_per_sec: median(ROUNDS, || {
            std::thread::scope(|scope| scope.spawn(crate::explore::bench_rate).join().expect("bench thread"))
        }),
        step_growth: growth.step,
        batch_growth: growth.batch,
        protocol_runs_per_sec,
        engine_cmd_runs_per_sec,
        cloudflare_runs_per_sec,
        cloudflare_no_eviction_runs_per_sec,
        cloudflare_skipped,
        suite_runs,
        rounds: ROUNDS,
    })
}

/// The command that runs the Cloudflare engine from the repository the
/// scenarios are in, or why it cannot run here.
fn cloudflare_command(scenarios_dir: &Path) -> Result<String, String> {
    let root = scenarios_dir.parent().filter(|root| !root.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let engine = root.join(CLOUDFLARE_ENGINE);
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

/// Wall-clock, for timing batches of runs from outside the simulation.
#[allow(clippy::disallowed_methods)]
pub fn wall_now() -> Instant {
    Instant::now()
}

pub fn text(report: &BenchReport) -> String {
    let mut text = format!(
        "standard scenario        {:>12.0} runs/s (one thread)\n\
         over the protocol        {:>12.0} runs/s (standard scenario, `turnsim engine`)\n",
        report.runs_per_sec, report.protocol_runs_per_sec
    );
    if let Some(rate) = report.engine_cmd_runs_per_sec {
        text.push_str(&format!("--engine-cmd             {rate:>12.0} runs/s (standard scenario)\n"));
    }
    match (report.cloudflare_runs_per_sec, report.cloudflare_no_eviction_runs_per_sec) {
        (Some(standard), Some(no_eviction)) => text.push_str(&format!(
            "Cloudflare engine        {standard:>12.1} runs/s (standard scenario, it evicts)\n\
             Cloudflare engine        {no_eviction:>12.1} runs/s ({}, no eviction)\n",
            NO_EVICTION_SCENARIO.trim_end_matches(".yaml")
        )),
        _ => text.push_str(&format!(
            "Cloudflare engine        {:>12} ({})\n",
            "skipped",
            report.cloudflare_skipped.as_deref().unwrap_or("not measured")
        )),
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

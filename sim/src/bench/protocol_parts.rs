//! `bench --by-part` over the protocol: runs of the standard scenario
//! against an engine process, split on the harness's thread in real time
//! into the harness's own work (the world, the checks) and what the
//! exchanges with the engine cost: writing inputs, waiting for its output
//! (its own work and the pipe), and taking its lines (parsing each, serving
//! it to the world). Set beside the in-process table, it says whether a
//! slow run is the engine's or the harness's.

use serde::Serialize;
use turnsim_engine::RegressionSet;

use super::{wall_now, ROUND_TIME};
use crate::protocol::timing::{self, Split};
use crate::runner;
use crate::scenario::ScenarioFile;

/// Where a run over the protocol spends the harness's thread.
#[derive(Debug, Serialize)]
pub struct ProtocolCost {
    /// The engine's command.
    pub engine: String,
    pub scenario: String,
    pub runs: u64,
    /// Runs whose checks failed, or whose engine broke (a short run costs
    /// less: read the figures with them in mind).
    pub failed_runs: u64,
    /// Lines that went to the engine and were answered (an `inputs` batch
    /// is one), per run.
    pub exchanges_per_run: f64,
    /// Each part's microseconds of real time per run.
    pub parts: Vec<(String, f64)>,
}

impl ProtocolCost {
    pub fn run_us(&self) -> f64 {
        self.parts.iter().map(|(_, us)| us).sum()
    }
}

/// Times runs of `file` against the engine `command` starts, for about
/// [`ROUND_TIME`] after one run to start its process.
pub fn measure(command: &str, file: &ScenarioFile) -> ProtocolCost {
    crate::world::use_engine_command(Some(command.to_string()));
    let regressions = RegressionSet::default();
    let (runs, failed_runs, wall, split) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _ = runner::run_one(file, 0, &regressions);
                let started = wall_now();
                let ((runs, failed), split) = timing::timed(|| {
                    let (mut runs, mut failed) = (0u64, 0u64);
                    while runs == 0 || started.elapsed() < ROUND_TIME {
                        let (_, violations) = runner::run_one(file, runs, &regressions);
                        failed += u64::from(!violations.is_empty());
                        runs += 1;
                    }
                    (runs, failed)
                });
                (runs, failed, started.elapsed(), split)
            })
            .join()
            .expect("bench thread")
    });
    crate::world::use_engine_command(None);
    crate::protocol::proxy::stop_waiting_processes();
    let Split { writing, exchanging, waiting, exchanges } = split;
    let per_run = |spent: std::time::Duration| spent.as_secs_f64() * 1e6 / runs as f64;
    let own = wall.saturating_sub(writing + exchanging);
    let parts = vec![
        ("the world and the checks".to_string(), per_run(own)),
        ("writing inputs".to_string(), per_run(writing)),
        ("waiting for the engine".to_string(), per_run(waiting)),
        ("taking its lines".to_string(), per_run(exchanging.saturating_sub(waiting))),
    ];
    ProtocolCost {
        engine: command.to_string(),
        scenario: file.scenario.name.clone(),
        runs,
        failed_runs,
        exchanges_per_run: exchanges as f64 / runs as f64,
        parts,
    }
}

pub fn text(cost: &ProtocolCost) -> String {
    let total = cost.run_us();
    let mut text = format!(
        "over the protocol: {}, {}, {:.1} exchanges a run\n",
        cost.engine, cost.scenario, cost.exchanges_per_run
    );
    text.push_str(&format!("  {:<26} {:>10} {:>8}\n", "part", "per run", "share"));
    for (part, us) in &cost.parts {
        text.push_str(&format!("  {:<26} {:>7.1} us {:>7.1}%\n", part, us, 100.0 * us / total.max(f64::MIN_POSITIVE)));
    }
    text.push_str(&format!("  {:<26} {:>7.1} us   ({:.0} runs/s)\n", "all", total, 1e6 / total.max(f64::MIN_POSITIVE)));
    if cost.failed_runs > 0 {
        text.push_str(&format!("  {} of {} runs failed (a run cut short costs less)\n", cost.failed_runs, cost.runs));
    }
    text.push_str("(real time on the harness's thread; waiting holds the engine's own work and the pipe's latency)\n");
    text
}

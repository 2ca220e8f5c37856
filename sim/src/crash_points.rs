//! Crash-point enumeration: run a scenario once to count its durable writes,
//! then once per write with the engine evicted right after that write (and
//! restarted), so every write boundary of every turn is a crash point. The
//! no-lost-work invariant (and every other) is checked on each run.

use turnsim_engine::RegressionSet;

use crate::check::{check_run, Violation};
use crate::scenario::{EvictFault, Fault, RangeMs, ScenarioFile, Trigger, When};
use crate::trace::Event;
use crate::world;

/// How long the evicted engine stays down before it restarts.
const RESTART_AFTER_MS: u64 = 100;

pub struct CrashOutcome {
    /// The eviction lands right after this durable write (1-based).
    pub write: usize,
    pub violations: Vec<Violation>,
}

/// The scenario with an eviction right after its `write`-th store commit.
pub fn with_crash_after(file: &ScenarioFile, write: usize) -> ScenarioFile {
    let mut crashed = file.clone();
    let trigger = Trigger {
        tool: None,
        state: None,
        event: Some("store.commit".into()),
        nth: write as u32,
        delay_ms: RangeMs::ZERO,
    };
    let evict = EvictFault { when: When::Trigger(trigger), restart_after_ms: RangeMs::exact(RESTART_AFTER_MS) };
    crashed.scenario.faults.push(Fault::Evict(evict));
    crashed
}

pub fn sweep(file: &ScenarioFile, seed: u64) -> Vec<CrashOutcome> {
    let regressions = RegressionSet::default();
    let baseline = world::run(file, seed, &regressions);
    let writes = baseline.events.iter().filter(|traced| matches!(traced.event, Event::StoreCommit { .. })).count();
    (1..=writes)
        .map(|write| {
            let crashed = with_crash_after(file, write);
            let record = world::run(&crashed, seed, &regressions);
            CrashOutcome { write, violations: check_run(&crashed, &record) }
        })
        .collect()
}

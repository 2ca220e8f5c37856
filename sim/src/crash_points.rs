//! Crash-point enumeration: run a scenario once to count its durable writes,
//! then once per write with the engine evicted right after that write (and
//! restarted), so every write boundary of every turn is a crash point, each
//! distinct one counted once. Every
//! invariant (no-lost-work above all) is checked on each run; the scenario's
//! own expectations are not, since a crash changes the story they describe.

use turnsim_engine::RegressionSet;

use crate::check::{invariants, CheckInput, Violation};
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

/// One outcome per distinct crash point. The process can only die where
/// the engine awaits, so an eviction after any of several writes committed
/// in one synchronous step lands at the same point and replays the same
/// run: such duplicates are run but counted (and returned) once, under the
/// first write that reaches them.
pub fn sweep(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> Vec<CrashOutcome> {
    let baseline = world::run(file, seed, regressions);
    let writes = baseline.events.iter().filter(|traced| matches!(traced.event, Event::StoreCommit { .. })).count();
    let mut seen = std::collections::BTreeSet::new();
    let mut outcomes = Vec::new();
    for write in 1..=writes {
        let crashed = with_crash_after(file, write);
        let record = world::run(&crashed, seed, regressions);
        let timeline: Vec<String> = record.events.iter().map(|traced| traced.render()).collect();
        if !seen.insert(timeline) {
            continue;
        }
        // Invariants only: a crash legitimately changes the story the
        // scenario's expectations describe (a retry takes the next call).
        let input = CheckInput::new(&crashed, &record);
        outcomes.push(CrashOutcome { write, violations: invariants::check_all(&input) });
    }
    outcomes
}

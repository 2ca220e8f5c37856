//! Crash-point enumeration: run a scenario once to count its durable writes,
//! then once per write with the engine evicted right after that write (and
//! restarted; whole, or only its memory), so every write boundary of every
//! turn is a crash point, each distinct one counted once. Every
//! invariant (no-lost-work above all) is checked on each run; the scenario's
//! own expectations are not, since a crash changes the story they describe.

use turnsim_engine::RegressionSet;

use crate::check::{invariants, CheckInput, Violation};
use crate::history::Boundary;
use crate::scenario::{EvictFault, Fault, RangeMs, ScenarioFile, StoreFault, Trigger, When};
use crate::trace::Event;
use crate::world;

/// How long the evicted engine stays down before it restarts.
const RESTART_AFTER_MS: u64 = 100;

pub struct CrashOutcome {
    /// The eviction lands right after this durable write, or the store
    /// refuses this commit (1-based); 0 is the clean run, when the engine
    /// process broke in it.
    pub write: usize,
    pub violations: Vec<Violation>,
}

/// The scenario with an eviction right after its `write`-th store commit.
pub fn with_crash_after(file: &ScenarioFile, write: usize) -> ScenarioFile {
    with_crash_at(file, write, false, false)
}

/// The scenario with the process dying as its `write`-th commit returns:
/// nothing it would have done after that commit in the same step happens.
pub fn with_crash_at_commit(file: &ScenarioFile, write: usize) -> ScenarioFile {
    with_crash_at(file, write, true, false)
}

/// As [`with_crash_after`], a memory-only eviction: the clients'
/// connections outlive the process.
pub fn with_memory_loss_after(file: &ScenarioFile, write: usize) -> ScenarioFile {
    with_crash_at(file, write, false, true)
}

/// As [`with_crash_at_commit`], a memory-only eviction.
pub fn with_memory_loss_at_commit(file: &ScenarioFile, write: usize) -> ScenarioFile {
    with_crash_at(file, write, true, true)
}

fn with_crash_at(file: &ScenarioFile, write: usize, at_once: bool, memory_only: bool) -> ScenarioFile {
    let mut crashed = file.clone();
    let trigger = Trigger { event: Some("store.commit".into()), nth: write as u32, ..Trigger::default() };
    let restart_after_ms = RangeMs::exact(RESTART_AFTER_MS);
    let evict = EvictFault { when: When::Trigger(trigger), restart_after_ms, at_once, memory_only, optional: false };
    crashed.scenario.faults.push(Fault::Evict(evict));
    crashed
}

/// One outcome per distinct crash point. The process can only die where
/// the engine awaits, so an eviction after any of several writes committed
/// in one synchronous step lands at the same point and replays the same
/// run: such duplicates are run but counted (and returned) once, under the
/// first write that reaches them.
pub fn sweep(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> Vec<CrashOutcome> {
    sweep_writes(file, seed, regressions, traced_commits, with_crash_after)
}

/// The eviction's trigger counts traced commits (bookkeeping-only commits
/// are not traced): so do the sweeps that evict.
fn traced_commits(record: &world::RunRecord) -> usize {
    record.events.iter().filter(|traced| matches!(traced.event, Event::StoreCommit { .. })).count()
}

/// As [`sweep`], with the process dying as each commit returns rather than
/// at its next await: every commit boundary is a crash point, even one in
/// the middle of a synchronous step.
pub fn sweep_at_commit(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> Vec<CrashOutcome> {
    sweep_writes(file, seed, regressions, traced_commits, with_crash_at_commit)
}

/// As [`sweep`] and [`sweep_at_commit`] (`at_once`), each eviction
/// memory-only: a client sees no disconnect, and what it shows must come
/// out right across the kill.
pub fn sweep_memory_only(
    file: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    at_once: bool,
) -> Vec<CrashOutcome> {
    let fault_at = if at_once { with_memory_loss_at_commit } else { with_memory_loss_after };
    sweep_writes(file, seed, regressions, traced_commits, fault_at)
}

/// The scenario with its `commit`-th store commit refused (once).
pub fn with_refused_commit(file: &ScenarioFile, commit: usize) -> ScenarioFile {
    let mut refused = file.clone();
    let fault = StoreFault::numbered(commit as u32, 1, false);
    refused.scenario.faults.push(Fault::StoreError(fault));
    refused
}

/// One outcome per distinct refusal point: the store refuses each commit of
/// the clean run in turn, and the engine must lose nothing it acknowledged
/// and leave no consumer silent or showing what was not kept.
pub fn refusal_sweep(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> Vec<CrashOutcome> {
    // The store numbers every commit it is asked for.
    let attempted = |record: &world::RunRecord| {
        record.history.iter().filter(|crossing| matches!(crossing.what, Boundary::Commit { .. })).count()
    };
    sweep_writes(file, seed, regressions, attempted, with_refused_commit)
}

fn sweep_writes(
    file: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    count: impl Fn(&world::RunRecord) -> usize,
    fault_at: fn(&ScenarioFile, usize) -> ScenarioFile,
) -> Vec<CrashOutcome> {
    let baseline = world::run(file, seed, regressions);
    if let Some(fault) = crate::check::engine_fault(&baseline) {
        // No crash point can be told from a broken engine: the clean run fails.
        return vec![CrashOutcome { write: 0, violations: vec![fault] }];
    }
    let writes = count(&baseline);
    let mut seen = std::collections::BTreeSet::new();
    let mut outcomes = Vec::new();
    for write in 1..=writes {
        let crashed = fault_at(file, write);
        let record = world::run(&crashed, seed, regressions);
        let timeline: Vec<String> = record.events.iter().map(|traced| traced.render()).collect();
        if !seen.insert(timeline) {
            continue;
        }
        let violations = judge(file, &crashed, &record);
        outcomes.push(CrashOutcome { write, violations });
    }
    outcomes
}

/// One crash point's run, judged as the sweep judges it: what a failure
/// line of the sweep names, replayed on its own.
pub fn run_one(
    file: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    write: usize,
    fault_at: fn(&ScenarioFile, usize) -> ScenarioFile,
) -> (world::RunRecord, Vec<Violation>) {
    let crashed = fault_at(file, write);
    let record = world::run(&crashed, seed, regressions);
    let violations = judge(file, &crashed, &record);
    (record, violations)
}

/// Invariants only: a crash legitimately changes the story the scenario's
/// expectations describe (a retry takes the next call).
fn judge(file: &ScenarioFile, crashed: &ScenarioFile, record: &world::RunRecord) -> Vec<Violation> {
    if let Some(fault) = crate::check::engine_fault(record) {
        return vec![fault];
    }
    let input = CheckInput::new(crashed, record);
    let mut violations = invariants::check_all(&input);
    // A canary fails its named check on purpose, crash or no crash.
    let expected = file.scenario.expect.expect_failure.as_deref();
    violations.retain(|violation| Some(violation.check.as_ref()) != expected);
    violations
}

//! Crash-point enumeration: an eviction at every distinct durable-write
//! boundary of a turn loses nothing — and the sweep does catch the bug where continuation
//! intent lived only in memory.

use turnsim::crash_points::sweep;
use turnsim_engine::{Regression, RegressionSet};

use crate::common::{all_scenarios, scenario};

#[test]
fn an_eviction_after_any_durable_write_of_any_scenario_loses_nothing() {
    let mut crash_points = 0;
    for file in all_scenarios().iter().filter(|file| file.scenario.expect.expect_failure.is_none()) {
        for outcome in sweep(file, file.scenario.seed_start, &RegressionSet::default()) {
            crash_points += 1;
            let name = file.path.display();
            assert!(
                outcome.violations.is_empty(),
                "{name}: evicted after write {}: {:?}",
                outcome.write,
                outcome.violations
            );
        }
    }
    // Distinct crash points (a write committed in the same synchronous step
    // as the next one is not a point of its own): 445 at each file's first
    // seed when this was written.
    assert!(crash_points >= 420, "only {crash_points} distinct crash points across the suite");
}

#[test]
fn the_sweep_catches_continuation_intent_kept_only_in_memory() {
    let regressions = RegressionSet::of([Regression::VolatileContinuationIntent]);
    let outcomes = sweep(&scenario("continuation-single-client-tool"), 0, &regressions);
    let failing: Vec<usize> =
        outcomes.iter().filter(|outcome| !outcome.violations.is_empty()).map(|outcome| outcome.write).collect();
    assert!(!failing.is_empty(), "no crash point exposed the volatile continuation intent");
}

/// A process that dies as a commit returns does nothing more: between the
/// commit and the next boot, no effect of the dead process crosses the
/// boundary, though the same commit without `at_once` is followed by the
/// rest of its step (the post).
#[test]
fn a_crash_at_a_commit_fences_everything_the_dead_process_would_have_done() {
    use turnsim::crash_points::{with_crash_after, with_crash_at_commit};
    use turnsim::history::Boundary;
    let file = scenario("messenger-done");
    // The delivery's `completed` checkpoint: the post follows it in the same step.
    let checkpoint = 7;
    let effects_after_crash = |crashed: &turnsim::scenario::ScenarioFile| {
        let record = turnsim::world::run(crashed, 0, &RegressionSet::default());
        let crossings = &record.history.crossings;
        let killed = crossings.iter().position(|crossing| matches!(crossing.what, Boundary::Killed));
        let killed = killed.expect("the crash happened");
        let rebooted = crossings[killed..].iter().position(|crossing| matches!(crossing.what, Boundary::Boot { .. }));
        let dead = &crossings[killed..killed + rebooted.expect("the engine restarted")];
        let last_commit =
            crossings[..killed].iter().rev().find(|crossing| matches!(crossing.what, Boundary::Commit { .. }));
        let posts_before =
            crossings[..killed].iter().filter(|crossing| matches!(crossing.what, Boundary::Post { .. })).count();
        (dead.iter().filter(|crossing| !crossing.what.is_input()).count(), last_commit.is_some(), posts_before)
    };
    let (dead_effects, committed, posts) = effects_after_crash(&with_crash_at_commit(&file, checkpoint));
    assert_eq!(dead_effects, 0, "the dead process had effects");
    assert!(committed, "the commit it died after landed");
    assert_eq!(posts, 0, "the post after the checkpoint must not happen when the process died at it");
    let (_, _, posts) = effects_after_crash(&with_crash_after(&file, checkpoint));
    assert_eq!(posts, 1, "dying at the next await, the step (and its post) completes");
}

/// A memory-only crash point keeps the client's connection through the
/// kill: the history marks it kept open, the client never disconnects, and
/// the new process is handed the same connection.
#[test]
fn a_memory_only_crash_point_keeps_the_connection() {
    use turnsim::crash_points::{with_crash_after, with_memory_loss_after};
    use turnsim::history::Boundary;
    let file = scenario("continuation-single-client-tool");
    let connections = |crashed: &turnsim::scenario::ScenarioFile| {
        let record = turnsim::world::run(crashed, 0, &RegressionSet::default());
        let crossings = &record.history.crossings;
        let kept = crossings.iter().any(|crossing| matches!(crossing.what, Boundary::KeptOpen { .. }));
        let opened: std::collections::BTreeSet<u64> = crossings
            .iter()
            .filter_map(|crossing| match crossing.what {
                Boundary::Connect { connection } => Some(connection),
                _ => None,
            })
            .collect();
        (kept, opened.len())
    };
    assert_eq!(connections(&with_memory_loss_after(&file, 2)), (true, 1), "one connection, kept through the kill");
    let (kept, opened) = connections(&with_crash_after(&file, 2));
    assert!(!kept && opened > 1, "a whole-process eviction closes the connection and the client reconnects");
}

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

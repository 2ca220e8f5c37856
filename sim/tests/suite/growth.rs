//! The growth guard: cost per traced event stays flat as a session grows
//! (a chain of tool steps, a wide batch), judged with the real checks; and
//! the guard fails on a check that is quadratic in the history. A ratio of
//! CPU times measured in this one process, so the machine's speed and its
//! other load cancel out.

use std::time::Duration;

use turnsim::bench::growth::{guard, GrowthPlan, GROWTH_LIMIT};
use turnsim::bench::instructions::quadratic_check;
use turnsim::check::check_run;

const PLAN: GrowthPlan = GrowthPlan { rounds: 3, round_time: Duration::from_millis(300) };

/// Measurements a flat check gets before it fails: a busy machine can lift
/// one past the limit (seen: 0.9 to 1.6 on a flat check), while a check
/// quadratic in the history reads 3 to 7 every time.
const ATTEMPTS: usize = 3;

#[test]
fn cost_per_event_stays_flat_as_a_session_grows() {
    // The checks every run gets, on both shapes.
    let mut failures = Vec::new();
    for _ in 0..ATTEMPTS {
        match guard(check_run, PLAN) {
            Ok(growth) => {
                eprintln!("growth with the checks every run gets: {growth:?}");
                assert!(growth.step <= GROWTH_LIMIT && growth.batch <= GROWTH_LIMIT, "{growth:?}");
                return;
            }
            Err(failure) => failures.push(failure),
        }
    }
    panic!("every measurement grew past the limit: {failures:#?}");
}

#[test]
fn the_guard_fails_on_a_check_quadratic_in_the_history() {
    let failure = guard(quadratic_check, PLAN).expect_err("a quadratic check must fail the growth guard");
    eprintln!("{failure}");
    assert!(failure.contains("step_growth") && failure.contains("batch_growth"), "{failure}");
}

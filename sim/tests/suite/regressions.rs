//! Every historical bug is caught by the committed suite: each regression is
//! named in the `Guards:` line of at least one scenario, and every scenario
//! that names it fails with the regression on and passes with it off.

use std::collections::BTreeMap;

use turnsim::runner::run_one;
use turnsim::scenario::ScenarioFile;
use turnsim_engine::{Regression, RegressionSet, ALL_REGRESSIONS};

use crate::common::all_scenarios;

const SEEDS: u64 = 16;

/// Regressions named in a scenario's header comment (`# Guards: a, b (why)`).
fn guarded_by(file: &ScenarioFile) -> Vec<Regression> {
    let text = std::fs::read_to_string(&file.path).expect("scenario readable");
    let header = text.lines().take_while(|line| line.starts_with('#')).collect::<Vec<_>>().join(" ");
    let Some((_, guards)) = header.split_once("Guards:") else { return Vec::new() };
    ALL_REGRESSIONS.into_iter().filter(|regression| guards.contains(regression.name())).collect()
}

fn fails_on_some_seed(file: &ScenarioFile, regressions: &RegressionSet) -> bool {
    (0..SEEDS).any(|seed| !run_one(file, seed, regressions).1.is_empty())
}

#[test]
fn every_regression_is_guarded_by_a_committed_scenario_that_catches_it() {
    let mut guards: BTreeMap<Regression, Vec<ScenarioFile>> = BTreeMap::new();
    for file in all_scenarios() {
        for regression in guarded_by(&file) {
            guards.entry(regression).or_default().push(file.clone());
        }
    }
    for regression in ALL_REGRESSIONS {
        let files =
            guards.get(&regression).unwrap_or_else(|| panic!("no scenario's `Guards:` line names {regression}"));
        for file in files {
            let on = RegressionSet::of([regression]);
            assert!(fails_on_some_seed(file, &on), "{} names {regression} but passes with it on", file.path.display());
            assert!(
                !fails_on_some_seed(file, &RegressionSet::default()),
                "{} fails even without {regression}",
                file.path.display()
            );
        }
    }
}

/// The invariants that name each historical bug: the suite must catch it
/// through one of them (not only through a scenario's own expectations).
fn caught_by(regression: Regression) -> &'static [&'static str] {
    match regression {
        Regression::BarrierFixedTimeout => &["parked-tool-kept"],
        Regression::NoStreamActiveGate
        | Regression::AccumulatorScanBarrier
        | Regression::NoFinalizeRecheck
        | Regression::StallRearmsCoalesceTimer
        | Regression::NoErroredSiblingRearm
        | Regression::VolatileContinuationIntent => &["single-continuation"],
        // The caller sees no terminal callback; a messenger on top of it
        // posts the partial as the answer.
        Regression::SilentInterrupt => &["callback-contract", "messenger-once"],
        Regression::ContinueMidToolInput => &["mid-tool-input-recovers"],
        Regression::AcceptEmptyFinish => &["no-empty-answer"],
        Regression::KeepFailedAttemptParts => &["transcript-shape"],
    }
}

#[test]
fn every_guard_scenario_catches_its_regression_through_the_invariant_named_for_it() {
    // Each (regression, guard scenario) pair on its own: a scenario that
    // only notices a regression through its own expectations (a timing, a
    // count) does not guard it.
    for file in all_scenarios() {
        for regression in guarded_by(&file) {
            let invariants = caught_by(regression);
            let on = RegressionSet::of([regression]);
            let caught = (0..SEEDS).any(|seed| {
                run_one(&file, seed, &on).1.iter().any(|violation| invariants.contains(&violation.check.as_str()))
            });
            assert!(caught, "{} guards {regression} but fails none of {invariants:?} with it on", file.path.display());
        }
    }
}

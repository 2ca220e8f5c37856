//! Proof of detection power: blind exploration, told nothing about which
//! regression is on, finds each historical bug within a fixed case budget,
//! shrinks it, and writes a YAML scenario that fails with the regression and
//! passes without it. And with no regression it finds nothing.

use turnsim::explore::{explore, write_finding, ExploreOptions};
use turnsim::runner::run_one;
use turnsim::scenario::load_scenario;
use turnsim_engine::{RegressionSet, ALL_REGRESSIONS};

/// Cases each regression must be found within: the CLI's default. (With
/// later user messages in the swarm, `volatile-continuation-intent` is
/// found at case 1276 of sweep seed 1.)
const CASE_BUDGET: usize = 2000;
const SWEEP_SEED: u64 = 1;

fn options(regressions: RegressionSet, cases: usize) -> ExploreOptions {
    ExploreOptions { cases, seed: SWEEP_SEED, jobs: 2, regressions, max_shrink_iters: 300, store_faults: false }
}

#[test]
fn every_regression_is_found_blind_and_its_shrunk_scenario_reproduces_it() {
    let out = std::env::temp_dir().join(format!("turnsim-explore-{}", std::process::id()));
    for regression in ALL_REGRESSIONS {
        let with = RegressionSet::of([regression]);
        let finding = explore(&options(with.clone(), CASE_BUDGET), &|_| {})
            .unwrap_or_else(|| panic!("{regression}: not found within {CASE_BUDGET} cases"));
        let path = write_finding(&out, &finding).expect("write the finding");
        let file =
            load_scenario(&path).unwrap_or_else(|error| panic!("{regression}: written YAML does not load: {error}"));
        let seeds = file.scenario.seed_start..file.scenario.seed_start + file.scenario.seeds;
        let fails_with = seeds.clone().any(|seed| !run_one(&file, seed, &with).1.is_empty());
        assert!(fails_with, "{regression}: the written scenario {} passes with the regression on", path.display());
        for seed in seeds {
            let violations = run_one(&file, seed, &RegressionSet::default()).1;
            assert!(
                violations.is_empty(),
                "{regression}: {} fails without the regression on seed {seed}: {violations:?}",
                path.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_correct_engine_survives_blind_exploration() {
    let finding = explore(&options(RegressionSet::default(), 1500), &|_| {});
    assert!(
        finding.is_none(),
        "exploration found a failure in the correct engine: {:?}",
        finding.map(|finding| finding.yaml)
    );
}

#[test]
fn exploration_is_deterministic_for_a_seed_at_any_jobs() {
    let regressions = RegressionSet::of([turnsim_engine::Regression::NoFinalizeRecheck]);
    let one =
        explore(&ExploreOptions { jobs: 1, ..options(regressions.clone(), CASE_BUDGET) }, &|_| {}).expect("found");
    let two = explore(&ExploreOptions { jobs: 2, ..options(regressions, CASE_BUDGET) }, &|_| {}).expect("found");
    assert_eq!(
        (one.case_index, &one.yaml),
        (two.case_index, &two.yaml),
        "the same sweep found different failures at --jobs 1 and 2"
    );
}

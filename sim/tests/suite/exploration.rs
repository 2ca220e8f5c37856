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

/// A run leaves nothing of itself alive. A fault waiting for a moment that
/// never came (here an eviction at a tool state no call reaches) kept its
/// task and the run's trace holding each other, so every such run leaked
/// its world; `explore` generates them by the thousand and grew without
/// bound. The count is of this thread's traces, so tests running beside
/// this one do not move it.
#[test]
fn a_run_whose_fault_never_fires_leaves_nothing_alive() {
    let yaml = "name: fault-never-fires
seeds: 1
engine:
  tools:
    lookup: { kind: client }
model:
  - [ { tool: { id: tc-0, name: lookup } }, { finish: { reason: tool-calls } } ]
  - [ { text: \"Done.\" }, { finish: { reason: stop } } ]
client:
  tools:
    lookup: { answer_after_ms: [10, 20], error: \"not found\", auto_continue: true }
actions:
  - at_ms: 0
    user_message: { text: \"go\" }
faults:
  - evict:
      when: { tool: tc-0, state: output-available }
      restart_after_ms: 100
      optional: true
";
    let file = turnsim::scenario::parse_scenario(std::path::Path::new("fault-never-fires.yaml"), yaml)
        .expect("the scenario parses");
    let before = turnsim::trace::live_traces_made_here();
    for seed in 0..3 {
        let (record, violations) = run_one(&file, seed, &RegressionSet::default());
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        assert!(record.fired_faults.is_empty(), "seed {seed}: the fault must never fire: {:?}", record.fired_faults);
    }
    assert_eq!(turnsim::trace::live_traces_made_here(), before, "a finished run's trace is still alive");
}

//! Invariant 11: the same seed gives a byte-identical trace — on the same
//! thread, on a fresh thread, and on two threads at once — while different
//! seeds give different traces.

use std::collections::BTreeSet;

use turnsim::trace::render_timeline;
use turnsim::world;
use turnsim_engine::RegressionSet;

use crate::common::{all_scenarios, scenario};

fn timeline(file: &turnsim::scenario::ScenarioFile, seed: u64) -> String {
    render_timeline(&world::run(file, seed, &RegressionSet::default()).events)
}

#[test]
fn same_seed_same_trace_on_the_same_thread() {
    for file in all_scenarios() {
        for seed in [0, 7, 123_456] {
            let (first, second) = (timeline(&file, seed), timeline(&file, seed));
            assert_eq!(first, second, "{} seed {seed}: a second run on the same thread diverged", file.path.display());
        }
    }
}

#[test]
fn same_seed_same_trace_on_a_fresh_thread_and_two_threads_at_once() {
    let file = scenario("barrier-late-sibling");
    let reference = timeline(&file, 42);
    let fresh = std::thread::scope(|scope| scope.spawn(|| timeline(&file, 42)).join().expect("thread"));
    assert_eq!(reference, fresh, "a run on a fresh thread diverged");
    let (left, right) = std::thread::scope(|scope| {
        let left = scope.spawn(|| timeline(&file, 42));
        let right = scope.spawn(|| timeline(&file, 42));
        (left.join().expect("thread"), right.join().expect("thread"))
    });
    assert_eq!(reference, left, "a run on one of two concurrent threads diverged");
    assert_eq!(reference, right, "a run on one of two concurrent threads diverged");
}

#[test]
fn json_trace_is_identical_too() {
    let file = scenario("eviction-between-result-and-continuation");
    let json = |seed| serde_json::to_string(&world::run(&file, seed, &RegressionSet::default()).events).expect("json");
    assert_eq!(json(5), json(5));
}

#[test]
fn different_seeds_give_varied_traces() {
    let file = scenario("barrier-late-sibling");
    let distinct: BTreeSet<String> = (0..200).map(|seed| timeline(&file, seed)).collect();
    assert!(
        distinct.len() >= 100,
        "200 seeds gave only {} distinct traces: the seed barely reaches the world",
        distinct.len()
    );
}

#[test]
fn a_sweep_reports_the_same_runs_at_any_jobs() {
    use turnsim::runner::{execute, Plan};
    let plan = |jobs| Plan {
        files: all_scenarios(),
        seeds: Some(8),
        seed_start: Some(500),
        jobs,
        shard: None,
        repeat: 1,
        regressions: RegressionSet::of([turnsim_engine::Regression::NoStreamActiveGate]),
    };
    let summary = |jobs| {
        let outcomes = execute(&plan(jobs), &|_, _| {});
        outcomes
            .iter()
            .map(|outcome| {
                format!(
                    "{} {} {:?} {:?} {}",
                    outcome.scenario, outcome.seed, outcome.end, outcome.violations, outcome.sim_ms
                )
            })
            .collect::<Vec<_>>()
    };
    let one = summary(1);
    assert!(one.iter().any(|line| line.contains("Violation")), "the sweep should include failures to compare");
    assert_eq!(one, summary(2), "--jobs 2 reported different runs than --jobs 1");
    assert_eq!(one, summary(3), "--jobs 3 reported different runs than --jobs 1");
}

#[test]
fn shards_cover_the_work_exactly_once() {
    use turnsim::runner::{Plan, Shard};
    let plan = |shard| Plan {
        files: all_scenarios(),
        seeds: Some(5),
        seed_start: None,
        jobs: 1,
        shard,
        repeat: 1,
        regressions: RegressionSet::default(),
    };
    let mut covered: Vec<(usize, u64)> =
        (1..=3).flat_map(|index| plan(Some(Shard { index, count: 3 })).work().collect::<Vec<_>>()).collect();
    covered.sort();
    let mut all: Vec<_> = plan(None).work().collect();
    all.sort();
    assert_eq!(covered, all, "three shards must cover every (scenario, seed) once");
    for index in 1..=3 {
        let shard = plan(Some(Shard { index, count: 3 }));
        assert_eq!(shard.runs(), shard.work().count() as u64, "the run count of shard {index}/3 matches its work");
    }
}

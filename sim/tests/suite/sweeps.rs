//! How a sweep plans its work (shards, repeats) and what it keeps of the
//! runs.

mod runner {
    use turnsim::coverage::Coverage;
    use turnsim::runner::*;
    use turnsim_engine::RegressionSet;

    fn plan(seeds: &[u64], shard: Option<Shard>) -> Plan {
        let files = seeds
            .iter()
            .enumerate()
            .map(|(index, seeds)| {
                let yaml = format!("name: s{index}\nseeds: {seeds}\nseed_start: {}\n", index * 100);
                turnsim::scenario::parse_scenario(std::path::Path::new("s.yaml"), &yaml).expect("parses")
            })
            .collect();
        Plan { files, seeds: None, seed_start: None, jobs: 1, shard, repeat: 1, regressions: RegressionSet::default() }
    }

    #[test]
    fn work_items_are_the_listed_work_at_every_shard() {
        for count in 1..=4 {
            for index in 1..=count {
                let plan = plan(&[3, 0, 5, 1], Some(Shard { index, count }));
                let listed: Vec<(usize, u64)> = plan.work().collect();
                assert_eq!(plan.runs(), listed.len() as u64, "shard {index}/{count}");
                let items: Vec<(usize, u64)> =
                    (0..listed.len() as u64).map(|at| plan.work_item(at).expect("item")).collect();
                assert_eq!(items, listed, "shard {index}/{count}");
                assert_eq!(plan.work_item(listed.len() as u64), None, "shard {index}/{count}");
            }
        }
        let unsharded = plan(&[2, 3], None);
        assert_eq!(unsharded.work().collect::<Vec<_>>(), vec![(0, 0), (0, 1), (1, 100), (1, 101), (1, 102)]);
        assert_eq!(unsharded.runs(), 5);
    }

    #[test]
    fn repeats_run_each_seed_again_in_a_row_at_every_shard() {
        for count in 1..=3 {
            for index in 1..=count {
                let mut plan = plan(&[3, 2], Some(Shard { index, count }));
                let once: Vec<(usize, u64)> = plan.work().collect();
                plan.repeat = 3;
                let thrice: Vec<(usize, u64)> = plan.work().collect();
                let expected: Vec<(usize, u64)> = once.iter().flat_map(|work| [*work; 3]).collect();
                assert_eq!(thrice, expected, "shard {index}/{count}");
                assert_eq!(plan.runs(), thrice.len() as u64, "shard {index}/{count}");
                let runs: Vec<(usize, u64, u64)> = (0..plan.runs()).map(|at| plan.work_run(at).expect("run")).collect();
                let numbered: Vec<u64> = runs.iter().map(|(_, _, repeat)| *repeat).collect();
                assert!(numbered.chunks(3).all(|chunk| chunk == [1, 2, 3]), "shard {index}/{count}: {numbered:?}");
                assert_eq!(plan.work_run(plan.runs()), None, "shard {index}/{count}");
            }
        }
    }

    #[test]
    fn a_sweep_keeps_counts_coverage_and_every_failure_in_work_order() {
        let mut plan = plan(&[], None);
        plan.files = turnsim::scenario::load_paths(&[
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/bench-standard-story.yaml"),
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/barrier-late-sibling.yaml"),
        ])
        .expect("scenarios load");
        plan.seeds = Some(6);
        plan.jobs = 2;
        plan.regressions = RegressionSet::of([turnsim_engine::Regression::NoStreamActiveGate]);
        let outcomes = execute(&plan, &|_, _| {});
        let results = sweep(&plan, &|_, _| {});
        assert_eq!(results.runs, vec![6, 6]);
        let failing: Vec<(usize, u64)> = outcomes
            .iter()
            .filter(|outcome| !outcome.passed())
            .map(|outcome| (outcome.scenario, outcome.seed))
            .collect();
        assert!(!failing.is_empty(), "the regression should fail some runs");
        let kept: Vec<(usize, u64)> = results.failures.iter().map(|outcome| (outcome.scenario, outcome.seed)).collect();
        assert_eq!(kept, failing);
        let mut coverage = Coverage::default();
        outcomes.iter().for_each(|outcome| coverage.merge(&outcome.coverage));
        assert_eq!(results.coverage, coverage);
    }
}

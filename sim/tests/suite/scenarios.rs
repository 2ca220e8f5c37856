//! The committed scenario suite passes on a sweep of seeds (the CLI runs the
//! full sweep in CI; this keeps `cargo test` honest on its own).

use turnsim::runner::run_one;
use turnsim_engine::RegressionSet;

use crate::common::all_scenarios;

#[test]
fn every_committed_scenario_passes_on_sixteen_seeds() {
    let mut failures = Vec::new();
    for file in all_scenarios() {
        for seed in 0..16 {
            let (_, violations) = run_one(&file, seed, &RegressionSet::default());
            if !violations.is_empty() {
                failures.push(format!("{} seed {seed}: {violations:?}", file.path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "scenarios failed:\n{}", failures.join("\n"));
}

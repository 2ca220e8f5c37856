//! Scenarios from a Rust crate's own tests: `turnsim::assert_scenarios`
//! runs YAML scenarios with every invariant and panics with the same report
//! `turnsim run` prints (the failing seed, the check, the events before it
//! and the replay command).
//!
//! ```no_run
//! #[test]
//! fn scenarios_pass() {
//!     turnsim::assert_scenarios("scenarios/");
//! }
//! ```

use std::path::Path;

use turnsim_engine::RegressionSet;

use crate::report;
use crate::runner::{self, Plan};
use crate::scenario::{load_paths, ScenarioError};

/// Runs every scenario under `path` (a file or a directory of them) over
/// its own `seeds`, and panics with a readable report if anything fails
/// or if there is nothing to run.
pub fn assert_scenarios(path: impl AsRef<Path>) {
    if let Err(report) = check_scenarios(path.as_ref(), None) {
        panic!("{report}");
    }
}

/// [`assert_scenarios`] without the panic: `Ok(runs)` when every run
/// passed; otherwise the report. `seeds` overrides each file's own count.
pub fn check_scenarios(path: &Path, seeds: Option<u64>) -> Result<u64, String> {
    let files = load_paths(&[path.to_path_buf()]).map_err(|error: ScenarioError| format!("error: {error}"))?;
    if files.is_empty() {
        return Err(format!("no scenario files (*.yaml, *.yml) in {}", path.display()));
    }
    let plan =
        Plan { files, seeds, seed_start: None, jobs: 1, shard: None, repeat: 1, regressions: RegressionSet::default() };
    if plan.runs() == 0 {
        return Err(format!("nothing to run in {}: 0 seeds", path.display()));
    }
    let results = runner::sweep(&plan, &|_, _| {});
    let summary = report::summarise(&plan.files, &results, &plan.regressions);
    if summary.failed == 0 {
        return Ok(summary.runs as u64);
    }
    Err(format!(
        "{}{}{} of {} failed",
        report::text(&plan.files, &results, &plan.regressions),
        report::failing_list(&plan.files, &results, &plan.regressions),
        summary.failed,
        report::plural(summary.runs as u64, "run")
    ))
}

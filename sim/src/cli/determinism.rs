//! `turnsim check-determinism`: each seed run twice, the first event where
//! the two traces differ reported.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{jobs_flag, load_applicable, usage_error};
use crate::applicable::Split;
use crate::outln;
use crate::protocol::fault::EngineFault;
use crate::scenario::{ScenarioError, ScenarioFile};

/// Checks every (scenario, seed) pair, `jobs` at a time; the report lists
/// them in file and seed order whatever `jobs` is.
pub fn check_determinism(paths: &[PathBuf], seeds: u64, jobs: Option<usize>) -> Result<ExitCode, ScenarioError> {
    if seeds == 0 {
        return Err(usage_error("nothing to check: --seeds 0"));
    }
    let jobs = jobs_flag(jobs)?;
    let Split { applicable: files, not_applicable } = load_applicable(paths)?;
    let work: Vec<(&ScenarioFile, u64)> =
        files.iter().flat_map(|file| (0..seeds).map(move |seed| (file, seed))).collect();
    let mut diverged = 0;
    for ((file, seed), report) in work.iter().zip(divergences(&work, jobs)) {
        if let Some(report) = report {
            let verdict = if report.starts_with(EngineFault::CHECK) { "FAIL" } else { "DIVERGED" };
            outln!("{verdict} {} seed {seed}: {report}", file.path.display());
            diverged += 1;
        }
    }
    crate::output::emit(&crate::report::not_applicable_lines(&not_applicable));
    let passed = files.len() as u64 * seeds - diverged;
    outln!("determinism: {passed} passed, {diverged} failed{}", not_applicable_note(not_applicable.len()));
    Ok(if diverged == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Each pair's first divergence, in the order of `work`. Nothing stops
/// the pool short: a pair left unchecked must not read as passed.
fn divergences(work: &[(&ScenarioFile, u64)], jobs: usize) -> Vec<Option<String>> {
    crate::pool::all_in_order(work, jobs, |&(file, seed)| crate::determinism::first_divergence(file, seed))
}

/// `; 2 scenarios not applicable`, or nothing when every scenario ran.
pub(super) fn not_applicable_note(count: usize) -> String {
    match count {
        0 => String::new(),
        count => format!("; {} not applicable", crate::report::plural(count as u64, "scenario")),
    }
}

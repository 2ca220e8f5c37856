//! `turnsim check-determinism`: each seed run twice, the first event where
//! the two traces differ reported.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{load_applicable, usage_error};
use crate::applicable::Split;
use crate::outln;
use crate::protocol::fault::EngineFault;
use crate::scenario::ScenarioError;

pub fn check_determinism(paths: &[PathBuf], seeds: u64) -> Result<ExitCode, ScenarioError> {
    if seeds == 0 {
        return Err(usage_error("nothing to check: --seeds 0"));
    }
    let Split { applicable: files, not_applicable } = load_applicable(paths)?;
    let mut diverged = 0;
    for file in &files {
        for seed in 0..seeds {
            if let Some(report) = crate::determinism::first_divergence(file, seed) {
                let verdict = if report.starts_with(EngineFault::CHECK) { "FAIL" } else { "DIVERGED" };
                outln!("{verdict} {} seed {seed}: {report}", file.path.display());
                diverged += 1;
            }
        }
    }
    crate::output::emit(&crate::report::not_applicable_lines(&not_applicable));
    let passed = files.len() as u64 * seeds - diverged;
    outln!("determinism: {passed} passed, {diverged} failed{}", not_applicable_note(not_applicable.len()));
    Ok(if diverged == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `; 2 scenarios not applicable`, or nothing when every scenario ran.
pub(super) fn not_applicable_note(count: usize) -> String {
    match count {
        0 => String::new(),
        count => format!("; {} not applicable", crate::report::plural(count as u64, "scenario")),
    }
}

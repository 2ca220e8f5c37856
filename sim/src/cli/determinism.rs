//! `turnsim check-determinism`: each seed run twice, the first event where
//! the two traces differ reported.

use std::path::PathBuf;
use std::process::ExitCode;

use super::flags::{load_some, usage_error};
use crate::outln;
use crate::protocol::fault::EngineFault;
use crate::scenario::ScenarioError;

pub fn check_determinism(paths: &[PathBuf], seeds: u64) -> Result<ExitCode, ScenarioError> {
    if seeds == 0 {
        return Err(usage_error("nothing to check: --seeds 0"));
    }
    let files = load_some(paths)?;
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
    outln!("determinism: {} passed, {diverged} failed", files.len() as u64 * seeds - diverged);
    Ok(if diverged == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

//! `turnsim explore`: random scenarios run until one fails, that failure
//! shrunk and written as a YAML scenario with its replay command.

use std::process::ExitCode;

use turnsim_engine::{Regression, RegressionSet};

use super::flags::{jobs_flag, usage_error};
use super::interrupted_exit;
use super::progress::Progress;
use crate::runner;
use crate::scenario::ScenarioError;
use crate::{errln, outln, output};

/// `turnsim explore`'s flags.
pub struct ExploreFlags {
    pub cases: usize,
    pub seed: u64,
    pub jobs: Option<usize>,
    pub regressions: Vec<Regression>,
    pub max_shrink_iters: usize,
    pub store_faults: bool,
}

pub fn explore_command(flags: ExploreFlags, out: &std::path::Path) -> Result<ExitCode, ScenarioError> {
    if flags.cases == 0 {
        return Err(usage_error("nothing to explore: --cases 0"));
    }
    let options = crate::explore::ExploreOptions {
        cases: flags.cases,
        seed: flags.seed,
        jobs: jobs_flag(flags.jobs)?,
        regressions: RegressionSet::of(flags.regressions),
        max_shrink_iters: flags.max_shrink_iters,
        store_faults: flags.store_faults,
    };
    explore(&options, out)
}

fn explore(options: &crate::explore::ExploreOptions, out: &std::path::Path) -> Result<ExitCode, ScenarioError> {
    let names: Vec<&str> = options.regressions.iter().map(Regression::name).collect();
    errln!(
        "turnsim explore: seed {}, up to {} cases, {} jobs, regressions: {}",
        options.seed,
        options.cases,
        options.jobs,
        if names.is_empty() { "none".to_string() } else { names.join(" ") }
    );
    let started = crate::bench::wall_now();
    let progress = Progress::new(options.cases as u64, "cases");
    let (finding, coverage) = crate::explore::explore_with_coverage(options, &|_| progress.step());
    progress.finish();
    output::emit(&format!("fault coverage (turn phase x fault kind):\n{}\n", coverage.render()));
    let Some(finding) = finding else {
        if runner::interrupted() {
            outln!("explore: interrupted, no failure in the cases run");
            return Ok(interrupted_exit());
        }
        outln!("explore: {} cases, no failure", options.cases);
        return Ok(ExitCode::SUCCESS);
    };
    // The finding is printed before anything is written, so a failed write loses nothing.
    outln!(
        "FAIL case {} after {:.1}s: {}: {}",
        finding.case_index,
        started.elapsed().as_secs_f64(),
        finding.check,
        finding.message
    );
    outln!(
        "  shrunk in {} runs to {} tools and {} faults (sim seed {})",
        finding.shrink_steps,
        finding.shrunk.tools.len(),
        finding.shrunk.faults.len(),
        finding.shrunk.sim_seed
    );
    match crate::explore::write_finding(out, &finding) {
        Ok(path) => {
            outln!("  written: {}", path.display());
            let mut replay = format!(
                "cargo run --release -p turnsim -- replay {} --seed {}",
                path.display(),
                finding.shrunk.sim_seed
            );
            for name in &names {
                replay.push_str(&format!(" --regression {name}"));
            }
            replay.push_str(&crate::world::engine_flag());
            outln!("  replay: {replay}");
        }
        Err(error) => {
            errln!("error: cannot write the shrunk scenario under {}: {error}", out.display());
            output::emit(&format!("  the shrunk scenario:\n{}", finding.yaml));
        }
    }
    Ok(ExitCode::FAILURE)
}

//! `turnsim crash-points`: one run per durable write boundary of each
//! scenario, the engine evicted (or the commit refused) there, every
//! invariant checked; or one such crash point's whole timeline.

use std::path::PathBuf;
use std::process::ExitCode;

use turnsim_engine::RegressionSet;

use super::flags::{load_applicable, usage_error};
use super::replay::print_replay;
use crate::applicable::Split;
use crate::outln;
use crate::runner;
use crate::scenario::{load_scenario, ScenarioError, ScenarioFile};

/// Which crash-point sweep to run.
pub struct Sweep {
    pub store_errors: bool,
    pub at_commit: bool,
    pub memory_only: bool,
    pub regressions: RegressionSet,
}

impl Sweep {
    /// How a failure line names the crash point.
    fn what(&self) -> &'static str {
        match (self.store_errors, self.at_commit, self.memory_only) {
            (true, ..) => "the store refused commit",
            (false, true, false) => "died as it returned from commit",
            (false, false, false) => "evicted after write",
            (false, true, true) => "lost its memory as it returned from commit",
            (false, false, true) => "lost its memory after write",
        }
    }

    /// The scenario with the fault of crash point `write` added.
    fn fault_at(&self) -> fn(&ScenarioFile, usize) -> ScenarioFile {
        use crate::crash_points::*;
        match (self.store_errors, self.at_commit, self.memory_only) {
            (true, ..) => with_refused_commit,
            (false, true, true) => with_memory_loss_at_commit,
            (false, false, true) => with_memory_loss_after,
            (false, true, false) => with_crash_at_commit,
            (false, false, false) => with_crash_after,
        }
    }

    /// The command that replays crash point `write` of `file`.
    fn replay_command(&self, file: &ScenarioFile, seed: u64, write: usize) -> String {
        let flags = [
            (self.store_errors, " --store-errors"),
            (self.at_commit, " --at-commit"),
            (self.memory_only, " --memory-only"),
        ];
        let flags: String = flags.iter().filter(|(on, _)| *on).map(|(_, flag)| *flag).collect();
        let path = file.path.display();
        let mut command =
            format!("cargo run --release -p turnsim -- crash-points {path} --seed {seed}{flags} --replay {write}");
        for regression in self.regressions.iter() {
            command.push_str(&format!(" --regression {regression}"));
        }
        command.push_str(&crate::world::engine_flag());
        command
    }
}

pub fn crash_points(paths: &[PathBuf], seed: u64, mode: Sweep) -> Result<ExitCode, ScenarioError> {
    use crate::crash_points::{refusal_sweep, sweep, sweep_at_commit, sweep_memory_only, CrashOutcome};
    let Split { applicable: files, not_applicable } = load_applicable(paths)?;
    let what = mode.what();
    let run_sweep = |file: &ScenarioFile| -> Vec<CrashOutcome> {
        let regressions = &mode.regressions;
        match (mode.store_errors, mode.at_commit, mode.memory_only) {
            (true, ..) => refusal_sweep(file, seed, regressions),
            (false, at_once, true) => sweep_memory_only(file, seed, regressions, at_once),
            (false, true, false) => sweep_at_commit(file, seed, regressions),
            (false, false, false) => sweep(file, seed, regressions),
        }
    };
    let mut failed = 0;
    let mut runs = 0;
    for file in &files {
        for outcome in run_sweep(file) {
            runs += 1;
            if !outcome.violations.is_empty() {
                failed += 1;
                if outcome.write == 0 {
                    outln!("FAIL {} seed {seed}, the run without a crash point:", file.path.display());
                } else {
                    outln!("FAIL {} seed {seed} {what} {}:", file.path.display(), outcome.write);
                }
                for violation in &outcome.violations {
                    outln!("    {}: {}", violation.check, violation.message);
                }
                let replay = match outcome.write {
                    0 => runner::replay_command(file, seed, &mode.regressions),
                    write => mode.replay_command(file, seed, write),
                };
                outln!("    replay: {replay}");
            }
        }
    }
    if runs == 0 {
        return Err(usage_error("no crash points: the scenarios made no durable writes"));
    }
    crate::output::emit(&crate::report::not_applicable_lines(&not_applicable));
    let not_applicable = super::determinism::not_applicable_note(not_applicable.len());
    outln!("crash-points: {} passed, {failed} failed{not_applicable}", runs - failed);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One crash point's whole timeline, as `replay` prints a seed's.
pub fn replay_crash_point(paths: &[PathBuf], seed: u64, mode: &Sweep, write: usize) -> Result<ExitCode, ScenarioError> {
    let [path] = paths else {
        return Err(usage_error("crash-points --replay takes one scenario file"));
    };
    if write == 0 {
        return Err(usage_error("crash points are numbered from 1"));
    }
    let file = load_scenario(path)?;
    let regressions = &mode.regressions;
    let (record, violations) = crate::crash_points::run_one(&file, seed, regressions, write, mode.fault_at());
    outln!("crash point: {} {write}", mode.what());
    let again = mode.replay_command(&file, seed, write);
    print_replay(&file, seed, regressions, &record, &violations, &again);
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

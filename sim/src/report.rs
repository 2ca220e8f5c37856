//! Suite results as text (for people), JSON (for tools) and JUnit XML (for
//! CI dashboards). Output is in work order, so it diffs well between runs.

use std::fmt::Write as _;

use serde::Serialize;
use turnsim_engine::RegressionSet;

use crate::runner::{replay_command, Outcome, SweepResults};
use crate::scenario::ScenarioFile;

#[derive(Serialize)]
pub struct Summary {
    pub scenarios: usize,
    pub runs: usize,
    pub passed: usize,
    pub failed: usize,
    pub failures: Vec<FailureReport>,
}

#[derive(Serialize)]
pub struct FailureReport {
    pub scenario: String,
    pub seed: u64,
    pub check: String,
    pub message: String,
    pub replay: String,
}

pub fn summarise(files: &[ScenarioFile], results: &SweepResults, regressions: &RegressionSet) -> Summary {
    let failures = results
        .failures
        .iter()
        .flat_map(|outcome| {
            let file = &files[outcome.scenario];
            outcome.violations.iter().map(move |violation| FailureReport {
                scenario: file.path.display().to_string(),
                seed: outcome.seed,
                check: violation.check.clone(),
                message: violation.message.clone(),
                replay: replay_command(file, outcome.seed, regressions),
            })
        })
        .collect();
    let (runs, failed) = (results.total_runs(), results.failures.len());
    let scenarios = results.runs.iter().filter(|runs| **runs > 0).count();
    Summary { scenarios, runs, passed: runs - failed, failed, failures }
}

/// One line per scenario; for a failing one, its first failing seed in full
/// (checks, the events before, the replay command) and the other seeds.
pub fn text(files: &[ScenarioFile], results: &SweepResults, regressions: &RegressionSet) -> String {
    let mut out = String::new();
    for (index, file) in files.iter().enumerate() {
        let runs = results.runs[index];
        if runs == 0 {
            continue;
        }
        let failed: Vec<&Outcome> = results.failures_of(index).collect();
        let path = file.path.display();
        match failed.first() {
            None => {
                let _ = writeln!(out, "PASS {path} ({runs} seeds)");
            }
            Some(first) => {
                let _ = writeln!(out, "FAIL {path} ({} of {runs} seeds failed)", failed.len());
                write_failure(&mut out, file, first, regressions);
                if failed.len() > 1 {
                    let seeds: Vec<String> =
                        failed.iter().skip(1).take(20).map(|outcome| outcome.seed.to_string()).collect();
                    let _ = writeln!(
                        out,
                        "  also failing seeds: {}{}",
                        seeds.join(" "),
                        if failed.len() > 21 { " ..." } else { "" }
                    );
                }
            }
        }
    }
    out
}

fn write_failure(out: &mut String, file: &ScenarioFile, outcome: &Outcome, regressions: &RegressionSet) {
    let _ = writeln!(out, "  seed {}:", outcome.seed);
    for violation in &outcome.violations {
        let _ = writeln!(out, "    {}: {}", violation.check, violation.message);
    }
    if !outcome.tail.is_empty() {
        let _ = writeln!(out, "  last events:");
        for line in &outcome.tail {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out, "  replay: {}", replay_command(file, outcome.seed, regressions));
}

pub fn json(summary: &Summary) -> String {
    serde_json::to_string_pretty(summary).expect("summary serialises")
}

/// A test case per scenario file; its failure lists the failing seeds.
pub fn junit(files: &[ScenarioFile], results: &SweepResults, regressions: &RegressionSet) -> String {
    let failed = results.failures.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"turnsim\" tests=\"{}\" failures=\"{failed}\">", files.len());
    let _ = writeln!(
        out,
        "  <testsuite name=\"scenarios\" tests=\"{}\" failures=\"{}\">",
        files.len(),
        failing_files(results)
    );
    for (index, file) in files.iter().enumerate() {
        let runs = results.runs[index];
        let name = escape(&file.path.display().to_string());
        // No `time`: runs take simulated time, and dashboards read it as wall time.
        let _ = write!(out, "    <testcase classname=\"turnsim\" name=\"{name}\"");
        let failures: Vec<&Outcome> = results.failures_of(index).collect();
        if failures.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        let first = failures[0];
        let headline = format!(
            "{} of {} seeds failed; first seed {}: {}",
            failures.len(),
            runs,
            first.seed,
            first.violations[0].message
        );
        let _ = writeln!(out, ">\n      <failure message=\"{}\">", escape(&headline));
        for outcome in failures.iter().take(20) {
            for violation in &outcome.violations {
                let _ =
                    writeln!(out, "seed {} {}: {}", outcome.seed, escape(&violation.check), escape(&violation.message));
            }
            let _ = writeln!(out, "replay: {}", escape(&replay_command(file, outcome.seed, regressions)));
        }
        out.push_str("      </failure>\n    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn failing_files(results: &SweepResults) -> usize {
    let mut files: Vec<usize> = results.failures.iter().map(|outcome| outcome.scenario).collect();
    files.dedup();
    files.len()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

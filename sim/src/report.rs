//! Suite results as text (for people), JSON (for tools), JUnit XML (for CI
//! dashboards) and GitHub workflow annotations, all from a sweep's folded
//! results. Output is in work order, so it diffs well between runs.

use std::fmt::Write as _;

use serde::Serialize;
use turnsim_engine::RegressionSet;

use crate::applicable::NotApplicable;
use crate::capability::Capability;
use crate::runner::{replay_command, Outcome, SweepResults};
use crate::scenario::ScenarioFile;

#[derive(Serialize)]
pub struct Summary {
    pub scenarios: usize,
    pub runs: usize,
    pub passed: usize,
    pub failed: usize,
    /// Scenarios not run: each needs a capability the engine does not declare.
    pub not_applicable: usize,
    pub failures: Vec<FailureReport>,
    pub not_applicable_scenarios: Vec<NotApplicableReport>,
    /// With repeats (`--repeat`): each scenario's runs and pass rate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<RateReport>,
}

#[derive(Serialize)]
pub struct RateReport {
    pub scenario: String,
    pub runs: usize,
    pub failed: usize,
    /// Passed runs over runs, from 0 to 1.
    pub pass_rate: f64,
}

#[derive(Serialize)]
pub struct NotApplicableReport {
    pub scenario: String,
    /// What the scenario needs and the engine does not declare.
    pub missing: Vec<Capability>,
}

impl Summary {
    /// The summary with the scenarios that were not run.
    pub fn with_not_applicable(mut self, not_applicable: &[NotApplicable]) -> Self {
        self.not_applicable = not_applicable.len();
        self.not_applicable_scenarios = not_applicable
            .iter()
            .map(|skipped| NotApplicableReport {
                scenario: skipped.file.path.display().to_string(),
                missing: skipped.missing.clone(),
            })
            .collect();
        self
    }

    /// `suite: 3 passed, 1 failed`, and `; 2 scenarios not applicable` when
    /// any were not run.
    pub fn line(&self) -> String {
        let mut line = format!("suite: {} passed, {} failed", self.passed, self.failed);
        if self.not_applicable > 0 {
            line.push_str(&format!("; {} not applicable", plural(self.not_applicable as u64, "scenario")));
        }
        line
    }
}

/// One line per scenario not run, with what it needs that the engine lacks.
pub fn not_applicable_lines(not_applicable: &[NotApplicable]) -> String {
    let mut out = String::new();
    for skipped in not_applicable {
        let _ = writeln!(out, "N/A  {} ({})", skipped.file.path.display(), skipped.reason());
    }
    out
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
    let rates = if results.repeat > 1 { rates(files, results) } else { Vec::new() };
    Summary {
        scenarios,
        runs,
        passed: runs - failed,
        failed,
        not_applicable: 0,
        failures,
        not_applicable_scenarios: Vec::new(),
        rates,
    }
}

fn rates(files: &[ScenarioFile], results: &SweepResults) -> Vec<RateReport> {
    let ran = files.iter().enumerate().filter(|(index, _)| results.runs[*index] > 0);
    ran.map(|(index, file)| {
        let (runs, failed) = (results.runs[index], results.failures_of(index).count());
        RateReport {
            scenario: file.path.display().to_string(),
            runs,
            failed,
            pass_rate: (runs - failed) as f64 / runs as f64,
        }
    })
    .collect()
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
                let _ = writeln!(
                    out,
                    "PASS {path} ({}{}{})",
                    runs_label(results, runs),
                    rate_note(results, runs, 0),
                    canary_note(file)
                );
            }
            Some(first) => {
                let label = runs_label(results, runs);
                let _ = writeln!(
                    out,
                    "FAIL {path} ({} of {label} failed{})",
                    failed.len(),
                    rate_note(results, runs, failed.len())
                );
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

/// `3 seeds`, or with repeats `12 runs: 3 seeds x 4`.
fn runs_label(results: &SweepResults, runs: usize) -> String {
    if results.repeat <= 1 {
        return plural(runs as u64, "seed");
    }
    format!("{}: {} x {}", plural(runs as u64, "run"), plural(runs as u64 / results.repeat, "seed"), results.repeat)
}

/// With repeats, `; pass rate 75%` (a verdict in real time is a rate; any
/// failed run fails the scenario).
fn rate_note(results: &SweepResults, runs: usize, failed: usize) -> String {
    if results.repeat <= 1 || runs == 0 {
        return String::new();
    }
    format!("; pass rate {}", pass_rate(runs, failed))
}

/// `75%`, or `99.9%` short of a whole percent: never rounded up to 100%.
pub fn pass_rate(runs: usize, failed: usize) -> String {
    let rate = (runs - failed) as f64 * 100.0 / runs as f64;
    if failed > 0 && rate >= 99.5 {
        return format!("{:.1}%", (rate * 10.0).floor() / 10.0);
    }
    format!("{rate:.0}%")
}

/// A canary passes by failing: say so, and with which check.
fn canary_note(file: &ScenarioFile) -> String {
    match &file.scenario.expect.expect_failure {
        Some(check) => format!("; each failed `{check}`, as this canary must"),
        None => String::new(),
    }
}

/// `1 seed`, `2 seeds`.
pub fn plural(count: u64, noun: &str) -> String {
    format!("{count} {noun}{}", if count == 1 { "" } else { "s" })
}

/// The closing list: each failing scenario with its first failing seed's replay.
pub fn failing_list(files: &[ScenarioFile], results: &SweepResults, regressions: &RegressionSet) -> String {
    let mut out = String::new();
    for (index, file) in files.iter().enumerate() {
        let failed: Vec<&Outcome> = results.failures_of(index).collect();
        if let Some(first) = failed.first() {
            if out.is_empty() {
                out.push_str("failed scenarios:\n");
            }
            let total = runs_label(results, results.runs[index]);
            let rate = rate_note(results, results.runs[index], failed.len());
            let _ = writeln!(out, "  {} ({} of {total} failed{rate})", file.path.display(), failed.len());
            let _ = writeln!(out, "    replay: {}", replay_command(file, first.seed, regressions));
        }
    }
    out
}

fn write_failure(out: &mut String, file: &ScenarioFile, outcome: &Outcome, regressions: &RegressionSet) {
    match outcome.repeat {
        0 | 1 => writeln!(out, "  seed {}:", outcome.seed),
        run => writeln!(out, "  seed {} (run {run}):", outcome.seed),
    }
    .ok();
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

/// JUnit XML: a test case per scenario this process ran (a scenario a shard
/// did not run is absent, so merged shard reports have no phantom passes);
/// a failing one carries the failing seeds, each with its check, message
/// and replay command. Counts come from the same cases, so they agree.
///
/// A scenario not applicable to the engine is a skipped case, its reason the message.
pub fn junit(
    files: &[ScenarioFile],
    results: &SweepResults,
    regressions: &RegressionSet,
    not_applicable: &[NotApplicable],
) -> String {
    let mut suite = quick_junit::TestSuite::new("scenarios");
    for (index, file) in files.iter().enumerate() {
        if results.runs[index] > 0 {
            let failures: Vec<&Outcome> = results.failures_of(index).collect();
            suite.add_test_case(junit_case(file, results.runs[index], &failures, regressions));
        }
    }
    for skipped in not_applicable {
        let mut status = quick_junit::TestCaseStatus::skipped();
        status.set_message(format!("not applicable: {}", skipped.reason()));
        let mut case = quick_junit::TestCase::new(skipped.file.path.display().to_string(), status);
        case.set_classname("turnsim");
        suite.add_test_case(case);
    }
    let mut report = quick_junit::Report::new("turnsim");
    report.add_test_suite(suite);
    // No `time` or timestamps: runs take simulated time, and a report must diff cleanly.
    let mut xml = report.to_string().expect("a JUnit report serialises into a string");
    xml.push('\n');
    xml
}

fn junit_case(
    file: &ScenarioFile,
    runs: usize,
    failures: &[&Outcome],
    regressions: &RegressionSet,
) -> quick_junit::TestCase {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus};
    let status = match failures.first() {
        None => TestCaseStatus::success(),
        Some(first) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let violation = &first.violations[0];
            status.set_message(format!(
                "{} of {} failed; seed {}: {}: {}",
                failures.len(),
                plural(runs as u64, "seed"),
                first.seed,
                violation.check,
                violation.message
            ));
            status.set_type(violation.check.clone());
            status.set_description(failure_details(file, failures, regressions));
            status
        }
    };
    let mut case = TestCase::new(file.path.display().to_string(), status);
    case.set_classname("turnsim");
    case.add_property(quick_junit::Property::new("seeds", runs.to_string()));
    case
}

/// Up to twenty failing seeds: each check and message, then the replay.
fn failure_details(file: &ScenarioFile, failures: &[&Outcome], regressions: &RegressionSet) -> String {
    let mut out = String::new();
    for outcome in failures.iter().take(20) {
        for violation in &outcome.violations {
            let _ = writeln!(out, "seed {} {}: {}", outcome.seed, violation.check, violation.message);
        }
        let _ = writeln!(out, "replay: {}", replay_command(file, outcome.seed, regressions));
    }
    if failures.len() > 20 {
        let _ = writeln!(out, "... and {} more failing seeds", failures.len() - 20);
    }
    out
}

/// GitHub Actions workflow commands: one `::error` annotation per failing
/// scenario, on its file, with the first failing seed and its replay.
pub fn github(files: &[ScenarioFile], results: &SweepResults, regressions: &RegressionSet) -> String {
    let mut out = String::new();
    for (index, file) in files.iter().enumerate() {
        let failures: Vec<&Outcome> = results.failures_of(index).collect();
        let Some(first) = failures.first() else { continue };
        let violation = &first.violations[0];
        let total = plural(results.runs[index] as u64, "seed");
        let title = format!("turnsim: {} ({} of {total} failed)", violation.check, failures.len());
        let message = format!(
            "seed {}: {}\nreplay: {}",
            first.seed,
            violation.message,
            replay_command(file, first.seed, regressions)
        );
        let _ = writeln!(
            out,
            "::error file={},line=1,title={}::{}",
            workflow_property(&file.path.display().to_string()),
            workflow_property(&title),
            workflow_data(&message)
        );
    }
    out
}

/// One `::notice` per scenario not run, on its file, with what it needs.
pub fn github_not_applicable(not_applicable: &[NotApplicable]) -> String {
    let mut out = String::new();
    for skipped in not_applicable {
        let _ = writeln!(
            out,
            "::notice file={},line=1,title={}::{}",
            workflow_property(&skipped.file.path.display().to_string()),
            workflow_property("turnsim: not applicable"),
            workflow_data(&skipped.reason())
        );
    }
    out
}

/// Escapes a workflow command's message.
fn workflow_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
fn workflow_property(text: &str) -> String {
    workflow_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// The timeline with each event numbered (the numbers `FAILED ... (event N)`
/// names), and `>>` before an event where a check failed.
pub fn numbered_timeline(record: &crate::world::RunRecord, violations: &[crate::check::Violation]) -> String {
    let failing: Vec<usize> = violations.iter().filter_map(|violation| violation.at_event).collect();
    let mut out = String::with_capacity(record.events.len() * 72);
    for (index, event) in record.events.iter().enumerate() {
        let marker = if failing.contains(&index) { ">>" } else { "  " };
        let _ = writeln!(out, "{marker}{:>5} {}", index + 1, event.render());
        for violation in violations.iter().filter(|violation| violation.at_event == Some(index)) {
            let _ = writeln!(out, "         ^ FAILED {}: {}", violation.check, violation.message);
        }
    }
    out
}

//! `turnsim replay`: one seed's whole timeline, as text, JSON, a sequence
//! diagram or one self-contained page.

use std::process::ExitCode;

use clap::ValueEnum;

use turnsim_engine::{Regression, RegressionSet};

use super::flags::{env_u64, usage_error};
use crate::runner;
use crate::scenario::{load_scenario, ScenarioError, ScenarioFile};
use crate::{outln, output, report};

#[derive(Clone, Copy, ValueEnum)]
pub enum ReplayFormat {
    Text,
    Json,
    Mermaid,
    /// One self-contained page: lanes side by side, the violation, the transcript.
    Html,
}

pub fn replay(
    file: &std::path::Path,
    seed: Option<u64>,
    format: ReplayFormat,
    regressions: &RegressionSet,
) -> Result<ExitCode, ScenarioError> {
    let seed = match seed.or(env_u64("MADSIM_TEST_SEED")?) {
        Some(seed) => seed,
        None => return Err(usage_error("replay needs `--seed N` (or `MADSIM_TEST_SEED`)")),
    };
    let scenario = load_scenario(file)?;
    let (record, violations) = runner::run_one(&scenario, seed, regressions);
    match format {
        ReplayFormat::Json => {
            let json = serde_json::json!({
                "scenario": scenario.scenario.name,
                "seed": seed,
                "regressions": regressions.iter().map(Regression::name).collect::<Vec<_>>(),
                "end": record.end,
                "sim_ms": record.sim_ms,
                "events": record.events,
                "violations": violations,
            });
            outln!("{}", serde_json::to_string_pretty(&json).expect("serialises"));
        }
        ReplayFormat::Text => {
            let again = runner::replay_command(&scenario, seed, regressions);
            print_replay(&scenario, seed, regressions, &record, &violations, &again);
        }
        ReplayFormat::Mermaid => output::emit(&crate::mermaid::render(&record.events, &violations)),
        ReplayFormat::Html => output::emit(&crate::html::render(&scenario, seed, regressions, &record, &violations)),
    }
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub(crate) fn print_replay(
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    record: &crate::world::RunRecord,
    violations: &[crate::check::Violation],
    replay: &str,
) {
    use std::fmt::Write as _;
    let names: Vec<&str> = regressions.iter().map(Regression::name).collect();
    let regressions_shown = if names.is_empty() { "none".into() } else { names.join(",") };
    let mut out = format!("SEED={seed} scenario={} regressions={regressions_shown}\n", scenario.scenario.name);
    out.push_str(&report::numbered_timeline(record, violations));
    let _ =
        writeln!(out, "end: {:?} after {} ms of sim time, {} events", record.end, record.sim_ms, record.events.len());
    out.push_str("final transcript (stored):\n");
    out.push_str(&crate::transcript_view::render(&record.final_state.messages));
    if let Some(expected) = &scenario.scenario.expect.expect_failure {
        // A canary passes by failing: show the failure it exists to produce.
        for violation in crate::check::raw_violations(scenario, record).iter().filter(|v| &v.check == expected) {
            let _ = writeln!(out, "EXPECTED FAILURE {}: {}", violation.check, violation.message);
        }
    }
    if violations.is_empty() {
        out.push_str("all checks passed\n");
    }
    for violation in violations {
        let at = violation.at_event.map(|at| format!(" (event {})", at + 1)).unwrap_or_default();
        let _ = writeln!(out, "FAILED {}: {}{at}", violation.check, violation.message);
    }
    if !violations.is_empty() {
        let _ = writeln!(out, "replay: {replay}");
    }
    output::emit(&out);
}

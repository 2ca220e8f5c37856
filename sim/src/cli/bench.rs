//! `turnsim bench`: seeded runs per second, time compression and
//! exploration speed, checked against committed bounds on request.

use std::path::Path;
use std::process::ExitCode;

use super::replay::ReplayFormat;
use crate::scenario::ScenarioError;
use crate::{errln, outln, output};

/// `turnsim bench`: every figure.
pub fn bench(scenarios: &Path, engine_cmd: Option<String>, format: ReplayFormat) -> Result<ExitCode, ScenarioError> {
    let report = crate::bench::run(scenarios, engine_cmd)?;
    match format {
        ReplayFormat::Json => outln!("{}", serde_json::to_string_pretty(&report).expect("serialises")),
        _ => output::emit(&crate::bench::text(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `turnsim bench --check`: the ratios a run measures on itself against
/// the committed bounds; exit 1 when one is past its bound, 2 when a
/// bounded ratio could not be measured here.
pub fn check(scenarios: &Path, bounds_path: &Path, format: ReplayFormat) -> Result<ExitCode, ScenarioError> {
    use crate::bench::ratios;
    let bounds = ratios::load(bounds_path)?;
    let measured = ratios::measure(scenarios)?;
    match format {
        ReplayFormat::Json => outln!("{}", serde_json::to_string_pretty(&measured).expect("serialises")),
        _ => output::emit(&ratios::text(&measured, &bounds)),
    }
    match ratios::breaches(&measured, &bounds) {
        Err(error) => Err(ScenarioError::new(bounds_path, error)),
        Ok(breaches) if breaches.is_empty() => {
            errln!("bench: every ratio within its bound ({})", bounds.measured);
            Ok(ExitCode::SUCCESS)
        }
        Ok(breaches) => {
            breaches.iter().for_each(|breach| errln!("bench: {breach}"));
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `turnsim bench --instructions`: the growth figures in instructions;
/// exit 1 past the limit.
pub fn instructions(quadratic: bool, format: ReplayFormat) -> Result<ExitCode, ScenarioError> {
    let exe = std::env::current_exe().map_err(|error| ScenarioError::new(Path::new("turnsim"), error.to_string()))?;
    let growth = crate::bench::instructions::measure(&exe, quadratic)
        .map_err(|error| ScenarioError::new(Path::new("valgrind"), error))?;
    match format {
        ReplayFormat::Json => outln!("{}", serde_json::to_string_pretty(&growth).expect("serialises")),
        _ => output::emit(&format!(
            "step growth              {:>12.2}x instructions per event, {} vs {} tool steps\n\
             batch growth             {:>12.2}x instructions per event, {} vs {} tools in one batch\n",
            growth.step_growth,
            crate::bench::STEP_CHAIN_LONG,
            crate::bench::STEP_CHAIN_SHORT,
            growth.batch_growth,
            crate::bench::BATCH_WIDE,
            crate::bench::BATCH_NARROW,
        )),
    }
    let over = growth.over_limit();
    if over.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    errln!("bench: cost per event grows with the session: {}", over.join(", "));
    Ok(ExitCode::FAILURE)
}

/// `turnsim bench --by-part`: each part of a run's cost, in-process and
/// against `engine_cmd` (the built-in engine served when none), and its
/// growth.
pub fn by_part(scenarios: &Path, engine_cmd: Option<String>, format: ReplayFormat) -> Result<ExitCode, ScenarioError> {
    let standard = crate::scenario::load_scenario(&scenarios.join(crate::bench::STANDARD_SCENARIO))?;
    let engine = match engine_cmd {
        Some(command) => command,
        None => crate::bench::served_engine()
            .map_err(|error| ScenarioError::new(Path::new("turnsim"), error.to_string()))?,
    };
    let by_part = crate::bench::breakdown::measure(&standard, &engine);
    match format {
        ReplayFormat::Json => outln!("{}", serde_json::to_string_pretty(&by_part).expect("serialises")),
        _ => output::emit(&crate::bench::breakdown::text(&by_part)),
    }
    Ok(ExitCode::SUCCESS)
}

//! `turnsim bench --instructions`: the growth figures counted in
//! instructions, not CPU time. Valgrind's cachegrind counts the
//! instructions a process runs, the same to a thousandth on every run
//! whatever else the machine does, so the guard is as strict in CI as on
//! an idle machine.
//! CPU time also pays for cache misses, which a long session's larger
//! working set adds (the README's Speed section measures both).
//!
//! Each form of a growth shape is run by a probe (`turnsim growth-probe`,
//! hidden) under cachegrind twice, over no seed and over some: the
//! difference in instructions over the traced events is the cost of one
//! event, without the process's start-up and the scenario's making.

use std::path::Path;
use std::process::Command;

use serde::Serialize;
use turnsim_engine::RegressionSet;

use super::growth::{Checker, Form, Shape, GROWTH_LIMIT};
use crate::check::{check_run, Violation};
use crate::scenario::ScenarioFile;
use crate::world::RunRecord;

/// Seeds each form is probed over: some 5 000 to 8 000 traced events.
fn seeds(shape: Shape, form: Form) -> u64 {
    match (shape, form) {
        (Shape::Steps, Form::Short) => 12,
        (Shape::Batch, Form::Short) => 36,
        (_, Form::Long) => 1,
    }
}

/// The probe: runs seeds `0..seeds` of one form, each judged by the
/// checks every run gets (or, `quadratic`, by [`quadratic_check`] too), and
/// returns the traced events. Panics on a failed run: a growth figure of
/// a session that fails its checks means nothing.
pub fn probe(shape: Shape, form: Form, seeds: u64, quadratic: bool) -> usize {
    let file = shape.scenario(form);
    let checker: Checker = if quadratic { quadratic_check } else { check_run };
    let regressions = RegressionSet::default();
    (0..seeds)
        .map(|seed| {
            let record = crate::world::run(&file, seed, &regressions);
            let violations = checker(&file, &record);
            assert!(violations.is_empty(), "{} fails on seed {seed}: {violations:?}", file.scenario.name);
            record.events.len()
        })
        .sum()
}

/// The checks every run gets, plus a look at the store before every
/// crossing, each replayed from the start: the shape of the regression the
/// growth guards exist for (a map rebuilt per history entry).
pub fn quadratic_check(scenario: &ScenarioFile, run: &RunRecord) -> Vec<Violation> {
    let history = &run.history;
    let messages: usize = (0..history.crossings.len()).map(|index| history.store_at(index).messages.len()).sum();
    assert!(messages > 0 || history.crossings.is_empty());
    check_run(scenario, run)
}

/// Instructions per traced event of the long form over the short's.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct InstructionGrowth {
    pub step_growth: f64,
    pub batch_growth: f64,
}

impl InstructionGrowth {
    /// Each figure past [`GROWTH_LIMIT`], named.
    pub fn over_limit(&self) -> Vec<String> {
        [("step_growth", self.step_growth), ("batch_growth", self.batch_growth)]
            .into_iter()
            .filter(|(_, figure)| *figure > GROWTH_LIMIT)
            .map(|(name, figure)| format!("{name} {figure:.2} > {GROWTH_LIMIT} (instructions)"))
            .collect()
    }
}

/// Both figures, with `exe` (this turnsim) probed under cachegrind.
pub fn measure(exe: &Path, quadratic: bool) -> Result<InstructionGrowth, String> {
    let growth = |shape| -> Result<f64, String> {
        let short = per_event(exe, shape, Form::Short, quadratic)?;
        let long = per_event(exe, shape, Form::Long, quadratic)?;
        Ok(long / short)
    };
    Ok(InstructionGrowth { step_growth: growth(Shape::Steps)?, batch_growth: growth(Shape::Batch)? })
}

/// Instructions per traced event of one form: a probe over no seed (the
/// process's start-up and the scenario's making) taken from one over some.
fn per_event(exe: &Path, shape: Shape, form: Form, quadratic: bool) -> Result<f64, String> {
    let (start_up, _) = counted(exe, shape, form, 0, quadratic)?;
    let (instructions, events) = counted(exe, shape, form, seeds(shape, form), quadratic)?;
    if events == 0 {
        return Err(format!("{shape:?} {form:?}: the probe traced no event"));
    }
    Ok(instructions.saturating_sub(start_up) as f64 / events as f64)
}

/// (instructions, traced events) of one probe under cachegrind.
fn counted(exe: &Path, shape: Shape, form: Form, seeds: u64, quadratic: bool) -> Result<(u64, u64), String> {
    let mut command = Command::new("valgrind");
    command.args(["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]).arg(exe).args([
        "growth-probe",
        "--shape",
        &value_name(shape),
        "--form",
        &value_name(form),
        "--seeds",
        &seeds.to_string(),
    ]);
    if quadratic {
        command.arg("--quadratic-check");
    }
    let output = command.output().map_err(|error| format!("valgrind could not start ({error}): install valgrind"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        return Err(format!("the growth probe failed under valgrind ({}):\n{tail}", output.status));
    }
    let instructions = stderr
        .lines()
        .find_map(|line| line.split("I   refs:").nth(1))
        .map(|count| count.trim().replace(',', ""))
        .and_then(|count| count.parse().ok())
        .ok_or_else(|| format!("no instruction count in valgrind's output:\n{stderr}"))?;
    let events = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|error| format!("the growth probe printed no event count ({error})"))?;
    Ok((instructions, events))
}

/// A flag value as the command line spells it.
fn value_name(value: impl clap::ValueEnum) -> String {
    value.to_possible_value().map_or_else(String::new, |value| value.get_name().to_string())
}

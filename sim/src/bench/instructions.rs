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

use super::growth::{step_chain, wide_batch, Checker, GROWTH_LIMIT};
use super::{BATCH_NARROW, BATCH_WIDE, STEP_CHAIN_LONG, STEP_CHAIN_SHORT};
use crate::check::{check_run, Violation};
use crate::scenario::ScenarioFile;
use crate::world::RunRecord;

/// A growth shape (`turnsim growth-probe --shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// A chain of client-tool steps.
    Steps,
    /// One step with a wide batch of client tools.
    Batch,
}

/// The short or the long form of a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Form {
    Short,
    Long,
}

/// The scenario of one form of a shape.
pub fn scenario(shape: Shape, form: Form) -> ScenarioFile {
    match (shape, form) {
        (Shape::Steps, Form::Short) => step_chain(STEP_CHAIN_SHORT),
        (Shape::Steps, Form::Long) => step_chain(STEP_CHAIN_LONG),
        (Shape::Batch, Form::Short) => wide_batch(BATCH_NARROW),
        (Shape::Batch, Form::Long) => wide_batch(BATCH_WIDE),
    }
}

/// Seeds each form is probed over, none and some: some 5 000 to 8 000
/// traced events either way.
fn seeds(shape: Shape, form: Form) -> (u64, u64) {
    match (shape, form) {
        (Shape::Steps, Form::Short) => (0, 12),
        (Shape::Batch, Form::Short) => (0, 36),
        (_, Form::Long) => (0, 1),
    }
}

/// The probe: runs seeds `0..seeds` of one form, each judged by the
/// checks every run gets (or, `quadratic`, by [`quadratic_check`] too), and
/// returns the traced events. Panics on a failed run: a growth figure of
/// a session that fails its checks means nothing.
pub fn probe(shape: Shape, form: Form, seeds: u64, quadratic: bool) -> usize {
    let file = scenario(shape, form);
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

/// Instructions per traced event of one form.
fn per_event(exe: &Path, shape: Shape, form: Form, quadratic: bool) -> Result<f64, String> {
    let (few, many) = seeds(shape, form);
    let (few_instructions, few_events) = counted(exe, shape, form, few, quadratic)?;
    let (many_instructions, many_events) = counted(exe, shape, form, many, quadratic)?;
    let events = many_events.checked_sub(few_events).filter(|&events| events > 0);
    let events = events.ok_or_else(|| format!("{shape:?} {form:?}: more seeds traced no more events"))?;
    Ok(many_instructions.saturating_sub(few_instructions) as f64 / events as f64)
}

/// (instructions, traced events) of one probe under cachegrind.
fn counted(exe: &Path, shape: Shape, form: Form, seeds: u64, quadratic: bool) -> Result<(u64, u64), String> {
    let name = |value: &dyn std::fmt::Debug| format!("{value:?}").to_lowercase();
    let mut command = Command::new("valgrind");
    command.args(["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]).arg(exe).args([
        "growth-probe",
        "--shape",
        &name(&shape),
        "--form",
        &name(&form),
        "--seeds",
        &seeds.to_string(),
    ]);
    if quadratic {
        command.arg("--quadratic-check");
    }
    let output = command.output().map_err(|error| format!("valgrind could not start ({error}): install valgrind"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: String =
            stderr.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
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

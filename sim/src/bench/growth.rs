//! Growth benchmarks: does the cost of one traced event stay flat as a
//! session gets longer?
//!
//! Two shapes, generated here rather than committed as scenarios because
//! their size is the variable: a chain of client-tool steps (each model call
//! emits one tool, the client answers with `auto_continue`, the continuation
//! calls the model again) and one step with a wide batch of client tools.
//! The figure is the CPU time per recorded event of the long form divided
//! by that of the short form: 1.0 is perfectly linear, a quadratic shows as
//! a ratio that grows with the size. `turnsim bench` reports it in CPU
//! time; the guard counts it in instructions (`instructions.rs`), which a
//! busy machine cannot move, and fails past [`GROWTH_LIMIT`]. The checker
//! is a parameter, so the guard can be shown to reject a quadratic one.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use turnsim_engine::RegressionSet;

use crate::check::Violation;
use crate::scenario::{parse_scenario, ScenarioFile};
use crate::world::RunRecord;

/// CPU time one growth round spends on one form (at least one run).
const GROWTH_ROUND_TIME: Duration = Duration::from_millis(400);

/// A session of `steps` model calls, each one client tool that the client
/// answers with `auto_continue`, then a closing text answer.
pub fn step_chain(steps: usize) -> ScenarioFile {
    let mut yaml = String::new();
    let _ = write!(
        yaml,
        "name: bench-step-chain-{steps}\nseeds: 1\nengine:\n  tools:\n    lookup: {{ kind: client }}\nmodel:\n"
    );
    for step in 0..steps {
        let _ = writeln!(
            yaml,
            "  - [ {{ tool: {{ id: tc-{step}, name: lookup, input: {{ step: {step} }} }} }}, {{ finish: {{ reason: tool-calls }} }} ]"
        );
    }
    yaml.push_str("  - [ { text: \"All steps done.\" }, { finish: { reason: stop } } ]\n");
    yaml.push_str(CLIENT_AND_START);
    parse_generated(&format!("bench-step-chain-{steps}"), &yaml)
}

/// One model call that emits `tools` client tools in one batch; the client
/// answers each with `auto_continue`; one continuation closes the turn.
pub fn wide_batch(tools: usize) -> ScenarioFile {
    let mut yaml = String::new();
    let _ = write!(
        yaml,
        "name: bench-wide-batch-{tools}\nseeds: 1\nengine:\n  tools:\n    lookup: {{ kind: client }}\nmodel:\n  -\n"
    );
    for tool in 0..tools {
        let _ = writeln!(yaml, "    - tool: {{ id: tc-{tool}, name: lookup, input: {{ item: {tool} }} }}");
    }
    yaml.push_str("    - finish: { reason: tool-calls }\n");
    yaml.push_str("  - [ { text: \"All tools done.\" }, { finish: { reason: stop } } ]\n");
    yaml.push_str(CLIENT_AND_START);
    parse_generated(&format!("bench-wide-batch-{tools}"), &yaml)
}

const CLIENT_AND_START: &str = "client:
  tools:
    lookup: { answer_after_ms: [0, 20], output: \"found\", auto_continue: true }
actions:
  - at_ms: 0
    user_message: { text: \"go\" }
";

fn parse_generated(name: &str, yaml: &str) -> ScenarioFile {
    parse_scenario(Path::new(&format!("<generated {name}>")), yaml).expect("generated benchmark scenario parses")
}

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

impl Shape {
    /// The scenario of one form of this shape.
    pub fn scenario(self, form: Form) -> ScenarioFile {
        use super::{BATCH_NARROW, BATCH_WIDE, STEP_CHAIN_LONG, STEP_CHAIN_SHORT};
        match (self, form) {
            (Self::Steps, Form::Short) => step_chain(STEP_CHAIN_SHORT),
            (Self::Steps, Form::Long) => step_chain(STEP_CHAIN_LONG),
            (Self::Batch, Form::Short) => wide_batch(BATCH_NARROW),
            (Self::Batch, Form::Long) => wide_batch(BATCH_WIDE),
        }
    }
}

/// What judges a run: [`crate::check::check_run`], or a stand-in (the
/// instruction guard is handed a quadratic one to prove it fails).
pub type Checker = fn(&ScenarioFile, &RunRecord) -> Vec<Violation>;

/// How far cost per event may grow from the short form to the long one
/// before the instruction guard fails (1.0: flat).
pub const GROWTH_LIMIT: f64 = 1.5;

/// How long a measurement runs: rounds of each form, back to back.
#[derive(Clone, Copy, Debug)]
pub struct GrowthPlan {
    pub rounds: usize,
    /// CPU time one round spends on one form (at least one run).
    pub round_time: Duration,
}

impl Default for GrowthPlan {
    fn default() -> Self {
        Self { rounds: 5, round_time: GROWTH_ROUND_TIME }
    }
}

/// The two growth figures `turnsim bench` prints.
#[derive(Clone, Copy, Debug)]
pub struct Growth {
    /// A chain of `STEP_CHAIN_LONG` tool steps over one of `STEP_CHAIN_SHORT`.
    pub step: f64,
    /// `BATCH_WIDE` tools in one batch over `BATCH_NARROW`.
    pub batch: f64,
}

/// Measures both figures with `checker` judging every run (median of the
/// plan's rounds each).
pub fn measure(checker: Checker, plan: GrowthPlan) -> Growth {
    let figure = |shape: Shape| {
        let (short, long) = (shape.scenario(Form::Short), shape.scenario(Form::Long));
        super::median(plan.rounds, || growth(&short, &long, checker, plan.round_time))
    };
    Growth { step: figure(Shape::Steps), batch: figure(Shape::Batch) }
}

/// CPU seconds per recorded event, over consecutive seeds for about
/// `round_time` (at least one run); every run must pass `checker`. The
/// measuring thread's CPU time, so that other processes on a busy machine
/// do not count.
pub fn seconds_per_event(file: &ScenarioFile, checker: Checker, round_time: Duration) -> f64 {
    std::thread::scope(|scope| {
        scope.spawn(|| seconds_per_event_here(file, checker, round_time)).join().expect("bench thread")
    })
}

fn seconds_per_event_here(file: &ScenarioFile, checker: Checker, round_time: Duration) -> f64 {
    let regressions = RegressionSet::default();
    // One run first, untimed: a fresh thread's allocator has no pages yet,
    // and the long form would pay for them over fewer runs.
    checker(file, &crate::world::run(file, 0, &regressions));
    let started = thread_cpu_time();
    let (mut runs, mut events) = (0u64, 0usize);
    while runs == 0 || thread_cpu_time() - started < round_time {
        let record = crate::world::run(file, runs, &regressions);
        let violations = checker(file, &record);
        assert!(
            violations.is_empty(),
            "benchmark scenario {} failed on seed {runs}: {violations:?}",
            file.scenario.name
        );
        events += record.events.len();
        runs += 1;
    }
    (thread_cpu_time() - started).as_secs_f64() / events as f64
}

/// CPU time the calling thread has used: not wall time, so a neighbour's
/// load stretches neither form of a comparison.
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "the thread CPU clock is readable");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Cost per event of `large` over cost per event of `small`, measured
/// back to back so machine noise hits both alike.
pub fn growth(small: &ScenarioFile, large: &ScenarioFile, checker: Checker, round_time: Duration) -> f64 {
    let small_cost = seconds_per_event(small, checker, round_time);
    let large_cost = seconds_per_event(large, checker, round_time);
    large_cost / small_cost
}

//! Scripted model calls: what a scenario writes, and the flat list of
//! operations the mock model plays.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnsim_engine::{Chunk, FinishReason};

use super::error::ScenarioError;
use super::limits::{MAX_FIXTURE_DEPTH, MAX_SCRIPT_STEPS};
use super::prescan::Locator;
use super::range::RangeMs;

/// One step of a model call's script, as written in YAML.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A whole text part: start, one delta, end.
    Text(String),
    TextStart(String),
    /// A delta for the text part opened last.
    TextDelta(String),
    TextEnd(String),
    /// A whole reasoning part.
    Reasoning(String),
    ReasoningStart(String),
    /// A delta for the reasoning part opened last.
    ReasoningDelta(String),
    ReasoningEnd(String),
    /// A whole tool call: input start, delta, end and `tool-call`, so the
    /// tool is `input-available` mid-stream.
    Tool(ToolStep),
    ToolStart {
        id: String,
        name: String,
    },
    ToolDelta {
        id: String,
        delta: String,
    },
    ToolEnd(String),
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    SleepMs(RangeMs),
    Repeat {
        times: u32,
        steps: Vec<Step>,
    },
    /// `finish-step` then `finish`. Output tokens default to the content
    /// deltas this call streamed.
    Finish(FinishStep),
    /// Never send another chunk (a hung provider).
    Park,
    /// Drop the connection mid-stream.
    Cut,
    /// Answer with an HTTP error (before or between chunks).
    HttpError {
        status: u16,
        #[serde(default)]
        message: String,
    },
    /// An in-band error chunk.
    ErrorChunk(String),
    /// Steps from `fixtures/<name>.yaml`.
    Fixture(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolStep {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub input: Value,
    /// `call` (default): finalised mid-stream by a `tool-call` chunk;
    /// `finish`: only input chunks, finalised at `finish-step`.
    #[serde(default)]
    pub finalize: Finalize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Finalize {
    #[default]
    Call,
    Finish,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishStep {
    pub reason: FinishReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
}

/// What the mock model plays, after repeats and fixtures are expanded.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Emit(Chunk),
    /// `finish-step` + `finish`; `None` tokens = count the content streamed.
    Finish {
        reason: FinishReason,
        output_tokens: Option<u32>,
    },
    Sleep(RangeMs),
    Park,
    Cut,
    Http {
        status: u16,
        message: String,
    },
}

impl Op {
    /// Ops that put a chunk on the wire (what `after_chunk` counts).
    pub fn is_chunk(&self) -> bool {
        matches!(self, Op::Emit(_) | Op::Finish { .. })
    }
}

/// Where a script problem is: a step by its path below the script's root
/// (`[2].repeat.steps[0]`), or a place already located in a fixture file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptError {
    At { path: String, message: String },
    Located(ScenarioError),
}

/// Why a fixture could not be included: its name (reported where it is
/// written), or its file (reported in that file).
pub enum FixtureError {
    Name(String),
    File(ScenarioError),
}

/// A fixture's steps and the locator of its file, for errors inside it.
pub struct FixtureSteps {
    pub path: std::path::PathBuf,
    pub steps: Vec<Step>,
    pub locator: Locator,
    /// The file's text, to show the line an error in it points at.
    pub text: String,
}

/// What expanding a scenario's scripts may still spend, shared by all its
/// calls, and the fixtures being expanded now (to find cycles).
pub struct Expansion<'a> {
    steps_left: u64,
    open_fixtures: Vec<String>,
    fixture: &'a mut dyn FnMut(&str) -> Result<std::rc::Rc<FixtureSteps>, FixtureError>,
}

impl<'a> Expansion<'a> {
    pub fn new(fixture: &'a mut dyn FnMut(&str) -> Result<std::rc::Rc<FixtureSteps>, FixtureError>) -> Self {
        Self { steps_left: MAX_SCRIPT_STEPS, open_fixtures: Vec::new(), fixture }
    }

    /// One step visited; every `repeat` round and fixture step costs one, so
    /// no script can make the expansion run long or large.
    fn spend(&mut self, path: &str, times: u64) -> Result<(), ScriptError> {
        if times > self.steps_left {
            return Err(ScriptError::At {
                path: path.to_string(),
                message: format!(
                    "the model scripts expand past {MAX_SCRIPT_STEPS} script steps (the expansion bound of a \
                     scenario: `repeat` rounds and fixture steps count); split the behaviour into smaller scenarios"
                ),
            });
        }
        self.steps_left -= times;
        Ok(())
    }
}

/// The text and reasoning parts opened last: where bare deltas go.
struct OpenParts {
    text: String,
    reasoning: String,
}

/// Expands a call's steps; `root` is the call's path in its file (`model[0]`).
pub fn compile(steps: &[Step], root: &str, expansion: &mut Expansion) -> Result<Vec<Op>, ScriptError> {
    let mut ops = Vec::new();
    let mut open = OpenParts { text: "t0".into(), reasoning: "r0".into() };
    for (index, step) in steps.iter().enumerate() {
        compile_step(step, &format!("{root}[{index}]"), &mut ops, &mut open, expansion)?;
    }
    Ok(ops)
}

fn compile_step(
    step: &Step,
    path: &str,
    ops: &mut Vec<Op>,
    open: &mut OpenParts,
    expansion: &mut Expansion,
) -> Result<(), ScriptError> {
    expansion.spend(path, 1)?;
    let emit = |ops: &mut Vec<Op>, chunk| ops.push(Op::Emit(chunk));
    match step {
        Step::Text(text) => {
            let id = format!("t{}", ops.len());
            emit(ops, Chunk::TextStart { id: id.clone() });
            emit(ops, Chunk::TextDelta { id: id.clone(), delta: text.clone() });
            emit(ops, Chunk::TextEnd { id });
        }
        Step::TextStart(id) => {
            open.text = id.clone();
            emit(ops, Chunk::TextStart { id: id.clone() });
        }
        Step::TextDelta(delta) => emit(ops, Chunk::TextDelta { id: open.text.clone(), delta: delta.clone() }),
        Step::TextEnd(id) => emit(ops, Chunk::TextEnd { id: id.clone() }),
        Step::Reasoning(text) => {
            let id = format!("r{}", ops.len());
            emit(ops, Chunk::ReasoningStart { id: id.clone() });
            emit(ops, Chunk::ReasoningDelta { id: id.clone(), delta: text.clone() });
            emit(ops, Chunk::ReasoningEnd { id });
        }
        Step::ReasoningStart(id) => {
            open.reasoning = id.clone();
            emit(ops, Chunk::ReasoningStart { id: id.clone() });
        }
        Step::ReasoningDelta(delta) => {
            emit(ops, Chunk::ReasoningDelta { id: open.reasoning.clone(), delta: delta.clone() })
        }
        Step::ReasoningEnd(id) => emit(ops, Chunk::ReasoningEnd { id: id.clone() }),
        Step::Tool(tool) => compile_tool(tool, ops),
        Step::ToolStart { id, name } => emit(ops, tool_input_start(id, name)),
        Step::ToolDelta { id, delta } => emit(ops, Chunk::ToolInputDelta { id: id.clone(), delta: delta.clone() }),
        Step::ToolEnd(id) => emit(ops, Chunk::ToolInputEnd { id: id.clone() }),
        Step::ToolCall { id, name, input } => {
            emit(ops, Chunk::ToolCall { id: id.clone(), name: name.clone(), input: input.clone(), dynamic: false })
        }
        Step::SleepMs(range) => ops.push(Op::Sleep(*range)),
        Step::Repeat { times, steps } => compile_repeat(*times, steps, path, ops, open, expansion)?,
        Step::Finish(finish) => ops.push(Op::Finish { reason: finish.reason, output_tokens: finish.output_tokens }),
        Step::Park => ops.push(Op::Park),
        Step::Cut => ops.push(Op::Cut),
        Step::HttpError { status, message } => ops.push(Op::Http { status: *status, message: message.clone() }),
        Step::ErrorChunk(message) => emit(ops, Chunk::Error { message: message.clone() }),
        Step::Fixture(name) => compile_fixture(name, path, ops, open, expansion)?,
    }
    Ok(())
}

fn compile_repeat(
    times: u32,
    steps: &[Step],
    path: &str,
    ops: &mut Vec<Op>,
    open: &mut OpenParts,
    expansion: &mut Expansion,
) -> Result<(), ScriptError> {
    // Checked up front, so a huge count fails at once rather than after the budget drains.
    expansion.spend(&format!("{path}.repeat.times"), u64::from(times))?;
    for _ in 0..times {
        for (index, inner) in steps.iter().enumerate() {
            compile_step(inner, &format!("{path}.repeat.steps[{index}]"), ops, open, expansion)?;
        }
    }
    Ok(())
}

fn compile_fixture(
    name: &str,
    path: &str,
    ops: &mut Vec<Op>,
    open: &mut OpenParts,
    expansion: &mut Expansion,
) -> Result<(), ScriptError> {
    let at = |message: String| ScriptError::At { path: format!("{path}.fixture"), message };
    if expansion.open_fixtures.iter().any(|open| open == name) {
        let chain = [expansion.open_fixtures.as_slice(), &[name.to_string()]].concat().join(" → ");
        return Err(at(format!("fixture `{name}` includes itself ({chain})")));
    }
    if expansion.open_fixtures.len() >= MAX_FIXTURE_DEPTH {
        return Err(at(format!("fixtures include fixtures deeper than {MAX_FIXTURE_DEPTH} levels")));
    }
    let fixture = (expansion.fixture)(name).map_err(|error| match error {
        FixtureError::Name(message) => at(message),
        FixtureError::File(error) => ScriptError::Located(error),
    })?;
    expansion.open_fixtures.push(name.to_string());
    for (index, inner) in fixture.steps.iter().enumerate() {
        compile_step(inner, &format!("[{index}]"), ops, open, expansion).map_err(|error| match error {
            ScriptError::At { path, message } => {
                let error = ScenarioError::located(&fixture.path, &fixture.locator, &path, message);
                ScriptError::Located(error.with_source(fixture.text.as_bytes()))
            }
            located => located,
        })?;
    }
    expansion.open_fixtures.pop();
    Ok(())
}

fn compile_tool(tool: &ToolStep, ops: &mut Vec<Op>) {
    let input = if tool.input.is_null() { Value::Object(Default::default()) } else { tool.input.clone() };
    let (id, name) = (tool.id.clone(), tool.name.clone());
    ops.push(Op::Emit(tool_input_start(&id, &name)));
    ops.push(Op::Emit(Chunk::ToolInputDelta { id: id.clone(), delta: input.to_string() }));
    ops.push(Op::Emit(Chunk::ToolInputEnd { id: id.clone() }));
    if tool.finalize == Finalize::Call {
        ops.push(Op::Emit(Chunk::ToolCall { id, name, input, dynamic: false }));
    }
}

/// The provider never marks a call dynamic here: the engine's tool
/// definitions do (`engine.tools.<name>.dynamic`).
fn tool_input_start(id: &str, name: &str) -> Chunk {
    Chunk::ToolInputStart { id: id.to_string(), name: name.to_string(), dynamic: false }
}

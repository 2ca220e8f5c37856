//! The transcript: messages made of parts, and the tool-part state machine.
//!
//! Three kinds of event move a tool part: stream chunks (first write wins, so a
//! replayed chunk never regresses a part), client events (a tool result or an
//! approval, applied only from the states the tables allow) and repair (an
//! unsettled tool call rewritten to `output-error` before an inference).
//!
//! A message keeps its parts in [`parts::Parts`], a store made for them that
//! knows their tool states: it lives here, as part of the message model it
//! stores, since each needs the other.

pub mod parts;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chunk::Chunk;
use parts::{Parts, ToolStates};

/// Text of the error a repaired tool call carries.
pub const REPAIR_ERROR_TEXT: &str = "The tool call was interrupted before a result was recorded.";
/// Error text of an errored tool result that names none.
pub const DEFAULT_TOOL_ERROR_TEXT: &str = "Tool execution denied by user";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: Role,
    pub parts: Parts,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextState {
    Streaming,
    Done,
}

crate::tag_first! {
    #[serde(tag = "type", rename_all = "kebab-case")]
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum Part {
        StepStart,
        Text { id: String, text: String, state: TextState },
        Reasoning { id: String, text: String, state: TextState },
        Tool(ToolPart),
    }
}

/// The states of a tool part, in the order a call normally moves through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    InputStreaming,
    InputAvailable,
    ApprovalRequested,
    ApprovalResponded,
    OutputAvailable,
    OutputError,
    OutputDenied,
}

impl ToolState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InputStreaming => "input-streaming",
            Self::InputAvailable => "input-available",
            Self::ApprovalRequested => "approval-requested",
            Self::ApprovalResponded => "approval-responded",
            Self::OutputAvailable => "output-available",
            Self::OutputError => "output-error",
            Self::OutputDenied => "output-denied",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        ALL_TOOL_STATES.into_iter().find(|state| state.as_str() == text)
    }

    /// A terminal output state: the call has its result.
    pub fn is_output(self) -> bool {
        matches!(self, Self::OutputAvailable | Self::OutputError | Self::OutputDenied)
    }

    /// Waiting on someone: the batch predicate's "pending".
    pub fn is_pending(self) -> bool {
        matches!(self, Self::InputAvailable | Self::ApprovalRequested)
    }

    /// Counts as answered for the batch predicate.
    pub fn is_settled(self) -> bool {
        self.is_output() || self == Self::ApprovalResponded
    }
}

/// The states [`ToolState::is_pending`] holds for.
pub const PENDING: [ToolState; 2] = [ToolState::InputAvailable, ToolState::ApprovalRequested];
/// The states [`ToolState::is_settled`] holds for.
pub const SETTLED: [ToolState; 4] =
    [ToolState::OutputAvailable, ToolState::OutputError, ToolState::OutputDenied, ToolState::ApprovalResponded];
/// A tool part in a state that repair may rewrite: neither an output nor an
/// answered approval.
const UNSETTLED: ToolStates =
    ToolStates::of(&[ToolState::InputStreaming, ToolState::InputAvailable, ToolState::ApprovalRequested]);

pub const ALL_TOOL_STATES: [ToolState; 7] = [
    ToolState::InputStreaming,
    ToolState::InputAvailable,
    ToolState::ApprovalRequested,
    ToolState::ApprovalResponded,
    ToolState::OutputAvailable,
    ToolState::OutputError,
    ToolState::OutputDenied,
];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub id: String,
    pub approved: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolPart {
    pub call_id: String,
    pub tool_name: String,
    pub state: ToolState,
    /// Raw input text streamed so far (`tool-input-delta`s).
    pub input_text: String,
    pub input: Option<Value>,
    pub output: Option<Value>,
    pub error_text: Option<String>,
    pub approval: Option<Approval>,
    /// Set when repair, not a result, settled this call.
    pub repaired: bool,
    /// A tool defined at run time (the AI SDK's `dynamic-tool` part).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
}

impl ToolPart {
    /// A call whose input has started streaming.
    pub fn streaming(call_id: &str, tool_name: &str) -> Self {
        Self {
            call_id: call_id.to_string(),
            tool_name: tool_name.to_string(),
            state: ToolState::InputStreaming,
            input_text: String::new(),
            input: None,
            output: None,
            error_text: None,
            approval: None,
            repaired: false,
            dynamic: false,
        }
    }

    /// A result is recorded: an output state or an output value.
    pub fn is_result_settled(&self) -> bool {
        self.state.is_output() || self.output.is_some()
    }
}

/// A tool result as a client sends it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub outcome: ToolOutcome,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToolOutcome {
    Output(Value),
    /// An errored result; `None` takes the default error text.
    Error(Option<String>),
}

impl Message {
    pub fn user(id: impl Into<String>, text: &str) -> Self {
        let part = Part::Text { id: "user".into(), text: text.into(), state: TextState::Done };
        Self { id: id.into(), role: Role::User, parts: Parts::from(vec![part]) }
    }

    pub fn assistant(id: impl Into<String>) -> Self {
        Self { id: id.into(), role: Role::Assistant, parts: Parts::new() }
    }

    pub fn tool(&self, call_id: &str) -> Option<&ToolPart> {
        self.parts.tool(call_id)
    }

    pub fn tools(&self) -> impl Iterator<Item = &ToolPart> {
        self.parts.iter().filter_map(|part| match part {
            Part::Tool(tool) => Some(tool),
            _ => None,
        })
    }

    /// The tool parts in one of `states`, in order (without reading the
    /// parts of chunks that hold none).
    pub fn tools_in(&self, states: &[ToolState]) -> impl Iterator<Item = &ToolPart> + '_ {
        self.parts.tools_in(ToolStates::of(states))
    }

    /// The first part of the call, for editing (copies only its chunk).
    fn tool_mut(&mut self, call_id: &str) -> Option<&mut ToolPart> {
        self.parts.tool_mut(call_id)
    }

    /// All text of the message's text parts, concatenated.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                Part::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Applies one stream chunk.
    pub fn apply_chunk(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::TextStart { id } => self.push_text(id, false),
            Chunk::TextDelta { id, delta } => self.append_text(id, delta, false),
            Chunk::TextEnd { id } => self.end_text(id, false),
            Chunk::ReasoningStart { id } => self.push_text(id, true),
            Chunk::ReasoningDelta { id, delta } => self.append_text(id, delta, true),
            Chunk::ReasoningEnd { id } => self.end_text(id, true),
            Chunk::ToolInputStart { id, name, dynamic } => self.tool_input_start(id, name, *dynamic),
            Chunk::ToolInputDelta { id, delta } => self.tool_input_delta(id, delta),
            Chunk::ToolCall { id, name, input, dynamic } => {
                self.tool_input_available(id, name, input.clone(), *dynamic)
            }
            Chunk::ToolInputEnd { .. } | Chunk::FinishStep { .. } | Chunk::Finish { .. } | Chunk::Error { .. } => {}
        }
    }

    fn push_text(&mut self, id: &str, reasoning: bool) {
        let text = String::new();
        let state = TextState::Streaming;
        let id = id.to_string();
        self.parts.push(match reasoning {
            true => Part::Reasoning { id, text, state },
            false => Part::Text { id, text, state },
        });
    }

    /// Appends to the last text (or reasoning) part; creates one if missing.
    fn append_text(&mut self, id: &str, delta: &str, reasoning: bool) {
        let at = self
            .parts
            .rposition(|part| matches!((part, reasoning), (Part::Text { .. }, false) | (Part::Reasoning { .. }, true)));
        let last = at.and_then(|at| match self.parts.get_mut(at) {
            Some(Part::Text { text, .. } | Part::Reasoning { text, .. }) => Some(text),
            _ => None,
        });
        match last {
            Some(text) => text.push_str(delta),
            None => {
                self.push_text(id, reasoning);
                self.append_text(id, delta, reasoning);
            }
        }
    }

    /// Marks the last text (or reasoning) part with `id` done.
    fn end_text(&mut self, id: &str, reasoning: bool) {
        let found = self.parts.rposition(|part| match (part, reasoning) {
            (Part::Text { id: part_id, .. }, false) | (Part::Reasoning { id: part_id, .. }, true) => part_id == id,
            _ => false,
        });
        if let Some(Part::Text { state, .. } | Part::Reasoning { state, .. }) =
            found.and_then(|at| self.parts.get_mut(at))
        {
            *state = TextState::Done;
        }
    }

    /// Marks every text and reasoning part done: the turn that streamed
    /// them is over, and nothing more will arrive for them (a recovery opens
    /// parts of its own).
    /// Only the parts still streaming are edited: the others stay shared
    /// with the copies the store and the last request hold.
    pub fn settle_text(&mut self) {
        self.parts.edit_streaming_text(|part| {
            if let Part::Text { state, .. } | Part::Reasoning { state, .. } = part {
                *state = TextState::Done;
            }
        });
    }

    /// First write wins: a replayed start never resets an existing part.
    fn tool_input_start(&mut self, call_id: &str, name: &str, dynamic: bool) {
        if self.tool(call_id).is_none() {
            self.parts.push(Part::Tool(ToolPart { dynamic, ..ToolPart::streaming(call_id, name) }));
        }
    }

    fn tool_input_delta(&mut self, call_id: &str, delta: &str) {
        if let Some(tool) = self.tool_mut(call_id).filter(|tool| tool.state == ToolState::InputStreaming) {
            tool.input_text.push_str(delta);
        }
    }

    fn tool_input_available(&mut self, call_id: &str, name: &str, input: Value, dynamic: bool) {
        let Some(tool) = self.tool_mut(call_id) else {
            let mut tool = ToolPart { dynamic, ..ToolPart::streaming(call_id, name) };
            tool.state = ToolState::InputAvailable;
            tool.input = Some(normalise_input(input));
            self.parts.push(Part::Tool(tool));
            return;
        };
        if tool.state == ToolState::InputStreaming {
            tool.state = ToolState::InputAvailable;
            tool.input = Some(normalise_input(input));
        }
    }

    /// Finalises every tool whose input finished streaming without a `tool-call`
    /// chunk: the provider finalises those at `finish-step`.
    pub fn finalise_streamed_tools(&mut self) -> Vec<String> {
        let mut finalised = Vec::new();
        let complete =
            |tool: &ToolPart| !tool.input_text.is_empty() && serde_json::from_str::<Value>(&tool.input_text).is_ok();
        self.parts.edit_tools_in(ToolStates::of(&[ToolState::InputStreaming]), complete, |tool| {
            let input = serde_json::from_str::<Value>(&tool.input_text).expect("checked to parse");
            tool.state = ToolState::InputAvailable;
            tool.input = Some(normalise_input(input));
            finalised.push(tool.call_id.clone());
        });
        finalised
    }

    /// Marks the tool as awaiting approval (the provider's approval request).
    pub fn request_approval(&mut self, call_id: &str, approval_id: &str) -> bool {
        match self.tool_mut(call_id) {
            Some(tool) if tool.state == ToolState::InputAvailable => {
                tool.state = ToolState::ApprovalRequested;
                tool.approval = Some(Approval { id: approval_id.to_string(), approved: None });
                true
            }
            _ => false,
        }
    }

    /// Applies a tool result (client or server). Only `input-available`,
    /// `approval-requested` and `approval-responded` parts take one; anything
    /// else is a no-op and returns false.
    pub fn apply_tool_result(&mut self, result: &ToolResult) -> bool {
        let Some(tool) = self.tool_mut(&result.call_id) else {
            return false;
        };
        let accepts = matches!(
            tool.state,
            ToolState::InputAvailable | ToolState::ApprovalRequested | ToolState::ApprovalResponded
        );
        if !accepts {
            return false;
        }
        match &result.outcome {
            ToolOutcome::Output(output) => {
                tool.state = ToolState::OutputAvailable;
                tool.output = Some(output.clone());
            }
            ToolOutcome::Error(text) => {
                tool.state = ToolState::OutputError;
                tool.error_text = Some(text.clone().unwrap_or_else(|| DEFAULT_TOOL_ERROR_TEXT.into()));
            }
        }
        true
    }

    /// Applies an approval response. Only `input-available` and
    /// `approval-requested` parts take one; the approval id is kept.
    pub fn apply_approval(&mut self, call_id: &str, approved: bool) -> bool {
        let Some(tool) = self.tool_mut(call_id) else {
            return false;
        };
        if !matches!(tool.state, ToolState::InputAvailable | ToolState::ApprovalRequested) {
            return false;
        }
        tool.state = if approved { ToolState::ApprovalResponded } else { ToolState::OutputDenied };
        let id = tool.approval.as_ref().map(|approval| approval.id.clone()).unwrap_or_default();
        tool.approval = Some(Approval { id, approved: Some(approved) });
        true
    }

    /// Rewrites every unsettled tool call to `output-error` with the repair text,
    /// except `approval-responded` (kept verbatim) and calls `keep` says to keep.
    /// Returns the repaired call ids.
    pub fn repair_tools(&mut self, keep: impl Fn(&ToolPart) -> bool) -> Vec<String> {
        let mut repaired = Vec::new();
        let unsettled = |tool: &ToolPart| !(tool.is_result_settled() || keep(tool));
        self.parts.edit_tools_in(UNSETTLED, unsettled, |tool| {
            // Normalise first (think.ts): a stored input may be stringified or not an object.
            let input = match tool.input.take() {
                Some(input) => input,
                None => serde_json::from_str::<Value>(&tool.input_text).unwrap_or(Value::Null),
            };
            tool.input = Some(normalise_input(input));
            tool.state = ToolState::OutputError;
            tool.error_text = Some(REPAIR_ERROR_TEXT.to_string());
            tool.repaired = true;
            repaired.push(tool.call_id.clone());
        });
        repaired
    }

    /// The batch predicate: at least one pending call next to at least one
    /// settled call. An all-pending message is not an incomplete batch.
    pub fn has_incomplete_tool_batch(&self) -> bool {
        let pending = self.tools_in(&PENDING).next().is_some();
        let settled = self.tools_in(&SETTLED).next().is_some();
        pending && settled
    }

    /// Call ids still waiting on someone (`input-available`, `approval-requested`).
    pub fn pending_tool_ids(&self) -> Vec<String> {
        self.tools_in(&PENDING).map(|tool| tool.call_id.clone()).collect()
    }
}

/// Tool input is always an object: a JSON string is parsed, anything else
/// that is not an object becomes `{}`.
pub fn normalise_input(input: Value) -> Value {
    match input {
        Value::Object(_) => input,
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(value @ Value::Object(_)) => value,
            _ => Value::Object(Default::default()),
        },
        _ => Value::Object(Default::default()),
    }
}

/// The last assistant message: the batch predicates look only at it.
pub fn leaf_assistant(messages: &[Message]) -> Option<&Message> {
    messages.iter().rev().find(|message| message.role == Role::Assistant)
}

/// A client interaction is pending anywhere in the transcript: an approval
/// request, or a client tool waiting for its result.
pub fn has_pending_interaction(messages: &[Message], is_client_tool: impl Fn(&str) -> bool) -> bool {
    messages.iter().filter(|message| message.role == Role::Assistant).any(|message| {
        message.tools_in(&PENDING).any(|tool| match tool.state {
            ToolState::ApprovalRequested => true,
            ToolState::InputAvailable => is_client_tool(&tool.tool_name),
            _ => false,
        })
    })
}

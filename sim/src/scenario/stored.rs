//! `stored:`: what the durable store holds when the engine first boots, as
//! after an earlier session or a crash. A list is a transcript (a dangling
//! tool call, a half-written answer); a mapping adds the durable records a
//! dead process leaves beside it: the turn it was running (`in_flight`) and
//! its open recovery incidents (`incidents`). Messages get ids `m1`, `m2`,
//! ... in order.

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use turnsim_engine::durable::{DurableState, InFlightTurn, Incident, TurnKind};
use turnsim_engine::transcript::{Approval, Message, Part, Role, TextState, ToolPart};
use turnsim_engine::ToolState;

use super::ExpectedToolState;

/// How long before boot a seeded incident's last attempt was, by default:
/// past the default alarm debounce (30 s), so boot counts a new attempt.
const DEFAULT_LAST_ATTEMPT_MS_AGO: u64 = 60_000;

/// Everything `stored:` seeds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stored {
    pub messages: Vec<StoredMessage>,
    pub in_flight: Option<StoredInFlight>,
    pub incidents: Vec<StoredIncident>,
}

/// The mapping form of `stored:`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredRecords {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<StoredMessage>,
    /// The turn the dead process was running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<StoredInFlight>,
    /// Open recovery incidents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<StoredIncident>,
}

/// The turn a dead process was running (the store's in-flight record).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredInFlight {
    pub request_id: String,
    pub kind: StoredTurnKind,
    /// Root of its recovery chain (default: `request_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_request_id: Option<String>,
    /// The stored assistant message it was streaming into; omitted when
    /// none of its answer was written (the engine names a fresh one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether model output of it reached the store (default: whether
    /// `message` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_started: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoredTurnKind {
    User,
    Chat,
    Continuation,
    Recovery,
}

impl StoredTurnKind {
    fn kind(self) -> TurnKind {
        match self {
            Self::User => TurnKind::User,
            Self::Chat => TurnKind::Chat,
            Self::Continuation => TurnKind::Continuation,
            Self::Recovery => TurnKind::Recovery,
        }
    }
}

/// An open (attempting) recovery incident with no alarm pending: the
/// incident a process died holding. Its id is `root_request_id:about`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredIncident {
    /// The request that first failed (the incident's key).
    pub root_request_id: String,
    /// The stored user message the incident is about (the latest when it opened).
    pub about: String,
    /// Attempts spent so far, from 1.
    pub attempt: u32,
    /// How long before boot its last attempt was (default 60 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_ms_ago: Option<u64>,
    /// How long before boot it last saw progress (default: its last attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress_ms_ago: Option<u64>,
}

impl StoredIncident {
    pub fn id(&self) -> String {
        format!("{}:{}", self.root_request_id, self.about)
    }
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum StoredSchema {
    Transcript(Vec<StoredMessage>),
    Records(StoredRecords),
}

impl JsonSchema for Stored {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Stored".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        StoredSchema::json_schema(generator)
    }
}

impl Stored {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn records(&self) -> StoredRecords {
        StoredRecords {
            messages: self.messages.clone(),
            in_flight: self.in_flight.clone(),
            incidents: self.incidents.clone(),
        }
    }
}

impl From<StoredRecords> for Stored {
    fn from(records: StoredRecords) -> Self {
        Self { messages: records.messages, in_flight: records.in_flight, incidents: records.incidents }
    }
}

impl Serialize for Stored {
    /// A transcript alone stays a list, as it was written.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.in_flight.is_none() && self.incidents.is_empty() {
            self.messages.serialize(serializer)
        } else {
            self.records().serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for Stored {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StoredVisitor;
        impl<'de> Visitor<'de> for StoredVisitor {
            type Value = Stored;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a list of messages, or { messages, in_flight, incidents }")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Stored, A::Error> {
                let messages = Vec::<StoredMessage>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Stored { messages, ..Stored::default() })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Stored, A::Error> {
                StoredRecords::deserialize(de::value::MapAccessDeserializer::new(map)).map(Stored::from)
            }
        }
        deserializer.deserialize_any(StoredVisitor)
    }
}

/// One stored message: `user: "text"` or `assistant: [parts]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StoredMessage {
    User(String),
    Assistant(Vec<StoredPart>),
}

/// A part of a stored assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StoredPart {
    StepStart,
    Text(String),
    /// Text the stream was still writing when it stopped.
    StreamingText(String),
    Reasoning(String),
    Tool(StoredTool),
}

/// A stored tool part in any state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredTool {
    pub id: String,
    pub name: String,
    pub state: ExpectedToolState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The id of the approval an `approval-requested` part waits on (or an
    /// `approval-responded` / `output-denied` part was answered under).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// A tool defined at run time: a `dynamic-tool` part.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
}

/// Why a `stored:` cannot be stored: where (a YAML path) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredError {
    pub at: String,
    pub message: String,
}

impl StoredError {
    fn new(at: impl Into<String>, message: impl Into<String>) -> Self {
        Self { at: at.into(), message: message.into() }
    }
}

/// The durable state a scenario's `stored:` describes, for an engine first
/// booted at wall time `boot_wall_ms` (seeded incidents' times are before
/// it); `Err` names what no engine could have stored.
pub fn durable_state(stored: &Stored, boot_wall_ms: u64) -> Result<DurableState, StoredError> {
    let mut state = DurableState { messages: messages(&stored.messages)?, ..DurableState::default() };
    // Ids the engine makes next must not collide with the stored ones; a
    // dead turn whose answer was never written had drawn the next one.
    let highest = highest_id(stored);
    let fresh_answer = format!("m{}", highest + 1);
    state.in_flight =
        stored.in_flight.as_ref().map(|turn| in_flight(turn, &state.messages, &fresh_answer)).transpose()?;
    for (index, seeded) in stored.incidents.iter().enumerate() {
        let incident = incident(index, seeded, &state.messages, boot_wall_ms)?;
        if state.incidents.insert(incident.id.clone(), incident).is_some() {
            let message = format!("incident {}: two stored incidents have this id", seeded.id());
            return Err(StoredError::new(format!("stored.incidents[{index}]"), message));
        }
    }
    let answer_drawn = state.in_flight.as_ref().is_some_and(|turn| turn.message_id == fresh_answer);
    state.next_id = highest + u64::from(answer_drawn);
    Ok(state)
}

fn messages(stored: &[StoredMessage]) -> Result<Vec<Message>, StoredError> {
    let mut tool_ids = BTreeSet::new();
    let mut messages = Vec::new();
    for (index, stored) in stored.iter().enumerate() {
        let at = format!("stored.messages[{index}]");
        let id = format!("m{}", index + 1);
        check_texts(&id, stored).map_err(|message| StoredError::new(&at, message))?;
        let message = message(id, stored).map_err(|message| StoredError::new(&at, message))?;
        for tool in message.tools() {
            if !tool_ids.insert(tool.call_id.clone()) {
                // An engine keys a tool's results by its id: two calls
                // under one id are a transcript no engine could have written.
                let message = format!("tool {}: two stored tool calls have this id", tool.call_id);
                return Err(StoredError::new(&at, message));
            }
        }
        messages.push(message);
    }
    Ok(messages)
}

/// The in-flight record; its message must be a stored assistant message,
/// and a turn that extends an answer (a continuation, a recovery) has one.
fn in_flight(turn: &StoredInFlight, messages: &[Message], fresh_answer: &str) -> Result<InFlightTurn, StoredError> {
    let error = |field: &str, message: String| Err(StoredError::new(format!("stored.in_flight.{field}"), message));
    if turn.request_id.trim().is_empty() {
        return error("request_id", "an in-flight turn has a request id".into());
    }
    let kind = turn.kind.kind();
    let message_id = match turn.message.as_deref() {
        Some(id) => match messages.iter().find(|message| message.id == id) {
            Some(message) if message.role == Role::Assistant => id.to_string(),
            Some(_) => {
                return error("message", format!("{id} is a user message; a turn streams into an assistant message"))
            }
            None => return error("message", format!("no stored message {id}")),
        },
        None if kind.continues_answer() => {
            let message = format!("a {} turn extends a stored answer: name it in `message`", kind.as_str());
            return error("kind", message);
        }
        // Never written: the id the dead process had drawn for its answer.
        None => fresh_answer.to_string(),
    };
    let stream_started = turn.stream_started.unwrap_or(turn.message.is_some());
    if stream_started && turn.message.is_none() {
        return error("stream_started", "a turn whose output reached the store has a stored `message`".into());
    }
    Ok(InFlightTurn {
        request_id: turn.request_id.clone(),
        kind,
        root_request_id: turn.root_request_id.clone().unwrap_or_else(|| turn.request_id.clone()),
        message_id,
        stream_started,
        delivery_id: None,
    })
}

fn incident(
    index: usize,
    seeded: &StoredIncident,
    messages: &[Message],
    boot_wall_ms: u64,
) -> Result<Incident, StoredError> {
    let error =
        |field: &str, message: String| Err(StoredError::new(format!("stored.incidents[{index}].{field}"), message));
    if seeded.root_request_id.trim().is_empty() {
        return error("root_request_id", "an incident has the request id that first failed".into());
    }
    match messages.iter().find(|message| message.id == seeded.about) {
        Some(message) if message.role == Role::User => {}
        Some(_) => {
            return error(
                "about",
                format!("{} is an assistant message; an incident is about a user message", seeded.about),
            )
        }
        None => return error("about", format!("no stored message {}", seeded.about)),
    }
    if seeded.attempt == 0 {
        return error("attempt", "attempts count from 1".into());
    }
    let last_attempt_ms_ago = seeded.last_attempt_ms_ago.unwrap_or(DEFAULT_LAST_ATTEMPT_MS_AGO);
    let last_progress_ms_ago = seeded.last_progress_ms_ago.unwrap_or(last_attempt_ms_ago);
    let first_seen_ms_ago = last_attempt_ms_ago.max(last_progress_ms_ago);
    Ok(Incident {
        id: seeded.id(),
        root_request_id: seeded.root_request_id.clone(),
        attempt: seeded.attempt,
        first_seen_ms: boot_wall_ms.saturating_sub(first_seen_ms_ago),
        last_attempt_ms: boot_wall_ms.saturating_sub(last_attempt_ms_ago),
        last_progress_ms: boot_wall_ms.saturating_sub(last_progress_ms_ago),
        progress: 0,
        status: "attempting".into(),
        hook_owed: None,
    })
}

/// The highest number in an engine-made id (`r7`, `m12`) `stored` names.
fn highest_id(stored: &Stored) -> u64 {
    let turn = stored.in_flight.iter().flat_map(|turn| {
        [Some(turn.request_id.as_str()), turn.root_request_id.as_deref(), turn.message.as_deref()].into_iter().flatten()
    });
    let roots = stored.incidents.iter().map(|incident| incident.root_request_id.as_str());
    let number = |id: &str| id.strip_prefix(['r', 'm']).and_then(|digits| digits.parse::<u64>().ok());
    turn.chain(roots).filter_map(number).fold(stored.messages.len() as u64, u64::max)
}

fn message(id: String, stored: &StoredMessage) -> Result<Message, String> {
    match stored {
        StoredMessage::User(text) => Ok(Message::user(id, text)),
        StoredMessage::Assistant(parts) => {
            let mut message = Message::assistant(id);
            for (index, part) in parts.iter().enumerate() {
                message.parts.push(assistant_part(index, part)?);
            }
            debug_assert_eq!(message.role, Role::Assistant);
            Ok(message)
        }
    }
}

fn assistant_part(index: usize, part: &StoredPart) -> Result<Part, String> {
    let id = format!("s{index}");
    Ok(match part {
        StoredPart::StepStart => Part::StepStart,
        StoredPart::Text(text) => Part::Text { id, text: text.clone(), state: TextState::Done },
        StoredPart::StreamingText(text) => Part::Text { id, text: text.clone(), state: TextState::Streaming },
        StoredPart::Reasoning(text) => Part::Reasoning { id, text: text.clone(), state: TextState::Done },
        StoredPart::Tool(tool) => Part::Tool(tool_part(tool)?),
    })
}

/// Stored text is what a person typed or a model wrote: line breaks and
/// tabs, never another control character (it would reach a terminal, a
/// snapshot and the engine's JSON as it is).
fn check_texts(id: &str, stored: &StoredMessage) -> Result<(), String> {
    let texts: Vec<&str> = match stored {
        StoredMessage::User(text) => vec![text],
        StoredMessage::Assistant(parts) => parts
            .iter()
            .filter_map(|part| match part {
                StoredPart::Text(text) | StoredPart::StreamingText(text) | StoredPart::Reasoning(text) => {
                    Some(text.as_str())
                }
                StoredPart::Tool(tool) => tool.error.as_deref(),
                StoredPart::StepStart => None,
            })
            .collect(),
    };
    let control = texts.iter().flat_map(|text| text.chars()).find(|c| c.is_control() && *c != '\n' && *c != '\t');
    match control {
        Some(c) => Err(format!("message {id}: a stored text holds the control character U+{:04X}", c as u32)),
        None => Ok(()),
    }
}

fn tool_part(tool: &StoredTool) -> Result<ToolPart, String> {
    if tool.output.is_some() && tool.error.is_some() {
        return Err(format!("tool {}: a stored tool has an `output` or an `error`, not both", tool.id));
    }
    let state =
        tool.state.tool_state().ok_or_else(|| format!("tool {}: a stored part has a state, not `absent`", tool.id))?;
    let approval = approval(tool, state)?;
    let input = tool.input.clone().unwrap_or_else(|| Value::Object(Default::default()));
    Ok(ToolPart {
        call_id: tool.id.clone(),
        tool_name: tool.name.clone(),
        state,
        input_text: input.to_string(),
        input: (state != ToolState::InputStreaming).then_some(input),
        output: tool.output.clone(),
        error_text: tool.error.clone(),
        approval,
        repaired: false,
        dynamic: tool.dynamic,
    })
}

/// An approval id goes on a part an approval is asked or answered for; the
/// state says how it was answered.
fn approval(tool: &StoredTool, state: ToolState) -> Result<Option<Approval>, String> {
    let Some(id) = tool.approval_id.clone() else {
        return Ok(None);
    };
    let approved = match state {
        ToolState::ApprovalRequested => None,
        ToolState::ApprovalResponded => Some(true),
        ToolState::OutputDenied => Some(false),
        other => {
            let message = format!(
                "tool {}: an `approval_id` goes on an approval-requested, approval-responded or output-denied part, not {}",
                tool.id,
                other.as_str()
            );
            return Err(message);
        }
    };
    if id.trim().is_empty() {
        return Err(format!("tool {}: an `approval_id` is not empty", tool.id));
    }
    Ok(Some(Approval { id, approved }))
}

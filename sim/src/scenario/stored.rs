//! `stored:`: a transcript already in the durable store when the engine
//! first boots, as after an earlier session or a crash (a dangling tool
//! call, a half-written answer). Messages get ids `m1`, `m2`, ... in order.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnsim_engine::durable::DurableState;
use turnsim_engine::transcript::{Message, Part, Role, TextState, ToolPart};

use super::ExpectedToolState;

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
    /// A tool defined at run time: a `dynamic-tool` part.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
}

/// The durable state a scenario's `stored:` describes; `Err` names a part
/// that cannot be stored (a tool `absent`).
pub fn durable_state(messages: &[StoredMessage]) -> Result<DurableState, String> {
    let mut state = DurableState::default();
    let mut tool_ids = std::collections::BTreeSet::new();
    for (index, stored) in messages.iter().enumerate() {
        let id = format!("m{}", index + 1);
        check_texts(&id, stored)?;
        let message = message(id, stored)?;
        for part in &message.parts {
            if let Part::Tool(tool) = part {
                if !tool_ids.insert(tool.call_id.clone()) {
                    // An engine keys a tool's results by its id: two calls
                    // under one id are a transcript no engine could have written.
                    return Err(format!("tool {}: two stored tool calls have this id", tool.call_id));
                }
            }
        }
        state.messages.push(message);
    }
    // Ids the engine makes next must not collide with the stored ones.
    state.next_id = messages.len() as u64;
    Ok(state)
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
    let input = tool.input.clone().unwrap_or_else(|| Value::Object(Default::default()));
    Ok(ToolPart {
        call_id: tool.id.clone(),
        tool_name: tool.name.clone(),
        state,
        input_text: input.to_string(),
        input: (state != turnsim_engine::ToolState::InputStreaming).then_some(input),
        output: tool.output.clone(),
        error_text: tool.error.clone(),
        approval: None,
        repaired: false,
        dynamic: tool.dynamic,
    })
}

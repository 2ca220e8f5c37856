//! The model stream protocol: the chunks a provider streams for one model call,
//! modelled on the AI SDK's stream parts, and the errors a stream can end with.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a model step ended, as the provider reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Error,
    /// The provider gave no stop reason (the AI SDK's `other`).
    Unknown,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool-calls",
            Self::Length => "length",
            Self::ContentFilter => "content-filter",
            Self::Error => "error",
            Self::Unknown => "unknown",
        }
    }

    /// Whether a step that ends so runs its server tools: only a `stop` or
    /// `tool-calls` finish does, as in `ai` 7.0.173
    /// (`isToolExecutionAllowedFinishReason`); a step cut by `length`, a
    /// content filter, an error or an unknown reason leaves its calls unrun.
    pub fn allows_tool_execution(self) -> bool {
        matches!(self, Self::Stop | Self::ToolCalls)
    }
}

/// Token usage the provider reports with a finished step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u32,
    pub output_tokens: u32,
}

crate::tag_first! {
    #[serde(tag = "type", rename_all = "kebab-case")]
    /// One chunk of a model stream.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum Chunk {
        TextStart {
            id: String,
        },
        TextDelta {
            id: String,
            delta: String,
        },
        TextEnd {
            id: String,
        },
        ReasoningStart {
            id: String,
        },
        ReasoningDelta {
            id: String,
            delta: String,
        },
        ReasoningEnd {
            id: String,
        },
        ToolInputStart {
            id: String,
            name: String,
            /// A tool defined at run time (an MCP tool): stored as a
            /// `dynamic-tool` part.
            #[serde(default, skip_serializing_if = "is_false")]
            dynamic: bool,
        },
        ToolInputDelta {
            id: String,
            delta: String,
        },
        ToolInputEnd {
            id: String,
        },
        /// The provider finalised a tool call: the tool becomes `input-available`
        /// mid-stream. Without it a tool is only finalised at `finish-step`.
        ToolCall {
            id: String,
            name: String,
            input: Value,
            #[serde(default, skip_serializing_if = "is_false")]
            dynamic: bool,
        },
        FinishStep {
            reason: FinishReason,
            usage: Usage,
        },
        Finish {
            reason: FinishReason,
        },
        /// An in-band error chunk.
        Error {
            message: String,
        },
    }
}

impl Chunk {
    /// The chunk's protocol name, as it appears in traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TextStart { .. } => "text-start",
            Self::TextDelta { .. } => "text-delta",
            Self::TextEnd { .. } => "text-end",
            Self::ReasoningStart { .. } => "reasoning-start",
            Self::ReasoningDelta { .. } => "reasoning-delta",
            Self::ReasoningEnd { .. } => "reasoning-end",
            Self::ToolInputStart { .. } => "tool-input-start",
            Self::ToolInputDelta { .. } => "tool-input-delta",
            Self::ToolInputEnd { .. } => "tool-input-end",
            Self::ToolCall { .. } => "tool-call",
            Self::FinishStep { .. } => "finish-step",
            Self::Finish { .. } => "finish",
            Self::Error { .. } => "error",
        }
    }

    /// Carries output (what token counts measure), not bare framing.
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Self::TextDelta { .. } | Self::ReasoningDelta { .. } | Self::ToolInputDelta { .. } | Self::ToolCall { .. }
        )
    }

    /// A short stable rendering for timelines: the kind and the chunk's key field.
    pub fn summary(&self) -> String {
        match self {
            Self::TextStart { id }
            | Self::TextEnd { id }
            | Self::ReasoningStart { id }
            | Self::ReasoningEnd { id }
            | Self::ToolInputEnd { id } => format!("{} {id}", self.kind()),
            Self::TextDelta { delta, .. } | Self::ReasoningDelta { delta, .. } => {
                format!("{} {delta:?}", self.kind())
            }
            Self::ToolInputStart { id, name, dynamic } | Self::ToolCall { id, name, dynamic, .. } => {
                let dynamic = if *dynamic { " (dynamic)" } else { "" };
                format!("{} {id} {name}{dynamic}", self.kind())
            }
            Self::ToolInputDelta { id, delta } => format!("{} {id} {delta:?}", self.kind()),
            Self::FinishStep { reason, usage } => {
                format!("finish-step {} out={}", reason.as_str(), usage.output_tokens)
            }
            Self::Finish { reason } => format!("finish {}", reason.as_str()),
            Self::Error { message } => format!("error {message:?}"),
        }
    }
}

/// How a model stream can fail outside the chunk protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamError {
    /// The connection to the provider dropped mid-stream.
    Cut,
    /// The provider answered with an HTTP error status (429, 5xx, 400 ...).
    Http { status: u16, message: String },
}

impl StreamError {
    /// Rate limits and server errors are worth retrying; a cut or a 4xx is not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Http { status, .. } if *status == 429 || *status >= 500)
    }

    pub fn message(&self) -> String {
        match self {
            Self::Cut => "model stream cut: connection closed mid-stream".to_string(),
            Self::Http { status, message } if message.is_empty() => format!("provider error {status}"),
            Self::Http { status, message } => format!("provider error {status}: {message}"),
        }
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

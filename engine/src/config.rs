//! Engine configuration. Defaults are the reference engine's constants:
//!
//! | setting | default |
//! |---|---|
//! | `coalesce_ms` | 50 |
//! | `stall_timeout_ms` | 0 (watchdog off) |
//! | `recovery.enabled` | true |
//! | `recovery.max_attempts` | 10 |
//! | `recovery.stable_timeout_ms` | 10 000 |
//! | `recovery.stable_retry_delay_ms` | 3 000 |
//! | `recovery.no_progress_window_ms` | 300 000 |
//! | `recovery.alarm_debounce_ms` | 30 000 |
//! | `recovery.alarm_delay_ms` | 1 000 |
//! | `max_model_calls_empty_finish` | 3 |
//! | `max_model_calls_http_retry` | 4 |
//! | `retry_initial_delay_ms` | 2 000 (doubling, at most 30 s) |
//! | `max_steps` | 16 |
//! | `messenger_post_limit_chars` | 2 000 |

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::regression::RegressionSet;

/// Who answers a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// The engine executes it.
    Server,
    /// The client answers it.
    Client,
    /// A client tool a person answers: may take minutes.
    Human,
    /// A server tool that needs the client's approval before it runs.
    Approval,
    /// A tool that needs the client's approval and has no server executor
    /// (the AI SDK's `needsApproval` without `execute`): once approved, the
    /// client runs it and sends the result.
    #[serde(rename = "client_approval")]
    ClientApproval,
}

impl ToolKind {
    /// Answered by the client (or a person behind it), not the engine.
    pub fn is_client_answered(self) -> bool {
        matches!(self, Self::Client | Self::Human | Self::ClientApproval)
    }

    /// The engine asks the client to approve each call before it runs.
    pub fn needs_approval(self) -> bool {
        matches!(self, Self::Approval | Self::ClientApproval)
    }
}

/// When the engine runs a server tool the model called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServerToolStart {
    /// As soon as its `tool-call` chunk arrives, while the rest of the step
    /// streams on: a stall, a provider error or an eviction later in the
    /// stream finds it already run (as the AI SDK before 7 did).
    AtToolCall,
    /// Once the step's stream has finished: no server tool has run while a
    /// stream could still stall, fail or be evicted. The default, because
    /// it is what the reference does: the AI SDK 7's `streamText`, under
    /// Think 0.23.0 (`ai ^7.0.0`) and the AI SDK's `Chat`, queues each call
    /// and executes them at the model call's end, and only when the call
    /// ended `stop` or `tool-calls` (`isToolExecutionAllowedFinishReason`):
    /// a step cut by `length`, a content filter or an error runs none, and
    /// the turn ends there with the calls unrun.
    #[default]
    AfterStep,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryConfig {
    pub enabled: bool,
    pub max_attempts: u32,
    pub stable_timeout_ms: u64,
    pub stable_retry_delay_ms: u64,
    pub no_progress_window_ms: u64,
    pub alarm_debounce_ms: u64,
    /// How long a scheduled recovery alarm takes to wake the session: the
    /// recovery runs in a later invocation, not inline.
    pub alarm_delay_ms: u64,
    pub terminal_message: String,
}

impl RecoveryConfig {
    /// The attempt budget: at least one, as the reference's
    /// `max(1, maxAttempts)`; 0 does not mean "never recover".
    pub fn effective_max_attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }
}

pub const DEFAULT_TERMINAL_MESSAGE: &str = "The assistant was interrupted and could not recover. Please try again.";

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_attempts: 10,
            stable_timeout_ms: 10_000,
            stable_retry_delay_ms: 3_000,
            no_progress_window_ms: 300_000,
            alarm_debounce_ms: 30_000,
            alarm_delay_ms: 1_000,
            terminal_message: DEFAULT_TERMINAL_MESSAGE.to_string(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Tool name → who answers it. A tool the model calls that is not listed
    /// here is treated as a client tool.
    pub tools: BTreeMap<String, ToolKind>,
    /// Tools defined at run time (MCP tools, the AI SDK's `dynamicTool`):
    /// their calls are stored and streamed as `dynamic-tool` parts.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub dynamic_tools: BTreeSet<String>,
    /// When server tools run.
    #[serde(default)]
    pub server_tools: ServerToolStart,
    pub coalesce_ms: u64,
    /// Longest gap between chunks before the watchdog aborts the stream; 0 = off.
    pub stall_timeout_ms: u64,
    pub recovery: RecoveryConfig,
    /// Model calls per step when the provider truncates (empty `unknown` finish).
    pub max_model_calls_empty_finish: u32,
    /// Model calls per step for 429/5xx before the error is surfaced.
    pub max_model_calls_http_retry: u32,
    /// Backoff before the first retry of a step's model call (429/5xx, or
    /// a truncated finish); it doubles per retry, at most 30 s. opencode's
    /// `RETRY_INITIAL_DELAY`.
    pub retry_initial_delay_ms: u64,
    pub max_steps: u32,
    /// Longest single messenger post; a longer reply is split, after
    /// whitespace where possible.
    #[serde(default = "default_post_limit")]
    pub messenger_post_limit_chars: std::num::NonZeroUsize,
    pub regressions: RegressionSet,
}

fn default_post_limit() -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(crate::post::POST_SOFT_LIMIT_CHARS).expect("a positive default")
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            tools: BTreeMap::new(),
            dynamic_tools: BTreeSet::new(),
            server_tools: ServerToolStart::AfterStep,
            coalesce_ms: 50,
            stall_timeout_ms: 0,
            recovery: RecoveryConfig::default(),
            max_model_calls_empty_finish: 3,
            max_model_calls_http_retry: 4,
            retry_initial_delay_ms: 2_000,
            max_steps: 16,
            messenger_post_limit_chars: default_post_limit(),
            regressions: RegressionSet::default(),
        }
    }
}

impl EngineConfig {
    pub fn tool_kind(&self, name: &str) -> ToolKind {
        self.tools.get(name).copied().unwrap_or(ToolKind::Client)
    }

    pub fn is_client_tool(&self, name: &str) -> bool {
        self.tool_kind(name).is_client_answered()
    }
}

/// Per-turn settings a caller may pass with a message (the reference's
/// `beforeTurn` → `TurnConfig`). `None` takes the session's setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOptions {
    /// Overrides `EngineConfig::stall_timeout_ms` for this turn; 0 = off.
    pub stall_timeout_ms: Option<u64>,
}

//! The engine's ports: the narrow traits through which it sees the world.
//!
//! A simulator (or a production host) implements these; the engine never
//! reaches past them. Everything is synchronous except the model stream,
//! server-tool results and the chat surface's answers to posts, which come
//! back to the engine as inputs.

use std::sync::Arc;

use crate::chunk::Chunk;
use crate::durable::{DurableState, Write};
use crate::events::EngineEvent;
use crate::seam::InputSink;
use crate::transcript::{Message, ToolState};
use serde::{Deserialize, Serialize};

/// Transactional storage that survives eviction.
pub trait DurableStore: Send + Sync {
    fn load(&self) -> DurableState;
    /// Commits the batch atomically: all writes or none.
    fn commit(&self, writes: &[Write]) -> Result<(), StoreError>;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError(pub String);

/// What the engine sends a model for one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub request_id: String,
    pub step: u32,
    pub continuation: bool,
    pub messages: Vec<Message>,
}

/// The model provider. A call's chunks come back to the engine as
/// [`crate::Input::Model`] inputs on `sink`, numbered with the call's number.
pub trait ModelProvider: Send + Sync {
    /// Starts a call; returns its number.
    fn start(&self, request: ModelRequest, sink: InputSink) -> u32;
    /// The engine lets go of the call: nothing more of it is delivered.
    fn cancel(&self, call: u32);
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerToolCall {
    pub call_id: String,
    pub tool_name: String,
    pub input: serde_json::Value,
}

/// Executes server tools. The result comes back to the engine as an
/// [`crate::Input::ServerToolDone`] on `sink`.
pub trait ServerTools: Send + Sync {
    fn start(&self, request_id: &str, call: ServerToolCall, sink: InputSink);
}

/// What the engine sends a connected client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Frame {
    /// The whole transcript, sent on connect.
    Messages(Vec<Message>),
    /// A stream chunk of a turn, streamed into message `message_id` (a new
    /// assistant message the first time the client sees that id).
    Chunk { request_id: String, message_id: String, chunk: Chunk },
    /// The engine took back what a failed attempt streamed (a retry will
    /// replace it): `message` is the message as it now stands, to show in
    /// place of the one with its id.
    Reset { request_id: String, message: Message },
    /// A tool call reached a state the client may act on.
    Tool { call_id: String, tool_name: String, state: ToolState },
    /// A turn's stream ended normally.
    Done { request_id: String, continuation: bool },
    /// A turn's stream ended with an error (or a terminal recovery message).
    Error { request_id: String, message: String },
    /// Recovery is in progress (replayed on connect).
    Recovering(bool),
    /// The answer to a resume request while turn `request_id` runs: nothing
    /// more is sent on this connection until the client acks it; then the
    /// live transcript, then the turn's chunks as they come.
    StreamResuming { request_id: String },
    /// The answer to a resume request while no turn runs.
    ResumeNone,
}

/// One client connection (a WebSocket in production).
pub trait Connection: Send {
    /// Returns false once the connection is closed.
    fn send(&self, frame: Frame) -> bool;
}

/// The `chat()` RPC callback: `on_start → (on_event | on_reset)* → exactly
/// one of on_done | on_error | on_interrupted`.
pub trait StreamCallback: Send {
    fn on_start(&mut self, request_id: &str);
    fn on_event(&mut self, chunk: &Chunk);
    /// A failed attempt's output is taken back (the provider cut the stream
    /// or truncated it, and the step is retried): everything `on_event`
    /// delivered since `on_start` is void, and the turn's text so far is
    /// `text`. A consumer shows `text` in place of what it collected.
    fn on_reset(&mut self, text: &str);
    fn on_done(&mut self);
    fn on_error(&mut self, message: &str);
    /// The attempt was cut (stall, recovery scheduled or exhausted): not done,
    /// not a terminal error.
    fn on_interrupted(&mut self);
}

/// Receives the engine's observability events.
pub trait Observer: Send + Sync {
    fn observe(&self, event: EngineEvent);

    /// The session handled its last waiting input and nothing is running or
    /// armed: a host may let the process sleep.
    fn idle(&self) {}

    /// Recovery gave up on an incident (called exactly once per incident,
    /// before the terminal message goes out): the host's `onExhausted`. A
    /// hook that fails has still run: it is not called again, and the
    /// terminal message goes out all the same.
    fn on_exhausted(&self, _context: &ExhaustedContext) -> Result<(), HookError> {
        Ok(())
    }
}

/// A host hook failed (threw, in a JavaScript host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookError(pub String);

/// What a host learns when recovery gives up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExhaustedContext {
    pub incident_id: String,
    pub root_request_id: String,
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: String,
    pub terminal_message: String,
    /// The text of the partial the interrupted turn left.
    pub partial_text: String,
}

/// Places where the engine may take a correct but unlucky path, so a
/// simulator can push it off its happy path (FoundationDB's BUGGIFY). A
/// production host answers `false` everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultSite {
    /// Skip a periodic mid-stream flush: less of the partial is durable.
    SkipProgressFlush,
    /// The coalesce timer fires twenty times later than configured.
    SlowCoalesceTimer,
    /// A recovery alarm wakes the session five seconds late.
    LateAlarm,
    /// A provider retry backs off twice as long.
    SlowRetryBackoff,
}

pub const ALL_FAULT_SITES: [FaultSite; 4] =
    [FaultSite::SkipProgressFlush, FaultSite::SlowCoalesceTimer, FaultSite::LateAlarm, FaultSite::SlowRetryBackoff];

impl FaultSite {
    pub fn name(self) -> &'static str {
        match self {
            Self::SkipProgressFlush => "skip-progress-flush",
            Self::SlowCoalesceTimer => "slow-coalesce-timer",
            Self::LateAlarm => "late-alarm",
            Self::SlowRetryBackoff => "slow-retry-backoff",
        }
    }
}

pub trait FaultPoints: Send + Sync {
    /// Whether the engine takes the unlucky path at `site` this time.
    fn fire(&self, site: FaultSite) -> bool;
}

/// No fault points: the host's default.
pub struct NoFaults;

impl FaultPoints for NoFaults {
    fn fire(&self, _site: FaultSite) -> bool {
        false
    }
}

/// Everything the engine needs from its host.
#[derive(Clone)]
pub struct Ports {
    pub store: Arc<dyn DurableStore>,
    pub model: Arc<dyn ModelProvider>,
    pub server_tools: Arc<dyn ServerTools>,
    pub observer: Arc<dyn Observer>,
    pub surface: Arc<dyn crate::messenger::MessengerSurface>,
    pub faults: Arc<dyn FaultPoints>,
}

//! The engine's ports: the narrow traits through which it sees the world.
//!
//! A simulator (or a production host) implements these; the engine never
//! reaches past them. Everything is synchronous except the model stream,
//! server-tool results and the chat surface's answers to posts, which come
//! back to the engine as inputs.
//!
//! The ports every input may carry (a client connection, a `chat()`
//! callback) live in [`crate::client`] and are re-exported here.

use std::sync::Arc;

use crate::durable::{DurableState, Write};
use crate::events::EngineEvent;
use crate::input::InputSink;
use crate::transcript::Message;
use serde::{Deserialize, Serialize};

pub use crate::client::{Connection, Frame, StreamCallback};

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

/// A chat surface the reply is posted to.
pub trait MessengerSurface: Send + Sync {
    /// Starts posting `text`; returns the post's number. The surface's
    /// answer comes back on `sink` as [`crate::Input::PostDone`] with that
    /// number, when the surface answers (a post can take time, and the
    /// engine handles other inputs meanwhile).
    fn post(&self, delivery_id: &str, text: &str, sink: InputSink) -> u32;
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
    pub surface: Arc<dyn MessengerSurface>,
    pub faults: Arc<dyn FaultPoints>,
}

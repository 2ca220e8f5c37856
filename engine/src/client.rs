//! The client side of the engine: the frames a connected client is sent,
//! the connection they go over, and the callback of the `chat()` RPC.
//!
//! These are ports, and [`crate::ports`] re-exports them; they live apart
//! because every input the engine takes may carry one (a connection on
//! connect, a callback with a `chat()` call), so they sit below the seam's
//! inputs while the other ports, which send inputs back, sit above them.

use crate::chunk::Chunk;
use crate::transcript::{Message, ToolState};
use serde::{Deserialize, Serialize};

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

impl Frame {
    /// The request whose stream this frame is part of: its chunks, a
    /// take-back, its end. An offer to resume names a request but is not
    /// part of its stream.
    pub fn stream_request(&self) -> Option<&str> {
        match self {
            Self::Chunk { request_id, .. }
            | Self::Reset { request_id, .. }
            | Self::Done { request_id, .. }
            | Self::Error { request_id, .. } => Some(request_id),
            _ => None,
        }
    }
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

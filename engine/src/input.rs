//! What comes into an engine: the inputs it is driven by, one at a time,
//! and the sink through which ports send back what they produce (model
//! chunks, server-tool results, the chat surface's answers to posts).
//!
//! The inputs carry client ports (a connection, a `chat()` callback) and the
//! ports that produce inputs take a sink, so this module sits between
//! [`crate::client`] below and [`crate::ports`] above; [`crate::seam`]
//! re-exports all of it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::chunk::{Chunk, StreamError};
use crate::client::{Connection, StreamCallback};
use crate::config::TurnOptions;
use crate::post::PostError;
use crate::transcript::{ToolOutcome, ToolResult};

/// One input to an engine.
pub enum Input {
    Connect {
        connection_id: u64,
        connection: Box<dyn Connection>,
    },
    Disconnect {
        connection_id: u64,
    },
    /// The client on `connection_id` asks to resume the stream in progress
    /// (answered `StreamResuming` or `ResumeNone`).
    ResumeRequest {
        connection_id: u64,
    },
    /// The client is ready for the stream it was offered.
    ResumeAck {
        connection_id: u64,
        request_id: String,
    },
    /// A user message over a client connection; the reply is broadcast.
    UserMessage {
        text: String,
        options: TurnOptions,
    },
    /// The `chat()` RPC: the reply goes to `callback`. `key` names the call,
    /// as its caller chose it: a call delivered again under a key already
    /// taken is the same call, and changes nothing.
    Chat {
        key: String,
        text: String,
        options: TurnOptions,
        callback: Box<dyn StreamCallback>,
    },
    /// A messenger delivery, answered once through the messenger surface.
    Deliver {
        delivery_id: String,
        text: String,
    },
    ToolResult {
        result: ToolResult,
        auto_continue: bool,
    },
    Approval {
        call_id: String,
        approved: bool,
        auto_continue: bool,
    },
    /// What model call `call` (the number [`crate::ModelProvider::start`]
    /// returned) produced next.
    Model {
        call: u32,
        event: ModelEvent,
    },
    /// A server tool finished; `None` when its execution was lost.
    ServerToolDone {
        request_id: String,
        call_id: String,
        outcome: Option<ToolOutcome>,
    },
    /// The chat surface answered post `post` (the number
    /// [`crate::ports::MessengerSurface::post`] returned): shown, or
    /// refused and not shown.
    PostDone {
        post: u32,
        delivery_id: String,
        outcome: Result<(), PostError>,
    },
    /// The time the engine asked to be woken at has come.
    Timer,
}

/// The next thing a model call produced.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    Chunk(Chunk),
    Failed(StreamError),
    /// The stream ended (after its finish, or cut short without one).
    Closed,
}

/// Where ports send what comes back to the engine (model chunks, server
/// tool results). It belongs to one process: once that process is gone,
/// sends fail, as a dropped connection's would.
#[derive(Clone)]
pub struct InputSink {
    sender: mpsc::UnboundedSender<Input>,
    /// Sent and not yet handled, so nobody calls the engine idle while
    /// work waits in its inbox.
    waiting: Arc<AtomicUsize>,
}

impl InputSink {
    pub(crate) fn channel() -> (Self, mpsc::UnboundedReceiver<Input>) {
        let (sender, inbox) = mpsc::unbounded_channel();
        (Self { sender, waiting: Default::default() }, inbox)
    }

    /// Returns false once the process the sink belongs to is gone.
    pub fn send(&self, input: Input) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let sent = self.sender.send(input).is_ok();
        if !sent {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        sent
    }

    pub(crate) fn handled(&self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// A sink whose inputs go nowhere, for an engine hosted where inputs
    /// arrive another way (a process serving the protocol).
    pub fn detached() -> Self {
        Self::channel().0
    }
}

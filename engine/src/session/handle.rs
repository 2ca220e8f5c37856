//! The session's public face: how a host (or a simulator) talks to it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::{Input, Session, Timers};
use crate::config::{EngineConfig, TurnOptions};
use crate::ports::{Connection, Ports, StreamCallback};
use crate::transcript::ToolResult;

/// A snapshot of the session's in-memory state, for tests and harnesses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inspection {
    /// A continuation is owed but has not started.
    pub pending: bool,
    /// A drain of in-flight applies is running (applies are synchronous
    /// here, so this is never observed true; kept for API parity).
    pub barrier_active: bool,
    /// The coalesce timer is armed (something keeps the process busy).
    pub timer_armed: bool,
    /// A turn's stream is open.
    pub stream_open: bool,
    pub queued: usize,
    /// Scheduled recovery wake-ups.
    pub alarms: usize,
    /// A provider retry backoff is waiting.
    pub retry_armed: bool,
    /// Inputs sent to the session that it has not handled yet.
    pub inputs_waiting: usize,
    /// The session has loaded its durable state and recovered what it had to.
    pub booted: bool,
}

impl Inspection {
    /// Nothing is running or scheduled: the session would sleep.
    pub fn is_idle(&self) -> bool {
        self.booted
            && !self.timer_armed
            && !self.stream_open
            && self.queued == 0
            && self.alarms == 0
            && !self.retry_armed
            && self.inputs_waiting == 0
    }
}

/// The session's inbox, counting inputs sent and not yet handled, so an
/// inspection never calls a session idle while work waits in its inbox.
#[derive(Clone)]
pub(crate) struct InboxSender {
    sender: mpsc::UnboundedSender<Input>,
    waiting: Arc<AtomicUsize>,
}

impl InboxSender {
    pub fn send(&self, input: Input) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let sent = self.sender.send(input).is_ok();
        if !sent {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        sent
    }

    pub fn handled(&self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// A cheap, cloneable handle to a running session.
#[derive(Clone)]
pub struct SessionHandle {
    inbox: InboxSender,
    published: Arc<Mutex<Inspection>>,
}

impl SessionHandle {
    /// Boots a session from its durable store and spawns its actor on the
    /// current task context (the process that hosts it).
    pub fn spawn(config: EngineConfig, ports: Ports) -> Self {
        let (sender, inbox) = mpsc::unbounded_channel();
        let inbox_sender = InboxSender { sender, waiting: Default::default() };
        let published = Arc::new(Mutex::new(Inspection::default()));
        let durable = ports.store.load();
        let session = Session {
            config,
            ports,
            durable,
            inbox,
            inbox_sender: inbox_sender.clone(),
            connections: Default::default(),
            queue: Default::default(),
            turn: None,
            model_stream: None,
            barrier: Default::default(),
            recovery_wait: None,
            timers: Timers::default(),
            published: published.clone(),
            staged: None,
            refused: false,
        };
        tokio::spawn(session.run());
        Self { inbox: inbox_sender, published }
    }

    /// Returns false when the session's process is gone.
    fn send(&self, input: Input) -> bool {
        self.inbox.send(input)
    }

    pub fn is_alive(&self) -> bool {
        !self.inbox.is_closed()
    }

    pub fn connect(&self, connection_id: u64, connection: Box<dyn Connection>) -> bool {
        self.send(Input::Connect { connection_id, connection })
    }

    pub fn disconnect(&self, connection_id: u64) -> bool {
        self.send(Input::Disconnect { connection_id })
    }

    /// A user message over a client connection; the reply is broadcast.
    pub fn user_message(&self, text: &str, options: TurnOptions) -> bool {
        self.send(Input::UserMessage { text: text.to_string(), options })
    }

    /// The `chat()` RPC: the reply goes to `callback`.
    pub fn chat(&self, text: &str, options: TurnOptions, callback: Box<dyn StreamCallback>) -> bool {
        self.send(Input::Chat { text: text.to_string(), options, callback })
    }

    /// A messenger delivery: the engine drives `chat()` with a
    /// text-collecting callback and posts the reply once through the
    /// messenger surface port.
    pub fn deliver(&self, delivery_id: &str, text: &str) -> bool {
        self.send(Input::Deliver { delivery_id: delivery_id.to_string(), text: text.to_string() })
    }

    pub fn tool_result(&self, result: ToolResult, auto_continue: bool) -> bool {
        self.send(Input::ToolResult { result, auto_continue })
    }

    pub fn approval(&self, call_id: &str, approved: bool, auto_continue: bool) -> bool {
        self.send(Input::Approval { call_id: call_id.to_string(), approved, auto_continue })
    }

    pub fn inspect(&self) -> Inspection {
        let mut inspection = *self.published.lock().expect("inspection lock");
        inspection.inputs_waiting = self.inbox.waiting();
        inspection
    }
}

//! The engine protocol (`docs/protocol.md`): the engine seam as
//! newline-delimited JSON, so an engine in any process and any language is
//! driven in lockstep under the simulated clock. [`proxy`] is the
//! harness's end, [`serve`] the built-in engine's.

pub mod declared;
pub mod fault;
mod group;
pub mod output;
pub mod proxy;
pub mod seeding;
pub mod serve;
pub mod timing;

use serde::{Deserialize, Serialize};
use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{ExhaustedContext, FaultSite, Frame, ModelRequest, ServerToolCall};
use turnsim_engine::{Chunk, EngineConfig, EngineEvent, ModelEvent, StreamError, ToolOutcome, ToolResult, TurnOptions};

pub const PROTOCOL_VERSION: u32 = 7;

/// Which requests an engine may leave unasked in a run, as its `init` says:
/// commits when the store refuses none, fault points at the sites switched
/// off, the numbers of model calls and posts when the world gives them in
/// order.
#[derive(Clone, Debug)]
pub struct RunTerms {
    pub store_may_refuse: bool,
    pub fault_sites: Vec<FaultSite>,
    /// The world numbers calls and posts one after another, so an engine
    /// may count them itself; not with something between the engine and
    /// the world that makes or drops calls of its own (the adversary).
    pub in_order: bool,
}

turnsim_engine::tag_first! {
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    /// A message to the engine. Every one but `reply` carries the sim time.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum ToEngine {
        Init {
            now_ns: u64,
            protocol: u32,
            seed: u64,
            generation: u32,
            wall_base_ms: u64,
            config: Box<EngineConfig>,
            state: Box<DurableState>,
            /// Whether the store may refuse a commit in this run. When it may
            /// not, an engine need not wait for a commit's reply (`no_reply`).
            store_may_refuse: bool,
            /// The fault sites switched on for this run: a fault point at any
            /// other site would be answered `fire: false`, so need not be asked.
            fault_sites: Vec<FaultSite>,
            /// The number the run's next model call gets (the world numbers
            /// calls from 1, across generations): an engine that counts from
            /// it names its calls and waits for no `model_request` reply.
            /// Absent when the numbers may not come in order: ask for each.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            next_call: Option<u32>,
            /// The same for posts to the chat surface.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            next_post: Option<u32>,
            /// A live run's scratch directory (`crate::live`): the same for every
            /// generation of the run, removed when it ends. Absent otherwise.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            scratch_dir: Option<String>,
        },
        Connect {
            now_ns: u64,
            connection: u64,
        },
        Disconnect {
            now_ns: u64,
            connection: u64,
        },
        /// The client on `connection` asks to resume the stream in progress.
        ResumeRequest {
            now_ns: u64,
            connection: u64,
        },
        /// The client on `connection` acks the resume it was offered.
        ResumeAck {
            now_ns: u64,
            connection: u64,
            request_id: String,
        },
        UserMessage {
            now_ns: u64,
            text: String,
            options: TurnOptions,
        },
        /// `chat` addresses the callback; `key` names the call (the same key
        /// again is the same call delivered twice).
        Chat {
            now_ns: u64,
            chat: u32,
            key: String,
            text: String,
            options: TurnOptions,
        },
        Deliver {
            now_ns: u64,
            delivery: String,
            text: String,
        },
        ToolResult {
            now_ns: u64,
            result: ToolResult,
            auto_continue: bool,
        },
        Approval {
            now_ns: u64,
            call_id: String,
            approved: bool,
            auto_continue: bool,
        },
        ModelChunk {
            now_ns: u64,
            call: u32,
            chunk: Chunk,
        },
        ModelEnd {
            now_ns: u64,
            call: u32,
            end: WireEnd,
        },
        ServerToolDone {
            now_ns: u64,
            request_id: String,
            call_id: String,
            outcome: Option<ToolOutcome>,
        },
        /// The chat surface's answer to post `post`.
        PostDone {
            now_ns: u64,
            post: u32,
            delivery: String,
            ok: bool,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            error: Option<String>,
        },
        Timer {
            now_ns: u64,
        },
        /// Every input waiting at one instant, in order, to an engine that
        /// said `batches` on its `init` reply: it handles each as if it
        /// came alone and answers each with its own `idle`.
        Inputs {
            now_ns: u64,
            inputs: Vec<ToEngine>,
        },
        Reply {
            value: serde_json::Value,
        },
    }
}

impl ToEngine {
    pub fn now_ns(&self) -> Option<u64> {
        match self {
            Self::Init { now_ns, .. }
            | Self::Connect { now_ns, .. }
            | Self::Disconnect { now_ns, .. }
            | Self::ResumeRequest { now_ns, .. }
            | Self::ResumeAck { now_ns, .. }
            | Self::UserMessage { now_ns, .. }
            | Self::Chat { now_ns, .. }
            | Self::Deliver { now_ns, .. }
            | Self::ToolResult { now_ns, .. }
            | Self::Approval { now_ns, .. }
            | Self::ModelChunk { now_ns, .. }
            | Self::ModelEnd { now_ns, .. }
            | Self::ServerToolDone { now_ns, .. }
            | Self::PostDone { now_ns, .. }
            | Self::Timer { now_ns }
            | Self::Inputs { now_ns, .. } => Some(*now_ns),
            Self::Reply { .. } => None,
        }
    }
}

turnsim_engine::tag_first! {
    #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
    /// How a model call ended.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum WireEnd {
        /// The stream closed (after its finish, or short of one).
        Closed,
        /// The connection dropped mid-stream.
        Cut,
        Http {
            status: u16,
            message: String,
        },
    }
}

impl WireEnd {
    pub fn from_error(error: &StreamError) -> Self {
        match error {
            StreamError::Cut => Self::Cut,
            StreamError::Http { status, message } => Self::Http { status: *status, message: message.clone() },
        }
    }

    pub fn into_event(self) -> ModelEvent {
        match self {
            Self::Closed => ModelEvent::Closed,
            Self::Cut => ModelEvent::Failed(StreamError::Cut),
            Self::Http { status, message } => ModelEvent::Failed(StreamError::Http { status, message }),
        }
    }
}

turnsim_engine::tag_first! {
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    /// A message from the engine: requests (`commit`, `model_request`,
    /// `fault_point`, `post`, `exhausted`) wait for one `reply`; the rest are
    /// effects. A `commit` with `no_reply` is an effect too: the store takes
    /// every commit in a run whose `init` said it may not refuse one.
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum FromEngine {
        Commit {
            writes: Vec<Write>,
            /// The engine goes on without a reply (allowed only when `init`
            /// said `store_may_refuse: false`).
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            no_reply: bool,
        },
        Send {
            connection: u64,
            frame: Frame,
        },
        ModelRequest {
            request: ModelRequest,
            /// The call's number as the engine counted it from `init`'s
            /// `next_call`: then no reply comes (the harness checks the
            /// world numbered it the same).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            call: Option<u32>,
        },
        FaultPoint {
            site: FaultSite,
        },
        ModelCancel {
            call: u32,
        },
        ServerTool {
            request_id: String,
            call: ServerToolCall,
        },
        Callback {
            chat: u32,
            call: WireCallback,
        },
        Post {
            delivery: String,
            text: String,
            /// The post's number counted from `init`'s `next_post`: then no
            /// reply comes.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            post: Option<u32>,
        },
        Exhausted {
            context: ExhaustedContext,
        },
        Observe {
            event: EngineEvent,
        },
        Idle {
            next_timer_ns: Option<u64>,
            /// On the `idle` that answers `init`: this process takes another
            /// `init` once its run is over (and forgets everything before it).
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            reinit: bool,
            /// On the `idle` that answers `init`: when this generation is
            /// evicted, the process starts the next generation in place (a
            /// fresh `init`) with nothing of this one left in its memory.
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            generations: bool,
            /// On the `idle` that answers `init`: the engine takes the inputs
            /// of one instant in one `inputs` message.
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            batches: bool,
            /// On the `idle` that answers `init`: the capabilities the engine
            /// implements (`crate::capability`); absent, every one. Names, not
            /// the enum: an unknown name is a protocol fault that names it.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            capabilities: Option<Vec<String>>,
            /// On the `idle` that answers `init`: the core capabilities the
            /// engine lacks (`crate::capability::Capability::CORE`); absent, none.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            lacks: Option<Vec<String>>,
        },
    }
}

/// One call on a `chat()` callback, or the RPC returning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum WireCallback {
    OnStart {
        request_id: String,
    },
    OnEvent {
        chunk: Chunk,
    },
    OnReset {
        text: String,
    },
    OnDone,
    OnError {
        message: String,
    },
    OnInterrupted,
    /// `chat()` returned: the engine let go of the callback.
    Returned,
}

/// The reply to `commit` and `exhausted`: it worked, or why not.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl OutcomeReply {
    pub fn of<E>(result: Result<(), E>, error: impl FnOnce(E) -> String) -> Self {
        match result {
            Ok(()) => Self { ok: true, error: None },
            Err(failure) => Self { ok: false, error: Some(error(failure)) },
        }
    }

    pub fn into_result<E>(self, error: impl FnOnce(String) -> E) -> Result<(), E> {
        if self.ok {
            return Ok(());
        }
        Err(error(self.error.unwrap_or_default()))
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelReply {
    pub call: u32,
}

/// The reply to `post`: the post's number; the surface's answer comes
/// later, as `post_done`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostReply {
    pub post: u32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultReply {
    pub fire: bool,
}

/// One message as one line.
pub fn line<T: Serialize>(message: &T) -> String {
    let mut line = serde_json::to_string(message).expect("protocol messages serialise");
    line.push('\n');
    line
}

/// Polls a few times for the other side's answer, giving the core away in
/// between, before a caller sleeps in the kernel: the answer usually comes
/// within microseconds, and a wake-up from a blocking wait costs more than
/// the engine's work on one input.
pub(crate) fn spin_until_readable(fd: i32) -> bool {
    const SPINS: usize = 200;
    for _ in 0..SPINS {
        if poll_readable(fd, 0) {
            return true;
        }
        std::thread::yield_now();
    }
    false
}

/// Blocks until `fd` has something to read (or its writer is gone).
pub(crate) fn wait_readable(fd: i32) {
    if !spin_until_readable(fd) {
        poll_readable(fd, -1);
    }
}

pub(crate) fn poll_readable(fd: i32, millis: i32) -> bool {
    let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for a file descriptor the caller owns.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    ready > 0
}

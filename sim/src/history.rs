//! The boundary history: everything that crossed the engine's boundary in
//! one run, in order, with sim time. Inputs are what the world delivered to
//! the engine; effects are what the engine did to the world through its
//! ports. The oracle judges an engine from this record alone, so it judges
//! any engine that speaks the same boundary, whatever it says of itself.
//!
//! The timeline (`trace`) is for people; the history is for verdicts. Each
//! crossing remembers where in the timeline it happened, so a violation
//! found here still points at a line a person can read.

use serde::Serialize;
use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{ExhaustedContext, Frame, ModelRequest, ServerToolCall};
use turnsim_engine::{Chunk, Message, Part, ToolOutcome, ToolResult};

/// One crossing, stamped.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Crossing {
    /// Sim time since the run started, in microseconds.
    pub at_us: u64,
    /// How many timeline events came before it: the timeline index of the
    /// event recorded next (for pointing a violation at a line).
    pub at_event: usize,
    pub what: Boundary,
}

/// How a model stream ended, as the provider ended it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamEnd {
    /// The provider stopped sending and holds the stream open.
    Parked,
    /// The connection dropped mid-stream.
    Cut,
    /// An HTTP error (429, 5xx, or 400 for a rejected request).
    Http { status: u16, message: String },
    /// The engine closed the stream before the script ended.
    Abandoned,
}

/// One call on a `chat()` caller's callback.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallbackCall {
    Start {
        request_id: String,
    },
    Event {
        chunk: Chunk,
    },
    /// The engine took back what it streamed of the current attempt.
    Reset {
        text: String,
    },
    Done,
    Error {
        message: String,
    },
    Interrupted,
    /// The callback was released with no terminal call.
    Dropped,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Boundary {
    // ---- into the engine ----
    /// A process started and loaded the durable store: what it was given.
    Boot {
        loaded: Box<DurableState>,
    },
    /// The process was killed (an eviction): nothing it held in memory survives.
    Killed,
    /// A memory-only eviction: these connections outlive the kill that
    /// comes just before (the new process is handed them with `connect`).
    KeptOpen {
        connections: Vec<u64>,
    },
    Connect {
        connection: u64,
    },
    Disconnect {
        connection: u64,
    },
    /// The client on `connection` asked to resume the stream.
    ResumeRequest {
        connection: u64,
    },
    /// The client on `connection` is ready for the stream it was offered.
    ResumeAck {
        connection: u64,
        request_id: String,
    },
    /// A user message over a client connection.
    UserMessage {
        text: String,
    },
    /// The `chat()` RPC from caller `chat`. `again`: the caller's link
    /// delivered this call a second time (the same call, the same callback).
    Chat {
        chat: u32,
        text: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        again: bool,
    },
    /// A messenger delivery.
    Deliver {
        delivery: String,
        text: String,
    },
    /// A client's tool result; `connection`: the one it was sent over.
    ToolResult {
        result: ToolResult,
        auto_continue: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        connection: Option<u64>,
    },
    /// A client's approval or denial; `connection`: the one it was sent over.
    Approval {
        call_id: String,
        approved: bool,
        auto_continue: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        connection: Option<u64>,
    },
    /// A chunk of model call `call` (calls numbered from 1 in request order).
    ModelChunk {
        call: u32,
        chunk: Chunk,
    },
    ModelEnd {
        call: u32,
        end: StreamEnd,
    },
    /// A server tool's execution finished with this outcome.
    ServerToolDone {
        call_id: String,
        outcome: ToolOutcome,
    },
    /// The chat surface's answer to post `post`: shown, or refused with
    /// `error`.
    PostDone {
        post: u32,
        delivery: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },

    // ---- out of the engine ----
    /// A model request, with the whole history the model was shown.
    ModelRequest {
        call: u32,
        request: ModelRequest,
    },
    /// The engine let go of model call `call`: what of it was already on
    /// its way may still arrive, and is not the stream going on.
    ModelCancel {
        call: u32,
    },
    /// A frame the engine sent on a client connection.
    Frame {
        connection: u64,
        frame: Frame,
    },
    /// A callback call as the caller got it. `sent_at`: on a slow caller
    /// link, where in the history the engine made it (the history's length
    /// then).
    Callback {
        chat: u32,
        call: CallbackCall,
        #[serde(skip_serializing_if = "Option::is_none")]
        sent_at: Option<usize>,
    },
    /// A messenger post of a delivery's reply, shown; `post` numbers the
    /// engine's posts from 1.
    Post {
        post: u32,
        delivery: String,
        text: String,
    },
    /// A post the chat surface refused: nothing was shown.
    PostRefused {
        post: u32,
        delivery: String,
        text: String,
        error: String,
    },
    /// A durable commit (all writes or none).
    Commit {
        writes: Vec<Write>,
    },
    /// A commit the store refused: none of its writes happened.
    CommitRefused {
        writes: Vec<Write>,
    },
    /// The engine asked for a server tool to run.
    ServerToolCall {
        call: ServerToolCall,
    },
    /// The host's recovery-exhausted hook was called; `threw` when it failed.
    Exhausted {
        context: ExhaustedContext,
        #[serde(skip_serializing_if = "Option::is_none")]
        threw: Option<String>,
    },
}

impl Boundary {
    /// Whether the world delivered this to the engine (rather than the
    /// engine producing it).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Self::Boot { .. }
                | Self::Killed
                | Self::KeptOpen { .. }
                | Self::Connect { .. }
                | Self::Disconnect { .. }
                | Self::UserMessage { .. }
                | Self::Chat { .. }
                | Self::Deliver { .. }
                | Self::ToolResult { .. }
                | Self::Approval { .. }
                | Self::ModelChunk { .. }
                | Self::ModelEnd { .. }
                | Self::ServerToolDone { .. }
                | Self::PostDone { .. }
        )
    }
}

/// A run's history, with the store's content folded forward commit by commit.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct History {
    /// What the store held before the first boot (a seeded transcript).
    pub initial: DurableState,
    pub crossings: Vec<Crossing>,
}

impl History {
    pub fn iter(&self) -> impl Iterator<Item = &Crossing> {
        self.crossings.iter()
    }

    /// The store's content at the end of the run.
    pub fn final_store(&self) -> DurableState {
        self.store_at(self.crossings.len())
    }

    /// The store's content just before crossing `index`.
    pub fn store_at(&self, index: usize) -> DurableState {
        let mut state = self.initial.clone();
        for crossing in &self.crossings[..index.min(self.crossings.len())] {
            if let Boundary::Commit { writes } = &crossing.what {
                for write in writes {
                    state.apply(write);
                }
            }
        }
        state
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    /// Nothing left to do: every turn settled, nothing scheduled.
    Quiescent,
    /// The sim-time horizon passed with work still outstanding.
    Horizon,
    /// Faults stopped, but the world did not settle within the scenario's
    /// convergence window after the last one (the liveness phase failed).
    NotConverged,
    /// The event budget (`max_events`) ran out: a livelock, or a run longer
    /// than its budget.
    EventBudget,
    /// Something panicked: the engine, or the world around it.
    Panicked,
    /// The engine process broke the protocol, crashed or hung
    /// ([`RunRecord::engine_fault`] says how).
    EngineFault,
}

/// Added to client `client`'s connection count (from 1) to make its
/// connection ids: client 1's are c1, c2, ...; client 2's c2001, c2002, ....
pub fn connection_base(client: u32) -> u64 {
    if client == 1 {
        0
    } else {
        u64::from(client) * 1_000
    }
}

/// Text, reasoning or a tool call: a message of only `step-start`s (or
/// empty text) shows the model nothing.
pub fn has_content(message: &Message) -> bool {
    message.parts.iter().any(|part| match part {
        Part::StepStart => false,
        Part::Text { text, .. } | Part::Reasoning { text, .. } => !text.is_empty(),
        Part::Tool(_) => true,
    })
}

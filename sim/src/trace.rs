//! The trace: every observable event of one run, stamped with sim time.
//!
//! Rendered as a stable text timeline (one event a line, for humans, diffs
//! and snapshots) and as JSON. Task ids, addresses and wall-clock never enter
//! it, so the same seed gives the same bytes.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use turnsim_engine::EngineEvent;

use crate::history::{Boundary, Crossing};

/// Which part of the world an event comes from (a lane of the timeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    World,
    Client,
    Caller,
    Messenger,
    Engine,
    Model,
    Tools,
    Store,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::World => "world",
            Self::Client => "client",
            Self::Caller => "caller",
            Self::Messenger => "messenger",
            Self::Engine => "engine",
            Self::Model => "model",
            Self::Tools => "tools",
            Self::Store => "store",
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Event {
    /// A scenario action or fault the world carried out.
    Action {
        what: String,
    },
    Evicted,
    Restarted,
    Engine(EngineEvent),
    ModelCall {
        call: u32,
        request_id: String,
        step: u32,
        continuation: bool,
    },
    ModelChunk {
        call: u32,
        index: u32,
        chunk: String,
    },
    /// How a model call's script ended (parked, cut, http error ...).
    ModelEnd {
        call: u32,
        how: String,
    },
    /// The request held a tool call without a result.
    ModelRejected {
        call: u32,
        missing: Vec<String>,
    },
    ServerToolRun {
        call_id: String,
        tool_name: String,
    },
    StoreCommit {
        writes: Vec<String>,
    },
    /// The store refused commit number `commit` (an injected fault).
    StoreRefused {
        commit: u32,
        writes: Vec<String>,
    },
    ClientConnected {
        connection: u64,
    },
    ClientDisconnected {
        connection: u64,
    },
    /// After a memory-only eviction the client's open connection was handed
    /// to the new process; the client saw no disconnect.
    ClientResumed {
        connection: u64,
    },
    ClientSawTool {
        call_id: String,
        state: String,
    },
    ClientSent {
        call_id: String,
        what: String,
        auto_continue: bool,
    },
    ClientSendFailed {
        call_id: String,
    },
    ClientFrame {
        what: String,
    },
    /// The client asked the engine to resume the stream, or acked a resume
    /// (`sent`: the engine's inbox took it).
    ClientAsked {
        connection: u64,
        what: String,
        sent: bool,
    },
    ChatCalled {
        chat: u32,
    },
    /// A `chat()` call reached the engine over a slow caller link; `again`:
    /// the link delivered it a second time.
    ChatArrived {
        chat: u32,
        again: bool,
    },
    CallbackStart {
        chat: u32,
        request_id: String,
    },
    CallbackEvent {
        chat: u32,
        chunk: String,
    },
    /// The engine took back a failed attempt's output; `text` is the turn's text so far.
    CallbackReset {
        chat: u32,
        text: String,
    },
    CallbackDone {
        chat: u32,
    },
    CallbackError {
        chat: u32,
        message: String,
    },
    CallbackInterrupted {
        chat: u32,
    },
    /// The callback object was dropped; `terminal` says whether a terminal
    /// callback had come first. Dropped by a dying process, the caller sees
    /// a transport break.
    CallbackDropped {
        chat: u32,
        terminal: bool,
    },
    /// The engine called its host's `on_exhausted` hook.
    OnExhausted {
        incident: String,
        reason: String,
        /// What the hook threw, when it failed.
        threw: Option<String>,
    },
    /// A post shown on the chat surface; `after_ms` when the surface
    /// answers the engine only that long after.
    MessengerPost {
        delivery: String,
        text: String,
        #[serde(skip_serializing_if = "crate::scenario::is_zero")]
        after_ms: u64,
    },
    /// The chat surface refused a post: nothing was shown.
    MessengerPostRefused {
        delivery: String,
        text: String,
        error: String,
        #[serde(skip_serializing_if = "crate::scenario::is_zero")]
        after_ms: u64,
    },
}

/// Every name a timeline event can have, with its lane: what triggers and
/// timing expectations may name, as `name` or `lane.name`. A test checks
/// that every event the committed suite produces is listed.
pub const EVENT_NAMES: [(&str, &str); 60] = [
    ("world", "action"),
    ("world", "evict"),
    ("world", "restart"),
    ("model", "call"),
    ("model", "chunk"),
    ("model", "end"),
    ("model", "rejected"),
    ("tools", "run"),
    ("store", "commit"),
    ("store", "refused"),
    ("client", "connected"),
    ("client", "resumed"),
    ("client", "disconnected"),
    ("client", "saw-tool"),
    ("client", "sent"),
    ("client", "send-failed"),
    ("client", "frame"),
    ("client", "resume"),
    ("caller", "chat"),
    ("caller", "chat-arrived"),
    ("caller", "on_start"),
    ("caller", "on_event"),
    ("caller", "on_reset"),
    ("caller", "on_done"),
    ("caller", "on_error"),
    ("caller", "on_interrupted"),
    ("caller", "dropped"),
    ("messenger", "post"),
    ("messenger", "post-refused"),
    ("engine", "on_exhausted"),
    ("engine", "boot"),
    ("engine", "user-message.stored"),
    ("engine", "chat.repeated"),
    ("engine", "turn.queued"),
    ("engine", "turn.start"),
    ("engine", "model.call"),
    ("engine", "tool.ready"),
    ("engine", "tool.applied"),
    ("engine", "tool.ignored"),
    ("engine", "server-tool.start"),
    ("engine", "repair"),
    ("engine", "continuation.pending"),
    ("engine", "continuation.coalesced"),
    ("engine", "continuation.deferred"),
    ("engine", "continuation.timer-armed"),
    ("engine", "continuation.held"),
    ("engine", "continuation.fire"),
    ("engine", "stream.stalled"),
    ("engine", "stream.empty-finish"),
    ("engine", "provider.retry"),
    ("engine", "recovery.scheduled"),
    ("engine", "recovery.parked"),
    ("engine", "recovery.skipped"),
    ("engine", "recovery.exhausted"),
    ("engine", "recovery.completed"),
    ("engine", "turn.end"),
    ("engine", "store.refused"),
    ("engine", "delivery.accepted"),
    ("engine", "delivery.post-failed"),
    ("engine", "recovery.hook-failed"),
];

/// Whether some timeline event can carry `name` (bare or `lane.name`).
pub fn is_event_name(name: &str) -> bool {
    EVENT_NAMES.iter().any(|(lane, event)| *event == name || format!("{lane}.{event}") == name)
}

/// `name` written as `lane.event` for an event outside the engine lane
/// (`model.call`, `caller.on_done`): those names mean that lane's event,
/// even where an engine event has the same name.
fn boundary_name(name: &str) -> Option<(&str, &str)> {
    let (lane, event) = name.split_once('.')?;
    let listed = EVENT_NAMES
        .iter()
        .any(|(listed_lane, listed_event)| *listed_lane != "engine" && *listed_lane == lane && *listed_event == event);
    listed.then_some((lane, event))
}

impl Event {
    /// Whether this event answers to `name`: `lane.event` (`model.call` is
    /// the model's call, what crossed the boundary), a bare name
    /// (`recovery.scheduled`, `on_done`), or `engine.NAME` for the engine's
    /// own events.
    /// Whether this is a client frame with this label as the timeline
    /// shows it (`done r1`), or one whose label begins with it and a space
    /// (`error r4` for that error, whatever its text).
    pub fn is_frame(&self, label: &str) -> bool {
        let Self::ClientFrame { what } = self else { return false };
        what.strip_prefix(label).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    }

    pub fn is_named(&self, name: &str) -> bool {
        if let Some((lane, event)) = boundary_name(name) {
            return self.lane().as_str() == lane && self.name() == event;
        }
        let own = self.name();
        own == name || name.split_once('.').is_some_and(|(lane, event)| lane == self.lane().as_str() && event == own)
    }

    pub fn lane(&self) -> Lane {
        match self {
            Self::Action { .. } | Self::Evicted | Self::Restarted => Lane::World,
            Self::Engine(_) => Lane::Engine,
            Self::ModelCall { .. } | Self::ModelChunk { .. } | Self::ModelEnd { .. } | Self::ModelRejected { .. } => {
                Lane::Model
            }
            Self::ServerToolRun { .. } => Lane::Tools,
            Self::StoreCommit { .. } | Self::StoreRefused { .. } => Lane::Store,
            Self::ClientConnected { .. }
            | Self::ClientDisconnected { .. }
            | Self::ClientResumed { .. }
            | Self::ClientSawTool { .. }
            | Self::ClientSent { .. }
            | Self::ClientSendFailed { .. }
            | Self::ClientFrame { .. }
            | Self::ClientAsked { .. } => Lane::Client,
            Self::ChatCalled { .. }
            | Self::ChatArrived { .. }
            | Self::CallbackStart { .. }
            | Self::CallbackEvent { .. }
            | Self::CallbackReset { .. }
            | Self::CallbackDone { .. }
            | Self::CallbackError { .. }
            | Self::CallbackInterrupted { .. }
            | Self::CallbackDropped { .. } => Lane::Caller,
            Self::MessengerPost { .. } | Self::MessengerPostRefused { .. } => Lane::Messenger,
            Self::OnExhausted { .. } => Lane::Engine,
        }
    }

    /// The event's name in the timeline.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Action { .. } => "action",
            Self::Evicted => "evict",
            Self::Restarted => "restart",
            Self::Engine(event) => event.name(),
            Self::ModelCall { .. } => "call",
            Self::ModelChunk { .. } => "chunk",
            Self::ModelEnd { .. } => "end",
            Self::ModelRejected { .. } => "rejected",
            Self::ServerToolRun { .. } => "run",
            Self::StoreCommit { .. } => "commit",
            Self::StoreRefused { .. } => "refused",
            Self::ClientConnected { .. } => "connected",
            Self::ClientResumed { .. } => "resumed",
            Self::ClientDisconnected { .. } => "disconnected",
            Self::ClientSawTool { .. } => "saw-tool",
            Self::ClientSent { .. } => "sent",
            Self::ClientSendFailed { .. } => "send-failed",
            Self::ClientFrame { .. } => "frame",
            Self::ClientAsked { .. } => "resume",
            Self::ChatCalled { .. } => "chat",
            Self::ChatArrived { .. } => "chat-arrived",
            Self::CallbackStart { .. } => "on_start",
            Self::CallbackEvent { .. } => "on_event",
            Self::CallbackReset { .. } => "on_reset",
            Self::CallbackDone { .. } => "on_done",
            Self::CallbackError { .. } => "on_error",
            Self::CallbackInterrupted { .. } => "on_interrupted",
            Self::CallbackDropped { .. } => "dropped",
            Self::MessengerPost { .. } => "post",
            Self::MessengerPostRefused { .. } => "post-refused",
            Self::OnExhausted { .. } => "on_exhausted",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            Self::Action { what } => what.clone(),
            Self::Evicted | Self::Restarted => String::new(),
            Self::Engine(event) => event.detail(),
            Self::ModelCall { call, request_id, step, continuation } => {
                format!("#{call} {request_id} step={step}{}", if *continuation { " continuation" } else { "" })
            }
            Self::ModelChunk { call, index, chunk } => format!("#{call}.{index} {chunk}"),
            Self::ModelEnd { call, how } => format!("#{call} {how}"),
            Self::ModelRejected { call, missing } => {
                format!("#{call} MissingToolResultsError {}", missing.join(","))
            }
            Self::ServerToolRun { call_id, tool_name } => format!("{call_id} {tool_name}"),
            Self::StoreCommit { writes } => writes.join("; "),
            Self::StoreRefused { commit, writes } => format!("commit {commit}: {}", writes.join("; ")),
            Self::ClientConnected { connection }
            | Self::ClientDisconnected { connection }
            | Self::ClientResumed { connection } => format!("c{connection}"),
            Self::ClientSawTool { call_id, state } => format!("{call_id} {state}"),
            Self::ClientSent { call_id, what, auto_continue } => {
                format!("{call_id} {what} auto_continue={auto_continue}")
            }
            Self::ClientSendFailed { call_id } => call_id.clone(),
            Self::ClientFrame { what } => what.clone(),
            Self::ClientAsked { connection, what, sent } => {
                format!("c{connection} {what}{}", if *sent { "" } else { " (not sent)" })
            }
            Self::ChatCalled { chat } | Self::CallbackDone { chat } | Self::CallbackInterrupted { chat } => {
                format!("chat{chat}")
            }
            Self::ChatArrived { chat, again } => format!("chat{chat}{}", if *again { " again" } else { "" }),
            Self::CallbackStart { chat, request_id } => format!("chat{chat} {request_id}"),
            Self::CallbackEvent { chat, chunk } => format!("chat{chat} {chunk}"),
            Self::CallbackError { chat, message } => format!("chat{chat} {message:?}"),
            Self::CallbackReset { chat, text } => format!("chat{chat} {text:?}"),
            Self::CallbackDropped { chat, terminal } => format!("chat{chat} terminal={terminal}"),
            Self::MessengerPost { delivery, text, after_ms } => format!("{delivery} {text:?}{}", answered(*after_ms)),
            Self::MessengerPostRefused { delivery, text, error, after_ms } => {
                format!("{delivery} {text:?} ({error}){}", answered(*after_ms))
            }
            Self::OnExhausted { incident, reason, threw: None } => format!("{incident} {reason}"),
            Self::OnExhausted { incident, reason, threw: Some(error) } => {
                format!("{incident} {reason} threw {error:?}")
            }
        }
    }
}

/// A frame as the timeline prints it on the client's lane (`client frame
/// done r1`), which `expect.connections` names frames by; `None` for the
/// frames the timeline does not print as frames (the transcript, chunks,
/// and tool states, which it prints as `saw-tool`).
pub fn frame_label(frame: &turnsim_engine::ports::Frame) -> Option<String> {
    use turnsim_engine::ports::Frame;
    Some(match frame {
        Frame::Done { request_id, .. } => format!("done {request_id}"),
        Frame::Error { request_id, message } => format!("error {request_id} {message:?}"),
        Frame::Recovering(on) => format!("recovering={on}"),
        Frame::Reset { request_id, .. } => format!("reset {request_id}"),
        Frame::StreamResuming { request_id } => format!("stream-resuming {request_id}"),
        Frame::ResumeNone => "resume-none".to_string(),
        Frame::Messages(_) | Frame::Chunk { .. } | Frame::Tool { .. } => return None,
    })
}

/// Whether `label` names frames as [`frame_label`] prints them: a whole
/// label, or its first words (`stream-resuming`, `error r4`).
pub fn is_frame_label(label: &str) -> bool {
    let (word, rest) = label.split_once(' ').unwrap_or((label, ""));
    match word {
        "done" | "error" | "reset" | "stream-resuming" => true,
        "resume-none" | "recovering=true" | "recovering=false" => rest.is_empty(),
        _ => false,
    }
}

/// How a slow post's answer reads in the timeline ("" for one answered at once).
fn answered(after_ms: u64) -> String {
    match after_ms {
        0 => String::new(),
        ms => format!(", answered after {ms} ms"),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceEvent {
    /// Sim time since the run started, in microseconds.
    pub at_us: u64,
    pub lane: Lane,
    #[serde(flatten)]
    pub event: Event,
}

impl TraceEvent {
    pub fn render(&self) -> String {
        let mut line = String::new();
        self.render_into(&mut line);
        line
    }

    fn render_into(&self, out: &mut String) {
        let millis = self.at_us / 1_000;
        let _ =
            write!(out, "{:>6}.{:03}s {:<9} {}", millis / 1_000, millis % 1_000, self.lane.as_str(), self.event.name());
        let detail = self.event.detail();
        if !detail.is_empty() {
            out.push(' ');
            out.push_str(&detail);
        }
    }
}

/// What a watcher is shown: a timeline event, and for a store commit the
/// writes it made (what the store newly holds).
pub struct Moment<'a> {
    pub event: &'a Event,
    pub writes: &'a [turnsim_engine::durable::Write],
}

/// Whether a moment is the one a watcher waits for; it may keep state
/// (what the store held before), so it sees every moment in order.
pub type Matcher = Box<dyn FnMut(&Moment) -> bool + Send>;

/// Resolves a waiting sender on the n-th event that matches.
struct Watcher {
    matches: Matcher,
    remaining: u32,
    fire: Option<tokio::sync::oneshot::Sender<()>>,
    /// Set when it fires: the engine process dies at that very event.
    fence: Option<Arc<AtomicBool>>,
    /// Counted up when it fires, at the event itself: the work it starts is
    /// outstanding before anyone can look for quiescence.
    busy: Arc<AtomicUsize>,
}

#[derive(Default)]
struct Inner {
    events: Vec<TraceEvent>,
    /// The boundary history, recorded under the same lock so its order and
    /// the timeline's agree.
    crossings: Vec<Crossing>,
    watchers: Vec<Watcher>,
    overflowed: bool,
    _alive: Alive,
}

thread_local! {
    /// Traces made on this thread and not dropped yet, wherever dropped.
    static MADE_HERE: Arc<AtomicUsize> = Arc::default();
}

/// Counts its trace among its thread's live ones until the trace drops: a
/// run that ends and leaves its trace alive has leaked (something still
/// holds the world), which [`live_traces_made_here`] shows.
struct Alive(Arc<AtomicUsize>);

impl Default for Alive {
    fn default() -> Self {
        let count = MADE_HERE.with(Arc::clone);
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many traces made on this thread are still alive: after a run
/// returns, none of its own should be.
pub fn live_traces_made_here() -> usize {
    MADE_HERE.with(|count| count.load(Ordering::SeqCst))
}

impl Inner {
    /// Returns whether a watcher that fences fired: the engine process
    /// died at `event`.
    fn notify_watchers(&mut self, moment: &Moment) -> bool {
        let mut fenced = false;
        for watcher in &mut self.watchers {
            if watcher.fire.is_some() && (watcher.matches)(moment) {
                watcher.remaining -= 1;
                if watcher.remaining == 0 {
                    if let Some(fence) = &watcher.fence {
                        fenced |= !fence.swap(true, Ordering::SeqCst);
                    }
                    watcher.busy.fetch_add(1, Ordering::SeqCst);
                    let _ = watcher.fire.take().expect("checked").send(());
                }
            }
        }
        self.watchers.retain(|watcher| watcher.fire.is_some());
        fenced
    }
}

/// The shared recorder. Cheap to clone; every part of the world records here.
#[derive(Clone)]
pub struct Trace {
    inner: Arc<Mutex<Inner>>,
    activity: Arc<Notify>,
    budget: usize,
    /// The engine process is dead though its eviction has not run yet:
    /// whatever it still does has no effect on the world.
    engine_dead: Arc<AtomicBool>,
}

impl Trace {
    /// `budget` bounds the events one run may record: a run past it is a
    /// livelock, reported as a liveness failure.
    pub fn new(budget: usize) -> Self {
        Self { inner: Default::default(), activity: Arc::new(Notify::new()), budget, engine_dead: Arc::default() }
    }

    /// Whether the engine process died at an event (an eviction's trigger)
    /// and its kill is still on the way: the ports it calls do nothing.
    pub fn engine_dead(&self) -> bool {
        self.engine_dead.load(Ordering::SeqCst)
    }

    /// A new engine process booted.
    pub fn engine_revived(&self) {
        self.engine_dead.store(false, Ordering::SeqCst);
    }

    pub fn record(&self, event: Event) {
        self.record_with_writes(event, &[]);
    }

    /// Records a store commit's event; watchers also see the writes.
    pub fn record_with_writes(&self, event: Event, writes: &[turnsim_engine::durable::Write]) {
        let at_us = madsim::time::TimeHandle::current().elapsed().as_micros() as u64;
        let lane = event.lane();
        let wakes = !matches!(event, Event::Engine(_));
        {
            let mut inner = self.inner.lock().expect("trace lock");
            let fenced = !inner.watchers.is_empty() && inner.notify_watchers(&Moment { event: &event, writes });
            if inner.events.len() >= self.budget {
                inner.overflowed = true;
            } else {
                inner.events.push(TraceEvent { at_us, lane, event });
            }
            if fenced {
                // The process died right here; its eviction (the kill and
                // the restart) runs next, and does not say so again.
                let at_event = inner.events.len();
                inner.crossings.push(Crossing { at_us, at_event, what: Boundary::Killed });
                inner.events.push(TraceEvent { at_us, lane: Event::Evicted.lane(), event: Event::Evicted });
            }
        }
        // The engine's account of itself wakes nobody: the world's schedule
        // (and so madsim's clock, which advances with every poll) must not
        // depend on whether an engine says what it does. An engine that
        // goes idle says so through `idle`, which pokes.
        if wakes {
            self.activity.notify_one();
        }
    }

    /// Records something that crossed the engine's boundary (see
    /// [`crate::history`]). The budget bounds it with the timeline.
    pub fn cross(&self, what: Boundary) {
        let at_us = madsim::time::TimeHandle::current().elapsed().as_micros() as u64;
        let mut inner = self.inner.lock().expect("trace lock");
        if inner.crossings.len() >= self.budget.saturating_mul(4) {
            inner.overflowed = true;
            return;
        }
        let at_event = inner.events.len();
        inner.crossings.push(Crossing { at_us, at_event, what });
    }

    /// Wakes whoever waits on [`Trace::changed`] without recording anything:
    /// something changed that the world's quiescence check reads.
    pub fn poke(&self) {
        self.activity.notify_one();
    }

    /// Resolves after the next recorded event (or at once if one came since
    /// the last wait).
    pub async fn changed(&self) {
        self.activity.notified().await;
    }

    /// Resolves on the `nth` future event for which `matches` holds.
    /// Fires at the `nth` event that `matches`, counting `busy` up right
    /// there (whoever waits counts it down when its work is done).
    pub fn watch(&self, nth: u32, matches: Matcher, busy: Arc<AtomicUsize>) -> tokio::sync::oneshot::Receiver<()> {
        self.add_watcher(nth, matches, None, busy)
    }

    /// As [`Self::watch`], and the engine process dies at that event: from
    /// then on nothing it does reaches the world (a crash exactly there,
    /// not at the engine's next await).
    pub fn watch_and_fence(
        &self,
        nth: u32,
        matches: Matcher,
        busy: Arc<AtomicUsize>,
    ) -> tokio::sync::oneshot::Receiver<()> {
        self.add_watcher(nth, matches, Some(self.engine_dead.clone()), busy)
    }

    fn add_watcher(
        &self,
        nth: u32,
        matches: Matcher,
        fence: Option<Arc<AtomicBool>>,
        busy: Arc<AtomicUsize>,
    ) -> tokio::sync::oneshot::Receiver<()> {
        let (fire, fired) = tokio::sync::oneshot::channel();
        let watcher = Watcher { matches, remaining: nth.max(1), fire: Some(fire), fence, busy };
        self.inner.lock().expect("trace lock").watchers.push(watcher);
        fired
    }

    /// Drops every watcher still waiting: its task (on no node a
    /// tear-down kills) then wakes to a closed channel and ends. Left
    /// waiting, the task and the trace would hold each other (the task holds
    /// the trace; the trace holds the sender, which holds the task's waker)
    /// and keep the run's memory forever: an eviction waiting for a tool
    /// state that never came leaked the whole run, in every `explore` case.
    pub fn drop_watchers(&self) {
        self.inner.lock().expect("trace lock").watchers.clear();
    }

    pub fn overflowed(&self) -> bool {
        self.inner.lock().expect("trace lock").overflowed
    }

    pub fn take(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.inner.lock().expect("trace lock").events)
    }

    /// What `read` makes of the last crossing recorded, if any.
    pub fn last_crossing<T>(&self, read: impl FnOnce(&Boundary) -> T) -> Option<T> {
        self.inner.lock().expect("trace lock").crossings.last().map(|crossing| read(&crossing.what))
    }

    /// Crossings recorded so far: the history index of the next one.
    pub fn crossing_count(&self) -> usize {
        self.inner.lock().expect("trace lock").crossings.len()
    }

    pub fn take_crossings(&self) -> Vec<Crossing> {
        std::mem::take(&mut self.inner.lock().expect("trace lock").crossings)
    }
}

/// Elapsed sim time of the current run.
pub fn sim_now() -> Duration {
    madsim::time::TimeHandle::current().elapsed()
}

/// The whole timeline as text, one event a line.
pub fn render_timeline(events: &[TraceEvent]) -> String {
    let mut out = String::with_capacity(events.len() * 64);
    for event in events {
        event.render_into(&mut out);
        out.push('\n');
    }
    out
}

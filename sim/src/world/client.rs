//! The simulated client: keeps a connection to the engine, answers client
//! tools after a seeded latency, and reconnects when the connection drops.
//!
//! A result is sent once per sighting of a pending tool; if the engine died
//! before applying it, the transcript the client gets on reconnect still
//! shows the tool pending, and the client answers again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Duration;
use turnsim_engine::ports::{Connection, Frame};
use turnsim_engine::{ToolOutcome, ToolResult, ToolState};

use super::link::{InOrder, LinkDelay};
use super::rng::SharedRng;
use super::switchboard::{EngineLink, Switchboard};
use crate::history::Boundary;
use crate::scenario::{AnswerSpec, ApprovalAction, ClientSpec, RangeMs, Reply, ToolResultAction};
use crate::trace::{Event, Trace};

/// The engine's end of a connection. Frames in flight count as client work,
/// so the world is not called quiescent while the client has unread frames.
struct SimConnection {
    connection: u64,
    trace: Trace,
    frames: mpsc::UnboundedSender<Frame>,
    unread: Arc<AtomicUsize>,
    /// Frames wait out the link's delay, in order.
    link: LinkDelay,
    slow: InOrder<(Frame, InFlight)>,
}

impl SimConnection {
    fn new(
        connection: u64,
        trace: Trace,
        frames: mpsc::UnboundedSender<Frame>,
        unread: Arc<AtomicUsize>,
        link: LinkDelay,
    ) -> Self {
        let sender = frames.clone();
        let slow = InOrder::new(move |(frame, in_flight): (Frame, InFlight)| {
            if sender.send(frame).is_ok() {
                in_flight.delivered();
            }
        });
        Self { connection, trace, frames, unread, link, slow }
    }
}

impl Connection for SimConnection {
    fn send(&self, frame: Frame) -> bool {
        if self.trace.engine_dead() {
            return true;
        }
        self.trace.cross(Boundary::Frame { connection: self.connection, frame: frame.clone() });
        self.unread.fetch_add(1, Ordering::SeqCst);
        if self.link.is_active() {
            self.slow.send(self.link.wait(true), (frame, InFlight(Some(self.unread.clone()))));
            return true;
        }
        let sent = self.frames.send(frame).is_ok();
        if !sent {
            self.unread.fetch_sub(1, Ordering::SeqCst);
        }
        sent
    }
}

/// A frame on its way over a slow link, counted unread until it arrives.
/// It dies with the process that sent it (its task runs there): then it
/// is no longer counted, or the world would wait for it forever.
struct InFlight(Option<Arc<AtomicUsize>>);

impl InFlight {
    /// The client has it: its reader counts it from here.
    fn delivered(mut self) {
        self.0 = None;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(unread) = self.0.take() {
            unread.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[derive(Default)]
struct State {
    /// Connections this client opened so far.
    connections: u64,
    /// Answers waiting out their latency.
    scheduled: BTreeSet<String>,
    /// Answers sent on the current connection.
    sent: BTreeSet<String>,
    /// Work the client still has: scheduled answers and pending reconnects.
    outstanding: usize,
    /// Set by a scripted disconnect: close, then reconnect after this (or,
    /// with `None`, never).
    drop_requested: Option<Option<RangeMs>>,
    /// A connection is open: results can only be sent over one.
    connected: bool,
    /// The open connection's id and a second sender of its frames: kept so
    /// the connection can outlive a process that hibernates (a memory-only
    /// eviction). Dropped before a whole-process eviction, so the
    /// connection closes with the process.
    kept: Option<(u64, mpsc::UnboundedSender<Frame>)>,
    /// The process generation the kept connection was last handed to.
    handed_to: Option<u64>,
    /// Disconnected for good: it sends nothing more.
    gone: bool,
}

#[derive(Clone)]
pub struct Client {
    spec: Arc<ClientSpec>,
    answers: Arc<BTreeMap<String, AnswerSpec>>,
    state: Arc<Mutex<State>>,
    switchboard: Switchboard,
    rng: SharedRng,
    trace: Trace,
    wake: Arc<tokio::sync::Notify>,
    /// Told when a connection opens or the client leaves for good.
    connection_changed: Arc<tokio::sync::Notify>,
    /// The open connection's count of frames on their way or unread: a new
    /// one per connection, so frames lost with a closed connection never
    /// count against the next.
    unread: Arc<Mutex<Arc<AtomicUsize>>>,
    /// The link's faults, engine to client and client to engine.
    to_client: LinkDelay,
    to_engine: LinkDelay,
    /// Added to this client's connection count to make its connection ids
    /// (client 1: c1, c2, ...; client 2: c2001, c2002, ...).
    connection_base: u64,
}

impl Client {
    /// `rngs`: the client's own draws, then the link's.
    pub fn new(
        spec: &ClientSpec,
        switchboard: Switchboard,
        rngs: [SharedRng; 2],
        trace: Trace,
        connection_base: u64,
    ) -> Self {
        let state = State { outstanding: 1, ..State::default() };
        let [rng, link_rng] = rngs;
        Self {
            to_client: LinkDelay::new(spec.link, link_rng.clone()),
            to_engine: LinkDelay::new(spec.link, link_rng),
            connection_base,
            spec: Arc::new(spec.clone()),
            answers: Arc::new(spec.tools.clone()),
            state: Arc::new(Mutex::new(state)),
            switchboard,
            rng,
            trace,
            wake: Default::default(),
            connection_changed: Default::default(),
            unread: Default::default(),
        }
    }

    /// Work the client has not finished (the world is not quiescent before).
    pub fn outstanding(&self) -> usize {
        self.state.lock().expect("client lock").outstanding + self.unread().load(Ordering::SeqCst)
    }

    /// Closes the connection now and reconnects after `reconnect_after_ms`
    /// (`None`: never).
    pub fn disconnect(&self, reconnect_after_ms: Option<RangeMs>) {
        self.update(|state| {
            if state.gone {
                return;
            }
            // Outstanding until the client carries it out: the world is not
            // quiet while a disconnect (and its reconnect) is still to come.
            if state.drop_requested.is_none() {
                state.outstanding += 1;
            }
            state.drop_requested = Some(reconnect_after_ms);
        });
        self.wake.notify_one();
    }

    /// The process is about to die with its connections: this client's
    /// closes with it. Returns nothing to keep.
    pub fn sever(&self) {
        self.state.lock().expect("client lock").kept = None;
    }

    /// The open connection that outlives a memory-only eviction, if any.
    pub fn kept_connection(&self) -> Option<u64> {
        self.state.lock().expect("client lock").kept.as_ref().map(|(connection, _)| *connection)
    }

    /// After a memory-only eviction: hands the kept connection to the new
    /// process. The client sees no disconnect; the engine sees a `connect`.
    pub async fn resume(self) {
        let engine = self.switchboard.wait_for_engine().await;
        // Whatever happened while the process was down decides: the client
        // may have closed the connection, or another process died and was
        // handed it already.
        let kept = {
            let mut state = self.state.lock().expect("client lock");
            let fresh = state.handed_to != Some(engine.generation());
            state.handed_to = Some(engine.generation());
            state.kept.clone().filter(|_| fresh)
        };
        let Some((connection, frames)) = kept else {
            return;
        };
        let engine_end =
            SimConnection::new(connection, self.trace.clone(), frames, self.unread(), self.to_client.clone());
        if engine.connect(connection, Box::new(engine_end)) {
            self.trace.record(Event::ClientResumed { connection });
        }
    }

    /// Runs for the whole simulation: connect, serve frames, reconnect.
    pub async fn run(self) {
        loop {
            let Some((connection, frames)) = self.connect().await else {
                continue;
            };
            self.update(|state| state.outstanding -= 1);
            self.update(|state| state.connected = true);
            self.connection_changed.notify_waiters();
            if self.spec.resume {
                self.send_resume(connection, None);
            }
            let reconnect_after = self.serve(connection, frames).await;
            self.update(|state| {
                state.connected = false;
                state.kept = None;
                state.outstanding += usize::from(reconnect_after.is_some());
            });
            self.trace.record(Event::ClientDisconnected { connection });
            let Some(reconnect_after) = reconnect_after else {
                self.update(|state| {
                    state.gone = true;
                    // A disconnect asked for meanwhile has nothing left to close.
                    state.outstanding -= usize::from(state.drop_requested.take().is_some());
                });
                self.connection_changed.notify_waiters();
                return;
            };
            super::pause_ms(self.rng.sample(reconnect_after)).await;
        }
    }

    fn unread(&self) -> Arc<AtomicUsize> {
        self.unread.lock().expect("client lock").clone()
    }

    fn is_connected(&self) -> bool {
        self.state.lock().expect("client lock").connected
    }

    fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let result = change(&mut self.state.lock().expect("client lock"));
        self.trace.poke();
        result
    }

    async fn connect(&self) -> Option<(u64, mpsc::UnboundedReceiver<Frame>)> {
        let engine = self.switchboard.wait_for_engine().await;
        let connection = self.update(|state| {
            state.connections += 1;
            state.sent.clear();
            self.connection_base + state.connections
        });
        let (sender, frames) = mpsc::unbounded_channel();
        let unread = Arc::new(AtomicUsize::new(0));
        *self.unread.lock().expect("client lock") = unread.clone();
        self.state.lock().expect("client lock").kept = Some((connection, sender.clone()));
        let engine_end = SimConnection::new(connection, self.trace.clone(), sender, unread, self.to_client.clone());
        if !engine.connect(connection, Box::new(engine_end)) {
            return None;
        }
        self.trace.record(Event::ClientConnected { connection });
        Some((connection, frames))
    }

    /// Serves one connection until it drops; returns the reconnect delay
    /// (`None`: the client does not come back).
    async fn serve(&self, connection: u64, mut frames: mpsc::UnboundedReceiver<Frame>) -> Option<RangeMs> {
        loop {
            tokio::select! {
                biased;
                frame = frames.recv() => match frame {
                    Some(frame) => {
                        self.on_frame(connection, frame);
                        self.unread().fetch_sub(1, Ordering::SeqCst);
                        self.trace.poke();
                    }
                    None => {
                        self.unread().store(0, Ordering::SeqCst);
                        return Some(self.spec.reconnect_after_ms);
                    }
                },
                _ = self.wake.notified() => {
                    let requested = self.update(|state| {
                        let requested = state.drop_requested.take();
                        state.outstanding -= usize::from(requested.is_some());
                        requested
                    });
                    if let Some(delay) = requested {
                        if let Some(engine) = self.switchboard.engine() {
                            engine.disconnect(connection);
                        }
                        return delay;
                    }
                }
            }
        }
    }

    fn on_frame(&self, connection: u64, frame: Frame) {
        match frame {
            Frame::Messages(messages) => {
                let pending =
                    messages.iter().flat_map(|message| message.tools_in(&turnsim_engine::transcript::PENDING));
                for tool in pending {
                    self.consider(&tool.call_id, &tool.tool_name, tool.state);
                }
            }
            Frame::Tool { call_id, tool_name, state } => {
                self.trace.record(Event::ClientSawTool { call_id: call_id.clone(), state: state.as_str().into() });
                // A call shown pending after this client answered it is the
                // engine asking again (its answer was not kept).
                if state.is_pending() {
                    self.update(|client| client.sent.remove(&call_id));
                }
                self.consider(&call_id, &tool_name, state);
            }
            Frame::StreamResuming { ref request_id } => {
                self.record_frame(&frame);
                if self.spec.resume {
                    self.send_resume(connection, Some(request_id.clone()));
                }
            }
            Frame::Done { .. }
            | Frame::Error { .. }
            | Frame::Recovering(_)
            | Frame::Reset { .. }
            | Frame::ResumeNone => self.record_frame(&frame),
            Frame::Chunk { .. } => {}
        }
    }

    fn record_frame(&self, frame: &Frame) {
        if let Some(what) = crate::trace::frame_label(frame) {
            self.trace.record(Event::ClientFrame { what });
        }
    }

    /// Asks the engine to resume the stream on `connection` (`ack`: acks the
    /// offer of that turn), over the link like any send; lost if the
    /// connection dropped meanwhile.
    fn send_resume(&self, connection: u64, ack: Option<String>) {
        let what = ack.as_ref().map_or("resume-request".to_string(), |request_id| format!("resume-ack {request_id}"));
        let send = move |client: &Client| {
            let engine = client.switchboard.engine().filter(|_| client.is_connected());
            let sent = engine.is_some_and(|engine| match &ack {
                None => engine.resume_request(connection),
                Some(request_id) => engine.resume_ack(connection, request_id),
            });
            client.trace.record(Event::ClientAsked { connection, what: what.clone(), sent });
        };
        if !self.to_engine.is_active() {
            return send(self);
        }
        self.over_the_link(self.to_engine.wait(false), send);
    }

    /// Schedules an answer for a tool waiting on the client, once.
    fn consider(&self, call_id: &str, tool_name: &str, state: ToolState) {
        if !state.is_pending() {
            return;
        }
        let Some(answer) = self.answers.get(tool_name).cloned() else {
            return;
        };
        if answer.reply == Reply::Never {
            return;
        }
        let fresh = self.update(|state| {
            let fresh = !state.scheduled.contains(call_id) && !state.sent.contains(call_id);
            if fresh {
                state.scheduled.insert(call_id.to_string());
                state.outstanding += 1;
            }
            fresh
        });
        if fresh {
            let latency_ms = self.rng.sample(answer.answer_after_ms);
            tokio::spawn(self.clone().answer_later(call_id.to_string(), answer, latency_ms));
        }
    }

    async fn answer_later(self, call_id: String, answer: AnswerSpec, latency_ms: u64) {
        super::pause_ms(latency_ms).await;
        // A disconnected client sends nothing: the transcript it gets on
        // reconnect shows the tool still pending, and it answers then.
        let sent = self.send_answer(&call_id, &answer);
        self.update(|state| {
            state.scheduled.remove(&call_id);
            state.outstanding -= 1;
            if sent {
                state.sent.insert(call_id.clone());
            }
        });
    }

    /// A user message typed into this client: sent over its connection once
    /// that is open (a client still connecting or reconnecting sends it when
    /// it opens, as a socket that queues while it reconnects does), through
    /// the link's delay (and its reordering, where it reorders). A client gone for good never sends it, and one whose
    /// connection drops while it is in flight loses it: both are recorded.
    pub async fn send_user_message(&self, text: &str, options: turnsim_engine::TurnOptions) {
        let Some(connection) = self.open_connection().await else {
            self.trace.record(Event::Action { what: "user-message not sent: the client left for good".into() });
            return;
        };
        // Delayed by the link, never duplicated: a socket delivers a message
        // once, and it carries no id an engine could take it twice by.
        if self.to_engine.is_active() {
            tokio::time::sleep(self.to_engine.wait(false)).await;
        }
        let engine = self.switchboard.wait_for_engine().await;
        if self.current_connection() != Some(connection) {
            self.trace.record(Event::Action { what: "user-message lost: its connection closed in flight".into() });
            return;
        }
        engine.user_message(text, options);
    }

    /// The open connection's number: now, or once one opens (`None`: the
    /// client left for good).
    async fn open_connection(&self) -> Option<u64> {
        loop {
            let changed = self.connection_changed.notified();
            if let Some(connection) = self.current_connection() {
                return Some(connection);
            }
            if self.state.lock().expect("client lock").gone {
                return None;
            }
            changed.await;
        }
    }

    fn current_connection(&self) -> Option<u64> {
        let state = self.state.lock().expect("client lock");
        state.connected.then_some(self.connection_base + state.connections)
    }

    /// A scripted result, sent now over the open connection; a disconnected
    /// client cannot send it.
    pub fn send_scripted_result(&self, result: &ToolResultAction) {
        let outcome = match (&result.output, &result.error) {
            (Some(output), _) => ToolOutcome::Output(output.clone()),
            (None, error) => ToolOutcome::Error(error.clone().flatten()),
        };
        let what = match &outcome {
            ToolOutcome::Output(output) => format!("output {output}"),
            ToolOutcome::Error(error) => format!("error {error:?}"),
        };
        let tool_result = ToolResult { call_id: result.id.clone(), outcome };
        let auto_continue = result.auto_continue;
        let send =
            move |engine: &EngineLink, connection| engine.tool_result(tool_result.clone(), auto_continue, connection);
        self.transmit(&result.id, what, auto_continue, send);
    }

    pub fn send_scripted_approval(&self, approval: &ApprovalAction) {
        let what = format!("approval approved={}", approval.approved);
        let (id, approved, auto_continue) = (approval.id.clone(), approval.approved, approval.auto_continue);
        let send = move |engine: &EngineLink, connection| engine.approval(&id, approved, auto_continue, connection);
        self.transmit(&approval.id, what, auto_continue, send);
    }

    /// Sends over the open connection: now, or, on a faulty link, after its
    /// delay (and maybe twice). Returns whether it left the client; what is
    /// lost in flight (the connection dropped) the client answers again
    /// once it reconnects and sees the tool still pending.
    fn transmit(
        &self,
        call_id: &str,
        what: String,
        auto_continue: bool,
        send: impl Fn(&EngineLink, u64) -> bool + Send + 'static,
    ) -> bool {
        if !self.to_engine.is_active() {
            return self.deliver(call_id, &what, auto_continue, &send);
        }
        if !self.is_connected() {
            self.trace.record(Event::ClientSendFailed { call_id: call_id.to_string() });
            return false;
        }
        let (call_id, wait) = (call_id.to_string(), self.to_engine.wait(false));
        let copies = 1 + usize::from(self.to_engine.duplicates());
        self.over_the_link(wait, move |client| {
            for _ in 0..copies {
                client.deliver(&call_id, &what, auto_continue, &send);
            }
        });
        true
    }

    /// Runs `arrive` once what the client sends now has waited out `wait`
    /// (the link's delay); the client has work outstanding until then.
    fn over_the_link(&self, wait: Duration, arrive: impl FnOnce(&Client) + Send + 'static) {
        let client = self.clone();
        self.update(|state| state.outstanding += 1);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            arrive(&client);
            client.update(|state| state.outstanding -= 1);
        });
    }

    /// One delivery to the engine over the open connection, traced as sent
    /// or failed.
    fn deliver(&self, call_id: &str, what: &str, auto_continue: bool, send: &dyn Fn(&EngineLink, u64) -> bool) -> bool {
        let engine = self.switchboard.engine().zip(self.current_connection());
        let sent = engine.is_some_and(|(engine, connection)| send(&engine, connection));
        if sent {
            self.trace.record(Event::ClientSent {
                call_id: call_id.to_string(),
                what: what.to_string(),
                auto_continue,
            });
        } else {
            self.trace.record(Event::ClientSendFailed { call_id: call_id.to_string() });
        }
        sent
    }

    fn send_answer(&self, call_id: &str, answer: &AnswerSpec) -> bool {
        let auto_continue = answer.auto_continue;
        let id = call_id.to_string();
        match answer.reply.clone() {
            Reply::Approve(approved) => {
                let send =
                    move |engine: &EngineLink, connection| engine.approval(&id, approved, auto_continue, connection);
                self.transmit(call_id, format!("approval approved={approved}"), auto_continue, send)
            }
            Reply::Output(output) => {
                let what = format!("output {output}");
                let result = ToolResult { call_id: id, outcome: ToolOutcome::Output(output) };
                let send = move |engine: &EngineLink, connection| {
                    engine.tool_result(result.clone(), auto_continue, connection)
                };
                self.transmit(call_id, what, auto_continue, send)
            }
            Reply::Error(error) => {
                let what = format!("error {error:?}");
                let result = ToolResult { call_id: id, outcome: ToolOutcome::Error(Some(error)) };
                let send = move |engine: &EngineLink, connection| {
                    engine.tool_result(result.clone(), auto_continue, connection)
                };
                self.transmit(call_id, what, auto_continue, send)
            }
            Reply::Never => false,
        }
    }
}

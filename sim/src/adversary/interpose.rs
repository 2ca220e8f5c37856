//! The adversary between an engine and the world: wrappers around every
//! port the engine is booted with and around the engine itself (so the
//! client connections and `chat()` callbacks it is handed are wrapped as
//! well). Whatever the engine is — built-in, a process over the protocol,
//! a Rust engine of one's own — everything it sends out passes through
//! here before the world records it.
//!
//! In [`Mode::Count`] the wrappers change nothing and count, per operator,
//! the effects it could rewrite (its sites). In [`Mode::Apply`] they
//! rewrite at one site of one operator: the run is the counting run's
//! up to that site (the same seed, the same effects), so the site exists.
//! A rewrite that persists (a stored output once altered stays altered)
//! goes on applying to what follows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::messenger::MessengerSurface;
use turnsim_engine::ports::{
    Connection, DurableStore, ExhaustedContext, Frame, HookError, ModelProvider, ModelRequest, Observer,
    ServerToolCall, ServerTools, StoreError, StreamCallback,
};
use turnsim_engine::{Chunk, Engine, EngineEvent, Input, InputSink, Message, ModelEvent, Ports};

use super::operators::{self as ops, Operator};
use crate::check::views::{look_the_same, Answer, ClientView};
use crate::trace::{Event, Trace};
use crate::world::Interposer;

/// What the adversary does this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Changes nothing; counts every operator's sites.
    Count,
    /// Rewrites at site `site` (from 0) of `operator`.
    Apply { operator: Operator, site: u64 },
    /// `reorder-frames` at site `site`: chunk frame `hold` (from 0,
    /// in run order) is held back, and goes out right after the next
    /// effect, which the counting run saw to be the pair's other chunk.
    Reorder { site: u64, hold: u64 },
}

/// One run's adversary: shared by every wrapper of every generation.
pub struct Adversary {
    mode: Mode,
    state: Mutex<State>,
    trace: OnceLock<Trace>,
}

#[derive(Default)]
struct State {
    /// Sites seen so far, per operator.
    seen: BTreeMap<Operator, u64>,
    /// What the operator changed, once it did.
    applied: Option<String>,
    /// Calls whose stored output was seen; a call's first sighting is a site.
    stored_outputs: BTreeSet<String>,
    /// Calls whose stored output is altered from the site on.
    altered_calls: BTreeSet<String>,
    /// Pairs of calls seen stored with different outcomes.
    stored_pairs: BTreeSet<(String, String)>,
    /// The pair whose outcomes are swapped from the site on.
    swapped: Option<(String, String)>,
    /// The effect just before (inputs aside), when it was a chunk frame:
    /// its connection, the frame, and its number.
    last_chunk: Option<(u64, Frame, u64)>,
    /// Chunk frames sent so far.
    chunk_frames: u64,
    /// The number of the first chunk of each `reorder-frames` site.
    pair_starts: Vec<u64>,
    /// Message ids whose writes no longer reach the store (`skip-commit`).
    unstored: BTreeSet<String>,
    /// Model calls whose stream ended: cancelling one changes nothing.
    ended_calls: BTreeSet<u32>,
    /// A frame held back to be sent after the next one (`reorder-frames`).
    held: Option<(SharedConnection, Frame)>,
    /// Each connection's transcript as the frames sent to it built it
    /// (after any rewrite): a frame that would change nothing on that
    /// screen is no site.
    screens: BTreeMap<u64, ClientView>,
    /// Message and call ids each store rewrite has seen (a first sighting
    /// is a site), and those rewritten from their site on.
    seen_stored: BTreeMap<Operator, BTreeSet<String>>,
    rewritten: BTreeMap<Operator, BTreeSet<String>>,
    /// Every tool call stored so far: its tool's name and input.
    calls: BTreeMap<String, (String, serde_json::Value)>,
    /// The engine's inbox (as its ports are handed it), for effects the
    /// adversary starts on its own.
    sink: Option<InputSink>,
    /// The generation's server-tool and host ports, unwrapped.
    tools: Option<Arc<dyn ServerTools>>,
    host: Option<Arc<dyn Observer>>,
    /// Open connections, unwrapped, for frames the adversary sends itself:
    /// held weakly, so a connection lives exactly as long as the engine
    /// holds it.
    connections: BTreeMap<u64, std::sync::Weak<Mutex<Box<dyn Connection>>>>,
    /// The request the engine last asked the model for.
    last_request: Option<String>,
    /// Where in the history each site of a read-later operator was seen.
    positions: BTreeMap<Operator, Vec<usize>>,
}

type SharedConnection = Arc<Mutex<Box<dyn Connection>>>;

impl Adversary {
    pub fn new(mode: Mode) -> Arc<Self> {
        let reorder = matches!(mode, Mode::Apply { operator: Operator::ReorderFrames, .. });
        assert!(!reorder, "reorder-frames needs the chunk to hold: Mode::Reorder (see adversary::apply_mode)");
        Arc::new(Self { mode, state: Mutex::default(), trace: OnceLock::new() })
    }

    /// Sites seen per operator (every operator that had one).
    pub fn sites(&self) -> BTreeMap<Operator, u64> {
        self.lock().seen.clone()
    }

    /// Where in the history each site of a read-later operator was seen.
    pub fn site_positions(&self, operator: Operator) -> Vec<usize> {
        self.lock().positions.get(&operator).cloned().unwrap_or_default()
    }

    /// The number of the first chunk of each `reorder-frames` site.
    pub fn pair_starts(&self) -> Vec<u64> {
        self.lock().pair_starts.clone()
    }

    /// What the operator changed, if it applied.
    pub fn applied(&self) -> Option<String> {
        self.lock().applied.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("adversary lock")
    }

    fn engine_dead(&self) -> bool {
        self.trace.get().is_some_and(Trace::engine_dead)
    }

    /// Counts a site of `operator`; true when this is the site to rewrite.
    /// `what` says what the rewrite does, for the timeline and the report.
    fn strike(&self, operator: Operator, what: impl FnOnce() -> String) -> bool {
        if self.engine_dead() {
            // A dead process's effects reach nobody: no site there.
            return false;
        }
        let mut state = self.lock();
        let seen = state.seen.entry(operator).or_default();
        let index = *seen;
        *seen += 1;
        if ops::READ_LATER.contains(&operator) {
            let at = self.trace.get().map_or(0, Trace::crossing_count);
            state.positions.entry(operator).or_default().push(at);
        }
        let chosen = match self.mode {
            Mode::Count => false,
            Mode::Apply { operator: chosen, site } => chosen == operator && site == index,
            Mode::Reorder { site, .. } => operator == Operator::ReorderFrames && site == index,
        };
        if !chosen {
            return false;
        }
        let what = what();
        state.applied = Some(what.clone());
        drop(state);
        if let Some(trace) = self.trace.get() {
            trace.record(Event::Action { what: format!("adversary {}: {what}", operator.name()) });
        }
        true
    }

    /// The effect about to go out is not a chunk frame: a held frame goes
    /// first, and no chunk is adjacent to the next one.
    fn other_effect(&self) {
        let held = {
            let mut state = self.lock();
            state.last_chunk = None;
            state.held.take()
        };
        send_held(held);
    }
}

fn send_held(held: Option<(SharedConnection, Frame)>) {
    if let Some((connection, frame)) = held {
        connection.lock().expect("connection lock").send(frame);
    }
}

/// The adversary as the world sees it: what wraps each generation.
pub struct Interpose(pub Arc<Adversary>);

impl Interposer for Interpose {
    fn ports(&self, ports: Ports, trace: &Trace) -> Ports {
        let _ = self.0.trace.set(trace.clone());
        let adversary = &self.0;
        {
            let mut state = adversary.lock();
            state.tools = Some(ports.server_tools.clone());
            state.host = Some(ports.observer.clone());
            state.connections.clear();
        }
        Ports {
            store: Arc::new(Store { inner: ports.store, adversary: adversary.clone() }),
            model: Arc::new(Model { inner: ports.model, adversary: adversary.clone() }),
            server_tools: Arc::new(Tools { inner: ports.server_tools, adversary: adversary.clone() }),
            observer: Arc::new(Host { inner: ports.observer, adversary: adversary.clone() }),
            surface: Arc::new(Surface { inner: ports.surface, adversary: adversary.clone() }),
            faults: ports.faults,
        }
    }

    fn engine(&self, engine: Box<dyn Engine>) -> Box<dyn Engine> {
        Box::new(Wrapped { engine, adversary: self.0.clone() })
    }
}

/// The engine, with the connections and callbacks it is handed wrapped.
struct Wrapped {
    engine: Box<dyn Engine>,
    adversary: Arc<Adversary>,
}

impl Engine for Wrapped {
    fn deliver(&mut self, input: Input) {
        let adversary = self.adversary.clone();
        let input = match input {
            Input::Connect { connection_id, connection } => {
                let inner = Arc::new(Mutex::new(connection));
                adversary.lock().connections.insert(connection_id, Arc::downgrade(&inner));
                let recovering_shown = Mutex::new(false);
                let client = Client { connection_id, inner, adversary, recovering_shown };
                Input::Connect { connection_id, connection: Box::new(client) }
            }
            Input::Disconnect { connection_id } => {
                adversary.lock().connections.remove(&connection_id);
                Input::Disconnect { connection_id }
            }
            Input::Approval { call_id, approved: false, auto_continue } => {
                adversary.answer_sent();
                self.engine.deliver(Input::Approval { call_id: call_id.clone(), approved: false, auto_continue });
                adversary.run_denied(&call_id);
                return;
            }
            Input::Model { call, event: ModelEvent::Chunk(chunk) } if is_empty_finish(&chunk) => {
                self.engine.deliver(Input::Model { call, event: ModelEvent::Chunk(chunk) });
                adversary.tell_done_on_empty_finish();
                return;
            }
            Input::Chat { key, text, options, callback } => {
                Input::Chat { key, text, options, callback: Box::new(Caller { inner: callback, adversary }) }
            }
            Input::Model { call, event } => {
                if !matches!(event, ModelEvent::Chunk(_)) {
                    adversary.lock().ended_calls.insert(call);
                }
                Input::Model { call, event }
            }
            answer @ (Input::ToolResult { .. } | Input::Approval { .. }) => {
                adversary.answer_sent();
                answer
            }
            other => other,
        };
        // Frames stay adjacent across inputs: a model chunk is an input of
        // its own, and so is each chunk frame it sets off.
        self.engine.deliver(input);
    }

    fn next_timer(&self) -> Option<tokio::time::Instant> {
        self.engine.next_timer()
    }
}

struct Store {
    inner: Arc<dyn DurableStore>,
    adversary: Arc<Adversary>,
}

impl DurableStore for Store {
    fn load(&self) -> DurableState {
        self.inner.load()
    }

    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        let adversary = &self.adversary;
        adversary.other_effect();
        let mut writes = writes.to_vec();
        let messages: Vec<String> = writes.iter().filter_map(message_id).map(str::to_string).collect();
        if !messages.is_empty() && adversary.strike(Operator::SkipCommit, || commit_summary(&writes)) {
            adversary.lock().unstored.extend(messages);
            return Ok(());
        }
        let unstored = adversary.lock().unstored.clone();
        writes.retain(|write| message_id(write).is_none_or(|id| !unstored.contains(id)));
        writes.retain(|write| !adversary.drops_record(write));
        for message in writes.iter_mut().filter_map(ops::written_message) {
            adversary.mark_stored_outputs(message);
            adversary.mark_stored_pairs(message);
            adversary.mark_stored(message);
            adversary.rewrite_stored(message);
        }
        self.inner.commit(&writes)
    }
}

/// The message a write puts or removes.
fn message_id(write: &Write) -> Option<&str> {
    match write {
        Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => Some(&message.id),
        Write::RemoveMessage(id) => Some(id),
        _ => None,
    }
}

fn commit_summary(writes: &[Write]) -> String {
    let shown: Vec<String> = writes.iter().filter(|write| !write.is_bookkeeping()).map(Write::summary).collect();
    format!("commit of {} reported done, never applied, nor later writes of its messages", shown.join(", "))
}

impl Adversary {
    /// Each call's first stored output is a site of `wrong-tool-output-stored`.
    fn mark_stored_outputs(&self, message: &Message) {
        let calls: Vec<String> = ops::tools_with_output(message).map(|tool| tool.call_id.clone()).collect();
        for call in calls {
            if !self.lock().stored_outputs.insert(call.clone()) {
                continue;
            }
            if self.strike(Operator::WrongToolOutputStored, || format!("stored output of {call} altered")) {
                self.lock().altered_calls.insert(call);
            }
        }
    }

    /// Each pair of calls first stored with different outcomes is a site of
    /// `swap-tool-outcomes`.
    fn mark_stored_pairs(&self, message: &Message) {
        let Some(pair) = ops::swappable_pair(message) else { return };
        if !self.lock().stored_pairs.insert(pair.clone()) {
            return;
        }
        let what = || format!("stored outcomes of {} and {} swapped", pair.0, pair.1);
        if self.strike(Operator::SwapToolOutcomes, what) {
            self.lock().swapped = Some(pair);
        }
    }

    /// The persisting rewrites of the store, once applied.
    fn rewrite_stored(&self, message: &mut Message) {
        let (altered, swapped, rewritten) = {
            let state = self.lock();
            (state.altered_calls.clone(), state.swapped.clone(), state.rewritten.clone())
        };
        for call in &altered {
            ops::alter_output(message, call);
        }
        if let Some(pair) = &swapped {
            ops::swap_outcomes(message, pair);
        }
        for (operator, ids) in &rewritten {
            ops::rewrite_stored(*operator, message, ids);
        }
    }

    /// The sites of the store's per-message and per-call rewrites: the
    /// first time a message or call is stored as each can rewrite it. Also
    /// learns every stored call's tool and input.
    fn mark_stored(&self, message: &Message) {
        for tool in message.tools() {
            if let Some(input) = &tool.input {
                self.lock().calls.insert(tool.call_id.clone(), (tool.tool_name.clone(), input.clone()));
            }
        }
        for operator in ops::STORE_REWRITES {
            for id in ops::stored_sites(operator, message) {
                let first = self.lock().seen_stored.entry(operator).or_default().insert(id.clone());
                let what = || format!("{} from {id} on", operator.wrong());
                if first && self.strike(operator, what) {
                    self.lock().rewritten.entry(operator).or_default().insert(id);
                }
            }
        }
    }

    /// Whether `write` is a record the adversary keeps from the store: a
    /// turn's failure, or a continuation owed.
    fn drops_record(&self, write: &Write) -> bool {
        let (operator, id) = match write {
            Write::Terminal(Some(status)) => (Operator::FailureRecordDropped, status.request_id.clone()),
            Write::Intent(Some(intent)) => (Operator::IntentNotStored, intent.message_id.clone()),
            _ => return false,
        };
        if self.lock().rewritten.get(&operator).is_some_and(|ids| ids.contains(&id)) {
            return true;
        }
        let first = self.lock().seen_stored.entry(operator).or_default().insert(id.clone());
        if first && self.strike(operator, || format!("the record of {id} not stored")) {
            self.lock().rewritten.entry(operator).or_default().insert(id);
            return true;
        }
        false
    }

    /// `denied-tool-runs`: a call the client just denied is run anyway.
    fn run_denied(&self, call_id: &str) {
        let Some((tool_name, input)) = self.lock().calls.get(call_id).cloned() else { return };
        if self.strike(Operator::DeniedToolRuns, || format!("server tool {call_id} run though denied")) {
            self.run_on_server(ServerToolCall { call_id: call_id.to_string(), tool_name, input });
        }
    }

    /// Starts `call` on the server as if the engine had asked.
    fn run_on_server(&self, call: ServerToolCall) {
        let (tools, sink) = {
            let state = self.lock();
            (state.tools.clone(), state.sink.clone())
        };
        if let (Some(tools), Some(sink)) = (tools, sink) {
            tools.start("adversary", call, sink);
        }
    }

    /// `empty-finish-told-done`: every client told the request is done
    /// as the model ends a step empty.
    fn tell_done_on_empty_finish(&self) {
        let (request_id, connections) = {
            let state = self.lock();
            (
                state.last_request.clone(),
                state.connections.values().filter_map(std::sync::Weak::upgrade).collect::<Vec<_>>(),
            )
        };
        let Some(request_id) = request_id.filter(|_| !connections.is_empty()) else { return };
        if self
            .strike(Operator::EmptyFinishToldDone, || format!("clients told {request_id} is done on an empty finish"))
        {
            for connection in connections {
                let done = Frame::Done { request_id: request_id.clone(), continuation: false };
                connection.lock().expect("connection lock").send(done);
            }
        }
    }
}

/// A step the model ended with nothing in it: a zero-token `unknown` finish.
fn is_empty_finish(chunk: &Chunk) -> bool {
    matches!(chunk, Chunk::FinishStep { reason: turnsim_engine::FinishReason::Unknown, usage } if usage.output_tokens == 0)
}

struct Model {
    inner: Arc<dyn ModelProvider>,
    adversary: Arc<Adversary>,
}

impl ModelProvider for Model {
    fn start(&self, request: ModelRequest, sink: InputSink) -> u32 {
        let adversary = &self.adversary;
        adversary.other_effect();
        {
            let mut state = adversary.lock();
            state.sink = Some(sink.clone());
            state.last_request = Some(request.request_id.clone());
        }
        adversary.exhaust_at_continue(&request);
        let request = adversary.rewrite_request(request);
        let call = self.inner.start(request.clone(), sink.clone());
        let id = request.request_id.clone();
        if adversary.strike(Operator::ModelCalledTwice, || format!("request {id} sent twice")) {
            self.inner.start(request, sink);
        }
        call
    }

    fn cancel(&self, call: u32) {
        let adversary = &self.adversary;
        adversary.other_effect();
        // Only a call still streaming is a site: cancelling an ended one changes nothing.
        let streaming = !adversary.lock().ended_calls.contains(&call);
        if streaming && adversary.strike(Operator::DropCancel, || format!("cancel of model call {call} not sent")) {
            return;
        }
        self.inner.cancel(call);
    }
}

impl Adversary {
    fn rewrite_request(&self, mut request: ModelRequest) -> ModelRequest {
        let id = request.request_id.clone();
        if let Some((index, call)) = ops::last_output(&request.messages) {
            if self
                .strike(Operator::WrongToolOutputAsked, || format!("request {id} shows the output of {call} altered"))
            {
                ops::alter_output(&mut request.messages[index], &call);
            }
        }
        if let Some(index) = ops::last_user_message(&request.messages) {
            let message = request.messages[index].id.clone();
            if self.strike(Operator::RequestMissingMessage, || format!("request {id} sent without message {message}")) {
                request.messages.remove(index);
            }
        }
        if let Some(index) = ops::last_assistant_message(&request.messages) {
            let message = request.messages[index].id.clone();
            let what = || format!("request {id} shows text never stored in {message}");
            if self.strike(Operator::RequestWithDiscardedText, what) {
                request.messages[index].parts.push(ops::discarded_text());
            }
        }
        for operator in ops::REQUEST_REWRITES {
            if ops::request_site(operator, &request.messages)
                && self.strike(operator, || format!("request {id}: {}", operator.wrong()))
            {
                ops::rewrite_request(operator, &mut request.messages);
            }
        }
        request
    }

    /// `exhausted-at-continue`: the host told recovery gave up as a
    /// request continues a partial reply.
    fn exhaust_at_continue(&self, request: &ModelRequest) {
        let continues =
            matches!(crate::check::basis(&request.messages, request.continuation), crate::check::Basis::Partial { .. });
        let host = self.lock().host.clone();
        let (Some(host), true) = (host, continues) else { return };
        let id = &request.request_id;
        if self.strike(Operator::ExhaustedAtContinue, || format!("host told recovery gave up as {id} continues")) {
            let context = ExhaustedContext {
                incident_id: format!("{id}:adversary"),
                root_request_id: id.clone(),
                attempt: 1,
                max_attempts: 1,
                reason: "max_attempts_exceeded".into(),
                terminal_message: String::new(),
                partial_text: String::new(),
            };
            let _ = host.on_exhausted(&context);
        }
    }
}

struct Tools {
    inner: Arc<dyn ServerTools>,
    adversary: Arc<Adversary>,
}

impl ServerTools for Tools {
    fn start(&self, request_id: &str, mut call: ServerToolCall, sink: InputSink) {
        self.adversary.other_effect();
        self.adversary.lock().sink = Some(sink.clone());
        let id = call.call_id.clone();
        if self.adversary.strike(Operator::ServerToolInputChanged, || format!("server tool {id} run with other input"))
        {
            call.input = ops::other_input(&call.input);
        }
        self.inner.start(request_id, call.clone(), sink.clone());
        if self.adversary.strike(Operator::ServerToolTwice, || format!("server tool {id} started twice")) {
            self.inner.start(request_id, call, sink);
        }
    }
}

struct Host {
    inner: Arc<dyn Observer>,
    adversary: Arc<Adversary>,
}

impl Observer for Host {
    fn observe(&self, event: EngineEvent) {
        self.inner.observe(event);
    }

    fn idle(&self) {
        self.inner.idle();
    }

    fn on_exhausted(&self, context: &ExhaustedContext) -> Result<(), HookError> {
        self.adversary.other_effect();
        let incident = &context.incident_id;
        let what = || format!("exhausted hook of incident {incident} not called");
        if self.adversary.strike(Operator::SkipExhaustedHook, what) {
            return Ok(());
        }
        self.inner.on_exhausted(context)
    }
}

/// The post number a lost post is answered with: one the surface never gives.
const LOST_POST: u32 = u32::MAX;

struct Surface {
    inner: Arc<dyn MessengerSurface>,
    adversary: Arc<Adversary>,
}

impl MessengerSurface for Surface {
    fn post(&self, delivery_id: &str, text: &str, sink: InputSink) -> u32 {
        let adversary = &self.adversary;
        adversary.other_effect();
        let mut text = text.to_string();
        let length = text.chars().count();
        if length >= 2 && adversary.strike(Operator::PartialPost, || format!("post to {delivery_id} cut in half")) {
            text = text.chars().take(length / 2).collect();
        }
        let answer = !crate::check::APOLOGIES.contains(&text.as_str());
        let what = || format!("post to {delivery_id} made as the apology");
        if answer && adversary.strike(Operator::AnswerPostedAsApology, what) {
            text = turnsim_engine::messenger::ERROR_MESSENGER_RESPONSE.to_string();
        }
        if adversary.strike(Operator::PostOverLimit, || format!("post to {delivery_id} made over any limit")) {
            text.push_str(&" ".repeat(ops::OVER_ANY_LIMIT_CHARS));
        }
        if adversary.strike(Operator::DropPost, || format!("post to {delivery_id} lost, told shown")) {
            let done = Input::PostDone { post: LOST_POST, delivery_id: delivery_id.to_string(), outcome: Ok(()) };
            sink.send(done);
            return LOST_POST;
        }
        let post = self.inner.post(delivery_id, &text, sink.clone());
        if adversary.strike(Operator::DuplicatePost, || format!("post to {delivery_id} made twice")) {
            self.inner.post(delivery_id, &text, sink);
        }
        post
    }
}

/// The engine's end of one client connection.
struct Client {
    connection_id: u64,
    inner: SharedConnection,
    adversary: Arc<Adversary>,
    /// The recovery indicator this connection shows (the last `Recovering`
    /// sent): dropping a `Recovering(false)` matters only while it is on.
    recovering_shown: Mutex<bool>,
}

impl Connection for Client {
    fn send(&self, frame: Frame) -> bool {
        let Some(frames) = self.adversary.reorder(self.connection_id, &self.inner, frame) else {
            return true;
        };
        let mut sent = true;
        for frame in frames {
            let shown = *self.recovering_shown.lock().expect("indicator lock");
            for frame in self.adversary.rewrite_frame(self.connection_id, frame, shown) {
                if let Frame::Recovering(on) = frame {
                    *self.recovering_shown.lock().expect("indicator lock") = on;
                }
                self.adversary.lock().screens.entry(self.connection_id).or_default().apply(&frame);
                sent = self.inner.lock().expect("connection lock").send(frame);
            }
        }
        sent
    }
}

impl Adversary {
    /// `reorder-frames`: the frames to send now (`None`: held back). Two
    /// chunk frames on one connection, one right after the other (inputs
    /// aside) and different, are a site.
    fn reorder(&self, connection: u64, inner: &SharedConnection, frame: Frame) -> Option<Vec<Frame>> {
        if !matches!(frame, Frame::Chunk { .. }) || self.engine_dead() {
            self.other_effect();
            return Some(vec![frame]);
        }
        let mut state = self.lock();
        let held = state.held.take();
        let number = state.chunk_frames;
        state.chunk_frames += 1;
        let earlier = state.last_chunk.replace((connection, frame.clone(), number));
        drop(state);
        // The end of a tool's input changes nothing a client applies (the
        // finished call completes it): moving it is no site.
        let input_end = |frame: &Frame| matches!(frame, Frame::Chunk { chunk: Chunk::ToolInputEnd { .. }, .. });
        let follows = earlier.filter(|(previous, before, _)| {
            *previous == connection && *before != frame && !input_end(before) && !input_end(&frame)
        });
        if let Some((_, _, first)) = follows {
            let what = || format!("two chunks to c{connection} swapped: {}", frame_summary(&frame));
            if self.strike(Operator::ReorderFrames, what) {
                let (_, earlier) = held.expect("the earlier chunk of the chosen pair is held");
                return Some(vec![frame, earlier]);
            }
            self.lock().pair_starts.push(first);
        }
        send_held(held);
        if matches!(self.mode, Mode::Reorder { hold, .. } if hold == number) {
            self.lock().held = Some((inner.clone(), frame));
            return None;
        }
        Some(vec![frame])
    }

    /// Every other frame operator: what goes out instead of `frame`.
    fn rewrite_frame(&self, connection: u64, frame: Frame, recovering_shown: bool) -> Vec<Frame> {
        let on = |what: &str| format!("{what} to c{connection}");
        if matches!(frame, Frame::Reset { .. } | Frame::Tool { .. }) && !self.changes_screen(connection, &frame) {
            return vec![frame];
        }
        match frame {
            Frame::Chunk { request_id, message_id, chunk: Chunk::ToolCall { id, name, input, dynamic } }
                if input != serde_json::json!({})
                    && self.strike(Operator::ToolCallStreamedEmpty, || {
                        on(&format!("finished call {id} with no arguments"))
                    }) =>
            {
                let chunk = Chunk::ToolCall { id, name, input: serde_json::json!({}), dynamic };
                vec![Frame::Chunk { request_id, message_id, chunk }]
            }
            Frame::Chunk { .. } if ops::is_output_chunk(&frame) => {
                let shown = frame_summary(&frame);
                if self.strike(Operator::DropFrame, || on(&format!("{shown} not sent"))) {
                    return Vec::new();
                }
                if self.strike(Operator::DuplicateFrame, || on(&format!("{shown} sent twice"))) {
                    return vec![frame.clone(), frame];
                }
                vec![frame]
            }
            Frame::Reset { .. } => self.drop_or_rewrite(frame, Operator::DropReset, on("reset not sent")),
            Frame::Recovering(false) if recovering_shown => {
                self.drop_or_rewrite(frame, Operator::RecoveringLeftOn, on("recovering(false) not sent"))
            }
            Frame::Error { .. } => self.drop_or_rewrite(frame, Operator::DropErrorFrame, on("error not sent")),
            Frame::Tool { ref call_id, ref tool_name, state } => {
                if state == turnsim_engine::ToolState::InputAvailable {
                    self.run_waiting_tool(call_id, tool_name);
                }
                let what = on(&format!("tool {call_id} {} not sent", state.as_str()));
                self.drop_or_rewrite(frame, Operator::DropToolFrame, what)
            }
            Frame::Done { request_id, continuation } => {
                if self.strike(Operator::DoneAsError, || on(&format!("done of {request_id} sent as an error"))) {
                    let message = "The turn failed. Please try again.".to_string();
                    return vec![Frame::Error { request_id, message }];
                }
                if self.strike(Operator::DoneTwice, || on(&format!("done of {request_id} sent twice"))) {
                    return vec![
                        Frame::Done { request_id: request_id.clone(), continuation },
                        Frame::Done { request_id, continuation },
                    ];
                }
                let what = || on(&format!("done of {request_id} says continuation={}", !continuation));
                let flip = self.strike(Operator::WrongContinuationFlag, what);
                vec![Frame::Done { request_id, continuation: continuation != flip }]
            }
            Frame::StreamResuming { request_id } => {
                let what = || on(&format!("resume offer of {request_id} names another request"));
                match self.strike(Operator::WrongResumeOffer, what) {
                    true => vec![Frame::StreamResuming { request_id: format!("{request_id}-other") }],
                    false => vec![Frame::StreamResuming { request_id }],
                }
            }
            Frame::Messages(messages) => vec![Frame::Messages(self.rewrite_messages_shown(connection, messages))],
            other => vec![other],
        }
    }

    /// `client-tool-run-on-server`: a call a client is told to answer is
    /// run by the server as well.
    fn run_waiting_tool(&self, call_id: &str, tool_name: &str) {
        let input = self.lock().calls.get(call_id).map_or_else(|| serde_json::json!({}), |(_, input)| input.clone());
        if self.strike(Operator::ClientToolRunOnServer, || format!("client tool {call_id} run by the server")) {
            self.run_on_server(ServerToolCall {
                call_id: call_id.to_string(),
                tool_name: tool_name.to_string(),
                input,
            });
        }
    }

    /// A client's answer, just taken (and recorded with the connection it
    /// came over): its screen shows it from now on, as the client view does.
    fn answer_sent(&self) {
        let Some(crossing) = self.trace.get().and_then(|trace| trace.last_crossing(Clone::clone)) else { return };
        let Some((connection, call_id, answer)) = Answer::of(&crossing) else { return };
        if let Some(screen) = self.lock().screens.get_mut(&connection) {
            screen.answer(call_id, answer);
        }
    }

    /// Whether `frame` changes what `connection` shows (a take-back of
    /// what it never showed, a tool state it already shows, or one for a
    /// call it never saw changes nothing).
    fn changes_screen(&self, connection: u64, frame: &Frame) -> bool {
        let state = self.lock();
        let messages = state.screens.get(&connection).map_or(&[][..], |view| view.messages.as_slice());
        match frame {
            Frame::Reset { message, .. } => {
                !look_the_same(messages.iter().find(|shown| shown.id == message.id), Some(message))
            }
            // A tool frame sets the state of the call's part, where the screen has one.
            Frame::Tool { call_id, state, .. } => {
                messages.iter().find_map(|shown| shown.parts.tool(call_id)).is_some_and(|tool| tool.state != *state)
            }
            _ => true,
        }
    }

    fn drop_or_rewrite(&self, frame: Frame, operator: Operator, what: String) -> Vec<Frame> {
        if self.strike(operator, || what) {
            return Vec::new();
        }
        let Frame::Reset { request_id, mut message } = frame else { return vec![frame] };
        self.alter_shown(std::slice::from_mut(&mut message));
        vec![Frame::Reset { request_id, message }]
    }

    fn rewrite_messages_shown(&self, connection: u64, mut messages: Vec<Message>) -> Vec<Message> {
        // A message with nothing in it shows nothing: leaving it out is no
        // wrong a client could see, so it is no site.
        if let Some(last) = messages.last().filter(|last| crate::history::has_content(last)) {
            let what = || format!("transcript to c{connection} sent without message {}", last.id);
            if self.strike(Operator::StaleTranscript, what) {
                messages.pop();
            }
        }
        self.alter_shown(&mut messages);
        messages
    }

    /// `wrong-tool-output-shown`: the last output in a transcript or take-back.
    fn alter_shown(&self, messages: &mut [Message]) {
        let Some((index, call)) = ops::last_output(messages) else { return };
        if self.strike(Operator::WrongToolOutputShown, || format!("client shown the output of {call} altered")) {
            ops::alter_output(&mut messages[index], &call);
        }
    }
}

fn frame_summary(frame: &Frame) -> String {
    match frame {
        Frame::Chunk { chunk, .. } => chunk.summary(),
        other => format!("{other:?}"),
    }
}

/// The engine's end of one `chat()` call's callback.
struct Caller {
    inner: Box<dyn StreamCallback>,
    adversary: Arc<Adversary>,
}

impl Caller {
    /// A terminal callback: dropped, delivered twice, or as it is.
    fn terminal(&mut self, name: &str, deliver: impl Fn(&mut dyn StreamCallback)) {
        let adversary = self.adversary.clone();
        adversary.other_effect();
        if adversary.strike(Operator::DropTerminalCallback, || format!("{name} not delivered")) {
            return;
        }
        deliver(self.inner.as_mut());
        if adversary.strike(Operator::DuplicateTerminalCallback, || format!("{name} delivered twice")) {
            deliver(self.inner.as_mut());
        }
    }
}

impl StreamCallback for Caller {
    fn on_start(&mut self, request_id: &str) {
        self.adversary.other_effect();
        self.inner.on_start(request_id);
    }

    fn on_event(&mut self, chunk: &Chunk) {
        self.adversary.other_effect();
        let what = || format!("on_event {} not delivered", chunk.summary());
        if chunk.is_output() && self.adversary.strike(Operator::DropCallbackEvent, what) {
            return;
        }
        if let Chunk::ToolCall { id, name, input, dynamic } = chunk {
            let what = || format!("on_event finished call {id} with no arguments");
            if *input != serde_json::json!({}) && self.adversary.strike(Operator::CallbackToolCallEmptied, what) {
                let emptied = Chunk::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: serde_json::json!({}),
                    dynamic: *dynamic,
                };
                return self.inner.on_event(&emptied);
            }
        }
        self.inner.on_event(chunk);
    }

    fn on_reset(&mut self, text: &str) {
        self.adversary.other_effect();
        if self.adversary.strike(Operator::DropCallbackReset, || "on_reset not delivered".to_string()) {
            return;
        }
        self.inner.on_reset(text);
    }

    fn on_done(&mut self) {
        let adversary = self.adversary.clone();
        adversary.other_effect();
        if adversary.strike(Operator::CallbackDoneAsError, || "on_done delivered as on_error".to_string()) {
            return self.terminal("on_error", |inner| inner.on_error("The turn failed. Please try again."));
        }
        self.terminal("on_done", |inner| inner.on_done());
    }

    fn on_error(&mut self, message: &str) {
        let adversary = self.adversary.clone();
        adversary.other_effect();
        if adversary.strike(Operator::ErrorAsDone, || "on_error delivered as on_done".to_string()) {
            return self.terminal("on_done", |inner| inner.on_done());
        }
        self.terminal("on_error", |inner| inner.on_error(message));
    }

    fn on_interrupted(&mut self) {
        self.terminal("on_interrupted", |inner| inner.on_interrupted());
    }
}

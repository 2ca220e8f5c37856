//! `turnsim engine`: the built-in engine served over the protocol on
//! stdin/stdout, for the equivalence test (the same scenario and seed give
//! the same timeline in-process and across the process boundary) and as a
//! reference for authors of engines in other languages.
//!
//! The engine runs on a simulated clock of its own that only ever moves to
//! the `now_ns` each input carries; its ports turn every effect into a line
//! on stdout and every request into a line and a wait for the reply.

use std::io::{BufRead, Read as _, Write as _};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::Runtime;
use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::messenger::{MessengerSurface, PostError};
use turnsim_engine::ports::{
    Connection, DurableStore, ExhaustedContext, FaultPoints, FaultSite, Frame, HookError, ModelProvider, ModelRequest,
    Observer, Ports, ServerToolCall, ServerTools, StoreError, StreamCallback,
};
use turnsim_engine::{Chunk, EngineConfig, EngineEvent, Input, InputSink};

use super::fault::shown;
use super::seeding::generation_seed;
use super::{line, FaultReply, FromEngine, ModelReply, OutcomeReply, PostReply, RunTerms, ToEngine, WireCallback};
use crate::capability::Capability;

/// Serves runs until stdin closes: each `init` (a new run, or the next
/// generation of this one after an eviction) starts a fresh engine value on
/// a simulated runtime of its own; nothing of the last one is kept. Returns an error line for the harness's
/// log when the conversation breaks.
/// Serves the built-in engine, declaring `capabilities` at every `init`
/// (every one it has, unless told to declare fewer).
pub fn serve(capabilities: &[Capability]) -> Result<(), String> {
    let wire = Wire::new();
    let mut next = wire.read();
    loop {
        let message = match next {
            Ok(message) => message,
            Err(closed) if closed.is_empty() => return Ok(()),
            Err(error) => return Err(error),
        };
        let ToEngine::Init {
            now_ns,
            seed,
            config,
            state,
            protocol,
            generation,
            wall_base_ms,
            store_may_refuse,
            fault_sites,
            next_call,
            next_post,
            // The built-in engine keeps nothing on disk: a scratch directory
            // is for engines that do.
            scratch_dir: _,
        } = message
        else {
            return Err(format!("expected init, got {}", type_name(&message)));
        };
        if protocol != super::PROTOCOL_VERSION {
            return Err(format!("protocol {protocol} is not spoken here (version {})", super::PROTOCOL_VERSION));
        }
        if generation == 0 {
            return Err("init with generation 0: generations are numbered from 1".to_string());
        }
        check_time(now_ns, 0)?;
        // Each generation draws from a seed of its own (a restarted process
        // does not redraw its predecessor's bits); the wall clock is the
        // harness's, anchored to `wall_base_ms` in `one_run`.
        let runtime = Runtime::with_seed_and_config(generation_seed(seed, generation), madsim::Config::default());
        let in_order = next_call.is_some() && next_post.is_some();
        let run = RunTerms { store_may_refuse, fault_sites, in_order };
        let clock = Clock { now_ns, wall_base_ms };
        let numbers = Numbers {
            call: AtomicU32::new(next_call.unwrap_or_default()),
            post: AtomicU32::new(next_post.unwrap_or_default()),
        };
        let boot = Boot { config: *config, state: *state, run, numbers };
        next = runtime.block_on(one_run(wire.clone(), clock, boot, capabilities));
    }
}

/// Where a run's clocks start: sim time `now_ns`, the wall clock at
/// `wall_base_ms` when sim time was zero.
struct Clock {
    now_ns: u64,
    wall_base_ms: u64,
}

/// What an `init` boots the engine with.
struct Boot {
    config: EngineConfig,
    state: DurableState,
    run: RunTerms,
    numbers: Numbers,
}

/// The numbers the run's next model call and post get, when `init` gave
/// them (`RunTerms::in_order`): the engine names its own, and waits for no
/// reply to learn them.
struct Numbers {
    call: AtomicU32,
    post: AtomicU32,
}

/// One run: boot, then inputs until the next `init` (returned) or the end.
async fn one_run(wire: Wire, clock: Clock, boot: Boot, capabilities: &[Capability]) -> Result<ToEngine, String> {
    let Boot { config, state, run, numbers } = boot;
    wire.unmute();
    #[allow(clippy::disallowed_methods)] // the simulated clock
    let origin = tokio::time::Instant::now();
    turnsim_engine::anchor_wall_ms(clock.wall_base_ms);
    advance(origin, clock.now_ns);
    let ports = wire.ports(state, run, numbers);
    let mut engine = turnsim_engine::session::boot(config, ports, InputSink::detached());
    // Every `init` builds a fresh engine on a fresh runtime (below), so this
    // process serves another run, or the next generation of this one.
    let idle = FromEngine::Idle {
        next_timer_ns: wire_time(origin, engine.next_timer()),
        reinit: true,
        generations: true,
        batches: true,
        capabilities: Some(capabilities.iter().map(|capability| capability.name().to_string()).collect()),
        lacks: None,
    };
    wire.write(&idle);
    wire.flush();
    loop {
        let message = wire.read()?;
        if matches!(message, ToEngine::Init { .. }) {
            // The run is over: what the old engine lets go of now (its
            // callbacks) is not news to anyone.
            wire.mute();
            drop(engine);
            return Ok(message);
        }
        // The inputs of one instant, one by one, each answered by its own
        // `idle`; all of it goes out in one write.
        let inputs = match message {
            ToEngine::Inputs { inputs, .. } => inputs,
            message => vec![message],
        };
        for message in inputs {
            if let Some(now_ns) = message.now_ns() {
                #[allow(clippy::disallowed_methods)] // the simulated clock
                let current = tokio::time::Instant::now().saturating_duration_since(origin).as_nanos() as u64;
                check_time(now_ns, current)?;
                advance(origin, now_ns);
            }
            let input = wire.input(message)?;
            engine.deliver(input);
            wire.write(&FromEngine::Idle {
                next_timer_ns: wire_time(origin, engine.next_timer()),
                reinit: false,
                generations: false,
                batches: false,
                capabilities: None,
                lacks: None,
            });
        }
        wire.flush();
    }
}

/// Sim time past this is no run's (the horizon's bound is far below it):
/// an input that says so is a broken harness, not a time to move to.
const MAX_NOW_NS: u64 = 1 << 62;

/// An input's time: within range, and never before the engine's clock.
fn check_time(now_ns: u64, current_ns: u64) -> Result<(), String> {
    if now_ns > MAX_NOW_NS {
        return Err(format!("now_ns {now_ns} is out of range (at most {MAX_NOW_NS})"));
    }
    if now_ns < current_ns {
        return Err(format!("now_ns {now_ns} is before the engine's clock ({current_ns}): time never goes back"));
    }
    Ok(())
}

/// A protocol message's `type`, for an error line (never the whole
/// message: it may be huge).
fn type_name(message: &impl serde::Serialize) -> String {
    serde_json::to_value(message).ok().and_then(|value| value["type"].as_str().map(String::from)).unwrap_or_default()
}

fn wire_time(origin: tokio::time::Instant, at: Option<tokio::time::Instant>) -> Option<u64> {
    at.map(|at| at.saturating_duration_since(origin).as_nanos() as u64)
}

/// Moves the engine's clock to the input's time, exactly (a sleep would
/// overshoot: madsim sleeps at least a millisecond).
fn advance(origin: tokio::time::Instant, now_ns: u64) {
    let target = origin + Duration::from_nanos(now_ns);
    #[allow(clippy::disallowed_methods)] // the simulated clock
    let now = tokio::time::Instant::now();
    if target > now {
        madsim::time::advance(target - now);
    }
}

/// Both pipes, shared by the loop and every port. Muted, it writes
/// nothing (between runs).
#[derive(Clone)]
struct Wire(Arc<Mutex<Out>>, Arc<Mutex<std::io::BufReader<std::io::Stdin>>>);

/// Effects wait in the buffer until the engine needs an answer or goes
/// idle: one write for many lines.
struct Out {
    muted: bool,
    buffer: Vec<u8>,
}

impl Wire {
    fn new() -> Self {
        let input = std::io::BufReader::new(std::io::stdin());
        Self(Arc::new(Mutex::new(Out { muted: false, buffer: Vec::new() })), Arc::new(Mutex::new(input)))
    }

    fn mute(&self) {
        let mut out = self.0.lock().expect("wire lock");
        out.muted = true;
        out.buffer.clear();
    }

    fn unmute(&self) {
        self.0.lock().expect("wire lock").muted = false;
    }

    /// Writes what is buffered: before waiting for a reply or the next input.
    fn flush(&self) {
        let mut out = self.0.lock().expect("wire lock");
        let mut stdout = std::io::stdout().lock();
        // A harness that stopped reading has killed us or is about to.
        let _ = stdout.write_all(&out.buffer).and_then(|()| stdout.flush());
        out.buffer.clear();
    }

    /// The next message; `Err("")` when stdin closed.
    fn read(&self) -> Result<ToEngine, String> {
        let mut text = Vec::new();
        let mut input = self.1.lock().expect("stdin lock");
        if input.buffer().is_empty() {
            super::wait_readable(0);
        }
        let limit = super::output::Limits::DEFAULT_LINE_BYTES;
        match (&mut *input).take(limit as u64 + 1).read_until(b'\n', &mut text) {
            Ok(0) => Err(String::new()),
            Ok(_) if !text.ends_with(b"\n") && text.len() > limit => {
                Err(format!("a line longer than {limit} bytes: {}", shown(&text)))
            }
            Ok(_) => serde_json::from_slice(&text)
                .map_err(|error| format!("not a protocol message ({error}): {}", shown(&text))),
            Err(error) => Err(format!("reading stdin failed: {error}")),
        }
    }

    fn write(&self, message: &FromEngine) {
        let mut out = self.0.lock().expect("wire lock");
        if !out.muted {
            out.buffer.extend_from_slice(line(message).as_bytes());
        }
    }

    /// A request: the message, then the reply's value.
    fn request<T: serde::de::DeserializeOwned>(&self, message: &FromEngine) -> T {
        self.write(message);
        self.flush();
        match self.read() {
            Ok(ToEngine::Reply { value }) => serde_json::from_value(value).unwrap_or_else(|error| {
                exit_with(&format!("a reply that does not answer a {}: {error}", type_name(message)))
            }),
            Ok(other) => exit_with(&format!("expected a reply, got {}", type_name(&other))),
            Err(closed) if closed.is_empty() => {
                exit_with(&format!("stdin closed while a {} waited for its reply", type_name(message)))
            }
            Err(error) => exit_with(&error),
        }
    }

    fn input(&self, message: ToEngine) -> Result<Input, String> {
        Ok(match message {
            ToEngine::Connect { connection, .. } => {
                let end = Box::new(WireConnection { connection, wire: self.clone() });
                Input::Connect { connection_id: connection, connection: end }
            }
            ToEngine::Disconnect { connection, .. } => Input::Disconnect { connection_id: connection },
            ToEngine::ResumeRequest { connection, .. } => Input::ResumeRequest { connection_id: connection },
            ToEngine::ResumeAck { connection, request_id, .. } => {
                Input::ResumeAck { connection_id: connection, request_id }
            }
            ToEngine::UserMessage { text, options, .. } => Input::UserMessage { text, options },
            ToEngine::Chat { chat, key, text, options, .. } => {
                Input::Chat { key, text, options, callback: Box::new(WireChat { chat, wire: self.clone() }) }
            }
            ToEngine::Deliver { delivery, text, .. } => Input::Deliver { delivery_id: delivery, text },
            ToEngine::ToolResult { result, auto_continue, .. } => Input::ToolResult { result, auto_continue },
            ToEngine::Approval { call_id, approved, auto_continue, .. } => {
                Input::Approval { call_id, approved, auto_continue }
            }
            ToEngine::ModelChunk { call, chunk, .. } => {
                Input::Model { call, event: turnsim_engine::ModelEvent::Chunk(chunk) }
            }
            ToEngine::ModelEnd { call, end, .. } => Input::Model { call, event: end.into_event() },
            ToEngine::ServerToolDone { request_id, call_id, outcome, .. } => {
                Input::ServerToolDone { request_id, call_id, outcome }
            }
            ToEngine::PostDone { post, delivery, ok, error, .. } => {
                let outcome = OutcomeReply { ok, error }.into_result(PostError);
                Input::PostDone { post, delivery_id: delivery, outcome }
            }
            ToEngine::Timer { .. } => Input::Timer,
            ToEngine::Init { .. } => return Err("init sent twice".into()),
            ToEngine::Inputs { .. } => return Err("`inputs` inside `inputs`: a batch holds single inputs".into()),
            ToEngine::Reply { .. } => return Err("a reply with no request waiting".into()),
        })
    }

    fn ports(&self, state: DurableState, run: RunTerms, numbers: Numbers) -> Ports {
        let port = Arc::new(WirePorts { wire: self.clone(), state: Mutex::new(Some(state)), run, numbers });
        Ports {
            store: port.clone(),
            model: port.clone(),
            server_tools: port.clone(),
            observer: port.clone(),
            surface: port.clone(),
            faults: port,
        }
    }
}

/// The conversation broke mid-request: nothing sensible is left to do.
fn exit_with(error: &str) -> ! {
    eprintln!("turnsim engine: {error}");
    std::process::exit(2)
}

struct WirePorts {
    wire: Wire,
    /// What `init` gave, loaded once at boot.
    state: Mutex<Option<DurableState>>,
    run: RunTerms,
    numbers: Numbers,
}

impl DurableStore for WirePorts {
    fn load(&self) -> DurableState {
        self.state.lock().expect("state lock").take().unwrap_or_default()
    }

    /// A commit the store cannot refuse goes out with the next flush and
    /// waits for nothing: a round trip saved per commit.
    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        let no_reply = !self.run.store_may_refuse;
        let commit = FromEngine::Commit { writes: writes.to_vec(), no_reply };
        if no_reply {
            self.wire.write(&commit);
            return Ok(());
        }
        let reply: OutcomeReply = self.wire.request(&commit);
        reply.into_result(StoreError)
    }
}

impl ModelProvider for WirePorts {
    /// Named from `init`'s `next_call`, it goes out with the next flush;
    /// asked for, it waits for its number.
    fn start(&self, request: ModelRequest, _sink: InputSink) -> u32 {
        if !self.run.in_order {
            let reply: ModelReply = self.wire.request(&FromEngine::ModelRequest { request, call: None });
            return reply.call;
        }
        let call = self.numbers.call.fetch_add(1, Ordering::Relaxed);
        self.wire.write(&FromEngine::ModelRequest { request, call: Some(call) });
        call
    }

    fn cancel(&self, call: u32) {
        self.wire.write(&FromEngine::ModelCancel { call });
    }
}

impl ServerTools for WirePorts {
    fn start(&self, request_id: &str, call: ServerToolCall, _sink: InputSink) {
        self.wire.write(&FromEngine::ServerTool { request_id: request_id.to_string(), call });
    }
}

impl Observer for WirePorts {
    fn observe(&self, event: EngineEvent) {
        self.wire.write(&FromEngine::Observe { event });
    }

    fn on_exhausted(&self, context: &ExhaustedContext) -> Result<(), HookError> {
        let reply: OutcomeReply = self.wire.request(&FromEngine::Exhausted { context: context.clone() });
        reply.into_result(HookError)
    }
}

impl MessengerSurface for WirePorts {
    /// Named from `init`'s `next_post`, as a model call is.
    fn post(&self, delivery_id: &str, text: &str, _sink: InputSink) -> u32 {
        let (delivery, text) = (delivery_id.to_string(), text.to_string());
        if !self.run.in_order {
            let reply: PostReply = self.wire.request(&FromEngine::Post { delivery, text, post: None });
            return reply.post;
        }
        let post = self.numbers.post.fetch_add(1, Ordering::Relaxed);
        self.wire.write(&FromEngine::Post { delivery, text, post: Some(post) });
        post
    }
}

impl FaultPoints for WirePorts {
    /// A site switched off for the run never fires: nothing to ask.
    fn fire(&self, site: FaultSite) -> bool {
        if !self.run.fault_sites.contains(&site) {
            return false;
        }
        let reply: FaultReply = self.wire.request(&FromEngine::FaultPoint { site });
        reply.fire
    }
}

struct WireConnection {
    connection: u64,
    wire: Wire,
}

impl Connection for WireConnection {
    /// Open until the harness says `disconnect`: frames to a connection that
    /// closed in between are dropped on the harness's side.
    fn send(&self, frame: Frame) -> bool {
        self.wire.write(&FromEngine::Send { connection: self.connection, frame });
        true
    }
}

struct WireChat {
    chat: u32,
    wire: Wire,
}

impl WireChat {
    fn call(&self, call: WireCallback) {
        self.wire.write(&FromEngine::Callback { chat: self.chat, call });
    }
}

impl StreamCallback for WireChat {
    fn on_start(&mut self, request_id: &str) {
        self.call(WireCallback::OnStart { request_id: request_id.to_string() });
    }

    fn on_event(&mut self, chunk: &Chunk) {
        self.call(WireCallback::OnEvent { chunk: chunk.clone() });
    }

    fn on_reset(&mut self, text: &str) {
        self.call(WireCallback::OnReset { text: text.to_string() });
    }

    fn on_done(&mut self) {
        self.call(WireCallback::OnDone);
    }

    fn on_error(&mut self, message: &str) {
        self.call(WireCallback::OnError { message: message.to_string() });
    }

    fn on_interrupted(&mut self) {
        self.call(WireCallback::OnInterrupted);
    }
}

/// The engine let go of the callback: `chat()` returned.
impl Drop for WireChat {
    fn drop(&mut self) {
        self.call(WireCallback::Returned);
    }
}

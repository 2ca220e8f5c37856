//! The harness's end of the protocol: an [`Engine`] that is a child
//! process. Each input becomes one line to the child; the child's requests
//! are answered from the world's ports as they come, its effects go to the
//! same ports an in-process engine's would, and its `idle` ends the input.
//! The world cannot tell the difference, so neither can the timeline.
//!
//! One proxy is one generation: dropping it (the engine's node killed)
//! kills the child, so nothing it does later can reach the world; or, when
//! the process declared `generations`, sets it aside for the next
//! generation of the same run, which it starts afresh in place (a new
//! `init`: the engine keeps nothing of the old generation, and the old one
//! can write nothing after its last `idle`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use turnsim_engine::ports::{Connection, Ports, StreamCallback};
use turnsim_engine::{Engine, EngineConfig, Input, InputSink, ModelEvent};

use super::fault::{shown, EngineFault, FaultKind};
use super::group::{Group, Stop};
use super::output::{EngineOutput, Limits};
use super::timing::{Part, Stopwatch};
use super::{
    line, FaultReply, FromEngine, ModelReply, OutcomeReply, PostReply, RunTerms, ToEngine, WireCallback, WireEnd,
    PROTOCOL_VERSION,
};
use crate::capability::Declared;
use crate::trace::{sim_now, Trace};

/// Messages one input may set off before the engine counts as busy-looping.
const MAX_MESSAGES_PER_INPUT: usize = 100_000;
/// Inputs at one instant of sim time before the engine counts as
/// livelocked (each answered at once with work for the same instant).
const MAX_INPUTS_PER_INSTANT: u32 = 20_000;
/// Engine messages one run may send per event of its budget (the history
/// allows four crossings per event, and a message is at most one).
const MESSAGES_PER_BUDGETED_EVENT: u64 = 4;

/// What starts engine processes for one run, and what ends the run when
/// one of them breaks.
#[derive(Clone)]
pub struct Launcher {
    command: String,
    seed: u64,
    config: EngineConfig,
    /// What every `init` of the run says of it beyond the engine's boot.
    terms: RunTerms,
    limits: Limits,
    /// Generations started so far in this run.
    generations: Arc<Mutex<u32>>,
    /// The run is over: what stops now was not evicted.
    finished: Arc<AtomicBool>,
    /// The first fault of any generation: the run ends at it.
    fault: Arc<Mutex<Option<EngineFault>>>,
    /// Messages the engine may still send in this run (its event budget).
    messages_left: Arc<AtomicU64>,
    /// An evicted generation's process that starts the next one in place.
    parked: Arc<Parked>,
    /// Woken when a fault ends the run.
    trace: Trace,
    /// A live run's scratch directory, removed when the run's last
    /// generation lets go of it.
    scratch: Option<Arc<crate::live::ScratchDir>>,
    /// The last model call and post the world numbered in this run, across
    /// generations: each `init` tells the engine the numbers that come next.
    numbered: Arc<Mutex<Numbered>>,
}

/// The last numbers the world gave (0: none yet).
#[derive(Clone, Copy, Default)]
struct Numbered {
    call: u32,
    post: u32,
}

impl Launcher {
    pub fn new(
        command: String,
        seed: u64,
        config: EngineConfig,
        terms: RunTerms,
        max_events: u64,
        trace: Trace,
    ) -> Self {
        let messages_left = Arc::new(AtomicU64::new(max_events.saturating_mul(MESSAGES_PER_BUDGETED_EVENT)));
        // A scratch directory that cannot be made leaves the engine to make its own.
        let scratch = crate::live::is_live().then(crate::live::ScratchDir::new).and_then(Result::ok).map(Arc::new);
        Self {
            command,
            seed,
            config,
            terms,
            limits: Limits::from_env(),
            generations: Arc::default(),
            finished: Arc::default(),
            fault: Arc::default(),
            messages_left,
            parked: Arc::default(),
            trace,
            scratch,
            numbered: Arc::default(),
        }
    }

    pub fn boot(&self, ports: Ports, sink: InputSink) -> Box<dyn Engine> {
        let generation = {
            let mut generations = self.generations.lock().expect("generations lock");
            *generations += 1;
            *generations
        };
        Box::new(ProcessEngine::start(self, generation, ports, sink))
    }

    /// From now on a process that stops was not evicted: one that can
    /// start over (`reinit`) is kept for the next run.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        if let Some(process) = self.parked.take() {
            // Evicted and never restarted: the run is over all the same.
            release(&self.command, process);
        }
    }

    /// The fault that ended the run, if one did.
    pub fn fault(&self) -> Option<EngineFault> {
        self.fault.lock().expect("fault lock").clone()
    }

    /// Whether a fault ended the run (asked at every event the world
    /// waits on: no copy of the fault).
    pub fn broke(&self) -> bool {
        self.fault.lock().expect("fault lock").is_some()
    }

    fn record(&self, fault: EngineFault) {
        self.fault.lock().expect("fault lock").get_or_insert(fault);
        self.trace.poke();
    }
}

thread_local! {
    /// Real time to wait before each delivery, for the time-escape canary.
    static WALL_JITTER: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `run` with real, unseeded wall-clock jitter (up to a millisecond)
/// before every delivery to an engine process: an engine that reads a
/// real clock instead of the `now_ns` it is given shows it as a history
/// that differs from an undisturbed run's.
pub fn with_wall_jitter<T>(run: impl FnOnce() -> T) -> T {
    // Unseeded on purpose: the address of a local differs from run to run.
    let state = 0u8;
    WALL_JITTER.with(|jitter| jitter.set(Some((&state as *const u8 as u64) | 1)));
    let result = run();
    WALL_JITTER.with(|jitter| jitter.set(None));
    result
}

fn jitter_before_delivery() {
    let Some(mut state) = WALL_JITTER.with(std::cell::Cell::get) else {
        return;
    };
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    WALL_JITTER.with(|jitter| jitter.set(Some(state)));
    std::thread::sleep(Duration::from_micros(state % 1_000));
}

/// Drives every run from now on with a fresh process for every generation,
/// even when the engine offers to start generations in place: for
/// comparing the two (a trace must not tell them apart).
pub fn use_fresh_processes(fresh: bool) {
    FRESH_PROCESSES.store(fresh, Ordering::SeqCst);
}

static FRESH_PROCESSES: AtomicBool = AtomicBool::new(false);

/// The slot for an evicted process waiting for the next generation of its
/// run. A run that ends without taking it (or panics) stops it.
#[derive(Default)]
struct Parked(Mutex<Option<Process>>);

impl Parked {
    fn take(&self) -> Option<Process> {
        self.0.lock().expect("parked process lock").take()
    }

    fn put(&self, process: Process) {
        let old = self.0.lock().expect("parked process lock").replace(process);
        if let Some(old) = old {
            old.stop(Stop::Kill);
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        if let Some(process) = self.take() {
            process.stop(Stop::Kill);
        }
    }
}

/// One engine process and its pipes.
struct Process {
    group: Group,
    writer: ChildStdin,
    output: EngineOutput,
    /// It said it takes another `init` once a run is over.
    reinit: bool,
    /// It said it starts the next generation of a run in place.
    generations: bool,
    /// It answered an `init`: from then on it must be quiet between inputs
    /// (before its first, what it writes is its answer to `init`).
    served: bool,
}

impl Process {
    fn spawn(command: &str) -> Result<Self, String> {
        if command.trim().is_empty() {
            return Err("the engine command is empty".to_string());
        }
        let (group, pipes) = Group::spawn(command).map_err(|error| format!("could not start `{command}`: {error}"))?;
        let output = EngineOutput::new(pipes.stdout, pipes.stderr);
        Ok(Self { group, writer: pipes.stdin, output, reinit: false, generations: false, served: false })
    }

    fn stop(self, how: Stop) {
        // Its stdin closes first: an engine that ends at EOF ends now.
        drop(self.writer);
        self.group.stop(how);
    }
}

/// Processes waiting for an `init`, by command: one started ahead of need
/// (its start-up overlaps the run that needs the next), or one a finished
/// run left that can start over. Starting one is most of what a short run
/// over the protocol costs.
static IDLE_PROCESSES: Mutex<Vec<(String, Process)>> = Mutex::new(Vec::new());
/// Kept at most (about one per parallel job).
const MAX_IDLE_PROCESSES: usize = 16;

/// A process for a new generation: one waiting if there is, a new one
/// otherwise; and a spare started for whoever comes next.
fn next_process(command: &str) -> Result<Process, String> {
    let waiting = {
        let mut idle = IDLE_PROCESSES.lock().expect("process pool lock");
        let at = idle.iter().position(|(kept, _)| kept == command);
        at.map(|at| idle.swap_remove(at).1)
    };
    let mut process = match waiting {
        Some(process) => process,
        None => Process::spawn(command)?,
    };
    if process.reinit {
        // It served a run before: its stderr from here on is this generation's.
        process.output.start_generation();
    }
    let spare_waits = IDLE_PROCESSES.lock().expect("process pool lock").iter().any(|(kept, _)| kept == command);
    if !spare_waits {
        if let Ok(spare) = Process::spawn(command) {
            keep(command.to_string(), spare);
        }
    }
    Ok(process)
}

/// Stops every waiting process and every engine process group still
/// running: call once the invocation's runs are done, and on Ctrl-C.
pub fn stop_waiting_processes() {
    let waiting = std::mem::take(&mut *IDLE_PROCESSES.lock().expect("process pool lock"));
    for (_, process) in waiting {
        process.stop(Stop::Term);
    }
    super::group::stop_all();
}

/// A process whose run is over: kept for the next run when it offered
/// `reinit`, stopped otherwise.
fn release(command: &str, process: Process) {
    if process.reinit {
        keep(command.to_string(), process);
    } else {
        process.stop(Stop::Term);
    }
}

fn keep(command: String, process: Process) {
    let mut idle = IDLE_PROCESSES.lock().expect("process pool lock");
    if idle.len() < MAX_IDLE_PROCESSES {
        idle.push((command, process));
    } else {
        drop(idle);
        process.stop(Stop::Term);
    }
}

pub struct ProcessEngine {
    /// `None` once stopped (or never started).
    process: Option<Process>,
    launcher: Launcher,
    generation: u32,
    ports: Ports,
    sink: InputSink,
    connections: BTreeMap<u64, Box<dyn Connection>>,
    chats: BTreeMap<u32, Box<dyn StreamCallback>>,
    next_chat: u32,
    next_timer: Option<Instant>,
    /// The instant of sim time zero, to turn the engine's nanoseconds into
    /// instants.
    origin: Instant,
    /// The sim instant of the last input, and how many came at it.
    instant: (Duration, u32),
    /// Its `init` reply said `batches`: the inputs of one instant go in one
    /// `inputs` line.
    batches: bool,
}

const AFTER_IDLE: &str = "it wrote after going idle (effects belong before `idle`)";
const BEFORE_REPLY: &str = "it wrote again before its request was answered (one request at a time: wait for the reply)";

/// Why an exchange stopped short of `idle`.
type Broke = (FaultKind, String);

/// What an engine offered on the `idle` that answered its `init`.
#[derive(Default)]
struct Offers {
    reinit: bool,
    generations: bool,
    batches: bool,
    capabilities: Option<Vec<String>>,
    lacks: Option<Vec<String>>,
}

impl ProcessEngine {
    fn start(launcher: &Launcher, generation: u32, ports: Ports, sink: InputSink) -> Self {
        #[allow(clippy::disallowed_methods)] // the simulated clock
        let origin = Instant::now() - sim_now();
        let mut engine = Self {
            process: None,
            launcher: launcher.clone(),
            generation,
            ports,
            sink,
            connections: BTreeMap::new(),
            chats: BTreeMap::new(),
            next_chat: 0,
            next_timer: None,
            origin,
            instant: (Duration::ZERO, 0),
            batches: false,
        };
        if launcher.broke() {
            return engine; // the run is over
        }
        // The process of an earlier generation of this run only when it
        // declared that it starts generations in place (otherwise it was
        // killed with its eviction), and never a process another run holds.
        let parked = launcher.parked.take().map(|mut process| {
            process.output.start_generation();
            process
        });
        match parked.map_or_else(|| next_process(&launcher.command), Ok) {
            Ok(process) => engine.process = Some(process),
            Err(what) => {
                engine.broke((FaultKind::Crashed, what));
                return engine;
            }
        }
        let state = engine.ports.store.load();
        #[allow(clippy::disallowed_methods)] // the simulated wall clock
        let wall_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let wall_base_ms = (wall_now.saturating_sub(sim_now())).as_millis() as u64;
        let numbered = *launcher.numbered.lock().expect("numbered lock");
        let init = ToEngine::Init {
            now_ns: now_ns(),
            protocol: PROTOCOL_VERSION,
            seed: launcher.seed,
            generation,
            wall_base_ms,
            config: Box::new(launcher.config.clone()),
            state: Box::new(state),
            store_may_refuse: launcher.terms.store_may_refuse,
            fault_sites: launcher.terms.fault_sites.clone(),
            next_call: launcher.terms.in_order.then_some(numbered.call.saturating_add(1)),
            next_post: launcher.terms.in_order.then_some(numbered.post.saturating_add(1)),
            scratch_dir: launcher.scratch.as_ref().map(|scratch| scratch.path().display().to_string()),
        };
        match engine.exchange(&init, vec![None], &mut |_| {}).and_then(|offers| engine.declared(offers)) {
            Ok(Offers { reinit, generations, batches, .. }) => {
                engine.batches = batches;
                let process = engine.process.as_mut().expect("started");
                process.reinit = reinit;
                process.generations = generations && !FRESH_PROCESSES.load(Ordering::SeqCst);
                process.served = true;
            }
            Err(broke) => engine.broke(broke),
        }
        engine
    }

    /// Reads and records the capabilities an `init` reply declared: an
    /// unknown name, or a declaration that differs from an earlier
    /// `init`'s, is a protocol fault.
    fn declared(&self, offers: Offers) -> Result<Offers, Broke> {
        let in_reply = |error: String| (FaultKind::Protocol, format!("its `init` reply: {error}"));
        let declared =
            Declared::from_names(offers.capabilities.as_deref(), offers.lacks.as_deref()).map_err(in_reply)?;
        super::declared::record(&self.launcher.command, declared).map_err(in_reply)?;
        Ok(offers)
    }

    /// Sends one line (an input, or the `inputs` of one instant, each with
    /// what the proxy takes on when the engine reaches it) and serves the
    /// engine until it is idle after the last; returns what that `idle`
    /// offered.
    fn exchange(
        &mut self,
        message: &ToEngine,
        admits: Vec<Option<Admit>>,
        taking: &mut dyn FnMut(usize),
    ) -> Result<Offers, Broke> {
        jitter_before_delivery();
        let writing = Stopwatch::start();
        self.before_input(admits.len() as u32)?;
        self.write(message)?;
        writing.stop(Part::Writing);
        let exchanging = Stopwatch::start();
        let mut offers = Offers::default();
        for (at, admit) in admits.into_iter().enumerate() {
            taking(at);
            if let Some(admit) = admit {
                self.admit(admit);
            }
            offers = self.until_idle()?;
        }
        // What came with the last `idle` is a violation now; what comes
        // later, before the next input goes out (`before_input`).
        let output = &self.process_mut().output;
        output.expect_nothing_left(AFTER_IDLE).map_err(|fault| (fault.kind, fault.what))?;
        exchanging.stop(Part::Exchanging);
        Ok(offers)
    }

    /// Serves the engine until its next `idle`.
    fn until_idle(&mut self) -> Result<Offers, Broke> {
        for _ in 0..MAX_MESSAGES_PER_INPUT {
            let message = self.read()?;
            if let FromEngine::Idle { next_timer_ns, reinit, generations, batches, capabilities, lacks } = message {
                self.next_timer = next_timer_ns.map(|ns| self.origin + Duration::from_nanos(ns));
                return Ok(Offers { reinit, generations, batches, capabilities, lacks });
            }
            self.serve(message)?;
        }
        Err((FaultKind::Busy, format!("{MAX_MESSAGES_PER_INPUT} messages for one input without going idle")))
    }

    /// What an input hands the proxy, from the moment the engine has it.
    fn admit(&mut self, admit: Admit) {
        match admit {
            Admit::Connect(id, connection) => {
                self.connections.insert(id, connection);
            }
            Admit::Disconnect(id) => {
                self.connections.remove(&id);
            }
            Admit::Chat(chat, callback) => {
                self.chats.insert(chat, callback);
            }
        }
    }

    /// What must hold before `inputs` more go out: the engine said nothing
    /// since its `idle`, and time is not standing still.
    fn before_input(&mut self, inputs: u32) -> Result<(), Broke> {
        if self.process_mut().served {
            self.expect_quiet(AFTER_IDLE)?;
        }
        let now = sim_now();
        if self.instant.0 == now {
            self.instant.1 += inputs;
            if self.instant.1 > MAX_INPUTS_PER_INSTANT {
                let what = format!(
                    "{MAX_INPUTS_PER_INSTANT} inputs at {} ms of sim time, each setting off more work at the same \
                     instant (a livelock)",
                    now.as_millis()
                );
                return Err((FaultKind::Busy, what));
            }
        } else {
            self.instant = (now, inputs);
        }
        Ok(())
    }

    /// That the engine wrote nothing more: it must wait (for its reply, or
    /// for the next input).
    fn expect_quiet(&mut self, violation: &str) -> Result<(), Broke> {
        let limits = self.launcher.limits;
        self.process_mut().output.expect_quiet(&limits, violation).map_err(|fault| (fault.kind, fault.what))
    }

    /// Handles one message from the engine short of its `idle`.
    fn serve(&mut self, message: FromEngine) -> Result<(), Broke> {
        let request = matches!(
            message,
            FromEngine::Commit { no_reply: false, .. }
                | FromEngine::ModelRequest { call: None, .. }
                | FromEngine::FaultPoint { .. }
                | FromEngine::Post { post: None, .. }
                | FromEngine::Exhausted { .. }
        );
        if request {
            self.expect_quiet(BEFORE_REPLY)?;
        }
        match message {
            FromEngine::Idle { .. } => {}
            FromEngine::Commit { writes, no_reply } => {
                if no_reply && self.launcher.terms.store_may_refuse {
                    let what = "a commit with `no_reply` in a run whose store may refuse one (`init` said \
                                `store_may_refuse: true`)";
                    return Err((FaultKind::Protocol, what.to_string()));
                }
                let outcome = self.ports.store.commit(&writes);
                if !no_reply {
                    self.reply(OutcomeReply::of(outcome, |error| error.0))?;
                }
            }
            FromEngine::Send { connection, frame } => {
                // A connection that refused a frame is closed: later frames
                // to it go nowhere, as an in-process engine drops it.
                let open = self.connections.get(&connection).is_some_and(|end| end.send(frame));
                if !open {
                    self.connections.remove(&connection);
                }
            }
            FromEngine::ModelRequest { request, call: named } => {
                let call = self.ports.model.start(request, self.sink.clone());
                self.numbered(named, call, "model call", "next_call", |numbered| &mut numbered.call)?;
                if named.is_none() {
                    self.reply(ModelReply { call })?;
                }
            }
            FromEngine::FaultPoint { site } => {
                let fire = self.ports.faults.fire(site);
                self.reply(FaultReply { fire })?;
            }
            FromEngine::ModelCancel { call } => self.ports.model.cancel(call),
            FromEngine::ServerTool { request_id, call } => {
                self.ports.server_tools.start(&request_id, call, self.sink.clone())
            }
            FromEngine::Callback { chat, call } => self.callback(chat, call)?,
            FromEngine::Post { delivery, text, post: named } => {
                let post = self.ports.surface.post(&delivery, &text, self.sink.clone());
                self.numbered(named, post, "post", "next_post", |numbered| &mut numbered.post)?;
                if named.is_none() {
                    self.reply(PostReply { post })?;
                }
            }
            FromEngine::Exhausted { context } => {
                let reply = OutcomeReply::of(self.ports.observer.on_exhausted(&context), |error| error.0);
                self.reply(reply)?;
            }
            FromEngine::Observe { event } => self.ports.observer.observe(event),
        }
        Ok(())
    }

    /// Keeps the number the world gave a call or post (0: the engine is
    /// already dead, and numbered nothing) for the next generation's `init`,
    /// in a run whose numbers come in order; a number the engine named
    /// itself is held to [`misnamed`].
    fn numbered(
        &self,
        named: Option<u32>,
        given: u32,
        what: &str,
        field: &str,
        last: impl FnOnce(&mut Numbered) -> &mut u32,
    ) -> Result<(), Broke> {
        if given == 0 {
            return Ok(());
        }
        let in_order = self.launcher.terms.in_order;
        if in_order {
            *last(&mut self.launcher.numbered.lock().expect("numbered lock")) = given;
        }
        match misnamed(in_order, named, given, what, field) {
            Some(what) => Err((FaultKind::Protocol, what)),
            None => Ok(()),
        }
    }

    fn callback(&mut self, chat: u32, call: WireCallback) -> Result<(), Broke> {
        if call == WireCallback::Returned {
            // Dropped here, as an in-process engine drops the callback.
            return match self.chats.remove(&chat) {
                Some(_) => Ok(()),
                None => Err((FaultKind::Protocol, format!("`returned` for chat {chat}, which is not open"))),
            };
        }
        let Some(callback) = self.chats.get_mut(&chat) else {
            return Err((FaultKind::Protocol, format!("a callback for chat {chat}, which is not open")));
        };
        match call {
            WireCallback::OnStart { request_id } => callback.on_start(&request_id),
            WireCallback::OnEvent { chunk } => callback.on_event(&chunk),
            WireCallback::OnReset { text } => callback.on_reset(&text),
            WireCallback::OnDone => callback.on_done(),
            WireCallback::OnError { message } => callback.on_error(&message),
            WireCallback::OnInterrupted => callback.on_interrupted(),
            WireCallback::Returned => {}
        }
        Ok(())
    }

    fn reply(&mut self, value: impl serde::Serialize) -> Result<(), Broke> {
        let value = serde_json::to_value(value).expect("replies serialise");
        self.write(&ToEngine::Reply { value })
    }

    fn write(&mut self, message: &ToEngine) -> Result<(), Broke> {
        if !matches!(message, ToEngine::Reply { .. }) {
            let idles = match message {
                ToEngine::Inputs { inputs, .. } => inputs.len(),
                _ => 1,
            };
            INPUT_TAP
                .with(|tap| tap.borrow_mut().as_mut().map(|lines| lines.push(Tapped { text: line(message), idles })));
        }
        let writer = &mut self.process_mut().writer;
        let sent = writer.write_all(line(message).as_bytes()).and_then(|()| writer.flush());
        sent.map_err(|error| (FaultKind::Crashed, format!("its stdin closed: {error}")))
    }

    fn read(&mut self) -> Result<FromEngine, Broke> {
        let left = &self.launcher.messages_left;
        if left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).is_err() {
            let what = "more messages than the run's event budget allows (`max_events`): a livelock, or a run longer \
                        than its budget";
            return Err((FaultKind::Busy, what.to_string()));
        }
        let limits = self.launcher.limits;
        let line = self.process_mut().output.next_line(&limits).map_err(|fault| (fault.kind, fault.what))?;
        serde_json::from_slice(&line).map_err(|error| match is_reply(&line) {
            true => {
                let what = "a `reply`, but the harness asked nothing: replies go from the harness to the engine";
                (FaultKind::Protocol, what.to_string())
            }
            false => (FaultKind::Malformed, format!("not a protocol message ({error}): {}", shown(&line))),
        })
    }

    fn process_mut(&mut self) -> &mut Process {
        self.process.as_mut().expect("a live engine process")
    }

    /// The process broke: it is killed, the fault ends the run, and this
    /// engine takes no more input.
    fn broke(&mut self, (kind, what): Broke) {
        let stderr = match self.process.take() {
            Some(mut process) => {
                let stderr = process.output.stderr_tail();
                process.stop(Stop::Kill);
                stderr
            }
            None => String::new(),
        };
        let fault =
            EngineFault { kind, command: self.launcher.command.clone(), generation: self.generation, what, stderr };
        self.launcher.record(fault);
        self.next_timer = None;
    }
}

thread_local! {
    // While set, every line but a reply this thread writes to an engine.
    static INPUT_TAP: std::cell::RefCell<Option<Vec<Tapped>>> = const { std::cell::RefCell::new(None) };
}

/// A line the harness wrote to an engine, and how many `idle`s answer it
/// (one per input an `inputs` line holds).
pub struct Tapped {
    pub text: String,
    pub idles: usize,
}

/// Runs `runs`, returning with its result every line but the replies the
/// harness wrote to engine processes from this thread (`init`s and inputs,
/// in order): what `bench` feeds the Node floor.
pub fn tapping_inputs<T>(runs: impl FnOnce() -> T) -> (T, Vec<Tapped>) {
    INPUT_TAP.with(|tap| *tap.borrow_mut() = Some(Vec::new()));
    let result = runs();
    (result, INPUT_TAP.with(|tap| tap.borrow_mut().take()).unwrap_or_default())
}

/// Whether a line is the harness's own `reply`, sent back.
fn is_reply(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|value| value["type"] == "reply")
}

/// What the proxy takes on with an input, once the engine has it: a
/// connection's end, a connection gone, a `chat()`'s callback.
enum Admit {
    Connect(u64, Box<dyn Connection>),
    Disconnect(u64),
    Chat(u32, Box<dyn StreamCallback>),
}

impl ProcessEngine {
    /// The line for an input, and what the proxy takes on with it.
    fn message(&mut self, input: Input, now_ns: u64) -> (ToEngine, Option<Admit>) {
        let message = match input {
            Input::Connect { connection_id, connection } => {
                let message = ToEngine::Connect { now_ns, connection: connection_id };
                return (message, Some(Admit::Connect(connection_id, connection)));
            }
            Input::Disconnect { connection_id } => {
                let message = ToEngine::Disconnect { now_ns, connection: connection_id };
                return (message, Some(Admit::Disconnect(connection_id)));
            }
            Input::ResumeRequest { connection_id } => ToEngine::ResumeRequest { now_ns, connection: connection_id },
            Input::ResumeAck { connection_id, request_id } => {
                ToEngine::ResumeAck { now_ns, connection: connection_id, request_id }
            }
            Input::UserMessage { text, options } => ToEngine::UserMessage { now_ns, text, options },
            Input::Chat { key, text, options, callback } => {
                self.next_chat += 1;
                let message = ToEngine::Chat { now_ns, chat: self.next_chat, key, text, options };
                return (message, Some(Admit::Chat(self.next_chat, callback)));
            }
            Input::Deliver { delivery_id, text } => ToEngine::Deliver { now_ns, delivery: delivery_id, text },
            Input::ToolResult { result, auto_continue } => ToEngine::ToolResult { now_ns, result, auto_continue },
            Input::Approval { call_id, approved, auto_continue } => {
                ToEngine::Approval { now_ns, call_id, approved, auto_continue }
            }
            Input::Model { call, event: ModelEvent::Chunk(chunk) } => ToEngine::ModelChunk { now_ns, call, chunk },
            Input::Model { call, event: ModelEvent::Failed(error) } => {
                ToEngine::ModelEnd { now_ns, call, end: WireEnd::from_error(&error) }
            }
            Input::Model { call, event: ModelEvent::Closed } => {
                ToEngine::ModelEnd { now_ns, call, end: WireEnd::Closed }
            }
            Input::ServerToolDone { request_id, call_id, outcome } => {
                ToEngine::ServerToolDone { now_ns, request_id, call_id, outcome }
            }
            Input::PostDone { post, delivery_id, outcome } => {
                let OutcomeReply { ok, error } = OutcomeReply::of(outcome, |error| error.0);
                ToEngine::PostDone { now_ns, post, delivery: delivery_id, ok, error }
            }
            Input::Timer => ToEngine::Timer { now_ns },
        };
        (message, None)
    }
}

impl Engine for ProcessEngine {
    fn deliver(&mut self, input: Input) {
        self.deliver_batch(vec![input], &mut |_| {});
    }

    fn takes_batches(&self) -> bool {
        self.batches
    }

    /// One line for the lot: one input alone, several in an `inputs`.
    fn deliver_batch(&mut self, inputs: Vec<Input>, taking: &mut dyn FnMut(usize)) {
        if self.process.is_none() || inputs.is_empty() {
            return; // broken (the run ends at its fault), or nothing to send
        }
        let now_ns = now_ns();
        let (mut messages, admits): (Vec<_>, Vec<_>) =
            inputs.into_iter().map(|input| self.message(input, now_ns)).unzip();
        let message = match messages.len() {
            1 => messages.pop().expect("one message"),
            _ => ToEngine::Inputs { now_ns, inputs: messages },
        };
        if let Err(broke) = self.exchange(&message, admits, taking) {
            self.broke(broke);
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next_timer
    }
}

impl Drop for ProcessEngine {
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let finished = self.launcher.finished.load(Ordering::SeqCst);
        if finished {
            release(&self.launcher.command, process);
        } else if process.generations {
            // An eviction of an engine that starts its next generation in
            // place: it waits, idle, for that generation's `init` (the
            // harness sends it nothing else, and checks it wrote nothing
            // since its last `idle` before it does).
            self.launcher.parked.put(process);
        } else {
            // An eviction (or a run that ended without it): the process
            // dies, and nothing it does later can reach the world.
            process.stop(Stop::Kill);
        }
    }
}

fn now_ns() -> u64 {
    sim_now().as_nanos() as u64
}

/// What is wrong with the number an engine named its `what` (`field` in
/// `init`), the world's number being `given`: in a run whose numbers come
/// in order it must be the world's, and in one whose `init` gave none it
/// may name none.
fn misnamed(in_order: bool, named: Option<u32>, given: u32, what: &str, field: &str) -> Option<String> {
    let named = named?;
    if !in_order {
        return Some(format!("it named its {what} {named}, but `init` gave no `{field}` (ask for its number)"));
    }
    (named != given).then(|| {
        format!("it named its {what} {named}, but it is the run's {what} {given} (count from `init`'s `{field}`, one per {what})")
    })
}

#[cfg(test)]
mod tests {
    use super::misnamed;

    #[test]
    fn a_named_number_is_the_worlds_and_only_where_init_gave_one() {
        assert_eq!(misnamed(true, None, 3, "post", "next_post"), None, "asked: nothing to hold it to");
        assert_eq!(misnamed(true, Some(3), 3, "post", "next_post"), None);
        let wrong = misnamed(true, Some(99), 1, "post", "next_post").expect("a wrong number");
        assert!(wrong.contains("named its post 99, but it is the run's post 1"), "{wrong}");
        assert_eq!(misnamed(false, None, 3, "model call", "next_call"), None);
        let unasked = misnamed(false, Some(3), 3, "model call", "next_call").expect("named where init gave none");
        assert!(unasked.contains("`init` gave no `next_call`"), "{unasked}");
    }
}

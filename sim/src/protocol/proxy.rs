//! The harness's end of the protocol: an [`Engine`] that is a child
//! process. Each input becomes one line to the child; the child's requests
//! are answered from the world's ports as they come, its effects go to the
//! same ports an in-process engine's would, and its `idle` ends the input.
//! The world cannot tell the difference, so neither can the timeline.
//!
//! One proxy is one process, one generation: dropping it (the engine's
//! node killed) kills the child, so nothing it does later can reach the
//! world.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use turnsim_engine::ports::{Connection, Ports, StreamCallback};
use turnsim_engine::{Engine, EngineConfig, Input, InputSink, ModelEvent};

use super::{
    line, FaultReply, FromEngine, ModelReply, OutcomeReply, PostReply, ToEngine, WireCallback, WireEnd,
    PROTOCOL_VERSION,
};
use crate::trace::sim_now;

/// Messages one input may set off before the engine counts as busy-looping.
const MAX_MESSAGES_PER_INPUT: usize = 100_000;
/// Real time the engine may stay silent while it handles an input before
/// it counts as hung; `TURNSIM_ENGINE_TIMEOUT_MS` overrides it. (Measured
/// by poll(2): the process's clocks are the simulation's.)
const MAX_WALL_PER_INPUT: Duration = Duration::from_secs(30);

fn wall_limit() -> Duration {
    let configured = std::env::var("TURNSIM_ENGINE_TIMEOUT_MS").ok().and_then(|ms| ms.parse().ok());
    configured.map_or(MAX_WALL_PER_INPUT, Duration::from_millis)
}
/// Bytes of the engine's stderr kept to show with a failure.
const STDERR_TAIL: usize = 4_000;

/// What starts engine processes for one run.
#[derive(Clone)]
pub struct Launcher {
    command: String,
    seed: u64,
    config: EngineConfig,
    /// Generations started so far in this run.
    generations: Arc<Mutex<u32>>,
    /// The run is over: what stops now was not evicted.
    finished: Arc<AtomicBool>,
}

impl Launcher {
    pub fn new(command: String, seed: u64, config: EngineConfig) -> Self {
        Self { command, seed, config, generations: Arc::default(), finished: Arc::default() }
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

/// One engine process and its pipes.
struct Process {
    child: Child,
    writer: ChildStdin,
    reader: BufReader<ChildStdout>,
    /// Where its stderr goes.
    stderr: PathBuf,
    /// It said it takes another `init` once a run is over.
    reinit: bool,
}

impl Process {
    fn spawn(command: &str) -> Self {
        let stderr = stderr_file();
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(&stderr).unwrap_or_else(|error| {
                panic!("engine-crashed: no file for its stderr at {}: {error}", stderr.display())
            });
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("engine-crashed: could not start `{command}`: {error}"));
        let writer = child.stdin.take().expect("piped stdin");
        let reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        Self { child, writer, reader, stderr, reinit: false }
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
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
fn next_process(command: &str) -> Process {
    let waiting = {
        let mut idle = IDLE_PROCESSES.lock().expect("process pool lock");
        let at = idle.iter().position(|(kept, _)| kept == command);
        at.map(|at| idle.swap_remove(at).1)
    };
    let process = waiting.unwrap_or_else(|| Process::spawn(command));
    // Its stderr from here on is this generation's.
    let _ = std::fs::File::create(&process.stderr);
    let spare_waits = IDLE_PROCESSES.lock().expect("process pool lock").iter().any(|(kept, _)| kept == command);
    if !spare_waits {
        keep(command.to_string(), Process::spawn(command));
    }
    process
}

/// Stops every waiting process (and removes its stderr file): call once
/// the invocation's runs are done.
pub fn stop_waiting_processes() {
    let waiting = std::mem::take(&mut *IDLE_PROCESSES.lock().expect("process pool lock"));
    for (_, process) in waiting {
        process.stop();
    }
}

fn keep(command: String, process: Process) {
    let mut idle = IDLE_PROCESSES.lock().expect("process pool lock");
    if idle.len() < MAX_IDLE_PROCESSES {
        idle.push((command, process));
    } else {
        drop(idle);
        process.stop();
    }
}

pub struct ProcessEngine {
    /// `None` once stopped.
    process: Option<Process>,
    command: String,
    generation: u32,
    finished: Arc<AtomicBool>,
    /// It broke the protocol or died: never kept.
    failed: bool,
    ports: Ports,
    sink: InputSink,
    connections: BTreeMap<u64, Box<dyn Connection>>,
    chats: BTreeMap<u32, Box<dyn StreamCallback>>,
    next_chat: u32,
    next_timer: Option<Instant>,
    /// The instant of sim time zero, to turn the engine's nanoseconds into
    /// instants.
    origin: Instant,
}

impl ProcessEngine {
    fn start(launcher: &Launcher, generation: u32, ports: Ports, sink: InputSink) -> Self {
        // Never the process of an earlier generation of this run: that one
        // was killed with its eviction.
        let process = next_process(&launcher.command);
        #[allow(clippy::disallowed_methods)] // the simulated clock
        let origin = Instant::now() - sim_now();
        let mut engine = Self {
            process: Some(process),
            command: launcher.command.clone(),
            generation,
            finished: launcher.finished.clone(),
            failed: false,
            ports,
            sink,
            connections: BTreeMap::new(),
            chats: BTreeMap::new(),
            next_chat: 0,
            next_timer: None,
            origin,
        };
        let state = engine.ports.store.load();
        #[allow(clippy::disallowed_methods)] // the simulated wall clock
        let wall_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let wall_base_ms = (wall_now.saturating_sub(sim_now())).as_millis() as u64;
        let reinit = engine.exchange(ToEngine::Init {
            now_ns: now_ns(),
            protocol: PROTOCOL_VERSION,
            seed: launcher.seed,
            generation,
            wall_base_ms,
            config: Box::new(launcher.config.clone()),
            state: Box::new(state),
        });
        engine.process_mut().reinit = reinit;
        engine
    }

    fn process_mut(&mut self) -> &mut Process {
        self.process.as_mut().expect("a live engine process")
    }

    /// Sends one input and serves the engine until it is idle; returns
    /// whether that `idle` offered `reinit`.
    fn exchange(&mut self, message: ToEngine) -> bool {
        jitter_before_delivery();
        self.write(&message);
        for _ in 0..MAX_MESSAGES_PER_INPUT {
            let message = self.read();
            if let FromEngine::Idle { next_timer_ns, reinit } = message {
                self.next_timer = next_timer_ns.map(|ns| self.origin + Duration::from_nanos(ns));
                return reinit;
            }
            self.serve(message);
        }
        self.fail("engine-busy", &format!("{MAX_MESSAGES_PER_INPUT} messages for one input without going idle"));
    }

    /// Handles one message from the engine short of its `idle`.
    fn serve(&mut self, message: FromEngine) {
        match message {
            FromEngine::Idle { .. } => {}
            FromEngine::Commit { writes } => {
                let reply = OutcomeReply::of(self.ports.store.commit(&writes), |error| error.0);
                self.reply(reply);
            }
            FromEngine::Send { connection, frame } => {
                // A connection that refused a frame is closed: later frames
                // to it go nowhere, as an in-process engine drops it.
                let open = self.connections.get(&connection).is_some_and(|end| end.send(frame));
                if !open {
                    self.connections.remove(&connection);
                }
            }
            FromEngine::ModelRequest { request } => {
                let call = self.ports.model.start(request, self.sink.clone());
                self.reply(ModelReply { call });
            }
            FromEngine::FaultPoint { site } => {
                let fire = self.ports.faults.fire(site);
                self.reply(FaultReply { fire });
            }
            FromEngine::ModelCancel { call } => self.ports.model.cancel(call),
            FromEngine::ServerTool { request_id, call } => {
                self.ports.server_tools.start(&request_id, call, self.sink.clone())
            }
            FromEngine::Callback { chat, call } => self.callback(chat, call),
            FromEngine::Post { delivery, text } => {
                let post = self.ports.surface.post(&delivery, &text, self.sink.clone());
                self.reply(PostReply { post });
            }
            FromEngine::Exhausted { context } => {
                let reply = OutcomeReply::of(self.ports.observer.on_exhausted(&context), |error| error.0);
                self.reply(reply);
            }
            FromEngine::Observe { event } => self.ports.observer.observe(event),
        }
    }

    fn callback(&mut self, chat: u32, call: WireCallback) {
        if call == WireCallback::Returned {
            // Dropped here, as an in-process engine drops the callback.
            self.chats.remove(&chat);
            return;
        }
        let Some(callback) = self.chats.get_mut(&chat) else {
            self.fail("engine-protocol", &format!("a callback for chat {chat}, which is not open"));
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
    }

    fn reply(&mut self, value: impl serde::Serialize) {
        let value = serde_json::to_value(value).expect("replies serialise");
        self.write(&ToEngine::Reply { value });
    }

    fn write(&mut self, message: &ToEngine) {
        let writer = &mut self.process_mut().writer;
        let sent = writer.write_all(line(message).as_bytes()).and_then(|()| writer.flush());
        if let Err(error) = sent {
            self.fail("engine-crashed", &format!("its stdin closed: {error}"));
        }
    }

    fn read(&mut self) -> FromEngine {
        let mut text = String::new();
        loop {
            let reader = &self.process_mut().reader;
            if reader.buffer().is_empty() && !readable_within(reader, wall_limit()) {
                let limit = wall_limit().as_millis();
                let message = format!("nothing for {limit} ms of real time while an input was handled (a hang?)");
                self.fail("engine-busy", &message);
            }
            match self.process_mut().reader.read_line(&mut text) {
                Ok(0) => self.fail("engine-crashed", "it exited (stdout closed) before going idle"),
                Ok(_) if text.ends_with('\n') => break,
                Ok(_) => continue,
                Err(error) => self.fail("engine-crashed", &format!("reading its stdout failed: {error}")),
            }
        }
        serde_json::from_str(&text).unwrap_or_else(|error| {
            let shown: String = text.trim_end().chars().take(200).collect();
            self.fail("engine-protocol", &format!("not a protocol message ({error}): {shown}"))
        })
    }

    /// A failed engine process fails the run, with the seed's replay line
    /// and what the engine said on stderr.
    fn fail(&mut self, kind: &str, what: &str) -> ! {
        self.failed = true;
        let process = self.process_mut();
        let _ = process.child.kill();
        let _ = process.child.wait();
        let stderr = tail(&process.stderr);
        let stderr = if stderr.trim().is_empty() { String::new() } else { format!("\nits stderr:\n{stderr}") };
        panic!("{kind}: engine process `{}` (generation {}): {what}{stderr}", self.command, self.generation)
    }
}

impl Engine for ProcessEngine {
    fn deliver(&mut self, input: Input) {
        let now_ns = now_ns();
        let message = match input {
            Input::Connect { connection_id, connection } => {
                self.connections.insert(connection_id, connection);
                ToEngine::Connect { now_ns, connection: connection_id }
            }
            Input::Disconnect { connection_id } => {
                self.connections.remove(&connection_id);
                ToEngine::Disconnect { now_ns, connection: connection_id }
            }
            Input::ResumeRequest { connection_id } => ToEngine::ResumeRequest { now_ns, connection: connection_id },
            Input::ResumeAck { connection_id, request_id } => {
                ToEngine::ResumeAck { now_ns, connection: connection_id, request_id }
            }
            Input::UserMessage { text, options } => ToEngine::UserMessage { now_ns, text, options },
            Input::Chat { key, text, options, callback } => {
                self.next_chat += 1;
                self.chats.insert(self.next_chat, callback);
                ToEngine::Chat { now_ns, chat: self.next_chat, key, text, options }
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
        self.exchange(message);
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
        if self.finished.load(Ordering::SeqCst) && process.reinit && !self.failed {
            keep(self.command.clone(), process);
        } else {
            // An eviction: the process dies, and nothing it does later can
            // reach the world.
            process.stop();
        }
    }
}

fn now_ns() -> u64 {
    sim_now().as_nanos() as u64
}

/// Waits (in real time) until the engine has written something.
fn readable_within(reader: &BufReader<ChildStdout>, within: Duration) -> bool {
    let fd = reader.get_ref().as_raw_fd();
    super::spin_until_readable(fd) || super::poll_readable(fd, i32::try_from(within.as_millis()).unwrap_or(i32::MAX))
}

/// A file of its own for one process's stderr (no thread may drain a pipe
/// inside the simulation), read back when the process fails.
fn stderr_file() -> PathBuf {
    static FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let file = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("turnsim-engine-{}-{file}.stderr", std::process::id()))
}

/// The last bytes of what the process wrote to stderr.
fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let from = text.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&text[from..]).into_owned()
}

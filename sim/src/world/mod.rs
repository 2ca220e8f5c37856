//! The simulated world of one seed: one madsim runtime with nodes for the
//! engine process, the model provider, the client and the `chat()` caller;
//! a durable store outside the engine node so it survives eviction; scripted
//! actions and faults; and a run that ends when the world is quiescent or
//! its sim-time horizon or event budget runs out.

mod actions;
mod buggify;
mod caller;
mod client;
mod counted;
mod link;
mod model;
mod observer;
mod outstanding;
mod random_faults;
pub mod rng;
mod store;
mod switchboard;
mod taken;
mod tools;
mod trigger;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::protocol::proxy::Launcher;
use crate::protocol::RunTerms;
use std::time::Duration;

use madsim::runtime::{Handle, NodeHandle, Runtime};
use turnsim_engine::durable::DurableState;
use turnsim_engine::{Activity, Engine, EngineConfig, InputSink, Ports, RegressionSet, SessionHandle};

use crate::history::History;
use crate::scenario::ScenarioFile;
use crate::trace::{sim_now, Trace, TraceEvent};

pub use crate::history::{connection_base, RunEnd};
pub use caller::SimCallback;
pub use client::Client;
pub use switchboard::Switchboard;

/// Everything a run leaves behind for the checkers.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub seed: u64,
    pub events: Vec<TraceEvent>,
    pub end: RunEnd,
    pub final_state: DurableState,
    /// Everything that crossed the engine's boundary: what verdicts read.
    pub history: History,
    /// What the driver saw of the engine at the end (`None`: process down).
    pub final_activity: Option<Activity>,
    pub sim_ms: u64,
    /// The panic's message, when the run panicked.
    pub panic: Option<String>,
    /// What the engine process did wrong, when it ended the run.
    pub engine_fault: Option<crate::protocol::fault::EngineFault>,
    /// The scenario's triggered evictions (fault indexes) whose trigger
    /// matched: the world's own record, for `fault-landed`.
    pub fired_faults: std::collections::BTreeSet<usize>,
}

/// Runs one scenario on one seed.
pub fn run(scenario: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> RunRecord {
    let mut config = scenario.scenario.engine_config();
    config.regressions = regressions.clone();
    let (scenario, drawn) = random_faults::materialise(scenario, seed);
    // Validated when the file loaded: what `stored` seeds always converts.
    let stored = scenario.scenario.stored.clone();
    let initial = crate::scenario::durable_state(&stored, 0).unwrap_or_default();
    let trace = Trace::new(usize::try_from(scenario.scenario.max_events).unwrap_or(usize::MAX));
    let world_trace = trace.clone();
    let ran = guarded(move || {
        let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
        runtime.block_on(async move {
            // Seeded incidents' times are before boot, on the seed's wall clock.
            let initial_state = crate::scenario::durable_state(&stored, boot_wall_ms()).unwrap_or_default();
            let world = World::build(scenario, seed, config, world_trace, initial_state);
            for line in drawn {
                world.trace.record(crate::trace::Event::Action { what: line });
            }
            world.run(seed).await
        })
    });
    ran.unwrap_or_else(|message| RunRecord {
        seed,
        events: trace.take(),
        history: History { initial: initial.clone(), crossings: trace.take_crossings() },
        end: RunEnd::Panicked,
        final_state: DurableState::default(),
        final_activity: None,
        sim_ms: 0,
        panic: Some(message),
        engine_fault: None,
        fired_faults: Default::default(),
    })
}

/// The simulated wall clock's milliseconds (the seed's; the engine reads the same).
fn boot_wall_ms() -> u64 {
    #[allow(clippy::disallowed_methods)] // the simulated wall clock
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_millis() as u64
}

/// Runs `run`, turning a panic (in the engine, or the world) into its
/// message: one broken seed is a reported failure, not a crashed sweep.
pub fn guarded<T>(run: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}

/// The scenario's clients; client 1 draws from the same generators and
/// numbers its connections as a single client always has, so one-client
/// timelines are unchanged; client N's connections are cN001, cN002, ...
fn clients(scenario: &ScenarioFile, seed: u64, switchboard: &Switchboard, trace: &Trace) -> Vec<Client> {
    let spec = &scenario.scenario.client;
    if !spec.connect {
        return Vec::new();
    }
    (1..=spec.connections)
        .map(|number| {
            let suffix = if number == 1 { String::new() } else { format!("-{number}") };
            let rngs = [
                rng::SharedRng::derive(seed, &format!("client{suffix}")),
                rng::SharedRng::derive(seed, &format!("client-link{suffix}")),
            ];
            Client::new(spec, switchboard.clone(), rngs, trace.clone(), connection_base(number))
        })
        .collect()
}

/// Waits `ms` of sim time; zero means now, not at the next timer tick.
pub(crate) async fn pause_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// The `chat()` caller's link: calls to the engine share one delay (so
/// that, without `reorder`, a call never overtakes an earlier one); each
/// call's callback gets its own way back, in order.
#[derive(Clone)]
struct CallerLink {
    spec: crate::scenario::LinkSpec,
    rng: rng::SharedRng,
    to_engine: link::LinkDelay,
}

impl CallerLink {
    fn new(spec: crate::scenario::LinkSpec, rng: rng::SharedRng) -> Self {
        Self { spec, to_engine: link::LinkDelay::new(spec, rng.clone()), rng }
    }
}

/// Shared parts of the world, cheap to clone into tasks.
#[derive(Clone)]
pub(crate) struct World {
    scenario: Arc<ScenarioFile>,
    trace: Trace,
    store: Arc<store::SimStore>,
    switchboard: Switchboard,
    /// The connected clients, client 1 first.
    clients: Vec<Client>,
    engine_node: NodeHandle,
    /// Starts the engine's processes, with `--engine-cmd`.
    launcher: Option<Launcher>,
    caller_node: NodeHandle,
    caller_link: CallerLink,
    model_node_id: madsim::task::NodeId,
    model: Arc<model::MockModel>,
    executions: outstanding::Outstanding,
    /// Posts the chat surface has not answered yet.
    post_answers: outstanding::Outstanding,
    /// Scripted actions and faults not yet finished.
    busy: Arc<AtomicUsize>,
    /// `chat()` calls still waiting for their outcome.
    open_chats: Arc<AtomicUsize>,
    /// When scripted work last ran out (sim µs): faults healed from then on.
    healed_at_us: Arc<std::sync::atomic::AtomicU64>,
    /// Between an eviction and its restart.
    engine_down: Arc<std::sync::atomic::AtomicBool>,
    /// What the store held before the first boot.
    initial: Arc<DurableState>,
    /// Triggered evictions whose trigger matched (fault indexes).
    fired_faults: Arc<Mutex<std::collections::BTreeSet<usize>>>,
    seed: u64,
}

impl World {
    fn build(scenario: ScenarioFile, seed: u64, config: EngineConfig, trace: Trace, stored: DurableState) -> Self {
        let handle = Handle::current();
        let initial = stored.clone();
        let fired_faults: Arc<Mutex<std::collections::BTreeSet<usize>>> = Default::default();
        let refusals = store::Refusals::of(&scenario.scenario, &stored, fired_faults.clone());
        let store_may_refuse = refusals.may_refuse();
        let healed_at_us: Arc<std::sync::atomic::AtomicU64> = Default::default();
        let store = Arc::new(store::SimStore::new(trace.clone(), stored, refusals, healed_at_us.clone()));
        let switchboard = Switchboard::new(trace.clone());
        let model_node = handle.create_node().name("model").build();
        let model_node_id = model_node.id();
        let model = model::MockModel::new(&scenario, model_node, rng::SharedRng::derive(seed, "model"), trace.clone());
        let model = Arc::new(model);
        let executions = outstanding::Outstanding::default();
        let surface =
            observer::TraceSurface::new(trace.clone(), &scenario.scenario, rng::SharedRng::derive(seed, "surface"));
        let post_answers = surface.answers.clone();
        let faults = Arc::new(buggify::SimFaultPoints::new(
            scenario.scenario.buggify,
            rng::SharedRng::derive(seed, "buggify"),
            trace.clone(),
        ));
        let ports = Ports {
            store: store.clone(),
            model: model.clone(),
            server_tools: Arc::new(tools::SimServerTools {
                specs: scenario.scenario.engine.tools.clone(),
                rng: rng::SharedRng::derive(seed, "server-tools"),
                trace: trace.clone(),
                executions: executions.clone(),
            }),
            observer: Arc::new(observer::TraceObserver::new(trace.clone(), &scenario.scenario)),
            surface: Arc::new(surface),
            faults: faults.clone(),
        };
        let interposer = INTERPOSER.with(|interposer| interposer.borrow().clone());
        let ports = match &interposer {
            Some(interposer) => interposer.ports(ports, &trace),
            None => ports,
        };
        let max_events = scenario.scenario.max_events;
        let launcher = engine_command().map(|command| {
            let in_order = interposer.is_none();
            let terms = RunTerms { store_may_refuse, fault_sites: faults.sites_on(), in_order };
            Launcher::new(command, seed, config.clone(), terms, max_events, trace.clone())
        });
        let rust_engine = RUST_ENGINE.with(|engine| engine.borrow().clone());
        let booter = match (&launcher, rust_engine) {
            (_, Some(boot)) => Booter::Rust(boot),
            (Some(launcher), None) => Booter::Process(Box::new(launcher.clone())),
            (None, None) => Booter::BuiltIn,
        };
        let engine_node = engine_node(&handle, config, ports, switchboard.clone(), booter, interposer);
        let clients = clients(&scenario, seed, &switchboard, &trace);
        let caller_node = handle.create_node().name("caller").build();
        let caller_link = CallerLink::new(scenario.scenario.caller.link, rng::SharedRng::derive(seed, "caller-link"));
        Self {
            scenario: Arc::new(scenario),
            trace,
            store,
            switchboard,
            clients,
            engine_node,
            launcher,
            caller_node,
            caller_link,
            model_node_id,
            model,
            executions,
            post_answers,
            busy: Arc::new(AtomicUsize::new(0)),
            engine_down: Default::default(),
            healed_at_us,
            open_chats: Default::default(),
            initial: Arc::new(initial),
            fired_faults,
            seed,
        }
    }

    async fn run(self, seed: u64) -> RunRecord {
        let mut client_nodes = Vec::new();
        for (index, client) in self.clients.iter().enumerate() {
            let name = if index == 0 { "client".to_string() } else { format!("client-{}", index + 1) };
            let node = Handle::current().create_node().name(name).build();
            node.spawn(client.clone().run());
            client_nodes.push(node.id());
        }
        self.start_actions();
        let end = self.wait_until_settled().await;
        let engine_fault = self.launcher.as_ref().and_then(Launcher::fault);
        let final_activity = self.switchboard.engine().map(|engine| engine.activity());
        let record = RunRecord {
            seed,
            events: self.trace.take(),
            end,
            final_state: self.store.snapshot(),
            history: History { initial: self.initial.as_ref().clone(), crossings: self.trace.take_crossings() },
            final_activity,
            sim_ms: sim_now().as_millis() as u64,
            panic: None,
            engine_fault,
            fired_faults: self.fired_faults.lock().expect("fired faults lock").clone(),
        };
        let nodes: Vec<_> = client_nodes
            .into_iter()
            .chain([self.engine_node.id(), self.caller_node.id(), self.model_node_id])
            .collect();
        if let Some(launcher) = &self.launcher {
            // What is killed from here on is the end of the run, not an
            // eviction: a process that can start over is kept for the next.
            launcher.finish();
        }
        self.tear_down(&nodes).await;
        record
    }

    /// Kills every node and lets the executor drop their tasks. Tasks that
    /// never finish (a parked model, the client loop) hold handles into the
    /// runtime; left alive they would keep each run's memory forever.
    async fn tear_down(&self, nodes: &[madsim::task::NodeId]) {
        self.switchboard.clear();
        self.trace.drop_watchers();
        let handle = Handle::current();
        for node in nodes {
            handle.kill(*node);
        }
        tokio::task::yield_now().await;
    }

    /// Waits for quiescence: the engine idle, the client and every scripted
    /// action done. Re-checks after every traced event. Two phases, as in
    /// TigerBeetle's VOPR: while scripted actions and faults are still
    /// landing (safety), only the horizon bounds the run; once the last one
    /// is done (faults healed), the world must settle within the scenario's
    /// convergence window (liveness).
    async fn wait_until_settled(&self) -> RunEnd {
        let horizon = Duration::from_millis(self.scenario.scenario.horizon_ms);
        let window = Duration::from_millis(self.scenario.scenario.converge_within_ms);
        loop {
            if self.launcher.as_ref().is_some_and(Launcher::broke) {
                return RunEnd::EngineFault;
            }
            if self.trace.overflowed() {
                return RunEnd::EventBudget;
            }
            if self.is_quiescent() {
                return RunEnd::Quiescent;
            }
            let healed = self.busy.load(Ordering::SeqCst) == 0;
            let converge_by = Duration::from_micros(self.healed_at_us.load(Ordering::SeqCst)) + window;
            let deadline = if healed { horizon.min(converge_by) } else { horizon };
            let Some(left) = deadline.checked_sub(sim_now()) else {
                return if healed && converge_by < horizon { RunEnd::NotConverged } else { RunEnd::Horizon };
            };
            tokio::select! {
                biased;
                _ = self.trace.changed() => {}
                _ = tokio::time::sleep(left) => {}
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        if self.busy.load(Ordering::SeqCst) > 0 || self.open_chats.load(Ordering::SeqCst) > 0 {
            return false;
        }
        if self.clients.iter().any(|client| client.outstanding() > 0) {
            return false;
        }
        // Judged from outside: nothing waits for the engine, the engine
        // waits for nothing (no timer, no model stream, no server tool).
        let engine_idle = self.switchboard.engine().is_some_and(|engine| engine.activity().is_idle());
        engine_idle && !self.model.is_streaming() && !self.executions.any_running() && !self.post_answers.any_running()
    }
}

/// The engine command of this invocation (`--engine-cmd`); unset, the
/// built-in engine runs in-process.
static ENGINE_COMMAND: Mutex<Option<String>> = Mutex::new(None);

/// Drives every run from now on with the engine `command` starts, over the
/// process protocol (`None`: the built-in engine, in-process).
pub fn use_engine_command(command: Option<String>) {
    *ENGINE_COMMAND.lock().expect("engine command lock") = command;
}

pub fn engine_command() -> Option<String> {
    ENGINE_COMMAND.lock().expect("engine command lock").clone()
}

/// ` --engine-cmd '…'` for a replay line, when this invocation drives a
/// process engine (shell-quoted, so the line pastes as it is).
pub fn engine_flag() -> String {
    engine_command().map_or_else(String::new, |command| format!(" --engine-cmd '{}'", command.replace('\'', "'\\''")))
}

/// The engine process. Its init re-runs on every restart: a fresh engine
/// booted from the durable store (with `--engine-cmd`, a fresh process).
/// Boots a Rust engine of one's own in the world, in-process: what
/// [`run_with_engine`] takes.
pub type BootEngine = Arc<dyn Fn(EngineConfig, Ports, InputSink) -> Box<dyn Engine> + Send + Sync>;

thread_local! {
    static RUST_ENGINE: std::cell::RefCell<Option<BootEngine>> = const { std::cell::RefCell::new(None) };
}

/// Runs one scenario on one seed with the engine `boot` makes (through the
/// same seam the built-in engine and the process proxy go through).
pub fn run_with_engine(scenario: &ScenarioFile, seed: u64, regressions: &RegressionSet, boot: BootEngine) -> RunRecord {
    RUST_ENGINE.with(|engine| *engine.borrow_mut() = Some(boot));
    let record = run(scenario, seed, regressions);
    RUST_ENGINE.with(|engine| *engine.borrow_mut() = None);
    record
}

/// Stands between the engine and the world, rewriting what the engine sends
/// out (the adversary, `crate::adversary`): the ports every generation is
/// booted with, and each generation's engine as it boots (so the client
/// connections and `chat()` callbacks it is handed pass through it too).
pub trait Interposer: Send + Sync {
    fn ports(&self, ports: Ports, trace: &Trace) -> Ports;
    fn engine(&self, engine: Box<dyn Engine>) -> Box<dyn Engine>;
}

thread_local! {
    static INTERPOSER: std::cell::RefCell<Option<Arc<dyn Interposer>>> = const { std::cell::RefCell::new(None) };
}

/// Runs one scenario on one seed with `interposer` between the engine (the
/// built-in one, or `--engine-cmd`'s) and the world.
pub fn run_interposed(
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    interposer: Arc<dyn Interposer>,
) -> RunRecord {
    with_interposer(interposer, || run(scenario, seed, regressions))
}

/// Every run `runs` makes on this thread has `interposer` between its
/// engine and the world: around [`run_with_engine`], a Rust engine's.
pub fn with_interposer<T>(interposer: Arc<dyn Interposer>, runs: impl FnOnce() -> T) -> T {
    INTERPOSER.with(|slot| *slot.borrow_mut() = Some(interposer));
    let result = runs();
    INTERPOSER.with(|slot| *slot.borrow_mut() = None);
    result
}

/// Which engine each generation boots.
#[derive(Clone)]
enum Booter {
    BuiltIn,
    Process(Box<Launcher>),
    Rust(BootEngine),
}

fn engine_node(
    handle: &Handle,
    config: EngineConfig,
    ports: Ports,
    switchboard: Switchboard,
    booter: Booter,
    interposer: Option<Arc<dyn Interposer>>,
) -> NodeHandle {
    handle
        .create_node()
        .name("engine")
        .init(move || {
            let (config, ports, switchboard) = (config.clone(), ports.clone(), switchboard.clone());
            let (booter, interposer) = (booter.clone(), interposer.clone());
            async move {
                // A new process: whatever killed the last one is behind it.
                switchboard.revive();
                let (observer, trace, answers) = (ports.observer.clone(), switchboard.trace(), switchboard.answers());
                let boot = move |sink| {
                    let engine = match booter {
                        Booter::BuiltIn => turnsim_engine::session::boot(config, ports, sink),
                        Booter::Process(launcher) => launcher.boot(ports, sink),
                        Booter::Rust(boot) => boot(config, ports, sink),
                    };
                    let engine = match interposer {
                        Some(interposer) => interposer.engine(engine),
                        None => engine,
                    };
                    taken::Taken::wrap(engine, trace, answers)
                };
                let handle = SessionHandle::drive(boot, move || observer.idle());
                switchboard.install(handle);
                std::future::pending::<()>().await
            }
        })
        .build()
}

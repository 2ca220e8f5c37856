//! The floor a standard run is measured against: a bare simulation of the
//! standard story's shape. A real run of each seed is recorded once as its
//! shape (when each traced event happened and on which node, when the
//! engine was evicted and restarted); the floor replays that shape under
//! madsim with nothing behind it: a runtime of the same seed, the same
//! nodes (model, engine, client, caller), one message over a channel per
//! traced event, one timer per wait between a node's events, the engine's
//! node killed and restarted (a fresh inbox) at the eviction, the world
//! waking for every message the engine sends, and the nodes torn down at
//! the end. No engine logic, no mock model, no history, no checks: what
//! any run of this design pays to exist, whatever the engine and the oracle
//! do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use tokio::sync::mpsc;
use turnsim_engine::RegressionSet;

use super::growth::thread_cpu_time;
use crate::runner;
use crate::scenario::ScenarioFile;
use crate::trace::{sim_now, Event, Lane, TraceEvent};

/// The node a traced event happens on in the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// The world's own task: scripted actions and faults.
    World,
    Client,
    Caller,
    /// The model provider and the server tools.
    Model,
    /// The engine, with the surfaces and the store it writes to.
    Engine,
}

impl Node {
    fn of(lane: Lane) -> Self {
        match lane {
            Lane::World => Self::World,
            Lane::Client => Self::Client,
            Lane::Caller => Self::Caller,
            Lane::Model | Lane::Tools => Self::Model,
            Lane::Engine | Lane::Messenger | Lane::Store => Self::Engine,
        }
    }
}

/// What one seed's run did, without what any of it meant.
#[derive(Clone, Debug)]
pub struct Shape {
    seed: u64,
    /// Each traced event: sim µs and the node that sends it (the engine's
    /// go to the world, every other node's to the engine).
    pub sends: Vec<(u64, Node)>,
    /// Each eviction: sim µs of the kill and of the restart.
    pub evictions: Vec<(u64, u64)>,
    /// Sim µs at which the run ended.
    end_us: u64,
}

impl Shape {
    /// The shape of `file`'s run on `seed` (a real run, with its checks).
    pub fn of(file: &ScenarioFile, seed: u64) -> Self {
        let (record, _) = runner::run_one(file, seed, &RegressionSet::default());
        Self::from_events(seed, &record.events, record.sim_ms * 1_000)
    }

    fn from_events(seed: u64, events: &[TraceEvent], end_us: u64) -> Self {
        let sends = events.iter().map(|event| (event.at_us, Node::of(event.lane))).collect();
        let at = |wanted: fn(&Event) -> bool| -> Vec<u64> {
            events.iter().filter(|event| wanted(&event.event)).map(|event| event.at_us).collect()
        };
        let kills = at(|event| matches!(event, Event::Evicted));
        let restarts = at(|event| matches!(event, Event::Restarted));
        let evictions = kills.into_iter().zip(restarts).collect();
        Self { seed, sends, evictions, end_us: end_us.max(events.last().map_or(0, |event| event.at_us)) }
    }

    pub fn events(&self) -> usize {
        self.sends.len()
    }

    fn sent_by(&self, node: Node) -> Vec<u64> {
        self.sends.iter().filter(|(_, by)| *by == node).map(|(at, _)| *at).collect()
    }
}

/// What the world's own task does at an instant, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum WorldStep {
    Send,
    Kill,
    Restart,
}

/// The messages the engine's inbox took, and its sender while it is up.
type Inbox = Arc<Mutex<Option<mpsc::UnboundedSender<u64>>>>;

/// Replays `shape` under madsim; returns the messages delivered (so that
/// nothing of the replay can be optimised away).
pub fn replay(shape: &Shape) -> u64 {
    let shape = shape.clone();
    let runtime = Runtime::with_seed_and_config(shape.seed, madsim::Config::default());
    runtime.block_on(async move {
        let handle = Handle::current();
        let delivered = Arc::new(AtomicU64::new(0));
        let engine_inbox: Inbox = Arc::default();
        let (to_world, mut world_inbox) = mpsc::unbounded_channel::<u64>();
        let engine_sends = Arc::new(shape.sent_by(Node::Engine));
        let engine = {
            let (inbox, delivered, sends) = (engine_inbox.clone(), delivered.clone(), engine_sends.clone());
            handle
                .create_node()
                .name("engine")
                .init(move || {
                    let (inbox, delivered, sends, to_world) =
                        (inbox.clone(), delivered.clone(), sends.clone(), to_world.clone());
                    async move {
                        // A new process: a fresh inbox; it sends what it
                        // sent from its boot on.
                        let (sender, mut receiver) = mpsc::unbounded_channel::<u64>();
                        *inbox.lock().expect("inbox lock") = Some(sender);
                        let booted = sim_now().as_micros() as u64;
                        let receive = async {
                            while let Some(message) = receiver.recv().await {
                                delivered.fetch_add(message, Ordering::Relaxed);
                            }
                        };
                        let send = async {
                            for at in sends.iter().filter(|at| **at >= booted) {
                                pause_until(*at).await;
                                let _ = to_world.send(1);
                            }
                        };
                        tokio::join!(receive, send);
                    }
                })
                .build()
        };
        let mut nodes = vec![engine.id()];
        for (node, name) in [(Node::Model, "model"), (Node::Client, "client"), (Node::Caller, "caller")] {
            let (sends, inbox) = (shape.sent_by(node), engine_inbox.clone());
            let peer = handle.create_node().name(name).build();
            peer.spawn(async move {
                for at in sends {
                    pause_until(at).await;
                    send_to(&inbox);
                }
            });
            nodes.push(peer.id());
        }
        let world = {
            let (sends, inbox, evictions, engine) =
                (shape.sent_by(Node::World), engine_inbox.clone(), shape.evictions.clone(), engine.id());
            madsim::task::spawn(async move {
                let mut steps: Vec<(u64, WorldStep)> = sends.into_iter().map(|at| (at, WorldStep::Send)).collect();
                steps.extend(
                    evictions
                        .iter()
                        .flat_map(|(kill, restart)| [(*kill, WorldStep::Kill), (*restart, WorldStep::Restart)]),
                );
                steps.sort();
                for (at, step) in steps {
                    pause_until(at).await;
                    match step {
                        WorldStep::Send => send_to(&inbox),
                        WorldStep::Kill => {
                            inbox.lock().expect("inbox lock").take();
                            Handle::current().kill(engine);
                        }
                        WorldStep::Restart => Handle::current().restart(engine),
                    }
                }
            })
        };
        // The world wakes for whatever the engine does, until a millisecond
        // past the run's end (so that every send of its last instant lands).
        let end = Duration::from_micros(shape.end_us + 1_000);
        loop {
            let left = end.saturating_sub(sim_now());
            tokio::select! {
                biased;
                Some(message) = world_inbox.recv() => { delivered.fetch_add(message, Ordering::Relaxed); }
                _ = tokio::time::sleep(left) => break,
            }
        }
        drop(world);
        for node in nodes {
            handle.kill(node);
        }
        tokio::task::yield_now().await;
        delivered.load(Ordering::Relaxed)
    })
}

fn send_to(inbox: &Inbox) {
    if let Some(sender) = inbox.lock().expect("inbox lock").as_ref() {
        let _ = sender.send(1);
    }
}

/// Waits until sim µs `at`; an event of this instant goes now.
async fn pause_until(at: u64) {
    let now = sim_now().as_micros() as u64;
    if at > now {
        tokio::time::sleep(Duration::from_micros(at - now)).await;
    }
}

/// The shapes of `file`'s first `seeds` seeds: what the floor cycles through.
pub fn shapes(file: &ScenarioFile, seeds: u64) -> Vec<Shape> {
    std::thread::scope(|scope| {
        scope.spawn(|| (0..seeds).map(|seed| Shape::of(file, seed)).collect()).join().expect("bench thread")
    })
}

/// CPU seconds (of the measuring thread) per run: the floor replaying
/// `shapes` in turn, for about `round_time`.
pub fn floor_seconds_per_run(shapes: &[Shape], round_time: Duration) -> f64 {
    per_run(round_time, |run| {
        std::hint::black_box(replay(&shapes[run % shapes.len()]));
    })
}

/// CPU seconds per run of `file` itself, the same seeds in turn, checks in.
pub fn standard_seconds_per_run(file: &ScenarioFile, seeds: u64, round_time: Duration) -> f64 {
    let regressions = RegressionSet::default();
    per_run(round_time, |run| {
        let (_, violations) = runner::run_one(file, run as u64 % seeds, &regressions);
        assert!(violations.is_empty(), "benchmark scenario {} failed: {violations:?}", file.path.display());
    })
}

fn per_run(round_time: Duration, mut one: impl FnMut(usize) + Send) -> f64 {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let started = thread_cpu_time();
                let mut runs = 0;
                while runs == 0 || thread_cpu_time() - started < round_time {
                    one(runs);
                    runs += 1;
                }
                (thread_cpu_time() - started).as_secs_f64() / runs as f64
            })
            .join()
            .expect("bench thread")
    })
}

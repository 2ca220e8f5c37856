//! Where the harness's thread spends a run over the protocol, for
//! `bench --by-part`: writing inputs, waiting for the engine's output (its
//! own work, and the pipe), and taking its lines (parsing each and serving
//! it to the world). Off unless a bench turns it on: the simulation's clock
//! is virtual, so each reading of the real one is a system call, a few per
//! exchange.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::output::real_now;

static ON: AtomicBool = AtomicBool::new(false);
static WRITING: AtomicU64 = AtomicU64::new(0);
static WAITING: AtomicU64 = AtomicU64::new(0);
static EXCHANGING: AtomicU64 = AtomicU64::new(0);
static EXCHANGES: AtomicU64 = AtomicU64::new(0);

/// The parts of a stretch of runs, in real time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split {
    /// Checking the engine is quiet, and writing each input's line.
    pub writing: Duration,
    /// From the line written to the engine's `idle`: `waiting` and taking
    /// its lines.
    pub exchanging: Duration,
    /// Within `exchanging`: no whole line read yet, until the engine wrote more.
    pub waiting: Duration,
    pub exchanges: u64,
}

/// Runs `runs` with the protocol's parts timed; what they spent.
pub fn timed<T>(runs: impl FnOnce() -> T) -> (T, Split) {
    for counter in [&WRITING, &WAITING, &EXCHANGING, &EXCHANGES] {
        counter.store(0, Ordering::Relaxed);
    }
    ON.store(true, Ordering::Relaxed);
    let result = runs();
    ON.store(false, Ordering::Relaxed);
    let read = |counter: &AtomicU64| Duration::from_nanos(counter.load(Ordering::Relaxed));
    let split = Split {
        writing: read(&WRITING),
        exchanging: read(&EXCHANGING),
        waiting: read(&WAITING),
        exchanges: EXCHANGES.load(Ordering::Relaxed),
    };
    (result, split)
}

/// Which part a [`Stopwatch`] adds to.
pub(crate) enum Part {
    Writing,
    Exchanging,
    Waiting,
}

/// Started where a part begins; adds the real time since when stopped.
/// Reads no clock while timing is off.
pub(crate) struct Stopwatch(Option<Duration>);

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Self(ON.load(Ordering::Relaxed).then(real_now))
    }

    pub(crate) fn stop(self, part: Part) {
        let Some(started) = self.0 else { return };
        let spent = real_now().saturating_sub(started).as_nanos() as u64;
        let counter = match part {
            Part::Writing => &WRITING,
            Part::Exchanging => {
                EXCHANGES.fetch_add(1, Ordering::Relaxed);
                &EXCHANGING
            }
            Part::Waiting => &WAITING,
        };
        counter.fetch_add(spent, Ordering::Relaxed);
    }
}

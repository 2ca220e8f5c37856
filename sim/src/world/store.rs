//! The durable store: lives outside the engine process, so it survives
//! eviction. Every commit that changes more than counters is traced.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{DurableStore, StoreError};

use crate::history::Boundary;
use crate::scenario::StoreFault;
use crate::trace::{Event, Trace};

pub struct SimStore {
    state: Mutex<DurableState>,
    trace: Trace,
    /// Commits refused by the scenario's `store_error` faults.
    refusals: Vec<StoreFault>,
    /// Commits attempted so far.
    attempts: AtomicU32,
    /// When the world's faults last acted: a refusal is a fault acting, so
    /// the convergence window runs from the last one.
    healed_at_us: Arc<AtomicU64>,
}

impl SimStore {
    /// A store holding `state` before the engine first boots.
    pub fn new(trace: Trace, state: DurableState, refusals: Vec<StoreFault>, healed_at_us: Arc<AtomicU64>) -> Self {
        Self { state: Mutex::new(state), trace, refusals, attempts: AtomicU32::new(0), healed_at_us }
    }

    pub fn snapshot(&self) -> DurableState {
        self.state.lock().expect("store lock").clone()
    }
}

impl DurableStore for SimStore {
    fn load(&self) -> DurableState {
        let loaded = self.snapshot();
        self.trace.cross(Boundary::Boot { loaded: Box::new(loaded.clone()) });
        loaded
    }

    fn commit(&self, writes: &[Write]) -> Result<(), StoreError> {
        if self.trace.engine_dead() {
            // The process died as an earlier commit returned: this one was
            // never sent.
            return Ok(());
        }
        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        if self.refusals.iter().any(|fault| fault.refuses(attempt)) {
            let summary: Vec<String> = writes.iter().map(Write::summary).collect();
            self.trace.record(Event::StoreRefused { commit: attempt, writes: summary });
            self.trace.cross(Boundary::CommitRefused { writes: writes.to_vec() });
            self.healed_at_us.fetch_max(crate::trace::sim_now().as_micros() as u64, Ordering::SeqCst);
            return Err(StoreError(format!("commit {attempt} refused (injected)")));
        }
        let mut state = self.state.lock().expect("store lock");
        for write in writes {
            state.apply(write);
        }
        drop(state);
        self.trace.cross(Boundary::Commit { writes: writes.to_vec() });
        let shown: Vec<String> = writes.iter().filter(|write| !write.is_bookkeeping()).map(Write::summary).collect();
        if !shown.is_empty() {
            self.trace.record(Event::StoreCommit { writes: shown });
        }
        Ok(())
    }
}

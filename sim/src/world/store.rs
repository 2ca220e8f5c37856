//! The durable store: lives outside the engine process, so it survives
//! eviction. Every commit that changes more than counters is traced.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{DurableStore, StoreError};

use super::counted::CountedFaults;
use crate::history::Boundary;
use crate::trace::{Event, Trace};

pub struct SimStore {
    state: Mutex<DurableState>,
    trace: Trace,
    /// Commits attempted so far, and those the scenario's `store_error`
    /// faults refuse.
    refusals: CountedFaults,
    /// When the world's faults last acted: a refusal is a fault acting, so
    /// the convergence window runs from the last one.
    healed_at_us: Arc<AtomicU64>,
}

impl SimStore {
    /// A store holding `state` before the engine first boots.
    pub fn new(trace: Trace, state: DurableState, refusals: CountedFaults, healed_at_us: Arc<AtomicU64>) -> Self {
        Self { state: Mutex::new(state), trace, refusals, healed_at_us }
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
        let (attempt, refused) = self.refusals.count();
        if refused.is_some() {
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
            self.trace.record_with_writes(Event::StoreCommit { writes: shown }, writes);
        }
        Ok(())
    }
}

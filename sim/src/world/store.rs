//! The durable store: lives outside the engine process, so it survives
//! eviction. Every commit that changes more than counters is traced.

use std::sync::Mutex;

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{DurableStore, StoreError};

use crate::history::Boundary;
use crate::trace::{Event, Trace};

pub struct SimStore {
    state: Mutex<DurableState>,
    trace: Trace,
}

impl SimStore {
    /// A store holding `state` before the engine first boots.
    pub fn new(trace: Trace, state: DurableState) -> Self {
        Self { state: Mutex::new(state), trace }
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

//! The durable store: lives outside the engine process, so it survives
//! eviction. Every commit that changes more than counters is traced.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{DurableStore, StoreError};

use super::counted::CountedFaults;
use super::trigger::CommitRefusal;
use crate::history::Boundary;
use crate::trace::{Event, Trace};

pub struct SimStore {
    state: Mutex<DurableState>,
    trace: Trace,
    /// Commits attempted so far, and those the scenario's `store_error`
    /// faults refuse.
    refusals: CountedFaults,
    /// The `store_error` faults that name a commit by what it would store.
    by_writes: Mutex<Vec<CommitRefusal>>,
    /// Where a fault's choice of commit came: the world's record of its faults.
    fired_faults: Arc<Mutex<BTreeSet<usize>>>,
    /// When the world's faults last acted: a refusal is a fault acting, so
    /// the convergence window runs from the last one.
    healed_at_us: Arc<AtomicU64>,
}

impl SimStore {
    /// A store holding `state` before the engine first boots.
    pub fn new(trace: Trace, state: DurableState, refusals: Refusals, healed_at_us: Arc<AtomicU64>) -> Self {
        let Refusals { counted, by_writes, fired_faults } = refusals;
        Self {
            state: Mutex::new(state),
            trace,
            refusals: counted,
            by_writes: Mutex::new(by_writes),
            fired_faults,
            healed_at_us,
        }
    }

    /// Whether a fault that names its commit by its writes refuses this
    /// one (or `refused` already: then none of them sees it stored).
    fn refused_by_writes(&self, writes: &[Write], refused: bool) -> bool {
        let mut by_writes = self.by_writes.lock().expect("store faults lock");
        let mut refuses = refused;
        for refusal in by_writes.iter_mut() {
            if refusal.refuses(writes) {
                refuses = true;
                self.fired_faults.lock().expect("fired faults lock").insert(refusal.fault);
            }
        }
        if !refuses {
            by_writes.iter_mut().for_each(|refusal| refusal.taken(writes));
        }
        refuses
    }

    pub fn snapshot(&self) -> DurableState {
        self.state.lock().expect("store lock").clone()
    }
}

/// The scenario's `store_error` faults, by number and by writes, and where
/// the world records those of the second kind firing.
pub struct Refusals {
    pub counted: CountedFaults,
    pub by_writes: Vec<CommitRefusal>,
    pub fired_faults: Arc<Mutex<BTreeSet<usize>>>,
}

impl Refusals {
    /// Whether the store may refuse any commit in this run.
    pub fn may_refuse(&self) -> bool {
        !self.counted.is_empty() || !self.by_writes.is_empty()
    }

    pub fn of(
        scenario: &crate::scenario::Scenario,
        initial: &DurableState,
        fired_faults: Arc<Mutex<BTreeSet<usize>>>,
    ) -> Self {
        let by_writes = scenario.faults.iter().enumerate().filter_map(|(index, fault)| match fault {
            crate::scenario::Fault::StoreError(store) => {
                store.when.as_ref().map(|when| CommitRefusal::new(index, when, store.times, initial))
            }
            _ => None,
        });
        Self {
            counted: CountedFaults::of(scenario, crate::scenario::Counted::Commit),
            by_writes: by_writes.collect(),
            fired_faults,
        }
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
        if self.refused_by_writes(writes, refused.is_some()) {
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

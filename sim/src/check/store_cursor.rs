//! The store as a fold over the history's commits, walked forward once:
//! a check that asks what the store held at several points asks in order,
//! and all its questions together cost one pass over the history rather
//! than one replay each.

use turnsim_engine::durable::DurableState;

use crate::history::{Boundary, History};

pub struct StoreCursor<'a> {
    history: &'a History,
    state: DurableState,
    /// The crossing the state stands just before.
    next: usize,
}

impl<'a> StoreCursor<'a> {
    pub fn new(history: &'a History) -> Self {
        Self { history, state: history.initial.clone(), next: 0 }
    }

    /// The store just before crossing `index` (as [`History::store_at`]).
    /// A cursor only moves forward: `index` is never less than the last one.
    pub fn at(&mut self, index: usize) -> &DurableState {
        let index = index.min(self.history.crossings.len());
        assert!(index >= self.next, "a store cursor moves forward only ({index} < {})", self.next);
        for crossing in &self.history.crossings[self.next..index] {
            if let Boundary::Commit { writes } = &crossing.what {
                writes.iter().for_each(|write| self.state.apply(write));
            }
        }
        self.next = index;
        &self.state
    }
}

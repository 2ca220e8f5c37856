//! Calls the world counts across a run's processes (commits, posts, hook
//! calls) and the scenario's faults that fail some of them: the
//! `first`-th and the `times - 1` after it.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::scenario::{Counted, Fault, Scenario};

pub struct CountedFaults {
    /// (first, times, what the failure says)
    runs: Vec<(u32, u32, String)>,
    calls: AtomicU32,
}

impl CountedFaults {
    /// The scenario's faults on `counted` calls.
    pub fn of(scenario: &Scenario, counted: Counted) -> Self {
        let runs = scenario
            .faults
            .iter()
            .filter_map(Fault::counted)
            .filter(|(kind, ..)| *kind == counted)
            .map(|(_, first, times, error)| (first, times, error.to_string()))
            .collect();
        Self { runs, calls: AtomicU32::new(0) }
    }

    /// Whether any fault counts these calls: none, and every call succeeds.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Counts one call: its number (from 1), and what the fault that fails
    /// it says, if one does.
    pub fn count(&self) -> (u32, Option<&str>) {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let failed = self.runs.iter().find(|(first, times, _)| call >= *first && call - first < *times);
        (call, failed.map(|(.., error)| error.as_str()))
    }
}

//! What checks are given of a run: what crossed the engine's boundary and
//! how the run ended, never the engine's own account of itself. The type
//! is the guard: a check cannot read an engine event, because none is here.

use crate::history::History;
use crate::history::RunEnd;
use crate::trace::{Event, TraceEvent};
use crate::world::RunRecord;

/// A run as the checks see it.
pub struct Judged<'a> {
    pub history: &'a History,
    pub end: RunEnd,
    pub sim_ms: u64,
    pub panic: Option<&'a str>,
    /// The timeline without the engine's own events.
    pub events: BoundaryEvents<'a>,
    /// The scenario's triggered evictions whose trigger matched (the
    /// world's record of its own faults).
    pub fired_faults: &'a std::collections::BTreeSet<usize>,
}

impl<'a> Judged<'a> {
    pub fn of(run: &'a RunRecord) -> Self {
        Self {
            history: &run.history,
            end: run.end,
            sim_ms: run.sim_ms,
            panic: run.panic.as_deref(),
            events: BoundaryEvents::of(&run.events),
            fired_faults: &run.fired_faults,
        }
    }
}

/// Timeline events that record what crossed the boundary or what the world
/// did: everything but [`Event::Engine`], which only it can construct.
pub struct BoundaryEvents<'a>(Vec<&'a TraceEvent>);

impl<'a> BoundaryEvents<'a> {
    pub fn of(events: &'a [TraceEvent]) -> Self {
        Self(events.iter().filter(|traced| !matches!(traced.event, Event::Engine(_))).collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a TraceEvent> + '_ {
        self.0.iter().copied()
    }
}

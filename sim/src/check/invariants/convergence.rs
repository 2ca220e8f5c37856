//! Invariant 9: once faults stop, every turn reaches a terminal state within
//! the scenario's horizon, and nothing keeps the process busy for an
//! orphaned batch. A run that ends any other way than quiescent fails here.

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "converges",
    rule: "every run settles (no open turn, nothing armed) within its horizon and event budget, without a panic",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let run = input.run;
    let state = match run.final_activity {
        Some(activity) => format!("{activity:?}"),
        None => "engine process down".to_string(),
    };
    let message = match run.end {
        RunEnd::Quiescent => return Vec::new(),
        RunEnd::Horizon => format!(
            "did not settle within its horizon of {} ms of sim time (the time budget; a longer story may raise \
             `horizon_ms`); engine: {state}",
            input.scenario.scenario.horizon_ms
        ),
        RunEnd::EventBudget => format!(
            "recorded {} events, its event budget, at {} ms of sim time without settling: a livelock, or a run longer \
             than its budget (raise `max_events`, at most {}); engine: {state}",
            input.scenario.scenario.max_events,
            run.sim_ms,
            crate::scenario::limits::MAX_EVENTS
        ),
        RunEnd::Panicked => format!("the run panicked: {}", run.panic.as_deref().unwrap_or("?")),
        RunEnd::NotConverged => format!(
            "faults stopped but the world did not settle within {} ms; engine: {state}",
            input.scenario.scenario.converge_within_ms
        ),
    };
    vec![Violation { check: INVARIANT.name.into(), message, at_event: run.events.len().checked_sub(1) }]
}

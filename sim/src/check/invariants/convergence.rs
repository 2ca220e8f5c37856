//! Invariant 9: once faults stop, every turn reaches a terminal state within
//! the scenario's horizon, and nothing keeps the process busy for an
//! orphaned batch. A run that ends any other way than quiescent fails here;
//! the message says what the boundary shows was still outstanding.

use turnsim_engine::Role;

use super::Invariant;
use crate::check::facts::CallEnd;
use crate::check::{CheckInput, Violation};
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "converges",
    rule: "every run settles (no open turn, nothing armed) within its horizon and event budget, without a panic",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let run = &input.run;
    let state = outstanding(input);
    let message = match run.end {
        RunEnd::Quiescent => return Vec::new(),
        RunEnd::Horizon => format!(
            "did not settle within its horizon of {} ms of sim time (the time budget; a longer story may raise \
             `horizon_ms`); at the end: {state}",
            input.scenario.scenario.horizon_ms
        ),
        RunEnd::EventBudget => format!(
            "recorded {} events, its event budget, at {} ms of sim time without settling: a livelock, or a run longer \
             than its budget (raise `max_events`, at most {}); at the end: {state}",
            input.scenario.scenario.max_events,
            run.sim_ms,
            crate::scenario::limits::MAX_EVENTS
        ),
        RunEnd::Panicked => format!("the run panicked: {}", run.panic.unwrap_or("?")),
        // Reported whole as `engine-fault`: the history stops where the process broke.
        RunEnd::EngineFault => return Vec::new(),
        RunEnd::NotConverged => format!(
            "faults stopped but the world did not settle within {} ms; at the end: {state}",
            input.scenario.scenario.converge_within_ms
        ),
    };
    let at_event = run.history.crossings.last().map(|crossing| crossing.at_event);
    vec![Violation { check: INVARIANT.name.into(), message, at_event }]
}

/// What the boundary shows was still open when the run ended: the process
/// down, model streams, `chat()` calls without an outcome, client tools
/// without an answer.
fn outstanding(input: &CheckInput) -> String {
    let facts = &input.facts;
    let history = &input.run.history;
    let mut open = Vec::new();
    if facts.down_at(history.crossings.len()) {
        open.push("the engine process down".to_string());
    }
    let streaming = facts.calls.iter().filter(|call| call.end == CallEnd::Open);
    open.extend(streaming.map(|call| format!("model call #{} streaming", call.call)));
    // A parked stream is open until the engine gives up on it by moving on.
    if let Some(last) = facts.calls.last().filter(|call| call.end == CallEnd::Parked) {
        open.push(format!("model call #{} held open by the provider", last.call));
    }
    let terminal = ["on_done", "on_error", "on_interrupted", "dropped"];
    for (chat, callbacks) in &facts.callbacks {
        if !callbacks.iter().any(|callback| terminal.contains(&callback.name)) {
            open.push(format!("chat{chat} without an outcome"));
        }
    }
    let store = &input.final_store;
    let assistant = store.messages.iter().filter(|message| message.role == Role::Assistant);
    let waiting = assistant.flat_map(|message| message.tools()).filter(|tool| tool.state.is_pending());
    open.extend(waiting.map(|tool| format!("{} {}", tool.call_id, tool.state.as_str())));
    if open.is_empty() {
        return "nothing the boundary shows".to_string();
    }
    open.join(", ")
}

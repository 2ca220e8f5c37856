//! Invariant 9: once faults stop, every turn reaches a terminal state within
//! the scenario's horizon, and nothing keeps the process busy for an
//! orphaned batch. A run that ends any other way than quiescent fails here;
//! the message says what the boundary shows was still outstanding.
//!
//! And the engine lets go of a model call it has moved on from: wherever
//! it rests (idle while sim time passes), no call it has started another
//! call after, or whose request's turn it has ended (a `done` or `error`
//! frame, a terminal callback), is still held open to the provider
//! (streaming, or parked by it) without a cancel. A call left so is
//! billed and holds a connection until the process dies, however the run
//! ends.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::ports::Frame;
use turnsim_engine::{Chunk, Role};

use super::Invariant;
use crate::check::facts::CallEnd;
use crate::check::{CheckInput, Violation};
use crate::history::RunEnd;
use crate::history::{Boundary, CallbackCall};

pub const INVARIANT: Invariant = Invariant {
    name: "converges",
    rule: "every run settles (no open turn, nothing armed) within its horizon and event budget, without a panic; and wherever the engine rests, no model call it has moved on from (another call started, its turn ended) is left streaming or parked without a cancel",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations: Vec<Violation> = left_streaming(input).into_iter().collect();
    violations.extend(unsettled(input));
    violations
}

fn unsettled(input: &CheckInput) -> Option<Violation> {
    let run = &input.run;
    let state = outstanding(input);
    let message = match run.end {
        RunEnd::Quiescent => return None,
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
        RunEnd::EngineFault => return None,
        RunEnd::NotConverged => format!(
            "faults stopped but the world did not settle within {} ms; at the end: {state}",
            input.scenario.scenario.converge_within_ms
        ),
    };
    let at_event = run.history.crossings.last().map(|crossing| crossing.at_event);
    Some(Violation { check: INVARIANT.name.into(), message, at_event })
}

/// The first model call found held open at a rest after the engine moved
/// on from it. The engine rests before an input that comes after sim time
/// passed (it handles each input in no sim time), and at the end of a
/// settled run.
fn left_streaming(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let facts = &input.facts;
    let mut request_of: BTreeMap<u32, &str> = BTreeMap::new();
    let mut chat_request: BTreeMap<u32, &str> = BTreeMap::new();
    // Where each request's turn was last seen to end: a call started
    // after it is a new run of the request (a continuation a restarted
    // process picks up under the same id).
    let mut ended: BTreeMap<&str, usize> = BTreeMap::new();
    // Calls that ended with an in-band error chunk: the provider is done.
    let mut errored: BTreeSet<u32> = BTreeSet::new();
    let mut latest: Option<u32> = None;
    let mut last_us = 0;
    let rests = history.iter().enumerate().map(|(index, crossing)| {
        let rest = crossing.what.is_input() && crossing.at_us > last_us;
        last_us = crossing.at_us;
        (index, rest)
    });
    let end = (input.run.end == RunEnd::Quiescent).then_some((history.crossings.len(), true));
    // The calls that may still be held open, in call order: a call that is
    // not held open at one rest never is again (its cancel, end, error or
    // the process's death stays behind it), so each rest looks only at the
    // calls still open, not at every call of a long session.
    let mut open: Vec<&crate::check::facts::CallFact> = Vec::new();
    let mut started = facts.calls.iter().peekable();
    for (index, rest) in rests.chain(end) {
        if rest {
            while let Some(call) = started.next_if(|call| call.at < index) {
                open.push(call);
            }
            open.retain(|call| !errored.contains(&call.call) && held_open(input, call, index));
            for call in &open {
                let request = request_of.get(&call.call).copied().unwrap_or_default();
                let why = if latest.is_some_and(|latest| latest > call.call) {
                    format!("model call #{} was started after it", latest.unwrap_or_default())
                } else if ended.get(request).is_some_and(|&at| at > call.at) {
                    format!("the turn of request {request} ended")
                } else {
                    continue;
                };
                let text = format!(
                    "model call #{} is left {} without a cancel, though {why}",
                    call.call,
                    if call.end == CallEnd::Parked { "parked" } else { "streaming" }
                );
                return Some(input.violation_at(INVARIANT.name, index.saturating_sub(1), text));
            }
        }
        let Some(crossing) = history.crossings.get(index) else { break };
        match &crossing.what {
            Boundary::ModelRequest { call, request } => {
                request_of.insert(*call, &request.request_id);
                latest = Some(*call);
            }
            Boundary::ModelChunk { call, chunk: Chunk::Error { .. } } => {
                errored.insert(*call);
            }
            Boundary::Frame { frame: Frame::Done { request_id, .. } | Frame::Error { request_id, .. }, .. } => {
                ended.insert(request_id, index);
            }
            Boundary::Callback { chat, call, .. } => match call {
                CallbackCall::Start { request_id } => {
                    chat_request.insert(*chat, request_id);
                }
                CallbackCall::Done | CallbackCall::Error { .. } | CallbackCall::Interrupted => {
                    if let Some(request) = chat_request.get(chat) {
                        ended.insert(request, index);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    None
}

/// Whether model call `call` is held open to the provider just before
/// crossing `index`: started, not cancelled, not killed with the process,
/// and not ended by the provider (a parked stream is still held; one that
/// sent an in-band error is done, and is left out by the caller).
fn held_open(input: &CheckInput, call: &crate::check::facts::CallFact, index: usize) -> bool {
    if call.at >= index || call.cancelled_at.is_some_and(|at| at < index) {
        return false;
    }
    if input.facts.killed_between(call.at, index) {
        return false;
    }
    match (call.ended_at, &call.end) {
        (Some(at), end) if at < index => *end == CallEnd::Parked,
        _ => true,
    }
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

//! Invariant 4: a tool parked on the client (a client or human tool's
//! answer, or any tool's approval) is never repaired to an error while
//! its batch lives. Only a new answer to a user message abandons a
//! batch: a commit that turns a waiting client tool into an error nobody
//! sent, followed by a model request that picks the reply up again (rather
//! than answering a user message afresh), repaired it early. Nor is a
//! client or human tool ever handed to the server-tool port: an approved
//! client tool is the client's to run.

use std::collections::BTreeMap;

use turnsim_engine::durable::DurableState;
use turnsim_engine::ToolState;

use super::Invariant;
use crate::check::facts::Basis;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "parked-tool-kept",
    rule: "a tool waiting for the client (its answer or its approval) is never repaired to an error by a continuation or recovery, nor a client tool executed by the server",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = executed_by_the_server(input);
    violations.extend(repaired_while_waiting(input));
    violations
}

fn executed_by_the_server(input: &CheckInput) -> Vec<Violation> {
    let executions = input.run.history.iter().enumerate().filter_map(|(index, crossing)| match &crossing.what {
        Boundary::ServerToolCall { call } if input.is_client_tool(&call.tool_name) => Some((index, call)),
        _ => None,
    });
    executions
        .map(|(index, call)| {
            let message =
                format!("{} ({}) is a client tool but was executed by the server", call.call_id, call.tool_name);
            input.violation_at(INVARIANT.name, index, message)
        })
        .collect()
}

/// Walks the store commit by commit: a client tool that was waiting and is
/// now an error with no answer sent for it was repaired; it was repaired
/// while its batch lived when the next model request continues the reply.
fn repaired_while_waiting(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut waiting: BTreeMap<String, bool> = waiting_for_the_client(input, &history.initial);
    let mut violations = Vec::new();
    for (index, store) in history.store_states() {
        let now = waiting_for_the_client(input, &store);
        let repaired: Vec<&str> = waiting
            .iter()
            .filter(|(call_id, was_waiting)| **was_waiting && is_unsent_error(input, &store, call_id, index))
            .map(|(call_id, _)| call_id.as_str())
            .collect();
        if !repaired.is_empty() && continued_after(input, index) {
            let message = format!("{} repaired to an error while waiting for the client", repaired.join(", "));
            violations.push(input.violation_at(INVARIANT.name, index, message));
        }
        waiting = now;
    }
    violations
}

/// Tools in the store that the client acts on, by call id: whether each
/// waits for it. A client tool waits for its answer (and, approved, for
/// its result); any tool waits while its approval is requested.
fn waiting_for_the_client(input: &CheckInput, store: &DurableState) -> BTreeMap<String, bool> {
    let tools = store.messages.iter().flat_map(|message| message.tools());
    let asks = tools.filter(|tool| input.is_client_tool(&tool.tool_name) || tool.state == ToolState::ApprovalRequested);
    let waits = |state: ToolState| state.is_pending() || state == ToolState::ApprovalResponded;
    asks.map(|tool| (tool.call_id.clone(), waits(tool.state))).collect()
}

/// The call is an error in `store` that no answer explains.
fn is_unsent_error(input: &CheckInput, store: &DurableState, call_id: &str, index: usize) -> bool {
    let state = store.messages.iter().find_map(|message| message.tool(call_id)).map(|tool| tool.state);
    matches!(state, Some(ToolState::OutputError | ToolState::OutputDenied))
        && !input.facts.answered_before(call_id, index)
}

/// Whether the first model request after history index `index` picks up a
/// reply (a continuation or a recovery) rather than answering a user
/// message afresh.
fn continued_after(input: &CheckInput, index: usize) -> bool {
    let next = input.facts.calls.iter().find(|call| call.at > index);
    next.is_some_and(|call| !matches!(call.basis, Basis::User { .. } | Basis::Empty))
}

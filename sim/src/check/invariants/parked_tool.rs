//! Invariant 4: a tool parked on the client (a client or human tool's
//! answer, or any tool's approval) is never repaired to an error while
//! its batch lives. Only a new answer to a user message abandons a
//! batch: a commit that turns a waiting client tool into an error nobody
//! sent, followed by a model request that picks the reply up again (rather
//! than answering a user message afresh), repaired it early. Nor is a
//! client or human tool ever handed to the server-tool port: an approved
//! client tool is the client's to run.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use turnsim_engine::durable::DurableState;
use turnsim_engine::{ToolPart, ToolState};

use super::Invariant;
use crate::check::facts::Basis;
use crate::check::store_tools::{first_tool, tools_last_first, walk_commits};
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
/// Only the calls a commit may have changed are read again: a call's
/// waiting, and its state, move only with them.
fn repaired_while_waiting(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut waiting = Waiting::default();
    let every_call: BTreeSet<String> =
        history.initial.messages.iter().flat_map(|message| message.tools()).map(|tool| tool.call_id.clone()).collect();
    waiting.update(input, &history.initial, &every_call);
    let mut violations = Vec::new();
    walk_commits(history, |index, store, changed| {
        let candidates =
            changed.iter().filter(|call_id| waiting.calls.contains(*call_id)).chain(&waiting.first_an_error);
        let repaired: BTreeSet<&str> =
            candidates.filter(|call_id| is_unsent_error(input, store, call_id, index)).map(String::as_str).collect();
        if !repaired.is_empty() && continued_after(input, index) {
            let repaired: Vec<&str> = repaired.into_iter().collect();
            let message = format!("{} repaired to an error while waiting for the client", repaired.join(", "));
            violations.push(input.violation_at(INVARIANT.name, index, message));
        }
        waiting.update(input, store, changed);
        ControlFlow::Continue(())
    });
    violations
}

/// The calls in the store that wait for the client: a client tool waits
/// for its answer (and, approved, for its result); any tool waits while its
/// approval is requested. A call held twice is judged by its last part the
/// client acts on.
#[derive(Default)]
struct Waiting {
    calls: BTreeSet<String>,
    /// Those whose first part in the store is already an error (a call held
    /// twice): a commit that changes nothing of them may still find them
    /// repaired.
    first_an_error: BTreeSet<String>,
}

impl Waiting {
    fn update(&mut self, input: &CheckInput, store: &DurableState, changed: &BTreeSet<String>) {
        for call_id in changed {
            let asks =
                |tool: &&ToolPart| input.is_client_tool(&tool.tool_name) || tool.state == ToolState::ApprovalRequested;
            let waits = tools_last_first(store, call_id)
                .find(asks)
                .is_some_and(|tool| tool.state.is_pending() || tool.state == ToolState::ApprovalResponded);
            let first_error = first_tool(store, call_id).is_some_and(|tool| is_error(tool.state));
            set(&mut self.calls, call_id, waits);
            set(&mut self.first_an_error, call_id, waits && first_error);
        }
    }
}

fn set(calls: &mut BTreeSet<String>, call_id: &str, member: bool) {
    if member {
        calls.insert(call_id.to_string());
    } else {
        calls.remove(call_id);
    }
}

fn is_error(state: ToolState) -> bool {
    matches!(state, ToolState::OutputError | ToolState::OutputDenied)
}

/// The call is an error in `store` that no answer explains.
fn is_unsent_error(input: &CheckInput, store: &DurableState, call_id: &str, index: usize) -> bool {
    first_tool(store, call_id).is_some_and(|tool| is_error(tool.state)) && !input.facts.answered_before(call_id, index)
}

/// Whether the first model request after history index `index` picks up a
/// reply (a continuation or a recovery) rather than answering a user
/// message afresh.
fn continued_after(input: &CheckInput, index: usize) -> bool {
    let next = input.facts.calls.iter().find(|call| call.at > index);
    next.is_some_and(|call| !matches!(call.basis, Basis::User { .. } | Basis::Empty))
}

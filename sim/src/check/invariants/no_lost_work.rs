//! Invariant 10: nothing acknowledged is lost across evictions, and a server
//! tool whose result was stored never runs again. Acknowledged is what the
//! engine showed someone: a message or a tool's result in a frame, a model
//! request or a commit. The store is the history's commits folded in.

use std::collections::BTreeMap;

use turnsim_engine::durable::Write;
use turnsim_engine::{Frame, Message, Role, ToolState};

use super::Invariant;
use crate::check::views::new_message;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "no-lost-work",
    rule: "stored user messages and applied tool results survive evictions; a completed server tool never runs twice",
    check,
};

const NAME: &str = "no-lost-work";

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = lost_messages(input);
    violations.extend(lost_results(input));
    violations.extend(repeated_server_tools(input));
    violations.extend(unanswered_last_message(input));
    violations
}

/// The messages a crossing shows: a transcript frame, a model request, a
/// commit's messages.
fn shown_messages(what: &Boundary) -> Vec<&Message> {
    match what {
        Boundary::Frame { frame: Frame::Messages(messages), .. } => messages.iter().collect(),
        Boundary::Frame { frame: Frame::Reset { message, .. }, .. } => vec![message],
        Boundary::ModelRequest { request, .. } => request.messages.iter().collect(),
        Boundary::Commit { writes } => writes.iter().filter_map(Write::message).collect(),
        _ => Vec::new(),
    }
}

/// Every user message the engine showed anyone stays in the store as shown.
fn lost_messages(input: &CheckInput) -> Vec<Violation> {
    let mut shown: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        for message in shown_messages(&crossing.what).into_iter().filter(|message| message.role == Role::User) {
            shown.entry(message.id.clone()).or_insert((index, message.text()));
        }
    }
    let store = input.run.history.final_store();
    let mut violations = Vec::new();
    for (id, (index, text)) in shown {
        let message = match store.message(&id) {
            None => format!("user message {id} was acknowledged but is gone"),
            Some(stored) if stored.role != Role::User || stored.text() != text => {
                format!("user message {id} was acknowledged as {text:?} but is stored as {:?}", stored.text())
            }
            Some(_) => continue,
        };
        violations.push(input.violation_at(NAME, index, message));
    }
    violations
}

/// Each tool call's result, once shown, is never shown otherwise later
/// (an answered approval may become an output) and is in the final store.
/// A call the engine discarded with a failed attempt (a truncated finish or
/// a retried HTTP failure) no longer exists and is exempt.
fn lost_results(input: &CheckInput) -> Vec<Violation> {
    let mut shown: BTreeMap<String, (usize, ToolState)> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        for (call_id, state) in shown_states(&crossing.what) {
            let Some(&(_, known)) = shown.get(&call_id) else {
                if is_result(state) {
                    shown.insert(call_id, (index, state));
                }
                continue;
            };
            if state == known || discarded(input, &call_id) {
                continue;
            }
            if known == ToolState::ApprovalResponded && state.is_output() {
                shown.insert(call_id, (index, state));
                continue;
            }
            let message = format!(
                "{call_id} was shown as {} but then {} as {}",
                known.as_str(),
                verb(&crossing.what),
                state.as_str()
            );
            violations.push(input.violation_at(NAME, index, message));
            shown.remove(&call_id);
        }
    }
    let store = input.run.history.final_store();
    let gone = shown.into_iter().filter(|(call_id, _)| {
        !discarded(input, call_id) && store.messages.iter().all(|message| message.tool(call_id).is_none())
    });
    violations.extend(gone.map(|(call_id, (index, state))| {
        let message = format!("{call_id} was shown as {} but is gone from the store", state.as_str());
        input.violation_at(NAME, index, message)
    }));
    violations
}

fn is_result(state: ToolState) -> bool {
    state.is_output() || state == ToolState::ApprovalResponded
}

/// The call was streamed by a model call whose attempt the engine discards.
fn discarded(input: &CheckInput, call_id: &str) -> bool {
    let mut failed = input.facts.calls.iter().filter(|call| call.is_truncated_finish() || call.end.is_retryable_http());
    failed.any(|call| call.tools.iter().any(|tool| tool == call_id))
}

/// How a crossing showed what it shows, for a message.
fn verb(what: &Boundary) -> &'static str {
    match what {
        Boundary::Commit { .. } => "stored",
        Boundary::ModelRequest { .. } => "sent to the model",
        _ => "sent to a client",
    }
}

/// The tool calls a crossing shows, with their states.
fn shown_states(what: &Boundary) -> Vec<(String, ToolState)> {
    if let Boundary::Frame { frame: Frame::Tool { call_id, state, .. }, .. } = what {
        return vec![(call_id.clone(), *state)];
    }
    let tools = shown_messages(what).into_iter().flat_map(|message| message.tools());
    tools.map(|tool| (tool.call_id.clone(), tool.state)).collect()
}

/// The engine asks for a server tool to run after the store holds its result.
fn repeated_server_tools(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        let Boundary::ServerToolCall { call } = &crossing.what else { continue };
        let store = history.store_at(index);
        let stored = store.messages.iter().find_map(|message| message.tool(&call.call_id));
        if stored.is_some_and(|tool| tool.state.is_output()) {
            let message = format!("server tool {} ran again after its result was stored", call.call_id);
            violations.push(input.violation_at(NAME, index, message));
        }
    }
    violations
}

/// A settled run answers the last user message, or says why not: an error
/// or a terminal message to a consumer after the last message came in, or
/// a terminal status stored since then for clients that connect later.
fn unanswered_last_message(input: &CheckInput) -> Option<Violation> {
    if input.run.end != RunEnd::Quiescent {
        return None;
    }
    let store = input.run.history.final_store();
    let messages = &store.messages;
    let last_user = messages.iter().rposition(|message| message.role == Role::User)?;
    let answered =
        messages[last_user + 1..].iter().any(|message| message.role == Role::Assistant && !message.parts.is_empty());
    if answered || told_why_not(input, &messages[last_user].text()) {
        return None;
    }
    Some(Violation::new(NAME, format!("user message {} was never answered", messages[last_user].id)))
}

/// Whether a failure was reported, or stored for later clients, after the
/// last stored message (`text`) came in. A later one the store refused is
/// not it: its sender was told so, and the stored one is still owed.
fn told_why_not(input: &CheckInput, text: &str) -> bool {
    let history = &input.run.history;
    let brought_it = |at: &usize| new_message(history, *at) == Some(text);
    let since = (0..history.crossings.len()).rev().find(brought_it).unwrap_or(0);
    crate::check::facts::told_failure_since(&input.run.history, since)
}

//! Invariant 10: nothing acknowledged is lost across evictions, and a server
//! tool's run is an effect: it runs once, and its result is stored as it came. Acknowledged is what the
//! engine showed someone: a message or a tool's result in a frame, a model
//! request or a commit. The store is the history's commits folded in.

mod results;

use std::collections::BTreeMap;

use turnsim_engine::{Role, ToolOutcome, ToolPart, ToolState};

use super::Invariant;
use crate::check::store_cursor::StoreCursor;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;
use crate::history::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "no-lost-work",
    rule: "stored user messages and applied tool results survive evictions, and a tool result is shown everywhere in one state with one output or error text; a server tool runs once (again only after a crash cut it short before its result), and a result that came back is stored as it came",
    check,
};

const NAME: &str = "no-lost-work";

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = lost_messages(input);
    violations.extend(results::lost_results(input));
    violations.extend(repeated_server_tools(input));
    violations.extend(lost_server_results(input));
    violations.extend(unanswered_last_message(input));
    violations
}

/// Every user message the engine showed anyone stays in the store as shown.
fn lost_messages(input: &CheckInput) -> Vec<Violation> {
    let mut shown: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for index in 0..input.run.history.crossings.len() {
        let shown_here = input.shown_changes.at(index).iter().map(|(message, _)| *message);
        for message in shown_here.filter(|message| message.role == Role::User) {
            if !shown.contains_key(&message.id) {
                shown.insert(message.id.clone(), (index, message.text()));
            }
        }
    }
    let store = &input.final_store;
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

/// A server tool's run is an effect (whatever it does happens when it
/// runs): the engine asks for each call to run once. Only a run a crash cut
/// short, before its result came, may be run again by a later process (at
/// least once is all a tool without idempotent runs allows); a run whose
/// result came, or one the same process started before, is never repeated,
/// whether its result was stored or discarded with a failed attempt.
fn repeated_server_tools(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut store = StoreCursor::new(history);
    // Per call: whether its last run may be repeated (a crash cut it short).
    let mut runs: BTreeMap<&str, bool> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::Killed => runs.values_mut().for_each(|cut_short| *cut_short = true),
            Boundary::ServerToolDone { call_id, .. } => {
                runs.insert(call_id.as_str(), false);
            }
            Boundary::ServerToolCall { call } => {
                if runs.insert(call.call_id.as_str(), false) != Some(false) {
                    continue;
                }
                let stored = store.at(index).messages.iter().find_map(|message| message.tool(&call.call_id));
                let message = match stored.is_some_and(|tool| tool.state.is_output()) {
                    true => format!("server tool {} ran again after its result was stored", call.call_id),
                    false => format!("server tool {} ran twice", call.call_id),
                };
                violations.push(input.violation_at(NAME, index, message));
            }
            _ => {}
        }
    }
    violations
}

/// A server tool that ran to its end in a live process left its outcome
/// with that process: the store ends up holding the call with exactly
/// that outcome (the model and every consumer see what the tool did).
/// One that came too late is not the engine's to keep: the engine had
/// settled the call otherwise (a hung tool the stall watchdog gave up on,
/// repaired as interrupted), or told of a failure since the tool started
/// (the turn it ran for failed, and the user was told so).
fn lost_server_results(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut store = StoreCursor::new(history);
    let mut started: BTreeMap<&str, usize> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        if let Boundary::ServerToolCall { call } = &crossing.what {
            started.insert(call.call_id.as_str(), index);
        }
        let Boundary::ServerToolDone { call_id, outcome } = &crossing.what else { continue };
        let then = store.at(index).messages.iter().find_map(|message| message.tool(call_id));
        let since = started.get(call_id.as_str()).copied().unwrap_or(0);
        let told = crate::check::facts::told_failure_between(input.run.history, since, index);
        if told || then.is_some_and(|tool| tool.state.is_output()) {
            continue;
        }
        let stored = input.final_store.messages.iter().find_map(|message| message.tool(call_id));
        let problem = match stored {
            None => "is gone from the store".to_string(),
            Some(tool) if !holds(tool, outcome) => format!("is stored as {}", stored_outcome(tool)),
            Some(_) => continue,
        };
        let message = format!("server tool {call_id} ran to its end but its result {problem}");
        violations.push(input.violation_at(NAME, index, message));
    }
    violations
}

/// A stored call's state and outcome, as a report names them.
fn stored_outcome(tool: &ToolPart) -> String {
    match (&tool.output, &tool.error_text) {
        (_, Some(error)) => format!("{} with error {error:?}", tool.state.as_str()),
        (Some(output), None) => format!("{} with output {output}", tool.state.as_str()),
        (None, None) => tool.state.as_str().to_string(),
    }
}

/// Whether a stored call shows exactly this outcome.
fn holds(tool: &ToolPart, outcome: &ToolOutcome) -> bool {
    match outcome {
        ToolOutcome::Output(output) => tool.state == ToolState::OutputAvailable && tool.output.as_ref() == Some(output),
        ToolOutcome::Error(Some(text)) => {
            tool.state == ToolState::OutputError && tool.error_text.as_deref() == Some(text.as_str())
        }
        ToolOutcome::Error(None) => tool.state == ToolState::OutputError,
    }
}

/// A settled run answers the last user message, or says why not: an error
/// or a terminal message to a consumer after the last message came in, or
/// a terminal status stored since then for clients that connect later.
fn unanswered_last_message(input: &CheckInput) -> Option<Violation> {
    if input.run.end != RunEnd::Quiescent {
        return None;
    }
    let store = &input.final_store;
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
    let brought_it = input.new_messages.iter().rev().find(|(_, brought)| *brought == text);
    let since = brought_it.map_or(0, |(at, _)| *at);
    crate::check::facts::told_failure_since(input.run.history, since)
}

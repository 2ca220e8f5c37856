//! Invariant 10: nothing acknowledged is lost across evictions, and a server
//! tool whose result was stored never runs again.

use std::collections::BTreeMap;

use turnsim_engine::{EngineEvent, Role, ToolState};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;
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

fn lost_messages(input: &CheckInput) -> Vec<Violation> {
    let stored = input.run.events.iter().enumerate().filter_map(|(index, traced)| match &traced.event {
        Event::Engine(EngineEvent::UserMessageStored { message_id }) => Some((index, message_id)),
        _ => None,
    });
    let messages = &input.run.final_state.messages;
    stored
        .filter(|(_, id)| !messages.iter().any(|message| &message.id == *id))
        .map(|(index, id)| Violation::at(NAME, index, format!("user message {id} was acknowledged but is gone")))
        .collect()
}

/// The last state each tool result set, against the stored transcript. A
/// call the engine discarded with a truncated or failed attempt is exempt: it no longer
/// exists. Any other applied call missing from the store was lost.
fn lost_results(input: &CheckInput) -> Vec<Violation> {
    let mut applied: BTreeMap<&str, (usize, ToolState)> = BTreeMap::new();
    for (index, traced) in input.run.events.iter().enumerate() {
        match &traced.event {
            Event::Engine(EngineEvent::ToolApplied { call_id, state, .. }) if *state != ToolState::InputAvailable => {
                applied.insert(call_id, (index, *state));
            }
            Event::Engine(
                EngineEvent::EmptyFinish { discarded_tools, .. } | EngineEvent::ProviderRetry { discarded_tools, .. },
            ) => {
                for call_id in discarded_tools {
                    applied.remove(call_id.as_str());
                }
            }
            _ => {}
        }
    }
    let messages = &input.run.final_state.messages;
    let mut violations = Vec::new();
    for (call_id, (index, state)) in applied {
        let Some(tool) = messages.iter().find_map(|message| message.tool(call_id)) else {
            violations.push(Violation::at(
                NAME,
                index,
                format!("{call_id} was applied as {} but is gone", state.as_str()),
            ));
            continue;
        };
        let kept = tool.state == state || (state == ToolState::ApprovalResponded && tool.state.is_output());
        if !kept {
            let message =
                format!("{call_id} was applied as {} but is stored as {}", state.as_str(), tool.state.as_str());
            violations.push(Violation::at(NAME, index, message));
        }
    }
    violations
}

fn repeated_server_tools(input: &CheckInput) -> Vec<Violation> {
    let mut stored_results: BTreeMap<&str, usize> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, traced) in input.run.events.iter().enumerate() {
        match &traced.event {
            Event::Engine(EngineEvent::ToolApplied { call_id, state, .. }) if state.is_output() => {
                stored_results.entry(call_id).or_insert(index);
            }
            Event::ServerToolRun { call_id, .. } if stored_results.contains_key(call_id.as_str()) => {
                violations.push(Violation::at(
                    NAME,
                    index,
                    format!("server tool {call_id} ran again after its result was stored"),
                ));
            }
            _ => {}
        }
    }
    violations
}

/// A settled run answers the last user message, or says why not (an error
/// or a terminal recovery message).
fn unanswered_last_message(input: &CheckInput) -> Option<Violation> {
    if input.run.end != RunEnd::Quiescent || input.run.final_state.terminal_status.is_some() {
        return None;
    }
    let messages = &input.run.final_state.messages;
    let last_user = messages.iter().rposition(|message| message.role == Role::User)?;
    let answered =
        messages[last_user + 1..].iter().any(|message| message.role == Role::Assistant && !message.parts.is_empty());
    let errored = input.run.events.iter().rev().find_map(|traced| match &traced.event {
        Event::Engine(EngineEvent::TurnFinished { status, .. }) => Some(*status == turnsim_engine::TurnStatus::Error),
        _ => None,
    });
    if answered || errored == Some(true) {
        return None;
    }
    Some(Violation::new(NAME, format!("user message {} was never answered", messages[last_user].id)))
}

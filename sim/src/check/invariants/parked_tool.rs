//! Invariant 4: a parked client or human tool is never repaired to an error
//! while its batch lives. Only a new user message abandons a batch; a
//! continuation or recovery that repairs a waiting client tool fired early.
//! Nor is a client or human tool ever handed to the server-tool port: an
//! approved client tool is the client's to run.

use turnsim_engine::durable::TurnKind;
use turnsim_engine::{EngineEvent, ToolKind, ToolState};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;

pub const INVARIANT: Invariant = Invariant {
    name: "parked-tool-kept",
    rule: "a client or human tool waiting for its answer is never repaired to an error by a continuation or recovery, nor executed by the server",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let events = &input.run.events;
    let mut waiting = std::collections::BTreeMap::new();
    let mut names = tool_names(input);
    let mut violations = Vec::new();
    for (index, traced) in events.iter().enumerate() {
        let Event::Engine(event) = &traced.event else {
            continue;
        };
        match event {
            EngineEvent::ServerToolStarted { call_id } => {
                let name = names.get(call_id).cloned().unwrap_or_default();
                if names.contains_key(call_id) && is_client_tool(input, &name) {
                    let message = format!("{call_id} ({name}) is a client tool but was executed by the server");
                    violations.push(Violation::at(INVARIANT.name, index, message));
                }
            }
            EngineEvent::ToolReady { call_id, tool_name, state } => {
                names.insert(call_id.clone(), tool_name.clone());
                let client = is_client_tool(input, tool_name);
                waiting.insert(call_id.clone(), client && state.is_pending());
            }
            EngineEvent::ToolApplied { call_id, state, .. } => {
                let was_client = waiting.get(call_id).copied().unwrap_or(false);
                waiting.insert(call_id.clone(), was_client && *state == ToolState::InputAvailable);
            }
            EngineEvent::Repaired { call_ids } => {
                let parked: Vec<&str> = call_ids
                    .iter()
                    .filter(|id| waiting.get(*id).copied().unwrap_or(false))
                    .map(String::as_str)
                    .collect();
                if !parked.is_empty() && repaired_by_continuation(events, index) {
                    let message = format!("{} repaired to an error while waiting for the client", parked.join(", "));
                    violations.push(Violation::at(INVARIANT.name, index, message));
                }
                for call_id in call_ids {
                    waiting.insert(call_id.clone(), false);
                }
            }
            _ => {}
        }
    }
    violations
}

/// Tool names by call id, from the stored transcript (ready events add
/// calls a truncation later discarded).
fn tool_names(input: &CheckInput) -> std::collections::BTreeMap<String, String> {
    let messages = &input.run.final_state.messages;
    let tools = messages.iter().flat_map(|message| message.tools());
    tools.map(|tool| (tool.call_id.clone(), tool.tool_name.clone())).collect()
}

fn is_client_tool(input: &CheckInput, tool_name: &str) -> bool {
    let kind = input.scenario.scenario.engine.tools.get(tool_name).map_or(ToolKind::Client, |tool| tool.kind);
    kind.is_client_answered()
}

/// Repair runs just before its turn's `turn.start`.
fn repaired_by_continuation(events: &[crate::trace::TraceEvent], repaired_at: usize) -> bool {
    let next_turn = events[repaired_at..].iter().find_map(|traced| match &traced.event {
        Event::Engine(EngineEvent::TurnStarted { kind, .. }) => Some(*kind),
        _ => None,
    });
    matches!(next_turn, Some(TurnKind::Continuation | TurnKind::Recovery))
}

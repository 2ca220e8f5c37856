//! Invariant 4: a parked client or human tool is never repaired to an error
//! while its batch lives. Only a new user message abandons a batch; a
//! continuation or recovery that repairs a waiting client tool fired early.

use turnsim_engine::durable::TurnKind;
use turnsim_engine::{EngineEvent, ToolKind, ToolState};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;

pub const INVARIANT: Invariant = Invariant {
    name: "parked-tool-kept",
    rule: "a client or human tool waiting for its answer is never repaired to an error by a continuation or recovery",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let events = &input.run.events;
    let mut waiting = std::collections::BTreeMap::new();
    let mut violations = Vec::new();
    for (index, traced) in events.iter().enumerate() {
        let Event::Engine(event) = &traced.event else {
            continue;
        };
        match event {
            EngineEvent::ToolReady { call_id, tool_name, state } => {
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

//! Invariant 6: an interruption that lands mid tool input recovers (by
//! truncating the half-streamed call and regenerating) without spending the
//! attempt budget.

use std::collections::BTreeSet;

use turnsim_engine::EngineEvent;

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;

pub const INVARIANT: Invariant = Invariant {
    name: "mid-tool-input-recovers",
    rule: "a recovery from a partial that ends mid tool input never exhausts its budget",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut mid_tool_input = BTreeSet::new();
    let mut violations = Vec::new();
    for (index, traced) in input.run.events.iter().enumerate() {
        match &traced.event {
            Event::Engine(EngineEvent::RecoveryScheduled { incident_id, strategy, .. }) if strategy == "truncate" => {
                mid_tool_input.insert(incident_id.clone());
            }
            Event::Engine(EngineEvent::RecoveryExhausted { incident_id, attempt, reason })
                if mid_tool_input.contains(incident_id) =>
            {
                let message = format!(
                    "incident {incident_id} began mid tool input and exhausted after {attempt} attempts ({reason})"
                );
                violations.push(Violation::at(INVARIANT.name, index, message));
            }
            _ => {}
        }
    }
    violations
}

//! Invariant 3: no model request holds a tool call without its result (the
//! provider would answer `MissingToolResultsError`).

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::trace::Event;

pub const INVARIANT: Invariant =
    Invariant { name: "tool-results-present", rule: "no model request contains a tool call without a result", check };

fn check(input: &CheckInput) -> Vec<Violation> {
    let rejected = input.run.events.iter().enumerate().filter_map(|(index, traced)| match &traced.event {
        Event::ModelRejected { call, missing } => Some(Violation::at(
            INVARIANT.name,
            index,
            format!("model call #{call} was sent tool calls without results: {}", missing.join(", ")),
        )),
        _ => None,
    });
    rejected.collect()
}

//! Invariant 7: a zero-token `unknown` finish (or an empty `stop`) is a cut
//! stream, never a stored answer. The turn must retry or fail; only an empty
//! `unknown` finish after earlier output, adding nothing, may end it.

use turnsim_engine::TurnStatus;

use super::Invariant;
use crate::check::engine_facts::{CallFact, Facts};
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "no-empty-answer",
    rule: "no turn completes on a zero-token unknown finish that cut its output",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let facts = &input.engine_facts;
    let mut violations = Vec::new();
    for turn in &facts.turns {
        let calls: Vec<&CallFact> = facts.calls_for(&turn.request_id).collect();
        let Some(last) = calls.last() else { continue };
        if turn.status != Some(TurnStatus::Completed)
            || !last.is_truncated_finish()
            || is_benign(facts, &turn.message_id, last)
        {
            continue;
        }
        let message = format!(
            "{} completed on model call #{} that ended with a zero-token finish ({} content chunks cut)",
            turn.request_id, last.call, last.content_chunks
        );
        violations.push(Violation::at(INVARIANT.name, turn.ended_at.unwrap_or(last.at), message));
    }
    violations
}

/// Nothing new after earlier output in the same message: a benign end.
fn is_benign(facts: &Facts, message_id: &str, call: &CallFact) -> bool {
    let earlier_output = facts
        .turns
        .iter()
        .filter(|turn| turn.message_id == message_id)
        .flat_map(|turn| facts.calls_for(&turn.request_id))
        .any(|earlier| earlier.at < call.at && earlier.content_chunks > 0 && !earlier.is_truncated_finish());
    call.content_chunks == 0
        && matches!(&call.end, crate::check::engine_facts::CallEnd::Finished { reason, .. } if reason == "unknown")
        && earlier_output
}

//! Invariant 5: the stored transcript has no orphan `step-start`, no
//! duplicated tool call, and no parts left by a retried attempt: each
//! assistant message holds at most one `step-start` per model call whose
//! output was kept (a truncated attempt's parts are replaced, not appended).

use std::collections::BTreeSet;

use turnsim_engine::{Message, Part, Role};

use super::Invariant;
use crate::check::engine_facts::CallEnd;
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "transcript-shape",
    rule: "no orphan step-start, no duplicated tool call, no parts of a retried attempt in the stored transcript",
    check,
};

const NAME: &str = "transcript-shape";

fn check(input: &CheckInput) -> Vec<Violation> {
    let messages = &input.run.final_state.messages;
    let mut violations = Vec::new();
    let mut seen_calls = BTreeSet::new();
    for message in messages.iter().filter(|message| message.role == Role::Assistant) {
        if let Some(position) = orphan_step_start(message) {
            violations.push(Violation::new(NAME, format!("{}: orphan step-start at part {position}", message.id)));
        }
        for tool in message.tools() {
            if !seen_calls.insert(tool.call_id.clone()) {
                violations
                    .push(Violation::new(NAME, format!("{}: tool call {} appears twice", message.id, tool.call_id)));
            }
        }
        violations.extend(check_step_starts(input, message));
    }
    violations
}

/// A `step-start` followed by another or by the end of the message.
fn orphan_step_start(message: &Message) -> Option<usize> {
    let parts = &message.parts;
    (0..parts.len())
        .find(|&at| matches!(parts[at], Part::StepStart) && matches!(parts.get(at + 1), None | Some(Part::StepStart)))
}

/// `step-start`s of `message` that were stored before the engine booted.
fn stored_step_starts(input: &CheckInput, message_id: &str) -> usize {
    let stored = crate::scenario::durable_state(&input.scenario.scenario.stored).unwrap_or_default();
    stored
        .messages
        .iter()
        .filter(|stored| stored.id == message_id)
        .flat_map(|stored| stored.parts.iter())
        .filter(|part| matches!(part, Part::StepStart))
        .count()
}

fn check_step_starts(input: &CheckInput, message: &Message) -> Option<Violation> {
    let all_step_starts = message.parts.iter().filter(|part| matches!(part, Part::StepStart)).count();
    // Steps a stored transcript brought with it were not made by this run's model calls.
    let step_starts = all_step_starts.saturating_sub(stored_step_starts(input, &message.id));
    let facts = &input.engine_facts;
    let requests: Vec<&str> =
        facts.turns.iter().filter(|turn| turn.message_id == message.id).map(|turn| turn.request_id.as_str()).collect();
    let kept_calls: usize = requests
        .iter()
        .map(|request| {
            let calls: Vec<_> = facts.calls_for(request).collect();
            // An HTTP-failed call followed by another call of its request was
            // retried: like a truncated attempt, its parts are discarded.
            let retried = |at: usize| matches!(calls[at].end, CallEnd::Http) && at + 1 < calls.len();
            (0..calls.len())
                .filter(|&at| !calls[at].is_truncated_finish() && !retried(at))
                .filter(|&at| {
                    !(matches!(calls[at].end, CallEnd::Http | CallEnd::Rejected) && calls[at].content_chunks == 0)
                })
                .count()
        })
        .sum();
    (step_starts > kept_calls).then(|| {
        let message = format!(
            "{}: {step_starts} step-starts but only {kept_calls} model calls kept their output (a retried attempt's parts were kept)",
            message.id
        );
        Violation::new(NAME, message)
    })
}

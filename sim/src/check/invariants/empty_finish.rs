//! Invariant 7: a zero-token `unknown` finish (or an empty `stop`) is a cut
//! stream, never a stored answer. After one, the engine retries (another
//! model request) or says the turn failed; it never tells a consumer the
//! turn is done. Only an empty `unknown` finish after earlier output in the
//! same reply, adding nothing, may end it.

use turnsim_engine::messenger::{EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};
use turnsim_engine::{FinishReason, Frame};

use super::Invariant;
use crate::check::facts::{has_content, CallEnd, CallFact};
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall};

pub const INVARIANT: Invariant = Invariant {
    name: "no-empty-answer",
    rule: "no turn completes on a zero-token unknown finish that cut its output",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    for call in input.facts.calls.iter().filter(|call| call.is_truncated_finish()) {
        let Some(finished_at) = call.ended_at else { continue };
        if is_benign(input, call) {
            continue;
        }
        if let Some((done_at, told)) = reported_done(input, finished_at) {
            let message = format!(
                "model call #{} ended with a zero-token finish ({} content chunks cut), yet {told}",
                call.call, call.content_chunks
            );
            violations.push(input.violation_at(INVARIANT.name, done_at, message));
        }
    }
    violations
}

/// Nothing new after earlier output in the same reply: a benign end.
fn is_benign(input: &CheckInput, call: &CallFact) -> bool {
    let request = call.request(input.run.history);
    let earlier_output = request.messages.last().is_some_and(|reply| call.target.is_some() && has_content(reply));
    call.content_chunks == 0
        && matches!(call.end, CallEnd::Finished { reason: FinishReason::Unknown, .. })
        && earlier_output
}

/// What the engine did next about the turn, after the truncated finish at
/// `after`: `Some` (where, and whom it told) if it reported the turn done
/// before retrying, dying or reporting a failure.
fn reported_done(input: &CheckInput, after: usize) -> Option<(usize, String)> {
    let apologies = [EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];
    for (index, crossing) in input.run.history.crossings.iter().enumerate().skip(after + 1) {
        match &crossing.what {
            Boundary::ModelRequest { .. } | Boundary::Killed | Boundary::Exhausted { .. } => return None,
            Boundary::Frame { frame: Frame::Error { .. }, .. } => return None,
            Boundary::Callback { call: CallbackCall::Error { .. } | CallbackCall::Interrupted, .. } => return None,
            Boundary::Post { text, .. } if apologies.contains(&text.as_str()) => return None,
            Boundary::Frame { connection, frame: Frame::Done { .. } } => {
                return Some((index, format!("client connection c{connection} was sent done")))
            }
            Boundary::Callback { chat, call: CallbackCall::Done, .. } => {
                return Some((index, format!("chat{chat} got on_done")))
            }
            Boundary::Post { delivery, .. } => return Some((index, format!("delivery {delivery} posted it"))),
            _ => {}
        }
    }
    None
}

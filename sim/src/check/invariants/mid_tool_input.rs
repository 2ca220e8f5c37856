//! Invariant 6: an interruption that lands mid tool input recovers (by
//! truncating the half-streamed call and regenerating) without spending the
//! attempt budget. Read from the history: a model call whose stream stopped
//! inside a tool call's input (stalled, cut, or killed with the process),
//! then the host's `on_exhausted` hook before any later call kept output
//! and before a new user message moved the conversation on. A store that
//! refused a write in between excuses it: a recovery gives up when the
//! store refuses it, whatever its strategy.

use turnsim_engine::ToolState;

use super::Invariant;
use crate::check::facts::{last_step_tools, CallFact};
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "mid-tool-input-recovers",
    rule: "a recovery from a partial that ends mid tool input never exhausts its budget, and no model request holds a half-streamed tool call",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = half_streamed_calls_asked(input);
    for (index, crossing) in input.run.history.iter().enumerate() {
        let Boundary::Exhausted { context, .. } = &crossing.what else { continue };
        let Some(cut) = unrecovered_cut(input, index) else { continue };
        let message = format!(
            "incident {} began mid tool input (model call #{} stopped inside a tool call's input) and exhausted \
             after {} attempts ({})",
            context.incident_id, cut.call, context.attempt, context.reason
        );
        violations.push(input.violation_at(INVARIANT.name, index, message));
    }
    violations
}

/// A model request whose transcript ends in a tool call whose input never
/// finished streaming asks the model to continue from it (#1781): every
/// provider answers it with nothing or refuses it. Read from the last
/// step, so a long reply's earlier steps are not read again per request.
fn half_streamed_calls_asked(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        let Boundary::ModelRequest { call, request } = &crossing.what else { continue };
        let Some(last) = request.messages.last() else { continue };
        let half = last_step_tools(last).find(|tool| tool.state == ToolState::InputStreaming);
        if let Some(tool) = half {
            let message =
                format!("model call #{call} was asked to continue from {}'s half-streamed input", tool.call_id);
            violations.push(input.violation_at(INVARIANT.name, index, message));
        }
    }
    violations
}

/// The latest model call before history index `before` whose stream
/// stopped mid tool input, if nothing has recovered from it since: no later
/// call kept output, and no new message came in.
fn unrecovered_cut<'a>(input: &'a CheckInput, before: usize) -> Option<&'a CallFact> {
    let calls = &input.facts.calls;
    let earlier = calls.iter().take_while(|call| call.at < before);
    let cut = earlier.filter(|call| call.end.is_cut_off() && call.ends_mid_tool_input(input.run.history)).last()?;
    let recovered = calls.iter().any(|call| call.at > cut.at && call.at < before && kept_output(call));
    let moved_on = input.new_messages.iter().any(|(at, _)| (cut.at..before).contains(at));
    let history = &input.run.history.crossings;
    let refused =
        history[cut.at..before].iter().any(|crossing| matches!(crossing.what, Boundary::CommitRefused { .. }));
    (!recovered && !moved_on && !refused).then_some(cut)
}

/// The call streamed output the engine had no reason to discard.
fn kept_output(call: &CallFact) -> bool {
    call.content_chunks > 0 && !call.is_truncated_finish() && !call.end.is_retryable_http()
}

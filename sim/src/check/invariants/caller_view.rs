//! A `chat()` caller ends with the stored answer: the text it collected from
//! `on_event`, after every take-back the engine signalled, is the stored
//! reply's text when `on_done` arrives. A discarded attempt's text that was
//! never taken back shows here.

use super::Invariant;
use crate::check::views::{caller_outcomes, occurrence, stored_reply};
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "caller-view",
    rule: "a chat() caller's text at on_done, after any take-back, is the stored answer",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut violations = Vec::new();
    for outcome in caller_outcomes(history) {
        let (Some(done_at), Some(sent_at)) = (outcome.done_at, outcome.done_sent_at) else { continue };
        let store = history.store_at(sent_at);
        let nth = occurrence(history, outcome.sent_at, &outcome.sent);
        let Some(stored) = stored_reply(&store.messages, &outcome.sent, nth) else {
            let at = history.crossings[done_at].at_event;
            let message =
                format!("chat{} got on_done, but its message {:?} is not in the store", outcome.chat, outcome.sent);
            violations.push(Violation::at(INVARIANT.name, at, message));
            continue;
        };
        if outcome.text != stored {
            let at = history.crossings[done_at].at_event;
            let message =
                format!("chat{} shows {:?} at on_done; the stored answer is {:?}", outcome.chat, outcome.text, stored);
            violations.push(Violation::at(INVARIANT.name, at, message));
        }
    }
    violations
}

//! A `chat()` caller ends with the stored answer: the text it collected from
//! `on_event`, after every take-back the engine signalled, is the stored
//! reply's text when `on_done` arrives. A discarded attempt's text that was
//! never taken back shows here.

use turnsim_engine::durable::DurableState;

use super::Invariant;
use crate::check::store_cursor::StoreCursor;
use crate::check::views::{caller_outcomes, occurrence, stored_reply, CallerOutcome};
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "caller-view",
    rule: "a chat() caller's text at on_done, after any take-back, is the stored answer",
    check,
};

/// The stores to judge by are read in the order the engine answered, with
/// one walk over the history.
fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut done: Vec<(usize, usize, CallerOutcome)> = caller_outcomes(history)
        .into_iter()
        .filter_map(|outcome| Some((outcome.done_sent_at?, outcome.done_at?, outcome)))
        .collect();
    done.sort_by_key(|(sent_at, ..)| *sent_at);
    let mut store = StoreCursor::new(history);
    let mut judged: Vec<(usize, Option<Violation>)> = done
        .iter()
        .enumerate()
        .map(|(order, (sent_at, done_at, outcome))| (order, judge(input, store.at(*sent_at), *done_at, outcome)))
        .collect();
    // Reported in the order the chats were made, as before.
    judged.sort_by_key(|(order, _)| done[*order].2.sent_at);
    judged.into_iter().filter_map(|(_, violation)| violation).collect()
}

fn judge(input: &CheckInput, store: &DurableState, done_at: usize, outcome: &CallerOutcome) -> Option<Violation> {
    let at = input.run.history.crossings[done_at].at_event;
    let nth = occurrence(&input.new_messages, outcome.sent_at, &outcome.sent);
    let Some(stored) = stored_reply(&store.messages, &outcome.sent, nth) else {
        let message =
            format!("chat{} got on_done, but its message {:?} is not in the store", outcome.chat, outcome.sent);
        return Some(Violation::at(INVARIANT.name, at, message));
    };
    (outcome.text != stored).then(|| {
        let message =
            format!("chat{} shows {:?} at on_done; the stored answer is {:?}", outcome.chat, outcome.text, stored);
        Violation::at(INVARIANT.name, at, message)
    })
}

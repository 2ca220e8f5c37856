//! A connected client shows what the engine stored: the transcript rebuilt
//! from every frame a connection was sent (the transcript on connect, chunks,
//! tool states, take-backs) equals the store's at the end of the run. A
//! retried attempt's text left on screen, a tool state never sent, a repair
//! the client never heard of: each shows here. And a client is not left
//! showing a recovery under way once the run has settled: with nothing
//! left to run or wake for, no recovery can be going on.

use super::Invariant;
use crate::check::views::{open_client_views, shown, ShownMessage};
use crate::check::{CheckInput, Violation};
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "client-view",
    rule: "every connected client's transcript, rebuilt from the frames it was sent, is the stored transcript, and none still shows a recovery under way",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    // Frames still in flight (a run cut at its horizon) prove nothing.
    if input.run.end != RunEnd::Quiescent {
        return Vec::new();
    }
    let history = &input.run.history;
    let stored = shown(&history.final_store().messages);
    let mut violations = Vec::new();
    let at = history.crossings.last().map_or(0, |crossing| crossing.at_event).saturating_sub(1);
    for (connection, view) in open_client_views(history) {
        if view.recovering {
            let text =
                format!("client connection c{connection} still shows a recovery under way after the run settled");
            violations.push(Violation::at(INVARIANT.name, at, text));
        }
        let showing = shown(&view.messages);
        if let Some(difference) = first_difference(&showing, &stored) {
            violations.push(Violation::at(
                INVARIANT.name,
                at,
                format!("client connection c{connection} shows a different transcript than the store: {difference}"),
            ));
        }
    }
    violations
}

/// Where two shown transcripts first differ, in words.
pub fn first_difference(showing: &[ShownMessage], stored: &[ShownMessage]) -> Option<String> {
    for (at, (shown, kept)) in showing.iter().zip(stored).enumerate() {
        if shown.id != kept.id {
            return Some(format!("message {} is {} on screen but {} in the store", at + 1, shown.id, kept.id));
        }
        if shown.parts != kept.parts {
            return Some(format!("message {} shows {:?}; the store holds {:?}", shown.id, shown.parts, kept.parts));
        }
    }
    match showing.len().cmp(&stored.len()) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Less => {
            Some(format!("the store holds {} messages, the client shows {}", stored.len(), showing.len()))
        }
        std::cmp::Ordering::Greater => {
            Some(format!("the client shows {} messages, the store holds {}", showing.len(), stored.len()))
        }
    }
}

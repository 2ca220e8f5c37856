//! A messenger posts the answer the engine stored: each delivery's posts,
//! joined, are the stored reply's text when they go out, or one of the fixed
//! apologies (empty, failed, interrupted). Never text of an attempt the
//! engine threw away. (A continuation may extend the reply later, after
//! client tools answer: the post is the delivery's turn's answer.)

use std::collections::BTreeMap;

use turnsim_engine::messenger::{EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};

use super::Invariant;
use crate::check::views::{occurrence, stored_reply};
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "messenger-view",
    rule: "a delivery's posts are its stored answer, or an apology: never a discarded attempt's text",
    check,
};

const APOLOGIES: [&str; 3] = [EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut sends: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    // Per delivery: the last post's crossing, and the first burst's posts joined.
    let mut posts: BTreeMap<&str, (usize, String)> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::Deliver { delivery, text } => {
                sends.entry(delivery.as_str()).or_insert((index, text.as_str()));
            }
            Boundary::Post { delivery, text } => {
                // The first burst (consecutive posts in one instant) is the
                // reply; a later burst is the messenger-once check's.
                let joined = posts.entry(delivery.as_str()).or_insert((index, String::new()));
                let first_burst = joined.1.is_empty()
                    || (joined.0 + 1 == index && history.crossings[joined.0].at_us == crossing.at_us);
                if first_burst {
                    joined.0 = index;
                    joined.1.push_str(text);
                }
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (delivery, (last_post, posted)) in posts {
        let at_event = history.crossings[last_post].at_event;
        // Several posts of one delivery are the messenger-once check's; an
        // apology posted twice would join into neither, so judge the first.
        if APOLOGIES.iter().any(|apology| posted.starts_with(apology)) {
            continue;
        }
        let Some(&(sent_at, text)) = sends.get(delivery) else {
            let message = format!("delivery {delivery} was posted but never delivered");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
            continue;
        };
        let store = history.store_at(last_post);
        let stored = stored_reply(&store.messages, text, occurrence(history, sent_at, text)).unwrap_or_default();
        if posted != stored {
            let message = format!("delivery {delivery} posted {posted:?}; the stored answer is {stored:?}");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
        }
    }
    violations
}

//! A messenger posts the answer the engine stored: each delivery's posts,
//! joined, are the stored reply's text when they go out, or one of the fixed
//! apologies (empty, failed, interrupted). Never text of an attempt the
//! engine threw away. When the chat surface refuses a post, the chat may
//! show the start of the answer and then an apology, never only the start:
//! a refused post of the answer is followed by another post. (A continuation may extend the reply later, after
//! client tools answer: the post is the delivery's turn's answer.)

use std::collections::BTreeMap;

use turnsim_engine::messenger::{EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};

use super::Invariant;
use crate::check::facts::post_bursts;
use crate::check::views::{occurrence, stored_reply};
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "messenger-view",
    rule: "a delivery's posts are its stored answer, or an apology: never a discarded attempt's text",
    check,
};

const APOLOGIES: [&str; 3] = [EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];

/// Posts after which nothing better can be said when the surface refuses them.
const LAST_WORDS: [&str; 2] = [ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut sends: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        if let Boundary::Deliver { delivery, text } = &crossing.what {
            sends.entry(delivery.as_str()).or_insert((index, text.as_str()));
        }
    }
    let mut violations = Vec::new();
    for (delivery, posts) in &input.facts.posts {
        // The first burst is the reply; a later one is the messenger-once check's.
        let Some(&reply) = post_bursts(posts).first() else { continue };
        let Some(last) = reply.last() else { continue };
        let at_event = history.crossings[last.at].at_event;
        if !last.shown && !LAST_WORDS.contains(&last.text.as_str()) {
            let message = format!(
                "delivery {delivery}: the surface refused the post {:?} and nothing followed it: the chat ends on \
                 part of the reply",
                last.text
            );
            violations.push(Violation::at(INVARIANT.name, at_event, message));
            continue;
        }
        let posted: String = reply.iter().filter(|post| post.shown).map(|post| post.text.as_str()).collect();
        // An apology posted twice joins into neither; judge the first.
        if posted.is_empty() || APOLOGIES.iter().any(|apology| posted.starts_with(apology)) {
            continue;
        }
        let Some(&(sent_at, text)) = sends.get(delivery.as_str()) else {
            let message = format!("delivery {delivery} was posted but never delivered");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
            continue;
        };
        let store = history.store_at(last.at);
        let stored = stored_reply(&store.messages, text, occurrence(history, sent_at, text)).unwrap_or_default();
        let refused = reply.iter().any(|post| !post.shown);
        if posted != stored && !(refused && cut_short(&posted, &stored)) {
            let message = format!("delivery {delivery} posted {posted:?}; the stored answer is {stored:?}");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
        }
    }
    violations
}

/// A reply a refused post cut short: the start of the stored answer, then
/// an apology (or nothing more, when the apology was refused too).
fn cut_short(posted: &str, stored: &str) -> bool {
    let shown_answer = LAST_WORDS.iter().find_map(|apology| posted.strip_suffix(apology)).unwrap_or(posted);
    stored.starts_with(shown_answer)
}

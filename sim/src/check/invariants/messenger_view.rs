//! A messenger posts the answer the engine stored, in posts the chat
//! surface takes (none longer than its limit): each delivery's posts,
//! joined, are the stored reply's text when they start to go out, or one
//! of the fixed apologies (empty, failed, interrupted). Never text of an attempt the
//! engine threw away. When the chat surface refuses a post, the chat may
//! show the start of the answer and then an apology, never only the start:
//! a refused post of the answer is followed by another post. So may a
//! reply a crash cut in the middle of a post, when the restarted process
//! apologises for the rest. (A continuation may extend the reply later,
//! after client tools answer: the post is the delivery's turn's answer.)

use turnsim_engine::messenger::{ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};

use super::Invariant;
use crate::check::replies::{replies, stored_answer, APOLOGIES};
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "messenger-view",
    rule: "a delivery's posts are its stored answer, or an apology alone: never a discarded attempt's text, and none longer than the surface's limit",
    check,
};

/// Posts after which nothing better can be said when the surface refuses them.
const LAST_WORDS: [&str; 2] = [ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut violations = over_the_limit(input);
    for delivery in input.facts.posts.keys() {
        // The first reply is the answer; a later one is the messenger-once check's.
        let Some(reply) = replies(input, delivery).into_iter().next() else { continue };
        let Some(last) = reply.posts.last() else { continue };
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
        let posted = reply.shown();
        if posted.is_empty() {
            continue;
        }
        // An apology is the whole reply (posted again after a crash, it
        // shows twice); never one beside text of an answer.
        if let Some(apology) = APOLOGIES.iter().find(|apology| posted.starts_with(*apology)) {
            if !posted.split(apology).all(str::is_empty) {
                let message = format!("delivery {delivery} posted the apology {apology:?} and more: {posted:?}");
                violations.push(Violation::at(INVARIANT.name, at_event, message));
            }
            continue;
        }
        let Some(stored) = stored_answer(input, delivery, reply.decided_at) else {
            let message = format!("delivery {delivery} was posted but never delivered");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
            continue;
        };
        let refused = reply.posts.iter().any(|post| !post.shown);
        if posted != stored && !((refused || reply.cut) && cut_short(&posted, &stored)) {
            let message = format!("delivery {delivery} posted {posted:?}; the stored answer is {stored:?}");
            violations.push(Violation::at(INVARIANT.name, at_event, message));
        }
    }
    violations
}

/// Posts of an answer longer than the chat surface takes
/// (`messenger.post_limit_chars`): a surface cuts or refuses them, and the
/// user reads part of a post. The fixed replies are whole sentences no
/// real surface's limit cuts (scenarios set tiny limits to make answers
/// split), and are posted whole.
fn over_the_limit(input: &CheckInput) -> Vec<Violation> {
    let limit = input.scenario.scenario.engine_config().messenger_post_limit_chars.get();
    let posts = input.facts.posts.iter().flat_map(|(delivery, posts)| posts.iter().map(move |post| (delivery, post)));
    let answers = posts.filter(|(_, post)| !APOLOGIES.contains(&post.text.as_str()));
    let over = answers.filter(|(_, post)| post.text.chars().count() > limit);
    over.map(|(delivery, post)| {
        let length = post.text.chars().count();
        let message =
            format!("delivery {delivery}'s post {} is {length} characters, over the surface's {limit}", post.post);
        input.violation_at(INVARIANT.name, post.at, message)
    })
    .collect()
}

/// A reply a refused post cut short: the start of the stored answer, then
/// an apology (or nothing more, when the apology was refused too).
fn cut_short(posted: &str, stored: &str) -> bool {
    let shown_answer = LAST_WORDS.iter().find_map(|apology| posted.strip_suffix(apology)).unwrap_or(posted);
    stored.starts_with(shown_answer)
}

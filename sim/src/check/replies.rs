//! A delivery's replies as its chat shows them. A reply is a burst of posts
//! (`post_bursts`). A crash may cut one short; the restarted process may
//! carry it on: posting again the post that was in flight (the surface
//! showed it, the engine never heard: at least once is all a surface
//! without idempotent posts allows) and the rest, posting the rest of an
//! unfinished reply, or apologising for the rest. A burst after a finished
//! reply (its whole stored answer, or an apology) is a reply of its own.

use turnsim_engine::durable::{DeliveryStage, Write};
use turnsim_engine::messenger::{EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};

use super::facts::{post_bursts, PostFact};
use super::views::{occurrence, stored_reply};
use super::CheckInput;
use crate::history::Boundary;

/// The fixed replies a messenger may post instead of an answer.
pub const APOLOGIES: [&str; 3] = [EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];

/// One reply of a delivery.
pub struct Reply<'a> {
    /// Its posts in order, a post repeated after a crash counted once.
    pub posts: Vec<&'a PostFact>,
    /// Where its first post went out (history index): the reply is the
    /// answer as the store held it then (a continuation may extend the
    /// stored answer while a slow post waits).
    pub decided_at: usize,
    /// A crash cut it and the restarted process apologised for the rest.
    pub cut: bool,
}

impl Reply<'_> {
    /// What the chat shows of it, joined.
    pub fn shown(&self) -> String {
        self.posts.iter().filter(|post| post.shown).map(|post| post.text.as_str()).collect()
    }
}

/// The replies of delivery `delivery`, in order.
pub fn replies<'a>(input: &'a CheckInput<'a>, delivery: &str) -> Vec<Reply<'a>> {
    let Some(posts) = input.facts.posts.get(delivery) else { return Vec::new() };
    let mut replies: Vec<Reply> = Vec::new();
    for burst in post_bursts(posts) {
        if let Some(reply) = replies.last_mut() {
            if carry_on(input, delivery, reply, burst) {
                continue;
            }
        }
        let decided_at = burst.first().map_or(0, |post| post.at);
        replies.push(Reply { posts: burst.iter().collect(), decided_at, cut: false });
    }
    replies
}

/// The stored answer to delivery `delivery` as the store holds it just
/// after history index `at`; `None` when the delivery never came in.
pub fn stored_answer(input: &CheckInput, delivery: &str, at: usize) -> Option<String> {
    let history = &input.run.history;
    let (sent_at, text) = history.iter().enumerate().find_map(|(index, crossing)| match &crossing.what {
        Boundary::Deliver { delivery: id, text } if id == delivery => Some((index, text.as_str())),
        _ => None,
    })?;
    let store = history.store_at(at);
    Some(stored_reply(&store.messages, text, occurrence(&input.new_messages, sent_at, text)).unwrap_or_default())
}

/// Joins `burst` to `reply` when it carries the reply on after a crash cut
/// it; returns whether it did. The new process may post again what it
/// could not know was shown: the post in flight at the crash, or, when the
/// store refused the record of the posts already answered (and the process
/// died before recording them), an unfinished reply from any post on. Or
/// it posts the rest of an unfinished reply, or apologises for it.
fn carry_on<'a>(input: &CheckInput, delivery: &str, reply: &mut Reply<'a>, burst: &'a [PostFact]) -> bool {
    let (Some(&last), Some(first)) = (reply.posts.last(), burst.first()) else { return false };
    if !input.facts.kills.iter().any(|&kill| last.at < kill && kill < first.at) {
        return false;
    }
    let in_flight = reply.posts.len() - 1;
    if last.answered.is_none() && repeats(reply, in_flight, burst) {
        pick_up(reply, in_flight, burst);
        return true;
    }
    if finished(input, delivery, reply) {
        // Said in full: posted again, it is a reply of its own.
        return false;
    }
    let lost = record_refused_then_killed(input, delivery, process_of(input, reply.decided_at)..first.at);
    if let Some(from) = (0..reply.posts.len()).find(|&from| lost && repeats(reply, from, burst)) {
        pick_up(reply, from, burst);
        return true;
    }
    reply.cut |= first.text == INTERRUPTED_MESSENGER_RESPONSE;
    reply.posts.extend(burst);
    true
}

/// Whether `burst` posts `reply` again from post `from` on.
fn repeats(reply: &Reply, from: usize, burst: &[PostFact]) -> bool {
    reply.posts[from..].iter().zip(burst).all(|(before, again)| before.text == again.text)
}

/// Joins `burst` to `reply` from post `from` on: a post shown both times
/// counts once; one refused the first time counts as the second; one
/// refused the second time stays (the engine heard of that refusal).
fn pick_up<'a>(reply: &mut Reply<'a>, from: usize, burst: &'a [PostFact]) {
    let tail = reply.posts.split_off(from);
    for (before, again) in tail.iter().zip(burst) {
        if before.shown {
            reply.posts.push(before);
        }
        if !before.shown || !again.shown {
            reply.posts.push(again);
        }
    }
    let overlap = tail.len().min(burst.len());
    reply.posts.extend(&tail[overlap..]);
    reply.posts.extend(&burst[overlap..]);
}

/// Where the process that made history index `at` booted: just after the
/// kill before it, or the start.
pub fn process_of(input: &CheckInput, at: usize) -> usize {
    input.facts.kills.iter().rev().find(|&&kill| kill < at).map_or(0, |&kill| kill)
}

/// Whether, in `range` of the history, the store refused a record of the
/// delivery (its acceptance, so that it was answered with nothing stored;
/// or its `posting` record with what was left, or `completed`) and the
/// process then died without storing one: the next process cannot know
/// what was posted.
pub fn record_refused_then_killed(input: &CheckInput, delivery: &str, range: std::ops::Range<usize>) -> bool {
    let records_posts = |writes: &[Write]| {
        writes.iter().any(|write| {
            matches!(write, Write::PutDelivery(checkpoint)
                if checkpoint.id == delivery && checkpoint.stage != DeliveryStage::Streaming)
        })
    };
    let mut refused = false;
    for crossing in &input.run.history.crossings[range] {
        match &crossing.what {
            Boundary::CommitRefused { writes } if records_posts(writes) => refused = true,
            Boundary::Commit { writes } if records_posts(writes) => refused = false,
            Boundary::Killed if refused => return true,
            _ => {}
        }
    }
    false
}

/// Whether a reply said all it had to: an apology, or the whole stored answer.
fn finished(input: &CheckInput, delivery: &str, reply: &Reply) -> bool {
    let Some(last) = reply.posts.last() else { return false };
    if APOLOGIES.contains(&last.text.as_str()) {
        return true;
    }
    stored_answer(input, delivery, reply.decided_at).is_some_and(|answer| answer == reply.shown())
}

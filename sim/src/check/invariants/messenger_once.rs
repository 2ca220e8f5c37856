//! Invariant 8: the messenger posts exactly once per delivery, and never a
//! truncated partial as the final answer: a delivery whose reply was cut
//! off (its last model call before the post stalled, was cut, failed, or
//! died with the process) gets the apology and nothing else, and one whose
//! answer was complete and stored never gets it. And a delivery is recorded `completed`
//! only once the posts its `posting` record owed went out: an answer the
//! engine believes posted and never sent shows here.

use std::collections::BTreeMap;

use turnsim_engine::durable::{DeliveryStage, Write};
use turnsim_engine::messenger::{ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};
use turnsim_engine::{FinishReason, Message, Role};

use super::Invariant;
use crate::check::facts::{CallEnd, CallFact, PostFact};
use crate::check::replies::{process_of, record_refused_then_killed, replies, APOLOGIES};
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;
use crate::history::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "messenger-once",
    rule: "each delivery posts exactly once; an interrupted or failed reply posts the apology alone, not the partial, and an answered one never the apology; a delivery is recorded completed only after the posts its posting record owed were made",
    check,
};

const NAME: &str = "messenger-once";

/// One delivery as the history shows it.
struct Delivery<'a> {
    id: &'a str,
    /// The user message the engine stored for it (accepted), if it did.
    message_id: Option<String>,
}

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    for delivery in deliveries(input) {
        let posts = input.facts.posts.get(delivery.id).map_or(&[][..], Vec::as_slice);
        let replies = count_replies(input, delivery.id);
        if replies > 1 {
            let at = posts.last().map(|post| input.event_of(post.at));
            let message = format!("delivery {} posted {replies} times", delivery.id);
            violations.push(Violation { check: NAME.into(), message, at_event: at });
        }
        if replies == 0 && delivery.message_id.is_some() && input.run.end == RunEnd::Quiescent {
            violations.push(Violation::new(NAME, format!("delivery {} was accepted but never posted", delivery.id)));
        }
        if let Some(violation) = check_interrupted(input, &delivery, posts) {
            violations.push(violation);
        }
    }
    violations.extend(completed_unposted(input));
    violations
}

/// A delivery recorded `completed` while its last `posting` record (taken
/// or refused) still owed posts that were never made since: the store says
/// the chat was answered, and the surface was never sent the answer.
fn completed_unposted(input: &CheckInput) -> Option<Violation> {
    let mut owed: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        match &crossing.what {
            Boundary::Commit { writes } | Boundary::CommitRefused { writes } => {
                let taken = matches!(crossing.what, Boundary::Commit { .. });
                for write in writes {
                    let Write::PutDelivery(record) = write else { continue };
                    match record.stage {
                        DeliveryStage::Posting => {
                            owed.insert(&record.id, (record.posts.len(), 0));
                        }
                        DeliveryStage::Completed if taken => {
                            let Some((posts, made)) = owed.remove(record.id.as_str()) else { continue };
                            if made < posts {
                                let message = format!(
                                    "delivery {} is recorded completed owing {posts} post(s) since its posting record, and {made} were made",
                                    record.id
                                );
                                return Some(Violation {
                                    check: NAME.into(),
                                    message,
                                    at_event: Some(input.event_of(index)),
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
            Boundary::Post { delivery, .. } | Boundary::PostRefused { delivery, .. } => {
                if let Some((_, made)) = owed.get_mut(delivery.as_str()) {
                    *made += 1;
                }
            }
            _ => {}
        }
    }
    None
}

/// Every delivery the engine took, in order, with the message it stored
/// for it: a user message with the delivery's text in a commit after it,
/// before the process died.
fn deliveries<'a>(input: &CheckInput<'a>) -> Vec<Delivery<'a>> {
    let crossings = &input.run.history.crossings;
    let mut found: Vec<Delivery> = Vec::new();
    for (index, crossing) in crossings.iter().enumerate() {
        let Boundary::Deliver { delivery, text } = &crossing.what else { continue };
        if found.iter().any(|known| known.id == delivery) {
            continue;
        }
        let later = crossings[index + 1..].iter().take_while(|crossing| crossing.what != Boundary::Killed);
        let message_id = later.filter_map(|crossing| stored_user_message(&crossing.what, text)).next();
        found.push(Delivery { id: delivery, message_id });
    }
    found
}

/// The id of a user message reading `text` that a commit stores.
fn stored_user_message(what: &Boundary, text: &str) -> Option<String> {
    let Boundary::Commit { writes } = what else { return None };
    let stores = |message: &&Message| message.role == Role::User && message.text() == text;
    writes.iter().filter_map(Write::message).find(stores).map(|message| message.id.clone())
}

/// A delivery's replies (`check::replies`: a reply carried on after a
/// crash cut it mid-post is one). A reply after another is no second reply
/// when the store refused a checkpoint recording the first's posts (its
/// `posting` record with what was left, or `completed`) and the process
/// died before it could record them: the next process cannot know it
/// posted, and only a surface that drops repeats could tell (the engine's
/// documented at-least-once edge).
fn count_replies(input: &CheckInput, delivery_id: &str) -> usize {
    let replies = replies(input, delivery_id);
    let repeats = replies.windows(2).filter(|pair| {
        // From the boot of the process that made the first reply (its
        // `posting` record comes before its posts) to the second.
        let between = process_of(input, pair[0].decided_at)..pair[1].decided_at;
        record_refused_then_killed(input, delivery_id, between)
    });
    replies.len() - repeats.count()
}

/// The delivery's first reply tells its outcome truly. When the last
/// model call answering its message before the reply was cut off or failed
/// (a provider error nothing retried), every post of it is an apology,
/// never the partial, before or after one. When that call finished its
/// answer and the store took it, with nothing failing since (no refused
/// write, no dead process, no refused post), the reply is not an apology.
fn check_interrupted(input: &CheckInput, delivery: &Delivery, posts: &[PostFact]) -> Option<Violation> {
    let PostFact { at: posted_at, text, .. } = posts.first()?;
    let message_id = delivery.message_id.as_deref()?;
    let mut answering = input.facts.calls.iter().filter(|call| call.at < *posted_at).filter(|call| {
        let request = call.request(input.run.history);
        let last_user = request.messages.iter().rev().find(|message| message.role == Role::User);
        last_user.is_some_and(|message| message.id == message_id)
    });
    let last = answering.next_back()?;
    let cut_off = match last.end {
        CallEnd::Parked | CallEnd::Cut | CallEnd::Abandoned | CallEnd::Open | CallEnd::Http { .. } => true,
        CallEnd::Killed => last.ended_at.is_some_and(|killed| killed < *posted_at),
        _ => false,
    };
    let allowed = [INTERRUPTED_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE];
    let first_reply = replies(input, delivery.id).into_iter().next()?;
    let partial = first_reply.posts.iter().find(|post| !allowed.contains(&post.text.as_str()));
    if let (true, Some(partial)) = (cut_off, partial) {
        let how = if matches!(last.end, CallEnd::Http { .. }) { "failed" } else { "was cut off" };
        let message = format!(
            "delivery {} {how} (model call #{} never finished) but posted {:?} as its answer",
            delivery.id, last.call, partial.text
        );
        return Some(input.violation_at(NAME, partial.at, message));
    }
    if APOLOGIES.contains(&text.as_str()) && answered_undisturbed(input, last, *posted_at) {
        let message = format!(
            "delivery {} was answered (model call #{} finished and its answer was stored) but posted the apology {text:?}",
            delivery.id, last.call
        );
        return Some(input.violation_at(NAME, *posted_at, message));
    }
    None
}

/// Whether `call` finished its answer, the store took it before history
/// index `until`, and nothing failed from its end to then: no refused
/// write or post, no dead process.
fn answered_undisturbed(input: &CheckInput, call: &CallFact, until: usize) -> bool {
    let finished =
        matches!(call.end, CallEnd::Finished { reason: FinishReason::Stop, .. }) && call.finished_with_output();
    let Some(ended) = call.ended_at.filter(|&ended| finished && ended < until) else { return false };
    let history = &input.run.history;
    let target = call.target.as_deref();
    let texts = call.streamed_texts(history);
    let stored = history.store_at(until);
    let reply = target.and_then(|target| stored.message(target)).map(Message::text).unwrap_or_default();
    let kept = texts.iter().filter(|(reasoning, _)| !reasoning).all(|(_, text)| reply.contains(text.as_str()));
    let failed = history.crossings[ended..until].iter().any(|crossing| {
        matches!(crossing.what, Boundary::CommitRefused { .. } | Boundary::PostRefused { .. } | Boundary::Killed)
    });
    kept && !failed && !reply.is_empty()
}

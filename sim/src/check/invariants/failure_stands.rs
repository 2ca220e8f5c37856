//! A failure told is not taken back by an answer nobody asked for. A
//! client sent a turn's error frame (the turn failed, "send again") must
//! not then be streamed an answer to the same user message by a request it
//! never saw before, unless something asked for one after the error: a
//! user message, a `chat()` call, a delivery, a tool result or an approval
//! (one that arrived while the failed request ran is still owed its answer
//! too: a held continuation may run after the failure).
//! A request answers the last user message its first model request showed
//! the model; one that asked the model nothing answered the one the latest
//! stored reply answers, unless a message asked for was never stored (the
//! store refused it): then the failure is about that one, and not judged.
//! Otherwise the user resends and gets two answers, or reads "it failed"
//! above the answer. Judged from the frames and the store alone.
//!
//! The failure stands for everyone, across connections and processes: once
//! any client was told it, no model request answers that user message
//! again until something asks (a restart that lost the failure's record
//! and answers anyway, with nobody connected to see it, shows here). Only
//! a failure whose record the store refused, the process dying before it
//! could record it, is not the next process's to know.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::Frame;
use turnsim_engine::transcript::{Message, Role};

use super::Invariant;
use crate::check::store_cursor::StoreCursor;
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall};

pub const INVARIANT: Invariant = Invariant {
    name: "failure-stands",
    rule: "a client told a turn failed is not then streamed an answer to the same user message, nor is the model asked to answer it again, unless something asked for one after the error",
    check,
};

/// An error frame a connection was sent, still standing (nothing asked
/// since).
struct Told {
    request_id: String,
    /// The latest stored user message when it was told.
    user: Option<String>,
    at_event: usize,
}

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let mut store = StoreCursor::new(history);
    let mut told: BTreeMap<u64, Told> = BTreeMap::new();
    let mut seen: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    // The user message each request answered: the last one its first
    // model request showed the model.
    let mut answers: BTreeMap<String, String> = BTreeMap::new();
    // Where each request was first seen, and where the last ask arrived.
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_ask = None;
    // The user message each failed request was about, as first told.
    let mut about: BTreeMap<String, Option<String>> = BTreeMap::new();
    // Messages asked for (user message, chat, delivery) since the store
    // last took a user message: an error then may be about one of them.
    let mut unstored_asks = 0usize;
    // Failures told to anyone, by the user message they are about: no
    // model request answers that message again until something asks.
    let mut standing: BTreeMap<String, (String, usize)> = BTreeMap::new();
    // Failures whose record the store refused and has not taken since.
    let mut unrecorded: BTreeSet<&str> = BTreeSet::new();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        if let Some(request_id) = request_of(&crossing.what).filter(|id| !first_seen.contains_key(*id)) {
            first_seen.insert(request_id.to_string(), index);
        }
        match &crossing.what {
            Boundary::ModelRequest { request, .. } => {
                let user = request.messages.iter().rev().find(|message| message.role == Role::User);
                if let Some(user) = user {
                    answers.entry(request.request_id.clone()).or_insert_with(|| user.id.clone());
                    if let Some((failed, told_at)) = standing.remove(&user.id) {
                        let text = format!(
                            "request {failed} was told failed (event {told_at}), then the model was asked to answer the \
                             same user message {} again ({}) with nothing asked since",
                            user.id, request.request_id
                        );
                        violations.push(Violation::at(INVARIANT.name, crossing.at_event, text));
                    }
                }
            }
            Boundary::CommitRefused { writes } => unrecorded.extend(terminal_records(writes)),
            Boundary::Killed => {
                // A failure whose record the store refused, and the process
                // died before recording it: the next process cannot know.
                standing.retain(|_, (request_id, _)| !unrecorded.contains(request_id.as_str()));
            }
            Boundary::Commit { writes } => {
                terminal_records(writes).for_each(|request_id| {
                    unrecorded.remove(request_id);
                });
                let before = store.at(index);
                if writes.iter().any(|write| stores_a_user_message(write, before)) {
                    unstored_asks = 0;
                }
            }
            Boundary::UserMessage { .. } | Boundary::Chat { .. } | Boundary::Deliver { .. } => {
                told.clear();
                standing.clear();
                last_ask = Some(index);
                unstored_asks += 1;
            }
            Boundary::ToolResult { .. } | Boundary::Approval { .. } => {
                told.clear();
                standing.clear();
                last_ask = Some(index);
            }
            Boundary::Connect { connection } | Boundary::Disconnect { connection } => {
                told.remove(connection);
                seen.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Error { request_id, .. } } => {
                if last_ask.is_some_and(|ask| ask > first_seen[request_id]) {
                    continue;
                }
                // The user message the failed request answered: the one it
                // asked the model about, or, if it asked nothing, the one
                // the latest stored reply answers.
                let asked = answers.get(request_id).cloned();
                if asked.is_none() && unstored_asks > 0 {
                    // About a message the store never took (a refused user
                    // message): no stored answer is its.
                    continue;
                }
                // Read when the failure is first told: a client told it
                // again later (on connecting) is told of the same message,
                // whatever replies the store took since.
                let user = about.entry(request_id.clone()).or_insert_with(|| {
                    asked.or_else(|| {
                        let messages = &store.at(index).messages;
                        let reply = messages.iter().rev().find(|message| message.role == Role::Assistant)?;
                        answered_user(messages, &reply.id).map(str::to_string)
                    })
                });
                let user = user.clone();
                let at_event = crossing.at_event;
                // For everyone, a failure stands on the message its request
                // asked the model about (one that asked nothing is judged
                // per connection only: which message it failed is a guess).
                if let Some(asked) = answers.get(request_id) {
                    standing.entry(asked.clone()).or_insert_with(|| (request_id.clone(), at_event));
                }
                told.insert(*connection, Told { request_id: request_id.clone(), user, at_event });
            }
            Boundary::Frame { connection, frame: Frame::Chunk { request_id, message_id, .. } } => {
                let requests = seen.entry(*connection).or_default();
                // A request's id is copied once, at its first chunk.
                let first = !requests.contains(request_id) && requests.insert(request_id.clone());
                let Some(standing) = told.get(connection) else {
                    continue;
                };
                if !first || *request_id == standing.request_id {
                    continue;
                }
                let answered = answers.get(request_id).map(String::as_str);
                let answered = answered.or_else(|| answered_user(&store.at(index).messages, message_id));
                if answered.is_some() && answered == standing.user.as_deref() {
                    let text = format!(
                        "client connection c{connection} was told request {} failed (event {}), then request {request_id} streamed an answer to the same user message with nothing asked since",
                        standing.request_id, standing.at_event
                    );
                    violations.push(Violation::at(INVARIANT.name, crossing.at_event, text));
                    told.remove(connection);
                }
            }
            _ => {}
        }
    }
    violations
}

/// The request a crossing names, if any.
fn request_of(what: &Boundary) -> Option<&str> {
    match what {
        Boundary::Frame { frame, .. } => frame.stream_request(),
        Boundary::Callback { call: CallbackCall::Start { request_id }, .. } => Some(request_id),
        _ => None,
    }
}

/// The requests whose failure `writes` record (a terminal status).
fn terminal_records(writes: &[Write]) -> impl Iterator<Item = &str> {
    writes.iter().filter_map(|write| match write {
        Write::Terminal(Some(status)) => Some(status.request_id.as_str()),
        _ => None,
    })
}

/// Whether `write` stores a user message the store did not hold.
fn stores_a_user_message(write: &Write, store: &DurableState) -> bool {
    match write {
        Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => {
            message.role == Role::User && store.message(&message.id).is_none()
        }
        _ => false,
    }
}

fn latest_user(messages: &[Message]) -> Option<&Message> {
    messages.iter().rev().find(|message| message.role == Role::User)
}

/// The user message `message_id` answers: the last user message before
/// it, or (a reply the store does not hold yet) the latest one.
fn answered_user<'a>(messages: &'a [Message], message_id: &str) -> Option<&'a str> {
    let end = messages.iter().position(|message| message.id == message_id).unwrap_or(messages.len());
    latest_user(&messages[..end]).map(|message| message.id.as_str())
}

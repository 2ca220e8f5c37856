//! A `chat()` caller ends with the stored answer: the text it collected from
//! `on_event`, after every take-back the engine signalled, is the stored
//! reply's text when `on_done` arrives, and it is what the engine kept of
//! the reply when it asks the model again (by the first text it relays of
//! that call). A discarded attempt's text that was never taken back shows
//! here.
//!
//! And between its start and its end, a caller is relayed what the model
//! streamed for its request (`crate::check::relay`): each `on_event`'s
//! content is the model's next, and by a take-back or a terminal callback
//! (as the engine made it) it has been sent all the model streamed of the
//! request since the caller's start or its last take-back. An event lost,
//! doubled or swapped shows here, even where the stored answer ends up the
//! same or the call ends interrupted or failed.
//!
//! And wherever sim time passes, an open caller shows no less of its reply
//! than the store holds (a stored delta it was never sent shows here).
//!
//! And a caller is not told done of a request the engine told any other
//! consumer failed: an `error` frame for it sent to a client, or a failure
//! stored for it (the status a client connecting later is told). A failed
//! turn reported to its caller as a success shows here, whatever text the
//! caller was sent.

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::Frame;
use turnsim_engine::{Chunk, Message, Role};

use std::collections::{BTreeMap, BTreeSet};

use super::Invariant;
use crate::check::relay::Follower;
use crate::check::store_cursor::StoreCursor;
use crate::check::views::{caller_outcomes, occurrence, stored_reply, CallerOutcome};
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall, Crossing, History};

pub const INVARIANT: Invariant = Invariant {
    name: "caller-view",
    rule: "a chat() caller's text at on_done, after any take-back, is the stored answer, and when the model is asked again it is what the engine kept; its on_event calls relay what the model streamed for its request, in order, each piece once, all of it by a take-back or its terminal callback; wherever sim time passes, an open caller shows no less of its reply than the store holds; no caller gets on_done for a request told failed to another consumer",
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
    let mut violations: Vec<Violation> = judged.into_iter().filter_map(|(_, violation)| violation).collect();
    violations.extend(misrelayed(input));
    violations.extend(discarded_text_kept(input));
    violations.extend(done_though_failed(input));
    violations.extend(short_while_waiting(input));
    violations
}

/// One open `chat()` caller, as the engine's calls left it.
struct Waiting<'a> {
    request: &'a str,
    /// Its text: deltas since `on_start`, as the last take-back left them.
    text: String,
    /// Taken back since the last look (a delta only adds to the text).
    reset: bool,
}

/// Follows one callback call into the open callers: a start opens one,
/// a text delta adds to its text, a take-back replaces it, an end closes it.
fn follow<'a>(callers: &mut BTreeMap<u32, Waiting<'a>>, chat: u32, call: &'a CallbackCall) {
    match call {
        CallbackCall::Start { request_id } => {
            callers.insert(chat, Waiting { request: request_id, text: String::new(), reset: false });
        }
        CallbackCall::Event { chunk: Chunk::TextDelta { delta, .. } } => {
            if let Some(caller) = callers.get_mut(&chat) {
                caller.text.push_str(delta);
            }
        }
        CallbackCall::Reset { text } => {
            if let Some(caller) = callers.get_mut(&chat) {
                caller.text = text.clone();
                caller.reset = true;
            }
        }
        CallbackCall::Done | CallbackCall::Error { .. } | CallbackCall::Interrupted | CallbackCall::Dropped => {
            callers.remove(&chat);
        }
        CallbackCall::Event { .. } => {}
    }
}

/// Wherever sim time passes with the engine alive, an open caller shows
/// no less of its reply than the store holds: the stored reply's text,
/// past what it held when the request first asked the model, begins the
/// caller's text. A reply whose writes the store refused is not judged
/// (what the caller was told may be what the store failed to keep), nor
/// a caller on a slow link (what it lags by is the link's).
fn short_while_waiting(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    // No caller to judge: the store need not be followed.
    let slow = judged_callers(history)?;
    let mut callers: BTreeMap<u32, Waiting> = BTreeMap::new();
    // Per request: its reply message, and the text it held when first asked.
    let mut replies: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    // Messages written since the last look: only they, or a take-back,
    // can leave a caller short of the store.
    let mut written: BTreeSet<String> = BTreeSet::new();
    let mut store = history.initial.clone();
    let (mut last_us, mut alive) = (0, false);
    for (index, crossing) in history.iter().enumerate() {
        if crossing.at_us > last_us && alive {
            for (chat, caller) in &mut callers {
                let reset = std::mem::take(&mut caller.reset);
                let Some((reply, before)) = replies.get(caller.request) else { continue };
                if refused.contains(*reply) || !(reset || written.contains(*reply)) {
                    continue;
                }
                let Some(stored) = store.message(reply).map(Message::text) else { continue };
                let Some(since) = stored.strip_prefix(before.as_str()) else { continue };
                if !caller.text.starts_with(since) {
                    let message = format!(
                        "chat{chat} shows {:?} while time passes; the store holds {since:?} of its reply {reply}",
                        caller.text
                    );
                    return Some(Violation::at(INVARIANT.name, input.event_of(index.saturating_sub(1)), message));
                }
            }
            written.clear();
        }
        last_us = crossing.at_us;
        if let Boundary::Callback { chat, call, sent_at: None } = &crossing.what {
            if !slow.contains(chat) {
                follow(&mut callers, *chat, call);
            }
        }
        match &crossing.what {
            Boundary::Boot { .. } => alive = true,
            Boundary::Killed => {
                // The process took its callers with it: a caller left open
                // past a death is no longer streamed anything.
                alive = false;
                callers.clear();
            }
            Boundary::ModelRequest { request, .. } => {
                let reply = request.messages.last().filter(|message| message.role == Role::Assistant);
                if let Some(reply) = reply {
                    replies.entry(request.request_id.as_str()).or_insert_with(|| (reply.id.as_str(), reply.text()));
                }
            }
            Boundary::Commit { writes } => {
                for write in writes {
                    store.apply(write);
                    if let Some(message) = write.message() {
                        written.insert(message.id.clone());
                    }
                }
            }
            Boundary::CommitRefused { writes } => {
                let messages = writes.iter().filter_map(|write| match write {
                    Write::RemoveMessage(id) => Some(id.clone()),
                    _ => write.message().map(|message| message.id.clone()),
                });
                refused.extend(messages);
            }
            _ => {}
        }
    }
    None
}

/// The callers on a slow link, when some caller is not on one; `None`
/// when no caller can be judged. A caller on a slow link is not judged: a
/// call in flight when the process died never reached it, so the history
/// cannot say what it was sent.
fn judged_callers(history: &History) -> Option<BTreeSet<u32>> {
    let slow: BTreeSet<u32> = history
        .iter()
        .filter_map(|crossing| match &crossing.what {
            Boundary::Callback { chat, sent_at: Some(_), .. } => Some(*chat),
            _ => None,
        })
        .collect();
    let judged = |crossing: &Crossing| matches!(&crossing.what, Boundary::Callback { chat, call: CallbackCall::Start { .. }, .. } if !slow.contains(chat));
    history.iter().any(judged).then_some(slow)
}

/// The first caller relayed a retry's text while it still held text the
/// engine discarded. When the engine asks the model again for a request,
/// the reply it shows the model is what it kept; by the first text it
/// relays of that call, the caller's text (since its start, take-backs
/// applied) is the same, so a discarded attempt not taken back shows here,
/// however the call ends (an error or a transport break after the retry
/// leaves no stored answer to hold it to). A caller on a slow link is not
/// judged (what it was sent by then is the link's).
fn discarded_text_kept(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    // No caller to judge: the requests need not be read.
    let slow = judged_callers(history)?;
    let mut callers: BTreeMap<u32, Waiting> = BTreeMap::new();
    // Per request: the reply's text when it first asked the model, and
    // what its latest request showed of the reply since then (until the
    // caller is relayed that call's first text).
    let mut before: BTreeMap<&str, String> = BTreeMap::new();
    let mut shown: BTreeMap<&str, String> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::ModelRequest { request, .. } => {
                // Only a request some open caller waits on is read.
                let id = request.request_id.as_str();
                let Some(reply) = request.messages.last().filter(|message| message.role == Role::Assistant) else {
                    continue;
                };
                if !callers.values().any(|caller| caller.request == id) {
                    continue;
                }
                let text = reply.text();
                let first = before.entry(request.request_id.as_str()).or_insert_with(|| text.clone());
                if let Some(since) = text.strip_prefix(first.as_str()) {
                    shown.insert(request.request_id.as_str(), since.to_string());
                }
            }
            Boundary::Killed => callers.clear(),
            Boundary::Callback { chat, call, sent_at: None } if !slow.contains(chat) => {
                let delta = matches!(call, CallbackCall::Event { chunk: Chunk::TextDelta { .. } });
                if let Some(caller) = callers.get(chat).filter(|_| delta) {
                    if let Some(kept) = shown.remove(caller.request) {
                        if caller.text != kept {
                            let message = format!(
                                "chat{chat} is relayed the model's next text of request {} while it holds {:?}; the engine asked the model again keeping {kept:?} (a discarded attempt not taken back)",
                                caller.request, caller.text
                            );
                            return Some(Violation::at(INVARIANT.name, input.event_of(index), message));
                        }
                    }
                }
                follow(&mut callers, *chat, call);
            }
            _ => {}
        }
    }
    None
}

/// The first `on_done` for a request the engine told another consumer
/// failed, before or after it.
fn done_though_failed(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let mut failed: BTreeMap<&str, &'static str> = BTreeMap::new();
    for crossing in history.iter() {
        match &crossing.what {
            Boundary::Frame { frame: Frame::Error { request_id, .. }, .. } => {
                failed.entry(request_id).or_insert("a client was sent an error frame for it");
            }
            Boundary::Commit { writes } => {
                for write in writes {
                    if let Write::Terminal(Some(status)) = write {
                        failed.entry(&status.request_id).or_insert("the store holds its failure");
                    }
                }
            }
            _ => {}
        }
    }
    let mut requests: BTreeMap<u32, &str> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        let Boundary::Callback { chat, call, .. } = &crossing.what else { continue };
        match call {
            CallbackCall::Start { request_id } => drop(requests.insert(*chat, request_id)),
            CallbackCall::Done => {
                let Some(request) = requests.get(chat) else { continue };
                if let Some(told) = failed.get(request) {
                    let message = format!("chat{chat} gets on_done for request {request}, which failed: {told}");
                    return Some(Violation::at(INVARIANT.name, input.event_of(index), message));
                }
            }
            _ => {}
        }
    }
    None
}

/// The first caller relayed other than what the model streamed for its
/// request. A caller's events are judged against the model as the engine
/// made them (on a slow caller link, they arrive later).
fn misrelayed(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let streams = &input.model_streams;
    let mut callers: BTreeMap<u32, (&str, Follower)> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        let Boundary::Callback { chat, call, sent_at } = &crossing.what else { continue };
        let made_at = sent_at.unwrap_or(index);
        let fail = |text: String| Some(Violation::at(INVARIANT.name, input.event_of(index), text));
        if let CallbackCall::Start { request_id } = call {
            let mut follower = Follower::default();
            follower.sync(made_at);
            callers.insert(*chat, (request_id, follower));
            continue;
        }
        let Some((request, follower)) = callers.get_mut(chat) else { continue };
        let request: &str = request;
        match call {
            CallbackCall::Event { chunk } => {
                if let Some(text) = follower.sent(streams, request, chunk, made_at) {
                    return fail(format!("chat{chat} is sent {text}"));
                }
            }
            CallbackCall::Reset { .. }
            | CallbackCall::Done
            | CallbackCall::Error { .. }
            | CallbackCall::Interrupted => {
                if let Some(atom) = follower.missed(streams, request, made_at) {
                    let what = match call {
                        CallbackCall::Reset { .. } => "on_reset",
                        CallbackCall::Done => "on_done",
                        CallbackCall::Error { .. } => "on_error",
                        _ => "on_interrupted",
                    };
                    return fail(format!(
                        "chat{chat} gets {what} without being sent {atom} of request {request}, which the model streamed"
                    ));
                }
                follower.sync(made_at);
            }
            _ => {}
        }
    }
    None
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

//! What the model is asked is what the store holds. At each model request,
//! against the store as of that moment (the commits before it folded in):
//!
//! - every stored user message up to the reply the request asks for is in
//!   it, in store order, with its stored text. The reply is the request's
//!   last message; when the store does not hold it yet (a new reply), the
//!   store says later where it goes: after the message it answers (the
//!   message before it where it is first stored). A reply never stored
//!   answers up to the last stored message the request shows (at least
//!   the first user message: a request starts where the store does). User
//!   messages queued behind the reply are not the model's to answer yet.
//! - every assistant text or reasoning the request shows is stored in its
//!   message, or a model call of this run streamed it in an attempt that
//!   was kept: the reply being written runs ahead of the store (what was
//!   streamed since the last flush, a turn's end the store refused), but
//!   never into an attempt the engine took back (a truncated finish, a
//!   failed call that was retried, a take-back frame that drops it). The
//!   built-in engine adds nothing of its own to a request (no continuation
//!   prompt): anything else is text nobody streamed or stored.
//!
//! Compared on meaning, not bytes: message ids, roles and texts (an engine
//! converting messages may change part ids, text states and step markers).
//! Linear in the history: the store is a cursor walked forward, and an
//! assistant message's parts are read only where they changed since the
//! request before showed it.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::DurableState;
use turnsim_engine::ports::ModelRequest;
use turnsim_engine::{Frame, Message, Part, Role};

use super::Invariant;
use crate::check::facts::{text_of, CallFact};
use crate::check::seen::SeenMessages;
use crate::check::store_cursor::StoreCursor;
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, History};

pub const INVARIANT: Invariant = Invariant {
    name: "request-matches-store",
    rule: "a model request shows every stored user message up to the reply it asks for, as stored, and no assistant \
           text but what the store holds or a kept model call streamed",
    check,
};

/// A text or reasoning part's content: (whether it is reasoning, the text).
type Text = (bool, String);

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let calls = &input.facts.calls;
    let streamed: Vec<Vec<Text>> = calls.iter().map(|call| call.streamed_texts(history)).collect();
    let taken_back = taken_back(history, calls, &streamed);
    let placed = first_placements(history);
    let mut kept = KeptTexts::default();
    let mut store = StoreCursor::new(history);
    let mut seen = SeenMessages::default();
    let mut violations = Vec::new();
    for (at, call) in calls.iter().enumerate() {
        let request = call.request(history);
        let stored = store.at(call.at);
        let wrongs = missing_user_message(stored, request, &placed).into_iter();
        let wrongs = wrongs.chain(unknown_texts(stored, request, &kept, &mut seen));
        let what = |wrong: String| format!("model call #{} ({}): {wrong}", call.call, request.request_id);
        violations.extend(wrongs.map(|wrong| input.violation_at(INVARIANT.name, call.at, what(wrong))));
        if !taken_back.contains(&at) {
            streamed[at].iter().for_each(|text| kept.add(text));
        }
    }
    violations
}

// ------------------------------------------------------------ user messages

/// The first stored user message the request should show and does not (or
/// shows with other text, or out of store order), as a sentence.
fn missing_user_message(stored: &DurableState, request: &ModelRequest, placed: &Placements) -> Option<String> {
    let shown: BTreeMap<&str, (usize, &Message)> =
        request.messages.iter().enumerate().map(|(at, message)| (message.id.as_str(), (at, message))).collect();
    let stored = &stored.messages;
    let bound = answered_up_to(stored, request, &shown, placed)?;
    let mut previous = None;
    for message in stored[..=bound].iter().filter(|message| message.role == Role::User) {
        let (id, text) = (&message.id, message.text());
        let Some(&(at, shown)) = shown.get(id.as_str()) else {
            return Some(format!("user message {id} ({text:?}) is stored before the reply asked for, and not shown"));
        };
        if shown.text() != text {
            return Some(format!("user message {id} is shown as {:?}; the store holds {text:?}", shown.text()));
        }
        if previous.is_some_and(|previous| previous > at) {
            return Some(format!("user message {id} is shown before a message the store holds before it"));
        }
        previous = Some(at);
    }
    None
}

/// Where in the store the messages the request answers end (inclusive):
/// its last message, when stored; for a new reply, the message the store
/// puts it after when it first holds it (if stored now); else the last
/// stored message the request shows, or the first user message when it
/// shows none.
fn answered_up_to(
    stored: &[Message],
    request: &ModelRequest,
    shown: &BTreeMap<&str, (usize, &Message)>,
    placed: &Placements,
) -> Option<usize> {
    let position = |id: &str| stored.iter().rposition(|message| message.id == id);
    let last = request.messages.last()?;
    if let Some(at) = position(&last.id) {
        return Some(at);
    }
    match placed.get(&last.id) {
        // Stored first of all: it answers nothing stored before it.
        Some(None) => return None,
        Some(Some(after)) => {
            if let Some(at) = position(after) {
                return Some(at);
            }
        }
        None => {}
    }
    let last_shown = stored.iter().rposition(|message| shown.contains_key(message.id.as_str()));
    // A request starts where the conversation does: one that shows nothing
    // stored still answers the first user message.
    last_shown.or_else(|| stored.iter().position(|message| message.role == Role::User))
}

/// For each message the store came to hold, the message before it in the
/// store when it first held it (`None` when it came first).
type Placements = BTreeMap<String, Option<String>>;

fn first_placements(history: &History) -> Placements {
    let mut state = history.initial.clone();
    let ids = state.messages.iter().map(|message| message.id.clone());
    let mut placed: Placements = ids.clone().zip(std::iter::once(None).chain(ids.map(Some))).collect();
    for crossing in history.iter() {
        let Boundary::Commit { writes } = &crossing.what else { continue };
        for write in writes {
            state.apply(write);
            let Some(message) = write.message().filter(|message| !placed.contains_key(&message.id)) else {
                continue;
            };
            let Some(at) = state.messages.iter().rposition(|stored| stored.id == message.id) else { continue };
            let before = at.checked_sub(1).map(|before| state.messages[before].id.clone());
            placed.insert(message.id.clone(), before);
        }
    }
    placed
}

// ---------------------------------------------------------- assistant text

/// The texts of the request's assistant messages, where they changed since
/// the request before showed them, that the store does not hold in that
/// message and no kept call streamed, as sentences.
fn unknown_texts(
    stored: &DurableState,
    request: &ModelRequest,
    kept: &KeptTexts,
    seen: &mut SeenMessages,
) -> Vec<String> {
    let mut unknown = Vec::new();
    for message in request.messages.iter().filter(|message| message.role == Role::Assistant) {
        // Looked up only for a changed text: a long session's requests
        // carry every earlier message, nearly all of them unchanged.
        let mut stored_message = None;
        for at in seen.changed(message) {
            let Some((reasoning, text)) = text_of(&message.parts[at]).filter(|(_, text)| !text.is_empty()) else {
                continue;
            };
            if kept.holds(reasoning, text) {
                continue;
            }
            let stored_message = *stored_message.get_or_insert_with(|| stored.message(&message.id));
            if !stored_message.is_some_and(|stored| holds(stored, at, reasoning, text)) {
                let kind = if reasoning { "reasoning" } else { "text" };
                let id = &message.id;
                unknown
                    .push(format!("{id} shows {kind} {text:?} that the store does not hold and no kept call streamed"));
            }
        }
    }
    unknown
}

/// Whether the stored message holds this text: at the same place (an
/// engine's copies keep places), or anywhere in it (read only then).
fn holds(stored: &Message, at: usize, reasoning: bool, text: &str) -> bool {
    let same = |part: &Part| text_of(part) == Some((reasoning, text));
    stored.parts.get(at).is_some_and(same) || stored.parts.iter().any(same)
}

/// The texts kept calls streamed so far, for a lookup by prefix: a request
/// may show a part as far as it had streamed.
#[derive(Default)]
struct KeptTexts {
    texts: BTreeSet<Text>,
}

impl KeptTexts {
    fn add(&mut self, text: &Text) {
        if !self.texts.contains(text) {
            self.texts.insert(text.clone());
        }
    }

    /// Whether a kept call streamed `text`, or a text that starts with it.
    /// The texts that start with it sort right from it on.
    fn holds(&self, reasoning: bool, text: &str) -> bool {
        let from = (reasoning, text.to_string());
        let first = self.texts.range(from..).next();
        first.is_some_and(|(kind, streamed)| *kind == reasoning && streamed.starts_with(text))
    }
}

// ---------------------------------------------------------- taken back

/// The calls whose attempt the engine took back (indexes into `calls`): a
/// truncated finish; a failed call a later call into the same reply
/// retried; a call a take-back frame for its reply then showed without
/// its text (the last call into that reply before the frame).
fn taken_back(history: &History, calls: &[CallFact], streamed: &[Vec<Text>]) -> BTreeSet<usize> {
    let mut taken_back: BTreeSet<usize> = retried_failures(calls);
    taken_back.extend(calls.iter().enumerate().filter(|(_, call)| call.is_truncated_finish()).map(|(at, _)| at));
    taken_back.extend(reset_calls(history, calls, streamed));
    taken_back
}

/// Failed calls (429, 5xx) that a later call into the same reply retried.
/// Read from the end: the replies a later call wrote into are known.
fn retried_failures(calls: &[CallFact]) -> BTreeSet<usize> {
    let mut later_targets: BTreeSet<&str> = BTreeSet::new();
    let mut retried = BTreeSet::new();
    for (at, call) in calls.iter().enumerate().rev() {
        let Some(target) = call.target.as_deref() else { continue };
        if call.end.is_retryable_http() && later_targets.contains(target) {
            retried.insert(at);
        }
        later_targets.insert(target);
    }
    retried
}

/// Calls a `reset` frame took back: the last call into the frame's message
/// before it, when the frame's message lacks a text that call streamed.
fn reset_calls(history: &History, calls: &[CallFact], streamed: &[Vec<Text>]) -> BTreeSet<usize> {
    let mut last_into: BTreeMap<&str, usize> = BTreeMap::new();
    let mut calls_so_far = calls.iter().enumerate().peekable();
    let mut taken_back = BTreeSet::new();
    for (index, crossing) in history.iter().enumerate() {
        while let Some((at, call)) = calls_so_far.next_if(|(_, call)| call.at < index) {
            if let Some(target) = call.target.as_deref() {
                last_into.insert(target, at);
            }
        }
        let Boundary::Frame { frame: Frame::Reset { message, .. }, .. } = &crossing.what else { continue };
        let Some(&at) = last_into.get(message.id.as_str()) else { continue };
        let shows = |text: &Text| message.parts.iter().any(|part| text_of(part) == Some((text.0, text.1.as_str())));
        if !streamed[at].iter().all(shows) {
            taken_back.insert(at);
        }
    }
    taken_back
}

//! What the model is asked is what the store holds. At each model request,
//! against the store as of that moment (the commits before it folded in),
//! the request is the stored transcript up to the reply it asks for:
//!
//! - every stored message up to that reply is shown, once, in store order,
//!   and none the store holds after it (a later question waiting its turn
//!   is not the model's to answer yet). The reply is the request's last
//!   message; when the store does not hold it yet (a new reply), the store
//!   says later where it goes: after the message it answers (the message
//!   before it where it is first stored). A reply never stored answers up
//!   to the last stored message the request shows (at least the first
//!   user message: a request starts where the store does).
//! - each message is shown as stored, part for part: its step boundaries,
//!   texts, tool calls with their inputs, states, results and decisions.
//!   The reply being written may run ahead of the store (what was streamed
//!   since the last flush), never behind it, or be shown empty (answered
//!   afresh in place of what a dead turn left); a message whose write the
//!   store refused may be shown as the engine wrote it.
//! - every assistant text or reasoning the request shows is stored in its
//!   message, or a model call of this run streamed it in an attempt that
//!   was kept, never an attempt the engine took back (a truncated finish, a
//!   failed call that was retried, a take-back frame that drops it). The
//!   built-in engine adds nothing of its own to a request (no continuation
//!   prompt): anything else is text nobody streamed or stored.
//!
//! Compared on meaning, not bytes: part ids, text states and an engine's
//! own marks (a tool's raw input text, its repaired flag) are the
//! engine's. Linear in the history: the store is a cursor walked forward,
//! and a message's parts are read only where the shown copy and the stored
//! one do not share them, or where they changed since the request before.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::DurableState;
use turnsim_engine::ports::ModelRequest;
use turnsim_engine::{Frame, Message, Part, Role, ToolPart, ToolState};

use super::Invariant;
use crate::check::facts::{has_content, text_of, CallFact};
use crate::check::seen::SeenMessages;
use crate::check::store_cursor::StoreCursor;
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, History};

pub const INVARIANT: Invariant = Invariant {
    name: "request-matches-store",
    rule: "a model request is the stored transcript up to the reply it asks for: every stored message, once, in \
           store order, part for part as stored (steps, texts, calls, results), and no assistant text but what the \
           store holds or a kept model call streamed",
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
    let mut refused = RefusedWrites::default();
    let mut seen = SeenMessages::default();
    let mut violations = Vec::new();
    for (at, call) in calls.iter().enumerate() {
        let request = call.request(history);
        let stored = store.at(call.at);
        let refused = refused.at(history, call.at);
        let wrongs = mismatched_messages(stored, refused, request, call.target.as_deref(), &placed).into_iter();
        let wrongs = wrongs.chain(unknown_texts(stored, request, &kept, &mut seen));
        let what = |wrong: String| format!("model call #{} ({}): {wrong}", call.call, request.request_id);
        violations.extend(wrongs.map(|wrong| input.violation_at(INVARIANT.name, call.at, what(wrong))));
        if !taken_back.contains(&at) {
            streamed[at].iter().for_each(|text| kept.add(text));
        }
    }
    violations
}

// ------------------------------------------------------------ the transcript

/// Where the request shows other than the store as of that moment, as
/// sentences: a message shown twice, out of store order, not stored, or
/// stored after the reply it asks for (a later question not its turn
/// yet); a stored message up to that reply left out; a message shown
/// otherwise than stored (its steps, texts, calls with their inputs and
/// results). The reply being written may run ahead of the store (what was
/// streamed since the last flush), never behind it; a message whose
/// write the store refused may be shown as the engine wrote it.
fn mismatched_messages(
    stored: &DurableState,
    refused: &BTreeMap<String, Message>,
    request: &ModelRequest,
    target: Option<&str>,
    placed: &Placements,
) -> Vec<String> {
    let position: BTreeMap<&str, usize> =
        stored.messages.iter().enumerate().map(|(at, message)| (message.id.as_str(), at)).collect();
    let shown: BTreeMap<&str, (usize, &Message)> =
        request.messages.iter().enumerate().map(|(at, message)| (message.id.as_str(), (at, message))).collect();
    let bound = answered_up_to(&stored.messages, request, &shown, placed);
    let last = request.messages.len().saturating_sub(1);
    let mut wrongs = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut previous: Option<usize> = None;
    for (at, message) in request.messages.iter().enumerate() {
        let id = message.id.as_str();
        let is_reply = at == last && target == Some(id);
        if !seen.insert(id) {
            wrongs.push(format!("message {id} is shown twice"));
            continue;
        }
        let Some(&stored_at) = position.get(id) else {
            // A message whose write the store refused is the engine's
            // account of it still; whether a refusal must stop the turn
            // is the `store-refusal-fails-turn` capability's.
            if !is_reply && !refused.contains_key(id) {
                wrongs.push(format!("{} message {id} is shown, but the store does not hold it", role(message)));
            }
            continue;
        };
        if previous.is_some_and(|previous| previous > stored_at) {
            wrongs.push(format!("message {id} is shown before a message the store holds before it"));
        }
        previous = Some(stored_at);
        if bound.is_none_or(|bound| stored_at > bound) {
            wrongs.push(format!("message {id} is shown, but the store holds it after the reply the request asks for"));
            continue;
        }
        let stored_message = &stored.messages[stored_at];
        let wrong = match is_reply {
            // A reply shown with nothing in it is answered afresh, in place
            // of what the store holds of it (a dead turn's partial).
            true if !has_content(message) => None,
            true => runs_behind(stored_message, message),
            false => differs(stored_message, message)
                .filter(|_| refused.get(id).is_none_or(|written| differs(written, message).is_some())),
        };
        wrongs.extend(wrong.map(|wrong| format!("message {id} {wrong}")));
    }
    let up_to = bound.map_or(0, |bound| bound + 1);
    let left_out = stored.messages[..up_to].iter().filter(|message| !seen.contains(message.id.as_str()));
    wrongs.extend(left_out.map(|message| {
        let (role, id, text) = (role(message), &message.id, excerpt(&message.text()));
        format!("{role} message {id} ({text:?}) is stored before the reply asked for, and not shown")
    }));
    wrongs
}

/// The start of a text, for a report.
fn excerpt(text: &str) -> String {
    const CHARS: usize = 60;
    match text.char_indices().nth(CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn role(message: &Message) -> &'static str {
    match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// Where `shown` is not `stored`, part for part, as a phrase. Only the
/// parts the two copies do not share are read.
fn differs(stored: &Message, shown: &Message) -> Option<String> {
    if stored.parts.len() != shown.parts.len() {
        let (stored_count, shown_count) = (stored.parts.len(), shown.parts.len());
        return Some(format!(
            "is shown with {shown_count} parts; the store holds {stored_count}: {}",
            first_difference(stored, shown)
        ));
    }
    let changed = shown.parts.changed_since(&stored.parts).into_iter().flatten();
    let mut changed = changed.filter(|&at| !same_meaning(&stored.parts[at], &shown.parts[at]));
    changed.next().map(|at| part_differs(at, stored.parts.get(at), shown.parts.get(at)))
}

/// Where the reply being written shows less than the store holds of it:
/// every stored part, in order, is shown at least as far as stored. Read
/// place by place where the copies do not share parts; only when that
/// fails is the stored reply looked for in order through the shown one
/// (the engine may show parts the store has not taken yet between them).
fn runs_behind(stored: &Message, shown: &Message) -> Option<String> {
    let changed = shown.parts.changed_since(&stored.parts).into_iter().flatten();
    let behind_at = |at: usize| match stored.parts.get(at) {
        None => false,
        Some(stored_part) => shown.parts.get(at).is_none_or(|shown_part| !runs_ahead_of(stored_part, shown_part)),
    };
    changed.chain(shown.parts.len()..stored.parts.len()).find(|&at| behind_at(at))?;
    let mut shown_parts = shown.parts.iter();
    let missing =
        stored.parts.iter().position(|stored_part| !shown_parts.any(|part| runs_ahead_of(stored_part, part)))?;
    let differs = part_differs(missing, stored.parts.get(missing), shown.parts.get(missing));
    Some(format!("shows less than the store holds: {differs}"))
}

/// The first part where the two copies differ in meaning, as a phrase.
fn first_difference(stored: &Message, shown: &Message) -> String {
    let count = stored.parts.len().max(shown.parts.len());
    let at = (0..count).find(|&at| match (stored.parts.get(at), shown.parts.get(at)) {
        (Some(stored), Some(shown)) => !same_meaning(stored, shown),
        _ => true,
    });
    at.map_or_else(String::new, |at| part_differs(at, stored.parts.get(at), shown.parts.get(at)))
}

fn part_differs(at: usize, stored: Option<&Part>, shown: Option<&Part>) -> String {
    let describe = |part: Option<&Part>| part.map_or_else(|| "nothing".to_string(), describe_part);
    format!("part {at} is shown as {}; the store holds {}", describe(shown), describe(stored))
}

fn describe_part(part: &Part) -> String {
    match part {
        Part::StepStart => "step-start".to_string(),
        Part::Text { text, .. } => format!("text {text:?}"),
        Part::Reasoning { text, .. } => format!("reasoning {text:?}"),
        Part::Tool(tool) => {
            let input = tool.input.as_ref().map_or_else(|| "none".to_string(), |input| input.to_string());
            let mut described =
                format!("tool {} {} {} input {input}", tool.call_id, tool.tool_name, tool.state.as_str());
            if let Some(output) = &tool.output {
                described.push_str(&format!(" output {output}"));
            }
            if let Some(error) = &tool.error_text {
                described.push_str(&format!(" error {error:?}"));
            }
            described
        }
    }
}

/// The same part to the model: the same kind, text, call (name, input,
/// state, result, decision). Part ids, text states and an engine's own
/// marks (input text, repaired) are the engine's.
fn same_meaning(stored: &Part, shown: &Part) -> bool {
    match (stored, shown) {
        (Part::StepStart, Part::StepStart) => true,
        (Part::Text { text: a, .. }, Part::Text { text: b, .. }) => a == b,
        (Part::Reasoning { text: a, .. }, Part::Reasoning { text: b, .. }) => a == b,
        (Part::Tool(a), Part::Tool(b)) => same_call(a, b) && a.state == b.state && same_result(a, b),
        _ => false,
    }
}

fn same_call(a: &ToolPart, b: &ToolPart) -> bool {
    let input = a.state == ToolState::InputStreaming || a.input == b.input;
    a.call_id == b.call_id && a.tool_name == b.tool_name && input
}

fn same_result(a: &ToolPart, b: &ToolPart) -> bool {
    let decision = |tool: &ToolPart| tool.approval.as_ref().and_then(|approval| approval.approved);
    let output = a.state != ToolState::OutputAvailable || a.output == b.output;
    let error = a.state != ToolState::OutputError || a.error_text == b.error_text;
    output && error && decision(a) == decision(b)
}

/// Whether a part of the reply being written shows at least what the
/// store holds of it: the same part, its text grown from the stored text,
/// or its call moved on from the stored state.
fn runs_ahead_of(stored: &Part, shown: &Part) -> bool {
    match (stored, shown) {
        (Part::Text { text: a, .. }, Part::Text { text: b, .. }) => b.starts_with(a.as_str()),
        (Part::Reasoning { text: a, .. }, Part::Reasoning { text: b, .. }) => b.starts_with(a.as_str()),
        (Part::Tool(a), Part::Tool(b)) if a.state != b.state => a.call_id == b.call_id && b.state > a.state,
        _ => same_meaning(stored, shown),
    }
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

/// The messages of commits the store refused, as last written: what the
/// engine still takes them to be. Walked forward with the requests.
#[derive(Default)]
struct RefusedWrites {
    messages: BTreeMap<String, Message>,
    next: usize,
}

impl RefusedWrites {
    fn at(&mut self, history: &History, index: usize) -> &BTreeMap<String, Message> {
        for crossing in &history.crossings[self.next..index] {
            match &crossing.what {
                Boundary::CommitRefused { writes } => {
                    for message in writes.iter().filter_map(|write| write.message()) {
                        self.messages.insert(message.id.clone(), message.clone());
                    }
                }
                // A write the store took since supersedes the refused one.
                Boundary::Commit { writes } => writes
                    .iter()
                    .filter_map(|write| write.message())
                    .for_each(|message| drop(self.messages.remove(&message.id))),
                _ => {}
            }
        }
        self.next = index.max(self.next);
        &self.messages
    }
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

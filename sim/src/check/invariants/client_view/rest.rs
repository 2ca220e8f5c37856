//! A client's transcript judged where it comes to rest, not only when the
//! run settles: at every `done` or `error` frame a connection is sent, and
//! when it disconnects. A later transcript frame that repairs the view, or
//! a client that leaves before the end, no longer hides what it was shown.
//!
//! - **At a terminal frame** for request R, each message R streamed into
//!   (its chunks and take-backs on any connection, the reply its model
//!   requests wrote into) shows on the connection exactly as the store
//!   holds it then, as a person sees it (`views::shown`): a message the
//!   store does not hold is not on screen. A message a later request has
//!   taken over since (a recovery streaming into it) is that request's to
//!   judge: a terminal status replayed to a connecting client is no rest
//!   of the message.
//! - **At a transcript frame** (on connect, or restated), the client is
//!   shown the store as the disconnect rule below reads it: a stale or
//!   partial transcript is wrong when sent, even if a later one repairs it
//!   before the client rests.
//! - **At a disconnect**, the client leaves showing the store as it stood,
//!   or ahead of it by what the stream in progress has not checkpointed
//!   yet: every stored message is on screen in its place, each of its
//!   parts as stored, save that text may run on past the stored text and
//!   a tool may be further along than its stored state. A discarded
//!   attempt's text kept on screen, a chunk lost or doubled, a message
//!   missing: each shows here. A connection that closes in the instant it
//!   opened is not judged: across the process boundary, the disconnect may
//!   be taken before the frames answering its connect are recorded.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::Frame;
use turnsim_engine::{Chunk, EngineConfig, Message, Role, ToolState};

use super::waiting::Waits;
use super::{first_difference_after, INVARIANT};
use crate::check::views::{shown_message, shows, ClientView, ClientViews, SameCopies, Shown, ShownMessage};
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, Crossing, RunEnd};

/// Each connection judged at its rests as the history goes, over the
/// client views and the store the caller folds once for every part of
/// client-view: [`AtRest::before`] a crossing steps them, then
/// [`AtRest::after`]. Judging stops at the first connection misshowing.
pub struct AtRest {
    rest: Rests,
    waits: Waits,
    config: EngineConfig,
    last_us: u64,
    alive: bool,
    found: Option<Violation>,
}

impl AtRest {
    pub fn new(input: &CheckInput) -> Self {
        let config = input.scenario.scenario.engine_config();
        Self { rest: Rests::default(), waits: Waits::default(), config, last_us: 0, alive: false, found: None }
    }

    /// Before `crossing` steps the views and the store: time passing since
    /// the last crossing, and a client leaving.
    pub fn before(
        &mut self,
        input: &CheckInput,
        index: usize,
        crossing: &Crossing,
        views: &ClientViews,
        store: &Stores,
    ) {
        let Self { rest, waits, config, last_us, alive, found } = self;
        if found.is_some() {
            return;
        }
        if crossing.at_us > *last_us && *alive {
            if let Some(text) = rest.unasked(views).or_else(|| rest.waited(waits, views, store)) {
                *found = Some(Violation::at(INVARIANT.name, input.event_of(index.saturating_sub(1)), text));
                return;
            }
        }
        *last_us = crossing.at_us;
        match &crossing.what {
            Boundary::Boot { .. } => *alive = true,
            Boundary::Killed => {
                *alive = false;
                rest.to_ask.clear();
            }
            Boundary::Connect { connection } | Boundary::Disconnect { connection } => {
                rest.to_ask.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Chunk { chunk: Chunk::ToolCall { id, name, .. }, .. } }
                if config.tool_kind(name).needs_approval() =>
            {
                rest.to_ask.entry(*connection).or_default().insert(id.clone());
            }
            _ => {}
        }
        let text = match &crossing.what {
            Boundary::Disconnect { connection } => rest.left(input, views, *connection, crossing.at_us, store),
            _ => None,
        };
        *found = text.map(|text| Violation::at(INVARIANT.name, input.event_of(index), text));
    }

    /// After `crossing` stepped the views and the store: what it sent or
    /// wrote noted, a terminal frame judged.
    pub fn after(
        &mut self,
        input: &CheckInput,
        index: usize,
        crossing: &Boundary,
        views: &ClientViews,
        store: &Stores,
    ) {
        if self.found.is_some() {
            return;
        }
        self.waits.crossed(crossing, views);
        match crossing {
            Boundary::Commit { writes } => self.waits.written(writes),
            Boundary::CommitRefused { writes } => {
                self.waits.written(writes);
                self.rest.refused(writes);
            }
            Boundary::ModelRequest { request, .. } => {
                let reply = request.messages.last().filter(|message| message.role == Role::Assistant);
                if let Some(reply) = reply {
                    self.rest.streams(&request.request_id, &reply.id);
                }
            }
            Boundary::Frame { connection, frame } => {
                let text = self.rest.framed(views, *connection, frame, store);
                self.found = text.map(|text| Violation::at(INVARIANT.name, input.event_of(index), text));
            }
            _ => {}
        }
    }

    /// The first connection found misshowing, the run's end judged too: a
    /// settled run rests for good, time passing on what it left on screen.
    pub fn finish(mut self, input: &CheckInput, views: &ClientViews, store: &Stores) -> Option<Violation> {
        if self.found.is_some() {
            return self.found;
        }
        let settled = self.alive && input.run.end == RunEnd::Quiescent;
        let rest = &self.rest;
        let text = rest.unasked(views).or_else(|| rest.waited(&mut self.waits, views, store)).filter(|_| settled)?;
        let last = input.run.history.crossings.len().saturating_sub(1);
        Some(Violation::at(INVARIANT.name, input.event_of(last), text))
    }
}

/// Which request streams into which message, and what is left to ask.
#[derive(Default)]
struct Rests {
    /// The request that last streamed into each message.
    owner: BTreeMap<String, String>,
    /// The messages each request streamed into.
    replies: BTreeMap<String, Vec<String>>,
    /// Messages the store refused a write of while their request ran.
    lost: BTreeSet<String>,
    /// Per connection, the calls to tools that need approval whose
    /// finished call it was streamed (`unasked`).
    to_ask: BTreeMap<u64, BTreeSet<String>>,
    /// Each connection's copy of a message last found to look as stored
    /// (against the store as it stands, or as the engine tried to leave it).
    same: SameCopies<(u64, bool, String)>,
}

impl Rests {
    fn streams(&mut self, request_id: &str, message_id: &str) {
        // Its owner already (every chunk of a stream but the first): the
        // request's replies hold it too, and nothing changes.
        if self.owner.get(message_id).is_some_and(|owner| owner == request_id) {
            return;
        }
        let previous = self.owner.insert(message_id.to_string(), request_id.to_string());
        if previous.as_deref() != Some(request_id) {
            self.lost.remove(message_id);
        }
        let replies = self.replies.entry(request_id.to_string()).or_default();
        if !replies.iter().any(|reply| reply == message_id) {
            replies.push(message_id.to_string());
        }
    }

    fn refused(&mut self, writes: &[Write]) {
        let messages = writes.iter().filter_map(|write| match write {
            Write::RemoveMessage(id) => Some(id),
            _ => write.message().map(|message| &message.id),
        });
        self.lost.extend(messages.cloned());
    }

    /// A frame sent: a stream noted, or a terminal frame judged.
    fn framed(&mut self, views: &ClientViews, connection: u64, frame: &Frame, store: &Stores) -> Option<String> {
        match frame {
            Frame::Chunk { request_id, message_id, .. } => self.streams(request_id, message_id),
            Frame::Reset { request_id, message } => self.streams(request_id, &message.id),
            Frame::Messages(_) => return self.restated(views, connection, store),
            Frame::Done { request_id, .. } => return self.ended(views, connection, request_id, store, false),
            Frame::Error { request_id, .. } => return self.ended(views, connection, request_id, store, true),
            _ => {}
        }
        None
    }

    /// A terminal frame for `request_id` on `connection`: each message the
    /// request still owns shows as stored (or as the engine tried to store
    /// it).
    fn ended(
        &mut self,
        views: &ClientViews,
        connection: u64,
        request_id: &str,
        store: &Stores,
        failed: bool,
    ) -> Option<String> {
        let Self { owner, replies, lost, same, .. } = self;
        let view = in_step(views, connection)?;
        let replies = replies.get(request_id)?;
        let mut owned = replies.iter().filter(|reply| owner.get(*reply).is_some_and(|owner| owner == request_id));
        owned.find_map(|message_id| {
            let on_screen = find(&view.messages, message_id);
            let mut in_store = |tried: bool, state: &DurableState| {
                let key = (connection, tried, message_id.clone());
                same.look_the_same(key, on_screen, find(&state.messages, message_id))
            };
            if in_store(false, &store.held) || (store.tried.is_some() && in_store(true, store.tried())) {
                return None;
            }
            let showing = visible(&view.messages, message_id);
            let stored = visible(&store.held.messages, message_id);
            let tried = visible(&store.tried().messages, message_id);
            if showing == stored || showing == tried {
                return None;
            }
            // A message whose writes the store refused may be left with its
            // tools where the refusal caught them (a state the store took on
            // a second try and the client was never told, or the other way
            // round: what the engine sends next repairs it). Its text may
            // not: a failed turn takes back what the store does not hold.
            if lost.contains(message_id) {
                let [showing, stored, tried] = [&showing, &stored, &tried].map(|shown| shown.as_ref().map(stateless_message));
                if showing == stored || showing == tried {
                    return None;
                }
            }
            Some(format!(
                "client connection c{connection} is told request {request_id} {} showing message {message_id} as {}; the store holds {}",
                if failed { "failed" } else { "is done" },
                describe(showing.as_ref()),
                describe(stored.as_ref()),
            ))
        })
    }

    /// Time passes: what each client in step shows (`waiting`).
    fn waited(&self, waits: &mut Waits, views: &ClientViews, store: &Stores) -> Option<String> {
        waits.look(views, store, &self.lost, |view| self.transcript_behind(view, store))
    }

    /// Time passes: a client streamed the finished call of a tool that
    /// needs approval is asked for it (the call shown `approval-requested`,
    /// or further along), not left showing it `input-available` with no
    /// request to answer. A message whose writes the store refused while
    /// its request ran is left aside: an engine may ask only for what the
    /// store kept.
    fn unasked(&self, views: &ClientViews) -> Option<String> {
        self.to_ask.iter().find_map(|(connection, calls)| {
            let view = in_step(views, *connection)?;
            calls.iter().find_map(|call_id| {
                let (message, tool) =
                    view.messages.iter().find_map(|message| Some((message, message.parts.tool(call_id)?)))?;
                (tool.state == ToolState::InputAvailable && !self.lost.contains(&message.id)).then(|| {
                    format!(
                        "client connection c{connection} is streamed the finished call {call_id} of {}, which needs approval, and shows it input-available while time passes: it is never asked to approve it",
                        tool.tool_name
                    )
                })
            })
        })
    }

    /// A whole transcript sent: it restates the store (as it stands, or as
    /// the engine tried to leave it), or runs ahead of it by a stream in
    /// progress. A stale one is wrong when sent, whatever repairs it later.
    fn restated(&self, views: &ClientViews, connection: u64, store: &Stores) -> Option<String> {
        let view = in_step(views, connection)?;
        let difference = self.transcript_behind(view, store)?;
        Some(format!("client connection c{connection} is sent a transcript other than the store: {difference}"))
    }

    /// A client leaving: it shows the store, or ahead of it by a stream.
    fn left(
        &self,
        input: &CheckInput,
        views: &ClientViews,
        connection: u64,
        at_us: u64,
        store: &Stores,
    ) -> Option<String> {
        let view = in_step(views, connection)?;
        let opened_us = input.run.history.crossings.get(view.opened_at).map_or(0, |crossing| crossing.at_us);
        if opened_us == at_us {
            return None;
        }
        let difference = self.transcript_behind(view, store)?;
        Some(format!("client connection c{connection} leaves showing other than the store: {difference}"))
    }

    /// Where a client's whole transcript is not the store's (as it stands
    /// or as the engine tried to leave it), nor ahead of it by a stream.
    /// A message whose writes the store refused while its request ran
    /// is compared without its tools' states, as at its terminal frame.
    fn transcript_behind(&self, view: &ClientView, store: &Stores) -> Option<String> {
        if let Some(tried) = &store.tried {
            self.behind_of(view, &tried.messages)?;
        }
        self.behind_of(view, &store.held.messages)
    }

    /// [`behind`] of the client's transcript and `stored`, past the first
    /// messages both hold as the very same copies (a long session's settled
    /// ones, which show alike): a look costs what changed, not the session.
    /// A reply a request streams into that the store does not hold yet is
    /// ahead of it by that stream wherever it stands: at the end, or in its
    /// place before a user message stored while it streamed.
    fn behind_of(&self, view: &ClientView, stored: &[Message]) -> Option<String> {
        let alike = view.messages.iter().zip(stored).take_while(|(shown, kept)| shown == kept).count();
        let unstored_stream = |message: &&Message| {
            self.owner.contains_key(&message.id) && !stored.iter().rev().any(|kept| kept.id == message.id)
        };
        let showing = self.loosen(view.messages[alike..].iter().filter(|message| !unstored_stream(message)));
        let passed = stored[..alike].iter().filter(|message| shows(message)).count();
        behind(&showing, &self.loosen(stored[alike..].iter()), passed)
    }

    /// The messages that show, as shown; those whose writes the store
    /// refused while their request ran without their tools' states.
    fn loosen<'m>(&self, messages: impl Iterator<Item = &'m Message>) -> Vec<ShownMessage<'m>> {
        let loose = |message: ShownMessage<'m>| match self.lost.contains(message.id) {
            true => stateless_message(&message),
            false => message,
        };
        messages.filter(|message| shows(message)).map(shown_message).map(loose).collect()
    }
}

fn in_step(views: &ClientViews, connection: u64) -> Option<&ClientView> {
    views.in_step().find(|(open, _)| **open == connection).map(|(_, view)| view)
}

/// The store as it stands, and as the engine tried to leave it: a client
/// may be shown what the engine meant to store when the store refused it
/// (a take-back of text the store then kept, or an answer it lost).
/// Folded once for every part of client-view ([`Stores::step`]).
pub struct Stores {
    pub(super) held: DurableState,
    /// The messages with the refused commits' writes folded in too, once
    /// the store has refused any (until then, the store as it stands).
    pub(super) tried: Option<DurableState>,
}

impl Stores {
    pub fn new(initial: DurableState) -> Self {
        Self { held: initial, tried: None }
    }

    /// The store after `crossing`: a commit taken, or one refused.
    pub fn step(&mut self, crossing: &Boundary) {
        match crossing {
            Boundary::Commit { writes } => self.commit(writes),
            Boundary::CommitRefused { writes } => self.refused(writes),
            _ => {}
        }
    }

    fn commit(&mut self, writes: &[Write]) {
        for write in writes {
            self.held.apply(write);
            if let Some(tried) = &mut self.tried {
                tried.apply(write);
            }
        }
    }

    fn refused(&mut self, writes: &[Write]) {
        let of_messages = |write: &&Write| matches!(write, Write::RemoveMessage(_)) || write.message().is_some();
        let tried = self.tried.get_or_insert_with(|| self.held.clone());
        writes.iter().filter(of_messages).for_each(|write| tried.apply(write));
    }

    fn tried(&self) -> &DurableState {
        self.tried.as_ref().unwrap_or(&self.held)
    }
}

fn find<'a>(messages: &'a [Message], id: &str) -> Option<&'a Message> {
    messages.iter().find(|message| message.id == id)
}

/// Message `id` as shown, if it is on screen at all.
fn visible<'a>(messages: &'a [Message], id: &str) -> Option<ShownMessage<'a>> {
    let message = messages.iter().find(|message| message.id == id)?;
    let shown = shown_message(message);
    (shown.role != Role::Assistant || !shown.parts.is_empty()).then_some(shown)
}

fn describe(message: Option<&ShownMessage>) -> String {
    match message {
        Some(message) => format!("{:?}", message.parts),
        None => "nothing".to_string(),
    }
}

/// Where a screen is not the store, nor ahead of it by a stream in
/// progress: `None` when every stored message is on screen in its place
/// with each stored part as stored, or run on. Both lists start after
/// `passed` messages shown alike (positions in what it says count them).
pub fn behind(showing: &[ShownMessage], stored: &[ShownMessage], passed: usize) -> Option<String> {
    for (at, kept) in stored.iter().enumerate() {
        let Some(shown) = showing.get(at) else {
            return first_difference_after(showing, stored, passed);
        };
        if shown.id != kept.id || kept.parts.len() > shown.parts.len() {
            return first_difference_after(showing, stored, passed);
        }
        if !parts_run_on(&kept.parts, &shown.parts) {
            return Some(format!("message {} shows {:?}; the store holds {:?}", shown.id, shown.parts, kept.parts));
        }
    }
    None
}

/// Each stored part is on screen in order, as stored or run on. A text
/// (or reasoning) part on screen that matches no stored one may be one
/// the store still holds empty, which shows nothing: it is passed over.
fn parts_run_on(kept: &[Shown], shown: &[Shown]) -> bool {
    let mut on_screen = shown.iter();
    kept.iter().all(|kept| {
        let passed_over =
            |shown: &&Shown| !part_runs_on(kept, shown) && matches!(shown, Shown::Text(_) | Shown::Reasoning(_));
        on_screen.find(|shown| !passed_over(shown)).is_some_and(|shown| part_runs_on(kept, shown))
    })
}

/// A part on screen is the stored one, or it ran on since the store took
/// it: more text, or a tool further along.
pub(super) fn part_runs_on(kept: &Shown, shown: &Shown) -> bool {
    match (kept, shown) {
        (Shown::Text(kept), Shown::Text(shown)) | (Shown::Reasoning(kept), Shown::Reasoning(shown)) => {
            shown.starts_with(*kept)
        }
        (
            Shown::Tool { call_id, tool_name, dynamic, state, input, .. },
            Shown::Tool {
                call_id: shown_id,
                tool_name: shown_name,
                dynamic: shown_dynamic,
                state: shown_state,
                input: shown_input,
                ..
            },
        ) => {
            let same = call_id == shown_id && tool_name == shown_name && dynamic == shown_dynamic;
            let ahead = stage(state) < stage(shown_state);
            same && (kept == shown || (ahead && (input.is_none() || input == shown_input)))
        }
        _ => false,
    }
}

/// How far along a tool state is: a screen may be ahead of the store (the
/// stream went on), never behind it.
fn stage(state: &str) -> u8 {
    match state {
        "input-streaming" => 0,
        "input-available" => 1,
        "approval-requested" => 2,
        "approval-responded" => 3,
        _ => 4,
    }
}

/// A message with its tools' states left out.
fn stateless_message<'a>(message: &ShownMessage<'a>) -> ShownMessage<'a> {
    ShownMessage { id: message.id, role: message.role, parts: message.parts.iter().map(stateless).collect() }
}

/// A part with its tool state left out.
pub(super) fn stateless<'a>(part: &Shown<'a>) -> Shown<'a> {
    match part {
        &Shown::Tool { call_id, tool_name, dynamic, .. } => {
            Shown::Tool { call_id, tool_name, state: "", dynamic, approved: None, input: None }
        }
        other => other.clone(),
    }
}

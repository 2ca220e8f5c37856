//! What each consumer ends up showing, rebuilt from what crossed the
//! boundary to it: a client's transcript from the frames it was sent, a
//! `chat()` caller's text from its callbacks, a messenger's reply from its
//! posts. The consumer-view invariants compare these with the store.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::ports::Frame;
use turnsim_engine::transcript::Approval;
use turnsim_engine::transcript::{normalise_input, TextState};
use turnsim_engine::{Chunk, Message, Part, Parts, Role, ToolOutcome, ToolPart, ToolState};

use crate::history::{Boundary, CallbackCall, History};

/// One part as a person sees it: step markers and empty text are invisible.
/// A dynamic tool is a different part to a UI (`dynamic-tool`, rendered by
/// its own branch), so it is shown as such, and so is the decision on an
/// approval answered and not yet acted on (a UI shows "approved"). A tool's
/// input shows once it is complete: as its finished call gave it, or as
/// its streamed input text reads when the call was finished from that.
///
/// It borrows from the part it shows: the checks that judge at every rest
/// build many and keep few, so none copies a text or an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shown<'a> {
    Text(&'a str),
    Reasoning(&'a str),
    Tool {
        call_id: &'a str,
        tool_name: &'a str,
        state: &'static str,
        dynamic: bool,
        approved: Option<bool>,
        input: Option<Cow<'a, serde_json::Value>>,
    },
}

/// A message as shown: id, role and visible parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownMessage<'a> {
    pub id: &'a str,
    pub role: Role,
    pub parts: Vec<Shown<'a>>,
}

/// The messages a person sees: an assistant message with nothing visible
/// in it (a reply that has not produced anything yet, or whose only attempt
/// was taken back) is no message on screen.
pub fn shown(messages: &[Message]) -> Vec<ShownMessage<'_>> {
    let visible = |message: &ShownMessage| message.role != Role::Assistant || !message.parts.is_empty();
    messages.iter().map(shown_message).filter(visible).collect()
}

/// Whether a message shows at all: [`shown`] leaves out an assistant
/// message with nothing visible.
pub fn shows(message: &Message) -> bool {
    message.role != Role::Assistant || message.parts.iter().any(is_visible)
}

/// One message as shown.
pub fn shown_message(message: &Message) -> ShownMessage<'_> {
    let parts = message.parts.iter().filter_map(shown_part).collect();
    ShownMessage { id: &message.id, role: message.role, parts }
}

/// One part as shown: `None` for a part nobody sees.
pub fn shown_part(part: &Part) -> Option<Shown<'_>> {
    match part {
        Part::StepStart => None,
        Part::Text { text, .. } if text.is_empty() => None,
        Part::Reasoning { text, .. } if text.is_empty() => None,
        Part::Text { text, .. } => Some(Shown::Text(text)),
        Part::Reasoning { text, .. } => Some(Shown::Reasoning(text)),
        Part::Tool(tool) => Some(Shown::Tool {
            call_id: &tool.call_id,
            tool_name: &tool.tool_name,
            state: tool.state.as_str(),
            dynamic: tool.dynamic,
            // Later states say it themselves (denied, or the tool ran).
            approved: (tool.state == ToolState::ApprovalResponded)
                .then(|| tool.approval.as_ref().and_then(|approval| approval.approved))
                .flatten(),
            input: shown_input(tool),
        }),
    }
}

/// Whether two messages look the same on screen (as [`shown_message`]
/// shows them; an absent message and one with nothing visible alike),
/// compared in place: the checks that judge at every rest stay cheap.
pub fn look_the_same(one: Option<&Message>, other: Option<&Message>) -> bool {
    let (mut ones, mut others) = (visible_parts(one), visible_parts(other));
    loop {
        match (ones.next(), others.next()) {
            (None, None) => {
                return one.map(|message| message.role) == other.map(|message| message.role)
                    || no_role_shows(one, other)
            }
            (Some(part), Some(other_part)) if part_looks_the_same(part, other_part) => {}
            _ => return false,
        }
    }
}

/// Pairs of copies found to look the same, by who compares them: judging
/// the next copies of the same pair reads only from the first part either
/// side changed since (`Parts::changed_since`), the visible parts before
/// it being the same on both sides. A check that judges a growing message
/// at every rest stays linear in the history.
#[derive(Default)]
pub struct SameCopies<K: Ord> {
    pairs: BTreeMap<K, (SeenCopy, SeenCopy)>,
}

/// A copy of a message's parts, and where its visible parts lie.
#[derive(Default)]
struct SeenCopy {
    parts: Parts,
    visible: Vec<usize>,
}

impl SeenCopy {
    /// Where `parts` first differs from this copy, and how many of this
    /// copy's visible parts lie before that.
    fn unchanged_in(&self, parts: &Parts) -> (usize, usize) {
        let from = parts.changed_since(&self.parts).first().map_or(parts.len(), |range| range.start);
        (from, self.visible.partition_point(|&at| at < from))
    }

    /// Keeps the first `kept` visible parts, takes `parts` as the copy, and
    /// returns its visible parts from raw index `start` on.
    fn resume<'a>(
        &mut self,
        parts: &'a Parts,
        kept: usize,
        start: usize,
    ) -> impl Iterator<Item = (usize, &'a Part)> + 'a {
        self.visible.truncate(kept);
        self.parts = parts.clone();
        parts.range(start..).enumerate().map(move |(at, part)| (start + at, part)).filter(|(_, part)| is_visible(part))
    }
}

impl<K: Ord> SameCopies<K> {
    /// [`look_the_same`], remembering the pair under `key` when they do.
    pub fn look_the_same(&mut self, key: K, one: Option<&Message>, other: Option<&Message>) -> bool {
        let (Some(mine), Some(theirs)) = (one, other) else {
            self.pairs.remove(&key);
            return look_the_same(one, other);
        };
        // Messages of one chunk each are compared afresh, with no copies
        // kept (`Parts::is_one_chunk`).
        if mine.role != theirs.role || (mine.parts.is_one_chunk() && theirs.parts.is_one_chunk()) {
            self.pairs.remove(&key);
            return look_the_same(one, other);
        }
        let (mut my_copy, mut their_copy) = self.pairs.remove(&key).unwrap_or_default();
        let (my_from, my_before) = my_copy.unchanged_in(&mine.parts);
        let (their_from, their_before) = their_copy.unchanged_in(&theirs.parts);
        // The first `kept` visible parts are the same on both sides: they
        // were when last compared, and neither side changed them since.
        let kept = my_before.min(their_before);
        let start = |copy: &SeenCopy, before: usize, from: usize| if kept < before { copy.visible[kept] } else { from };
        let (my_start, their_start) =
            (start(&my_copy, my_before, my_from), start(&their_copy, their_before, their_from));
        let mut my_rest = my_copy.resume(&mine.parts, kept, my_start);
        let mut their_rest = their_copy.resume(&theirs.parts, kept, their_start);
        let (mut my_visible, mut their_visible) = (Vec::new(), Vec::new());
        let same = loop {
            match (my_rest.next(), their_rest.next()) {
                (None, None) => break true,
                (Some((my_at, part)), Some((their_at, other_part))) if part_looks_the_same(part, other_part) => {
                    my_visible.push(my_at);
                    their_visible.push(their_at);
                }
                _ => break false,
            }
        };
        if same {
            my_copy.visible.extend(my_visible);
            their_copy.visible.extend(their_visible);
            self.pairs.insert(key, (my_copy, their_copy));
        }
        same
    }
}

fn visible_parts(message: Option<&Message>) -> impl Iterator<Item = &Part> {
    message.into_iter().flat_map(|message| message.parts.iter()).filter(|part| is_visible(part))
}

/// Neither message shows anything: an assistant message with no visible
/// part is no message on screen.
fn no_role_shows(one: Option<&Message>, other: Option<&Message>) -> bool {
    let hidden = |message: Option<&Message>| message.is_none_or(|message| message.role == Role::Assistant);
    hidden(one) && hidden(other)
}

fn is_visible(part: &Part) -> bool {
    match part {
        Part::StepStart => false,
        Part::Text { text, .. } | Part::Reasoning { text, .. } => !text.is_empty(),
        Part::Tool(_) => true,
    }
}

fn part_looks_the_same(one: &Part, other: &Part) -> bool {
    match (one, other) {
        (Part::Text { text, .. }, Part::Text { text: other_text, .. })
        | (Part::Reasoning { text, .. }, Part::Reasoning { text: other_text, .. }) => text == other_text,
        (Part::Tool(tool), Part::Tool(other_tool)) => {
            let same = tool.call_id == other_tool.call_id
                && tool.tool_name == other_tool.tool_name
                && tool.state == other_tool.state
                && tool.dynamic == other_tool.dynamic;
            let decided = |tool: &ToolPart| tool.approval.as_ref().and_then(|approval| approval.approved);
            let approved = tool.state != ToolState::ApprovalResponded || decided(tool) == decided(other_tool);
            let input = (tool.input.is_some() && tool.input == other_tool.input)
                || shown_input(tool) == shown_input(other_tool);
            same && approved && input
        }
        _ => false,
    }
}

/// A tool's input as shown: none while it streams. An object input is
/// shown as it is (borrowed); anything else is normalised into one.
fn shown_input(tool: &ToolPart) -> Option<Cow<'_, serde_json::Value>> {
    if tool.state == ToolState::InputStreaming {
        return None;
    }
    match &tool.input {
        Some(input @ serde_json::Value::Object(_)) => Some(Cow::Borrowed(input)),
        Some(input) => Some(Cow::Owned(normalise_input(input.clone()))),
        None => serde_json::from_str(&tool.input_text).ok().map(|input| Cow::Owned(normalise_input(input))),
    }
}

/// A connected client's transcript, as its frames built it.
#[derive(Clone, Debug, Default)]
pub struct ClientView {
    pub messages: Vec<Message>,
    /// Whether the last recovery status it was sent says a recovery is
    /// under way (the "reconnecting..." a UI shows).
    pub recovering: bool,
    /// The crossing where the connection opened.
    pub opened_at: usize,
    /// Whether it was sent an `error` frame.
    pub told_a_failure: bool,
}

impl ClientView {
    /// The view after `frame`.
    pub fn apply(&mut self, frame: &Frame) {
        match frame {
            Frame::Messages(messages) => self.messages = messages.clone(),
            Frame::Chunk { message_id, chunk, .. } => apply_client_chunk(self.message(message_id), chunk),
            Frame::Reset { message, .. } => *self.message(&message.id) = message.clone(),
            Frame::Tool { call_id, state, .. } => {
                let tool = self.messages.iter_mut().find_map(|message| message.parts.tool_mut(call_id));
                if let Some(tool) = tool {
                    tool.state = *state;
                }
            }
            Frame::Recovering(recovering) => self.recovering = *recovering,
            Frame::Error { .. } => self.told_a_failure = true,
            Frame::Done { .. } | Frame::StreamResuming { .. } | Frame::ResumeNone => {}
        }
    }

    /// The view after the client sent an answer itself: a UI shows its own
    /// answer once it sends it (the AI SDK's `addToolOutput` and
    /// `addToolApprovalResponse` set the part in its last message), where
    /// that part waits for it. An engine's echo of it then changes nothing.
    pub fn answer(&mut self, call_id: &str, answer: Answer) {
        let Some(tool) = self.messages.last_mut().and_then(|message| message.parts.tool_mut(call_id)) else {
            return;
        };
        match answer {
            Answer::Result(outcome) => {
                let waits = matches!(
                    tool.state,
                    ToolState::InputAvailable | ToolState::ApprovalRequested | ToolState::ApprovalResponded
                );
                if !waits {
                    return;
                }
                match outcome {
                    ToolOutcome::Output(output) => {
                        tool.state = ToolState::OutputAvailable;
                        tool.output = Some(output.clone());
                    }
                    ToolOutcome::Error(text) => {
                        tool.state = ToolState::OutputError;
                        tool.error_text = text.clone();
                    }
                }
            }
            Answer::Approval(approved) if tool.state == ToolState::ApprovalRequested => {
                tool.state = ToolState::ApprovalResponded;
                let id = tool.approval.as_ref().map(|approval| approval.id.clone()).unwrap_or_default();
                tool.approval = Some(Approval { id, approved: Some(approved) });
            }
            Answer::Approval(_) => {}
        }
    }

    /// The message with `id`; a new assistant message the first time it streams.
    fn message(&mut self, id: &str) -> &mut Message {
        let at = match self.messages.iter().position(|message| message.id == id) {
            Some(at) => at,
            None => {
                self.messages.push(Message::assistant(id));
                self.messages.len() - 1
            }
        };
        &mut self.messages[at]
    }
}

/// A client's own answer to a call, as it sent it.
#[derive(Clone, Copy, Debug)]
pub enum Answer<'a> {
    Result(&'a ToolOutcome),
    Approval(bool),
}

impl<'a> Answer<'a> {
    /// The answer an input carries, the call it answers and the connection
    /// it was sent over.
    pub fn of(crossing: &'a Boundary) -> Option<(u64, &'a str, Self)> {
        match crossing {
            Boundary::ToolResult { result, connection: Some(connection), .. } => {
                Some((*connection, &result.call_id, Self::Result(&result.outcome)))
            }
            Boundary::Approval { call_id, approved, connection: Some(connection), .. } => {
                Some((*connection, call_id, Self::Approval(*approved)))
            }
            _ => None,
        }
    }
}

/// A chunk as a client applies it (the AI SDK's UI stream reader): a
/// delta goes into the text, reasoning or tool input it names only while
/// that part is open (started and not ended); a delta for a part the client
/// never saw start, or saw end, is shown nowhere. A transcript may name a
/// streaming part otherwise than the stream does (the store's part ids are
/// the engine's): a delta whose id names no open part goes into the last
/// open part of its kind. A finished tool call opens its part if the
/// client never saw its input start.
fn apply_client_chunk(message: &mut Message, chunk: &Chunk) {
    match chunk {
        Chunk::TextDelta { id, delta } | Chunk::ReasoningDelta { id, delta } => {
            let reasoning = matches!(chunk, Chunk::ReasoningDelta { .. });
            if let Some(Part::Text { text, .. } | Part::Reasoning { text, .. }) = open_part(message, id, reasoning) {
                text.push_str(delta);
            }
        }
        Chunk::TextEnd { id } | Chunk::ReasoningEnd { id } => {
            let reasoning = matches!(chunk, Chunk::ReasoningEnd { .. });
            if let Some(Part::Text { state, .. } | Part::Reasoning { state, .. }) = open_part(message, id, reasoning) {
                *state = TextState::Done;
            }
        }
        _ => message.apply_chunk(chunk),
    }
}

/// The open text (or reasoning) part `id`, or else the last open one of
/// its kind.
fn open_part<'a>(message: &'a mut Message, id: &str, reasoning: bool) -> Option<&'a mut Part> {
    let named = message.parts.rposition(|part| is_open_text(part, reasoning) && part_id(part) == Some(id));
    let at = named.or_else(|| message.parts.rposition(|part| is_open_text(part, reasoning)))?;
    message.parts.get_mut(at)
}

fn is_open_text(part: &Part, reasoning: bool) -> bool {
    match (part, reasoning) {
        (Part::Text { state, .. }, false) | (Part::Reasoning { state, .. }, true) => *state == TextState::Streaming,
        _ => false,
    }
}

fn part_id(part: &Part) -> Option<&str> {
    match part {
        Part::Text { id, .. } | Part::Reasoning { id, .. } => Some(id),
        _ => None,
    }
}

/// The views of the connections still open at the end of the run, by
/// connection id.
pub fn open_client_views(history: &History) -> BTreeMap<u64, ClientView> {
    let mut views = ClientViews::default();
    for (index, crossing) in history.iter().enumerate() {
        views.step(index, &crossing.what);
    }
    views.open
}

/// Every client's view, followed crossing by crossing. A connection closes
/// on its disconnect or when the engine process dies, unless it outlives a
/// memory-only eviction: then, once the new process is handed it (its
/// `connect`), it shows what it showed before and what it is sent from
/// then on. One the client closed before that was never handed over.
#[derive(Default)]
pub struct ClientViews {
    pub open: BTreeMap<u64, ClientView>,
    killed: BTreeMap<u64, ClientView>,
    kept: BTreeMap<u64, ClientView>,
    /// Connections offered a resume and not yet acked: the engine sends
    /// them nothing until the ack, so they may lag behind it.
    held: BTreeMap<u64, String>,
}

impl ClientViews {
    pub fn step(&mut self, index: usize, crossing: &Boundary) {
        match crossing {
            Boundary::Connect { connection } => {
                let view =
                    self.kept.remove(connection).unwrap_or(ClientView { opened_at: index, ..ClientView::default() });
                self.open.insert(*connection, view);
                self.held.remove(connection);
            }
            Boundary::Disconnect { connection } => {
                self.open.remove(connection);
                self.held.remove(connection);
            }
            Boundary::Killed => {
                self.killed = std::mem::take(&mut self.open);
                self.kept.clear();
                self.held.clear();
            }
            Boundary::KeptOpen { connections } => {
                self.kept = connections.iter().filter_map(|id| self.killed.remove_entry(id)).collect();
            }
            Boundary::ResumeAck { connection, request_id } if self.held.get(connection) == Some(request_id) => {
                self.held.remove(connection);
            }
            Boundary::ToolResult { .. } | Boundary::Approval { .. } => {
                if let Some((connection, call_id, answer)) = Answer::of(crossing) {
                    if let Some(view) = self.open.get_mut(&connection) {
                        view.answer(call_id, answer);
                    }
                }
            }
            Boundary::Frame { connection, frame } => {
                if let Frame::StreamResuming { request_id } = frame {
                    self.held.insert(*connection, request_id.clone());
                }
                if let Some(view) = self.open.get_mut(connection) {
                    view.apply(frame);
                }
            }
            _ => {}
        }
    }

    /// The open connections the engine is not holding back.
    pub fn in_step(&self) -> impl Iterator<Item = (&u64, &ClientView)> {
        self.open.iter().filter(|(connection, _)| !self.held.contains_key(connection))
    }
}

/// What a `chat()` caller showed when its call ended.
#[derive(Clone, Debug)]
pub struct CallerOutcome {
    pub chat: u32,
    /// Where the chat was sent (index into the history).
    pub sent_at: usize,
    /// The user text the caller sent.
    pub sent: String,
    /// The text it shows: deltas since `on_start`, as the last reset left them.
    pub text: String,
    /// Where `on_done` came (index into the history), if it did.
    pub done_at: Option<usize>,
    /// Where the engine made that call: later than `done_at` only on a slow
    /// caller link, and the store to judge by is the one it answered from.
    pub done_sent_at: Option<usize>,
}

pub fn caller_outcomes(history: &History) -> Vec<CallerOutcome> {
    let mut outcomes: Vec<CallerOutcome> = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::Chat { chat, text, again: false } => outcomes.push(CallerOutcome {
                chat: *chat,
                sent_at: index,
                sent: text.clone(),
                text: String::new(),
                done_at: None,
                done_sent_at: None,
            }),
            Boundary::Callback { chat, call, sent_at } => {
                let Some(outcome) = outcomes.iter_mut().rev().find(|outcome| outcome.chat == *chat) else {
                    continue;
                };
                match call {
                    CallbackCall::Event { chunk: Chunk::TextDelta { delta, .. } } => outcome.text.push_str(delta),
                    CallbackCall::Reset { text } => outcome.text = text.clone(),
                    CallbackCall::Done => {
                        outcome.done_at = Some(index);
                        outcome.done_sent_at = Some(sent_at.unwrap_or(index));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    outcomes
}

/// The text of the assistant reply to the `nth` (0-based) user message that
/// reads `text`: the first assistant message after it, before the next user
/// message. `None`: no such user message.
pub fn stored_reply(messages: &[Message], text: &str, nth: usize) -> Option<String> {
    let position = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == Role::User && message.text() == text)
        .nth(nth)
        .map(|(at, _)| at)?;
    let reply = messages[position + 1..].iter().take_while(|message| message.role != Role::User);
    Some(reply.filter(|message| message.role == Role::Assistant).map(Message::text).collect())
}

/// Where each user text came in, over any of the three ways in, in order.
/// A message that came before is not new: a `chat()` call the caller's
/// link delivered again, or a delivery whose id the chat platform
/// delivered before.
pub fn new_messages(history: &History) -> Vec<(usize, &str)> {
    let mut deliveries: BTreeSet<&str> = BTreeSet::new();
    let mut brought = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::UserMessage { text } | Boundary::Chat { text, again: false, .. } => {
                brought.push((index, text.as_str()))
            }
            Boundary::Deliver { delivery, text } if deliveries.insert(delivery) => brought.push((index, text.as_str())),
            _ => {}
        }
    }
    brought
}

/// Which occurrence (0-based) of its text the send at `index` is, counting
/// every earlier message that brought the same text (`new_messages`: the
/// run's [`new_messages`]).
pub fn occurrence(new_messages: &[(usize, &str)], index: usize, text: &str) -> usize {
    new_messages.iter().filter(|&&(at, brought)| at < index && brought == text).count()
}

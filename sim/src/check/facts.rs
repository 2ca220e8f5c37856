//! Facts derived once from a run's boundary history, shared by the
//! checkers: each model call (what it was shown, what it streamed, how its
//! stream ended), the callbacks of each `chat()`, the posts of each
//! delivery, and where the process died. Nothing here reads what the engine
//! says of itself, so the same facts hold for any engine that speaks the
//! boundary.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::Write;
use turnsim_engine::ports::{Frame, ModelRequest};
use turnsim_engine::{Chunk, FinishReason, Message, Part, Parts, Role, ToolPart, ToolState};

use super::seen::SeenMessages;
pub use crate::history::has_content;
use crate::history::{Boundary, CallbackCall, History, StreamEnd};

/// How a model call's stream ended, as the provider and the world saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEnd {
    Finished {
        reason: FinishReason,
        output_tokens: u32,
    },
    Parked,
    Cut,
    Http {
        status: u16,
    },
    /// The engine closed the stream before the provider was done.
    Abandoned,
    /// The engine process died with the stream open.
    Killed,
    /// Still streaming when the run ended.
    Open,
}

impl CallEnd {
    /// The stream stopped without a finish or an error status: stalled,
    /// cut, closed by the engine, killed with the process, or still open.
    pub fn is_cut_off(&self) -> bool {
        matches!(self, Self::Parked | Self::Cut | Self::Abandoned | Self::Killed | Self::Open)
    }

    /// A failure the provider invites a retry of (429, 5xx).
    pub fn is_retryable_http(&self) -> bool {
        matches!(self, Self::Http { status } if *status == 429 || *status >= 500)
    }
}

/// What a model request picks up from, read from the transcript it shows:
/// its last message, once trailing assistant messages with nothing in them
/// (the reply the call is about to write) are set aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Basis {
    /// Answers a user message: a new turn, or a retry of one that kept nothing.
    User { message_id: String },
    /// Continues after a tool batch: the last step of the reply holds tool calls.
    Batch { message_id: String, call_ids: Vec<String> },
    /// Continues a reply whose last step holds only text or reasoning.
    Partial { message_id: String },
    /// Shows nothing to answer.
    Empty,
}

#[derive(Clone, Debug)]
pub struct CallFact {
    /// The call's number (from 1, in request order).
    pub call: u32,
    /// Index of the request in the history.
    pub at: usize,
    /// The assistant message the call streams into, when the request names it.
    pub target: Option<String>,
    pub basis: Basis,
    /// Text, reasoning and tool-input chunks the call streamed.
    pub content_chunks: u32,
    /// Tool calls the call streamed, by call id.
    pub tools: Vec<String>,
    /// The same, for looking one up.
    tool_set: BTreeSet<String>,
    /// Where the chunks that build the reply crossed: the reply is rebuilt
    /// from them only when asked (a check asks of few calls).
    applied: Vec<usize>,
    /// What the call streamed on an empty reply, built from `applied` the
    /// first time a check asks (several checks ask of the same call).
    streamed: OnceCell<Message>,
    pub end: CallEnd,
    /// Index of the crossing that ended the stream, if one did.
    pub ended_at: Option<usize>,
    /// Index of the last chunk the call streamed.
    pub last_chunk_at: Option<usize>,
    /// Index of the crossing where the engine let go of the call: chunks
    /// taken after it were already on their way, and count for nothing.
    pub cancelled_at: Option<usize>,
}

impl CallFact {
    /// The provider ended the step without output (empty `unknown`, or an
    /// empty `stop` that streamed nothing).
    pub fn is_truncated_finish(&self) -> bool {
        match &self.end {
            CallEnd::Finished { reason, output_tokens: 0 } => {
                *reason == FinishReason::Unknown || (*reason == FinishReason::Stop && self.content_chunks == 0)
            }
            _ => false,
        }
    }

    /// A finish the engine should take as the step's answer.
    pub fn finished_with_output(&self) -> bool {
        matches!(self.end, CallEnd::Finished { .. }) && !self.is_truncated_finish() && self.content_chunks > 0
    }

    /// The stream stopped inside a tool call's input: the last part the
    /// call built is a tool call whose input was still streaming, and no
    /// finish finalised it.
    pub fn ends_mid_tool_input(&self, history: &History) -> bool {
        let Some(reply) = self.reply(history) else { return false };
        let last = reply.parts.iter().rev().find(|part| !matches!(part, Part::StepStart));
        let streaming = matches!(last, Some(Part::Tool(tool)) if tool.state == ToolState::InputStreaming);
        streaming && !matches!(self.end, CallEnd::Finished { .. })
    }

    /// The reply as the call's chunks build it onto what the request showed
    /// (the shared message format's own chunk rules), when the request
    /// names the reply.
    fn reply(&self, history: &History) -> Option<Message> {
        let messages = &self.request(history).messages;
        let mut reply = messages.last().filter(|message| message.role == Role::Assistant)?.clone();
        for &at in &self.applied {
            if let Boundary::ModelChunk { chunk, .. } = &history.crossings[at].what {
                reply.apply_chunk(chunk);
            }
        }
        Some(reply)
    }

    /// The text and reasoning parts the call streamed, as its chunks build
    /// them on an empty reply: (whether it is reasoning, its text), empty
    /// ones left out. What the call added, without what the request showed.
    pub fn streamed_texts(&self, history: &History) -> Vec<(bool, String)> {
        let streamed = self.streamed(history);
        let texts = streamed.parts.iter().filter_map(text_of).filter(|(_, text)| !text.is_empty());
        texts.map(|(reasoning, text)| (reasoning, text.to_string())).collect()
    }

    /// The tool calls the call streamed, each with the input the model gave
    /// it: the `tool-call`'s input, or the streamed input text when it
    /// parses (a call finalised only at `finish-step`). A call whose input
    /// never became whole has none.
    pub fn streamed_tools(&self, history: &History) -> Vec<(ToolPart, Option<serde_json::Value>)> {
        let streamed = self.streamed(history);
        let tools = streamed.parts.iter().filter_map(|part| match part {
            Part::Tool(tool) => Some(tool.clone()),
            _ => None,
        });
        tools
            .map(|tool| {
                let input = tool.input.clone().or_else(|| serde_json::from_str(&tool.input_text).ok());
                (tool, input)
            })
            .collect()
    }

    /// What the call streamed, built on an empty reply by the shared
    /// message format's chunk rules, once: `history` is the one the facts
    /// were derived from, each time.
    fn streamed(&self, history: &History) -> &Message {
        self.streamed.get_or_init(|| {
            let mut streamed = Message { id: String::new(), role: Role::Assistant, parts: Parts::new() };
            for &at in &self.applied {
                if let Boundary::ModelChunk { chunk, .. } = &history.crossings[at].what {
                    streamed.apply_chunk(chunk);
                }
            }
            streamed
        })
    }

    fn add_tool(&mut self, id: &str) {
        if !self.tool_set.contains(id) {
            self.tool_set.insert(id.to_string());
            self.tools.push(id.to_string());
        }
    }

    /// The request the call was sent.
    pub fn request<'a>(&self, history: &'a History) -> &'a ModelRequest {
        match &history.crossings[self.at].what {
            Boundary::ModelRequest { request, .. } => request,
            other => unreachable!("call #{} points at {other:?}", self.call),
        }
    }
}

/// One call on a `chat()` callback, where it crossed.
#[derive(Clone, Debug)]
pub struct CallbackFact {
    /// Index in the history.
    pub at: usize,
    /// Where the engine made the call: earlier than `at` on a slow caller
    /// link.
    pub sent_at: usize,
    pub name: &'static str,
}

/// One post the engine made to the chat surface.
#[derive(Clone, Debug)]
pub struct PostFact {
    /// Index in the history.
    pub at: usize,
    pub at_us: u64,
    /// The post's number (the engine's posts count from 1).
    pub post: u32,
    pub text: String,
    /// False when the surface refused it: nothing was shown.
    pub shown: bool,
    /// Where the engine took the surface's answer to it, if it did.
    pub answered: Option<usize>,
    /// The engine made it while handling the answer to the delivery's
    /// previous post (at its time, no other input in between): the same
    /// reply going on.
    pub chained: bool,
}

/// A delivery's posts split into bursts, each a reply going out one post
/// after another: a post the engine did not make on the answer to the one
/// before (while handling it, at its sim time) starts a new burst.
pub fn post_bursts(posts: &[PostFact]) -> Vec<&[PostFact]> {
    let mut bursts = Vec::new();
    let mut start = 0;
    for at in 1..=posts.len() {
        if at == posts.len() || !posts[at].chained {
            bursts.push(&posts[start..at]);
            start = at;
        }
    }
    bursts
}

#[derive(Default)]
pub struct Facts {
    pub calls: Vec<CallFact>,
    /// Callback calls per chat id, in order.
    pub callbacks: BTreeMap<u32, Vec<CallbackFact>>,
    /// Where each `chat()` was called (index in the history), by chat id.
    pub chat_called: BTreeMap<u32, usize>,
    /// Posts the engine made per delivery id, shown or refused, in order.
    pub posts: BTreeMap<String, Vec<PostFact>>,
    /// The delivery and post whose answer the engine took last, and when,
    /// while no other input has come in since.
    answering: Option<(String, u32, u64)>,
    /// Where the engine process was killed (indices in the history).
    pub kills: Vec<usize>,
    /// Where an engine process booted (indices in the history).
    pub boots: Vec<usize>,
    /// Where the store accepted a commit (indices in the history).
    pub commits: Vec<usize>,
    /// Where an answer to each tool call came in (tool results, approvals).
    pub answers: BTreeMap<String, Vec<usize>>,
    /// Where each tool call first waited for an answer (stored or shown to a
    /// client as `input-available` or `approval-requested`).
    pub asked: BTreeMap<String, usize>,
    /// Where the engine asked for each server tool call to run (indices in
    /// the history, in order).
    pub server_tool_runs: BTreeMap<String, Vec<usize>>,
    /// The messages commits stored, as last stored.
    committed: SeenMessages,
}

impl Facts {
    pub fn derive(history: &History) -> Self {
        let mut facts = Self::default();
        for (index, crossing) in history.iter().enumerate() {
            facts.absorb(index, crossing.at_us, &crossing.what);
        }
        facts
    }

    fn absorb(&mut self, index: usize, at_us: u64, what: &Boundary) {
        if what.is_input() {
            self.answering = None;
        }
        match what {
            Boundary::Killed => self.on_kill(index),
            Boundary::Boot { .. } => self.boots.push(index),
            Boundary::ModelRequest { call, request } => self.calls.push(new_call(*call, index, request)),
            Boundary::ModelChunk { call, chunk } => self.on_chunk(*call, index, chunk),
            Boundary::ModelEnd { call, end } => self.end_call(*call, index, end_from(end)),
            Boundary::ModelCancel { call } => {
                if let Some(fact) = self.calls.iter_mut().rev().find(|fact| fact.call == *call) {
                    fact.cancelled_at.get_or_insert(index);
                }
            }
            Boundary::Chat { chat, .. } => {
                self.callbacks.entry(*chat).or_default();
                self.chat_called.entry(*chat).or_insert(index);
            }
            Boundary::Callback { chat, call, sent_at } => {
                let fact = CallbackFact { at: index, sent_at: sent_at.unwrap_or(index), name: callback_name(call) };
                self.callbacks.entry(*chat).or_default().push(fact);
            }
            Boundary::Post { post, delivery, text } => self.on_post(index, at_us, *post, delivery, text, true),
            Boundary::PostRefused { post, delivery, text, .. } => {
                self.on_post(index, at_us, *post, delivery, text, false)
            }
            Boundary::PostDone { post, delivery, .. } => {
                let posts = self.posts.entry(delivery.clone()).or_default();
                if let Some(fact) = posts.iter_mut().rev().find(|fact| fact.post == *post) {
                    fact.answered.get_or_insert(index);
                }
                self.answering = Some((delivery.clone(), *post, at_us));
            }
            Boundary::ToolResult { result, .. } => self.answers.entry(result.call_id.clone()).or_default().push(index),
            Boundary::Approval { call_id, .. } => self.answers.entry(call_id.clone()).or_default().push(index),
            Boundary::Commit { writes } => {
                self.commits.push(index);
                self.on_commit(index, writes)
            }
            Boundary::ServerToolCall { call } => {
                self.server_tool_runs.entry(call.call_id.clone()).or_default().push(index)
            }
            Boundary::Frame { frame: Frame::Tool { call_id, state, .. }, .. } if state.is_pending() => {
                self.asked.entry(call_id.clone()).or_insert(index);
            }
            _ => {}
        }
    }

    fn on_post(&mut self, at: usize, at_us: u64, post: u32, delivery: &str, text: &str, shown: bool) {
        let posts = self.posts.entry(delivery.to_string()).or_default();
        // Handling an input takes no sim time: a post made on an answer is
        // made at the answer's time.
        let chained = posts
            .last()
            .is_some_and(|previous| self.answering.as_ref() == Some(&(delivery.to_string(), previous.post, at_us)));
        if chained {
            // One post carries the reply on; a second one would be a reply of its own.
            self.answering = None;
        }
        posts.push(PostFact { at, at_us, post, text: text.to_string(), shown, answered: None, chained });
    }

    /// A call waiting in a part a commit did not change waited at the
    /// commit that stored it so: only the changed parts are read.
    fn on_commit(&mut self, index: usize, writes: &[Write]) {
        for message in writes.iter().filter_map(Write::message) {
            for at in self.committed.changed(message) {
                if let Part::Tool(tool) = &message.parts[at] {
                    if tool.state.is_pending() && !self.asked.contains_key(&tool.call_id) {
                        self.asked.insert(tool.call_id.clone(), index);
                    }
                }
            }
        }
    }

    fn on_kill(&mut self, index: usize) {
        self.kills.push(index);
        for call in self.calls.iter_mut().filter(|call| call.end == CallEnd::Open) {
            call.end = CallEnd::Killed;
            call.ended_at = Some(index);
        }
    }

    fn on_chunk(&mut self, call: u32, index: usize, chunk: &Chunk) {
        let Some(fact) = self.calls.iter_mut().rev().find(|fact| fact.call == call) else {
            return;
        };
        if fact.cancelled_at.is_some() || matches!(chunk, Chunk::Finish { .. }) {
            // The stream's closing formality after `finish-step`: the step
            // was over, and the engine may have moved on before it arrived.
            return;
        }
        fact.last_chunk_at = Some(index);
        if chunk.is_output() {
            fact.content_chunks += 1;
        }
        fact.applied.push(index);
        match chunk {
            Chunk::ToolInputStart { id, .. } | Chunk::ToolCall { id, .. } => fact.add_tool(id),
            Chunk::FinishStep { reason, usage } if fact.end == CallEnd::Open => {
                fact.end = CallEnd::Finished { reason: *reason, output_tokens: usage.output_tokens };
                fact.ended_at = Some(index);
            }
            _ => {}
        }
    }

    fn end_call(&mut self, call: u32, index: usize, end: CallEnd) {
        if let Some(fact) = self.calls.iter_mut().rev().find(|fact| fact.call == call) {
            if fact.end == CallEnd::Open {
                fact.end = end;
                fact.ended_at = Some(index);
            }
        }
    }

    /// Whether the engine process was killed at or after history index
    /// `from` and before `to`.
    pub fn killed_between(&self, from: usize, to: usize) -> bool {
        self.kills.iter().any(|&at| at >= from && at < to)
    }

    /// Whether the process was killed after history index `from` before
    /// the store accepted any commit: nothing it decided from `from` on
    /// reached the store, so the next process finds the store as if it had
    /// died at `from`.
    pub fn died_unrecorded(&self, from: usize) -> bool {
        let Some(kill) = self.kills.iter().copied().find(|&at| at > from) else {
            return false;
        };
        !self.commits.iter().any(|&at| at > from && at < kill)
    }

    /// Whether no engine process was up at history index `index`: one was
    /// killed and none has booted since.
    pub fn down_at(&self, index: usize) -> bool {
        let last = |at: &[usize]| at.iter().copied().filter(|&at| at < index).max();
        match (last(&self.kills), last(&self.boots)) {
            (Some(killed), Some(booted)) => killed > booted,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Whether `call_id` waited for an answer before history index `before`.
    pub fn asked_before(&self, call_id: &str, before: usize) -> bool {
        self.asked.get(call_id).is_some_and(|&at| at < before)
    }

    /// Whether an answer to `call_id` came in before history index `before`.
    pub fn answered_before(&self, call_id: &str, before: usize) -> bool {
        self.answers.get(call_id).is_some_and(|answers| answers.iter().any(|&at| at < before))
    }

    /// The tool batches a client answered that a model request picked up
    /// afterwards, each counted once however many attempts it took: (reply,
    /// call ids). These are the continuations, whatever the engine calls the
    /// turn that made the request (a recovery that takes a batch is its
    /// continuation too).
    pub fn continued_batches(&self) -> Vec<(&str, &[String])> {
        self.continuations().into_iter().map(|(_, message_id, call_ids)| (message_id, call_ids)).collect()
    }

    /// As [`Self::continued_batches`], each with the history index of the
    /// first request that picked it up.
    pub fn continuations(&self) -> Vec<(usize, &str, &[String])> {
        let mut batches: Vec<(usize, &str, &[String])> = Vec::new();
        let mut seen: BTreeSet<(&str, &[String])> = BTreeSet::new();
        for call in &self.calls {
            let Basis::Batch { message_id, call_ids } = &call.basis else { continue };
            let answered = call_ids.iter().any(|call_id| self.answered_before(call_id, call.at));
            if answered && seen.insert((message_id, call_ids)) {
                batches.push((call.at, message_id, call_ids));
            }
        }
        batches
    }

    /// The calls that streamed into message `message_id`, in order.
    pub fn calls_into<'a>(&'a self, message_id: &'a str) -> impl Iterator<Item = &'a CallFact> + 'a {
        self.calls.iter().filter(move |call| call.target.as_deref() == Some(message_id))
    }
}

fn new_call(call: u32, at: usize, request: &ModelRequest) -> CallFact {
    CallFact {
        call,
        at,
        target: target_message(&request.messages),
        basis: basis(&request.messages, request.continuation),
        content_chunks: 0,
        tools: Vec::new(),
        tool_set: BTreeSet::new(),
        applied: Vec::new(),
        streamed: OnceCell::new(),
        end: CallEnd::Open,
        ended_at: None,
        last_chunk_at: None,
        cancelled_at: None,
    }
}

fn end_from(end: &StreamEnd) -> CallEnd {
    match end {
        StreamEnd::Parked => CallEnd::Parked,
        StreamEnd::Cut => CallEnd::Cut,
        StreamEnd::Http { status, .. } => CallEnd::Http { status: *status },
        StreamEnd::Abandoned => CallEnd::Abandoned,
    }
}

fn callback_name(call: &CallbackCall) -> &'static str {
    match call {
        CallbackCall::Start { .. } => "on_start",
        CallbackCall::Event { .. } => "on_event",
        CallbackCall::Reset { .. } => "on_reset",
        CallbackCall::Done => "on_done",
        CallbackCall::Error { .. } => "on_error",
        CallbackCall::Interrupted => "on_interrupted",
        CallbackCall::Dropped => "dropped",
    }
}

/// The reply a request's output goes into: its last message, when that is
/// an assistant message (the reply so far, about to grow).
fn target_message(messages: &[Message]) -> Option<String> {
    messages.last().filter(|message| message.role == Role::Assistant).map(|message| message.id.clone())
}

/// What the request continues, from its last message that has content. A
/// request that starts a new reply after an earlier one (its last message
/// is an empty assistant message, not the earlier reply) answers the last
/// user message afresh, leaving the earlier reply behind; unless it is a
/// `continuation`: an engine may store a continuation's answer as a
/// message of its own (Cloudflare's Think does), and it still continues
/// the reply before it.
pub fn basis(messages: &[Message], continuation: bool) -> Basis {
    let Some(leaf) = messages.iter().rev().find(|message| message.role == Role::User || has_content(message)) else {
        return Basis::Empty;
    };
    let new_reply = target_message(messages).is_some_and(|target| target != leaf.id);
    if leaf.role == Role::User || (new_reply && !continuation) {
        return match messages.iter().rev().find(|message| message.role == Role::User) {
            Some(user) => Basis::User { message_id: user.id.clone() },
            None => Basis::Empty,
        };
    }
    let message_id = leaf.id.clone();
    let call_ids: Vec<String> = last_step_tools(leaf).map(|tool| tool.call_id.clone()).collect();
    if call_ids.is_empty() {
        Basis::Partial { message_id }
    } else {
        Basis::Batch { message_id, call_ids }
    }
}

/// Whether a consumer was told, at history index `since` or later, that
/// the engine could not answer: an error frame or callback, the exhausted
/// hook (one that did not throw), a messenger apology shown, or a terminal
/// status stored for clients that connect later.
pub fn told_failure_since(history: &History, since: usize) -> bool {
    told_failure_between(history, since, history.crossings.len())
}

/// Whether a consumer was told so at an index from `since` up to (not
/// including) `until`.
pub fn told_failure_between(history: &History, since: usize, until: usize) -> bool {
    use turnsim_engine::messenger::{
        EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE,
    };
    let apologies = [EMPTY_MESSENGER_RESPONSE, ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE];
    let until = until.min(history.crossings.len());
    history.crossings[since.min(until)..until].iter().any(|crossing| match &crossing.what {
        Boundary::Frame { frame: Frame::Error { .. }, .. } | Boundary::Exhausted { threw: None, .. } => true,
        Boundary::Callback { call: CallbackCall::Error { .. }, .. } => true,
        Boundary::Post { text, .. } => apologies.contains(&text.as_str()),
        Boundary::Commit { writes } => writes.iter().any(|write| matches!(write, Write::Terminal(Some(_)))),
        _ => false,
    })
}

/// The tool calls of a message's last step (after its last `step-start`
/// that has something after it).
/// Read from the end: a long reply's earlier steps are not read.
pub fn last_step_tools(message: &Message) -> impl Iterator<Item = &ToolPart> {
    let parts = &message.parts;
    let content_end = parts.rposition(|part| !matches!(part, Part::StepStart)).map_or(0, |at| at + 1);
    let step_start = (0..content_end).rev().find(|&at| matches!(parts[at], Part::StepStart)).map_or(0, |at| at + 1);
    parts.range(step_start..content_end).filter_map(|part| match part {
        Part::Tool(tool) => Some(tool),
        _ => None,
    })
}

/// The messages a crossing shows: a transcript frame, a model request, a
/// commit's messages.
pub fn shown_messages(what: &Boundary) -> Vec<&Message> {
    match what {
        Boundary::Frame { frame: Frame::Messages(messages), .. } => messages.iter().collect(),
        Boundary::Frame { frame: Frame::Reset { message, .. }, .. } => vec![message],
        Boundary::ModelRequest { request, .. } => request.messages.iter().collect(),
        Boundary::Commit { writes } => writes.iter().filter_map(Write::message).collect(),
        _ => Vec::new(),
    }
}

/// A text or reasoning part's text: (whether it is reasoning, the text).
pub fn text_of(part: &Part) -> Option<(bool, &str)> {
    match part {
        Part::Text { text, .. } => Some((false, text)),
        Part::Reasoning { text, .. } => Some((true, text)),
        _ => None,
    }
}

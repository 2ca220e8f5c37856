//! Turn lifecycle: accepting input, the serial queue, starting and ending turns.

use crate::config::TurnOptions;
use crate::durable::{InFlightTurn, TurnKind, Write};
use crate::events::{EngineEvent, TurnStatus};
use crate::ports::{Frame, StreamCallback};
use crate::transcript::{leaf_assistant, Message, Part, Role};

use super::Session;

/// The store's record of a `chat()` call's key, among the engine's own entries.
const CHAT_KEY_PREFIX: &str = "chat:";

/// A turn waiting its place in the serial queue.
pub(crate) struct QueuedTurn {
    pub request_id: String,
    pub kind: TurnKind,
    pub root_request_id: String,
    pub callback: Option<Box<dyn StreamCallback>>,
    pub delivery_id: Option<String>,
    pub incident_id: Option<String>,
    pub options: TurnOptions,
    /// The user message this turn answers, when it came with one.
    pub answers: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A model call is streaming.
    Streaming,
    /// Server tools of the finished step are executing.
    ServerTools,
    /// Waiting out a provider retry backoff.
    RetryWait,
}

/// The running turn. Its `assistant` is the in-flight accumulator.
pub(crate) struct Turn {
    pub request_id: String,
    pub kind: TurnKind,
    pub root_request_id: String,
    pub callback: Option<Box<dyn StreamCallback>>,
    pub incident_id: Option<String>,
    pub assistant: Message,
    pub step: u32,
    /// Model calls made for the current step.
    pub attempt: u32,
    /// Parts at or past this index belong to the current attempt.
    pub part_floor: usize,
    /// Parts at or past this index came from this turn (a continuation
    /// extends a message that already had parts).
    pub turn_floor: usize,
    /// The current attempt sent consumers at least one chunk.
    pub attempt_streamed: bool,
    /// The current attempt streamed content (text, reasoning or tool input).
    pub attempt_output: bool,
    /// Any attempt of this turn streamed content.
    pub produced_output: bool,
    /// Content chunks since the last durable flush.
    pub unflushed_chunks: u32,
    pub flushed_once: bool,
    /// Where a reply the store does not hold yet goes: right after this
    /// message (the user message it answers), ahead of user messages that
    /// came in while it ran.
    pub after: Option<String>,
    pub phase: Phase,
    pub outstanding_server_tools: Vec<String>,
    /// Server tools the current attempt started, run or running: when the
    /// attempt fails, its retry keeps them (they ran; their results stay).
    pub attempt_server_tools: Vec<String>,
    /// The stream stalled while server tools it called were still running:
    /// the stall is handled once they are done, so no result is dropped.
    pub stall_pending: bool,
    /// This turn's stall watchdog timeout (0 = off).
    pub stall_timeout_ms: u64,
    /// The turn failed because the store refused one of its writes.
    pub store_refused: bool,
}

impl Session {
    /// Stores a user message (the acknowledgement) and queues its turn.
    pub(super) fn accept_user_message(
        &mut self,
        text: String,
        options: TurnOptions,
        callback: Option<Box<dyn StreamCallback>>,
    ) {
        self.store_and_enqueue(&text, options, callback, Vec::new());
    }

    /// A `chat()` call, taken once per key: a call delivered again (a link
    /// that retries) is the call already taken, whose callback already has
    /// its answer coming, so the repeat's callback is let go unused. The
    /// key is stored with the user message, so a repeat that reaches a
    /// restarted process is known too.
    pub(super) fn accept_chat(
        &mut self,
        key: String,
        text: String,
        options: TurnOptions,
        callback: Box<dyn StreamCallback>,
    ) {
        let record = format!("{CHAT_KEY_PREFIX}{key}");
        if self.durable.extra.contains_key(&record) || !self.chats_taken.insert(key.clone()) {
            self.observe(EngineEvent::ChatRepeated { key });
            return;
        }
        let write = Write::Put { key: record, value: serde_json::Value::Bool(true) };
        self.store_and_enqueue(&text, options, Some(callback), vec![write]);
    }

    /// Stores the user message together with `writes`, atomically, then queues
    /// its turn. `on_start` comes first, as the `chat()` contract says.
    pub(super) fn store_and_enqueue(
        &mut self,
        text: &str,
        options: TurnOptions,
        mut callback: Option<Box<dyn StreamCallback>>,
        writes: Vec<Write>,
    ) -> bool {
        let (request_id, request_write) = self.next_id("r");
        if let Some(callback) = callback.as_mut() {
            callback.on_start(&request_id);
        }
        let (message_id, message_write) = self.next_id("m");
        let message = Message::user(&message_id, text);
        let mut batch = vec![request_write, message_write, Write::PutMessage(message)];
        batch.extend(self.turn_options_write(&message_id, options));
        batch.extend(writes);
        let refused_before = self.refused;
        if !self.commit(batch) {
            // Nothing was stored: the sender is told, by its callback or as
            // the request's terminal frame, and nothing else happens. The
            // refusal is handled here: a turn running now wrote nothing in
            // it, and does not fail for it.
            self.refused = refused_before;
            let message = super::STORE_REFUSED_MESSAGE;
            match callback {
                Some(mut callback) => callback.on_error(message),
                None => self.broadcast(Frame::Error { request_id, message: message.into() }),
            }
            return false;
        }
        self.observe(EngineEvent::UserMessageStored { message_id: message_id.clone() });
        self.broadcast(Frame::Messages(self.live_transcript()));
        self.enqueue_reply(request_id, options, callback, None, Some(message_id));
        true
    }

    /// A message's own turn settings are stored with it, so the turn that
    /// answers it after a crash, and its recoveries, keep them.
    fn turn_options_write(&self, message_id: &str, options: TurnOptions) -> Option<Write> {
        if options == TurnOptions::default() {
            return self.durable.extra.contains_key(TURN_OPTIONS_KEY).then(|| Write::Remove(TURN_OPTIONS_KEY.into()));
        }
        let value = serde_json::json!({ "message_id": message_id, "options": options });
        Some(Write::Put { key: TURN_OPTIONS_KEY.into(), value })
    }

    /// The settings the latest user message came with.
    pub(super) fn stored_turn_options(&self) -> TurnOptions {
        let latest_user = self.latest_user();
        let Some(stored) = self.durable.extra.get(TURN_OPTIONS_KEY) else {
            return TurnOptions::default();
        };
        let for_latest = latest_user.is_some_and(|message| stored["message_id"] == message.id.as_str());
        let options = for_latest.then(|| serde_json::from_value(stored["options"].clone()).ok()).flatten();
        options.unwrap_or_default()
    }

    /// Queues the turn that answers the latest user message.
    pub(super) fn enqueue_reply(
        &mut self,
        request_id: String,
        options: TurnOptions,
        callback: Option<Box<dyn StreamCallback>>,
        delivery_id: Option<String>,
        answers: Option<String>,
    ) {
        let kind = if callback.is_some() { TurnKind::Chat } else { TurnKind::User };
        self.enqueue(QueuedTurn {
            root_request_id: request_id.clone(),
            request_id,
            kind,
            callback,
            delivery_id,
            incident_id: None,
            options,
            answers,
        });
    }

    pub(super) fn enqueue(&mut self, queued: QueuedTurn) {
        self.observe(EngineEvent::TurnQueued { request_id: queued.request_id.clone(), kind: queued.kind });
        self.queue.push_back(queued);
    }

    /// Starts the next queued turn when none is running.
    pub(super) fn pump_queue(&mut self) {
        while self.turn.is_none() {
            let Some(queued) = self.queue.pop_front() else {
                return;
            };
            self.start_turn(queued);
        }
    }

    fn start_turn(&mut self, queued: QueuedTurn) {
        // The intent the turn takes, the repair it makes and its in-flight
        // record commit together: a crash between them would lose the
        // continuation (intent cleared, no turn recorded to recover).
        let staged = self.stage();
        let mut truncated = false;
        match queued.kind {
            TurnKind::Continuation => self.on_continuation_started(),
            TurnKind::User | TurnKind::Chat => self.drop_unfired_continuation(),
            TurnKind::Recovery => {
                // The recovery continues the transcript: it is the batch's continuation.
                self.on_continuation_started();
                truncated = self.truncate_unfinished_tool_call();
            }
        }
        let repaired = self.repair_transcript();
        let assistant = self.turn_accumulator(queued.kind);
        // Built on a turn's end the store refused: clients were shown the
        // store's account, and are shown the one this turn extends.
        let overlaid = self.durable.message(&assistant.id).is_some_and(|stored| stored != &assistant);
        let in_flight = InFlightTurn {
            request_id: queued.request_id.clone(),
            kind: queued.kind,
            root_request_id: queued.root_request_id.clone(),
            message_id: assistant.id.clone(),
            stream_started: false,
            delivery_id: queued.delivery_id.clone(),
        };
        self.commit(vec![Write::InFlight(Some(in_flight))]);
        if staged {
            self.commit_staged();
        }
        if repaired || truncated {
            self.broadcast(Frame::Messages(self.live_transcript()));
        }
        self.observe(EngineEvent::TurnStarted {
            request_id: queued.request_id.clone(),
            kind: queued.kind,
            message_id: assistant.id.clone(),
        });
        let turn_floor = assistant.parts.len();
        let after = match self.durable.message(&assistant.id) {
            Some(_) => None,
            None => queued.answers.clone().or_else(|| self.durable.messages.last().map(|last| last.id.clone())),
        };
        self.turn = Some(Turn {
            request_id: queued.request_id,
            kind: queued.kind,
            root_request_id: queued.root_request_id,
            callback: queued.callback,
            incident_id: queued.incident_id,
            assistant,
            step: 1,
            attempt: 0,
            part_floor: 0,
            turn_floor,
            attempt_streamed: false,
            attempt_output: false,
            produced_output: false,
            unflushed_chunks: 0,
            flushed_once: false,
            after,
            phase: super::turn::Phase::Streaming,
            outstanding_server_tools: Vec::new(),
            attempt_server_tools: Vec::new(),
            stall_pending: false,
            stall_timeout_ms: queued.options.stall_timeout_ms.unwrap_or(self.config.stall_timeout_ms),
            store_refused: false,
        });
        if overlaid {
            self.broadcast(Frame::Messages(self.live_transcript()));
        }
        if !self.run_approved_server_tools() {
            self.start_attempt();
        }
    }

    /// Continuations and recoveries extend the leaf assistant message; a new
    /// user message gets a fresh one.
    fn turn_accumulator(&mut self, kind: TurnKind) -> Message {
        let extends_leaf = kind.continues_answer();
        // The messages as this process knows them (a turn's end the store
        // refused included): the new turn extends its own account.
        let last_is_assistant = self.durable.messages.last().is_some_and(|message| message.role == Role::Assistant);
        if extends_leaf && last_is_assistant {
            if let Some(leaf) = leaf_assistant(&self.durable.messages) {
                return self.as_known(leaf).into_owned();
            }
        }
        let (message_id, write) = self.next_id("m");
        self.commit(vec![write]);
        Message::assistant(message_id)
    }

    /// The backstop before every inference: no model request may contain a
    /// tool call without a result. Returns whether anything was repaired
    /// (the caller tells the clients once it is committed).
    fn repair_transcript(&mut self) -> bool {
        let mut repaired_ids = Vec::new();
        let mut writes = Vec::new();
        for message in self.durable.messages.iter().filter(|message| message.role == Role::Assistant) {
            // As this process knows it: a result in an end the store refused
            // is still the tool's, and was shown; it is not repaired away.
            let mut repaired = self.as_known(message).into_owned();
            let ids = repaired.repair_tools(|tool| self.repair_keeps(tool.state));
            if !ids.is_empty() {
                repaired_ids.extend(ids);
                writes.push(Write::PutMessage(repaired));
            }
        }
        if writes.is_empty() {
            return false;
        }
        self.commit(writes);
        self.observe(EngineEvent::Repaired { call_ids: repaired_ids });
        true
    }

    /// Persists what the turn produced and ends it with `status`.
    pub(super) fn end_turn(&mut self, mut status: TurnStatus, mut error: Option<String>) {
        let Some(mut turn) = self.turn.take() else {
            return;
        };
        self.end_model_call();
        self.timers.stall = None;
        self.timers.retry = None;
        drop_trailing_step_start(&mut turn.assistant);
        turn.assistant.settle_text();
        let mut writes = vec![Write::InFlight(None)];
        // A failure is stored with the turn's end: a crash before the
        // consumers are told leaves it for clients that connect later.
        if status == TurnStatus::Error {
            let message = error.clone().unwrap_or_else(|| TURN_FAILED_MESSAGE.to_string());
            let user = self.answered_by(&turn.assistant.id, turn.after.as_deref());
            writes.push(Write::Terminal(Some(self.terminal(&turn.request_id, message, user))));
        }
        // A continuation this process dropped while the store refused to
        // forget it is not owed to the next process either.
        // The pending continuation this turn took ends with it (unless a
        // new batch's was deferred behind it).
        let owed = self.barrier.deferred || self.barrier.pending.as_ref().is_some_and(|pending| !pending.past_coalesce);
        if !owed && self.durable.continuation_intent.is_some() {
            writes.push(Write::Intent(None));
        }
        // Write the message unless the store already holds exactly it (the
        // last flush); an emptied one that was flushed is rewritten too.
        let stored = self.durable.message(&turn.assistant.id);
        let changed = stored.is_some_and(|stored| stored != &turn.assistant);
        // Whether the store already holds the reply, if only still marked
        // streaming: refusing the end then loses nothing of it.
        let saved = stored.is_some_and(|stored| {
            let mut settled = stored.clone();
            settled.settle_text();
            settled == turn.assistant
        }) || (stored.is_none() && turn.assistant.parts.is_empty());
        if changed || (stored.is_none() && !turn.assistant.parts.is_empty()) {
            let after = turn.after.as_deref().filter(|_| stored.is_none());
            writes.insert(0, self.put_reply(turn.assistant.clone(), after));
        }
        let message_then = stored.cloned();
        // What the turn did, whatever the store kept of it: a recovery that
        // answered ends its incident even if the answer is recorded later.
        let outcome = status;
        // A refused end is this turn's to handle, here: recorded later, and
        // told below. It must not fail the turn that starts after it.
        let refused_before = self.refused;
        let recorded = self.commit_reply(writes.clone());
        self.refused = refused_before;
        if !recorded {
            // The reply was not saved: a turn that would have completed
            // fails and says so, and its end is recorded once the store
            // takes writes again.
            let mut writes = writes;
            if status == TurnStatus::Completed && !saved {
                let message = super::STORE_REFUSED_MESSAGE.to_string();
                status = TurnStatus::Error;
                error = Some(message.clone());
                let user = self.answered_by(&turn.assistant.id, turn.after.as_deref());
                writes.push(Write::Terminal(Some(self.terminal(&turn.request_id, message, user))));
            }
            let message_id = turn.assistant.id.clone();
            let end = super::UnrecordedEnd { writes, message_id, message_then };
            self.unrecorded.ended_turns.insert(turn.request_id.clone(), end);
            self.look_again_shortly();
        }
        self.deliver_end(&mut turn, status, error);
        self.observe(EngineEvent::TurnFinished { request_id: turn.request_id.clone(), kind: turn.kind, status });
        if turn.kind.continues_answer() {
            self.on_continuation_finished();
        }
        // An interrupted stream's batch goes with its recovery, when one is
        // scheduled; without one the continuation is still owed.
        let rearms = status != TurnStatus::Interrupted
            || !self.recovery_pending()
            || self.config.regressions.has(crate::Regression::StallRearmsCoalesceTimer);
        if rearms {
            self.on_stream_finalized();
        }
        if turn.kind != TurnKind::Recovery && outcome == TurnStatus::Completed && turn.produced_output {
            self.close_answered_incidents();
        }
        if turn.kind == TurnKind::Recovery {
            let message_id = turn.assistant.id.clone();
            self.on_recovery_turn_finished(&turn, &message_id, outcome);
        }
    }

    fn deliver_end(&mut self, turn: &mut Turn, status: TurnStatus, error: Option<String>) {
        // As the model was asked (a recovery continues the answer too).
        let continuation = turn.kind.continues_answer();
        let request_id = turn.request_id.clone();
        match (status, error) {
            (TurnStatus::Error, message) => {
                let message = message.unwrap_or_else(|| TURN_FAILED_MESSAGE.to_string());
                self.broadcast(Frame::Error { request_id, message: message.clone() });
                if let Some(callback) = turn.callback.as_mut() {
                    callback.on_error(&message);
                }
            }
            (TurnStatus::Interrupted, _) => {
                // Recovery gave up on this stream and sent the terminal
                // message as its terminal frame: one terminal frame per request.
                let stored =
                    self.durable.terminal_status.as_ref().is_some_and(|status| status.request_id == request_id);
                let ended = stored || self.unrecorded.terminal_told.contains(&request_id);
                if !ended {
                    self.broadcast(Frame::Done { request_id, continuation });
                }
                if let Some(callback) = turn.callback.as_mut() {
                    if !self.config.regressions.has(crate::Regression::SilentInterrupt) {
                        callback.on_interrupted();
                    }
                }
            }
            _ => {
                self.broadcast(Frame::Done { request_id, continuation });
                if let Some(callback) = turn.callback.as_mut() {
                    callback.on_done();
                }
            }
        }
    }
}

/// Where the latest user message's own turn settings are stored.
const TURN_OPTIONS_KEY: &str = "turn-options";

/// What a failed turn's consumers are told when the failure has no text.
const TURN_FAILED_MESSAGE: &str = "the turn failed";

/// A `step-start` with nothing after it is an orphan: drop it.
pub(super) fn drop_trailing_step_start(message: &mut Message) {
    while matches!(message.parts.last(), Some(Part::StepStart)) {
        message.parts.pop();
    }
}

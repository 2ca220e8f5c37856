//! One model step: the call, its chunks, its finish, and the server tools it
//! leaves to run before the next step.

use crate::chunk::{Chunk, FinishReason, StreamError, Usage};
use crate::config::{ServerToolStart, ToolKind};
use crate::durable::Write;
use crate::events::{EngineEvent, TurnStatus};
use crate::ports::{FaultSite, Frame, ModelRequest, ServerToolCall};
use crate::regression::Regression;
use crate::transcript::{Message, Part, ToolOutcome, ToolResult, ToolState};

use super::turn::Phase;
use super::Session;
use crate::seam::ModelEvent;

/// Content chunks between durable flushes of the in-flight message.
const FLUSH_EVERY_CHUNKS: u32 = 10;

impl Session {
    /// Opens a model call for the current step (a first try or a retry).
    pub(super) fn start_attempt(&mut self) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        turn.attempt += 1;
        turn.attempt_server_tools.clear();
        turn.part_floor = turn.assistant.parts.len();
        turn.assistant.parts.push(Part::StepStart);
        turn.attempt_output = false;
        turn.attempt_streamed = false;
        turn.phase = Phase::Streaming;
        if self.refused {
            // The store did not keep what this request would show (a step's
            // results, a turn's start): the model is not shown it, and the
            // turn fails once this input is handled.
            return;
        }
        let (request_id, step, attempt) = (turn.request_id.clone(), turn.step, turn.attempt);
        let continuation = turn.kind.continues_answer();
        let request = ModelRequest { request_id, step, continuation, messages: self.request_messages() };
        let event = EngineEvent::ModelCall { request_id: request.request_id.clone(), step, attempt };
        self.observe(event);
        self.end_model_call();
        self.model_call = Some(self.ports.model.start(request, self.sink.clone()));
        self.arm_stall_watchdog();
    }

    /// The durable transcript, as this process knows it, with the in-flight
    /// message in its place, up to it: messages that wait after the reply
    /// being written (user messages queued behind it) are not the model's
    /// to answer in it.
    pub(super) fn request_messages(&self) -> Vec<crate::transcript::Message> {
        let known = self.durable.messages.iter().map(|message| self.as_known(message).into_owned()).collect();
        let mut messages = self.with_turn(known);
        if let Some(turn) = self.turn.as_ref() {
            if let Some(at) = messages.iter().position(|message| message.id == turn.assistant.id) {
                messages.truncate(at + 1);
            }
        }
        messages
    }

    /// The store's transcript with the in-flight message in its place: what
    /// a client may be shown (never an end the store refused, which a crash
    /// would take back).
    pub(super) fn stored_messages_with_turn(&self) -> Vec<crate::transcript::Message> {
        self.with_turn(self.durable.messages.clone())
    }

    fn with_turn(&self, mut messages: Vec<crate::transcript::Message>) -> Vec<crate::transcript::Message> {
        let Some(turn) = self.turn.as_ref() else {
            return messages;
        };
        match (messages.iter_mut().find(|message| message.id == turn.assistant.id), &turn.after) {
            (Some(existing), _) => *existing = turn.assistant.clone(),
            (None, Some(after)) => crate::durable::place_after(&mut messages, after, turn.assistant.clone()),
            (None, None) => messages.push(turn.assistant.clone()),
        }
        messages
    }

    /// A stored message as this process knows it: a turn's end the store
    /// refused is still its account of that message (recorded again
    /// shortly), unless a later commit changed the message since. Borrowed
    /// when nothing was refused, which is almost always.
    pub(super) fn as_known<'a>(&'a self, message: &'a Message) -> std::borrow::Cow<'a, Message> {
        let ended = self.unrecorded.ended_turns.values().filter(|end| end.message_then.as_ref() == Some(message));
        let refused = ended.flat_map(|end| &end.writes).filter_map(Write::message).find(|ended| ended.id == message.id);
        match refused {
            Some(ended) => std::borrow::Cow::Owned(ended.clone()),
            None => std::borrow::Cow::Borrowed(message),
        }
    }

    pub(super) fn on_stream_event(&mut self, event: ModelEvent) {
        match event {
            ModelEvent::Chunk(chunk) => self.on_chunk(chunk),
            ModelEvent::Failed(error) => self.on_stream_failure(error),
            ModelEvent::Closed => self.on_stream_failure(StreamError::Cut),
        }
    }

    /// The running attempt lets go of its model call: the provider is told,
    /// as a dropped HTTP stream tells it.
    pub(super) fn end_model_call(&mut self) {
        if let Some(call) = self.model_call.take() {
            self.ports.model.cancel(call);
        }
    }

    fn on_chunk(&mut self, chunk: Chunk) {
        self.arm_stall_watchdog();
        match chunk {
            Chunk::FinishStep { reason, usage } => self.on_finish_step(reason, usage),
            Chunk::Finish { .. } => {}
            Chunk::Error { message } => self.end_turn(TurnStatus::Error, Some(message)),
            chunk => self.on_content_chunk(chunk),
        }
    }

    fn on_content_chunk(&mut self, mut chunk: Chunk) {
        // A dynamic tool's calls say so, to the store and to clients.
        if let Chunk::ToolInputStart { name, dynamic, .. } | Chunk::ToolCall { name, dynamic, .. } = &mut chunk {
            *dynamic |= self.config.dynamic_tools.contains(name.as_str());
        }
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        turn.assistant.apply_chunk(&chunk);
        if chunk.is_output() {
            turn.attempt_output = true;
            turn.produced_output = true;
        }
        turn.unflushed_chunks += 1;
        turn.attempt_streamed = true;
        let (request_id, message_id) = (turn.request_id.clone(), turn.assistant.id.clone());
        if let Some(callback) = turn.callback.as_mut() {
            callback.on_event(&chunk);
        }
        let first_flush = turn.attempt_output && !turn.flushed_once;
        let periodic = turn.unflushed_chunks >= FLUSH_EVERY_CHUNKS;
        let is_tool_call = matches!(chunk, Chunk::ToolCall { .. });
        let flush_due = first_flush || is_tool_call || (periodic && !self.buggify(FaultSite::SkipProgressFlush));
        let called = match &chunk {
            Chunk::ToolCall { id, .. } => Some(id.clone()),
            _ => None,
        };
        let ready = called.as_deref().and_then(|id| self.ready_tool(id));
        self.broadcast(Frame::Chunk { request_id, message_id, chunk });
        if flush_due {
            self.flush_in_flight(true);
        }
        // Told only after the flush: an approval request is durable before
        // the client is asked, and one the store refused is not asked at all
        // (the turn fails on the refusal).
        if let Some(frame) = ready.filter(|_| !self.refused) {
            self.broadcast(frame);
            if let Some(call_id) = called.filter(|_| self.config.server_tools == ServerToolStart::AtToolCall) {
                self.start_server_tool_now(&call_id);
            }
        }
    }

    /// Runs a server tool as its call arrives, while the stream goes on
    /// (`server_tools: at_tool_call`); the step waits for it at its finish.
    fn start_server_tool_now(&mut self, call_id: &str) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        let Some(tool) = turn.assistant.tool(call_id) else {
            return;
        };
        if tool.state != ToolState::InputAvailable || self.config.tool_kind(&tool.tool_name) != ToolKind::Server {
            return;
        }
        let call = server_tool_call(tool);
        self.start_server_tools(vec![call]);
    }

    /// Persists the in-flight message as it would settle (no trailing empty
    /// step); `progress` bumps the durable progress counter recovery reads
    /// (new output or results, not a re-persist).
    pub(super) fn flush_in_flight(&mut self, progress: bool) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        turn.unflushed_chunks = 0;
        turn.flushed_once = true;
        let mut settled = turn.assistant.clone();
        let after = turn.after.clone();
        super::turn::drop_trailing_step_start(&mut settled);
        let mut writes = Vec::new();
        // A re-persist of what the store holds writes (and bumps) nothing,
        // and a message with nothing in it yet is not stored at all.
        let stored = self.durable.message(&settled.id);
        let empty_and_new = stored.is_none() && settled.parts.is_empty();
        if stored != Some(&settled) && !empty_and_new {
            let new = stored.is_none();
            writes.push(self.put_reply(settled, after.as_deref().filter(|_| new)));
            if progress {
                writes.push(Write::Progress(self.durable.progress + 1));
            }
        }
        if let Some(mut in_flight) = self.durable.in_flight.clone().filter(|in_flight| !in_flight.stream_started) {
            in_flight.stream_started = true;
            writes.push(Write::InFlight(Some(in_flight)));
        }
        self.commit_reply(writes);
    }

    /// How to store the running turn's reply: `after` is given only for a
    /// reply the store does not hold yet, which goes right after the
    /// message it answers, ahead of the user messages that came in while
    /// it ran (their turns come after it).
    pub(super) fn put_reply(&self, message: Message, after: Option<&str>) -> Write {
        let messages = &self.durable.messages;
        let followed = |after: &str| {
            messages.iter().position(|stored| stored.id == after).is_some_and(|at| at + 1 < messages.len())
        };
        match after {
            Some(after) if followed(after) => Write::PutMessageAfter { after: after.to_string(), message },
            _ => Write::PutMessage(message),
        }
    }

    /// Commits writes that may place a reply before other messages; clients,
    /// which put a new reply last, are then sent the transcript as stored.
    pub(super) fn commit_reply(&mut self, writes: Vec<Write>) -> bool {
        let moves = writes.iter().any(|write| matches!(write, Write::PutMessageAfter { .. }));
        let committed = self.commit(writes);
        if committed && moves {
            self.broadcast(Frame::Messages(self.live_transcript()));
        }
        committed
    }

    /// A tool call became `input-available` in the live stream: an approval
    /// tool now awaits approval. Returns the frame that tells the client,
    /// for the caller to send once the state is flushed.
    fn ready_tool(&mut self, call_id: &str) -> Option<Frame> {
        let turn = self.turn.as_mut()?;
        let tool = turn.assistant.tool(call_id)?;
        let tool_name = tool.tool_name.clone();
        if tool.state != ToolState::InputAvailable {
            return None;
        }
        let mut state = ToolState::InputAvailable;
        if self.config.tool_kind(&tool_name).needs_approval() {
            turn.assistant.request_approval(call_id, &format!("approval-{call_id}"));
            state = ToolState::ApprovalRequested;
        }
        self.observe(EngineEvent::ToolReady { call_id: call_id.to_string(), tool_name: tool_name.clone(), state });
        Some(Frame::Tool { call_id: call_id.to_string(), tool_name, state })
    }

    fn on_finish_step(&mut self, reason: FinishReason, usage: Usage) {
        // The step is over and the stream ends by itself (its `finish`
        // follows): nothing to cancel, and what remains of it is ignored.
        self.model_call = None;
        self.timers.stall = None;
        if self.is_truncated_finish(reason, usage) {
            return self.on_truncated_finish(reason);
        }
        let finalised = match self.turn.as_mut() {
            Some(turn) => turn.assistant.finalise_streamed_tools(),
            None => return,
        };
        let frames: Vec<Frame> = finalised.iter().filter_map(|call_id| self.ready_tool(call_id)).collect();
        self.flush_in_flight(true);
        // Clients are asked only for what the store kept.
        if !self.refused {
            for frame in frames {
                self.broadcast(frame);
            }
        }
        // Run at the step's end, a server tool runs only if the step ended on
        // a finish that allows it (`ai` 7.0.173); one run as its call
        // arrived (`at_tool_call`) ran whatever the finish, as before 7.
        if reason.allows_tool_execution() || self.config.server_tools == ServerToolStart::AtToolCall {
            self.run_step_server_tools();
        }
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        if !turn.outstanding_server_tools.is_empty() {
            turn.phase = Phase::ServerTools;
            return self.arm_stall_watchdog();
        }
        // Server tools that ran while the attempt streamed are all done:
        // their results go to the next step as any step's would.
        match turn.attempt_server_tools.is_empty() {
            true => self.end_turn(TurnStatus::Completed, None),
            false => self.after_server_tools(),
        }
    }

    /// An empty `unknown` finish, or an empty `stop` with no parts: the
    /// provider cut the stream and called it a finish.
    fn is_truncated_finish(&self, reason: FinishReason, usage: Usage) -> bool {
        if usage.output_tokens > 0 || self.config.regressions.has(Regression::AcceptEmptyFinish) {
            return false;
        }
        let attempt_output = self.turn.as_ref().is_some_and(|turn| turn.attempt_output);
        match reason {
            FinishReason::Unknown => true,
            FinishReason::Stop => !attempt_output,
            _ => false,
        }
    }

    /// Starts this step's server tools not started while it streamed.
    fn run_step_server_tools(&mut self) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        let calls: Vec<ServerToolCall> = turn
            .assistant
            .parts
            .range(turn.part_floor..)
            .filter_map(|part| match part {
                Part::Tool(tool) if tool.state == ToolState::InputAvailable => Some(tool),
                _ => None,
            })
            .filter(|tool| self.config.tool_kind(&tool.tool_name) == ToolKind::Server)
            .filter(|tool| !turn.attempt_server_tools.contains(&tool.call_id))
            .map(server_tool_call)
            .collect();
        self.start_server_tools(calls);
    }

    /// Approval tools approved since the last turn run before the model is
    /// called. Only server tools (approval or plain server): an approved
    /// client tool stays `approval-responded`, the client runs it and sends
    /// the result.
    pub(super) fn run_approved_server_tools(&mut self) -> bool {
        let Some(turn) = self.turn.as_ref() else {
            return false;
        };
        let approved = turn.assistant.tools_in(&[ToolState::ApprovalResponded]);
        let server = approved.filter(|tool| !self.config.is_client_tool(&tool.tool_name));
        let calls: Vec<ServerToolCall> = server.map(server_tool_call).collect();
        self.execute_server_tools(calls)
    }

    fn execute_server_tools(&mut self, calls: Vec<ServerToolCall>) -> bool {
        if calls.is_empty() {
            return false;
        }
        self.start_server_tools(calls);
        if let Some(turn) = self.turn.as_mut() {
            turn.phase = Phase::ServerTools;
        }
        self.arm_stall_watchdog();
        true
    }

    /// Hands calls to the server-tool port; the turn counts them outstanding.
    fn start_server_tools(&mut self, calls: Vec<ServerToolCall>) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let ids = calls.iter().map(|call| call.call_id.clone());
        turn.outstanding_server_tools.extend(ids.clone());
        turn.attempt_server_tools.extend(ids);
        let request_id = turn.request_id.clone();
        for call in calls {
            self.observe(EngineEvent::ServerToolStarted { call_id: call.call_id.clone() });
            self.ports.server_tools.start(&request_id, call, self.sink.clone());
        }
    }

    pub(super) fn on_server_tool_done(&mut self, request_id: &str, call_id: &str, outcome: Option<ToolOutcome>) {
        let Some(turn) = self.turn.as_mut().filter(|turn| turn.request_id == request_id) else {
            return;
        };
        turn.outstanding_server_tools.retain(|outstanding| outstanding != call_id);
        let outcome = outcome.unwrap_or_else(|| ToolOutcome::Error(Some("server tool execution was lost".into())));
        turn.assistant.apply_tool_result(&ToolResult { call_id: call_id.to_string(), outcome });
        let state = turn.assistant.tool(call_id).map(|tool| tool.state).unwrap_or(ToolState::OutputError);
        let tool_name = turn.assistant.tool(call_id).map(|tool| tool.tool_name.clone()).unwrap_or_default();
        let done = turn.outstanding_server_tools.is_empty();
        let waiting = turn.phase == Phase::ServerTools;
        let stalled = done && std::mem::take(&mut turn.stall_pending);
        self.observe(EngineEvent::ToolApplied {
            call_id: call_id.to_string(),
            state,
            into: "accumulator".into(),
            auto_continue: false,
        });
        self.flush_in_flight(true);
        // Clients are shown only what the store kept.
        if !self.refused {
            self.broadcast(Frame::Tool { call_id: call_id.to_string(), tool_name, state });
        }
        // A result that comes while the step still streams (or waits out a
        // retry's backoff) is kept for the step's end; only a step that
        // waits on its tools goes on.
        if !waiting {
            return;
        }
        if stalled {
            return self.stall_now();
        }
        self.arm_stall_watchdog();
        if done {
            self.after_server_tools();
        }
    }

    /// Every server tool of the step is done: the next step, or the turn's
    /// end while client tools of the same step wait (their answers continue
    /// it, as a model request may not hold them).
    fn after_server_tools(&mut self) {
        if self.step_awaits_client() {
            return self.end_turn(TurnStatus::Completed, None);
        }
        self.next_step();
    }

    fn step_awaits_client(&self) -> bool {
        let Some(turn) = self.turn.as_ref() else { return false };
        turn.assistant
            .parts
            .range(turn.part_floor..)
            .any(|part| matches!(part, Part::Tool(tool) if tool.state.is_pending()))
    }

    fn next_step(&mut self) {
        // The next step's request carries the client's answers of this
        // step's batch too: a continuation still pending for it is taken.
        self.drop_unfired_continuation();
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        turn.step += 1;
        turn.attempt = 0;
        if turn.step > self.config.max_steps {
            return self.end_turn(TurnStatus::Error, Some("the turn exceeded its step limit".into()));
        }
        self.start_attempt();
    }
}

fn server_tool_call(tool: &crate::transcript::ToolPart) -> ServerToolCall {
    ServerToolCall {
        call_id: tool.call_id.clone(),
        tool_name: tool.tool_name.clone(),
        input: tool.input.clone().unwrap_or_default(),
    }
}

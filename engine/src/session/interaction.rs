//! Tool results and approvals: where they land, and what they tell the barrier.
//!
//! An apply lands in the in-flight accumulator when the open stream holds the
//! part (and is flushed at once, so an acknowledged result survives an
//! eviction), otherwise in the first stored message that holds it.

use crate::clock::Instant;
use crate::durable::Write;
use crate::events::EngineEvent;
use crate::ports::Frame;
use crate::transcript::{Message, ToolResult, ToolState};

use super::Session;

impl Session {
    pub(super) fn on_tool_result(&mut self, result: ToolResult, auto_continue: bool) {
        let call_id = result.call_id.clone();
        self.interact(&call_id, auto_continue, |message| message.apply_tool_result(&result));
    }

    pub(super) fn on_approval(&mut self, call_id: &str, approved: bool, auto_continue: bool) {
        self.interact(call_id, auto_continue, |message| message.apply_approval(call_id, approved));
    }

    /// Applies the interaction and what it owes the barrier (a durable
    /// continuation intent) in one atomic commit; only then is the client
    /// told, so an acknowledged result always carries its continuation.
    fn interact(&mut self, call_id: &str, auto_continue: bool, apply: impl Fn(&mut Message) -> bool) {
        let staged = self.stage();
        let barrier = (self.barrier.clone(), self.timers.coalesce, self.timers.barrier_fixed);
        let accumulator = self.turn.as_ref().map(|turn| turn.assistant.clone());
        let frames = self.apply_interaction(call_id, auto_continue, apply);
        if frames.is_some() {
            self.after_interaction(auto_continue);
        }
        if staged && !self.commit_staged() {
            return self.refused_interaction(call_id, barrier, accumulator);
        }
        for frame in frames.into_iter().flatten() {
            self.broadcast(frame);
        }
    }

    /// The store refused the result (and what it owed the barrier): none of
    /// it happened. The barrier and the streaming message go back to how
    /// they were, and the client is asked again for the call it answered.
    fn refused_interaction(
        &mut self,
        call_id: &str,
        (barrier, coalesce, barrier_fixed): (super::barrier::Barrier, Option<Instant>, Option<Instant>),
        accumulator: Option<Message>,
    ) {
        self.barrier = barrier;
        self.timers.coalesce = coalesce;
        self.timers.barrier_fixed = barrier_fixed;
        if let (Some(turn), Some(accumulator)) = (self.turn.as_mut(), accumulator) {
            turn.assistant = accumulator;
        }
        let live = self.live_transcript();
        let tool = live.iter().find_map(|message| message.tool(call_id));
        if let Some(tool) = tool.filter(|tool| tool.state.is_pending()) {
            let frame =
                Frame::Tool { call_id: call_id.to_string(), tool_name: tool.tool_name.clone(), state: tool.state };
            self.broadcast(frame);
        }
    }

    /// Only an applied result moves the barrier: a stale one (its call was
    /// repaired or discarded) must not start a continuation of its own.
    fn after_interaction(&mut self, auto_continue: bool) {
        if auto_continue {
            self.schedule_auto_continuation();
        } else {
            self.rearm_pending_for_batch();
        }
    }

    /// Returns the frames that tell the client, when the interaction applied.
    fn apply_interaction(
        &mut self,
        call_id: &str,
        auto_continue: bool,
        apply: impl Fn(&mut Message) -> bool,
    ) -> Option<Vec<Frame>> {
        let applied = self.apply_to_accumulator(&apply).or_else(|| self.apply_to_store(call_id, &apply));
        let Some((into, message)) = applied else {
            self.observe(EngineEvent::ToolIgnored { call_id: call_id.to_string() });
            return None;
        };
        let tool = message.tool(call_id).expect("an applied tool exists");
        let (state, tool_name) = (tool.state, tool.tool_name.clone());
        let event = EngineEvent::ToolApplied { call_id: call_id.to_string(), state, into: into.into(), auto_continue };
        self.observe(event);
        let mut frames = vec![Frame::Tool { call_id: call_id.to_string(), tool_name, state }];
        if state == ToolState::ApprovalResponded {
            frames.push(Frame::Messages(self.live_transcript()));
        }
        Some(frames)
    }

    fn apply_to_accumulator(&mut self, apply: &impl Fn(&mut Message) -> bool) -> Option<(&'static str, Message)> {
        let turn = self.turn.as_mut()?;
        let mut candidate = turn.assistant.clone();
        if !apply(&mut candidate) {
            return None;
        }
        turn.assistant = candidate.clone();
        self.flush_in_flight(true);
        Some(("accumulator", candidate))
    }

    fn apply_to_store(
        &mut self,
        call_id: &str,
        apply: &impl Fn(&mut Message) -> bool,
    ) -> Option<(&'static str, Message)> {
        // The message as this process knows it: with what the store refused
        // of a turn's end, which this commit then records too.
        let known = self.durable.messages.iter().map(|message| self.as_known(message));
        let mut candidate = known.into_iter().find(|message| message.tool(call_id).is_some())?.into_owned();
        if !apply(&mut candidate) || !self.commit(vec![Write::PutMessage(candidate.clone())]) {
            return None;
        }
        Some(("store", candidate))
    }
}

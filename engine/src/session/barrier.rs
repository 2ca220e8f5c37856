//! The auto-continuation barrier: one continuation per tool batch, fired only
//! once no stream is open and no sibling of the batch is unanswered.
//!
//! A result with `auto_continue` marks a continuation pending and arms a short
//! coalesce timer. When it fires the barrier looks: a stream still open (more
//! siblings may arrive) or a sibling still unanswered means *hold* (nothing
//! armed, nothing kept alive: the next result or the stream's finalize looks
//! again); otherwise it fires, exactly once. The intent is durable, so an
//! eviction between a result and its continuation does not lose it.

use std::time::Duration;

use crate::clock;
use crate::durable::{ContinuationIntent, TurnKind, Write};
use crate::events::EngineEvent;
use crate::regression::Regression;
use crate::transcript::{leaf_assistant, Message};

use super::turn::QueuedTurn;
use super::Session;

/// The fixed wait of the `barrier-fixed-timeout` regression.
const FIXED_BARRIER_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Default)]
pub(crate) struct Barrier {
    pub pending: Option<Pending>,
    /// A continuation asked for while one is running; it runs after it.
    pub deferred: bool,
}

#[derive(Clone)]
pub(crate) struct Pending {
    /// Enqueued on the turn queue; later results coalesce into it.
    pub fired: bool,
    /// The continuation turn has started.
    pub past_coalesce: bool,
}

impl Session {
    /// Restores a continuation owed before the process died.
    pub(super) fn restore_continuation_intent(&mut self) -> bool {
        if self.config.regressions.has(Regression::VolatileContinuationIntent) {
            return false;
        }
        if self.durable.continuation_intent.is_none() {
            return false;
        }
        self.barrier.pending = Some(Pending { fired: false, past_coalesce: false });
        self.arm_coalesce_timer();
        true
    }

    pub(super) fn schedule_auto_continuation(&mut self) {
        match self.barrier.pending.as_ref() {
            Some(pending) if pending.past_coalesce => {
                self.barrier.deferred = true;
                // Owed as durably as any other: it commits with the result.
                self.commit_intent(self.turn_message_id());
                self.observe(EngineEvent::ContinuationDeferred);
            }
            Some(pending) => {
                let fired = pending.fired;
                self.observe(EngineEvent::ContinuationCoalesced);
                if !fired {
                    self.arm_coalesce_timer();
                }
            }
            None => {
                self.open_pending();
                self.arm_coalesce_timer();
            }
        }
    }

    fn open_pending(&mut self) {
        let message_id = self.turn_message_id();
        self.commit_intent(message_id.clone());
        self.observe(EngineEvent::ContinuationPending { message_id });
        self.barrier.pending = Some(Pending { fired: false, past_coalesce: false });
    }

    /// The message whose batch a continuation asked for now would take.
    fn turn_message_id(&self) -> String {
        match self.turn.as_ref() {
            Some(turn) => turn.assistant.id.clone(),
            None => leaf_assistant(&self.durable.messages).map(|leaf| leaf.id.clone()).unwrap_or_default(),
        }
    }

    fn commit_intent(&mut self, message_id: String) {
        if self.config.regressions.has(Regression::VolatileContinuationIntent) {
            return;
        }
        let intent = ContinuationIntent { message_id };
        if self.durable.continuation_intent.as_ref() != Some(&intent) {
            self.commit(vec![Write::Intent(Some(intent))]);
        }
    }

    /// An `auto_continue: false` result (or a finalized stream) re-arms an
    /// existing pending continuation; it never creates one.
    pub(super) fn rearm_pending_for_batch(&mut self) {
        if self.config.regressions.has(Regression::NoErroredSiblingRearm) {
            return;
        }
        self.rearm_pending();
    }

    pub(super) fn rearm_pending(&mut self) {
        if self.barrier.pending.as_ref().is_some_and(|pending| !pending.fired && !pending.past_coalesce) {
            self.arm_coalesce_timer();
        }
    }

    /// The stream closed normally: look again, or an all-fast batch answered
    /// mid-stream would wait forever.
    pub(super) fn on_stream_finalized(&mut self) {
        if self.config.regressions.has(Regression::NoFinalizeRecheck) {
            return;
        }
        self.rearm_pending();
    }

    fn arm_coalesce_timer(&mut self) {
        let slow = self.buggify(crate::ports::FaultSite::SlowCoalesceTimer);
        let coalesce_ms = if slow { self.config.coalesce_ms * 20 } else { self.config.coalesce_ms };
        self.timers.coalesce = Some(clock::now() + Duration::from_millis(coalesce_ms));
        self.observe(EngineEvent::CoalesceTimerArmed);
    }

    pub(super) fn on_coalesce_timer(&mut self) {
        let Some(pending) = self.barrier.pending.as_ref() else {
            return;
        };
        if pending.fired || pending.past_coalesce {
            return;
        }
        if self.recovery_pending() && !self.config.regressions.has(Regression::StallRearmsCoalesceTimer) {
            // The recovery continues this turn and takes the batch with it.
            return self.hold("recovery scheduled".into());
        }
        if self.turn.is_some() && !self.stream_gate_passes() {
            return;
        }
        if self.turn.is_none() || self.config.regressions.has(Regression::NoStreamActiveGate) {
            if let Some(reason) = self.unanswered_siblings() {
                return self.hold(reason);
            }
        }
        self.fire_continuation();
    }

    /// With a stream open the correct barrier always holds: the batch may
    /// still grow. The regressions look at what they can see instead.
    fn stream_gate_passes(&mut self) -> bool {
        let regressions = &self.config.regressions;
        if regressions.has(Regression::AccumulatorScanBarrier) {
            let turn = self.turn.as_ref().expect("stream open");
            if turn.assistant.has_incomplete_tool_batch() {
                self.hold(format!("accumulator has unanswered {}", turn.assistant.pending_tool_ids().join(",")));
                return false;
            }
            return true;
        }
        if regressions.has(Regression::NoStreamActiveGate) {
            return true;
        }
        self.observe(EngineEvent::ContinuationHeld { reason: "stream open".into() });
        false
    }

    fn unanswered_siblings(&self) -> Option<String> {
        // The regression judges a running turn from what was persisted
        // before its stream began (#1649): siblings the stream brought are
        // not there yet.
        let before_stream;
        let messages = match self.turn.as_ref() {
            Some(turn) if self.config.regressions.has(Regression::NoStreamActiveGate) => {
                before_stream = persisted_before_stream(&self.durable.messages, &turn.assistant.id, turn.turn_floor);
                &before_stream[..]
            }
            _ => &self.durable.messages[..],
        };
        // As the continuation's request will show it: a turn's end the
        // store refused still counts.
        let leaf = self.as_known(leaf_assistant(messages)?);
        leaf.has_incomplete_tool_batch().then(|| format!("unanswered {}", leaf.pending_tool_ids().join(",")))
    }

    fn hold(&mut self, reason: String) {
        self.observe(EngineEvent::ContinuationHeld { reason });
        if self.config.regressions.has(Regression::BarrierFixedTimeout) && self.timers.barrier_fixed.is_none() {
            self.timers.barrier_fixed = Some(clock::now() + FIXED_BARRIER_TIMEOUT);
        }
    }

    /// The regression's fixed wait ran out: fire through whatever is parked.
    pub(super) fn on_barrier_fixed_timeout(&mut self) {
        if self.barrier.pending.as_ref().is_some_and(|pending| !pending.fired && !pending.past_coalesce) {
            self.fire_continuation();
        }
    }

    fn fire_continuation(&mut self) {
        self.timers.coalesce = None;
        self.timers.barrier_fixed = None;
        let Some(pending) = self.barrier.pending.as_mut() else {
            return;
        };
        pending.fired = true;
        let (request_id, write) = self.next_id("r");
        self.commit(vec![write]);
        self.observe(EngineEvent::ContinuationFired { request_id: request_id.clone() });
        self.enqueue(QueuedTurn {
            root_request_id: request_id.clone(),
            request_id,
            kind: TurnKind::Continuation,
            callback: None,
            delivery_id: None,
            incident_id: None,
            options: Default::default(),
            answers: None,
        });
    }

    pub(super) fn on_continuation_started(&mut self) {
        if let Some(pending) = self.barrier.pending.as_mut() {
            pending.past_coalesce = true;
        }
        if self.durable.continuation_intent.is_some() {
            self.commit(vec![Write::Intent(None)]);
        }
    }

    /// The continuation (or recovery) that took the pending continuation is
    /// done. A pending one it did not take — opened for a new batch while a
    /// recovery streamed — stays, and the finalize re-check fires it.
    pub(super) fn on_continuation_finished(&mut self) {
        if self.barrier.pending.as_ref().is_some_and(|pending| pending.past_coalesce) {
            self.barrier.pending = None;
        }
        if std::mem::take(&mut self.barrier.deferred) {
            self.open_pending();
            self.on_coalesce_timer();
        }
    }

    /// A new user turn supersedes a continuation that has not fired: that
    /// turn's repair settles the batch and its inference answers it.
    pub(super) fn drop_unfired_continuation(&mut self) {
        if self.barrier.pending.as_ref().is_some_and(|pending| !pending.fired) {
            self.barrier.pending = None;
            self.timers.coalesce = None;
            self.timers.barrier_fixed = None;
            if self.durable.continuation_intent.is_some() {
                self.commit(vec![Write::Intent(None)]);
            }
        }
    }
}

/// The transcript as it stood before the running turn's stream: the turn's
/// message without what the turn added (gone if the turn began it).
fn persisted_before_stream(messages: &[Message], message_id: &str, turn_floor: usize) -> Vec<Message> {
    let mut before: Vec<Message> = messages.to_vec();
    before.retain_mut(|message| {
        if message.id != message_id {
            return true;
        }
        message.parts.truncate(turn_floor);
        turn_floor > 0
    });
    before
}

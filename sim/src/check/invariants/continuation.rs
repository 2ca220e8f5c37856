//! Invariant 2: at most one continuation per tool batch; none while a stream
//! is open; none while a sibling is unanswered; and, once the batch is
//! complete and a result opted in, exactly one (liveness).
//!
//! A recovery turn continues the same transcript, so it counts as the
//! batch's continuation too: a recovery after a completed continuation of the
//! same batch is a second model invocation for one batch.

use std::collections::BTreeMap;

use turnsim_engine::durable::TurnKind;
use turnsim_engine::{EngineEvent, ToolState, TurnStatus};

use super::Invariant;
use crate::check::{CheckInput, EngineFacts as Facts, Violation};
use crate::trace::Event;
use crate::world::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "single-continuation",
    rule: "one continuation per tool batch, never while a stream is open or a sibling is unanswered, and always once the batch completes",
    check,
};

const NAME: &str = "single-continuation";

/// Whether any model call of the request streamed content it kept.
fn produced_output(facts: &Facts, request_id: &str) -> bool {
    facts.calls_for(request_id).any(|call| call.content_chunks > 0 && !call.is_truncated_finish())
}

/// The batch being answered: its tools and who continued it.
#[derive(Default)]
struct Batch {
    tools: BTreeMap<String, ToolState>,
    opted_in: bool,
    /// Index of the last applied result.
    last_result_at: Option<usize>,
    /// The continuation-like turn that took this batch, and how it ended.
    consumer: Option<(String, Option<TurnStatus>)>,
}

impl Batch {
    fn pending(&self) -> Vec<&str> {
        self.tools.iter().filter(|(_, state)| state.is_pending()).map(|(id, _)| id.as_str()).collect()
    }

    fn settled(&self) -> bool {
        self.tools.values().any(|state| state.is_settled())
    }
}

#[derive(Default)]
struct Walk {
    batch: Batch,
    open_turns: Vec<String>,
    violations: Vec<Violation>,
}

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut walk = Walk::default();
    for (index, traced) in input.run.events.iter().enumerate() {
        match &traced.event {
            Event::Engine(event) => walk.on_event(&input.engine_facts, index, event),
            // The process died: the turns it was streaming never end, but
            // none of their streams is open any more.
            Event::Evicted => walk.open_turns.clear(),
            _ => {}
        }
    }
    if input.run.end == RunEnd::Quiescent {
        walk.check_liveness();
    }
    walk.violations
}

impl Walk {
    fn on_event(&mut self, facts: &Facts, index: usize, event: &EngineEvent) {
        match event {
            EngineEvent::ToolReady { call_id, state, .. } => {
                if self.batch.consumer.is_some() {
                    self.batch = Batch::default();
                }
                self.batch.tools.insert(call_id.clone(), *state);
            }
            EngineEvent::ToolApplied { call_id, state, auto_continue, .. } => {
                self.batch.tools.insert(call_id.clone(), *state);
                self.batch.opted_in |= *auto_continue;
                self.batch.last_result_at = Some(index);
            }
            EngineEvent::Repaired { call_ids } => {
                for call_id in call_ids {
                    self.batch.tools.insert(call_id.clone(), ToolState::OutputError);
                }
            }
            EngineEvent::EmptyFinish { discarded_tools, .. } | EngineEvent::ProviderRetry { discarded_tools, .. } => {
                for call_id in discarded_tools {
                    self.batch.tools.remove(call_id);
                }
            }
            EngineEvent::ContinuationFired { request_id } => self.on_fire(index, request_id),
            EngineEvent::TurnStarted { request_id, kind, .. } => self.on_turn_start(facts, index, request_id, *kind),
            EngineEvent::TurnFinished { request_id, status, .. } => self.on_turn_end(request_id, *status),
            _ => {}
        }
    }

    fn on_fire(&mut self, index: usize, request_id: &str) {
        if let Some(open) = self.open_turns.first() {
            let message = format!("continuation {request_id} fired while the stream of {open} was open");
            self.violations.push(Violation::at(NAME, index, message));
        }
        let pending = self.batch.pending();
        if !pending.is_empty() && self.batch.settled() {
            let message = format!("continuation {request_id} fired while {} was unanswered", pending.join(", "));
            self.violations.push(Violation::at(NAME, index, message));
        }
    }

    fn on_turn_start(&mut self, facts: &Facts, index: usize, request_id: &str, kind: TurnKind) {
        self.open_turns.push(request_id.to_string());
        if matches!(kind, TurnKind::User | TurnKind::Chat) {
            self.batch = Batch::default();
            return;
        }
        if let Some((previous, Some(TurnStatus::Completed))) = &self.batch.consumer {
            // A continuation that produced nothing may be retried by recovery.
            if !self.batch.tools.is_empty() && produced_output(facts, previous) {
                let message =
                    format!("{request_id} ({}) continued a batch that {previous} had already continued", kind.as_str());
                self.violations.push(Violation::at(NAME, index, message));
            }
        }
        self.batch.consumer = Some((request_id.to_string(), None));
    }

    fn on_turn_end(&mut self, request_id: &str, status: TurnStatus) {
        self.open_turns.retain(|open| open != request_id);
        if let Some((consumer, ended)) = self.batch.consumer.as_mut() {
            if consumer == request_id {
                *ended = Some(status);
            }
        }
    }

    /// A complete batch with an opted-in result must have been continued.
    fn check_liveness(&mut self) {
        let batch = &self.batch;
        let complete = !batch.tools.is_empty() && batch.tools.values().all(|state| state.is_output());
        if complete && batch.opted_in && batch.consumer.is_none() {
            let tools: Vec<&str> = batch.tools.keys().map(String::as_str).collect();
            let message =
                format!("batch {} is complete and a result opted in, but no continuation ran", tools.join(", "));
            self.violations.push(Violation { check: NAME.into(), message, at_event: batch.last_result_at });
        }
    }
}

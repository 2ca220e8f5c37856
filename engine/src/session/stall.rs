//! The stall watchdog and provider failures: what happens when a stream stops
//! producing, fails, or finishes without output.

use std::time::Duration;

use crate::chunk::{FinishReason, StreamError};
use crate::clock;
use crate::events::{EngineEvent, TurnStatus};
use crate::ports::Frame;
use crate::regression::Regression;
use crate::transcript::Part;

use super::turn::{Phase, Turn};
use super::Session;

/// The longest provider backoff without a retry-after header (opencode's
/// `RETRY_MAX_DELAY_NO_HEADERS`).
const RETRY_MAX_DELAY_MS: u64 = 30_000;

/// Backoff before provider retry `attempt` (1-based): `initial_ms` doubling,
/// at most 30 s.
pub fn retry_delay_ms(initial_ms: u64, attempt: u32) -> u64 {
    let doubled = initial_ms.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    doubled.min(RETRY_MAX_DELAY_MS)
}

pub fn stall_message(timeout_ms: u64) -> String {
    format!("Chat stream stalled: no activity for {timeout_ms}ms; the turn was aborted by the stall watchdog.")
}

impl Session {
    /// Restarts the between-chunks clock. Server-tool execution counts too.
    pub(super) fn arm_stall_watchdog(&mut self) {
        let timeout_ms = self.turn.as_ref().map_or(0, |turn| turn.stall_timeout_ms);
        self.timers.stall = (timeout_ms > 0).then(|| clock::now() + Duration::from_millis(timeout_ms));
    }

    pub(super) fn on_stall_deadline(&mut self) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        if turn.phase == Phase::RetryWait {
            return;
        }
        if turn.phase == Phase::Streaming && !turn.outstanding_server_tools.is_empty() {
            return self.stall_behind_server_tools();
        }
        self.stall_now();
    }

    /// The stream stalled while server tools it called still run: the
    /// stream is let go, and the stall is handled once they are done, so
    /// their results are kept (a tool that hangs meets the watchdog again).
    fn stall_behind_server_tools(&mut self) {
        self.end_model_call();
        if let Some(turn) = self.turn.as_mut() {
            turn.phase = Phase::ServerTools;
            turn.stall_pending = true;
        }
        self.arm_stall_watchdog();
    }

    /// The stall aborts the stream: recovery takes the turn on, or it fails.
    pub(super) fn stall_now(&mut self) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        let request_id = turn.request_id.clone();
        let timeout_ms = turn.stall_timeout_ms;
        self.end_model_call();
        self.observe(EngineEvent::StreamStalled { request_id, timeout_ms });
        if !self.config.recovery.enabled {
            return self.end_turn(TurnStatus::Error, Some(stall_message(timeout_ms)));
        }
        self.route_stall_to_recovery();
    }

    /// A failed model call: 429/5xx back off and retry, discarding what the
    /// failed attempt streamed (the retry replaces it, as after a truncated
    /// finish); anything else ends the turn with the error.
    pub(super) fn on_stream_failure(&mut self, error: StreamError) {
        self.end_model_call();
        self.timers.stall = None;
        let keep_parts = self.config.regressions.has(Regression::KeepFailedAttemptParts);
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        if !error.is_retryable() || turn.attempt >= self.config.max_model_calls_http_retry {
            return self.end_turn(TurnStatus::Error, Some(error.message()));
        }
        let discard = !keep_parts || !turn.attempt_output;
        let (discarded_parts, discarded_tools) = match discard {
            true => discard_attempt(turn),
            false => (0, Vec::new()),
        };
        super::turn::drop_trailing_step_start(&mut turn.assistant);
        let (request_id, attempt) = (turn.request_id.clone(), turn.attempt);
        if discard {
            self.take_back_attempt();
        }
        // What the store holds of this attempt must not outlive it either.
        let flush = self.durable.in_flight.as_ref().is_some_and(|in_flight| in_flight.stream_started);
        self.forget_attempt(flush, !discarded_tools.is_empty());
        self.wait_to_retry(request_id, attempt, error.message(), discarded_parts, discarded_tools);
    }

    /// The turn fails while a model call streams text: what the call
    /// streamed goes, as a failed provider attempt's does, and consumers are
    /// told. An attempt that already streamed tool calls keeps them: a
    /// client may have answered one, and an answer is never dropped.
    pub(super) fn abandon_streaming_attempt(&mut self) {
        let Some(turn) = self.turn.as_mut().filter(|turn| turn.phase == Phase::Streaming) else {
            return;
        };
        let floor = turn.part_floor;
        if !tool_ids(turn.assistant.parts.range(floor..)).is_empty() {
            return;
        }
        turn.assistant.parts.truncate(floor);
        self.take_back_attempt();
    }

    /// Stores the message without the discarded attempt and, when the
    /// attempt took tool calls with it, drops the continuation owed to
    /// their batch, in one commit: a crash between them would leave the
    /// attempt's parts stored with no continuation owed.
    fn forget_attempt(&mut self, flush: bool, tools_discarded: bool) {
        let staged = self.stage();
        if flush {
            self.flush_in_flight(false);
        }
        if tools_discarded {
            // The batch a pending continuation was for no longer exists.
            self.drop_unfired_continuation();
        }
        if staged {
            self.commit_staged();
        }
    }

    /// Tells every live consumer that the attempt's output is void: clients
    /// get the message as it now stands, a `chat()` caller (and so a
    /// messenger) the turn's text so far. Nothing is sent for an attempt
    /// that streamed nothing.
    fn take_back_attempt(&mut self) {
        let Some(turn) = self.turn.as_mut().filter(|turn| turn.attempt_streamed) else {
            return;
        };
        turn.attempt_streamed = false;
        let mut message = turn.assistant.clone();
        super::turn::drop_trailing_step_start(&mut message);
        let text = turn_text(message.parts.range(turn.turn_floor..));
        if let Some(callback) = turn.callback.as_mut() {
            callback.on_reset(&text);
        }
        let request_id = turn.request_id.clone();
        self.broadcast(Frame::Reset { request_id, message });
    }

    /// Backs off before the next model call of the step: 2 s doubling (at
    /// most 30 s) from `retry_initial_delay_ms`, opencode's retry policy.
    fn wait_to_retry(
        &mut self,
        request_id: String,
        attempt: u32,
        reason: String,
        discarded_parts: usize,
        discarded_tools: Vec<String>,
    ) {
        let slow = self.ports.faults.fire(crate::ports::FaultSite::SlowRetryBackoff);
        let delay_ms = retry_delay_ms(self.config.retry_initial_delay_ms, attempt) * if slow { 2 } else { 1 };
        if let Some(turn) = self.turn.as_mut() {
            turn.phase = Phase::RetryWait;
        }
        self.observe(EngineEvent::ProviderRetry {
            request_id,
            attempt,
            delay_ms,
            reason,
            discarded_parts,
            discarded_tools,
        });
        self.timers.retry = Some(clock::now() + Duration::from_millis(delay_ms));
    }

    /// The backoff is over: the next call, once server tools the failed
    /// attempt started are done (the call shows their results).
    pub(super) fn on_retry_deadline(&mut self) {
        let Some(turn) = self.turn.as_mut().filter(|turn| turn.phase == Phase::RetryWait) else {
            return;
        };
        if turn.outstanding_server_tools.is_empty() {
            return self.start_attempt();
        }
        turn.phase = Phase::ServerTools;
        self.arm_stall_watchdog();
    }

    /// The provider ended the step without output: retry after the backoff,
    /// replacing the failed attempt's parts, at most
    /// `max_model_calls_empty_finish` calls.
    pub(super) fn on_truncated_finish(&mut self, reason: FinishReason) {
        let keep_parts = self.config.regressions.has(Regression::KeepFailedAttemptParts);
        let cap = self.config.max_model_calls_empty_finish;
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let benign = reason == FinishReason::Unknown
            && !turn.attempt_output
            && has_content(turn.assistant.parts.range(..turn.part_floor));
        if benign {
            turn.assistant.parts.truncate(turn.part_floor);
            self.flush_in_flight(false);
            return self.end_turn(TurnStatus::Completed, None);
        }
        let (discarded_parts, discarded_tools) = match keep_parts {
            true => (0, Vec::new()),
            false => discard_attempt(turn),
        };
        let attempt = turn.attempt;
        let request_id = turn.request_id.clone();
        if !keep_parts {
            self.take_back_attempt();
        }
        self.observe(EngineEvent::EmptyFinish {
            request_id: request_id.clone(),
            attempt,
            discarded_parts,
            discarded_tools: discarded_tools.clone(),
        });
        self.forget_attempt(true, !discarded_tools.is_empty());
        if attempt >= cap {
            let message = format!("EmptyOther: the provider ended the stream without output ({attempt} model calls)");
            return self.end_turn(TurnStatus::Error, Some(message));
        }
        // opencode retries an EmptyOther like any retryable error: after its backoff.
        let reason = "EmptyOther: the provider ended the stream without output".to_string();
        self.wait_to_retry(request_id, attempt, reason, 0, Vec::new());
    }
}

/// Drops what the current attempt streamed, but for the server tools it
/// started: they ran (or run), so their calls stay, with their results,
/// in a step of their own, and the next call is shown them. Returns the
/// parts and tool calls dropped.
fn discard_attempt(turn: &mut Turn) -> (usize, Vec<String>) {
    let floor = turn.part_floor;
    let started = |part: &&Part| matches!(part, Part::Tool(tool) if turn.attempt_server_tools.contains(&tool.call_id));
    let kept: Vec<Part> = turn.assistant.parts.range(floor..).filter(started).cloned().collect();
    let dropped = turn.assistant.parts.range(floor..).filter(|part| !started(part));
    let discarded_tools = tool_ids(dropped.clone());
    let discarded_parts = dropped.count();
    turn.assistant.parts.truncate(floor);
    if !kept.is_empty() {
        turn.assistant.parts.push(Part::StepStart);
        kept.into_iter().for_each(|part| turn.assistant.parts.push(part));
    }
    (discarded_parts, discarded_tools)
}

/// The text parts' text, in order: what a text consumer shows.
fn turn_text<'a>(parts: impl Iterator<Item = &'a Part>) -> String {
    parts
        .filter_map(|part| match part {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn tool_ids<'a>(parts: impl Iterator<Item = &'a Part>) -> Vec<String> {
    parts
        .filter_map(|part| match part {
            Part::Tool(tool) => Some(tool.call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Text, reasoning or tool content: a `step-start`, or a text part that
/// never got a delta, is not output.
fn has_content<'a>(mut parts: impl Iterator<Item = &'a Part>) -> bool {
    parts.any(|part| match part {
        Part::StepStart => false,
        Part::Text { text, .. } | Part::Reasoning { text, .. } => !text.is_empty(),
        Part::Tool(_) => true,
    })
}

#[cfg(test)]
mod tests {
    use super::retry_delay_ms;

    #[test]
    fn provider_backoff_doubles_from_two_seconds_up_to_thirty() {
        let delays: Vec<u64> = (1..=6).map(|attempt| retry_delay_ms(2_000, attempt)).collect();
        assert_eq!(delays, vec![2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        let quick: Vec<u64> = (1..=3).map(|attempt| retry_delay_ms(100, attempt)).collect();
        assert_eq!(quick, vec![100, 200, 400]);
    }
}

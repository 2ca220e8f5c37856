//! Invariant 5: the stored transcript has no orphan `step-start`, no
//! duplicated tool call, and no parts left by a retried attempt: each
//! assistant message holds at most one `step-start` per model call whose
//! output was kept (a truncated attempt's parts are replaced, not appended),
//! and at least one per model call whose output it holds (each step begins
//! with its boundary: a reload, and the model, tell steps apart by it).
//! The store is the history's commits folded in; the calls are the model
//! requests that named the message as the reply they write into.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use turnsim_engine::transcript::TextState;
use turnsim_engine::{Chunk, Message, Part, Role, ToolState};

use super::Invariant;
use crate::check::facts::{CallEnd, CallFact};
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;
use crate::history::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "transcript-shape",
    rule: "no orphan step-start, no duplicated tool call, no parts of a retried attempt, no text left streaming in the stored transcript or stored streaming after the model ended it",
    check,
};

const NAME: &str = "transcript-shape";

fn check(input: &CheckInput) -> Vec<Violation> {
    let messages = &input.final_store.messages;
    let mut violations = Vec::new();
    let mut seen_calls = BTreeSet::new();
    for message in messages.iter().filter(|message| message.role == Role::Assistant) {
        if let Some(position) = orphan_step_start(message) {
            violations.push(Violation::new(NAME, format!("{}: orphan step-start at part {position}", message.id)));
        }
        for tool in message.tools() {
            if !seen_calls.insert(tool.call_id.clone()) {
                violations
                    .push(Violation::new(NAME, format!("{}: tool call {} appears twice", message.id, tool.call_id)));
            }
        }
        violations.extend(check_step_starts(input, message));
        violations.extend(still_streaming(input, message));
    }
    violations.extend(tool_inputs(input, messages));
    violations.extend(ended_text_stored_streaming(input));
    violations
}

/// Text the model ended is stored ended: once a call has sent a part's
/// `text-end` (or `reasoning-end`), every commit of the reply it streams
/// into shows that part done, not still streaming (a UI keeps animating a
/// streaming part: a finished paragraph above a long tool call would look
/// unfinished). A part is known by its id, the last of the reply's parts
/// with that id; chunks of a call the engine let go of count for nothing.
fn ended_text_stored_streaming(input: &CheckInput) -> Vec<Violation> {
    let targets: BTreeMap<u32, &str> =
        input.facts.calls.iter().filter_map(|call| Some((call.call, call.target.as_deref()?))).collect();
    // The call streaming into each reply now, and what each call has ended.
    let mut streaming_into: BTreeMap<&str, u32> = BTreeMap::new();
    let mut ended: BTreeMap<u32, BTreeMap<(bool, &str), bool>> = BTreeMap::new();
    let mut cancelled = BTreeSet::new();
    let mut reported = BTreeSet::new();
    let mut violations = Vec::new();
    for crossing in input.run.history.iter() {
        match &crossing.what {
            Boundary::ModelRequest { call, .. } => {
                if let Some(target) = targets.get(call) {
                    streaming_into.insert(target, *call);
                }
            }
            Boundary::ModelCancel { call } => {
                cancelled.insert(*call);
            }
            Boundary::ModelChunk { call, chunk } if !cancelled.contains(call) => {
                let (key, done) = match chunk {
                    Chunk::TextStart { id } => ((false, id.as_str()), false),
                    Chunk::TextEnd { id } => ((false, id.as_str()), true),
                    Chunk::ReasoningStart { id } => ((true, id.as_str()), false),
                    Chunk::ReasoningEnd { id } => ((true, id.as_str()), true),
                    _ => continue,
                };
                ended.entry(*call).or_default().insert(key, done);
            }
            Boundary::Commit { writes } => {
                for message in writes.iter().filter_map(|write| write.message()) {
                    let Some(call) = streaming_into.get(message.id.as_str()) else { continue };
                    let closed = ended.get(call).into_iter().flatten().filter(|(_, done)| **done);
                    for (&(reasoning, id), _) in closed {
                        let state = message.parts.iter().rev().find_map(|part| match (part, reasoning) {
                            (Part::Text { id: part_id, state, .. }, false)
                            | (Part::Reasoning { id: part_id, state, .. }, true)
                                if part_id == id =>
                            {
                                Some(*state)
                            }
                            _ => None,
                        });
                        let still = state == Some(TextState::Streaming);
                        if still && reported.insert((message.id.clone(), reasoning, id)) {
                            let text = format!(
                                "{}: part {id} is stored streaming after model call #{call} ended it",
                                message.id
                            );
                            violations.push(Violation::new(NAME, text));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    violations
}

/// A stored tool call's input is an input the model streamed for it: the
/// `tool-call` chunk's, or its `tool-input-delta`s joined and parsed. Read
/// from the chunks themselves, not through the message format's chunk
/// rules, so the oracle does not share the engine's reading of them. Only
/// object inputs are judged (what a tool takes), and only calls a client or
/// the server may still act on or did (an error settles a call with no
/// run: a repaired call's input, cut by a refused write, reaches no one).
fn tool_inputs(input: &CheckInput, messages: &[Message]) -> Vec<Violation> {
    let mut deltas: BTreeMap<&str, String> = BTreeMap::new();
    let mut streamed: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for crossing in input.run.history.iter() {
        let Boundary::ModelChunk { chunk, .. } = &crossing.what else { continue };
        match chunk {
            Chunk::ToolInputStart { id, .. } => {
                deltas.insert(id, String::new());
            }
            Chunk::ToolInputDelta { id, delta } => deltas.entry(id).or_default().push_str(delta),
            Chunk::ToolInputEnd { id } => {
                let parsed = deltas.get(id.as_str()).and_then(|text| serde_json::from_str::<Value>(text).ok());
                streamed.entry(id).or_default().extend(parsed.filter(Value::is_object));
            }
            Chunk::ToolCall { id, input: value, .. } if value.is_object() => {
                streamed.entry(id).or_default().push(value.clone())
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for message in messages {
        for tool in message.tools() {
            let acted_on = matches!(
                tool.state,
                ToolState::InputAvailable
                    | ToolState::ApprovalRequested
                    | ToolState::ApprovalResponded
                    | ToolState::OutputAvailable
            );
            let (Some(stored), Some(inputs), true) = (&tool.input, streamed.get(tool.call_id.as_str()), acted_on)
            else {
                continue;
            };
            if !inputs.is_empty() && !inputs.contains(stored) {
                let text = format!(
                    "{}: tool call {} is stored with input {stored}; the model streamed {}",
                    message.id, tool.call_id, inputs[0]
                );
                violations.push(Violation::new(NAME, text));
            }
        }
    }
    violations
}

/// Once the run has settled no model call writes into the store, so no
/// stored text may still be marked streaming (a consumer would show it
/// as unfinished forever). Text a stored transcript brought with it and
/// nothing touched is the earlier process's.
fn still_streaming(input: &CheckInput, message: &Message) -> Option<Violation> {
    if input.run.end != RunEnd::Quiescent || input.run.history.initial.message(&message.id) == Some(message) {
        return None;
    }
    let streaming = message.parts.iter().position(|part| {
        matches!(
            part,
            Part::Text { state: TextState::Streaming, .. } | Part::Reasoning { state: TextState::Streaming, .. }
        )
    })?;
    let text = format!("{}: part {streaming} is still streaming after the run settled", message.id);
    Some(Violation::new(NAME, text))
}

/// A `step-start` followed by another or by the end of the message.
fn orphan_step_start(message: &Message) -> Option<usize> {
    let parts = &message.parts;
    (0..parts.len())
        .find(|&at| matches!(parts[at], Part::StepStart) && matches!(parts.get(at + 1), None | Some(Part::StepStart)))
}

fn step_starts(message: &Message) -> usize {
    message.parts.iter().filter(|part| matches!(part, Part::StepStart)).count()
}

/// `step-start`s of `message` the store held before the engine booted.
fn stored_step_starts(input: &CheckInput, message_id: &str) -> usize {
    input.run.history.initial.message(message_id).map_or(0, step_starts)
}

fn check_step_starts(input: &CheckInput, message: &Message) -> Option<Violation> {
    // Steps a stored transcript brought with it were not made by this run's model calls.
    let made = step_starts(message).saturating_sub(stored_step_starts(input, &message.id));
    let calls: Vec<&CallFact> = input.facts.calls_into(&message.id).collect();
    let kept_calls = (0..calls.len()).filter(|&at| kept_output(input, &calls, at)).count();
    if made > kept_calls {
        let message = format!(
            "{}: {made} step-starts but only {kept_calls} model calls kept their output (a retried attempt's parts were kept)",
            message.id
        );
        return Some(Violation::new(NAME, message));
    }
    // Read from the last call back: a part is the latest call's that
    // streamed it (a retry streams the same text again).
    let mut taken = BTreeSet::new();
    let left = (0..calls.len())
        .rev()
        .filter(|&at| kept_output(input, &calls, at) && left_content(input, calls[at], message, &mut taken))
        .count();
    (made < left).then(|| {
        let message = format!(
            "{}: {left} model calls left their output in it but it holds {made} step-starts (a step's boundary was dropped)",
            message.id
        );
        Violation::new(NAME, message)
    })
}

/// Whether the stored message holds something `call` streamed: one of its
/// tool calls, or one of its text parts whole (an engine may join a part's
/// deltas, never a step's text with another step's, which a `step-start`
/// parts).
/// `taken`: the stored parts an earlier reading gave to another call.
fn left_content(input: &CheckInput, call: &CallFact, message: &Message, taken: &mut BTreeSet<usize>) -> bool {
    if call.tools.iter().any(|call_id| message.tool(call_id).is_some()) {
        return true;
    }
    let texts = call.streamed_texts(input.run.history);
    let holds = |at: usize, part: &Part| {
        !taken.contains(&at)
            && texts.iter().any(|(reasoning, text)| match part {
                Part::Text { text: stored, .. } => !reasoning && stored == text,
                Part::Reasoning { text: stored, .. } => *reasoning && stored == text,
                _ => false,
            })
    };
    let found = message.parts.iter().enumerate().position(|(at, part)| holds(at, part));
    found.is_some_and(|at| taken.insert(at))
}

/// Whether call `at` of a reply's calls may have left a step in it: not a
/// truncated finish, not an HTTP failure that streamed nothing, and not a
/// retryable HTTP failure the next call retried (a retry replaces what the
/// failed attempt streamed, as after a truncated finish). A call whose end
/// the process died before recording anything of (every commit after it
/// refused) is, to the store, a call the crash cut: its parts stay.
fn kept_output(input: &CheckInput, calls: &[&CallFact], at: usize) -> bool {
    let call = calls[at];
    if call.ended_at.is_some_and(|end| input.facts.died_unrecorded(end)) {
        return true;
    }
    let retried = call.end.is_retryable_http() && at + 1 < calls.len();
    let http_empty = matches!(call.end, CallEnd::Http { .. }) && call.content_chunks == 0;
    // A server tool a failed call asked for ran: its call and result
    // outlive the attempt, in a step of their own.
    (!call.is_truncated_finish() && !retried && !http_empty)
        || call.tools.iter().any(|call_id| input.facts.server_tool_runs.contains_key(call_id))
}

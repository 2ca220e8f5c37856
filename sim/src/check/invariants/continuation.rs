//! Invariant 2: at most one continuation per tool batch; none while a stream
//! is open; none while a sibling is unanswered; and, once the batch is
//! complete and a result opted in, exactly one (liveness); where a
//! scenario needs `coalesce`, not before the coalesce window after the
//! batch's last answer has passed.
//!
//! Read from the model requests: what each picks up from (its basis, see
//! [`crate::check::facts::Basis`]). A request after a tool batch continues
//! it, whether the engine calls it a continuation, a next step or a
//! recovery: each shows the model the same batch. A request that picks up
//! a reply whose last call already finished it, with no restart in
//! between, is a second model invocation for what was already answered.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use turnsim_engine::durable::DurableState;
use turnsim_engine::transcript::TextState;
use turnsim_engine::{Part, Role, ToolPart, ToolState};

use super::Invariant;
use crate::check::facts::{last_step_tools, Basis, CallFact};
use crate::check::store_tools::walk_commits;
use crate::check::{CheckInput, Violation};
use crate::history::RunEnd;
use crate::history::{Boundary, History};

pub const INVARIANT: Invariant = Invariant {
    name: "single-continuation",
    rule: "one continuation per tool batch, never while a stream is open or a sibling is unanswered, never inside the coalesce window (where a scenario needs it), and always once the batch completes",
    check,
};

const NAME: &str = "single-continuation";

/// One pass over the calls in request order, keeping the earlier calls
/// still streaming and the latest call into each reply.
fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut streaming: Vec<&CallFact> = Vec::new();
    let mut latest_into: BTreeMap<&str, &CallFact> = BTreeMap::new();
    for call in &input.facts.calls {
        streaming.retain(|earlier| earlier.last_chunk_at.is_some_and(|last| last > call.at));
        violations.extend(while_streaming(input, call, &streaming));
        violations.extend(unanswered_siblings(input, call));
        if let Basis::Partial { message_id } = &call.basis {
            violations.extend(continued_twice(input, call, message_id, latest_into.get(message_id.as_str())));
        }
        streaming.push(call);
        if let Some(target) = call.target.as_deref() {
            latest_into.insert(target, call);
        }
    }
    if input.run.end == RunEnd::Quiescent {
        violations.extend(stranded_batch(input));
    }
    violations.extend(inside_the_coalesce_window(input));
    violations
}

/// In a scenario that needs `coalesce`: a continuation fires no sooner
/// than `engine.coalesce_ms` after the last answer to its batch before
/// it, so the window is one a client can act in (a second result, a
/// change of mind) before the model is asked again.
fn inside_the_coalesce_window(input: &CheckInput) -> Vec<Violation> {
    if !input.scenario.scenario.needs.contains(&crate::capability::Capability::Coalesce) {
        return Vec::new();
    }
    let window_us = input.scenario.scenario.engine_config().coalesce_ms.saturating_mul(1000);
    let history = &input.run.history;
    let mut violations = Vec::new();
    for (at, message_id, call_ids) in input.facts.continuations() {
        let answers = call_ids.iter().flat_map(|call_id| input.facts.answers.get(call_id)).flatten();
        let Some(&last) = answers.filter(|&&answer| answer < at).max() else { continue };
        // The window is a process's: a new one restores the owed
        // continuation from the store and keeps its own.
        if input.facts.killed_between(last, at) {
            continue;
        }
        // A recovery under way takes the batch when its alarm fires.
        let recovering = history.store_at(at).incidents.values().any(|incident| incident.status == "attempting");
        if recovering {
            continue;
        }
        let waited_us = history.crossings[at].at_us - history.crossings[last].at_us;
        if waited_us < window_us {
            let message = format!(
                "the continuation of {message_id}'s batch fired {} ms after its last answer, inside the {} ms coalesce window",
                waited_us / 1000,
                window_us / 1000
            );
            violations.push(input.violation_at(NAME, at, message));
        }
    }
    violations
}

/// A request made while an earlier call was still streaming to the engine
/// (a chunk of it crossed after the request, with no restart between).
/// `streaming`: the earlier calls with a chunk after the request.
fn while_streaming(input: &CheckInput, call: &CallFact, streaming: &[&CallFact]) -> Option<Violation> {
    let facts = &input.facts;
    let open = streaming.iter().filter(|earlier| {
        earlier.last_chunk_at.is_some_and(|last| last > call.at && !facts.killed_between(call.at, last))
    });
    let open = open.map(|earlier| format!("#{}", earlier.call)).collect::<Vec<_>>();
    (!open.is_empty()).then(|| {
        let message =
            format!("model call #{} was requested while call {} was still streaming", call.call, open.join(", "));
        input.violation_at(NAME, call.at, message)
    })
}

/// A request continuing a batch that shows a client tool of it, one the
/// client was asked for, with a result nobody sent (or none at all): the
/// continuation went ahead of the client's answer. (A call cut off while
/// its input streamed was never the client's to answer.)
fn unanswered_siblings(input: &CheckInput, call: &CallFact) -> Option<Violation> {
    let Basis::Batch { message_id, .. } = &call.basis else { return None };
    let request = call.request(input.run.history);
    let reply = request.messages.iter().find(|message| &message.id == message_id)?;
    let unanswered: Vec<&str> = last_step_tools(reply)
        .filter(|tool| input.is_client_tool(&tool.tool_name) && input.facts.asked_before(&tool.call_id, call.at))
        .filter(|tool| tool.state.is_pending() || !input.facts.answered_before(&tool.call_id, call.at))
        .map(|tool| tool.call_id.as_str())
        .collect();
    (!unanswered.is_empty()).then(|| {
        let message = format!(
            "model call #{} continued the batch of {message_id} while {} was unanswered",
            call.call,
            unanswered.join(", ")
        );
        input.violation_at(NAME, call.at, message)
    })
}

/// A request picking up a reply (text last) whose latest call had already
/// finished it with output, with no process restart in between: the reply
/// was complete, and nothing asked for more. A request that shows the reply
/// exactly as that call was given it asks again for output that was not
/// kept (the store refused it): that is a retry, not a second continuation.
/// `previous`: the latest earlier call into the reply.
fn continued_twice(
    input: &CheckInput,
    call: &CallFact,
    message_id: &str,
    previous: Option<&&CallFact>,
) -> Option<Violation> {
    let facts = &input.facts;
    let previous = *previous?;
    let finished_at = previous.ended_at?;
    if !previous.finished_with_output() || facts.killed_between(finished_at, call.at) {
        return None;
    }
    let history = &input.run.history;
    let reply = |fact: &CallFact| {
        let message = fact.request(history).messages.iter().find(|message| message.id == message_id);
        message.map(|message| message.parts.iter().map(content).collect::<Vec<_>>())
    };
    if reply(previous) == reply(call) {
        return None;
    }
    let message = format!(
        "model call #{} continued {message_id} after model call #{} had already finished it",
        call.call, previous.call
    );
    Some(input.violation_at(NAME, call.at, message))
}

/// What a part says, without whether its text was still streaming.
fn content(part: &Part) -> Part {
    match part {
        Part::Text { id, text, .. } => Part::Text { id: id.clone(), text: text.clone(), state: TextState::Done },
        Part::Reasoning { id, text, .. } => {
            Part::Reasoning { id: id.clone(), text: text.clone(), state: TextState::Done }
        }
        other => other.clone(),
    }
}

/// At the end of a settled run, the last reply's batch is complete, a
/// result opted in to continue, and no request picked it up after its last
/// answer.
fn stranded_batch(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let store = &input.final_store;
    let leaf = store.messages.last().filter(|message| message.role == Role::Assistant)?;
    // A call whose input never finished streaming is no call yet: it is
    // neither waiting nor answered.
    let batch: Vec<&ToolPart> = last_step_tools(leaf).filter(|tool| tool.state != ToolState::InputStreaming).collect();
    let tools: Vec<&str> = batch.iter().map(|tool| tool.call_id.as_str()).collect();
    let complete = !tools.is_empty() && batch.iter().all(|tool| tool.state.is_output());
    let (last_answer, opted_in) = answers_to(history, &tools);
    if !complete || !opted_in {
        return None;
    }
    // From the commit that first stored the batch complete, when that came
    // before the last answer: an answer after it (a duplicate, a late
    // retry) completes nothing. (A server tool's output, stored by the
    // continuation itself, comes after.)
    let completed_at =
        first_stored_complete(history, &leaf.id, &tools).map_or(last_answer, |index| index.min(last_answer));
    let continued = input.facts.calls.iter().any(|call| {
        call.at > completed_at
            && matches!(&call.basis, Basis::Batch { message_id, call_ids }
                if *message_id == leaf.id && call_ids.iter().any(|id| tools.contains(&id.as_str())))
    });
    // A consumer told that the turn taking the batch failed (the store
    // refused it) was told why nothing continued: a new message goes on.
    let told = crate::check::facts::told_failure_since(history, completed_at);
    (!continued && !told).then(|| {
        let message = format!("batch {} is complete and a result opted in, but no continuation ran", tools.join(", "));
        input.violation_at(NAME, last_answer, message)
    })
}

/// The first commit after which the store holds every one of `tools` in
/// message `leaf` as an output. A call's state moves only with the commits
/// that may change it, so only those are read.
fn first_stored_complete(history: &History, leaf: &str, tools: &[&str]) -> Option<usize> {
    let output = |store: &DurableState, id: &str| {
        store.message(leaf).and_then(|message| message.tool(id)).is_some_and(|tool| tool.state.is_output())
    };
    let mut not_output: BTreeSet<&str> = tools.iter().copied().filter(|id| !output(&history.initial, id)).collect();
    let mut completed_at = None;
    walk_commits(history, |index, store, changed| {
        for id in tools.iter().copied().filter(|id| changed.contains(*id)) {
            if output(store, id) {
                not_output.remove(id);
            } else {
                not_output.insert(id);
            }
        }
        if not_output.is_empty() {
            completed_at = Some(index);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    completed_at
}

/// Where the last answer to any of `call_ids` came in, and whether any of
/// their answers asked to continue.
fn answers_to(history: &History, call_ids: &[&str]) -> (usize, bool) {
    let mut last = 0;
    let mut opted_in = false;
    for (index, crossing) in history.iter().enumerate() {
        let (call_id, auto_continue) = match &crossing.what {
            Boundary::ToolResult { result, auto_continue, .. } => (result.call_id.as_str(), *auto_continue),
            Boundary::Approval { call_id, auto_continue, .. } => (call_id.as_str(), *auto_continue),
            _ => continue,
        };
        if call_ids.contains(&call_id) {
            last = index;
            opted_in |= auto_continue;
        }
    }
    (last, opted_in)
}

//! Expectations on what the store holds at the end of a run (the history's
//! commits folded in): tool parts by state or field, the last answer's
//! exact text, a message's exact parts, the messages' order, and the
//! durable records beside the transcript (an in-flight turn, incidents,
//! alarms).

use turnsim_engine::transcript::{Message, ToolPart};
use turnsim_engine::Role;

use super::{CheckInput, Violation};
use crate::scenario::{Count, ExpectedToolState, Presence, StoreExpectation, ToolExpectation, ToolFields};
use crate::transcript_view;

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let expect = &input.scenario.scenario.expect;
    let store = &input.final_store;
    let messages = &store.messages;
    let mut violations = Vec::new();
    for (call_id, expected) in &expect.tools {
        let part = messages.iter().find_map(|message| message.tool(call_id));
        if let Some(wrong) = tool_mismatch(part, expected) {
            violations.push(Violation::new("expect.tools", format!("{call_id}: {wrong}")));
        }
    }
    if let Some(expected) = &expect.final_text {
        let actual = last_answer(messages);
        if &actual != expected {
            violations.push(Violation::new("expect.final_text", format!("expected {expected:?}, got {actual:?}")));
        }
    }
    for (message_id, expected) in &expect.parts {
        violations.extend(check_parts(messages, message_id, expected));
    }
    if let Some(expected) = &expect.store {
        violations.extend(check_records(store, expected));
    }
    if !expect.order.is_empty() {
        let actual: Vec<&str> = messages.iter().map(|message| message.id.as_str()).collect();
        if actual != expect.order {
            violations.push(Violation::new("expect.order", format!("expected {:?}, got {actual:?}", expect.order)));
        }
    }
    violations
}

/// The records the store holds beside the transcript, against `expect.store`.
fn check_records(store: &turnsim_engine::durable::DurableState, expected: &StoreExpectation) -> Vec<Violation> {
    let mut violations = Vec::new();
    let in_flight = Presence::of(store.in_flight.as_ref());
    if let Some(want) = expected.in_flight.filter(|want| *want != in_flight) {
        let left = store.in_flight.as_ref().map(|turn| format!(" ({} {})", turn.request_id, turn.kind.as_str()));
        let message = format!("expected {}, got {}{}", want.as_str(), in_flight.as_str(), left.unwrap_or_default());
        violations.push(Violation::new("expect.store.in_flight", message));
    }
    let attempting = store.incidents.values().filter(|incident| incident.status == "attempting").count();
    let mut compare = |field: &str, expected: Option<Count>, actual: usize| {
        if let Some(expected) = expected.filter(|expected| !expected.admits(actual as u32)) {
            violations
                .push(Violation::new(&format!("expect.store.{field}"), format!("expected {expected}, got {actual}")));
        }
    };
    compare("incidents", expected.incidents, store.incidents.len());
    compare("incidents_attempting", expected.incidents_attempting, attempting);
    compare("alarms", expected.alarms, store.alarms.len());
    violations
}

/// The text of the last stored assistant message.
fn last_answer(messages: &[Message]) -> String {
    messages.iter().rev().find(|message| message.role == Role::Assistant).map(Message::text).unwrap_or_default()
}

fn state_of(part: Option<&ToolPart>) -> &'static str {
    part.map_or(ExpectedToolState::Absent.as_str(), |tool| tool.state.as_str())
}

/// What differs between a stored tool part and its expectation, in words.
fn tool_mismatch(part: Option<&ToolPart>, expected: &ToolExpectation) -> Option<String> {
    let actual = state_of(part);
    match expected {
        ToolExpectation::State(state) => {
            (actual != state.as_str()).then(|| format!("expected {}, got {actual}", state.as_str()))
        }
        ToolExpectation::Fields(fields) => field_mismatches(part, fields),
    }
}

fn field_mismatches(part: Option<&ToolPart>, fields: &ToolFields) -> Option<String> {
    let actual = state_of(part);
    let mut wrong = Vec::new();
    if let Some(state) = fields.state.filter(|state| state.as_str() != actual) {
        wrong.push(format!("expected {}, got {actual}", state.as_str()));
    }
    if let Some(state) = fields.not.filter(|state| state.as_str() == actual) {
        wrong.push(format!("expected anything but {}, got it", state.as_str()));
    }
    let input = part.and_then(|tool| tool.input.as_ref());
    if let Some(expected) = fields.input.as_ref().filter(|expected| Some(*expected) != input) {
        wrong.push(format!("expected input {expected}, got {}", input.map_or("none".to_string(), |i| i.to_string())));
    }
    let output = part.and_then(|tool| tool.output.as_ref());
    if let Some(expected) = fields.output.as_ref().filter(|expected| Some(*expected) != output) {
        wrong.push(format!("expected output {expected}, got {}", output.map_or("none".to_string(), |o| o.to_string())));
    }
    let error = part.and_then(|tool| tool.error_text.as_deref());
    if let Some(expected) = fields.error.as_deref().filter(|expected| Some(*expected) != error) {
        wrong.push(format!(
            "expected error {expected:?}, got {}",
            error.map_or("none".to_string(), |e| format!("{e:?}"))
        ));
    }
    let approval = part.and_then(|tool| tool.approval.as_ref()).map(|approval| approval.id.as_str());
    if let Some(expected) = fields.approval_id.as_deref().filter(|expected| Some(*expected) != approval) {
        wrong.push(format!("expected approval id {expected:?}, got {}", approval.unwrap_or("none")));
    }
    let dynamic = part.map(|tool| tool.dynamic);
    if let Some(expected) = fields.dynamic.filter(|expected| part.is_some() && Some(*expected) != dynamic) {
        let kind = |dynamic: bool| if dynamic { "a dynamic-tool part" } else { "a static tool part" };
        wrong.push(format!("expected {}, got {}", kind(expected), kind(!expected)));
    }
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

fn check_parts(messages: &[Message], message_id: &str, expected: &[String]) -> Option<Violation> {
    let Some(message) = messages.iter().find(|message| message.id == message_id) else {
        return Some(Violation::new("expect.parts", format!("{message_id}: no such stored message")));
    };
    let actual: Vec<String> = message.parts.iter().map(transcript_view::part_line).collect();
    (actual != expected).then(|| {
        Violation::new(
            "expect.parts",
            format!("{message_id}: expected [{}], got [{}]", expected.join(", "), actual.join(", ")),
        )
    })
}

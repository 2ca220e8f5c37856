//! What the world a server tool acts on is owed: a tool runs only as the
//! model called it and as the user decided. Each server-tool run the engine
//! asks for is a call the model made (streamed in this run, or held by the
//! store the run began with), under the name the model gave it and with
//! exactly the model's input; and a tool that needs approval runs only
//! after the client approved that very call, its latest decision standing
//! (a denial, or a decision nobody made, never starts it).
//!
//! Inputs are compared as JSON values: a model that sent its input as a
//! JSON string is taken at the value the string holds.

use std::collections::BTreeMap;

use serde_json::Value;
use turnsim_engine::ports::ServerToolCall;
use turnsim_engine::{Part, ToolKind};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "tool-runs-as-decided",
    rule: "a server tool runs only on a call the model made, under its name and with exactly its input, and a tool \
           that needs approval only after the client approved that call",
    check,
};

/// What the model asked for a call id: its tool's name and every whole
/// input it gave it (a retried attempt may stream the same id again).
type Called = BTreeMap<String, (String, Vec<Value>)>;

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let called = model_calls(input);
    let mut decisions: BTreeMap<&str, bool> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::Approval { call_id, approved, .. } => drop(decisions.insert(call_id, *approved)),
            Boundary::ServerToolCall { call } => {
                let wrong = not_called(call, &called).or_else(|| not_approved(input, call, &decisions));
                violations.extend(wrong.map(|wrong| input.violation_at(INVARIANT.name, index, wrong)));
            }
            _ => {}
        }
    }
    violations
}

/// The calls the model made in this run, and those the store held when the
/// run began (a restarted process may run a call an earlier one stored).
fn model_calls(input: &CheckInput) -> Called {
    let history = &input.run.history;
    let mut called = Called::new();
    let mut add = |call_id: &str, name: &str, value: Option<Value>| {
        let entry = called.entry(call_id.to_string()).or_insert_with(|| (name.to_string(), Vec::new()));
        entry.1.extend(value);
    };
    for message in &history.initial.messages {
        for part in message.parts.iter() {
            if let Part::Tool(tool) = part {
                add(&tool.call_id, &tool.tool_name, tool.input.clone());
            }
        }
    }
    for call in &input.facts.calls {
        for (tool, value) in call.streamed_tools(history) {
            add(&tool.call_id, &tool.tool_name, value);
        }
    }
    called
}

/// Why `call` is not a call the model made as it stands, if it is not.
fn not_called(call: &ServerToolCall, called: &Called) -> Option<String> {
    let id = &call.call_id;
    let Some((name, inputs)) = called.get(id) else {
        return Some(format!("server tool {id} ({}) ran, but no model call asked for it", call.tool_name));
    };
    if *name != call.tool_name {
        return Some(format!("server tool {id} ran as {}, but the model called {name}", call.tool_name));
    }
    if inputs.iter().any(|given| same_input(given, &call.input)) {
        return None;
    }
    let asked = inputs.iter().map(Value::to_string).collect::<Vec<_>>().join(" or ");
    let asked = if asked.is_empty() { "no whole input".to_string() } else { asked };
    Some(format!("server tool {id} ({name}) ran with input {}, but the model called it with {asked}", call.input))
}

/// Why a tool that needs approval ran without it, if it did.
fn not_approved(input: &CheckInput, call: &ServerToolCall, decisions: &BTreeMap<&str, bool>) -> Option<String> {
    let tools = &input.scenario.scenario.engine.tools;
    let needs_approval = tools.get(&call.tool_name).is_some_and(|tool| tool.kind == ToolKind::Approval);
    let (id, name) = (&call.call_id, &call.tool_name);
    match decisions.get(id.as_str()) {
        _ if !needs_approval => None,
        Some(true) => None,
        Some(false) => Some(format!("server tool {id} ({name}) ran after the client denied it")),
        None if approved_when_stored(input, id) => None,
        None => Some(format!("server tool {id} ({name}) needs approval and ran without the client approving it")),
    }
}

/// Whether the store the run began with holds the call approved (a client
/// of an earlier process approved it).
fn approved_when_stored(input: &CheckInput, call_id: &str) -> bool {
    let initial = &input.run.history.initial.messages;
    let tool = initial.iter().find_map(|message| message.tool(call_id));
    tool.and_then(|tool| tool.approval.as_ref()).is_some_and(|approval| approval.approved == Some(true))
}

/// The same input: equal values, or a string the model sent that holds the
/// value the tool ran with.
fn same_input(given: &Value, ran: &Value) -> bool {
    given == ran || given.as_str().and_then(|text| serde_json::from_str::<Value>(text).ok()).as_ref() == Some(ran)
}

//! Results are told as they happened: wherever a tool call's result is
//! shown (stored, sent to a client, sent to the model), it is one an answer
//! gave before that moment: a client's result, a server tool's outcome, or
//! what the store already held when the run began.
//!
//! - an output shown is an output the call was given (never an error's
//!   text turned into a success, never an input nobody returned);
//! - an error shown, on a call that was answered, is one of its answers'
//!   errors with that answer's text (an answer with no text leaves the
//!   engine its own); a call nobody answered may be settled by the engine
//!   (a repair, an interrupted run), but never as a success;
//! - an answer the store refused to record is lost, and the engine tells
//!   its writer so: until a commit holds the call answered again, the
//!   engine may settle it with an error of its own (never a success);
//! - a decision shown (approved, denied) is the client's latest one: an
//!   approval nobody gave is not shown, and an approved call is never
//!   shown denied.
//!
//! Read as a fold over every crossing that shows messages, reading only
//! the parts that changed since the message was last read, so a long
//! session costs what it adds.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use turnsim_engine::{Frame, Message, Part, ToolOutcome, ToolPart, ToolState};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;
use turnsim_engine::durable::Write;

pub const INVARIANT: Invariant = Invariant {
    name: "tool-outcomes-as-given",
    rule: "a tool result shown anywhere is one an answer gave: an output its tool returned, its error with the \
           answer's text, the client's own decision on an approval",
    check,
};

/// What a call was given, as far as the history has gone.
#[derive(Default)]
struct Given {
    outputs: Vec<Value>,
    /// Errors, with the text the answer gave (`None`: the engine's own).
    errors: Vec<Option<String>>,
    /// The client's latest decision on its approval.
    decision: Option<bool>,
    /// The store refused the commit that held its answer, and none has
    /// held it answered since.
    lost: bool,
}

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut given = initial_answers(input);
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut framed: BTreeMap<&str, ToolState> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        let what = &crossing.what;
        if take_answer(&mut given, what) {
            continue;
        }
        if let Boundary::CommitRefused { writes } = what {
            for tool in
                writes.iter().filter_map(Write::message).flat_map(Message::tools).filter(|tool| answered(tool.state))
            {
                given.entry(tool.call_id.clone()).or_default().lost = true;
            }
            continue;
        }
        let mut wrongs = Vec::new();
        if let Boundary::Frame { frame: Frame::Tool { call_id, state, .. }, .. } = what {
            // A state frame is read when it tells something new: one sent
            // again later (after a late answer the engine ignored) was judged
            // when it was first told.
            if framed.insert(call_id.as_str(), *state) != Some(*state) {
                wrongs.extend(wrong_state(*state, given.get(call_id.as_str())).map(|wrong| (call_id, wrong)));
            }
        }
        let stored = matches!(what, Boundary::Commit { .. });
        for (message, changed) in input.shown_changes.at(index) {
            for tool in changed_tools(message, changed) {
                let entry = given.get_mut(tool.call_id.as_str());
                wrongs.extend(wrong_part(tool, entry.as_deref()).map(|wrong| (&tool.call_id, wrong)));
                if let (true, Some(entry)) = (stored && answered(tool.state), entry) {
                    entry.lost = false;
                }
            }
        }
        for (call_id, wrong) in wrongs {
            if reported.insert(call_id.clone()) {
                let message = format!("{call_id} {wrong}, {}", shown_how(what));
                violations.push(input.violation_at(INVARIANT.name, index, message));
            }
        }
    }
    violations
}

/// The results the store held when the run began: as given as any answer.
fn initial_answers(input: &CheckInput) -> BTreeMap<String, Given> {
    let mut given: BTreeMap<String, Given> = BTreeMap::new();
    for tool in input.run.history.initial.messages.iter().flat_map(Message::tools) {
        let entry = given.entry(tool.call_id.clone()).or_default();
        match tool.state {
            ToolState::OutputAvailable => entry.outputs.extend(tool.output.clone()),
            ToolState::OutputError => entry.errors.push(tool.error_text.clone()),
            _ => {}
        }
        if let Some(approved) = tool.approval.as_ref().and_then(|approval| approval.approved) {
            entry.decision = Some(approved);
        }
    }
    given
}

/// Takes in an answer the crossing carries; returns whether it was one.
fn take_answer(given: &mut BTreeMap<String, Given>, what: &Boundary) -> bool {
    let (call_id, outcome) = match what {
        Boundary::ToolResult { result, .. } => (&result.call_id, &result.outcome),
        Boundary::ServerToolDone { call_id, outcome } => (call_id, outcome),
        Boundary::Approval { call_id, approved, .. } => {
            given.entry(call_id.clone()).or_default().decision = Some(*approved);
            return true;
        }
        _ => return false,
    };
    let entry = given.entry(call_id.clone()).or_default();
    match outcome {
        ToolOutcome::Output(output) => entry.outputs.push(output.clone()),
        ToolOutcome::Error(text) => entry.errors.push(text.clone()),
    }
    true
}

/// The tool parts of `message` that changed since it was last shown.
fn changed_tools<'a>(message: &'a Message, changed: &'a [usize]) -> impl Iterator<Item = &'a ToolPart> + 'a {
    changed.iter().filter_map(move |&at| match &message.parts[at] {
        Part::Tool(tool) => Some(tool),
        _ => None,
    })
}

/// What is wrong with a tool part as shown, against what it was given.
fn wrong_part(tool: &ToolPart, given: Option<&Given>) -> Option<String> {
    if let Some(wrong) = wrong_state(tool.state, given) {
        return Some(wrong);
    }
    let empty = Given::default();
    let given = given.unwrap_or(&empty);
    if tool.state == ToolState::OutputAvailable {
        let output = tool.output.as_ref().unwrap_or(&Value::Null);
        if !given.outputs.contains(output) {
            return Some(format!("is shown with output {output}, which no answer gave ({})", answers(given)));
        }
    }
    if tool.state == ToolState::OutputError && !given.lost && !given.errors.is_empty() && !given.errors.contains(&None)
    {
        let text = tool.error_text.as_deref().unwrap_or("");
        if !given.errors.iter().flatten().any(|error| error == text) {
            return Some(format!("is shown with error {text:?}, but its answer's error was {}", answers(given)));
        }
    }
    let approved = tool.approval.as_ref().and_then(|approval| approval.approved);
    match (approved, given.decision) {
        (Some(shown), Some(decided)) if shown != decided => {
            let shown = if shown { "approved" } else { "denied" };
            Some(format!("is shown {shown}, but the client {}", decision(decided)))
        }
        (Some(true), None) => Some("is shown approved, but nobody approved it".to_string()),
        _ => None,
    }
}

/// What is wrong with a call shown in `state` alone, against what it was given.
fn wrong_state(state: ToolState, given: Option<&Given>) -> Option<String> {
    let empty = Given::default();
    let given = given.unwrap_or(&empty);
    match state {
        ToolState::OutputAvailable if given.outputs.is_empty() && !given.errors.is_empty() => {
            Some(format!("failed ({}), but is shown as a success", answers(given)))
        }
        ToolState::OutputAvailable if given.outputs.is_empty() => {
            Some("is shown with an output, but no answer gave it one".to_string())
        }
        ToolState::OutputError if !given.lost && given.errors.is_empty() && !given.outputs.is_empty() => {
            Some(format!("returned {}, but is shown as an error", answers(given)))
        }
        ToolState::OutputDenied if given.decision == Some(true) => {
            Some("was approved by the client, but is shown denied".to_string())
        }
        _ => None,
    }
}

fn answered(state: ToolState) -> bool {
    matches!(state, ToolState::OutputAvailable | ToolState::OutputError)
}

/// The answers a call was given, as a report names them.
fn answers(given: &Given) -> String {
    let outputs = given.outputs.iter().map(|output| format!("output {output}"));
    let errors = given.errors.iter().map(|error| match error {
        Some(text) => format!("error {text:?}"),
        None => "an error with no text".to_string(),
    });
    let all: Vec<String> = outputs.chain(errors).collect();
    if all.is_empty() {
        "no answer".to_string()
    } else {
        all.join(", ")
    }
}

fn decision(approved: bool) -> &'static str {
    if approved {
        "approved it"
    } else {
        "denied it"
    }
}

/// How the crossing showed it, for a report.
fn shown_how(what: &Boundary) -> &'static str {
    match what {
        Boundary::Commit { .. } => "in what was stored",
        Boundary::ModelRequest { .. } => "to the model",
        _ => "to a client",
    }
}

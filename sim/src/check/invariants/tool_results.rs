//! Invariant 3: no model request holds a tool call without its result (the
//! provider would answer `MissingToolResultsError`). Read from each request
//! itself: what the model was shown.

use turnsim_engine::{Role, ToolState};

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant =
    Invariant { name: "tool-results-present", rule: "no model request contains a tool call without a result", check };

/// A call the model was told about but not told the outcome of. A call
/// still streaming its input is not a call yet.
const WITHOUT_RESULT: [ToolState; 2] = [ToolState::InputAvailable, ToolState::ApprovalRequested];

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        let Boundary::ModelRequest { call, request } = &crossing.what else { continue };
        let assistant = request.messages.iter().filter(|message| message.role == Role::Assistant);
        let missing: Vec<&str> =
            assistant.flat_map(|message| message.tools_in(&WITHOUT_RESULT)).map(|tool| tool.call_id.as_str()).collect();
        if !missing.is_empty() {
            let message = format!("model call #{call} was sent tool calls without results: {}", missing.join(", "));
            violations.push(input.violation_at(INVARIANT.name, index, message));
        }
    }
    violations
}

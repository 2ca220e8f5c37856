//! Checks run on every seed's trace: the invariants of DESIGN.md (each its
//! own module) and the scenario's own expectations.

pub mod expect;
mod expect_connections;
mod expect_stored;
pub mod expect_timeline;
mod facts;
pub mod invariants;
pub mod judged;
pub mod landed;
mod recovery_story;
mod relay;
mod replies;
mod seen;
mod store_cursor;
mod store_tools;
pub mod views;

use serde::Serialize;
use turnsim_engine::durable::DurableState;

use crate::check::relay::ModelStreams;
use crate::check::seen::ShownChanges;
use crate::protocol::fault::EngineFault;
use crate::scenario::ScenarioFile;
use crate::world::RunRecord;

pub use facts::{basis, has_content, told_failure_since, Basis, Facts};
pub use replies::APOLOGIES;

/// One broken rule in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The check's name (an invariant or `expect.<field>`).
    pub check: String,
    pub message: String,
    /// Index of the trace event where it shows, if one does.
    pub at_event: Option<usize>,
}

impl Violation {
    pub fn new(check: &str, message: impl Into<String>) -> Self {
        Self { check: check.to_string(), message: message.into(), at_event: None }
    }

    pub fn at(check: &str, at_event: usize, message: impl Into<String>) -> Self {
        Self { check: check.to_string(), message: message.into(), at_event: Some(at_event) }
    }
}

/// Every check a scenario can name: the invariants, the expectations, and
/// that each scripted fault landed (an engine process's fault is not one:
/// no scenario expects it).
pub fn check_names() -> Vec<&'static str> {
    let invariants = invariants::INVARIANTS.iter().map(|invariant| invariant.name);
    invariants.chain(expect::CHECKS.iter().copied()).chain([landed::CHECK]).collect()
}

pub fn is_check_name(name: &str) -> bool {
    check_names().contains(&name)
}

/// What a checker sees: the scenario, the run, and what is derived from
/// its history once (every checker reads them; none derives them again).
pub struct CheckInput<'a> {
    pub scenario: &'a ScenarioFile,
    /// The run as checks see it: what crossed the boundary, how it ended.
    pub run: judged::Judged<'a>,
    pub facts: Facts,
    /// The store at the end of the run: the history's commits folded in.
    pub final_store: DurableState,
    /// Where each user message came in, and its text ([`views::new_messages`]).
    pub new_messages: Vec<(usize, &'a str)>,
    /// Every request's model stream, read into atoms once: both relays
    /// judged (to clients and to callers) read the same streams.
    pub(crate) model_streams: ModelStreams<'a>,
    /// Every message each crossing shows, with what changed of it since it
    /// was shown last: the checks that follow tool results read the same.
    pub(crate) shown_changes: ShownChanges<'a>,
}

impl<'a> CheckInput<'a> {
    pub fn new(scenario: &'a ScenarioFile, run: &'a RunRecord) -> Self {
        Self {
            scenario,
            run: judged::Judged::of(run),
            facts: Facts::derive(&run.history),
            final_store: run.history.final_store(),
            new_messages: views::new_messages(&run.history),
            model_streams: ModelStreams::new(&run.history),
            shown_changes: ShownChanges::new(&run.history),
        }
    }

    /// The timeline index a violation at history crossing `index` points at.
    pub fn event_of(&self, index: usize) -> usize {
        self.run.history.crossings.get(index).map_or(0, |crossing| crossing.at_event)
    }

    /// Whether the scenario has the client (or a person) answer `tool_name`;
    /// a tool it does not declare is the client's, as the engine takes it.
    pub fn is_client_tool(&self, tool_name: &str) -> bool {
        let tools = &self.scenario.scenario.engine.tools;
        tools.get(tool_name).map_or(turnsim_engine::ToolKind::Client, |tool| tool.kind).is_client_answered()
    }

    /// A violation of `check` where history crossing `index` shows it.
    pub fn violation_at(&self, check: &str, index: usize, message: impl Into<String>) -> Violation {
        Violation::at(check, self.event_of(index), message)
    }
}

/// The run's engine fault as its one violation, at the last event before it.
pub fn engine_fault(run: &RunRecord) -> Option<Violation> {
    let fault = run.engine_fault.as_ref()?;
    let at_event = run.events.len().checked_sub(1);
    Some(Violation { check: EngineFault::CHECK.to_string(), message: fault.to_string(), at_event })
}

/// Every invariant, then the expectations, as they came out.
pub fn raw_violations(scenario: &ScenarioFile, run: &RunRecord) -> Vec<Violation> {
    let input = CheckInput::new(scenario, run);
    let mut violations = invariants::check_all(&input);
    violations.extend(expect::check(&input));
    violations.extend(landed::check(&input));
    violations
}

/// [`raw_violations`], with a canary's expected failure turned around: the
/// named check must fail, and then the run passes.
///
/// A run the engine process broke fails with its fault alone: the history
/// stops where the process did, so no other check has a whole run to read,
/// and no expected failure turns it around.
pub fn check_run(scenario: &ScenarioFile, run: &RunRecord) -> Vec<Violation> {
    if let Some(fault) = engine_fault(run) {
        return vec![fault];
    }
    let violations = raw_violations(scenario, run);
    match &scenario.scenario.expect.expect_failure {
        None => violations,
        Some(expected) if violations.iter().any(|violation| &violation.check == expected) => Vec::new(),
        Some(expected) => {
            let mut message = format!("expected check `{expected}` to fail, but it passed");
            if !violations.is_empty() {
                let seen: Vec<&str> = violations.iter().map(|violation| violation.check.as_str()).collect();
                message.push_str(&format!(" (failed instead: {})", seen.join(", ")));
            }
            vec![Violation::new("canary", message)]
        }
    }
}

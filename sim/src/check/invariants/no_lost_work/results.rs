//! Each tool call's result, once shown, is never shown otherwise later (an
//! answered approval may become an output), neither in another state nor
//! with another output or error text, and is in the final store. A
//! call the engine discarded with a failed attempt (a truncated finish or
//! a retried HTTP failure) no longer exists and is exempt.
//!
//! Every model request and every commit shows the whole reply again, so the
//! fold reads a message's parts only where they may differ from the copy
//! of it read last, and the calls whose shown result changed since then:
//! a part read before, unchanged, against a result unchanged, decides
//! nothing new.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::{Frame, Message, Part, ToolState};

use super::NAME;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub fn lost_results(input: &CheckInput) -> Vec<Violation> {
    let mut fold = ShownResults { discarded: discarded_calls(input), ..ShownResults::default() };
    for (index, crossing) in input.run.history.iter().enumerate() {
        let what = &crossing.what;
        if let Boundary::Frame { frame: Frame::Tool { call_id, state, .. }, .. } = what {
            fold.show(input, index, what, call_id, *state, None);
            continue;
        }
        for (message, changed) in input.shown_changes.at(index) {
            fold.show_message(input, index, what, message, changed);
        }
    }
    let stored: BTreeSet<&str> = input
        .final_store
        .messages
        .iter()
        .flat_map(|message| message.tools())
        .map(|tool| tool.call_id.as_str())
        .collect();
    let gone = fold
        .shown
        .into_iter()
        .filter(|(call_id, _)| !fold.discarded.contains(call_id.as_str()) && !stored.contains(call_id.as_str()));
    let mut violations = fold.violations;
    violations.extend(gone.map(|(call_id, Shown { at: index, state, .. })| {
        let message = format!("{call_id} was shown as {} but is gone from the store", state.as_str());
        input.violation_at(NAME, index, message)
    }));
    violations
}

/// What a result shows: its output or error text.
type Outcome = (Option<serde_json::Value>, Option<String>);

/// An outcome as a crossing shows it, borrowed: copied only when kept.
type Shows<'a> = (&'a Option<serde_json::Value>, &'a Option<String>);

/// A call's result as first shown: where, in which state, and with what
/// outcome (a tool frame shows the state alone).
struct Shown {
    at: usize,
    state: ToolState,
    outcome: Option<Outcome>,
}

#[derive(Default)]
struct ShownResults<'a> {
    /// Each call's result as first shown.
    shown: BTreeMap<String, Shown>,
    discarded: BTreeSet<&'a str>,
    /// The calls whose entry in `shown` changed, in order.
    changes: Vec<String>,
    /// Per message id: how many changes there were when it was last read.
    read_at: BTreeMap<String, usize>,
    violations: Vec<Violation>,
}

impl ShownResults<'_> {
    /// Reads the parts of `message` that may decide something: those that
    /// changed since its last copy, and those of calls whose result changed
    /// since it was read. A call held twice that changes while it is read
    /// has its later parts read too.
    fn show_message(
        &mut self,
        input: &CheckInput,
        index: usize,
        what: &Boundary,
        message: &Message,
        changed: &[usize],
    ) {
        let since = self.read_at.insert(message.id.clone(), self.changes.len());
        let mut to_read: BTreeSet<usize> = changed.iter().copied().collect();
        if let Some(since) = since {
            let calls: BTreeSet<&String> = self.changes[since..].iter().collect();
            to_read.extend(calls.into_iter().flat_map(|call_id| message.parts.tool_positions(call_id)));
        }
        while let Some(at) = to_read.pop_first() {
            let Part::Tool(tool) = &message.parts[at] else { continue };
            let outcome = (&tool.output, &tool.error_text);
            if self.show(input, index, what, &tool.call_id, tool.state, Some(outcome)) {
                to_read.extend(message.parts.tool_positions(&tool.call_id).into_iter().filter(|&later| later > at));
            }
        }
    }

    /// Takes in one call shown in one state (with its outcome, where the
    /// crossing shows one); returns whether its entry changed.
    fn show(
        &mut self,
        input: &CheckInput,
        index: usize,
        what: &Boundary,
        call_id: &str,
        state: ToolState,
        outcome: Option<Shows>,
    ) -> bool {
        let kept = |(output, error): Shows| (output.clone(), error.clone());
        let Some(known) = self.shown.get_mut(call_id) else {
            if !is_result(state) {
                return false;
            }
            self.shown.insert(call_id.to_string(), Shown { at: index, state, outcome: outcome.map(kept) });
            return self.changed(call_id);
        };
        if self.discarded.contains(call_id) {
            return false;
        }
        if state == known.state {
            let Some(outcome) = outcome else { return false };
            let Some(first) = known.outcome.as_ref() else {
                known.outcome = Some(kept(outcome));
                return self.changed(call_id);
            };
            if (&first.0, &first.1) == outcome {
                return false;
            }
            let message = format!(
                "{call_id} was shown as {} with {} but then {} with {}",
                state.as_str(),
                describe((&first.0, &first.1)),
                verb(what),
                describe(outcome)
            );
            self.violations.push(input.violation_at(NAME, index, message));
            self.shown.remove(call_id);
            return self.changed(call_id);
        }
        if known.state == ToolState::ApprovalResponded && state.is_output() {
            *known = Shown { at: index, state, outcome: outcome.map(kept) };
            return self.changed(call_id);
        }
        let message =
            format!("{call_id} was shown as {} but then {} as {}", known.state.as_str(), verb(what), state.as_str());
        self.violations.push(input.violation_at(NAME, index, message));
        self.shown.remove(call_id);
        self.changed(call_id)
    }

    fn changed(&mut self, call_id: &str) -> bool {
        self.changes.push(call_id.to_string());
        true
    }
}

fn is_result(state: ToolState) -> bool {
    state.is_output() || state == ToolState::ApprovalResponded
}

/// The calls streamed by a model call whose attempt the engine discards.
/// Calls of failed model calls, but for server tools the engine ran: a
/// run is an effect, and its result is not the attempt's to take back.
fn discarded_calls<'a>(input: &'a CheckInput) -> BTreeSet<&'a str> {
    let ran = &input.facts.server_tool_runs;
    let failed = input.facts.calls.iter().filter(|call| call.is_truncated_finish() || call.end.is_retryable_http());
    failed
        .flat_map(|call| call.tools.iter().map(String::as_str))
        .filter(|call_id| !ran.contains_key(*call_id))
        .collect()
}

/// An outcome as a report names it.
fn describe((output, error): Shows) -> String {
    match (output, error) {
        (_, Some(error)) => format!("error {error:?}"),
        (Some(output), None) => format!("output {output}"),
        (None, None) => "no outcome".to_string(),
    }
}

/// How a crossing showed what it shows, for a message.
fn verb(what: &Boundary) -> &'static str {
    match what {
        Boundary::Commit { .. } => "stored",
        Boundary::ModelRequest { .. } => "sent to the model",
        _ => "sent to a client",
    }
}

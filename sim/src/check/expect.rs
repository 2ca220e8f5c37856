//! A scenario's own expectations, each read like the sentence in the bug
//! report: "exactly one continuation", "tc-slow ends output-available".
//! What they count comes from the boundary history (model requests,
//! callbacks, posts, frames, the store, the host's hooks), never from the
//! engine's account of itself.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use turnsim_engine::durable::DurableState;
use turnsim_engine::{Frame, Role, ToolState};

use super::store_tools::{first_tool, tools_last_first, walk_commits};
use super::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall};
use crate::scenario::{CallbackCounts, Count, RecoveryCounts};

/// The name of every check this module can report (`expect_failure` may name one).
pub const CHECKS: [&str; 28] = [
    "expect.continuations",
    "expect.model_calls",
    "expect.model_calls_at_ms",
    "expect.terminal_frames",
    "expect.messages",
    "expect.final_text",
    "expect.parts",
    "expect.client_received",
    "expect.caller_errors",
    "expect.hooks.on_exhausted",
    "expect.hooks.on_exhausted_reasons",
    "expect.snapshots",
    "expect.timing",
    "expect.counts",
    "expect.connections",
    "expect.callbacks",
    "expect.recovery.scheduled",
    "expect.recovery.completed",
    "expect.recovery.exhausted",
    "expect.recovery.parked",
    "expect.tools",
    "expect.repaired",
    "expect.messenger_posts",
    "expect.final_text_contains",
    "expect.store.in_flight",
    "expect.store.incidents",
    "expect.store.incidents_attempting",
    "expect.store.alarms",
];

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let expect = &input.scenario.scenario.expect;
    let mut violations = Vec::new();
    let mut compare = |field: &str, expected: Option<Count>, actual: u32| {
        if let Some(expected) = expected.filter(|expected| !expected.admits(actual)) {
            violations.push(Violation::new(&format!("expect.{field}"), format!("expected {expected}, got {actual}")));
        }
    };
    let facts = &input.facts;
    compare("continuations", expect.continuations, facts.continued_batches().len() as u32);
    compare("model_calls", expect.model_calls, facts.calls.len() as u32);
    compare("messages", expect.messages, input.final_store.messages.len() as u32);
    if let Some(expected) = &expect.callbacks {
        violations.extend(check_callbacks(input, expected));
    }
    if let Some(expected) = &expect.recovery {
        violations.extend(check_recovery(input, expected));
    }
    violations.extend(check_repaired(input));
    violations.extend(check_posts(input));
    violations.extend(check_final_text(input));
    violations.extend(check_call_times(input));
    violations.extend(super::expect_stored::check(input));
    violations.extend(super::expect_timeline::check(input));
    violations.extend(super::expect_connections::check(input));
    violations.extend(check_terminal_frames(input));
    violations
}

fn check_call_times(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.model_calls_at_ms.as_ref()?;
    let crossings = &input.run.history.crossings;
    let actual: Vec<u64> = input.facts.calls.iter().map(|call| crossings[call.at].at_us / 1_000).collect();
    (&actual != expected)
        .then(|| Violation::new("expect.model_calls_at_ms", format!("expected {expected:?}, got {actual:?}")))
}

/// Crossings of the history that `matches`.
fn crossings(input: &CheckInput, matches: impl Fn(&Boundary) -> bool) -> u32 {
    input.run.history.iter().filter(|crossing| matches(&crossing.what)).count() as u32
}

/// Calls on `chat()` callbacks that `matches`.
fn callbacks(input: &CheckInput, matches: impl Fn(&CallbackCall) -> bool) -> u32 {
    crossings(input, |what| matches!(what, Boundary::Callback { call, .. } if matches(call)))
}

fn check_callbacks(input: &CheckInput, expected: &CallbackCounts) -> Vec<Violation> {
    let actual = CallbackCounts {
        on_done: callbacks(input, |call| matches!(call, CallbackCall::Done)),
        on_error: callbacks(input, |call| matches!(call, CallbackCall::Error { .. })),
        on_interrupted: callbacks(input, |call| matches!(call, CallbackCall::Interrupted)),
        transport_break: callbacks(input, |call| matches!(call, CallbackCall::Dropped)),
    };
    let counts = [
        ("on_done", expected.on_done, actual.on_done),
        ("on_error", expected.on_error, actual.on_error),
        ("on_interrupted", expected.on_interrupted, actual.on_interrupted),
        ("transport breaks", expected.transport_break, actual.transport_break),
    ];
    let wrong: Vec<String> = counts
        .iter()
        .filter(|(_, expected, actual)| expected != actual)
        .map(|(name, expected, actual)| format!("expected {expected} `{name}`, got {actual}"))
        .collect();
    if wrong.is_empty() {
        return Vec::new();
    }
    vec![Violation::new("expect.callbacks", wrong.join("; "))]
}

/// `tc-1, tc-2`, or `none`.
fn id_list(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".to_string()
    } else {
        ids.join(", ")
    }
}

/// `2 posts: "a", "b"`.
fn post_list(posts: &[String]) -> String {
    let quoted: Vec<String> = posts.iter().map(|post| format!("{post:?}")).collect();
    let noun = if posts.len() == 1 { "post" } else { "posts" };
    if quoted.is_empty() {
        format!("0 {noun}")
    } else {
        format!("{} {noun}: {}", posts.len(), quoted.join(", "))
    }
}

/// Read from the store's recovery records and the hook, as the boundary
/// shows them ([`super::recovery_story`]).
fn check_recovery(input: &CheckInput, expected: &RecoveryCounts) -> Vec<Violation> {
    let story = super::recovery_story::read(input.run.history);
    let actual = [
        ("scheduled", expected.scheduled, story.scheduled),
        ("completed", expected.completed, story.completed),
        ("exhausted", expected.exhausted, crossings(input, |what| matches!(what, Boundary::Exhausted { .. }))),
        ("parked", expected.parked, story.parked),
    ];
    compare_optional("recovery", actual)
}

fn check_repaired(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.repaired.as_ref()?;
    let mut actual = repaired_calls(input);
    actual.sort();
    let mut expected = expected.clone();
    expected.sort();
    (actual != expected).then(|| {
        let message = format!("expected repaired calls {}, got {}", id_list(&expected), id_list(&actual));
        Violation::new("expect.repaired", message)
    })
}

/// Tool calls the store turned from unsettled into an error with no result
/// sent for them (by a client, or by a server-tool run): repaired. A call
/// changes state only in a commit that may change it, so only those calls
/// are read at each commit (and, for a call held twice, any whose first
/// part is unsettled while another is an error).
fn repaired_calls(input: &CheckInput) -> Vec<String> {
    let history = &input.run.history;
    let ran = server_runs(history);
    let ran_before = |call_id: &str, before: usize| ran.get(call_id).is_some_and(|&first| first < before);
    let mut before = StoreStates::default();
    let every_call: BTreeSet<String> =
        history.initial.messages.iter().flat_map(|message| message.tools()).map(|tool| tool.call_id.clone()).collect();
    before.update(&history.initial, &every_call);
    let mut repaired = Vec::new();
    walk_commits(history, |index, after, changed| {
        let candidates: BTreeSet<&String> = changed.iter().chain(&before.errored_twice).collect();
        for call_id in candidates {
            let was_unsettled = before.first.get(call_id).is_some_and(|state| !state.is_settled());
            if !was_unsettled || input.facts.answered_before(call_id, index) || ran_before(call_id, index) {
                continue;
            }
            let errors = tools_last_first(after, call_id).filter(|tool| tool.state == ToolState::OutputError);
            repaired.extend(errors.map(|tool| tool.call_id.clone()));
        }
        before.update(after, changed);
        ControlFlow::Continue(())
    });
    repaired
}

/// Each call's state in the store, as its first part holds it; and the
/// calls whose first part is unsettled while another part is an error.
#[derive(Default)]
struct StoreStates {
    first: BTreeMap<String, ToolState>,
    errored_twice: BTreeSet<String>,
}

impl StoreStates {
    fn update(&mut self, store: &DurableState, changed: &BTreeSet<String>) {
        for call_id in changed {
            match first_tool(store, call_id) {
                Some(tool) => drop(self.first.insert(call_id.clone(), tool.state)),
                None => drop(self.first.remove(call_id)),
            }
            let unsettled = self.first.get(call_id).is_some_and(|state| !state.is_settled());
            let errored = tools_last_first(store, call_id).any(|tool| tool.state == ToolState::OutputError);
            if unsettled && errored {
                self.errored_twice.insert(call_id.clone());
            } else {
                self.errored_twice.remove(call_id);
            }
        }
    }
}

/// Where each server tool's run first finished, by call id.
fn server_runs(history: &crate::history::History) -> BTreeMap<&str, usize> {
    let mut runs = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        if let Boundary::ServerToolDone { call_id, .. } = &crossing.what {
            runs.entry(call_id.as_str()).or_insert(index);
        }
    }
    runs
}

fn check_posts(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.messenger_posts.as_ref()?;
    let actual: Vec<String> = input
        .run
        .history
        .iter()
        .filter_map(|crossing| match &crossing.what {
            Boundary::Post { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    (&actual != expected).then(|| {
        let message = format!("expected {}; got {}", post_list(expected), post_list(&actual));
        Violation::new("expect.messenger_posts", message)
    })
}

fn check_final_text(input: &CheckInput) -> Option<Violation> {
    let needle = input.scenario.scenario.expect.final_text_contains.as_ref()?;
    let messages = &input.final_store.messages;
    let text = messages
        .iter()
        .rev()
        .find(|message| message.role == Role::Assistant)
        .map(|message| message.text())
        .unwrap_or_default();
    (!text.contains(needle.as_str())).then(|| {
        Violation::new(
            "expect.final_text_contains",
            format!("the last assistant text {text:?} does not contain {needle:?}"),
        )
    })
}

/// Fields of an expectation that are checked only where the scenario gives them.
fn compare_optional<T: PartialEq + std::fmt::Display>(
    group: &str,
    fields: impl IntoIterator<Item = (&'static str, Option<T>, T)>,
) -> Vec<Violation> {
    let differing = fields.into_iter().filter_map(|(field, expected, actual)| {
        let expected = expected?;
        (expected != actual).then_some((field, expected, actual))
    });
    differing
        .map(|(field, expected, actual)| {
            Violation::new(&format!("expect.{group}.{field}"), format!("expected {expected}, got {actual}"))
        })
        .collect()
}

fn check_terminal_frames(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.terminal_frames.as_ref()?;
    let actual: Vec<String> = input
        .run
        .history
        .iter()
        .filter_map(|crossing| match &crossing.what {
            Boundary::Frame { frame: Frame::Done { request_id, .. }, .. } => Some(format!("done {request_id}")),
            Boundary::Frame { frame: Frame::Error { request_id, .. }, .. } => Some(format!("error {request_id}")),
            _ => None,
        })
        .collect();
    (&actual != expected)
        .then(|| Violation::new("expect.terminal_frames", format!("expected {expected:?}, got {actual:?}")))
}

//! A scenario's own expectations, each read like the sentence in the bug
//! report: "exactly one continuation", "tc-slow ends output-available".

use turnsim_engine::{EngineEvent, Role};

use super::{CheckInput, Violation};
use crate::scenario::{CallbackCounts, Count, RecoveryCounts};
use crate::trace::Event;

/// The name of every check this module can report (`expect_failure` may name one).
pub const CHECKS: [&str; 23] = [
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
    "expect.snapshots",
    "expect.timing",
    "expect.callbacks",
    "expect.recovery.scheduled",
    "expect.recovery.completed",
    "expect.recovery.exhausted",
    "expect.recovery.parked",
    "expect.barrier",
    "expect.barrier.timer_armed",
    "expect.tools",
    "expect.repaired",
    "expect.messenger_posts",
    "expect.final_text_contains",
];

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let expect = &input.scenario.scenario.expect;
    let mut violations = Vec::new();
    let mut compare = |field: &str, expected: Option<Count>, actual: u32| {
        if let Some(expected) = expected.filter(|expected| !expected.admits(actual)) {
            violations.push(Violation::new(&format!("expect.{field}"), format!("expected {expected}, got {actual}")));
        }
    };
    compare(
        "continuations",
        expect.continuations,
        count(input, |event| matches!(event, Event::Engine(EngineEvent::ContinuationFired { .. }))),
    );
    compare("model_calls", expect.model_calls, count(input, |event| matches!(event, Event::ModelCall { .. })));
    compare("messages", expect.messages, input.run.final_state.messages.len() as u32);
    if let Some(expected) = &expect.callbacks {
        violations.extend(check_callbacks(input, expected));
    }
    if let Some(expected) = &expect.recovery {
        violations.extend(check_recovery(input, expected));
    }
    violations.extend(check_barrier(input));
    violations.extend(check_repaired(input));
    violations.extend(check_posts(input));
    violations.extend(check_final_text(input));
    violations.extend(check_call_times(input));
    violations.extend(super::expect_stored::check(input));
    violations.extend(super::expect_timeline::check(input));
    violations.extend(check_terminal_frames(input));
    violations
}

fn check_call_times(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.model_calls_at_ms.as_ref()?;
    let actual: Vec<u64> = input
        .run
        .events
        .iter()
        .filter(|traced| matches!(traced.event, Event::ModelCall { .. }))
        .map(|traced| traced.at_us / 1_000)
        .collect();
    (&actual != expected)
        .then(|| Violation::new("expect.model_calls_at_ms", format!("expected {expected:?}, got {actual:?}")))
}

pub(super) fn count(input: &CheckInput, matches: impl Fn(&Event) -> bool) -> u32 {
    input.run.events.iter().filter(|traced| matches(&traced.event)).count() as u32
}

fn check_callbacks(input: &CheckInput, expected: &CallbackCounts) -> Vec<Violation> {
    let actual = CallbackCounts {
        on_done: count(input, |event| matches!(event, Event::CallbackDone { .. })),
        on_error: count(input, |event| matches!(event, Event::CallbackError { .. })),
        on_interrupted: count(input, |event| matches!(event, Event::CallbackInterrupted { .. })),
        transport_break: count(input, |event| matches!(event, Event::CallbackDropped { terminal: false, .. })),
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

fn check_recovery(input: &CheckInput, expected: &RecoveryCounts) -> Vec<Violation> {
    let engine =
        |name: &'static str| count(input, move |event| matches!(event, Event::Engine(engine) if engine.name() == name));
    let actual = [
        ("scheduled", expected.scheduled, engine("recovery.scheduled")),
        ("completed", expected.completed, engine("recovery.completed")),
        ("exhausted", expected.exhausted, engine("recovery.exhausted")),
        ("parked", expected.parked, engine("recovery.parked")),
    ];
    compare_optional("recovery", actual)
}

fn check_repaired(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.repaired.as_ref()?;
    let mut actual: Vec<String> = input
        .run
        .events
        .iter()
        .filter_map(|traced| match &traced.event {
            Event::Engine(EngineEvent::Repaired { call_ids }) => Some(call_ids.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    actual.sort();
    let mut expected = expected.clone();
    expected.sort();
    (actual != expected).then(|| {
        let message = format!("expected repaired calls {}, got {}", id_list(&expected), id_list(&actual));
        Violation::new("expect.repaired", message)
    })
}

fn check_posts(input: &CheckInput) -> Option<Violation> {
    let expected = input.scenario.scenario.expect.messenger_posts.as_ref()?;
    let actual: Vec<String> = input
        .run
        .events
        .iter()
        .filter_map(|traced| match &traced.event {
            Event::MessengerPost { text, .. } => Some(text.clone()),
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
    let messages = &input.run.final_state.messages;
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

fn check_barrier(input: &CheckInput) -> Vec<Violation> {
    let Some(expected) = &input.scenario.scenario.expect.barrier else { return Vec::new() };
    let Some(actual) = input.run.final_activity else {
        return vec![Violation::new("expect.barrier", "the engine process was down at the end of the run")];
    };
    compare_optional("barrier", [("timer_armed", expected.timer_armed, actual.next_timer.is_some())])
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
        .events
        .iter()
        .filter_map(|traced| match &traced.event {
            Event::ClientFrame { what } if what.starts_with("done ") || what.starts_with("error ") => {
                Some(what.split(' ').take(2).collect::<Vec<_>>().join(" "))
            }
            _ => None,
        })
        .collect();
    (&actual != expected)
        .then(|| Violation::new("expect.terminal_frames", format!("expected {expected:?}, got {actual:?}")))
}

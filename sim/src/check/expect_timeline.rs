//! Expectations on what crossed the engine's boundary and when: texts a
//! client or caller received, host hooks called, counts by a moment,
//! counts of boundary events by name, and bounds on when an event happened.

use super::judged::BoundaryEvents;
use super::{CheckInput, Violation};
use crate::history::{Boundary, History};
use crate::records::{names_a_change, names_change, names_event, Records};
use crate::scenario::{Count, EventRef, Snapshot, Timing};
use crate::trace::Event;

pub fn check(input: &CheckInput) -> Vec<Violation> {
    let expect = &input.scenario.scenario.expect;
    let events = &input.run.events;
    let mut violations = Vec::new();
    if !expect.client_received.is_empty() {
        let frames = texts(events, |event| match event {
            Event::ClientFrame { what } => Some(what),
            _ => None,
        });
        let place = "frame a client received";
        violations.extend(missing_texts("expect.client_received", place, &expect.client_received, &frames));
    }
    if !expect.caller_errors.is_empty() {
        let errors = texts(events, |event| match event {
            Event::CallbackError { message, .. } => Some(message),
            _ => None,
        });
        let place = "on_error a caller received";
        violations.extend(missing_texts("expect.caller_errors", place, &expect.caller_errors, &errors));
    }
    if let Some(expected) = expect.hooks.as_ref().and_then(|hooks| hooks.on_exhausted) {
        let actual = count_until(events, u64::MAX, |event| matches!(event, Event::OnExhausted { .. }));
        violations.extend(mismatch("expect.hooks.on_exhausted", "`on_exhausted` calls", expected, actual));
    }
    if let Some(expected) = expect.hooks.as_ref().map(|hooks| &hooks.on_exhausted_reasons).filter(|r| !r.is_empty()) {
        let told = texts(events, |event| match event {
            Event::OnExhausted { reason, .. } => Some(reason),
            _ => None,
        });
        if told != *expected {
            let detail = format!("expected `on_exhausted` told {expected:?}, got {told:?}");
            violations.push(Violation::new("expect.hooks.on_exhausted_reasons", detail));
        }
    }
    for snapshot in &expect.snapshots {
        violations.extend(check_snapshot(input, snapshot));
    }
    for timing in &expect.timing {
        violations.extend(check_timing(events, input.run.history, timing));
    }
    for (name, expected) in &expect.counts {
        let actual = count_until(events, u64::MAX, |event| event.is_named(name));
        violations.extend(mismatch("expect.counts", &format!("`{name}`"), *expected, actual));
    }
    violations
}

fn texts<'a>(events: &BoundaryEvents<'a>, pick: impl Fn(&'a Event) -> Option<&'a String>) -> Vec<&'a str> {
    events.iter().filter_map(|traced| pick(&traced.event)).map(String::as_str).collect()
}

fn missing_texts(check: &str, place: &str, expected: &[String], received: &[&str]) -> Vec<Violation> {
    expected
        .iter()
        .filter(|text| !received.iter().any(|got| got.contains(text.as_str())))
        .map(|text| Violation::new(check, format!("no {place} contains {text:?}")))
        .collect()
}

fn count_until(events: &BoundaryEvents, until_us: u64, matches: impl Fn(&Event) -> bool) -> u32 {
    events.iter().filter(|traced| traced.at_us <= until_us && matches(&traced.event)).count() as u32
}

fn mismatch(check: &str, what: &str, expected: Count, actual: u32) -> Option<Violation> {
    (!expected.admits(actual)).then(|| Violation::new(check, format!("expected {expected} {what}, got {actual}")))
}

fn check_snapshot(input: &CheckInput, snapshot: &Snapshot) -> Vec<Violation> {
    let events = &input.run.events;
    // "By 2000 ms" is everything the timeline shows at 2.000 s or before.
    let until_us = snapshot.at_ms.saturating_mul(1_000).saturating_add(999);
    // A continuation is a model request that picked up an answered batch
    // (what crossed the boundary), counted when it was made.
    let crossings = &input.run.history.crossings;
    let continuations = input.facts.continuations();
    let continued = continuations.iter().filter(|(at, ..)| crossings[*at].at_us <= until_us).count() as u32;
    let mut violations: Vec<Violation> = snapshot
        .continuations
        .and_then(|expected| {
            let what = format!("continuations by {} ms", snapshot.at_ms);
            mismatch("expect.snapshots", &what, expected, continued)
        })
        .into_iter()
        .collect();
    type Counted = (Option<Count>, &'static str, fn(&Event) -> bool);
    let counts: [Counted; 3] = [
        (snapshot.model_calls, "model calls", |event| matches!(event, Event::ModelCall { .. })),
        (snapshot.messenger_posts, "messenger posts", |event| matches!(event, Event::MessengerPost { .. })),
        (snapshot.terminal_callbacks, "terminal callbacks", |event| {
            matches!(
                event,
                Event::CallbackDone { .. } | Event::CallbackError { .. } | Event::CallbackInterrupted { .. }
            )
        }),
    ];
    violations.extend(counts.into_iter().filter_map(|(expected, what, matches)| {
        let actual = count_until(events, until_us, matches);
        let what = format!("{what} by {} ms", snapshot.at_ms);
        mismatch("expect.snapshots", &what, expected?, actual)
    }));
    violations
}

/// Sim time (µs) of the n-th occurrence of the moment `reference` names:
/// a commit that stores or takes away a kind of record is read from the
/// history's commits (as a trigger reads it), an event or a frame from the
/// timeline.
fn occurrence(events: &BoundaryEvents, history: &History, reference: &EventRef) -> Option<u64> {
    let nth = reference.nth.max(1) as usize;
    if names_a_change(reference) {
        let mut records = Records::new(&history.initial);
        return history
            .iter()
            .filter(|crossing| match &crossing.what {
                Boundary::Commit { writes } => names_change(reference, records.take(writes)),
                _ => false,
            })
            .nth(nth - 1)
            .map(|crossing| crossing.at_us);
    }
    events.iter().filter(|traced| names_event(reference, &traced.event)).nth(nth - 1).map(|traced| traced.at_us)
}

fn check_timing(events: &BoundaryEvents, history: &History, timing: &Timing) -> Option<Violation> {
    let target = timing.target();
    let Some(at_us) = occurrence(events, history, &target) else {
        return Some(Violation::new("expect.timing", format!("{} never happened", target.describe())));
    };
    let (from_us, from) = match &timing.after {
        None => (0, "the start".to_string()),
        Some(reference) => match occurrence(events, history, reference) {
            Some(from_us) => (from_us, reference.describe()),
            None => return Some(Violation::new("expect.timing", format!("{} never happened", reference.describe()))),
        },
    };
    let elapsed_us = at_us as i128 - from_us as i128;
    let early = timing.no_earlier_than_ms.filter(|bound| elapsed_us < i128::from(*bound) * 1_000);
    let late = timing.no_later_than_ms.filter(|bound| elapsed_us > i128::from(*bound) * 1_000);
    let bound = match (early, late) {
        (Some(bound), _) => format!("no earlier than {bound} ms"),
        (None, Some(bound)) => format!("no later than {bound} ms"),
        (None, None) => return None,
    };
    let message = format!(
        "{} came {:.3} s after {from}; expected {bound} after it",
        target.describe(),
        elapsed_us as f64 / 1_000_000.0
    );
    Some(Violation::new("expect.timing", message))
}

//! Each scenario expectation fires when the run breaks it, and stays quiet
//! when it holds: the committed scenarios run with their `expect:` block
//! swapped for one that holds and one that does not.

use turnsim::check::check_run;
use turnsim::scenario::{parse_scenario, ScenarioFile};
use turnsim_engine::RegressionSet;

use crate::common::workspace_root;

/// A committed scenario with its `expect:` block replaced.
fn with_expect(stem: &str, expect: &str) -> ScenarioFile {
    let path = workspace_root().join("scenarios").join(format!("{stem}.yaml"));
    let text = std::fs::read_to_string(&path).expect("a committed scenario");
    let body = &text[..text.find("\nexpect:\n").expect("an expect block") + 1];
    parse_scenario(&path, &format!("{body}expect:\n{expect}")).unwrap_or_else(|error| panic!("{error}"))
}

/// The checks that failed on seed 0.
fn failed_checks(file: &ScenarioFile) -> Vec<String> {
    let record = turnsim::world::run(file, 0, &RegressionSet::default());
    check_run(file, &record)
        .into_iter()
        .map(|violation| format!("{}: {}", violation.check, violation.message))
        .collect()
}

fn assert_holds(stem: &str, expect: &str) {
    let failed = failed_checks(&with_expect(stem, expect));
    assert!(failed.is_empty(), "{stem} with {expect:?} must pass: {failed:?}");
}

fn assert_fires(stem: &str, expect: &str, needle: &str) {
    let failed = failed_checks(&with_expect(stem, expect));
    assert!(
        failed.iter().any(|failure| failure.contains(needle)),
        "{stem} with {expect:?}: expected {needle:?} in {failed:?}"
    );
}

const RETRY: &str = "provider-rate-limit-retry";
const TOOL: &str = "continuation-single-client-tool";
const EXHAUSTED: &str = "stall-exhausted";

#[test]
fn counts_take_bounds() {
    assert_holds(RETRY, "  model_calls: { at_least: 2, at_most: 3 }\n  messages: 2\n");
    assert_fires(RETRY, "  model_calls: { at_least: 3 }\n", "expect.model_calls: expected at least 3, got 2");
    assert_fires(RETRY, "  messages: { at_most: 1 }\n", "expect.messages: expected at most 1, got 2");
}

#[test]
fn final_text_and_parts_are_exact() {
    assert_holds(
        RETRY,
        "  final_text: \"The answer is 42.\"\n  parts: { m3: [ step-start, 'text \"The answer is 42.\"' ] }\n",
    );
    assert_fires(RETRY, "  final_text: \"The answer is\"\n", "expect.final_text: expected \"The answer is\", got");
    assert_fires(RETRY, "  parts: { m3: [ 'text \"The answer is 42.\"' ] }\n", "expect.parts: m3: expected [text");
    assert_fires(RETRY, "  parts: { m9: [] }\n", "expect.parts: m9: no such stored message");
}

#[test]
fn the_order_of_stored_messages_is_exact() {
    assert_holds(RETRY, "  order: [m2, m3]\n");
    assert_fires(RETRY, "  order: [m3, m2]\n", "expect.order: expected [\"m3\", \"m2\"], got [\"m2\", \"m3\"]");
    assert_fires(RETRY, "  order: [m2]\n", "expect.order: expected [\"m2\"], got [\"m2\", \"m3\"]");
}

#[test]
fn tool_parts_are_checked_field_by_field() {
    assert_holds(
        TOOL,
        "  tools: { tc-client-1: { state: output-available, output: \"done\", not: input-streaming } }\n",
    );
    assert_fires(TOOL, "  tools: { tc-client-1: { output: \"other\" } }\n", "expected output \"other\", got \"done\"");
    assert_fires(
        TOOL,
        "  tools: { tc-client-1: { not: output-available } }\n",
        "expected anything but output-available",
    );
    assert_fires(TOOL, "  tools: { tc-client-1: { error: \"boom\" } }\n", "expected error \"boom\", got none");
    assert_fires(
        TOOL,
        "  tools: { tc-client-1: { approval_id: \"a-1\" } }\n",
        "expected approval id \"a-1\", got none",
    );
}

#[test]
fn timing_bounds_an_event_from_the_start_or_from_another_event() {
    let holds = "  timing:\n    - { event: model.call, nth: 2, after: { event: model.call }, no_earlier_than_ms: 2000, no_later_than_ms: 2001 }\n";
    assert_holds(RETRY, holds);
    let early = "  timing:\n    - { event: model.call, nth: 2, no_earlier_than_ms: 2500 }\n";
    assert_fires(RETRY, early, "model.call #2 came 2.000 s after the start; expected no earlier than 2500 ms");
    let late = "  timing:\n    - { event: caller.on_done, no_later_than_ms: 1000 }\n";
    assert_fires(RETRY, late, "expected no later than 1000 ms");
    let never = "  timing:\n    - { event: model.call, nth: 3 }\n";
    assert_fires(RETRY, never, "model.call #3 never happened");
}

#[test]
fn timing_names_a_record_stored_or_removed_and_a_frame_by_its_label() {
    // The tool turn ends (its in-flight record cleared, `done r1`) at 0 ms;
    // the client answers at 48 ms, and the continuation ends (`done r4`,
    // the record cleared again) at 98 ms.
    let holds = "  timing:\n    - { removed: in-flight, nth: 2, after: { frame: done r1 }, no_earlier_than_ms: 98, no_later_than_ms: 99 }\n    - { frame: done r4, after: { stored: reply }, no_earlier_than_ms: 98, no_later_than_ms: 99 }\n";
    assert_holds(TOOL, holds);
    let late = "  timing:\n    - { removed: in-flight, nth: 2, after: { frame: done r1 }, no_later_than_ms: 50 }\n";
    assert_fires(
        TOOL,
        late,
        "removed: in-flight #2 came 0.098 s after frame `done r1` #1; expected no later than 50 ms",
    );
    // A label is the frame's, not a prefix of a longer word: `done r` names no frame.
    let never = "  timing:\n    - { frame: done r }\n";
    assert_fires(TOOL, never, "frame `done r` #1 never happened");
    assert_fires(TOOL, "  timing:\n    - { stored: alarm }\n", "stored: alarm #1 never happened");
    assert_fires(TOOL, "  timing:\n    - { removed: in-flight, nth: 3 }\n", "removed: in-flight #3 never happened");
}

#[test]
fn snapshots_count_what_happened_by_a_moment() {
    assert_holds(RETRY, "  snapshots:\n    - { at_ms: 1999, model_calls: 1, terminal_callbacks: 0 }\n    - { at_ms: 2000, model_calls: 2 }\n");
    assert_fires(
        RETRY,
        "  snapshots:\n    - { at_ms: 1999, model_calls: 2 }\n",
        "expected 2 model calls by 1999 ms, got 1",
    );
}

#[test]
fn texts_a_client_or_caller_received_and_host_hooks() {
    let holds = "  client_received: [\"could not recover\"]\n  hooks: { on_exhausted: 1 }\n";
    assert_holds(EXHAUSTED, holds);
    assert_fires(EXHAUSTED, "  client_received: [\"all good\"]\n", "no frame a client received contains \"all good\"");
    assert_fires(EXHAUSTED, "  caller_errors: [\"boom\"]\n", "no on_error a caller received contains \"boom\"");
    assert_fires(EXHAUSTED, "  hooks: { on_exhausted: 0 }\n", "expected 0 `on_exhausted` calls, got 1");
}

#[test]
fn continuations_count_the_answered_batches_a_model_request_picked_up() {
    // The recovery the restarted engine runs picks up the answered batch:
    // whatever the engine calls that turn, it is the batch's continuation.
    assert_holds("bench-standard-story", "  continuations: 1\n  model_calls: 2\n");
    assert_fires("bench-standard-story", "  continuations: 0\n", "expect.continuations: expected 0, got 1");
}

#[test]
fn repaired_calls_are_read_from_the_store() {
    // The server tool died with the process; the recovery stores it as an
    // error nobody sent.
    assert_holds("eviction-during-server-tool", "  repaired: [tc-build]\n");
    assert_fires("eviction-during-server-tool", "  repaired: []\n", "expected repaired calls none, got tc-build");
}

const RESUME: &str = "resume-while-a-continuation-waits-gets-resume-none";

#[test]
fn counts_name_boundary_events_exactly_or_within_bounds() {
    assert_holds(RETRY, "  counts: { model.call: 2, client.connected: { at_least: 1 }, messenger.post: 0 }\n");
    assert_fires(RETRY, "  counts: { model.call: 3 }\n", "expect.counts: expected 3 `model.call`, got 2");
    assert_fires(RETRY, "  counts: { model.call: { at_most: 1 } }\n", "expected at most 1 `model.call`, got 2");
}

#[test]
fn a_connection_is_judged_on_the_frames_it_was_sent_by_a_moment() {
    let connection = |entry: &str| format!("  connections:\n    - {entry}\n");
    assert_holds(
        RESUME,
        &connection("{ connection: 1, received: [resume-none, done r1], tools: { tc-1: output-available } }"),
    );
    assert_holds(RESUME, &connection("{ at_ms: 800, tools: { tc-1: output-available }, not_received: [done] }"));
    assert_fires(
        RESUME,
        &connection("{ connection: 2, at_ms: 800, received: [resume-none, done r4] }"),
        "by 800 ms: expected frames [\"resume-none\", \"done r4\"] in that order, but no `done r4` came after them",
    );
    assert_fires(
        RESUME,
        &connection("{ connection: 2, received: [done r4, resume-none] }"),
        "but no `resume-none` came after them",
    );
    assert_fires(RESUME, &connection("{ not_received: [resume-none] }"), "received `resume-none`, which it must not");
    assert_fires(
        RESUME,
        &connection("{ connection: 1, at_ms: 0, tools: { tc-1: output-available } }"),
        "tc-1: expected output-available, its view shows input-available",
    );
    assert_fires(
        RESUME,
        &connection("{ connection: 3, received: [resume-none] }"),
        "client 1's connection 3 (c3) had not opened by the end of the run",
    );
}

#[test]
fn the_records_beside_the_transcript_are_read_from_the_store() {
    // The spent incident stays (status exhausted); nothing else is left.
    let holds = "  store: { in_flight: absent, incidents: 1, incidents_attempting: 0, alarms: 0 }\n";
    assert_holds(EXHAUSTED, holds);
    assert_fires(EXHAUSTED, "  store: { incidents: 0 }\n", "expect.store.incidents: expected 0, got 1");
    assert_fires(
        EXHAUSTED,
        "  store: { incidents_attempting: 1 }\n",
        "expect.store.incidents_attempting: expected 1, got 0",
    );
    assert_fires(
        EXHAUSTED,
        "  store: { in_flight: present }\n",
        "expect.store.in_flight: expected present, got absent",
    );
}

#[test]
fn an_in_flight_record_left_at_the_end_is_named() {
    // A provider that hangs with no watchdog: the turn is still in flight
    // when the run stops.
    let path = workspace_root().join("scenarios").join("inline.yaml");
    let yaml =
        "name: hung\nhorizon_ms: 60000\nmodel:\n  - [ park ]\nactions:\n  - at_ms: 0\n    user_message: { text: hi }\n\
                expect:\n  store: { in_flight: absent }\n";
    let file = parse_scenario(&path, yaml).unwrap_or_else(|error| panic!("{error}"));
    let failed = failed_checks(&file);
    let needle = "expect.store.in_flight: expected absent, got present (r1 user)";
    assert!(failed.iter().any(|failure| failure.contains(needle)), "expected {needle:?} in {failed:?}");
}

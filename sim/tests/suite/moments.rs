//! Triggers name moments by what crossed the boundary: a client frame by
//! its label, and an `after` that is a record stored or taken away, or a
//! frame. Each fires at that moment, not at the first of its kind.

use turnsim::trace::Event;
use turnsim::world::run;
use turnsim_engine::RegressionSet;

use crate::common::inline;

/// A client tool turn (`done r1`), the client's answer, its continuation
/// (`done r4`), then a second user message placed by `when`.
fn tool_turn_then(when: &str) -> String {
    format!(
        "name: t\nengine:\n  tools:\n    client_action: {{ kind: client }}\nmodel:\n  - - tool: {{ id: tc-1, name: client_action, input: {{}}, finalize: finish }}\n    - finish: {{ reason: tool-calls }}\n  - - text: after\n    - finish: {{ reason: stop }}\n  - - text: second\n    - finish: {{ reason: stop }}\nclient:\n  tools:\n    client_action: {{ answer_after_ms: 40, output: done, auto_continue: true }}\nactions:\n  - at_ms: 0\n    user_message: {{ text: first }}\n  - when: {when}\n    user_message: {{ text: second }}\n"
    )
}

/// The label of the client frame just before the world's second user
/// message (the action a trigger placed).
fn frame_before_the_second_message(when: &str) -> String {
    let file = inline(&tool_turn_then(when));
    let record = run(&file, 0, &RegressionSet::default());
    let actions: Vec<usize> = record
        .events
        .iter()
        .enumerate()
        .filter(|(_, traced)| matches!(&traced.event, Event::Action { .. }))
        .map(|(at, _)| at)
        .collect();
    assert_eq!(actions.len(), 2, "both user messages were sent: {:?}", record.events);
    record.events[..actions[1]]
        .iter()
        .rev()
        .find_map(|traced| match &traced.event {
            Event::ClientFrame { what } => Some(what.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn a_trigger_picks_a_client_frame_by_its_label() {
    assert_eq!(frame_before_the_second_message("{ frame: done r4 }"), "done r4");
    // By count, the first frame is `done r1`: the label is what moved it.
    assert_eq!(frame_before_the_second_message("{ event: client.frame }"), "done r1");
}

#[test]
fn a_triggers_after_names_a_record_taken_away_or_a_frame() {
    // The first frame after the second turn's record is cleared.
    let after_cleared = "{ event: client.frame, after: { removed: in-flight, nth: 2 } }";
    assert_eq!(frame_before_the_second_message(after_cleared), "done r4");
    let after_frame = "{ event: client.frame, after: { frame: done r1 } }";
    assert_ne!(frame_before_the_second_message(after_frame), "done r1");
}

#[test]
fn a_moment_named_twice_or_not_at_all_is_a_located_error() {
    let path = crate::common::workspace_root().join("scenarios").join("inline-test.yaml");
    for (when, needle) in [
        ("{ frame: done r1, event: client.frame }", "a trigger is one of"),
        ("{ frame: ' ' }", "`frame` names a client frame by its label"),
        ("{ event: client.frame, after: { nth: 2 } }", "name the moment"),
        ("{ event: client.frame, after: { frame: done r1, stored: reply } }", "give only one"),
    ] {
        let error = turnsim::scenario::parse_scenario(&path, &tool_turn_then(when)).expect_err(when);
        let message = error.to_string();
        assert!(message.contains("inline-test.yaml:"), "{when}: located: {message}");
        assert!(message.contains(needle), "{when}: {message}");
    }
}

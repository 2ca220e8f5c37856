//! The scenario format: good files parse, bad ones fail with a located
//! message (file, line, column) rather than a panic.

use turnsim::scenario::parse_scenario;

use crate::common::{inline, workspace_root};

#[test]
fn unknown_key_is_rejected_with_its_line_and_column() {
    let path = workspace_root().join("scenarios").join("bad.yaml");
    let error =
        parse_scenario(&path, "name: bad\nseeds: 2\nengine:\n  stall_timeout: 5\n").expect_err("unknown key must fail");
    assert_eq!((error.line, error.column), (Some(4), Some(3)), "location of the unknown key: {error}");
    assert!(error.message.contains("unknown field `stall_timeout`"), "message: {}", error.message);
    assert!(error.to_string().starts_with(&format!("{}:4:3: ", path.display())), "rendered: {error}");
}

#[test]
fn an_action_must_do_exactly_one_thing() {
    let path = workspace_root().join("scenarios").join("bad.yaml");
    let yaml = "name: bad\nactions:\n  - at_ms: 0\n    user_message: { text: hi }\n    evict: {}\n";
    let error = parse_scenario(&path, yaml).expect_err("two kinds in one action must fail");
    assert!(error.message.contains("only one of"), "message: {}", error.message);
    assert_eq!(error.line, Some(3), "the error points at the action: {error}");
}

#[test]
fn repeat_and_ranges_expand_into_the_model_script() {
    let file = inline(
        "name: t\nmodel:\n  - - repeat: { times: 3, steps: [ { sleep_ms: [1, 5] }, { text_delta: x } ] }\n    - finish: { reason: stop }\n",
    );
    assert_eq!(file.calls.len(), 1);
    assert_eq!(file.calls[0].len(), 7, "3 × (sleep + delta) + finish: {:?}", file.calls[0]);
}

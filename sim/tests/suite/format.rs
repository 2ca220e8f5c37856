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
fn an_unknown_need_is_rejected_with_its_line_and_column() {
    let path = workspace_root().join("scenarios").join("bad.yaml");
    let error = parse_scenario(&path, "name: bad\nneeds: [messenger, teleport]\n").expect_err("unknown capability");
    assert_eq!((error.line, error.column), (Some(2), Some(20)), "location of the unknown name: {error}");
    assert!(error.message.contains("unknown variant `teleport`"), "message: {}", error.message);
    assert!(error.message.contains("`provider-retries`"), "the vocabulary is listed: {}", error.message);
    let file = parse_scenario(&path, "name: good\nneeds: [recovery, messenger]\n").expect("known capabilities");
    let needs: Vec<&str> = file.scenario.needs.iter().map(|need| need.name()).collect();
    assert_eq!(needs, ["recovery", "messenger"]);
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

/// Every file of the malformed corpus is rejected at a line and column,
/// with the words its `# expect:` line names.
#[test]
fn every_malformed_file_gets_a_located_error() {
    let mut checked = 0;
    for (path, expected) in malformed_corpus() {
        let error = turnsim::scenario::load_scenario(&path).expect_err("a malformed file must not load");
        assert!(error.to_string().contains(&expected), "{}: expected `{expected}` in `{error}`", path.display());
        assert!(error.line.is_some() && error.column.is_some(), "{}: no line/column in `{error}`", path.display());
        checked += 1;
    }
    assert!(checked >= 39, "the corpus shrank to {checked} files");
}

/// The malformed files and the words each error must contain.
pub fn malformed_corpus() -> Vec<(std::path::PathBuf, String)> {
    let corpus = workspace_root().join("fixtures").join("malformed");
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .expect("malformed corpus")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read corpus file");
            let first = String::from_utf8_lossy(bytes.split(|&b| b == b'\n').next().unwrap_or_default()).to_string();
            let expected = first.strip_prefix("# expect: ").unwrap_or_else(|| {
                panic!("{}: a malformed file opens with `# expect: <words of its error>`", path.display())
            });
            (path, expected.to_string())
        })
        .collect()
}

/// The CLI exits 2 on bad input, with the located error on stderr.
#[test]
fn the_cli_exits_two_on_a_malformed_scenario() {
    let path = workspace_root().join("fixtures").join("malformed").join("unknown-step.yaml");
    let output =
        std::process::Command::new(env!("CARGO_BIN_EXE_turnsim")).arg("run").arg(&path).output().expect("run turnsim");
    assert_eq!(output.status.code(), Some(2), "exit code for a malformed file");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown-step.yaml:5:7: "), "stderr names file:line:col: {stderr}");
}

/// The committed JSON Schema is the one the Rust types generate.
#[test]
fn committed_schema_matches_the_types() {
    let committed =
        std::fs::read_to_string(workspace_root().join("scenarios").join("scenario.schema.json")).expect("schema file");
    assert_eq!(
        committed.trim_end(),
        turnsim::scenario::json_schema().trim_end(),
        "scenarios/scenario.schema.json is stale: regenerate it with `cargo run -p turnsim -- schema > scenarios/scenario.schema.json`"
    );
}

/// Every event the committed suite produces has a name triggers and timing
/// expectations can use, so the load-time check of event names never
/// rejects a real one.
#[test]
fn every_timeline_event_name_is_known() {
    let mut unknown = std::collections::BTreeSet::new();
    for file in crate::common::all_scenarios() {
        let record = turnsim::world::run(&file, file.scenario.seed_start, &turnsim_engine::RegressionSet::default());
        for traced in &record.events {
            let qualified = format!("{}.{}", traced.event.lane().as_str(), traced.event.name());
            if !turnsim::trace::is_event_name(&qualified) {
                unknown.insert(qualified);
            }
        }
    }
    assert!(unknown.is_empty(), "add these to trace::EVENT_NAMES: {unknown:?}");
}

/// `model.call` names what crossed the boundary (the model lane's call),
/// not the engine's decision event of the same name.
#[test]
fn a_lane_qualified_name_means_that_lanes_event() {
    let file = crate::common::scenario("provider-rate-limit-retry");
    let record = turnsim::world::run(&file, 0, &turnsim_engine::RegressionSet::default());
    let named: Vec<&str> = record
        .events
        .iter()
        .filter(|traced| traced.event.is_named("model.call"))
        .map(|traced| traced.lane.as_str())
        .collect();
    assert_eq!(named, ["model", "model"], "two model calls, both on the model lane");
}

/// An error inside a fixture shows the fixture's line, not the line of the
/// same number in the scenario that includes it.
#[test]
fn an_error_in_a_fixture_shows_the_fixture_line() {
    let path = workspace_root().join("fixtures").join("malformed").join("fixture-cycle.yaml");
    let error = turnsim::scenario::load_scenario(&path).expect_err("a fixture cycle");
    let shown = error.to_string();
    assert!(shown.contains("cycle-b.yaml:2:12"), "{shown}");
    assert!(shown.contains("2 | - fixture: cycle-a"), "{shown}");
}

/// `stored:` takes a transcript as a list, or a mapping that adds the
/// records a dead process left; each writes back as it was written.
#[test]
fn stored_records_load_and_write_back_in_their_own_form() {
    let path = workspace_root().join("scenarios").join("stored.yaml");
    let records = "name: t\nstored:\n  messages:\n    - user: hi\n    - assistant: [ { streaming_text: \"Hel\" } ]\n  \
                   in_flight: { request_id: r3, kind: user, message: m2 }\n  \
                   incidents:\n    - { root_request_id: r3, about: m1, attempt: 2 }\n";
    let file = parse_scenario(&path, records).unwrap_or_else(|error| panic!("{error}"));
    let stored = &file.scenario.stored;
    assert_eq!((stored.messages.len(), stored.incidents.len()), (2, 1), "both records load: {stored:?}");
    let state = turnsim::scenario::durable_state(stored, 100_000).expect("a state an engine could write");
    let turn = state.in_flight.as_ref().expect("the in-flight record is seeded");
    assert_eq!((turn.message_id.as_str(), turn.stream_started), ("m2", true), "it streamed into m2");
    assert_eq!(state.incidents["r3:m1"].last_attempt_ms, 40_000, "the last attempt a minute before boot");
    assert!(state.next_id >= 3, "the engine's next id is past r3: {}", state.next_id);
    let written = serde_yaml::to_string(&file.scenario).expect("serialises");
    let again = parse_scenario(&path, &written).unwrap_or_else(|error| panic!("{error}\n{written}"));
    assert_eq!(again.scenario.stored, *stored, "the mapping form writes back:\n{written}");

    let transcript = parse_scenario(&path, "name: t\nstored:\n  - user: hi\n").expect("a transcript");
    let written = serde_yaml::to_string(&transcript.scenario).expect("serialises");
    assert!(written.contains("stored:\n- user: hi"), "a transcript writes back as a list:\n{written}");
}

/// A dead turn whose answer was never written had drawn the next id for
/// it; the engine's own ids come after.
#[test]
fn an_unwritten_answer_takes_the_id_after_the_stored_ones() {
    let path = workspace_root().join("scenarios").join("stored.yaml");
    let yaml = "name: t\nstored:\n  messages: [ { user: hi } ]\n  in_flight: { request_id: r2, kind: user }\n";
    let file = parse_scenario(&path, yaml).unwrap_or_else(|error| panic!("{error}"));
    let state = turnsim::scenario::durable_state(&file.scenario.stored, 0).expect("storable");
    let turn = state.in_flight.expect("seeded");
    assert_eq!((turn.message_id.as_str(), turn.stream_started, state.next_id), ("m3", false, 3));
}

//! turnsim as a library in another crate's tests: `assert_scenarios`.

use std::path::Path;

#[test]
fn assert_scenarios_passes_the_committed_suite_file_by_file() {
    let file = crate::common::workspace_root().join("scenarios").join("continuation-single-client-tool.yaml");
    turnsim::assert_scenarios(&file);
    assert_eq!(turnsim::check_scenarios(&file, Some(4)), Ok(4), "four seeds run and pass");
}

#[test]
fn a_failing_scenario_reports_the_check_the_seed_and_the_replay() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("library-failing");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let yaml = std::fs::read_to_string(crate::common::workspace_root().join("scenarios/messenger-done.yaml"))
        .expect("a committed scenario");
    assert!(yaml.contains("\n  model_calls: 1\n"), "the committed scenario expects one model call");
    std::fs::write(dir.join("wrong.yaml"), yaml.replace("\n  model_calls: 1\n", "\n  model_calls: 99\n"))
        .expect("write");
    let report = turnsim::check_scenarios(&dir, Some(2)).expect_err("model_calls: 99 cannot hold");
    assert!(report.contains("expect.model_calls: expected 99, got"), "the check in words: {report}");
    assert!(report.contains("replay: cargo run --release -p turnsim -- replay"), "the replay command: {report}");
    assert!(report.ends_with("2 of 2 runs failed"), "the count: {report}");
    let panic = std::panic::catch_unwind(|| turnsim::assert_scenarios(&dir)).expect_err("assert_scenarios panics");
    let message = panic.downcast_ref::<String>().expect("a panic message");
    assert!(message.contains("expect.model_calls"), "the panic carries the report: {message}");
}

#[test]
fn nothing_to_run_is_an_error_not_a_pass() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("library-empty");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let report = turnsim::check_scenarios(&dir, None).expect_err("an empty directory is not a pass");
    assert!(report.contains("no scenario files"), "{report}");
}

//! The CLI as CI and people use it: the exit code is the verdict whatever
//! happens to stdout, nothing runs green on nothing, reports count what ran,
//! and a replay points at the failing event.

use std::process::{Command, Output, Stdio};

use crate::common::workspace_root;

const FAILING: &str = "scenarios/errored-sibling-completes-batch.yaml";
const REGRESSION: &str = "no-errored-sibling-rearm";

fn turnsim(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turnsim"));
    command.args(args).current_dir(workspace_root()).env_remove("MADSIM_TEST_SEED").env_remove("MADSIM_TEST_NUM");
    command
}

fn output(args: &[&str]) -> Output {
    turnsim(args).output().expect("run turnsim")
}

/// Runs with stdout a pipe whose reader is already gone (`| head` that quit).
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut child = turnsim(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start turnsim");
    drop(child.stdout.take());
    child.wait_with_output().expect("turnsim output")
}

fn with_full_disk_stdout(args: &[&str]) -> Output {
    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    turnsim(args).stdout(full).output().expect("run turnsim")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

#[test]
fn a_failing_sweep_exits_one_whether_or_not_stdout_can_be_written() {
    for format in ["text", "json", "junit", "github"] {
        let args = ["run", FAILING, "--seeds", "3", "--regression", REGRESSION, "--format", format];
        let closed = with_closed_stdout(&args);
        assert_eq!(closed.status.code(), Some(1), "{format} into a closed pipe: {}", stderr(&closed));
        let full = with_full_disk_stdout(&args);
        assert_eq!(full.status.code(), Some(1), "{format} into a full disk: {}", stderr(&full));
        assert!(stderr(&full).contains("could not write the output"), "the write error is reported: {}", stderr(&full));
    }
}

#[test]
fn no_command_panics_on_a_closed_pipe_or_a_full_disk() {
    let commands: [(&[&str], i32); 6] = [
        (&["list", "invariants"], 0),
        (&["schema"], 0),
        (&["replay", FAILING, "--seed", "0", "--format", "json"], 0),
        (&["replay", FAILING, "--seed", "0", "--regression", REGRESSION], 1),
        (&["check-determinism", FAILING, "--seeds", "1"], 0),
        (&["crash-points", "scenarios/continuation-single-client-tool.yaml"], 0),
    ];
    for (args, verdict) in commands {
        for output in [with_closed_stdout(args), with_full_disk_stdout(args)] {
            assert!(!stderr(&output).contains("panicked"), "{args:?} panicked: {}", stderr(&output));
            assert_eq!(output.status.code(), Some(verdict), "{args:?} keeps its verdict: {}", stderr(&output));
        }
    }
}

#[test]
fn nothing_to_run_is_exit_two_not_a_green_run() {
    let empty = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-empty-dir");
    std::fs::create_dir_all(&empty).expect("empty dir");
    let empty = empty.to_str().expect("utf-8");
    let cases: [(&[&str], &str); 6] = [
        (&["run", empty], "no scenario files"),
        (&["run", FAILING, "--seeds", "0"], "nothing to run"),
        (&["crash-points", empty], "no scenario files"),
        (&["check-determinism", FAILING, "--seeds", "0"], "nothing to check"),
        (&["explore", "--cases", "0"], "nothing to explore"),
        (&["list", "scenarios", empty], "no scenario files"),
    ];
    for (args, expected) in cases {
        let output = output(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: expected `{expected}` in {}", stderr(&output));
    }
}

/// Counts in the JUnit report agree with its test cases, and a scenario a
/// shard did not run is absent rather than a phantom pass.
#[test]
fn junit_counts_agree_and_unrun_scenarios_are_absent() {
    let fast = "scenarios/barrier-all-fast-mid-stream.yaml";
    let args =
        ["run", FAILING, fast, "--seeds", "1", "--shard", "1/2", "--format", "junit", "--regression", REGRESSION];
    let output = output(&args);
    let xml = stdout(&output);
    let attribute = |name: &str| -> usize {
        let start = xml.find(&format!(" {name}=\"")).expect("attribute") + name.len() + 3;
        xml[start..].split('"').next().expect("value").parse().expect("a count")
    };
    assert_eq!(attribute("tests"), xml.matches("<testcase ").count(), "tests= counts the test cases: {xml}");
    assert_eq!(attribute("failures"), xml.matches("<failure ").count(), "failures= counts the failures: {xml}");
    assert_eq!(xml.matches("<testcase ").count(), 1, "shard 1/2 of two one-seed scenarios runs one: {xml}");
    assert!(!xml.contains(fast), "the scenario this shard did not run is absent: {xml}");
    assert!(xml.contains("single-continuation") && xml.contains("replay: cargo run"), "check and replay: {xml}");
}

#[test]
fn github_format_annotates_the_failing_scenario_file() {
    let output = output(&["run", FAILING, "--seeds", "2", "--format", "github", "--regression", REGRESSION]);
    assert_eq!(output.status.code(), Some(1));
    let annotations = stdout(&output);
    assert!(
        annotations.starts_with(&format!("::error file={FAILING},line=1,title=turnsim%3A single-continuation")),
        "one annotation on the file: {annotations}"
    );
    assert!(annotations.contains("%0Areplay: cargo run"), "the replay command, escaped: {annotations}");
}

/// The event `FAILED ... (event N)` names is event N of the numbered
/// timeline, marked; the stored transcript follows the timeline.
#[test]
fn a_replay_numbers_its_events_and_marks_the_failing_one() {
    let output = output(&["replay", FAILING, "--seed", "0", "--regression", REGRESSION]);
    let text = stdout(&output);
    let failed = text.lines().find(|line| line.starts_with("FAILED ")).expect("a FAILED line");
    let number: usize =
        failed.rsplit("(event ").next().and_then(|rest| rest.trim_end_matches(')').parse().ok()).expect("N");
    let marked = text.lines().find(|line| line.starts_with(">>")).expect("a marked event");
    assert!(marked[2..].trim_start().starts_with(&format!("{number} ")), "event {number} is the marked one: {marked}");
    // The batch is stranded from the moment the engine took the answer
    // that completed it.
    assert!(marked.contains("tc-run"), "the marked event is the batch's last answer: {marked}");
    assert!(text.contains("final transcript (stored):\n  m"), "the transcript follows: {text}");
}

#[test]
fn replay_takes_its_seed_from_the_environment() {
    let with_flag = output(&["replay", FAILING, "--seed", "3"]);
    let from_env = turnsim(&["replay", FAILING]).env("MADSIM_TEST_SEED", "3").output().expect("run turnsim");
    assert_eq!(from_env.status.code(), Some(0), "{}", stderr(&from_env));
    assert_eq!(stdout(&with_flag), stdout(&from_env), "MADSIM_TEST_SEED=3 replays seed 3");
}

#[test]
fn the_canary_says_it_failed_as_expected_and_with_what() {
    let output = output(&["run", "scenarios/canary-fails-on-purpose.yaml", "--seeds", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("(2 seeds; each failed `converges`, as this canary must)"),
        "canary line: {}",
        stdout(&output)
    );
}

#[test]
fn a_failing_sweep_ends_with_the_list_of_failing_scenarios() {
    let output = output(&["run", FAILING, "--seeds", "2", "--regression", REGRESSION]);
    let text = stdout(&output);
    let list = text.split("failed scenarios:\n").nth(1).expect("a closing list");
    assert!(list.starts_with(&format!("  {FAILING} (2 of 2 seeds failed)\n    replay: ")), "closing list: {list}");
    assert!(text.trim_end().ends_with("suite: 0 passed, 2 failed"), "the summary closes the output: {text}");
}

/// Ctrl-C in a long sweep: runs under way finish, a partial summary with the
/// failures so far is printed, and the exit code is 130.
#[test]
fn ctrl_c_ends_a_sweep_with_a_partial_summary_and_exit_130() {
    use std::io::BufRead as _;
    let args = ["run", FAILING, "--seeds", "100000000", "--jobs", "1", "--regression", REGRESSION];
    let mut child = turnsim(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start turnsim");
    // The header line is printed once the Ctrl-C handler is in place.
    let mut header = String::new();
    std::io::BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut header).expect("header");
    assert!(header.starts_with("turnsim: 1 scenario"), "header: {header}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill -INT");
    assert!(sent.success(), "SIGINT sent");
    let output = child.wait_with_output().expect("turnsim output");
    assert_eq!(output.status.code(), Some(130), "exit code after Ctrl-C");
    let text = stdout(&output);
    assert!(text.contains("interrupted after "), "says it was interrupted: {text}");
    let summary = text.trim_end().lines().last().unwrap_or_default();
    let failed: usize = summary
        .strip_prefix("suite: 0 passed, ")
        .and_then(|rest| rest.strip_suffix(" failed"))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("the summary closes the output: {text}"));
    assert!(text.contains(&format!("interrupted after {failed} of 100000000 runs")), "{text}");
    if failed > 0 {
        assert!(text.contains("replay: cargo run"), "keeps the failures so far with their replay: {text}");
    }
}

/// When the shrunk scenario cannot be written, the finding and the YAML
/// itself are still printed: nothing found is lost.
#[test]
fn explore_prints_its_finding_even_when_it_cannot_write_it() {
    let blocked = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("explore-out-is-a-file");
    std::fs::write(&blocked, "not a directory").expect("a file where the output folder should go");
    let args = ["explore", "--cases", "200", "--seed", "1", "--jobs", "1", "--regression", "no-errored-sibling-rearm"];
    let output = turnsim(&args).arg("--out").arg(&blocked).output().expect("run turnsim");
    assert_eq!(output.status.code(), Some(1), "a finding is exit 1: {}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("FAIL case ") && text.contains("single-continuation"), "the finding: {text}");
    assert!(text.contains("the shrunk scenario:\n# "), "the YAML, printed instead: {text}");
    assert!(stderr(&output).contains("cannot write the shrunk scenario"), "{}", stderr(&output));
}

/// A failing crash point names the command that replays it, and that
/// command shows the same failure on its whole timeline.
#[test]
fn a_failing_crash_point_replays_from_its_failure_line() {
    let sweep = output(&["crash-points", FAILING, "--regression", REGRESSION]);
    assert_eq!(sweep.status.code(), Some(1), "the regression fails a crash point: {}", stdout(&sweep));
    let report = stdout(&sweep);
    let violation =
        report.lines().find(|line| line.starts_with("    single-continuation: ")).expect("a violation line");
    let replay = report.lines().find_map(|line| line.strip_prefix("    replay: ")).expect("a replay line");
    let args: Vec<&str> =
        replay.strip_prefix("cargo run --release -p turnsim -- ").expect("a turnsim command").split(' ').collect();
    assert!(args.contains(&"--replay") && args.contains(&REGRESSION), "the crash point and the regression: {replay}");
    let replayed = output(&args);
    let timeline = stdout(&replayed);
    assert_eq!(replayed.status.code(), Some(1), "the replay fails as the sweep did: {timeline}");
    assert!(timeline.starts_with("crash point: evicted after write "), "it names the crash point: {timeline}");
    assert!(timeline.contains(&format!("FAILED {}", violation.trim())), "the same violation: {timeline}");
    assert!(timeline.contains("world     evict"), "the eviction is on the timeline: {timeline}");
}

//! The engine protocol: the built-in engine across a process boundary
//! behaves exactly as in-process, and a process engine that crashes,
//! speaks garbage, floods or hangs fails its run with the seed, never
//! hangs the harness.

use std::process::{Command, Output};

use crate::common::workspace_root;

fn turnsim(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turnsim"));
    command.args(args).current_dir(workspace_root()).env_remove("MADSIM_TEST_SEED").env_remove("MADSIM_TEST_NUM");
    command.env("TURNSIM_ENGINE_TIMEOUT_MS", "2000");
    command.output().expect("run turnsim")
}

fn served() -> String {
    format!("{} engine", env!("CARGO_BIN_EXE_turnsim"))
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn every_scenario_replays_byte_identically_over_the_protocol() {
    let mut scenarios: Vec<_> = std::fs::read_dir(workspace_root().join("scenarios"))
        .expect("scenarios/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    scenarios.sort();
    assert!(scenarios.len() > 50, "found only {} scenarios", scenarios.len());
    let served = served();
    let pairs: Vec<(&str, &str)> =
        scenarios.iter().flat_map(|path| ["0", "1"].map(|seed| (path.to_str().expect("utf-8 path"), seed))).collect();
    let compare = |&(file, seed): &(&str, &str)| {
        let local = turnsim(&["replay", file, "--seed", seed]);
        let remote = turnsim(&["replay", file, "--seed", seed, "--engine-cmd", &served]);
        let (local_text, remote_text) = (text(&local), text(&remote));
        if local_text != remote_text {
            let first = local_text.lines().zip(remote_text.lines()).find(|(a, b)| a != b);
            return Err(format!(
                "{file} seed {seed}: the timeline differs across the process boundary, first at {first:?}"
            ));
        }
        match local.status.code() == remote.status.code() {
            true => Ok(()),
            false => Err(format!("{file} seed {seed}: verdicts differ")),
        }
    };
    // Two at a time: each comparison is three processes that mostly wait
    // on one another, so one at a time leaves a core idle.
    let results: Vec<Result<(), String>> = turnsim::pool::all_in_order(&pairs, 2, compare);
    assert_eq!(results.len(), scenarios.len() * 2, "every scenario compared at both seeds");
    let differences: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn the_suite_passes_against_the_served_engine_and_a_regression_is_caught_across_it() {
    let served = served();
    let scenario = "scenarios/barrier-slow-sibling-answered-after-the-stream-ends.yaml";
    let green = turnsim(&["run", scenario, "--seeds", "8", "--engine-cmd", &served]);
    assert_eq!(green.status.code(), Some(0), "{}", text(&green));
    let red =
        turnsim(&["run", scenario, "--seeds", "8", "--regression", "no-stream-active-gate", "--engine-cmd", &served]);
    assert_eq!(red.status.code(), Some(1), "{}", text(&red));
    let failed = "FAIL scenarios/barrier-slow-sibling-answered-after-the-stream-ends.yaml (8 of 8 seeds failed)";
    assert!(text(&red).contains(failed), "{}", text(&red));
    assert!(text(&red).contains("single-continuation:"), "caught by the invariant: {}", text(&red));
}

/// Each broken engine fails the run (exit 1) with its kind and a replay
/// line, in bounded time.
fn fails_with(engine: &str, kind: &str) {
    let output = turnsim(&["replay", "scenarios/barrier-late-sibling.yaml", "--seed", "3", "--engine-cmd", engine]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{engine}: {said}");
    assert!(said.contains(kind), "{engine}: expected {kind} in:\n{said}");
    assert!(said.contains("engine-fault"), "{engine}: the run must fail `engine-fault`:\n{said}");
    assert!(!said.contains("panicked"), "{engine}: panic text in the report:\n{said}");
}

#[test]
fn an_engine_that_exits_fails_its_run() {
    fails_with("echo 'dying' >&2; exit 3", "engine-crashed");
}

#[test]
fn an_engine_that_exits_shows_its_stderr() {
    let output = turnsim(&[
        "replay",
        "scenarios/barrier-late-sibling.yaml",
        "--seed",
        "0",
        "--engine-cmd",
        "echo 'cannot open the model config' >&2; exit 3",
    ]);
    assert!(text(&output).contains("cannot open the model config"), "{}", text(&output));
}

#[test]
fn an_engine_that_writes_garbage_fails_its_run() {
    fails_with("read line; echo 'this is not json'; sleep 5", "engine-malformed");
}

#[test]
fn an_engine_that_never_goes_idle_fails_its_run() {
    let flood = r#"read line; while true; do echo '{"type":"model_cancel","call":999}'; done"#;
    fails_with(flood, "engine-busy");
}

#[test]
fn an_engine_that_hangs_fails_its_run_at_the_real_time_limit() {
    // The limit is 2 s here; the engine would sleep for 30.
    fails_with("read line; sleep 30", "engine-silent");
}

#[test]
fn check_determinism_holds_across_the_boundary_with_wall_clock_jitter() {
    let served = served();
    let output =
        turnsim(&["check-determinism", "scenarios/barrier-late-sibling.yaml", "--seeds", "3", "--engine-cmd", &served]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("determinism: 3 passed, 0 failed"), "{}", text(&output));
}

/// An engine that answers every input with a post carrying the real time
/// (and the surface's answers to its posts with nothing more): it diverges
/// on every seed.
const CLOCK_READING_ENGINE: &str = r#"while read line; do
    case "$line" in
        *'"type":"reply"'*) continue ;;
        *'"type":"post_done"'*) ;;
        *) echo "{\"type\":\"post\",\"delivery\":\"clock\",\"text\":\"$(date +%s%N)\"}"; read reply ;;
    esac
    echo '{"type":"idle","next_timer_ns":null}'
done"#;

#[test]
fn the_time_escape_canary_catches_an_engine_that_reads_the_real_clock() {
    let output = turnsim(&[
        "check-determinism",
        "scenarios/barrier-late-sibling.yaml",
        "--seeds",
        "1",
        "--engine-cmd",
        CLOCK_READING_ENGINE,
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("DIVERGED"), "{}", text(&output));
    assert!(text(&output).contains("messenger"), "the divergence names the post: {}", text(&output));
}

#[test]
fn check_determinism_reports_in_seed_order_at_any_jobs() {
    // Seeds checked side by side are reported as one at a time reports them.
    let check = |jobs: &str| {
        let args = ["check-determinism", "scenarios/barrier-late-sibling.yaml", "--seeds", "4", "--jobs", jobs];
        let output = turnsim(&[&args[..], &["--engine-cmd", CLOCK_READING_ENGINE]].concat());
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let one_at_a_time = check("1");
    let seeds: Vec<&str> = one_at_a_time
        .lines()
        .filter(|line| line.starts_with("DIVERGED"))
        .map(|line| line.split(" seed ").nth(1).and_then(|rest| rest.split(':').next()).unwrap_or(""))
        .collect();
    assert_eq!(seeds, ["0", "1", "2", "3"], "{one_at_a_time}");
    let reported = |report: &str| {
        report.lines().map(|line| line.split(": event").next().unwrap_or("").to_string()).collect::<Vec<_>>()
    };
    assert_eq!(reported(&check("3")), reported(&one_at_a_time), "the report's order does not depend on --jobs");
}

/// The engine processes `run` started with `--engine-cmd` wrapping
/// `turnsim engine`, by the `init`s each one was sent: every process's
/// input is copied to a file of its own.
fn replay_counting_processes(scenario: &str, seed: &str, fresh: bool) -> (String, Vec<usize>) {
    let dir = std::env::temp_dir().join(format!(
        "turnsim-generations-{}-{}-{seed}-{fresh}",
        std::process::id(),
        scenario.replace('/', "_")
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the copies");
    let engine = format!("tee '{}/in-'$$ | {}", dir.display(), served());
    let mut command = Command::new(env!("CARGO_BIN_EXE_turnsim"));
    command.args(["replay", scenario, "--seed", seed, "--engine-cmd", &engine]);
    command.current_dir(workspace_root()).env_remove("MADSIM_TEST_SEED").env_remove("MADSIM_TEST_NUM");
    if fresh {
        command.env("TURNSIM_ENGINE_FRESH_PROCESSES", "1");
    }
    let output = command.output().expect("run turnsim");
    let mut inits: Vec<usize> = std::fs::read_dir(&dir)
        .expect("copies")
        .map(|entry| std::fs::read_to_string(entry.expect("entry").path()).expect("a copy"))
        .map(|input| input.lines().filter(|line| line.contains(r#""type":"init""#)).count())
        .filter(|&inits| inits > 0)
        .collect();
    inits.sort_unstable();
    let _ = std::fs::remove_dir_all(&dir);
    let said = text(&output);
    // The replay line names the engine command, which names the directory.
    (said.replace(&dir.display().to_string(), "DIR"), inits)
}

#[test]
fn generations_started_in_place_replay_as_fresh_processes_do() {
    // Each evicts at least once; the last twice (a memory-only eviction
    // keeps the connection across it).
    let scenarios = [
        "scenarios/bench-standard-story.yaml",
        "scenarios/eviction-memory-only-keeps-the-connection.yaml",
        "scenarios/eviction-mid-stream-chat.yaml",
        "scenarios/explored-overlapping-evictions.yaml",
    ];
    for scenario in scenarios {
        for seed in ["0", "1"] {
            let (in_place, one_process) = replay_counting_processes(scenario, seed, false);
            let (fresh, processes) = replay_counting_processes(scenario, seed, true);
            assert_eq!(in_place, fresh, "{scenario} seed {seed}: generations in place replay differently");
            assert!(processes.len() >= 2, "{scenario} seed {seed}: no eviction restarted the engine: {processes:?}");
            assert!(processes.iter().all(|&inits| inits == 1), "fresh processes take one init each: {processes:?}");
            assert_eq!(
                one_process,
                vec![processes.len()],
                "{scenario} seed {seed}: one process serves every generation in place"
            );
        }
    }
}

/// `turnsim engine` declaring only `capabilities` (none when empty).
fn served_declaring(capabilities: &str) -> String {
    format!("{} --capabilities {capabilities}", served())
}

const NEEDS_MESSENGER: &str = "scenarios/messenger-done.yaml";
const NEEDS_RECOVERY: &str = "scenarios/stall-recovers.yaml";
const NEEDS_NOTHING: &str = "scenarios/barrier-late-sibling.yaml";

#[test]
fn a_scenario_that_needs_what_the_engine_does_not_declare_is_not_applicable() {
    let engine = served_declaring("recovery");
    let output =
        turnsim(&["run", NEEDS_MESSENGER, NEEDS_RECOVERY, NEEDS_NOTHING, "--seeds", "2", "--engine-cmd", &engine]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("N/A  {NEEDS_MESSENGER} (needs messenger, which the engine does not declare)")));
    assert!(said.contains(&format!("PASS {NEEDS_RECOVERY} (2 seeds)")), "a declared need runs: {said}");
    assert!(said.contains(&format!("PASS {NEEDS_NOTHING} (2 seeds)")), "no need runs: {said}");
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.trim_end().ends_with("suite: 4 passed, 0 failed; 1 scenario not applicable"), "{said}");

    let json =
        turnsim(&["run", NEEDS_MESSENGER, NEEDS_NOTHING, "--seeds", "1", "--format", "json", "--engine-cmd", &engine]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("a JSON report");
    assert_eq!((report["runs"].as_u64(), report["not_applicable"].as_u64()), (Some(1), Some(1)), "{report}");
    let skipped = &report["not_applicable_scenarios"][0];
    assert_eq!(skipped["scenario"], NEEDS_MESSENGER, "{report}");
    assert_eq!(skipped["missing"], serde_json::json!(["messenger"]), "{report}");

    let junit =
        turnsim(&["run", NEEDS_MESSENGER, NEEDS_NOTHING, "--seeds", "1", "--format", "junit", "--engine-cmd", &engine]);
    let xml = String::from_utf8_lossy(&junit.stdout);
    assert!(xml.contains(r#"<skipped message="not applicable: needs messenger"#), "a skipped case: {xml}");
    let github = turnsim(&[
        "run",
        NEEDS_MESSENGER,
        NEEDS_NOTHING,
        "--seeds",
        "1",
        "--format",
        "github",
        "--engine-cmd",
        &engine,
    ]);
    let notices = String::from_utf8_lossy(&github.stdout);
    assert!(notices.contains(&format!("::notice file={NEEDS_MESSENGER},line=1")), "a notice: {notices}");
}

const NEEDS_RECOVERY_MID_TOOL: &str = "scenarios/recovery-mid-tool-input.yaml";

#[test]
fn a_scenario_run_without_what_it_needs_counts_only_what_that_does_not_explain() {
    // The built-in engine recovers, but declares it does not: its recovery
    // scenarios are not applicable, and run anyway they pass.
    let engine = served_declaring("");
    let run = |scenario: &str, mode: &str, regression: Option<&str>| {
        let mut args = vec!["run", scenario, "--seeds", "2", "--not-applicable", mode, "--engine-cmd", &engine];
        args.extend(regression.map(|regression| ["--regression", regression]).into_iter().flatten());
        turnsim(&args)
    };
    let clean = run(NEEDS_RECOVERY, "only", None);
    let said = text(&clean);
    assert_eq!(clean.status.code(), Some(0), "{said}");
    assert!(said.contains("(1 run without a capability they need"), "{said}");
    assert!(said.contains(&format!("PASS {NEEDS_RECOVERY} (2 seeds)")), "{said}");
    assert!(!said.contains("N/A"), "a scenario that runs is not reported not applicable: {said}");

    // A caller left without an outcome is the engine's own bug, whatever it lacks.
    let glue_bug = run(NEEDS_RECOVERY, "only", Some("silent-interrupt"));
    let said = text(&glue_bug);
    assert_eq!(glue_bug.status.code(), Some(1), "a bug no missing capability explains fails: {said}");
    assert!(said.contains("callback-contract"), "{said}");
    assert!(said.contains("# run without recovery"), "the replay says how the run was judged: {said}");

    // A recovery that gives up on a call cut mid input is what lacking recovery explains.
    let explained = run(NEEDS_RECOVERY_MID_TOOL, "only", Some("continue-mid-tool-input"));
    assert_eq!(explained.status.code(), Some(0), "{}", text(&explained));
    let judged_whole = turnsim(&[
        "run",
        NEEDS_RECOVERY_MID_TOOL,
        "--seeds",
        "2",
        "--regression",
        "continue-mid-tool-input",
        "--engine-cmd",
        &served_declaring("recovery"),
    ]);
    assert_eq!(judged_whole.status.code(), Some(1), "the same bug where it applies: {}", text(&judged_whole));

    // `only` over scenarios that all apply has nothing to run; `run` runs both.
    let nothing = run(NEEDS_NOTHING, "only", None);
    assert_eq!(nothing.status.code(), Some(2), "{}", text(&nothing));
    let both = turnsim(&[
        "run",
        NEEDS_RECOVERY,
        NEEDS_NOTHING,
        "--seeds",
        "1",
        "--not-applicable",
        "run",
        "--engine-cmd",
        &engine,
    ]);
    let said = text(&both);
    assert_eq!(both.status.code(), Some(0), "{said}");
    assert!(String::from_utf8_lossy(&both.stdout).trim_end().ends_with("suite: 2 passed, 0 failed"), "{said}");
}

#[test]
fn the_adversary_measures_only_the_scenarios_that_apply() {
    let engine = served_declaring("recovery");
    let output = turnsim(&[
        "adversary",
        NEEDS_MESSENGER,
        NEEDS_NOTHING,
        "--seeds",
        "1",
        "--operator",
        "drop-frame",
        "--format",
        "json",
        "--engine-cmd",
        &engine,
    ]);
    let said = text(&output);
    let skipped = format!("N/A  {NEEDS_MESSENGER} (needs messenger, which the engine does not declare)");
    assert!(String::from_utf8_lossy(&output.stderr).contains(&skipped), "{said}");
    let matrix: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the matrix, whole, on stdout");
    assert_eq!(matrix["scenarios"].as_u64(), Some(1), "only the scenario that applies is mutated: {matrix}");
    let only_messenger = turnsim(&["adversary", NEEDS_MESSENGER, "--seeds", "1", "--engine-cmd", &engine]);
    assert_eq!(only_messenger.status.code(), Some(2), "nothing applies: {}", text(&only_messenger));
}

#[test]
fn an_engine_that_declares_nothing_is_held_to_every_scenario() {
    // The built-in engine served with its declaration taken off every line.
    let engine = format!(r#"{} | sed -u 's/,"capabilities":\[[^]]*\]//'"#, served());
    let output = turnsim(&["run", NEEDS_MESSENGER, NEEDS_NOTHING, "--seeds", "2", "--engine-cmd", &engine]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("PASS {NEEDS_MESSENGER} (2 seeds)")), "{said}");
    assert!(!said.contains("N/A") && !said.contains("not applicable"), "{said}");
    assert!(String::from_utf8_lossy(&output.stdout).trim_end().ends_with("suite: 4 passed, 0 failed"), "{said}");
}

#[test]
fn a_run_where_no_scenario_applies_fails() {
    let output = turnsim(&["run", NEEDS_MESSENGER, NEEDS_RECOVERY, "--engine-cmd", &served_declaring("")]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(2), "a run over nothing is not green: {said}");
    assert!(said.contains("nothing to run: each of the 2 scenarios needs a capability the engine does not declare"));
    assert!(said.contains("it declares no capability"), "{said}");
    let determinism = turnsim(&["check-determinism", NEEDS_MESSENGER, "--engine-cmd", &served_declaring("recovery")]);
    assert_eq!(determinism.status.code(), Some(2), "{}", text(&determinism));
}

#[test]
fn check_determinism_and_crash_points_skip_what_does_not_apply() {
    let engine = served_declaring("recovery");
    let determinism =
        turnsim(&["check-determinism", NEEDS_MESSENGER, NEEDS_NOTHING, "--seeds", "1", "--engine-cmd", &engine]);
    let said = text(&determinism);
    assert_eq!(determinism.status.code(), Some(0), "{said}");
    assert!(said.contains("determinism: 1 passed, 0 failed; 1 scenario not applicable"), "{said}");
    let crash = turnsim(&["crash-points", NEEDS_MESSENGER, NEEDS_NOTHING, "--engine-cmd", &engine]);
    let said = text(&crash);
    assert!(said.contains(&format!("N/A  {NEEDS_MESSENGER}")), "{said}");
    assert!(said.contains("; 1 scenario not applicable"), "{said}");
}

#[test]
fn an_unknown_capability_in_the_init_reply_is_a_protocol_fault_naming_it() {
    let engine =
        r#"read line; echo '{"type":"idle","next_timer_ns":null,"capabilities":["recovery","teleport"]}'; sleep 5"#;
    fails_with(engine, "engine-protocol");
    let output = turnsim(&["run", NEEDS_MESSENGER, "--seeds", "1", "--engine-cmd", engine]);
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "the runs fail on the fault: {said}");
    assert!(said.contains("unknown capability `teleport`"), "{said}");
}

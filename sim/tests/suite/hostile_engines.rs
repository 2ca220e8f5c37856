//! The engine under test is untrusted: each engine of the hostile corpus
//! (`sim/tests/engines/hostile.py`, one per fault class) is run through
//! every command that drives an engine, and each ends in a short report
//! that names the fault, exit 1, within bounded time and memory, with no
//! panic text, no process left running and no file left behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::workspace_root;

/// Real-time silence an engine gets here (the default is 30 s).
const SILENCE_MS: &str = "700";
/// A command still running after this long has hung (a guard, not a speed target).
const HANG_GUARD_SECONDS: &str = "60";
/// Peak memory of the harness and its engine, in KiB: a 100 MB line or an
/// endless stdout must not be held whole.
const PEAK_KIB: u64 = 400_000;
/// What one command may print: a report, not an echo of the engine's flood.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// (mode of hostile.py, the fault the report must name).
const CORPUS: [(&str, &str); 14] = [
    ("livelock", "engine-busy"),
    ("partial-line", "engine-silent"),
    ("huge-line", "engine-flood"),
    ("exits", "engine-crashed"),
    ("garbage", "engine-malformed"),
    ("silent", "engine-silent"),
    ("after-idle", "engine-protocol"),
    ("reply-back", "engine-protocol"),
    ("unknown-chat", "engine-protocol"),
    ("two-requests", "engine-protocol"),
    ("misnamed-post", "engine-protocol"),
    ("stubborn", "engine-silent"),
    ("forks", "engine-silent"),
    ("stderr-flood", "engine-silent"),
];

struct Ran {
    exit: i64,
    hung: bool,
    peak_kib: u64,
    leftovers: u64,
    output: String,
    leftover_files: Vec<PathBuf>,
}

/// A scratch directory for one run, named for it and for this process: two
/// copies of the suite at once do not remove each other's files.
fn scratch_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-engines").join(format!("{name}-{}", std::process::id()))
}

/// Runs `turnsim ARGS --engine-cmd ENGINE` under the reaper (which reports
/// the exit, the peak memory and the processes left behind), with a temp
/// directory of its own to find files left behind.
fn run_hostile(name: &str, engine: &str, args: &[&str]) -> Ran {
    run_hostile_with(name, engine, args, &[])
}

fn run_hostile_with(name: &str, engine: &str, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let scratch = scratch_dir(name);
    let _ = std::fs::remove_dir_all(&scratch);
    let temp = scratch.join("tmp");
    std::fs::create_dir_all(&temp).expect("scratch temp dir");
    let report = scratch.join("report.json");
    let engines = workspace_root().join("sim/tests/engines");
    let output = Command::new("python3")
        .arg(engines.join("reaper.py"))
        .arg(&report)
        .arg(HANG_GUARD_SECONDS)
        .arg(env!("CARGO_BIN_EXE_turnsim"))
        .args(args)
        .arg("--engine-cmd")
        .arg(engine)
        .current_dir(workspace_root())
        .env("TMPDIR", &temp)
        .env("TURNSIM_ENGINE_TIMEOUT_MS", SILENCE_MS)
        .env("RUST_BACKTRACE", "1")
        .env_remove("MADSIM_TEST_SEED")
        .env_remove("MADSIM_TEST_NUM")
        .envs(env.iter().copied())
        .output()
        .expect("run the reaper");
    let said = std::fs::read_to_string(&report).unwrap_or_else(|error| panic!("{name}: no report ({error})"));
    let report: serde_json::Value = serde_json::from_str(&said).expect("the reaper's report");
    let leftover_files =
        std::fs::read_dir(&temp).expect("temp dir").map(|entry| entry.expect("entry").path()).collect();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // All it shows is in `Ran` now (the output, the report, the files left).
    let _ = std::fs::remove_dir_all(&scratch);
    Ran {
        exit: report["exit"].as_i64().expect("exit"),
        hung: report["hung"].as_bool().expect("hung"),
        peak_kib: report["peak_kib"].as_u64().expect("peak"),
        leftovers: report["leftovers"].as_u64().expect("leftovers"),
        output: text,
        leftover_files,
    }
}

fn assert_clean_failure(ran: &Ran, what: &str, fault: &str) {
    let output = &ran.output;
    let shown = &output[..output.len().min(4_000)];
    assert!(!ran.hung, "{what}: hung\n{shown}");
    assert_eq!(ran.exit, 1, "{what}: exit code\n{shown}");
    assert!(output.contains(fault), "{what}: the report must name {fault}:\n{shown}");
    assert!(!output.contains("panicked"), "{what}: panic text in the report:\n{shown}");
    assert!(!output.contains("stack backtrace"), "{what}: a backtrace in the report:\n{shown}");
    assert!(output.len() <= MAX_OUTPUT_BYTES, "{what}: {} bytes of output", output.len());
    assert!(!output.chars().any(|c| c.is_control() && c != '\n'), "{what}: control characters in the report");
    assert!(ran.peak_kib <= PEAK_KIB, "{what}: peak memory {} KiB", ran.peak_kib);
    assert_eq!(ran.leftovers, 0, "{what}: processes left behind");
    assert!(ran.leftover_files.is_empty(), "{what}: files left behind: {:?}", ran.leftover_files);
}

fn engine(mode: &str) -> String {
    format!("python3 sim/tests/engines/hostile.py {mode}")
}

/// Engines of the corpus run at once: each run mostly waits (on its
/// engine's silence, a kill, a process starting), so one at a time leaves
/// the cores idle.
const SIDE_BY_SIDE: usize = 4;

/// `ran` over every engine of the corpus, [`SIDE_BY_SIDE`] at a time (each
/// worker takes the next engine as its last run ends: a slow engine holds
/// up only its own worker); each result beside its mode and the fault its
/// report must name, in the corpus's order.
fn over_the_corpus(ran: impl Fn(&str) -> Ran + Sync) -> Vec<(&'static str, &'static str, Ran)> {
    let results = turnsim::pool::all_in_order(&CORPUS, SIDE_BY_SIDE, |&(mode, _)| ran(mode));
    CORPUS.iter().zip(results).map(|(&(mode, fault), ran)| (mode, fault, ran)).collect()
}

/// Every command that drives an engine, each over one fault class of the
/// corpus: a test per command, so they run side by side.
fn each_fault_through(command: &str, args: &[&str]) {
    let results = over_the_corpus(|mode| run_hostile(&format!("{command}-{mode}"), &engine(mode), args));
    for (mode, fault, ran) in results {
        assert_clean_failure(&ran, &format!("{command} with the {mode} engine"), fault);
        if command == "run" {
            assert!(ran.output.contains("replay: cargo run"), "{mode}: a replay line:\n{}", ran.output);
        }
    }
}

const STORY: &str = "scenarios/bench-standard-story.yaml";

#[test]
fn run_reports_every_engine_fault_cleanly() {
    each_fault_through("run", &["run", STORY, "--seeds", "2", "--jobs", "1"]);
}

#[test]
fn replay_reports_every_engine_fault_cleanly() {
    each_fault_through("replay", &["replay", STORY, "--seed", "0"]);
}

#[test]
fn check_determinism_fails_on_every_engine_fault() {
    each_fault_through("check-determinism", &["check-determinism", STORY, "--seeds", "2"]);
}

#[test]
fn crash_points_fail_on_every_engine_fault_and_blame_the_engine() {
    each_fault_through("crash-points", &["crash-points", STORY, "--seed", "0"]);
}

#[test]
fn explore_fails_on_every_engine_fault_without_shrinking_it() {
    let results = over_the_corpus(|mode| {
        // In the run's scratch directory: removed with it.
        let name = format!("explore-{mode}");
        let out = scratch_dir(&name).join("explored");
        let args =
            ["explore", "--cases", "3", "--seed", "1", "--jobs", "1", "--out", out.to_str().expect("utf-8 path")];
        run_hostile(&name, &engine(mode), &args)
    });
    for (mode, fault, ran) in results {
        assert_clean_failure(&ran, &format!("explore with the {mode} engine"), fault);
        assert!(ran.output.contains("shrunk in 0 runs"), "{mode}: an engine fault is not shrunk:\n{}", ran.output);
    }
}

#[test]
fn an_empty_engine_command_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_turnsim"))
        .args(["run", STORY, "--seeds", "1", "--engine-cmd", " "])
        .current_dir(workspace_root())
        .output()
        .expect("run turnsim");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--engine-cmd is empty"), "{stderr}");
}

/// A commit that waits for no reply is the engine's to send only when
/// `init` said the store refuses nothing in the run: where it may refuse
/// one, the commit is a protocol fault; where it may not, it is taken.
#[test]
fn a_commit_left_unanswered_is_a_fault_only_where_the_store_may_refuse() {
    let refusing = "scenarios/explored-hook-record-refused-then-crash.yaml";
    let engine = engine("unasked-commit");
    let ran = run_hostile("unasked-commit-refusing", &engine, &["replay", refusing, "--seed", "0"]);
    assert_clean_failure(&ran, "an unanswered commit where the store may refuse", "engine-protocol");
    assert!(ran.output.contains("`no_reply`"), "the report says which rule:\n{}", ran.output);
    let ran = run_hostile("unasked-commit-taking", &engine, &["replay", STORY, "--seed", "0"]);
    assert!(!ran.hung, "hung:\n{}", ran.output);
    assert!(!ran.output.contains("engine-fault"), "it broke no rule of the protocol:\n{}", ran.output);
}

/// `cat /dev/zero` never writes a newline: the line bound ends it.
#[test]
fn an_endless_line_is_a_flood_not_an_abort() {
    let ran = run_hostile("cat-dev-zero", "cat /dev/zero", &["run", STORY, "--seeds", "2", "--jobs", "1"]);
    assert_clean_failure(&ran, "cat /dev/zero", "engine-flood");
}

/// An engine that speaks the protocol but outlives its input and ignores
/// SIGTERM: the run fails its checks (it does nothing), and the process is
/// gone all the same.
#[test]
fn an_engine_that_lingers_is_killed_and_reaped() {
    let ran = run_hostile("lingers", &engine("lingers"), &["run", STORY, "--seeds", "2", "--jobs", "1"]);
    assert!(!ran.hung, "hung:\n{}", ran.output);
    assert_eq!(ran.exit, 1, "{}", ran.output);
    assert!(!ran.output.contains("engine-fault"), "it broke no rule of the protocol:\n{}", ran.output);
    assert_eq!(ran.leftovers, 0, "processes left behind");
    assert!(ran.leftover_files.is_empty(), "files left behind: {:?}", ran.leftover_files);
}

/// Ctrl-C twice while an engine hangs: exit 130 at once (not after the
/// engine's 30 s silence limit), and the engine's whole group is gone.
#[test]
fn ctrl_c_stops_a_hung_engine_and_leaves_nothing() {
    let env = [("TURNSIM_ENGINE_TIMEOUT_MS", "30000"), ("INTERRUPT_AFTER", "1")];
    let ran = run_hostile_with("ctrl-c", &engine("forks"), &["run", STORY, "--seeds", "2", "--jobs", "1"], &env);
    assert!(!ran.hung, "hung:\n{}", ran.output);
    assert_eq!(ran.exit, 130, "{}", ran.output);
    assert_eq!(ran.leftovers, 0, "processes left behind");
    assert!(ran.leftover_files.is_empty(), "files left behind: {:?}", ran.leftover_files);
}

/// `turnsim engine` on hostile stdin: a reason on every exit, a bounded
/// echo of what it was sent, and an `init` checked for range.
mod served_engine {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use turnsim::protocol::{line, ToEngine, PROTOCOL_VERSION};
    use turnsim_engine::durable::DurableState;
    use turnsim_engine::{EngineConfig, TurnOptions};

    /// `turnsim engine` fed `input`, then EOF: (exit code, stdout, stderr).
    fn served(input: &[u8]) -> (Option<i32>, String, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_turnsim"))
            .arg("engine")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start turnsim engine");
        let mut stdin = child.stdin.take().expect("stdin");
        let input = input.to_vec();
        // Written from a thread: the engine may stop reading (and exit) first.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let output = child.wait_with_output().expect("turnsim engine output");
        writer.join().expect("writer");
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.code(), text(&output.stdout), text(&output.stderr))
    }

    fn init(now_ns: u64, generation: u32) -> String {
        line(&ToEngine::Init {
            now_ns,
            protocol: PROTOCOL_VERSION,
            seed: 1,
            generation,
            wall_base_ms: 0,
            config: Box::new(EngineConfig::default()),
            state: Box::new(DurableState::default()),
            store_may_refuse: true,
            fault_sites: Vec::new(),
            next_call: Some(1),
            next_post: Some(1),
            scratch_dir: None,
        })
    }

    #[test]
    fn a_huge_garbage_line_is_refused_with_a_bounded_echo() {
        let mut input = vec![b'x'; 20 << 20];
        input.push(b'\n');
        let (code, _, stderr) = served(&input);
        assert_eq!(code, Some(2), "{}", &stderr[..stderr.len().min(500)]);
        assert!(stderr.contains("turnsim engine: a line longer than"), "{}", &stderr[..stderr.len().min(500)]);
        assert!(stderr.len() < 2_000, "{} bytes on stderr", stderr.len());
        let (code, _, stderr) = served(&[b'{'; 5_000]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("not a protocol message"), "{stderr}");
        assert!(stderr.len() < 2_000, "{} bytes on stderr", stderr.len());
    }

    #[test]
    fn stdin_closing_while_a_request_waits_is_said() {
        let message = ToEngine::UserMessage { now_ns: 1_000, text: "hello".into(), options: TurnOptions::default() };
        let input = format!("{}{}", init(0, 1), line(&message));
        let (code, stdout, stderr) = served(input.as_bytes());
        assert!(stdout.contains(r#""type":"commit""#), "it asked for a commit:\n{stdout}");
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("stdin closed while a commit waited for its reply"), "{stderr}");
    }

    #[test]
    fn an_init_out_of_range_is_refused() {
        let (code, _, stderr) = served(init(u64::MAX, 1).as_bytes());
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("out of range"), "{stderr}");
        let (code, _, stderr) = served(init(0, 0).as_bytes());
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("generation 0"), "{stderr}");
        let backwards = ToEngine::Timer { now_ns: 5 };
        let (code, _, stderr) = served(format!("{}{}", init(1_000, 1), line(&backwards)).as_bytes());
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("time never goes back"), "{stderr}");
    }

    #[test]
    fn the_inputs_of_one_instant_are_answered_one_idle_each() {
        let connect = |connection| ToEngine::Connect { now_ns: 1_000, connection };
        let batch = ToEngine::Inputs { now_ns: 1_000, inputs: vec![connect(1), connect(2)] };
        let (code, stdout, stderr) = served(format!("{}{}", init(0, 1), line(&batch)).as_bytes());
        assert_eq!(code, Some(0), "{stderr}");
        let init_idle = stdout.lines().find(|line| line.contains(r#""type":"idle""#));
        assert!(init_idle.is_some_and(|idle| idle.contains(r#""batches":true"#)), "{stdout}");
        assert_eq!(stdout.matches(r#""type":"idle""#).count(), 3, "the init's and one per input:\n{stdout}");
        let nested = ToEngine::Inputs { now_ns: 1_000, inputs: vec![batch] };
        let (code, _, stderr) = served(format!("{}{}", init(0, 1), line(&nested)).as_bytes());
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("`inputs` inside `inputs`"), "{stderr}");
    }

    #[test]
    fn a_clean_end_of_input_between_runs_exits_zero() {
        let (code, stdout, stderr) = served(init(0, 1).as_bytes());
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains(r#""type":"idle""#), "{stdout}");
    }
}

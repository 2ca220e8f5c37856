//! Hostile input: every malformed or hostile scenario is a located exit 2,
//! never a crash, hang or runaway allocation, and mutated scenarios either
//! load or fail with a location.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use proptest::prelude::*;
use turnsim::scenario::{load_scenario, parse_bytes};
use turnsim_engine::RegressionSet;

use crate::common::workspace_root;
use crate::format::malformed_corpus;

/// Virtual memory a rejected input may use, in KiB (`ulimit -v`): going past
/// it aborts the process, which fails the test. A malformed file is rejected
/// within 60 MB here; the process's own threads (the Ctrl-C handler's, each
/// with its stack and allocator reservation) start at their own pace and
/// took an occasional run past 100 MB, so the limit leaves room for them.
const MEMORY_LIMIT_KIB: u32 = 150_000;
/// A run still going after this long has hung (a guard, not a speed target).
const HANG_GUARD: Duration = Duration::from_secs(30);

/// Runs `turnsim ARGS` under the memory limit; kills it if it hangs.
fn turnsim_limited(args: &[&str], env: &[(&str, &str)]) -> Output {
    let script = format!("ulimit -v {MEMORY_LIMIT_KIB}; exec \"$0\" \"$@\"");
    let mut command = Command::new("sh");
    command.arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_turnsim")).args(args);
    command.env_remove("MADSIM_TEST_NUM").env_remove("MADSIM_TEST_SEED").envs(env.iter().copied());
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start turnsim");
    // Counted polls rather than the wall clock, which the determinism rules keep out of the harness.
    let poll = Duration::from_millis(5);
    let mut waited = Duration::ZERO;
    while child.try_wait().expect("poll turnsim").is_none() {
        if waited > HANG_GUARD {
            child.kill().expect("kill a hung turnsim");
            panic!("turnsim {args:?} hung (still running after {HANG_GUARD:?})");
        }
        std::thread::sleep(poll);
        waited += poll;
    }
    child.wait_with_output().expect("turnsim output")
}

fn assert_rejected(output: &Output, expected: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{what}: exit code (stderr: {stderr})");
    assert!(stderr.contains(expected), "{what}: expected `{expected}` on stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: panicked: {stderr}");
}

/// Each class of the corpus, through the CLI: exit 2, the same located
/// message the loader gives, within the memory limit.
#[test]
fn every_malformed_file_is_a_located_exit_two_within_the_memory_limit() {
    for (path, _) in malformed_corpus() {
        let error = load_scenario(&path).expect_err("malformed");
        let output = turnsim_limited(&["run", path.to_str().expect("utf-8 path"), "--seeds", "2", "--jobs", "1"], &[]);
        assert_rejected(&output, &error.to_string(), &path.display().to_string());
    }
}

/// A scratch folder of this test's own, with `scenarios/` and `fixtures/`.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scenarios")).expect("scratch scenarios");
    std::fs::create_dir_all(dir.join("fixtures")).expect("scratch fixtures");
    dir
}

#[test]
fn only_regular_files_are_read_as_scenarios() {
    let dir = scratch("special-files");
    let fifo = dir.join("scenarios").join("fifo.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let socket = dir.join("scenarios").join("socket.yaml");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a socket");
    let linked = dir.join("scenarios").join("urandom.yaml");
    std::os::unix::fs::symlink("/dev/urandom", &linked).expect("symlink");
    let large = dir.join("scenarios").join("large.yaml");
    std::fs::write(&large, format!("name: large\n{}", "#".repeat(2 << 20))).expect("large file");
    let cases = [
        (fifo, "it is a FIFO"),
        (socket, "it is a socket"),
        (PathBuf::from("/dev/zero"), "it is a device"),
        (linked, "it is a device"),
        (large, "a scenario or fixture file is at most 1048576 bytes"),
    ];
    for (path, expected) in cases {
        let output = turnsim_limited(&["run", path.to_str().expect("utf-8"), "--seeds", "2"], &[]);
        assert_rejected(&output, expected, &path.display().to_string());
    }
}

#[test]
fn a_fixture_that_links_outside_its_folder_is_refused() {
    let dir = scratch("fixture-link");
    std::os::unix::fs::symlink("/dev/zero", dir.join("fixtures").join("zero.yaml")).expect("symlink");
    let scenario = dir.join("scenarios").join("x.yaml");
    std::fs::write(&scenario, "name: x\nmodel:\n  - - fixture: zero\n").expect("scenario");
    let output = turnsim_limited(&["run", scenario.to_str().expect("utf-8")], &[]);
    assert_rejected(&output, "x.yaml:3:16: fixture `zero`", "a fixture linked to /dev/zero");
    assert_rejected(&output, "links outside the fixtures folder", "a fixture linked to /dev/zero");
}

/// Flags and environment values that would wrap, spin or allocate without
/// bound are exit 2 before anything runs.
#[test]
fn flag_values_past_their_bounds_are_exit_two() {
    let scenario = workspace_root().join("scenarios").join("continuation-single-client-tool.yaml");
    let scenario = scenario.to_str().expect("utf-8");
    let max = u64::MAX.to_string();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 7] = [
        (&["--seeds", &max, "--seed-start", "2"], &[], "run past the last seed"),
        (&["--seed-start", &max, "--seeds", "2"], &[], "run past the last seed"),
        (&["--seed-start", "2"], &[("MADSIM_TEST_NUM", &max)], "run past the last seed"),
        (&["--jobs", "0"], &[], "--jobs 0: give 1 to 256"),
        (&["--jobs", &max], &[], "give 1 to 256 parallel runs"),
        (&["--seeds", "0"], &[], "nothing to run: 0 seeds"),
        (&[], &[("MADSIM_TEST_NUM", "lots")], "`lots` is not a seed number"),
    ];
    for (flags, env, expected) in cases {
        let args: Vec<&str> = ["run", scenario].into_iter().chain(flags.iter().copied()).collect();
        assert_rejected(&turnsim_limited(&args, env), expected, &format!("{flags:?} {env:?}"));
    }
}

/// A sweep is made as it runs: no seed count allocates the plan up front.
#[test]
fn the_largest_sweep_is_planned_without_allocating_it() {
    let plan = turnsim::runner::Plan {
        files: vec![crate::common::scenario("continuation-single-client-tool")],
        seeds: Some(u64::MAX),
        seed_start: Some(0),
        jobs: 1,
        shard: None,
        repeat: 1,
        regressions: RegressionSet::default(),
    };
    assert_eq!(plan.runs(), u64::MAX, "the run count of a u64::MAX sweep");
    let first: Vec<_> = plan.work().take(3).collect();
    assert_eq!(first, [(0, 0), (0, 1), (0, 2)], "the sweep starts at its first seed");
}

/// Mutations a careless or hostile edit makes, each written into the text.
const HOSTILE_TOKENS: [&[u8]; 26] = [
    b"[",
    b"]",
    b"{",
    b"}",
    b": ",
    b"- ",
    b"&a ",
    b"*a",
    b"!custom ",
    b"\0",
    b"\x7f",
    b"\n---\n",
    b"4294967295",
    b"18446744073709551615",
    b"-1",
    b".nan",
    b".inf",
    b"1e308",
    b"\"\"",
    b"~",
    b"\xff\xfe",
    b"{ repeat: { times: 4000000000, steps: [] } }",
    b"{ fixture: ../../x }",
    b"{ fixture: mid-stream-parallel-tools }",
    b"\n  ",
    b"\t",
];

#[derive(Clone, Debug)]
enum Mutation {
    Insert { at: f64, token: usize },
    Replace { at: f64, length: usize, token: usize },
    Delete { at: f64, length: usize },
    DuplicateLine { at: f64 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..1.0f64;
    let token = 0..HOSTILE_TOKENS.len();
    prop_oneof![
        (at.clone(), token.clone()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (at.clone(), 1..12usize, token).prop_map(|(at, length, token)| Mutation::Replace { at, length, token }),
        (at.clone(), 1..40usize).prop_map(|(at, length)| Mutation::Delete { at, length }),
        at.prop_map(|at| Mutation::DuplicateLine { at }),
    ]
}

fn apply(text: &mut Vec<u8>, mutation: &Mutation) {
    let position = |at: f64, text: &Vec<u8>| ((text.len() as f64 * at) as usize).min(text.len());
    match *mutation {
        Mutation::Insert { at, token } => {
            let at = position(at, text);
            text.splice(at..at, HOSTILE_TOKENS[token].iter().copied());
        }
        Mutation::Replace { at, length, token } => {
            let at = position(at, text);
            let end = (at + length).min(text.len());
            text.splice(at..end, HOSTILE_TOKENS[token].iter().copied());
        }
        Mutation::Delete { at, length } => {
            let at = position(at, text);
            text.drain(at..(at + length).min(text.len()));
        }
        Mutation::DuplicateLine { at } => {
            let at = position(at, text);
            let start = text[..at].iter().rposition(|&b| b == b'\n').map_or(0, |newline| newline + 1);
            let end = text[at..].iter().position(|&b| b == b'\n').map_or(text.len(), |newline| at + newline + 1);
            let line = text[start..end].to_vec();
            text.splice(end..end, line);
        }
    }
}

fn committed_texts() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("scenarios"))
        .expect("scenarios")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files.into_iter().map(|path| (path.clone(), std::fs::read(&path).expect("read"))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated committed scenarios load, or fail with a line and column;
    /// the loader never panics, and what loads runs a seed without a panic.
    #[test]
    fn mutated_scenarios_load_or_fail_located(
        file in 0..64usize,
        mutations in proptest::collection::vec(mutation(), 1..5),
    ) {
        let texts = committed_texts();
        let (path, original) = &texts[file % texts.len()];
        let mut text = original.clone();
        for mutation in &mutations {
            apply(&mut text, mutation);
        }
        let loaded = turnsim::world::guarded(|| parse_bytes(path, &text));
        let loaded = loaded.map_err(|panic| TestCaseError::fail(format!("the loader panicked: {panic}")))?;
        match loaded {
            Err(error) => prop_assert!(error.line.is_some() && error.column.is_some(), "unlocated: {error}"),
            Ok(scenario) => {
                let (record, _) = turnsim::runner::run_one(&scenario, 0, &RegressionSet::default());
                prop_assert!(record.panic.is_none(), "a loaded scenario's run panicked: {:?}", record.panic);
            }
        }
    }
}

/// A file's `seed_start` that a `--seeds` flag carries past the last seed is
/// reported at the line that sets it, as a load error is.
#[test]
fn a_seed_start_carried_past_the_last_seed_is_located() {
    let dir = scratch("seed-start-at-the-end");
    let scenario = dir.join("scenarios").join("late.yaml");
    std::fs::write(&scenario, format!("name: late\nseed_start: {}\n", u64::MAX)).expect("scenario");
    let output = turnsim_limited(&["run", scenario.to_str().expect("utf-8"), "--seeds", "2"], &[]);
    assert_rejected(&output, "late.yaml:2:13: 2 seeds from seed", "seed_start at u64::MAX with --seeds 2");
    assert_rejected(&output, &format!("2 | seed_start: {}", u64::MAX), "the line is shown");
}

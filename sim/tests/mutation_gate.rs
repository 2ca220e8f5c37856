//! The gate `cargo mutants` puts each mutant of the engine through (see
//! docs/mutants.md): everything that judges the engine's behaviour — the
//! committed scenarios on their own seeds, every crash point (after a
//! write, as a commit returns, a refused commit, a memory-only eviction
//! after a write), blind exploration,
//! every historical regression caught by the scenarios that guard it, and
//! the committed timelines (`snapshots/`: what a person replaying a seed
//! reads). A mutant survives only if all of it stays green. In release it runs in
//! seconds, so a mutant costs little more than its build.
//!
//! Two of its tests drive the `turnsim` binary the mutant builds into: the
//! scenarios with the engine across the protocol (its JSON is engine code),
//! and each regression's failure replayed from the command the report prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use turnsim::crash_points::{refusal_sweep, sweep, sweep_at_commit, sweep_memory_only, CrashOutcome};
use turnsim::explore::{explore, ExploreOptions};
use turnsim::runner::run_one;
use turnsim::scenario::{load_paths, ScenarioFile};
use turnsim::trace::render_timeline;
use turnsim::world;
use turnsim_engine::{RegressionSet, ALL_REGRESSIONS};

const CRASH_SEEDS: [u64; 2] = [0, 1];
const EXPLORE_CASES: usize = 3000;
const GUARD_SEEDS: u64 = 16;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios")
}

fn all_scenarios() -> Vec<ScenarioFile> {
    let files = load_paths(&[scenarios_dir()]).unwrap_or_else(|error| panic!("{error}"));
    assert!(!files.is_empty(), "no scenarios under {}", scenarios_dir().display());
    files
}

#[test]
fn every_scenario_passes_on_its_own_seeds() {
    if let Err(report) = turnsim::check_scenarios(&scenarios_dir(), None) {
        panic!("{report}");
    }
}

type Sweep = fn(&ScenarioFile, u64, &RegressionSet) -> Vec<CrashOutcome>;

fn every_point_passes(sweep: Sweep, what: &str) {
    let mut points = 0;
    for file in all_scenarios() {
        for seed in CRASH_SEEDS {
            for outcome in sweep(&file, seed, &RegressionSet::default()) {
                points += 1;
                assert!(
                    outcome.violations.is_empty(),
                    "{} seed {seed}, {what} {}: {:?}",
                    file.path.display(),
                    outcome.write,
                    outcome.violations
                );
            }
        }
    }
    assert!(points > 0, "no {what} points");
}

#[test]
fn every_crash_after_a_write_passes() {
    every_point_passes(sweep, "evicted after write");
}

#[test]
fn every_crash_as_a_commit_returns_passes() {
    every_point_passes(sweep_at_commit, "died as it returned from commit");
}

#[test]
fn every_memory_loss_passes() {
    every_point_passes(
        |file, seed, regressions| sweep_memory_only(file, seed, regressions, false),
        "lost its memory after write",
    );
}

#[test]
fn every_refused_commit_passes() {
    every_point_passes(refusal_sweep, "the store refused commit");
}

#[test]
fn blind_exploration_finds_nothing() {
    let options = ExploreOptions {
        cases: EXPLORE_CASES,
        seed: 2026,
        jobs: 1,
        regressions: RegressionSet::default(),
        max_shrink_iters: 0,
        store_faults: true,
    };
    let finding = explore(&options, &|_| {});
    assert!(finding.is_none(), "exploration found a failure: {:?}", finding.map(|finding| finding.yaml));
}

/// A regression is named on a scenario's `# Guards:` line.
fn guards(file: &ScenarioFile) -> String {
    let text = std::fs::read_to_string(&file.path).expect("scenario readable");
    let header: Vec<&str> = text.lines().take_while(|line| line.starts_with('#')).collect();
    header.join(" ").split_once("Guards:").map(|(_, names)| names.to_string()).unwrap_or_default()
}

#[test]
fn every_regression_is_caught_by_the_scenarios_that_guard_it() {
    let files = all_scenarios();
    for regression in ALL_REGRESSIONS {
        let on = RegressionSet::of([regression]);
        let guarding: Vec<&ScenarioFile> =
            files.iter().filter(|file| guards(file).contains(regression.name())).collect();
        assert!(!guarding.is_empty(), "no scenario guards {regression}");
        for file in guarding {
            let caught = (0..GUARD_SEEDS).any(|seed| !run_one(file, seed, &on).1.is_empty());
            assert!(caught, "{} guards {regression} but passes with it on", file.path.display());
        }
    }
}

/// As `snapshots::scenario_timelines_at_seed_zero` in the suite, compared
/// here without insta, which would write `.snap.new` files into the tree
/// the mutants are built in.
#[test]
fn every_timeline_matches_its_snapshot() {
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("snapshots");
    for file in all_scenarios() {
        let seed = file.scenario.seed_start;
        let record = world::run(&file, seed, &RegressionSet::default());
        let timeline =
            format!("seed {seed}, {:?} after {} ms\n{}", record.end, record.sim_ms, render_timeline(&record.events));
        let stem = file.path.file_stem().expect("stem").to_string_lossy().to_string();
        let path = snapshots.join(format!("{stem}.snap"));
        let snap = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        // The body follows the header insta writes between two `---` lines.
        let body = snap.splitn(3, "---\n").nth(2).unwrap_or_else(|| panic!("{}: no header", path.display()));
        assert_eq!(body.trim_end(), timeline.trim_end(), "{stem}: the timeline differs from its snapshot");
    }
}

fn turnsim(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turnsim"));
    command.args(args).current_dir(scenarios_dir().join("..")).env_remove("MADSIM_TEST_SEED");
    command.output().expect("run turnsim")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// What crosses the protocol is the engine's own serialisation: a field
/// lost on the wire is behaviour an out-of-process engine gets wrong.
#[test]
fn every_scenario_passes_over_the_protocol() {
    let served = format!("{} engine", env!("CARGO_BIN_EXE_turnsim"));
    let output = turnsim(&["run", "scenarios", "--seeds", "1", "--jobs", "1", "--engine-cmd", &served]);
    assert!(output.status.success(), "{}", text(&output));
}

/// A failure's replay line names what it ran with: replayed as printed,
/// each regression's failure shows again, under that regression.
#[test]
fn every_regressions_failure_replays_from_its_printed_command() {
    let files = all_scenarios();
    for regression in ALL_REGRESSIONS {
        let name = regression.name();
        let file = files.iter().find(|file| guards(file).contains(name)).expect("a guard");
        let path = file.path.to_string_lossy().to_string();
        let swept = turnsim(&["run", &path, "--regression", name, "--jobs", "1"]);
        let report = text(&swept);
        assert_eq!(swept.status.code(), Some(1), "{name} fails its guard: {report}");
        let replay = report.lines().find_map(|line| line.trim().strip_prefix("replay: ")).expect("a replay line");
        let args: Vec<&str> = replay
            .strip_prefix("cargo run --release -p turnsim -- ")
            .unwrap_or_else(|| panic!("a turnsim command: {replay}"))
            .split(' ')
            .collect();
        let replayed = turnsim(&args);
        let timeline = text(&replayed);
        assert_eq!(replayed.status.code(), Some(1), "{replay} fails as the sweep did: {timeline}");
        assert!(timeline.contains(&format!("regressions={name}\n")), "{replay} runs with {name}: {timeline}");
    }
}

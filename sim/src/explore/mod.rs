//! Blind exploration: proptest generates whole scenarios (tool batches,
//! emission orders, latencies, swarm-drawn faults), each is run and checked
//! by every invariant, and a failure is shrunk (its structure, never its
//! seed) and written out as a YAML scenario ready to commit.
//!
//! Case `i` of a sweep is generated from its own RNG, seeded by the sweep's
//! seed and `i`, so which cases run — and which failure is reported first —
//! does not depend on `--jobs`.

mod case;
mod generate;
mod shrink;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use turnsim_engine::RegressionSet;

pub use case::Case;

use crate::check::Violation;
use crate::coverage::Coverage;
use crate::protocol::fault::EngineFault;
use crate::rng::child_seed;
use crate::runner::run_one;
use crate::scenario::{parse_scenario, ScenarioFile};

/// Seeds of the sweep a written scenario runs (starting at the failing one).
pub const WRITTEN_SEEDS: u64 = 8;

#[derive(Clone, Debug)]
pub struct ExploreOptions {
    pub cases: usize,
    pub seed: u64,
    pub jobs: usize,
    pub regressions: RegressionSet,
    pub max_shrink_iters: usize,
    /// Also draw store faults: refused commits and the process dying as a
    /// commit returns.
    pub store_faults: bool,
}

/// A failing case, before and after shrinking.
#[derive(Clone, Debug)]
pub struct Finding {
    /// Index of the case in the sweep (cases run before it found nothing).
    pub case_index: usize,
    pub check: String,
    pub message: String,
    pub original: Case,
    pub shrunk: Case,
    pub shrink_steps: usize,
    /// The shrunk scenario as YAML, header comment included.
    pub yaml: String,
}

impl Finding {
    /// Size of the shrunk case: tools plus faults.
    pub fn size(&self) -> usize {
        self.shrunk.tools.len() + self.shrunk.faults.len()
    }
}

/// Runs up to `cases` cases; returns the first failure (lowest case index),
/// shrunk, and the fault coverage of the cases run.
pub fn explore(options: &ExploreOptions, progress: &(dyn Fn(usize) + Sync)) -> Option<Finding> {
    explore_with_coverage(options, progress).0
}

pub fn explore_with_coverage(
    options: &ExploreOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> (Option<Finding>, Coverage) {
    let coverage = Mutex::new(OrderedCoverage::default());
    let next = AtomicUsize::new(0);
    let first_failure: Mutex<Option<(usize, Case, Violation)>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.max(1) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let known = first_failure.lock().expect("lock").as_ref().map(|(at, _, _)| *at);
                if index >= options.cases || known.is_some_and(|at| at < index) || crate::runner::interrupted() {
                    break;
                }
                let case = generate_case(options.seed, index, options.store_faults);
                let (violation, case_coverage) = run_case(&case, &options.regressions);
                coverage.lock().expect("lock").add(index, case_coverage, violation.is_some());
                if let Some(violation) = violation {
                    let mut found = first_failure.lock().expect("lock");
                    if found.as_ref().is_none_or(|(at, _, _)| index < *at) {
                        *found = Some((index, case, violation));
                    }
                }
                progress(index + 1);
            });
        }
    });
    let coverage = coverage.into_inner().expect("lock").merged;
    let Some((case_index, original, violation)) = first_failure.into_inner().expect("lock") else {
        return (None, coverage);
    };
    // A broken engine process is the engine's fault, not the case's: it is
    // reported as found, not shrunk (each try would break it again).
    let (shrunk, shrink_steps, shrunk_violation) = if violation.check == EngineFault::CHECK {
        (original.clone(), 0, violation)
    } else {
        let (shrunk, steps) = shrink::shrink(options.seed, case_index, &violation.check, options);
        let shrunk_violation = failure(&shrunk, &options.regressions).unwrap_or_else(|| violation.clone());
        (shrunk, steps, shrunk_violation)
    };
    let yaml = render_yaml(&shrunk, options, case_index, &shrunk_violation);
    let finding = Finding {
        case_index,
        check: shrunk_violation.check.clone(),
        message: shrunk_violation.message,
        original,
        shrunk,
        shrink_steps,
        yaml,
    };
    (Some(finding), coverage)
}

/// Coverage of cases 0 to the first failure (or all), merged in case order:
/// which cases past the failure a parallel sweep happened to run must not
/// show in what it prints.
#[derive(Default)]
struct OrderedCoverage {
    merged: Coverage,
    next: usize,
    waiting: std::collections::BTreeMap<usize, (Coverage, bool)>,
    stopped: bool,
}

impl OrderedCoverage {
    fn add(&mut self, index: usize, coverage: Coverage, failed: bool) {
        self.waiting.insert(index, (coverage, failed));
        while let Some((coverage, failed)) = self.waiting.remove(&self.next) {
            if !self.stopped {
                self.merged.merge(&coverage);
                self.stopped = failed;
            }
            self.next += 1;
        }
    }
}

/// The case's own RNG: the sweep seed and the case index, nothing else.
fn case_rng(seed: u64, index: usize) -> TestRng {
    let derived = child_seed(seed, &format!("explore-case-{index}"));
    let mut bytes = [0u8; 32];
    for (chunk, value) in bytes.chunks_mut(8).zip([derived, !derived, derived.rotate_left(17), derived ^ 0x9e37_79b9]) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

fn case_tree(seed: u64, index: usize, store_faults: bool) -> impl ValueTree<Value = Case> {
    let config = Config { failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, case_rng(seed, index));
    generate::case(store_faults).new_tree(&mut runner).expect("case strategy never rejects")
}

pub fn generate_case(seed: u64, index: usize, store_faults: bool) -> Case {
    case_tree(seed, index, store_faults).current()
}

/// The scenario file a case runs as (its YAML, read back through the parser,
/// so what runs is exactly what would be written).
pub fn scenario_file(case: &Case) -> ScenarioFile {
    let yaml = serde_yaml::to_string(&case.scenario("explored")).expect("scenario serialises");
    parse_scenario(Path::new("explored.yaml"), &yaml)
        .unwrap_or_else(|error| panic!("generated scenario does not parse: {error}\n{yaml}"))
}

/// The first violation of a case's run at its seed, if any.
pub fn failure(case: &Case, regressions: &RegressionSet) -> Option<Violation> {
    run_case(case, regressions).0
}

fn run_case(case: &Case, regressions: &RegressionSet) -> (Option<Violation>, Coverage) {
    let file = scenario_file(case);
    let (record, violations) = run_one(&file, case.sim_seed, regressions);
    (violations.into_iter().next(), Coverage::of_run(&record.events))
}

fn render_yaml(case: &Case, options: &ExploreOptions, case_index: usize, violation: &Violation) -> String {
    let name = format!("explored-{}-case-{case_index}", violation.check.replace('.', "-"));
    let mut scenario = case.scenario(&name);
    scenario.seeds = WRITTEN_SEEDS;
    scenario.seed_start = case.sim_seed;
    let body = serde_yaml::to_string(&scenario).expect("scenario serialises");
    let regressions: Vec<&str> = options.regressions.iter().map(|regression| regression.name()).collect();
    let mut header = format!(
        "# Goal: found by `turnsim explore --seed {} --cases {}{}` (case {case_index}) and shrunk.\n# On seed {} the check `{}` fails: {}\n",
        options.seed,
        options.cases,
        if options.store_faults { " --store-faults" } else { "" },
        case.sim_seed,
        violation.check,
        violation.message.replace('\n', " ")
    );
    if !regressions.is_empty() {
        header.push_str(&format!(
            "# Found with: --regression {}\n# Guards: {}\n",
            regressions.join(" --regression "),
            regressions.join(", ")
        ));
    }
    header + &body
}

/// Writes a finding's YAML under `dir`; returns the path.
pub fn write_finding(dir: &Path, finding: &Finding) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = format!("explored-{}-case-{}.yaml", finding.check.replace('.', "-"), finding.case_index);
    let path = dir.join(name);
    // A write that fails part way (a full disk) leaves no truncated scenario behind.
    std::fs::write(&path, &finding.yaml).inspect_err(|_| {
        let _ = std::fs::remove_file(&path);
    })?;
    Ok(path)
}

/// Cases per second on one thread, for the benchmark.
pub fn bench_rate() -> f64 {
    let started = crate::bench::wall_now();
    let mut cases = 0;
    while started.elapsed() < std::time::Duration::from_millis(600) {
        let case = generate_case(0xbe4c, cases, false);
        let _ = failure(&case, &RegressionSet::default());
        cases += 1;
    }
    cases as f64 / started.elapsed().as_secs_f64()
}

//! Runs scenarios over seeds, in parallel, and collects what failed.
//!
//! Work is the list of (scenario, seed) pairs in file order then seed order;
//! `--shard k/n` keeps every n-th pair starting at the k-th, so a CI matrix
//! covers the space exactly once. Each run is independent (its own madsim
//! runtime), so results do not depend on `--jobs`; they are reported in
//! work order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use turnsim_engine::RegressionSet;

use crate::check::{check_run, Violation};
use crate::scenario::ScenarioFile;
use crate::world::{self, RunEnd, RunRecord};

/// Which slice of the work this process runs: `index` of `count`, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (index, count) = text.split_once('/').ok_or("a shard is K/N, e.g. 2/4")?;
        let index: u64 = index.trim().parse().map_err(|_| format!("shard index `{index}` is not a number"))?;
        let count: u64 = count.trim().parse().map_err(|_| format!("shard count `{count}` is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("shard {index}/{count}: need 1 <= K <= N"));
        }
        Ok(Self { index, count })
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub files: Vec<ScenarioFile>,
    /// Seeds per scenario; `None`: each file's own `seeds`.
    pub seeds: Option<u64>,
    /// First seed; `None`: each file's own `seed_start`.
    pub seed_start: Option<u64>,
    pub jobs: usize,
    pub shard: Option<Shard>,
    pub regressions: RegressionSet,
}

/// One (scenario, seed) run's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub scenario: usize,
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub end: RunEnd,
    pub sim_ms: u64,
    /// The last timeline lines before the first violation (failures only).
    pub tail: Vec<String>,
    /// Which faults landed in which turn phase.
    pub coverage: crate::coverage::Coverage,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

impl Plan {
    /// The (scenario index, seed) pairs this process runs, in order, made as
    /// they are needed: no seed count makes the plan allocate.
    pub fn work(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let all = self.files.iter().enumerate().flat_map(|(index, file)| {
            let seeds = self.seeds.unwrap_or(file.scenario.seeds);
            let start = self.seed_start.unwrap_or(file.scenario.seed_start);
            (0..seeds).map_while(move |offset| Some((index, start.checked_add(offset)?)))
        });
        let shard = self.shard.unwrap_or(Shard { index: 1, count: 1 });
        all.enumerate()
            .filter(move |(position, _)| *position as u64 % shard.count == shard.index - 1)
            .map(|(_, work)| work)
    }

    /// How many runs [`Plan::work`] yields, without making them.
    pub fn runs(&self) -> u64 {
        let all: u64 =
            self.files.iter().map(|file| self.seeds.unwrap_or(file.scenario.seeds)).fold(0, u64::saturating_add);
        let shard = self.shard.unwrap_or(Shard { index: 1, count: 1 });
        let skipped = shard.index - 1;
        if all <= skipped {
            return 0;
        }
        (all - skipped).div_ceil(shard.count)
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks running sweeps to stop taking new runs (Ctrl-C); runs under way finish.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Runs one seed and checks it.
pub fn run_one(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> (RunRecord, Vec<Violation>) {
    let record = world::run(file, seed, regressions);
    let violations = check_run(file, &record);
    (record, violations)
}

/// Runs the plan on `jobs` threads; `progress(done, total)` after each run.
pub fn execute(plan: &Plan, progress: &(dyn Fn(usize, usize) + Sync)) -> Vec<Outcome> {
    let total = usize::try_from(plan.runs()).unwrap_or(usize::MAX);
    let work = Mutex::new(plan.work().enumerate());
    let done = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.max(1) {
            scope.spawn(|| loop {
                if interrupted() {
                    break;
                }
                let Some((position, (scenario, seed))) = work.lock().expect("work lock").next() else {
                    break;
                };
                let outcome = run_and_summarise(plan, scenario, seed);
                results.lock().expect("results lock").push((position, outcome));
                progress(done.fetch_add(1, Ordering::SeqCst) + 1, total);
            });
        }
    });
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|(position, _)| *position);
    results.into_iter().map(|(_, outcome)| outcome).collect()
}

fn run_and_summarise(plan: &Plan, scenario: usize, seed: u64) -> Outcome {
    let (record, violations) = run_one(&plan.files[scenario], seed, &plan.regressions);
    let tail = if violations.is_empty() { Vec::new() } else { tail_before(&record, &violations) };
    let coverage = crate::coverage::Coverage::of_run(&record.events);
    Outcome { scenario, seed, violations, end: record.end, sim_ms: record.sim_ms, tail, coverage }
}

/// Up to twelve timeline lines ending where the first violation shows.
fn tail_before(record: &RunRecord, violations: &[Violation]) -> Vec<String> {
    let end =
        violations.iter().filter_map(|violation| violation.at_event).min().map_or(record.events.len(), |at| at + 1);
    let start = end.saturating_sub(12);
    record.events[start..end.min(record.events.len())].iter().map(|event| event.render()).collect()
}

/// The one command that replays a run.
pub fn replay_command(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> String {
    let mut command = format!("cargo run --release -p turnsim -- replay {} --seed {seed}", file.path.display());
    for regression in regressions.iter() {
        command.push_str(&format!(" --regression {regression}"));
    }
    command
}

//! Runs scenarios over seeds, in parallel, and collects what failed.
//!
//! Work is the list of (scenario, seed) pairs in file order then seed order;
//! `--shard k/n` keeps every n-th pair starting at the k-th, so a CI matrix
//! covers the space exactly once. Each run is independent (its own madsim
//! runtime), so results do not depend on `--jobs`; they are reported in
//! work order.
//!
//! A sweep does not keep its runs: [`sweep`] folds each outcome into a
//! [`SweepResults`] as it finishes (a count per scenario, the merged fault
//! coverage, every failing run in full), so a 10 000-seed sweep needs no
//! more memory than a 100-seed one.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use turnsim_engine::RegressionSet;

use crate::check::{check_run, Violation};
use crate::coverage::Coverage;
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
    /// Runs of each (scenario, seed), one after another (at least 1).
    pub repeat: u64,
    pub regressions: RegressionSet,
}

/// One (scenario, seed) run's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub scenario: usize,
    pub seed: u64,
    /// Which run of the seed this was, from 1 (`--repeat`).
    pub repeat: u64,
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
    /// How many runs [`Plan::work`] yields (each seed's repeats counted),
    /// without making them.
    pub fn runs(&self) -> u64 {
        let all: u64 =
            self.files.iter().map(|file| self.seeds.unwrap_or(file.scenario.seeds)).fold(0, u64::saturating_add);
        let shard = self.shard.unwrap_or(Shard { index: 1, count: 1 });
        all.saturating_sub(shard.index - 1).div_ceil(shard.count).saturating_mul(self.repeat.max(1))
    }

    /// The `position`-th (scenario index, seed) pair of [`Plan::work`],
    /// found without listing the work: a seed's repeats follow one another.
    pub fn work_item(&self, position: u64) -> Option<(usize, u64)> {
        self.work_run(position).map(|(scenario, seed, _)| (scenario, seed))
    }

    /// The `position`-th run: (scenario index, seed, which repeat from 1).
    pub fn work_run(&self, position: u64) -> Option<(usize, u64, u64)> {
        let repeat = self.repeat.max(1);
        let (position, run) = (position / repeat, position % repeat + 1);
        let mut unsharded = match self.shard {
            None => position,
            Some(shard) => position.checked_mul(shard.count)?.checked_add(shard.index - 1)?,
        };
        for (index, file) in self.files.iter().enumerate() {
            let seeds = self.seeds.unwrap_or(file.scenario.seeds);
            if unsharded < seeds {
                return Some((index, self.seed_start.unwrap_or(file.scenario.seed_start).checked_add(unsharded)?, run));
            }
            unsharded -= seeds;
        }
        None
    }

    /// The (scenario index, seed) pairs this process runs, in order, made as
    /// they are needed: no seed count makes the plan allocate.
    pub fn work(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let all = self.files.iter().enumerate().flat_map(|(index, file)| {
            let seeds = self.seeds.unwrap_or(file.scenario.seeds);
            let start = self.seed_start.unwrap_or(file.scenario.seed_start);
            (0..seeds).map_while(move |offset| Some((index, start.checked_add(offset)?)))
        });
        let shard = self.shard.unwrap_or(Shard { index: 1, count: 1 });
        let repeat = self.repeat.max(1);
        all.enumerate()
            .filter(move |(position, _)| *position as u64 % shard.count == shard.index - 1)
            .flat_map(move |(_, work)| (0..repeat).map(move |_| work))
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

/// Runs one seed and checks it. A scenario run without a capability it
/// needs keeps only what that does not explain.
pub fn run_one(file: &ScenarioFile, seed: u64, regressions: &RegressionSet) -> (RunRecord, Vec<Violation>) {
    let record = world::run(file, seed, regressions);
    let violations = crate::capability::unexplained(&file.judged_without, check_run(file, &record));
    (record, violations)
}

/// Runs the plan on `jobs` threads and returns every outcome in work
/// order; `progress(done, total)` after each run. A sweep that only reports
/// should use [`sweep`], which keeps no passing run.
pub fn execute(plan: &Plan, progress: &(dyn Fn(usize, usize) + Sync)) -> Vec<Outcome> {
    let results = Mutex::new(Vec::new());
    for_each_outcome(plan, progress, &|position, outcome| {
        results.lock().expect("results lock").push((position, outcome));
    });
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|(position, _)| *position);
    results.into_iter().map(|(_, outcome)| outcome).collect()
}

/// What a report needs of a sweep.
#[derive(Clone, Debug, Default)]
pub struct SweepResults {
    /// Runs per scenario index (zero for a scenario this shard has none of).
    pub runs: Vec<usize>,
    /// Every failing run, in work order.
    pub failures: Vec<Outcome>,
    /// Which faults landed in which turn phase, over all runs.
    pub coverage: Coverage,
    /// Runs of each seed (`--repeat`): above 1, a scenario is reported with its pass rate.
    pub repeat: u64,
}

impl SweepResults {
    pub fn total_runs(&self) -> usize {
        self.runs.iter().sum()
    }

    /// The failing runs of one scenario, in seed order.
    pub fn failures_of(&self, scenario: usize) -> impl Iterator<Item = &Outcome> {
        self.failures.iter().filter(move |outcome| outcome.scenario == scenario)
    }
}

/// Runs the plan on `jobs` threads, folding each outcome into the results
/// as it finishes; `progress(done, total)` after each run.
pub fn sweep(plan: &Plan, progress: &(dyn Fn(usize, usize) + Sync)) -> SweepResults {
    let results = SweepResults { runs: vec![0; plan.files.len()], repeat: plan.repeat.max(1), ..Default::default() };
    let folded = Mutex::new((results, Vec::new()));
    for_each_outcome(plan, progress, &|position, outcome| {
        let mut folded = folded.lock().expect("results lock");
        let (results, failures) = &mut *folded;
        results.runs[outcome.scenario] += 1;
        results.coverage.merge(&outcome.coverage);
        if !outcome.passed() {
            failures.push((position, outcome));
        }
    });
    let (mut results, mut failures) = folded.into_inner().expect("results lock");
    failures.sort_by_key(|(position, _)| *position);
    results.failures = failures.into_iter().map(|(_, outcome)| outcome).collect();
    results
}

/// Runs the plan on `jobs` threads; hands each outcome with its work
/// position to `on_outcome` as it finishes (in any order).
fn for_each_outcome(plan: &Plan, progress: &(dyn Fn(usize, usize) + Sync), on_outcome: &(dyn Fn(u64, Outcome) + Sync)) {
    let total = plan.runs();
    let next = AtomicU64::new(0);
    let done = AtomicUsize::new(0);
    let total_shown = usize::try_from(total).unwrap_or(usize::MAX);
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.max(1) {
            scope.spawn(|| loop {
                if interrupted() {
                    break;
                }
                let position = next.fetch_add(1, Ordering::SeqCst);
                let Some((scenario, seed, repeat)) = plan.work_run(position).filter(|_| position < total) else {
                    break;
                };
                on_outcome(position, run_and_summarise(plan, scenario, seed, repeat));
                progress(done.fetch_add(1, Ordering::SeqCst) + 1, total_shown);
            });
        }
    });
}

fn run_and_summarise(plan: &Plan, scenario: usize, seed: u64, repeat: u64) -> Outcome {
    let (record, violations) = run_one(&plan.files[scenario], seed, &plan.regressions);
    let tail = if violations.is_empty() { Vec::new() } else { tail_before(&record, &violations) };
    let coverage = Coverage::of_run(&record.events);
    Outcome { scenario, seed, repeat, violations, end: record.end, sim_ms: record.sim_ms, tail, coverage }
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
    command.push_str(&crate::world::engine_flag());
    command.push_str(crate::live::live_flag());
    if !file.judged_without.is_empty() {
        let missing = crate::capability::names(&file.judged_without);
        command.push_str(&format!("  # run without {missing}: what that explains does not count"));
    }
    command
}

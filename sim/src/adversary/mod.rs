//! The adversary: how strong is the suite? It stands between the engine
//! under test (built-in, `--engine-cmd`, or a Rust engine of one's own) and
//! the world, and rewrites what the engine sends out with named operators
//! (`operators.rs`), one site per run; then it asks whether some check
//! noticed. The kill matrix (`matrix.rs`) says, per operator and scenario,
//! whether the wrong was caught, and by which check.
//!
//! Per (scenario, seed): one run with the adversary counting every
//! operator's sites and changing nothing (the baseline: it must pass);
//! then, per operator with sites, one run rewriting site k, k drawn from
//! the seed and the operator's name (its own generator: the world's draws
//! are untouched). Up to site k the two runs are the same run, so site k
//! is there; from it on, the world answers the wrong engine.

pub mod cli;
pub mod equivalents;
pub mod interpose;
pub mod matrix;
pub mod operators;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use turnsim_engine::RegressionSet;

use crate::check::{check_run, Violation};
use crate::scenario::ScenarioFile;
use crate::world::{self, RunRecord};
use interpose::{Adversary, Interpose, Mode};
pub use operators::{Operator, ALL_OPERATORS};

/// One run under the adversary.
pub struct AdversaryRun {
    pub record: RunRecord,
    pub violations: Vec<Violation>,
    /// Sites seen per operator (of an operator whose wrong only a later
    /// process reads, those an eviction follows).
    pub sites: BTreeMap<Operator, u64>,
    /// For an operator whose wrong only a later process reads: the raw
    /// site numbers an eviction follows, which `sites` counts.
    pub read_later: BTreeMap<Operator, Vec<u64>>,
    /// What the operator changed (`None`: nothing).
    pub applied: Option<String>,
    /// The first chunk of each `reorder-frames` site (see [`Mode::Reorder`]).
    pub pair_starts: Vec<u64>,
}

/// Runs `file` at `seed` with the adversary in `mode`, and checks it.
pub fn run(file: &ScenarioFile, seed: u64, regressions: &RegressionSet, mode: Mode) -> AdversaryRun {
    let adversary = Adversary::new(mode);
    let record = world::run_interposed(file, seed, regressions, Arc::new(Interpose(adversary.clone())));
    let violations = check_run(file, &record);
    let (mut sites, applied, pair_starts) = (adversary.sites(), adversary.applied(), adversary.pair_starts());
    let read_later = read_later_sites(&adversary, &record);
    for (operator, eligible) in &read_later {
        match eligible.len() {
            0 => drop(sites.remove(operator)),
            count => drop(sites.insert(*operator, count as u64)),
        }
    }
    AdversaryRun { record, violations, sites, applied, pair_starts, read_later }
}

/// The sites of each read-later operator that an eviction follows: a
/// record kept from the store is read only by the next process, so where
/// none follows, no consumer could tell (and no site is counted).
fn read_later_sites(adversary: &Adversary, record: &RunRecord) -> BTreeMap<Operator, Vec<u64>> {
    let crossings = &record.history.crossings;
    let killed_after = |at: usize| {
        crossings[at.min(crossings.len())..].iter().any(|crossing| crossing.what == crate::history::Boundary::Killed)
    };
    operators::READ_LATER
        .into_iter()
        .map(|operator| {
            let positions = adversary.site_positions(operator);
            let eligible =
                positions.iter().enumerate().filter(|(_, &at)| killed_after(at)).map(|(site, _)| site as u64);
            (operator, eligible.collect())
        })
        .collect()
}

/// How to rewrite site `site` of `operator`, found in `baseline` (its counting run).
pub fn apply_mode(baseline: &AdversaryRun, operator: Operator, site: u64) -> Mode {
    let site = baseline
        .read_later
        .get(&operator)
        .and_then(|eligible| eligible.get(usize::try_from(site).ok()?).copied())
        .unwrap_or(site);
    match operator {
        Operator::ReorderFrames => {
            let hold = usize::try_from(site).ok().and_then(|site| baseline.pair_starts.get(site).copied());
            Mode::Reorder { site, hold: hold.unwrap_or(u64::MAX) }
        }
        operator => Mode::Apply { operator, site },
    }
}

/// The site `operator` rewrites at `seed`, of the `sites` the baseline had.
pub fn chosen_site(seed: u64, operator: Operator, sites: u64) -> u64 {
    let label = format!("adversary/{}", operator.name());
    ChaCha8Rng::seed_from_u64(crate::rng::child_seed(seed, &label)).gen_range(0..sites.max(1))
}

/// The mutated run of `operator` at `seed`: `None` when the baseline has
/// no site of it.
pub fn mutated(
    file: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    operator: Operator,
) -> Option<AdversaryRun> {
    let baseline = run(file, seed, regressions, Mode::Count);
    let sites = baseline.sites.get(&operator).copied().unwrap_or(0);
    (sites > 0)
        .then(|| run(file, seed, regressions, apply_mode(&baseline, operator, chosen_site(seed, operator, sites))))
}

/// What one mutated run of one operator came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The unmutated run failed: nothing to learn from this seed.
    BaselineFails { checks: Vec<String> },
    /// The operator had no site in the run.
    NoSite,
    /// The operator had sites but its rewrite never happened (the mutated
    /// run left the baseline's path before the site: an engine that is
    /// not deterministic).
    Unreached,
    /// Some check failed; the checks, sorted.
    Caught { checks: Vec<String>, site: u64, sites: u64, applied: String },
    /// The operator changed something and every check passed.
    Survived { site: u64, sites: u64, applied: String },
}

/// One (scenario, seed, operator) result.
#[derive(Clone, Debug)]
pub struct Trial {
    pub scenario: usize,
    pub seed: u64,
    pub operator: Operator,
    pub verdict: Verdict,
}

/// Which seeds each scenario runs: `count` of them from `start`, or from
/// the file's own `seed_start` (the seeds its author chose, as `run` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Seeds {
    pub count: u64,
    pub start: Option<u64>,
}

impl Seeds {
    pub fn of(&self, file: &ScenarioFile) -> impl Iterator<Item = u64> {
        let start = self.start.unwrap_or(file.scenario.seed_start);
        (0..self.count).map_while(move |offset| start.checked_add(offset))
    }
}

/// What a sweep runs.
pub struct SweepPlan<'a> {
    pub files: &'a [ScenarioFile],
    pub seeds: Seeds,
    pub operators: Vec<Operator>,
    pub jobs: usize,
    pub regressions: RegressionSet,
}

/// Runs every (scenario, seed): the baseline, then each operator with a
/// site. Trials come back sorted by scenario, seed and operator, whatever
/// `jobs` is; `progress` after each (scenario, seed).
pub fn sweep(plan: &SweepPlan, progress: &(dyn Fn() + Sync)) -> Vec<Trial> {
    let work: Vec<(usize, u64)> = plan
        .files
        .iter()
        .enumerate()
        .flat_map(|(scenario, file)| plan.seeds.of(file).map(move |seed| (scenario, seed)))
        .collect();
    let found = crate::pool::in_order(&work, plan.jobs, crate::runner::interrupted, |&(scenario, seed)| {
        let trials = trials_of(plan, scenario, seed);
        progress();
        trials
    });
    let mut trials: Vec<Trial> = found.into_iter().flatten().flatten().collect();
    trials.sort_by_key(|trial| (trial.scenario, trial.seed, trial.operator));
    trials
}

fn trials_of(plan: &SweepPlan, scenario: usize, seed: u64) -> Vec<Trial> {
    let file = &plan.files[scenario];
    let baseline = run(file, seed, &plan.regressions, Mode::Count);
    let trial = |operator, verdict| Trial { scenario, seed, operator, verdict };
    if !baseline.violations.is_empty() {
        let checks = checks_of(&baseline.violations);
        return plan.operators.iter().map(|op| trial(*op, Verdict::BaselineFails { checks: checks.clone() })).collect();
    }
    plan.operators
        .iter()
        .map(|&operator| trial(operator, verdict_of(file, seed, &plan.regressions, &baseline, operator)))
        .collect()
}

/// The verdict of `operator` at `seed`, given the baseline (its counting run).
pub fn verdict_of(
    file: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    baseline: &AdversaryRun,
    operator: Operator,
) -> Verdict {
    let sites = baseline.sites.get(&operator).copied().unwrap_or(0);
    if sites == 0 {
        return Verdict::NoSite;
    }
    let site = chosen_site(seed, operator, sites);
    let mutated = run(file, seed, regressions, apply_mode(baseline, operator, site));
    match (mutated.applied, mutated.violations.is_empty()) {
        (None, _) => Verdict::Unreached,
        (Some(applied), true) => Verdict::Survived { site, sites, applied },
        (Some(applied), false) => Verdict::Caught { checks: checks_of(&mutated.violations), site, sites, applied },
    }
}

/// The names of the checks that failed, sorted, each once.
fn checks_of(violations: &[Violation]) -> Vec<String> {
    let mut checks: Vec<String> = violations.iter().map(|violation| violation.check.clone()).collect();
    checks.sort();
    checks.dedup();
    checks
}

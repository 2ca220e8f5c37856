//! `turnsim adversary`: the kill matrix of the scenarios given, or, for one
//! scenario, one operator and `--seed`, that mutated run's whole timeline
//! (the replay command every caught or surviving pair prints).
//!
//! Exit codes: 0 when every pair that changed something was caught or is
//! argued equivalent, 1 when some pair survived (or an unmutated run
//! failed: nothing can be measured against a failing suite), 2 on bad
//! input and when nothing was measured (no scenario, no seed, no operator
//! that changed anything), 130 after Ctrl-C.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use turnsim_engine::{Regression, RegressionSet};

use super::equivalents::Equivalents;
use super::interpose::Mode;
use super::matrix::{self, Matrix};
use super::{Operator, Seeds, SweepPlan, ALL_OPERATORS};
use crate::scenario::{load_paths, ScenarioError, ScenarioFile};
use crate::{errln, output, report};

/// `turnsim adversary`'s flags.
#[derive(clap::Args)]
pub struct AdversaryArgs {
    /// Scenario files or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Run only this operator (repeatable; default: every operator).
    #[arg(long = "operator", value_name = "NAME")]
    operators: Vec<Operator>,
    /// Seeds per scenario.
    #[arg(long, default_value_t = 2)]
    seeds: u64,
    /// First seed (default: each file's `seed_start`).
    #[arg(long)]
    seed_start: Option<u64>,
    /// Exactly this seed; with one scenario file and one operator, print
    /// that mutated run's whole timeline.
    #[arg(long, conflicts_with_all = ["seeds", "seed_start"])]
    seed: Option<u64>,
    /// Report format: text for people, json for tools.
    #[arg(long, value_enum, default_value_t = MatrixFormat::Text)]
    format: MatrixFormat,
    /// Parallel (scenario, seed) sweeps, 1 to 256 (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Pairs argued equivalent (YAML: operator, scenario, why): their
    /// survivors do not fail the exit code.
    #[arg(long, value_name = "FILE")]
    equivalents: Option<PathBuf>,
    /// Bring back a historical bug (repeatable); see `list regressions`.
    #[arg(long = "regression")]
    regressions: Vec<Regression>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum MatrixFormat {
    Text,
    Json,
}

/// Runs `turnsim adversary`.
pub fn run(args: AdversaryArgs) -> Result<ExitCode, ScenarioError> {
    let files: Vec<ScenarioFile> = load_paths(&args.paths)?;
    let (files, canaries): (Vec<ScenarioFile>, Vec<ScenarioFile>) =
        files.into_iter().partition(|file| file.scenario.expect.expect_failure.is_none());
    if files.is_empty() {
        return Err(usage(&format!("nothing to mutate: no scenario files (canaries aside) in {}", shown(&args.paths))));
    }
    // A scenario whose needs the engine does not declare says nothing of
    // the checks: its unmutated run is not the engine's to pass.
    let crate::applicable::Split { applicable: files, not_applicable } = crate::applicable::split(files);
    if files.is_empty() {
        return Err(usage(&format!(
            "nothing to mutate: each of the {} needs a capability the engine does not declare",
            report::plural(not_applicable.len() as u64, "scenario")
        )));
    }
    let seeds = seeds(&args)?;
    let operators = if args.operators.is_empty() { ALL_OPERATORS.to_vec() } else { args.operators.clone() };
    let equivalents = args.equivalents.as_deref().map(Equivalents::load).transpose()?.unwrap_or_default();
    let regressions = RegressionSet::of(args.regressions.clone());
    if let (Some(seed), [file], [operator]) = (args.seed, files.as_slice(), operators.as_slice()) {
        return replay(file, seed, *operator, &regressions, &equivalents);
    }
    let jobs = jobs(args.jobs)?;
    errln!(
        "turnsim adversary: {}, {} each, from {}, {}, {}{}",
        report::plural(files.len() as u64, "scenario"),
        report::plural(seeds.count, "seed"),
        seeds.start.map_or("each file's seed_start".to_string(), |start| format!("seed {start}")),
        report::plural(operators.len() as u64, "operator"),
        report::plural(jobs as u64, "job"),
        canaries_skipped(&canaries)
    );
    // On stderr, beside the header: stdout carries the matrix (JSON too).
    let skipped = report::not_applicable_lines(&not_applicable);
    if !skipped.is_empty() {
        errln!("{}", skipped.trim_end());
    }
    let plan = SweepPlan { files: &files, seeds, operators: operators.clone(), jobs, regressions };
    let trials = super::sweep(&plan, &|| {});
    let matrix = Matrix::of(&files, seeds, &operators, &trials, &equivalents, &plan.regressions);
    match args.format {
        MatrixFormat::Text => output::emit(&matrix::text(&matrix)),
        MatrixFormat::Json => output::emit(&format!("{}\n", matrix::json(&matrix))),
    }
    verdict(&matrix)
}

fn verdict(matrix: &Matrix) -> Result<ExitCode, ScenarioError> {
    if crate::runner::interrupted() {
        return Ok(ExitCode::from(130));
    }
    if matrix.changed == 0 {
        return Err(usage("nothing measured: no operator changed anything in these scenarios"));
    }
    let baseline_fails = matrix.rows.iter().any(|row| row.baseline_fails > 0);
    Ok(if matrix.survived > 0 || baseline_fails { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn seeds(args: &AdversaryArgs) -> Result<Seeds, ScenarioError> {
    if let Some(seed) = args.seed {
        return Ok(Seeds { count: 1, start: Some(seed) });
    }
    if args.seeds == 0 {
        return Err(usage("nothing to run: --seeds 0"));
    }
    if args.seed_start.is_some_and(|start| start.checked_add(args.seeds - 1).is_none()) {
        return Err(usage("--seed-start and --seeds run past the last seed"));
    }
    Ok(Seeds { count: args.seeds, start: args.seed_start })
}

fn jobs(jobs: Option<usize>) -> Result<usize, ScenarioError> {
    match jobs {
        None => Ok(std::thread::available_parallelism().map_or(1, |cores| cores.get())),
        Some(jobs) if (1..=256).contains(&jobs) => Ok(jobs),
        Some(jobs) => Err(usage(&format!("--jobs {jobs}: give 1 to 256 parallel runs"))),
    }
}

fn usage(message: &str) -> ScenarioError {
    ScenarioError::new(Path::new("turnsim adversary"), message)
}

fn shown(paths: &[PathBuf]) -> String {
    paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(" ")
}

fn canaries_skipped(canaries: &[ScenarioFile]) -> String {
    match canaries.len() {
        0 => String::new(),
        count => format!(", {} skipped (a canary fails by design)", report::plural(count as u64, "canary")),
    }
}

/// One mutated run in full: the timeline with the rewrite in it (a `world`
/// line), the stored transcript, and whether some check noticed.
fn replay(
    file: &ScenarioFile,
    seed: u64,
    operator: Operator,
    regressions: &RegressionSet,
    equivalents: &Equivalents,
) -> Result<ExitCode, ScenarioError> {
    let baseline = super::run(file, seed, regressions, Mode::Count);
    if !baseline.violations.is_empty() {
        let checks: Vec<&str> = baseline.violations.iter().map(|violation| violation.check.as_str()).collect();
        output::emit(&format!("baseline fails at seed {seed} ({}): nothing to measure\n", checks.join(", ")));
        return Ok(ExitCode::FAILURE);
    }
    let sites = baseline.sites.get(&operator).copied().unwrap_or(0);
    if sites == 0 {
        let message = format!("{} changed nothing in {} at seed {seed}: no site", operator.name(), file.path.display());
        return Err(usage(&message));
    }
    let site = super::chosen_site(seed, operator, sites);
    let mutated = super::run(file, seed, regressions, super::apply_mode(&baseline, operator, site));
    let mut out = format!(
        "SEED={seed} scenario={} operator={} site {} of {sites}\n",
        file.scenario.name,
        operator.name(),
        site + 1
    );
    out.push_str(&report::numbered_timeline(&mutated.record, &mutated.violations));
    out.push_str("final transcript (stored):\n");
    out.push_str(&crate::transcript_view::render(&mutated.record.final_state.messages));
    let Some(applied) = mutated.applied else {
        out.push_str("UNREACHED: the run left the baseline's path before the site\n");
        output::emit(&out);
        return Ok(ExitCode::FAILURE);
    };
    for violation in &mutated.violations {
        let at = violation.at_event.map(|at| format!(" (event {})", at + 1)).unwrap_or_default();
        let _ = writeln!(out, "FAILED {}: {}{at}", violation.check, violation.message);
    }
    let caught = !mutated.violations.is_empty();
    match (caught, equivalents.why(operator, &file.path)) {
        (true, _) => {
            let _ = writeln!(out, "CAUGHT {}: {applied}", operator.name());
        }
        (false, Some(why)) => {
            let _ = writeln!(out, "SURVIVED {} (argued equivalent: {}): {applied}", operator.name(), why.trim());
        }
        (false, None) => {
            let _ = writeln!(out, "SURVIVED {}: {applied}: every check passed", operator.name());
        }
    }
    output::emit(&out);
    let unnoticed = !caught && equivalents.why(operator, &file.path).is_none();
    Ok(if unnoticed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

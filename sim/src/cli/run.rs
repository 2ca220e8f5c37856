//! `turnsim run`: every scenario over its seeds, every invariant checked,
//! reported as text, JSON, JUnit or GitHub annotations.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use turnsim_engine::{Regression, RegressionSet};

use super::flags::{env_u64, jobs_flag, load_for, usage_error};
use super::interrupted_exit;
use super::progress::Progress;
use crate::applicable::NotApplicableMode;
use crate::runner::{self, Plan, Shard};
use crate::scenario::ScenarioError;
use crate::{errln, outln, output, report};

#[derive(Clone, Copy, ValueEnum)]
pub enum RunFormat {
    Text,
    Json,
    Junit,
    Github,
}

/// Which runs `run` makes: the seeds, how they are spread, repeats of
/// each, and what it does with a scenario that does not apply to the engine.
pub struct Selection {
    pub seeds: Option<u64>,
    pub seed_start: Option<u64>,
    pub jobs: Option<usize>,
    pub shard: Option<Shard>,
    pub repeat: u64,
    pub not_applicable: NotApplicableMode,
}

pub fn run(
    paths: Vec<PathBuf>,
    selection: Selection,
    format: RunFormat,
    regressions: RegressionSet,
) -> Result<ExitCode, ScenarioError> {
    let (files, not_applicable) = load_for(&paths, selection.not_applicable)?;
    // Live engines share the machine's cores, and their timing with them.
    let jobs = if crate::live::is_live() && selection.jobs.is_none() { 1 } else { jobs_flag(selection.jobs)? };
    let plan = Plan {
        seeds: selection.seeds.or(env_u64("MADSIM_TEST_NUM")?),
        seed_start: selection.seed_start.or(env_u64("MADSIM_TEST_SEED")?),
        jobs,
        shard: selection.shard,
        repeat: selection.repeat,
        regressions,
        files,
    };
    check_seed_ranges(&plan)?;
    let total = plan.runs();
    if total == 0 {
        return Err(usage_error("nothing to run: 0 seeds selected (check `--seeds`, `MADSIM_TEST_NUM` and `--shard`)"));
    }
    let seeds_from = plan.seed_start.map_or("each file's seed_start".to_string(), |start| start.to_string());
    let not_run = match (not_applicable.len(), judged_without(&plan)) {
        (0, 0) => String::new(),
        (0, judged) => format!(" ({judged} run without a capability they need: only what it does not explain counts)"),
        (count, _) => format!(" ({count} not applicable)"),
    };
    errln!(
        "turnsim: {}{not_run}, {}, seeds from {seeds_from}, {}{}",
        report::plural(plan.files.len() as u64, "scenario"),
        report::plural(total, "run"),
        report::plural(plan.jobs as u64, "job"),
        describe(&plan)
    );
    let progress = Progress::new(total, "runs");
    let results = runner::sweep(&plan, &|_, _| progress.step());
    progress.finish();
    let summary = report::summarise(&plan.files, &results, &plan.regressions).with_not_applicable(&not_applicable);
    match format {
        RunFormat::Text => {
            output::emit(&report::text(&plan.files, &results, &plan.regressions));
            output::emit(&report::not_applicable_lines(&not_applicable));
        }
        RunFormat::Json => output::emit(&format!("{}\n", report::json(&summary))),
        RunFormat::Junit => output::emit(&report::junit(&plan.files, &results, &plan.regressions, &not_applicable)),
        RunFormat::Github => {
            output::emit(&report::github(&plan.files, &results, &plan.regressions));
            output::emit(&report::github_not_applicable(&not_applicable));
        }
    }
    if matches!(format, RunFormat::Text) {
        if plan.files.len() > 1 {
            outln!("\nfault coverage (turn phase x fault kind, over all runs):\n{}", results.coverage.render());
        }
        output::emit(&report::failing_list(&plan.files, &results, &plan.regressions));
        if runner::interrupted() {
            outln!("interrupted after {} of {}", summary.runs, report::plural(total, "run"));
        }
        outln!("{}", summary.line());
    }
    if runner::interrupted() {
        return Ok(interrupted_exit());
    }
    Ok(if summary.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// How many of the plan's scenarios run without a capability they need.
fn judged_without(plan: &Plan) -> usize {
    plan.files.iter().filter(|file| !file.judged_without.is_empty()).count()
}

fn describe(plan: &Plan) -> String {
    let mut extra = String::new();
    if let Some(shard) = plan.shard {
        extra.push_str(&format!(", shard {}/{}", shard.index, shard.count));
    }
    if plan.repeat > 1 {
        extra.push_str(&format!(", each run {} times", plan.repeat));
    }
    if crate::live::is_live() {
        extra.push_str(", live");
    }
    let regressions: Vec<&str> = plan.regressions.iter().map(Regression::name).collect();
    if !regressions.is_empty() {
        extra.push_str(&format!(", regressions: {}", regressions.join(" ")));
    }
    extra
}

/// Every seed of the sweep is a u64: the last one must not wrap around.
fn check_seed_ranges(plan: &Plan) -> Result<(), ScenarioError> {
    for file in &plan.files {
        let seeds = plan.seeds.unwrap_or(file.scenario.seeds);
        let start = plan.seed_start.unwrap_or(file.scenario.seed_start);
        if seeds > 0 && start.checked_add(seeds - 1).is_none() {
            let message = format!("{seeds} seeds from seed {start} run past the last seed, {}", u64::MAX);
            return Err(match (plan.seed_start, plan.seeds) {
                (Some(_), Some(_)) => usage_error(&format!("--seed-start and --seeds: {message}")),
                (Some(_), None) => crate::scenario::error_at(&file.path, "seeds", format!("{message} (--seed-start)")),
                (None, _) => crate::scenario::error_at(&file.path, "seed_start", message),
            });
        }
    }
    Ok(())
}

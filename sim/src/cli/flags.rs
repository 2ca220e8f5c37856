//! Flag and environment values several subcommands share, and the bad
//! input they report as exit 2: seeds from the environment, `--jobs`, and
//! the scenario files a path names.

use std::path::PathBuf;

use crate::applicable::{NotApplicable, NotApplicableMode, Split};
use crate::scenario::{load_paths, ScenarioError, ScenarioFile};

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

/// Parallel runs: 1 to [`MAX_JOBS`]; the machine's cores when not given.
pub const MAX_JOBS: usize = 256;

pub fn jobs_flag(jobs: Option<usize>) -> Result<usize, ScenarioError> {
    match jobs {
        None => Ok(default_jobs()),
        Some(jobs) if (1..=MAX_JOBS).contains(&jobs) => Ok(jobs),
        Some(jobs) => Err(usage_error(&format!("--jobs {jobs}: give 1 to {MAX_JOBS} parallel runs"))),
    }
}

/// A bad flag or environment value, reported like a bad file (exit 2).
pub fn usage_error(message: &str) -> ScenarioError {
    ScenarioError::new(std::path::Path::new("turnsim"), message)
}

/// The scenarios under `paths`; none at all is an error, not a green run.
pub fn load_some(paths: &[PathBuf]) -> Result<Vec<ScenarioFile>, ScenarioError> {
    let files = load_paths(paths)?;
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|path| path.display().to_string()).collect();
        return Err(usage_error(&format!("no scenario files (*.yaml, *.yml) in {}", shown.join(" "))));
    }
    Ok(files)
}

/// The scenarios under `paths`, split by whether they apply to the engine
/// (`crate::applicable`). None applicable is an error too: a run over
/// nothing is not a green run.
pub fn load_applicable(paths: &[PathBuf]) -> Result<Split, ScenarioError> {
    let split = crate::applicable::split(load_some(paths)?);
    if split.applicable.is_empty() {
        return Err(usage_error(&format!(
            "nothing to run: each of the {} needs a capability the engine does not declare (it declares {})",
            crate::report::plural(split.not_applicable.len() as u64, "scenario"),
            crate::applicable::engine_declares()
        )));
    }
    Ok(split)
}

/// The scenarios under `paths` that `mode` runs, and those it reports not
/// applicable; nothing to run is an error.
pub fn load_for(
    paths: &[PathBuf],
    mode: NotApplicableMode,
) -> Result<(Vec<ScenarioFile>, Vec<NotApplicable>), ScenarioError> {
    if mode == NotApplicableMode::Skip {
        return load_applicable(paths).map(|split| split.select(mode));
    }
    let (files, skipped) = crate::applicable::split(load_some(paths)?).select(mode);
    if files.is_empty() {
        return Err(usage_error("nothing to run: every scenario applies to the engine (--not-applicable only)"));
    }
    Ok((files, skipped))
}

pub fn env_u64(name: &str) -> Result<Option<u64>, ScenarioError> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map(Some).map_err(|_| {
            ScenarioError::new(std::path::Path::new(&format!("${name}")), format!("`{value}` is not a seed number"))
        }),
        Err(_) => Ok(None),
    }
}

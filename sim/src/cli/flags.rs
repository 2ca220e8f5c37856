//! Flag and environment values several subcommands share, and the bad
//! input they report as exit 2: seeds from the environment, `--jobs`, and
//! the scenario files a path names.

use std::path::PathBuf;

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

pub fn env_u64(name: &str) -> Result<Option<u64>, ScenarioError> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map(Some).map_err(|_| {
            ScenarioError::new(std::path::Path::new(&format!("${name}")), format!("`{value}` is not a seed number"))
        }),
        Err(_) => Ok(None),
    }
}

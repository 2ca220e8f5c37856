//! Helpers shared by the test modules.

use std::path::{Path, PathBuf};

use turnsim::scenario::{load_scenario, parse_scenario, ScenarioFile};

/// The workspace root (tests run from the crate directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// A committed scenario by file stem, e.g. `barrier-late-sibling`.
pub fn scenario(stem: &str) -> ScenarioFile {
    let path = workspace_root().join("scenarios").join(format!("{stem}.yaml"));
    load_scenario(&path).unwrap_or_else(|error| panic!("{error}"))
}

/// A scenario written inline in a test.
pub fn inline(yaml: &str) -> ScenarioFile {
    let path = workspace_root().join("scenarios").join("inline-test.yaml");
    parse_scenario(&path, yaml).unwrap_or_else(|error| panic!("{error}"))
}

/// Every committed scenario.
pub fn all_scenarios() -> Vec<ScenarioFile> {
    turnsim::scenario::load_paths(&[workspace_root().join("scenarios")]).unwrap_or_else(|error| panic!("{error}"))
}

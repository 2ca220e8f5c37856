//! Each committed scenario is its own test case, named by its file, so
//! `cargo test -p turnsim --test scenarios -- barrier` and
//! `cargo nextest run -E 'test(barrier)'` pick scenarios, run them in
//! parallel, and a failure names its file and prints the replay command.
//! Sixteen seeds each here; CI sweeps 1024 through the CLI.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

const SEEDS: u64 = 16;

fn main() {
    let arguments = Arguments::from_args();
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios");
    let trials: Vec<Trial> = scenario_files(&directory).into_iter().map(trial).collect();
    assert!(!trials.is_empty(), "no scenarios under {}", directory.display());
    libtest_mimic::run(&arguments, trials).exit();
}

fn scenario_files(directory: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .expect("the scenarios directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml"))
        .collect();
    files.sort();
    files
}

fn trial(path: PathBuf) -> Trial {
    let name = path.file_stem().expect("a file name").to_string_lossy().to_string();
    Trial::test(name, move || turnsim::check_scenarios(&path, Some(SEEDS)).map(|_| ()).map_err(Failed::from))
}

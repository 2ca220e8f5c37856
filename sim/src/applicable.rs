//! Which scenarios apply to the engine under test: those whose `needs` it
//! declares. The engine's declaration is learned once per invocation, from
//! the `init` reply of a run of an empty scenario (the probe), before any
//! scenario runs; a scenario's runs never depend on it (they are run or
//! not, whole), so a trace still depends on nothing but its seed.

use std::path::Path;

use turnsim_engine::RegressionSet;

use crate::capability::{Capability, Declared};
use crate::scenario::ScenarioFile;

/// A scenario not run: it needs what the engine does not declare.
#[derive(Clone, Debug)]
pub struct NotApplicable {
    pub file: ScenarioFile,
    /// The needs the engine lacks, in the vocabulary's order.
    pub missing: Vec<Capability>,
}

impl NotApplicable {
    /// `needs messenger, recovery, which the engine does not declare`.
    pub fn reason(&self) -> String {
        format!("needs {}, which the engine does not declare", crate::capability::names(&self.missing))
    }
}

/// The scenarios split by whether they apply to the engine.
#[derive(Clone, Debug)]
pub struct Split {
    pub applicable: Vec<ScenarioFile>,
    pub not_applicable: Vec<NotApplicable>,
}

/// What `run` does with a scenario that does not apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NotApplicableMode {
    /// Report it not applicable, and do not run it.
    #[default]
    Skip,
    /// Run it too, judged without what it needs: only violations the
    /// missing capabilities do not explain count (`capability::explains`).
    Run,
    /// Run only the scenarios that do not apply, judged so.
    Only,
}

impl Split {
    /// The scenarios `mode` runs (in file order), and those it reports not
    /// applicable instead.
    pub fn select(self, mode: NotApplicableMode) -> (Vec<ScenarioFile>, Vec<NotApplicable>) {
        if mode == NotApplicableMode::Skip {
            return (self.applicable, self.not_applicable);
        }
        let mut judged: Vec<ScenarioFile> = self
            .not_applicable
            .into_iter()
            .map(|skipped| ScenarioFile { judged_without: skipped.missing, ..skipped.file })
            .collect();
        if mode == NotApplicableMode::Run {
            judged.extend(self.applicable);
            judged.sort_by(|left, right| left.path.cmp(&right.path));
        }
        (judged, Vec::new())
    }
}

/// Splits `files` by what the engine declares. The engine is asked only
/// when some scenario needs anything: a suite without `needs` runs as before.
pub fn split(files: Vec<ScenarioFile>) -> Split {
    let mut split = Split { applicable: Vec::new(), not_applicable: Vec::new() };
    if files.iter().all(|file| file.scenario.needs.is_empty()) {
        split.applicable = files;
        return split;
    }
    let declared = engine_declares();
    for file in files {
        let missing = declared.missing(&file.scenario.needs);
        if missing.is_empty() {
            split.applicable.push(file);
        } else {
            split.not_applicable.push(NotApplicable { file, missing });
        }
    }
    split
}

/// What the engine of this invocation declares: the built-in engine
/// in-process has every capability; a process engine says in its `init`
/// reply. An engine whose probe broke is held to every scenario, so each
/// run reports the fault itself (an unknown capability name included).
pub fn engine_declares() -> Declared {
    let Some(command) = crate::world::engine_command() else {
        return Declared::Everything;
    };
    if let Some(declared) = crate::protocol::declared::of(&command) {
        return declared;
    }
    let record = crate::world::run(&probe(), 0, &RegressionSet::default());
    match crate::protocol::declared::of(&command) {
        Some(declared) => declared,
        None => {
            let why = record.engine_fault.map_or_else(|| "no `init` was answered".to_string(), |fault| fault.what);
            crate::errln!("turnsim: the engine's capabilities are unknown ({why}); every scenario runs");
            Declared::Everything
        }
    }
}

/// An empty scenario: the engine boots on an empty store and is idle.
fn probe() -> ScenarioFile {
    crate::scenario::parse_scenario(Path::new("<capabilities probe>"), "name: capabilities-probe\nseeds: 1\n")
        .expect("the probe scenario parses")
}

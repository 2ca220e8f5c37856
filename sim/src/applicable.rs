//! Which scenarios apply to the engine under test: those whose needs it
//! declares. A scenario's needs are its `needs`, and the core capabilities
//! what it does needs ([`implied_needs`]: a client tool, an approval, a
//! `chat()` call, a seeded store, a store fault, a resume). The engine's
//! declaration is learned once per invocation, from the `init` reply of a
//! run of an empty scenario (the probe), before any scenario runs; a
//! scenario's runs never depend on it (they are run or not, whole), so a
//! trace still depends on nothing but its seed.

use std::path::Path;

use turnsim_engine::RegressionSet;

use turnsim_engine::Chunk;

use crate::capability::{Capability, Declared};
use crate::scenario::{ActionKind, Fault, Op, ScenarioFile, Via};

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
    if files.iter().all(|file| needs(file).is_empty()) {
        split.applicable = files;
        return split;
    }
    let declared = engine_declares();
    for file in files {
        let missing = declared.missing(&needs(&file));
        if missing.is_empty() {
            split.applicable.push(file);
        } else {
            split.not_applicable.push(NotApplicable { file, missing });
        }
    }
    split
}

/// What a scenario needs: what it says (`needs`) and what it does.
pub fn needs(file: &ScenarioFile) -> Vec<Capability> {
    let mut needs = file.scenario.needs.clone();
    needs.extend(implied_needs(file));
    needs
}

/// The core capabilities a scenario needs by what it does: tools a client
/// answers (a client, human or client-approval tool; a tool the model calls
/// that the engine does not list; a scripted `tool_result`), approvals (a
/// tool that asks one; a scripted `approval`), `chat()` calls, a store
/// seeded before the first boot, store faults, resumes, recoveries
/// counted from the store's records, model calls at exact times, dynamic
/// tools, and settings set otherwise than the reference's defaults that a
/// product may fix ([`sets_engine_settings`]).
pub fn implied_needs(file: &ScenarioFile) -> Vec<Capability> {
    let scenario = &file.scenario;
    let called: std::collections::BTreeSet<&str> = file
        .calls
        .iter()
        .flatten()
        .filter_map(|op| match op {
            Op::Emit(Chunk::ToolInputStart { name, .. } | Chunk::ToolCall { name, .. }) => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let kinds: Vec<Option<turnsim_engine::ToolKind>> =
        called.iter().map(|name| scenario.engine.tools.get(*name).map(|tool| tool.kind)).collect();
    // A tool the engine does not list is a client tool.
    let client_answered = kinds.iter().any(|kind| kind.is_none_or(|kind| kind.is_client_answered()));
    let asks_approval = kinds.iter().flatten().any(|kind| kind.needs_approval());
    let acts = |wanted: fn(&ActionKind) -> bool| scenario.actions.iter().any(|action| wanted(&action.kind));
    let implied = [
        (Capability::ClientTools, client_answered || acts(|kind| matches!(kind, ActionKind::ToolResult(_)))),
        (Capability::Approvals, asks_approval || acts(|kind| matches!(kind, ActionKind::Approval(_)))),
        (Capability::Chat, acts(|kind| matches!(kind, ActionKind::UserMessage(message) if message.via == Via::Chat))),
        (Capability::StoredTranscript, !scenario.stored.is_empty()),
        (Capability::StoreFaults, scenario.faults.iter().any(|fault| matches!(fault, Fault::StoreError(_)))),
        (Capability::StreamResume, scenario.client.resume),
        (Capability::RecoveryRecords, scenario.expect.recovery.is_some()),
        (Capability::ExactTimes, scenario.expect.model_calls_at_ms.is_some()),
        (Capability::DynamicTools, scenario.engine.tools.values().any(|tool| tool.dynamic)),
        (Capability::EngineSettings, sets_engine_settings(scenario)),
    ];
    implied.into_iter().filter(|(_, implied)| *implied).map(|(capability, _)| capability).collect()
}

/// Whether the scenario sets what `engine-settings` covers otherwise than
/// the reference engine's defaults (a value equal to the default is what
/// an engine that fixes it has anyway).
fn sets_engine_settings(scenario: &crate::scenario::Scenario) -> bool {
    let (set, default) = (scenario.engine_config(), turnsim_engine::EngineConfig::default());
    set.coalesce_ms != default.coalesce_ms
        || set.recovery.enabled != default.recovery.enabled
        || set.recovery.alarm_debounce_ms != default.recovery.alarm_debounce_ms
        || set.recovery.stable_retry_delay_ms != default.recovery.stable_retry_delay_ms
        || scenario.actions.iter().any(
            |action| matches!(&action.kind, ActionKind::UserMessage(message) if message.stall_timeout_ms.is_some()),
        )
}

/// What the engine of this invocation declares: the built-in engine
/// in-process has every capability; a process engine says in its `init`
/// reply. An engine whose probe broke is held to every scenario, so each
/// run reports the fault itself (an unknown capability name included). A
/// live run lacks exact times whatever the engine says: its clock is real.
pub fn engine_declares() -> Declared {
    let declared = process_engine_declares();
    if crate::live::is_live() {
        return declared.lacking(Capability::ExactTimes);
    }
    declared
}

fn process_engine_declares() -> Declared {
    let Some(command) = crate::world::engine_command() else {
        return Declared::everything();
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
            Declared::everything()
        }
    }
}

/// An empty scenario: the engine boots on an empty store and is idle.
fn probe() -> ScenarioFile {
    crate::scenario::parse_scenario(Path::new("<capabilities probe>"), "name: capabilities-probe\nseeds: 1\n")
        .expect("the probe scenario parses")
}

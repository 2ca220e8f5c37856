//! Reading scenario files: read within bounds, prescan, parse, resolve
//! fixtures, apply scripted faults to the model scripts. Every error names
//! the file, and the line and column where the problem is written; nothing
//! that is not a valid scenario runs.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use turnsim_engine::{Chunk, FinishReason};

use super::error::ScenarioError;
use super::expect_rules::{moment_name_problem, Place};
use super::limits::{MAX_ACTIONS, MAX_CLIENTS, MAX_EVENTS, MAX_FAULTS, MAX_FILE_BYTES};
use super::model_script::{compile, Expansion, FixtureError, FixtureSteps, Op, ScriptError};
use super::prescan::{prescan, Locator};
use super::{Fault, Scenario};

/// Calls past the end of a script play [`default_reply`]; a scripted fault
/// may hit at most this many of them (script a call to fault it later).
pub const MAX_DEFAULT_CALLS_FAULTED: u32 = 16;

/// A scenario ready to run: the parsed file and its compiled model calls.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    pub path: PathBuf,
    pub scenario: Scenario,
    /// Model call n (1-based) plays `calls[n - 1]`; later calls play
    /// [`default_reply`].
    pub calls: Vec<Vec<Op>>,
    /// Capabilities the scenario needs that the engine lacks, when it runs
    /// anyway (`run --not-applicable`): its runs count only the violations
    /// these do not explain ([`crate::capability::unexplained`]). Empty for
    /// a scenario that applies.
    pub judged_without: Vec<crate::capability::Capability>,
}

/// The calls a model makes past the end of its script: a short text answer.
pub fn default_reply() -> Vec<Op> {
    vec![
        Op::Emit(Chunk::TextStart { id: "t-default".into() }),
        Op::Emit(Chunk::TextDelta { id: "t-default".into(), delta: "Done.".into() }),
        Op::Emit(Chunk::TextEnd { id: "t-default".into() }),
        Op::Finish { reason: FinishReason::Stop, output_tokens: None },
    ]
}

/// Parses scenario text; `path` names it in errors and anchors `fixtures/`.
pub fn parse_scenario(path: &Path, text: &str) -> Result<ScenarioFile, ScenarioError> {
    parse_bytes(path, text.as_bytes())
}

/// [`parse_scenario`] of raw bytes: invalid UTF-8 is a located error too.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<ScenarioFile, ScenarioError> {
    parse_located(path, bytes).map_err(|error| error.with_source(bytes))
}

fn parse_located(path: &Path, bytes: &[u8]) -> Result<ScenarioFile, ScenarioError> {
    let (text, locator) = prescan(bytes).map_err(|located| ScenarioError::prescan(path, located))?;
    let scenario: Scenario = serde_yaml::from_str(text).map_err(|error| ScenarioError::from_yaml(path, &error))?;
    validate(path, &locator, &scenario)?;
    let mut fixtures = Fixtures::new(fixtures_dir(path));
    let mut resolve = |name: &str| fixtures.get(name);
    let mut expansion = Expansion::new(&mut resolve);
    let mut calls = Vec::new();
    for (index, steps) in scenario.model.iter().enumerate() {
        let ops = compile(steps, &format!("model[{index}]"), &mut expansion).map_err(|error| match error {
            ScriptError::At { path: at, message } => ScenarioError::located(path, &locator, &at, message),
            ScriptError::Located(error) => error,
        })?;
        calls.push(ops);
    }
    check_references(path, &locator, &scenario, &calls)?;
    let scripted = calls.len();
    for (index, fault) in scenario.faults.iter().enumerate() {
        let at = format!("faults[{index}]");
        within_reach(fault, scripted).map_err(|message| ScenarioError::located(path, &locator, &at, message))?;
        apply_script_fault(fault, &mut calls)
            .map_err(|message| ScenarioError::located(path, &locator, &at, message))?;
    }
    Ok(ScenarioFile { path: path.to_path_buf(), scenario, calls, judged_without: Vec::new() })
}

/// Rules serde cannot say: checked after parsing, located through the prescan.
fn validate(path: &Path, locator: &Locator, scenario: &Scenario) -> Result<(), ScenarioError> {
    let error = |at: &str, message: String| Err(ScenarioError::located(path, locator, at, message));
    if scenario.name.trim().is_empty() {
        return error("name", "`name` must not be empty".into());
    }
    if scenario.max_events == 0 || scenario.max_events > MAX_EVENTS {
        return error("max_events", format!("`max_events` is 1 to {MAX_EVENTS} trace events per run"));
    }
    if scenario.actions.len() > MAX_ACTIONS {
        let message = format!("{} actions; a scenario has at most {MAX_ACTIONS}", scenario.actions.len());
        return error(&format!("actions[{MAX_ACTIONS}]"), message);
    }
    if scenario.faults.len() > MAX_FAULTS {
        let message = format!("{} faults; a scenario has at most {MAX_FAULTS}", scenario.faults.len());
        return error(&format!("faults[{MAX_FAULTS}]"), message);
    }
    if let Err(stored) = super::durable_state(&scenario.stored, 0) {
        return error(&stored.at, stored.message);
    }
    for (index, fault) in scenario.faults.iter().enumerate() {
        if let Fault::StoreError(store) = fault {
            if let Some(message) = store_fault_problem(store) {
                return error(&format!("faults[{index}].store_error"), message.to_string());
            }
        }
    }
    let clients = scenario.client.connections;
    if !(1..=MAX_CLIENTS).contains(&clients) {
        return error("client.connections", format!("`connections` is 1 to {MAX_CLIENTS} clients"));
    }
    for (index, action) in scenario.actions.iter().enumerate() {
        let client = match &action.kind {
            super::ActionKind::UserMessage(message) if message.via == super::Via::Connection => {
                if !scenario.client.connect {
                    let message = "a user message over the connection needs a client to send it, and this scenario \
                                   connects none (`client.connect: false`): send it `via: chat`, or connect the client";
                    return error(&format!("actions[{index}]"), message.to_string());
                }
                message.client
            }
            super::ActionKind::Disconnect(disconnect) => disconnect.client,
            super::ActionKind::ToolResult(result) => result.client,
            super::ActionKind::Approval(approval) => approval.client,
            _ => continue,
        };
        if client == 0 || client > clients {
            let message =
                format!("client {client}: the scenario connects clients 1 to {clients} (`client.connections`)");
            return error(&format!("actions[{index}]"), message);
        }
    }
    let delivers = scenario.actions.iter().any(|action| matches!(action.kind, super::ActionKind::Deliver(_)));
    let post_fault = scenario.faults.iter().enumerate().find_map(|(index, fault)| match fault {
        super::Fault::PostFails(_) => Some((index, "`post_fails` refuses")),
        super::Fault::PostSlow(_) => Some((index, "`post_slow` slows")),
        _ => None,
    });
    if let (Some((index, does)), false) = (post_fault, delivers) {
        let message = format!("{does} messenger posts, but no action delivers a messenger message (`deliver`)");
        return error(&format!("faults[{index}]"), message);
    }
    if !scenario.caller.is_clean() && !calls_chat(scenario) {
        let message = "the caller's link has faults, but no action calls chat() (`user_message` with `via: chat`)";
        return error("caller.link", message.to_string());
    }
    if let Some(check) = &scenario.expect.expect_failure {
        if !crate::check::is_check_name(check) {
            let known = crate::check::check_names().join(", ");
            return error("expect.expect_failure", format!("`{check}` is not a check; the checks are: {known}"));
        }
    }
    Ok(())
}

/// Names a scenario mentions must exist: tool call ids some model script
/// emits, and event names some timeline event carries. A typo here would
/// otherwise be a trigger that never fires or an expectation that never
/// matches.
fn check_references(
    path: &Path,
    locator: &Locator,
    scenario: &Scenario,
    calls: &[Vec<Op>],
) -> Result<(), ScenarioError> {
    let mut emitted = emitted_tool_ids(calls);
    emitted.extend(stored_tool_ids(&scenario.stored));
    let error = |at: &str, message: String| Err(ScenarioError::located(path, locator, at, message));
    let tool_known = |id: &str| emitted.contains(&id);
    let chat_caller = calls_chat(scenario);
    let in_triggers = Place { what: "triggers", stored: true, chat_caller };
    let in_timings = Place { what: "timings", stored: false, chat_caller };
    for (index, trigger) in triggers(scenario) {
        if let Some(id) = trigger.tool.as_deref().filter(|id| !tool_known(id)) {
            return error(
                &format!("{index}.when.tool"),
                format!("no model script or stored message has a tool call `{id}`"),
            );
        }
        if let Some(message) = trigger.event.as_deref().and_then(|name| moment_name_problem(name, &in_triggers)) {
            return error(&format!("{index}.when.event"), message);
        }
        if let Some(after) = &trigger.after {
            if let Some(message) = moment_name_problem(&after.event, &in_triggers) {
                return error(&format!("{index}.when.after.event"), message);
            }
            if after.nth == 0 {
                return error(&format!("{index}.when.after.nth"), "`nth` counts occurrences from 1".to_string());
            }
        }
    }
    if let Some(id) = scenario.expect.tools.keys().find(|id| !tool_known(id)) {
        return error(
            &format!("expect.tools.{id}"),
            format!("no model script or stored message has a tool call `{id}`"),
        );
    }
    for (index, timing) in scenario.expect.timing.iter().enumerate() {
        let names = [Some(&timing.event), timing.after.as_ref().map(|after| &after.event)];
        if let Some(message) = names.into_iter().flatten().find_map(|name| moment_name_problem(name, &in_timings)) {
            return error(&format!("expect.timing[{index}]"), message);
        }
        if let Some(message) = timing_problem(timing, scenario.horizon_ms) {
            return error(&format!("expect.timing[{index}]"), message);
        }
    }
    let clients = scenario.client.connections;
    if let Some((at, message)) = super::expect_rules::check(&scenario.expect, clients, scenario.horizon_ms, &tool_known)
    {
        return error(&at, message);
    }
    for (index, snapshot) in scenario.expect.snapshots.iter().enumerate() {
        let counts =
            [&snapshot.continuations, &snapshot.model_calls, &snapshot.messenger_posts, &snapshot.terminal_callbacks];
        if counts.iter().all(|count| count.is_none()) {
            let message = "a snapshot with nothing to check: give `continuations`, `model_calls`, `messenger_posts` \
                           or `terminal_callbacks`";
            return error(&format!("expect.snapshots[{index}]"), message.to_string());
        }
    }
    Ok(())
}

/// A timing expectation that could never hold (one with no bound still
/// checks that the event happens).
/// Whether some action calls `chat()` (a `user_message` with `via: chat`).
fn calls_chat(scenario: &Scenario) -> bool {
    scenario.actions.iter().any(
        |action| matches!(&action.kind, super::ActionKind::UserMessage(message) if message.via == super::Via::Chat),
    )
}

fn timing_problem(timing: &super::Timing, horizon_ms: u64) -> Option<String> {
    let after_nth = timing.after.as_ref().map_or(1, |after| after.nth);
    if timing.nth == 0 || after_nth == 0 {
        return Some("`nth` counts occurrences from 1".to_string());
    }
    match (timing.no_earlier_than_ms, timing.no_later_than_ms) {
        (Some(earliest), Some(latest)) if earliest > latest => {
            Some(format!("no_earlier_than_ms ({earliest}) is after no_later_than_ms ({latest}): no time is both"))
        }
        (Some(earliest), _) if earliest > horizon_ms => Some(format!(
            "no_earlier_than_ms ({earliest}) is past the run's horizon ({horizon_ms} ms): it can never hold"
        )),
        _ => None,
    }
}

/// What is wrong with a store fault's choice of commit, if anything: it
/// names one by number or by what it would store, and a commit is judged
/// by its writes alone (no event, no delay: the store answers at once).
fn store_fault_problem(fault: &super::StoreFault) -> Option<&'static str> {
    let Some(when) = &fault.when else {
        return fault.commit.is_none().then_some("give `commit` (a number) or `when` (what the commit would store)");
    };
    if fault.commit.is_some() {
        return Some("give `commit` or `when`, not both");
    }
    if when.event.is_some() || when.after.is_some() {
        return Some(
            "`when` names a commit by what it would write (`stored`, `removed`, or `tool` with `state`), not by an event",
        );
    }
    if when.stored.is_some() && when.removed.is_some() {
        return Some("a trigger names one write: give `stored` or `removed`, not both");
    }
    if when.delay_ms != super::RangeMs::default() {
        return Some("a refused commit is refused as it is made: `when` takes no `delay_ms`");
    }
    if when.stored.is_none() && when.removed.is_none() && (when.tool.is_none() || when.state.is_none()) {
        return Some("`when` needs `stored`, `removed`, or `tool` with `state`");
    }
    None
}

/// Every trigger with the YAML path of what holds it.
fn triggers(scenario: &Scenario) -> Vec<(String, &super::Trigger)> {
    let actions = scenario.actions.iter().enumerate().filter_map(|(index, action)| match &action.when {
        super::When::Trigger(trigger) => Some((format!("actions[{index}]"), trigger)),
        super::When::AtMs(_) => None,
    });
    let faults = scenario.faults.iter().enumerate().filter_map(|(index, fault)| match fault {
        Fault::Evict(super::EvictFault { when: super::When::Trigger(trigger), .. }) => {
            Some((format!("faults[{index}].evict"), trigger))
        }
        Fault::StoreError(super::StoreFault { when: Some(trigger), .. }) => {
            Some((format!("faults[{index}].store_error"), trigger))
        }
        _ => None,
    });
    actions.chain(faults).collect()
}

fn stored_tool_ids(stored: &super::Stored) -> impl Iterator<Item = &str> {
    stored
        .messages
        .iter()
        .flat_map(|message| match message {
            super::StoredMessage::Assistant(parts) => parts.as_slice(),
            super::StoredMessage::User(_) => &[],
        })
        .filter_map(|part| match part {
            super::StoredPart::Tool(tool) => Some(tool.id.as_str()),
            _ => None,
        })
}

fn emitted_tool_ids(calls: &[Vec<Op>]) -> Vec<&str> {
    calls
        .iter()
        .flatten()
        .filter_map(|op| match op {
            Op::Emit(Chunk::ToolInputStart { id, .. } | Chunk::ToolCall { id, .. }) => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// A scripted fault hits a scripted call or one of the first default replies.
fn within_reach(fault: &Fault, scripted: usize) -> Result<(), String> {
    let Some(call) = fault.model_call() else { return Ok(()) };
    let reach = scripted as u64 + u64::from(MAX_DEFAULT_CALLS_FAULTED);
    if u64::from(call) > reach {
        return Err(format!(
            "the fault aims at model call {call}, but the script has {scripted} calls; a fault may hit a scripted \
             call or one of the {MAX_DEFAULT_CALLS_FAULTED} default replies after them (script the call to fault it)"
        ));
    }
    Ok(())
}

/// Reads a scenario file: a regular file, within the size bound.
/// An error about the value at `yaml_path` (e.g. `seed_start`) of a file
/// that loaded, found later (with a flag's value): located as a load error
/// would be, or, if the file cannot be read again, named by its path.
pub fn error_at(path: &Path, yaml_path: &str, message: impl Into<String>) -> ScenarioError {
    let message = message.into();
    match read_located(path) {
        Some((bytes, locator)) => ScenarioError::located(path, &locator, yaml_path, message).with_source(&bytes),
        None => ScenarioError::new(path, message),
    }
}

/// Where each node of a file that loaded stands, read again (`None` if it
/// cannot be): for places named after the run, such as a fault's.
pub fn locator_of(path: &Path) -> Option<Locator> {
    read_located(path).map(|(_, locator)| locator)
}

fn read_located(path: &Path) -> Option<(Vec<u8>, Locator)> {
    let bytes = read_bounded(path).ok()?;
    let (_, locator) = prescan(&bytes).ok()?;
    Some((bytes, locator))
}

pub fn load_scenario(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let bytes = read_bounded(path).map_err(|message| ScenarioError::at(path, message))?;
    parse_bytes(path, &bytes)
}

/// Only a regular file is read (not a FIFO, device, socket or directory),
/// and never more than [`MAX_FILE_BYTES`] of it.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let metadata = std::fs::metadata(path).map_err(|error| format!("cannot read: {error}"))?;
    if !metadata.is_file() {
        return Err(format!("not a scenario file: it is {}", file_kind(&metadata)));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_large(metadata.len()));
    }
    let file = std::fs::File::open(path).map_err(|error| format!("cannot read: {error}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|error| format!("cannot read: {error}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn too_large(bytes: u64) -> String {
    format!("the file is {bytes} bytes; a scenario or fixture file is at most {MAX_FILE_BYTES} bytes")
}

fn file_kind(metadata: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Files and directories (their `*.yaml`/`*.yml`, sorted by name).
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<ScenarioFile>, ScenarioError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            files.extend(yaml_files(path)?);
        } else {
            files.push(path.clone());
        }
    }
    files.iter().map(|path| load_scenario(path)).collect()
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    let entries = std::fs::read_dir(dir).map_err(|error| ScenarioError::at(dir, format!("cannot list: {error}")))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// `fixtures/` beside the scenario's directory (scenarios/x.yaml → fixtures/).
fn fixtures_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new("."));
    let beside = parent.join("fixtures");
    if beside.is_dir() {
        return beside;
    }
    parent.parent().unwrap_or(Path::new(".")).join("fixtures")
}

/// Fixture files of one scenario, each read once; names resolve only inside
/// the fixtures folder.
struct Fixtures {
    dir: PathBuf,
    loaded: BTreeMap<String, Rc<FixtureSteps>>,
}

impl Fixtures {
    fn new(dir: PathBuf) -> Self {
        Self { dir, loaded: BTreeMap::new() }
    }

    /// A bad name or an unreadable file is reported where the fixture is
    /// included; a problem inside the file, at its line in that file.
    fn get(&mut self, name: &str) -> Result<Rc<FixtureSteps>, FixtureError> {
        if let Some(fixture) = self.loaded.get(name) {
            return Ok(Rc::clone(fixture));
        }
        let path = self.resolve(name).map_err(FixtureError::Name)?;
        let bytes = read_bounded(&path)
            .map_err(|message| FixtureError::Name(format!("fixture `{name}` ({}): {message}", path.display())))?;
        let fixture = Rc::new(parse_fixture(&path, &bytes).map_err(FixtureError::File)?);
        self.loaded.insert(name.to_string(), Rc::clone(&fixture));
        Ok(fixture)
    }

    /// `name` → `<dir>/name.yaml`, refusing anything that leaves the folder.
    fn resolve(&self, name: &str) -> Result<PathBuf, String> {
        let plain = |segment: &str| {
            !segment.is_empty()
                && !segment.starts_with('.')
                && segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if !name.split('/').all(plain) {
            return Err(format!(
                "fixture `{name}`: a fixture is named by its path inside the fixtures folder, without `..`, \
                 a leading `/` or the `.yaml` suffix (letters, digits, `-`, `_`, `.` and `/`)"
            ));
        }
        let path = self.dir.join(format!("{name}.yaml"));
        let (Ok(inside), Ok(dir)) = (path.canonicalize(), self.dir.canonicalize()) else {
            return Err(format!("fixture `{name}` ({}): no such file", path.display()));
        };
        if !inside.starts_with(&dir) {
            return Err(format!("fixture `{name}` ({}) links outside the fixtures folder", path.display()));
        }
        Ok(path)
    }
}

fn parse_fixture(path: &Path, bytes: &[u8]) -> Result<FixtureSteps, ScenarioError> {
    let (text, locator) = prescan(bytes).map_err(|located| ScenarioError::prescan(path, located).with_source(bytes))?;
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let steps = serde_yaml::with::singleton_map_recursive::deserialize(deserializer)
        .map_err(|error| ScenarioError::from_yaml(path, &error).with_source(bytes))?;
    Ok(FixtureSteps { path: path.to_path_buf(), steps, locator, text: text.to_string() })
}

/// Stall, cut, truncate and HTTP faults rewrite the script of their call.
pub(crate) fn apply_script_fault(fault: &Fault, calls: &mut Vec<Vec<Op>>) -> Result<(), String> {
    let (call, after_chunk, op) = match fault {
        Fault::Stall(point) => (point.call, point.after_chunk, Op::Park),
        Fault::Cut(point) => (point.call, point.after_chunk, Op::Cut),
        Fault::Truncate(point) => {
            (point.call, point.after_chunk, Op::Finish { reason: FinishReason::Unknown, output_tokens: Some(0) })
        }
        Fault::HttpError(http) => {
            (http.call, http.after_chunk, Op::Http { status: http.status, message: "injected".into() })
        }
        // Not a fault of a model call (`Fault::model_call`).
        _ => return Ok(()),
    };
    if call == 0 {
        return Err("fault `call` counts from 1".into());
    }
    while calls.len() < call as usize {
        calls.push(default_reply());
    }
    let ops = &mut calls[call as usize - 1];
    let mut chunks = 0;
    let mut at = 0;
    while chunks < after_chunk && at < ops.len() {
        if ops[at].is_chunk() {
            chunks += 1;
        }
        at += 1;
    }
    if chunks < after_chunk {
        return Err(format!("model call {call} has only {chunks} chunks; cannot inject after chunk {after_chunk}"));
    }
    ops.truncate(at);
    ops.push(op);
    Ok(())
}

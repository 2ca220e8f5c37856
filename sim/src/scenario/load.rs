//! Reading scenario files: parse, resolve fixtures, apply scripted faults to
//! the model scripts. Every error names the file and, where the YAML has one,
//! the line and column.

use std::fmt;
use std::path::{Path, PathBuf};

use turnsim_engine::{Chunk, FinishReason};

use super::model_script::{compile, Op, Step};
use super::{Fault, Scenario};

/// A scenario ready to run: the parsed file and its compiled model calls.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    pub path: PathBuf,
    pub scenario: Scenario,
    /// Model call n (1-based) plays `calls[n - 1]`; later calls play
    /// [`default_reply`].
    pub calls: Vec<Vec<Op>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.path.display())?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(formatter, ":{line}:{column}")?;
        }
        write!(formatter, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    fn at(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), line: None, column: None, message: message.into() }
    }

    fn from_yaml(path: &Path, error: &serde_yaml::Error) -> Self {
        let location = error.location();
        let message = strip_location(&error.to_string());
        Self {
            path: path.to_path_buf(),
            line: location.as_ref().map(|l| l.line()),
            column: location.map(|l| l.column()),
            message,
        }
    }
}

/// serde_yaml appends " at line L column C"; we print the location up front.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
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
    let scenario: Scenario = serde_yaml::from_str(text).map_err(|error| ScenarioError::from_yaml(path, &error))?;
    if scenario.name.trim().is_empty() {
        return Err(ScenarioError::at(path, "`name` must not be empty"));
    }
    let fixtures_dir = fixtures_dir(path);
    let mut fixture = |name: &str| load_fixture(&fixtures_dir, name);
    let mut calls = Vec::new();
    for (index, steps) in scenario.model.iter().enumerate() {
        let ops = compile(steps, &mut fixture)
            .map_err(|message| ScenarioError::at(path, format!("model call {}: {message}", index + 1)))?;
        calls.push(ops);
    }
    for (index, fault) in scenario.faults.iter().enumerate() {
        apply_script_fault(fault, &mut calls)
            .map_err(|message| ScenarioError::at(path, format!("faults[{index}]: {message}")))?;
    }
    Ok(ScenarioFile { path: path.to_path_buf(), scenario, calls })
}

pub fn load_scenario(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let text =
        std::fs::read_to_string(path).map_err(|error| ScenarioError::at(path, format!("cannot read: {error}")))?;
    parse_scenario(path, &text)
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

fn load_fixture(dir: &Path, name: &str) -> Result<Vec<Step>, String> {
    let path = dir.join(format!("{name}.yaml"));
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("fixture `{name}` ({}): {error}", path.display()))?;
    let deserializer = serde_yaml::Deserializer::from_str(&text);
    serde_yaml::with::singleton_map_recursive::deserialize(deserializer)
        .map_err(|error| format!("fixture {}: {error}", path.display()))
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
        Fault::Evict(_) | Fault::Random(_) => return Ok(()),
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

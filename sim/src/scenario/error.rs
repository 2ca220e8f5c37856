//! The error a scenario file gets: its path, line and column, a message in
//! plain words, the source line with a caret under the column, and a hint
//! where one helps (the nearest known name for a misspelled key or variant).

use std::fmt;
use std::path::{Path, PathBuf};

use super::prescan::{Located, Locator};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// The source line the error points at, shown under it with a caret.
    pub source_line: Option<String>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.path.display())?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(formatter, ":{line}:{column}")?;
        }
        write!(formatter, ": {}", self.message)?;
        if let (Some(line), Some(column), Some(source)) = (self.line, self.column, &self.source_line) {
            let gutter = " ".repeat(line.to_string().len());
            let caret = " ".repeat(column.saturating_sub(1));
            write!(formatter, "\n{gutter} |\n{line} | {source}\n{gutter} | {caret}^")?;
        }
        if let Some(hint) = hint(&self.message) {
            write!(formatter, "\n{} = hint: {hint}", " ".repeat(self.line.map_or(1, |line| line.to_string().len())))?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    /// An error about the file as a whole (or a flag), with no location.
    pub fn new(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), line: None, column: None, message: message.into(), source_line: None }
    }

    pub(crate) fn at(path: &Path, message: impl Into<String>) -> Self {
        Self::new(path, message)
    }

    /// Keeps the line of `bytes` the error points at, for the caret display.
    pub(crate) fn with_source(mut self, bytes: &[u8]) -> Self {
        if let (Some(line), None) = (self.line, &self.source_line) {
            let text = String::from_utf8_lossy(bytes);
            self.source_line = text.lines().nth(line.saturating_sub(1)).map(|source| source.replace('\0', "\\0"));
        }
        self
    }

    /// At the node `yaml_path` of the file (or its nearest ancestor).
    pub(crate) fn located(path: &Path, locator: &Locator, yaml_path: &str, message: impl Into<String>) -> Self {
        let location = locator.find(yaml_path);
        Self {
            path: path.to_path_buf(),
            line: location.map(|(line, _)| line),
            column: location.map(|(_, column)| column),
            message: message.into(),
            source_line: None,
        }
    }

    pub(crate) fn prescan(path: &Path, located: Located) -> Self {
        Self {
            path: path.to_path_buf(),
            line: Some(located.line),
            column: Some(located.column),
            message: located.message,
            source_line: None,
        }
    }

    pub(crate) fn from_yaml(path: &Path, error: &serde_yaml::Error) -> Self {
        let location = error.location();
        let message = strip_location(&error.to_string());
        Self {
            path: path.to_path_buf(),
            line: location.as_ref().map(|l| l.line()),
            column: location.map(|l| l.column()),
            message,
            source_line: None,
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

/// For `unknown field `x`, expected one of `a`, `b``: the known name
/// nearest to `x`, if one is near.
fn hint(message: &str) -> Option<String> {
    let unknown = message.split("unknown field `").nth(1).or_else(|| message.split("unknown variant `").nth(1))?;
    let written = unknown.split('`').next()?;
    let known = message.split("expected one of ").nth(1).or_else(|| message.split("expected ").nth(1))?;
    let nearest = known
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| (edit_distance(written, name), name))
        .min()
        .filter(|(distance, name)| *distance <= (name.len().max(written.len()) / 2).max(1))?;
    Some(format!("did you mean `{}`?", nearest.1))
}

/// Levenshtein distance, for hints only.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, b_char) in b.iter().enumerate() {
            let substitute = previous + usize::from(a_char != *b_char);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

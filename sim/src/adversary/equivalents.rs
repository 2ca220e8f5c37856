//! Pairs argued equivalent: an (operator, scenario) pair whose rewrite no
//! consumer can tell from the correct engine's behaviour, each with the
//! argument. A survivor listed here does not fail the adversary's exit
//! code; it is still shown, marked, in the matrix.
//!
//! Beside them, the oracle's known gaps: survivors some consumer can tell,
//! whose check is not written yet, each saying what it needs. A known gap
//! does not fail the exit code either (so the gate still holds every other
//! pair), and it is reported as a survivor of its property, never as
//! caught or equivalent.
//!
//! ```yaml
//! equivalents:
//!   - operator: duplicate-frame
//!     scenario: scenarios/some-scenario.yaml
//!     why: the chunk duplicated is ...
//! gaps:
//!   - operator: done-as-error
//!     scenario: scenarios/some-scenario.yaml
//!     why: what the check would have to read to see it
//! ```

use std::path::Path;

use serde::Deserialize;

use super::Operator;
use crate::scenario::ScenarioError;

#[derive(Clone, Debug, Default)]
pub struct Equivalents {
    pub pairs: Vec<Equivalent>,
    /// Known gaps of the oracle, in the same shape.
    pub gaps: Vec<Equivalent>,
}

#[derive(Clone, Debug)]
pub struct Equivalent {
    pub operator: Operator,
    /// The scenario file, as a path its file's path ends with.
    pub scenario: String,
    pub why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    equivalents: Vec<Entry>,
    #[serde(default)]
    gaps: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    operator: String,
    scenario: String,
    why: String,
}

impl Equivalents {
    /// Reads the file at `path`; an unknown operator or an empty argument
    /// is an error.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::new(path, error.to_string()))?;
        let file: File = serde_yaml::from_str(&text).map_err(|error| ScenarioError::new(path, error.to_string()))?;
        let pairs = file.equivalents.into_iter().map(|entry| entry.check(path)).collect::<Result<_, _>>()?;
        let gaps = file.gaps.into_iter().map(|entry| entry.check(path)).collect::<Result<_, _>>()?;
        Ok(Self { pairs, gaps })
    }

    /// The argument that `operator` on `scenario` changes nothing a consumer can tell.
    pub fn why(&self, operator: Operator, scenario: &Path) -> Option<&str> {
        find(&self.pairs, operator, scenario)
    }

    /// What the check that would catch `operator` on `scenario` needs, when
    /// it is a known gap.
    pub fn gap(&self, operator: Operator, scenario: &Path) -> Option<&str> {
        find(&self.gaps, operator, scenario)
    }
}

fn find<'a>(pairs: &'a [Equivalent], operator: Operator, scenario: &Path) -> Option<&'a str> {
    pairs
        .iter()
        .find(|pair| pair.operator == operator && scenario.ends_with(&pair.scenario))
        .map(|pair| pair.why.as_str())
}

impl Entry {
    fn check(self, path: &Path) -> Result<Equivalent, ScenarioError> {
        let operator = self.operator.parse::<Operator>().map_err(|error| ScenarioError::new(path, error))?;
        if self.why.trim().is_empty() {
            let message = format!("{} on {}: `why` is empty: say why", self.operator, self.scenario);
            return Err(ScenarioError::new(path, message));
        }
        Ok(Equivalent { operator, scenario: self.scenario, why: self.why })
    }
}

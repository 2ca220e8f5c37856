//! `turnsim list`: the scenarios, invariants, regressions, fault kinds or
//! mutation operators the harness knows, one a line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use turnsim_engine::ALL_REGRESSIONS;

use super::flags::load_some;
use crate::check::invariants::{DETERMINISM_RULE, INVARIANTS};
use crate::outln;
use crate::scenario::ScenarioError;

#[derive(Clone, Copy, ValueEnum)]
pub enum ListWhat {
    Scenarios,
    Invariants,
    Regressions,
    Faults,
    /// The adversary's mutation operators.
    Operators,
}

/// Fault kinds a scenario can script (`faults:` and `actions:`).
const FAULT_KINDS: [(&str, &str); 8] = [
    ("stall", "the model stream parks after chunk k of call n (the watchdog's case)"),
    ("cut", "the provider connection drops after chunk k of call n"),
    ("truncate", "the provider ends the step after chunk k: finish-step unknown, 0 tokens"),
    ("http_error", "call n answers an HTTP status (429 and 5xx are retried)"),
    ("evict", "the engine process is killed at a time or trigger and restarted later"),
    ("disconnect", "the client drops its connection and reconnects later"),
    ("park", "a model step that never resolves, written in the script itself"),
    ("random", "per seed: each kind above happens with a probability, at a point the seed picks"),
];

pub fn list(what: ListWhat, paths: &[PathBuf]) -> Result<ExitCode, ScenarioError> {
    match what {
        ListWhat::Regressions => {
            for regression in ALL_REGRESSIONS {
                outln!("{:<30} {}", regression.name(), regression.symptom());
            }
        }
        ListWhat::Invariants => {
            for invariant in &INVARIANTS {
                outln!("{:<24} {}", invariant.name, invariant.rule);
            }
            outln!("{:<24} {}", DETERMINISM_RULE.0, DETERMINISM_RULE.1);
        }
        ListWhat::Operators => {
            for operator in crate::adversary::ALL_OPERATORS {
                outln!("{:<28} {}", operator.name(), operator.wrong());
            }
        }
        ListWhat::Faults => {
            for (name, what) in FAULT_KINDS {
                outln!("{name:<12} {what}");
            }
        }
        ListWhat::Scenarios => {
            for file in load_some(paths)? {
                outln!("{:<48} {} seeds  {}", file.path.display(), file.scenario.seeds, file.scenario.name);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

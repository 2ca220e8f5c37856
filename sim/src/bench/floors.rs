//! `turnsim bench --check`: the figures a run of `bench` must reach, read
//! from a committed file that names the machine they were measured on.
//! Floors bound the rates from below, ceilings the growth figures from
//! above; every figure is named as `bench --format json` names it, and a
//! name the report does not have is an error (a typo must not pass).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::BenchReport;
use crate::scenario::ScenarioError;

/// The committed floors, next to the benchmark scenarios' crate.
pub const DEFAULT_FLOORS: &str = "sim/bench-floors.yaml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Floors {
    /// The machine the figures were measured on: a floor holds there.
    pub machine: String,
    /// The lowest acceptable value of each figure.
    #[serde(default)]
    pub floors: BTreeMap<String, f64>,
    /// The highest acceptable value of each figure.
    #[serde(default)]
    pub ceilings: BTreeMap<String, f64>,
}

/// Reads a file of bounds; every figure it names must be one `bench`
/// reports (checked now, before a minute of measuring).
pub fn load(path: &Path) -> Result<Floors, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::new(path, error.to_string()))?;
    let floors: Floors = serde_yaml::from_str(&text).map_err(|error| ScenarioError::new(path, error.to_string()))?;
    let every_figure = BenchReport {
        engine_cmd_runs_per_sec: Some(0.0),
        cloudflare_runs_per_sec: Some(0.0),
        cloudflare_no_eviction_runs_per_sec: Some(0.0),
        ..BenchReport::default()
    };
    breaches(&every_figure, &floors).map_err(|error| ScenarioError::new(path, error))?;
    Ok(floors)
}

/// Every figure of `report` past its bound, in words; `Err` when the file
/// names a figure the report does not have.
pub fn breaches(report: &BenchReport, floors: &Floors) -> Result<Vec<String>, String> {
    let figures = serde_json::to_value(report).expect("a report serialises");
    let figure = |name: &str| {
        figures.get(name).and_then(serde_json::Value::as_f64).ok_or_else(|| format!("bench reports no figure `{name}`"))
    };
    let mut breaches = Vec::new();
    for (name, floor) in &floors.floors {
        let value = figure(name)?;
        if value < *floor {
            breaches.push(format!("{name} {value:.2} is below its floor {floor}"));
        }
    }
    for (name, ceiling) in &floors.ceilings {
        let value = figure(name)?;
        if value > *ceiling {
            breaches.push(format!("{name} {value:.2} is above its ceiling {ceiling}"));
        }
    }
    Ok(breaches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(runs_per_sec: f64, step_growth: f64) -> BenchReport {
        BenchReport {
            runs_per_sec,
            suite_runs_per_sec: 1.0,
            jobs2_speedup: 1.0,
            sim_seconds_per_wall_second: 1.0,
            explore_cases_per_sec: 1.0,
            step_growth,
            batch_growth: 1.0,
            protocol_runs_per_sec: 1.0,
            engine_cmd_runs_per_sec: None,
            cloudflare_runs_per_sec: None,
            cloudflare_no_eviction_runs_per_sec: None,
            cloudflare_skipped: None,
            suite_runs: 1,
            rounds: 1,
        }
    }

    fn floors(text: &str) -> Floors {
        serde_yaml::from_str(text).expect("floors parse")
    }

    #[test]
    fn a_figure_past_its_bound_is_a_breach_and_an_unknown_one_an_error() {
        let bounds = floors("machine: test\nfloors: { runs_per_sec: 100 }\nceilings: { step_growth: 1.5 }\n");
        assert!(breaches(&report(150.0, 1.2), &bounds).expect("known figures").is_empty());
        let slow = breaches(&report(90.0, 1.2), &bounds).expect("known figures");
        assert_eq!(slow, vec!["runs_per_sec 90.00 is below its floor 100".to_string()]);
        let grown = breaches(&report(150.0, 5.0), &bounds).expect("known figures");
        assert_eq!(grown, vec!["step_growth 5.00 is above its ceiling 1.5".to_string()]);
        let typo = floors("machine: test\nfloors: { runs_per_second: 100 }\n");
        assert_eq!(breaches(&report(150.0, 1.2), &typo), Err("bench reports no figure `runs_per_second`".into()));
    }

    #[test]
    fn the_committed_floors_name_only_figures_bench_reports() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-floors.yaml");
        let committed = load(&path).expect("the committed floors load");
        assert!(!committed.machine.is_empty());
        breaches(&report(0.0, 0.0), &committed).expect("every named figure exists");
    }
}

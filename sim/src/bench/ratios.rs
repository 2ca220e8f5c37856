//! `turnsim bench --check`: the ratios a run measures on itself, held
//! against the bounds in one committed file. Absolute rates differ 2-3x
//! between machines of the same kind; a ratio of two figures measured in
//! the same process, in alternating rounds, does not. The targets
//! sit beside the bounds in the same file: printed, not asserted.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{breakdown, measure_floor, median, node_command, node_floor, seeded_rate, unjudged_rate};
use super::{
    AI_SDK_ENGINE, CLOUDFLARE_ENGINE, NODE_FLOOR_ENGINE, NODE_FLOOR_SEEDS, NO_EVICTION_SCENARIO, ROUND_TIME,
    STANDARD_SCENARIO,
};
use crate::runner;
use crate::scenario::{load_scenario, ScenarioError, ScenarioFile};
use turnsim_engine::RegressionSet;

/// The committed bounds, from the repository root.
pub const DEFAULT_BOUNDS: &str = "sim/bench-ratios.yaml";
/// Rounds of each alternating pair (fewer than `bench`'s: CI runs this).
const ROUNDS: usize = 3;

/// Each ratio, named as the bounds file names it. A Node figure is `None`
/// where Node or the adapters' packages are missing.
#[derive(Debug, Default, Serialize)]
pub struct Ratios {
    /// A standard run's CPU time over the floor's (`bare`).
    pub floor_ratio: f64,
    /// The checks' share of a standard run's CPU time: all but the
    /// simulation (`breakdown::checks_share`).
    pub checks_share: f64,
    /// The standard scenario over the protocol (`turnsim engine`) over
    /// in-process, runs per second, in alternating rounds.
    pub protocol_ratio: f64,
    /// The Cloudflare engine on the standard scenario over the Node floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloudflare_node_fraction: Option<f64>,
    /// The AI SDK engine on `barrier-late-sibling` over the Node floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ai_sdk_no_eviction_node_fraction: Option<f64>,
    /// Why the Node fractions are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_skipped: Option<String>,
}

/// Measures every ratio on the scenarios in `scenarios_dir`.
pub fn measure(scenarios_dir: &Path) -> Result<Ratios, ScenarioError> {
    let standard = load_scenario(&scenarios_dir.join(STANDARD_SCENARIO))?;
    let no_eviction = load_scenario(&scenarios_dir.join(NO_EVICTION_SCENARIO))?;
    let floor_ratio = measure_floor(&standard, ROUNDS).ratio;
    let checks_share = breakdown::checks_share(&standard);
    let served = super::served_engine().map_err(|error| ScenarioError::new(Path::new("turnsim"), error.to_string()))?;
    let protocol_ratio = median(ROUNDS, || {
        let in_process = seeded_rate(&standard).0;
        over_protocol(&served, &standard, true) / in_process
    });
    let node = |engine: &str| node_command(scenarios_dir, engine);
    let (cloudflare_node_fraction, ai_sdk_no_eviction_node_fraction, node_skipped) =
        match (node(NODE_FLOOR_ENGINE), node(CLOUDFLARE_ENGINE), node(AI_SDK_ENGINE)) {
            (Ok(floor), Ok(cloudflare), Ok(ai_sdk)) => {
                let fractions = node_fraction(&cloudflare, &floor, &standard, true)
                    .and_then(|cloudflare| Ok((cloudflare, node_fraction(&ai_sdk, &floor, &no_eviction, false)?)));
                match fractions {
                    Ok((cloudflare, ai_sdk)) => (Some(cloudflare), Some(ai_sdk), None),
                    Err(why) => (None, None, Some(why)),
                }
            }
            (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => (None, None, Some(why)),
        };
    Ok(Ratios {
        floor_ratio,
        checks_share,
        protocol_ratio,
        cloudflare_node_fraction,
        ai_sdk_no_eviction_node_fraction,
        node_skipped,
    })
}

/// An engine's rate over the Node floor's fed the same lines, in
/// alternating rounds.
fn node_fraction(engine: &str, floor: &str, file: &ScenarioFile, judged: bool) -> Result<f64, String> {
    let runs = node_floor::inputs(engine, file, NODE_FLOOR_SEEDS);
    let mut fractions = Vec::new();
    for _ in 0..ROUNDS {
        let rate = over_protocol(engine, file, judged);
        fractions.push(rate / node_floor::rate(floor, &runs, ROUND_TIME)?);
    }
    fractions.sort_by(f64::total_cmp);
    Ok(fractions[fractions.len() / 2])
}

/// Runs per second of `file` against the engine `command` starts: one run
/// first (the process starts and loads once per invocation), then a round.
fn over_protocol(command: &str, file: &ScenarioFile, judged: bool) -> f64 {
    crate::world::use_engine_command(Some(command.to_string()));
    let _ = runner::run_one(file, 0, &RegressionSet::default());
    let rate = match judged {
        true => seeded_rate(file).0,
        false => unjudged_rate(file),
    };
    crate::world::use_engine_command(None);
    crate::protocol::proxy::stop_waiting_processes();
    rate
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    /// What the bounds were set from, in words.
    pub measured: String,
    /// The lowest acceptable value of each ratio.
    #[serde(default)]
    pub floors: BTreeMap<String, f64>,
    /// The highest acceptable value of each ratio.
    #[serde(default)]
    pub ceilings: BTreeMap<String, f64>,
    /// Where each ratio should get to: reported beside it, not asserted.
    #[serde(default)]
    pub targets: BTreeMap<String, String>,
}

/// Reads a file of bounds; every ratio it names must be one `--check`
/// measures (checked before measuring).
pub fn load(path: &Path) -> Result<Bounds, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::new(path, error.to_string()))?;
    let bounds: Bounds = serde_yaml::from_str(&text).map_err(|error| ScenarioError::new(path, error.to_string()))?;
    let every_ratio = Ratios {
        cloudflare_node_fraction: Some(0.0),
        ai_sdk_no_eviction_node_fraction: Some(0.0),
        ..Ratios::default()
    };
    let named = bounds.floors.keys().chain(bounds.ceilings.keys()).chain(bounds.targets.keys());
    for name in named {
        figure(&every_ratio, name).map_err(|error| ScenarioError::new(path, error))?;
    }
    Ok(bounds)
}

/// The ratio `name` of `ratios`; `Err` when `--check` has no such ratio,
/// or did not measure it here (its probe could not run).
fn figure(ratios: &Ratios, name: &str) -> Result<f64, String> {
    let figures = serde_json::to_value(ratios).expect("ratios serialise");
    match figures.get(name).and_then(serde_json::Value::as_f64) {
        Some(value) => Ok(value),
        None if name.contains("node_fraction") && ratios.node_skipped.is_some() => {
            Err(format!("`{name}` could not be measured: {}", ratios.node_skipped.as_deref().unwrap_or_default()))
        }
        None => Err(format!("bench --check measures no ratio `{name}`")),
    }
}

/// Every ratio past its bound, in words with its figure; `Err` when a
/// bounded ratio could not be measured.
pub fn breaches(ratios: &Ratios, bounds: &Bounds) -> Result<Vec<String>, String> {
    let mut breaches = Vec::new();
    for (name, floor) in &bounds.floors {
        let value = figure(ratios, name)?;
        if value < *floor {
            breaches.push(format!("{name} {value:.3} is below its bound {floor}"));
        }
    }
    for (name, ceiling) in &bounds.ceilings {
        let value = figure(ratios, name)?;
        if value > *ceiling {
            breaches.push(format!("{name} {value:.3} is above its bound {ceiling}"));
        }
    }
    Ok(breaches)
}

/// Each ratio with its bound and its target, one a line.
pub fn text(ratios: &Ratios, bounds: &Bounds) -> String {
    let figures = serde_json::to_value(ratios).expect("ratios serialise");
    let mut text = String::new();
    for (name, value) in figures.as_object().into_iter().flatten() {
        let Some(value) = value.as_f64() else { continue };
        let bound = match (bounds.floors.get(name), bounds.ceilings.get(name)) {
            (Some(floor), _) => format!(">= {floor}"),
            (_, Some(ceiling)) => format!("<= {ceiling}"),
            _ => "unbounded".to_string(),
        };
        let target = bounds.targets.get(name).map_or("", String::as_str);
        text.push_str(&format!("{name:<34} {value:>8.3}  bound {bound:<8}  target {target}\n"));
    }
    if let Some(why) = &ratios.node_skipped {
        text.push_str(&format!("Node fractions skipped: {why}\n"));
    }
    text
}

//! The kill matrix: per (operator, scenario) pair, over the seeds run,
//! whether the rewrite was caught (some mutated run failed a check, and
//! which), survived (it changed something and every check passed), or
//! had nothing to rewrite. Text for people, JSON for tools; pairs sorted
//! by operator (in [`super::ALL_OPERATORS`] order) then scenario (in file
//! order), so two sweeps of the same work print the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use turnsim_engine::RegressionSet;

use super::equivalents::Equivalents;
use super::{Operator, Seeds, Trial, Verdict};
use crate::report::plural;
use crate::scenario::ScenarioFile;

/// What one operator did to one scenario, over the seeds run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum PairVerdict {
    /// An unmutated run failed.
    BaselineFails { seed: u64, checks: Vec<String> },
    /// No seed had a site of the operator.
    NoSite,
    /// Sites, but no rewrite happened (a run that left the baseline's path).
    Unreached { seed: u64 },
    /// Some mutated run failed a check: the checks, and the first such seed.
    Caught { seed: u64, checks: Vec<String>, applied: String },
    /// Every mutated run passed: the first seed, what it changed, and the
    /// argument that no consumer can tell, when there is one.
    Survived {
        seed: u64,
        applied: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        equivalent: Option<String>,
        /// A known gap of the oracle: what the check it needs would read.
        #[serde(skip_serializing_if = "Option::is_none")]
        gap: Option<String>,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    pub operator: &'static str,
    pub scenario: String,
    #[serde(flatten)]
    pub verdict: PairVerdict,
    /// The command that replays the pair's mutated run (caught or survived).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
}

/// One operator's row.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub operator: &'static str,
    pub wrong: &'static str,
    /// The property of the catalogue the operator breaks (reported in the
    /// matrix by property).
    #[serde(skip)]
    pub property: &'static str,
    /// Pairs where it changed something.
    pub changed: usize,
    pub caught: usize,
    /// Survivors nobody argued equivalent or listed as a known gap.
    pub survived: usize,
    pub equivalent: usize,
    /// Survivors listed as known gaps of the oracle.
    pub gaps: usize,
    pub no_site: usize,
    pub baseline_fails: usize,
    pub unreached: usize,
    /// How many caught pairs each check failed in.
    pub caught_by: BTreeMap<String, usize>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    pub scenarios: usize,
    pub seeds: Seeds,
    pub rows: Vec<Row>,
    pub pairs: Vec<Pair>,
    pub changed: usize,
    pub caught: usize,
    pub survived: usize,
    pub equivalent: usize,
    pub gaps: usize,
}

impl Matrix {
    /// Folds sorted trials into pairs, rows and totals.
    pub fn of(
        files: &[ScenarioFile],
        seeds: Seeds,
        operators: &[Operator],
        trials: &[Trial],
        equivalents: &Equivalents,
        regressions: &RegressionSet,
    ) -> Self {
        let mut by_pair: BTreeMap<(Operator, usize), Vec<&Trial>> = BTreeMap::new();
        for trial in trials {
            by_pair.entry((trial.operator, trial.scenario)).or_default().push(trial);
        }
        let mut pairs = Vec::new();
        let mut rows = Vec::new();
        for &operator in operators {
            let mut row = Row {
                operator: operator.name(),
                wrong: operator.wrong(),
                property: operator.property(),
                ..Row::default()
            };
            for (scenario, file) in files.iter().enumerate() {
                let trials = by_pair.get(&(operator, scenario)).map_or(&[][..], Vec::as_slice);
                let why = equivalents.why(operator, &file.path).map(str::to_string);
                let gap = equivalents.gap(operator, &file.path).map(str::to_string);
                let verdict = fold(trials, why, gap);
                row.count(&verdict);
                let replay = match &verdict {
                    PairVerdict::Caught { seed, .. } | PairVerdict::Survived { seed, .. } => {
                        Some(replay_command(file, operator, *seed, regressions))
                    }
                    _ => None,
                };
                let scenario = file.path.display().to_string();
                pairs.push(Pair { operator: operator.name(), scenario, verdict, replay });
            }
            rows.push(row);
        }
        let total = |count: fn(&Row) -> usize| rows.iter().map(count).sum();
        Self {
            scenarios: files.len(),
            seeds,
            changed: total(|row| row.changed),
            caught: total(|row| row.caught),
            survived: total(|row| row.survived),
            equivalent: total(|row| row.equivalent),
            gaps: total(|row| row.gaps),
            rows,
            pairs,
        }
    }

    /// Caught pairs as a percentage of pairs that changed something.
    pub fn caught_percent(&self) -> f64 {
        if self.changed == 0 {
            return 0.0;
        }
        100.0 * self.caught as f64 / self.changed as f64
    }

    /// Survivors nobody argued equivalent or listed as a known gap.
    pub fn open_survivors(&self) -> impl Iterator<Item = &Pair> {
        self.pairs
            .iter()
            .filter(|pair| matches!(pair.verdict, PairVerdict::Survived { equivalent: None, gap: None, .. }))
    }
}

impl Row {
    fn count(&mut self, verdict: &PairVerdict) {
        match verdict {
            PairVerdict::BaselineFails { .. } => self.baseline_fails += 1,
            PairVerdict::NoSite => self.no_site += 1,
            PairVerdict::Unreached { .. } => self.unreached += 1,
            PairVerdict::Caught { checks, .. } => {
                self.changed += 1;
                self.caught += 1;
                for check in checks {
                    *self.caught_by.entry(check.clone()).or_default() += 1;
                }
            }
            PairVerdict::Survived { equivalent, gap, .. } => {
                self.changed += 1;
                match (equivalent, gap) {
                    (Some(_), _) => self.equivalent += 1,
                    (None, Some(_)) => self.gaps += 1,
                    (None, None) => self.survived += 1,
                }
            }
        }
    }
}

/// One pair's verdict from its trials (in seed order): a failing baseline
/// first, then the first caught seed, then the first survivor.
fn fold(trials: &[&Trial], equivalent: Option<String>, gap: Option<String>) -> PairVerdict {
    let find = |wanted: fn(&Verdict) -> bool| trials.iter().find(|trial| wanted(&trial.verdict));
    if let Some(trial) = find(|verdict| matches!(verdict, Verdict::BaselineFails { .. })) {
        let Verdict::BaselineFails { checks } = &trial.verdict else { unreachable!("matched above") };
        return PairVerdict::BaselineFails { seed: trial.seed, checks: checks.clone() };
    }
    let caught: Vec<&&Trial> = trials.iter().filter(|trial| matches!(trial.verdict, Verdict::Caught { .. })).collect();
    if let Some(first) = caught.first() {
        let Verdict::Caught { applied, .. } = &first.verdict else { unreachable!("filtered above") };
        let mut checks: Vec<String> = caught
            .iter()
            .flat_map(|trial| match &trial.verdict {
                Verdict::Caught { checks, .. } => checks.clone(),
                _ => Vec::new(),
            })
            .collect();
        checks.sort();
        checks.dedup();
        return PairVerdict::Caught { seed: first.seed, checks, applied: applied.clone() };
    }
    if let Some(trial) = find(|verdict| matches!(verdict, Verdict::Survived { .. })) {
        let Verdict::Survived { applied, .. } = &trial.verdict else { unreachable!("matched above") };
        return PairVerdict::Survived { seed: trial.seed, applied: applied.clone(), equivalent, gap };
    }
    match find(|verdict| matches!(verdict, Verdict::Unreached)) {
        Some(trial) => PairVerdict::Unreached { seed: trial.seed },
        None => PairVerdict::NoSite,
    }
}

/// The one command that replays a pair's mutated run at `seed`.
pub fn replay_command(file: &ScenarioFile, operator: Operator, seed: u64, regressions: &RegressionSet) -> String {
    let path = file.path.display();
    let mut command =
        format!("cargo run --release -p turnsim -- adversary {path} --operator {} --seed {seed}", operator.name());
    for regression in regressions.iter() {
        command.push_str(&format!(" --regression {regression}"));
    }
    command.push_str(&crate::world::engine_flag());
    command
}

/// The matrix for people: a row per operator, then every survivor with its
/// replay command, then the pairs argued equivalent, then the totals.
pub fn text(matrix: &Matrix) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>7} {:>6} {:>8} {:>5} {:>4}  caught by",
        "operator", "changed", "caught", "survived", "equiv", "gap"
    );
    for row in &matrix.rows {
        let caught_by: Vec<String> = row.caught_by.iter().map(|(check, count)| format!("{check} {count}")).collect();
        let _ = writeln!(
            out,
            "{:<28} {:>7} {:>6} {:>8} {:>5} {:>4}  {}",
            row.operator,
            row.changed,
            row.caught,
            row.survived,
            row.equivalent,
            row.gaps,
            caught_by.join(", ")
        );
    }
    write_survivors(&mut out, matrix);
    write_equivalents(&mut out, matrix);
    write_gaps(&mut out, matrix);
    write_unjudged(&mut out, matrix);
    write_properties(&mut out, matrix);
    let _ = writeln!(
        out,
        "adversary: {} changed something, {} caught ({:.1}%), {} survived, {} argued equivalent, {} known {}",
        plural(matrix.changed as u64, "pair"),
        matrix.caught,
        matrix.caught_percent(),
        matrix.survived,
        matrix.equivalent,
        matrix.gaps,
        if matrix.gaps == 1 { "gap" } else { "gaps" }
    );
    out
}

fn write_survivors(out: &mut String, matrix: &Matrix) {
    let survivors: Vec<&Pair> = matrix.open_survivors().collect();
    if survivors.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nsurvivors (the wrong went unnoticed):");
    for pair in survivors {
        let PairVerdict::Survived { seed, applied, .. } = &pair.verdict else { continue };
        let _ = writeln!(out, "  {} on {} seed {seed}: {applied}", pair.operator, pair.scenario);
        let _ = writeln!(out, "    replay: {}", pair.replay.as_deref().unwrap_or_default());
    }
}

fn write_equivalents(out: &mut String, matrix: &Matrix) {
    let argued = |verdict: &PairVerdict| match verdict {
        PairVerdict::Survived { equivalent: Some(why), .. } => Some(why.clone()),
        _ => None,
    };
    write_listed(out, matrix, "argued equivalent (survived, and no consumer can tell):", argued, false);
}

fn write_gaps(out: &mut String, matrix: &Matrix) {
    let gap = |verdict: &PairVerdict| match verdict {
        PairVerdict::Survived { equivalent: None, gap: Some(needs), .. } => Some(needs.clone()),
        _ => None,
    };
    let heading = "known gaps (survived: a consumer can tell, and the check that would see it is not written):";
    write_listed(out, matrix, heading, gap, true);
}

/// The survivors a file lists, each with what it says of them (and its
/// replay command, when `replay`), under `heading`; nothing when none.
fn write_listed(
    out: &mut String,
    matrix: &Matrix,
    heading: &str,
    said: impl Fn(&PairVerdict) -> Option<String>,
    replay: bool,
) {
    let listed: Vec<(&Pair, String)> =
        matrix.pairs.iter().filter_map(|pair| said(&pair.verdict).map(|text| (pair, text))).collect();
    if listed.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{heading}");
    for (pair, text) in listed {
        let _ = writeln!(out, "  {} on {}: {}", pair.operator, pair.scenario, text.trim());
        if replay {
            let _ = writeln!(out, "    replay: {}", pair.replay.as_deref().unwrap_or_default());
        }
    }
}

/// The matrix by property (docs/properties.md): every property of the
/// catalogue, the operators that break it, and how their pairs fared.
fn write_properties(out: &mut String, matrix: &Matrix) {
    let _ = writeln!(
        out,
        "\n{:<40} {:>9} {:>7} {:>6} {:>8} {:>5} {:>4}",
        "property", "operators", "changed", "caught", "survived", "equiv", "gap"
    );
    for row in by_property(matrix) {
        let _ = writeln!(
            out,
            "{:<40} {:>9} {:>7} {:>6} {:>8} {:>5} {:>4}",
            row.property,
            row.operators.len(),
            row.changed,
            row.caught,
            row.survived,
            row.equivalent,
            row.gaps
        );
    }
}

/// One property's share of the matrix.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PropertyRow {
    pub property: &'static str,
    pub invariant: &'static str,
    /// The operators run that break it (none: no wrong engine attacks it yet).
    pub operators: Vec<&'static str>,
    pub changed: usize,
    pub caught: usize,
    pub survived: usize,
    pub equivalent: usize,
    pub gaps: usize,
}

/// Every property of the catalogue, in its order, with the rows of the
/// operators run that break it.
pub fn by_property(matrix: &Matrix) -> Vec<PropertyRow> {
    crate::properties::PROPERTIES
        .iter()
        .map(|property| {
            let mut out =
                PropertyRow { property: property.id, invariant: property.invariant, ..PropertyRow::default() };
            for row in matrix.rows.iter().filter(|row| row.property == property.id) {
                out.operators.push(row.operator);
                out.changed += row.changed;
                out.caught += row.caught;
                out.survived += row.survived;
                out.equivalent += row.equivalent;
                out.gaps += row.gaps;
            }
            out
        })
        .collect()
}

/// Operators that changed nothing anywhere, failing baselines, runs that
/// never reached their site.
fn write_unjudged(out: &mut String, matrix: &Matrix) {
    let idle: Vec<&str> = matrix.rows.iter().filter(|row| row.changed == 0).map(|row| row.operator).collect();
    if !idle.is_empty() {
        let _ = writeln!(out, "\nchanged nothing in any scenario: {}", idle.join(", "));
    }
    let mut baseline: BTreeMap<&str, (u64, &[String])> = BTreeMap::new();
    for pair in &matrix.pairs {
        if let PairVerdict::BaselineFails { seed, checks } = &pair.verdict {
            baseline.entry(pair.scenario.as_str()).or_insert((*seed, checks.as_slice()));
        }
    }
    for (scenario, (seed, checks)) in baseline {
        let _ = writeln!(out, "baseline fails: {scenario} seed {seed} ({}): not judged", checks.join(", "));
    }
    for pair in &matrix.pairs {
        if let PairVerdict::Unreached { seed } = &pair.verdict {
            let _ = writeln!(
                out,
                "unreached: {} on {} seed {seed}: the run left the baseline's path",
                pair.operator, pair.scenario
            );
        }
    }
}

/// The matrix for tools: pairs that changed something, failed their
/// baseline or never reached their site (pairs with no site are left out).
pub fn json(matrix: &Matrix) -> String {
    let pairs: Vec<&Pair> = matrix.pairs.iter().filter(|pair| pair.verdict != PairVerdict::NoSite).collect();
    let value = serde_json::json!({
        "scenarios": matrix.scenarios,
        "seeds": matrix.seeds,
        "changed": matrix.changed,
        "caught": matrix.caught,
        "survived": matrix.survived,
        "equivalent": matrix.equivalent,
        "gaps": matrix.gaps,
        "caught_percent": (matrix.caught_percent() * 10.0).round() / 10.0,
        "operators": matrix.rows,
        "properties": by_property(matrix),
        "pairs": pairs,
    });
    serde_json::to_string_pretty(&value).expect("serialises")
}

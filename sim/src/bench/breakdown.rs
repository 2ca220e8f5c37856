//! `turnsim bench --by-part`: where a run's cost goes, and which part of it
//! grows with the session. The standard scenario is timed part by part, so
//! the simulation's own share bounds what faster checks could buy. Each
//! growth shape is run short and long; every
//! run is timed in its parts (the simulation, deriving what the checks
//! share, each invariant, the expectations) on the measuring thread's CPU
//! clock, less what the read that times each part costs (a system call of
//! about half a microsecond here, more than the cheapest checks), and each
//! part's cost per traced event is compared between the two forms. A
//! check whose figure grows is the one to make a fold.
//!
//! Beside the parts, what crosses the boundary per event (the history's
//! JSON): a session's later requests and commits carry its whole
//! transcript, so a check that reads each crossing once still costs more
//! per event as the session grows; this is the yardstick to judge a
//! part's growth by.

use std::time::Duration;

use serde::Serialize;
use turnsim_engine::RegressionSet;

use super::growth::{step_chain, thread_cpu_time, wide_batch};
use super::protocol_parts::{self, ProtocolCost};
use super::{BATCH_NARROW, BATCH_WIDE, STEP_CHAIN_LONG, STEP_CHAIN_SHORT};
use crate::check::{expect, invariants, landed, CheckInput};
use crate::scenario::ScenarioFile;

/// CPU time one form is run for.
const ROUND_TIME: Duration = Duration::from_millis(800);

/// One part's cost per event on the short and the long form of a shape.
#[derive(Debug, Serialize)]
pub struct PartCost {
    pub part: String,
    /// Nanoseconds per traced event, short form.
    pub short_ns: f64,
    /// Nanoseconds per traced event, long form.
    pub long_ns: f64,
}

impl PartCost {
    pub fn growth(&self) -> f64 {
        self.long_ns / self.short_ns.max(f64::MIN_POSITIVE)
    }
}

#[derive(Debug, Serialize)]
pub struct Breakdown {
    pub shape: String,
    pub parts: Vec<PartCost>,
    /// Bytes of the boundary history's JSON per traced event, short form.
    pub short_bytes_per_event: f64,
    /// The same, long form.
    pub long_bytes_per_event: f64,
}

/// Where one scenario's runs spend their time, part by part.
#[derive(Debug, Serialize)]
pub struct ScenarioCost {
    pub scenario: String,
    /// Traced events per run, over the seeds measured.
    pub events_per_run: f64,
    /// Each part's nanoseconds per traced event.
    pub parts: Vec<(String, f64)>,
}

/// What `--by-part` prints: the standard scenario's parts, and both growth
/// shapes.
#[derive(Debug, Serialize)]
pub struct ByPart {
    pub standard: ScenarioCost,
    /// The standard scenario against the engine `engine` starts.
    pub protocol: ProtocolCost,
    pub growth: Vec<Breakdown>,
}

/// The standard scenario's parts, in-process and against the engine
/// `engine` starts, then both growth shapes.
pub fn measure(standard: &ScenarioFile, engine: &str) -> ByPart {
    let (parts, events, runs) = per_event_counted(standard);
    let protocol = protocol_parts::measure(engine, standard);
    let standard = ScenarioCost {
        scenario: standard.scenario.name.clone(),
        events_per_run: events as f64 / runs.max(1) as f64,
        parts,
    };
    ByPart { standard, protocol, growth: growth_shapes() }
}

/// The checks' share of a standard run's CPU time: everything but the
/// simulation (deriving the shared facts, every invariant, the
/// expectations), over one round of runs. Each run is timed in two laps,
/// as `run` makes it: the simulation, then every check at once. Timing
/// each part apart reads the thread's clock two dozen times a run, a
/// system call that would count as checking.
pub fn checks_share(standard: &ScenarioFile) -> f64 {
    let (simulation, checks) =
        std::thread::scope(|scope| scope.spawn(|| simulation_and_checks(standard)).join().expect("bench thread"));
    checks.as_secs_f64() / (simulation + checks).as_secs_f64().max(f64::MIN_POSITIVE)
}

/// CPU time spent simulating and checking the standard scenario's seeds
/// for about [`ROUND_TIME`].
fn simulation_and_checks(file: &ScenarioFile) -> (Duration, Duration) {
    let regressions = RegressionSet::default();
    let (mut simulation, mut checks) = (Duration::ZERO, Duration::ZERO);
    let started = thread_cpu_time();
    let mut runs = 0;
    while runs == 0 || thread_cpu_time() - started < ROUND_TIME {
        let mut clock = Lap(thread_cpu_time());
        let record = crate::world::run(file, runs, &regressions);
        simulation += clock.lap();
        let violations = crate::check::raw_violations(file, &record);
        checks += clock.lap();
        assert!(violations.is_empty(), "{} fails: {violations:?}", file.scenario.name);
        runs += 1;
    }
    (simulation, checks)
}

/// Both growth shapes, part by part.
fn growth_shapes() -> Vec<Breakdown> {
    let shapes = [
        (
            format!("step chain, {STEP_CHAIN_LONG} vs {STEP_CHAIN_SHORT} steps"),
            step_chain(STEP_CHAIN_SHORT),
            step_chain(STEP_CHAIN_LONG),
        ),
        (format!("wide batch, {BATCH_WIDE} vs {BATCH_NARROW} tools"), wide_batch(BATCH_NARROW), wide_batch(BATCH_WIDE)),
    ];
    shapes
        .into_iter()
        .map(|(shape, short, long)| {
            let (short_bytes_per_event, long_bytes_per_event) = (boundary_bytes(&short), boundary_bytes(&long));
            let (short, long) = (per_event(&short), per_event(&long));
            let parts = short
                .into_iter()
                .zip(long)
                .map(|((part, short_ns), (_, long_ns))| PartCost { part, short_ns, long_ns })
                .collect();
            Breakdown { shape, parts, short_bytes_per_event, long_bytes_per_event }
        })
        .collect()
}

/// Bytes of what crossed the engine's boundary (the history as JSON) per
/// traced event, in the form's first seed.
fn boundary_bytes(file: &ScenarioFile) -> f64 {
    let record = crate::world::run(file, 0, &RegressionSet::default());
    let bytes = serde_json::to_vec(&record.history.crossings).expect("the history serialises").len();
    bytes as f64 / record.events.len().max(1) as f64
}

/// Nanoseconds per traced event of each part, over consecutive seeds for
/// about [`ROUND_TIME`], on a thread of its own (as runs are made).
fn per_event(file: &ScenarioFile) -> Vec<(String, f64)> {
    per_event_counted(file).0
}

/// [`per_event`], with the events and runs it measured.
fn per_event_counted(file: &ScenarioFile) -> (Vec<(String, f64)>, usize, u64) {
    std::thread::scope(|scope| scope.spawn(|| per_event_here(file)).join().expect("bench thread"))
}

fn per_event_here(file: &ScenarioFile) -> (Vec<(String, f64)>, usize, u64) {
    let regressions = RegressionSet::default();
    let mut names = vec!["simulation".to_string(), "derive".to_string()];
    names.extend(invariants::INVARIANTS.iter().map(|invariant| invariant.name.to_string()));
    names.extend(["expectations".to_string(), "fault-landed".to_string()]);
    let mut spent = vec![Duration::ZERO; names.len()];
    let (mut events, mut runs) = (0usize, 0u64);
    let read = clock_read_cost();
    let started = thread_cpu_time();
    while runs == 0 || thread_cpu_time() - started < ROUND_TIME {
        let mut clock = Lap(thread_cpu_time());
        let record = crate::world::run(file, runs, &regressions);
        spent[0] += clock.lap_less(read);
        let input = CheckInput::new(file, &record);
        spent[1] += clock.lap_less(read);
        for (at, invariant) in invariants::INVARIANTS.iter().enumerate() {
            let violations = (invariant.check)(&input);
            assert!(violations.is_empty(), "{} fails on {}: {violations:?}", invariant.name, file.scenario.name);
            spent[2 + at] += clock.lap_less(read);
        }
        assert!(expect::check(&input).is_empty(), "{}'s expectations fail", file.scenario.name);
        spent[names.len() - 2] += clock.lap_less(read);
        assert!(landed::check(&input).is_empty(), "{}'s faults do not land", file.scenario.name);
        spent[names.len() - 1] += clock.lap_less(read);
        events += record.events.len();
        runs += 1;
    }
    let parts =
        names.into_iter().zip(spent).map(|(name, spent)| (name, spent.as_nanos() as f64 / events as f64)).collect();
    (parts, events, runs)
}

/// A stopwatch on the thread's CPU clock.
struct Lap(Duration);

impl Lap {
    /// CPU time since the last lap (or the start).
    fn lap(&mut self) -> Duration {
        let now = thread_cpu_time();
        let spent = now.saturating_sub(self.0);
        self.0 = now;
        spent
    }

    /// [`Self::lap`] less `read`, what reading the clock costs: a part is
    /// timed by one read, and the cheapest parts cost less than a read.
    fn lap_less(&mut self, read: Duration) -> Duration {
        self.lap().saturating_sub(read)
    }
}

/// What one read of the thread's CPU clock costs (a system call here),
/// the least of a few rounds of reads.
fn clock_read_cost() -> Duration {
    const READS: u32 = 2_000;
    let round = || {
        let started = thread_cpu_time();
        for _ in 1..READS {
            std::hint::black_box(thread_cpu_time());
        }
        (thread_cpu_time() - started) / READS
    };
    (0..5).map(|_| round()).min().unwrap_or_default()
}

pub fn text(by_part: &ByPart) -> String {
    let mut text = standard_text(&by_part.standard);
    text.push_str(&protocol_parts::text(&by_part.protocol));
    for breakdown in &by_part.growth {
        text.push_str(&format!("{}\n", breakdown.shape));
        text.push_str(&format!("  {:<26} {:>10} {:>10} {:>8}\n", "part", "short", "long", "growth"));
        for part in &breakdown.parts {
            text.push_str(&format!(
                "  {:<26} {:>7.0} ns {:>7.0} ns {:>7.2}x\n",
                part.part,
                part.short_ns,
                part.long_ns,
                part.growth()
            ));
        }
        let (short, long): (f64, f64) =
            breakdown.parts.iter().fold((0.0, 0.0), |(s, l), p| (s + p.short_ns, l + p.long_ns));
        text.push_str(&format!("  {:<26} {:>7.0} ns {:>7.0} ns {:>7.2}x\n", "all", short, long, long / short));
        let (short_bytes, long_bytes) = (breakdown.short_bytes_per_event, breakdown.long_bytes_per_event);
        text.push_str(&format!(
            "  {:<26} {:>7.0} B  {:>7.0} B  {:>7.2}x\n",
            "boundary JSON per event",
            short_bytes,
            long_bytes,
            long_bytes / short_bytes.max(f64::MIN_POSITIVE)
        ));
    }
    text.push_str("(CPU time per traced event, one thread; the last line is what crossed the boundary per event)\n");
    text
}

/// The standard scenario's table: each part per event, per run, and its
/// share of the run.
fn standard_text(cost: &ScenarioCost) -> String {
    let total: f64 = cost.parts.iter().map(|(_, ns)| ns).sum();
    let per_run_us = |ns: f64| ns * cost.events_per_run / 1000.0;
    let mut text = format!("{}, {:.0} events a run\n", cost.scenario, cost.events_per_run);
    text.push_str(&format!("  {:<26} {:>10} {:>10} {:>8}\n", "part", "per event", "per run", "share"));
    for (part, ns) in &cost.parts {
        text.push_str(&format!(
            "  {:<26} {:>7.0} ns {:>7.1} us {:>7.1}%\n",
            part,
            ns,
            per_run_us(*ns),
            100.0 * ns / total.max(f64::MIN_POSITIVE)
        ));
    }
    let run_us = per_run_us(total);
    text.push_str(&format!(
        "  {:<26} {:>7.0} ns {:>7.1} us   ({:.0} runs/s of CPU)\n",
        "all",
        total,
        run_us,
        1e6 / run_us.max(f64::MIN_POSITIVE)
    ));
    text
}

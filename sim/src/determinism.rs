//! Invariant 11: the same seed gives the same trace, byte for byte. Runs a
//! seed twice (the second time on a fresh thread) and names the first event
//! where the timelines differ. With an engine process, the second run has
//! real wall-clock jitter before every delivery (the time-escape canary):
//! an engine that reads a real clock diverges.

use turnsim_engine::RegressionSet;

use crate::protocol::fault::EngineFault;
use crate::scenario::ScenarioFile;
use crate::trace::render_timeline;
use crate::world;

/// `None` when both runs render identically; else where they split, or
/// the engine fault that kept the seed from being compared (a broken engine
/// process is a failure, never a pass).
pub fn first_divergence(file: &ScenarioFile, seed: u64) -> Option<String> {
    let regressions = RegressionSet::default();
    let first = world::run(file, seed, &regressions);
    if let Some(fault) = &first.engine_fault {
        return Some(format!("{}: {fault}", EngineFault::CHECK));
    }
    let first = render_timeline(&first.events);
    let second = std::thread::scope(|scope| {
        let again = || world::run(file, seed, &regressions);
        let jittered = move || crate::protocol::proxy::with_wall_jitter(again);
        scope.spawn(jittered).join().expect("replay thread")
    });
    if let Some(fault) = &second.engine_fault {
        return Some(format!("{} in the second run only: {fault}", EngineFault::CHECK));
    }
    let second = render_timeline(&second.events);
    if first == second {
        return None;
    }
    let (left, right): (Vec<&str>, Vec<&str>) = (first.lines().collect(), second.lines().collect());
    let at = left.iter().zip(&right).position(|(a, b)| a != b).unwrap_or(left.len().min(right.len()));
    Some(format!(
        "event {}: first run `{}`, second run `{}`",
        at + 1,
        left.get(at).unwrap_or(&"<end>"),
        right.get(at).unwrap_or(&"<end>")
    ))
}

//! Invariant 11: the same seed gives the same trace, byte for byte. Runs a
//! seed twice (the second time on a fresh thread) and names the first event
//! where the timelines differ. With an engine process, the second run has
//! real wall-clock jitter before every delivery (the time-escape canary):
//! an engine that reads a real clock diverges.

use turnsim_engine::RegressionSet;

use crate::scenario::ScenarioFile;
use crate::trace::render_timeline;
use crate::world;

/// `None` when both runs render identically; else where they split.
pub fn first_divergence(file: &ScenarioFile, seed: u64) -> Option<String> {
    let regressions = RegressionSet::default();
    let first = render_timeline(&world::run(file, seed, &regressions).events);
    let second = std::thread::scope(|scope| {
        let again = || render_timeline(&world::run(file, seed, &regressions).events);
        let jittered = move || crate::protocol::proxy::with_wall_jitter(again);
        scope.spawn(jittered).join().expect("replay thread")
    });
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

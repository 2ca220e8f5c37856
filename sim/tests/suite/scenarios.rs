//! The committed scenario suite passes on a sweep of seeds (the CLI runs the
//! full sweep in CI; this keeps `cargo test` honest on its own).

use turnsim::runner::run_one;
use turnsim_engine::RegressionSet;

use crate::common::all_scenarios;

#[test]
fn every_committed_scenario_passes_on_sixteen_seeds() {
    let mut failures = Vec::new();
    for file in all_scenarios() {
        for seed in 0..16 {
            let (_, violations) = run_one(&file, seed, &RegressionSet::default());
            if !violations.is_empty() {
                failures.push(format!("{} seed {seed}: {violations:?}", file.path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "scenarios failed:\n{}", failures.join("\n"));
}

/// After recovery gives up, the terminal status is stored and replayed to a
/// client that connects later, not only broadcast to those connected then.
#[test]
fn the_terminal_message_is_replayed_to_a_client_that_connects_later() {
    let file = crate::common::inline(
        "name: terminal-replay
engine: { stall_timeout_ms: 31000, recovery: { max_attempts: 1 } }
model:
  - [ { text_start: t1 }, { text_delta: partial }, park ]
  - [ park ]
actions:
  - { at_ms: 0, user_message: { text: hi, via: chat } }
  - { at_ms: 100000, disconnect: { reconnect_after_ms: 1000 } }
",
    );
    let (record, violations) = run_one(&file, 0, &RegressionSet::default());
    assert!(violations.is_empty(), "{violations:?}");
    let terminal = turnsim_engine::config::DEFAULT_TERMINAL_MESSAGE;
    let frames: Vec<(u64, usize)> = record
        .events
        .iter()
        .enumerate()
        .filter_map(|(index, traced)| match &traced.event {
            turnsim::trace::Event::ClientFrame { what } if what.contains(terminal) => Some((traced.at_us, index)),
            _ => None,
        })
        .collect();
    assert_eq!(frames.len(), 2, "the terminal message: once when recovery gave up, once on reconnect: {frames:?}");
    assert!(frames[1].0 >= 101_000_000, "the second one reaches the client that reconnected after 100 s");
}

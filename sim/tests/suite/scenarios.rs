//! Scenario behaviours a YAML expectation cannot say. (Each committed
//! scenario runs as its own test case in `tests/scenarios.rs`.)

use turnsim::runner::run_one;
use turnsim_engine::RegressionSet;

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

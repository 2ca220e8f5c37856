//! Growth benchmarks: does the cost of one traced event stay flat as a
//! session gets longer?
//!
//! Two shapes, generated here rather than committed as scenarios because
//! their size is the variable: a chain of client-tool steps (each model call
//! emits one tool, the client answers with `auto_continue`, the continuation
//! calls the model again) and one step with a wide batch of client tools.
//! The figure is the wall time per recorded event of the long form divided
//! by that of the short form: 1.0 is perfectly linear, a quadratic shows as
//! a ratio that grows with the size.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use turnsim_engine::RegressionSet;

use crate::runner;
use crate::scenario::{parse_scenario, ScenarioFile};

/// Wall time one growth round spends on one form (at least one run).
const GROWTH_ROUND_TIME: Duration = Duration::from_millis(400);

/// A session of `steps` model calls, each one client tool that the client
/// answers with `auto_continue`, then a closing text answer.
pub fn step_chain(steps: usize) -> ScenarioFile {
    let mut yaml = String::new();
    let _ = write!(
        yaml,
        "name: bench-step-chain-{steps}\nseeds: 1\nengine:\n  tools:\n    lookup: {{ kind: client }}\nmodel:\n"
    );
    for step in 0..steps {
        let _ = writeln!(
            yaml,
            "  - [ {{ tool: {{ id: tc-{step}, name: lookup, input: {{ step: {step} }} }} }}, {{ finish: {{ reason: tool-calls }} }} ]"
        );
    }
    yaml.push_str("  - [ { text: \"All steps done.\" }, { finish: { reason: stop } } ]\n");
    yaml.push_str(CLIENT_AND_START);
    parse_generated(&format!("bench-step-chain-{steps}"), &yaml)
}

/// One model call that emits `tools` client tools in one batch; the client
/// answers each with `auto_continue`; one continuation closes the turn.
pub fn wide_batch(tools: usize) -> ScenarioFile {
    let mut yaml = String::new();
    let _ = write!(
        yaml,
        "name: bench-wide-batch-{tools}\nseeds: 1\nengine:\n  tools:\n    lookup: {{ kind: client }}\nmodel:\n  -\n"
    );
    for tool in 0..tools {
        let _ = writeln!(yaml, "    - tool: {{ id: tc-{tool}, name: lookup, input: {{ item: {tool} }} }}");
    }
    yaml.push_str("    - finish: { reason: tool-calls }\n");
    yaml.push_str("  - [ { text: \"All tools done.\" }, { finish: { reason: stop } } ]\n");
    yaml.push_str(CLIENT_AND_START);
    parse_generated(&format!("bench-wide-batch-{tools}"), &yaml)
}

const CLIENT_AND_START: &str = "client:
  tools:
    lookup: { answer_after_ms: [0, 20], output: \"found\", auto_continue: true }
actions:
  - at_ms: 0
    user_message: { text: \"go\" }
";

fn parse_generated(name: &str, yaml: &str) -> ScenarioFile {
    parse_scenario(Path::new(&format!("<generated {name}>")), yaml).expect("generated benchmark scenario parses")
}

/// Wall seconds per recorded event, over consecutive seeds for about one
/// round (at least one run); every run must pass every check.
pub fn seconds_per_event(file: &ScenarioFile) -> f64 {
    std::thread::scope(|scope| scope.spawn(|| seconds_per_event_here(file)).join().expect("bench thread"))
}

fn seconds_per_event_here(file: &ScenarioFile) -> f64 {
    let regressions = RegressionSet::default();
    let started = super::wall_now();
    let (mut runs, mut events) = (0u64, 0usize);
    while runs == 0 || started.elapsed() < GROWTH_ROUND_TIME {
        let (record, violations) = runner::run_one(file, runs, &regressions);
        assert!(
            violations.is_empty(),
            "benchmark scenario {} failed on seed {runs}: {violations:?}",
            file.scenario.name
        );
        events += record.events.len();
        runs += 1;
    }
    started.elapsed().as_secs_f64() / events as f64
}

/// Cost per event of `large` over cost per event of `small`, measured
/// back to back so machine noise hits both alike.
pub fn growth(small: &ScenarioFile, large: &ScenarioFile) -> f64 {
    let small_cost = seconds_per_event(small);
    let large_cost = seconds_per_event(large);
    large_cost / small_cost
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_sessions_pass_and_grow_with_their_size() {
        let regressions = RegressionSet::default();
        let (short, _) = runner::run_one(&step_chain(2), 0, &regressions);
        let (long, violations) = runner::run_one(&step_chain(6), 0, &regressions);
        assert!(violations.is_empty(), "{violations:?}");
        let calls = |events: &[crate::trace::TraceEvent]| {
            events.iter().filter(|event| matches!(event.event, crate::trace::Event::ModelCall { .. })).count()
        };
        assert_eq!(calls(&short.events), 3);
        assert_eq!(calls(&long.events), 7);
        let (batch, violations) = runner::run_one(&wide_batch(5), 0, &regressions);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(calls(&batch.events), 2);
        let sent = batch.events.iter().filter(|event| matches!(event.event, crate::trace::Event::ClientSent { .. }));
        assert_eq!(sent.count(), 5);
    }
}

//! An engine that says nothing of itself (every foreign engine: it does not
//! emit the built-in engine's event names) is faulted at the same moments
//! and judged the same as one that does. The built-in engine, with every
//! `observe` dropped on its way out, is run over the whole suite beside
//! itself: the same history crosses, and the same checks fail.

use std::sync::Arc;

use turnsim::check::check_run;
use turnsim::trace::Trace;
use turnsim::world::{run, run_interposed, Interposer};
use turnsim_engine::ports::{ExhaustedContext, Observer, Ports};
use turnsim_engine::{Engine, EngineEvent, HookError, RegressionSet};

use crate::common::{all_scenarios, inline};

/// Passes everything through but the engine's account of itself.
struct Silent;

impl Interposer for Silent {
    fn ports(&self, ports: Ports, _trace: &Trace) -> Ports {
        Ports { observer: Arc::new(Mute(ports.observer)), ..ports }
    }

    fn engine(&self, engine: Box<dyn Engine>) -> Box<dyn Engine> {
        engine
    }
}

struct Mute(Arc<dyn Observer>);

impl Observer for Mute {
    fn observe(&self, _event: EngineEvent) {}

    fn idle(&self) {
        self.0.idle();
    }

    fn on_exhausted(&self, context: &ExhaustedContext) -> Result<(), HookError> {
        self.0.on_exhausted(context)
    }
}

#[test]
fn an_engine_that_says_nothing_of_itself_is_faulted_and_judged_the_same() {
    let regressions = RegressionSet::default();
    let scenarios = all_scenarios();
    assert!(scenarios.len() > 100, "the whole suite: {}", scenarios.len());
    let (mut runs, mut faulted) = (0, 0);
    for file in &scenarios {
        for seed in [file.scenario.seed_start, file.scenario.seed_start.wrapping_add(1)] {
            let told = run(file, seed, &regressions);
            let silent = run_interposed(file, seed, &regressions, Arc::new(Silent));
            let name = &file.scenario.name;
            assert!(
                told.events.iter().any(|traced| matches!(traced.event, turnsim::trace::Event::Engine(_))),
                "{name}: the built-in engine says what it does"
            );
            assert!(
                !silent.events.iter().any(|traced| matches!(traced.event, turnsim::trace::Event::Engine(_))),
                "{name}: the silent engine says nothing"
            );
            // Where each crossing sits in the timeline differs (the engine's
            // own events are not there); what crossed, and when, may not.
            let crossed = |record: &turnsim::world::RunRecord| {
                let crossings = record.history.iter().map(|crossing| (crossing.at_us, crossing.what.clone()));
                (record.history.initial.clone(), crossings.collect::<Vec<_>>())
            };
            let (told_crossed, silent_crossed) = (crossed(&told), crossed(&silent));
            if told_crossed != silent_crossed {
                let pairs = told_crossed.1.iter().zip(&silent_crossed.1);
                let first =
                    pairs.clone().position(|(a, b)| a != b).unwrap_or(told_crossed.1.len().min(silent_crossed.1.len()));
                panic!(
                    "{name} seed {seed}: the same history crosses the boundary; first difference at crossing {first}:\n{:?}\n{:?}",
                    told_crossed.1.get(first),
                    silent_crossed.1.get(first)
                );
            }
            assert_eq!(told.end, silent.end, "{name} seed {seed}: the run ends the same way");
            let verdicts = |record: &turnsim::world::RunRecord| {
                let violations = check_run(file, record).into_iter();
                violations.map(|violation| (violation.check, violation.message)).collect::<Vec<_>>()
            };
            assert_eq!(verdicts(&told), verdicts(&silent), "{name} seed {seed}: the same verdicts");
            runs += 1;
            faulted +=
                usize::from(told.history.iter().any(|crossing| crossing.what == turnsim::history::Boundary::Killed));
        }
    }
    assert!(faulted > 50, "evictions landed in {faulted} of {runs} runs");
}

#[test]
fn a_trigger_that_names_an_engine_event_is_refused_with_the_boundary_event_to_use() {
    let yaml = |event: &str| {
        format!(
            "name: t\nmodel:\n  - - text: hi\n    - finish: {{ reason: stop }}\nactions:\n  - at_ms: 0\n    user_message: {{ text: hi }}\nfaults:\n  - evict:\n      when: {{ event: {event} }}\n      restart_after_ms: 10\n"
        )
    };
    let path = crate::common::workspace_root().join("scenarios").join("inline-test.yaml");
    for (engine_event, hint) in [
        ("user-message.stored", "stored: user-message"),
        ("recovery.scheduled", "stored: alarm"),
        ("continuation.fire", "model.call"),
        ("turn.end", "client.frame"),
    ] {
        let error =
            turnsim::scenario::parse_scenario(&path, &yaml(engine_event)).expect_err("an engine event is refused");
        let message = error.to_string();
        assert!(message.contains("inline-test.yaml:10:"), "located at its line: {message}");
        assert!(message.contains("engine's own event") && message.contains(hint), "{engine_event}: {message}");
    }
    let _ = inline(&yaml("model.call"));
    // With no chat() caller, `caller.on_done` never fires: not offered alone.
    let error = turnsim::scenario::parse_scenario(&path, &yaml("turn.end")).expect_err("refused");
    assert!(!error.to_string().contains("caller.on_done"), "{error}");
    let with_caller = yaml("turn.end").replace("user_message: { text: hi }", "user_message: { text: hi, via: chat }");
    let error = turnsim::scenario::parse_scenario(&path, &with_caller).expect_err("refused");
    assert!(error.to_string().contains("caller.on_done"), "{error}");
}

#[test]
fn a_timing_that_names_an_engine_event_is_not_offered_a_stored_moment() {
    // Timings take boundary events only: the hint names one of those.
    let path = crate::common::workspace_root().join("scenarios").join("inline-test.yaml");
    let yaml = "name: t\nmodel:\n  - - text: hi\n    - finish: { reason: stop }\nactions:\n  - at_ms: 0\n    user_message: { text: hi }\nexpect:\n  timing:\n    - { event: user-message.stored, no_earlier_than_ms: 10 }\n";
    let error = turnsim::scenario::parse_scenario(&path, yaml).expect_err("an engine event is refused");
    let message = error.to_string();
    assert!(message.contains("engine's own event") && message.contains("store.commit"), "{message}");
    assert!(!message.contains("stored:"), "timings take no `stored:` moment: {message}");
}

//! The engine's host: its observability events, its hooks and the chat
//! surface a messenger posts to, into the trace. Hooks and posts fail where
//! the scenario's `hook_throws` and `post_fails` faults say.

use turnsim_engine::messenger::{MessengerSurface, PostError};
use turnsim_engine::ports::{ExhaustedContext, HookError};
use turnsim_engine::{EngineEvent, Observer};

use super::counted::CountedFaults;
use crate::history::Boundary;
use crate::scenario::{Counted, Scenario};
use crate::trace::{Event, Trace};

pub struct TraceObserver {
    trace: Trace,
    /// `on_exhausted` calls, and those `hook_throws` faults fail.
    throws: CountedFaults,
}

impl TraceObserver {
    pub fn new(trace: Trace, scenario: &Scenario) -> Self {
        Self { trace, throws: CountedFaults::of(scenario, Counted::HookCall) }
    }
}

impl Observer for TraceObserver {
    fn observe(&self, event: EngineEvent) {
        if self.trace.engine_dead() {
            return;
        }
        self.trace.record(Event::Engine(event));
    }

    fn idle(&self) {
        self.trace.poke();
    }

    fn on_exhausted(&self, context: &ExhaustedContext) -> Result<(), HookError> {
        if self.trace.engine_dead() {
            return Ok(());
        }
        let threw = self.throws.count().1.map(str::to_string);
        let (incident, reason) = (context.incident_id.clone(), context.reason.clone());
        self.trace.record(Event::OnExhausted { incident, reason, threw: threw.clone() });
        self.trace.cross(Boundary::Exhausted { context: context.clone(), threw: threw.clone() });
        threw.map_or(Ok(()), |error| Err(HookError(error)))
    }
}

/// The chat surface a messenger posts to.
pub struct TraceSurface {
    trace: Trace,
    /// Posts attempted, and those `post_fails` faults refuse.
    refusals: CountedFaults,
}

impl TraceSurface {
    pub fn new(trace: Trace, scenario: &Scenario) -> Self {
        Self { trace, refusals: CountedFaults::of(scenario, Counted::Post) }
    }
}

impl MessengerSurface for TraceSurface {
    fn post(&self, delivery_id: &str, text: &str) -> Result<(), PostError> {
        if self.trace.engine_dead() {
            return Ok(());
        }
        let (delivery, text) = (delivery_id.to_string(), text.to_string());
        match self.refusals.count().1 {
            None => {
                self.trace.record(Event::MessengerPost { delivery: delivery.clone(), text: text.clone() });
                self.trace.cross(Boundary::Post { delivery, text });
                Ok(())
            }
            Some(error) => {
                let error = error.to_string();
                let refused = Event::MessengerPostRefused {
                    delivery: delivery.clone(),
                    text: text.clone(),
                    error: error.clone(),
                };
                self.trace.record(refused);
                self.trace.cross(Boundary::PostRefused { delivery, text, error: error.clone() });
                Err(PostError(error))
            }
        }
    }
}

//! The engine's host: its observability events, its hooks and the chat
//! surface a messenger posts to, into the trace. Hooks and posts fail where
//! the scenario's `hook_throws` and `post_fails` faults say.

use std::sync::atomic::{AtomicU32, Ordering};

use turnsim_engine::messenger::{MessengerSurface, PostError};
use turnsim_engine::ports::{ExhaustedContext, HookError};
use turnsim_engine::{EngineEvent, Observer};

use crate::history::Boundary;
use crate::scenario::{in_run, Fault, HookFault, PostFault, Scenario};
use crate::trace::{Event, Trace};

pub struct TraceObserver {
    trace: Trace,
    faults: Vec<HookFault>,
    /// `on_exhausted` calls so far, across the run's processes.
    calls: AtomicU32,
}

impl TraceObserver {
    pub fn new(trace: Trace, scenario: &Scenario) -> Self {
        let faults = scenario
            .faults
            .iter()
            .filter_map(|fault| match fault {
                Fault::HookThrows(hook) => Some(hook.clone()),
                _ => None,
            })
            .collect();
        Self { trace, faults, calls: AtomicU32::new(0) }
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
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let threw =
            self.faults.iter().find(|fault| in_run(call, fault.call, fault.times)).map(|fault| fault.error.clone());
        let (incident, reason) = (context.incident_id.clone(), context.reason.clone());
        self.trace.record(Event::OnExhausted { incident, reason, threw: threw.clone() });
        self.trace.cross(Boundary::Exhausted { context: context.clone(), threw: threw.clone() });
        threw.map_or(Ok(()), |error| Err(HookError(error)))
    }
}

/// The chat surface a messenger posts to.
pub struct TraceSurface {
    trace: Trace,
    faults: Vec<PostFault>,
    /// Posts attempted so far, across the run's processes.
    posts: AtomicU32,
}

impl TraceSurface {
    pub fn new(trace: Trace, scenario: &Scenario) -> Self {
        let faults = scenario
            .faults
            .iter()
            .filter_map(|fault| match fault {
                Fault::PostFails(post) => Some(post.clone()),
                _ => None,
            })
            .collect();
        Self { trace, faults, posts: AtomicU32::new(0) }
    }
}

impl MessengerSurface for TraceSurface {
    fn post(&self, delivery_id: &str, text: &str) -> Result<(), PostError> {
        if self.trace.engine_dead() {
            return Ok(());
        }
        let post = self.posts.fetch_add(1, Ordering::SeqCst) + 1;
        let (delivery, text) = (delivery_id.to_string(), text.to_string());
        match self.faults.iter().find(|fault| in_run(post, fault.post, fault.times)) {
            None => {
                self.trace.record(Event::MessengerPost { delivery: delivery.clone(), text: text.clone() });
                self.trace.cross(Boundary::Post { delivery, text });
                Ok(())
            }
            Some(fault) => {
                let error = fault.error.clone();
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

//! The engine's host: its observability events, its hooks and the chat
//! surface a messenger posts to, into the trace. Hooks and posts fail where
//! the scenario's `hook_throws` and `post_fails` faults say, and posts are
//! answered late where `post_slow` says.

use std::sync::atomic::Ordering;

use turnsim_engine::messenger::{MessengerSurface, PostError};
use turnsim_engine::ports::{ExhaustedContext, HookError};
use turnsim_engine::{EngineEvent, Input, InputSink, Observer};

use super::counted::CountedFaults;
use super::outstanding::Outstanding;
use super::rng::SharedRng;
use crate::history::Boundary;
use crate::scenario::{Counted, Fault, Scenario, SlowPostFault};
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

/// The chat surface a messenger posts to. A post shows (or is refused) the
/// moment the engine makes it; the surface answers at once, or `after_ms`
/// later where a `post_slow` fault says, and the answer reaches the engine
/// only if its process is still alive then.
pub struct TraceSurface {
    trace: Trace,
    /// Posts attempted, and those `post_fails` faults refuse.
    refusals: CountedFaults,
    slow: Vec<SlowPostFault>,
    rng: SharedRng,
    /// Answers not yet given.
    pub answers: Outstanding,
}

impl TraceSurface {
    pub fn new(trace: Trace, scenario: &Scenario, rng: SharedRng) -> Self {
        let slow = scenario
            .faults
            .iter()
            .filter_map(|fault| match fault {
                Fault::PostSlow(slow) => Some(slow.clone()),
                _ => None,
            })
            .collect();
        let refusals = CountedFaults::of(scenario, Counted::Post);
        Self { trace, refusals, slow, rng, answers: Outstanding::default() }
    }
}

impl MessengerSurface for TraceSurface {
    fn post(&self, delivery_id: &str, text: &str, sink: InputSink) -> u32 {
        if self.trace.engine_dead() {
            return 0;
        }
        let (delivery, text) = (delivery_id.to_string(), text.to_string());
        let (post, refused) = self.refusals.count();
        let after_ms = self.slow.iter().find(|slow| slow.slows(post)).map_or(0, |slow| self.rng.sample(slow.after_ms));
        let outcome = match refused {
            None => {
                let event = Event::MessengerPost { delivery: delivery.clone(), text: text.clone(), after_ms };
                self.trace.record(event);
                self.trace.cross(Boundary::Post { post, delivery: delivery.clone(), text });
                Ok(())
            }
            Some(error) => {
                let error = error.to_string();
                let refused = Event::MessengerPostRefused {
                    delivery: delivery.clone(),
                    text: text.clone(),
                    error: error.clone(),
                    after_ms,
                };
                self.trace.record(refused);
                let crossed = Boundary::PostRefused { post, delivery: delivery.clone(), text, error: error.clone() };
                self.trace.cross(crossed);
                Err(PostError(error))
            }
        };
        let answer = Input::PostDone { post, delivery_id: delivery, outcome };
        if after_ms == 0 {
            sink.send(answer);
            return post;
        }
        let done = self.answers.start(&sink);
        tokio::spawn(async move {
            super::pause_ms(after_ms).await;
            sink.send(answer);
            done.store(true, Ordering::SeqCst);
        });
        post
    }
}

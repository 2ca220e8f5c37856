//! The engine's observability events and messenger posts, into the trace.

use turnsim_engine::messenger::MessengerSurface;
use turnsim_engine::{EngineEvent, Observer};

use crate::history::Boundary;
use crate::trace::{Event, Trace};

pub struct TraceObserver(pub Trace);

impl Observer for TraceObserver {
    fn observe(&self, event: EngineEvent) {
        if self.0.engine_dead() {
            return;
        }
        self.0.record(Event::Engine(event));
    }

    fn idle(&self) {
        self.0.poke();
    }

    fn on_exhausted(&self, context: &turnsim_engine::ports::ExhaustedContext) {
        if self.0.engine_dead() {
            return;
        }
        self.0.record(Event::OnExhausted { incident: context.incident_id.clone(), reason: context.reason.clone() });
        self.0.cross(Boundary::Exhausted { context: context.clone() });
    }
}

/// The chat surface a messenger posts to.
pub struct TraceSurface(pub Trace);

impl MessengerSurface for TraceSurface {
    fn post(&self, delivery_id: &str, text: &str) {
        if self.0.engine_dead() {
            return;
        }
        self.0.record(Event::MessengerPost { delivery: delivery_id.to_string(), text: text.to_string() });
        self.0.cross(Boundary::Post { delivery: delivery_id.to_string(), text: text.to_string() });
    }
}

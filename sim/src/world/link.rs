//! The client's link to the engine: a delay on each message either way, and
//! at-least-once delivery of what the client sends (a result or approval
//! delivered twice, as a client that retries its request does).
//!
//! Frames to the client stay in order, as on one WebSocket connection: a
//! frame is never delivered before the one sent ahead of it. What the client
//! sends may overtake earlier sends when `reorder` is on (separate requests
//! race). Delays and duplicates are drawn from the seed.

use std::sync::{Arc, Mutex};

use tokio::time::Duration;

use crate::trace::sim_now;

use super::rng::SharedRng;
use crate::scenario::LinkSpec;

/// Sim time a message arrives, for one direction of the link.
#[derive(Clone)]
pub struct LinkDelay {
    spec: LinkSpec,
    rng: SharedRng,
    /// Sim time the last in-order message arrives: later ones never come sooner.
    last_arrival: Arc<Mutex<Option<Duration>>>,
}

impl LinkDelay {
    pub fn new(spec: LinkSpec, rng: SharedRng) -> Self {
        Self { spec, rng, last_arrival: Arc::default() }
    }

    /// Whether this link changes anything (no draw is made otherwise, so a
    /// scenario without link faults sees the same seeds as before).
    pub fn is_active(&self) -> bool {
        !self.spec.delay_ms.is_zero() || self.spec.duplicate > 0.0
    }

    /// How long a message sent now waits before it arrives; `in_order`
    /// keeps it behind everything sent before it.
    pub fn wait(&self, in_order: bool) -> Duration {
        let now = sim_now();
        let mut arrival = now + Duration::from_millis(self.rng.sample(self.spec.delay_ms));
        let mut last = self.last_arrival.lock().expect("link lock");
        if in_order || !self.spec.reorder {
            if let Some(previous) = *last {
                arrival = arrival.max(previous);
            }
        }
        *last = Some(last.map_or(arrival, |previous| previous.max(arrival)));
        arrival - now
    }

    /// Whether a message the client sends is delivered a second time.
    pub fn duplicates(&self) -> bool {
        self.spec.duplicate > 0.0 && self.rng.chance(self.spec.duplicate)
    }
}

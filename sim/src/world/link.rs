//! The client's link to the engine: a delay on each message either way, and
//! at-least-once delivery of what the client sends (a result or approval
//! delivered twice, as a client that retries its request does).
//!
//! Frames to the client stay in order, as on one WebSocket connection: a
//! frame is never delivered before the one sent ahead of it. What the client
//! sends may overtake earlier sends when `reorder` is on (separate requests
//! race). Delays and duplicates are drawn from the seed.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
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

/// Hands what one sender sends over a slow link to `deliver`, in send
/// order, each at its arrival time. One task drains the queue: tasks woken
/// at the same instant run in a seeded random order, so a task per message
/// would not keep the order. The task runs on the node of whoever sends
/// first, and dies with it: what it still holds is lost in flight, and the
/// next send starts a new task.
pub struct InOrder<T> {
    queue: Mutex<Option<mpsc::UnboundedSender<(Duration, T)>>>,
    deliver: Arc<dyn Fn(T) + Send + Sync>,
}

impl<T: Send + 'static> InOrder<T> {
    pub fn new(deliver: impl Fn(T) + Send + Sync + 'static) -> Self {
        Self { queue: Mutex::new(None), deliver: Arc::new(deliver) }
    }

    /// Sends `item`, to arrive `wait` from now (never before what was sent
    /// earlier: the link's waits already keep arrivals in order).
    pub fn send(&self, wait: Duration, item: T) {
        let arrival = sim_now() + wait;
        let mut queue = self.queue.lock().expect("link queue lock");
        let item = match queue.as_ref() {
            Some(sender) => match sender.send((arrival, item)) {
                Ok(()) => return,
                Err(mpsc::error::SendError((_, item))) => item,
            },
            None => item,
        };
        let (sender, mut receiver) = mpsc::unbounded_channel::<(Duration, T)>();
        let _ = sender.send((arrival, item));
        let deliver = self.deliver.clone();
        tokio::spawn(async move {
            while let Some((arrival, item)) = receiver.recv().await {
                let now = sim_now();
                if arrival > now {
                    tokio::time::sleep(arrival - now).await;
                }
                deliver(item);
            }
        });
        *queue = Some(sender);
    }
}

//! Messenger delivery: a chat surface drives `chat()` with a text-collecting
//! callback and posts the reply exactly once.
//!
//! The callback only reports what happened to the session (it runs inside
//! the session's actor); the session posts through the [`MessengerSurface`]
//! port and checkpoints each delivery durably (`accepted` → `streaming` →
//! `posting` → `completed`), so a restarted process knows whether to
//! answer again, apologise, post what is still owed, or do nothing.
//!
//! The surface port lives with the other ports and a post's limit and
//! splitting in [`crate::post`], below the session and the configuration
//! that use them; both are re-exported here.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::chunk::Chunk;
use crate::client::StreamCallback;

pub use crate::ports::MessengerSurface;
pub use crate::post::{split_text, PostError, POST_SOFT_LIMIT_CHARS};

pub const EMPTY_MESSENGER_RESPONSE: &str = "I couldn't produce a text response. Please try again.";
pub const ERROR_MESSENGER_RESPONSE: &str = "Sorry, I couldn't answer that right now. Please try again.";
pub const INTERRUPTED_MESSENGER_RESPONSE: &str =
    "Sorry, my reply was interrupted. Please send your message again if you'd like me to retry.";

/// What the delivery's callback saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DeliveryEvent {
    FirstText,
    Done {
        text: String,
    },
    Error,
    Interrupted,
    /// `chat()` resolved with no terminal callback: the messenger treats the
    /// turn as finished and posts what it collected.
    Returned {
        text: String,
    },
}

/// Collects text deltas and reports the outcome back to the session.
pub(crate) struct MessengerCallback {
    delivery_id: String,
    text: String,
    terminal: bool,
    reports: Reports,
}

impl MessengerCallback {
    pub fn new(delivery_id: &str, reports: Reports) -> Self {
        Self { delivery_id: delivery_id.to_string(), text: String::new(), terminal: false, reports }
    }

    fn report(&self, event: DeliveryEvent) {
        self.reports.push(&self.delivery_id, event);
    }
}

impl StreamCallback for MessengerCallback {
    fn on_start(&mut self, _request_id: &str) {}

    fn on_event(&mut self, chunk: &Chunk) {
        if let Chunk::TextDelta { delta, .. } = chunk {
            if self.text.is_empty() && !delta.is_empty() {
                self.report(DeliveryEvent::FirstText);
            }
            self.text.push_str(delta);
        }
    }

    fn on_reset(&mut self, text: &str) {
        self.text = text.to_string();
    }

    fn on_done(&mut self) {
        self.terminal = true;
        let text = std::mem::take(&mut self.text);
        self.report(DeliveryEvent::Done { text });
    }

    fn on_error(&mut self, _message: &str) {
        self.terminal = true;
        self.report(DeliveryEvent::Error);
    }

    fn on_interrupted(&mut self) {
        self.terminal = true;
        self.report(DeliveryEvent::Interrupted);
    }
}

/// The turn let go of the callback: without a terminal call, `chat()` has
/// resolved cleanly as far as the messenger can tell. (When the process
/// dies, nobody is left to read the report.)
impl Drop for MessengerCallback {
    fn drop(&mut self) {
        if !self.terminal {
            let text = std::mem::take(&mut self.text);
            self.report(DeliveryEvent::Returned { text });
        }
    }
}

/// What messenger callbacks report while the session calls them; the
/// session handles each once the call that caused it has returned.
#[derive(Clone, Default)]
pub(crate) struct Reports(Arc<Mutex<VecDeque<(String, DeliveryEvent)>>>);

impl Reports {
    pub fn push(&self, delivery_id: &str, event: DeliveryEvent) {
        self.0.lock().expect("reports lock").push_back((delivery_id.to_string(), event));
    }

    pub fn take(&self) -> Option<(String, DeliveryEvent)> {
        self.0.lock().expect("reports lock").pop_front()
    }
}

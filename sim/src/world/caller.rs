//! The `chat()` caller's side of the stream callback: every callback is
//! traced as the caller sees it. A callback dropped without a terminal call
//! is traced too: after an eviction that is the transport break the caller
//! observes; otherwise it is a turn that ended silently.

use turnsim_engine::{Chunk, StreamCallback};

use crate::trace::{Event, Trace};

pub struct SimCallback {
    chat: u32,
    trace: Trace,
    terminal: bool,
}

impl SimCallback {
    pub fn new(chat: u32, trace: Trace) -> Self {
        Self { chat, trace, terminal: false }
    }
}

impl StreamCallback for SimCallback {
    fn on_start(&mut self, request_id: &str) {
        self.trace.record(Event::CallbackStart { chat: self.chat, request_id: request_id.to_string() });
    }

    fn on_event(&mut self, chunk: &Chunk) {
        self.trace.record(Event::CallbackEvent { chat: self.chat, chunk: chunk.kind().to_string() });
    }

    fn on_done(&mut self) {
        self.terminal = true;
        self.trace.record(Event::CallbackDone { chat: self.chat });
    }

    fn on_error(&mut self, message: &str) {
        self.terminal = true;
        self.trace.record(Event::CallbackError { chat: self.chat, message: message.to_string() });
    }

    fn on_interrupted(&mut self) {
        self.terminal = true;
        self.trace.record(Event::CallbackInterrupted { chat: self.chat });
    }
}

impl Drop for SimCallback {
    fn drop(&mut self) {
        if !self.terminal {
            self.trace.record(Event::CallbackDropped { chat: self.chat, terminal: false });
        }
    }
}

//! The `chat()` caller's side of the stream callback: every callback is
//! traced as the caller sees it. A callback dropped without a terminal call
//! is traced too: after an eviction that is the transport break the caller
//! observes; otherwise it is a turn that ended silently.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use turnsim_engine::{Chunk, StreamCallback};

use crate::history::{Boundary, CallbackCall};
use crate::trace::{Event, Trace};

pub struct SimCallback {
    chat: u32,
    trace: Trace,
    terminal: bool,
    /// Chats still waiting for their outcome: the world is not quiescent
    /// while one waits (a callback stuck in a dead process's inbox is
    /// released, and traced, when that process's tasks are dropped).
    open_chats: Arc<AtomicUsize>,
}

impl SimCallback {
    pub fn new(chat: u32, trace: Trace, open_chats: Arc<AtomicUsize>) -> Self {
        open_chats.fetch_add(1, Ordering::SeqCst);
        Self { chat, trace, terminal: false, open_chats }
    }

    fn cross(&self, call: CallbackCall) {
        self.trace.cross(Boundary::Callback { chat: self.chat, call });
    }

    fn settle(&mut self) {
        if !std::mem::replace(&mut self.terminal, true) {
            self.open_chats.fetch_sub(1, Ordering::SeqCst);
            self.trace.poke();
        }
    }
}

impl StreamCallback for SimCallback {
    fn on_start(&mut self, request_id: &str) {
        if self.trace.engine_dead() {
            return;
        }
        self.trace.record(Event::CallbackStart { chat: self.chat, request_id: request_id.to_string() });
        self.cross(CallbackCall::Start { request_id: request_id.to_string() });
    }

    fn on_event(&mut self, chunk: &Chunk) {
        if self.trace.engine_dead() {
            return;
        }
        self.trace.record(Event::CallbackEvent { chat: self.chat, chunk: chunk.kind().to_string() });
        self.cross(CallbackCall::Event { chunk: chunk.clone() });
    }

    fn on_reset(&mut self, text: &str) {
        if self.trace.engine_dead() {
            return;
        }
        self.trace.record(Event::CallbackReset { chat: self.chat, text: text.to_string() });
        self.cross(CallbackCall::Reset { text: text.to_string() });
    }

    fn on_done(&mut self) {
        if self.trace.engine_dead() {
            return;
        }
        self.settle();
        self.trace.record(Event::CallbackDone { chat: self.chat });
        self.cross(CallbackCall::Done);
    }

    fn on_error(&mut self, message: &str) {
        if self.trace.engine_dead() {
            return;
        }
        self.settle();
        self.trace.record(Event::CallbackError { chat: self.chat, message: message.to_string() });
        self.cross(CallbackCall::Error { message: message.to_string() });
    }

    fn on_interrupted(&mut self) {
        if self.trace.engine_dead() {
            return;
        }
        self.settle();
        self.trace.record(Event::CallbackInterrupted { chat: self.chat });
        self.cross(CallbackCall::Interrupted);
    }
}

impl Drop for SimCallback {
    fn drop(&mut self) {
        if !self.terminal {
            self.trace.record(Event::CallbackDropped { chat: self.chat, terminal: false });
            self.cross(CallbackCall::Dropped);
            self.settle();
        }
    }
}

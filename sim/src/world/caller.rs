//! The `chat()` caller's side of the stream callback: every callback is
//! traced as the caller sees it. A callback dropped without a terminal call
//! is traced too: after an eviction that is the transport break the caller
//! observes; otherwise it is a turn that ended silently.
//!
//! The engine holds a [`CallerEnd`]; the caller's [`SimCallback`] is behind
//! it. On a slow caller link each call waits out the link's delay, in order
//! (one RPC session), and a call still in flight when the engine's process
//! dies is lost with it (its task runs there). A `chat()` call the link
//! delivers twice hands the engine two ends of the same callback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use turnsim_engine::{Chunk, StreamCallback};

use super::link::{InOrder, LinkDelay};
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

    /// A callback call reaches the caller; `sent_at` is where the engine
    /// made it, when the link held it back.
    fn receive(&mut self, call: CallbackCall, sent_at: Option<usize>) {
        if self.trace.engine_dead() {
            return;
        }
        let chat = self.chat;
        let event = match &call {
            CallbackCall::Start { request_id } => Event::CallbackStart { chat, request_id: request_id.clone() },
            CallbackCall::Event { chunk } => Event::CallbackEvent { chat, chunk: chunk.kind().to_string() },
            CallbackCall::Reset { text } => Event::CallbackReset { chat, text: text.clone() },
            CallbackCall::Done => Event::CallbackDone { chat },
            CallbackCall::Error { message } => Event::CallbackError { chat, message: message.clone() },
            CallbackCall::Interrupted => Event::CallbackInterrupted { chat },
            CallbackCall::Dropped => Event::CallbackDropped { chat, terminal: self.terminal },
        };
        if matches!(call, CallbackCall::Done | CallbackCall::Error { .. } | CallbackCall::Interrupted) {
            self.settle();
        }
        self.trace.record(event);
        self.trace.cross(Boundary::Callback { chat, call, sent_at });
    }

    fn settle(&mut self) {
        if !std::mem::replace(&mut self.terminal, true) {
            self.open_chats.fetch_sub(1, Ordering::SeqCst);
            self.trace.poke();
        }
    }
}

impl Drop for SimCallback {
    fn drop(&mut self) {
        if !self.terminal {
            self.trace.record(Event::CallbackDropped { chat: self.chat, terminal: false });
            self.trace.cross(Boundary::Callback { chat: self.chat, call: CallbackCall::Dropped, sent_at: None });
            self.settle();
        }
    }
}

/// The engine's end of one `chat()` call's callback.
pub struct CallerEnd {
    caller: Arc<Mutex<SimCallback>>,
    /// The link back to the caller, when it has faults: each call with
    /// where in the history it was made.
    slow: Option<(LinkDelay, InOrder<(CallbackCall, usize)>)>,
    trace: Trace,
}

impl CallerEnd {
    pub fn new(caller: Arc<Mutex<SimCallback>>, link: Option<LinkDelay>, trace: Trace) -> Self {
        let slow = link.map(|link| {
            let caller = caller.clone();
            let deliver = move |(call, sent_at)| caller.lock().expect("caller lock").receive(call, Some(sent_at));
            (link, InOrder::new(deliver))
        });
        Self { caller, slow, trace }
    }

    fn send(&self, call: CallbackCall) {
        match &self.slow {
            Some((link, queue)) => queue.send(link.wait(true), (call, self.trace.crossing_count())),
            None => self.caller.lock().expect("caller lock").receive(call, None),
        }
    }
}

impl StreamCallback for CallerEnd {
    fn on_start(&mut self, request_id: &str) {
        self.send(CallbackCall::Start { request_id: request_id.to_string() });
    }

    fn on_event(&mut self, chunk: &Chunk) {
        self.send(CallbackCall::Event { chunk: chunk.clone() });
    }

    fn on_reset(&mut self, text: &str) {
        self.send(CallbackCall::Reset { text: text.to_string() });
    }

    fn on_done(&mut self) {
        self.send(CallbackCall::Done);
    }

    fn on_error(&mut self, message: &str) {
        self.send(CallbackCall::Error { message: message.to_string() });
    }

    fn on_interrupted(&mut self) {
        self.send(CallbackCall::Interrupted);
    }
}

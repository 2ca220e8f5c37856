//! Where the world finds the engine: the live process, or nothing while it
//! is evicted. Every input the world hands the engine goes through an
//! [`EngineLink`].

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use turnsim_engine::ports::{Connection, StreamCallback};
use turnsim_engine::{Activity, SessionHandle, ToolResult, TurnOptions};

use super::taken::SentAnswers;
use crate::history::Boundary;
use crate::trace::Trace;

#[derive(Clone)]
pub struct Switchboard {
    engine: Arc<Mutex<Option<SessionHandle>>>,
    /// Bumped at every install and clear: a link from before is stale.
    generation: Arc<std::sync::atomic::AtomicU64>,
    installed: Arc<Notify>,
    trace: Trace,
    answers: SentAnswers,
}

impl Switchboard {
    pub fn new(trace: Trace) -> Self {
        let (engine, generation, installed) = Default::default();
        Self { engine, generation, installed, trace, answers: SentAnswers::default() }
    }

    /// Who sent each answer still in the live process's inbox.
    pub fn answers(&self) -> SentAnswers {
        self.answers.clone()
    }

    pub fn install(&self, handle: SessionHandle) {
        *self.engine.lock().expect("switchboard lock") = Some(handle);
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.installed.notify_waiters();
    }

    pub fn trace(&self) -> Trace {
        self.trace.clone()
    }

    /// A new engine process is starting: the last one's death is behind it.
    pub fn revive(&self) {
        self.trace.engine_revived();
        self.answers.clear();
    }

    pub fn clear(&self) {
        *self.engine.lock().expect("switchboard lock") = None;
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The live engine, if the process is up.
    pub fn engine(&self) -> Option<EngineLink> {
        if self.trace.engine_dead() {
            return None;
        }
        let handle = self.engine.lock().expect("switchboard lock").clone().filter(SessionHandle::is_alive)?;
        let generation = self.generation.load(std::sync::atomic::Ordering::SeqCst);
        let (trace, current, answers) = (self.trace.clone(), self.generation.clone(), self.answers.clone());
        Some(EngineLink { handle, trace, generation, current, answers })
    }

    /// The live engine, waiting for the process to (re)start if it is down.
    pub async fn wait_for_engine(&self) -> EngineLink {
        loop {
            // Created before the check, so an install in between still wakes it.
            let installed = self.installed.notified();
            if let Some(engine) = self.engine() {
                return engine;
            }
            installed.await;
        }
    }
}

/// The world's end of the engine's inputs. Each method returns whether the
/// process's inbox took the input; an input enters the history when the
/// engine takes it from there (see `taken`), except a `chat()` call, which
/// the caller makes whether or not anyone answers.
#[derive(Clone)]
pub struct EngineLink {
    handle: SessionHandle,
    trace: Trace,
    /// The switchboard's generation when this link was made, and its now.
    generation: u64,
    current: Arc<std::sync::atomic::AtomicU64>,
    answers: SentAnswers,
}

impl EngineLink {
    /// Which process this link reaches (a new one after every restart).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn connect(&self, connection: u64, end: Box<dyn Connection>) -> bool {
        self.handle.connect(connection, end)
    }

    pub fn disconnect(&self, connection: u64) -> bool {
        self.handle.disconnect(connection)
    }

    pub fn resume_request(&self, connection: u64) -> bool {
        self.handle.resume_request(connection)
    }

    pub fn resume_ack(&self, connection: u64, request_id: &str) -> bool {
        self.handle.resume_ack(connection, request_id)
    }

    pub fn user_message(&self, text: &str, options: TurnOptions) -> bool {
        self.handle.user_message(text, options)
    }

    /// `again`: the caller's link delivers call `chat` a second time.
    pub fn chat(
        &self,
        chat: u32,
        again: bool,
        text: &str,
        options: TurnOptions,
        callback: Box<dyn StreamCallback>,
    ) -> bool {
        // The RPC leaves later than the link was made: a process evicted in
        // between never gets it (the dropped callback is the transport break).
        if self.current.load(std::sync::atomic::Ordering::SeqCst) != self.generation {
            return false;
        }
        self.trace.cross(Boundary::Chat { chat, text: text.into(), again });
        self.handle.chat(&format!("chat{chat}"), text, options, callback)
    }

    pub fn deliver(&self, delivery: &str, text: &str) -> bool {
        self.handle.deliver(delivery, text)
    }

    /// A client's result, sent over `connection`.
    pub fn tool_result(&self, result: ToolResult, auto_continue: bool, connection: u64) -> bool {
        let call_id = result.call_id.clone();
        self.answer(&call_id, connection, || self.handle.tool_result(result, auto_continue))
    }

    /// A client's approval or denial, sent over `connection`.
    pub fn approval(&self, call_id: &str, approved: bool, auto_continue: bool, connection: u64) -> bool {
        self.answer(call_id, connection, || self.handle.approval(call_id, approved, auto_continue))
    }

    /// Puts an answer to `call_id` in the inbox with `send`, noting who
    /// sent it first (the engine may take it at once).
    fn answer(&self, call_id: &str, connection: u64, send: impl FnOnce() -> bool) -> bool {
        self.answers.sent(call_id, connection);
        let taken = send();
        if !taken {
            self.answers.unsent(call_id);
        }
        taken
    }

    pub fn activity(&self) -> Activity {
        self.handle.activity()
    }
}

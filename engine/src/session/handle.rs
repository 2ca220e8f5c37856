//! The session's public face: how a host (or a simulator) talks to an
//! engine. The driver here runs any [`Engine`] in lockstep: one input at a
//! time, from one inbox, and a timer when the engine asks for one.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::Session;
use crate::clock::Instant;
use crate::config::{EngineConfig, TurnOptions};
use crate::ports::{Connection, Ports, StreamCallback};
use crate::seam::{Engine, Input, InputSink};
use crate::transcript::ToolResult;

/// What a driver knows of its engine from the outside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// The engine has booted (loaded its state and recovered what it had to).
    pub booted: bool,
    /// The earliest time the engine asked to be woken at.
    pub next_timer: Option<Instant>,
    /// Inputs sent to the engine that it has not handled yet.
    pub inputs_waiting: usize,
}

impl Activity {
    /// Nothing waits in the inbox and no timer is armed: the engine sleeps
    /// until someone sends it something.
    pub fn is_idle(&self) -> bool {
        self.booted && self.next_timer.is_none() && self.inputs_waiting == 0
    }
}

/// A cheap, cloneable handle to a running engine.
#[derive(Clone)]
pub struct SessionHandle {
    inbox: InputSink,
    published: Arc<Mutex<Activity>>,
}

impl SessionHandle {
    /// Boots the built-in engine from its durable store and drives it on
    /// the current task context (the process that hosts it).
    pub fn spawn(config: EngineConfig, ports: Ports) -> Self {
        let observer = ports.observer.clone();
        Self::drive(move |sink| Box::new(Session::boot(config, ports, sink)), move || observer.idle())
    }

    /// Drives the engine `boot` returns, on a task of its own: boot, then
    /// one input at a time until the process dies. `on_idle` is told each
    /// time the engine goes idle.
    pub fn drive(
        boot: impl FnOnce(InputSink) -> Box<dyn Engine> + Send + 'static,
        on_idle: impl Fn() + Send + 'static,
    ) -> Self {
        let (sink, inbox) = InputSink::channel();
        let published = Arc::new(Mutex::new(Activity::default()));
        let driver = Driver { sink: sink.clone(), inbox, published: published.clone(), on_idle: Box::new(on_idle) };
        tokio::spawn(driver.run(boot));
        Self { inbox: sink, published }
    }

    /// Returns false when the engine's process is gone.
    fn send(&self, input: Input) -> bool {
        self.inbox.send(input)
    }

    pub fn is_alive(&self) -> bool {
        !self.inbox.is_closed()
    }

    pub fn activity(&self) -> Activity {
        let mut activity = *self.published.lock().expect("activity lock");
        activity.inputs_waiting = self.inbox.waiting();
        activity
    }
    pub fn connect(&self, connection_id: u64, connection: Box<dyn Connection>) -> bool {
        self.send(Input::Connect { connection_id, connection })
    }

    pub fn disconnect(&self, connection_id: u64) -> bool {
        self.send(Input::Disconnect { connection_id })
    }

    pub fn resume_request(&self, connection_id: u64) -> bool {
        self.send(Input::ResumeRequest { connection_id })
    }

    pub fn resume_ack(&self, connection_id: u64, request_id: &str) -> bool {
        self.send(Input::ResumeAck { connection_id, request_id: request_id.to_string() })
    }

    /// A user message over a client connection; the reply is broadcast.
    pub fn user_message(&self, text: &str, options: TurnOptions) -> bool {
        self.send(Input::UserMessage { text: text.to_string(), options })
    }

    /// The `chat()` RPC: the reply goes to `callback`.
    pub fn chat(&self, key: &str, text: &str, options: TurnOptions, callback: Box<dyn StreamCallback>) -> bool {
        self.send(Input::Chat { key: key.to_string(), text: text.to_string(), options, callback })
    }

    /// A messenger delivery: the engine drives `chat()` with a
    /// text-collecting callback and posts the reply once through the
    /// messenger surface port.
    pub fn deliver(&self, delivery_id: &str, text: &str) -> bool {
        self.send(Input::Deliver { delivery_id: delivery_id.to_string(), text: text.to_string() })
    }

    pub fn tool_result(&self, result: ToolResult, auto_continue: bool) -> bool {
        self.send(Input::ToolResult { result, auto_continue })
    }

    pub fn approval(&self, call_id: &str, approved: bool, auto_continue: bool) -> bool {
        self.send(Input::Approval { call_id: call_id.to_string(), approved, auto_continue })
    }
}

struct Driver {
    sink: InputSink,
    inbox: mpsc::UnboundedReceiver<Input>,
    published: Arc<Mutex<Activity>>,
    on_idle: Box<dyn Fn() + Send>,
}

impl Driver {
    async fn run(mut self, boot: impl FnOnce(InputSink) -> Box<dyn Engine>) {
        let mut engine = boot(self.sink.clone());
        loop {
            self.publish(engine.next_timer());
            tokio::select! {
                biased;
                Some(input) = self.inbox.recv() => {
                    if engine.takes_batches() {
                        self.deliver_waiting(engine.as_mut(), input);
                    } else {
                        engine.deliver(input);
                        self.sink.handled();
                    }
                }
                _ = sleep_until(engine.next_timer()) => engine.deliver(Input::Timer),
            }
        }
    }

    /// `first` and every input already waiting behind it, in one batch:
    /// no task runs between them either way (what the engine's effects set
    /// off in the world queues behind them), so the order is the same.
    fn deliver_waiting(&mut self, engine: &mut dyn Engine, first: Input) {
        let mut inputs = vec![first];
        while let Ok(input) = self.inbox.try_recv() {
            inputs.push(input);
        }
        let taken = inputs.len();
        engine.deliver_batch(inputs, &mut |_| {});
        for _ in 0..taken {
            self.sink.handled();
        }
    }

    fn publish(&self, next_timer: Option<Instant>) {
        let activity = Activity { booted: true, next_timer, inputs_waiting: self.sink.waiting() };
        *self.published.lock().expect("activity lock") = activity;
        if activity.is_idle() {
            (self.on_idle)();
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

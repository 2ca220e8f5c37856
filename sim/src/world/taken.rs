//! Inputs enter the boundary history when the engine takes them, not when
//! they are sent: a chunk or a tool result still waiting in the inbox of a
//! process that dies was never seen by any engine, and the oracle must not
//! judge the engine as if it had been.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use turnsim_engine::{Engine, Input, ModelEvent, StreamError};

use crate::history::{Boundary, StreamEnd};
use crate::trace::Trace;

/// Records each input as the engine it wraps takes it.
pub struct Taken {
    engine: Box<dyn Engine>,
    trace: Trace,
    answers: SentAnswers,
}

impl Taken {
    pub fn wrap(engine: Box<dyn Engine>, trace: Trace, answers: SentAnswers) -> Box<dyn Engine> {
        Box::new(Self { engine, trace, answers })
    }
}

/// The connection each tool result or approval in the process's inbox was
/// sent over, per call in sending order: the engine's input does not say,
/// and the history records it (a client shows its own answer once it
/// sends it, as a UI does).
#[derive(Clone, Default)]
pub struct SentAnswers(Arc<Mutex<BTreeMap<String, VecDeque<u64>>>>);

impl SentAnswers {
    /// An answer to `call_id` leaves over `connection`.
    pub fn sent(&self, call_id: &str, connection: u64) {
        self.lock().entry(call_id.to_string()).or_default().push_back(connection);
    }

    /// The answer just sent never reached an inbox.
    pub fn unsent(&self, call_id: &str) {
        self.pop(call_id, VecDeque::pop_back);
    }

    /// A new process: whatever the last one's inbox held died with it.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The engine takes the oldest answer to `call_id` from its inbox.
    fn taken(&self, call_id: &str) -> Option<u64> {
        self.pop(call_id, VecDeque::pop_front)
    }

    /// Takes one end of `call_id`'s queue, forgetting the call once none is left.
    fn pop(&self, call_id: &str, end: fn(&mut VecDeque<u64>) -> Option<u64>) -> Option<u64> {
        let mut sent = self.lock();
        let queue = sent.get_mut(call_id)?;
        let connection = end(queue);
        if queue.is_empty() {
            sent.remove(call_id);
        }
        connection
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, VecDeque<u64>>> {
        self.0.lock().expect("sent answers lock")
    }
}

impl Engine for Taken {
    fn deliver(&mut self, input: Input) {
        if self.trace.engine_dead() {
            // The process died (at an event, its kill still on the way): it
            // takes nothing more.
            return;
        }
        if let Some(crossed) = boundary(&input, &self.answers) {
            self.trace.cross(crossed);
        }
        self.engine.deliver(input);
    }

    fn takes_batches(&self) -> bool {
        self.engine.takes_batches()
    }

    /// Each input enters the history as the engine reaches it, unless its
    /// process died at what the inputs before it set off: then, as one by
    /// one, it took nothing more (what it still does reaches nothing).
    fn deliver_batch(&mut self, inputs: Vec<Input>, taking: &mut dyn FnMut(usize)) {
        if self.trace.engine_dead() {
            return;
        }
        let mut crossed: Vec<Option<Boundary>> = inputs.iter().map(|input| boundary(input, &self.answers)).collect();
        let trace = self.trace.clone();
        self.engine.deliver_batch(inputs, &mut |at| {
            if !trace.engine_dead() {
                if let Some(crossed) = crossed[at].take() {
                    trace.cross(crossed);
                }
            }
            taking(at);
        });
    }

    fn next_timer(&self) -> Option<Instant> {
        self.engine.next_timer()
    }
}

/// What the history records of an input (a `chat()` call is recorded when
/// the caller makes it; timers are the engine's own).
fn boundary(input: &Input, answers: &SentAnswers) -> Option<Boundary> {
    Some(match input {
        Input::Connect { connection_id, .. } => Boundary::Connect { connection: *connection_id },
        Input::Disconnect { connection_id } => Boundary::Disconnect { connection: *connection_id },
        Input::ResumeRequest { connection_id } => Boundary::ResumeRequest { connection: *connection_id },
        Input::ResumeAck { connection_id, request_id } => {
            Boundary::ResumeAck { connection: *connection_id, request_id: request_id.clone() }
        }
        Input::UserMessage { text, .. } => Boundary::UserMessage { text: text.clone() },
        Input::Deliver { delivery_id, text } => Boundary::Deliver { delivery: delivery_id.clone(), text: text.clone() },
        Input::ToolResult { result, auto_continue } => Boundary::ToolResult {
            result: result.clone(),
            auto_continue: *auto_continue,
            connection: answers.taken(&result.call_id),
        },
        Input::Approval { call_id, approved, auto_continue } => Boundary::Approval {
            call_id: call_id.clone(),
            approved: *approved,
            auto_continue: *auto_continue,
            connection: answers.taken(call_id),
        },
        Input::Model { call, event: ModelEvent::Chunk(chunk) } => {
            Boundary::ModelChunk { call: *call, chunk: chunk.clone() }
        }
        Input::Model { call, event: ModelEvent::Failed(StreamError::Cut) } => {
            Boundary::ModelEnd { call: *call, end: StreamEnd::Cut }
        }
        Input::Model { call, event: ModelEvent::Failed(StreamError::Http { status, message }) } => {
            Boundary::ModelEnd { call: *call, end: StreamEnd::Http { status: *status, message: message.clone() } }
        }
        Input::ServerToolDone { call_id, outcome: Some(outcome), .. } => {
            Boundary::ServerToolDone { call_id: call_id.clone(), outcome: outcome.clone() }
        }
        Input::PostDone { post, delivery_id, outcome } => Boundary::PostDone {
            post: *post,
            delivery: delivery_id.clone(),
            error: outcome.as_ref().err().map(|error| error.0.clone()),
        },
        Input::Chat { .. }
        | Input::Model { event: ModelEvent::Closed, .. }
        | Input::ServerToolDone { outcome: None, .. }
        | Input::Timer => return None,
    })
}

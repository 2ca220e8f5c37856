//! A Rust engine of one's own, in the same world: a small example engine
//! (one user message → one model call → the reply streamed and stored)
//! implements `turnsim_engine::Engine` and runs through the same seam the
//! built-in engine goes through, judged by the same invariants. This is
//! the quick start for a Rust team; a broken variant shows the oracle
//! judges it, not the built-in engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use turnsim::check::check_run;
use turnsim::world::{run_with_engine, BootEngine};
use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::{Connection, Frame, ModelRequest, Ports};
use turnsim_engine::transcript::TextState;
use turnsim_engine::{Chunk, Engine, Input, InputSink, Message, ModelEvent, Part, RegressionSet, Role};

use crate::common::inline;

/// The example engine. `forget_reply` breaks it: the reply is never stored.
struct Echo {
    ports: Ports,
    sink: InputSink,
    state: DurableState,
    connections: BTreeMap<u64, Box<dyn Connection>>,
    /// The model call streaming now, and the message it streams into.
    streaming: Option<(u32, String, Message)>,
    forget_reply: bool,
}

impl Echo {
    fn boot(ports: Ports, sink: InputSink, forget_reply: bool) -> Box<dyn Engine> {
        let state = ports.store.load();
        Box::new(Self { ports, sink, state, connections: BTreeMap::new(), streaming: None, forget_reply })
    }

    fn commit(&mut self, writes: Vec<Write>) {
        if self.ports.store.commit(&writes).is_ok() {
            writes.iter().for_each(|write| self.state.apply(write));
        }
    }

    fn broadcast(&mut self, frame: Frame) {
        self.connections.retain(|_, connection| connection.send(frame.clone()));
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        let next = self.state.next_id + 1;
        self.commit(vec![Write::NextId(next)]);
        format!("{prefix}{next}")
    }

    fn user_message(&mut self, text: String) {
        let id = self.fresh_id("m");
        let part = Part::Text { id: "t".into(), text, state: TextState::Done };
        let user = Message { id, role: Role::User, parts: vec![part].into() };
        self.commit(vec![Write::PutMessage(user)]);
        self.broadcast(Frame::Messages(self.state.messages.clone()));
        let (request_id, reply_id) = (self.fresh_id("r"), self.fresh_id("m"));
        let reply = Message { id: reply_id, role: Role::Assistant, parts: vec![Part::StepStart].into() };
        // The model is shown the transcript with the message it streams
        // into: the oracle ties the call to that message by its id.
        let mut messages = self.state.messages.clone();
        messages.push(reply.clone());
        let request = ModelRequest { request_id: request_id.clone(), step: 1, continuation: false, messages };
        let call = self.ports.model.start(request, self.sink.clone());
        self.streaming = Some((call, request_id, reply));
    }

    fn model_event(&mut self, call: u32, event: ModelEvent) {
        let Some((streaming, request_id, mut reply)) = self.streaming.take() else { return };
        if streaming != call {
            self.streaming = Some((streaming, request_id, reply));
            return;
        }
        match event {
            ModelEvent::Chunk(Chunk::FinishStep { .. }) => {
                reply.settle_text();
                if !self.forget_reply {
                    self.commit(vec![Write::PutMessage(reply)]);
                }
                self.broadcast(Frame::Done { request_id, continuation: false });
            }
            ModelEvent::Chunk(chunk) => {
                reply.apply_chunk(&chunk);
                let frame = Frame::Chunk { request_id: request_id.clone(), message_id: reply.id.clone(), chunk };
                self.broadcast(frame);
                self.streaming = Some((streaming, request_id, reply));
            }
            ModelEvent::Failed(error) => self.broadcast(Frame::Error { request_id, message: error.message() }),
            ModelEvent::Closed => {}
        }
    }
}

impl Engine for Echo {
    fn deliver(&mut self, input: Input) {
        match input {
            Input::Connect { connection_id, connection } => {
                connection.send(Frame::Messages(self.state.messages.clone()));
                self.connections.insert(connection_id, connection);
            }
            Input::Disconnect { connection_id } => {
                self.connections.remove(&connection_id);
            }
            Input::UserMessage { text, .. } => self.user_message(text),
            Input::Model { call, event } => self.model_event(call, event),
            _ => {}
        }
    }

    fn next_timer(&self) -> Option<tokio::time::Instant> {
        None
    }
}

const STORY: &str = r#"
name: rust-engine-story
seeds: 8
model:
  - [ { text: "Hello from a Rust engine." }, { finish: { reason: stop } } ]
actions:
  - at_ms: 0
    user_message: { text: "hi" }
expect:
  model_calls: 1
  final_text: "Hello from a Rust engine."
"#;

fn booted(forget_reply: bool) -> BootEngine {
    Arc::new(move |_config, ports, sink| Echo::boot(ports, sink, forget_reply))
}

#[test]
fn an_engine_written_in_rust_runs_in_the_world_and_passes_every_check() {
    let file = inline(STORY);
    for seed in 0..8 {
        let record = run_with_engine(&file, seed, &RegressionSet::default(), booted(false));
        let violations = check_run(&file, &record);
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        assert!(record.history.crossings.len() > 5, "seed {seed}: the engine's crossings were recorded");
    }
}

#[test]
fn the_oracle_judges_that_engine_by_its_boundary() {
    let file = inline(STORY);
    let record = run_with_engine(&file, 0, &RegressionSet::default(), booted(true));
    let violations = check_run(&file, &record);
    let named: Vec<&str> = violations.iter().map(|violation| violation.check.as_str()).collect();
    assert!(named.contains(&"expect.final_text"), "the reply it never stored is missed: {violations:?}");
    assert!(named.iter().any(|check| !check.starts_with("expect.")), "an invariant fires too: {violations:?}");
}

#[test]
fn the_adversary_stands_between_a_rust_engine_and_the_world_too() {
    use turnsim::adversary::interpose::{Adversary, Interpose, Mode};
    use turnsim::adversary::Operator;
    use turnsim::world::with_interposer;
    let file = inline(STORY);
    let run = |mode| {
        let adversary = Adversary::new(mode);
        let record = with_interposer(Arc::new(Interpose(adversary.clone())), || {
            run_with_engine(&file, 0, &RegressionSet::default(), booted(false))
        });
        (record, adversary)
    };
    let (counted, adversary) = run(Mode::Count);
    assert!(check_run(&file, &counted).is_empty(), "counting changes nothing");
    let sites = adversary.sites();
    // Any operator but reorder-frames, which needs the chunk it holds found first.
    let (&operator, _) = sites
        .iter()
        .find(|(operator, count)| **count > 0 && **operator != Operator::ReorderFrames)
        .expect("the engine's effects passed the adversary");
    let (mutated, adversary) = run(Mode::Apply { operator, site: 0 });
    assert!(adversary.applied().is_some(), "{} rewrote the Rust engine's effect", operator.name());
    assert_ne!(
        format!("{:?}", counted.history.crossings),
        format!("{:?}", mutated.history.crossings),
        "{}: what crossed the boundary changed",
        operator.name()
    );
}

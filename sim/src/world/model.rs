//! The scripted mock model. Each call plays its script on the model node:
//! chunks, sleeps, a park, a cut, an HTTP error. Like a real provider it
//! rejects a request holding a tool call without a result, and answers a
//! request that ends in a half-streamed tool call as the scenario's
//! `provider.dangling_tool_call` says (by default, with nothing).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use madsim::runtime::NodeHandle;
use turnsim_engine::ports::{ModelProvider, ModelRequest};
use turnsim_engine::{Chunk, FinishReason, Input, InputSink, ModelEvent, Part, Role, StreamError, ToolState, Usage};

use super::rng::SharedRng;
use crate::history::{Boundary, StreamEnd};
use crate::scenario::{DanglingToolCall, Op, ScenarioFile};
use crate::trace::{Event, Trace};

pub struct MockModel {
    calls: Vec<Vec<Op>>,
    dangling: DanglingToolCall,
    next_call: AtomicU32,
    streams: Streams,
    node: NodeHandle,
    rng: SharedRng,
    trace: Trace,
}

impl MockModel {
    pub fn new(scenario: &ScenarioFile, node: NodeHandle, rng: SharedRng, trace: Trace) -> Self {
        Self {
            calls: scenario.calls.clone(),
            dangling: scenario.scenario.provider.dangling_tool_call,
            next_call: AtomicU32::new(0),
            streams: Streams::default(),
            node,
            rng,
            trace,
        }
    }

    fn script(&self, call: u32, request: &ModelRequest) -> Vec<Op> {
        if ends_mid_tool_input(request) {
            // The provider sees a dangling partial call: the scenario says
            // what it makes of it.
            match self.dangling {
                DanglingToolCall::EmptyFinish => {
                    return vec![Op::Finish { reason: FinishReason::Unknown, output_tokens: Some(0) }]
                }
                DanglingToolCall::Reject => {
                    let message = "the last tool call's input is incomplete".to_string();
                    return vec![Op::Http { status: 400, message }];
                }
                DanglingToolCall::Script => {}
            }
        }
        self.calls.get(call as usize - 1).cloned().unwrap_or_else(crate::scenario::default_reply)
    }

    /// Whether a call is still streaming to an engine that waits for it.
    pub fn is_streaming(&self) -> bool {
        self.streams.any_open()
    }
}

/// Each open call's stream: where it goes. A call leaves the map when its
/// stream is over for the engine (ended, or let go of), and a stream whose
/// engine process is gone is dropped when next seen, so the world's
/// settle test looks only at the streams still open, not at every call of a
/// long session.
#[derive(Clone, Default)]
struct Streams(Arc<Mutex<BTreeMap<u32, InputSink>>>);

impl Streams {
    fn open(&self, call: u32, sink: InputSink) {
        self.0.lock().expect("streams lock").insert(call, sink);
    }

    fn close(&self, call: u32) {
        self.0.lock().expect("streams lock").remove(&call);
    }

    /// Delivers `event` unless the engine let go of the call or its process
    /// is gone (as a send on a dropped HTTP stream fails).
    fn send(&self, call: u32, event: ModelEvent) -> bool {
        let streams = self.0.lock().expect("streams lock");
        streams.get(&call).is_some_and(|sink| sink.send(Input::Model { call, event }))
    }

    fn is_abandoned(&self, call: u32) -> bool {
        let streams = self.0.lock().expect("streams lock");
        streams.get(&call).is_none_or(InputSink::is_closed)
    }

    fn any_open(&self) -> bool {
        let mut streams = self.0.lock().expect("streams lock");
        streams.retain(|_, sink| !sink.is_closed());
        !streams.is_empty()
    }
}

impl ModelProvider for MockModel {
    fn start(&self, request: ModelRequest, sink: InputSink) -> u32 {
        if self.trace.engine_dead() {
            return 0;
        }
        let call = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        self.streams.open(call, sink);
        self.trace.record(Event::ModelCall {
            call,
            request_id: request.request_id.clone(),
            step: request.step,
            continuation: request.continuation,
        });
        self.trace.cross(Boundary::ModelRequest { call, request: request.clone() });
        let missing = missing_tool_results(&request);
        if !missing.is_empty() {
            self.trace.record(Event::ModelRejected { call, missing });
            let message = "MissingToolResultsError".to_string();
            let error = StreamError::Http { status: 400, message };
            self.streams.send(call, ModelEvent::Failed(error));
            self.streams.close(call);
            return call;
        }
        let player = Player { call, streams: self.streams.clone(), rng: self.rng.clone(), trace: self.trace.clone() };
        let ops = self.script(call, &request);
        self.node.spawn(player.play(ops));
        call
    }

    fn cancel(&self, call: u32) {
        if !self.trace.engine_dead() {
            self.trace.cross(Boundary::ModelCancel { call });
        }
        self.streams.close(call);
    }
}

/// Tool calls in the request that have no result and are not streaming.
fn missing_tool_results(request: &ModelRequest) -> Vec<String> {
    let assistant = request.messages.iter().filter(|message| message.role == Role::Assistant);
    assistant
        .flat_map(|message| message.tools_in(&[ToolState::InputAvailable, ToolState::ApprovalRequested]))
        .map(|tool| tool.call_id.clone())
        .collect()
}

fn ends_mid_tool_input(request: &ModelRequest) -> bool {
    let Some(last) = request.messages.last().filter(|message| message.role == Role::Assistant) else {
        return false;
    };
    let last_content = last.parts.iter().rev().find(|part| !matches!(part, Part::StepStart));
    matches!(last_content, Some(Part::Tool(tool)) if tool.state == ToolState::InputStreaming)
}

struct Player {
    call: u32,
    streams: Streams,
    rng: SharedRng,
    trace: Trace,
}

impl Player {
    async fn play(self, ops: Vec<Op>) {
        let mut index = 0;
        let mut content_chunks = 0;
        for op in ops {
            match op {
                Op::Emit(chunk) => {
                    index += 1;
                    content_chunks += u32::from(chunk.is_output());
                    if !self.send(index, chunk) {
                        return self.end("abandoned by the engine", StreamEnd::Abandoned);
                    }
                }
                Op::Finish { reason, output_tokens } => {
                    index += 1;
                    let usage = Usage { input_tokens: 10, output_tokens: output_tokens.unwrap_or(content_chunks) };
                    if !self.send(index, Chunk::FinishStep { reason, usage }) {
                        return self.end("abandoned by the engine", StreamEnd::Abandoned);
                    }
                    self.streams.send(self.call, ModelEvent::Chunk(Chunk::Finish { reason }));
                }
                Op::Sleep(range) => super::pause_ms(self.rng.sample(range)).await,
                Op::Park => {
                    self.end("parked", StreamEnd::Parked);
                    return std::future::pending().await;
                }
                Op::Cut => {
                    self.end("cut", StreamEnd::Cut);
                    return self.finish(ModelEvent::Failed(StreamError::Cut));
                }
                Op::Http { status, message } => {
                    self.end(&format!("http {status}"), StreamEnd::Http { status, message: message.clone() });
                    return self.finish(ModelEvent::Failed(StreamError::Http { status, message }));
                }
            }
        }
        // The script ran out: the stream closes, as a finished HTTP body does.
        self.finish(ModelEvent::Closed);
    }

    fn finish(&self, last: ModelEvent) {
        self.streams.send(self.call, last);
        self.streams.close(self.call);
    }

    fn send(&self, index: u32, chunk: Chunk) -> bool {
        if self.streams.is_abandoned(self.call) {
            return false;
        }
        self.trace.record(Event::ModelChunk { call: self.call, index, chunk: chunk.summary() });
        self.streams.send(self.call, ModelEvent::Chunk(chunk))
    }

    /// A cut or an HTTP error enters the history when the engine takes it
    /// (see `taken`); a park or an abandoned stream is the provider's own
    /// state, recorded here.
    fn end(&self, how: &str, end: StreamEnd) {
        self.trace.record(Event::ModelEnd { call: self.call, how: how.to_string() });
        if matches!(end, StreamEnd::Parked | StreamEnd::Abandoned) {
            self.trace.cross(Boundary::ModelEnd { call: self.call, end });
        }
    }
}

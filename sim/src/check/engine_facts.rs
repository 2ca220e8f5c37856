//! Facts from the engine's own account of a run (its events), for the
//! checks that still read it. Being replaced by [`super::facts`], which
//! reads only the boundary history.

use std::collections::BTreeMap;

use turnsim_engine::durable::TurnKind;
use turnsim_engine::{EngineEvent, TurnStatus};

use crate::scenario::ScenarioFile;
use crate::trace::Event;
use crate::world::RunRecord;

#[derive(Clone, Debug)]
pub struct TurnFact {
    pub request_id: String,
    pub kind: TurnKind,
    pub message_id: String,
    pub started_at: usize,
    pub ended_at: Option<usize>,
    pub status: Option<TurnStatus>,
}

/// How a model call's stream ended, as the model lane saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEnd {
    Finished {
        reason: String,
        output_tokens: u32,
    },
    Parked,
    Cut,
    Http,
    Rejected,
    Abandoned,
    /// Still streaming when the run ended.
    Open,
}

#[derive(Clone, Debug)]
pub struct CallFact {
    pub call: u32,
    pub request_id: String,
    pub at: usize,
    /// Text, reasoning and tool-input chunks the call streamed.
    pub content_chunks: u32,
    pub end: CallEnd,
}

impl CallFact {
    /// The provider ended the step without output (empty `unknown`, or an
    /// empty `stop` that streamed nothing).
    pub fn is_truncated_finish(&self) -> bool {
        match &self.end {
            CallEnd::Finished { reason, output_tokens: 0 } => {
                reason == "unknown" || (reason == "stop" && self.content_chunks == 0)
            }
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CallbackFact {
    pub at: usize,
    pub name: &'static str,
}

#[derive(Default)]
pub struct Facts {
    pub turns: Vec<TurnFact>,
    pub calls: Vec<CallFact>,
    /// Indices into `turns` and `calls` by request id, so a checker that
    /// looks up every turn's calls stays linear in the run.
    turns_by_request: BTreeMap<String, Vec<usize>>,
    calls_by_request: BTreeMap<String, Vec<usize>>,
    /// Callback events per chat id, in order.
    pub callbacks: BTreeMap<u32, Vec<CallbackFact>>,
    /// Posts per delivery id: (event index, sim µs, text).
    pub posts: BTreeMap<String, Vec<(usize, u64, String)>>,
    pub evictions: Vec<usize>,
    pub restarts: Vec<usize>,
    /// Where each `chat()` was called, by chat id.
    pub chat_called: BTreeMap<u32, usize>,
}

impl Facts {
    pub fn derive(_scenario: &ScenarioFile, run: &RunRecord) -> Self {
        let mut facts = Self::default();
        for (index, traced) in run.events.iter().enumerate() {
            facts.absorb(index, traced.at_us, &traced.event);
        }
        facts
    }

    fn absorb(&mut self, index: usize, at_us: u64, event: &Event) {
        match event {
            Event::Evicted => self.evictions.push(index),
            Event::Restarted => self.restarts.push(index),
            Event::Engine(engine) => self.absorb_engine(index, engine),
            Event::ModelCall { call, request_id, .. } => {
                self.calls_by_request.entry(request_id.clone()).or_default().push(self.calls.len());
                self.calls.push(CallFact {
                    call: *call,
                    request_id: request_id.clone(),
                    at: index,
                    content_chunks: 0,
                    end: CallEnd::Open,
                })
            }
            Event::ModelChunk { call, chunk, .. } => self.absorb_chunk(*call, chunk),
            Event::ModelEnd { call, how } => self.end_call(*call, end_from(how)),
            Event::ModelRejected { call, .. } => self.end_call(*call, CallEnd::Rejected),
            Event::CallbackStart { chat, .. } => self.callback(*chat, index, "on_start"),
            Event::CallbackEvent { chat, .. } => self.callback(*chat, index, "on_event"),
            Event::CallbackDone { chat } => self.callback(*chat, index, "on_done"),
            Event::CallbackError { chat, .. } => self.callback(*chat, index, "on_error"),
            Event::CallbackInterrupted { chat } => self.callback(*chat, index, "on_interrupted"),
            Event::CallbackDropped { chat, .. } => self.callback(*chat, index, "dropped"),
            Event::ChatCalled { chat } => {
                self.callbacks.entry(*chat).or_default();
                self.chat_called.insert(*chat, index);
            }
            Event::MessengerPost { delivery, text } => {
                self.posts.entry(delivery.clone()).or_default().push((index, at_us, text.clone()))
            }
            _ => {}
        }
    }

    fn absorb_engine(&mut self, index: usize, event: &EngineEvent) {
        match event {
            EngineEvent::TurnStarted { request_id, kind, message_id } => {
                self.turns_by_request.entry(request_id.clone()).or_default().push(self.turns.len());
                self.turns.push(TurnFact {
                    request_id: request_id.clone(),
                    kind: *kind,
                    message_id: message_id.clone(),
                    started_at: index,
                    ended_at: None,
                    status: None,
                })
            }
            EngineEvent::TurnFinished { request_id, status, .. } => {
                let of_request = self.turns_by_request.get(request_id).map_or(&[][..], Vec::as_slice);
                let open = of_request.iter().rev().find(|&&at| self.turns[at].ended_at.is_none()).copied();
                if let Some(turn) = open.map(|at| &mut self.turns[at]) {
                    turn.ended_at = Some(index);
                    turn.status = Some(*status);
                }
            }
            _ => {}
        }
    }

    fn absorb_chunk(&mut self, call: u32, chunk: &str) {
        let Some(fact) = self.calls.iter_mut().rev().find(|fact| fact.call == call) else {
            return;
        };
        let kind = chunk.split(' ').next().unwrap_or("");
        if matches!(kind, "text-delta" | "reasoning-delta" | "tool-input-delta" | "tool-call") {
            fact.content_chunks += 1;
        }
        if kind == "finish-step" {
            let mut words = chunk.split(' ').skip(1);
            let reason = words.next().unwrap_or("").to_string();
            let output_tokens =
                words.next().and_then(|word| word.strip_prefix("out=")).and_then(|n| n.parse().ok()).unwrap_or(0);
            fact.end = CallEnd::Finished { reason, output_tokens };
        }
    }

    fn end_call(&mut self, call: u32, end: CallEnd) {
        if let Some(fact) = self.calls.iter_mut().rev().find(|fact| fact.call == call) {
            if fact.end == CallEnd::Open {
                fact.end = end;
            }
        }
    }

    fn callback(&mut self, chat: u32, at: usize, name: &'static str) {
        self.callbacks.entry(chat).or_default().push(CallbackFact { at, name });
    }

    /// Whether the engine process was killed between two trace indices
    /// (an eviction at or after `from` and before `to`).
    pub fn evicted_between(&self, from: usize, to: usize) -> bool {
        self.evictions.iter().any(|&at| at >= from && at <= to)
    }

    pub fn turn(&self, request_id: &str) -> Option<&TurnFact> {
        self.turns_by_request.get(request_id).and_then(|at| at.first()).map(|&at| &self.turns[at])
    }

    pub fn calls_for<'a>(&'a self, request_id: &'a str) -> impl Iterator<Item = &'a CallFact> + 'a {
        self.calls_by_request.get(request_id).into_iter().flatten().map(|&at| &self.calls[at])
    }
}

fn end_from(how: &str) -> CallEnd {
    match how {
        "parked" => CallEnd::Parked,
        "cut" => CallEnd::Cut,
        "abandoned by the engine" => CallEnd::Abandoned,
        _ if how.starts_with("http") => CallEnd::Http,
        _ => CallEnd::Open,
    }
}

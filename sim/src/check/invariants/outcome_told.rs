//! Every consumer is told a turn's outcome truly, and once. Judged per
//! request (the id a stream's frames and a `chat()`'s `on_start` carry),
//! from what its last model call did:
//!
//! - **a success is never told as failure**: a request whose last model
//!   call finished its answer (`stop`, with output), or a step of calls
//!   stored finalised for the client to answer or approve, and whose
//!   answer the store took, is not then ended with an `error` frame on any connection,
//!   nor with `on_error` on its caller, unless something failed after the
//!   answer was in (the store refused a write, or the process died: the
//!   engine may not know what it kept);
//! - **a failure is never told as success** (a `done` to a connection
//!   shown a recovery under way ends the attempt the recovery takes over): a request whose last model
//!   call failed with a provider error (no later call took it up) does
//!   not end with a `done` frame nor `on_done`;
//! - **once**: a connection is sent at most one `done` and one `error` per
//!   request, never a `done` after an `error` (an `error` after a `done` is
//!   a turn handed to recovery that then gave up).
//!
//! The messenger's side of the same rule is `messenger-once` and
//! `messenger-view`'s; a `chat()`'s terminal callbacks are counted by
//! `callback-contract`.

use std::collections::BTreeMap;

use turnsim_engine::{FinishReason, Frame, ToolState};

use super::Invariant;
use crate::check::facts::{CallEnd, CallFact};
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall};

pub const INVARIANT: Invariant = Invariant {
    name: "outcome-told-true",
    rule: "a turn that answered is never told as failed, nor one whose model call failed as done, and a client is \
           told each request's end once",
    check,
};

/// How a request's last model call came out, where it did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// It finished its answer and the store took it (at that history index).
    Answered(usize),
    /// It failed with a provider error, at that index.
    Failed(usize),
}

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    let outcomes = outcomes(input);
    let mut chats: BTreeMap<u32, &str> = BTreeMap::new();
    let mut terminal_frames: BTreeMap<(u64, &str), Told> = BTreeMap::new();
    // Connections shown a recovery under way: a `done` there ends the
    // attempt the recovery takes over, not the user's question.
    let mut recovering: BTreeMap<u64, bool> = BTreeMap::new();
    let mut violations = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        let (told_failure, request_id, whom) = match &crossing.what {
            // A connection handed to a new process is connected anew, and one
            // that acks a resume is given the conversation anew: what it was
            // told before may be restated (a stored failure is replayed to
            // every client given the conversation).
            Boundary::Connect { connection } | Boundary::ResumeAck { connection, .. } => {
                terminal_frames.retain(|(told, _), _| told != connection);
                continue;
            }
            Boundary::Frame { connection, frame: Frame::Recovering(on) } => {
                recovering.insert(*connection, *on);
                continue;
            }
            Boundary::Callback { chat, call: CallbackCall::Start { request_id }, .. } => {
                chats.insert(*chat, request_id);
                continue;
            }
            Boundary::Callback { chat, call: CallbackCall::Error { .. }, .. } => {
                let Some(request_id) = chats.get(chat) else { continue };
                (true, *request_id, format!("caller chat{chat}"))
            }
            Boundary::Callback { chat, call: CallbackCall::Done, .. } => {
                let Some(request_id) = chats.get(chat) else { continue };
                (false, *request_id, format!("caller chat{chat}"))
            }
            Boundary::Frame { connection, frame: Frame::Error { request_id, .. } | Frame::Done { request_id, .. } } => {
                let told_failure = matches!(crossing.what, Boundary::Frame { frame: Frame::Error { .. }, .. });
                if let Some(wrong) = told_again(&mut terminal_frames, *connection, request_id, told_failure) {
                    violations.push(input.violation_at(INVARIANT.name, index, wrong));
                    continue;
                }
                (told_failure, request_id.as_str(), format!("client c{connection}"))
            }
            _ => continue,
        };
        let Some(outcome) = outcomes.get(request_id).and_then(|outcome| outcome.as_of(index)) else { continue };
        let wrong = match (outcome, told_failure) {
            (Outcome::Answered(since), true) if !shaken_since(input, since, index) => {
                format!("{request_id} answered and its answer was stored, but {whom} was told it failed")
            }
            (Outcome::Failed(_), false) if !connection_recovering(&recovering, &crossing.what) => {
                format!("{request_id}'s model call failed, but {whom} was told it was done")
            }
            _ => continue,
        };
        violations.push(input.violation_at(INVARIANT.name, index, wrong));
    }
    violations
}

/// Whether `what` is a frame to a connection shown a recovery under way.
fn connection_recovering(recovering: &BTreeMap<u64, bool>, what: &Boundary) -> bool {
    matches!(what, Boundary::Frame { connection, .. } if recovering.get(connection) == Some(&true))
}

/// The terminal frames a connection was sent for one request.
#[derive(Default)]
struct Told {
    done: bool,
    error: bool,
}

/// Why a terminal frame tells a connection again what it was told of a
/// request, if it does: a second `done`, a second `error`, or a `done`
/// after an `error`. An `error` after a `done` is a new end: a turn the
/// engine ended as handed to recovery, which then gave up.
fn told_again<'a>(
    told: &mut BTreeMap<(u64, &'a str), Told>,
    connection: u64,
    request_id: &'a str,
    error: bool,
) -> Option<String> {
    let before = told.entry((connection, request_id)).or_default();
    let wrong = match (error, before.done, before.error) {
        (false, true, _) => Some("a second done"),
        (true, _, true) => Some("a second error"),
        (false, false, true) => Some("done after an error"),
        _ => None,
    };
    before.done |= !error;
    before.error |= error;
    wrong.map(|wrong| format!("client c{connection} was sent {wrong} for {request_id}"))
}

/// Each request's model calls' outcomes as they came, in order.
#[derive(Default)]
struct Outcomes(Vec<(usize, Option<Outcome>)>);

impl Outcomes {
    /// The outcome of the request's last model call before history index
    /// `at` (`None`: that call did neither).
    fn as_of(&self, at: usize) -> Option<Outcome> {
        let last = self.0.iter().take_while(|(call_at, _)| *call_at < at).last();
        last.and_then(|(_, outcome)| *outcome).filter(|outcome| match outcome {
            Outcome::Answered(stored) | Outcome::Failed(stored) => *stored < at,
        })
    }
}

fn outcomes<'a>(input: &'a CheckInput) -> BTreeMap<&'a str, Outcomes> {
    let history = &input.run.history;
    let mut outcomes: BTreeMap<&str, Outcomes> = BTreeMap::new();
    for call in &input.facts.calls {
        let request_id = call.request(history).request_id.as_str();
        outcomes.entry(request_id).or_default().0.push((call.at, outcome(input, call)));
    }
    outcomes
}

fn outcome(input: &CheckInput, call: &CallFact) -> Option<Outcome> {
    match call.end {
        CallEnd::Http { .. } => call.ended_at.map(Outcome::Failed),
        CallEnd::Finished { reason: FinishReason::Stop, .. } if call.finished_with_output() => {
            stored_at(input, call, false).map(Outcome::Answered)
        }
        // A step that ended on calls the client is to answer is handed to
        // the client: the turn did what it was asked.
        CallEnd::Finished { reason: FinishReason::ToolCalls, .. } if call.finished_with_output() => {
            stored_at(input, call, true).map(Outcome::Answered)
        }
        _ => None,
    }
}

/// Where the store first held every text the call streamed, in the reply
/// it wrote into, after the call ended (and, when `handed`, every call of
/// the step stored finalised and the client's to answer or approve).
fn stored_at(input: &CheckInput, call: &CallFact, handed: bool) -> Option<usize> {
    let history = &input.run.history;
    let (target, ended) = (call.target.as_deref()?, call.ended_at?);
    let texts = call.streamed_texts(history);
    // A step's calls may be stored finalised before its `finish-step`
    // crosses (the engine settles a call as its `tool-call` arrives).
    let after = if handed { call.at } else { ended };
    for at in input.facts.commits.iter().copied().filter(|&at| at > after) {
        let Boundary::Commit { writes } = &history.crossings[at].what else { continue };
        let Some(reply) = writes.iter().filter_map(|write| write.message()).find(|message| message.id == target) else {
            continue;
        };
        // The last call streamed settles last: until it is finalised no
        // commit needs reading whole (a wide batch, a long text stay linear).
        let finalised = |id: &String| reply.tool(id).is_some_and(|tool| tool.state != ToolState::InputStreaming);
        if handed && !call.tools.last().is_none_or(finalised) {
            continue;
        }
        let stored = reply.text();
        if !texts.iter().filter(|(reasoning, _)| !reasoning).all(|(_, text)| stored.contains(text.as_str())) {
            continue;
        }
        if !handed {
            return Some(at);
        }
        // A step of calls is handed over once each call is stored
        // finalised, and then only if each is the client's to answer or to
        // approve (a server tool's result is owed a next step). The first
        // commit with every call finalised decides, so the scan stays
        // linear in a long chain of steps.
        if !call.tools.iter().all(finalised) {
            continue;
        }
        let the_clients = |name: &str| {
            let kind = input.scenario.scenario.engine.tools.get(name).map(|declared| declared.kind);
            kind.is_none_or(|kind| kind.is_client_answered() || kind.needs_approval())
        };
        let handed_over = call.tools.iter().filter_map(|id| reply.tool(id)).all(|tool| the_clients(&tool.tool_name));
        return handed_over.then_some(at);
    }
    None
}

/// Whether the store refused a write or the process died between history
/// indexes `from` and `to`: a failure told then may be the truth.
fn shaken_since(input: &CheckInput, from: usize, to: usize) -> bool {
    let between = &input.run.history.crossings[from..to];
    input.facts.killed_between(from, to)
        || between.iter().any(|crossing| matches!(crossing.what, Boundary::CommitRefused { .. }))
}

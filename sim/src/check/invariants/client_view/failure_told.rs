//! A turn that failed is told to every client connected when it failed, as
//! an `error` frame for that request. The history first shows a turn
//! failed where the engine stored a terminal status for it (or tried to:
//! the store may take it only later, when it is no news), or told its
//! `chat()` caller `on_error` (as the engine made that call: on a slow
//! caller link it arrives later); a status stored again after the store
//! refused it is the same failure. Every connection open then, and not held for a resume
//! ack, has been sent an `error` frame for the request (since it opened) by
//! the time the engine next rests: before its next input, or the end. A
//! process that dies first tells nobody (a connection it kept is told by
//! the next one on connect), and a request that never ran (its message
//! refused before any model request or frame for it) is no turn to fail.
//!
//! Recovery giving up is a failure too, whatever the engine stores: once
//! the host's `on_exhausted` hook is called, every connection in step then
//! is sent an `error` frame (the terminal recovery message; which request
//! it names is the engine's to say) since the last input before the hook,
//! by the time the engine next rests.
//!
//! And a client streamed a request is told how it ended: by the time the
//! run settles, each open connection in step has been sent a `done` or
//! `error` frame after the last chunk it was streamed, or a whole
//! transcript (the store restated: nothing streams on that screen any
//! more), or `resume-none`. A UI shows a stream never ended as still
//! answering. A process that dies ends its streams with it (a connection
//! it kept is the next process's to restate).

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::Write;
use turnsim_engine::ports::Frame;

use super::INVARIANT;
use crate::check::{CheckInput, Violation};
use crate::history::RunEnd;
use crate::history::{Boundary, CallbackCall, History};

/// The first client left untold of a failed turn, if any.
pub fn failure_untold(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let failures = failures(history);
    let ran = requests_that_ran(history);
    let mut views = Connections::default();
    let mut told: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    let mut owed: Vec<(u64, &str, usize)> = Vec::new();
    // Recovery gave up: (connection, incident) owed an error frame since
    // the last input, and where each connection was last sent one.
    let mut gave_up: Vec<(u64, &str)> = Vec::new();
    let mut last_error: BTreeMap<u64, usize> = BTreeMap::new();
    let mut last_input = 0;
    // Per connection, the request of the last chunk it was streamed, until
    // a frame that ends it.
    let mut streaming: BTreeMap<u64, &str> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        if matches!(crossing.what, Boundary::Killed) {
            owed.clear();
            gave_up.clear();
            streaming.clear();
        }
        if crossing.what.is_input() {
            let text = untold(&owed, &views, &told).or_else(|| unheard(&gave_up, &views, &last_error, last_input));
            if let Some(text) = text {
                return Some(Violation::at(INVARIANT.name, input.event_of(index), text));
            }
            owed.clear();
            gave_up.clear();
            last_input = index;
        }
        views.step(&crossing.what);
        match &crossing.what {
            Boundary::Connect { connection } | Boundary::Disconnect { connection } => {
                told.remove(connection);
                last_error.remove(connection);
                streaming.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Error { request_id, .. } } => {
                told.entry(*connection).or_default().insert(request_id);
                last_error.insert(*connection, index);
                streaming.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Done { .. } | Frame::Messages(_) | Frame::ResumeNone } => {
                streaming.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Chunk { request_id, .. } } => {
                streaming.insert(*connection, request_id);
            }
            Boundary::Exhausted { context, .. } => {
                gave_up.extend(views.in_step().map(|connection| (connection, context.incident_id.as_str())));
            }
            _ => {}
        }
        for request_id in failures.get(&index).into_iter().flatten().filter(|request| ran.contains(*request)) {
            owed.extend(views.in_step().map(|connection| (connection, *request_id, index)));
        }
    }
    let at = input.event_of(history.crossings.len().saturating_sub(1));
    let text = untold(&owed, &views, &told).or_else(|| unheard(&gave_up, &views, &last_error, last_input));
    text.or_else(|| never_ended(&streaming, &views).filter(|_| input.run.end == RunEnd::Quiescent))
        .map(|text| Violation::at(INVARIANT.name, at, text))
}

/// A connection still open, owed the terminal recovery message, and sent
/// no error frame since the input before the hook.
fn unheard(
    gave_up: &[(u64, &str)],
    views: &Connections,
    last_error: &BTreeMap<u64, usize>,
    since: usize,
) -> Option<String> {
    let (connection, incident) = gave_up.iter().find(|(connection, _)| {
        views.open.contains(connection) && last_error.get(connection).is_none_or(|&at| at < since)
    })?;
    Some(format!(
        "client connection c{connection} is never sent an error frame after recovery gave up on incident {incident} (on_exhausted was called)"
    ))
}

/// An open connection in step left streaming a request when the run settled.
fn never_ended(streaming: &BTreeMap<u64, &str>, views: &Connections) -> Option<String> {
    let (connection, request_id) =
        streaming.iter().find(|(connection, _)| views.in_step().any(|open| open == **connection))?;
    Some(format!(
        "client connection c{connection} is streamed request {request_id} and never sent a done or error frame (nor the transcript) after it, though the run settled"
    ))
}

/// The open connections, and those held for a resume ack (as
/// [`crate::check::views::ClientViews`] follows them, without the screens).
#[derive(Default)]
struct Connections {
    open: BTreeSet<u64>,
    held: BTreeMap<u64, String>,
}

impl Connections {
    fn step(&mut self, crossing: &Boundary) {
        match crossing {
            Boundary::Connect { connection } => {
                self.open.insert(*connection);
                self.held.remove(connection);
            }
            Boundary::Disconnect { connection } => {
                self.open.remove(connection);
                self.held.remove(connection);
            }
            Boundary::Killed => {
                self.open.clear();
                self.held.clear();
            }
            Boundary::ResumeAck { connection, request_id } if self.held.get(connection) == Some(request_id) => {
                self.held.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::StreamResuming { request_id } } => {
                self.held.insert(*connection, request_id.clone());
            }
            _ => {}
        }
    }

    fn in_step(&self) -> impl Iterator<Item = u64> + '_ {
        self.open.iter().copied().filter(|connection| !self.held.contains_key(connection))
    }
}

/// A connection still open that was owed an `error` frame and got none.
fn untold(owed: &[(u64, &str, usize)], views: &Connections, told: &BTreeMap<u64, BTreeSet<&str>>) -> Option<String> {
    let (connection, request_id, _) = owed.iter().find(|(connection, request_id, _)| {
        views.open.contains(connection) && !told.get(connection).is_some_and(|told| told.contains(request_id))
    })?;
    Some(format!("client connection c{connection} is never sent an error frame for request {request_id}, which failed"))
}

/// Where the history first shows each failure (the crossing the engine
/// failed the request at), and the request. A status stored again later
/// (the store refused it the first time) is the same failure.
fn failures(history: &History) -> BTreeMap<usize, Vec<&str>> {
    let mut first: BTreeMap<&str, usize> = BTreeMap::new();
    let mut requests: BTreeMap<u32, &str> = BTreeMap::new();
    for (index, crossing) in history.iter().enumerate() {
        match &crossing.what {
            Boundary::Commit { writes } | Boundary::CommitRefused { writes } => {
                let terminal = writes.iter().filter_map(|write| match write {
                    Write::Terminal(Some(status)) => Some(status.request_id.as_str()),
                    _ => None,
                });
                terminal.for_each(|request_id| {
                    first.entry(request_id).or_insert(index);
                });
            }
            Boundary::Callback { chat, call: CallbackCall::Start { request_id }, .. } => {
                requests.insert(*chat, request_id);
            }
            Boundary::Callback { chat, call: CallbackCall::Error { .. }, sent_at } => {
                if let Some(request_id) = requests.get(chat) {
                    let at = first.entry(request_id).or_insert(usize::MAX);
                    *at = (*at).min(sent_at.unwrap_or(index));
                }
            }
            _ => {}
        }
    }
    let mut failed: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (request_id, at) in first {
        failed.entry(at).or_default().push(request_id);
    }
    failed
}

/// The requests the engine asked the model for, or sent a frame about.
fn requests_that_ran(history: &History) -> BTreeSet<&str> {
    history
        .iter()
        .filter_map(|crossing| match &crossing.what {
            Boundary::ModelRequest { request, .. } => Some(request.request_id.as_str()),
            Boundary::Frame { frame, .. } => frame.stream_request(),
            _ => None,
        })
        .collect()
}

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

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::Write;
use turnsim_engine::ports::Frame;

use super::INVARIANT;
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, CallbackCall, History};

/// The first client left untold of a failed turn, if any.
pub fn failure_untold(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let failures = failures(history);
    let ran = requests_that_ran(history);
    let mut views = Connections::default();
    let mut told: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    let mut owed: Vec<(u64, &str, usize)> = Vec::new();
    for (index, crossing) in history.iter().enumerate() {
        if matches!(crossing.what, Boundary::Killed) {
            owed.clear();
        }
        if crossing.what.is_input() {
            if let Some(text) = untold(&owed, &views, &told) {
                return Some(Violation::at(INVARIANT.name, input.event_of(index), text));
            }
            owed.clear();
        }
        views.step(&crossing.what);
        match &crossing.what {
            Boundary::Connect { connection } => {
                told.remove(connection);
            }
            Boundary::Frame { connection, frame: Frame::Error { request_id, .. } } => {
                told.entry(*connection).or_default().insert(request_id);
            }
            _ => {}
        }
        for request_id in failures.get(&index).into_iter().flatten().filter(|request| ran.contains(*request)) {
            owed.extend(views.in_step().map(|connection| (connection, *request_id, index)));
        }
    }
    let at = input.event_of(history.crossings.len().saturating_sub(1));
    untold(&owed, &views, &told).map(|text| Violation::at(INVARIANT.name, at, text))
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

//! A connection is streamed what the model streamed, between its rests as
//! well as at them (`crate::check::relay`): each chunk frame's content is
//! the model's next, and by a `done` frame or a take-back for a request,
//! a transcript restated while it streams, or the client leaving, it has
//! been sent all the model streamed of it.
//! A chunk lost, doubled or swapped that a later transcript or take-back
//! repairs before the connection rests shows here.
//!
//! A connection follows the model from where it was last given the whole
//! state: its connect, a transcript frame, a take-back. One that asked to
//! resume the stream is not judged until it is given the state again (or
//! told nothing runs): the engine holds it from the ask. A client that
//! leaves is judged on the requests it was being streamed, and only on
//! what the model streamed before that instant; one that leaves in the
//! instant it opened is not judged (across the process boundary, its
//! disconnect may be taken before the frames answering its connect).

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::ports::Frame;

use super::INVARIANT;
use crate::check::relay::Follower;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

/// The first connection streamed other than what the model streamed.
pub fn misrelayed(input: &CheckInput) -> Option<Violation> {
    let history = &input.run.history;
    let streams = &input.model_streams;
    let mut open: BTreeMap<u64, (Follower, u64)> = BTreeMap::new();
    // Connections that asked to resume: the engine may hold them from the
    // ask (before its answer is recorded) until it sends them the state.
    let mut held: BTreeSet<u64> = BTreeSet::new();
    for (index, crossing) in history.iter().enumerate() {
        let fail = |text: String| Some(Violation::at(INVARIANT.name, input.event_of(index), text));
        match &crossing.what {
            Boundary::Connect { connection } => {
                let mut follower = Follower::default();
                follower.sync(index);
                open.insert(*connection, (follower, crossing.at_us));
                held.remove(connection);
            }
            Boundary::Disconnect { connection } => {
                let Some((follower, opened_us)) = open.remove(connection) else { continue };
                if held.remove(connection) || opened_us == crossing.at_us {
                    continue;
                }
                let requests: Vec<&str> = follower.following().collect();
                for request in requests {
                    if let Some(atom) = follower.missed_before_time(streams, history, request, crossing.at_us) {
                        return fail(format!(
                            "client connection c{connection} leaves without being sent {atom} of request {request}, which the model streamed"
                        ));
                    }
                }
            }
            Boundary::Killed => {
                open.clear();
                held.clear();
            }
            Boundary::ResumeRequest { connection } => {
                held.insert(*connection);
            }
            Boundary::Frame { connection, frame } => {
                let Some((follower, _)) = open.get_mut(connection) else { continue };
                if matches!(frame, Frame::Messages(_) | Frame::ResumeNone) {
                    // A transcript restated to a client being streamed
                    // comes after all the model streamed before it.
                    if !held.remove(connection) {
                        let requests: Vec<&str> = follower.following().collect();
                        for request in requests {
                            if let Some(atom) = follower.missed(streams, request, index) {
                                return fail(format!(
                                    "client connection c{connection} is sent a transcript without being sent {atom} of request {request}, which the model streamed"
                                ));
                            }
                        }
                    }
                    follower.sync(index);
                }
                if held.contains(connection) {
                    continue;
                }
                match frame {
                    Frame::Chunk { request_id, chunk, .. } => {
                        if let Some(text) = follower.sent(streams, request_id, chunk, index) {
                            return fail(format!("client connection c{connection} is sent {text}"));
                        }
                    }
                    Frame::Reset { request_id, .. } | Frame::Done { request_id, .. } => {
                        if let Some(atom) = follower.missed(streams, request_id, index) {
                            let what = if matches!(frame, Frame::Reset { .. }) { "a take-back" } else { "done" };
                            return fail(format!(
                                "client connection c{connection} is told {what} for request {request_id} without being sent {atom}, which the model streamed"
                            ));
                        }
                        if matches!(frame, Frame::Reset { .. }) {
                            follower.sync(index);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    None
}

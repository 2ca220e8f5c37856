//! A client that asks to resume the stream is not ready for its chunks yet:
//! once the engine offers it the running turn (`stream-resuming`), it sends
//! that connection nothing more until the client acks the offer. What the
//! client is sent after the ack must make its view whole again; that is
//! `client-view`'s to judge.

use std::collections::BTreeMap;

use turnsim_engine::Frame;

use super::Invariant;
use crate::check::{CheckInput, Violation};
use crate::history::Boundary;

pub const INVARIANT: Invariant = Invariant {
    name: "resume-handshake",
    rule: "after offering a client a resume of the stream, the engine sends that connection nothing until the client acks the offer",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    // Connections offered a resume and not yet acked, with the offered turn.
    let mut held: BTreeMap<u64, &str> = BTreeMap::new();
    let mut violations = Vec::new();
    for crossing in &history.crossings {
        match &crossing.what {
            // Offering again (the client asked again) is still an offer.
            Boundary::Frame { connection, frame: Frame::StreamResuming { request_id } } => {
                held.insert(*connection, request_id);
            }
            Boundary::Frame { connection, frame } => {
                if let Some(offered) = held.remove(connection) {
                    let message = format!(
                        "connection c{connection} was offered a resume of {offered} and sent {} before it acked",
                        frame_name(frame)
                    );
                    violations.push(Violation::at(INVARIANT.name, crossing.at_event, message));
                }
            }
            Boundary::ResumeAck { connection, request_id } if held.get(connection) == Some(&request_id.as_str()) => {
                held.remove(connection);
            }
            Boundary::Connect { connection } | Boundary::Disconnect { connection } => {
                held.remove(connection);
            }
            _ => {}
        }
    }
    violations
}

fn frame_name(frame: &Frame) -> &'static str {
    match frame {
        Frame::Messages(_) => "the transcript",
        Frame::Chunk { .. } => "a chunk",
        Frame::Reset { .. } => "a take-back",
        Frame::Tool { .. } => "a tool state",
        Frame::Done { .. } => "done",
        Frame::Error { .. } => "an error",
        Frame::Recovering(_) => "a recovery status",
        Frame::StreamResuming { .. } => "an offer",
        Frame::ResumeNone => "resume-none",
    }
}

//! An offer to resume names the stream there is: the request the engine
//! last asked the model for.
//!
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
    rule: "an offer to resume names the request streaming, and after it the engine sends that connection nothing until the client acks the offer",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let history = &input.run.history;
    // Connections offered a resume and not yet acked, with the offered turn.
    let mut held: BTreeMap<u64, &str> = BTreeMap::new();
    // The request the engine last asked the model for: the stream there is.
    let mut streaming: Option<&str> = None;
    let mut violations = Vec::new();
    for crossing in &history.crossings {
        match &crossing.what {
            Boundary::ModelRequest { request, .. } => streaming = Some(&request.request_id),
            // Offering again (the client asked again) is still an offer.
            Boundary::Frame { connection, frame: Frame::StreamResuming { request_id } } => {
                if streaming != Some(request_id.as_str()) {
                    let running =
                        streaming.map_or_else(|| "none has run".to_string(), |id| format!("the stream is {id}'s"));
                    let message =
                        format!("connection c{connection} was offered a resume of {request_id}, but {running}");
                    violations.push(Violation::at(INVARIANT.name, crossing.at_event, message));
                }
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

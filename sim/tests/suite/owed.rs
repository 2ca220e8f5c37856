//! The checks that hold what each consumer is owed (docs/properties.md)
//! fire on a broken history. Each test takes a clean run, shows the
//! property's invariant reports nothing, then breaks exactly what that
//! consumer is owed, the way a wrong engine would hand it over, and shows
//! the invariant reports it under its own name.

use serde_json::json;
use turnsim::history::Boundary;
use turnsim::world::RunRecord;
use turnsim_engine::durable::Write;
use turnsim_engine::ports::ServerToolCall;
use turnsim_engine::{Message, Role, ToolState};

use crate::checkers::{crossing_of, insert_crossings, tool_in, Run};

const TOOL_RUNS: &str = "tool-runs-as-decided";
const TOOL_OUTCOMES: &str = "tool-outcomes-as-given";
const USER_TEXT: &str = "user-text-kept";

/// Every message the commits of `record` store, to edit in place.
fn committed_messages(record: &mut RunRecord) -> impl Iterator<Item = &mut Message> {
    record
        .history
        .crossings
        .iter_mut()
        .flat_map(|crossing| match &mut crossing.what {
            Boundary::Commit { writes } => writes.iter_mut().collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .filter_map(|write| match write {
            Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => Some(message),
            _ => None,
        })
}

/// Edits `call_id`'s part in every message the run stored, sent to a
/// client or to the model, where it is in `state`.
fn edit_shown_tool(
    record: &mut RunRecord,
    call_id: &str,
    state: ToolState,
    edit: impl Fn(&mut turnsim_engine::ToolPart),
) {
    for crossing in &mut record.history.crossings {
        let messages: Vec<&mut Message> = match &mut crossing.what {
            Boundary::Commit { writes } => writes
                .iter_mut()
                .filter_map(|write| match write {
                    Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => Some(message),
                    _ => None,
                })
                .collect(),
            Boundary::ModelRequest { request, .. } => request.messages.iter_mut().collect(),
            Boundary::Frame { frame: turnsim_engine::Frame::Messages(messages), .. } => messages.iter_mut().collect(),
            _ => Vec::new(),
        };
        for message in messages {
            if message.tool(call_id).is_some_and(|tool| tool.state == state) {
                edit(tool_in(std::slice::from_mut(message), call_id));
            }
        }
    }
}

fn server_tool_call(record: &RunRecord) -> usize {
    crossing_of(record, "a server-tool call", |what| matches!(what, Boundary::ServerToolCall { .. }))
}

// ---------------------------------------------------------- tool-runs-as-decided

#[test]
fn tool_runs_as_decided_fires_when_a_denied_tool_runs_anyway() {
    let run = Run::committed("approval-denied", TOOL_RUNS);
    let mut broken = run.broken();
    let denied = crossing_of(&broken, "the denial", |what| matches!(what, Boundary::Approval { .. }));
    let call = ServerToolCall {
        call_id: "tc-delete".into(),
        tool_name: "delete_file".into(),
        input: json!({ "path": "old.log" }),
    };
    insert_crossings(&mut broken, denied + 1, vec![Boundary::ServerToolCall { call }]);
    run.assert_fires(TOOL_RUNS, &broken, "server tool tc-delete (delete_file) ran after the client denied it");
}

#[test]
fn tool_runs_as_decided_fires_when_an_approval_tool_runs_before_it_is_approved() {
    let run = Run::committed("approval-approved-runs-server-tool", TOOL_RUNS);
    let mut broken = run.broken();
    let ran = server_tool_call(&broken);
    let approved = crossing_of(&broken, "the approval", |what| matches!(what, Boundary::Approval { .. }));
    let call = broken.history.crossings.remove(ran);
    broken.history.crossings.insert(approved, call);
    run.assert_fires(TOOL_RUNS, &broken, "needs approval and ran without the client approving it");
}

#[test]
fn tool_runs_as_decided_fires_when_a_tool_runs_with_other_input_than_the_model_gave() {
    let run = Run::committed("server-tools-two-steps", TOOL_RUNS);
    let mut broken = run.broken();
    let ran = server_tool_call(&broken);
    if let Boundary::ServerToolCall { call } = &mut broken.history.crossings[ran].what {
        call.input = json!({});
    }
    run.assert_fires(TOOL_RUNS, &broken, "ran with input {}, but the model called it with {\"city\":\"Lisbon\"}");
}

#[test]
fn tool_runs_as_decided_fires_on_a_run_no_model_call_asked_for() {
    let run = Run::committed("server-tools-two-steps", TOOL_RUNS);
    let mut broken = run.broken();
    let ran = server_tool_call(&broken);
    if let Boundary::ServerToolCall { call } = &mut broken.history.crossings[ran].what {
        call.call_id = "tc-invented".into();
    }
    run.assert_fires(TOOL_RUNS, &broken, "server tool tc-invented (lookup) ran, but no model call asked for it");
}

// ---------------------------------------------------------- tool-outcomes-as-given

#[test]
fn tool_outcomes_as_given_fires_on_an_output_no_tool_gave() {
    let run = Run::committed("server-tools-two-steps", TOOL_OUTCOMES);
    let mut broken = run.broken();
    edit_shown_tool(&mut broken, "tc-lookup-1", ToolState::OutputAvailable, |tool| {
        tool.output = Some(json!({ "temperature": 35 }))
    });
    run.assert_fires(
        TOOL_OUTCOMES,
        &broken,
        "tc-lookup-1 is shown with output {\"temperature\":35}, which no answer gave",
    );
}

#[test]
fn tool_outcomes_as_given_fires_when_a_clients_error_text_is_replaced() {
    let run = Run::committed("errored-sibling-completes-batch", TOOL_OUTCOMES);
    let mut broken = run.broken();
    edit_shown_tool(&mut broken, "tc-run", ToolState::OutputError, |tool| {
        tool.error_text = Some("Tool execution failed".into())
    });
    run.assert_fires(TOOL_OUTCOMES, &broken, "but its answer's error was error \"exit status 1\"");
}

#[test]
fn tool_outcomes_as_given_fires_when_an_error_is_shown_as_a_success() {
    let run = Run::committed("errored-sibling-completes-batch", TOOL_OUTCOMES);
    let mut broken = run.broken();
    edit_shown_tool(&mut broken, "tc-run", ToolState::OutputError, |tool| {
        tool.state = ToolState::OutputAvailable;
        tool.output = Some(json!(tool.error_text.take()));
    });
    run.assert_fires(TOOL_OUTCOMES, &broken, "tc-run failed (error \"exit status 1\"), but is shown as a success");
}

#[test]
fn tool_outcomes_as_given_fires_when_an_approved_tool_is_stored_denied() {
    let run = Run::committed("approval-approved-runs-server-tool", TOOL_OUTCOMES);
    let mut broken = run.broken();
    for message in committed_messages(&mut broken) {
        if let Some(approval) = message.tool("tc-delete").and_then(|tool| tool.approval.clone()) {
            if approval.approved == Some(true) {
                tool_in(std::slice::from_mut(message), "tc-delete").approval.as_mut().unwrap().approved = Some(false);
            }
        }
    }
    run.assert_fires(TOOL_OUTCOMES, &broken, "tc-delete is shown denied, but the client approved it");
}

#[test]
fn tool_outcomes_as_given_accepts_a_result_the_store_held_before_a_late_one() {
    // The false alarm this invariant replaced: a seeded answered call, a late
    // second result the engine rightly ignores.
    Run::committed("stored-answered-tool-ignores-a-late-result", TOOL_OUTCOMES);
    Run::committed("stored-answered-tool-ignores-a-late-result", "no-lost-work");
}

#[test]
fn tool_outcomes_as_given_accepts_a_refused_answer_settled_as_interrupted() {
    // The false alarm `explore --store-faults` found: the commit holding a
    // client's error was refused, the engine told its writer, and the next
    // turn settled the call as interrupted.
    Run::committed("store-refuses-a-tool-answer", TOOL_OUTCOMES);
}

#[test]
fn tool_outcomes_as_given_fires_when_a_refused_answer_is_stored_as_a_success() {
    let run = Run::committed("store-refuses-a-tool-answer", TOOL_OUTCOMES);
    let mut broken = run.broken();
    edit_shown_tool(&mut broken, "tc-run", ToolState::OutputError, |tool| {
        tool.state = ToolState::OutputAvailable;
        tool.output = Some(json!("build passed"));
        tool.error_text = None;
    });
    run.assert_fires(TOOL_OUTCOMES, &broken, "tc-run failed (error \"exit status 1\"), but is shown as a success");
}

// ---------------------------------------------------------- user-text-kept

#[test]
fn user_text_kept_fires_on_a_user_message_stored_cut_short() {
    let run = Run::committed("server-tools-two-steps", USER_TEXT);
    let mut broken = run.broken();
    for message in committed_messages(&mut broken).filter(|message| message.role == Role::User) {
        *message = turnsim_engine::Message::user(&message.id, "weather in");
    }
    run.assert_fires(
        USER_TEXT,
        &broken,
        "is stored with \"weather in\", but the messages sent and not yet stored are \"weather in Lisbon?\"",
    );
}

#[test]
fn user_text_kept_fires_on_a_message_stored_twice() {
    let run = Run::committed("server-tools-two-steps", USER_TEXT);
    let mut broken = run.broken();
    let stored = crossing_of(&broken, "the user message's commit", |what| match what {
        Boundary::Commit { writes } => {
            writes.iter().filter_map(Write::message).any(|message| message.role == Role::User)
        }
        _ => false,
    });
    let again = Write::PutMessage(turnsim_engine::Message::user("m-again", "weather in Lisbon?"));
    insert_crossings(&mut broken, stored + 1, vec![Boundary::Commit { writes: vec![again] }]);
    run.assert_fires(
        USER_TEXT,
        &broken,
        "user message m-again is stored with \"weather in Lisbon?\", but nobody sent it",
    );
}

#[test]
fn user_text_kept_accepts_a_call_its_link_delivered_twice() {
    Run::committed("caller-link-delays-reorders-duplicates", USER_TEXT);
}

// ---------------------------------------------------------- request-matches-store: the model is shown what happened

const REQUEST: &str = "request-matches-store";

/// `three-messages-queued-each-answered-in-turn`: call #2 answers "second"
/// (m5) into m8 after the first reply m3, while "third" (m7) waits stored.
fn queued() -> Run {
    Run::committed("three-messages-queued-each-answered-in-turn", REQUEST)
}

fn edit_request(run: &Run, call: u32, edit: impl FnOnce(&mut Vec<Message>)) -> RunRecord {
    let mut broken = run.broken();
    edit(&mut crate::checkers::request_mut(&mut broken, call).messages);
    broken
}

#[test]
fn request_matches_store_fires_on_a_past_tool_call_shown_with_empty_arguments() {
    let run = Run::committed("server-tools-two-steps", REQUEST);
    let broken = edit_request(&run, 2, |messages| tool_in(messages, "tc-lookup-1").input = Some(json!({})));
    run.assert_fires(REQUEST, &broken, "part 2 is shown as tool tc-lookup-1 lookup output-available input {} output");
}

#[test]
fn request_matches_store_fires_on_an_earlier_steps_call_left_out() {
    let run = Run::committed("server-tools-two-steps", REQUEST);
    let broken = edit_request(&run, 2, |messages| {
        let reply = messages.last_mut().expect("the reply");
        reply.parts.retain(|part| !matches!(part, turnsim_engine::Part::Tool(_)));
    });
    run.assert_fires(
        REQUEST,
        &broken,
        "shows less than the store holds: part 2 is shown as step-start; the store holds tool tc-lookup-1",
    );
}

#[test]
fn request_matches_store_fires_on_step_boundaries_dropped() {
    let run = Run::committed("server-tools-two-steps", REQUEST);
    let broken = edit_request(&run, 2, |messages| {
        let reply = messages.last_mut().expect("the reply");
        reply.parts.retain(|part| !matches!(part, turnsim_engine::Part::StepStart));
    });
    run.assert_fires(REQUEST, &broken, "shows less than the store holds: part 0 is shown as text");
}

#[test]
fn request_matches_store_fires_on_an_earlier_reply_left_out() {
    let run = queued();
    let broken = edit_request(&run, 2, |messages| messages.retain(|message| message.id != "m3"));
    run.assert_fires(REQUEST, &broken, "assistant message m3");
}

#[test]
fn request_matches_store_fires_on_the_newest_question_sent_twice() {
    let run = queued();
    let broken = edit_request(&run, 2, |messages| {
        let second = messages.iter().find(|message| message.id == "m5").expect("m5").clone();
        let at = messages.len() - 1;
        messages.insert(at, second);
    });
    run.assert_fires(REQUEST, &broken, "message m5 is shown twice");
}

#[test]
fn request_matches_store_fires_on_all_questions_first_then_all_answers() {
    let run = queued();
    let broken = edit_request(&run, 2, |messages| {
        let reply = messages.pop().expect("the reply");
        messages.sort_by_key(|message| message.role != Role::User);
        messages.push(reply);
    });
    run.assert_fires(REQUEST, &broken, "message m3 is shown before a message the store holds before it");
}

#[test]
fn request_matches_store_fires_on_a_queued_later_question_shown_before_the_reply() {
    let run = queued();
    let mut broken = run.broken();
    let at = crossing_of(&broken, "call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    let third = broken.history.store_at(at).message("m7").expect("m7 stored before call #2").clone();
    let messages = &mut crate::checkers::request_mut(&mut broken, 2).messages;
    let reply_at = messages.len() - 1;
    messages.insert(reply_at, third);
    run.assert_fires(
        REQUEST,
        &broken,
        "message m7 is shown, but the store holds it after the reply the request asks for",
    );
}

#[test]
fn request_matches_store_fires_on_a_recovery_shown_a_staler_prefix_than_the_store() {
    // `recovery-continue-after-text-stall`'s recovery continues the stored
    // partial; shown a prefix of it, the model continues from words the
    // user already saw replaced.
    let run = Run::committed("recovery-alarm-delay-honoured", REQUEST);
    let mut broken = run.broken();
    let recovery = crate::checkers::request_mut(&mut broken, 2);
    let reply = recovery.messages.last_mut().expect("the reply");
    let text = reply.parts.iter_mut().find_map(|part| match part {
        turnsim_engine::Part::Text { text, .. } if text.len() > 2 => Some(text),
        _ => None,
    });
    let text = text.expect("the recovery continues a partial text");
    text.truncate(2);
    run.assert_fires(REQUEST, &broken, "shows less than the store holds");
}

// ---------------------------------------------------------- outcome-told-true

const OUTCOME: &str = "outcome-told-true";

fn frame_at(record: &RunRecord, what: &str, matches: impl Fn(&turnsim_engine::Frame) -> bool) -> usize {
    crossing_of(record, what, |crossing| matches!(crossing, Boundary::Frame { frame, .. } if matches(frame)))
}

#[test]
fn outcome_told_true_fires_when_a_completed_turn_ends_with_an_error_frame() {
    let run = Run::committed("approval-denied", OUTCOME);
    let mut broken = run.broken();
    let done = frame_at(
        &broken,
        "the last done frame",
        |frame| matches!(frame, turnsim_engine::Frame::Done { request_id, .. } if request_id != "r1"),
    );
    if let Boundary::Frame { frame, .. } = &mut broken.history.crossings[done].what {
        let turnsim_engine::Frame::Done { request_id, .. } = frame.clone() else { unreachable!() };
        *frame = turnsim_engine::Frame::Error { request_id, message: "The turn failed. Please try again.".into() };
    }
    run.assert_fires(OUTCOME, &broken, "answered and its answer was stored, but client c1 was told it failed");
}

#[test]
fn outcome_told_true_fires_when_a_completed_chat_gets_on_error() {
    let run = Run::committed("server-tools-two-steps", OUTCOME);
    let mut broken = run.broken();
    let done = crossing_of(&broken, "on_done", |what| {
        matches!(what, Boundary::Callback { call: turnsim::history::CallbackCall::Done, .. })
    });
    if let Boundary::Callback { call, .. } = &mut broken.history.crossings[done].what {
        *call = turnsim::history::CallbackCall::Error { message: "The turn failed.".into() };
    }
    run.assert_fires(OUTCOME, &broken, "but caller chat1 was told it failed");
}

#[test]
fn outcome_told_true_fires_on_a_second_done_frame() {
    let run = Run::committed("approval-denied", OUTCOME);
    let mut broken = run.broken();
    let done = frame_at(&broken, "a done frame", |frame| matches!(frame, turnsim_engine::Frame::Done { .. }));
    let again = broken.history.crossings[done].what.clone();
    insert_crossings(&mut broken, done + 1, vec![again]);
    run.assert_fires(OUTCOME, &broken, "was sent a second done for");
}

#[test]
fn outcome_told_true_fires_when_a_failed_call_is_told_done() {
    let run = Run::committed("provider-http-500-retries-exhausted", OUTCOME);
    let mut broken = run.broken();
    let error = frame_at(&broken, "the error frame", |frame| matches!(frame, turnsim_engine::Frame::Error { .. }));
    if let Boundary::Frame { frame, .. } = &mut broken.history.crossings[error].what {
        *frame = turnsim_engine::Frame::Done { request_id: "r1".into(), continuation: false };
    }
    run.assert_fires(OUTCOME, &broken, "r1's model call failed, but client c1 was told it was done");
}

// ---------------------------------------------------------- the messenger: told as it happened

const MESSENGER_ONCE: &str = "messenger-once";
const MESSENGER_VIEW: &str = "messenger-view";
const APOLOGY: &str = turnsim_engine::messenger::ERROR_MESSENGER_RESPONSE;

fn set_post(record: &mut RunRecord, number: u32, text: &str) -> usize {
    let at = crossing_of(record, "the post", |what| matches!(what, Boundary::Post { post, .. } if *post == number));
    if let Boundary::Post { text: posted, .. } = &mut record.history.crossings[at].what {
        *posted = text.to_string();
    }
    at
}

#[test]
fn messenger_once_fires_when_a_complete_stored_answer_is_posted_as_the_apology() {
    let run = Run::committed("messenger-done", MESSENGER_ONCE);
    let mut broken = run.broken();
    set_post(&mut broken, 1, turnsim_engine::messenger::INTERRUPTED_MESSENGER_RESPONSE);
    run.assert_fires(
        MESSENGER_ONCE,
        &broken,
        "was answered (model call #1 finished and its answer was stored) but posted the apology",
    );
}

#[test]
fn messenger_once_fires_when_the_partial_is_posted_after_retries_run_out() {
    let run = Run::committed("messenger-retries-run-out-mid-stream", MESSENGER_ONCE);
    let mut broken = run.broken();
    set_post(&mut broken, 1, "The answer is");
    run.assert_fires(
        MESSENGER_ONCE,
        &broken,
        "delivery d1 failed (model call #4 never finished) but posted \"The answer is\"",
    );
}

#[test]
fn messenger_view_and_once_fire_on_the_apology_followed_by_the_partial() {
    let run = Run::committed("messenger-retries-run-out-mid-stream", MESSENGER_VIEW);
    Run::committed("messenger-retries-run-out-mid-stream", MESSENGER_ONCE);
    let mut broken = run.broken();
    // Made on the surface's answer to the apology: the same reply going on.
    let answered =
        crossing_of(&broken, "the answer to post 1", |what| matches!(what, Boundary::PostDone { post: 1, .. }));
    let partial = Boundary::Post { post: 2, delivery: "d1".into(), text: "The answer is".into() };
    insert_crossings(&mut broken, answered + 1, vec![partial]);
    run.assert_fires(MESSENGER_VIEW, &broken, &format!("delivery d1 posted the apology {APOLOGY:?} and more"));
    run.assert_fires(MESSENGER_ONCE, &broken, "posted \"The answer is\" as its answer");
}

// ---------------------------------------------------------- every consumer sees the same call

/// Empties the input of every finished call `edit` picks from the crossings.
fn empty_relayed_call(record: &mut RunRecord, pick: impl Fn(&Boundary) -> bool) {
    let at = crossing_of(record, "a relayed finished call", |what| pick(what));
    let chunk = match &mut record.history.crossings[at].what {
        Boundary::Callback { call: turnsim::history::CallbackCall::Event { chunk }, .. } => chunk,
        Boundary::Frame { frame: turnsim_engine::Frame::Chunk { chunk, .. }, .. } => chunk,
        _ => unreachable!(),
    };
    if let turnsim_engine::Chunk::ToolCall { input, .. } = chunk {
        *input = json!({});
    }
}

#[test]
fn caller_view_fires_on_a_tool_call_relayed_with_no_arguments() {
    let run = Run::committed("server-tools-two-steps", "caller-view");
    let mut broken = run.broken();
    empty_relayed_call(&mut broken, |what| {
        matches!(
            what,
            Boundary::Callback {
                call: turnsim::history::CallbackCall::Event { chunk: turnsim_engine::Chunk::ToolCall { .. } },
                ..
            }
        )
    });
    run.assert_fires("caller-view", &broken, "the finished call tc-lookup-1 (lookup {})");
}

#[test]
fn client_view_fires_on_a_tool_call_streamed_with_no_arguments() {
    let run = Run::committed("server-tools-two-steps", "client-view");
    let mut broken = run.broken();
    empty_relayed_call(&mut broken, |what| {
        matches!(
            what,
            Boundary::Frame {
                frame: turnsim_engine::Frame::Chunk { chunk: turnsim_engine::Chunk::ToolCall { .. }, .. },
                ..
            }
        )
    });
    run.assert_fires("client-view", &broken, "the finished call tc-lookup-1 (lookup {})");
}

// ---------------------------------------------------------- a told failure stands across a restart

#[test]
fn failure_stands_fires_when_a_restart_answers_a_told_failure_with_nobody_connected() {
    // The failed turn's record lost: the next process answers the message
    // its client was told to send again, with no client connected to see.
    let run = Run::committed("provider-http-500-retries-exhausted", "failure-stands");
    let mut broken = run.broken();
    let error = crossing_of(&broken, "the error frame", |what| {
        matches!(what, Boundary::Frame { frame: turnsim_engine::Frame::Error { .. }, .. })
    });
    let mut request = crate::checkers::request_mut(&mut broken, 4).clone();
    request.request_id = "r9".into();
    let boot = Boundary::Boot { loaded: Box::new(broken.history.store_at(error)) };
    let asked = Boundary::ModelRequest { call: 5, request };
    let end = broken.history.crossings.len();
    insert_crossings(&mut broken, end, vec![Boundary::Killed, boot, asked]);
    run.assert_fires(
        "failure-stands",
        &broken,
        "then the model was asked to answer the same user message m2 again (r9)",
    );
}

// ---------------------------------------------------------- what only expectations caught before

#[test]
fn resume_handshake_fires_on_an_offer_naming_another_request() {
    let run = Run::committed("client-resumes-the-stream-after-reconnecting", "resume-handshake");
    let mut broken = run.broken();
    let offer = crossing_of(&broken, "the offer", |what| {
        matches!(what, Boundary::Frame { frame: turnsim_engine::Frame::StreamResuming { .. }, .. })
    });
    if let Boundary::Frame { frame: turnsim_engine::Frame::StreamResuming { request_id }, .. } =
        &mut broken.history.crossings[offer].what
    {
        *request_id = "r99".into();
    }
    run.assert_fires("resume-handshake", &broken, "was offered a resume of r99, but the stream is");
}

#[test]
fn messenger_view_fires_on_a_post_over_the_surfaces_limit() {
    let run = Run::committed("messenger-post-limit-splits-the-reply", MESSENGER_VIEW);
    let mut broken = run.broken();
    set_post(&mut broken, 1, "a post well over sixteen characters");
    run.assert_fires(MESSENGER_VIEW, &broken, "delivery d1's post 1 is 35 characters, over the surface's 16");
}

#[test]
fn single_continuation_fires_inside_the_coalesce_window() {
    // The continuation waits out the scenario's 1 s window after tc-1's
    // result; moved to 100 ms before it, the window was not kept.
    let run = Run::committed("resume-while-a-continuation-waits-gets-resume-none", "single-continuation");
    let mut broken = run.broken();
    let continuation = crossing_of(&broken, "call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    let answered = crossing_of(&broken, "tc-1's result", |what| matches!(what, Boundary::ToolResult { .. }));
    broken.history.crossings[answered].at_us = broken.history.crossings[continuation].at_us - 100_000;
    run.assert_fires(
        "single-continuation",
        &broken,
        "fired 100 ms after its last answer, inside the 1000 ms coalesce window",
    );
}

/// `record` with every `step-start` dropped from what its commits store.
fn without_step_starts(mut record: RunRecord) -> RunRecord {
    for message in committed_messages(&mut record) {
        message.parts.retain(|part| !matches!(part, turnsim_engine::Part::StepStart));
    }
    record
}

#[test]
fn transcript_shape_fires_when_step_boundaries_are_dropped_from_the_store() {
    let run = Run::committed("server-tools-two-steps", "transcript-shape");
    let broken = without_step_starts(run.broken());
    run.assert_fires(
        "transcript-shape",
        &broken,
        "m3: 2 model calls left their output in it but it holds 0 step-starts",
    );
}

#[test]
fn transcript_shape_fires_when_a_seeded_replys_step_boundaries_are_dropped() {
    // The reply the store started with is never re-streamed: recovery gives
    // up on it and rewrites it settled, text kept.
    let run = Run::committed("stored-dead-turn-recovery-refused-gives-up", "transcript-shape");
    let broken = without_step_starts(run.broken());
    run.assert_fires(
        "transcript-shape",
        &broken,
        "m2: the store started with 1 step-starts in it and keeps all it held between them, but holds 0",
    );
}

#[test]
fn caller_view_fires_when_a_discarded_attempt_is_not_taken_back_before_a_retry() {
    // Every attempt ends truncated and the turn fails: no stored answer to
    // hold the caller to, only the retries the engine made keeping nothing.
    let run = Run::committed("crash-as-a-failed-turn-is-recorded", "caller-view");
    let mut broken = run.broken();
    broken.history.crossings.retain(|crossing| {
        !matches!(&crossing.what, Boundary::Callback { call: turnsim::history::CallbackCall::Reset { .. }, .. })
    });
    run.assert_fires(
        "caller-view",
        &broken,
        "chat1 is relayed the model's next text of request r1 while it holds \"Partial\"; the engine asked the model again keeping \"\"",
    );
}

//! Unit tests of the transcript's tool-part state machine against the message
//! model of REFERENCE_SEMANTICS.md §1.1: chunk-driven transitions, client
//! events (tool results, approvals), repair, and the batch / interaction
//! predicates.

use serde_json::{json, Value};
use turnsim_engine::chunk::{Chunk, FinishReason, Usage};
use turnsim_engine::transcript::{
    has_pending_interaction, leaf_assistant, normalise_input, Approval, Message, Part, Role, TextState, ToolOutcome,
    ToolPart, ToolResult, ToolState, ALL_TOOL_STATES, DEFAULT_TOOL_ERROR_TEXT, REPAIR_ERROR_TEXT,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const CALL: &str = "call-1";
const APPROVAL_ID: &str = "approval-1";

/// A tool part in `state`, with the fields a part in that state carries.
fn tool_part(call_id: &str, tool_name: &str, state: ToolState) -> ToolPart {
    let input = match state {
        ToolState::InputStreaming => None,
        _ => Some(json!({ "q": "rust" })),
    };
    let approval = match state {
        ToolState::ApprovalRequested => Some(approval(None)),
        ToolState::ApprovalResponded => Some(approval(Some(true))),
        _ => None,
    };
    ToolPart {
        call_id: call_id.to_string(),
        tool_name: tool_name.to_string(),
        state,
        input_text: String::new(),
        input,
        output: (state == ToolState::OutputAvailable).then(|| json!({ "hits": 3 })),
        error_text: (state == ToolState::OutputError).then(|| "earlier error".to_string()),
        approval,
        repaired: false,
        dynamic: false,
    }
}

fn approval(approved: Option<bool>) -> Approval {
    Approval { id: APPROVAL_ID.to_string(), approved }
}

fn assistant_with(parts: Vec<ToolPart>) -> Message {
    let mut message = Message::assistant("m-1");
    message.parts = parts.into_iter().map(Part::Tool).collect();
    message
}

/// An assistant message holding one `search` tool part `CALL` in `state`.
fn message_with_tool(state: ToolState) -> Message {
    assistant_with(vec![tool_part(CALL, "search", state)])
}

/// An assistant message holding one `search` tool part per `(id, state)`.
fn message_with_tools(tools: &[(&str, ToolState)]) -> Message {
    assistant_with(tools.iter().map(|(id, state)| tool_part(id, "search", *state)).collect())
}

fn tool<'a>(message: &'a Message, call_id: &str) -> &'a ToolPart {
    message.tool(call_id).unwrap_or_else(|| panic!("tool part {call_id} should exist"))
}

fn tool_count(message: &Message) -> usize {
    message.tools().count()
}

fn output(call_id: &str, value: Value) -> ToolResult {
    ToolResult { call_id: call_id.to_string(), outcome: ToolOutcome::Output(value) }
}

fn error(call_id: &str, text: Option<&str>) -> ToolResult {
    ToolResult { call_id: call_id.to_string(), outcome: ToolOutcome::Error(text.map(str::to_string)) }
}

/// Applies `chunk` and says whether the message is any different for it.
fn changes(message: &mut Message, chunk: &Chunk) -> bool {
    let before = message.clone();
    message.apply_chunk(chunk);
    *message != before
}

fn tool_input_start(id: &str, name: &str) -> Chunk {
    Chunk::ToolInputStart { id: id.to_string(), name: name.to_string(), dynamic: false }
}

fn tool_input_delta(id: &str, delta: &str) -> Chunk {
    Chunk::ToolInputDelta { id: id.to_string(), delta: delta.to_string() }
}

fn tool_call(id: &str, name: &str, input: Value) -> Chunk {
    Chunk::ToolCall { id: id.to_string(), name: name.to_string(), input, dynamic: false }
}

fn text_start(id: &str) -> Chunk {
    Chunk::TextStart { id: id.to_string() }
}

fn text_delta(id: &str, delta: &str) -> Chunk {
    Chunk::TextDelta { id: id.to_string(), delta: delta.to_string() }
}

fn text_end(id: &str) -> Chunk {
    Chunk::TextEnd { id: id.to_string() }
}

fn reasoning_start(id: &str) -> Chunk {
    Chunk::ReasoningStart { id: id.to_string() }
}

fn reasoning_delta(id: &str, delta: &str) -> Chunk {
    Chunk::ReasoningDelta { id: id.to_string(), delta: delta.to_string() }
}

fn reasoning_end(id: &str) -> Chunk {
    Chunk::ReasoningEnd { id: id.to_string() }
}

fn apply_all(message: &mut Message, chunks: &[Chunk]) {
    for chunk in chunks {
        message.apply_chunk(chunk);
    }
}

/// An assistant message whose `search` call `CALL` has streamed `input_text`
/// but has not been finalised.
fn streaming_tool_with_text(input_text: &str) -> Message {
    let mut message = Message::assistant("m-1");
    message.apply_chunk(&tool_input_start(CALL, "search"));
    if !input_text.is_empty() {
        message.apply_chunk(&tool_input_delta(CALL, input_text));
    }
    message
}

fn empty_object() -> Value {
    json!({})
}

fn is_client_tool(name: &str) -> bool {
    name == "ask_user"
}

// ---------------------------------------------------------------------------
// tool-input-start
// ---------------------------------------------------------------------------

#[test]
fn tool_input_start_pushes_an_input_streaming_part() {
    let mut message = Message::assistant("m-1");

    assert!(changes(&mut message, &tool_input_start(CALL, "search")), "a new tool-input-start changes the message");

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::InputStreaming, "new part state");
    assert_eq!(part.tool_name, "search", "new part keeps the chunk's tool name");
    assert_eq!(part.input, None, "a new part has no input yet");
    assert_eq!(part.input_text, "", "a new part has no streamed text yet");
    assert_eq!(part.output, None, "a new part has no output");
    assert!(!part.repaired, "a new part is not repaired");
}

#[test]
fn tool_input_start_for_an_existing_id_is_a_no_op() {
    let mut message = streaming_tool_with_text("{\"q\":");
    let before = message.clone();

    assert!(
        !changes(&mut message, &tool_input_start(CALL, "other_tool")),
        "a replayed tool-input-start reports no change"
    );
    assert_eq!(message, before, "a replayed tool-input-start must not reset or duplicate the part");
}

#[test]
fn tool_input_start_never_regresses_a_settled_part() {
    // First write wins: the OpenAI Responses replay (#1404) re-sends a start.
    let mut message = message_with_tool(ToolState::OutputAvailable);
    let before = message.clone();

    assert!(!changes(&mut message, &tool_input_start(CALL, "search")));
    assert_eq!(message, before, "a replayed tool-input-start must leave an output-available part as it was");
    assert_eq!(tool_count(&message), 1, "no duplicate part is pushed");
}

// ---------------------------------------------------------------------------
// tool-input-delta
// ---------------------------------------------------------------------------

#[test]
fn tool_input_delta_appends_while_input_streaming() {
    let mut message = streaming_tool_with_text("");

    assert!(changes(&mut message, &tool_input_delta(CALL, "{\"q\":")));
    assert!(changes(&mut message, &tool_input_delta(CALL, "\"rust\"}")));

    let part = tool(&message, CALL);
    assert_eq!(part.input_text, "{\"q\":\"rust\"}", "deltas accumulate in order while input-streaming");
    assert_eq!(part.state, ToolState::InputStreaming, "a delta does not finalise the input");
}

#[test]
fn tool_input_delta_is_ignored_outside_input_streaming() {
    for state in ALL_TOOL_STATES {
        if state == ToolState::InputStreaming {
            continue;
        }
        let mut message = message_with_tool(state);
        let before = message.clone();

        assert!(
            !changes(&mut message, &tool_input_delta(CALL, "{\"late\":true}")),
            "a delta on a {} part reports no change",
            state.as_str()
        );
        assert_eq!(message, before, "a delta must not touch a {} part", state.as_str());
    }
}

#[test]
fn tool_input_delta_for_an_unknown_id_creates_nothing() {
    let mut message = Message::assistant("m-1");

    assert!(!changes(&mut message, &tool_input_delta(CALL, "{")));
    assert!(message.parts.is_empty(), "a delta without a start must not create a part");
}

// ---------------------------------------------------------------------------
// tool-call (= tool-input-available)
// ---------------------------------------------------------------------------

#[test]
fn tool_call_moves_input_streaming_to_input_available_with_normalised_input() {
    let mut message = streaming_tool_with_text("{\"q\":\"ru");

    assert!(changes(&mut message, &tool_call(CALL, "search", json!("{\"q\":\"rust\"}"))));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::InputAvailable, "the call finalises the input");
    assert_eq!(part.input, Some(json!({ "q": "rust" })), "stringified JSON input is normalised to an object");
    assert_eq!(tool_count(&message), 1, "the existing part is updated in place");
}

#[test]
fn tool_call_normalises_a_non_object_input_to_an_empty_object() {
    let mut message = streaming_tool_with_text("");

    assert!(changes(&mut message, &tool_call(CALL, "search", json!(42))));

    assert_eq!(tool(&message, CALL).input, Some(empty_object()), "a non-object input defaults to {{}}");
}

#[test]
fn tool_call_without_an_existing_part_pushes_an_input_available_part() {
    let mut message = Message::assistant("m-1");

    assert!(changes(&mut message, &tool_call(CALL, "search", json!({ "q": "rust" }))));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::InputAvailable, "a call without a start lands directly in input-available");
    assert_eq!(part.tool_name, "search");
    assert_eq!(part.input, Some(json!({ "q": "rust" })));
    assert_eq!(tool_count(&message), 1);
}

#[test]
fn tool_call_is_ignored_in_every_state_but_input_streaming() {
    for state in ALL_TOOL_STATES {
        if state == ToolState::InputStreaming {
            continue;
        }
        let mut message = message_with_tool(state);
        let before = message.clone();

        assert!(
            !changes(&mut message, &tool_call(CALL, "search", json!({ "q": "replayed" }))),
            "a tool-call on a {} part reports no change",
            state.as_str()
        );
        assert_eq!(message, before, "a tool-call must not touch a {} part", state.as_str());
    }
}

#[test]
fn tool_call_never_regresses_an_output_available_part() {
    let mut message = message_with_tool(ToolState::OutputAvailable);

    message.apply_chunk(&tool_call(CALL, "search", json!({ "q": "replayed" })));

    let part = tool(&message, CALL);
    assert_eq!(
        part.state,
        ToolState::OutputAvailable,
        "a replayed tool-call must not move output-available back to input-available"
    );
    assert_eq!(part.output, Some(json!({ "hits": 3 })), "the output is kept");
    assert_eq!(part.input, Some(json!({ "q": "rust" })), "the first input wins");
}

#[test]
fn tool_input_end_and_stream_control_chunks_change_nothing() {
    let mut message = streaming_tool_with_text("{\"q\":\"rust\"}");
    let before = message.clone();
    let chunks = [
        Chunk::ToolInputEnd { id: CALL.to_string() },
        Chunk::FinishStep { reason: FinishReason::ToolCalls, usage: Usage::default() },
        Chunk::Finish { reason: FinishReason::ToolCalls },
        Chunk::Error { message: "boom".to_string() },
    ];

    for chunk in &chunks {
        assert!(!changes(&mut message, chunk), "{} reports no change", chunk.kind());
    }
    assert_eq!(message, before, "tool-input-end and stream control chunks leave the parts alone");
}

// ---------------------------------------------------------------------------
// text and reasoning
// ---------------------------------------------------------------------------

#[test]
fn text_start_pushes_a_streaming_text_part() {
    let mut message = Message::assistant("m-1");

    assert!(changes(&mut message, &text_start("t1")));

    assert_eq!(
        message.parts.to_vec(),
        vec![Part::Text { id: "t1".into(), text: String::new(), state: TextState::Streaming }]
    );
}

#[test]
fn text_delta_appends_to_the_last_text_part() {
    let mut message = Message::assistant("m-1");
    apply_all(
        &mut message,
        &[
            text_start("t1"),
            text_delta("t1", "one "),
            text_end("t1"),
            text_start("t2"),
            text_delta("t2", "two"),
            text_delta("t2", "!"),
        ],
    );

    assert_eq!(
        message.parts.to_vec(),
        vec![
            Part::Text { id: "t1".into(), text: "one ".into(), state: TextState::Done },
            Part::Text { id: "t2".into(), text: "two!".into(), state: TextState::Streaming },
        ],
        "deltas land in the last text part only"
    );
    assert_eq!(message.text(), "one two!");
}

#[test]
fn text_delta_without_an_open_part_creates_one() {
    let mut message = Message::assistant("m-1");

    assert!(changes(&mut message, &text_delta("t1", "resumed")));

    assert_eq!(
        message.parts.to_vec(),
        vec![Part::Text { id: "t1".into(), text: "resumed".into(), state: TextState::Streaming }],
        "a delta without text-start creates a streaming text part holding it"
    );
}

#[test]
fn text_end_marks_the_text_part_done() {
    let mut message = Message::assistant("m-1");
    apply_all(&mut message, &[text_start("t1"), text_delta("t1", "hi")]);

    assert!(changes(&mut message, &text_end("t1")));
    assert!(!changes(&mut message, &text_end("t1")), "ending a done part again reports no change");

    assert_eq!(message.parts.to_vec(), vec![Part::Text { id: "t1".into(), text: "hi".into(), state: TextState::Done }]);
}

#[test]
fn reasoning_start_pushes_a_streaming_reasoning_part() {
    let mut message = Message::assistant("m-1");

    assert!(changes(&mut message, &reasoning_start("r1")));

    assert_eq!(
        message.parts.to_vec(),
        vec![Part::Reasoning { id: "r1".into(), text: String::new(), state: TextState::Streaming }]
    );
}

#[test]
fn reasoning_delta_appends_to_the_last_reasoning_part_not_to_text() {
    let mut message = Message::assistant("m-1");
    apply_all(
        &mut message,
        &[
            reasoning_start("r1"),
            text_start("t1"),
            reasoning_delta("r1", "think"),
            text_delta("t1", "say"),
            reasoning_delta("r1", "ing"),
        ],
    );

    assert_eq!(
        message.parts.to_vec(),
        vec![
            Part::Reasoning { id: "r1".into(), text: "thinking".into(), state: TextState::Streaming },
            Part::Text { id: "t1".into(), text: "say".into(), state: TextState::Streaming },
        ],
        "reasoning and text deltas each go to their own kind of part"
    );
}

#[test]
fn reasoning_delta_without_an_open_part_creates_one() {
    let mut message = Message::assistant("m-1");
    message.apply_chunk(&text_start("t1"));

    assert!(changes(&mut message, &reasoning_delta("r1", "resumed")));

    assert_eq!(
        message.parts[1],
        Part::Reasoning { id: "r1".into(), text: "resumed".into(), state: TextState::Streaming },
        "a reasoning delta without reasoning-start creates a reasoning part"
    );
    assert_eq!(message.text(), "", "the text part is not written to");
}

#[test]
fn reasoning_end_marks_the_reasoning_part_done() {
    let mut message = Message::assistant("m-1");
    apply_all(&mut message, &[reasoning_start("r1"), reasoning_delta("r1", "hmm"), text_start("t1")]);

    assert!(changes(&mut message, &reasoning_end("r1")));

    assert_eq!(
        message.parts.to_vec(),
        vec![
            Part::Reasoning { id: "r1".into(), text: "hmm".into(), state: TextState::Done },
            Part::Text { id: "t1".into(), text: String::new(), state: TextState::Streaming },
        ],
        "reasoning-end closes the reasoning part and leaves text streaming"
    );
}

// ---------------------------------------------------------------------------
// finalise_streamed_tools
// ---------------------------------------------------------------------------

#[test]
fn finalise_moves_fully_streamed_input_to_input_available() {
    let mut message = streaming_tool_with_text("{\"q\":\"rust\"}");

    assert_eq!(message.finalise_streamed_tools(), vec![CALL.to_string()], "the finalised call id is returned");

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::InputAvailable);
    assert_eq!(part.input, Some(json!({ "q": "rust" })));
}

#[test]
fn finalise_normalises_a_non_object_streamed_input() {
    let mut message = streaming_tool_with_text("[1, 2]");

    assert_eq!(message.finalise_streamed_tools(), vec![CALL.to_string()]);

    assert_eq!(tool(&message, CALL).input, Some(empty_object()), "parseable non-object input is normalised to {{}}");
}

#[test]
fn finalise_leaves_unparseable_input_streaming() {
    let mut message = streaming_tool_with_text("{\"q\":\"ru");
    let before = message.clone();

    assert!(message.finalise_streamed_tools().is_empty());
    assert_eq!(message, before, "truncated JSON input must stay input-streaming, unchanged");
}

#[test]
fn finalise_leaves_empty_input_streaming() {
    let mut message = streaming_tool_with_text("");
    let before = message.clone();

    assert!(message.finalise_streamed_tools().is_empty());
    assert_eq!(message, before, "a part that streamed no input must stay input-streaming, unchanged");
}

#[test]
fn finalise_touches_only_input_streaming_parts_and_returns_ids_in_order() {
    let mut message = Message::assistant("m-1");
    apply_all(
        &mut message,
        &[
            tool_input_start("a", "search"),
            tool_input_delta("a", "{\"n\":1}"),
            tool_call("b", "search", json!({ "n": 2 })),
            tool_input_start("c", "search"),
            tool_input_delta("c", "{\"n\":3}"),
        ],
    );

    assert_eq!(
        message.finalise_streamed_tools(),
        vec!["a".to_string(), "c".to_string()],
        "only the streamed parts are finalised, in part order"
    );
    assert_eq!(tool(&message, "b").input, Some(json!({ "n": 2 })));
    assert_eq!(tool(&message, "c").input, Some(json!({ "n": 3 })));
}

// ---------------------------------------------------------------------------
// apply_tool_result
// ---------------------------------------------------------------------------

fn assert_result_output_lands_on(state: ToolState) {
    let mut message = message_with_tool(state);

    assert!(
        message.apply_tool_result(&output(CALL, json!({ "ok": true }))),
        "a result applies to a {} part",
        state.as_str()
    );

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::OutputAvailable, "from {}", state.as_str());
    assert_eq!(part.output, Some(json!({ "ok": true })), "from {}", state.as_str());
    assert_eq!(part.error_text, None, "from {}", state.as_str());
}

fn assert_result_ignored_on(state: ToolState) {
    let mut message = message_with_tool(state);
    let before = message.clone();

    assert!(
        !message.apply_tool_result(&output(CALL, json!({ "late": true }))),
        "an output result on a {} part reports no change",
        state.as_str()
    );
    assert!(
        !message.apply_tool_result(&error(CALL, Some("late"))),
        "an error result on a {} part reports no change",
        state.as_str()
    );
    assert_eq!(message, before, "a {} part must not be updated by a result", state.as_str());
}

#[test]
fn tool_result_output_settles_an_input_available_part() {
    assert_result_output_lands_on(ToolState::InputAvailable);
}

#[test]
fn tool_result_output_settles_an_approval_requested_part() {
    assert_result_output_lands_on(ToolState::ApprovalRequested);
}

#[test]
fn tool_result_output_settles_an_approval_responded_part() {
    assert_result_output_lands_on(ToolState::ApprovalResponded);
}

#[test]
fn tool_result_error_sets_output_error_with_the_given_text() {
    let mut message = message_with_tool(ToolState::InputAvailable);

    assert!(message.apply_tool_result(&error(CALL, Some("disk full"))));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(part.error_text.as_deref(), Some("disk full"));
    assert_eq!(part.output, None, "an errored result records no output");
}

#[test]
fn tool_result_error_without_text_uses_the_default_error_text() {
    let mut message = message_with_tool(ToolState::ApprovalRequested);

    assert!(message.apply_tool_result(&error(CALL, None)));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::OutputError);
    assert_eq!(DEFAULT_TOOL_ERROR_TEXT, "Tool execution denied by user");
    assert_eq!(
        part.error_text.as_deref(),
        Some(DEFAULT_TOOL_ERROR_TEXT),
        "an error result naming no text takes the default (tool-state.ts:69)"
    );
}

#[test]
fn tool_result_is_ignored_on_an_output_available_part() {
    assert_result_ignored_on(ToolState::OutputAvailable);
}

#[test]
fn tool_result_is_ignored_on_an_output_error_part() {
    assert_result_ignored_on(ToolState::OutputError);
}

#[test]
fn tool_result_is_ignored_on_an_output_denied_part() {
    assert_result_ignored_on(ToolState::OutputDenied);
}

#[test]
fn tool_result_is_ignored_on_an_input_streaming_part() {
    assert_result_ignored_on(ToolState::InputStreaming);
}

#[test]
fn tool_result_for_an_unknown_id_is_a_no_op() {
    let mut message = message_with_tool(ToolState::InputAvailable);
    let before = message.clone();

    assert!(!message.apply_tool_result(&output("no-such-call", json!(1))));
    assert_eq!(message, before, "an unknown id must not touch any part");
}

#[test]
fn tool_result_applies_only_to_the_named_call() {
    let mut message = message_with_tools(&[("a", ToolState::InputAvailable), ("b", ToolState::InputAvailable)]);

    assert!(message.apply_tool_result(&output("b", json!("done"))));

    assert_eq!(tool(&message, "a").state, ToolState::InputAvailable, "sibling untouched");
    assert_eq!(tool(&message, "b").state, ToolState::OutputAvailable);
}

// ---------------------------------------------------------------------------
// request_approval / apply_approval
// ---------------------------------------------------------------------------

#[test]
fn request_approval_moves_input_available_to_approval_requested() {
    let mut message = message_with_tool(ToolState::InputAvailable);

    assert!(message.request_approval(CALL, "ap-7"));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::ApprovalRequested);
    assert_eq!(part.approval, Some(Approval { id: "ap-7".into(), approved: None }));
}

#[test]
fn request_approval_is_ignored_outside_input_available() {
    for state in ALL_TOOL_STATES {
        if state == ToolState::InputAvailable {
            continue;
        }
        let mut message = message_with_tool(state);
        let before = message.clone();

        assert!(!message.request_approval(CALL, "ap-7"), "request on {}", state.as_str());
        assert_eq!(message, before, "an approval request must not touch a {} part", state.as_str());
    }
}

#[test]
fn approval_granted_moves_approval_requested_to_approval_responded_keeping_the_id() {
    let mut message = message_with_tool(ToolState::InputAvailable);
    message.request_approval(CALL, "ap-7");

    assert!(message.apply_approval(CALL, true));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::ApprovalResponded);
    assert_eq!(
        part.approval,
        Some(Approval { id: "ap-7".into(), approved: Some(true) }),
        "the approval id set by request_approval is preserved"
    );
}

#[test]
fn approval_denied_moves_approval_requested_to_output_denied_keeping_the_id() {
    let mut message = message_with_tool(ToolState::InputAvailable);
    message.request_approval(CALL, "ap-7");

    assert!(message.apply_approval(CALL, false));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::OutputDenied);
    assert_eq!(
        part.approval,
        Some(Approval { id: "ap-7".into(), approved: Some(false) }),
        "the approval id set by request_approval is preserved"
    );
}

#[test]
fn approval_granted_moves_input_available_to_approval_responded() {
    let mut message = message_with_tool(ToolState::InputAvailable);

    assert!(message.apply_approval(CALL, true));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::ApprovalResponded);
    assert_eq!(part.approval.as_ref().and_then(|approval| approval.approved), Some(true));
}

#[test]
fn approval_denied_moves_input_available_to_output_denied() {
    let mut message = message_with_tool(ToolState::InputAvailable);

    assert!(message.apply_approval(CALL, false));

    let part = tool(&message, CALL);
    assert_eq!(part.state, ToolState::OutputDenied);
    assert_eq!(part.approval.as_ref().and_then(|approval| approval.approved), Some(false));
}

#[test]
fn approval_is_ignored_outside_input_available_and_approval_requested() {
    for state in ALL_TOOL_STATES {
        if state.is_pending() {
            continue;
        }
        for approved in [true, false] {
            let mut message = message_with_tool(state);
            let before = message.clone();

            assert!(
                !message.apply_approval(CALL, approved),
                "approval({approved}) on {} reports no change",
                state.as_str()
            );
            assert_eq!(message, before, "approval({approved}) must not touch a {} part", state.as_str());
        }
    }
}

#[test]
fn approval_for_an_unknown_id_is_a_no_op() {
    let mut message = message_with_tool(ToolState::ApprovalRequested);
    let before = message.clone();

    assert!(!message.apply_approval("no-such-call", true));
    assert_eq!(message, before);
}

// ---------------------------------------------------------------------------
// repair_tools
// ---------------------------------------------------------------------------

fn keep_nothing(_: &ToolPart) -> bool {
    false
}

fn assert_repaired(part: &ToolPart) {
    assert_eq!(part.state, ToolState::OutputError, "{} is errored", part.call_id);
    assert_eq!(part.error_text.as_deref(), Some(REPAIR_ERROR_TEXT), "{} carries the repair text", part.call_id);
    assert!(part.repaired, "{} is flagged repaired", part.call_id);
    assert!(
        matches!(part.input, Some(Value::Object(_))),
        "{} has an object input after repair, got {:?}",
        part.call_id,
        part.input
    );
}

#[test]
fn repair_error_text_matches_the_reference() {
    assert_eq!(REPAIR_ERROR_TEXT, "The tool call was interrupted before a result was recorded.");
}

#[test]
fn repair_errors_an_input_streaming_part() {
    let mut message = streaming_tool_with_text("");

    assert_eq!(message.repair_tools(keep_nothing), vec![CALL.to_string()]);

    let part = tool(&message, CALL);
    assert_repaired(part);
    assert_eq!(part.input, Some(empty_object()), "no streamed input repairs to {{}}");
}

#[test]
fn repair_turns_unparseable_partial_input_into_an_empty_object() {
    let mut message = streaming_tool_with_text("{\"q\":\"ru");

    message.repair_tools(keep_nothing);

    let part = tool(&message, CALL);
    assert_repaired(part);
    assert_eq!(part.input, Some(empty_object()));
}

#[test]
fn repair_parses_complete_streamed_input_into_an_object() {
    let mut message = streaming_tool_with_text("{\"q\":\"rust\"}");

    message.repair_tools(keep_nothing);

    let part = tool(&message, CALL);
    assert_repaired(part);
    assert_eq!(part.input, Some(json!({ "q": "rust" })));
}

#[test]
fn repair_errors_an_input_available_server_tool_part() {
    let mut message = message_with_tool(ToolState::InputAvailable);

    assert_eq!(message.repair_tools(keep_nothing), vec![CALL.to_string()]);

    let part = tool(&message, CALL);
    assert_repaired(part);
    assert_eq!(part.input, Some(json!({ "q": "rust" })), "the input is kept");
}

#[test]
fn repair_errors_an_input_available_client_tool_part() {
    let mut message = assistant_with(vec![tool_part(CALL, "ask_user", ToolState::InputAvailable)]);

    assert_eq!(message.repair_tools(keep_nothing), vec![CALL.to_string()], "Think repairs client tools too");
    assert_repaired(tool(&message, CALL));
}

#[test]
fn repair_errors_an_approval_requested_part() {
    let mut message = message_with_tool(ToolState::ApprovalRequested);

    assert_eq!(message.repair_tools(keep_nothing), vec![CALL.to_string()]);
    assert_repaired(tool(&message, CALL));
}

#[test]
fn repair_normalises_a_non_object_input_first() {
    // A part read back from storage may carry stringified input.
    let mut part = tool_part(CALL, "search", ToolState::InputAvailable);
    part.input = Some(json!("{\"q\":\"rust\"}"));
    let mut message = assistant_with(vec![part]);

    message.repair_tools(keep_nothing);

    let part = tool(&message, CALL);
    assert_repaired(part);
    assert_eq!(
        part.input,
        Some(json!({ "q": "rust" })),
        "repair normalises the input first (stringified JSON → object)"
    );
}

#[test]
fn repair_leaves_settled_parts_untouched() {
    let mut message = message_with_tools(&[
        ("a", ToolState::OutputAvailable),
        ("b", ToolState::OutputError),
        ("c", ToolState::OutputDenied),
    ]);
    let before = message.clone();

    assert!(message.repair_tools(keep_nothing).is_empty());
    assert_eq!(message, before, "settled parts must not be rewritten");
}

#[test]
fn repair_keeps_an_approval_responded_part_verbatim() {
    let mut message = message_with_tool(ToolState::ApprovalResponded);
    let before = message.clone();

    assert!(message.repair_tools(keep_nothing).is_empty());
    assert_eq!(message, before, "approval-responded is kept verbatim");
}

#[test]
fn repair_treats_a_part_carrying_an_output_as_settled() {
    let mut part = tool_part(CALL, "search", ToolState::InputAvailable);
    part.output = Some(json!("already there"));
    let mut message = assistant_with(vec![part]);
    let before = message.clone();

    assert!(message.repair_tools(keep_nothing).is_empty());
    assert_eq!(message, before, "an output field counts as a settled result");
}

#[test]
fn repair_keeps_the_parts_the_keep_predicate_names() {
    let mut message = assistant_with(vec![
        tool_part("kept", "ask_user", ToolState::InputAvailable),
        tool_part("fixed", "search", ToolState::InputAvailable),
    ]);

    let repaired = message.repair_tools(|part| part.tool_name == "ask_user");

    assert_eq!(repaired, vec!["fixed".to_string()]);
    assert_eq!(
        tool(&message, "kept"),
        &tool_part("kept", "ask_user", ToolState::InputAvailable),
        "a part the predicate keeps is left verbatim"
    );
    assert_repaired(tool(&message, "fixed"));
}

#[test]
fn repair_returns_the_repaired_ids_in_part_order() {
    let mut message = message_with_tools(&[
        ("c", ToolState::ApprovalRequested),
        ("settled", ToolState::OutputAvailable),
        ("a", ToolState::InputStreaming),
        ("responded", ToolState::ApprovalResponded),
        ("b", ToolState::InputAvailable),
    ]);

    assert_eq!(message.repair_tools(keep_nothing), vec!["c".to_string(), "a".to_string(), "b".to_string()]);
    assert_eq!(tool(&message, "settled").state, ToolState::OutputAvailable);
    assert_eq!(tool(&message, "responded").state, ToolState::ApprovalResponded);
}

#[test]
fn repair_twice_repairs_nothing_the_second_time() {
    let mut message = message_with_tools(&[("a", ToolState::InputStreaming), ("b", ToolState::InputAvailable)]);
    message.repair_tools(keep_nothing);
    let once = message.clone();

    assert!(message.repair_tools(keep_nothing).is_empty());
    assert_eq!(message, once, "a repaired part is settled");
}

// ---------------------------------------------------------------------------
// has_incomplete_tool_batch
// ---------------------------------------------------------------------------

const PENDING: [ToolState; 2] = [ToolState::InputAvailable, ToolState::ApprovalRequested];
const SETTLED: [ToolState; 4] =
    [ToolState::OutputAvailable, ToolState::OutputError, ToolState::OutputDenied, ToolState::ApprovalResponded];

#[test]
fn incomplete_batch_when_a_pending_part_sits_next_to_a_settled_part() {
    for pending in PENDING {
        for settled in SETTLED {
            for order in [[pending, settled], [settled, pending]] {
                let message = message_with_tools(&[("a", order[0]), ("b", order[1])]);
                assert!(
                    message.has_incomplete_tool_batch(),
                    "{} + {} is an incomplete batch",
                    order[0].as_str(),
                    order[1].as_str()
                );
            }
        }
    }
}

#[test]
fn all_pending_leaf_is_not_an_incomplete_batch() {
    let message = message_with_tools(&[
        ("a", ToolState::InputAvailable),
        ("b", ToolState::ApprovalRequested),
        ("c", ToolState::InputAvailable),
    ]);

    assert!(!message.has_incomplete_tool_batch(), "an all-pending leaf lets a continuation fire");
}

#[test]
fn all_settled_leaf_is_not_an_incomplete_batch() {
    let message = message_with_tools(&[
        ("a", ToolState::OutputAvailable),
        ("b", ToolState::OutputError),
        ("c", ToolState::OutputDenied),
        ("d", ToolState::ApprovalResponded),
    ]);

    assert!(!message.has_incomplete_tool_batch());
}

#[test]
fn input_streaming_is_not_pending_for_the_batch_predicate() {
    for settled in SETTLED {
        let message = message_with_tools(&[("a", ToolState::InputStreaming), ("b", settled)]);
        assert!(
            !message.has_incomplete_tool_batch(),
            "input-streaming + {} is not a batch: streaming is not pending",
            settled.as_str()
        );
    }
}

#[test]
fn input_streaming_is_not_settled_for_the_batch_predicate() {
    for pending in PENDING {
        let message = message_with_tools(&[("a", ToolState::InputStreaming), ("b", pending)]);
        assert!(
            !message.has_incomplete_tool_batch(),
            "input-streaming + {} is not a batch: streaming is not settled",
            pending.as_str()
        );
    }
}

#[test]
fn message_without_tools_is_not_an_incomplete_batch() {
    let mut message = Message::assistant("m-1");
    apply_all(&mut message, &[text_start("t1"), text_delta("t1", "hi")]);

    assert!(!message.has_incomplete_tool_batch());
}

#[test]
fn batch_predicate_reads_only_the_leaf_assistant() {
    let earlier = message_with_tools(&[("a", ToolState::InputAvailable), ("b", ToolState::OutputAvailable)]);
    let mut leaf = message_with_tool(ToolState::OutputAvailable);
    leaf.id = "m-2".into();
    let messages = vec![earlier, Message::user("u-1", "next"), leaf];

    let leaf = leaf_assistant(&messages).expect("there is an assistant message");
    assert_eq!(leaf.id, "m-2");
    assert!(!leaf.has_incomplete_tool_batch(), "a mid-batch earlier message does not make the leaf incomplete");
}

#[test]
fn pending_tool_ids_lists_input_available_and_approval_requested() {
    let message = message_with_tools(&[
        ("a", ToolState::InputStreaming),
        ("b", ToolState::InputAvailable),
        ("c", ToolState::OutputAvailable),
        ("d", ToolState::ApprovalRequested),
        ("e", ToolState::ApprovalResponded),
    ]);

    assert_eq!(message.pending_tool_ids(), vec!["b".to_string(), "d".to_string()]);
}

// ---------------------------------------------------------------------------
// has_pending_interaction
// ---------------------------------------------------------------------------

#[test]
fn approval_requested_in_any_assistant_message_is_a_pending_interaction() {
    // The approval sits in an earlier message, not the leaf.
    let earlier = assistant_with(vec![tool_part("a", "search", ToolState::ApprovalRequested)]);
    let mut leaf = message_with_tool(ToolState::OutputAvailable);
    leaf.id = "m-2".into();
    let messages = vec![earlier, Message::user("u-1", "hi"), leaf];

    assert!(has_pending_interaction(&messages, |_| false));
}

#[test]
fn input_available_client_tool_is_a_pending_interaction() {
    let messages = vec![assistant_with(vec![tool_part(CALL, "ask_user", ToolState::InputAvailable)])];

    assert!(has_pending_interaction(&messages, is_client_tool));
}

#[test]
fn input_available_server_tool_is_not_a_pending_interaction() {
    let messages = vec![assistant_with(vec![tool_part(CALL, "search", ToolState::InputAvailable)])];

    assert!(!has_pending_interaction(&messages, is_client_tool));
}

#[test]
fn input_streaming_client_tool_is_not_a_pending_interaction() {
    let messages = vec![assistant_with(vec![tool_part(CALL, "ask_user", ToolState::InputStreaming)])];

    assert!(!has_pending_interaction(&messages, is_client_tool));
}

#[test]
fn settled_client_tools_are_not_a_pending_interaction() {
    let messages = vec![assistant_with(
        SETTLED.iter().enumerate().map(|(index, state)| tool_part(&format!("c{index}"), "ask_user", *state)).collect(),
    )];

    assert!(!has_pending_interaction(&messages, |_| true));
}

#[test]
fn user_messages_are_ignored_by_the_pending_interaction_check() {
    let mut user = Message::user("u-1", "hi");
    user.parts.push(Part::Tool(tool_part(CALL, "ask_user", ToolState::ApprovalRequested)));
    assert_eq!(user.role, Role::User);

    assert!(!has_pending_interaction(&[user], |_| true));
}

// ---------------------------------------------------------------------------
// leaf_assistant, normalise_input
// ---------------------------------------------------------------------------

#[test]
fn leaf_assistant_is_the_last_assistant_message() {
    let messages = vec![
        Message::user("u-1", "one"),
        Message::assistant("a-1"),
        Message::user("u-2", "two"),
        Message::assistant("a-2"),
        Message::user("u-3", "three"),
    ];

    assert_eq!(
        leaf_assistant(&messages).map(|message| message.id.as_str()),
        Some("a-2"),
        "trailing user messages are skipped"
    );
}

#[test]
fn leaf_assistant_is_none_without_an_assistant_message() {
    let messages = vec![Message::user("u-1", "one")];

    assert_eq!(leaf_assistant(&messages), None);
    assert_eq!(leaf_assistant(&[]), None);
}

#[test]
fn normalise_input_keeps_an_object() {
    let input = json!({ "q": "rust", "n": [1, 2] });

    assert_eq!(normalise_input(input.clone()), input);
}

#[test]
fn normalise_input_parses_a_json_object_string() {
    assert_eq!(normalise_input(json!("{\"q\":\"rust\"}")), json!({ "q": "rust" }));
}

#[test]
fn normalise_input_turns_a_json_non_object_string_into_an_empty_object() {
    assert_eq!(normalise_input(json!("[1,2]")), empty_object());
    assert_eq!(normalise_input(json!("\"text\"")), empty_object());
}

#[test]
fn normalise_input_turns_an_unparseable_string_into_an_empty_object() {
    assert_eq!(normalise_input(json!("{\"q\":")), empty_object());
    assert_eq!(normalise_input(json!("")), empty_object());
}

#[test]
fn normalise_input_turns_other_values_into_an_empty_object() {
    for value in [json!(null), json!(true), json!(42), json!([1, 2])] {
        assert_eq!(normalise_input(value.clone()), empty_object(), "{value} normalises to {{}}");
    }
}

// ---------------------------------------------------------------------------
// Replay safety (first write wins)
// ---------------------------------------------------------------------------

fn tool_stream() -> Vec<Chunk> {
    vec![
        tool_input_start("a", "search"),
        tool_input_delta("a", "{\"q\":"),
        tool_input_delta("a", "\"rust\"}"),
        tool_call("a", "search", json!({ "q": "rust" })),
        tool_call("b", "ask_user", json!("{\"question\":\"ok?\"}")),
    ]
}

fn tool_parts(message: &Message) -> Vec<ToolPart> {
    message.tools().cloned().collect()
}

#[test]
fn replaying_a_chunk_sequence_leaves_tool_parts_as_after_once() {
    let mut message = Message::assistant("m-1");
    apply_all(&mut message, &tool_stream());
    let once = tool_parts(&message);

    apply_all(&mut message, &tool_stream());

    assert_eq!(tool_parts(&message), once, "a replayed stream must not duplicate, reset or re-input tool parts");
}

#[test]
fn replaying_a_chunk_sequence_never_regresses_settled_parts() {
    let mut message = Message::assistant("m-1");
    apply_all(&mut message, &tool_stream());
    assert!(message.apply_tool_result(&output("a", json!({ "hits": 3 }))));
    assert!(message.request_approval("b", "ap-1"));
    let settled = tool_parts(&message);

    apply_all(&mut message, &tool_stream());

    assert_eq!(
        tool_parts(&message),
        settled,
        "a replay must leave output-available and approval-requested parts as they were"
    );
}

//! Every invariant checker fires on a broken history. Each test takes a real
//! clean run, shows the invariant reports nothing on it, then breaks exactly
//! that rule the way an engine bug would (a crossing of its boundary history
//! inserted, removed or edited — a commit, a model request, a frame, a
//! callback — or the run's end changed) and shows the checker reports it
//! under its own name. The engine's own events are never touched: the
//! invariants do not read them.

use turnsim::check::invariants::INVARIANTS;
use turnsim::check::{told_failure_since, CheckInput, Violation};
use turnsim::history::{Boundary, CallbackCall, Crossing, StreamEnd};
use turnsim::scenario::ScenarioFile;
use turnsim::world::{self, RunEnd, RunRecord};
use turnsim_engine::durable::{DeliveryCheckpoint, DeliveryStage, Write};
use turnsim_engine::messenger::{ERROR_MESSENGER_RESPONSE, INTERRUPTED_MESSENGER_RESPONSE};
use turnsim_engine::ports::{ExhaustedContext, Frame, ModelRequest, ServerToolCall};
use turnsim_engine::transcript::TextState;
use turnsim_engine::{Chunk, FinishReason, Message, Part, RegressionSet, ToolOutcome, ToolPart, ToolState, Usage};

use crate::common::{inline, scenario};

/// Two client tools in one batch, both ready when the user turn ends: `tc-a`
/// answered at ~20 ms, `tc-b` at ~300 ms, then one continuation (`r4`).
const TWO_CLIENT_TOOLS: &str = r#"
name: two-client-tools
engine:
  tools:
    tool_a: { kind: client }
    tool_b: { kind: client }
model:
  - - tool: { id: tc-a, name: tool_a, input: { n: 1 }, finalize: finish }
    - tool: { id: tc-b, name: tool_b, input: { n: 2 }, finalize: finish }
    - finish: { reason: tool-calls }
  - - text: "Both done."
    - finish: { reason: stop }
client:
  tools:
    tool_a: { answer_after_ms: [20, 20], output: "a", auto_continue: true }
    tool_b: { answer_after_ms: [300, 300], output: "b", auto_continue: true }
actions:
  - at_ms: 0
    user_message: { text: "do both" }
"#;

/// A client tool nobody answers, abandoned by a second user message: the
/// engine repairs `tc-a` just before the new user turn `r4`.
const PARKED_THEN_USER: &str = r#"
name: parked-then-user
engine:
  tools:
    tool_a: { kind: client }
model:
  - - tool: { id: tc-a, name: tool_a, input: { n: 1 } }
    - finish: { reason: tool-calls }
  - - text: "Moving on."
    - finish: { reason: stop }
client:
  tools:
    tool_a: { never_answers: true }
actions:
  - at_ms: 0
    user_message: { text: "do it" }
  - at_ms: 500
    user_message: { text: "never mind" }
"#;

/// A messenger delivery `d1`, answered by `r1` in one post.
const DELIVERY: &str = r#"
name: delivery
model:
  - - text: "Hello there."
    - finish: { reason: stop }
actions:
  - at_ms: 0
    deliver: { id: d1, text: hi }
"#;

/// The user turn `r1` is killed mid-stream by an eviction; recovery `r4`
/// (incident `r1:m2`) streams a client tool whose answer is continued by `r5`.
const EVICTED_MID_STREAM: &str = r#"
name: evicted-mid-stream
engine:
  tools:
    tool_a: { kind: client }
model:
  - - text: "Working on it"
    - sleep_ms: 1000
    - finish: { reason: stop }
  - - tool: { id: tc-a, name: tool_a, input: { n: 1 } }
    - finish: { reason: tool-calls }
  - - text: "All done."
    - finish: { reason: stop }
client:
  tools:
    tool_a: { answer_after_ms: [20, 20], output: "a", auto_continue: true }
actions:
  - at_ms: 0
    user_message: { text: "do it" }
  - at_ms: 100
    evict: { restart_after_ms: [50, 50] }
"#;

const CALLBACK_CONTRACT: &str = "callback-contract";
const SINGLE_CONTINUATION: &str = "single-continuation";
const TOOL_RESULTS_PRESENT: &str = "tool-results-present";
const PARKED_TOOL_KEPT: &str = "parked-tool-kept";
const TRANSCRIPT_SHAPE: &str = "transcript-shape";
const MID_TOOL_INPUT_RECOVERS: &str = "mid-tool-input-recovers";
const NO_EMPTY_ANSWER: &str = "no-empty-answer";
const MESSENGER_ONCE: &str = "messenger-once";
const CONVERGES: &str = "converges";
const NO_LOST_WORK: &str = "no-lost-work";

/// A real run of a scenario on seed 0, and the scenario it came from.
pub(crate) struct Run {
    pub(crate) file: ScenarioFile,
    pub(crate) record: RunRecord,
}

impl Run {
    /// Runs `file` and asserts that `invariant` reports nothing on it.
    pub(crate) fn clean(file: ScenarioFile, invariant: &str) -> Self {
        let record = world::run(&file, 0, &RegressionSet::default());
        assert_eq!(record.end, RunEnd::Quiescent, "{}: the clean base run settles", file.scenario.name);
        let run = Self { file, record };
        let violations = run.check(invariant, &run.record);
        assert!(
            violations.is_empty(),
            "{invariant} must pass the clean {} run: {violations:#?}",
            run.file.scenario.name
        );
        run
    }

    pub(crate) fn committed(stem: &str, invariant: &str) -> Self {
        Self::clean(scenario(stem), invariant)
    }

    pub(crate) fn inline(yaml: &str, invariant: &str) -> Self {
        Self::clean(inline(yaml), invariant)
    }

    /// A copy of the clean record, to break.
    pub(crate) fn broken(&self) -> RunRecord {
        self.record.clone()
    }

    /// What the invariant named `name` reports on `record`.
    pub(crate) fn check(&self, name: &str, record: &RunRecord) -> Vec<Violation> {
        let invariant = INVARIANTS
            .iter()
            .find(|invariant| invariant.name == name)
            .unwrap_or_else(|| panic!("no invariant is named {name}"));
        (invariant.check)(&CheckInput::new(&self.file, record))
    }

    /// Asserts `name` reports, under its own name, a violation whose message
    /// contains `needle`; returns everything it reported.
    pub(crate) fn assert_fires(&self, name: &str, broken: &RunRecord, needle: &str) -> Vec<Violation> {
        let violations = self.check(name, broken);
        assert!(
            violations.iter().any(|violation| violation.message.contains(needle)),
            "{name} must report a violation containing {needle:?} on the broken trace, got {violations:#?}"
        );
        assert!(
            violations.iter().all(|violation| violation.check == name),
            "{name} reports under its own name: {violations:#?}"
        );
        violations
    }

    /// Asserts `name` reports nothing on an edited trace that still keeps
    /// its rule.
    pub(crate) fn assert_passes(&self, name: &str, edited: &RunRecord, why: &str) {
        let violations = self.check(name, edited);
        assert!(violations.is_empty(), "{name} must accept {why}: {violations:#?}");
    }
}

fn part_kinds(message: &Message) -> Vec<&'static str> {
    let kind = |part: &Part| match part {
        Part::StepStart => "step-start",
        Part::Text { .. } => "text",
        Part::Reasoning { .. } => "reasoning",
        Part::Tool(_) => "tool",
    };
    message.parts.iter().map(kind).collect()
}

/// Index of the first history crossing that `matches`; `what` names it for
/// the panic.
pub(crate) fn crossing_of(record: &RunRecord, what: &str, matches: impl Fn(&Boundary) -> bool) -> usize {
    record
        .history
        .crossings
        .iter()
        .position(|crossing| matches(&crossing.what))
        .unwrap_or_else(|| panic!("the clean history has no {what}"))
}

/// Inserts `crossings` at `at`, stamped with the time and timeline place of
/// the crossing before.
pub(crate) fn insert_crossings(record: &mut RunRecord, at: usize, crossings: Vec<Boundary>) {
    let before = &record.history.crossings[at.saturating_sub(1)];
    let (at_us, at_event) = (before.at_us, before.at_event);
    for (offset, what) in crossings.into_iter().enumerate() {
        record.history.crossings.insert(at + offset, Crossing { at_us, at_event, what });
    }
}

/// Replaces the crossing at `at` with `crossings`, at its time and place.
pub(crate) fn replace_crossing(record: &mut RunRecord, at: usize, crossings: Vec<Boundary>) {
    let replaced = record.history.crossings.remove(at);
    for (offset, what) in crossings.into_iter().enumerate() {
        let crossing = Crossing { at_us: replaced.at_us, at_event: replaced.at_event, what };
        record.history.crossings.insert(at + offset, crossing);
    }
}

// ---------------------------------------------------------------- callback-contract

/// `server-tools-two-steps`: one `chat()` (chat1) that ends with `on_done`.
fn chat_run() -> (Run, usize) {
    let run = Run::committed("server-tools-two-steps", CALLBACK_CONTRACT);
    let done = crossing_of(&run.record, "on_done of chat1", |what| {
        matches!(what, Boundary::Callback { chat: 1, call: CallbackCall::Done, .. })
    });
    (run, done)
}

fn callback(call: CallbackCall) -> Boundary {
    Boundary::Callback { chat: 1, call, sent_at: None }
}

#[test]
fn callback_contract_fires_on_a_second_terminal_callback() {
    let (run, done) = chat_run();
    let mut broken = run.broken();
    insert_crossings(&mut broken, done + 1, vec![callback(CallbackCall::Error { message: "late failure".into() })]);
    let violations = run.assert_fires(CALLBACK_CONTRACT, &broken, "chat1: on_error after terminal on_done");
    let at = broken.history.crossings[done + 1].at_event;
    assert_eq!(violations[0].at_event, Some(at), "the violation points where the second terminal callback crossed");
}

#[test]
fn callback_contract_fires_on_an_event_after_on_done() {
    let (run, done) = chat_run();
    let mut broken = run.broken();
    let late = CallbackCall::Event { chunk: Chunk::TextDelta { id: "t9".into(), delta: "late".into() } };
    insert_crossings(&mut broken, done + 1, vec![callback(late)]);
    run.assert_fires(CALLBACK_CONTRACT, &broken, "chat1: on_event after terminal on_done");
}

#[test]
fn callback_contract_fires_when_an_interruption_is_never_taken_on() {
    // `recovery-alarm-delay-honoured`: chat1 is told on_interrupted at the
    // stall and the recovery answers at 7 s. Cut after the interruption,
    // the run settles with the partial as the answer and nobody told.
    let run = Run::committed("recovery-alarm-delay-honoured", CALLBACK_CONTRACT);
    let mut broken = run.broken();
    let interrupted = crossing_of(&broken, "on_interrupted of chat1", |what| {
        matches!(what, Boundary::Callback { chat: 1, call: CallbackCall::Interrupted, .. })
    });
    let recovered = crossing_of(&broken, "the recovery's model request", |what| {
        matches!(what, Boundary::ModelRequest { call: 2, .. })
    });
    run.assert_passes(CALLBACK_CONTRACT, &broken, "the recovery takes the interruption on");
    broken.history.crossings.truncate(recovered);
    let violations = run.assert_fires(
        CALLBACK_CONTRACT,
        &broken,
        "chat1: on_interrupted, then no recovery: no model call after it, no failure told, nothing waiting for the client",
    );
    let at = broken.history.crossings[interrupted].at_event;
    assert_eq!(violations[0].at_event, Some(at), "the violation points at the interruption");
}

#[test]
fn callback_contract_fires_on_a_silent_return() {
    let (run, done) = chat_run();
    let mut broken = run.broken();
    replace_crossing(&mut broken, done, vec![callback(CallbackCall::Dropped)]);
    run.assert_fires(CALLBACK_CONTRACT, &broken, "chat1: chat() returned with no terminal callback");
}

#[test]
fn callback_contract_accepts_a_drop_by_an_evicted_process() {
    let (run, done) = chat_run();
    let mut evicted = run.broken();
    replace_crossing(&mut evicted, done, vec![Boundary::Killed, callback(CallbackCall::Dropped)]);
    run.assert_passes(
        CALLBACK_CONTRACT,
        &evicted,
        "a callback dropped by an eviction (the caller sees a transport break)",
    );
}

#[test]
fn callback_contract_fires_when_a_settled_chat_never_ends() {
    let (run, done) = chat_run();
    let mut broken = run.broken();
    broken.history.crossings.remove(done);
    run.assert_fires(CALLBACK_CONTRACT, &broken, "chat1: the run settled but the callback never got a terminal call");
}

/// `recovery-exhausted-one-terminal-frame`: recovery gives up once, calls
/// `on_exhausted`, then sends the client the terminal message.
fn exhausted_run() -> (Run, usize) {
    let run = Run::committed("recovery-exhausted-one-terminal-frame", CALLBACK_CONTRACT);
    let hook = crossing_of(&run.record, "on_exhausted", |what| matches!(what, Boundary::Exhausted { .. }));
    (run, hook)
}

#[test]
fn callback_contract_fires_when_on_exhausted_runs_twice_for_one_incident() {
    let (run, hook) = exhausted_run();
    let mut broken = run.broken();
    let again = broken.history.crossings[hook].what.clone();
    insert_crossings(&mut broken, hook + 1, vec![again]);
    run.assert_fires(CALLBACK_CONTRACT, &broken, "on_exhausted called again for incident");
}

#[test]
fn callback_contract_accepts_on_exhausted_again_after_a_kill_before_its_record() {
    let (run, hook) = exhausted_run();
    let mut edited = run.broken();
    let again = edited.history.crossings[hook].what.clone();
    insert_crossings(&mut edited, hook + 1, vec![Boundary::Killed, again]);
    run.assert_passes(CALLBACK_CONTRACT, &edited, "the hook called again by a restart that found it owed");
}

#[test]
fn callback_contract_fires_when_on_exhausted_runs_again_after_its_record() {
    let (run, hook) = exhausted_run();
    let mut broken = run.broken();
    let again = broken.history.crossings[hook].what.clone();
    let at = broken.history.crossings.len();
    insert_crossings(&mut broken, at, vec![Boundary::Killed, again]);
    run.assert_fires(CALLBACK_CONTRACT, &broken, "on_exhausted called again for incident");
}

#[test]
fn callback_contract_fires_when_the_terminal_message_goes_out_without_on_exhausted() {
    let (run, hook) = exhausted_run();
    let mut broken = run.broken();
    broken.history.crossings.remove(hook);
    run.assert_fires(
        CALLBACK_CONTRACT,
        &broken,
        "client connection c1 was sent the terminal recovery message, but on_exhausted was never called",
    );
}

// ---------------------------------------------------------------- single-continuation

/// Index of the frame that shows `call_id` with its answer.
fn answer_shown(record: &RunRecord, call_id: &str) -> usize {
    crossing_of(record, &format!("the frame showing {call_id} answered"), |what| {
        matches!(what, Boundary::Frame { frame: Frame::Tool { call_id: id, state: ToolState::OutputAvailable, .. }, .. }
            if id == call_id)
    })
}

/// Inserts, at `at`, a model request (call #9) that picks up `reply` as the
/// store holds it there, with `edit` applied to what it shows.
fn pick_up_at(record: &mut RunRecord, at: usize, reply: &str, edit: impl FnOnce(Vec<Message>) -> Vec<Message>) {
    let messages = edit(picking_up(record.history.store_at(at).messages, reply));
    insert_crossings(record, at, vec![model_request(9, messages)]);
}

#[test]
fn single_continuation_fires_while_a_stream_is_open() {
    // tc-fast is answered while call #1 still streams (tc-slow not yet
    // emitted); a request picks the batch up then.
    let run = Run::committed("barrier-late-sibling", SINGLE_CONTINUATION);
    let mut broken = run.broken();
    let answered = answer_shown(&broken, "tc-fast");
    pick_up_at(&mut broken, answered + 1, "m3", |messages| messages);
    let violations =
        run.assert_fires(SINGLE_CONTINUATION, &broken, "model call #9 was requested while call #1 was still streaming");
    assert_eq!(violations.len(), 1, "only the open stream is wrong: {violations:#?}");
}

#[test]
fn single_continuation_fires_while_a_sibling_is_unanswered() {
    // Call #1 has ended; tc-a is answered, tc-b still waits, and a request
    // picks the batch up showing tc-b as an error nobody sent.
    let run = Run::inline(TWO_CLIENT_TOOLS, SINGLE_CONTINUATION);
    let mut broken = run.broken();
    let answered = answer_shown(&broken, "tc-a");
    pick_up_at(&mut broken, answered + 1, "m3", |messages| repaired(messages, "tc-b"));
    let violations = run.assert_fires(
        SINGLE_CONTINUATION,
        &broken,
        "model call #9 continued the batch of m3 while tc-b was unanswered",
    );
    assert_eq!(violations.len(), 1, "only the unanswered sibling is wrong: {violations:#?}");
}

/// `continuation-single-client-tool` with one more request picking up m3
/// after the continuation (call #2) finished it; with `restarted`, the
/// process dies and boots again in between.
fn continued_twice(restarted: bool) -> (Run, RunRecord) {
    let run = Run::committed("continuation-single-client-tool", SINGLE_CONTINUATION);
    let mut broken = run.broken();
    let at = broken.history.crossings.len();
    if restarted {
        let loaded = Box::new(broken.history.final_store());
        insert_crossings(&mut broken, at, vec![Boundary::Killed, Boundary::Boot { loaded }]);
    }
    let at = broken.history.crossings.len();
    pick_up_at(&mut broken, at, "m3", |messages| messages);
    (run, broken)
}

#[test]
fn single_continuation_fires_on_a_second_continuation_of_one_batch() {
    let (run, broken) = continued_twice(false);
    run.assert_fires(
        SINGLE_CONTINUATION,
        &broken,
        "model call #9 continued m3 after model call #2 had already finished it",
    );
}

#[test]
fn single_continuation_accepts_a_restarted_process_resuming_a_finished_reply() {
    let (run, edited) = continued_twice(true);
    run.assert_passes(
        SINGLE_CONTINUATION,
        &edited,
        "a recovery after a restart (the new process cannot know the reply was finished)",
    );
}

/// `continuation-single-client-tool` with its history cut just before the
/// continuation's model request.
fn stopped_before_the_continuation() -> (Run, RunRecord) {
    let run = Run::committed("continuation-single-client-tool", SINGLE_CONTINUATION);
    let mut broken = run.broken();
    let continued =
        crossing_of(&broken, "model call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    broken.history.crossings.truncate(continued);
    (run, broken)
}

#[test]
fn single_continuation_fires_when_a_complete_opted_in_batch_is_stranded() {
    // The history stops before the continuation's request, and the run
    // still settles.
    let (run, broken) = stopped_before_the_continuation();
    assert_eq!(broken.end, RunEnd::Quiescent);
    run.assert_fires(
        SINGLE_CONTINUATION,
        &broken,
        "batch tc-client-1 is complete and a result opted in, but no continuation ran",
    );
}

#[test]
fn single_continuation_fires_on_a_stranded_batch_beside_a_half_streamed_call() {
    // The reply also holds a call whose input never finished streaming: no
    // call yet, so the batch is still complete and still stranded.
    let (run, mut broken) = stopped_before_the_continuation();
    let mut reply = broken.history.final_store().message("m3").expect("m3 is stored").clone();
    reply.apply_chunk(&Chunk::ToolInputStart { id: "tc-half".into(), name: "client_action".into(), dynamic: false });
    let at = broken.history.crossings.len();
    insert_crossings(&mut broken, at, vec![Boundary::Commit { writes: vec![Write::PutMessage(reply)] }]);
    run.assert_fires(
        SINGLE_CONTINUATION,
        &broken,
        "batch tc-client-1 is complete and a result opted in, but no continuation ran",
    );
}

#[test]
fn single_continuation_accepts_a_stranded_batch_whose_failure_a_client_was_told() {
    // The turn that took the batch failed and said so (the store refused
    // it): the user was told why nothing continued. Told before the batch
    // completed, it explains nothing.
    let (run, broken) = stopped_before_the_continuation();
    let failed = Boundary::Frame {
        connection: 1,
        frame: Frame::Error { request_id: "r4".into(), message: "Your conversation could not be saved.".into() },
    };
    let mut told_after = broken.clone();
    let at = told_after.history.crossings.len();
    insert_crossings(&mut told_after, at, vec![failed.clone()]);
    run.assert_passes(SINGLE_CONTINUATION, &told_after, "a batch whose continuation's failure was told");
    let mut told_before = broken;
    insert_crossings(&mut told_before, 1, vec![failed]);
    run.assert_fires(
        SINGLE_CONTINUATION,
        &told_before,
        "batch tc-client-1 is complete and a result opted in, but no continuation ran",
    );
}

#[test]
fn single_continuation_does_not_count_a_stream_killed_by_an_eviction_as_open() {
    // Call #1 never finishes: the eviction killed it. The recovery's call #2
    // goes out after the restart, when no stream is open.
    let run = Run::inline(EVICTED_MID_STREAM, SINGLE_CONTINUATION);
    let record = &run.record;
    let first = crossing_of(record, "model call #1", |what| matches!(what, Boundary::ModelRequest { call: 1, .. }));
    let killed = crossing_of(record, "the kill", |what| matches!(what, Boundary::Killed));
    let second = crossing_of(record, "model call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    assert!(first < killed && killed < second, "the base run kills call #1 mid-stream, then recovers");
    assert!(
        !record
            .history
            .iter()
            .any(|crossing| matches!(crossing.what, Boundary::ModelChunk { call: 1, chunk: Chunk::FinishStep { .. } })),
        "the base run never finishes call #1 (the eviction killed it)"
    );
    let every: Vec<Violation> =
        INVARIANTS.iter().flat_map(|invariant| (invariant.check)(&CheckInput::new(&run.file, &run.record))).collect();
    assert!(every.is_empty(), "the evicted run keeps every invariant: {every:#?}");
}

// ---------------------------------------------------------------- tool-results-present

/// The request of model call `call` in `record`, to edit.
pub(crate) fn request_mut(record: &mut RunRecord, number: u32) -> &mut ModelRequest {
    record
        .history
        .crossings
        .iter_mut()
        .find_map(|crossing| match &mut crossing.what {
            Boundary::ModelRequest { call, request } if *call == number => Some(request),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the clean history has no model call #{number}"))
}

/// The tool part `call_id` in `messages`, to edit.
pub(crate) fn tool_in<'a>(messages: &'a mut [Message], call_id: &str) -> &'a mut ToolPart {
    messages
        .iter_mut()
        .flat_map(|message| message.parts.iter_mut())
        .find_map(|part| match part {
            Part::Tool(tool) if tool.call_id == call_id => Some(tool),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool part {call_id}"))
}

#[test]
fn tool_results_present_fires_on_a_request_without_a_result() {
    // The continuation's request shows tc-client-1 still waiting for its result.
    let run = Run::committed("continuation-single-client-tool", TOOL_RESULTS_PRESENT);
    let mut broken = run.broken();
    let tool = tool_in(&mut request_mut(&mut broken, 2).messages, "tc-client-1");
    tool.state = ToolState::InputAvailable;
    tool.output = None;
    run.assert_fires(TOOL_RESULTS_PRESENT, &broken, "model call #2 was sent tool calls without results: tc-client-1");
}

// ---------------------------------------------------------------- parked-tool-kept

/// A model request `call` showing `messages`, as the engine would send it.
fn model_request(call: u32, messages: Vec<Message>) -> Boundary {
    let request = ModelRequest { request_id: format!("r{call}"), step: 1, continuation: true, messages };
    Boundary::ModelRequest { call, request }
}

/// `messages` with `call_id` turned into the error a repair writes.
fn repaired(mut messages: Vec<Message>, call_id: &str) -> Vec<Message> {
    let tool = tool_in(&mut messages, call_id);
    tool.state = ToolState::OutputError;
    tool.error_text = Some("The tool call was interrupted before a result was recorded.".into());
    messages
}

/// `messages` up to and including `reply`, with a new step opened in it:
/// a request that picks that reply up again.
fn picking_up(mut messages: Vec<Message>, reply: &str) -> Vec<Message> {
    let at = messages.iter().position(|message| message.id == reply).expect("the reply is stored");
    messages.truncate(at + 1);
    messages[at].parts.push(Part::StepStart);
    messages
}

/// Where tc-a's result crossed in a `TWO_CLIENT_TOOLS` run.
fn tc_a_answered(run: &RunRecord) -> usize {
    crossing_of(
        run,
        "tc-a's result",
        |what| matches!(what, Boundary::ToolResult { result, .. } if result.call_id == "tc-a"),
    )
}

#[test]
fn parked_tool_kept_fires_when_a_premature_continuation_repairs_a_waiting_sibling() {
    // Right after tc-a's answer, tc-b (still waiting) is committed as an
    // error and a request picks the batch up.
    let run = Run::inline(TWO_CLIENT_TOOLS, PARKED_TOOL_KEPT);
    let mut broken = run.broken();
    let answered = tc_a_answered(&broken);
    let store = repaired(broken.history.store_at(answered + 1).messages, "tc-b");
    let reply = store.iter().find(|message| message.id == "m3").expect("m3 is stored").clone();
    let premature =
        vec![Boundary::Commit { writes: vec![Write::PutMessage(reply)] }, model_request(9, picking_up(store, "m3"))];
    insert_crossings(&mut broken, answered + 1, premature);
    run.assert_fires(PARKED_TOOL_KEPT, &broken, "tc-b repaired to an error while waiting for the client");
}

#[test]
fn parked_tool_kept_fires_when_a_recovery_repairs_a_requested_approval() {
    // The stalled turn left tc-delete waiting for its approval; a recovery
    // that errors it and asks the model again did not wait for the person.
    let run = Run::committed("recovery-parked-for-an-approval", PARKED_TOOL_KEPT);
    let mut broken = run.broken();
    let requested = crossing_of(&broken, "the commit that asks for tc-delete's approval", |what| match what {
        Boundary::Commit { writes } => writes.iter().any(|write| {
            matches!(write, Write::PutMessage(message)
                if message.tool("tc-delete").is_some_and(|tool| tool.state == ToolState::ApprovalRequested))
        }),
        _ => false,
    });
    let store = repaired(broken.history.store_at(requested + 1).messages, "tc-delete");
    let reply = store.iter().find(|message| message.id == "m3").expect("m3 is stored").clone();
    let recovery =
        vec![Boundary::Commit { writes: vec![Write::PutMessage(reply)] }, model_request(9, picking_up(store, "m3"))];
    insert_crossings(&mut broken, requested + 1, recovery);
    run.assert_fires(PARKED_TOOL_KEPT, &broken, "tc-delete repaired to an error while waiting for the client");
}

/// `PARKED_THEN_USER` and the index of the commit that repairs the parked
/// tc-a, just before the new user turn's request.
fn parked_run() -> (Run, usize) {
    let run = Run::inline(PARKED_THEN_USER, PARKED_TOOL_KEPT);
    let repair = crossing_of(&run.record, "the commit that repairs tc-a", |what| match what {
        Boundary::Commit { writes } => writes.iter().any(|write| {
            matches!(write, Write::PutMessage(message)
                if message.tool("tc-a").is_some_and(|tool| tool.state == ToolState::OutputError))
        }),
        _ => false,
    });
    let next = run.record.history.crossings[repair..]
        .iter()
        .find_map(|crossing| match &crossing.what {
            Boundary::ModelRequest { request, .. } => request.messages.iter().rev().nth(1),
            _ => None,
        })
        .expect("a model request follows the repair");
    assert_eq!(next.text(), "never mind", "the clean run repairs the parked tc-a for a new user turn");
    (run, repair)
}

#[test]
fn parked_tool_kept_accepts_the_repair_before_a_new_user_turn() {
    // Asserted by `Run::clean` inside: the real history holds that repair.
    parked_run();
}

#[test]
fn parked_tool_kept_fires_when_the_same_repair_precedes_a_continuation() {
    // The same repair, followed by a request that picks m3 up again.
    let (run, repair) = parked_run();
    let mut broken = run.broken();
    let store = broken.history.store_at(repair + 1).messages;
    insert_crossings(&mut broken, repair + 1, vec![model_request(9, picking_up(store, "m3"))]);
    run.assert_fires(PARKED_TOOL_KEPT, &broken, "tc-a repaired to an error while waiting for the client");
}

#[test]
fn parked_tool_kept_fires_when_the_server_executes_a_client_tool() {
    // The client's answer to tc-a is followed by a server execution of it.
    let run = Run::inline(TWO_CLIENT_TOOLS, PARKED_TOOL_KEPT);
    let mut broken = run.broken();
    let answered = tc_a_answered(&broken);
    let call =
        ServerToolCall { call_id: "tc-a".into(), tool_name: "tool_a".into(), input: serde_json::json!({ "n": 1 }) };
    insert_crossings(&mut broken, answered + 1, vec![Boundary::ServerToolCall { call }]);
    run.assert_fires(PARKED_TOOL_KEPT, &broken, "tc-a (tool_a) is a client tool but was executed by the server");
}

// ---------------------------------------------------------------- transcript-shape

/// `server-tools-two-steps`, whose answer m3 is step 1 (text, tool) then
/// step 2 (text), and that stored answer to break.
fn two_step_run() -> (Run, Message) {
    let run = Run::committed("server-tools-two-steps", TRANSCRIPT_SHAPE);
    let store = run.record.history.final_store();
    let answer = store.message("m3").expect("the answer m3 is stored").clone();
    assert_eq!(part_kinds(&answer), ["step-start", "text", "tool", "step-start", "text"], "the base answer's shape");
    (run, answer)
}

/// The clean record with one more commit at its end: `message` written over
/// the stored one, as an engine bug would write it.
fn committed_over(run: &Run, message: Message) -> RunRecord {
    let mut broken = run.broken();
    let at = broken.history.crossings.len();
    insert_crossings(&mut broken, at, vec![Boundary::Commit { writes: vec![Write::PutMessage(message)] }]);
    broken
}

#[test]
fn transcript_shape_fires_on_an_orphan_step_start() {
    let (run, mut answer) = two_step_run();
    answer.parts.pop();
    let violations =
        run.assert_fires(TRANSCRIPT_SHAPE, &committed_over(&run, answer), "m3: orphan step-start at part 3");
    assert_eq!(violations.len(), 1, "only the orphan is wrong: {violations:#?}");
}

#[test]
fn transcript_shape_fires_on_a_duplicated_tool_call() {
    let (run, mut answer) = two_step_run();
    let tool = answer.parts[2].clone();
    answer.parts.insert(3, tool);
    run.assert_fires(TRANSCRIPT_SHAPE, &committed_over(&run, answer), "m3: tool call tc-lookup-1 appears twice");
}

#[test]
fn transcript_shape_fires_on_a_retried_attempts_extra_step_start() {
    let (run, mut answer) = two_step_run();
    answer.parts.push(Part::StepStart);
    answer.parts.push(Part::Text { id: "t9".into(), text: "It is 2".into(), state: TextState::Done });
    run.assert_fires(
        TRANSCRIPT_SHAPE,
        &committed_over(&run, answer),
        "m3: 3 step-starts but only 2 model calls kept their output",
    );
}

/// `truncation-retry-succeeds` cut short as call #1's truncated finish
/// arrives: the store holds call #1's partial answer, then the process dies
/// having committed `between` after the finish.
fn killed_after_a_truncated_finish(between: Vec<Boundary>) -> (Run, RunRecord) {
    let run = Run::committed("truncation-retry-succeeds", TRANSCRIPT_SHAPE);
    let mut broken = run.broken();
    let finish = crossing_of(&broken, "call #1's finish", |what| {
        matches!(what, Boundary::ModelChunk { call: 1, chunk: Chunk::FinishStep { .. } })
    });
    broken.history.crossings.truncate(finish + 1);
    let mut partial = Message::assistant("m3");
    partial.parts.push(Part::StepStart);
    partial.parts.push(Part::Text { id: "t1".into(), text: "The answer is forty".into(), state: TextState::Done });
    insert_crossings(&mut broken, finish, vec![Boundary::Commit { writes: vec![Write::PutMessage(partial)] }]);
    let end = broken.history.crossings.len();
    insert_crossings(&mut broken, end, between.into_iter().chain([Boundary::Killed]).collect());
    (run, broken)
}

#[test]
fn transcript_shape_accepts_a_truncated_attempt_the_store_never_heard_end() {
    // Every commit after the finish was refused, then the process died: to
    // the store, the crash cut call #1, and its parts are a dead turn's.
    let (run, unrecorded) = killed_after_a_truncated_finish(Vec::new());
    run.assert_passes(TRANSCRIPT_SHAPE, &unrecorded, "a truncated attempt whose end no commit recorded");
    // One commit the store took after the finish: the engine could have
    // discarded the attempt, and kept it.
    let (run, recorded) = killed_after_a_truncated_finish(vec![Boundary::Commit { writes: vec![Write::NextId(9)] }]);
    run.assert_fires(TRANSCRIPT_SHAPE, &recorded, "m3: 1 step-starts but only 0 model calls kept their output");
}

#[test]
fn transcript_shape_fires_on_text_left_streaming_after_the_run_settled() {
    let (run, mut answer) = two_step_run();
    let Some(Part::Text { id, text, .. }) = answer.parts.pop() else { panic!("the answer ends with its text") };
    answer.parts.push(Part::Text { id, text, state: TextState::Streaming });
    let last = answer.parts.len() - 1;
    run.assert_fires(
        TRANSCRIPT_SHAPE,
        &committed_over(&run, answer),
        &format!("m3: part {last} is still streaming after the run settled"),
    );
}

#[test]
fn transcript_shape_fires_on_text_stored_streaming_after_the_model_ended_it() {
    // `server-tools-two-steps`: call #1 streams text t0 and ends it, then
    // a tool call; the first commit of m3 after the text-end is rewritten
    // with t0 still streaming. The run's later commits store it done, so
    // only the moment's commit is wrong.
    let (run, _) = two_step_run();
    let mut broken = run.broken();
    let ended = crossing_of(&broken, "call #1's text-end", |what| {
        matches!(what, Boundary::ModelChunk { call: 1, chunk: Chunk::TextEnd { .. } })
    });
    let commit = (ended..broken.history.crossings.len())
        .find(|&at| match &broken.history.crossings[at].what {
            Boundary::Commit { writes } => writes.iter().any(|write| write.message().is_some_and(|m| m.id == "m3")),
            _ => false,
        })
        .expect("the clean history commits m3 after call #1's text-end");
    let Boundary::Commit { writes } = &mut broken.history.crossings[commit].what else { unreachable!() };
    for write in writes.iter_mut() {
        if let Write::PutMessage(message) | Write::PutMessageAfter { message, .. } = write {
            for part in message.parts.iter_mut() {
                if let Part::Text { state, .. } = part {
                    *state = TextState::Streaming;
                }
            }
        }
    }
    let violations =
        run.assert_fires(TRANSCRIPT_SHAPE, &broken, "m3: part t0 is stored streaming after model call #1 ended it");
    assert_eq!(violations.len(), 1, "only that commit is wrong: {violations:#?}");
}

// ---------------------------------------------------------------- mid-tool-input-recovers

/// `EVICTED_MID_STREAM` with the host's `on_exhausted` called right after
/// the restart, before the recovery's call #2; with `mid_tool_input`, call
/// #1's stream also stops inside a tool call's input when the process dies.
fn exhausted_recovery(mid_tool_input: bool) -> (Run, RunRecord) {
    let run = Run::inline(EVICTED_MID_STREAM, MID_TOOL_INPUT_RECOVERS);
    let mut broken = run.broken();
    let killed = crossing_of(&broken, "the kill", |what| matches!(what, Boundary::Killed));
    let booted = killed + 1;
    assert!(matches!(broken.history.crossings[booted].what, Boundary::Boot { .. }), "the process restarts next");
    let context = ExhaustedContext {
        incident_id: "r1:m2".into(),
        root_request_id: "r1".into(),
        attempt: 3,
        max_attempts: 2,
        reason: "max_attempts_exceeded".into(),
        terminal_message: "gave up".into(),
        partial_text: "Working on it".into(),
    };
    insert_crossings(&mut broken, booted + 1, vec![Boundary::Exhausted { context, threw: None }]);
    if mid_tool_input {
        let started = Chunk::ToolInputStart { id: "tc-x".into(), name: "tool_a".into(), dynamic: false };
        insert_crossings(&mut broken, killed, vec![Boundary::ModelChunk { call: 1, chunk: started }]);
    }
    (run, broken)
}

#[test]
fn mid_tool_input_recovers_fires_when_a_recovery_from_a_cut_tool_input_exhausts() {
    let (run, broken) = exhausted_recovery(true);
    run.assert_fires(
        MID_TOOL_INPUT_RECOVERS,
        &broken,
        "incident r1:m2 began mid tool input (model call #1 stopped inside a tool call's input) and exhausted after 3 attempts",
    );
}

#[test]
fn mid_tool_input_recovers_fires_when_the_model_is_asked_to_continue_a_half_streamed_call() {
    // #1781: the second call is shown the lookup as it stood mid input.
    let run = Run::committed("server-tools-two-steps", MID_TOOL_INPUT_RECOVERS);
    let mut broken = run.broken();
    let tool = tool_in(&mut request_mut(&mut broken, 2).messages, "tc-lookup-1");
    tool.state = ToolState::InputStreaming;
    tool.output = None;
    run.assert_fires(
        MID_TOOL_INPUT_RECOVERS,
        &broken,
        "model call #2 was asked to continue from tc-lookup-1's half-streamed input",
    );
}

#[test]
fn mid_tool_input_recovers_ignores_the_exhaustion_of_a_recovery_from_text() {
    let (run, edited) = exhausted_recovery(false);
    run.assert_passes(
        MID_TOOL_INPUT_RECOVERS,
        &edited,
        "the exhaustion of a recovery that did not begin mid tool input",
    );
}

#[test]
fn mid_tool_input_recovers_ignores_an_exhaustion_after_a_call_kept_output() {
    // The cut tool input was regenerated (call #2 streamed a tool call) before
    // the hook ran.
    let (run, mut edited) = exhausted_recovery(true);
    let hook = crossing_of(&edited, "on_exhausted", |what| matches!(what, Boundary::Exhausted { .. }));
    let exhausted = edited.history.crossings.remove(hook);
    edited.history.crossings.push(exhausted);
    run.assert_passes(MID_TOOL_INPUT_RECOVERS, &edited, "an exhaustion after the truncated step was regenerated");
}

// ---------------------------------------------------------------- no-empty-answer

/// `continuation-single-client-tool` with the continuation call #2 ending
/// on a zero-token `unknown` finish.
fn empty_finish_run() -> (Run, RunRecord) {
    let run = Run::committed("continuation-single-client-tool", NO_EMPTY_ANSWER);
    let mut broken = run.broken();
    let finish = crossing_of(&broken, "call #2's finish-step", |what| {
        matches!(what, Boundary::ModelChunk { call: 2, chunk: Chunk::FinishStep { .. } })
    });
    let usage = Usage { input_tokens: 10, output_tokens: 0 };
    broken.history.crossings[finish].what =
        Boundary::ModelChunk { call: 2, chunk: Chunk::FinishStep { reason: FinishReason::Unknown, usage } };
    (run, broken)
}

#[test]
fn no_empty_answer_fires_when_a_turn_completes_on_a_cut_stream() {
    let (run, broken) = empty_finish_run();
    run.assert_fires(
        NO_EMPTY_ANSWER,
        &broken,
        "model call #2 ended with a zero-token finish (1 content chunks cut), yet client connection c1 was sent done",
    );
}

#[test]
fn no_empty_answer_accepts_an_empty_unknown_finish_after_earlier_output() {
    // Call #2 adds nothing after call #1's tool call: a benign end.
    let (run, mut edited) = empty_finish_run();
    edited
        .history
        .crossings
        .retain(|crossing| !matches!(&crossing.what, Boundary::ModelChunk { call: 2, chunk } if chunk.is_output()));
    run.assert_passes(NO_EMPTY_ANSWER, &edited, "an empty unknown finish that cut nothing after earlier output");
}

// ---------------------------------------------------------------- messenger-once

/// `DELIVERY` and the index of its one post in the history.
fn delivery_run() -> (Run, usize) {
    let run = Run::inline(DELIVERY, MESSENGER_ONCE);
    let post =
        crossing_of(&run.record, "post d1", |what| matches!(what, Boundary::Post { delivery, .. } if delivery == "d1"));
    (run, post)
}

fn post(post: u32, text: &str) -> Boundary {
    Boundary::Post { post, delivery: "d1".into(), text: text.into() }
}

fn post_done(post: u32) -> Boundary {
    Boundary::PostDone { post, delivery: "d1".into(), error: None }
}

#[test]
fn messenger_once_fires_on_a_second_post_later() {
    let (run, _) = delivery_run();
    let mut broken = run.broken();
    let last = broken.history.crossings.last().expect("crossings");
    let again = Crossing { at_us: last.at_us + 5_000_000, at_event: last.at_event, what: post(2, "Hello there.") };
    broken.history.crossings.push(again);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 posted 2 times");
}

#[test]
fn messenger_once_fires_when_a_delivery_is_recorded_completed_without_its_post() {
    // `messenger-answered-again-keeps-a-later-reply`: after the restart the
    // engine answers d1 again, records `posting` owing the answer, posts
    // it and records `completed`. Without that post the surface shows only
    // the first process's apology while the store says d1 was answered.
    let run = Run::committed("messenger-answered-again-keeps-a-later-reply", MESSENGER_ONCE);
    let mut broken = run.broken();
    let answer = crossing_of(
        &broken,
        "the later answer's post",
        |what| matches!(what, Boundary::Post { text, .. } if text == "Your inbox has 3 new messages."),
    );
    broken.history.crossings.remove(answer);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 is recorded completed owing 1 post(s)");
}

/// `delivery_run` with the store refusing a record of the delivery at
/// `stage` after the post, then (with `killed`) the process dying, then a
/// second post.
fn posted_again_after_a_refused_record(stage: DeliveryStage, killed: bool) -> (Run, RunRecord) {
    let (run, _) = delivery_run();
    let mut broken = run.broken();
    let last = broken.history.crossings.last().expect("crossings").clone();
    let record = DeliveryCheckpoint { id: "d1".into(), user_text: "hi".into(), stage, posts: Vec::new() };
    let mut later = vec![Boundary::CommitRefused { writes: vec![Write::PutDelivery(record)] }];
    if killed {
        later.push(Boundary::Killed);
    }
    later.push(post(2, INTERRUPTED_MESSENGER_RESPONSE));
    for (offset, what) in later.into_iter().enumerate() {
        let at_us = last.at_us + 1_000_000 * (offset as u64 + 1);
        broken.history.crossings.push(Crossing { at_us, at_event: last.at_event, what });
    }
    (run, broken)
}

#[test]
fn messenger_once_excuses_a_repeat_only_when_the_record_was_refused_and_the_process_died() {
    let (run, excused) = posted_again_after_a_refused_record(DeliveryStage::Completed, true);
    run.assert_passes(MESSENGER_ONCE, &excused, "the next process could not know the delivery was posted");
    let (run, broken) = posted_again_after_a_refused_record(DeliveryStage::Completed, false);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 posted 2 times");
    // A delivery whose acceptance was refused was answered with nothing
    // stored: a process after a kill cannot know it either.
    let (run, excused) = posted_again_after_a_refused_record(DeliveryStage::Accepted, true);
    run.assert_passes(MESSENGER_ONCE, &excused, "the delivery's acceptance refused, then a kill");
    // A refused `streaming` record loses nothing of what was posted.
    let (run, broken) = posted_again_after_a_refused_record(DeliveryStage::Streaming, true);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 posted 2 times");
}

#[test]
fn messenger_once_counts_a_split_reply_as_one_post() {
    let (run, _) = delivery_run();
    let mut edited = run.broken();
    let answered = crossing_of(&edited, "the answer to post 1", |what| *what == post_done(1));
    insert_crossings(&mut edited, answered + 1, vec![post(2, "(continued)")]);
    run.assert_passes(MESSENGER_ONCE, &edited, "a long reply posted one post after another");
    // The same post made before the surface answered the first is a reply of its own.
    let mut broken = run.broken();
    insert_crossings(&mut broken, answered, vec![post(2, "(continued)")]);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 posted 2 times");
}

/// `DELIVERY` with its one model call parked before it finished: the
/// reply was cut off.
fn interrupted_delivery() -> (Run, RunRecord, usize) {
    let (run, _) = delivery_run();
    let mut broken = run.broken();
    let finish = crossing_of(&broken, "call #1's finish-step", |what| {
        matches!(what, Boundary::ModelChunk { call: 1, chunk: Chunk::FinishStep { .. } })
    });
    broken.history.crossings[finish].what = Boundary::ModelEnd { call: 1, end: StreamEnd::Parked };
    broken
        .history
        .crossings
        .retain(|crossing| !matches!(crossing.what, Boundary::ModelChunk { call: 1, chunk: Chunk::Finish { .. } }));
    let post = crossing_of(&broken, "post d1", |what| matches!(what, Boundary::Post { .. }));
    (run, broken, post)
}

#[test]
fn messenger_once_fires_when_an_interrupted_delivery_posts_its_partial() {
    let (run, broken, _) = interrupted_delivery();
    run.assert_fires(
        MESSENGER_ONCE,
        &broken,
        "delivery d1 was cut off (model call #1 never finished) but posted \"Hello there.\" as its answer",
    );
}

#[test]
fn messenger_once_accepts_the_apology_for_an_interrupted_delivery() {
    let (run, mut edited, at) = interrupted_delivery();
    edited.history.crossings[at].what = post(1, INTERRUPTED_MESSENGER_RESPONSE);
    run.assert_passes(MESSENGER_ONCE, &edited, "an interrupted delivery that posts the apology");
}

#[test]
fn messenger_once_fires_when_an_accepted_delivery_never_posts() {
    let (run, at) = delivery_run();
    let mut broken = run.broken();
    broken.history.crossings.remove(at);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 was accepted but never posted");
}

// ---------------------------------------------------------------- converges

#[test]
fn converges_fires_when_the_horizon_passes() {
    let run = Run::committed("continuation-single-client-tool", CONVERGES);
    let mut broken = run.broken();
    broken.end = RunEnd::Horizon;
    run.assert_fires(CONVERGES, &broken, "did not settle within");
}

#[test]
fn converges_fires_when_the_world_does_not_settle_after_faults_stop() {
    let run = Run::committed("continuation-single-client-tool", CONVERGES);
    let mut broken = run.broken();
    broken.end = RunEnd::NotConverged;
    run.assert_fires(CONVERGES, &broken, "faults stopped but the world did not settle");
}

#[test]
fn converges_fires_when_the_run_panicked() {
    let run = Run::committed("continuation-single-client-tool", CONVERGES);
    let mut broken = run.broken();
    broken.end = RunEnd::Panicked;
    broken.panic = Some("index out of bounds".into());
    run.assert_fires(CONVERGES, &broken, "the run panicked: index out of bounds");
}

#[test]
fn converges_names_what_the_history_shows_outstanding() {
    // The run is cut at its horizon before the continuation's stream ends
    // and before the caller hears an outcome.
    let run = Run::committed("server-tools-two-steps", CONVERGES);
    let mut broken = run.broken();
    let ended = crossing_of(&broken, "call #2's finish-step", |what| {
        matches!(what, Boundary::ModelChunk { call: 2, chunk: Chunk::FinishStep { .. } })
    });
    broken.history.crossings.truncate(ended);
    broken.end = RunEnd::Horizon;
    run.assert_fires(CONVERGES, &broken, "at the end: model call #2 streaming, chat1 without an outcome");
}

#[test]
fn converges_fires_when_the_event_budget_runs_out() {
    let run = Run::committed("continuation-single-client-tool", CONVERGES);
    let mut broken = run.broken();
    broken.end = RunEnd::EventBudget;
    run.assert_fires(CONVERGES, &broken, "its event budget");
}

// ---------------------------------------------------------------- no-lost-work

/// `continuation-single-client-tool`, whose answer m3 holds tc-client-1,
/// and that stored answer to break.
fn answered_tool_run() -> (Run, Message) {
    let run = Run::committed("continuation-single-client-tool", NO_LOST_WORK);
    let store = run.record.history.final_store();
    let answer = store.message("m3").expect("the answer m3 is stored").clone();
    assert_eq!(answer.tool("tc-client-1").map(|tool| tool.state), Some(ToolState::OutputAvailable));
    (run, answer)
}

#[test]
fn transcript_shape_fires_when_a_tool_is_stored_with_input_the_model_never_streamed() {
    let run = Run::committed("continuation-single-client-tool", TRANSCRIPT_SHAPE);
    let store = run.record.history.final_store();
    let mut answer = store.message("m3").expect("the answer m3 is stored").clone();
    let tool = answer.parts.tool_mut("tc-client-1").expect("m3 holds tc-client-1");
    assert_eq!(tool.input, Some(serde_json::json!({ "action": "do_thing" })), "the input the script streams");
    tool.input = Some(serde_json::Value::Null);
    run.assert_fires(
        TRANSCRIPT_SHAPE,
        &committed_over(&run, answer),
        "m3: tool call tc-client-1 is stored with input null; the model streamed {\"action\":\"do_thing\"}",
    );
}

#[test]
fn callback_contract_fires_when_on_exhausted_is_told_another_partial() {
    let run = Run::committed("stall-exhausted", CALLBACK_CONTRACT);
    let mut broken = run.broken();
    let mut told = 0;
    for crossing in &mut broken.history.crossings {
        if let Boundary::Exhausted { context, .. } = &mut crossing.what {
            assert_eq!(context.partial_text, "partial ", "the clean run tells the stalled partial");
            context.partial_text = "tell me".into();
            told += 1;
        }
    }
    assert_eq!(told, 1, "stall-exhausted calls the hook once");
    run.assert_fires(
        CALLBACK_CONTRACT,
        &broken,
        "on_exhausted was told the partial \"tell me\"; the store holds \"partial \"",
    );
}

/// Removes every commit that writes message `id`.
fn without_commits_of(record: &mut RunRecord, id: &str) {
    remove_crossings(record, &format!("a commit of {id}"), |what| match what {
        Boundary::Commit { writes } => {
            writes.iter().any(|write| matches!(write, Write::PutMessage(message) if message.id == id))
        }
        _ => false,
    });
}

#[test]
fn no_lost_work_fires_when_a_stored_user_message_is_gone() {
    let run = Run::committed("continuation-single-client-tool", NO_LOST_WORK);
    let mut broken = run.broken();
    without_commits_of(&mut broken, "m2");
    run.assert_fires(NO_LOST_WORK, &broken, "user message m2 was acknowledged but is gone");
}

#[test]
fn no_lost_work_fires_when_an_applied_call_is_gone_from_the_store() {
    let (run, mut answer) = answered_tool_run();
    answer.parts.retain(|part| !matches!(part, Part::Tool(tool) if tool.call_id == "tc-client-1"));
    run.assert_fires(
        NO_LOST_WORK,
        &committed_over(&run, answer),
        "tc-client-1 was shown as output-available but is gone from the store",
    );
}

#[test]
fn no_lost_work_fires_when_an_applied_result_is_stored_as_an_error() {
    let (run, answer) = answered_tool_run();
    let answer = repaired(vec![answer], "tc-client-1").remove(0);
    run.assert_fires(
        NO_LOST_WORK,
        &committed_over(&run, answer),
        "tc-client-1 was shown as output-available but then stored as output-error",
    );
}

#[test]
fn no_lost_work_fires_when_the_model_is_asked_with_another_output_than_was_stored() {
    let (run, _) = answered_tool_run();
    let mut broken = run.broken();
    let request = request_mut(&mut broken, 2);
    tool_in(&mut request.messages, "tc-client-1").output = Some(serde_json::json!("WRONG"));
    run.assert_fires(NO_LOST_WORK, &broken, "but then sent to the model with output \"WRONG\"");
}

#[test]
fn no_lost_work_fires_when_a_completed_server_tool_runs_again() {
    let run = Run::committed("server-tools-two-steps", NO_LOST_WORK);
    let mut broken = run.broken();
    let call = crossing_of(&broken, "the server-tool call", |what| matches!(what, Boundary::ServerToolCall { .. }));
    let again = broken.history.crossings[call].what.clone();
    let at = broken.history.crossings.len();
    insert_crossings(&mut broken, at, vec![again]);
    run.assert_fires(NO_LOST_WORK, &broken, "server tool tc-lookup-1 ran again after its result was stored");
}

#[test]
fn no_lost_work_fires_when_a_server_tool_runs_twice_in_one_process() {
    // The charge ran mid-stream; a second run before its result came, in
    // the same process, is a second charge whatever happens to the result.
    let run = Run::committed("server-tool-ran-before-a-503-mid-stream-is-kept", NO_LOST_WORK);
    let mut broken = run.broken();
    let call = crossing_of(&broken, "the server-tool call", |what| matches!(what, Boundary::ServerToolCall { .. }));
    let again = broken.history.crossings[call].what.clone();
    insert_crossings(&mut broken, call + 1, vec![again]);
    run.assert_fires(NO_LOST_WORK, &broken, "server tool tc-charge ran twice");
}

#[test]
fn no_lost_work_lets_a_crash_cut_run_go_again_but_only_after_the_crash() {
    // The clean run starts the approved tool twice with a kill between (the
    // process dies as the tool starts running): the first run was cut short
    // before its result, so it may run again.
    let run = Run::committed("explored-approved-tool-cut-short-by-an-eviction-runs-again", NO_LOST_WORK);
    let is_start = |what: &Boundary| matches!(what, Boundary::ServerToolCall { .. });
    let starts = run.record.history.crossings.iter().filter(|crossing| is_start(&crossing.what)).count();
    assert_eq!(starts, 2, "the clean run starts the tool once per process");
    let mut broken = run.broken();
    let killed = crossing_of(&broken, "the kill", |what| matches!(what, Boundary::Killed));
    broken.history.crossings.remove(killed);
    run.assert_fires(NO_LOST_WORK, &broken, "server tool tc-0 ran twice");
}

#[test]
fn no_lost_work_fires_when_a_server_tool_result_is_stored_otherwise_than_it_came() {
    // The tool answered 30 degrees; the engine stored (and showed) 21.
    let run = Run::committed("server-tools-two-steps", NO_LOST_WORK);
    let mut broken = run.broken();
    let done = crossing_of(&broken, "the tool's result", |what| matches!(what, Boundary::ServerToolDone { .. }));
    if let Boundary::ServerToolDone { outcome, .. } = &mut broken.history.crossings[done].what {
        *outcome = ToolOutcome::Output(serde_json::json!({ "temperature": 30 }));
    }
    let needle = "server tool tc-lookup-1 ran to its end but its result is stored as output-available with output {\"temperature\":21}";
    run.assert_fires(NO_LOST_WORK, &broken, needle);
}

#[test]
fn no_lost_work_fires_when_the_last_user_message_is_never_answered() {
    let run = Run::committed("continuation-single-client-tool", NO_LOST_WORK);
    let mut broken = run.broken();
    without_commits_of(&mut broken, "m3");
    run.assert_fires(NO_LOST_WORK, &broken, "user message m2 was never answered");
}

// ---------------------------------------------------------------- consumer views
//
// These read the boundary history, so each breaks the history: a take-back
// the engine never sent, a post of a discarded attempt's text.

const CLIENT_VIEW: &str = "client-view";
const CALLER_VIEW: &str = "caller-view";
const MESSENGER_VIEW: &str = "messenger-view";

/// Removes every crossing `matches` picks; panics if there is none.
fn remove_crossings(record: &mut RunRecord, what: &str, matches: impl Fn(&Boundary) -> bool) {
    let before = record.history.crossings.len();
    record.history.crossings.retain(|crossing| !matches(&crossing.what));
    assert!(record.history.crossings.len() < before, "the clean history has no {what}");
}

#[test]
fn client_view_fires_when_a_failed_attempt_is_never_taken_back() {
    let run = Run::committed("client-joins-mid-stream", CLIENT_VIEW);
    let mut broken = run.broken();
    remove_crossings(&mut broken, "reset frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Reset { .. }, .. })
    });
    // Only client 1 saw the failed attempt's text; client 2 had left. It
    // shows it at the turn's done frame and still at the end.
    let violations = run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 shows a different transcript");
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 is told request r1 is done showing message m3");
    assert_eq!(violations.len(), 2, "client 2 reconnected after the take-back: {violations:#?}");
}

#[test]
fn client_view_fires_when_a_client_is_never_told_the_recovery_ended() {
    // `recovery-mid-tool-input`: the client is told a recovery is under way
    // at the stall and that it is over once the recovery answered; without
    // the second frame it shows "recovering" for good.
    let run = Run::committed("recovery-mid-tool-input", CLIENT_VIEW);
    let mut broken = run.broken();
    remove_crossings(&mut broken, "recovery-ended frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Recovering(false), .. })
    });
    let violations = run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 still shows a recovery under way after the run settled",
    );
    // Once the incident is closed it shows one with none stored, too.
    let indicator = |violation: &Violation| violation.message.contains("shows a recovery under way while the store");
    assert_eq!(violations.len(), 2, "the transcript itself is right: {violations:#?}");
    assert!(violations.iter().any(indicator), "judged as soon as the run rests: {violations:#?}");
}

#[test]
fn client_view_fires_when_a_client_is_told_no_recovery_while_another_is_scheduled() {
    // `recovery-status-stays-while-another-is-scheduled`: the first recovery
    // stands down at 4.5 s while the second one's alarm is stored. A
    // "not recovering" sent with the stand-down leaves the client showing
    // none while one is scheduled, until the recovery is over.
    let run = Run::committed("recovery-status-stays-while-another-is-scheduled", CLIENT_VIEW);
    let mut broken = run.broken();
    let second = crossing_of(&broken, "the second incident's alarm", |what| {
        let puts_it = |write: &Write| matches!(write, Write::PutAlarm(alarm) if alarm.id == "alarm-r4:m5-1");
        matches!(what, Boundary::Commit { writes } if writes.iter().any(puts_it))
    });
    let shown = second
        + broken.history.crossings[second..]
            .iter()
            .position(|crossing| matches!(crossing.what, Boundary::Frame { frame: Frame::Recovering(true), .. }))
            .expect("the client is shown the second recovery");
    let told = Boundary::Frame { connection: 1, frame: Frame::Recovering(false) };
    insert_crossings(&mut broken, shown + 1, vec![told]);
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 shows no recovery under way while the store holds incident r4:m5 attempting",
    );
}

#[test]
fn client_view_fires_when_a_client_is_told_no_recovery_while_it_runs() {
    // `stall-recovers`: the recovery's alarm is taken and its turn runs;
    // the incident stays attempting until the turn has answered. A client
    // told "not recovering" as the recovery's model call goes out is wrong
    // from there, though no alarm is stored any more.
    let run = Run::committed("stall-recovers", CLIENT_VIEW);
    let mut broken = run.broken();
    let request = crossing_of(&broken, "the recovery's model request", |what| {
        matches!(what, Boundary::ModelRequest { call: 2, .. })
    });
    let told = Boundary::Frame { connection: 1, frame: Frame::Recovering(false) };
    insert_crossings(&mut broken, request + 1, vec![told]);
    run.assert_fires(CLIENT_VIEW, &broken, "shows no recovery under way while the store holds incident");
}

#[test]
fn client_view_fires_when_an_incident_is_left_attempting_with_nothing_to_run() {
    // `stall-recovers`: cut the run where the recovery's alarm is taken, and
    // tell the client the recovery is over. The store still holds the
    // incident attempting and nothing will ever run it: a recovery hidden
    // from the client at the run's end.
    let run = Run::committed("stall-recovers", CLIENT_VIEW);
    let mut broken = run.broken();
    let taken = crossing_of(&broken, "the alarm taken", |what| {
        let removes = |write: &Write| matches!(write, Write::RemoveAlarm(_));
        matches!(what, Boundary::Commit { writes } if writes.iter().any(removes))
    });
    broken.history.crossings.truncate(taken + 1);
    let told = Boundary::Frame { connection: 1, frame: Frame::Recovering(false) };
    insert_crossings(&mut broken, taken + 1, vec![told]);
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 shows no recovery under way while the store holds incident r1:m2 attempting",
    );
}

#[test]
fn client_view_fires_when_a_client_is_shown_a_recovery_before_any_is_stored() {
    // `stall-recovers`: a client told a recovery is under way as the first
    // model call goes out shows one while the store holds none, until the
    // stall stores its incident 2 s later.
    let run = Run::committed("stall-recovers", CLIENT_VIEW);
    let mut broken = run.broken();
    let request =
        crossing_of(&broken, "the first model request", |what| matches!(what, Boundary::ModelRequest { call: 1, .. }));
    let told = Boundary::Frame { connection: 1, frame: Frame::Recovering(true) };
    insert_crossings(&mut broken, request + 1, vec![told]);
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 shows a recovery under way while the store holds none attempting",
    );
}

#[test]
fn client_view_accepts_a_recovery_shown_before_the_store_refused_to_schedule_it() {
    // `store-refuses-to-schedule-a-recovery`: the stall's recovery is never
    // stored (the store refuses the commit). An engine that told clients a
    // recovery was under way before the store answered, and that they are
    // not once the held continuation runs, only said what it tried.
    let run = Run::committed("store-refuses-to-schedule-a-recovery", CLIENT_VIEW);
    let mut broken = run.broken();
    let refused = crossing_of(&broken, "the refused schedule", |what| {
        let schedules = |write: &Write| matches!(write, Write::PutIncident(_));
        matches!(what, Boundary::CommitRefused { writes } if writes.iter().any(schedules))
    });
    let shown = Boundary::Frame { connection: 1, frame: Frame::Recovering(true) };
    insert_crossings(&mut broken, refused, vec![shown]);
    let continued = crossing_of(&broken, "the continuation's model request", |what| {
        matches!(what, Boundary::ModelRequest { call: 2, .. })
    });
    let over = Boundary::Frame { connection: 1, frame: Frame::Recovering(false) };
    insert_crossings(&mut broken, continued + 1, vec![over]);
    run.assert_passes(CLIENT_VIEW, &broken, "a recovery the store refused to schedule");
}

#[test]
fn client_view_fires_when_a_recovery_is_told_as_a_new_answer() {
    // `stall-recovers`: the recovery asks the model to continue the partial
    // answer; a client told its stream was a new answer would show it as
    // one, apart from the partial it completes.
    let run = Run::committed("stall-recovers", CLIENT_VIEW);
    let mut broken = run.broken();
    let continued = |what: &Boundary| matches!(what, Boundary::ModelRequest { request, .. } if request.continuation);
    let request_id = match &broken.history.crossings[crossing_of(&broken, "the recovery's request", continued)].what {
        Boundary::ModelRequest { request, .. } => request.request_id.clone(),
        _ => unreachable!("found as a model request"),
    };
    let done = crossing_of(
        &broken,
        "the recovery's done frame",
        |what| matches!(what, Boundary::Frame { frame: Frame::Done { request_id: id, .. }, .. } if *id == request_id),
    );
    if let Boundary::Frame { frame: Frame::Done { continuation, .. }, .. } = &mut broken.history.crossings[done].what {
        *continuation = false;
    }
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        &format!(
            "client connection c1 is told request {request_id} answered anew though the model was asked to continue"
        ),
    );
}

#[test]
fn client_view_accepts_a_recovery_ended_before_the_store_records_it() {
    // `store-refuses-closing-a-recovered-incident`: the recovery answered
    // and the client is told it is over, but the store refuses to close the
    // incident and holds it attempting a second longer. The engine tried to
    // end it: that is not a recovery hidden from the client.
    let run = Run::committed("store-refuses-closing-a-recovered-incident", CLIENT_VIEW);
    let record = run.broken();
    let refused = crossing_of(&record, "the refused closure", |what| {
        let closes = |write: &Write| matches!(write, Write::RemoveIncident(_));
        matches!(what, Boundary::CommitRefused { writes } if writes.iter().any(closes))
    });
    let told = |crossing: &Crossing| matches!(crossing.what, Boundary::Frame { frame: Frame::Recovering(false), .. });
    assert!(
        record.history.crossings[refused..].iter().any(told),
        "the client is told the recovery is over after the refused closure"
    );
    run.assert_passes(CLIENT_VIEW, &record, "a recovery whose closure the store refused");
}

#[test]
fn client_view_fires_when_a_client_is_never_shown_an_approval_decision() {
    // `approval-client-tool-stays-with-client`: the approval leaves the
    // call approval-responded; the tool frame says so, and the transcript
    // sent after it shows the decision. Without that transcript the client
    // shows an answered approval and not what was decided.
    let run = Run::committed("approval-client-tool-stays-with-client", CLIENT_VIEW);
    let mut broken = run.broken();
    let approved = crossing_of(&broken, "the approval", |what| matches!(what, Boundary::Approval { .. }));
    let resent = (approved..broken.history.crossings.len())
        .find(|&at| matches!(broken.history.crossings[at].what, Boundary::Frame { frame: Frame::Messages(_), .. }))
        .expect("the transcript is sent again after the approval");
    broken.history.crossings.remove(resent);
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 shows a different transcript");
}

#[test]
fn client_view_fires_when_a_late_client_misses_the_unflushed_text() {
    // The transcript client 2 gets on reconnect lacks the streamed text the
    // store does not hold yet (what the engine sent before it showed the
    // live message): the chunks that follow extend a shorter message.
    let run = Run::committed("client-joins-mid-stream", CLIENT_VIEW);
    let mut broken = run.broken();
    let reconnect = broken
        .history
        .crossings
        .iter_mut()
        .find_map(|crossing| match &mut crossing.what {
            Boundary::Frame { connection: 2002, frame: Frame::Messages(messages) } => Some(messages),
            _ => None,
        })
        .expect("client 2's second connection got the transcript");
    let streaming = reconnect.last_mut().expect("the streaming message is shown");
    let Some(Part::Text { text, .. }) = streaming.parts.iter_mut().find(|part| matches!(part, Part::Text { .. }))
    else {
        panic!("the streaming message shows its text")
    };
    assert_eq!(text, "alpha beta ", "client 2 joined between `beta` and `gamma`");
    *text = "alpha ".into();
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c2002 shows a different transcript");
}

#[test]
fn client_view_fires_when_a_dynamic_tool_is_stored_as_a_static_one() {
    // The client streamed a dynamic-tool part; a store that keeps it as a
    // static tool part shows a reloading client something else.
    let run = Run::committed("barrier-waits-for-a-dynamic-sibling", CLIENT_VIEW);
    let mut broken = run.broken();
    let mut edited = 0;
    for crossing in &mut broken.history.crossings {
        let Boundary::Commit { writes } = &mut crossing.what else { continue };
        for write in writes {
            let Write::PutMessage(message) = write else { continue };
            if let Some(tool) = message.parts.tool_mut("tc-mcp") {
                tool.dynamic = false;
                edited += 1;
            }
        }
    }
    assert!(edited > 0, "the clean history stores tc-mcp");
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 shows a different transcript");
}

#[test]
fn client_view_keeps_a_connection_through_a_memory_only_eviction() {
    // The connection outlived the process: the client still shows what it
    // was streamed. Without the transcript the new process sent it on
    // `connect`, it shows the dead attempt's text the store never kept.
    let run = Run::committed("eviction-memory-only-keeps-the-connection", CLIENT_VIEW);
    assert!(
        run.record.history.iter().any(|crossing| matches!(crossing.what, Boundary::KeptOpen { .. })),
        "the clean run keeps the connection"
    );
    let mut broken = run.broken();
    let kept = broken.history.crossings.iter().position(|crossing| matches!(crossing.what, Boundary::KeptOpen { .. }));
    let resent = broken.history.crossings[kept.expect("kept")..]
        .iter()
        .position(|crossing| matches!(crossing.what, Boundary::Frame { frame: Frame::Messages(_), .. }))
        .map(|offset| offset + kept.expect("kept"))
        .expect("the new process sends the transcript on connect");
    broken.history.crossings.remove(resent);
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 shows a different transcript");
}

#[test]
fn client_view_fires_when_a_lost_chunk_is_repaired_after_the_done_frame() {
    // `three-messages-queued-each-answered-in-turn`: the third answer's
    // text never reaches client 1, and a transcript sent after its `done`
    // frame repairs the screen before the run ends. At the `done` frame
    // the client showed no answer where the store held one.
    let run = Run::committed("three-messages-queued-each-answered-in-turn", CLIENT_VIEW);
    let mut broken = run.broken();
    let lost = crossing_of(
        &broken,
        "the third answer's text",
        |what| matches!(what, Boundary::Frame { frame: Frame::Chunk { chunk: Chunk::TextDelta { delta, .. }, .. }, .. } if delta == "Three."),
    );
    broken.history.crossings.remove(lost);
    let done = crossing_of(
        &broken,
        "the third answer's done frame",
        |what| matches!(what, Boundary::Frame { frame: Frame::Done { request_id, .. }, .. } if request_id == "r6"),
    );
    let repaired = Boundary::Frame { connection: 1, frame: Frame::Messages(broken.history.final_store().messages) };
    insert_crossings(&mut broken, done + 1, vec![repaired]);
    let violations = run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 is told request r6 is done showing message m9 as nothing",
    );
    // The relay names the same loss where the part's end comes in its
    // place; the end of the run shows the repaired screen.
    let relayed = "client connection c1 is sent the end of text t0 where the model streamed 'T' of text t0 next";
    assert!(violations.iter().any(|violation| violation.message.starts_with(relayed)), "{violations:#?}");
    assert_eq!(violations.len(), 2, "the end of the run shows the repaired screen: {violations:#?}");
}

#[test]
fn client_view_fires_when_a_client_leaves_without_a_chunk_the_store_holds() {
    // `client-disconnects-for-good`: the client leaves mid-reply for good,
    // so the end of the run never judges it. The first word, stored at
    // 50 ms, never reached it: it leaves showing less than the store.
    // The client leaves in the instant the word is stored (no time passes
    // between, so only its leaving judges it).
    let run = Run::committed("client-disconnects-for-good", CLIENT_VIEW);
    let mut broken = run.broken();
    let lost = crossing_of(&broken, "the first word", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Chunk { chunk: Chunk::TextDelta { .. }, .. }, .. })
    });
    broken.history.crossings.remove(lost);
    let leaving = crossing_of(&broken, "the disconnect", |what| matches!(what, Boundary::Disconnect { .. }));
    let mut left = broken.history.crossings.remove(leaving);
    let stored = (lost..broken.history.crossings.len())
        .find(|&at| matches!(broken.history.crossings[at].what, Boundary::Commit { .. }))
        .expect("the word's commit");
    left.at_us = broken.history.crossings[stored].at_us;
    broken.history.crossings.insert(stored + 1, left);
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 leaves showing other than the store");
}

#[test]
fn caller_view_fires_when_a_caller_shows_less_than_the_store_while_time_passes() {
    // `recovery-scheduled-again-by-a-restart-runs-once`: the attempt's one
    // delta, `partial `, is stored as it streams, then the model stalls
    // for 2 s. Without that event the caller shows nothing of what the
    // store holds of its reply for those two seconds.
    let run = Run::committed("recovery-scheduled-again-by-a-restart-runs-once", CALLER_VIEW);
    let mut broken = run.broken();
    let delta = crossing_of(&broken, "the caller's delta", |what| {
        matches!(what, Boundary::Callback { call: CallbackCall::Event { chunk: Chunk::TextDelta { .. } }, .. })
    });
    broken.history.crossings.remove(delta);
    run.assert_fires(
        CALLER_VIEW,
        &broken,
        "chat1 shows \"\" while time passes; the store holds \"partial \" of its reply m3",
    );
}

#[test]
fn client_view_fires_when_a_client_shows_less_than_the_store_while_time_passes() {
    // `client-disconnects-for-good`: the first word, stored at 50 ms,
    // never reached the client, which looks at a screen without it for
    // 50 ms before it leaves.
    let run = Run::committed("client-disconnects-for-good", CLIENT_VIEW);
    let mut broken = run.broken();
    let lost = crossing_of(&broken, "the first word", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Chunk { chunk: Chunk::TextDelta { .. }, .. }, .. })
    });
    broken.history.crossings.remove(lost);
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 shows less than the store while time passes: message m3 shows []",
    );
}

#[test]
fn client_view_fires_when_a_client_connecting_is_never_told_a_stored_failure() {
    // `restart-after-a-told-failure-does-not-answer-it`: the store holds
    // r1's failure for clients that connect later; the client connecting
    // after the restart is sent the transcript and then that error frame.
    // Without the frame it never learns its message went unanswered.
    let run = Run::committed("restart-after-a-told-failure-does-not-answer-it", CLIENT_VIEW);
    let mut broken = run.broken();
    let replayed = crossing_of(&broken, "the failure replayed on connect", |what| {
        matches!(what, Boundary::Frame { connection: 2, frame: Frame::Error { .. } })
    });
    broken.history.crossings.remove(replayed);
    run.assert_fires(CLIENT_VIEW, &broken, "for clients that connect later, and is told no failure");
}

#[test]
fn client_view_fires_when_a_chunk_comes_before_its_part_starts() {
    // `three-messages-queued-each-answered-in-turn`: the third answer's
    // text sent before its `text-start`: a client shows a delta only in a
    // part it saw start, so the answer is not on screen at its `done`.
    let run = Run::committed("three-messages-queued-each-answered-in-turn", CLIENT_VIEW);
    let mut broken = run.broken();
    let start = crossing_of(
        &broken,
        "the third answer's start",
        |what| matches!(what, Boundary::Frame { frame: Frame::Chunk { request_id, chunk: Chunk::TextStart { .. }, .. }, .. } if request_id == "r6"),
    );
    let delta = crossing_of(
        &broken,
        "the third answer's text",
        |what| matches!(what, Boundary::Frame { frame: Frame::Chunk { request_id, chunk: Chunk::TextDelta { .. }, .. }, .. } if request_id == "r6"),
    );
    let moved = broken.history.crossings.remove(start);
    broken.history.crossings.insert(delta, moved);
    run.assert_fires(CLIENT_VIEW, &broken, "is told request r6 is done showing message m9 as nothing");
}

#[test]
fn client_view_fires_when_a_failed_turn_is_not_told_to_a_client() {
    // `recovery-exhausted-one-terminal-frame`: recovery gives up, stores
    // the terminal status and tells the client with an error frame.
    // Without that frame the client never learns the turn failed.
    let run = Run::committed("recovery-exhausted-one-terminal-frame", CLIENT_VIEW);
    let mut broken = run.broken();
    remove_crossings(&mut broken, "error frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. })
    });
    run.assert_fires(CLIENT_VIEW, &broken, "is never sent an error frame for request");
}

#[test]
fn client_view_fires_when_a_callers_failed_turn_is_not_told_to_a_client() {
    // `max-steps-ends-a-tool-loop`: the turn fails at its step limit; the
    // caller gets `on_error` and the connected client an error frame.
    let run = Run::committed("max-steps-ends-a-tool-loop", CLIENT_VIEW);
    let told_the_caller =
        |crossing: &Crossing| matches!(crossing.what, Boundary::Callback { call: CallbackCall::Error { .. }, .. });
    assert!(run.record.history.iter().any(told_the_caller), "the caller is told the turn failed");
    let mut broken = run.broken();
    // The caller's `on_error` alone shows the failure: no terminal status stored.
    for crossing in &mut broken.history.crossings {
        if let Boundary::Commit { writes } = &mut crossing.what {
            writes.retain(|write| !matches!(write, Write::Terminal(Some(_))));
        }
    }
    remove_crossings(&mut broken, "error frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. })
    });
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 is never sent an error frame for request");
}

#[test]
fn client_view_fires_when_recovery_gives_up_untold_though_the_store_records_no_failure() {
    // `recovery-exhausted-one-terminal-frame`, with the terminal status
    // left out of every commit (an engine that keeps its failures opaque,
    // as the Cloudflare port does): the hook's call alone shows that
    // recovery gave up, and the client connected then is owed an error frame.
    let run = Run::committed("recovery-exhausted-one-terminal-frame", CLIENT_VIEW);
    let mut broken = run.broken();
    for crossing in &mut broken.history.crossings {
        if let Boundary::Commit { writes } = &mut crossing.what {
            writes.retain(|write| !matches!(write, Write::Terminal(Some(_))));
        }
    }
    let mut told = broken.clone();
    run.assert_passes(CLIENT_VIEW, &told, "an engine whose store records no terminal status, but tells the client");
    remove_crossings(&mut broken, "error frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. })
    });
    run.assert_fires(CLIENT_VIEW, &broken, "client connection c1 is never sent an error frame after recovery gave up");
    // Told before the hook, in another handler, is not told of this failure.
    let hook = crossing_of(&told, "on_exhausted", |what| matches!(what, Boundary::Exhausted { .. }));
    let error =
        crossing_of(&told, "error frame", |what| matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. }));
    let frame = told.history.crossings.remove(error);
    told.history.crossings.insert(0, frame);
    assert!(hook > 0, "the hook comes after the run's first input");
    run.assert_fires(CLIENT_VIEW, &told, "after recovery gave up");
}

#[test]
fn client_view_fires_when_a_streamed_request_is_never_told_its_end() {
    // `three-messages-queued-each-answered-in-turn`: the last answer
    // streamed to c1 ends with its `done` frame. Without it a UI shows the
    // answer still streaming once the run has settled.
    let run = Run::committed("three-messages-queued-each-answered-in-turn", CLIENT_VIEW);
    let mut broken = run.broken();
    let last_done = broken
        .history
        .crossings
        .iter()
        .rposition(|crossing| matches!(crossing.what, Boundary::Frame { frame: Frame::Done { .. }, .. }))
        .expect("the clean history has a done frame");
    broken.history.crossings.remove(last_done);
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "and never sent a done or error frame (nor the transcript) after it, though the run settled",
    );
    // The store restated ends it too (a late resume ack answered with the
    // transcript, as the built-in engine does): nothing streams on screen.
    let mut restated = broken.clone();
    let at = restated.history.crossings.len();
    let transcript = Frame::Messages(restated.history.final_store().messages);
    insert_crossings(&mut restated, at, vec![Boundary::Frame { connection: 1, frame: transcript }]);
    let told = run.check(CLIENT_VIEW, &restated);
    assert!(
        told.iter().all(|violation| !violation.message.contains("never sent a done or error frame")),
        "a stream the transcript restated is not owed its end: {told:#?}"
    );
    // A process that dies ends its streams with it.
    let mut killed = broken.clone();
    let at = killed.history.crossings.len();
    insert_crossings(&mut killed, at, vec![Boundary::Killed]);
    let stream_told = run.check(CLIENT_VIEW, &killed);
    assert!(
        stream_told.iter().all(|violation| !violation.message.contains("never sent a done or error frame")),
        "a stream cut by the process's death is not owed its end: {stream_told:#?}"
    );
}

#[test]
fn client_view_takes_a_clients_own_result_as_shown_but_holds_other_clients_to_the_echo() {
    // `continuation-single-client-tool`: c1 sends tc-client-1's result and
    // is sent the tool frame saying it is output-available. The history
    // records that the result came over c1, so c1 shows it without the
    // frame, as a UI shows its own answer; a client that did not send it
    // (here: the result said to come over another connection) is left
    // showing the call waiting.
    let run = Run::committed("continuation-single-client-tool", CLIENT_VIEW);
    let answered = crossing_of(&run.record, "the tool result", |what| matches!(what, Boundary::ToolResult { .. }));
    assert!(
        matches!(run.record.history.crossings[answered].what, Boundary::ToolResult { connection: Some(1), .. }),
        "the history records the connection the result came over"
    );
    let mut own = run.broken();
    remove_crossings(&mut own, "the echo of the result", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Tool { state: ToolState::OutputAvailable, .. }, .. })
    });
    run.assert_passes(CLIENT_VIEW, &own, "a client without the echo of its own result");
    let mut other = own.clone();
    if let Boundary::ToolResult { connection, .. } = &mut other.history.crossings[answered].what {
        *connection = Some(2);
    }
    run.assert_fires(CLIENT_VIEW, &other, "client connection c1");
}

#[test]
fn client_view_fires_when_a_client_is_never_asked_to_approve_a_call_it_was_streamed() {
    // `recovery-parked-for-an-approval`: c1 is streamed the finished call
    // tc-delete of `delete_file`, which needs approval, and is sent the
    // tool frame asking for it. Without that frame it shows the call
    // input-available, with nothing to approve, while time passes.
    let run = Run::committed("recovery-parked-for-an-approval", CLIENT_VIEW);
    let mut broken = run.broken();
    remove_crossings(&mut broken, "the approval request", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Tool { state: ToolState::ApprovalRequested, .. }, .. })
    });
    run.assert_fires(
        CLIENT_VIEW,
        &broken,
        "client connection c1 is streamed the finished call tc-delete of delete_file, which needs approval",
    );
}

// ---------------------------------------------------------------- resume-handshake

const RESUME_HANDSHAKE: &str = "resume-handshake";

/// `client-resumes-the-stream-after-reconnecting`: the history index of the
/// offer the reconnected client gets, and its connection.
fn offered(record: &RunRecord) -> (usize, u64) {
    let at = crossing_of(record, "resume offer", |what| {
        matches!(what, Boundary::Frame { frame: Frame::StreamResuming { .. }, .. })
    });
    let Boundary::Frame { connection, .. } = record.history.crossings[at].what else { unreachable!() };
    (at, connection)
}

#[test]
fn resume_handshake_fires_on_a_chunk_sent_before_the_ack() {
    let run = Run::committed("client-resumes-the-stream-after-reconnecting", RESUME_HANDSHAKE);
    let mut broken = run.broken();
    let (at, connection) = offered(&broken);
    let chunk = Chunk::TextDelta { id: "t1".into(), delta: "early ".into() };
    let frame = Frame::Chunk { request_id: "r1".into(), message_id: "m3".into(), chunk };
    insert_crossings(&mut broken, at + 1, vec![Boundary::Frame { connection, frame }]);
    run.assert_fires(RESUME_HANDSHAKE, &broken, "was offered a resume of r1 and sent a chunk before it acked");
}

#[test]
fn resume_handshake_accepts_an_offer_made_again() {
    let run = Run::committed("client-resumes-the-stream-after-reconnecting", RESUME_HANDSHAKE);
    let mut edited = run.broken();
    let (at, connection) = offered(&edited);
    let again = Frame::StreamResuming { request_id: "r1".into() };
    insert_crossings(&mut edited, at + 1, vec![Boundary::Frame { connection, frame: again }]);
    run.assert_passes(RESUME_HANDSHAKE, &edited, "a second offer to a client that asked twice");
}

#[test]
fn caller_view_fires_when_a_failed_attempt_is_never_taken_back() {
    let run = Run::committed("provider-rate-limit-mid-stream-discards", CALLER_VIEW);
    let mut broken = run.broken();
    remove_crossings(&mut broken, "on_reset", |what| {
        matches!(what, Boundary::Callback { call: CallbackCall::Reset { .. }, .. })
    });
    run.assert_fires(CALLER_VIEW, &broken, "chat1 shows \"The answer is forThe answer is 42.\" at on_done");
}

/// The engine whose retries ran out tells its caller `on_done` where it
/// told it `on_error` (the client still gets the error frame, the store
/// still holds the failure): a failed turn reported as a success.
#[test]
fn caller_view_fires_when_a_failed_turn_is_told_done_to_its_caller() {
    let run = Run::committed("provider-http-500-retries-exhausted", CALLER_VIEW);
    let as_done = |record: &mut RunRecord| {
        for crossing in &mut record.history.crossings {
            if let Boundary::Callback { call, .. } = &mut crossing.what {
                if matches!(call, CallbackCall::Error { .. }) {
                    *call = CallbackCall::Done;
                }
            }
        }
    };
    let mut broken = run.broken();
    as_done(&mut broken);
    run.assert_fires(CALLER_VIEW, &broken, "chat1 gets on_done for request r1, which failed");
    // With no client connected, the failure the store holds says it alone.
    let mut unseen = run.broken();
    as_done(&mut unseen);
    remove_crossings(&mut unseen, "error frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. })
    });
    run.assert_fires(CALLER_VIEW, &unseen, "which failed: the store holds its failure");
    // The correct engine's on_error passes.
    run.assert_passes(CALLER_VIEW, &run.broken(), "on_error for the failed turn");
}

#[test]
fn messenger_view_fires_on_a_post_with_a_discarded_attempts_text() {
    let run = Run::committed("messenger-takes-back-a-failed-attempt", MESSENGER_VIEW);
    let mut broken = run.broken();
    for crossing in &mut broken.history.crossings {
        if let Boundary::Post { text, .. } = &mut crossing.what {
            *text = "The answer is forThe answer is 42.".into();
        }
    }
    run.assert_fires(MESSENGER_VIEW, &broken, "delivery d1 posted \"The answer is forThe answer is 42.\"");
    let mut apology = run.broken();
    for crossing in &mut apology.history.crossings {
        if let Boundary::Post { text, .. } = &mut crossing.what {
            *text = INTERRUPTED_MESSENGER_RESPONSE.into();
        }
    }
    run.assert_passes(MESSENGER_VIEW, &apology, "the interrupted apology in place of the answer");
}

#[test]
fn messenger_view_fires_when_a_refused_post_ends_the_chat() {
    // The surface refused the second of three posts; the engine followed
    // with the error reply. Without it the chat ends on part of the answer.
    let run = Run::committed("messenger-post-refused-posts-the-error-reply", MESSENGER_VIEW);
    let mut broken = run.broken();
    remove_crossings(
        &mut broken,
        "the error reply",
        |what| matches!(what, Boundary::Post { text, .. } if text == ERROR_MESSENGER_RESPONSE),
    );
    run.assert_fires(MESSENGER_VIEW, &broken, "refused the post \"three new \" and nothing followed it");
    // The rest of the answer posted past the refused part is not the answer.
    let mut skipped = run.broken();
    for crossing in &mut skipped.history.crossings {
        if let Boundary::Post { text, .. } = &mut crossing.what {
            if text == ERROR_MESSENGER_RESPONSE {
                *text = "messages.".into();
            }
        }
    }
    run.assert_fires(MESSENGER_VIEW, &skipped, "posted \"Your inbox has messages.\"");
}

/// `messenger-slow-post-evicted-mid-reply`: the process died with its
/// second post in flight; the next posted that one again, then the third.
fn slow_post_run(invariant: &str) -> Run {
    Run::committed("messenger-slow-post-evicted-mid-reply", invariant)
}

#[test]
fn the_post_in_flight_at_a_kill_may_be_posted_again_but_no_other() {
    for invariant in [MESSENGER_ONCE, MESSENGER_VIEW] {
        slow_post_run(invariant).assert_passes(invariant, &slow_post_run(invariant).broken(), "the clean run");
    }
    // The surface had answered the second post: posting it again is not
    // the at-least-once edge, and the chat shows part of the answer twice.
    let run = slow_post_run(MESSENGER_VIEW);
    let mut broken = run.broken();
    let second = crossing_of(&broken, "post 2", |what| matches!(what, Boundary::Post { post: 2, .. }));
    insert_crossings(&mut broken, second + 1, vec![post_done(2)]);
    run.assert_fires(MESSENGER_VIEW, &broken, "posted \"Your inbox has three new three new messages.\"");
    // The next process posting the whole reply from the start.
    let mut from_scratch = run.broken();
    let third = crossing_of(&from_scratch, "post 3", |what| matches!(what, Boundary::Post { post: 3, .. }));
    from_scratch.history.crossings[third].what = post(3, "Your inbox has ");
    run.assert_fires(MESSENGER_VIEW, &from_scratch, "posted \"Your inbox has three new Your inbox has messages.\"");
}

#[test]
fn a_reply_cut_by_a_kill_may_end_in_the_apology_but_a_finished_one_is_not_posted_again() {
    // The reference's way: the restarted process apologises for the rest.
    let run = slow_post_run(MESSENGER_VIEW);
    let mut apology = run.broken();
    let third = crossing_of(&apology, "post 3", |what| matches!(what, Boundary::Post { post: 3, .. }));
    apology.history.crossings[third].what = post(3, INTERRUPTED_MESSENGER_RESPONSE);
    remove_crossings(&mut apology, "post 4", |what| matches!(what, Boundary::Post { post: 4, .. }));
    // Nor does it record the rest as still owed after apologising for it.
    let owing = (third..apology.history.crossings.len()).find(|&at| {
        matches!(&apology.history.crossings[at].what, Boundary::Commit { writes }
            if writes.iter().any(|write| matches!(write, Write::PutDelivery(record) if record.stage == DeliveryStage::Posting)))
    });
    apology.history.crossings.remove(owing.expect("the posting record of the rest"));
    run.assert_passes(MESSENGER_VIEW, &apology, "the start of the answer, then the apology after a kill");
    let once = slow_post_run(MESSENGER_ONCE);
    once.assert_passes(MESSENGER_ONCE, &apology, "the start of the answer, then the apology after a kill");
    // A reply that said everything, posted again after a kill, is a second reply.
    let (run, _) = delivery_run();
    let mut broken = run.broken();
    let end = broken.history.crossings.len();
    insert_crossings(&mut broken, end, vec![Boundary::Killed, post(2, "Hello there.")]);
    run.assert_fires(MESSENGER_ONCE, &broken, "delivery d1 posted 2 times");
}

#[test]
fn a_hook_that_threw_tells_nobody() {
    // Recovery gave up and the hook threw: only the terminal frame and the
    // stored terminal status told anyone (what no-lost-work and
    // single-continuation accept as "the user was told"). Without them
    // nobody was, unless the hook had run.
    let run = Run::committed("exhausted-hook-throws", NO_LOST_WORK);
    assert!(told_failure_since(&run.record.history, 0), "the clean run tells the client");
    let mut broken = run.broken();
    remove_crossings(&mut broken, "the terminal frame", |what| {
        matches!(what, Boundary::Frame { frame: Frame::Error { .. }, .. })
    });
    for crossing in &mut broken.history.crossings {
        if let Boundary::Commit { writes } = &mut crossing.what {
            writes.retain(|write| !matches!(write, Write::Terminal(Some(_))));
        }
    }
    assert!(!told_failure_since(&broken.history, 0), "a hook that threw told nobody");
    let mut hook_ran = broken.clone();
    for crossing in &mut hook_ran.history.crossings {
        if let Boundary::Exhausted { threw, .. } = &mut crossing.what {
            *threw = None;
        }
    }
    assert!(told_failure_since(&hook_ran.history, 0), "a hook that ran told the host");
}

// ---------------------------------------------------------------- the oracle's inputs

// The checks read the run only as `check::judged::Judged`, which holds no
// engine event: `silent_engine.rs` proves the verdicts do not move when the
// engine says nothing of itself.

// ---------------------------------------------------------------- failure-stands

const FAILURE_STANDS: &str = "failure-stands";

/// `store-refuses-a-recovery-attempt-it-gives-up`: the recovery `r4` gives
/// up when the store refuses its write, and connection c1 is sent its
/// error frame; nothing answers after it.
fn told_failed_run() -> (Run, usize) {
    let run = Run::committed("store-refuses-a-recovery-attempt-it-gives-up", FAILURE_STANDS);
    let error = crossing_of(
        &run.record,
        "the error frame of r4",
        |what| matches!(what, Boundary::Frame { connection: 1, frame: Frame::Error { request_id, .. } } if request_id == "r4"),
    );
    (run, error)
}

/// A chunk of a request c1 never saw, streamed into the reply `m3`.
fn answer_chunk() -> Boundary {
    let chunk = Chunk::TextDelta { id: "t9".into(), delta: " world.".into() };
    Boundary::Frame { connection: 1, frame: Frame::Chunk { request_id: "r9".into(), message_id: "m3".into(), chunk } }
}

#[test]
fn failure_stands_fires_on_an_answer_streamed_after_the_failure() {
    let (run, error) = told_failed_run();
    let mut broken = run.broken();
    insert_crossings(&mut broken, error + 1, vec![answer_chunk()]);
    run.assert_fires(FAILURE_STANDS, &broken, "was told request r4 failed");
}

#[test]
fn failure_stands_accepts_an_answer_asked_for_after_the_failure() {
    let (run, error) = told_failed_run();
    let mut edited = run.broken();
    let asked = Boundary::UserMessage { text: "hi again".into() };
    insert_crossings(&mut edited, error + 1, vec![asked, answer_chunk()]);
    run.assert_passes(FAILURE_STANDS, &edited, "an answer the user asked for again");
}

// ---------------------------------------------------------------- request-matches-store

const REQUEST_MATCHES_STORE: &str = "request-matches-store";

/// `three-messages-queued-each-answered-in-turn`: call #2 answers "second"
/// (m5) into a reply m8 the store does not hold yet, while "third" (m7)
/// waits stored behind it.
fn queued_run() -> Run {
    Run::committed("three-messages-queued-each-answered-in-turn", REQUEST_MATCHES_STORE)
}

#[test]
fn request_matches_store_accepts_a_queued_message_left_out() {
    // The clean run's call #2 leaves out m7, which the store holds: it is
    // the next turn's to answer, not this one's.
    let run = queued_run();
    let request = run.record.history.crossings.iter().find_map(|crossing| match &crossing.what {
        Boundary::ModelRequest { call: 2, request } => Some(request),
        _ => None,
    });
    let shown: Vec<&str> = request.expect("call #2").messages.iter().map(|message| message.id.as_str()).collect();
    assert_eq!(shown, ["m2", "m3", "m5", "m8"], "call #2 ends at its reply");
    let at = crossing_of(&run.record, "call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    assert!(run.record.history.store_at(at).message("m7").is_some(), "m7 is stored before call #2");
    run.assert_passes(REQUEST_MATCHES_STORE, &run.record, "a user message queued behind the reply");
}

#[test]
fn request_matches_store_fires_on_a_request_without_the_message_it_answers() {
    let run = queued_run();
    let mut broken = run.broken();
    request_mut(&mut broken, 2).messages.retain(|message| message.id != "m5");
    run.assert_fires(
        REQUEST_MATCHES_STORE,
        &broken,
        "model call #2 (r4): user message m5 (\"second\") is stored before the reply asked for, and not shown",
    );
}

#[test]
fn request_matches_store_fires_on_a_user_message_shown_with_other_text() {
    let run = queued_run();
    let mut broken = run.broken();
    let second = request_mut(&mut broken, 2).messages.iter_mut().find(|message| message.id == "m5");
    second.expect("m5 in call #2").parts =
        vec![Part::Text { id: "t".into(), text: "third".into(), state: TextState::Done }].into();
    run.assert_fires(
        REQUEST_MATCHES_STORE,
        &broken,
        "message m5 part 0 is shown as text \"third\"; the store holds text \"second\"",
    );
}

#[test]
fn request_matches_store_fires_on_a_retry_shown_the_failed_attempts_text() {
    // Call #1 streamed "The answer is for" and failed with a 503; the
    // engine took it back, and call #2 retries. Shown that text, the model
    // would go on from an answer nobody kept.
    let run = Run::committed("provider-rate-limit-mid-stream-discards", REQUEST_MATCHES_STORE);
    let mut broken = run.broken();
    let reply = request_mut(&mut broken, 2).messages.last_mut().expect("the reply");
    reply.parts.push(Part::Text { id: "t1".into(), text: "The answer is for".into(), state: TextState::Streaming });
    run.assert_fires(
        REQUEST_MATCHES_STORE,
        &broken,
        "m3 shows text \"The answer is for\" that the store does not hold and no kept call streamed",
    );
}

/// `server-tools-two-steps` with m3 stored without its text until call #2
/// has been sent: the reply call #2 shows runs ahead of the store.
fn reply_ahead_of_the_store() -> (Run, RunRecord, usize) {
    let run = Run::committed("server-tools-two-steps", REQUEST_MATCHES_STORE);
    let mut edited = run.broken();
    let second = crossing_of(&edited, "call #2", |what| matches!(what, Boundary::ModelRequest { call: 2, .. }));
    for crossing in &mut edited.history.crossings[..second] {
        let Boundary::Commit { writes } = &mut crossing.what else { continue };
        for write in writes.iter_mut() {
            match write {
                Write::PutMessage(message) | Write::PutMessageAfter { message, .. } if message.id == "m3" => {
                    message.parts.retain(|part| !matches!(part, Part::Text { .. }))
                }
                _ => {}
            }
        }
    }
    (run, edited, second)
}

#[test]
fn request_matches_store_accepts_a_reply_ahead_of_the_store() {
    let (run, edited, _) = reply_ahead_of_the_store();
    run.assert_passes(REQUEST_MATCHES_STORE, &edited, "text a kept call streamed that the store does not hold yet");
}

#[test]
fn request_matches_store_fires_on_text_a_take_back_dropped() {
    // The same, with call #1's attempt taken back (a reset frame shows m3
    // without its text): the text it streamed is nobody's any more.
    let (run, mut broken, second) = reply_ahead_of_the_store();
    let reply = request_mut(&mut broken, 2).messages.last().expect("the reply").clone();
    let mut message = reply.clone();
    message.parts.retain(|part| !matches!(part, Part::Text { .. }));
    let reset = Frame::Reset { request_id: "r1".into(), message };
    insert_crossings(&mut broken, second, vec![Boundary::Frame { connection: 1, frame: reset }]);
    run.assert_fires(
        REQUEST_MATCHES_STORE,
        &broken,
        "m3 shows text \"Let me look that up.\" that the store does not hold and no kept call streamed",
    );
}

//! The mutation operators: each one a wrong a consumer of the engine could
//! be handed, written as a rewrite of one kind of effect on its way out
//! (a commit, a model request, a frame, a callback, a post, a server-tool
//! start, a hook call). An operator applies at one site per run; the sites
//! it could apply at are its eligible effects, counted in run order.

use serde_json::Value;
use turnsim_engine::transcript::{Message, Part, Role, TextState, ToolPart, ToolState};
use turnsim_engine::Frame;

/// One named way for an engine to be wrong. The doc comment of each says
/// the wrong a consumer is handed; `docs/adversary.md` lists them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// The store keeps a tool's output changed (from the first commit that
    /// holds that call's output, every commit of it): the transcript says
    /// the tool returned something it did not.
    WrongToolOutputStored,
    /// Two calls of one message have their outcomes swapped in the store,
    /// from the first commit holding both: each call shows the other's result.
    SwapToolOutcomes,
    /// A commit that writes messages is reported done but never reaches
    /// the store, nor does any later write of those messages: what the
    /// engine showed is not what it kept, and a reload shows it.
    SkipCommit,
    /// A model request carries a tool's output changed: the model answers
    /// from a result the tool never returned.
    WrongToolOutputAsked,
    /// A model request lacks its last user message: the model answers
    /// without the question.
    RequestMissingMessage,
    /// A model request carries assistant text the transcript never held
    /// (a discarded attempt's): the model continues from words nobody saw.
    RequestWithDiscardedText,
    /// A model request is sent twice: the provider is asked (and bills) twice.
    ModelCalledTwice,
    /// A model call the engine abandoned while it still streamed is not
    /// cancelled: the provider keeps streaming (and billing) a stream
    /// nobody reads.
    DropCancel,
    /// A server tool is started twice: its side effect happens twice.
    ServerToolTwice,
    /// A messenger post is cut to its first half: the user reads half an answer.
    PartialPost,
    /// A messenger post is made twice: the user reads it twice.
    DuplicatePost,
    /// A messenger post never reaches the chat surface, and the engine is
    /// told it was shown: the user reads nothing.
    DropPost,
    /// The host's recovery-exhausted hook is not called: the host never
    /// learns that recovery gave up.
    SkipExhaustedHook,
    /// A stream chunk that carries output is not sent to a client.
    DropFrame,
    /// A stream chunk that carries output is sent to a client twice.
    DuplicateFrame,
    /// Two consecutive, different stream chunks to a client swap places
    /// (nothing else went out between them): the client shows text out of
    /// order, or a part before it began.
    ReorderFrames,
    /// A take-back (`Reset`) is not sent: the client keeps a failed
    /// attempt's output on screen.
    DropReset,
    /// A whole transcript sent to a client (on connect, or as the engine
    /// restates it) lacks its last message: the client shows a
    /// conversation without it.
    StaleTranscript,
    /// A `Recovering(false)` to a client that shows a recovery under way
    /// is not sent: the indicator stays on after the recovery ended.
    RecoveringLeftOn,
    /// An `Error` frame is not sent: the client never learns the turn failed.
    DropErrorFrame,
    /// A transcript or take-back sent to a client shows a tool's output changed.
    WrongToolOutputShown,
    /// A `Done` frame says the opposite about continuing the answer before
    /// it: the client appends a new answer to the old one, or splits one.
    WrongContinuationFlag,
    /// A tool-state frame is not sent: the client is not told a tool
    /// waits for it (or moved on).
    DropToolFrame,
    /// A `chat()` caller's `on_error` arrives as `on_done`: a failure
    /// shown as a finished answer.
    ErrorAsDone,
    /// A `chat()` caller's terminal callback is not delivered: the caller
    /// waits, then sees the call end silently.
    DropTerminalCallback,
    /// A `chat()` caller's terminal callback is delivered twice.
    DuplicateTerminalCallback,
    /// A `chat()` caller's output event is not delivered: its text misses a piece.
    DropCallbackEvent,
    /// A model request shows a past tool call with empty arguments: the
    /// model reads a call that was not made.
    RequestToolInputEmptied,
    /// A model request shows no step boundaries: the model cannot tell
    /// its steps apart.
    RequestStepStartsDropped,
    /// A model request shows its last question twice: the model answers
    /// a conversation that never happened.
    RequestQuestionTwice,
    /// A model request shows a tool's result as still pending: the
    /// provider refuses it.
    RequestResultRemoved,
    /// A server tool runs with other input than the model gave it.
    ServerToolInputChanged,
    /// A server tool whose approval the client denied runs anyway.
    DeniedToolRuns,
    /// A tool the client was asked to answer is run by the server.
    ClientToolRunOnServer,
    /// The store keeps a tool's error with another text than its answer's.
    ErrorTextReplaced,
    /// The store keeps a tool's error as a success, its text as the output.
    ErrorStoredAsOutput,
    /// The store keeps a call's approval decision flipped.
    DecisionFlipped,
    /// The store keeps a user message cut short.
    UserTextCut,
    /// The store keeps a reply without its step boundaries.
    StepStartsNotStored,
    /// A failed turn's record is not stored: a later process does not
    /// know its user was told.
    FailureRecordDropped,
    /// A continuation owed is not stored: a later process does not know
    /// it is owed.
    IntentNotStored,
    /// A `Done` frame goes out as an `Error` frame: an answer told as a
    /// failure.
    DoneAsError,
    /// A `Done` frame goes out twice.
    DoneTwice,
    /// A finished tool call streamed to a client has empty arguments.
    ToolCallStreamedEmpty,
    /// An offer to resume names a request that is not streaming.
    WrongResumeOffer,
    /// A chat() caller's `on_done` arrives as `on_error`.
    CallbackDoneAsError,
    /// A finished tool call relayed to a chat() caller has empty arguments.
    CallbackToolCallEmptied,
    /// A chat() caller's take-back (`on_reset`) is not delivered: it keeps
    /// a failed attempt's text.
    DropCallbackReset,
    /// A messenger post of an answer goes out as the failure apology.
    AnswerPostedAsApology,
    /// A messenger post goes out longer than any surface takes.
    PostOverLimit,
    /// After the model ends a step empty (a zero-token `unknown` finish),
    /// clients are told the turn is done before any retry.
    EmptyFinishToldDone,
    /// The host is told recovery gave up while a recovery continues.
    ExhaustedAtContinue,
}

/// Every operator, in the order reports list them.
pub const ALL_OPERATORS: [Operator; 52] = [
    Operator::WrongToolOutputStored,
    Operator::SwapToolOutcomes,
    Operator::SkipCommit,
    Operator::WrongToolOutputAsked,
    Operator::RequestMissingMessage,
    Operator::RequestWithDiscardedText,
    Operator::ModelCalledTwice,
    Operator::DropCancel,
    Operator::ServerToolTwice,
    Operator::PartialPost,
    Operator::DuplicatePost,
    Operator::DropPost,
    Operator::SkipExhaustedHook,
    Operator::DropFrame,
    Operator::DuplicateFrame,
    Operator::ReorderFrames,
    Operator::DropReset,
    Operator::StaleTranscript,
    Operator::RecoveringLeftOn,
    Operator::DropErrorFrame,
    Operator::WrongToolOutputShown,
    Operator::WrongContinuationFlag,
    Operator::DropToolFrame,
    Operator::ErrorAsDone,
    Operator::DropTerminalCallback,
    Operator::DuplicateTerminalCallback,
    Operator::DropCallbackEvent,
    Operator::RequestToolInputEmptied,
    Operator::RequestStepStartsDropped,
    Operator::RequestQuestionTwice,
    Operator::RequestResultRemoved,
    Operator::ServerToolInputChanged,
    Operator::DeniedToolRuns,
    Operator::ClientToolRunOnServer,
    Operator::ErrorTextReplaced,
    Operator::ErrorStoredAsOutput,
    Operator::DecisionFlipped,
    Operator::UserTextCut,
    Operator::StepStartsNotStored,
    Operator::FailureRecordDropped,
    Operator::IntentNotStored,
    Operator::DoneAsError,
    Operator::DoneTwice,
    Operator::ToolCallStreamedEmpty,
    Operator::WrongResumeOffer,
    Operator::CallbackDoneAsError,
    Operator::CallbackToolCallEmptied,
    Operator::DropCallbackReset,
    Operator::AnswerPostedAsApology,
    Operator::PostOverLimit,
    Operator::EmptyFinishToldDone,
    Operator::ExhaustedAtContinue,
];

impl Operator {
    pub fn name(self) -> &'static str {
        match self {
            Self::WrongToolOutputStored => "wrong-tool-output-stored",
            Self::SwapToolOutcomes => "swap-tool-outcomes",
            Self::SkipCommit => "skip-commit",
            Self::WrongToolOutputAsked => "wrong-tool-output-asked",
            Self::RequestMissingMessage => "request-missing-message",
            Self::RequestWithDiscardedText => "request-with-discarded-text",
            Self::ModelCalledTwice => "model-called-twice",
            Self::DropCancel => "drop-cancel",
            Self::ServerToolTwice => "server-tool-twice",
            Self::PartialPost => "partial-post",
            Self::DuplicatePost => "duplicate-post",
            Self::DropPost => "drop-post",
            Self::SkipExhaustedHook => "skip-exhausted-hook",
            Self::DropFrame => "drop-frame",
            Self::DuplicateFrame => "duplicate-frame",
            Self::ReorderFrames => "reorder-frames",
            Self::DropReset => "drop-reset",
            Self::StaleTranscript => "stale-transcript",
            Self::RecoveringLeftOn => "recovering-left-on",
            Self::DropErrorFrame => "drop-error-frame",
            Self::WrongToolOutputShown => "wrong-tool-output-shown",
            Self::WrongContinuationFlag => "wrong-continuation-flag",
            Self::DropToolFrame => "drop-tool-frame",
            Self::ErrorAsDone => "error-as-done",
            Self::DropTerminalCallback => "drop-terminal-callback",
            Self::DuplicateTerminalCallback => "duplicate-terminal-callback",
            Self::DropCallbackEvent => "drop-callback-event",
            Self::RequestToolInputEmptied => "request-tool-input-emptied",
            Self::RequestStepStartsDropped => "request-step-starts-dropped",
            Self::RequestQuestionTwice => "request-question-twice",
            Self::RequestResultRemoved => "request-result-removed",
            Self::ServerToolInputChanged => "server-tool-input-changed",
            Self::DeniedToolRuns => "denied-tool-runs",
            Self::ClientToolRunOnServer => "client-tool-run-on-server",
            Self::ErrorTextReplaced => "error-text-replaced",
            Self::ErrorStoredAsOutput => "error-stored-as-output",
            Self::DecisionFlipped => "decision-flipped",
            Self::UserTextCut => "user-text-cut",
            Self::StepStartsNotStored => "step-starts-not-stored",
            Self::FailureRecordDropped => "failure-record-dropped",
            Self::IntentNotStored => "intent-not-stored",
            Self::DoneAsError => "done-as-error",
            Self::DoneTwice => "done-twice",
            Self::ToolCallStreamedEmpty => "tool-call-streamed-empty",
            Self::WrongResumeOffer => "wrong-resume-offer",
            Self::CallbackDoneAsError => "callback-done-as-error",
            Self::CallbackToolCallEmptied => "callback-tool-call-emptied",
            Self::DropCallbackReset => "drop-callback-reset",
            Self::AnswerPostedAsApology => "answer-posted-as-apology",
            Self::PostOverLimit => "post-over-limit",
            Self::EmptyFinishToldDone => "empty-finish-told-done",
            Self::ExhaustedAtContinue => "exhausted-at-continue",
        }
    }

    /// The wrong a consumer is handed, in one line (`--format json`, the docs).
    pub fn wrong(self) -> &'static str {
        match self {
            Self::WrongToolOutputStored => "the store keeps a tool's output changed",
            Self::SwapToolOutcomes => "two calls' outcomes swapped in the store",
            Self::SkipCommit => "a commit of messages reported done, never applied (nor later writes of them)",
            Self::WrongToolOutputAsked => "a model request carries a tool's output changed",
            Self::RequestMissingMessage => "a model request lacks its last user message",
            Self::RequestWithDiscardedText => "a model request carries assistant text never stored",
            Self::ModelCalledTwice => "a model request sent twice",
            Self::DropCancel => "an abandoned model call left streaming",
            Self::ServerToolTwice => "a server tool started twice",
            Self::PartialPost => "a messenger post cut to its first half",
            Self::DuplicatePost => "a messenger post made twice",
            Self::DropPost => "a messenger post lost, the engine told it was shown",
            Self::SkipExhaustedHook => "the recovery-exhausted hook not called",
            Self::DropFrame => "an output chunk not sent to a client",
            Self::DuplicateFrame => "an output chunk sent to a client twice",
            Self::ReorderFrames => "two consecutive stream chunks to a client swapped",
            Self::DropReset => "a take-back (Reset) not sent to a client",
            Self::StaleTranscript => "a transcript sent to a client lacks its last message",
            Self::RecoveringLeftOn => "Recovering(false) not sent: the indicator stays on",
            Self::DropErrorFrame => "an Error frame not sent to a client",
            Self::WrongToolOutputShown => "a client is shown a tool's output changed",
            Self::WrongContinuationFlag => "a Done frame's continuation flag flipped",
            Self::DropToolFrame => "a tool-state frame not sent to a client",
            Self::ErrorAsDone => "a chat() caller's on_error arrives as on_done",
            Self::DropTerminalCallback => "a chat() caller's terminal callback not delivered",
            Self::DuplicateTerminalCallback => "a chat() caller's terminal callback delivered twice",
            Self::DropCallbackEvent => "a chat() caller's output event not delivered",
            Self::RequestToolInputEmptied => "a model request shows a past call with empty arguments",
            Self::RequestStepStartsDropped => "a model request shows no step boundaries",
            Self::RequestQuestionTwice => "a model request shows its last question twice",
            Self::RequestResultRemoved => "a model request shows a tool's result as pending",
            Self::ServerToolInputChanged => "a server tool runs with other input than the model gave",
            Self::DeniedToolRuns => "a server tool the client denied runs anyway",
            Self::ClientToolRunOnServer => "a client tool is run by the server",
            Self::ErrorTextReplaced => "the store keeps a tool's error with another text",
            Self::ErrorStoredAsOutput => "the store keeps a tool's error as a success",
            Self::DecisionFlipped => "the store keeps an approval decision flipped",
            Self::UserTextCut => "the store keeps a user message cut short",
            Self::StepStartsNotStored => "the store keeps a reply without step boundaries",
            Self::FailureRecordDropped => "a failed turn's record not stored",
            Self::IntentNotStored => "an owed continuation not stored",
            Self::DoneAsError => "a Done frame sent as an Error frame",
            Self::DoneTwice => "a Done frame sent twice",
            Self::ToolCallStreamedEmpty => "a finished call streamed to a client with empty arguments",
            Self::WrongResumeOffer => "a resume offer names a request not streaming",
            Self::CallbackDoneAsError => "a chat() caller's on_done arrives as on_error",
            Self::CallbackToolCallEmptied => "a finished call relayed to a chat() caller with empty arguments",
            Self::DropCallbackReset => "a chat() caller's on_reset not delivered",
            Self::AnswerPostedAsApology => "a messenger answer posted as the failure apology",
            Self::PostOverLimit => "a messenger post longer than any surface takes",
            Self::EmptyFinishToldDone => "clients told done on an empty finish, before the retry",
            Self::ExhaustedAtContinue => "the host told recovery gave up while it continues",
        }
    }

    /// The property of the catalogue (`crate::properties`) the operator
    /// breaks.
    pub fn property(self) -> &'static str {
        match self {
            Self::WrongToolOutputStored
            | Self::SwapToolOutcomes
            | Self::ErrorTextReplaced
            | Self::ErrorStoredAsOutput
            | Self::DecisionFlipped => "store-keeps-outcomes-as-given",
            Self::SkipCommit => "store-loses-nothing",
            Self::WrongToolOutputAsked
            | Self::RequestMissingMessage
            | Self::RequestWithDiscardedText
            | Self::RequestToolInputEmptied
            | Self::RequestStepStartsDropped
            | Self::RequestQuestionTwice => "model-shown-the-store",
            Self::RequestResultRemoved => "model-shown-every-result",
            Self::ModelCalledTwice => "model-asked-once",
            Self::DropCancel => "turns-settle",
            Self::ServerToolTwice => "tool-runs-once",
            Self::ServerToolInputChanged | Self::DeniedToolRuns => "tool-runs-as-decided",
            Self::ClientToolRunOnServer => "client-tools-left-to-the-client",
            Self::PartialPost => "chat-posts-the-answer",
            Self::DuplicatePost | Self::DropPost => "chat-posted-once",
            Self::AnswerPostedAsApology => "chat-told-outcome-truly",
            Self::PostOverLimit => "chat-posts-fit",
            Self::SkipExhaustedHook => "host-told-exhaustion",
            Self::DropFrame | Self::DuplicateFrame | Self::ReorderFrames | Self::ToolCallStreamedEmpty => {
                "screen-streams-the-model"
            }
            Self::DropReset => "screen-takes-back-failed-attempts",
            Self::StaleTranscript | Self::WrongToolOutputShown => "screen-is-the-store",
            Self::RecoveringLeftOn => "screen-shows-recovery-truly",
            Self::DropErrorFrame => "screen-told-failure",
            Self::WrongContinuationFlag => "screen-told-continuation",
            Self::DropToolFrame => "screen-shows-waiting-tools",
            Self::DoneAsError | Self::DoneTwice => "screen-told-outcome-truly",
            Self::WrongResumeOffer => "screen-resume-handshake",
            Self::FailureRecordDropped => "failure-stands",
            Self::ErrorAsDone | Self::CallbackDoneAsError => "caller-told-outcome-truly",
            Self::DropTerminalCallback | Self::DuplicateTerminalCallback => "caller-contract",
            Self::DropCallbackEvent | Self::CallbackToolCallEmptied => "caller-relayed-the-model",
            Self::DropCallbackReset => "caller-ends-on-the-answer",
            Self::UserTextCut => "store-keeps-user-text",
            Self::StepStartsNotStored => "store-shape",
            Self::EmptyFinishToldDone => "store-no-empty-answer",
            Self::IntentNotStored => "restart-continues-owed-work",
            Self::ExhaustedAtContinue => "recovery-bounded",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        ALL_OPERATORS.into_iter().find(|operator| operator.name() == name)
    }
}

impl std::str::FromStr for Operator {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::parse(name).ok_or_else(|| {
            let names: Vec<&str> = ALL_OPERATORS.iter().map(|operator| operator.name()).collect();
            format!("unknown operator `{name}`; operators: {}", names.join(", "))
        })
    }
}

/// A tool output as no tool returned it: the text with a mark appended,
/// anything else wrapped.
pub fn altered(output: &Value) -> Value {
    match output {
        Value::String(text) => Value::String(format!("{text} [altered]")),
        other => serde_json::json!({ "altered": other }),
    }
}

/// The message of a write, for rewriting.
pub fn written_message(write: &mut turnsim_engine::durable::Write) -> Option<&mut Message> {
    use turnsim_engine::durable::Write;
    match write {
        Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => Some(message),
        _ => None,
    }
}

/// Tool parts that hold an output value.
pub fn tools_with_output(message: &Message) -> impl Iterator<Item = &ToolPart> {
    message.parts.iter().filter_map(|part| match part {
        Part::Tool(tool) if tool.output.is_some() => Some(tool),
        _ => None,
    })
}

/// Changes the output of call `call_id` in `message`; whether it held one.
pub fn alter_output(message: &mut Message, call_id: &str) -> bool {
    match message.parts.tool_mut(call_id) {
        Some(tool) if tool.output.is_some() => {
            tool.output = tool.output.as_ref().map(altered);
            true
        }
        _ => false,
    }
}

/// What a call's result is: its state, output and error.
pub fn outcome(tool: &ToolPart) -> (turnsim_engine::ToolState, Option<Value>, Option<String>) {
    (tool.state, tool.output.clone(), tool.error_text.clone())
}

/// The first two settled calls of `message` with different outcomes.
pub fn swappable_pair(message: &Message) -> Option<(String, String)> {
    let settled: Vec<&ToolPart> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Tool(tool) if tool.is_result_settled() => Some(tool),
            _ => None,
        })
        .collect();
    settled.iter().enumerate().find_map(|(index, first)| {
        let other = settled[index + 1..].iter().find(|other| outcome(other) != outcome(first))?;
        Some((first.call_id.clone(), other.call_id.clone()))
    })
}

/// Swaps the outcomes of calls `first` and `second` in `message`, when it holds both.
pub fn swap_outcomes(message: &mut Message, (first, second): &(String, String)) {
    let (Some(one), Some(other)) = (message.parts.tool(first), message.parts.tool(second)) else { return };
    let (one, other) = (outcome(one), outcome(other));
    set_outcome(message, first, other);
    set_outcome(message, second, one);
}

fn set_outcome(
    message: &mut Message,
    call_id: &str,
    (state, output, error_text): (turnsim_engine::ToolState, Option<Value>, Option<String>),
) {
    if let Some(tool) = message.parts.tool_mut(call_id) {
        (tool.state, tool.output, tool.error_text) = (state, output, error_text);
    }
}

/// The assistant text a discarded attempt left, as the adversary shows it.
pub fn discarded_text() -> Part {
    Part::Text { id: "discarded".to_string(), text: "(a discarded attempt's text)".to_string(), state: TextState::Done }
}

/// Where a request's last user message is.
pub fn last_user_message(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|message| message.role == Role::User)
}

/// Where a request's last assistant message is.
pub fn last_assistant_message(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|message| message.role == Role::Assistant)
}

/// A chunk frame that carries output (a delta or a finished tool call).
pub fn is_output_chunk(frame: &Frame) -> bool {
    matches!(frame, Frame::Chunk { chunk, .. } if chunk.is_output())
}

/// The last call in `messages` that holds an output: (message index, call id).
pub fn last_output(messages: &[Message]) -> Option<(usize, String)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| tools_with_output(message).last().map(|tool| (index, tool.call_id.clone())))
}

/// Operators whose wrong only a later process reads (a record kept from
/// the store): a site counts only where an eviction follows it.
pub const READ_LATER: [Operator; 2] = [Operator::FailureRecordDropped, Operator::IntentNotStored];

/// The store rewrites that apply from a message's or call's first sighting on.
pub const STORE_REWRITES: [Operator; 5] = [
    Operator::ErrorTextReplaced,
    Operator::ErrorStoredAsOutput,
    Operator::DecisionFlipped,
    Operator::UserTextCut,
    Operator::StepStartsNotStored,
];

/// The ids (of calls, or of the message) in a stored `message` that
/// `operator` could rewrite.
pub fn stored_sites(operator: Operator, message: &Message) -> Vec<String> {
    let calls = |wanted: fn(&ToolPart) -> bool| {
        message.tools().filter(|tool| wanted(tool)).map(|tool| tool.call_id.clone()).collect()
    };
    match operator {
        Operator::ErrorTextReplaced => calls(|tool| tool.state == ToolState::OutputError && tool.error_text.is_some()),
        Operator::ErrorStoredAsOutput => calls(|tool| tool.state == ToolState::OutputError),
        Operator::DecisionFlipped => {
            calls(|tool| tool.approval.as_ref().is_some_and(|approval| approval.approved.is_some()))
        }
        Operator::UserTextCut if message.role == Role::User && message.text().chars().count() >= 2 => {
            vec![message.id.clone()]
        }
        Operator::StepStartsNotStored
            if message.role == Role::Assistant && message.parts.iter().any(|part| matches!(part, Part::StepStart)) =>
        {
            vec![message.id.clone()]
        }
        _ => Vec::new(),
    }
}

/// Rewrites `message` as `operator` does to the calls or message in `ids`.
pub fn rewrite_stored(operator: Operator, message: &mut Message, ids: &std::collections::BTreeSet<String>) {
    if matches!(operator, Operator::UserTextCut | Operator::StepStartsNotStored) {
        if !ids.contains(&message.id) {
            return;
        }
        if operator == Operator::StepStartsNotStored {
            message.parts.retain(|part| !matches!(part, Part::StepStart));
            return;
        }
        if let Some(Part::Text { text, .. }) = message.parts.iter_mut().find(|part| matches!(part, Part::Text { .. })) {
            let half = text.chars().count() / 2;
            *text = text.chars().take(half.max(1)).collect();
        }
        return;
    }
    for part in message.parts.iter_mut() {
        let Part::Tool(tool) = part else { continue };
        if !ids.contains(&tool.call_id) {
            continue;
        }
        match operator {
            Operator::ErrorTextReplaced if tool.state == ToolState::OutputError => {
                let generic = if tool.error_text.as_deref() == Some(GENERIC_ERROR) { "Error." } else { GENERIC_ERROR };
                tool.error_text = Some(generic.to_string());
            }
            Operator::ErrorStoredAsOutput if tool.state == ToolState::OutputError => {
                tool.state = ToolState::OutputAvailable;
                tool.output = Some(Value::String(tool.error_text.take().unwrap_or_else(|| "error".to_string())));
            }
            Operator::DecisionFlipped => {
                if let Some(approval) = tool.approval.as_mut() {
                    approval.approved = approval.approved.map(|approved| !approved);
                }
            }
            _ => {}
        }
    }
}

/// What `error-text-replaced` puts in place of a tool's error text.
const GENERIC_ERROR: &str = "Tool execution failed.";

/// The model-request rewrites of the catalogue's model properties.
pub const REQUEST_REWRITES: [Operator; 4] = [
    Operator::RequestToolInputEmptied,
    Operator::RequestStepStartsDropped,
    Operator::RequestQuestionTwice,
    Operator::RequestResultRemoved,
];

/// Whether `operator` could rewrite a request showing `messages`.
pub fn request_site(operator: Operator, messages: &[Message]) -> bool {
    match operator {
        Operator::RequestToolInputEmptied => {
            last_tool(messages, |tool| tool.input.as_ref().is_some_and(|input| *input != serde_json::json!({})))
                .is_some()
        }
        // A boundary before nothing shows the model nothing: dropping it is no wrong.
        Operator::RequestStepStartsDropped => messages.iter().any(|message| {
            crate::history::has_content(message) && message.parts.iter().any(|part| matches!(part, Part::StepStart))
        }),
        Operator::RequestQuestionTwice => last_user_message(messages).is_some(),
        Operator::RequestResultRemoved => last_tool(messages, |tool| tool.state.is_output()).is_some(),
        _ => false,
    }
}

/// Rewrites a request's `messages` as `operator` does.
pub fn rewrite_request(operator: Operator, messages: &mut Vec<Message>) {
    match operator {
        Operator::RequestToolInputEmptied => {
            let found =
                last_tool(messages, |tool| tool.input.as_ref().is_some_and(|input| *input != serde_json::json!({})));
            if let Some((index, call_id)) = found {
                if let Some(tool) = messages[index].parts.tool_mut(&call_id) {
                    tool.input = Some(serde_json::json!({}));
                }
            }
        }
        Operator::RequestStepStartsDropped => {
            for message in messages.iter_mut() {
                message.parts.retain(|part| !matches!(part, Part::StepStart));
            }
        }
        Operator::RequestQuestionTwice => {
            if let Some(index) = last_user_message(messages) {
                let again = messages[index].clone();
                messages.insert(index + 1, again);
            }
        }
        Operator::RequestResultRemoved => {
            if let Some((index, call_id)) = last_tool(messages, |tool| tool.state.is_output()) {
                if let Some(tool) = messages[index].parts.tool_mut(&call_id) {
                    (tool.state, tool.output, tool.error_text) = (ToolState::InputAvailable, None, None);
                }
            }
        }
        _ => {}
    }
}

/// The last tool call in `messages` that `wanted` picks: (message index, call id).
fn last_tool(messages: &[Message], wanted: impl Fn(&ToolPart) -> bool) -> Option<(usize, String)> {
    messages.iter().enumerate().rev().find_map(|(index, message)| {
        message.tools().filter(|tool| wanted(tool)).last().map(|tool| (index, tool.call_id.clone()))
    })
}

/// Input other than `input`: empty, or, when it already is, marked.
pub fn other_input(input: &Value) -> Value {
    if *input == serde_json::json!({}) {
        serde_json::json!({ "altered": true })
    } else {
        serde_json::json!({})
    }
}

/// Characters `post-over-limit` adds to a post: past any surface's limit.
pub const OVER_ANY_LIMIT_CHARS: usize = 2_001;

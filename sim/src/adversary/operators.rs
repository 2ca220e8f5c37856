//! The mutation operators: each one a wrong a consumer of the engine could
//! be handed, written as a rewrite of one kind of effect on its way out
//! (a commit, a model request, a frame, a callback, a post, a server-tool
//! start, a hook call). An operator applies at one site per run; the sites
//! it could apply at are its eligible effects, counted in run order.

use serde_json::Value;
use turnsim_engine::transcript::{Message, Part, Role, TextState, ToolPart};
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
}

/// Every operator, in the order reports list them.
pub const ALL_OPERATORS: [Operator; 27] = [
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_is_named_once_and_parses_back() {
        let mut names: Vec<&str> = ALL_OPERATORS.iter().map(|operator| operator.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_OPERATORS.len(), "operator names are unique");
        for operator in ALL_OPERATORS {
            assert_eq!(Operator::parse(operator.name()), Some(operator));
        }
        assert!("no-such-operator".parse::<Operator>().is_err());
    }

    #[test]
    fn an_altered_output_differs_from_the_original() {
        for output in [Value::from("done"), Value::from(3), serde_json::json!({"a": 1}), Value::Null] {
            assert_ne!(altered(&output), output);
        }
    }
}

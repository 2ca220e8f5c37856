//! What every consumer of an engine is owed: the oracle's catalogue,
//! written from the consumers' side (`docs/properties.md` says each in
//! full, with the scenarios that exercise it). Each property names the
//! invariant that holds it; the adversary attacks each with operators that
//! break exactly it (`Operator::property`) and reports per property.

use serde::Serialize;

/// Who is owed something by a turn engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consumer {
    /// A person at a screen, over a client connection.
    User,
    /// The model, through the requests it is sent.
    Model,
    /// What a server tool acts on.
    World,
    /// A `chat()` caller, through its callback.
    Caller,
    /// A messenger's chat, through posts.
    Chat,
    /// The store, read as the record of what happened.
    Store,
    /// A later process, and the host that runs it.
    LaterProcess,
}

impl Consumer {
    pub fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Model => "model",
            Self::World => "world",
            Self::Caller => "caller",
            Self::Chat => "chat",
            Self::Store => "store",
            Self::LaterProcess => "later process",
        }
    }
}

/// One thing a consumer is owed.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Property {
    pub id: &'static str,
    pub consumer: Consumer,
    /// What is owed, in one sentence.
    pub owed: &'static str,
    /// The invariant that holds it.
    pub invariant: &'static str,
}

const fn owed(id: &'static str, consumer: Consumer, invariant: &'static str, owed: &'static str) -> Property {
    Property { id, consumer, owed, invariant }
}

use Consumer::{Caller, Chat, LaterProcess, Model, Store, User, World};

/// Every property, by consumer.
pub const PROPERTIES: [Property; 33] = [
    owed("screen-is-the-store", User, "client-view", "what a screen shows, rebuilt from its frames, is the stored transcript at every rest, and never less than the store while time passes"),
    owed("screen-streams-the-model", User, "client-view", "a screen is streamed what the model streamed for the request: every piece, once, in order, each call with its name and input"),
    owed("screen-takes-back-failed-attempts", User, "client-view", "what a failed attempt streamed is taken back from the screen"),
    owed("screen-shows-waiting-tools", User, "client-view", "a tool waiting for the client is shown waiting, and shown moved on"),
    owed("screen-shows-recovery-truly", User, "client-view", "a screen shows a recovery under way exactly while one is"),
    owed("screen-told-failure", User, "client-view", "a turn that failed is told to every client connected then"),
    owed("screen-told-outcome-truly", User, "outcome-told-true", "a turn that answered is never told as failed, one that failed never as done, and each request's end is told once"),
    owed("screen-told-continuation", User, "client-view", "a done frame says whether the stream continued the answer before it"),
    owed("screen-resume-handshake", User, "resume-handshake", "an offer to resume names the stream there is, and nothing is sent before the client acks it"),
    owed("failure-stands", User, "failure-stands", "a failure told stands: the message is not answered again unless something asks"),
    owed("model-shown-the-store", Model, "request-matches-store", "a request is the stored transcript up to the reply it asks for, part for part: every message once, in order, its steps, texts, calls with their inputs and results"),
    owed("model-shown-every-result", Model, "tool-results-present", "a request never holds a tool call without its result"),
    owed("model-asked-once", Model, "single-continuation", "the model is asked once per batch, never while a stream is open, a sibling is unanswered or the coalesce window runs, and always once the batch completes"),
    owed("turns-settle", Model, "converges", "every turn ends, and nothing it started (a model call, a stream) is left running"),
    owed("tool-runs-as-decided", World, "tool-runs-as-decided", "a server tool runs only on a call the model made, with its exact input, and only after the user approved it when it needs approval"),
    owed("tool-runs-once", World, "no-lost-work", "a server tool's run is an effect: it runs once (again only after a crash cut it short)"),
    owed("client-tools-left-to-the-client", World, "parked-tool-kept", "a client or human tool is never run by the server, and never settled behind the client's back"),
    owed("caller-contract", Caller, "callback-contract", "a chat() call gets on_start, events, then exactly one terminal callback, or a transport break"),
    owed("caller-relayed-the-model", Caller, "caller-view", "a caller is relayed what the model streamed for its request: every piece, once, in order, each call with its name and input"),
    owed("caller-ends-on-the-answer", Caller, "caller-view", "a caller's text at on_done, after every take-back, is the stored answer; when the model is asked again, it holds only what the engine kept"),
    owed("caller-told-outcome-truly", Caller, "outcome-told-true", "a caller is told done only of a turn that answered, and failed only of one that failed"),
    owed("chat-posted-once", Chat, "messenger-once", "each delivery is answered once: no post lost, none repeated"),
    owed("chat-posts-the-answer", Chat, "messenger-view", "a delivery's posts are its stored answer, never a discarded attempt's text"),
    owed("chat-told-outcome-truly", Chat, "messenger-once", "a cut-off or failed reply posts the apology alone, and an answered one never the apology"),
    owed("chat-posts-fit", Chat, "messenger-view", "no post of an answer is longer than the surface takes"),
    owed("store-keeps-user-text", Store, "user-text-kept", "every stored user message is exactly what someone sent, stored once"),
    owed("store-keeps-outcomes-as-given", Store, "tool-outcomes-as-given", "every result shown or stored is one an answer gave: its output, its error text, the client's decision"),
    owed("store-shape", Store, "transcript-shape", "each kept step is stored once with its boundary; no retried attempt's parts, no orphan step, no duplicated call"),
    owed("store-no-empty-answer", Store, "no-empty-answer", "a truncated, empty finish is never kept or told as the answer"),
    owed("store-loses-nothing", Store, "no-lost-work", "nothing acknowledged is lost: a message or result once shown stays, as shown"),
    owed("restart-continues-owed-work", LaterProcess, "single-continuation", "a continuation owed when the process died is made by the next one"),
    owed("recovery-bounded", LaterProcess, "mid-tool-input-recovers", "a stream cut mid tool input recovers without spending the recovery budget"),
    owed("host-told-exhaustion", LaterProcess, "callback-contract", "the host is told once when recovery gives up, before clients are told"),
];

/// The property `id` names.
pub fn property(id: &str) -> Option<&'static Property> {
    PROPERTIES.iter().find(|property| property.id == id)
}

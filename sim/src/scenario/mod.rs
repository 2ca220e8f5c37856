//! The YAML scenario format: one file, one behaviour or race.
//!
//! Every struct rejects unknown keys, and cross-field rules are checked while
//! parsing (through `try_from`), so every error carries its file, line and
//! column. See `scenarios/README.md` for the reference with examples.

mod error;
mod expect_rules;
mod expectations;
pub mod limits;
mod load;
mod model_script;
mod prescan;
mod range;
mod stored;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnsim_engine::{EngineConfig, RecoveryConfig, ServerToolStart, ToolKind};

use crate::capability::Capability;

pub use error::ScenarioError;
pub use expectations::{
    ConnectionExpectation, Count, EventRef, HookCounts, Presence, Snapshot, StoreExpectation, Timing, ToolExpectation,
    ToolFields,
};
pub(crate) use load::apply_script_fault;
pub use load::{
    default_reply, error_at, load_paths, load_scenario, locator_of, parse_bytes, parse_scenario, ScenarioFile,
    MAX_DEFAULT_CALLS_FAULTED,
};
pub use model_script::{
    compile, Expansion, Finalize, FinishStep, FixtureError, FixtureSteps, Op, ScriptError, Step, ToolStep,
};
pub use prescan::Locator;
pub use range::RangeMs;
pub use stored::{
    durable_state, Stored, StoredError, StoredInFlight, StoredIncident, StoredMessage, StoredPart, StoredRecords,
    StoredTool, StoredTurnKind,
};

/// The JSON Schema of the scenario format (`turnsim schema`).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_string_pretty(&schema).expect("schema serialises")
}

/// A type parsed through `try_from` documents the shape it is parsed from.
macro_rules! schema_as {
    ($type:ty, $raw:ty) => {
        impl JsonSchema for $type {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                <$raw as JsonSchema>::schema_name()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                <$raw as JsonSchema>::json_schema(generator)
            }
        }
    };
}
pub(crate) use schema_as;

schema_as!(AnswerSpec, RawAnswer);
schema_as!(Action, RawAction);
schema_as!(EvictFault, RawEvictFault);

/// Sim time a run may take before it counts as not converging.
pub const DEFAULT_HORIZON_MS: u64 = 30 * 60 * 1_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Seeds `turnsim run` sweeps when `--seeds` is not given.
    #[serde(default = "default_seeds")]
    pub seeds: u64,
    /// The sweep's first seed when `--seed-start` is not given.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seed_start: u64,
    #[serde(default = "default_horizon_ms")]
    pub horizon_ms: u64,
    /// Once the last scripted action or fault is done, the world must settle
    /// within this much sim time (the liveness phase).
    #[serde(default = "default_converge_within_ms")]
    pub converge_within_ms: u64,
    /// Trace events one run may record (a run past it fails `converges`);
    /// at most [`limits::MAX_EVENTS`].
    #[serde(default = "default_max_events", skip_serializing_if = "is_default_max_events")]
    pub max_events: u64,
    /// Let the seed push the engine through its BUGGIFY fault points.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub buggify: bool,
    /// The capabilities an engine must declare for this scenario to apply
    /// to it (`docs/protocol.md`); over one that lacks any, the scenario is
    /// not run and is reported as not applicable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<Capability>,
    #[serde(default)]
    pub engine: EngineSpec,
    /// What the store holds when the engine first boots: a transcript (ids
    /// m1, m2, ...), or `{ messages, in_flight, incidents }`.
    #[serde(default, skip_serializing_if = "Stored::is_empty", with = "serde_yaml::with::singleton_map_recursive")]
    #[schemars(with = "Stored")]
    pub stored: Stored,
    /// One entry per model call, in call order; calls past the end get a
    /// short default text reply.
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    #[schemars(with = "Vec<Vec<Step>>")]
    pub model: Vec<Vec<Step>>,
    /// How the mock provider answers what a script does not say.
    #[serde(default, skip_serializing_if = "ProviderSpec::is_default")]
    pub provider: ProviderSpec,
    #[serde(default)]
    pub client: ClientSpec,
    /// The `chat()` caller: faults on its link to the engine.
    #[serde(default, skip_serializing_if = "CallerSpec::is_clean")]
    pub caller: CallerSpec,
    #[serde(default)]
    pub actions: Vec<Action>,
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    #[schemars(with = "Vec<Fault>")]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub expect: Expect,
}

/// The mock provider's behaviour beyond the scripts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderSpec {
    /// How it answers a request whose last message ends in a tool call
    /// whose input never finished streaming.
    #[serde(default)]
    pub dangling_tool_call: DanglingToolCall,
}

impl ProviderSpec {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A provider's answer to a request that ends in a half-streamed tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DanglingToolCall {
    /// Nothing: an empty `unknown` finish with 0 output tokens (what the
    /// engines this harness was built against saw).
    #[default]
    EmptyFinish,
    /// It refuses the request: HTTP 400, which no engine retries.
    Reject,
    /// It answers as it would any request: the call plays its script.
    Script,
}

pub(crate) fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn default_max_events() -> u64 {
    limits::DEFAULT_MAX_EVENTS
}

fn is_default_max_events(value: &u64) -> bool {
    *value == limits::DEFAULT_MAX_EVENTS
}

fn default_seeds() -> u64 {
    64
}

/// Sim time the world has to settle after faults stop.
pub const DEFAULT_CONVERGE_WITHIN_MS: u64 = 15 * 60 * 1_000;

fn default_converge_within_ms() -> u64 {
    DEFAULT_CONVERGE_WITHIN_MS
}

fn default_horizon_ms() -> u64 {
    DEFAULT_HORIZON_MS
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    #[serde(default)]
    pub stall_timeout_ms: u64,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesce_ms: Option<u64>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Backoff before a step's first model-call retry (429/5xx, truncated
    /// finish); it doubles per retry, at most 30 s.
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_initial_delay_ms: Option<u64>,
    #[serde(default)]
    pub recovery: RecoverySpec,
    #[serde(default)]
    pub tools: BTreeMap<String, ToolSpec>,
    /// When server tools run: `after_step` (the default: once the step's
    /// stream has finished with `stop` or `tool-calls`, as the AI SDK 7's
    /// `streamText` runs them) or `at_tool_call` (as each call arrives,
    /// while the stream goes on).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_tools: Option<ServerToolStart>,
    /// How a messenger delivery's reply is posted.
    #[serde(default)]
    #[serde(skip_serializing_if = "MessengerSpec::is_default")]
    pub messenger: MessengerSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessengerSpec {
    /// Longest single post (default 2 000 characters); a longer reply is
    /// split after whitespace where possible.
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_limit_chars: Option<PostLimit>,
}

/// Characters per messenger post: at least one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct PostLimit(u64);

impl JsonSchema for PostLimit {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PostLimit".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Characters per messenger post: at least one.",
            "type": "integer",
            "minimum": 1
        })
    }
}

impl TryFrom<u64> for PostLimit {
    type Error = String;

    fn try_from(chars: u64) -> Result<Self, Self::Error> {
        if chars == 0 {
            return Err("a post holds at least 1 character (`post_limit_chars: 1` or more)".into());
        }
        Ok(Self(chars))
    }
}

impl From<PostLimit> for u64 {
    fn from(limit: PostLimit) -> u64 {
        limit.0
    }
}

impl PostLimit {
    fn chars(self) -> std::num::NonZeroUsize {
        let chars = usize::try_from(self.0).unwrap_or(usize::MAX);
        std::num::NonZeroUsize::new(chars).expect("checked at load")
    }
}

impl MessengerSpec {
    fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverySpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_retry_delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_progress_window_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alarm_debounce_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alarm_delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_message: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub kind: ToolKind,
    /// Server tools: how long one execution takes.
    #[serde(default, skip_serializing_if = "RangeMs::is_zero")]
    pub duration_ms: RangeMs,
    /// Server tools: the result (default `"ok"`).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Server tools: fail with this error instead.
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A tool defined at run time (an MCP tool, the AI SDK's `dynamicTool`):
    /// its calls are `dynamic-tool` parts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Open a connection at time 0.
    #[serde(default = "yes")]
    pub connect: bool,
    /// Delay before reconnecting after the connection drops.
    #[serde(default = "default_reconnect")]
    pub reconnect_after_ms: RangeMs,
    /// How the client answers each client tool, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, AnswerSpec>,
    /// Faults on the client's link to the engine.
    #[serde(default, skip_serializing_if = "LinkSpec::is_clean")]
    pub link: LinkSpec,
    /// Clients connected at once (each its own connection, answering the
    /// same way); actions address one with `client: N`, counting from 1.
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub connections: u32,
    /// On every connect, ask to resume the stream in progress, and ack the
    /// stream the engine offers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
}

fn one_client() -> u32 {
    1
}

fn is_one_client(connections: &u32) -> bool {
    *connections == 1
}

/// The `chat()` caller's side of the world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallerSpec {
    /// Faults on the caller's link: each `chat()` call and each callback
    /// call waits `delay_ms`; callback calls stay in order (one RPC
    /// session), a `chat()` call may overtake an earlier one with
    /// `reorder`; `duplicate` is the chance a `chat()` call is delivered
    /// twice (the same call, the same callback).
    #[serde(default, skip_serializing_if = "LinkSpec::is_clean")]
    pub link: LinkSpec,
}

impl CallerSpec {
    pub fn is_clean(&self) -> bool {
        self.link.is_clean()
    }
}

/// A link's faults: each message waits `delay_ms` (drawn per message);
/// what the engine sends stays in order, what is sent to it may overtake
/// earlier sends with `reorder`; `duplicate` is the chance a message sent
/// to the engine (a client's result or approval, a `chat()` call) is
/// delivered twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    #[serde(default)]
    pub delay_ms: RangeMs,
    #[serde(default)]
    pub reorder: bool,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub duplicate: f64,
}

impl LinkSpec {
    pub fn is_clean(&self) -> bool {
        *self == Self::default()
    }
}

fn yes() -> bool {
    true
}

fn default_reconnect() -> RangeMs {
    RangeMs { min: 50, max: 200 }
}

impl Default for ClientSpec {
    fn default() -> Self {
        Self {
            connect: true,
            reconnect_after_ms: default_reconnect(),
            tools: BTreeMap::new(),
            link: LinkSpec::default(),
            connections: 1,
            resume: false,
        }
    }
}

/// How the simulated client answers one tool. Latency counts from the moment
/// the client sees the tool become `input-available` (or await approval).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawAnswer", into = "RawAnswer")]
pub struct AnswerSpec {
    pub answer_after_ms: RangeMs,
    pub reply: Reply,
    pub auto_continue: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Output(Value),
    Error(String),
    Approve(bool),
    Never,
}

#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    #[serde(default)]
    answer_after_ms: RangeMs,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approve: Option<bool>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    never_answers: bool,
    auto_continue: Option<bool>,
}

impl From<AnswerSpec> for RawAnswer {
    fn from(spec: AnswerSpec) -> Self {
        let mut raw = Self {
            answer_after_ms: spec.answer_after_ms,
            output: None,
            error: None,
            approve: None,
            never_answers: false,
            auto_continue: Some(spec.auto_continue),
        };
        match spec.reply {
            Reply::Output(output) => raw.output = Some(output),
            Reply::Error(error) => raw.error = Some(error),
            Reply::Approve(approved) => raw.approve = Some(approved),
            Reply::Never => raw.never_answers = true,
        }
        raw
    }
}

impl TryFrom<RawAnswer> for AnswerSpec {
    type Error = String;

    fn try_from(raw: RawAnswer) -> Result<Self, String> {
        let chosen = [raw.output.is_some(), raw.error.is_some(), raw.approve.is_some(), raw.never_answers];
        if chosen.iter().filter(|set| **set).count() > 1 {
            return Err("give only one of `output`, `error`, `approve`, `never_answers`".into());
        }
        let reply = match (raw.output, raw.error, raw.approve) {
            (Some(output), _, _) => Reply::Output(output),
            (_, Some(error), _) => Reply::Error(error),
            (_, _, Some(approved)) => Reply::Approve(approved),
            _ if raw.never_answers => Reply::Never,
            _ => Reply::Output(Value::String("ok".into())),
        };
        // Errored results carry auto_continue: false unless told otherwise.
        let auto_continue = raw.auto_continue.unwrap_or(!matches!(reply, Reply::Error(_)));
        Ok(Self { answer_after_ms: raw.answer_after_ms, reply, auto_continue })
    }
}

/// Something the world does, at a sim time or when a trigger matches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawAction", into = "RawAction")]
pub struct Action {
    pub when: When,
    pub kind: ActionKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum When {
    AtMs(RangeMs),
    Trigger(Trigger),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    UserMessage(UserMessage),
    Deliver(Delivery),
    Evict(Evict),
    Disconnect(Disconnect),
    ToolResult(ToolResultAction),
    Approval(ApprovalAction),
}

/// A tool result the client sends for any call id, beside its automatic
/// answers: late, twice, for an unknown id, for a call already answered.
/// Exactly one of `output` or `error`; `error: ~` is an error with no text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResultAction {
    pub id: String,
    /// Which client sends it (from 1).
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub client: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub error: Option<Option<String>>,
    #[serde(default = "yes")]
    pub auto_continue: bool,
}

/// An approval response the client sends for any call id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAction {
    pub id: String,
    /// Which client sends it (from 1).
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub client: u32,
    pub approved: bool,
    #[serde(default = "yes")]
    pub auto_continue: bool,
}

/// A field that is there, even as `~`: `Some(None)`; absent: `None` (by `default`).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserMessage {
    pub text: String,
    #[serde(default)]
    pub via: Via,
    /// Over a connection: which client sends it (from 1).
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub client: u32,
    /// This turn's stall watchdog timeout, overriding the engine's (0 = off).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_timeout_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// Sent by a client over its connection (through its link, once the
    /// connection is open); the reply is broadcast.
    #[default]
    Connection,
    /// The `chat()` RPC with a stream callback.
    Chat,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    pub id: String,
    pub text: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evict {
    #[serde(default)]
    pub restart_after_ms: RangeMs,
    /// Only the process's memory goes, as when a Durable Object hibernates:
    /// open client connections stay open (no disconnect, no reconnect) and
    /// the restarted process is handed them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_only: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Disconnect {
    #[serde(default = "default_reconnect")]
    pub reconnect_after_ms: RangeMs,
    /// `false`: the client never comes back.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub reconnect: bool,
    /// Which client drops (from 1).
    #[serde(default = "one_client", skip_serializing_if = "is_one_client")]
    pub client: u32,
}

fn is_true(value: &bool) -> bool {
    *value
}

/// What the world watches for: always something that crossed the engine's
/// boundary, so an engine that says nothing of itself is faulted at the
/// same moments as one that does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// A tool call id; with `state`, fires at the commit that stores the
    /// call in that state (when it was not stored so before).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Fires at the commit that first stores a record of this kind: a user
    /// message, an assistant reply with something in it (its first flush),
    /// a recovery alarm, a recovery incident, or a turn's in-flight record
    /// (the turn's start).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredRecord>,
    /// Fires at the commit that takes a held record of this kind away: a
    /// recovery alarm, a recovery incident (closed), or the in-flight record
    /// (the turn's end).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<RemovedRecord>,
    /// A boundary event, `lane.event` (`model.call`, `store.commit`,
    /// `caller.on_done`, `client.frame`, ...), or the world's own
    /// (`world.restart`).
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Count matches only after the n-th occurrence of this event.
    #[serde(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<EventRef>,
    /// Fire on the n-th match (default 1).
    #[serde(default = "first")]
    pub nth: u32,
    /// Wait this long after the match.
    #[serde(default)]
    pub delay_ms: RangeMs,
}

/// A kind of record a commit can newly hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StoredRecord {
    UserMessage,
    Reply,
    Alarm,
    Incident,
    InFlight,
}

/// A kind of held record a commit can take away (`RemoveAlarm`,
/// `RemoveIncident`, `InFlight: null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RemovedRecord {
    Alarm,
    Incident,
    InFlight,
}

fn first() -> u32 {
    1
}

#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAction {
    #[serde(skip_serializing_if = "Option::is_none")]
    at_ms: Option<RangeMs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<Trigger>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_message: Option<UserMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deliver: Option<Delivery>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evict: Option<Evict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disconnect: Option<Disconnect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result: Option<ToolResultAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalAction>,
}

impl From<Action> for RawAction {
    fn from(action: Action) -> Self {
        let (at_ms, when) = when_fields(action.when);
        let mut raw = Self {
            at_ms,
            when,
            user_message: None,
            deliver: None,
            evict: None,
            disconnect: None,
            tool_result: None,
            approval: None,
        };
        match action.kind {
            ActionKind::UserMessage(message) => raw.user_message = Some(message),
            ActionKind::Deliver(delivery) => raw.deliver = Some(delivery),
            ActionKind::Evict(evict) => raw.evict = Some(evict),
            ActionKind::Disconnect(disconnect) => raw.disconnect = Some(disconnect),
            ActionKind::ToolResult(result) => raw.tool_result = Some(result),
            ActionKind::Approval(approval) => raw.approval = Some(approval),
        }
        raw
    }
}

fn when_fields(when: When) -> (Option<RangeMs>, Option<Trigger>) {
    match when {
        When::AtMs(at) => (Some(at), None),
        When::Trigger(trigger) => (None, Some(trigger)),
    }
}

impl TryFrom<RawAction> for Action {
    type Error = String;

    fn try_from(raw: RawAction) -> Result<Self, String> {
        let when = match (raw.at_ms, raw.when) {
            (Some(_), Some(_)) => return Err("give either `at_ms` or `when`, not both".into()),
            (Some(at), None) => When::AtMs(at),
            (None, Some(trigger)) => When::Trigger(validate_trigger(trigger)?),
            (None, None) => When::AtMs(RangeMs::ZERO),
        };
        let kinds = [
            raw.user_message.map(ActionKind::UserMessage),
            raw.deliver.map(ActionKind::Deliver),
            raw.evict.map(ActionKind::Evict),
            raw.disconnect.map(ActionKind::Disconnect),
            raw.tool_result.map(ActionKind::ToolResult),
            raw.approval.map(ActionKind::Approval),
        ];
        if let Some(ActionKind::ToolResult(result)) = kinds.iter().flatten().next() {
            if result.output.is_some() == result.error.is_some() {
                return Err("a tool_result gives exactly one of `output` or `error` (`error: ~` for no text)".into());
            }
        }
        let mut kinds: Vec<ActionKind> = kinds.into_iter().flatten().collect();
        match kinds.len() {
            1 => Ok(Self { when, kind: kinds.remove(0) }),
            0 => Err(
                "an action needs one of `user_message`, `deliver`, `evict`, `disconnect`, `tool_result`, `approval`"
                    .into(),
            ),
            _ => Err("an action does one thing: give only one of `user_message`, `deliver`, `evict`, `disconnect`, \
                     `tool_result`, `approval`"
                .into()),
        }
    }
}

fn validate_trigger(trigger: Trigger) -> Result<Trigger, String> {
    let states = "input-streaming, input-available, approval-requested, approval-responded, output-available, \
                  output-error, output-denied";
    let write = match (&trigger.stored, &trigger.removed) {
        (Some(_), Some(_)) => {
            return Err("a trigger names one write: give `stored` or `removed`, not both".into());
        }
        (stored, removed) => stored.is_some() || removed.is_some(),
    };
    match (&trigger.tool, &trigger.state, write, &trigger.event) {
        (Some(_), Some(state), false, None) if turnsim_engine::ToolState::parse(state).is_some() => Ok(trigger),
        (Some(_), Some(state), false, None) => Err(format!("`{state}` is not a tool state ({states})")),
        (None, None, true, None) | (None, None, false, Some(_)) => Ok(trigger),
        _ => Err("a trigger is one of `tool` + `state`, `stored`, `removed` or `event`".into()),
    }
}

/// A fault the world injects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The stream parks after chunk `after_chunk` of model call `call`.
    Stall(ChunkPoint),
    /// The provider connection drops there.
    Cut(ChunkPoint),
    /// The provider ends the step there: `finish-step unknown`, 0 tokens.
    Truncate(ChunkPoint),
    /// The call answers an HTTP error there.
    HttpError(HttpFault),
    /// The engine process is killed and restarted.
    Evict(EvictFault),
    /// The durable store refuses commits: the engine's `commit`-th commit
    /// (counting from 1, every commit it attempts), or the first commit
    /// that would store what `when` names, and the `times - 1` after it.
    StoreError(StoreFault),
    /// The messenger surface refuses posts: the engine's `post`-th post
    /// (counting from 1, every post it attempts) and the `times - 1` after
    /// it. A refused post is not shown.
    PostFails(PostFault),
    /// The messenger surface is slow: it answers the engine's `post`-th
    /// post (and the `times - 1` after it) only `after_ms` later. The post
    /// shows at once; the engine hears so only then.
    PostSlow(SlowPostFault),
    /// A host hook fails (throws): its `call`-th call (from 1) and the
    /// `times - 1` after it.
    HookThrows(HookFault),
    /// Faults drawn per seed: each kind happens once with its probability,
    /// at a point the seed picks.
    Random(RandomFaults),
}

/// Probabilities (0 to 1) per fault kind, drawn per seed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RandomFaults {
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub stall: f64,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub cut: f64,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub truncate: f64,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub http_error: f64,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub evict: f64,
    #[serde(default, deserialize_with = "probability")]
    #[schemars(range(min = 0, max = 1))]
    pub disconnect: f64,
    /// Timed faults (evict, disconnect) land in `0..window_ms`.
    #[serde(default = "default_random_window")]
    pub window_ms: u64,
}

/// A probability is a number from 0 to 1; NaN and infinities are rejected
/// where they are written.
fn probability<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if !(0.0..=1.0).contains(&value) {
        return Err(serde::de::Error::custom(format!("a probability is a number from 0 to 1, not {value}")));
    }
    Ok(value)
}

fn default_random_window() -> u64 {
    3_000
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkPoint {
    /// Model call, counting from 1.
    #[serde(deserialize_with = "call_number")]
    pub call: u32,
    #[serde(default)]
    pub after_chunk: u32,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpFault {
    #[serde(deserialize_with = "call_number")]
    pub call: u32,
    #[serde(default)]
    pub after_chunk: u32,
    pub status: u16,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreFault {
    /// Which commit is refused first, by number (1 is the engine's first
    /// commit). Give this or `when`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "some_commit_number")]
    #[schemars(range(min = 1))]
    pub commit: Option<u32>,
    /// Which commit is refused first, by what it would store: the commit
    /// that would newly store a user message or an alarm (`stored`), or a
    /// tool call in a state (`tool` + `state`); `nth` picks a later match.
    /// The same moment for any engine, however it numbers or groups its
    /// commits. Give this or `commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Trigger>,
    /// How many commits in a row are refused.
    #[serde(default = "one", deserialize_with = "commit_number")]
    #[schemars(range(min = 1))]
    pub times: u32,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl StoreFault {
    /// The `commit`-th commit and the `times - 1` after it.
    pub fn numbered(commit: u32, times: u32, optional: bool) -> Self {
        Self { commit: Some(commit), when: None, times, optional }
    }
}

fn some_commit_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    commit_number(deserializer).map(Some)
}

fn one() -> u32 {
    1
}

/// Commits count from 1; a 0 is rejected where it is written.
fn commit_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    counted_from_one(deserializer, "commits count from 1")
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostFault {
    /// Which post is refused first (1 is the engine's first post).
    #[serde(deserialize_with = "post_number")]
    #[schemars(range(min = 1))]
    pub post: u32,
    /// How many posts in a row are refused.
    #[serde(default = "one", deserialize_with = "post_number")]
    #[schemars(range(min = 1))]
    pub times: u32,
    /// What the surface says.
    #[serde(default = "default_post_error")]
    pub error: String,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowPostFault {
    /// Which post is answered late first (1 is the engine's first post).
    #[serde(deserialize_with = "post_number")]
    #[schemars(range(min = 1))]
    pub post: u32,
    /// How many posts in a row are answered late.
    #[serde(default = "one", deserialize_with = "post_number")]
    #[schemars(range(min = 1))]
    pub times: u32,
    /// How long after the post the surface answers it (per post, per seed).
    pub after_ms: RangeMs,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl SlowPostFault {
    /// Whether this fault answers post number `post` late.
    pub fn slows(&self, post: u32) -> bool {
        post >= self.post && post - self.post < self.times
    }
}

fn default_post_error() -> String {
    "the chat surface refused the post".into()
}

fn post_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    counted_from_one(deserializer, "posts count from 1")
}

/// A host hook the engine calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// `on_exhausted`: recovery gave up on an incident.
    OnExhausted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookFault {
    pub hook: Hook,
    /// Which call of the hook fails first (from 1).
    #[serde(default = "one", deserialize_with = "hook_call_number")]
    #[schemars(range(min = 1))]
    pub call: u32,
    /// How many calls in a row fail.
    #[serde(default = "one", deserialize_with = "hook_call_number")]
    #[schemars(range(min = 1))]
    pub times: u32,
    /// What the hook throws.
    #[serde(default = "default_hook_error")]
    pub error: String,
    /// The run may never reach it (a fault that never lands otherwise fails
    /// the run: it proved nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

fn default_hook_error() -> String {
    "the hook threw".into()
}

fn hook_call_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    counted_from_one(deserializer, "hook calls count from 1")
}

fn counted_from_one<'de, D: serde::Deserializer<'de>>(deserializer: D, rule: &str) -> Result<u32, D::Error> {
    let number = u32::deserialize(deserializer)?;
    if number == 0 {
        return Err(serde::de::Error::custom(rule));
    }
    Ok(number)
}

/// What a counted fault counts: every attempt, across the run's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    Commit,
    Post,
    HookCall,
}

impl Fault {
    /// The model call a fault rewrites the script of, if it is one.
    pub fn model_call(&self) -> Option<u32> {
        match self {
            Self::Stall(point) | Self::Cut(point) | Self::Truncate(point) => Some(point.call),
            Self::HttpError(http) => Some(http.call),
            Self::Evict(_)
            | Self::Random(_)
            | Self::StoreError(_)
            | Self::PostFails(_)
            | Self::PostSlow(_)
            | Self::HookThrows(_) => None,
        }
    }

    /// A fault that fails the `first`-th counted call and the `times - 1`
    /// after it: what it counts, `first`, `times`, and what the failure says
    /// (the store says its own).
    pub fn counted(&self) -> Option<(Counted, u32, u32, &str)> {
        match self {
            Self::StoreError(fault) => Some((Counted::Commit, fault.commit?, fault.times, "")),
            Self::PostFails(fault) => Some((Counted::Post, fault.post, fault.times, &fault.error)),
            Self::HookThrows(fault) => Some((Counted::HookCall, fault.call, fault.times, &fault.error)),
            _ => None,
        }
    }
}

/// Model calls count from 1; a 0 is rejected where it is written.
fn call_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let call = u32::deserialize(deserializer)?;
    if call == 0 {
        return Err(serde::de::Error::custom("`call` counts model calls from 1"));
    }
    Ok(call)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawEvictFault", into = "RawEvictFault")]
pub struct EvictFault {
    pub when: When,
    pub restart_after_ms: RangeMs,
    /// The process dies at the trigger's event itself (with no delay), not
    /// at its next await: nothing it does after that event happens.
    pub at_once: bool,
    /// Client connections outlive the process (see [`Evict::memory_only`]).
    pub memory_only: bool,
    /// A trigger that may never match: otherwise the run fails
    /// `fault-landed` when it does not.
    pub optional: bool,
}

#[derive(Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawEvictFault {
    #[serde(skip_serializing_if = "Option::is_none")]
    at_ms: Option<RangeMs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<Trigger>,
    #[serde(default)]
    restart_after_ms: RangeMs,
    /// With `when` and no delay: the process dies at the triggering event
    /// itself (for `store.commit`, as the commit returns), so nothing it
    /// would have done after it in the same step happens. Otherwise it dies
    /// at its next await, after the step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    at_once: bool,
    /// Only the process's memory goes: client connections stay open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    memory_only: bool,
    /// The run may never reach the trigger (`fault-landed` does not ask
    /// that it fired).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    optional: bool,
}

impl From<EvictFault> for RawEvictFault {
    fn from(fault: EvictFault) -> Self {
        let (at_ms, when) = when_fields(fault.when);
        let (restart_after_ms, at_once, memory_only) = (fault.restart_after_ms, fault.at_once, fault.memory_only);
        Self { at_ms, when, restart_after_ms, at_once, memory_only, optional: fault.optional }
    }
}

impl TryFrom<RawEvictFault> for EvictFault {
    type Error = String;

    fn try_from(raw: RawEvictFault) -> Result<Self, String> {
        let when = match (raw.at_ms, raw.when) {
            (Some(at), None) => When::AtMs(at),
            (None, Some(trigger)) => When::Trigger(validate_trigger(trigger)?),
            _ => return Err("an evict fault needs exactly one of `at_ms` or `when`".into()),
        };
        if raw.at_once && !matches!(&when, When::Trigger(trigger) if trigger.delay_ms == RangeMs::ZERO) {
            return Err("`at_once` needs a `when` trigger with no `delay_ms`".into());
        }
        let (at_once, memory_only, optional) = (raw.at_once, raw.memory_only, raw.optional);
        Ok(Self { when, restart_after_ms: raw.restart_after_ms, at_once, memory_only, optional })
    }
}

/// What must hold at the end of every seed, besides the invariants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Continuations fired: a number, or `{ at_least, at_most }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuations: Option<Count>,
    /// Model calls, retries and recoveries included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<Count>,
    /// The sim time (ms) each model call started, in call order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls_at_ms: Option<Vec<u64>>,
    /// The `done` and `error` frames the client saw, in order, as
    /// `"done r1"` / `"error r4"` (request ids only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_frames: Option<Vec<String>>,
    /// Stored messages at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Count>,
    /// Final state by tool call id (`absent`: no such part), or the part's
    /// fields (`{ state, not, input, output, error, approval_id, dynamic }`).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolExpectation>,
    /// Exactly the text of the last stored assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// Exactly these parts, by message id, written as a replay prints them
    /// (`step-start`, `text "Hi."`, `tool tc-1 lookup output-available output "x"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, Vec<String>>,
    /// Exactly the stored messages' ids, in transcript order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// The durable records left at the end: `{ in_flight: absent, incidents: 0 }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreExpectation>,
    /// Each text appears in some frame a client received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_received: Vec<String>,
    /// Each text appears in some `on_error` a `chat()` caller received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caller_errors: Vec<String>,
    /// Host hooks the engine called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<HookCounts>,
    /// Counts by a moment: `{ at_ms: 400, continuations: 0 }`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<Snapshot>,
    /// When events may happen: `{ event: model.call, nth: 2, after: { event: model.call }, no_earlier_than_ms: 2000 }`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing: Vec<Timing>,
    /// Boundary events by timeline name (`model.call`, `client.frame`,
    /// `messenger.post`): a number (exactly), or `{ at_least, at_most }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, Count>,
    /// What one client connection was shown (by a moment): tool states in
    /// its view, frames it received in order, frames it never received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<ConnectionExpectation>,
    /// Exactly these call ids were repaired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callbacks: Option<CallbackCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messenger_posts: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_text_contains: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryCounts>,
    /// Canaries only: this check must fail on every seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect_failure: Option<String>,
}

/// A tool part's state at the end of a run, or `absent`: no such part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectedToolState {
    InputStreaming,
    InputAvailable,
    ApprovalRequested,
    ApprovalResponded,
    OutputAvailable,
    OutputError,
    OutputDenied,
    Absent,
}

impl ExpectedToolState {
    /// The engine's state this names; `None` for `absent`.
    pub fn tool_state(self) -> Option<turnsim_engine::ToolState> {
        use turnsim_engine::ToolState;
        Some(match self {
            Self::InputStreaming => ToolState::InputStreaming,
            Self::InputAvailable => ToolState::InputAvailable,
            Self::ApprovalRequested => ToolState::ApprovalRequested,
            Self::ApprovalResponded => ToolState::ApprovalResponded,
            Self::OutputAvailable => ToolState::OutputAvailable,
            Self::OutputError => ToolState::OutputError,
            Self::OutputDenied => ToolState::OutputDenied,
            Self::Absent => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        self.tool_state().map_or("absent", turnsim_engine::ToolState::as_str)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackCounts {
    #[serde(default)]
    pub on_done: u32,
    #[serde(default)]
    pub on_error: u32,
    #[serde(default)]
    pub on_interrupted: u32,
    #[serde(default)]
    pub transport_break: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoveryCounts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exhausted: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parked: Option<u32>,
}

impl Scenario {
    /// The engine configuration this scenario asks for.
    pub fn engine_config(&self) -> EngineConfig {
        let spec = &self.engine;
        let defaults = RecoveryConfig::default();
        let recovery = RecoveryConfig {
            enabled: spec.recovery.enabled.unwrap_or(defaults.enabled),
            max_attempts: spec.recovery.max_attempts.unwrap_or(defaults.max_attempts),
            stable_timeout_ms: spec.recovery.stable_timeout_ms.unwrap_or(defaults.stable_timeout_ms),
            stable_retry_delay_ms: spec.recovery.stable_retry_delay_ms.unwrap_or(defaults.stable_retry_delay_ms),
            no_progress_window_ms: spec.recovery.no_progress_window_ms.unwrap_or(defaults.no_progress_window_ms),
            alarm_debounce_ms: spec.recovery.alarm_debounce_ms.unwrap_or(defaults.alarm_debounce_ms),
            alarm_delay_ms: spec.recovery.alarm_delay_ms.unwrap_or(defaults.alarm_delay_ms),
            terminal_message: spec.recovery.terminal_message.clone().unwrap_or(defaults.terminal_message),
        };
        let base = EngineConfig::default();
        EngineConfig {
            tools: spec.tools.iter().map(|(name, tool)| (name.clone(), tool.kind)).collect(),
            dynamic_tools: spec.tools.iter().filter(|(_, tool)| tool.dynamic).map(|(name, _)| name.clone()).collect(),
            server_tools: spec.server_tools.unwrap_or(base.server_tools),
            coalesce_ms: spec.coalesce_ms.unwrap_or(base.coalesce_ms),
            stall_timeout_ms: spec.stall_timeout_ms,
            max_steps: spec.max_steps.unwrap_or(base.max_steps),
            retry_initial_delay_ms: spec.retry_initial_delay_ms.unwrap_or(base.retry_initial_delay_ms),
            messenger_post_limit_chars: spec
                .messenger
                .post_limit_chars
                .map_or(base.messenger_post_limit_chars, PostLimit::chars),
            recovery,
            ..base
        }
    }
}

//! Capabilities: what an engine implements beyond the protocol's core, named
//! from a small closed vocabulary (`docs/protocol.md`). An engine declares
//! its own in the `idle` that answers `init`; a scenario names what it needs
//! (`needs:`). A scenario whose needs the engine does not declare is not
//! run: it is reported as not applicable, apart from pass and fail. Run
//! anyway (`run --not-applicable run|only`), it is judged without them:
//! each capability names the invariants its absence explains ([`EXPLAINED`]),
//! and every other violation is the engine's own, so a bug cannot hide
//! behind "not applicable".
//!
//! The core itself has parts an engine behind a bridge may not be able to
//! take (a compiled server has no client tools a client answers, no
//! `chat()`, no store the harness seeds or refuses): those are *core*
//! capabilities, which every engine has unless it says it lacks them
//! (`lacks` on the same `idle`), and which a scenario needs by what it
//! does (`crate::applicable::implied_needs`), whether or not it says so.

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One behaviour a scenario may need and an engine may lack.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Stall and eviction recovery: incidents and alarms, the exhausted
    /// hook, and boot recovery of the turns a dead process left.
    Recovery,
    /// Messenger deliveries answered with posts, checkpointed per delivery.
    Messenger,
    /// A 429/5xx after the stream started, and an empty `unknown` or
    /// zero-token finish, taken back and retried (opencode's retries).
    ProviderRetries,
    /// A refused commit fails the turn it belongs to.
    StoreRefusalFailsTurn,
    /// A tool call left without a result is repaired before the next
    /// inference.
    DanglingCallRepair,
    /// A completed batch's continuation waits out `engine.coalesce_ms`
    /// before it fires.
    Coalesce,
    /// Core: tools the client answers (`tool_result`): client and human
    /// tools, and a tool the model calls that the engine does not list.
    ClientTools,
    /// Core: the client's answers to approval requests (`approval`).
    Approvals,
    /// Core: the `chat()` RPC and its callback.
    Chat,
    /// Core: a store that holds a transcript (or records) before the
    /// engine first boots (a scenario's `stored`).
    StoredTranscript,
    /// Core: a store the harness may refuse commits of (`store_error`).
    StoreFaults,
    /// Core: the stream-resume handshake (`resume_request`, `resume_ack`).
    StreamResume,
    /// Core: recoveries as the store's records in the store's vocabulary
    /// (incidents and alarms), which `expect.recovery` counts.
    RecoveryRecords,
    /// Core: the virtual clock, under which an engine's model calls come at
    /// the exact sim times `expect.model_calls_at_ms` names. A live run
    /// lacks it: real time is the machine's, reported to within a tick.
    ExactTimes,
    /// Core: tools the engine learns of at run time (`engine.dynamic_tools`),
    /// streamed and stored as dynamic. An engine whose tools are all
    /// declared up front (Think builds each client tool with `tool()`)
    /// lacks it.
    DynamicTools,
    /// Core: the reference's settings a product may fix as constants, set
    /// otherwise: the coalesce window, the recovery alarm's debounce, the
    /// stable-state retry delay, recovery switched off, and a user
    /// message's own stall timeout. An engine that fixes one lacks it.
    EngineSettings,
}

impl Capability {
    /// The capabilities beyond the core: what an engine declares.
    pub const ALL: [Capability; 6] = [
        Capability::Recovery,
        Capability::Messenger,
        Capability::ProviderRetries,
        Capability::StoreRefusalFailsTurn,
        Capability::DanglingCallRepair,
        Capability::Coalesce,
    ];

    /// The core's parts: what an engine has unless it says it `lacks` them.
    pub const CORE: [Capability; 10] = [
        Capability::ClientTools,
        Capability::Approvals,
        Capability::Chat,
        Capability::StoredTranscript,
        Capability::StoreFaults,
        Capability::StreamResume,
        Capability::RecoveryRecords,
        Capability::ExactTimes,
        Capability::DynamicTools,
        Capability::EngineSettings,
    ];

    pub fn is_core(self) -> bool {
        Self::CORE.contains(&self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Capability::Recovery => "recovery",
            Capability::Messenger => "messenger",
            Capability::ProviderRetries => "provider-retries",
            Capability::StoreRefusalFailsTurn => "store-refusal-fails-turn",
            Capability::DanglingCallRepair => "dangling-call-repair",
            Capability::Coalesce => "coalesce",
            Capability::ClientTools => "client-tools",
            Capability::Approvals => "approvals",
            Capability::Chat => "chat",
            Capability::StoredTranscript => "stored-transcript",
            Capability::StoreFaults => "store-faults",
            Capability::StreamResume => "stream-resume",
            Capability::RecoveryRecords => "recovery-records",
            Capability::ExactTimes => "exact-times",
            Capability::DynamicTools => "dynamic-tools",
            Capability::EngineSettings => "engine-settings",
        }
    }

    /// The capability `name` names, or an error that lists the vocabulary.
    pub fn parse(name: &str) -> Result<Capability, String> {
        Capability::ALL.into_iter().chain(Capability::CORE).find(|capability| capability.name() == name).ok_or_else(
            || {
                format!(
                    "unknown capability `{name}` (the protocol's are: {}; its core's: {})",
                    names(&Capability::ALL),
                    names(&Capability::CORE)
                )
            },
        )
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// What a missing capability explains, by invariant id (`turnsim list
/// invariants`): the invariants an engine without it may break in a
/// scenario that needs it, and no others. One line per capability, each
/// with why.
pub const EXPLAINED: [(Capability, &[&str]); 6] = [
    // A turn an eviction or a stall cut is left as it stopped: a stored
    // message nothing answers again, a partial still `streaming`, a call
    // cut mid input never recovered.
    (Capability::Recovery, &["no-lost-work", "transcript-shape", "mid-tool-input-recovers"]),
    // Deliveries go unanswered: nothing is posted.
    (Capability::Messenger, &["messenger-once", "messenger-view"]),
    // A failed or empty attempt is kept as it came, not taken back: an empty
    // finish is the answer, with nothing in it for the user.
    (Capability::ProviderRetries, &["no-empty-answer", "transcript-shape", "no-lost-work"]),
    // A refused commit is written with the next one; the turn goes on.
    (Capability::StoreRefusalFailsTurn, &[]),
    // A call left without a result stays so.
    (Capability::DanglingCallRepair, &["tool-results-present"]),
    // The continuation fires as its batch completes, inside the window
    // single-continuation holds a coalescing engine to (that invariant's
    // other rules go unread in such a scenario: the price of one id).
    (Capability::Coalesce, &["single-continuation"]),
];

/// Whether a missing capability explains a violation of `check`. An
/// expectation (`expect.*`) and `fault-landed` are the scenario's story,
/// told for an engine with what it needs, so any missing capability
/// explains them; an engine fault (a crash, a protocol error) is never
/// explained.
pub fn explains(missing: &[Capability], check: &str) -> bool {
    let story = check.starts_with("expect.") || check == crate::check::landed::CHECK;
    let invariant =
        || EXPLAINED.iter().any(|(capability, checks)| missing.contains(capability) && checks.contains(&check));
    !missing.is_empty() && (story || invariant())
}

/// The violations of a run of a scenario judged without `missing` that no
/// missing capability explains: all of them when nothing is missing.
pub fn unexplained(
    missing: &[Capability],
    mut violations: Vec<crate::check::Violation>,
) -> Vec<crate::check::Violation> {
    violations.retain(|violation| !explains(missing, &violation.check));
    violations
}

/// `recovery, messenger`.
pub fn names<'a>(capabilities: impl IntoIterator<Item = &'a Capability>) -> String {
    capabilities.into_iter().map(|capability| capability.name()).collect::<Vec<_>>().join(", ")
}

/// What an engine declared: the capabilities beyond the core it has (one
/// that declared none is judged as having every one, as the built-in engine
/// is), and the core capabilities it lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// `None`: every capability beyond the core.
    beyond_core: Option<BTreeSet<Capability>>,
    lacks: BTreeSet<Capability>,
}

impl Declared {
    /// Every capability: the built-in engine, or an engine that declares nothing.
    pub fn everything() -> Declared {
        Declared { beyond_core: None, lacks: BTreeSet::new() }
    }

    /// The names of an `idle`'s `capabilities` field (absent: every one
    /// beyond the core; a core name there changes nothing) and of its
    /// `lacks` field (core names only). An unknown name is an error naming
    /// it.
    pub fn from_names(capabilities: Option<&[String]>, lacks: Option<&[String]>) -> Result<Declared, String> {
        let parse =
            |names: &[String]| names.iter().map(|name| Capability::parse(name)).collect::<Result<BTreeSet<_>, _>>();
        let beyond_core = capabilities
            .map(parse)
            .transpose()?
            .map(|set| set.into_iter().filter(|capability| !capability.is_core()).collect());
        let lacks = parse(lacks.unwrap_or_default())?;
        if let Some(extra) = lacks.iter().find(|capability| !capability.is_core()) {
            return Err(format!(
                "`lacks` names the core's parts an engine lacks ({}); `{extra}` is not one: leave it out of `capabilities` instead",
                names(&Capability::CORE)
            ));
        }
        Ok(Declared { beyond_core, lacks })
    }

    pub fn has(&self, capability: Capability) -> bool {
        if capability.is_core() {
            return !self.lacks.contains(&capability);
        }
        self.beyond_core.as_ref().is_none_or(|declared| declared.contains(&capability))
    }

    /// This declaration with one more core capability lacked: what a live
    /// run takes away from any engine (`crate::live`).
    pub fn lacking(mut self, capability: Capability) -> Declared {
        assert!(capability.is_core(), "only the core's parts can be lacked");
        self.lacks.insert(capability);
        self
    }

    /// Which of `needs` this engine lacks, in the vocabulary's order.
    pub fn missing(&self, needs: &[Capability]) -> Vec<Capability> {
        let needed: BTreeSet<Capability> = needs.iter().copied().collect();
        needed.into_iter().filter(|capability| !self.has(*capability)).collect()
    }
}

impl fmt::Display for Declared {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.beyond_core {
            None => formatter.write_str("every capability (it declares none)")?,
            Some(declared) if declared.is_empty() => formatter.write_str("no capability")?,
            Some(declared) => formatter.write_str(&names(declared))?,
        }
        if !self.lacks.is_empty() {
            write!(formatter, ", and lacks {}", names(&self.lacks))?;
        }
        Ok(())
    }
}

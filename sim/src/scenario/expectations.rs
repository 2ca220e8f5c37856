//! Expectation shapes beyond plain numbers: counts with bounds, tool parts
//! by their fields, state at a moment, and when an event may happen.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{ExpectedToolState, RemovedRecord, StoredRecord};

/// `2` (exactly), or `{ at_least: 1, at_most: 3 }` (either bound optional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Exactly(u32),
    Between { at_least: Option<u32>, at_most: Option<u32> },
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Bounds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_least: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_most: Option<u32>,
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum CountSchema {
    Exactly(u32),
    Between(Bounds),
}

impl Count {
    pub fn admits(&self, actual: u32) -> bool {
        match *self {
            Self::Exactly(expected) => actual == expected,
            Self::Between { at_least, at_most } => {
                at_least.is_none_or(|least| actual >= least) && at_most.is_none_or(|most| actual <= most)
            }
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Exactly(expected) => write!(formatter, "{expected}"),
            Self::Between { at_least: Some(least), at_most: Some(most) } => write!(formatter, "{least} to {most}"),
            Self::Between { at_least: Some(least), at_most: None } => write!(formatter, "at least {least}"),
            Self::Between { at_least: None, at_most: Some(most) } => write!(formatter, "at most {most}"),
            Self::Between { at_least: None, at_most: None } => write!(formatter, "any number"),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl<'de> Visitor<'de> for CountVisitor {
            type Value = Count;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a count: a number, or { at_least: N, at_most: M }")
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Count, E> {
                u32::try_from(value).map(Count::Exactly).map_err(|_| E::custom(format!("count {value} is too large")))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Count, A::Error> {
                let bounds = Bounds::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if let (Some(least), Some(most)) = (bounds.at_least, bounds.at_most) {
                    if least > most {
                        return Err(de::Error::custom(format!("at_least {least} is above at_most {most}")));
                    }
                }
                Ok(Count::Between { at_least: bounds.at_least, at_most: bounds.at_most })
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Exactly(count) => serializer.serialize_u32(count),
            Self::Between { at_least, at_most } => Bounds { at_least, at_most }.serialize(serializer),
        }
    }
}

super::schema_as!(Count, CountSchema);

/// The durable records the store holds at the end of the run, beside the
/// transcript: `{ in_flight: absent, incidents: 0 }`. Each field given is
/// checked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreExpectation {
    /// Whether a turn's in-flight record is left: a turn still running, or
    /// one whose end was never recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<Presence>,
    /// Recovery incidents stored, whatever their status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incidents: Option<Count>,
    /// Recovery incidents stored still attempting (open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incidents_attempting: Option<Count>,
    /// Recovery alarms stored (scheduled wake-ups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alarms: Option<Count>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Absent,
    Present,
}

impl Presence {
    pub fn of<T>(value: Option<&T>) -> Self {
        if value.is_some() {
            Self::Present
        } else {
            Self::Absent
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::Present => "present",
        }
    }
}

/// A tool part at the end of the run: its state (`tc-1: output-available`),
/// or its fields (`tc-1: { state: output-error, error: "boom" }`).
#[derive(Clone, Debug, PartialEq)]
pub enum ToolExpectation {
    State(ExpectedToolState),
    Fields(ToolFields),
}

/// Each field given must match; `not` names a state the part must not end in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ExpectedToolState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<ExpectedToolState>,
    /// The input value, compared as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The output value, compared as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error text of an `output-error` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The id of the approval the engine requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Whether it is a `dynamic-tool` part (a tool defined at run time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
}

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolExpectationSchema {
    State(ExpectedToolState),
    Fields(ToolFields),
}

impl<'de> Deserialize<'de> for ToolExpectation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ToolVisitor;
        impl<'de> Visitor<'de> for ToolVisitor {
            type Value = ToolExpectation;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter
                    .write_str("a tool state (output-available, ...), or { state, not, input, output, error, approval_id, dynamic }")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<ToolExpectation, E> {
                let state = ExpectedToolState::deserialize(de::value::StrDeserializer::<E>::new(value))?;
                Ok(ToolExpectation::State(state))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ToolExpectation, A::Error> {
                ToolFields::deserialize(de::value::MapAccessDeserializer::new(map)).map(ToolExpectation::Fields)
            }
        }
        deserializer.deserialize_any(ToolVisitor)
    }
}

impl Serialize for ToolExpectation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::State(state) => state.serialize(serializer),
            Self::Fields(fields) => fields.serialize(serializer),
        }
    }
}

super::schema_as!(ToolExpectation, ToolExpectationSchema);

/// Counts of what had happened by a moment of sim time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuations: Option<Count>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<Count>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messenger_posts: Option<Count>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_callbacks: Option<Count>,
}

/// The n-th occurrence of a moment: a timeline event by name
/// (`model.call`, `caller.on_done`, ...), a client frame by its label as
/// the timeline shows it (`done r1`; `error r4` matches that error whatever
/// its text), or the commit that first stores or takes away a kind of
/// record (as a trigger's `stored:` and `removed:`). Exactly one of
/// `event`, `frame`, `stored`, `removed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<RemovedRecord>,
    #[serde(default = "first")]
    pub nth: u32,
}

impl EventRef {
    /// How a message names it: `model.call #2`, `frame \`done r1\` #1`,
    /// `stored: reply #1`.
    pub fn describe(&self) -> String {
        let what = match (&self.event, &self.frame, self.stored, self.removed) {
            (_, Some(label), ..) => format!("frame `{label}`"),
            (_, _, Some(kind), _) => format!("stored: {}", kind.name()),
            (_, _, _, Some(kind)) => format!("removed: {}", kind.name()),
            (Some(event), ..) => event.clone(),
            (None, None, None, None) => "nothing".to_string(),
        };
        format!("{what} #{}", self.nth.max(1))
    }

    /// Why this names no moment or more than one, if it does.
    pub fn problem(&self) -> Option<&'static str> {
        let named = [self.event.is_some(), self.frame.is_some(), self.stored.is_some(), self.removed.is_some()];
        match named.iter().filter(|named| **named).count() {
            1 if self.frame.as_deref().is_some_and(|label| label.trim().is_empty()) => {
                Some("`frame` names a client frame by its label as the timeline shows it (`done r1`)")
            }
            1 => None,
            0 => Some("name the moment: give one of `event`, `frame`, `stored` or `removed`"),
            _ => Some("a moment is one of `event`, `frame`, `stored` or `removed`: give only one"),
        }
    }
}

fn first() -> u32 {
    1
}

/// When a moment may happen: in sim time from the start, or from another
/// moment (`after`). The moment is named as an [`EventRef`] is, its fields
/// spelled out here ([`Timing::target`] gathers them): serde's `flatten`
/// does not work with `deny_unknown_fields`, which keeps a misspelt key a
/// located error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<RemovedRecord>,
    #[serde(default = "first")]
    pub nth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<EventRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_earlier_than_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_later_than_ms: Option<u64>,
}

impl Timing {
    /// The moment it bounds.
    pub fn target(&self) -> EventRef {
        EventRef {
            event: self.event.clone(),
            frame: self.frame.clone(),
            stored: self.stored,
            removed: self.removed,
            nth: self.nth,
        }
    }
}

/// Host hooks the engine called, by hook.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookCounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<Count>,
    /// Exactly the reasons the host's `on_exhausted` was told, in order
    /// (`max_attempts_exceeded`, `no_progress_timeout`, `stable_timeout`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_exhausted_reasons: Vec<String>,
}

/// What one client connection was shown, judged on the frames the engine
/// sent it (by `at_ms`, or by the end of the run): tool states as its own
/// view shows them, frames it received in order, frames it never received.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionExpectation {
    /// Which client, from 1.
    #[serde(default = "first")]
    pub client: u32,
    /// The client's Nth connection, from 1, as the timeline names it
    /// (client 1's second is `c2`, client 2's is `c2002`); omitted: the last
    /// one it had opened by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<u64>,
    /// Judged on what it had been sent by this moment (everything shown at
    /// that ms or before); omitted: the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// By call id: the tool's state in this connection's view (`absent`:
    /// it shows no such part).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ExpectedToolState>,
    /// Frames it received, in this order (others may come between), by the
    /// label the timeline prints (`done r2`, `resume-none`), or its first
    /// words (`stream-resuming`, `error r4`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received: Vec<String>,
    /// Frames it must never have received, labelled as in `received`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_received: Vec<String>,
}

impl ConnectionExpectation {
    /// Whether a frame labelled `label` (as the timeline prints it) is the
    /// one `expected` names: the whole label, or its first words.
    pub fn names(expected: &str, label: &str) -> bool {
        label.strip_prefix(expected).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    }
}

//! What the engine persists, and the writes that change it.
//!
//! A `DurableStore` commits a batch of writes atomically. The engine keeps a
//! mirror of the durable state and applies each committed batch to it with the
//! same `apply`, so the mirror and the store cannot drift apart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::transcript::Message;

/// Everything that survives an eviction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DurableState {
    pub messages: Vec<Message>,
    /// Source of message and request ids; durable so ids never repeat.
    pub next_id: u64,
    /// A continuation is owed for the leaf's tool batch (goes beyond the
    /// reference, where this lives only in memory).
    pub continuation_intent: Option<ContinuationIntent>,
    /// The turn that was running, so a restarted engine can recover it.
    pub in_flight: Option<InFlightTurn>,
    /// Open recovery incidents by incident id.
    pub incidents: BTreeMap<String, Incident>,
    /// Scheduled recovery wake-ups.
    pub alarms: Vec<Alarm>,
    /// Bumped on every durable flush of streamed output: recovery's progress signal.
    pub progress: u64,
    /// Messenger deliveries by delivery id.
    pub deliveries: BTreeMap<String, DeliveryCheckpoint>,
    /// Set when a turn ended out of band (recovery exhausted); replayed to
    /// clients that connect later.
    pub terminal_status: Option<TerminalStatus>,
    /// What an engine keeps beyond this vocabulary, by key: opaque to the
    /// oracle (an engine driven over the process protocol keeps its own
    /// bookkeeping here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinuationIntent {
    /// The assistant message whose tool batch the continuation is for.
    pub message_id: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnKind {
    User,
    Chat,
    Continuation,
    Recovery,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Chat => "chat",
            Self::Continuation => "continuation",
            Self::Recovery => "recovery",
        }
    }

    /// Whether a turn of this kind continues the answer before it (the
    /// model is asked to continue; the stream extends the leaf message)
    /// rather than answering a user anew.
    pub fn continues_answer(self) -> bool {
        matches!(self, Self::Continuation | Self::Recovery)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightTurn {
    pub request_id: String,
    pub kind: TurnKind,
    /// Root request of a recovery chain (the request that first failed).
    pub root_request_id: String,
    pub message_id: String,
    /// Whether any model output of this turn reached the store.
    pub stream_started: bool,
    /// The `chat()` delivery this turn answers, if any.
    pub delivery_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incident {
    pub id: String,
    pub root_request_id: String,
    pub attempt: u32,
    pub first_seen_ms: u64,
    pub last_attempt_ms: u64,
    pub last_progress_ms: u64,
    pub progress: u64,
    pub status: String,
    /// Spent (why), and the host's `on_exhausted` has not run yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_owed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarm {
    pub id: String,
    pub due_ms: u64,
    pub incident_id: String,
    pub root_request_id: String,
    pub message_id: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryStage {
    Accepted,
    Streaming,
    /// The reply is decided; `posts` holds what the surface has not yet
    /// acknowledged of it. A restarted process posts that (its first post
    /// may already show, if it was in flight at the crash).
    Posting,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryCheckpoint {
    pub id: String,
    pub user_text: String,
    pub stage: DeliveryStage,
    /// The posts a `posting` delivery still owes, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub posts: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalStatus {
    pub request_id: String,
    pub message: String,
    /// The latest user message when the failure was told: no recovery
    /// answers it after that (its user was told it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_message: Option<String>,
}

/// One change to the durable state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Write {
    /// Insert or replace a message by id (a new id is appended).
    PutMessage(Message),
    /// A message taken out of the transcript (a dead turn's partial that a
    /// new turn answers in its place).
    RemoveMessage(String),
    /// Insert or replace a message, placed right after message `after` (at
    /// the end when `after` is not stored): a reply stored first while
    /// later user messages already wait their turn goes before them.
    PutMessageAfter {
        after: String,
        message: Message,
    },
    NextId(u64),
    Intent(Option<ContinuationIntent>),
    InFlight(Option<InFlightTurn>),
    PutIncident(Incident),
    RemoveIncident(String),
    PutAlarm(Alarm),
    RemoveAlarm(String),
    Progress(u64),
    PutDelivery(DeliveryCheckpoint),
    Terminal(Option<TerminalStatus>),
    /// An opaque entry of the engine's own.
    Put {
        key: String,
        value: serde_json::Value,
    },
    Remove(String),
}

impl Write {
    /// A short stable rendering for timelines.
    pub fn summary(&self) -> String {
        match self {
            Self::PutMessage(message) => {
                format!("message {} ({} parts)", message.id, message.parts.len())
            }
            Self::RemoveMessage(id) => format!("message {id} removed"),
            Self::PutMessageAfter { after, message } => {
                format!("message {} ({} parts) after {after}", message.id, message.parts.len())
            }
            Self::NextId(next) => format!("next-id {next}"),
            Self::Intent(Some(intent)) => format!("intent {}", intent.message_id),
            Self::Intent(None) => "intent cleared".into(),
            Self::InFlight(Some(turn)) => {
                format!("in-flight {} {}", turn.request_id, turn.kind.as_str())
            }
            Self::InFlight(None) => "in-flight cleared".into(),
            Self::PutIncident(incident) => {
                format!("incident {} attempt {}", incident.id, incident.attempt)
            }
            Self::RemoveIncident(id) => format!("incident {id} closed"),
            Self::PutAlarm(alarm) => format!("alarm {}", alarm.id),
            Self::RemoveAlarm(id) => format!("alarm {id} done"),
            Self::Progress(progress) => format!("progress {progress}"),
            Self::PutDelivery(delivery) => format!("delivery {} {:?}", delivery.id, delivery.stage),
            Self::Terminal(Some(status)) => format!("terminal {}", status.request_id),
            Self::Terminal(None) => "terminal cleared".into(),
            Self::Put { key, .. } => format!("put {key}"),
            Self::Remove(key) => format!("remove {key}"),
        }
    }

    /// The message a write stores, wherever it places it.
    pub fn message(&self) -> Option<&Message> {
        match self {
            Self::PutMessage(message) | Self::PutMessageAfter { message, .. } => Some(message),
            _ => None,
        }
    }

    /// Writes that only move counters; timelines fold them away.
    pub fn is_bookkeeping(&self) -> bool {
        matches!(self, Self::NextId(_) | Self::Progress(_))
    }
}

impl DurableState {
    pub fn apply(&mut self, write: &Write) {
        match write {
            Write::PutMessage(message) => self.put_message(message),
            Write::RemoveMessage(id) => self.messages.retain(|message| &message.id != id),
            Write::PutMessageAfter { after, message } => place_after(&mut self.messages, after, message.clone()),
            Write::NextId(next) => self.next_id = *next,
            Write::Intent(intent) => self.continuation_intent = intent.clone(),
            Write::InFlight(turn) => self.in_flight = turn.clone(),
            Write::PutIncident(incident) => {
                self.incidents.insert(incident.id.clone(), incident.clone());
            }
            Write::RemoveIncident(id) => {
                self.incidents.remove(id);
            }
            Write::PutAlarm(alarm) => {
                self.alarms.retain(|existing| existing.id != alarm.id);
                self.alarms.push(alarm.clone());
            }
            Write::RemoveAlarm(id) => self.alarms.retain(|alarm| &alarm.id != id),
            Write::Progress(progress) => self.progress = *progress,
            Write::PutDelivery(delivery) => {
                self.deliveries.insert(delivery.id.clone(), delivery.clone());
            }
            Write::Terminal(status) => self.terminal_status = status.clone(),
            Write::Put { key, value } => {
                self.extra.insert(key.clone(), value.clone());
            }
            Write::Remove(key) => {
                self.extra.remove(key);
            }
        }
    }

    fn put_message(&mut self, message: &Message) {
        match self.messages.iter_mut().rev().find(|existing| existing.id == message.id) {
            // The same id: only what it holds is copied (a flush puts the
            // in-flight reply again and again).
            Some(existing) => {
                existing.role = message.role;
                existing.parts.clone_from(&message.parts);
            }
            None => self.messages.push(message.clone()),
        }
    }

    /// Ids are unique (a put replaces its earlier copy), and the messages
    /// asked for are mostly the latest: looked for from the end.
    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.iter().rev().find(|message| message.id == id)
    }
}

/// Puts `message` right after message `after` in `messages` (at the end
/// when `after` is not there), taking out an earlier copy of it first.
pub fn place_after(messages: &mut Vec<Message>, after: &str, message: Message) {
    messages.retain(|existing| existing.id != message.id);
    let at = messages.iter().position(|existing| existing.id == after).map_or(messages.len(), |at| at + 1);
    messages.insert(at, message);
}

//! Observability events: what the engine decided and why. Harnesses use them
//! as test oracles (continuations, repairs, stalls, recovery outcomes).

use serde::{Deserialize, Serialize};

use crate::durable::TurnKind;
use crate::transcript::ToolState;

crate::tag_first! {
    #[serde(tag = "event", rename_all = "kebab-case")]
    #[derive(Clone, Debug, PartialEq, Serialize)]
    pub enum EngineEvent {
        /// The engine process started (first boot or after an eviction).
        Boot {
            restored_intent: bool,
            in_flight: Option<String>,
        },
        UserMessageStored {
            message_id: String,
        },
        /// A `chat()` call arrived again under a key already taken: ignored.
        ChatRepeated {
            key: String,
        },
        TurnQueued {
            request_id: String,
            kind: TurnKind,
        },
        TurnStarted {
            request_id: String,
            kind: TurnKind,
            message_id: String,
        },
        ModelCall {
            request_id: String,
            step: u32,
            attempt: u32,
        },
        /// A tool became `input-available` (or awaits approval) in the live stream.
        ToolReady {
            call_id: String,
            tool_name: String,
            state: ToolState,
        },
        /// A tool result or approval was applied (`into`: accumulator or store).
        ToolApplied {
            call_id: String,
            state: ToolState,
            into: String,
            auto_continue: bool,
        },
        /// A tool result or approval matched no part in a state that takes it.
        ToolIgnored {
            call_id: String,
        },
        ServerToolStarted {
            call_id: String,
        },
        Repaired {
            call_ids: Vec<String>,
        },
        ContinuationPending {
            message_id: String,
        },
        ContinuationCoalesced,
        ContinuationDeferred,
        CoalesceTimerArmed,
        /// The barrier looked and will not fire yet.
        ContinuationHeld {
            reason: String,
        },
        ContinuationFired {
            request_id: String,
        },
        StreamStalled {
            request_id: String,
            timeout_ms: u64,
        },
        /// The provider truncated the step (empty `unknown` finish).
        EmptyFinish {
            request_id: String,
            attempt: u32,
            discarded_parts: usize,
            /// Tool calls that went with the discarded parts.
            discarded_tools: Vec<String>,
        },
        /// A model call failed retryably (429/5xx, or a truncated finish): the
        /// step's next call waits `delay_ms`. The failed attempt's parts (and
        /// the tool calls among them) were discarded.
        ProviderRetry {
            request_id: String,
            attempt: u32,
            delay_ms: u64,
            reason: String,
            discarded_parts: usize,
            discarded_tools: Vec<String>,
        },
        RecoveryScheduled {
            incident_id: String,
            attempt: u32,
            strategy: String,
        },
        /// The conversation moved on (a newer message) before the recovery ran.
        RecoverySkipped {
            incident_id: String,
            reason: String,
        },
        RecoveryParked {
            incident_id: String,
        },
        RecoveryExhausted {
            incident_id: String,
            attempt: u32,
            reason: String,
        },
        RecoveryCompleted {
            incident_id: String,
        },
        TurnFinished {
            request_id: String,
            kind: TurnKind,
            status: TurnStatus,
        },
        /// The store refused a commit; the running turn, if any, fails.
        StoreRefused,
        /// A messenger delivery is answered by this request.
        DeliveryAccepted {
            delivery_id: String,
            request_id: String,
        },
        /// The messenger surface refused a post: the rest of that reply is not
        /// posted.
        DeliveryPostFailed {
            delivery_id: String,
            error: String,
        },
        /// The host's `on_exhausted` hook failed; the engine carries on as if
        /// it had run (the reference swallows the throw).
        HookFailed {
            incident_id: String,
            error: String,
        },
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnStatus {
    /// The model finished (possibly leaving client tools to answer).
    Completed,
    Error,
    /// Cut by the stall watchdog and routed to recovery.
    Interrupted,
    /// Recovery parked or skipped the turn.
    Skipped,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
            Self::Skipped => "skipped",
        }
    }
}

impl EngineEvent {
    /// The event's name in timelines.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Boot { .. } => "boot",
            Self::UserMessageStored { .. } => "user-message.stored",
            Self::ChatRepeated { .. } => "chat.repeated",
            Self::TurnQueued { .. } => "turn.queued",
            Self::TurnStarted { .. } => "turn.start",
            Self::ModelCall { .. } => "model.call",
            Self::ToolReady { .. } => "tool.ready",
            Self::ToolApplied { .. } => "tool.applied",
            Self::ToolIgnored { .. } => "tool.ignored",
            Self::ServerToolStarted { .. } => "server-tool.start",
            Self::Repaired { .. } => "repair",
            Self::ContinuationPending { .. } => "continuation.pending",
            Self::ContinuationCoalesced => "continuation.coalesced",
            Self::ContinuationDeferred => "continuation.deferred",
            Self::CoalesceTimerArmed => "continuation.timer-armed",
            Self::ContinuationHeld { .. } => "continuation.held",
            Self::ContinuationFired { .. } => "continuation.fire",
            Self::StreamStalled { .. } => "stream.stalled",
            Self::EmptyFinish { .. } => "stream.empty-finish",
            Self::ProviderRetry { .. } => "provider.retry",
            Self::RecoveryScheduled { .. } => "recovery.scheduled",
            Self::RecoveryParked { .. } => "recovery.parked",
            Self::RecoverySkipped { .. } => "recovery.skipped",
            Self::RecoveryExhausted { .. } => "recovery.exhausted",
            Self::RecoveryCompleted { .. } => "recovery.completed",
            Self::TurnFinished { .. } => "turn.end",
            Self::StoreRefused => "store.refused",
            Self::DeliveryAccepted { .. } => "delivery.accepted",
            Self::DeliveryPostFailed { .. } => "delivery.post-failed",
            Self::HookFailed { .. } => "recovery.hook-failed",
        }
    }

    /// The event's fields, rendered for timelines.
    pub fn detail(&self) -> String {
        match self {
            Self::Boot { restored_intent, in_flight } => {
                format!("restored_intent={restored_intent} in_flight={}", in_flight.as_deref().unwrap_or("-"))
            }
            Self::UserMessageStored { message_id } => message_id.clone(),
            Self::ChatRepeated { key } => key.clone(),
            Self::TurnQueued { request_id, kind } => format!("{request_id} {}", kind.as_str()),
            Self::TurnStarted { request_id, kind, message_id } => {
                format!("{request_id} {} into {message_id}", kind.as_str())
            }
            Self::ModelCall { request_id, step, attempt } => format!("{request_id} step={step} attempt={attempt}"),
            Self::ToolReady { call_id, tool_name, state } => format!("{call_id} {tool_name} {}", state.as_str()),
            Self::ToolApplied { call_id, state, into, auto_continue } => {
                format!("{call_id} {} into={into} auto_continue={auto_continue}", state.as_str())
            }
            Self::ToolIgnored { call_id } | Self::ServerToolStarted { call_id } => call_id.clone(),
            Self::Repaired { call_ids } => call_ids.join(","),
            Self::ContinuationPending { message_id } => message_id.clone(),
            Self::ContinuationCoalesced
            | Self::ContinuationDeferred
            | Self::CoalesceTimerArmed
            | Self::StoreRefused => String::new(),
            Self::ContinuationHeld { reason } => reason.clone(),
            Self::ContinuationFired { request_id } => request_id.clone(),
            Self::StreamStalled { request_id, timeout_ms } => format!("{request_id} after {timeout_ms}ms"),
            Self::EmptyFinish { request_id, attempt, discarded_parts, discarded_tools } => {
                let tools = if discarded_tools.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", discarded_tools.join(","))
                };
                format!("{request_id} attempt={attempt} discarded={discarded_parts}{tools}")
            }
            Self::ProviderRetry { request_id, attempt, delay_ms, reason, discarded_parts, discarded_tools } => {
                let discarded = match (discarded_parts, discarded_tools.is_empty()) {
                    (0, _) => String::new(),
                    (parts, true) => format!(" discarded={parts}"),
                    (parts, false) => format!(" discarded={parts} ({})", discarded_tools.join(",")),
                };
                format!("{request_id} attempt={attempt} in {delay_ms}ms ({reason}){discarded}")
            }
            Self::RecoveryScheduled { incident_id, attempt, strategy } => {
                format!("{incident_id} attempt={attempt} strategy={strategy}")
            }
            Self::RecoveryParked { incident_id } | Self::RecoveryCompleted { incident_id } => incident_id.clone(),
            Self::RecoverySkipped { incident_id, reason } => format!("{incident_id} {reason}"),
            Self::RecoveryExhausted { incident_id, attempt, reason } => {
                format!("{incident_id} attempt={attempt} reason={reason}")
            }
            Self::TurnFinished { request_id, kind, status } => {
                format!("{request_id} {} {}", kind.as_str(), status.as_str())
            }
            Self::DeliveryAccepted { delivery_id, request_id } => format!("{delivery_id} {request_id}"),
            Self::DeliveryPostFailed { delivery_id: id, error } | Self::HookFailed { incident_id: id, error } => {
                format!("{id} {error:?}")
            }
        }
    }
}

//! Fault-space coverage: which fault kinds landed in which turn phase, over
//! a sweep. A table with an empty cell says where no run has looked yet.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use turnsim_engine::durable::TurnKind;
use turnsim_engine::EngineEvent;

use crate::trace::{Event, TraceEvent};

pub const PHASES: [&str; 8] = [
    "idle",
    "streaming",
    "server-tools",
    "continuation",
    "awaiting-client",
    "recovery-scheduled",
    "recovering",
    "engine-down",
];
pub const FAULTS: [&str; 7] = ["stall", "cut", "truncate", "http", "evict", "disconnect", "store"];

/// Counts of (phase, fault kind).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage(BTreeMap<(&'static str, &'static str), u64>);

impl Coverage {
    pub fn of_run(events: &[TraceEvent]) -> Self {
        let mut coverage = Self::default();
        let mut phase = PhaseTracker::default();
        for traced in events {
            if let Some(fault) = fault_kind(&traced.event) {
                *coverage.0.entry((phase.current(), fault)).or_default() += 1;
            }
            phase.absorb(&traced.event);
        }
        coverage
    }

    pub fn merge(&mut self, other: &Coverage) {
        for (key, count) in &other.0 {
            *self.0.entry(*key).or_default() += count;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = format!("{:<20}", "phase \\ fault");
        for fault in FAULTS {
            let _ = write!(out, "{fault:>11}");
        }
        out.push('\n');
        for phase in PHASES {
            let _ = write!(out, "{phase:<20}");
            for fault in FAULTS {
                let count = self.0.get(&(phase, fault)).copied().unwrap_or(0);
                let cell = if count == 0 { "-".to_string() } else { count.to_string() };
                let _ = write!(out, "{cell:>11}");
            }
            out.push('\n');
        }
        out
    }
}

fn fault_kind(event: &Event) -> Option<&'static str> {
    match event {
        Event::ModelEnd { how, .. } if how == "parked" => Some("stall"),
        Event::ModelEnd { how, .. } if how == "cut" => Some("cut"),
        Event::ModelEnd { how, .. } if how.starts_with("http") => Some("http"),
        Event::ModelChunk { chunk, .. } if chunk == "finish-step unknown out=0" => Some("truncate"),
        Event::Evicted => Some("evict"),
        Event::StoreRefused { .. } => Some("store"),
        Event::Action { what } if what.starts_with("disconnect") => Some("disconnect"),
        _ => None,
    }
}

#[derive(Default)]
struct PhaseTracker {
    turn: Option<TurnKind>,
    server_tools: bool,
    client_waiting: usize,
    recovery_scheduled: bool,
    engine_down: bool,
}

impl PhaseTracker {
    fn current(&self) -> &'static str {
        match self.turn {
            _ if self.engine_down => "engine-down",
            Some(TurnKind::Recovery) => "recovering",
            Some(_) if self.server_tools => "server-tools",
            Some(TurnKind::Continuation) => "continuation",
            Some(_) => "streaming",
            None if self.recovery_scheduled => "recovery-scheduled",
            None if self.client_waiting > 0 => "awaiting-client",
            None => "idle",
        }
    }

    fn absorb(&mut self, event: &Event) {
        match event {
            Event::Evicted => {
                self.engine_down = true;
                self.turn = None;
            }
            Event::Restarted => self.engine_down = false,
            Event::Engine(engine) => self.absorb_engine(engine),
            _ => {}
        }
    }

    fn absorb_engine(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::TurnStarted { kind, .. } => {
                self.turn = Some(*kind);
                self.recovery_scheduled &= *kind != TurnKind::Recovery;
            }
            EngineEvent::TurnFinished { .. } => {
                self.turn = None;
                self.server_tools = false;
            }
            EngineEvent::ServerToolStarted { .. } => self.server_tools = true,
            EngineEvent::ModelCall { .. } => self.server_tools = false,
            EngineEvent::ToolReady { state, .. } if state.is_pending() => self.client_waiting += 1,
            EngineEvent::ToolApplied { state, .. } if !state.is_pending() => {
                self.client_waiting = self.client_waiting.saturating_sub(1)
            }
            EngineEvent::Repaired { call_ids } => {
                self.client_waiting = self.client_waiting.saturating_sub(call_ids.len())
            }
            EngineEvent::RecoveryScheduled { .. } => self.recovery_scheduled = true,
            EngineEvent::RecoveryParked { .. }
            | EngineEvent::RecoverySkipped { .. }
            | EngineEvent::RecoveryExhausted { .. }
            | EngineEvent::RecoveryCompleted { .. } => self.recovery_scheduled = false,
            _ => {}
        }
    }
}

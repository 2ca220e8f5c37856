//! Invariant 1: each `chat()` callback sees `on_start`, then events, then
//! exactly one terminal callback and nothing after it — or a transport break
//! because the process died.

use super::Invariant;
use crate::check::{CheckInput, Violation};

pub const INVARIANT: Invariant = Invariant {
    name: "callback-contract",
    rule: "each chat() gets on_start, events, then exactly one of on_done/on_error/on_interrupted (or a transport break on eviction); on_exhausted runs once per exhausted incident",
    check,
};

const NAME: &str = "callback-contract";

fn check(input: &CheckInput) -> Vec<Violation> {
    let mut violations = exhausted_hooks(input);
    for (chat, callbacks) in &input.facts.callbacks {
        if let Some(violation) = check_chat(input, *chat, callbacks) {
            violations.push(violation);
        }
    }
    violations
}

fn check_chat(input: &CheckInput, chat: u32, callbacks: &[crate::check::facts::CallbackFact]) -> Option<Violation> {
    let mut terminal: Option<&str> = None;
    for (position, callback) in callbacks.iter().enumerate() {
        if let Some(first) = terminal {
            return Some(Violation::at(
                NAME,
                callback.at,
                format!("chat{chat}: {} after terminal {first}", callback.name),
            ));
        }
        match callback.name {
            "on_start" if position != 0 => {
                return Some(Violation::at(NAME, callback.at, format!("chat{chat}: on_start twice")))
            }
            "on_start" => {}
            "dropped" => return check_drop(input, chat, callback.at),
            _ if position == 0 => {
                return Some(Violation::at(NAME, callback.at, format!("chat{chat}: {} before on_start", callback.name)))
            }
            "on_event" => {}
            name => terminal = Some(name),
        }
    }
    if terminal.is_none() && input.run.end == crate::world::RunEnd::Quiescent {
        let at = callbacks.last().map(|callback| callback.at);
        let message = format!("chat{chat}: the run settled but the callback never got a terminal call");
        return Some(Violation { check: NAME.into(), message, at_event: at });
    }
    None
}

/// A callback dropped without a terminal call is a transport break only if
/// its process died: an eviction came after the chat began and before the
/// drop. (A killed process's tasks are dropped lazily, so the drop may be
/// traced after the restart; the callback cannot outlive its process.)
fn check_drop(input: &CheckInput, chat: u32, dropped_at: usize) -> Option<Violation> {
    // From the chat() call itself: an RPC sent into a dying process is
    // dropped before on_start, and that too is a transport break.
    let began = input.facts.chat_called.get(&chat).copied().unwrap_or(0);
    if input.facts.evicted_between(began, dropped_at) {
        return None;
    }
    let message =
        format!("chat{chat}: chat() returned with no terminal callback (no on_done, on_error or on_interrupted)");
    Some(Violation::at(NAME, dropped_at, message))
}

/// The host's `on_exhausted` runs exactly once for each incident recovery
/// gave up on, and never for one it did not.
fn exhausted_hooks(input: &CheckInput) -> Vec<Violation> {
    use std::collections::BTreeMap;
    use turnsim_engine::EngineEvent;
    let mut hooks: BTreeMap<&str, (usize, u32)> = BTreeMap::new();
    let mut exhausted: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, traced) in input.run.events.iter().enumerate() {
        match &traced.event {
            crate::trace::Event::OnExhausted { incident, .. } => hooks.entry(incident).or_insert((index, 0)).1 += 1,
            crate::trace::Event::Engine(EngineEvent::RecoveryExhausted { incident_id, .. }) => {
                exhausted.insert(incident_id, index);
            }
            _ => {}
        }
    }
    let mut violations = Vec::new();
    for (incident, at) in &exhausted {
        let calls = hooks.get(incident).map_or(0, |(_, calls)| *calls);
        if calls != 1 {
            violations.push(Violation::at(
                NAME,
                *at,
                format!("incident {incident} exhausted with {calls} on_exhausted calls"),
            ));
        }
    }
    for (incident, (at, _)) in &hooks {
        if !exhausted.contains_key(incident) {
            violations.push(Violation::at(
                NAME,
                *at,
                format!("on_exhausted for incident {incident}, which never exhausted"),
            ));
        }
    }
    violations
}

//! Invariant 1: each `chat()` callback sees `on_start`, then events, then
//! exactly one terminal callback and nothing after it — or a transport break
//! because the process died. And the host's `on_exhausted` hook runs once
//! per incident recovery gave up on, before anyone is told it gave up,
//! and is told the partial the store holds.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::{Role, ToolState};

use super::Invariant;
use crate::check::facts::CallbackFact;
use crate::check::store_cursor::StoreCursor;
use crate::check::{told_failure_since, CheckInput, Violation};
use crate::history::Boundary;
use crate::history::RunEnd;

pub const INVARIANT: Invariant = Invariant {
    name: "callback-contract",
    rule: "each chat() gets on_start, events, then exactly one of on_done/on_error/on_interrupted (or a transport break on eviction), and an interruption is taken on; on_exhausted runs once per exhausted incident",
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

fn check_chat(input: &CheckInput, chat: u32, callbacks: &[CallbackFact]) -> Option<Violation> {
    let mut terminal: Option<&str> = None;
    let (mut terminal_at, mut terminal_sent_at) = (0, 0);
    for (position, callback) in callbacks.iter().enumerate() {
        let at = callback.at;
        if let Some(first) = terminal {
            return Some(input.violation_at(NAME, at, format!("chat{chat}: {} after terminal {first}", callback.name)));
        }
        match callback.name {
            "on_start" if position != 0 => {
                return Some(input.violation_at(NAME, at, format!("chat{chat}: on_start twice")))
            }
            "on_start" => {}
            "dropped" => return check_drop(input, chat, at, position > 0),
            _ if position == 0 => {
                return Some(input.violation_at(NAME, at, format!("chat{chat}: {} before on_start", callback.name)))
            }
            "on_event" | "on_reset" => {}
            name => (terminal, terminal_at, terminal_sent_at) = (Some(name), at, callback.sent_at),
        }
    }
    if terminal == Some("on_interrupted") && input.run.end == RunEnd::Quiescent {
        return interruption_seen_through(input, chat, terminal_at, terminal_sent_at);
    }
    if terminal.is_none() && input.run.end == RunEnd::Quiescent {
        let at = callbacks.last().map(|callback| input.event_of(callback.at));
        let message = format!("chat{chat}: the run settled but the callback never got a terminal call");
        return Some(Violation { check: NAME.into(), message, at_event: at });
    }
    None
}

/// `on_interrupted` says the turn is not over: a recovery takes it on. Once
/// the run has settled, that must show: a model call made after it, a
/// failure someone was told, or a tool call the client still holds or
/// answered after it (the conversation is the client's to go on with).
/// Otherwise the caller was told "interrupted" and the partial stands as
/// the answer.
fn interruption_seen_through(input: &CheckInput, chat: u32, at: usize, sent_at: usize) -> Option<Violation> {
    let history = &input.run.history;
    // A model call, or the client acting on a tool call, after the engine
    // said it (a slow caller link may deliver it later).
    let went_on = history.crossings[sent_at..].iter().any(|crossing| {
        matches!(crossing.what, Boundary::ModelRequest { .. } | Boundary::ToolResult { .. } | Boundary::Approval { .. })
    });
    let waiting = || {
        input.final_store.messages.iter().flat_map(|message| message.tools()).any(|tool| {
            matches!(
                tool.state,
                ToolState::InputAvailable | ToolState::ApprovalRequested | ToolState::ApprovalResponded
            )
        })
    };
    if went_on || told_failure_since(history, sent_at) || waiting() {
        return None;
    }
    let message = format!(
        "chat{chat}: on_interrupted, then no recovery: no model call after it, no failure told, nothing waiting for the client"
    );
    Some(input.violation_at(NAME, at, message))
}

/// A callback dropped without a terminal call is a transport break only if
/// its process died: a kill came after the chat began and before the drop,
/// or the chat was sent while no process was up, or it never started and
/// raced a kill (the history records a chat as it reaches the link it was
/// sent on, which may be after the restart when the process it was sent to
/// died in the same instant).
/// (A killed process's tasks are dropped lazily, so the drop may cross
/// after the restart; the callback cannot outlive its process.)
fn check_drop(input: &CheckInput, chat: u32, dropped_at: usize, started: bool) -> Option<Violation> {
    // From the chat() call itself: an RPC sent into a dying process is
    // dropped before on_start, and that too is a transport break.
    let began = input.facts.chat_called.get(&chat).copied().unwrap_or(0);
    if input.facts.killed_between(began, dropped_at)
        || input.facts.down_at(began)
        || (!started && raced_a_kill(input, began))
    {
        return None;
    }
    let message =
        format!("chat{chat}: chat() returned with no terminal callback (no on_done, on_error or on_interrupted)");
    Some(input.violation_at(NAME, dropped_at, message))
}

fn raced_a_kill(input: &CheckInput, chat_at: usize) -> bool {
    let crossings = &input.run.history.crossings;
    let sent_us = crossings[chat_at].at_us;
    input.facts.kills.iter().any(|&killed| killed < chat_at && crossings[killed].at_us == sent_us)
}

/// The host's `on_exhausted` runs exactly once for each incident recovery
/// gave up on, and before a client is sent the terminal recovery message.
/// Once more is allowed after a kill that came before the store took a
/// record that the hook ran (the incident no longer owing it, or gone).
fn exhausted_hooks(input: &CheckInput) -> Vec<Violation> {
    let terminal = input.scenario.scenario.engine_config().recovery.terminal_message;
    let mut hooks: BTreeMap<&str, u32> = BTreeMap::new();
    // Incidents whose hook ran and whose record of it the store has not
    // taken: a process killed then calls it again after its restart (the
    // gap of a real call, at least once).
    let mut unrecorded: BTreeSet<&str> = BTreeSet::new();
    let mut may_repeat: BTreeSet<&str> = BTreeSet::new();
    let mut violations = Vec::new();
    let mut told_without_hook = false;
    // The store and the streamed text as of each crossing, kept up as the walk goes.
    let mut store = StoreCursor::new(input.run.history);
    let mut streamed = String::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        match &crossing.what {
            Boundary::ModelChunk { chunk: turnsim_engine::Chunk::TextDelta { delta, .. }, .. } => {
                streamed.push_str(delta)
            }
            Boundary::Commit { writes } => {
                for write in writes {
                    match write {
                        Write::PutIncident(incident) if incident.hook_owed.is_none() => {
                            unrecorded.remove(incident.id.as_str());
                        }
                        Write::RemoveIncident(id) => {
                            unrecorded.remove(id.as_str());
                        }
                        _ => {}
                    }
                }
            }
            Boundary::Killed => may_repeat.extend(std::mem::take(&mut unrecorded)),
            Boundary::Exhausted { context, .. } => {
                let id = context.incident_id.as_str();
                let calls = hooks.entry(id).or_default();
                *calls += 1;
                if may_repeat.remove(id) {
                    *calls = 1;
                }
                unrecorded.insert(id);
                if *calls == 2 {
                    let message = format!("on_exhausted called again for incident {}", context.incident_id);
                    violations.push(input.violation_at(NAME, index, message));
                }
                violations.extend(partial_told(input, store.at(index), &streamed, index, &context.partial_text));
            }
            Boundary::Frame { connection, frame: turnsim_engine::Frame::Error { message, .. } }
                if *message == terminal && hooks.is_empty() && !told_without_hook =>
            {
                told_without_hook = true;
                let message =
                    format!("client connection c{connection} was sent the terminal recovery message, but on_exhausted was never called");
                violations.push(input.violation_at(NAME, index, message));
            }
            _ => {}
        }
    }
    violations
}

/// The host is told the partial the interrupted turn left: the text of the
/// last assistant message the store holds when the hook runs, or that and
/// text the model streamed after it that was not flushed yet (an engine may
/// tell what it holds in memory). `streamed`: every text delta the model
/// streamed before the hook, joined.
fn partial_told(
    input: &CheckInput,
    store: &DurableState,
    streamed: &str,
    index: usize,
    told: &str,
) -> Option<Violation> {
    let partial = store.messages.iter().rev().find(|message| message.role == Role::Assistant);
    let partial = partial.map(|message| message.text()).unwrap_or_default();
    let unflushed = told.strip_prefix(partial.as_str()).filter(|rest| streamed.contains(rest));
    (told != partial && unflushed.is_none()).then(|| {
        let message = format!("on_exhausted was told the partial {told:?}; the store holds {partial:?}");
        input.violation_at(NAME, index, message)
    })
}

//! Load-time rules for the expectations that name boundary events and
//! client connections (`expect.counts`, `expect.connections`): a name no
//! boundary event carries, an engine's own event, a client the scenario
//! does not connect or a frame label the timeline never prints is an error
//! at its line, not an expectation that can never match.

use super::{ConnectionExpectation, Expect};
use crate::trace::{is_event_name, is_frame_label, EVENT_NAMES};

/// The timeline's lanes for what crosses the engine's boundary.
pub const BOUNDARY_LANES: [&str; 6] = ["model", "client", "caller", "messenger", "store", "tools"];

/// The first broken rule, as (YAML path, message).
pub fn check(
    expect: &Expect,
    clients: u32,
    horizon_ms: u64,
    tool_known: &dyn Fn(&str) -> bool,
) -> Option<(String, String)> {
    for name in expect.counts.keys() {
        if let Some(message) = count_name_problem(name) {
            return Some((format!("expect.counts.{name}"), message));
        }
    }
    for (index, connection) in expect.connections.iter().enumerate() {
        if let Some((field, message)) = connection_problem(connection, clients, horizon_ms, tool_known) {
            let at = format!("expect.connections[{index}]");
            return Some((if field.is_empty() { at } else { format!("{at}.{field}") }, message));
        }
    }
    None
}

/// Why `name` cannot be counted, with a hint; `None`: it names a boundary
/// event (`lane.event`).
fn count_name_problem(name: &str) -> Option<String> {
    let lanes = BOUNDARY_LANES.join(", ");
    if name == "on_exhausted" || name == "engine.on_exhausted" {
        return Some("the host hook is counted by `hooks: { on_exhausted: N }`".to_string());
    }
    if name.starts_with("world.") || EVENT_NAMES.contains(&("world", name)) {
        return Some(format!(
            "`{name}` is the world's own doing, not the engine's: counts name what crossed the engine's boundary \
             ({lanes})"
        ));
    }
    moment_name_problem(name, &Place { what: "counts", stored: false, chat_caller: true })
}

/// Where a moment is named, for a hint that names what is valid there.
pub struct Place {
    /// `counts`, `triggers` or `timings`.
    pub what: &'static str,
    /// Whether this place also takes `stored:` / `removed:` moments and a
    /// tool's `state` (triggers do; counts and timings do not).
    pub stored: bool,
    /// Whether the scenario calls `chat()`, so `caller.*` events happen.
    pub chat_caller: bool,
}

/// Why `name` cannot place a trigger or a timing bound, with a hint;
/// `None`: a boundary event (`lane.event`), the world's own
/// (`world.restart`), or the host hook's call (`engine.on_exhausted`).
pub fn moment_name_problem(name: &str, place: &Place) -> Option<String> {
    let what = place.what;
    let boundary = |lane: &str| BOUNDARY_LANES.contains(&lane) || lane == "world";
    let listed = |lane: &str, event: &str| EVENT_NAMES.contains(&(lane, event));
    if name == "engine.on_exhausted"
        || name.split_once('.').is_some_and(|(lane, event)| boundary(lane) && listed(lane, event))
    {
        return None;
    }
    let lanes = BOUNDARY_LANES.join(", ");
    if let Some((lane, event)) = EVENT_NAMES.iter().find(|(lane, event)| boundary(lane) && *event == name) {
        return Some(format!("`{name}` needs its lane: write `{lane}.{event}`"));
    }
    let engine_name = name.strip_prefix("engine.").unwrap_or(name);
    if is_event_name(engine_name) {
        let commit = "`store.commit` with its `nth` (the commit that stores it)";
        let hint = match engine_name {
            "user-message.stored" if place.stored => "`stored: user-message` (the commit that stores it)".to_string(),
            "recovery.scheduled" if place.stored => {
                "`stored: alarm` (the commit that stores the recovery's alarm)".to_string()
            }
            "tool.applied" | "tool.ready" if place.stored => {
                "`tool` + `state` (the commit that stores the call so)".to_string()
            }
            "user-message.stored" | "recovery.scheduled" | "tool.applied" | "tool.ready" => commit.to_string(),
            "continuation.fire" | "model.call" => {
                "`model.call` with its `nth` (the continuation's request)".to_string()
            }
            "turn.end" => {
                let ended = if place.chat_caller { "`caller.on_done`" } else { "`client.frame` (its `done`)" };
                format!(
                    "{ended}, or `store.commit` with `after: {{ event: model.chunk, nth: N }}` (a commit after the \
                     call's last chunk)"
                )
            }
            _ => format!("a boundary event on the lanes {lanes}"),
        };
        return Some(format!(
            "`{name}` is the engine's own event (what it says of itself): {what} name only what crossed its \
             boundary, so an engine that says nothing of itself is judged the same; use {hint}"
        ));
    }
    Some(format!(
        "no boundary event is named `{name}`: {what} name `lane.event` on the lanes {lanes} (`turnsim replay` \
         shows them)"
    ))
}

/// The first broken rule of one connection expectation, as (field, message).
fn connection_problem(
    expected: &ConnectionExpectation,
    clients: u32,
    horizon_ms: u64,
    tool_known: &dyn Fn(&str) -> bool,
) -> Option<(String, String)> {
    let problem = |field: &str, message: String| Some((field.to_string(), message));
    if expected.client == 0 || expected.client > clients {
        let message =
            format!("client {}: the scenario connects clients 1 to {clients} (`client.connections`)", expected.client);
        return problem("client", message);
    }
    if expected.connection == Some(0) {
        return problem("connection", "`connection` counts a client's connections from 1".to_string());
    }
    if let Some(at_ms) = expected.at_ms.filter(|at_ms| *at_ms > horizon_ms) {
        return problem("at_ms", format!("at_ms ({at_ms}) is past the run's horizon ({horizon_ms} ms)"));
    }
    if expected.tools.is_empty() && expected.received.is_empty() && expected.not_received.is_empty() {
        return problem(
            "",
            "a connection with nothing to check: give `tools`, `received` or `not_received`".to_string(),
        );
    }
    if let Some(id) = expected.tools.keys().find(|id| !tool_known(id)) {
        return problem(&format!("tools.{id}"), format!("no model script or stored message has a tool call `{id}`"));
    }
    let labels = [("received", &expected.received), ("not_received", &expected.not_received)];
    for (field, list) in labels {
        if let Some((index, label)) = list.iter().enumerate().find(|(_, label)| !is_frame_label(label)) {
            let message = format!(
                "`{label}` is not a frame label: the timeline prints frames as `done rN`, `error rN \"...\"`, \
                 `recovering=true`/`false`, `reset rN`, `stream-resuming rN`, `resume-none` (tool states go in `tools`)"
            );
            return problem(&format!("{field}[{index}]"), message);
        }
    }
    let both = |forbidden: &String| {
        expected.received.iter().any(|required| {
            ConnectionExpectation::names(required, forbidden) || ConnectionExpectation::names(forbidden, required)
        })
    };
    if let Some((index, label)) = expected.not_received.iter().enumerate().find(|(_, label)| both(label)) {
        let message = format!("`{label}` is both required (`received`) and forbidden: no run can hold both");
        return problem(&format!("not_received[{index}]"), message);
    }
    None
}

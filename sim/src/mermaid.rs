//! A run's timeline as a Mermaid sequence diagram, which GitHub renders in
//! Markdown: one lane for each part of the world that took part, an open model
//! stream as an activation on the model lane, and each violation as a red note
//! at the event where it shows.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::check::Violation;
use crate::trace::{Event, Lane, TraceEvent};

/// The lanes in the order they are drawn, with the id Mermaid knows them by
/// and the label it shows.
const PARTICIPANTS: [(Lane, &str, &str); 8] = [
    (Lane::World, "World", "world"),
    (Lane::Client, "Client", "client"),
    (Lane::Caller, "Caller", "chat() caller"),
    (Lane::Messenger, "Messenger", "messenger"),
    (Lane::Engine, "Engine", "engine"),
    (Lane::Model, "Model", "model"),
    (Lane::Tools, "Tools", "tools"),
    (Lane::Store, "Store", "store"),
];

/// The background of a violation's note.
const FAILURE_FILL: &str = "rgb(255, 200, 200)";

/// What a note spans: some lanes, or every lane drawn.
#[derive(Clone, Copy, Debug)]
enum Span {
    Lanes(Lane, Lane),
    Everything,
}

/// One statement of the diagram before lanes are chosen.
#[derive(Clone, Debug)]
enum Item {
    Message {
        from: Lane,
        arrow: &'static str,
        to: Lane,
        text: String,
    },
    Note {
        over: Span,
        text: String,
    },
    Activate,
    Deactivate,
    /// A violation: the event where it shows (if any) and the failure note,
    /// drawn on a red background.
    Failure {
        event: Option<Box<Item>>,
        over: Span,
        text: String,
    },
}

/// Events drawn as a count rather than one arrow each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collapsed {
    ModelDeltas,
    CallerEvents,
}

/// A run of collapsed events not yet drawn.
struct Pending {
    kind: Collapsed,
    count: u32,
    at_us: u64,
}

/// The diagram of `events`, with a red note for each of `violations`.
pub fn render(events: &[TraceEvent], violations: &[Violation]) -> String {
    let items = items(events, violations);
    let lanes = lanes_used(&items);
    let mut out = String::from("sequenceDiagram\n");
    for (lane, id, label) in PARTICIPANTS {
        if lanes.contains(&lane) {
            let _ = writeln!(out, "    participant {id} as {label}");
        }
    }
    for item in &items {
        write_item(&mut out, item, &lanes);
    }
    out
}

fn items(events: &[TraceEvent], violations: &[Violation]) -> Vec<Item> {
    let mut items = Vec::new();
    let mut pending: Option<Pending> = None;
    let mut open_streams: BTreeSet<u32> = BTreeSet::new();
    for (index, traced) in events.iter().enumerate() {
        let failing: Vec<&Violation> =
            violations.iter().filter(|violation| violation.at_event == Some(index)).collect();
        let collapsed = collapsed_kind(&traced.event);
        match (collapsed, &mut pending) {
            (Some(kind), Some(run)) if run.kind == kind && failing.is_empty() => run.count += 1,
            (Some(kind), _) if failing.is_empty() => {
                flush(&mut items, pending.take());
                pending = Some(Pending { kind, count: 1, at_us: traced.at_us });
            }
            _ => {
                flush(&mut items, pending.take());
                let item = item_for(traced);
                if failing.is_empty() {
                    items.push(item);
                } else {
                    let over = span_of(&item);
                    let mut event = Some(Box::new(item));
                    for violation in failing {
                        let text = format!("FAILED {} (event {})", describe(violation), index + 1);
                        items.push(Item::Failure { event: event.take(), over, text: escape(&text) });
                    }
                }
            }
        }
        track_stream(&mut items, &mut open_streams, &traced.event);
    }
    flush(&mut items, pending);
    // A run can end with a stream still open: close its activation so the
    // diagram stays balanced.
    items.extend(open_streams.iter().map(|_| Item::Deactivate));
    for violation in violations.iter().filter(|violation| violation.at_event.is_none_or(|at| at >= events.len())) {
        let text = format!("FAILED {}", describe(violation));
        items.push(Item::Failure { event: None, over: Span::Everything, text: escape(&text) });
    }
    items
}

fn describe(violation: &Violation) -> String {
    format!("{}: {}", violation.check, violation.message)
}

/// Opens an activation when the engine calls the model and closes it when its stream ends: a finish, a cut, an HTTP error, the
/// engine letting go, or the engine process dying. A parked stream stays
/// open: it never resolves, which is what a stall looks like.
fn track_stream(items: &mut Vec<Item>, open: &mut BTreeSet<u32>, event: &Event) {
    let closes = match event {
        Event::ModelCall { call, .. } => {
            if open.insert(*call) {
                items.push(Item::Activate);
            }
            return;
        }
        Event::ModelChunk { call, chunk, .. } if chunk.starts_with("finish-step") => vec![*call],
        Event::ModelEnd { call, how } if how != "parked" => vec![*call],
        Event::ModelRejected { call, .. } => vec![*call],
        Event::Evicted => open.iter().copied().collect(),
        _ => return,
    };
    for call in closes {
        if open.remove(&call) {
            items.push(Item::Deactivate);
        }
    }
}

fn collapsed_kind(event: &Event) -> Option<Collapsed> {
    match event {
        Event::ModelChunk { chunk, .. } if chunk.contains("-delta") => Some(Collapsed::ModelDeltas),
        Event::CallbackEvent { .. } => Some(Collapsed::CallerEvents),
        _ => None,
    }
}

fn flush(items: &mut Vec<Item>, pending: Option<Pending>) {
    let Some(run) = pending else { return };
    let at = timestamp(run.at_us);
    let item = match run.kind {
        Collapsed::ModelDeltas => {
            let plural = if run.count == 1 { "delta" } else { "deltas" };
            message(Lane::Model, "-->>", Lane::Engine, &format!("{at} {} {plural}", run.count))
        }
        Collapsed::CallerEvents => message(Lane::Engine, "-->>", Lane::Caller, &format!("{at} {} on_event", run.count)),
    };
    items.push(item);
}

fn timestamp(at_us: u64) -> String {
    let millis = at_us / 1_000;
    format!("{}.{:03}s", millis / 1_000, millis % 1_000)
}

fn message(from: Lane, arrow: &'static str, to: Lane, text: &str) -> Item {
    Item::Message { from, arrow, to, text: escape(text) }
}

fn note(over: Span, text: &str) -> Item {
    Item::Note { over, text: escape(text) }
}

/// The statement drawing one event.
fn item_for(traced: &TraceEvent) -> Item {
    let at = timestamp(traced.at_us);
    let event = &traced.event;
    let detail = event.detail();
    let named = format!("{at} {} {detail}", event.name()).trim_end().to_string();
    let bare = format!("{at} {detail}").trim_end().to_string();
    match event {
        Event::ModelCall { .. } => message(Lane::Engine, "->>", Lane::Model, &bare),
        Event::ModelChunk { .. } => message(Lane::Model, "-->>", Lane::Engine, &bare),
        Event::ModelEnd { .. } | Event::ModelRejected { .. } => message(Lane::Model, "-->>", Lane::Engine, &named),
        Event::StoreCommit { .. } => message(Lane::Engine, "->>", Lane::Store, &bare),
        Event::StoreRefused { .. } => message(Lane::Engine, "-x", Lane::Store, &named),
        Event::MessengerPost { .. } => message(Lane::Engine, "->>", Lane::Messenger, &bare),
        Event::MessengerPostRefused { .. } => message(Lane::Engine, "-x", Lane::Messenger, &named),
        Event::ServerToolRun { .. } => message(Lane::Engine, "->>", Lane::Tools, &named),
        Event::ClientSent { .. }
        | Event::ClientConnected { .. }
        | Event::ClientDisconnected { .. }
        | Event::ClientResumed { .. } => message(Lane::Client, "->>", Lane::Engine, &named),
        Event::ClientSendFailed { .. } => message(Lane::Client, "-x", Lane::Engine, &named),
        Event::ClientAsked { .. } => message(Lane::Client, "->>", Lane::Engine, &named),
        Event::ClientSawTool { .. } | Event::ClientFrame { .. } => message(Lane::Engine, "-->>", Lane::Client, &bare),
        Event::ChatCalled { .. } => message(Lane::Caller, "->>", Lane::Engine, &format!("{at} chat()")),
        Event::ChatArrived { .. } => message(Lane::Caller, "->>", Lane::Engine, &named),
        Event::CallbackStart { .. }
        | Event::CallbackEvent { .. }
        | Event::CallbackReset { .. }
        | Event::CallbackDone { .. }
        | Event::CallbackError { .. }
        | Event::CallbackInterrupted { .. }
        | Event::CallbackDropped { .. } => message(Lane::Engine, "-->>", Lane::Caller, &named),
        Event::Action { .. } | Event::Evicted | Event::Restarted => note(Span::Everything, &named),
        Event::Engine(_) | Event::OnExhausted { .. } => note(Span::Lanes(Lane::Engine, Lane::Engine), &named),
    }
}

/// The lanes a failure note about `item` spans.
fn span_of(item: &Item) -> Span {
    match item {
        Item::Message { from, to, .. } => Span::Lanes(*from.min(to), *from.max(to)),
        Item::Note { over, .. } | Item::Failure { over, .. } => *over,
        Item::Activate | Item::Deactivate => Span::Lanes(Lane::Model, Lane::Model),
    }
}

fn lanes_used(items: &[Item]) -> BTreeSet<Lane> {
    let mut lanes = BTreeSet::new();
    let add = |item: &Item, lanes: &mut BTreeSet<Lane>| match item {
        Item::Message { from, to, .. } => {
            lanes.insert(*from);
            lanes.insert(*to);
        }
        Item::Note { over: Span::Lanes(first, last), .. } => {
            lanes.insert(*first);
            lanes.insert(*last);
        }
        Item::Activate | Item::Deactivate => {
            lanes.insert(Lane::Model);
        }
        Item::Note { over: Span::Everything, .. } | Item::Failure { .. } => {}
    };
    for item in items {
        add(item, &mut lanes);
        if let Item::Failure { event, over, .. } = item {
            if let Some(event) = event {
                add(event, &mut lanes);
            }
            if let Span::Lanes(first, last) = over {
                lanes.insert(*first);
                lanes.insert(*last);
            }
        }
    }
    // World events are notes across the lanes that took part; with no other
    // lane they get their own.
    if lanes.is_empty() && !items.is_empty() {
        lanes.insert(Lane::World);
    }
    lanes
}

fn id(lane: Lane) -> &'static str {
    PARTICIPANTS.iter().find(|(candidate, ..)| *candidate == lane).map_or("World", |(_, id, _)| id)
}

fn over(span: Span, lanes: &BTreeSet<Lane>) -> String {
    let (first, last) = match span {
        Span::Lanes(first, last) => (first, last),
        Span::Everything => {
            (lanes.first().copied().unwrap_or(Lane::World), lanes.last().copied().unwrap_or(Lane::World))
        }
    };
    if first == last {
        id(first).to_string()
    } else {
        format!("{},{}", id(first), id(last))
    }
}

fn write_item(out: &mut String, item: &Item, lanes: &BTreeSet<Lane>) {
    match item {
        Item::Message { from, arrow, to, text } => {
            let _ = writeln!(out, "    {}{arrow}{}: {text}", id(*from), id(*to));
        }
        Item::Note { over: span, text } => {
            let _ = writeln!(out, "    Note over {}: {text}", over(*span, lanes));
        }
        Item::Activate => out.push_str("    activate Model\n"),
        Item::Deactivate => out.push_str("    deactivate Model\n"),
        Item::Failure { event, over: span, text } => {
            let _ = writeln!(out, "    rect {FAILURE_FILL}");
            if let Some(event) = event {
                write_item(out, event, lanes);
            }
            let _ = writeln!(out, "    Note over {}: {text}", over(*span, lanes));
            out.push_str("    end\n");
        }
    }
}

/// Label text in Mermaid's entity codes, escaped once: `#` opens an entity
/// and `;` ends a statement (either cuts a label short), `:` would let
/// Mermaid's `style …:…#…;` preprocessing eat a character, `<`, `>`, `&`
/// and quotes would be read as markup, and a newline would end the statement.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '#' => out.push_str("#35;"),
            ';' => out.push_str("#59;"),
            ':' => out.push_str("#58;"),
            '"' => out.push_str("#34;"),
            '\'' => out.push_str("#39;"),
            '&' => out.push_str("#38;"),
            '<' => out.push_str("#60;"),
            '>' => out.push_str("#62;"),
            '\n' => out.push_str("<br/>"),
            '\r' => {}
            other => out.push(other),
        }
    }
    out
}

//! A run's timeline as a Mermaid sequence diagram (client, caller, messenger,
//! engine, model and store lanes), which GitHub renders in Markdown.

use std::fmt::Write as _;

use crate::trace::{Event, Lane, TraceEvent};

const PARTICIPANTS: [(&str, &str); 6] = [
    ("Client", "client"),
    ("Caller", "chat() caller"),
    ("Messenger", "messenger"),
    ("Engine", "engine"),
    ("Model", "model"),
    ("Store", "store"),
];

pub fn render(events: &[TraceEvent]) -> String {
    let mut out = String::from("sequenceDiagram\n");
    for (id, label) in PARTICIPANTS {
        let _ = writeln!(out, "    participant {id} as {label}");
    }
    let mut deltas = 0u32;
    for traced in events {
        if is_delta(&traced.event) {
            deltas += 1;
            continue;
        }
        if deltas > 0 {
            let _ = writeln!(out, "    Model-->>Engine: {deltas} deltas");
            deltas = 0;
        }
        if let Some(line) = line_for(traced) {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

fn is_delta(event: &Event) -> bool {
    matches!(event, Event::ModelChunk { chunk, .. } if chunk.contains("-delta"))
        || matches!(event, Event::CallbackEvent { .. })
}

fn line_for(traced: &TraceEvent) -> Option<String> {
    let millis = traced.at_us / 1_000;
    let at = format!("{}.{:03}s", millis / 1_000, millis % 1_000);
    let text = |detail: String| sanitise(&format!("{at} {detail}"));
    let line = match &traced.event {
        Event::ModelCall { .. } => format!("Engine->>Model: {}", text(traced.event.detail())),
        Event::ModelChunk { .. } | Event::ModelEnd { .. } | Event::ModelRejected { .. } => {
            format!("Model-->>Engine: {}", text(traced.event.detail()))
        }
        Event::StoreCommit { .. } => format!("Engine->>Store: {}", text(traced.event.detail())),
        Event::MessengerPost { .. } => format!("Engine->>Messenger: {}", text(traced.event.detail())),
        Event::ClientSent { .. } | Event::ClientConnected { .. } | Event::ClientDisconnected { .. } => {
            format!("Client->>Engine: {}", text(format!("{} {}", traced.event.name(), traced.event.detail())))
        }
        Event::ClientSawTool { .. } | Event::ClientFrame { .. } => {
            format!("Engine-->>Client: {}", text(traced.event.detail()))
        }
        Event::ChatCalled { .. } => format!("Caller->>Engine: {}", text("chat()".into())),
        _ if traced.lane == Lane::Caller => format!("Engine-->>Caller: {}", text(traced.event.name().to_string())),
        Event::Evicted | Event::Restarted | Event::Action { .. } => {
            format!("Note over Client,Store: {}", text(format!("{} {}", traced.event.name(), traced.event.detail())))
        }
        Event::Engine(_) | Event::ServerToolRun { .. } => {
            format!("Note over Engine: {}", text(format!("{} {}", traced.event.name(), traced.event.detail())))
        }
        _ => return None,
    };
    Some(line)
}

/// Mermaid message text cannot hold `;`, `#` or newlines.
fn sanitise(text: &str) -> String {
    text.replace('#', "#35;").replace(';', "#59;").replace('\n', " ")
}

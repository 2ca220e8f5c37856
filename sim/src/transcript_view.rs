//! The stored transcript as text a person reads after a replay's timeline:
//! one line per message, one indented line per part.

use std::fmt::Write as _;

use turnsim_engine::transcript::{Message, Part, Role, TextState, ToolPart};

pub fn render(messages: &[Message]) -> String {
    let mut out = String::new();
    if messages.is_empty() {
        out.push_str("  (no messages)\n");
    }
    for message in messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let _ = writeln!(out, "  {} {role}", message.id);
        for part in &message.parts {
            let _ = writeln!(out, "    {}", part_line(part));
        }
    }
    out
}

pub fn part_line(part: &Part) -> String {
    match part {
        Part::StepStart => "step-start".to_string(),
        Part::Text { text, state, .. } => format!("text {text:?}{}", streaming(*state)),
        Part::Reasoning { text, state, .. } => format!("reasoning {text:?}{}", streaming(*state)),
        Part::Tool(tool) => tool_line(tool),
    }
}

fn streaming(state: TextState) -> &'static str {
    match state {
        TextState::Streaming => " (streaming)",
        TextState::Done => "",
    }
}

fn tool_line(tool: &ToolPart) -> String {
    let mut line = format!("tool {} {} {}", tool.call_id, tool.tool_name, tool.state.as_str());
    if let Some(output) = &tool.output {
        let _ = write!(line, " output {output}");
    }
    if let Some(error) = &tool.error_text {
        let _ = write!(line, " error {error:?}");
    }
    if tool.repaired {
        line.push_str(" (repaired)");
    }
    if tool.dynamic {
        line.push_str(" (dynamic)");
    }
    line
}

//! A replayed run as one self-contained HTML page, for an engineer who opens
//! it from a CI artifact: the failed checks at the top, each linked to its
//! event; the lanes side by side in sim-time order; any event's full JSON on
//! click; the final stored transcript; the command that replays the run.
//!
//! Everything is inline (styles, script, data) and the page's content
//! security policy forbids loading anything, so it works offline and cannot
//! call out. Every piece of run text (model output above all) goes through
//! [`escape`], so it can never become markup.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use turnsim_engine::{Part, RegressionSet};

use crate::check::Violation;
use crate::runner;
use crate::scenario::ScenarioFile;
use crate::trace::{Lane, TraceEvent};
use crate::world::RunRecord;

/// Lanes in column order.
const LANES: [Lane; 8] =
    [Lane::World, Lane::Client, Lane::Caller, Lane::Messenger, Lane::Engine, Lane::Model, Lane::Tools, Lane::Store];

const STYLE: &str = r#"
:root { --line: #d0d7de; --muted: #57606a; --fail: #ffd7d5; --fail-edge: #cf222e; --pick: #ddf4ff; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1f2328; background: #fff; }
header, #violations, #transcript { padding: 12px 20px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 8px; }
.meta { color: var(--muted); margin: 0 0 6px; }
code, pre, .cell, .time, .number { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
#replay-command { background: #f6f8fa; border: 1px solid var(--line); padding: 2px 6px; user-select: all; }
#violations.failed { background: var(--fail); border-top: 3px solid var(--fail-edge); border-bottom: 1px solid var(--fail-edge); }
#violations.passed { background: #dafbe1; border-bottom: 1px solid #4ac26b; }
.violation .check { color: var(--fail-edge); }
.violation a { color: inherit; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 420px; gap: 0; border-top: 1px solid var(--line); }
#timeline-wrap { overflow: auto; max-height: 75vh; }
table { border-collapse: collapse; width: 100%; }
th { position: sticky; top: 0; background: #f6f8fa; border-bottom: 1px solid var(--line); text-align: left; padding: 4px 6px; z-index: 1; }
td { border-bottom: 1px solid #eaeef2; padding: 2px 6px; vertical-align: top; }
td + td, th + th { border-left: 1px solid #eaeef2; }
.number, .time { color: var(--muted); white-space: nowrap; text-align: right; }
.cell { word-break: break-word; min-width: 90px; }
.cell .name { font-weight: 600; }
tr.event { cursor: pointer; }
tr.event:hover { background: #f6f8fa; }
tr.selected, tr.selected:hover { background: var(--pick); }
tr.violating, tr.violating:hover { background: var(--fail); }
tr.violating td:first-child { border-left: 4px solid var(--fail-edge); }
.flag { color: var(--fail-edge); font-weight: 700; }
#details { border-left: 1px solid var(--line); padding: 12px; position: sticky; top: 0; align-self: start; max-height: 75vh; overflow: auto; }
#details pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: 8px; margin: 0; }
#transcript { border-top: 1px solid var(--line); }
.message { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 8px; padding: 6px 10px; }
.message h3 { font-size: 13px; margin: 0 0 4px; }
.message ol { margin: 0; padding-left: 20px; }
.message pre { display: inline; white-space: pre-wrap; }
.role-user { background: #f6f8fa; }
"#;

const SCRIPT: &str = r#"
(function () {
  var timeline = document.getElementById('timeline-wrap');
  var number = document.getElementById('details-number');
  var json = document.getElementById('details-json');
  function show(row) {
    document.querySelectorAll('tr.selected').forEach(function (other) { other.classList.remove('selected'); });
    row.classList.add('selected');
    number.textContent = row.dataset.number + ' at ' + row.dataset.time;
    json.textContent = row.querySelector('pre.json').textContent;
  }
  // Scrolls the timeline, not the page, so the header and the failed checks stay in view.
  function reveal(row) {
    var offset = row.getBoundingClientRect().top - timeline.getBoundingClientRect().top;
    timeline.scrollTop += offset - timeline.clientHeight / 2 + row.offsetHeight / 2;
  }
  function select(id) {
    var row = id ? document.getElementById(id) : null;
    if (!row || !row.classList.contains('event')) { row = document.querySelector('tr.violating'); }
    if (row) { show(row); reveal(row); }
  }
  document.querySelectorAll('tr.event').forEach(function (row) {
    row.addEventListener('click', function () {
      show(row);
      history.replaceState(null, '', '#' + row.id);
    });
  });
  document.querySelectorAll('#violations a').forEach(function (link) {
    link.addEventListener('click', function (click) {
      click.preventDefault();
      var id = link.getAttribute('href').slice(1);
      history.replaceState(null, '', '#' + id);
      select(id);
    });
  });
  window.addEventListener('hashchange', function () { select(location.hash.slice(1)); });
  select(location.hash.slice(1));
  window.scrollTo(0, 0);
})();
"#;

/// The page for one replayed run.
pub fn render(
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    record: &RunRecord,
    violations: &[Violation],
) -> String {
    let name = &scenario.scenario.name;
    let mut page = String::with_capacity(4096 + record.events.len() * 600);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n",
    );
    let verdict = if violations.is_empty() { "passed" } else { "FAILED" };
    let _ = writeln!(page, "<title>{verdict}: {} seed {seed} (turnsim replay)</title>", escape(name));
    let _ = writeln!(page, "<style>{STYLE}</style>\n</head>\n<body>");
    write_header(&mut page, scenario, seed, regressions, record);
    write_violations(&mut page, record, violations);
    page.push_str("<main>\n");
    write_timeline(&mut page, &record.events, violations);
    page.push_str(
        "<aside id=\"details\"><h2>Event <span id=\"details-number\">(none chosen)</span></h2>\
         <pre id=\"details-json\">Click an event to see it in full.</pre></aside>\n",
    );
    page.push_str("</main>\n");
    write_transcript(&mut page, record);
    let _ = writeln!(page, "<script>{SCRIPT}</script>\n</body>\n</html>");
    page
}

fn write_header(
    page: &mut String,
    scenario: &ScenarioFile,
    seed: u64,
    regressions: &RegressionSet,
    record: &RunRecord,
) {
    let names: Vec<String> = regressions.iter().map(|regression| regression.to_string()).collect();
    let shown = if names.is_empty() { "none".to_string() } else { names.join(", ") };
    let _ = writeln!(
        page,
        "<header>\n<h1>{} <span class=\"meta\">seed {seed}</span></h1>",
        escape(&scenario.scenario.name)
    );
    let _ = writeln!(
        page,
        "<p class=\"meta\">{} · regressions: {} · end: {:?} after {} ms of sim time · {} events</p>",
        escape(&scenario.path.display().to_string()),
        escape(&shown),
        record.end,
        record.sim_ms,
        record.events.len()
    );
    if let Some(panic) = &record.panic {
        let _ = writeln!(page, "<p class=\"flag\">panicked: {}</p>", escape(panic));
    }
    let command = runner::replay_command(scenario, seed, regressions);
    let _ = writeln!(page, "<p>replay: <code id=\"replay-command\">{}</code></p>\n</header>", escape(&command));
}

fn write_violations(page: &mut String, record: &RunRecord, violations: &[Violation]) {
    if violations.is_empty() {
        page.push_str("<section id=\"violations\" class=\"passed\"><h2>All checks passed</h2></section>\n");
        return;
    }
    let count = violations.len();
    let _ = writeln!(
        page,
        "<section id=\"violations\" class=\"failed\">\n<h2>{count} check{} failed</h2>\n<ul>",
        if count == 1 { "" } else { "s" }
    );
    for violation in violations {
        let check = escape(&violation.check);
        let message = escape(&violation.message);
        match violation.at_event.and_then(|at| record.events.get(at).map(|event| (at, event))) {
            Some((at, event)) => {
                let _ = writeln!(
                    page,
                    "<li class=\"violation\"><strong class=\"check\">{check}</strong>: {message} \
                     <a href=\"#event-{number}\">(event {number} at {time})</a></li>",
                    number = at + 1,
                    time = timestamp(event.at_us),
                );
            }
            None => {
                let _ =
                    writeln!(page, "<li class=\"violation\"><strong class=\"check\">{check}</strong>: {message}</li>");
            }
        }
    }
    page.push_str("</ul>\n</section>\n");
}

fn write_timeline(page: &mut String, events: &[TraceEvent], violations: &[Violation]) {
    let present: BTreeSet<Lane> = events.iter().map(|event| event.lane).collect();
    let lanes: Vec<Lane> = LANES.into_iter().filter(|lane| present.contains(lane)).collect();
    page.push_str("<div id=\"timeline-wrap\">\n<table id=\"timeline\">\n<thead><tr><th>#</th><th>time</th>");
    for lane in &lanes {
        let _ = write!(page, "<th class=\"lane-{lane}\">{lane}</th>", lane = lane.as_str());
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    for (index, traced) in events.iter().enumerate() {
        let failed: Vec<&str> = violations
            .iter()
            .filter(|violation| violation.at_event == Some(index))
            .map(|violation| violation.check.as_str())
            .collect();
        let number = index + 1;
        let time = timestamp(traced.at_us);
        let class = if failed.is_empty() { "event" } else { "event violating" };
        let _ = write!(
            page,
            "<tr id=\"event-{number}\" class=\"{class}\" data-number=\"{number}\" data-time=\"{time}\">\
             <td class=\"number\">{number}</td><td class=\"time\">{time}</td>"
        );
        for lane in &lanes {
            if *lane != traced.lane {
                page.push_str("<td></td>");
                continue;
            }
            let _ = write!(
                page,
                "<td class=\"cell lane-{}\"><span class=\"name\">{}</span> {}",
                lane.as_str(),
                escape(traced.event.name()),
                escape(&traced.event.detail())
            );
            for check in &failed {
                let _ = write!(page, " <span class=\"flag\">✗ {}</span>", escape(check));
            }
            let json = serde_json::to_string_pretty(traced).unwrap_or_else(|error| format!("unserialisable: {error}"));
            let _ = write!(page, "<pre class=\"json\" hidden>{}</pre></td>", escape(&json));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody>\n</table>\n</div>\n");
}

fn write_transcript(page: &mut String, record: &RunRecord) {
    page.push_str("<section id=\"transcript\">\n<h2>Final stored transcript</h2>\n");
    let state = &record.final_state;
    if state.messages.is_empty() {
        page.push_str("<p class=\"meta\">No messages were stored.</p>\n");
    }
    for message in &state.messages {
        let role = format!("{:?}", message.role).to_lowercase();
        let _ = writeln!(
            page,
            "<article class=\"message role-{role}\"><h3>{} · {role}</h3>\n<ol>",
            escape(&message.id),
            role = escape(&role)
        );
        for part in &message.parts {
            let _ = writeln!(page, "<li>{}</li>", part_html(part));
        }
        page.push_str("</ol></article>\n");
    }
    if let Some(status) = &state.terminal_status {
        let text = serde_json::to_string(status).unwrap_or_default();
        let _ = writeln!(page, "<p>terminal status: <code>{}</code></p>", escape(&text));
    }
    let full = serde_json::to_string_pretty(state).unwrap_or_default();
    let _ = writeln!(
        page,
        "<details><summary>The whole durable state (JSON)</summary><pre>{}</pre></details>\n</section>",
        escape(&full)
    );
}

fn part_html(part: &Part) -> String {
    match part {
        Part::StepStart => "<span class=\"meta\">step start</span>".to_string(),
        Part::Text { text, state, .. } => {
            format!("text ({}): <pre>{}</pre>", escape(&format!("{state:?}").to_lowercase()), escape(text))
        }
        Part::Reasoning { text, state, .. } => {
            format!("reasoning ({}): <pre>{}</pre>", escape(&format!("{state:?}").to_lowercase()), escape(text))
        }
        Part::Tool(tool) => {
            let mut line = format!(
                "tool <code>{}</code> {} <strong>{}</strong>",
                escape(&tool.call_id),
                escape(&tool.tool_name),
                escape(tool.state.as_str())
            );
            if let Some(input) = &tool.input {
                let _ = write!(line, " input <code>{}</code>", escape(&input.to_string()));
            }
            if let Some(output) = &tool.output {
                let _ = write!(line, " output <code>{}</code>", escape(&output.to_string()));
            }
            if let Some(error) = &tool.error_text {
                let _ = write!(line, " error <code>{}</code>", escape(error));
            }
            if tool.repaired {
                line.push_str(" <span class=\"flag\">repaired</span>");
            }
            line
        }
    }
}

fn timestamp(at_us: u64) -> String {
    let millis = at_us / 1_000;
    format!("{}.{:03}s", millis / 1_000, millis % 1_000)
}

/// Text as HTML text or attribute value: nothing in it can open a tag,
/// close an attribute or start an entity.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

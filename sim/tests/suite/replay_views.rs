//! The replay's Mermaid diagram and HTML page: labels escaped once, the
//! failure drawn where it shows, balanced activations, only the lanes that
//! took part, and no way for run text to become markup.

use std::collections::BTreeSet;

use turnsim::check::Violation;
use turnsim::runner::run_one;
use turnsim::trace::{Event, Lane, TraceEvent};
use turnsim_engine::{Regression, RegressionSet};

use crate::common::{all_scenarios, inline, scenario};

fn failing_replay() -> (turnsim::scenario::ScenarioFile, RegressionSet, turnsim::world::RunRecord, Vec<Violation>) {
    let file = scenario("errored-sibling-completes-batch");
    let regressions = RegressionSet::of([Regression::NoErroredSiblingRearm]);
    let (record, violations) = run_one(&file, 0, &regressions);
    assert!(!violations.is_empty(), "the regression must make seed 0 fail");
    (file, regressions, record, violations)
}

fn event(at_us: u64, event: Event) -> TraceEvent {
    TraceEvent { at_us, lane: event.lane(), event }
}

/// The participant ids a diagram declares, and the ones its statements use.
struct Lanes {
    declared: BTreeSet<String>,
    used: BTreeSet<String>,
}

/// Checks every line against the statements the renderer may write and the
/// label rules of Mermaid's sequence-diagram lexer (a label runs to the first
/// `#`, `;` or newline, so those may only appear as `#NN;` entities).
fn check_structure(diagram: &str) -> Lanes {
    let mut lines = diagram.lines();
    assert_eq!(lines.next(), Some("sequenceDiagram"));
    let mut lanes = Lanes { declared: BTreeSet::new(), used: BTreeSet::new() };
    let (mut active, mut rects) = (0i64, 0i64);
    for line in lines {
        let statement = line.strip_prefix("    ").unwrap_or_else(|| panic!("unindented line `{line}`"));
        if let Some(rest) = statement.strip_prefix("participant ") {
            let (id, _) = rest.split_once(" as ").unwrap_or_else(|| panic!("participant without label: `{line}`"));
            assert!(lanes.used.is_empty(), "participant declared after use: `{line}`");
            lanes.declared.insert(id.to_string());
        } else if statement == "activate Model" {
            active += 1;
            lanes.used.insert("Model".into());
        } else if statement == "deactivate Model" {
            active -= 1;
            assert!(active >= 0, "deactivated an inactive Model: `{line}`");
        } else if statement.starts_with("rect rgb(") {
            rects += 1;
        } else if statement == "end" {
            rects -= 1;
            assert!(rects >= 0, "`end` without a block");
        } else {
            let (head, label) = statement.split_once(": ").unwrap_or_else(|| panic!("unknown statement `{line}`"));
            check_label(label, line);
            if let Some(over) = head.strip_prefix("Note over ") {
                lanes.used.extend(over.split(',').map(str::to_string));
            } else {
                let arrow = ["-->>", "->>", "-x"].into_iter().find(|arrow| head.contains(arrow));
                let arrow = arrow.unwrap_or_else(|| panic!("no arrow in `{line}`"));
                let (from, to) = head.split_once(arrow).expect("arrow found");
                lanes.used.insert(from.to_string());
                lanes.used.insert(to.to_string());
            }
        }
    }
    assert_eq!(active, 0, "activations left open:\n{diagram}");
    assert_eq!(rects, 0, "blocks left open:\n{diagram}");
    lanes
}

fn check_label(label: &str, line: &str) {
    assert!(!label.contains(':'), "raw `:` in the label of `{line}`");
    let mut rest = label;
    while let Some(at) = rest.find(['#', ';']) {
        let tail = &rest[at..];
        assert!(tail.starts_with('#'), "raw `;` in the label of `{line}`");
        let digits = tail[1..].chars().take_while(char::is_ascii_digit).count();
        assert!(digits > 0 && tail[1 + digits..].starts_with(';'), "`#` that is not an entity in `{line}`");
        rest = &tail[digits + 2..];
    }
    assert!(!label.replace("<br/>", "").contains(['<', '>', '"']), "raw markup in `{line}`");
}

#[test]
fn a_label_with_hash_and_semicolon_is_escaped_once() {
    let events = [event(1_000, Event::Action { what: "post #7; then: wait".into() })];
    let diagram = turnsim::mermaid::render(&events, &[]);
    assert!(diagram.contains("post #35;7#59; then#58; wait"), "{diagram}");
    assert!(!diagram.contains("#35#59;") && !diagram.contains("#35;#59;"), "escaped twice:\n{diagram}");
    check_structure(&diagram);
}

#[test]
fn model_labels_keep_their_text_after_the_call_number() {
    let (_, _, record, violations) = failing_replay();
    let diagram = turnsim::mermaid::render(&record.events, &violations);
    assert!(diagram.contains("Engine->>Model: 0.000s #35;1 r1 step=1"), "{diagram}");
    assert!(diagram.contains("Model-->>Engine: 0.000s #35;1.1 tool-input-start tc-read read_file"), "{diagram}");
}

#[test]
fn the_violation_is_a_red_note_at_its_event() {
    let (_, _, record, violations) = failing_replay();
    let diagram = turnsim::mermaid::render(&record.events, &violations);
    let at = violations[0].at_event.expect("single-continuation names its event");
    let lines: Vec<&str> = diagram.lines().collect();
    let note = lines
        .iter()
        .position(|line| line.contains(&format!("FAILED {}#58;", violations[0].check)))
        .unwrap_or_else(|| panic!("no failure note:\n{diagram}"));
    assert!(lines[note].ends_with(&format!("(event {})", at + 1)), "{}", lines[note]);
    assert_eq!(lines[note - 2], "    rect rgb(255, 200, 200)", "the note and its event sit in a red block");
    assert!(lines[note - 1].contains(record.events[at].event.name()), "the violating event leads the block");
    assert_eq!(lines[note + 1], "    end");
    check_structure(&diagram);
}

#[test]
fn a_violation_without_an_event_is_noted_at_the_end() {
    let events = [event(0, Event::Evicted)];
    let violations = [Violation::new("liveness", "never settled")];
    let diagram = turnsim::mermaid::render(&events, &violations);
    assert!(
        diagram.ends_with(
            "    rect rgb(255, 200, 200)\n    Note over World: FAILED liveness#58; never settled\n    end\n"
        ),
        "{diagram}"
    );
    check_structure(&diagram);
}

#[test]
fn a_stream_still_open_at_the_end_is_closed() {
    let events = [
        event(0, Event::ModelCall { call: 1, request_id: "r1".into(), step: 1, continuation: false }),
        event(10, Event::ModelChunk { call: 1, index: 1, chunk: "text-start t1".into() }),
        event(20, Event::ModelEnd { call: 1, how: "parked".into() }),
    ];
    let diagram = turnsim::mermaid::render(&events, &[]);
    let activation: Vec<&str> = diagram.lines().filter(|line| line.contains("activate")).collect();
    assert_eq!(activation, ["    activate Model", "    deactivate Model"], "{diagram}");
    assert!(diagram.ends_with("deactivate Model\n"), "a parked stream stays open to the end:\n{diagram}");
    check_structure(&diagram);
}

/// Every committed scenario's diagram is well formed, with balanced
/// activations, and declares exactly the lanes it uses.
#[test]
fn every_scenario_draws_only_its_lanes_with_balanced_activations() {
    let mut open_at_end = 0;
    for file in all_scenarios() {
        let (record, violations) = run_one(&file, file.scenario.seed_start, &RegressionSet::default());
        let diagram = turnsim::mermaid::render(&record.events, &violations);
        let lanes = check_structure(&diagram);
        assert_eq!(lanes.declared, lanes.used, "{}: declared lanes differ from used ones", file.path.display());
        let calls = record.events.iter().filter(|traced| matches!(traced.event, Event::ModelCall { .. })).count();
        assert_eq!(diagram.matches("    activate Model").count(), calls, "{}", file.path.display());
        let last = diagram.lines().rev().find(|line| !line.contains("FAILED") && *line != "    end").unwrap_or("");
        open_at_end += usize::from(last == "    deactivate Model");
    }
    assert!(open_at_end > 0, "no scenario ends with a stream open, so that case went untested");
}

#[test]
fn lanes_without_events_are_left_out() {
    let (_, _, record, violations) = failing_replay();
    let diagram = turnsim::mermaid::render(&record.events, &violations);
    let present: BTreeSet<Lane> = record.events.iter().map(|traced| traced.lane).collect();
    assert!(!present.contains(&Lane::Messenger) && !present.contains(&Lane::Caller));
    assert!(!diagram.contains("participant Messenger") && !diagram.contains("participant Caller"), "{diagram}");
    assert!(diagram.contains("participant Model as model"), "{diagram}");
}

#[test]
fn the_page_lists_the_violation_and_links_its_event() {
    let (file, regressions, record, violations) = failing_replay();
    let page = turnsim::html::render(&file, 0, &regressions, &record, &violations);
    let number = violations[0].at_event.expect("names its event") + 1;
    let listed = page.find("<li class=\"violation\">").expect("violation listed");
    assert!(listed < page.find("<table").expect("timeline"), "the violation comes before the timeline");
    assert!(page[listed..].starts_with(&format!(
        "<li class=\"violation\"><strong class=\"check\">single-continuation</strong>: {}",
        turnsim::html::escape(&violations[0].message)
    )));
    assert!(page.contains(&format!("<a href=\"#event-{number}\">")), "link to the event");
    assert!(page.contains(&format!("<tr id=\"event-{number}\" class=\"event violating\"")), "the event row is marked");
    assert_eq!(page.matches("class=\"event violating\"").count(), 1);
    assert!(page.contains(&turnsim::html::escape(&turnsim::runner::replay_command(&file, 0, &regressions))));
}

#[test]
fn the_page_has_a_column_per_lane_that_took_part() {
    let (file, regressions, record, violations) = failing_replay();
    let page = turnsim::html::render(&file, 0, &regressions, &record, &violations);
    let header = &page[page.find("<thead>").expect("head")..page.find("</thead>").expect("head end")];
    assert_eq!(header, "<thead><tr><th>#</th><th>time</th><th class=\"lane-world\">world</th><th class=\"lane-client\">client</th><th class=\"lane-engine\">engine</th><th class=\"lane-model\">model</th><th class=\"lane-store\">store</th></tr>");
    assert_eq!(page.matches("<tr id=\"event-").count(), record.events.len(), "one row per event");
}

#[test]
fn the_page_is_self_contained() {
    let (file, regressions, record, violations) = failing_replay();
    let page = turnsim::html::render(&file, 0, &regressions, &record, &violations);
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none';"));
    for outside in ["src=", "http://", "https://", "<link", "@import", "url("] {
        assert!(!page.contains(outside), "`{outside}` would reach outside the file");
    }
}

#[test]
fn model_text_cannot_become_markup() {
    let file = inline(concat!(
        "name: hostile-text\n",
        "model:\n",
        "  - [ { text: \"</pre><script>window.injected = 1</script><img src=x onerror=alert(1)>\" }, ",
        "{ finish: { reason: stop } } ]\n",
        "actions:\n",
        "  - at_ms: 0\n",
        "    user_message: { text: \"<b>bold</b> & 'quoted'\" }\n",
    ));
    let (record, violations) = run_one(&file, 0, &RegressionSet::default());
    let stored = format!("{:?}", record.final_state.messages);
    assert!(stored.contains("<script>window.injected"), "the hostile text reached the transcript: {stored}");
    let page = turnsim::html::render(&file, 0, &RegressionSet::default(), &record, &violations);
    assert_eq!(page.matches("<script").count(), 1, "only the page's own script");
    assert!(!page.contains("<img") && !page.contains("<b>"), "run text became markup");
    assert!(page.contains("&lt;script&gt;window.injected = 1&lt;/script&gt;"), "shown as text");
    assert!(page.contains("&lt;b&gt;bold&lt;/b&gt; &amp; &#39;quoted&#39;"), "the user's text shown as text");
    let diagram = turnsim::mermaid::render(&record.events, &violations);
    assert!(!diagram.contains("<script") && !diagram.contains("<img"), "{diagram}");
    check_structure(&diagram);
}

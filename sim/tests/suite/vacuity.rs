//! No vacuous runs: a scripted fault the run never reached fails it with
//! the fault's place in the file, and `optional: true` opts out.

use turnsim::check::check_run;
use turnsim::runner::run_one;
use turnsim_engine::RegressionSet;

use turnsim::scenario::load_scenario;

fn two_calls_with(fault: &str) -> String {
    format!(
        "name: two-calls\nengine:\n  tools:\n    lookup: {{ kind: server, duration_ms: 10, output: 1 }}\nmodel:\n  \
         - [ {{ tool: {{ id: tc-1, name: lookup, input: {{}} }} }}, {{ finish: {{ reason: tool-calls }} }} ]\n  \
         - [ {{ text: \"Done.\" }}, {{ finish: {{ reason: stop }} }} ]\nactions:\n  - at_ms: 0\n    \
         user_message: {{ text: \"go\" }}\nfaults:\n  - {fault}\n"
    )
}

/// The scenario as a file of its own, so what a violation says of its
/// place can be read back.
fn landed_violations(yaml: &str) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("vacuity");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let name = format!(
        "case-{:016x}.yaml",
        yaml.bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| { (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3) })
    );
    let path = dir.join(name);
    std::fs::write(&path, yaml).expect("scenario file");
    let file = load_scenario(&path).unwrap_or_else(|error| panic!("{error}"));
    let (record, _) = run_one(&file, 0, &RegressionSet::default());
    let violations = check_run(&file, &record);
    violations.into_iter().filter(|violation| violation.check == "fault-landed").map(|v| v.message).collect()
}

#[test]
fn a_fault_aimed_past_the_last_call_fails_the_run_where_it_is_written() {
    let found = landed_violations(&two_calls_with("stall: { call: 3 }"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(".yaml:12:5: the fault never landed"), "located at the fault: {}", found[0]);
    assert!(found[0].contains("model call 3 never stalled there"), "{}", found[0]);
}

#[test]
fn a_fault_that_lands_passes_and_optional_opts_out() {
    assert_eq!(landed_violations(&two_calls_with("stall: { call: 2, after_chunk: 1 }")), Vec::<String>::new());
    assert_eq!(landed_violations(&two_calls_with("stall: { call: 3, optional: true }")), Vec::<String>::new());
}

#[test]
fn every_kind_of_counted_fault_that_never_comes_fails() {
    let cases = [
        ("cut: { call: 5 }", "model call 5 was never cut there"),
        ("truncate: { call: 4 }", "model call 4 was never truncated there"),
        ("http_error: { call: 3, status: 503 }", "model call 3 never answered HTTP 503"),
        ("store_error: { commit: 500 }", "the engine never made commit 500"),
        ("hook_throws: { hook: on_exhausted }", "the host's hook was called 0 times, never call 1"),
    ];
    for (fault, expected) in cases {
        let found = landed_violations(&two_calls_with(fault));
        assert!(found.iter().any(|message| message.contains(expected)), "{fault}: {found:?}");
    }
}

/// A store fault that names its commit by what it would store lands on
/// that commit, for any engine, and fails the run when no commit would.
#[test]
fn a_store_fault_by_writes_lands_on_the_commit_that_would_store_it() {
    let yaml = two_calls_with("store_error: { when: { tool: tc-1, state: output-available } }");
    assert_eq!(landed_violations(&yaml), Vec::<String>::new());
    let file = turnsim::scenario::parse_scenario(std::path::Path::new("by-writes.yaml"), &yaml).expect("parses");
    let (record, _) = run_one(&file, 0, &RegressionSet::default());
    let refused: Vec<&turnsim::trace::TraceEvent> = record
        .events
        .iter()
        .filter(|traced| matches!(traced.event, turnsim::trace::Event::StoreRefused { .. }))
        .collect();
    assert_eq!(refused.len(), 1, "one commit refused: {refused:?}");
    let refused_writes = format!("{:?}", refused[0].event);
    // The refused commit is the one storing the tool's output; the engine
    // stores it again once the store takes writes.
    let stored_output = record.history.crossings.iter().any(|crossing| match &crossing.what {
        turnsim::history::Boundary::CommitRefused { writes } => {
            writes.iter().filter_map(|write| write.message()).any(|message| {
                message.tool("tc-1").is_some_and(|tool| tool.state == turnsim_engine::ToolState::OutputAvailable)
            })
        }
        _ => false,
    });
    assert!(stored_output, "the refused commit stores tc-1's output: {refused_writes}");
    let never = two_calls_with("store_error: { when: { tool: tc-1, state: approval-requested } }");
    let found = landed_violations(&never);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("no commit the engine made matched what it names"), "{}", found[0]);
}

/// A store fault can name the commit that starts a turn (`stored:
/// in-flight`) or ends it (`removed: in-flight`) by the typed in-flight
/// record; one naming a record the run never holds (an alarm) never lands.
#[test]
fn a_store_fault_by_a_removed_record_lands_on_the_commit_that_takes_it_away() {
    for when in ["{ stored: in-flight }", "{ removed: in-flight }"] {
        let yaml = two_calls_with(&format!("store_error: {{ when: {when} }}"));
        assert_eq!(landed_violations(&yaml), Vec::<String>::new(), "{when}");
        let file = turnsim::scenario::parse_scenario(std::path::Path::new("by-record.yaml"), &yaml).expect("parses");
        let (record, _) = run_one(&file, 0, &RegressionSet::default());
        let refused: Vec<&Vec<turnsim_engine::durable::Write>> = record
            .history
            .crossings
            .iter()
            .filter_map(|crossing| match &crossing.what {
                turnsim::history::Boundary::CommitRefused { writes } => Some(writes),
                _ => None,
            })
            .collect();
        assert_eq!(refused.len(), 1, "{when}: one commit refused: {refused:?}");
        let wanted = when.contains("removed");
        let touches_in_flight = refused[0].iter().any(|write| match write {
            turnsim_engine::durable::Write::InFlight(turn) => turn.is_none() == wanted,
            _ => false,
        });
        assert!(touches_in_flight, "{when}: the refused commit is the in-flight write: {:?}", refused[0]);
    }
    let found = landed_violations(&two_calls_with("store_error: { when: { removed: alarm } }"));
    assert_eq!(found.len(), 1, "{found:?}");
}

//! The benchmark's parts: ratios against their bounds, the floor's replay
//! of the standard story, the generated growth sessions.

mod ratios {
    use std::path::Path;

    use turnsim::bench::ratios::*;

    fn bounds(text: &str) -> Bounds {
        serde_yaml::from_str(text).expect("bounds parse")
    }

    #[test]
    fn a_ratio_past_its_bound_is_a_breach_with_its_figure() {
        let bounds = bounds("measured: test\nfloors: { protocol_ratio: 0.3 }\nceilings: { floor_ratio: 4 }\n");
        let ratios = Ratios { floor_ratio: 3.0, protocol_ratio: 0.4, ..Ratios::default() };
        assert_eq!(breaches(&ratios, &bounds), Ok(vec![]));
        let slow = Ratios { floor_ratio: 5.0, protocol_ratio: 0.2, ..Ratios::default() };
        assert_eq!(
            breaches(&slow, &bounds),
            Ok(vec![
                "protocol_ratio 0.200 is below its bound 0.3".to_string(),
                "floor_ratio 5.000 is above its bound 4".to_string()
            ])
        );
    }

    #[test]
    fn a_bounded_ratio_not_measured_is_an_error_not_a_pass() {
        let bounds = bounds("measured: test\nfloors: { cloudflare_node_fraction: 0.1 }\n");
        let no_node = Ratios { node_skipped: Some("no `node` on the PATH".into()), ..Ratios::default() };
        assert_eq!(
            breaches(&no_node, &bounds),
            Err("`cloudflare_node_fraction` could not be measured: no `node` on the PATH".into())
        );
        let typo = self::bounds("measured: test\nceilings: { floor_ration: 2 }\n");
        assert_eq!(breaches(&Ratios::default(), &typo), Err("bench --check measures no ratio `floor_ration`".into()));
    }

    #[test]
    fn the_committed_bounds_name_only_ratios_check_measures() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-ratios.yaml");
        let committed = load(&path).expect("the committed bounds load");
        assert!(!committed.floors.is_empty() && !committed.ceilings.is_empty());
    }
}

mod bare {
    use turnsim::bench::bare::*;
    use turnsim::scenario::ScenarioFile;

    fn standard() -> ScenarioFile {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(turnsim::bench::STANDARD_SCENARIO);
        turnsim::scenario::load_scenario(&path).expect("the standard scenario loads")
    }

    #[test]
    fn the_floor_replays_every_event_and_the_eviction() {
        let shape = Shape::of(&standard(), 1);
        assert_eq!(shape.evictions.len(), 1, "the standard story evicts once");
        let (kill, restart) = shape.evictions[0];
        let engine_while_down =
            shape.sends.iter().filter(|(at, by)| *by == Node::Engine && *at > kill && *at < restart);
        assert_eq!(engine_while_down.count(), 0, "a killed engine sends nothing");
        // Every message lands but some sent to the engine while it was down
        // (those of the kill's and the restart's instants, and of the first
        // instant, before the engine has booted, may go either way).
        let around_the_eviction = shape
            .sends
            .iter()
            .filter(|(at, by)| *by != Node::Engine && (*at >= kill && *at <= restart || *at == 0))
            .count();
        let delivered = replay(&shape) as usize;
        assert!(delivered < shape.events(), "the restart's own event finds the engine down");
        assert!(delivered >= shape.events() - around_the_eviction, "{delivered} of {} delivered", shape.events());
    }
}

mod growth {
    use turnsim::bench::growth::*;
    use turnsim::runner;
    use turnsim_engine::RegressionSet;

    #[test]
    fn generated_sessions_pass_and_grow_with_their_size() {
        let regressions = RegressionSet::default();
        let (short, _) = runner::run_one(&step_chain(2), 0, &regressions);
        let (long, violations) = runner::run_one(&step_chain(6), 0, &regressions);
        assert!(violations.is_empty(), "{violations:?}");
        let calls = |events: &[turnsim::trace::TraceEvent]| {
            events.iter().filter(|event| matches!(event.event, turnsim::trace::Event::ModelCall { .. })).count()
        };
        assert_eq!(calls(&short.events), 3);
        assert_eq!(calls(&long.events), 7);
        let (batch, violations) = runner::run_one(&wide_batch(5), 0, &regressions);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(calls(&batch.events), 2);
        let sent = batch.events.iter().filter(|event| matches!(event.event, turnsim::trace::Event::ClientSent { .. }));
        assert_eq!(sent.count(), 5);
    }
}

mod protocol_parts {
    use std::process::Command;

    use crate::common::workspace_root;

    /// `--by-part` over the protocol counts one exchange for each line the
    /// engine was sent (the lines tee'd on their way to it, less the run
    /// that starts the process: the same seed as the first timed run), and
    /// its parts add up to the run.
    #[test]
    fn the_protocol_split_counts_each_line_the_engine_is_sent() {
        let sent = std::env::temp_dir().join(format!("turnsim-protocol-parts-{}.ndjson", std::process::id()));
        let _ = std::fs::remove_file(&sent);
        let engine = format!("tee -a '{}' | '{}' engine", sent.display(), env!("CARGO_BIN_EXE_turnsim"));
        let output = Command::new(env!("CARGO_BIN_EXE_turnsim"))
            .args(["bench", "--by-part", "--format", "json", "--engine-cmd", &engine])
            .current_dir(workspace_root())
            .output()
            .expect("run turnsim bench");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let by_part: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
        let protocol = &by_part["protocol"];
        let runs = protocol["runs"].as_u64().expect("runs");
        assert!(runs > 1, "{protocol}");
        assert_eq!(protocol["failed_runs"], 0, "{protocol}");
        let lines: Vec<String> =
            std::fs::read_to_string(&sent).expect("lines sent").lines().map(String::from).collect();
        let _ = std::fs::remove_file(&sent);
        let starts: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, line)| line.starts_with(r#"{"type":"init""#) && line.contains(r#""generation":1,"#))
            .map(|(at, _)| at)
            .collect();
        assert_eq!(starts.len() as u64, runs + 1, "one first generation a run, the start-up run's too");
        let timed = (lines.len() - starts[1]) as f64;
        let exchanges = protocol["exchanges_per_run"].as_f64().expect("exchanges") * runs as f64;
        assert!((exchanges - timed).abs() < 0.5, "{exchanges} exchanges counted, {timed} lines sent");
        let parts = protocol["parts"].as_array().expect("parts");
        let names: Vec<&str> = parts.iter().map(|part| part[0].as_str().expect("name")).collect();
        assert_eq!(names, ["the world and the checks", "writing inputs", "waiting for the engine", "taking its lines"]);
        assert!(parts.iter().all(|part| part[1].as_f64().expect("us") > 0.0), "{protocol}");
    }
}

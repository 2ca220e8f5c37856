//! The catalogues agree with each other and with the docs: capabilities
//! and what each explains, the properties and the invariants that hold
//! them, the adversary's operators, the capabilities a scenario implies.

mod applicable {
    use std::path::Path;

    use turnsim::applicable::*;
    use turnsim::capability::Capability;

    fn implied(yaml: &str) -> Vec<Capability> {
        let file = turnsim::scenario::parse_scenario(Path::new("s.yaml"), yaml).expect("parses");
        implied_needs(&file)
    }

    #[test]
    fn what_a_scenario_does_implies_the_core_it_needs() {
        let plain = "name: s\nmodel: [[ { text: hi }, { finish: { reason: stop } } ]]\nactions: [ { at_ms: 0, user_message: { text: q } } ]\n";
        assert_eq!(implied(plain), vec![], "a turn over a connection needs nothing beyond the core");
        let server_tool = "name: s\nengine: { tools: { lookup: { kind: server } } }\nmodel: [[ { tool: { id: t1, name: lookup, input: {} } }, { finish: { reason: tool-calls } } ]]\n";
        assert_eq!(implied(server_tool), vec![], "a server tool is the engine's own");
        let unlisted =
            "name: s\nmodel: [[ { tool: { id: t1, name: ask, input: {} } }, { finish: { reason: tool-calls } } ]]\n";
        assert_eq!(implied(unlisted), vec![Capability::ClientTools], "a tool the engine does not list is the client's");
        let approval = "name: s\nengine: { tools: { rm: { kind: approval } } }\nmodel: [[ { tool: { id: t1, name: rm, input: {} } }, { finish: { reason: tool-calls } } ]]\n";
        assert_eq!(implied(approval), vec![Capability::Approvals]);
        let chat = "name: s\nactions: [ { at_ms: 0, user_message: { text: q, via: chat } } ]\n";
        assert_eq!(implied(chat), vec![Capability::Chat]);
        let stored = "name: s\nstored: [ { user: hi } ]\nclient: { resume: true }\n";
        assert_eq!(implied(stored), vec![Capability::StoredTranscript, Capability::StreamResume]);
        let store_fault = "name: s\nfaults: [ { store_error: { commit: 1 } } ]\n";
        assert_eq!(implied(store_fault), vec![Capability::StoreFaults]);
        let counted = "name: s\nexpect: { recovery: { scheduled: 1 } }\n";
        assert_eq!(implied(counted), vec![Capability::RecoveryRecords]);
        let timed = "name: s\nexpect: { model_calls_at_ms: [0, 1500] }\n";
        assert_eq!(implied(timed), vec![Capability::ExactTimes]);
        let dynamic = "name: s\nengine: { tools: { search: { kind: server, dynamic: true } } }\n";
        assert_eq!(implied(dynamic), vec![Capability::DynamicTools]);
    }

    #[test]
    fn settings_a_product_may_fix_are_needed_only_when_set_otherwise() {
        for set in [
            "engine: { coalesce_ms: 1000 }",
            "engine: { recovery: { alarm_debounce_ms: 0 } }",
            "engine: { recovery: { stable_retry_delay_ms: 10 } }",
            "engine: { recovery: { enabled: false } }",
            "actions: [ { at_ms: 0, user_message: { text: q, stall_timeout_ms: 2000 } } ]",
        ] {
            assert_eq!(implied(&format!("name: s\n{set}\n")), vec![Capability::EngineSettings], "{set}");
        }
        for kept in [
            "engine: { coalesce_ms: 50, stall_timeout_ms: 1500 }",
            "engine: { recovery: { alarm_debounce_ms: 30000, max_attempts: 2, stable_timeout_ms: 100 } }",
        ] {
            assert_eq!(
                implied(&format!("name: s\n{kept}\n")),
                vec![],
                "{kept}: the defaults, or what every engine takes"
            );
        }
    }
}

mod operators {
    use serde_json::Value;
    use turnsim::adversary::operators::*;

    #[test]
    fn every_operator_is_named_once_and_parses_back() {
        let mut names: Vec<&str> = ALL_OPERATORS.iter().map(|operator| operator.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_OPERATORS.len(), "operator names are unique");
        for operator in ALL_OPERATORS {
            assert_eq!(Operator::parse(operator.name()), Some(operator));
        }
        assert!("no-such-operator".parse::<Operator>().is_err());
    }

    #[test]
    fn every_operator_breaks_a_property_of_the_catalogue() {
        for operator in ALL_OPERATORS {
            let property = operator.property();
            assert!(turnsim::properties::property(property).is_some(), "{}: no property {property}", operator.name());
        }
    }

    #[test]
    fn an_altered_output_differs_from_the_original() {
        for output in [Value::from("done"), Value::from(3), serde_json::json!({"a": 1}), Value::Null] {
            assert_ne!(altered(&output), output);
        }
    }
}

mod capability {
    use turnsim::capability::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_named() {
        for capability in Capability::ALL.into_iter().chain(Capability::CORE) {
            assert_eq!(Capability::parse(capability.name()), Ok(capability));
            let serialised = serde_json::to_string(&capability).expect("serialises");
            assert_eq!(serialised, format!("\"{}\"", capability.name()));
        }
        let error = Capability::parse("teleport").expect_err("unknown");
        assert!(error.contains("`teleport`") && error.contains("recovery"), "{error}");
    }

    #[test]
    fn what_a_capability_explains_names_invariants_that_exist() {
        let invariants: Vec<&str> =
            turnsim::check::invariants::INVARIANTS.iter().map(|invariant| invariant.name).collect();
        for (capability, checks) in EXPLAINED {
            for check in checks {
                assert!(invariants.contains(check), "{capability} explains `{check}`, which is no invariant");
            }
        }
        assert_eq!(EXPLAINED.map(|(capability, _)| capability), Capability::ALL, "one line per capability");
    }

    #[test]
    fn a_missing_capability_explains_its_invariants_and_the_story_only() {
        let recovery = [Capability::Recovery];
        assert!(explains(&recovery, "no-lost-work"));
        assert!(explains(&recovery, "expect.model_calls") && explains(&recovery, "fault-landed"));
        assert!(!explains(&recovery, "callback-contract"), "a caller left without an outcome is the engine's");
        assert!(!explains(&recovery, "engine-fault"), "a crash is never explained");
        assert!(!explains(&[Capability::Messenger], "no-lost-work"));
        assert!(!explains(&[], "expect.model_calls"), "a scenario that applies is judged whole");
    }

    #[test]
    fn an_engine_that_declares_nothing_lacks_nothing() {
        let needs = [Capability::Messenger, Capability::Recovery, Capability::Messenger, Capability::ClientTools];
        assert_eq!(Declared::from_names(None, None).expect("none").missing(&needs), vec![]);
        let some = Declared::from_names(Some(&["recovery".to_string()]), None).expect("known");
        assert_eq!(some.missing(&needs), vec![Capability::Messenger]);
        assert!(Declared::from_names(Some(&["recovery".to_string(), "x".to_string()]), None).is_err());
    }

    #[test]
    fn core_capabilities_are_had_unless_lacked_and_only_they_can_be_lacked() {
        let names = |list: &[&str]| list.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        let needs = [Capability::ClientTools, Capability::Chat, Capability::Recovery];
        let declared = Declared::from_names(Some(&names(&["recovery"])), Some(&names(&["chat"]))).expect("core lacked");
        assert_eq!(declared.missing(&needs), vec![Capability::Chat]);
        assert!(declared.to_string().contains("lacks chat"), "{declared}");
        let error = Declared::from_names(None, Some(&names(&["recovery"]))).expect_err("not core");
        assert!(error.contains("`recovery` is not one"), "{error}");
        let none_beyond = Declared::from_names(Some(&[]), None).expect("empty");
        assert_eq!(none_beyond.missing(&needs), vec![Capability::Recovery]);
    }

    #[test]
    fn a_lacked_core_capability_is_missing_and_the_rest_unchanged() {
        let needs = [Capability::ExactTimes, Capability::ClientTools, Capability::Recovery];
        let everything = Declared::everything();
        assert_eq!(everything.missing(&needs), vec![]);
        let live = everything.lacking(Capability::ExactTimes);
        assert_eq!(live.missing(&needs), vec![Capability::ExactTimes]);
        assert!(live.to_string().contains("lacks exact-times"), "{live}");
    }
}

mod properties {
    use turnsim::check::invariants::INVARIANTS;
    use turnsim::properties::*;

    #[test]
    fn every_property_is_named_once_and_held_by_an_invariant() {
        let mut ids: Vec<&str> = PROPERTIES.iter().map(|property| property.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), PROPERTIES.len(), "property ids are unique");
        for property in PROPERTIES {
            let held = INVARIANTS.iter().any(|invariant| invariant.name == property.invariant);
            assert!(held, "{}: no invariant is named {}", property.id, property.invariant);
        }
    }

    #[test]
    fn the_docs_say_every_property() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/properties.md");
        let docs = std::fs::read_to_string(&path).expect("docs/properties.md");
        for property in PROPERTIES {
            let row = format!("| `{}` | {} | `{}` |", property.id, property.owed, property.invariant);
            assert!(docs.contains(&row), "docs/properties.md has no row {row}");
        }
    }

    #[test]
    fn every_invariant_holds_some_property() {
        for invariant in INVARIANTS {
            let holds = PROPERTIES.iter().any(|property| property.invariant == invariant.name);
            assert!(holds, "{} holds no property of the catalogue", invariant.name);
        }
    }
}

//! Parts the invariants share, tested on their own: what a model request
//! answers, and the alignment `client-view` carries from look to look.

mod facts {
    use turnsim::check::{basis, Basis};
    use turnsim_engine::Message;

    /// A user message, the reply whose last step called `tc-1` (answered),
    /// and an empty new reply the request streams into.
    fn request_into_a_new_reply() -> Vec<Message> {
        let tool = serde_json::json!({"type": "tool", "call_id": "tc-1", "tool_name": "get", "state": "output-available",
            "input_text": "{}", "input": {}, "output": "done", "error_text": null, "approval": null, "repaired": false});
        let reply = serde_json::json!({"id": "m1", "role": "assistant", "parts": [{"type": "step-start"}, tool]});
        let new_reply = serde_json::json!({"id": "m2", "role": "assistant", "parts": [{"type": "step-start"}]});
        let mut messages = vec![Message::user("u1", "hi")];
        messages.extend([reply, new_reply].map(|json| serde_json::from_value::<Message>(json).expect("a message")));
        messages
    }

    #[test]
    fn a_new_reply_answers_the_user_afresh_unless_the_request_is_a_continuation() {
        let messages = request_into_a_new_reply();
        assert_eq!(basis(&messages, false), Basis::User { message_id: "u1".into() });
        assert_eq!(basis(&messages, true), Basis::Batch { message_id: "m1".into(), call_ids: vec!["tc-1".into()] });
    }
}

mod waiting {
    use proptest::prelude::*;
    use turnsim_engine::transcript::TextState;
    use turnsim_engine::{Part, ToolPart, ToolState};

    use turnsim::check::invariants::RunsOnCopies;
    use turnsim_engine::Parts;

    const STATES: [ToolState; 5] = [
        ToolState::InputStreaming,
        ToolState::InputAvailable,
        ToolState::ApprovalRequested,
        ToolState::OutputAvailable,
        ToolState::OutputError,
    ];

    fn text(text: &str) -> Part {
        Part::Text { id: "t".into(), text: text.into(), state: TextState::Done }
    }

    fn tool(call: u8, state: ToolState) -> Part {
        Part::Tool(ToolPart { state, ..ToolPart::streaming(&format!("tc-{call}"), "lookup") })
    }

    /// One edit of one side: (which side, what, where, with what).
    fn apply(parts: &mut Parts, (what, at, value): (u8, usize, u8)) {
        let len = parts.len();
        match what {
            0 => parts.push(text(&"ab"[..usize::from(value % 3).min(2)])),
            1 => parts.push(tool(value % 4, STATES[usize::from(value) % STATES.len()])),
            2 => parts.push(Part::StepStart),
            _ if len == 0 => {}
            3 => {
                if let Some(Part::Text { text, .. }) = parts.get_mut(at % len) {
                    text.push(if value % 2 == 0 { 'a' } else { 'b' });
                }
            }
            _ => {
                if let Some(Part::Tool(tool)) = parts.get_mut(at % len) {
                    tool.state = STATES[usize::from(value) % STATES.len()];
                }
            }
        }
    }

    proptest! {
        /// The alignment carried from look to look decides as one found
        /// afresh, whatever each side did in between.
        #[test]
        fn a_resumed_alignment_decides_as_a_fresh_one(
            edits in proptest::collection::vec((any::<bool>(), 0u8..5, 0usize..400, any::<u8>()), 1..300),
            loose in any::<bool>(),
        ) {
            let (mut kept, mut shown) = (Parts::new(), Parts::new());
            let mut carried = RunsOnCopies::default();
            for (side, what, at, value) in edits {
                // The screen mostly follows the store, as a stream does.
                apply(&mut shown, (what, at, value));
                if side {
                    apply(&mut kept, (what, at, value));
                }
                let key = (1, false, loose);
                let resumed = carried.runs_on(key, "m", &kept, &shown, loose);
                let fresh = RunsOnCopies::default().runs_on(key, "m", &kept, &shown, loose);
                prop_assert_eq!(resumed, fresh);
            }
        }
    }

    #[test]
    fn a_screen_behind_the_store_does_not_run_on() {
        let mut kept = Parts::new();
        kept.push(text("ab"));
        kept.push(tool(1, ToolState::OutputAvailable));
        let mut shown = Parts::new();
        shown.push(text("abc"));
        shown.push(tool(1, ToolState::InputAvailable));
        let mut copies = RunsOnCopies::default();
        assert!(!copies.runs_on((1, false, false), "m", &kept, &shown, false), "a tool behind the store");
        assert!(copies.runs_on((1, false, true), "m", &kept, &shown, true), "loose: states left out");
        *shown.get_mut(1).expect("the tool") = tool(1, ToolState::OutputAvailable);
        assert!(copies.runs_on((1, false, false), "m", &kept, &shown, false), "caught up, text run on");
        *kept.get_mut(0).expect("the text") = text("abd");
        assert!(!copies.runs_on((1, false, false), "m", &kept, &shown, false), "the store took other text");
    }
}

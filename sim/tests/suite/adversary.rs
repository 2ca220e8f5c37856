//! The adversary: every operator rewrites something on a committed
//! scenario, a mutated run replays the same twice, the matrix does not
//! depend on `--jobs`, a caught rewrite names its check, and a run over
//! nothing fails.

use std::process::{Command, Output};

use turnsim::adversary::equivalents::Equivalents;
use turnsim::adversary::interpose::Mode;
use turnsim::adversary::matrix::{self, Matrix, PairVerdict};
use turnsim::adversary::{self, Operator, Seeds, SweepPlan, Verdict, ALL_OPERATORS};
use turnsim_engine::RegressionSet;

use crate::common::{scenario, workspace_root};

/// A committed scenario where each operator has a site at seed 0.
fn scenario_with_a_site(operator: Operator) -> &'static str {
    match operator {
        Operator::WrongToolOutputStored => "approval-tool-without-executor",
        Operator::SwapToolOutcomes => "barrier-waits-for-a-dynamic-sibling",
        Operator::SkipExhaustedHook => "crash-before-the-exhausted-hook",
        Operator::DropCancel => "crash-keeps-the-per-turn-stall-timeout",
        Operator::ServerToolTwice => "explored-approval-request-survives-eviction",
        Operator::PartialPost
        | Operator::DuplicatePost
        | Operator::DropPost
        | Operator::RecoveringLeftOn
        | Operator::WrongToolOutputShown => "bench-standard-story",
        Operator::DropReset => "client-joins-mid-stream",
        Operator::DropToolFrame => "continuation-single-client-tool",
        Operator::DropErrorFrame => "crash-as-a-failed-turn-is-recorded",
        Operator::ErrorAsDone => "max-steps-ends-a-tool-loop",
        Operator::DropTerminalCallback | Operator::DuplicateTerminalCallback | Operator::DropCallbackEvent => {
            "barrier-late-sibling-chat"
        }
        Operator::RequestToolInputEmptied
        | Operator::RequestStepStartsDropped
        | Operator::RequestQuestionTwice
        | Operator::RequestResultRemoved
        | Operator::ServerToolInputChanged
        | Operator::DecisionFlipped
        | Operator::UserTextCut
        | Operator::StepStartsNotStored
        | Operator::DoneAsError
        | Operator::DoneTwice
        | Operator::ToolCallStreamedEmpty => "approval-approved-runs-server-tool",
        Operator::DeniedToolRuns => "approval-denied",
        Operator::ClientToolRunOnServer => "continuation-single-client-tool",
        Operator::ErrorTextReplaced | Operator::ErrorStoredAsOutput => "client-errored-result-without-text",
        Operator::FailureRecordDropped | Operator::EmptyFinishToldDone => "crash-as-a-failed-turn-is-recorded",
        Operator::IntentNotStored => "crash-with-a-deferred-continuation",
        Operator::WrongResumeOffer => "client-resumes-the-stream-after-reconnecting",
        Operator::CallbackDoneAsError | Operator::CallbackToolCallEmptied => "barrier-late-sibling-chat",
        Operator::DropCallbackReset => "long-reply-retry-discards-past-the-first-group",
        Operator::AnswerPostedAsApology => "crash-as-a-reply-is-checkpointed",
        Operator::PostOverLimit => "bench-standard-story",
        Operator::ExhaustedAtContinue => "crash-before-the-exhausted-hook",
        _ => "barrier-all-fast-mid-stream",
    }
}

#[test]
fn every_operator_changes_what_crosses_the_boundary_on_some_committed_scenario() {
    let regressions = RegressionSet::default();
    for operator in ALL_OPERATORS {
        let file = scenario(scenario_with_a_site(operator));
        let baseline = adversary::run(&file, 0, &regressions, Mode::Count);
        assert!(baseline.violations.is_empty(), "{}: the unmutated run passes", operator.name());
        let sites = baseline.sites.get(&operator).copied().unwrap_or(0);
        assert!(sites > 0, "{} has a site in {}", operator.name(), file.path.display());
        let site = adversary::chosen_site(0, operator, sites);
        let mutated = adversary::run(&file, 0, &regressions, adversary::apply_mode(&baseline, operator, site));
        assert!(mutated.applied.is_some(), "{} applied at its site", operator.name());
        let before: Vec<String> =
            baseline.record.history.crossings.iter().map(|crossing| format!("{:?}", crossing.what)).collect();
        let after: Vec<String> =
            mutated.record.history.crossings.iter().map(|crossing| format!("{:?}", crossing.what)).collect();
        assert_ne!(before, after, "{} changed what crossed the boundary", operator.name());
    }
}

#[test]
fn the_counting_run_is_the_unmutated_run() {
    // The adversary in counting mode stands in the way of every effect and
    // must change none of them: its timeline is the plain run's.
    let file = scenario("bench-standard-story");
    for seed in [0, 1] {
        let plain = turnsim::world::run(&file, seed, &RegressionSet::default());
        let counted = adversary::run(&file, seed, &RegressionSet::default(), Mode::Count);
        assert_eq!(
            turnsim::trace::render_timeline(&plain.events),
            turnsim::trace::render_timeline(&counted.record.events),
            "seed {seed}: counting changes nothing"
        );
    }
}

#[test]
fn a_mutated_run_replays_the_same_twice() {
    let file = scenario("barrier-late-sibling-chat");
    for operator in [Operator::ReorderFrames, Operator::SkipCommit, Operator::DropCallbackEvent] {
        let first = adversary::mutated(&file, 1, &RegressionSet::default(), operator).expect("a site");
        let again = adversary::mutated(&file, 1, &RegressionSet::default(), operator).expect("a site");
        assert_eq!(
            turnsim::trace::render_timeline(&first.record.events),
            turnsim::trace::render_timeline(&again.record.events),
            "{}: the same seed gives the same mutated run",
            operator.name()
        );
        assert_eq!(first.applied, again.applied);
    }
}

fn matrix_at(jobs: usize) -> String {
    let files: Vec<_> = ["barrier-late-sibling-chat", "bench-standard-story", "client-joins-mid-stream"]
        .into_iter()
        .map(scenario)
        .collect();
    let operators = vec![Operator::DropFrame, Operator::ReorderFrames, Operator::PartialPost, Operator::SkipCommit];
    let seeds = Seeds { count: 2, start: Some(0) };
    let plan = SweepPlan { files: &files, seeds, operators, jobs, regressions: RegressionSet::default() };
    let trials = adversary::sweep(&plan, &|| {});
    let matrix = Matrix::of(&files, plan.seeds, &plan.operators, &trials, &Equivalents::default(), &plan.regressions);
    format!("{}{}", matrix::text(&matrix), matrix::json(&matrix))
}

#[test]
fn the_matrix_is_the_same_at_any_jobs() {
    assert_eq!(matrix_at(1), matrix_at(2), "the report does not depend on --jobs");
}

#[test]
fn a_caught_rewrite_is_reported_caught_with_the_check_that_noticed() {
    let file = scenario("barrier-late-sibling-chat");
    let regressions = RegressionSet::default();
    let baseline = adversary::run(&file, 0, &regressions, Mode::Count);
    let verdict = adversary::verdict_of(&file, 0, &regressions, &baseline, Operator::DuplicateTerminalCallback);
    let Verdict::Caught { checks, .. } = verdict else {
        panic!("a terminal callback delivered twice is caught: {verdict:?}")
    };
    assert!(checks.contains(&"callback-contract".to_string()), "callback-contract notices: {checks:?}");
    let trials = vec![adversary::Trial {
        scenario: 0,
        seed: 0,
        operator: Operator::DuplicateTerminalCallback,
        verdict: adversary::verdict_of(&file, 0, &regressions, &baseline, Operator::DuplicateTerminalCallback),
    }];
    let files = [file];
    let operators = [Operator::DuplicateTerminalCallback];
    let seeds = Seeds { count: 1, start: Some(0) };
    let matrix = Matrix::of(&files, seeds, &operators, &trials, &Equivalents::default(), &regressions);
    assert!(
        matches!(&matrix.pairs[0].verdict, PairVerdict::Caught { checks, .. } if checks.contains(&"callback-contract".to_string()))
    );
    assert_eq!((matrix.changed, matrix.caught, matrix.survived), (1, 1, 0));
}

#[test]
fn a_request_that_drops_the_question_or_shows_a_discarded_attempt_is_caught_by_request_matches_store() {
    // The two request operators rewrite a correct engine's model requests
    // (the last user message left out; text no call streamed and the store
    // never held added to the reply): on each scenario, seed 0, the one
    // check that notices is the comparison of the request with the store.
    let regressions = RegressionSet::default();
    let stems = [
        "bench-standard-story",
        "provider-rate-limit-mid-stream-discards",
        "three-messages-queued-each-answered-in-turn",
    ];
    for stem in stems {
        let file = scenario(stem);
        let baseline = adversary::run(&file, 0, &regressions, Mode::Count);
        assert!(baseline.violations.is_empty(), "{stem}: the unmutated run passes");
        for operator in [Operator::RequestMissingMessage, Operator::RequestWithDiscardedText] {
            let verdict = adversary::verdict_of(&file, 0, &regressions, &baseline, operator);
            let Verdict::Caught { checks, .. } = &verdict else {
                panic!("{} on {stem} is caught: {verdict:?}", operator.name())
            };
            assert_eq!(
                checks,
                &["request-matches-store"],
                "{} on {stem}: caught by the request check",
                operator.name()
            );
        }
    }
}

fn turnsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turnsim")).args(args).current_dir(workspace_root()).output().expect("run turnsim")
}

#[test]
fn the_replay_line_shows_the_rewrite_and_the_check_that_caught_it() {
    let output = turnsim(&[
        "adversary",
        "scenarios/barrier-late-sibling-chat.yaml",
        "--operator",
        "duplicate-terminal-callback",
        "--seed",
        "0",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "a caught rewrite exits 0: {stdout}");
    assert!(
        stdout.contains("world     action adversary duplicate-terminal-callback:"),
        "the rewrite is in the timeline"
    );
    assert!(stdout.contains("FAILED callback-contract"), "the check that noticed is named: {stdout}");
    assert!(stdout.contains("CAUGHT duplicate-terminal-callback"));
}

#[test]
fn nothing_to_measure_is_an_error_not_a_pass() {
    let canary_only = turnsim(&["adversary", "scenarios/canary-fails-on-purpose.yaml"]);
    assert_eq!(canary_only.status.code(), Some(2), "no scenario to mutate");
    let no_seeds = turnsim(&["adversary", "scenarios/bench-standard-story.yaml", "--seeds", "0"]);
    assert_eq!(no_seeds.status.code(), Some(2), "zero seeds");
    let no_site =
        turnsim(&["adversary", "scenarios/continuation-single-client-tool.yaml", "--operator", "skip-exhausted-hook"]);
    assert_eq!(no_site.status.code(), Some(2), "an operator that changed nothing measured nothing");
    assert!(String::from_utf8_lossy(&no_site.stderr).contains("nothing measured"));
    let unknown = turnsim(&["adversary", "scenarios/bench-standard-story.yaml", "--operator", "no-such-operator"]);
    assert_eq!(unknown.status.code(), Some(2), "an unknown operator is bad input");
}

#[test]
fn an_equivalents_file_names_known_operators_and_says_why() {
    let directory = std::env::temp_dir().join(format!("turnsim-equivalents-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let write = |name: &str, yaml: &str| {
        let path = directory.join(name);
        std::fs::write(&path, yaml).expect("write");
        path
    };
    let good = write(
        "good.yaml",
        "equivalents:\n  - operator: drop-frame\n    scenario: scenarios/a.yaml\n    why: nobody sees it\n",
    );
    let loaded = Equivalents::load(&good).expect("loads");
    assert_eq!(loaded.why(Operator::DropFrame, std::path::Path::new("/repo/scenarios/a.yaml")), Some("nobody sees it"));
    assert_eq!(loaded.why(Operator::DropReset, std::path::Path::new("/repo/scenarios/a.yaml")), None);
    let unknown =
        write("unknown.yaml", "equivalents:\n  - operator: drop-everything\n    scenario: a.yaml\n    why: x\n");
    assert!(Equivalents::load(&unknown).is_err(), "an unknown operator is an error");
    let silent = write("silent.yaml", "equivalents:\n  - operator: drop-frame\n    scenario: a.yaml\n    why: ' '\n");
    assert!(Equivalents::load(&silent).is_err(), "an equivalence needs its argument");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn an_engine_over_the_protocol_gets_the_same_matrix_as_in_process() {
    // The adversary wraps the ports and the seam, not the built-in engine:
    // the built-in engine served over the protocol is rewritten and judged
    // the same, pair for pair.
    let matrix = |engine: Option<&str>| {
        let mut args = vec![
            "adversary",
            "scenarios/barrier-late-sibling-chat.yaml",
            "scenarios/bench-standard-story.yaml",
            "scenarios/client-joins-mid-stream.yaml",
            "--seeds",
            "1",
            "--format",
            "json",
        ];
        if let Some(command) = engine {
            args.extend(["--engine-cmd", command]);
        }
        let output = turnsim(&args);
        let json = String::from_utf8_lossy(&output.stdout).to_string();
        // Replay lines name the engine command; everything else must match.
        json.lines().filter(|line| !line.contains("\"replay\"")).collect::<Vec<_>>().join("\n")
    };
    let served = format!("{} engine", env!("CARGO_BIN_EXE_turnsim"));
    let in_process = matrix(None);
    assert!(in_process.contains("\"caught\""), "the matrix was written: {in_process}");
    assert_eq!(in_process, matrix(Some(&served)), "the same matrix over the protocol");
}

/// `operator` applies to `stem` at `seed`, and `check` notices, saying `says`.
fn assert_caught_by(stem: &str, seed: u64, operator: Operator, check: &str, says: &str) {
    let run = adversary::mutated(&scenario(stem), seed, &RegressionSet::default(), operator).expect("a site");
    assert!(run.applied.is_some(), "{} on {stem}: the operator applied", operator.name());
    assert!(
        run.violations.iter().any(|violation| violation.check == check && violation.message.contains(says)),
        "{} on {stem}: {check} says {says:?}: {:#?}",
        operator.name(),
        run.violations
    );
}

#[test]
fn a_server_tool_started_twice_is_caught_before_its_result_is_stored() {
    // A wrong engine runs the side effect twice while the stream goes on,
    // a stall, a 503 or an eviction later: no-lost-work names it each time.
    for stem in [
        "server-tool-ran-before-a-stall-runs-once",
        "server-tool-ran-before-a-503-mid-stream-is-kept",
        "server-tool-ran-before-an-eviction-runs-once",
    ] {
        assert_caught_by(stem, 0, Operator::ServerToolTwice, "no-lost-work", "");
    }
}

#[test]
fn client_view_catches_wrong_frames_a_later_repair_or_an_early_exit_used_to_hide() {
    // Each pair survived while client-view judged a client only at the end
    // of a settled run: the wrong was repaired by a later transcript, or
    // the client was gone by then, or no check asked for an error frame.
    let pairs = [
        (Operator::DropFrame, "continuation-single-client-tool"),
        (Operator::DuplicateFrame, "crash-as-a-reply-is-checkpointed"),
        (Operator::ReorderFrames, "barrier-three-siblings-mixed-order"),
        (Operator::ReorderFrames, "messenger-done"),
        (Operator::StaleTranscript, "client-disconnects-for-good"),
        (Operator::DropErrorFrame, "truncation-retry-cap"),
        (Operator::DropErrorFrame, "max-steps-ends-a-tool-loop"),
    ];
    let regressions = RegressionSet::default();
    for (operator, stem) in pairs {
        let file = scenario(stem);
        let baseline = adversary::run(&file, 0, &regressions, Mode::Count);
        let verdict = adversary::verdict_of(&file, 0, &regressions, &baseline, operator);
        let Verdict::Caught { checks, .. } = &verdict else {
            panic!("{} on {stem} is caught: {verdict:?}", operator.name())
        };
        assert!(
            checks.contains(&"client-view".to_string()),
            "{} on {stem}: client-view notices: {checks:?}",
            operator.name()
        );
    }
}

#[test]
fn a_client_left_short_of_the_store_while_time_passes_is_caught() {
    // Each pair survived while a client was judged only at its done or
    // error frames and its disconnect: the frame never sent left the
    // screen behind the store while time passed, and then the process
    // died (the connection with it) or a later transcript restated it.
    // The seed is one where the chunk lost is one the store took. (Two
    // more `drop-tool-frame` pairs once here dropped the echo of the
    // client's own result: its screen shows that answer since it sent it,
    // so those echoes are no site.)
    let pairs = [
        (Operator::DropToolFrame, "server-tool-ran-before-an-eviction-runs-once", 0),
        (Operator::DropFrame, "recovery-scheduled-again-by-a-restart-runs-once", 0),
        (Operator::DropFrame, "messenger-eviction-mid-reply", 1),
        (Operator::DropFrame, "eviction-memory-only-keeps-the-connection", 1),
    ];
    for (operator, stem, seed) in pairs {
        assert_caught_by(stem, seed, operator, "client-view", "shows less than the store while time passes");
    }
}

#[test]
fn a_caller_left_short_of_the_store_while_time_passes_is_caught() {
    // The attempt's one delta never reaches the caller, the store holds
    // it, and the model stalls for 2 s before the process dies.
    let stem = "recovery-scheduled-again-by-a-restart-runs-once";
    assert_caught_by(stem, 0, Operator::DropCallbackEvent, "caller-view", "while time passes; the store holds");
}

#[test]
fn a_connecting_client_never_told_a_stored_failure_is_caught() {
    // Each pair survived while an error frame was asked for only by the
    // clients connected when the turn failed: the one dropped replays the
    // failure the store holds to a client connecting later.
    let pairs = [
        ("explored-store-refuses-the-streaming-checkpoint", 11_826_224_123_489_032_911),
        ("explored-store-outage-during-a-recovery", 460_211_584_752_782_551),
    ];
    for (stem, seed) in pairs {
        assert_caught_by(stem, seed, Operator::DropErrorFrame, "client-view", "for clients that connect later");
    }
}

#[test]
fn a_post_never_made_of_a_delivery_recorded_completed_is_caught() {
    // The engine is told the later answer showed, and records the
    // delivery completed: the surface only ever showed the apology.
    let stem = "messenger-answered-again-keeps-a-later-reply";
    assert_caught_by(stem, 0, Operator::DropPost, "messenger-once", "is recorded completed owing");
}

#[test]
fn a_relay_broken_between_rests_is_caught_by_the_consumer_views() {
    // Each pair survived while a client was judged only where it rests and
    // a caller only at on_done: the chunk lost, doubled or swapped was
    // taken back, restated by a later transcript, or left with a client
    // that went away, and the stored answer came out the same. Now what a
    // consumer is streamed is held to what the model streamed, in order,
    // all of it by a take-back, a done frame or a terminal callback.
    let pairs = [
        (Operator::DropFrame, "client-joins-mid-stream", "client-view", "leaves without being sent"),
        (
            Operator::DropFrame,
            "truncation-retry-cap",
            "client-view",
            "told a take-back for request r1 without being sent",
        ),
        (Operator::DropFrame, "approval-denied", "client-view", "without being sent the finished call tc-delete"),
        (
            Operator::DropFrame,
            "three-messages-queued-each-answered-in-turn",
            "client-view",
            "is sent a transcript without being sent",
        ),
        (Operator::DuplicateFrame, "truncation-retry-succeeds", "client-view", "where the model streamed"),
        (Operator::DuplicateFrame, "client-disconnects-for-good", "client-view", "before the model streamed it"),
        (
            Operator::DuplicateFrame,
            "max-steps-ends-a-tool-loop",
            "client-view",
            "is sent the finished call tc-1 (lookup {\"page\":1}) where",
        ),
        (
            Operator::ReorderFrames,
            "three-messages-queued-each-answered-in-turn",
            "client-view",
            "where the model streamed",
        ),
        (Operator::DropCallbackEvent, "stall-recovers", "caller-view", "gets on_interrupted without being sent"),
        (Operator::DropCallbackEvent, "truncation-retry-cap", "caller-view", "gets on_reset without being sent"),
        (
            Operator::DropCallbackEvent,
            "max-steps-ends-a-tool-loop",
            "caller-view",
            "where the model streamed the finished call tc-2",
        ),
    ];
    for (operator, stem, check, says) in pairs {
        assert_caught_by(stem, 0, operator, check, says);
    }
}

#[test]
fn a_model_call_left_streaming_after_the_engine_moved_on_is_caught_by_converges() {
    // Each pair survived while converges looked only at how the run ended:
    // the call the engine gave up on at a stall, left parked without a
    // cancel, was closed later by the process dying or never asked after.
    for stem in ["crash-as-a-newer-message-is-stored", "bench-standard-story", "store-refuses-a-flush-mid-stream"] {
        let says = "without a cancel, though the turn of request r1 ended";
        assert_caught_by(stem, 0, Operator::DropCancel, "converges", says);
    }
}

#[test]
fn a_tool_frame_echoing_a_clients_own_answer_is_no_site() {
    // `continuation-single-client-tool`: c1 is sent tc-client-1 waiting,
    // then, after it sends the result itself, the tool frame saying so.
    // Its screen shows its own answer once sent: dropping the echo changes
    // nothing it shows, so only the first tool frame is a site.
    let file = scenario("continuation-single-client-tool");
    let baseline = adversary::run(&file, 0, &RegressionSet::default(), Mode::Count);
    assert!(baseline.violations.is_empty(), "the unmutated run passes");
    let echoed = baseline.record.history.crossings.iter().any(|crossing| {
        matches!(
            &crossing.what,
            turnsim::history::Boundary::Frame {
                frame: turnsim_engine::ports::Frame::Tool { state: turnsim_engine::ToolState::OutputAvailable, .. },
                ..
            }
        )
    });
    assert!(echoed, "the engine echoes the result to c1");
    assert_eq!(baseline.sites.get(&Operator::DropToolFrame), Some(&1), "the echo is no site");
}

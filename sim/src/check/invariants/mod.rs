//! The invariants of DESIGN.md, one module each. Every one runs on every
//! seed's trace, whether or not the scenario lists expectations.

mod callback_contract;
mod caller_view;
mod client_view;
mod continuation;
mod convergence;
mod empty_finish;
mod failure_stands;
mod messenger_once;
mod messenger_view;
mod mid_tool_input;
mod no_lost_work;
mod outcome_told;
mod parked_tool;
mod request_matches_store;
mod resume_handshake;
mod tool_outcomes;
mod tool_results;
mod tool_runs;
mod transcript_shape;
mod user_text;

use super::{CheckInput, Violation};

/// `client-view`'s alignment carried from look to look, for its test in
/// the integration suite.
#[doc(hidden)]
pub use client_view::RunsOnCopies;

/// One invariant: a name for reports and `turnsim list invariants`, the rule
/// in a sentence, and the check.
pub struct Invariant {
    pub name: &'static str,
    pub rule: &'static str,
    pub check: fn(&CheckInput) -> Vec<Violation>,
}

/// Invariant 11 (determinism) is checked by running a seed twice:
/// `turnsim check-determinism` and the determinism tests.
pub const INVARIANTS: [Invariant; 20] = [
    callback_contract::INVARIANT,
    continuation::INVARIANT,
    tool_results::INVARIANT,
    parked_tool::INVARIANT,
    transcript_shape::INVARIANT,
    mid_tool_input::INVARIANT,
    empty_finish::INVARIANT,
    messenger_once::INVARIANT,
    convergence::INVARIANT,
    no_lost_work::INVARIANT,
    client_view::INVARIANT,
    failure_stands::INVARIANT,
    caller_view::INVARIANT,
    messenger_view::INVARIANT,
    resume_handshake::INVARIANT,
    request_matches_store::INVARIANT,
    tool_runs::INVARIANT,
    tool_outcomes::INVARIANT,
    user_text::INVARIANT,
    outcome_told::INVARIANT,
];

pub const DETERMINISM_RULE: (&str, &str) = ("determinism", "the same seed gives the same trace, byte for byte");

pub fn check_all(input: &CheckInput) -> Vec<Violation> {
    INVARIANTS.iter().flat_map(|invariant| (invariant.check)(input)).collect()
}

//! Historical bugs of production turn engines, each selectable at run time.
//!
//! Every regression is off by default. Turning one on brings back the exact
//! mechanism that shipped, so the harness can prove it would have caught it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Regression {
    /// The barrier waits a fixed 60 s for unanswered siblings, then fires
    /// anyway: repair errors a human tool that was still being answered.
    BarrierFixedTimeout,
    /// No stream-active gate: a fast result answered before its slow sibling
    /// streamed fires the continuation; the slow sibling is repaired to error.
    NoStreamActiveGate,
    /// The barrier scans only the in-flight accumulator; a sibling the model
    /// has not streamed yet is invisible to it, so it fires early.
    AccumulatorScanBarrier,
    /// No re-check at stream finalize: an all-fast batch answered mid-stream
    /// is gated while the stream is open and then never continues.
    NoFinalizeRecheck,
    /// A stall routed to recovery re-arms the coalesce timer: the recovery and
    /// the re-armed continuation both call the model. (The engine before the
    /// fix had no other guard, so this also lets the barrier fire while a
    /// recovery is scheduled.)
    StallRearmsCoalesceTimer,
    /// An interrupted `chat()` returns cleanly with no terminal callback; a
    /// messenger then posts the truncated partial as the answer.
    SilentInterrupt,
    /// Recovery "continues" a partial that ends mid tool input: every attempt
    /// yields zero tokens until the attempt budget is spent.
    ContinueMidToolInput,
    /// A zero-token `unknown` finish is accepted as a normal end of step and
    /// stored as the answer.
    AcceptEmptyFinish,
    /// A retried attempt's parts are kept: orphan `step-start`s and partial
    /// text pile up in the transcript.
    KeepFailedAttemptParts,
    /// An errored `auto_continue: false` sibling does not re-arm the pending
    /// continuation: a batch completed by it is stranded.
    NoErroredSiblingRearm,
    /// Continuation intent lives only in memory: an eviction between a
    /// tool result and the continuation drops the continuation.
    VolatileContinuationIntent,
}

pub const ALL_REGRESSIONS: [Regression; 11] = [
    Regression::BarrierFixedTimeout,
    Regression::NoStreamActiveGate,
    Regression::AccumulatorScanBarrier,
    Regression::NoFinalizeRecheck,
    Regression::StallRearmsCoalesceTimer,
    Regression::SilentInterrupt,
    Regression::ContinueMidToolInput,
    Regression::AcceptEmptyFinish,
    Regression::KeepFailedAttemptParts,
    Regression::NoErroredSiblingRearm,
    Regression::VolatileContinuationIntent,
];

impl Regression {
    pub fn name(self) -> &'static str {
        match self {
            Self::BarrierFixedTimeout => "barrier-fixed-timeout",
            Self::NoStreamActiveGate => "no-stream-active-gate",
            Self::AccumulatorScanBarrier => "accumulator-scan-barrier",
            Self::NoFinalizeRecheck => "no-finalize-recheck",
            Self::StallRearmsCoalesceTimer => "stall-rearms-coalesce-timer",
            Self::SilentInterrupt => "silent-interrupt",
            Self::ContinueMidToolInput => "continue-mid-tool-input",
            Self::AcceptEmptyFinish => "accept-empty-finish",
            Self::KeepFailedAttemptParts => "keep-failed-attempt-parts",
            Self::NoErroredSiblingRearm => "no-errored-sibling-rearm",
            Self::VolatileContinuationIntent => "volatile-continuation-intent",
        }
    }

    /// One line: the symptom users saw.
    pub fn symptom(self) -> &'static str {
        match self {
            Self::BarrierFixedTimeout => "barrier fires after a fixed 60 s through a parked human tool",
            Self::NoStreamActiveGate => "premature continuation while the slow sibling is still streaming",
            Self::AccumulatorScanBarrier => "barrier cannot see a sibling the model has not streamed yet",
            Self::NoFinalizeRecheck => "all-fast batch answered mid-stream never continues",
            Self::StallRearmsCoalesceTimer => "stall recovery and a re-armed continuation both call the model",
            Self::SilentInterrupt => "interrupted chat() returns with no terminal callback",
            Self::ContinueMidToolInput => "recovery spins on a partial cut mid tool input until the budget is spent",
            Self::AcceptEmptyFinish => "zero-token unknown finish stored as the answer",
            Self::KeepFailedAttemptParts => "retried attempt's parts pile up in the transcript",
            Self::NoErroredSiblingRearm => "batch completed by an errored sibling is stranded",
            Self::VolatileContinuationIntent => "continuation dropped by an eviction",
        }
    }
}

impl fmt::Display for Regression {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

impl FromStr for Regression {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ALL_REGRESSIONS.into_iter().find(|regression| regression.name() == name).ok_or_else(|| {
            let known: Vec<_> = ALL_REGRESSIONS.iter().map(|regression| regression.name()).collect();
            format!("unknown regression `{name}`; known: {}", known.join(", "))
        })
    }
}

/// The regressions switched on for one run (usually none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegressionSet(Vec<Regression>);

impl RegressionSet {
    pub fn of(regressions: impl IntoIterator<Item = Regression>) -> Self {
        let mut list: Vec<_> = regressions.into_iter().collect();
        list.sort();
        list.dedup();
        Self(list)
    }

    pub fn has(&self, regression: Regression) -> bool {
        self.0.contains(&regression)
    }

    pub fn iter(&self) -> impl Iterator<Item = Regression> + '_ {
        self.0.iter().copied()
    }
}

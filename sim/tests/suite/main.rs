//! turnsim's integration tests, one binary, one module per intent.

mod checkers;
mod common;
mod crash_points;
mod determinism;
mod exploration;
mod format;
mod hostile;
mod regressions;
mod replay_views;
mod scenarios;
mod snapshots;

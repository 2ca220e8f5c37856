//! turnsim's integration tests, one binary, one module per intent.

mod adversary;
mod checkers;
mod cli;
mod common;
mod crash_points;
mod determinism;
mod engine_protocol;
mod expectations;
mod exploration;
mod format;
mod hostile;
mod hostile_engines;
mod layers;
mod library;
mod moments;
mod owed;
mod provider;
mod regressions;
mod replay_views;
mod rust_engine;
mod scenarios;
mod silent_engine;
mod snapshots;
mod vacuity;

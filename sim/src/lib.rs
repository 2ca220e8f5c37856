//! turnsim: a deterministic simulation and fault-injection harness for chat
//! turn engines.
//!
//! One seed is one madsim runtime; everything that reaches the trace (time,
//! randomness, task order) comes from the seed, so a seed replays byte for
//! byte. See the README for the CLI and `scenarios/README.md` for the format.

#[cfg(not(madsim))]
compile_error!(
    "turnsim must be built with `--cfg madsim` (the repository's .cargo/config.toml sets it; \
     run cargo from the workspace root, and keep `--cfg madsim` in any RUSTFLAGS you set)"
);

pub mod adversary;
pub mod applicable;
mod assert;
pub mod bench;
pub mod capability;
pub mod check;
pub mod cli;
pub mod coverage;
pub mod crash_points;
pub mod determinism;
pub mod explore;
pub mod history;
pub mod html;
pub mod live;
pub mod mermaid;
pub mod output;
pub mod pool;
pub mod properties;
pub mod protocol;
pub mod records;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod trace;
pub mod transcript_view;
pub mod world;

pub use assert::{assert_scenarios, check_scenarios};
pub use world::rng;

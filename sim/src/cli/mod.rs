//! The bodies of `turnsim`'s subcommands, one file each: `main.rs` parses
//! the flags and calls the one named. Each returns its exit code, or the bad
//! input that makes it 2 (see [`exit_with`]).

pub mod bench;
pub mod crash_points;
pub mod determinism;
pub mod engine;
pub mod explore;
mod flags;
pub mod list;
mod progress;
pub mod replay;
pub mod run;

use std::process::ExitCode;

use crate::errln;
use crate::scenario::ScenarioError;

pub fn exit_with(error: ScenarioError) -> ExitCode {
    errln!("error: {error}");
    ExitCode::from(2)
}

/// 130, as a shell reports a process ended by Ctrl-C.
fn interrupted_exit() -> ExitCode {
    ExitCode::from(130)
}

/// Stops every engine process still running when `main` ends, however it
/// ends (a harness panic unwinds through it).
pub struct StopEngines;

impl Drop for StopEngines {
    fn drop(&mut self) {
        crate::protocol::proxy::stop_waiting_processes();
    }
}

/// The first Ctrl-C stops taking new runs and leaves a partial summary; a
/// second one quits with 130.
pub fn stop_on_ctrl_c() {
    let _ = ctrlc::set_handler(|| {
        if crate::runner::interrupted() {
            crate::protocol::proxy::stop_waiting_processes();
            std::process::exit(130);
        }
        crate::runner::interrupt();
    });
}

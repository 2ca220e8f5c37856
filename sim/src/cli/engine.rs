//! `turnsim engine`: the built-in engine served over the engine protocol on
//! stdin/stdout (what `--engine-cmd` starts; see docs/protocol.md).

use std::process::ExitCode;

/// Serves until stdin closes; 2 when the protocol broke.
pub fn serve() -> ExitCode {
    match crate::protocol::serve::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("turnsim engine: {error}");
            ExitCode::from(2)
        }
    }
}

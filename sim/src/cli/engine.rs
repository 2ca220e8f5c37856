//! `turnsim engine`: the built-in engine served over the engine protocol on
//! stdin/stdout (what `--engine-cmd` starts; see docs/protocol.md).

use std::process::ExitCode;

use crate::capability::Capability;

/// Serves until stdin closes, declaring `capabilities` (every one when
/// `None`); 2 when the protocol broke.
pub fn serve(capabilities: Option<Vec<Capability>>) -> ExitCode {
    let capabilities = capabilities.unwrap_or_else(|| Capability::ALL.to_vec());
    match crate::protocol::serve::serve(&capabilities) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("turnsim engine: {error}");
            ExitCode::from(2)
        }
    }
}

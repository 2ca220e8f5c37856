//! What an engine process did wrong, as a value: the proxy ends the run
//! with one of these instead of unwinding, and the run reports it as a
//! failure like any check's (one block, no panic text).

use std::fmt;

/// The classes of engine fault, each named in reports as `engine-<class>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// It could not start, exited, or closed its stdout mid-exchange.
    Crashed,
    /// A line that is not a protocol message.
    Malformed,
    /// A well-formed message at a moment the protocol does not allow it.
    Protocol,
    /// No complete line within the real-time limit.
    Silent,
    /// Past the message or event budget without settling.
    Busy,
    /// A line or a run's output past its byte bound.
    Flood,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Crashed => "engine-crashed",
            Self::Malformed => "engine-malformed",
            Self::Protocol => "engine-protocol",
            Self::Silent => "engine-silent",
            Self::Busy => "engine-busy",
            Self::Flood => "engine-flood",
        }
    }
}

/// One engine fault: which process, what it did, and the tail of its stderr.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EngineFault {
    pub kind: FaultKind,
    pub command: String,
    pub generation: u32,
    pub what: String,
    /// The last bytes the process wrote to stderr (possibly empty).
    pub stderr: String,
}

impl EngineFault {
    /// The check name a run's violation carries.
    pub const CHECK: &'static str = "engine-fault";
}

impl fmt::Display for EngineFault {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            out,
            "{}: engine process `{}` (generation {}): {}",
            self.kind.name(),
            self.command,
            self.generation,
            self.what
        )?;
        if !self.stderr.trim().is_empty() {
            write!(out, "\n      its stderr (the last {} bytes at most):", super::output::STDERR_TAIL)?;
            for line in self.stderr.trim_end().lines() {
                write!(out, "\n      | {line}")?;
            }
        }
        Ok(())
    }
}

/// Cuts what an engine sent to a length fit for a report.
pub fn shown(bytes: &[u8]) -> String {
    const SHOWN: usize = 200;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]);
    // Control characters escaped: a report is text, whatever the engine sent.
    let text: String = text
        .trim_end()
        .chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect();
    if bytes.len() > SHOWN {
        format!("{text}… ({} bytes)", bytes.len())
    } else {
        text.to_string()
    }
}

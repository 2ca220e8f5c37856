//! Standard output and error that never panic.
//!
//! `println!` panics when stdout is a closed pipe (`| head -1`) or a full
//! disk. Here a failed write is remembered, later writes are skipped, and the
//! process still exits with its verdict: a failing sweep exits 1 whether or
//! not its report could be written. [`finish`] reports the write error on
//! stderr.

use std::io::Write as _;
use std::sync::Mutex;

static WRITE_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Writes `text` to stdout, unless an earlier write failed.
pub fn emit(text: &str) {
    let mut error = WRITE_ERROR.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if error.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(failed) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        *error = Some(failed);
    }
}

/// Writes a line to stderr; a failure there has nowhere to be reported.
pub fn note(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}").and_then(|()| stderr.flush());
}

/// Reports a failed stdout write on stderr (a reader that closed the pipe,
/// like `head`, chose to stop: that is not reported). The exit code is left alone.
pub fn finish() {
    let error = WRITE_ERROR.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    if let Some(error) = error.filter(|error| error.kind() != std::io::ErrorKind::BrokenPipe) {
        note(&format!("turnsim: could not write the output: {error}"));
    }
}

/// `println!` through [`emit`].
#[macro_export]
macro_rules! outln {
    () => { $crate::output::emit("\n") };
    ($($arg:tt)*) => { $crate::output::emit(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` through [`note`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::output::note(&format!($($arg)*)) };
}

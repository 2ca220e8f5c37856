//! Live runs (`turnsim run --live`): an engine process that drives a real
//! engine in real time (the live bridge, `adapters/live/`) rather than one
//! that keeps to the protocol's virtual time. The world, the scenarios and
//! the checks are the same; what changes is what the harness allows the
//! engine and gives it:
//!
//! - every run gets a scratch directory of its own, named in each `init`
//!   (`scratch_dir`): the same for every generation of the run, so an
//!   engine restarted after an eviction finds its data, and removed when
//!   the run is over (when its last engine process has been stopped;
//!   `TURNSIM_LIVE_KEEP_SCRATCH=1` keeps it, to read the engine's logs);
//! - an engine may be silent for [`SILENCE`] (120 s, not 30 s) before it
//!   counts as hung: starting a real server takes seconds;
//! - runs go one at a time unless `--jobs` says otherwise: two real engines
//!   on one machine share its cores, and their timing with them.
//!
//! Nothing here is deterministic: a live run's interleavings are the
//! machine's, so a verdict is a rate over repeats (`--repeat`), and a
//! replay runs the seed again rather than reproducing it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

static LIVE: AtomicBool = AtomicBool::new(false);
static SCRATCH_DIRS: AtomicU64 = AtomicU64::new(0);

/// How long a live engine may be silent before it counts as hung.
pub const SILENCE: Duration = Duration::from_secs(120);

/// Makes every run of this invocation a live run.
pub fn use_live(live: bool) {
    LIVE.store(live, Ordering::SeqCst);
}

pub fn is_live() -> bool {
    LIVE.load(Ordering::SeqCst)
}

/// ` --live` for a replay line, when this invocation's runs are live.
pub fn live_flag() -> &'static str {
    if is_live() {
        " --live"
    } else {
        ""
    }
}

/// One run's scratch directory: made when the run starts, removed with
/// everything in it when the last holder lets go of it.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// A new directory under the system's temporary directory.
    pub fn new() -> std::io::Result<Self> {
        let number = SCRATCH_DIRS.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("turnsim-live-{}-{number}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if std::env::var("TURNSIM_LIVE_KEEP_SCRATCH").is_ok_and(|keep| keep.trim() == "1") {
            crate::errln!("turnsim: kept the run's scratch directory {}", self.path.display());
            return;
        }
        // Best effort: a run's leftovers must not change its verdict.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

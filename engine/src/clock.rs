//! The engine's only reads of the clock. Under `cfg(madsim)` both are the
//! simulated clock; in production they are the host's.

use std::time::{Duration, UNIX_EPOCH};

pub use tokio::time::Instant;

/// Monotonic now, for timers.
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    Instant::now()
}

/// Wall-clock milliseconds, for durable timestamps that must survive a restart.
#[allow(clippy::disallowed_methods)]
pub fn wall_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    since_epoch.as_millis() as u64
}

//! The engine's only reads of the clock. Under `cfg(madsim)` both are the
//! simulated clock; in production they are the host's.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

pub use tokio::time::Instant;

/// Milliseconds added to the host's wall clock: zero, except where the
/// engine is served over the engine protocol, whose simulated runtime is
/// seeded per generation and so starts its wall clock elsewhere than the
/// harness's (`turnsim engine` anchors it to `init`'s `wall_base_ms`).
static WALL_OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Monotonic now, for timers.
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    Instant::now()
}

/// Wall-clock milliseconds, for durable timestamps that must survive a restart.
pub fn wall_ms() -> u64 {
    host_wall_ms().saturating_add_signed(WALL_OFFSET_MS.load(Ordering::Relaxed))
}

/// Sets the wall clock to read `wall_ms` now (see `WALL_OFFSET_MS`).
pub fn anchor_wall_ms(wall_ms: u64) {
    WALL_OFFSET_MS.store(wall_ms as i64 - host_wall_ms() as i64, Ordering::Relaxed);
}

#[allow(clippy::disallowed_methods)]
fn host_wall_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    since_epoch.as_millis() as u64
}

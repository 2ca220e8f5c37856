//! The bounds on what one scenario file may ask for. Each is checked before
//! anything it bounds is read, expanded or allocated, and an input that hits
//! one is rejected with its location, the bound's name and how to raise it
//! where raising it makes sense.

/// A scenario or fixture file larger than this is not read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Collections nested deeper than this are rejected.
pub const MAX_YAML_DEPTH: usize = 64;
/// YAML nodes per file, aliases counted as the nodes they repeat.
pub const MAX_YAML_NODES: u64 = 200_000;
/// Script steps visited while expanding `repeat`s and fixtures, over all of
/// a scenario's model calls: what one scenario may make the mock model play.
pub const MAX_SCRIPT_STEPS: u64 = 100_000;
/// Fixtures including fixtures, at most this deep.
pub const MAX_FIXTURE_DEPTH: usize = 8;
/// Scripted actions per scenario.
pub const MAX_ACTIONS: usize = 1_000;
/// Scripted faults per scenario.
pub const MAX_FAULTS: usize = 1_000;
/// Trace events one run records unless the scenario sets `max_events`.
pub const DEFAULT_MAX_EVENTS: u64 = 200_000;
/// The most `max_events` may be: what one run's trace may hold in memory.
pub const MAX_EVENTS: u64 = 2_000_000;
/// Clients connected at once.
pub const MAX_CLIENTS: u32 = 8;

//! turnsim-engine: a chat turn engine.
//!
//! It streams model output containing tool calls, persists the transcript
//! durably, auto-continues after client tool results behind an event-driven
//! barrier, and recovers from stalls, truncated provider streams and
//! evictions. All I/O goes through the traits in [`ports`]; all time comes from
//! tokio's clock, which is madsim's simulated clock under `cfg(madsim)`.

pub mod chunk;
pub mod client;
mod clock;
pub mod config;
pub mod durable;
pub mod events;
pub mod input;
pub mod messenger;
pub mod ports;
pub mod post;
pub mod regression;
pub mod seam;
pub mod session;
pub mod tag_first;
pub mod transcript;

pub use chunk::{Chunk, FinishReason, StreamError, Usage};
pub use clock::anchor_wall_ms;
pub use config::{EngineConfig, RecoveryConfig, ServerToolStart, ToolKind, TurnOptions};
pub use events::{EngineEvent, TurnStatus};
pub use ports::{
    Connection, DurableStore, FaultPoints, FaultSite, Frame, HookError, ModelProvider, ModelRequest, NoFaults,
    Observer, Ports, ServerTools, StreamCallback, ALL_FAULT_SITES,
};
pub use regression::{Regression, RegressionSet, ALL_REGRESSIONS};
pub use seam::{Engine, Input, InputSink, ModelEvent};
pub use session::{Activity, SessionHandle};
pub use transcript::parts::{self, Parts};
pub use transcript::{Message, Part, Role, ToolOutcome, ToolPart, ToolResult, ToolState};

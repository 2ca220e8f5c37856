//! The seam every turn engine is driven through, ours or not: one input at
//! a time, handled to the end, then the engine says when it next wants to
//! be woken. Model chunks, server-tool results and the chat surface's
//! answers to posts come back as inputs like any other, so an engine's
//! every decision depends only on the order of its inputs and the times
//! they carry. The same seam, as JSON lines, is the process protocol
//! (`docs/protocol.md`).
//!
//! The inputs and the sink they arrive through live in [`crate::input`],
//! below the ports that send them, and are re-exported here.

use crate::clock::Instant;

pub use crate::input::{Input, InputSink, ModelEvent};

/// An engine, driven in lockstep. A Rust engine implements this to run in
/// the simulated world in-process; the built-in engine does, and so does
/// the proxy that speaks the process protocol to an engine in any language.
pub trait Engine: Send {
    /// Handles `input` and everything it sets off inside the engine; its
    /// effects go out through the ports it was booted with.
    fn deliver(&mut self, input: Input);

    /// Whether the engine takes every input already waiting at one instant
    /// in one [`Engine::deliver_batch`]: an engine in another process, to
    /// whom each delivery is a round trip. Nothing can happen in the world
    /// between inputs that already wait, so a batch is handled exactly as
    /// its inputs one by one.
    fn takes_batches(&self) -> bool {
        false
    }

    /// Handles `inputs` in order, exactly as that many [`Engine::deliver`]s,
    /// calling `taking` with each one's index as the engine takes it (an
    /// engine that wraps another records then what it took).
    fn deliver_batch(&mut self, inputs: Vec<Input>, taking: &mut dyn FnMut(usize)) {
        for (at, input) in inputs.into_iter().enumerate() {
            taking(at);
            self.deliver(input);
        }
    }

    /// When the engine next wants [`Input::Timer`], if at all.
    fn next_timer(&self) -> Option<Instant>;
}

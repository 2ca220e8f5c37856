//! Work the world does for an engine that answers later (a server tool's
//! execution, the chat surface's answer to a post): while any is under way
//! for a live process, the world is not settled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use turnsim_engine::InputSink;

/// Each piece of work started: whom it answers, and whether it has.
#[derive(Clone, Default)]
pub struct Outstanding(Arc<Mutex<Vec<Work>>>);

/// Whom a piece of work answers, and whether it has.
type Work = (InputSink, Arc<AtomicBool>);

impl Outstanding {
    /// Starts one; set the flag it returns once it has answered.
    pub fn start(&self, sink: &InputSink) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        self.0.lock().expect("outstanding lock").push((sink.clone(), done.clone()));
        done
    }

    /// Whether one is under way for an engine still alive to take its
    /// answer (one under way for a dead process died with it).
    pub fn any_running(&self) -> bool {
        let outstanding = self.0.lock().expect("outstanding lock");
        outstanding.iter().any(|(sink, done)| !done.load(Ordering::SeqCst) && !sink.is_closed())
    }
}

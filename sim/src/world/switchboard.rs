//! Where the world finds the engine: the handle of the live process, or
//! nothing while it is evicted.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use turnsim_engine::SessionHandle;

#[derive(Clone, Default)]
pub struct Switchboard {
    engine: Arc<Mutex<Option<SessionHandle>>>,
    installed: Arc<Notify>,
}

impl Switchboard {
    pub fn install(&self, handle: SessionHandle) {
        *self.engine.lock().expect("switchboard lock") = Some(handle);
        self.installed.notify_waiters();
    }

    pub fn clear(&self) {
        *self.engine.lock().expect("switchboard lock") = None;
    }

    /// The live engine, if the process is up.
    pub fn engine(&self) -> Option<SessionHandle> {
        self.engine.lock().expect("switchboard lock").clone().filter(SessionHandle::is_alive)
    }

    /// The live engine, waiting for the process to (re)start if it is down.
    pub async fn wait_for_engine(&self) -> SessionHandle {
        loop {
            // Created before the check, so an install in between still wakes it.
            let installed = self.installed.notified();
            if let Some(engine) = self.engine() {
                return engine;
            }
            installed.await;
        }
    }
}

//! Where the world finds the engine: the handle of the live process, or
//! nothing while it is evicted.

use std::sync::{Arc, Mutex};

use turnsim_engine::SessionHandle;

#[derive(Clone, Default)]
pub struct Switchboard(Arc<Mutex<Option<SessionHandle>>>);

impl Switchboard {
    pub fn install(&self, handle: SessionHandle) {
        *self.0.lock().expect("switchboard lock") = Some(handle);
    }

    pub fn clear(&self) {
        *self.0.lock().expect("switchboard lock") = None;
    }

    /// The live engine, if the process is up.
    pub fn engine(&self) -> Option<SessionHandle> {
        self.0.lock().expect("switchboard lock").clone().filter(SessionHandle::is_alive)
    }
}

//! What each engine command declared in its first `init` reply, kept for
//! the invocation: which scenarios apply is decided once, from it, before
//! any run. An engine must declare the same at every `init`, or a run's
//! applicability would depend on which process served it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::capability::Declared;

static DECLARED: Mutex<BTreeMap<String, Declared>> = Mutex::new(BTreeMap::new());

/// Records what `command`'s engine declared at an `init`; an error when it
/// differs from what it declared before.
pub fn record(command: &str, declared: Declared) -> Result<(), String> {
    let mut known = DECLARED.lock().expect("declared capabilities lock");
    match known.get(command) {
        Some(before) if *before != declared => Err(format!(
            "its capabilities changed: it declared {before} at an earlier `init` and {declared} now (an engine \
             declares the same at every `init`)"
        )),
        Some(_) => Ok(()),
        None => {
            known.insert(command.to_string(), declared);
            Ok(())
        }
    }
}

/// What `command`'s engine declared, once one of its processes answered an `init`.
pub fn of(command: &str) -> Option<Declared> {
    DECLARED.lock().expect("declared capabilities lock").get(command).cloned()
}

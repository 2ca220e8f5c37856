//! When a scripted action or eviction fires: at a moment that crossed the
//! engine's boundary, never at one of the engine's own events. A commit is
//! read by what it newly stores, so an engine is faulted at the same moment
//! whatever it says of itself and however it groups its writes.

use std::collections::BTreeSet;

use turnsim_engine::durable::DurableState;
use turnsim_engine::durable::Write;
use turnsim_engine::{Message, Role};

use crate::scenario::{StoredRecord, Trigger};
use crate::trace::{Matcher, Moment};

/// The matcher for `trigger`, given what the store held before the first boot.
pub fn matcher(trigger: &Trigger, initial: &DurableState) -> Matcher {
    let mut watch = Watch {
        trigger: trigger.clone(),
        after_left: trigger.after.as_ref().map_or(0, |after| after.nth.max(1)),
        users: initial.messages.iter().filter(|message| message.role == Role::User).map(|m| m.id.clone()).collect(),
        alarms: initial.alarms.iter().map(|alarm| alarm.id.clone()).collect(),
        tool_held: trigger.tool.as_deref().is_some_and(|id| initial.messages.iter().any(|m| holds(m, id, trigger))),
    };
    Box::new(move |moment| watch.matches(moment))
}

struct Watch {
    trigger: Trigger,
    /// Occurrences of `after` still to come before matches count.
    after_left: u32,
    /// User messages and alarms stored so far.
    users: BTreeSet<String>,
    alarms: BTreeSet<String>,
    /// Whether the last commit that wrote the trigger's tool call held it
    /// in the trigger's state.
    tool_held: bool,
}

impl Watch {
    fn matches(&mut self, moment: &Moment) -> bool {
        // What the store holds is followed from the first commit, whether
        // or not `after` has happened yet.
        let stored = self.newly_stored(moment.writes);
        if let Some(after) = &self.trigger.after {
            if self.after_left > 0 {
                if moment.event.is_named(&after.event) {
                    self.after_left -= 1;
                }
                return false;
            }
        }
        match (&self.trigger.event, self.trigger.stored, &self.trigger.tool) {
            (_, Some(_), _) | (_, _, Some(_)) => stored,
            (Some(name), None, None) => moment.event.is_named(name),
            (None, None, None) => false,
        }
    }

    /// Whether this commit newly stores what the trigger names.
    fn newly_stored(&mut self, writes: &[Write]) -> bool {
        let mut fired = false;
        for write in writes {
            match write {
                Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => {
                    if message.role == Role::User && self.users.insert(message.id.clone()) {
                        fired |= self.trigger.stored == Some(StoredRecord::UserMessage);
                    }
                    if let Some(id) = self.trigger.tool.as_deref().filter(|id| message.tool(id).is_some()) {
                        let held = holds(message, id, &self.trigger);
                        fired |= held && !self.tool_held;
                        self.tool_held = held;
                    }
                }
                Write::PutAlarm(alarm) if self.alarms.insert(alarm.id.clone()) => {
                    fired |= self.trigger.stored == Some(StoredRecord::Alarm);
                }
                _ => {}
            }
        }
        fired
    }
}

/// Whether `message` holds call `id` in the trigger's state.
fn holds(message: &Message, id: &str, trigger: &Trigger) -> bool {
    let state = trigger.state.as_deref().unwrap_or_default();
    message.tools().any(|tool| tool.call_id == id && tool.state.as_str() == state)
}

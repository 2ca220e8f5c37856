//! When a scripted action or eviction fires: at a moment that crossed the
//! engine's boundary, never at one of the engine's own events. A commit is
//! read by what it newly stores, so an engine is faulted at the same moment
//! whatever it says of itself and however it groups its writes.

use turnsim_engine::durable::DurableState;
use turnsim_engine::durable::Write;
use turnsim_engine::Message;

use crate::records::{names_moment, Changes, Records};
use crate::scenario::Trigger;
use crate::trace::{Matcher, Moment};

/// The matcher for `trigger`, given what the store held before the first boot.
pub fn matcher(trigger: &Trigger, initial: &DurableState) -> Matcher {
    let mut watch = Watch::new(trigger, initial);
    Box::new(move |moment| watch.matches(moment))
}

/// A `store_error` that names its commit by what it would store: the
/// `nth` commit attempted that would newly store it is refused, and the
/// `times - 1` commits after it. What the store holds is followed through
/// the commits it takes, so a refused write still counts as new next time.
pub struct CommitRefusal {
    /// The fault's index in the scenario.
    pub fault: usize,
    watch: Watch,
    /// Matches still to come before the one refused.
    matches_left: u32,
    times: u32,
    /// Commits still to refuse once it fired.
    refusing: u32,
}

impl CommitRefusal {
    pub fn new(fault: usize, trigger: &Trigger, times: u32, initial: &DurableState) -> Self {
        let watch = Watch::new(trigger, initial);
        Self { fault, watch, matches_left: trigger.nth.max(1), times: times.max(1), refusing: 0 }
    }

    /// Whether this fault refuses the commit of `writes` (a commit the
    /// store does take is then shown to [`Self::taken`]).
    pub fn refuses(&mut self, writes: &[Write]) -> bool {
        if self.refusing > 0 {
            self.refusing -= 1;
            return true;
        }
        // Probed on a copy: a refused commit stores nothing.
        if self.matches_left == 1 && self.watch.clone().newly_stored(writes) {
            self.matches_left = 0;
            self.refusing = self.times - 1;
            return true;
        }
        false
    }

    /// The store took the commit of `writes`: what it stored is held from
    /// now on, and a match before the `nth` is counted.
    pub fn taken(&mut self, writes: &[Write]) {
        if self.watch.newly_stored(writes) && self.matches_left > 1 {
            self.matches_left -= 1;
        }
    }
}

#[derive(Clone)]
struct Watch {
    trigger: Trigger,
    /// Occurrences of `after` still to come before matches count.
    after_left: u32,
    /// What the store holds, followed from the first commit.
    records: Records,
    /// Whether the last commit that wrote the trigger's tool call held it
    /// in the trigger's state.
    tool_held: bool,
}

impl Watch {
    fn new(trigger: &Trigger, initial: &DurableState) -> Self {
        Self {
            trigger: trigger.clone(),
            after_left: trigger.after.as_ref().map_or(0, |after| after.nth.max(1)),
            records: Records::new(initial),
            tool_held: trigger.tool.as_deref().is_some_and(|id| initial.messages.iter().any(|m| holds(m, id, trigger))),
        }
    }

    fn matches(&mut self, moment: &Moment) -> bool {
        // What the store holds is followed from the first commit, whether
        // or not `after` has happened yet.
        let changes = self.records.take(moment.writes);
        let stored = self.stores(moment.writes, changes);
        if let Some(after) = &self.trigger.after {
            if self.after_left > 0 {
                if names_moment(after, moment.event, changes) {
                    self.after_left -= 1;
                }
                return false;
            }
        }
        let trigger = &self.trigger;
        if trigger.stored.is_some() || trigger.removed.is_some() || trigger.tool.is_some() {
            return stored;
        }
        if let Some(label) = &trigger.frame {
            return moment.event.is_frame(label);
        }
        trigger.event.as_deref().is_some_and(|name| moment.event.is_named(name))
    }

    /// Whether this commit newly stores (or takes away) what the trigger
    /// names, given what it changed.
    fn stores(&mut self, writes: &[Write], changes: Changes) -> bool {
        let mut fired = self.trigger.stored.is_some_and(|kind| changes.stores(kind))
            || self.trigger.removed.is_some_and(|kind| changes.removes(kind));
        if let Some(id) = self.trigger.tool.as_deref() {
            for write in writes {
                if let Write::PutMessage(message) | Write::PutMessageAfter { message, .. } = write {
                    if message.tool(id).is_some() {
                        let held = holds(message, id, &self.trigger);
                        fired |= held && !self.tool_held;
                        self.tool_held = held;
                    }
                }
            }
        }
        fired
    }

    /// Whether a commit of `writes` newly stores what the trigger names.
    fn newly_stored(&mut self, writes: &[Write]) -> bool {
        let changes = self.records.take(writes);
        self.stores(writes, changes)
    }
}

/// Whether `message` holds call `id` in the trigger's state.
fn holds(message: &Message, id: &str, trigger: &Trigger) -> bool {
    let state = trigger.state.as_deref().unwrap_or_default();
    message.tools().any(|tool| tool.call_id == id && tool.state.as_str() == state)
}

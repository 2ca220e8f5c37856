//! When a scripted action or eviction fires: at a moment that crossed the
//! engine's boundary, never at one of the engine's own events. A commit is
//! read by what it newly stores, so an engine is faulted at the same moment
//! whatever it says of itself and however it groups its writes.

use std::collections::BTreeSet;

use turnsim_engine::durable::DurableState;
use turnsim_engine::durable::Write;
use turnsim_engine::{Message, Role};

use crate::scenario::{RemovedRecord, StoredRecord, Trigger};
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
    /// User messages, replies with something in them, alarms and incidents
    /// stored so far, and the request id of the turn held in flight.
    users: BTreeSet<String>,
    replies: BTreeSet<String>,
    alarms: BTreeSet<String>,
    incidents: BTreeSet<String>,
    in_flight: Option<String>,
    /// Whether the last commit that wrote the trigger's tool call held it
    /// in the trigger's state.
    tool_held: bool,
}

impl Watch {
    fn new(trigger: &Trigger, initial: &DurableState) -> Self {
        Self {
            trigger: trigger.clone(),
            after_left: trigger.after.as_ref().map_or(0, |after| after.nth.max(1)),
            users: initial.messages.iter().filter(|message| message.role == Role::User).map(|m| m.id.clone()).collect(),
            replies: initial
                .messages
                .iter()
                .filter(|message| message.role == Role::Assistant && crate::history::has_content(message))
                .map(|message| message.id.clone())
                .collect(),
            alarms: initial.alarms.iter().map(|alarm| alarm.id.clone()).collect(),
            incidents: initial.incidents.keys().cloned().collect(),
            in_flight: initial.in_flight.as_ref().map(|turn| turn.request_id.clone()),
            tool_held: trigger.tool.as_deref().is_some_and(|id| initial.messages.iter().any(|m| holds(m, id, trigger))),
        }
    }

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
        let names_a_write = self.trigger.stored.is_some() || self.trigger.removed.is_some();
        match (&self.trigger.event, names_a_write, &self.trigger.tool) {
            (_, true, _) | (_, _, Some(_)) => stored,
            (Some(name), false, None) => moment.event.is_named(name),
            (None, false, None) => false,
        }
    }

    /// Whether this commit newly stores (or takes away) what the trigger names.
    fn newly_stored(&mut self, writes: &[Write]) -> bool {
        let stored = self.trigger.stored;
        let removed = self.trigger.removed;
        let mut fired = false;
        for write in writes {
            match write {
                Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => {
                    if message.role == Role::User && self.users.insert(message.id.clone()) {
                        fired |= stored == Some(StoredRecord::UserMessage);
                    }
                    let has_content = message.role == Role::Assistant && crate::history::has_content(message);
                    if has_content && self.replies.insert(message.id.clone()) {
                        fired |= stored == Some(StoredRecord::Reply);
                    }
                    if let Some(id) = self.trigger.tool.as_deref().filter(|id| message.tool(id).is_some()) {
                        let held = holds(message, id, &self.trigger);
                        fired |= held && !self.tool_held;
                        self.tool_held = held;
                    }
                }
                Write::PutAlarm(alarm) if self.alarms.insert(alarm.id.clone()) => {
                    fired |= stored == Some(StoredRecord::Alarm);
                }
                Write::RemoveAlarm(id) if self.alarms.remove(id) => {
                    fired |= removed == Some(RemovedRecord::Alarm);
                }
                Write::PutIncident(incident) if self.incidents.insert(incident.id.clone()) => {
                    fired |= stored == Some(StoredRecord::Incident);
                }
                Write::RemoveIncident(id) if self.incidents.remove(id) => {
                    fired |= removed == Some(RemovedRecord::Incident);
                }
                Write::InFlight(Some(turn)) if self.in_flight.as_ref() != Some(&turn.request_id) => {
                    self.in_flight = Some(turn.request_id.clone());
                    fired |= stored == Some(StoredRecord::InFlight);
                }
                Write::InFlight(None) if self.in_flight.take().is_some() => {
                    fired |= removed == Some(RemovedRecord::InFlight);
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

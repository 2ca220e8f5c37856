//! What each commit newly stores or takes away, read from its writes: the
//! moments a scenario names with `stored:` and `removed:`. Below both the
//! world (a trigger fires at such a moment) and the checks (a timing bound
//! is judged from one), so the two read a commit the same way.

use std::collections::BTreeSet;

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::{Message, Role};

use crate::scenario::{EventRef, RemovedRecord, StoredRecord};
use crate::trace::Event;

/// The records a store holds, followed commit by commit: user messages,
/// replies with something in them, alarms, incidents, and the request id
/// of the turn held in flight.
#[derive(Clone, Debug)]
pub struct Records {
    users: BTreeSet<String>,
    replies: BTreeSet<String>,
    alarms: BTreeSet<String>,
    incidents: BTreeSet<String>,
    in_flight: Option<String>,
}

/// The kinds of record one commit newly stored and took away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    stored: u8,
    removed: u8,
}

impl Changes {
    pub fn stores(self, kind: StoredRecord) -> bool {
        self.stored & stored_bit(kind) != 0
    }

    pub fn removes(self, kind: RemovedRecord) -> bool {
        self.removed & removed_bit(kind) != 0
    }
}

fn stored_bit(kind: StoredRecord) -> u8 {
    match kind {
        StoredRecord::UserMessage => 1,
        StoredRecord::Reply => 2,
        StoredRecord::Alarm => 4,
        StoredRecord::Incident => 8,
        StoredRecord::InFlight => 16,
    }
}

fn removed_bit(kind: RemovedRecord) -> u8 {
    match kind {
        RemovedRecord::Alarm => 1,
        RemovedRecord::Incident => 2,
        RemovedRecord::InFlight => 4,
    }
}

impl Records {
    /// What `initial` (the store before the first boot) already holds.
    pub fn new(initial: &DurableState) -> Self {
        let ids = |role: Role, keep: fn(&Message) -> bool| {
            initial.messages.iter().filter(|m| m.role == role && keep(m)).map(|m| m.id.clone()).collect()
        };
        Self {
            users: ids(Role::User, |_| true),
            replies: ids(Role::Assistant, crate::history::has_content),
            alarms: initial.alarms.iter().map(|alarm| alarm.id.clone()).collect(),
            incidents: initial.incidents.keys().cloned().collect(),
            in_flight: initial.in_flight.as_ref().map(|turn| turn.request_id.clone()),
        }
    }

    /// Takes a commit the store took: what it newly stored and took away.
    pub fn take(&mut self, writes: &[Write]) -> Changes {
        let mut changes = Changes::default();
        let mut stored = |kind| changes.stored |= stored_bit(kind);
        let mut removed = 0;
        for write in writes {
            match write {
                Write::PutMessage(message) | Write::PutMessageAfter { message, .. } => {
                    if message.role == Role::User && self.users.insert(message.id.clone()) {
                        stored(StoredRecord::UserMessage);
                    }
                    let has_content = message.role == Role::Assistant && crate::history::has_content(message);
                    if has_content && self.replies.insert(message.id.clone()) {
                        stored(StoredRecord::Reply);
                    }
                }
                Write::PutAlarm(alarm) if self.alarms.insert(alarm.id.clone()) => stored(StoredRecord::Alarm),
                Write::RemoveAlarm(id) if self.alarms.remove(id) => removed |= removed_bit(RemovedRecord::Alarm),
                Write::PutIncident(incident) if self.incidents.insert(incident.id.clone()) => {
                    stored(StoredRecord::Incident);
                }
                Write::RemoveIncident(id) if self.incidents.remove(id) => {
                    removed |= removed_bit(RemovedRecord::Incident);
                }
                Write::InFlight(Some(turn)) if self.in_flight.as_ref() != Some(&turn.request_id) => {
                    self.in_flight = Some(turn.request_id.clone());
                    stored(StoredRecord::InFlight);
                }
                Write::InFlight(None) if self.in_flight.take().is_some() => {
                    removed |= removed_bit(RemovedRecord::InFlight);
                }
                _ => {}
            }
        }
        changes.removed = removed;
        changes
    }
}

/// Whether a moment (a timeline event, and what its commit changed) is one
/// `reference` names: an event by name, a client frame by its label, or
/// the commit that stores or takes away a kind of record.
pub fn names_moment(reference: &EventRef, event: &Event, changes: Changes) -> bool {
    if names_a_change(reference) {
        names_change(reference, changes)
    } else {
        names_event(reference, event)
    }
}

/// Whether `reference` names a commit by what it changes (`stored:`,
/// `removed:`) rather than an event.
pub fn names_a_change(reference: &EventRef) -> bool {
    reference.stored.is_some() || reference.removed.is_some()
}

/// Whether a commit that changed this is the one `reference` names.
pub fn names_change(reference: &EventRef, changes: Changes) -> bool {
    reference.stored.is_some_and(|kind| changes.stores(kind))
        || reference.removed.is_some_and(|kind| changes.removes(kind))
}

/// Whether `event` is the event or the client frame `reference` names.
pub fn names_event(reference: &EventRef, event: &Event) -> bool {
    match (&reference.frame, &reference.event) {
        (Some(label), _) => event.is_frame(label),
        (None, Some(name)) => event.is_named(name),
        (None, None) => false,
    }
}

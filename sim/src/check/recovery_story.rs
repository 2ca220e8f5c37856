//! What the boundary shows of recoveries: the store's recovery records
//! (alarms and incidents, written through the store like any other
//! record), the model requests between them, and the host's
//! recovery-exhausted hook. `expect.recovery` counts these, never the
//! engine's account of its own decisions.

use std::collections::BTreeMap;

use turnsim_engine::durable::Write;

use crate::history::{Boundary, History};

/// Recoveries as the boundary shows them.
#[derive(Debug, Default, PartialEq)]
pub struct RecoveryStory {
    /// Recovery alarms stored where none of that id was held: each is an
    /// attempt scheduled.
    pub scheduled: u32,
    /// Incidents closed after their alarm fired and the model was asked
    /// again, with the turn not stored as failed nor the exhausted hook
    /// called since the alarm was stored.
    pub completed: u32,
    /// Incidents closed with no attempt since their latest alarm: parked
    /// for a client's answer that will continue the turn, or stood down.
    pub parked: u32,
}

/// One incident's recovery since its latest alarm was stored.
#[derive(Default)]
struct Open {
    /// Its alarm fired (was removed): an attempt may run.
    fired: bool,
    /// The model was asked again after its alarm fired.
    attempted: bool,
    /// The turn was stored as failed, or the exhausted hook was called.
    gave_up: bool,
}

pub fn read(history: &History) -> RecoveryStory {
    let mut story = RecoveryStory::default();
    // Alarms held, by id, with their incident.
    let mut alarms: BTreeMap<&str, &str> =
        history.initial.alarms.iter().map(|alarm| (alarm.id.as_str(), alarm.incident_id.as_str())).collect();
    let mut open: BTreeMap<&str, Open> = alarms.values().map(|incident| (*incident, Open::default())).collect();
    for crossing in history.iter() {
        match &crossing.what {
            Boundary::Commit { writes } => {
                for write in writes {
                    match write {
                        // An alarm put while one of its id is held is the
                        // same attempt's alarm again; one put after its
                        // removal is a new attempt.
                        Write::PutAlarm(alarm) if !alarms.contains_key(alarm.id.as_str()) => {
                            alarms.insert(&alarm.id, &alarm.incident_id);
                            open.insert(&alarm.incident_id, Open::default());
                            story.scheduled += 1;
                        }
                        Write::RemoveAlarm(id) => {
                            let incident = alarms.remove(id.as_str());
                            if let Some(recovery) = incident.and_then(|incident| open.get_mut(incident)) {
                                recovery.fired = true;
                            }
                        }
                        Write::Terminal(Some(_)) => open.values_mut().for_each(|recovery| recovery.gave_up = true),
                        Write::RemoveIncident(id) => match open.remove(id.as_str()) {
                            Some(recovery) if !recovery.attempted => story.parked += 1,
                            Some(recovery) if !recovery.gave_up => story.completed += 1,
                            _ => {}
                        },
                        _ => {}
                    }
                }
            }
            Boundary::ModelRequest { .. } => {
                open.values_mut().filter(|recovery| recovery.fired).for_each(|recovery| recovery.attempted = true);
            }
            Boundary::Exhausted { .. } => open.values_mut().for_each(|recovery| recovery.gave_up = true),
            _ => {}
        }
    }
    story
}

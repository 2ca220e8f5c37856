//! A connected client shows what the engine stored: the transcript rebuilt
//! from every frame a connection was sent (the transcript on connect, chunks,
//! tool states, take-backs) equals the store's at the end of the run, and
//! at every rest of the connection (`rest`: each `done` or `error` frame,
//! and its disconnect), and it shows no less than the store wherever time
//! passes (`waiting`). A turn that failed, or whose recovery gave up, is
//! told to every client connected then, and a stream is told its end
//! (`failure_told`); a client streamed a call that needs approval is asked
//! for it wherever time passes (`rest`). A client shows its own answer to a tool once it sends
//! it, as a UI does (`views::ClientView::answer`). A
//! retried attempt's text left on screen, a tool state never sent, a repair
//! the client never heard of: each shows here. And a client is not left
//! showing a recovery under way once the run has settled: with nothing
//! left to run or wake for, no recovery can be going on. Nor is it shown
//! none while the store holds one still attempting, nor one while the
//! store holds none. A turn's `done` frame says whether its stream
//! continued the answer before it, as the engine asked the model. And
//! between rests, what a client is streamed is what the model streamed
//! (`relay`): a chunk lost, doubled or swapped shows even where a later
//! transcript or take-back repairs the screen before it rests.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::{DurableState, Write};
use turnsim_engine::ports::Frame;

mod failure_told;
mod relay;
mod rest;
mod waiting;

use rest::{AtRest, Stores};
pub use waiting::RunsOnCopies;

use super::Invariant;
use crate::check::views::{shown, ClientViews, ShownMessage};
use crate::check::{CheckInput, Violation};
use crate::history::{Boundary, Crossing, RunEnd};

pub const INVARIANT: Invariant = Invariant {
    name: "client-view",
    rule: "every connected client's transcript, rebuilt from the frames it was sent, is the stored transcript when the run settles, at every `done` or `error` frame it gets (the finished request's messages) and when it disconnects (the store, or ahead of it by a stream in progress); wherever sim time passes, no stored message shows less on screen than the store holds, a client streamed the finished call of a tool that needs approval is asked for it (not left showing it input-available), and a client that connects while the store holds a failure for later clients is told it; a turn that failed, or whose recovery gave up (`on_exhausted`), is told to every client connected then as an `error` frame; a client streamed a request is sent a `done` or `error` frame (or the transcript, or `resume-none`) after it by the time the run settles; a client shows its own tool result or approval once it sends it; a client shows a recovery under way exactly while the store holds one attempting, and not once the run has settled; a `done` frame says a stream continued the answer before it exactly when the model was asked to continue; between rests, a client is streamed what the model streamed, in order, each piece once, and all of it by a `done` frame, a take-back, or its leaving",
    check,
};

fn check(input: &CheckInput) -> Vec<Violation> {
    let (misshown, at_rest, views) = judged_as_it_goes(input);
    let mut violations: Vec<Violation> = misshown.into_iter().collect();
    violations.extend(continuation_misflagged(input));
    violations.extend(at_rest);
    violations.extend(failure_told::failure_untold(input));
    violations.extend(relay::misrelayed(input));
    // Frames still in flight (a run cut at its horizon) prove nothing.
    if input.run.end != RunEnd::Quiescent {
        return violations;
    }
    let history = &input.run.history;
    let stored = shown(&input.final_store.messages);
    let at = history.crossings.last().map_or(0, |crossing| crossing.at_event).saturating_sub(1);
    for (connection, view) in views.open {
        if view.recovering {
            let text =
                format!("client connection c{connection} still shows a recovery under way after the run settled");
            violations.push(Violation::at(INVARIANT.name, at, text));
        }
        let showing = shown(&view.messages);
        if let Some(difference) = first_difference(&showing, &stored) {
            violations.push(Violation::at(
                INVARIANT.name,
                at,
                format!("client connection c{connection} shows a different transcript than the store: {difference}"),
            ));
        }
    }
    violations
}

/// The parts of client-view that judge as the history goes, over one fold
/// of the client views and the store (each rebuilt them before): the
/// recovery shown (`RecoveryShown`), and each connection at its rests
/// (`rest`). Returns the first violation of each, and the client views as
/// the whole history left them (the open ones are judged against the store).
fn judged_as_it_goes(input: &CheckInput) -> (Option<Violation>, Option<Violation>, ClientViews) {
    let history = &input.run.history;
    let mut views = ClientViews::default();
    let mut store = Stores::new(history.initial.clone());
    let mut recovery = RecoveryShown::new(input);
    let mut at_rest = AtRest::new(input);
    for (index, crossing) in history.iter().enumerate() {
        recovery.before(input, index, crossing, &views, &store.held);
        at_rest.before(input, index, crossing, &views, &store);
        views.step(index, &crossing.what);
        store.step(&crossing.what);
        recovery.after(&crossing.what);
        at_rest.after(input, index, &crossing.what, &views, &store);
    }
    (recovery.finish(input, &views, &store.held), at_rest.finish(input, &views, &store), views)
}

/// Wherever the engine rests, a client in step with it
/// (not held for a resume ack) shows a recovery under way if the store
/// holds an incident still attempting: scheduled, waiting for an idle
/// session, or running. One a refused commit tried to end or schedule does
/// not count: the engine may tell clients a recovery is over (or never
/// began) before the store records it. A settled run is judged at its end
/// too: an incident left attempting then is a recovery nobody will run.
/// And a client shows none while the store holds none attempting, unless
/// a refused commit tried to schedule one (the engine may have said so
/// before the store refused it). That needs an engine that keeps its
/// incidents in the shared vocabulary: one whose run never wrote one
/// (the Cloudflare port keeps them opaque) is judged so only at the end.
struct RecoveryShown {
    misshown: Option<Violation>,
    /// Incidents a refused commit tried to end.
    ending: BTreeSet<String>,
    /// Incidents a refused commit tried to schedule.
    scheduling: BTreeSet<String>,
    /// Whether the run's engine writes incidents at all.
    typed: bool,
    waited_since: u64,
}

impl RecoveryShown {
    fn new(input: &CheckInput) -> Self {
        let history = &input.run.history;
        let typed =
            !history.initial.incidents.is_empty() || history.iter().any(|crossing| writes_an_incident(&crossing.what));
        Self { misshown: None, ending: BTreeSet::new(), scheduling: BTreeSet::new(), typed, waited_since: 0 }
    }

    /// Before `crossing` steps the views and the store: a rest judged.
    fn before(
        &mut self,
        input: &CheckInput,
        index: usize,
        crossing: &Crossing,
        views: &ClientViews,
        store: &DurableState,
    ) {
        // The engine rests before each input (a timer's too: it handles
        // each in no sim time) and wherever time passed. Not before a
        // kill, which may cut a handler short; nor before a connect or a
        // disconnect in the instant of what came before it: across the
        // process boundary, a disconnect in the same instant as its connect
        // may be taken before the frames answering the connect are recorded.
        let waited = crossing.at_us > self.waited_since
            || (crossing.what.is_input()
                && !matches!(crossing.what, Boundary::Connect { .. } | Boundary::Disconnect { .. }));
        self.waited_since = crossing.at_us;
        let rest = waited && !matches!(crossing.what, Boundary::Killed | Boundary::KeptOpen { .. });
        if rest && self.misshown.is_none() {
            if let Some(text) = hidden(views, store, &self.ending)
                .or_else(|| stale(views, store, &self.scheduling).filter(|_| self.typed))
            {
                self.misshown = Some(Violation::at(INVARIANT.name, input.event_of(index.saturating_sub(1)), text));
            }
        }
    }

    /// After `crossing` stepped the store: which recoveries a commit ended
    /// or scheduled, or a refused one tried to.
    fn after(&mut self, crossing: &Boundary) {
        match crossing {
            Boundary::Commit { writes } => {
                for write in writes {
                    if let Write::PutIncident(incident) = write {
                        self.ending.remove(&incident.id);
                    }
                    if let Some(id) = schedules_a_recovery(write).or_else(|| ends_a_recovery(write)) {
                        self.scheduling.remove(&id);
                    }
                }
            }
            Boundary::CommitRefused { writes } => {
                self.ending.extend(writes.iter().filter_map(ends_a_recovery));
                self.scheduling.extend(writes.iter().filter_map(schedules_a_recovery));
            }
            _ => {}
        }
    }

    /// The first violation. A settled run rests for good: an incident still
    /// attempting then is a recovery nobody will run, hidden from a client
    /// that is told none.
    fn finish(self, input: &CheckInput, views: &ClientViews, store: &DurableState) -> Option<Violation> {
        if self.misshown.is_some() {
            return self.misshown;
        }
        let at = input.event_of(input.run.history.crossings.len().saturating_sub(1));
        let text = hidden(views, store, &self.ending).filter(|_| input.run.end == RunEnd::Quiescent);
        text.map(|text| Violation::at(INVARIANT.name, at, text))
    }
}

/// A turn's `done` frame tells a client whether the stream continued the
/// answer before it (the model asked to continue) or answered anew: the
/// flag agrees with what the engine asked the model for that request.
fn continuation_misflagged(input: &CheckInput) -> Option<Violation> {
    let mut asked: BTreeMap<&str, bool> = BTreeMap::new();
    for (index, crossing) in input.run.history.iter().enumerate() {
        match &crossing.what {
            Boundary::ModelRequest { request, .. } => {
                asked.insert(request.request_id.as_str(), request.continuation);
            }
            Boundary::Frame { connection, frame: Frame::Done { request_id, continuation } } => {
                let Some(&continued) = asked.get(request_id.as_str()) else { continue };
                if continued != *continuation {
                    let text = format!(
                        "client connection c{connection} is told request {request_id} {} though the model was asked {}",
                        if *continuation { "continued the answer before it" } else { "answered anew" },
                        if continued { "to continue" } else { "for a new answer" },
                    );
                    return Some(Violation::at(INVARIANT.name, input.event_of(index), text));
                }
            }
            _ => {}
        }
    }
    None
}

/// A client in step shown no recovery while the store holds one attempting.
fn hidden(views: &ClientViews, store: &DurableState, ending: &BTreeSet<String>) -> Option<String> {
    let incident = attempting_incident(store, ending)?;
    let (connection, _) = views.in_step().find(|(_, view)| !view.recovering)?;
    Some(format!(
        "client connection c{connection} shows no recovery under way while the store holds incident {incident} attempting"
    ))
}

/// A client in step shown a recovery under way while the store holds no
/// incident attempting and no refused commit tried to schedule one.
fn stale(views: &ClientViews, store: &DurableState, scheduling: &BTreeSet<String>) -> Option<String> {
    let any_attempting = store.incidents.values().any(|incident| incident.status == "attempting");
    if any_attempting || !scheduling.is_empty() {
        return None;
    }
    let (connection, _) = views.in_step().find(|(_, view)| view.recovering)?;
    Some(format!("client connection c{connection} shows a recovery under way while the store holds none attempting"))
}

/// An incident still attempting, not being ended.
fn attempting_incident<'a>(store: &'a DurableState, ending: &BTreeSet<String>) -> Option<&'a str> {
    store
        .incidents
        .values()
        .find(|incident| incident.status == "attempting" && !ending.contains(&incident.id))
        .map(|incident| incident.id.as_str())
}

/// The incident a write ends or gives up, if it does.
fn ends_a_recovery(write: &Write) -> Option<String> {
    match write {
        Write::RemoveIncident(id) => Some(id.clone()),
        Write::PutIncident(incident) if incident.status != "attempting" => Some(incident.id.clone()),
        Write::PutAlarm(alarm) => Some(alarm.incident_id.clone()),
        _ => None,
    }
}

fn writes_an_incident(crossing: &Boundary) -> bool {
    match crossing {
        Boundary::Commit { writes } | Boundary::CommitRefused { writes } => {
            writes.iter().any(|write| matches!(write, Write::PutIncident(_)))
        }
        _ => false,
    }
}

/// The incident a write schedules, if it does.
fn schedules_a_recovery(write: &Write) -> Option<String> {
    match write {
        Write::PutIncident(incident) if incident.status == "attempting" => Some(incident.id.clone()),
        _ => None,
    }
}

/// Where two shown transcripts first differ, in words.
pub fn first_difference(showing: &[ShownMessage], stored: &[ShownMessage]) -> Option<String> {
    first_difference_after(showing, stored, 0)
}

/// [`first_difference`] of two lists that start after `passed` messages
/// shown alike.
pub fn first_difference_after(showing: &[ShownMessage], stored: &[ShownMessage], passed: usize) -> Option<String> {
    for (at, (shown, kept)) in showing.iter().zip(stored).enumerate() {
        if shown.id != kept.id {
            return Some(format!("message {} is {} on screen but {} in the store", passed + at + 1, shown.id, kept.id));
        }
        if shown.parts != kept.parts {
            return Some(format!("message {} shows {:?}; the store holds {:?}", shown.id, shown.parts, kept.parts));
        }
    }
    let (showing, stored) = (passed + showing.len(), passed + stored.len());
    match showing.cmp(&stored) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Less => Some(format!("the store holds {stored} messages, the client shows {showing}")),
        std::cmp::Ordering::Greater => Some(format!("the client shows {showing} messages, the store holds {stored}")),
    }
}

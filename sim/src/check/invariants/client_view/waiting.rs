//! A client judged wherever time passes: a person looks at the screen
//! between events, not only at a `done` frame. Whenever sim time moves on
//! with the engine alive, every client in step with it shows each stored
//! message as the store holds it, or ahead of it by a stream in progress
//! (the rule a disconnect is judged by). A tool frame never sent, a chunk
//! lost where the store took it, a take-back that never came: each stays
//! on screen while time passes, though a later transcript may repair it.
//! A wrong repaired within the instant it was made is never on screen.
//!
//! A client that connects (or is let through after a resume) while the
//! store holds a failure for clients that connect later has been told a
//! failure by then.
//!
//! Two things a client may show short of the store: the decision on an
//! approval (a tool frame carries the state, not the decision: only a
//! transcript or the client's own answer shows it), and, for a message
//! whose writes the store refused while its request ran, its tools' states.
//!
//! Only what changed since the last look is judged: the messages written
//! since, and those a connection was sent something of. Each (connection,
//! message) pair keeps where its stored parts lay on screen when last
//! found in step (`RunsOnCopies`), so a growing message costs what it grew;
//! a message of one chunk of parts is aligned afresh, since copies kept of
//! it cost more (`Parts::is_one_chunk`).

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::durable::Write;
use turnsim_engine::ports::Frame;
use turnsim_engine::{Message, Parts, Role};

use super::rest::{part_runs_on, stateless, Stores};
use crate::check::views::{shown_message, shown_part, ClientView, ClientViews, Shown};
use crate::history::Boundary;

/// What changed since the last look, and the alignments found then.
#[derive(Default)]
pub struct Waits {
    /// Messages the store was asked to write since.
    stored: BTreeSet<String>,
    /// Per connection, what it was sent since.
    sent: BTreeMap<u64, Sent>,
    copies: RunsOnCopies,
}

enum Sent {
    /// A transcript, or a connection opened or let through: judge it whole.
    Whole,
    Messages(BTreeSet<String>),
}

impl Waits {
    /// Notes a commit (taken or refused) and its messages.
    pub fn written(&mut self, writes: &[Write]) {
        let ids = writes.iter().filter_map(|write| match write {
            Write::RemoveMessage(id) => Some(id),
            _ => write.message().map(|message| &message.id),
        });
        self.stored.extend(ids.cloned());
    }

    /// Notes what `crossing` sent or opened (after `views` took it in).
    pub fn crossed(&mut self, crossing: &Boundary, views: &ClientViews) {
        match crossing {
            Boundary::Connect { connection } | Boundary::ResumeAck { connection, .. } => {
                self.sent.insert(*connection, Sent::Whole);
            }
            Boundary::Frame { connection, frame } => {
                let message = match frame {
                    Frame::Messages(_) => {
                        self.sent.insert(*connection, Sent::Whole);
                        return;
                    }
                    Frame::Chunk { message_id, .. } => message_id,
                    Frame::Reset { message, .. } => &message.id,
                    Frame::Tool { call_id, .. } => {
                        let view = views.open.get(connection);
                        let holder = view.and_then(|view| {
                            view.messages.iter().find(|message| !message.parts.tool_positions(call_id).is_empty())
                        });
                        let Some(holder) = holder else { return };
                        &holder.id
                    }
                    _ => return,
                };
                match self.sent.entry(*connection).or_insert_with(|| Sent::Messages(BTreeSet::new())) {
                    Sent::Whole => {}
                    // Most frames stream into a message sent to before.
                    Sent::Messages(messages) if messages.contains(message) => {}
                    Sent::Messages(messages) => {
                        messages.insert(message.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Time passes: the first client in step showing less than the store.
    /// `whole` judges a connection's whole transcript; `lost` holds the
    /// messages whose writes the store refused while their request ran.
    pub fn look(
        &mut self,
        views: &ClientViews,
        store: &Stores,
        lost: &BTreeSet<String>,
        whole: impl Fn(&ClientView) -> Option<String>,
    ) -> Option<String> {
        let stored = std::mem::take(&mut self.stored);
        for (connection, view) in views.in_step() {
            let sent = self.sent.remove(connection);
            let ids: BTreeSet<&String> = match &sent {
                Some(Sent::Whole) => {
                    if let Some(difference) = whole(view) {
                        return Some(while_waiting(*connection, &difference));
                    }
                    // Told some failure: which request a replayed status
                    // names is the engine's to say (the text a person reads
                    // is the same).
                    let failure = store.held.terminal_status.as_ref().filter(|_| !view.told_a_failure);
                    if let Some(request) = failure.map(|status| &status.request_id) {
                        return Some(format!(
                            "client connection c{connection} is shown the transcript while the store holds the failure of request {request} for clients that connect later, and is told no failure"
                        ));
                    }
                    continue;
                }
                Some(Sent::Messages(messages)) => messages.iter().chain(&stored).collect(),
                None => stored.iter().collect(),
            };
            for id in ids {
                if let Some(difference) = self.short_of(*connection, view, id, store, lost.contains(id)) {
                    return Some(while_waiting(*connection, &difference));
                }
            }
        }
        None
    }

    /// Where `view` shows message `id` short of the store (as it stands,
    /// and as the engine tried to leave it).
    fn short_of(
        &mut self,
        connection: u64,
        view: &ClientView,
        id: &str,
        store: &Stores,
        loose: bool,
    ) -> Option<String> {
        let held = store.held.message(id)?;
        let on_screen = view.messages.iter().find(|message| message.id == id);
        let tried = store.tried.as_ref().and_then(|tried| tried.message(id));
        let fits = |copies: &mut RunsOnCopies, tried: bool, kept: &Message| match on_screen {
            Some(shown) => copies.runs_on((connection, tried, loose), id, &kept.parts, &shown.parts, loose),
            None => kept.role == Role::Assistant && shown_message(kept).parts.is_empty(),
        };
        if fits(&mut self.copies, false, held) || tried.is_some_and(|tried| fits(&mut self.copies, true, tried)) {
            return None;
        }
        let showing = on_screen.map(shown_message);
        Some(match showing {
            Some(showing) => {
                format!("message {id} shows {:?}; the store holds {:?}", showing.parts, shown_message(held).parts)
            }
            None => format!("message {id} is not on screen; the store holds {:?}", shown_message(held).parts),
        })
    }
}

fn while_waiting(connection: u64, difference: &str) -> String {
    format!("client connection c{connection} shows less than the store while time passes: {difference}")
}

/// Per (connection, taken from the tried store, loose, message): the copies
/// last found in step, and which screen part each visible stored part
/// lay on. The next look reads only what either side changed since.
#[derive(Default)]
pub struct RunsOnCopies {
    /// By (connection, tried, loose), then by message: a look finds its
    /// pair by the message id it has, and updates it in place.
    aligned: BTreeMap<(u64, bool, bool), BTreeMap<String, Aligned>>,
}

struct Aligned {
    kept: Parts,
    shown: Parts,
    /// (stored index, screen index) of each visible stored part, in order.
    pairs: Vec<(usize, usize)>,
}

impl RunsOnCopies {
    /// Whether `shown` shows each visible part of `kept` in order, as
    /// stored or run on (text on screen matching none passed over).
    pub fn runs_on(
        &mut self,
        key: (u64, bool, bool),
        message_id: &str,
        kept: &Parts,
        shown: &Parts,
        loose: bool,
    ) -> bool {
        // A message of one chunk on each side is aligned afresh, with no
        // copies kept (`Parts::is_one_chunk`).
        if kept.is_one_chunk() && shown.is_one_chunk() {
            if let Some(copies) = self.aligned.get_mut(&key) {
                copies.remove(message_id);
            }
            return align(kept, shown, (0, 0), loose, &mut Vec::new());
        }
        let copies = self.aligned.entry(key).or_default();
        let earlier = copies.remove(message_id);
        let aligned = earlier.and_then(|earlier| earlier.resume(kept, shown, loose)).or_else(|| {
            let mut pairs = Vec::new();
            align(kept, shown, (0, 0), loose, &mut pairs).then(|| Aligned {
                kept: kept.clone(),
                shown: shown.clone(),
                pairs,
            })
        });
        let fits = aligned.is_some();
        if let Some(aligned) = aligned {
            copies.insert(message_id.to_string(), aligned);
        }
        fits
    }
}

impl Aligned {
    /// The alignment carried over to the new copies, checking only what
    /// changed; `None` when it cannot be (the caller aligns afresh).
    fn resume(self, kept: &Parts, shown: &Parts, loose: bool) -> Option<Aligned> {
        let (old_kept, old_shown) = (self.kept.len(), self.shown.len());
        if kept.len() < old_kept || shown.len() < old_shown {
            return None;
        }
        let pairs = &self.pairs;
        for at in changed_in_place(kept, &self.kept) {
            let (was, now) = (shown_part(&self.kept[at]), shown_part(&kept[at]));
            if was.is_some() != now.is_some() {
                return None;
            }
            let Some(now) = now.filter(|now| was.as_ref() != Some(now)) else { continue };
            let pair = pairs.binary_search_by_key(&at, |pair| pair.0).ok()?;
            let on_screen = pairs[pair].1;
            if !matches(&now, &shown_part(&shown[on_screen])?, loose) {
                return None;
            }
            // What lay on screen before it must still be passed over.
            let from = pair.checked_sub(1).map_or(0, |before| pairs[before].1 + 1);
            let passed = (from..on_screen).filter_map(|at| shown_part(&shown[at]));
            if !passed.into_iter().all(|part| passed_over(&now, &part, loose)) {
                return None;
            }
        }
        for at in changed_in_place(shown, &self.shown) {
            let now = shown_part(&shown[at]);
            if shown_part(&self.shown[at]) == now {
                continue;
            }
            match pairs.binary_search_by_key(&at, |pair| pair.1) {
                Ok(pair) => {
                    if !matches(&shown_part(&kept[pairs[pair].0])?, &now?, loose) {
                        return None;
                    }
                }
                // Past the last pair the screen may show anything: the
                // stored parts added since are aligned over it below.
                Err(pair) if pair == pairs.len() => {}
                Err(pair) => {
                    let Some(now) = now else { continue };
                    if !passed_over(&shown_part(&kept[pairs[pair].0])?, &now, loose) {
                        return None;
                    }
                }
            }
        }
        let mut pairs = self.pairs;
        let after = pairs.last().map_or(0, |pair| pair.1 + 1);
        align(kept, shown, (old_kept, after), loose, &mut pairs).then(|| Aligned {
            kept: kept.clone(),
            shown: shown.clone(),
            pairs,
        })
    }
}

/// Indexes below `earlier`'s end that `parts` may have changed.
fn changed_in_place(parts: &Parts, earlier: &Parts) -> Vec<usize> {
    let end = earlier.len();
    parts.changed_since(earlier).into_iter().flat_map(|range| range.start.min(end)..range.end.min(end)).collect()
}

/// Aligns the visible stored parts from `from.0` on with the screen from
/// `from.1` on, adding each pair; false where one has no place.
fn align(kept: &Parts, shown: &Parts, from: (usize, usize), loose: bool, pairs: &mut Vec<(usize, usize)>) -> bool {
    let mut on_screen = from.1;
    for at in from.0..kept.len() {
        let Some(part) = shown_part(&kept[at]) else { continue };
        loop {
            let Some(candidate) = shown.get(on_screen) else { return false };
            on_screen += 1;
            let Some(candidate) = shown_part(candidate) else { continue };
            if matches(&part, &candidate, loose) {
                pairs.push((at, on_screen - 1));
                break;
            }
            if !matches!(candidate, Shown::Text(_) | Shown::Reasoning(_)) {
                return false;
            }
        }
    }
    true
}

/// A screen part shows a stored one: as stored or run on, but for the
/// decision on an approval its client sent, and (`loose`) tool states.
fn matches(kept: &Shown, shown: &Shown, loose: bool) -> bool {
    if loose {
        return part_runs_on(&stateless(kept), &stateless(shown));
    }
    if part_runs_on(kept, shown) {
        return true;
    }
    match (kept, shown) {
        (Shown::Tool { approved: Some(_), state, .. }, Shown::Tool { approved: None, state: on_screen, .. })
            if state == on_screen =>
        {
            let mut undecided = kept.clone();
            if let Shown::Tool { approved, .. } = &mut undecided {
                *approved = None;
            }
            undecided == *shown
        }
        _ => false,
    }
}

/// Screen text that shows no stored part is passed over.
fn passed_over(kept: &Shown, shown: &Shown, loose: bool) -> bool {
    matches!(shown, Shown::Text(_) | Shown::Reasoning(_)) && !matches(kept, shown, loose)
}

//! What a fold over the history has seen of each message: its last copy,
//! so that the next copy's unchanged parts are not read again. A model
//! request or a commit shows the whole reply, and a long session shows it
//! hundreds of times; the engine's copies share the parts they have in
//! common (`Parts::changed_since`), so reading only what changed keeps a
//! check linear in the history. Copies that share nothing (parsed from
//! another process) are compared part by part, as read before.

use std::collections::{BTreeMap, BTreeSet};

use turnsim_engine::parts::Parts;
use turnsim_engine::{Message, Part};

use super::facts::shown_messages;
use crate::history::History;

/// Each message every crossing shows ([`shown_messages`]), with the
/// indexes of its parts that differ from the copy of it shown last
/// ([`SeenMessages::changed`] over the whole history in order): folded
/// once for every check that reads what changed of each shown message.
pub struct ShownChanges<'a> {
    /// Where each crossing's messages start in `shown`, and where the
    /// last one's end.
    starts: Vec<usize>,
    shown: Vec<(&'a Message, Vec<usize>)>,
}

impl<'a> ShownChanges<'a> {
    pub fn new(history: &'a History) -> Self {
        let mut seen = SeenMessages::default();
        let mut starts = Vec::with_capacity(history.crossings.len() + 1);
        let mut shown = Vec::new();
        for crossing in history.iter() {
            starts.push(shown.len());
            for message in shown_messages(&crossing.what) {
                shown.push((message, seen.changed(message)));
            }
        }
        starts.push(shown.len());
        Self { starts, shown }
    }

    /// The messages crossing `index` shows, in order, each with the parts
    /// that changed since it was shown last.
    pub fn at(&self, index: usize) -> &[(&'a Message, Vec<usize>)] {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&from), Some(&to)) => &self.shown[from..to],
            _ => &[],
        }
    }
}

#[derive(Default)]
pub struct SeenMessages {
    last: BTreeMap<String, Parts>,
}

impl SeenMessages {
    /// The indexes of `message`'s parts that differ from the copy of it
    /// seen last (all of them the first time), in order; remembers this copy.
    pub fn changed(&mut self, message: &Message) -> Vec<usize> {
        let parts = &message.parts;
        let changed = match self.last.get(&message.id) {
            None => (0..parts.len()).collect(),
            Some(last) => differing(last, parts).filter(|&at| at < parts.len()).collect(),
        };
        self.remember(message);
        changed
    }

    /// The call ids of the tool parts that changed in `message` since the
    /// copy seen last: in parts of this copy, or of the last one (a part
    /// cut off or replaced); remembers this copy.
    pub fn changed_tools(&mut self, message: &Message) -> BTreeSet<String> {
        let parts = &message.parts;
        let changed = match self.last.get(&message.id) {
            None => tool_ids(parts.iter()).collect(),
            Some(last) => {
                let at: Vec<usize> = differing(last, parts).collect();
                let both = at.iter().flat_map(|&at| [last.get(at), parts.get(at)]).flatten();
                tool_ids(both).collect()
            }
        };
        self.remember(message);
        changed
    }

    /// Forgets message `id`: its next copy counts as new.
    pub fn forget(&mut self, id: &str) {
        self.last.remove(id);
    }

    fn remember(&mut self, message: &Message) {
        match self.last.get_mut(&message.id) {
            Some(last) => *last = message.parts.clone(),
            None => drop(self.last.insert(message.id.clone(), message.parts.clone())),
        }
    }
}

/// The indexes where `earlier` and `later` hold different parts (or only
/// one holds one), in order: looking only inside the chunks they do not
/// share. Only the last chunk may be short, so what `later` lacks of
/// `earlier` lies past `later`'s end.
fn differing<'a>(earlier: &'a Parts, later: &'a Parts) -> impl Iterator<Item = usize> + 'a {
    let unshared = later.changed_since(earlier).into_iter().flatten();
    let cut_off = later.len()..earlier.len().max(later.len());
    unshared.chain(cut_off).filter(move |&at| earlier.get(at) != later.get(at))
}

fn tool_ids<'a>(parts: impl Iterator<Item = &'a Part> + 'a) -> impl Iterator<Item = String> + 'a {
    parts.filter_map(|part| match part {
        Part::Tool(tool) => Some(tool.call_id.clone()),
        _ => None,
    })
}

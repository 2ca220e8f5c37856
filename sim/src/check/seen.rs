//! What a fold over the history has seen of each message: its last copy,
//! so that the next copy's unchanged parts are not read again. A model
//! request or a commit shows the whole reply, and a long session shows it
//! hundreds of times; the engine's copies share the parts they have in
//! common (`Parts::changed_since`), so reading only what changed keeps a
//! check linear in the history. Copies that share nothing (parsed from
//! another process) are read whole, as before.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use turnsim_engine::parts::Parts;
use turnsim_engine::{Message, Part};

#[derive(Default)]
pub struct SeenMessages {
    last: BTreeMap<String, Parts>,
}

impl SeenMessages {
    /// The ranges of `message`'s parts that may differ from the copy of it
    /// seen last (all of them the first time); remembers this copy.
    pub fn changed(&mut self, message: &Message) -> Vec<Range<usize>> {
        match self.last.get_mut(&message.id) {
            Some(last) => {
                let changed = message.parts.changed_since(last);
                *last = message.parts.clone();
                changed
            }
            None => {
                self.last.insert(message.id.clone(), message.parts.clone());
                std::iter::once(0..message.parts.len()).collect()
            }
        }
    }

    /// The call ids of the tool parts that may have changed in `message`
    /// since the copy seen last: in parts of this copy, or of the last one
    /// (a part cut off or replaced); remembers this copy.
    pub fn changed_tools(&mut self, message: &Message) -> BTreeSet<String> {
        let mut changed = BTreeSet::new();
        if let Some(last) = self.last.get(&message.id) {
            let gone = last.changed_since(&message.parts);
            changed.extend(gone.into_iter().flat_map(|range| tool_ids(last.range(range))));
        }
        let ranges = self.changed(message);
        changed.extend(ranges.into_iter().flat_map(|range| tool_ids(message.parts.range(range))));
        changed
    }

    /// Forgets message `id`: its next copy counts as new.
    pub fn forget(&mut self, id: &str) {
        self.last.remove(id);
    }
}

fn tool_ids<'a>(parts: impl Iterator<Item = &'a Part> + 'a) -> impl Iterator<Item = String> + 'a {
    parts.filter_map(|part| match part {
        Part::Tool(tool) => Some(tool.call_id.clone()),
        _ => None,
    })
}

/// The parts of `message` in `ranges`, in order.
pub fn parts_in<'a>(message: &'a Message, ranges: &'a [Range<usize>]) -> impl Iterator<Item = &'a Part> {
    ranges.iter().flat_map(move |range| message.parts.range(range.clone()))
}

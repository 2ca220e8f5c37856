//! A message's parts, stored so that copying a message costs little.
//!
//! The engine copies the in-flight message on every durable flush (the
//! write, the store, the engine's mirror, the next model request), and a
//! coding session's message grows to hundreds of parts. Parts live in
//! fixed-size chunks shared between copies, behind a shared list of chunks:
//! a copy costs one pointer, the first edit of a copy copies the list of
//! chunk pointers and the chunk it touches (never the other parts), and
//! comparing two copies skips the chunks they still share. To the engine it
//! reads like a `Vec`.

use std::fmt;
use std::ops::{Bound, Index, RangeBounds};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::transcript::Part;

/// Parts per chunk: small, so an edit copies little; large enough that a
/// copy of a long message is a short list of pointers.
const CHUNK_PARTS: usize = 8;

/// An ordered list of parts. Every chunk but the last holds exactly
/// `CHUNK_PARTS` parts and no chunk is empty, so part `i` lives in chunk
/// `i / CHUNK_PARTS`.
#[derive(Clone, Default)]
pub struct Parts {
    chunks: Arc<Vec<Arc<Vec<Part>>>>,
    len: usize,
}

impl Parts {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, index: usize) -> Option<&Part> {
        self.chunks.get(index / CHUNK_PARTS).and_then(|chunk| chunk.get(index % CHUNK_PARTS))
    }

    /// The part at `index`, for editing: copies its chunk if shared.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Part> {
        if index >= self.len {
            return None;
        }
        Arc::make_mut(&mut Arc::make_mut(&mut self.chunks)[index / CHUNK_PARTS]).get_mut(index % CHUNK_PARTS)
    }

    pub fn last(&self) -> Option<&Part> {
        self.chunks.last().and_then(|chunk| chunk.last())
    }

    pub fn push(&mut self, part: Part) {
        let chunks = Arc::make_mut(&mut self.chunks);
        match chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK_PARTS => Arc::make_mut(chunk).push(part),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK_PARTS);
                chunk.push(part);
                chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<Part> {
        if self.len == 0 {
            return None;
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        let chunk = chunks.last_mut()?;
        let part = Arc::make_mut(chunk).pop();
        if chunk.is_empty() {
            chunks.pop();
        }
        self.len -= 1;
        part
    }

    /// Keeps the first `len` parts.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let kept_chunks = len.div_ceil(CHUNK_PARTS);
        let chunks = Arc::make_mut(&mut self.chunks);
        chunks.truncate(kept_chunks);
        if let Some(chunk) = chunks.last_mut() {
            let keep = len - (kept_chunks - 1) * CHUNK_PARTS;
            if keep < chunk.len() {
                Arc::make_mut(chunk).truncate(keep);
            }
        }
        self.len = len;
    }

    /// Inserts `part` before `index` (rebuilds the chunks after it).
    pub fn insert(&mut self, index: usize, part: Part) {
        assert!(index <= self.len, "insertion index {index} is past the end ({})", self.len);
        let tail: Vec<Part> = self.range(index..).cloned().collect();
        self.truncate(index);
        self.push(part);
        tail.into_iter().for_each(|part| self.push(part));
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Part> + Clone + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// The parts in `range`, in order.
    pub fn range(&self, range: impl RangeBounds<usize>) -> impl DoubleEndedIterator<Item = &Part> + Clone + '_ {
        let start = match range.start_bound() {
            Bound::Included(&start) => start,
            Bound::Excluded(&start) => start + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&end) => end + 1,
            Bound::Excluded(&end) => end,
            Bound::Unbounded => self.len,
        }
        .min(self.len);
        let start = start.min(end);
        (start..end).map(move |index| &self[index])
    }

    /// Index of the first part that matches.
    pub fn position(&self, matches: impl FnMut(&Part) -> bool) -> Option<usize> {
        self.iter().position(matches)
    }

    /// Index of the last part that matches.
    pub fn rposition(&self, mut matches: impl FnMut(&Part) -> bool) -> Option<usize> {
        (0..self.len).rev().find(|&index| matches(&self[index]))
    }

    /// Edits every part `matches` selects; only their chunks are copied.
    /// Returns how many parts it edited.
    pub fn edit_where(&mut self, mut matches: impl FnMut(&Part) -> bool, mut edit: impl FnMut(&mut Part)) -> usize {
        let selected: Vec<usize> = (0..self.len).filter(|&index| matches(&self[index])).collect();
        for &index in &selected {
            edit(self.get_mut(index).expect("a selected index is in range"));
        }
        selected.len()
    }

    /// Every part, for editing: copies every shared chunk, so the engine
    /// edits through [`Parts::get_mut`] or [`Parts::edit_where`] instead.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Part> {
        Arc::make_mut(&mut self.chunks).iter_mut().flat_map(|chunk| Arc::make_mut(chunk).iter_mut())
    }

    /// Keeps the parts `keep` holds for (rebuilds the chunks).
    pub fn retain(&mut self, mut keep: impl FnMut(&Part) -> bool) {
        let kept: Vec<Part> = self.iter().filter(|part| keep(part)).cloned().collect();
        *self = Self::from(kept);
    }

    pub fn to_vec(&self) -> Vec<Part> {
        self.iter().cloned().collect()
    }
}

impl Index<usize> for Parts {
    type Output = Part;

    fn index(&self, index: usize) -> &Part {
        match self.get(index) {
            Some(part) => part,
            None => panic!("part index {index} out of range for {} parts", self.len),
        }
    }
}

impl PartialEq for Parts {
    fn eq(&self, other: &Self) -> bool {
        if self.len != other.len {
            return false;
        }
        // Equal lengths mean equal chunk boundaries: compare chunk by chunk,
        // skipping the ones both copies still share.
        Arc::ptr_eq(&self.chunks, &other.chunks)
            || self
                .chunks
                .iter()
                .zip(other.chunks.iter())
                .all(|(mine, theirs)| Arc::ptr_eq(mine, theirs) || mine == theirs)
    }
}

impl PartialEq<Vec<Part>> for Parts {
    fn eq(&self, other: &Vec<Part>) -> bool {
        self.len == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Parts {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Part>> for Parts {
    fn from(parts: Vec<Part>) -> Self {
        parts.into_iter().collect()
    }
}

impl FromIterator<Part> for Parts {
    fn from_iter<T: IntoIterator<Item = Part>>(parts: T) -> Self {
        let mut collected = Self::new();
        parts.into_iter().for_each(|part| collected.push(part));
        collected
    }
}

impl<'a> IntoIterator for &'a Parts {
    type Item = &'a Part;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a Part> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Parts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Parts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Part>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::TextState;

    fn text(index: usize) -> Part {
        Part::Text { id: format!("t{index}"), text: index.to_string(), state: TextState::Done }
    }

    fn parts(count: usize) -> Parts {
        (0..count).map(text).collect()
    }

    #[test]
    fn reads_like_the_vec_it_was_built_from() {
        for count in [0, 1, CHUNK_PARTS - 1, CHUNK_PARTS, CHUNK_PARTS + 1, 5 * CHUNK_PARTS + 3] {
            let expected: Vec<Part> = (0..count).map(text).collect();
            let built = parts(count);
            assert_eq!(built, expected);
            assert_eq!(built.len(), count);
            assert_eq!(built.last(), expected.last());
            assert_eq!(
                built.iter().rev().cloned().collect::<Vec<_>>(),
                expected.iter().rev().cloned().collect::<Vec<_>>()
            );
            assert_eq!(built.range(1..).count(), count.saturating_sub(1));
            assert_eq!(built.range(..count / 2).cloned().collect::<Vec<_>>(), expected[..count / 2].to_vec());
        }
    }

    #[test]
    fn truncate_pop_and_insert_keep_order_across_chunks() {
        for count in [1, CHUNK_PARTS, 3 * CHUNK_PARTS + 2] {
            for keep in 0..=count + 1 {
                let mut edited = parts(count);
                let mut expected: Vec<Part> = (0..count).map(text).collect();
                edited.truncate(keep);
                expected.truncate(keep);
                assert_eq!(edited, expected, "truncate({keep}) of {count}");
                assert_eq!(edited.pop(), expected.pop());
                assert_eq!(edited, expected);
                let at = expected.len() / 2;
                edited.insert(at, text(99));
                expected.insert(at, text(99));
                assert_eq!(edited, expected);
                edited.push(text(100));
                expected.push(text(100));
                assert_eq!(edited, expected);
            }
        }
    }

    #[test]
    fn an_edit_changes_only_its_own_copy() {
        let original = parts(3 * CHUNK_PARTS);
        let mut copy = original.clone();
        assert_eq!(copy, original);
        *copy.get_mut(CHUNK_PARTS + 1).expect("in range") = text(77);
        assert_ne!(copy, original);
        assert_eq!(original[CHUNK_PARTS + 1], text(CHUNK_PARTS + 1));
        assert_eq!(copy[CHUNK_PARTS + 1], text(77));
        copy.retain(|part| part != &text(2));
        assert_eq!(copy.len(), 3 * CHUNK_PARTS - 1);
        assert_eq!(original.len(), 3 * CHUNK_PARTS);
        copy.iter_mut().for_each(|part| {
            if let Part::Text { text, .. } = part {
                text.push('!');
            }
        });
        assert!(copy.iter().all(|part| matches!(part, Part::Text { text, .. } if text.ends_with('!'))));
        assert!(original.iter().all(|part| matches!(part, Part::Text { text, .. } if !text.ends_with('!'))));
        let edited =
            copy.edit_where(|part| matches!(part, Part::Text { id, .. } if id == "t0"), |part| *part = text(5));
        assert_eq!(edited, 1);
        assert_eq!(copy[0], text(5));
        assert_eq!(copy[CHUNK_PARTS], Part::Text { id: "t77".into(), text: "77!".into(), state: TextState::Done });
        assert_eq!(original[0], text(0));
    }

    #[test]
    fn serialises_as_a_plain_list() {
        let built = parts(CHUNK_PARTS + 2);
        let plain: Vec<Part> = (0..CHUNK_PARTS + 2).map(text).collect();
        let json = serde_json::to_string(&built).expect("serialises");
        assert_eq!(json, serde_json::to_string(&plain).expect("serialises"));
        let back: Parts = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, built);
    }
}

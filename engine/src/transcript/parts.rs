//! A message's parts, stored so that copying a message costs little.
//!
//! The engine copies the in-flight message on every durable flush (the
//! write, the store, the engine's mirror, the next model request), and a
//! coding session's message grows to hundreds of parts. Parts live in a
//! shallow tree shared between copies: chunks of eight parts, groups of
//! sixteen chunks, and the list of groups. A copy costs one pointer; the
//! first edit of a copy copies the list of groups, one group and the one
//! chunk it touches, never the other parts; comparing two copies skips what
//! they still share. Each chunk also indexes the tool call ids and tool
//! states it holds, and each group keeps its chunks' indexes side by side, so
//! finding a call, or the tools in some states, looks inside only the chunks
//! that may hold them. To the engine it reads like a `Vec`.

use std::fmt;
use std::ops::{Bound, Index, Range, RangeBounds};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Part, TextState, ToolPart, ToolState};

/// Parts per chunk: small, so an edit copies few parts.
const CHUNK_PARTS: usize = 8;
/// Chunks per group: an edit copies this many chunk pointers.
const GROUP_CHUNKS: usize = 16;
/// Bits of a group's own call id filter. A group holds up to 128 calls,
/// which fill a chunk-sized 64-bit filter; this one stays sparse (about one
/// group in ten looked into in vain), so finding a call in a long session
/// skips a group with one test instead of sixteen.
const GROUP_FILTER_BITS: usize = 1024;
/// Chunks a group holds before an edit in place keeps its index (and
/// rebuilds only the chunk it edits) rather than dropping it.
const KEEP_INDEX_FROM_CHUNKS: usize = 4;

/// Up to `CHUNK_PARTS` parts, and an index of their tool call ids.
#[derive(Clone, Default)]
struct Chunk {
    parts: Vec<Part>,
    /// Built when first asked; dropped by every edit.
    tool_index: OnceLock<ToolIndex>,
}

/// A set of tool states, one bit per state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolStates(u16);

impl ToolStates {
    pub const fn of(states: &[ToolState]) -> Self {
        let mut bits = 0;
        let mut at = 0;
        while at < states.len() {
            bits |= Self::bit(states[at]);
            at += 1;
        }
        Self(bits)
    }

    const fn bit(state: ToolState) -> u16 {
        1 << state as u16
    }

    pub fn contains(self, state: ToolState) -> bool {
        self.0 & Self::bit(state) != 0
    }

    fn meets(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
}

/// Which tool call ids and states a chunk holds.
#[derive(Clone, Copy)]
struct ToolIndex {
    /// One bit per call id held: a call whose bit is clear is not here.
    filter: u64,
    /// The states of the tool parts held.
    states: ToolStates,
    /// Per part: a nonzero hash of its call id, or zero for a part that is
    /// not a tool call.
    hashes: [u32; CHUNK_PARTS],
    /// Whether a text or reasoning part here is still streaming: settling a
    /// turn's text then visits only these chunks, not a long session's all.
    streaming_text: bool,
}

impl Chunk {
    fn with(part: Part) -> Self {
        let mut parts = Vec::with_capacity(CHUNK_PARTS);
        parts.push(part);
        Self { parts, tool_index: OnceLock::new() }
    }

    /// The parts, for editing (copied first if shared); drops the index.
    fn parts_mut(self: &mut Arc<Self>) -> &mut Vec<Part> {
        let chunk = Arc::make_mut(self);
        chunk.tool_index = OnceLock::new();
        &mut chunk.parts
    }

    fn tool_index(&self) -> &ToolIndex {
        self.tool_index.get_or_init(|| {
            let mut index =
                ToolIndex { filter: 0, states: ToolStates::default(), hashes: [0; CHUNK_PARTS], streaming_text: false };
            for (offset, part) in self.parts.iter().enumerate() {
                match part {
                    Part::Tool(tool) => {
                        let hash = CallHash::of(&tool.call_id);
                        index.filter |= hash.bit;
                        index.states.0 |= ToolStates::bit(tool.state);
                        index.hashes[offset] = hash.short;
                    }
                    part if is_streaming_text(part) => index.streaming_text = true,
                    _ => {}
                }
            }
            index
        })
    }

    /// Offset of the first tool part of the call in this chunk.
    fn find_tool(&self, call_id: &str, hash: CallHash) -> Option<usize> {
        let index = self.tool_index();
        (0..self.parts.len())
            .find(|&offset| index.hashes[offset] == hash.short && is_tool_of(&self.parts[offset], call_id))
    }
}

impl PartialEq for Chunk {
    fn eq(&self, other: &Self) -> bool {
        self.parts == other.parts
    }
}

/// A call id's FNV-1a hash, as a filter bit and a nonzero short hash.
#[derive(Clone, Copy)]
struct CallHash {
    bit: u64,
    short: u32,
}

impl CallHash {
    fn of(call_id: &str) -> Self {
        let hash = call_id
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
        Self { bit: 1 << (hash % 64), short: (hash >> 32) as u32 | 1 }
    }

    /// The call's bit in a group's filter, from its short hash (other bits
    /// of the hash than the chunk filter's): a group's index is built from
    /// its chunks' indexes without hashing a call id again.
    fn group_bit(short: u32) -> usize {
        (short >> 1) as usize % GROUP_FILTER_BITS
    }
}

/// Up to `GROUP_CHUNKS` chunks, and their tool indexes side by side.
#[derive(Clone, Default)]
struct Group {
    chunks: Vec<Arc<Chunk>>,
    /// Built when first asked; dropped by every edit.
    index: OnceLock<GroupIndex>,
    /// The index an edit of parts in place dropped, and the chunks edited
    /// since: the next build redoes only those, so an edit in a wide batch
    /// costs its chunk, not the group. Its call id filter keeps the bits of
    /// calls edited away (a filter may say yes in vain, never no in vain).
    stale: Option<(GroupIndex, u16)>,
}

#[derive(Clone, Copy)]
struct GroupIndex {
    /// The call id filter of the whole group: bit [`CallHash::group_bit`].
    filter: [u64; GROUP_FILTER_BITS / 64],
    /// Each chunk's call id filter.
    filters: [u64; GROUP_CHUNKS],
    /// Each chunk's tool states.
    states: [ToolStates; GROUP_CHUNKS],
    /// The tool states of the whole group.
    all_states: ToolStates,
    /// One bit per chunk holding a streaming text or reasoning part.
    streaming_text: u16,
}

impl GroupIndex {
    const EMPTY: Self = Self {
        filter: [0; GROUP_FILTER_BITS / 64],
        filters: [0; GROUP_CHUNKS],
        states: [ToolStates(0); GROUP_CHUNKS],
        all_states: ToolStates(0),
        streaming_text: 0,
    };
}

impl Group {
    fn with(chunk: Chunk) -> Self {
        let mut chunks = Vec::with_capacity(GROUP_CHUNKS);
        chunks.push(Arc::new(chunk));
        Self { chunks, index: OnceLock::new(), stale: None }
    }

    /// The chunks, for editing (copied first if shared); drops the index.
    fn chunks_mut(self: &mut Arc<Self>) -> &mut Vec<Arc<Chunk>> {
        let group = Arc::make_mut(self);
        group.index = OnceLock::new();
        group.stale = None;
        &mut group.chunks
    }

    /// Chunk `at`, for editing its parts in place (copied first if shared):
    /// in a group of many chunks the index is rebuilt for that chunk only
    /// (in a small one, rebuilding it whole costs less than keeping it).
    fn chunk_mut(self: &mut Arc<Self>, at: usize) -> &mut Arc<Chunk> {
        let group = Arc::make_mut(self);
        if group.chunks.len() < KEEP_INDEX_FROM_CHUNKS {
            group.index = OnceLock::new();
            return &mut group.chunks[at];
        }
        let edited = 1 << at;
        group.stale = match (group.index.take(), group.stale.take()) {
            (Some(index), _) => Some((index, edited)),
            (None, Some((index, earlier))) => Some((index, earlier | edited)),
            (None, None) => None,
        };
        &mut group.chunks[at]
    }

    fn index(&self) -> &GroupIndex {
        self.index.get_or_init(|| {
            let (mut index, redo) = self.stale.unwrap_or((GroupIndex::EMPTY, u16::MAX));
            index.all_states = ToolStates::default();
            for (at, chunk) in self.chunks.iter().enumerate() {
                if redo & (1 << at) != 0 {
                    let chunk = chunk.tool_index();
                    index.filters[at] = chunk.filter;
                    index.states[at] = chunk.states;
                    index.streaming_text =
                        (index.streaming_text & !(1 << at)) | (u16::from(chunk.streaming_text) << at);
                    let shorts = chunk.hashes.iter().filter(|&&short| short != 0);
                    for bit in shorts.map(|&short| CallHash::group_bit(short)) {
                        index.filter[bit / 64] |= 1 << (bit % 64);
                    }
                }
                index.all_states.0 |= index.states[at].0;
            }
            index
        })
    }

    /// Indexes of the chunks holding a tool part in one of `states`.
    fn chunks_with(&self, states: ToolStates) -> impl Iterator<Item = usize> + '_ {
        let index = self.index();
        let any = index.all_states.meets(states);
        (0..self.chunks.len()).filter(move |&at| any && index.states[at].meets(states))
    }

    /// Whether the group may hold a tool part of the call.
    fn may_hold(&self, hash: CallHash) -> bool {
        let bit = CallHash::group_bit(hash.short);
        self.index().filter[bit / 64] & (1 << (bit % 64)) != 0
    }

    /// Chunk and offset of the first tool part of the call in this group.
    fn find_tool(&self, call_id: &str, hash: CallHash) -> Option<(usize, usize)> {
        if !self.may_hold(hash) {
            return None;
        }
        let filters = &self.index().filters;
        (0..self.chunks.len())
            .filter(|&at| filters[at] & hash.bit != 0)
            .find_map(|at| self.chunks[at].find_tool(call_id, hash).map(|offset| (at, offset)))
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Self) -> bool {
        self.chunks.len() == other.chunks.len()
            && self.chunks.iter().zip(&other.chunks).all(|(mine, theirs)| Arc::ptr_eq(mine, theirs) || mine == theirs)
    }
}

/// An ordered list of parts. Every chunk but the last holds exactly
/// `CHUNK_PARTS` parts and every group but the last `GROUP_CHUNKS` chunks,
/// none empty, so part `i` lives in chunk `i / CHUNK_PARTS`.
#[derive(Clone, Default)]
pub struct Parts {
    groups: Arc<Vec<Arc<Group>>>,
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

    /// Whether every part lies in one chunk: the first edit of a copy then
    /// copies all of them, so a copy kept only to find what changed since
    /// costs more than reading so few parts again.
    pub fn is_one_chunk(&self) -> bool {
        self.len <= CHUNK_PARTS
    }

    fn chunk_count(&self) -> usize {
        self.len.div_ceil(CHUNK_PARTS)
    }

    fn chunk(&self, chunk: usize) -> Option<&Chunk> {
        self.groups.get(chunk / GROUP_CHUNKS).and_then(|group| group.chunks.get(chunk % GROUP_CHUNKS)).map(Arc::as_ref)
    }

    /// A chunk, for editing: copies the list of groups and its group if shared.
    fn chunk_mut(&mut self, chunk: usize) -> &mut Arc<Chunk> {
        let group = &mut Arc::make_mut(&mut self.groups)[chunk / GROUP_CHUNKS];
        group.chunk_mut(chunk % GROUP_CHUNKS)
    }

    fn chunks(&self) -> impl DoubleEndedIterator<Item = &Chunk> + Clone + '_ {
        self.groups.iter().flat_map(|group| group.chunks.iter().map(Arc::as_ref))
    }

    pub fn get(&self, index: usize) -> Option<&Part> {
        self.chunk(index / CHUNK_PARTS).and_then(|chunk| chunk.parts.get(index % CHUNK_PARTS))
    }

    /// The part at `index`, for editing: copies only the path to it.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Part> {
        if index >= self.len {
            return None;
        }
        self.chunk_mut(index / CHUNK_PARTS).parts_mut().get_mut(index % CHUNK_PARTS)
    }

    pub fn last(&self) -> Option<&Part> {
        self.len.checked_sub(1).and_then(|last| self.get(last))
    }

    pub fn push(&mut self, part: Part) {
        let chunks = self.chunk_count();
        if !self.len.is_multiple_of(CHUNK_PARTS) {
            self.chunk_mut(chunks - 1).parts_mut().push(part);
        } else if !chunks.is_multiple_of(GROUP_CHUNKS) {
            let groups = Arc::make_mut(&mut self.groups);
            let last = groups.last_mut().expect("a partly filled group");
            last.chunks_mut().push(Arc::new(Chunk::with(part)));
        } else {
            Arc::make_mut(&mut self.groups).push(Arc::new(Group::with(Chunk::with(part))));
        }
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<Part> {
        let last = self.len.checked_sub(1)?;
        let part = self.chunk_mut(last / CHUNK_PARTS).parts_mut().pop();
        self.truncate(last);
        part
    }

    /// Keeps the first `len` parts.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let kept_chunks = len.div_ceil(CHUNK_PARTS);
        let kept_groups = kept_chunks.div_ceil(GROUP_CHUNKS);
        let groups = Arc::make_mut(&mut self.groups);
        groups.truncate(kept_groups);
        if let Some(group) = groups.last_mut() {
            let keep = kept_chunks - (kept_groups - 1) * GROUP_CHUNKS;
            if keep < group.chunks.len() {
                group.chunks_mut().truncate(keep);
            }
        }
        self.len = len;
        if kept_chunks > 0 {
            let keep = len - (kept_chunks - 1) * CHUNK_PARTS;
            let chunk = self.chunk_mut(kept_chunks - 1);
            if keep < chunk.parts.len() {
                chunk.parts_mut().truncate(keep);
            }
        }
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
        self.chunks().flat_map(|chunk| chunk.parts.iter())
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

    /// Index of the first tool part of `call_id`, looking only inside the
    /// chunks whose index says they may hold it.
    pub fn find_tool(&self, call_id: &str) -> Option<usize> {
        let hash = CallHash::of(call_id);
        self.groups.iter().enumerate().find_map(|(group_at, group)| {
            let (chunk_at, offset) = group.find_tool(call_id, hash)?;
            Some((group_at * GROUP_CHUNKS + chunk_at) * CHUNK_PARTS + offset)
        })
    }

    /// The first tool part of `call_id`.
    pub fn tool(&self, call_id: &str) -> Option<&ToolPart> {
        match self.get(self.find_tool(call_id)?) {
            Some(Part::Tool(tool)) => Some(tool),
            _ => None,
        }
    }

    /// The first tool part of `call_id`, for editing (copies only its path).
    pub fn tool_mut(&mut self, call_id: &str) -> Option<&mut ToolPart> {
        let index = self.find_tool(call_id)?;
        match self.get_mut(index) {
            Some(Part::Tool(tool)) => Some(tool),
            _ => None,
        }
    }

    /// The ranges of parts that may differ from `earlier`'s at the same
    /// index: the chunks the two do not share, and whatever lies past
    /// `earlier`'s end. A part outside them is the very part `earlier`
    /// holds there, so a fold over successive copies of one message reads
    /// only what changed (copies that share nothing, such as parsed ones,
    /// differ everywhere).
    pub fn changed_since(&self, earlier: &Parts) -> Vec<Range<usize>> {
        if Arc::ptr_eq(&self.groups, &earlier.groups) {
            return Vec::new();
        }
        let mut changed: Vec<Range<usize>> = Vec::new();
        let mut add = |range: Range<usize>| match changed.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => changed.push(range),
        };
        for (group_at, group) in self.groups.iter().enumerate() {
            let theirs = earlier.groups.get(group_at);
            if theirs.is_some_and(|theirs| Arc::ptr_eq(group, theirs)) {
                continue;
            }
            for (chunk_at, chunk) in group.chunks.iter().enumerate() {
                let shared = theirs
                    .and_then(|theirs| theirs.chunks.get(chunk_at))
                    .is_some_and(|theirs| Arc::ptr_eq(chunk, theirs));
                if !shared {
                    let first = (group_at * GROUP_CHUNKS + chunk_at) * CHUNK_PARTS;
                    add(first..first + chunk.parts.len());
                }
            }
        }
        changed
    }

    /// Indexes of every tool part of `call_id`, in order, looking only inside
    /// the chunks whose index says they may hold it.
    pub fn tool_positions(&self, call_id: &str) -> Vec<usize> {
        let hash = CallHash::of(call_id);
        let mut positions = Vec::new();
        for (group_at, group) in self.groups.iter().enumerate().filter(|(_, group)| group.may_hold(hash)) {
            let filters = &group.index().filters;
            for chunk_at in (0..group.chunks.len()).filter(|&at| filters[at] & hash.bit != 0) {
                let chunk = &group.chunks[chunk_at];
                let hashes = &chunk.tool_index().hashes;
                let first = (group_at * GROUP_CHUNKS + chunk_at) * CHUNK_PARTS;
                let offsets = (0..chunk.parts.len())
                    .filter(|&offset| hashes[offset] == hash.short && is_tool_of(&chunk.parts[offset], call_id));
                positions.extend(offsets.map(|offset| first + offset));
            }
        }
        positions
    }

    /// Index of the last part that matches.
    pub fn rposition(&self, mut matches: impl FnMut(&Part) -> bool) -> Option<usize> {
        (0..self.len).rev().find(|&index| matches(&self[index]))
    }

    /// The tool parts in one of `states`, in order, looking only inside the
    /// groups and chunks whose index says they hold one.
    pub fn tools_in(&self, states: ToolStates) -> impl Iterator<Item = &ToolPart> + '_ {
        self.tool_indexes_in(states).filter_map(move |index| match &self[index] {
            Part::Tool(tool) if states.contains(tool.state) => Some(tool),
            _ => None,
        })
    }

    /// Indexes of the parts of the chunks that hold a tool in one of `states`.
    fn tool_indexes_in(&self, states: ToolStates) -> impl Iterator<Item = usize> + '_ {
        self.groups.iter().enumerate().flat_map(move |(group_at, group)| {
            group.chunks_with(states).flat_map(move |chunk_at| {
                let first = (group_at * GROUP_CHUNKS + chunk_at) * CHUNK_PARTS;
                first..first + group.chunks[chunk_at].parts.len()
            })
        })
    }

    /// Edits the tool parts in one of `states` that `matches` selects; only
    /// their paths are copied. Returns how many it edited.
    pub fn edit_tools_in(
        &mut self,
        states: ToolStates,
        mut matches: impl FnMut(&ToolPart) -> bool,
        mut edit: impl FnMut(&mut ToolPart),
    ) -> usize {
        let selected: Vec<usize> = self
            .tool_indexes_in(states)
            .filter(|&index| matches!(&self[index], Part::Tool(tool) if states.contains(tool.state) && matches(tool)))
            .collect();
        for &index in &selected {
            if let Some(Part::Tool(tool)) = self.get_mut(index) {
                edit(tool);
            }
        }
        selected.len()
    }

    /// Edits every part `matches` selects; only their paths are copied.
    /// Returns how many parts it edited.
    pub fn edit_where(&mut self, mut matches: impl FnMut(&Part) -> bool, mut edit: impl FnMut(&mut Part)) -> usize {
        let selected: Vec<usize> =
            self.iter().enumerate().filter(|(_, part)| matches(part)).map(|(index, _)| index).collect();
        for &index in &selected {
            edit(self.get_mut(index).expect("a selected index is in range"));
        }
        selected.len()
    }

    /// Edits every text or reasoning part still streaming, looking only
    /// inside the chunks whose index says they hold one; only their paths
    /// are copied. Returns how many it edited.
    pub fn edit_streaming_text(&mut self, mut edit: impl FnMut(&mut Part)) -> usize {
        let selected: Vec<usize> = self
            .groups
            .iter()
            .enumerate()
            .flat_map(|(group_at, group)| {
                let flagged = group.index().streaming_text;
                (0..group.chunks.len()).filter(move |&at| flagged & (1 << at) != 0).flat_map(move |chunk_at| {
                    let first = (group_at * GROUP_CHUNKS + chunk_at) * CHUNK_PARTS;
                    first..first + group.chunks[chunk_at].parts.len()
                })
            })
            .filter(|&index| is_streaming_text(&self[index]))
            .collect();
        for &index in &selected {
            edit(self.get_mut(index).expect("a selected index is in range"));
        }
        selected.len()
    }

    /// Every part, for editing: copies everything shared, so the engine
    /// edits through [`Parts::get_mut`] or [`Parts::edit_where`] instead.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Part> {
        Arc::make_mut(&mut self.groups)
            .iter_mut()
            .flat_map(|group| group.chunks_mut().iter_mut())
            .flat_map(|chunk| chunk.parts_mut().iter_mut())
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

fn is_streaming_text(part: &Part) -> bool {
    matches!(part, Part::Text { state: TextState::Streaming, .. } | Part::Reasoning { state: TextState::Streaming, .. })
}

fn is_tool_of(part: &Part, call_id: &str) -> bool {
    matches!(part, Part::Tool(tool) if tool.call_id == call_id)
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
        // Equal lengths mean equal group and chunk boundaries: compare level
        // by level, skipping what both copies still share.
        Arc::ptr_eq(&self.groups, &other.groups)
            || self
                .groups
                .iter()
                .zip(other.groups.iter())
                .all(|(mine, theirs)| Arc::ptr_eq(mine, theirs) || mine == theirs)
    }
}

// Only the unit tests compare parts with a plain list.
#[cfg(test)]
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
    use crate::transcript::{TextState, ToolState, ALL_TOOL_STATES};

    fn text(index: usize) -> Part {
        Part::Text { id: format!("t{index}"), text: index.to_string(), state: TextState::Done }
    }

    fn parts(count: usize) -> Parts {
        (0..count).map(text).collect()
    }

    const GROUP_PARTS: usize = CHUNK_PARTS * GROUP_CHUNKS;

    #[test]
    fn reads_like_the_vec_it_was_built_from() {
        for count in
            [0, 1, CHUNK_PARTS - 1, CHUNK_PARTS, CHUNK_PARTS + 1, 5 * CHUNK_PARTS + 3, GROUP_PARTS, 2 * GROUP_PARTS + 9]
        {
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
        for count in [1, CHUNK_PARTS, 3 * CHUNK_PARTS + 2, GROUP_PARTS, GROUP_PARTS + CHUNK_PARTS + 1] {
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
    fn settling_streaming_text_edits_every_streaming_part_and_copies_only_their_chunks() {
        let streaming =
            |index: usize| Part::Text { id: format!("t{index}"), text: index.to_string(), state: TextState::Streaming };
        let reasoning = Part::Reasoning { id: "r".into(), text: "why".into(), state: TextState::Streaming };
        // Streaming parts in the first chunk, in a later group, and the last part.
        let at = [1, GROUP_PARTS + 3, 2 * GROUP_PARTS + 4];
        let mut built: Parts =
            (0..=at[2]).map(|index| if at.contains(&index) { streaming(index) } else { text(index) }).collect();
        built.insert(5, reasoning);
        let original = built.clone();
        let mut settled = 0;
        let edited = built.edit_streaming_text(|part| {
            if let Part::Text { state, .. } | Part::Reasoning { state, .. } = part {
                *state = TextState::Done;
                settled += 1;
            }
        });
        assert_eq!((edited, settled), (4, 4));
        assert!(built.iter().all(|part| !is_streaming_text(part)));
        assert_eq!(original.iter().filter(|part| is_streaming_text(part)).count(), 4, "the original is untouched");
        // Only the chunks that held a streaming part were copied.
        let changed = built.changed_since(&original);
        let chunk_of = |index: usize| (index / CHUNK_PARTS) * CHUNK_PARTS;
        let expected: Vec<Range<usize>> = [chunk_of(1), chunk_of(GROUP_PARTS + 4), chunk_of(2 * GROUP_PARTS + 5)]
            .into_iter()
            .map(|first| first..(first + CHUNK_PARTS).min(built.len()))
            .collect();
        assert_eq!(changed, expected);
        assert_eq!(built.edit_streaming_text(|_| panic!("nothing is streaming any more")), 0);
    }

    fn tool(call_id: &str, output: &str) -> Part {
        Part::Tool(ToolPart {
            call_id: call_id.into(),
            tool_name: "lookup".into(),
            state: ToolState::InputAvailable,
            input_text: String::new(),
            input: None,
            output: Some(serde_json::Value::String(output.into())),
            error_text: None,
            approval: None,
            repaired: false,
            dynamic: false,
        })
    }

    fn output(part: Option<&ToolPart>) -> Option<String> {
        part.and_then(|tool| tool.output.clone()).map(|output| output.as_str().unwrap_or_default().to_string())
    }

    #[test]
    fn finds_the_first_tool_of_a_call_in_any_chunk_and_after_edits() {
        let mut built = Parts::new();
        for index in 0..GROUP_PARTS + 5 * CHUNK_PARTS {
            built.push(if index % 3 == 0 { tool(&format!("tc-{index}"), "first") } else { text(index) });
        }
        built.push(tool("tc-0", "second"));
        for index in 0..GROUP_PARTS + 5 * CHUNK_PARTS {
            let expected = (index % 3 == 0).then(|| "first".to_string());
            assert_eq!(output(built.tool(&format!("tc-{index}"))), expected, "tc-{index}");
        }
        assert_eq!(built.find_tool("tc-0"), Some(0), "the first of two parts of a call");
        let copy = built.clone();
        let Some(Part::Tool(renamed)) = built.get_mut(3 * CHUNK_PARTS) else { panic!("a tool part") };
        renamed.call_id = "tc-renamed".into();
        assert_eq!(built.find_tool("tc-renamed"), Some(3 * CHUNK_PARTS));
        assert_eq!(built.find_tool(&format!("tc-{}", 3 * CHUNK_PARTS)), None);
        assert_eq!(copy.find_tool(&format!("tc-{}", 3 * CHUNK_PARTS)), Some(3 * CHUNK_PARTS));
        built.tool_mut("tc-0").expect("a tool").output = None;
        assert_eq!(output(built.tool("tc-0")), None);
        assert_eq!(output(copy.tool("tc-0")), Some("first".into()));
        built.truncate(1);
        assert_eq!(built.find_tool("tc-3"), None);
        assert_eq!(built.find_tool("tc-0"), Some(0));
    }

    fn with_state(call_id: &str, state: ToolState) -> Part {
        let Part::Tool(mut part) = tool(call_id, "") else { unreachable!() };
        part.state = state;
        Part::Tool(part)
    }

    fn ids<'a>(tools: impl Iterator<Item = &'a ToolPart>) -> Vec<String> {
        tools.map(|tool| tool.call_id.clone()).collect()
    }

    #[test]
    fn tools_in_states_are_found_in_order_and_follow_edits() {
        let mut built = Parts::new();
        let mut expected_pending = Vec::new();
        for index in 0..GROUP_PARTS + 3 * CHUNK_PARTS {
            let part = match index % 7 {
                0 => with_state(&format!("tc-{index}"), ToolState::InputAvailable),
                3 => with_state(&format!("tc-{index}"), ToolState::OutputAvailable),
                _ => text(index),
            };
            if index % 7 == 0 {
                expected_pending.push(format!("tc-{index}"));
            }
            built.push(part);
        }
        let pending = ToolStates::of(&[ToolState::InputAvailable, ToolState::ApprovalRequested]);
        assert_eq!(ids(built.tools_in(pending)), expected_pending);
        assert_eq!(ids(built.tools_in(ToolStates::of(&[ToolState::OutputError]))), Vec::<String>::new());
        let copy = built.clone();
        let edited =
            built.edit_tools_in(pending, |tool| tool.call_id != "tc-7", |tool| tool.state = ToolState::OutputError);
        assert_eq!(edited, expected_pending.len() - 1);
        assert_eq!(ids(built.tools_in(pending)), vec!["tc-7".to_string()]);
        assert_eq!(ids(built.tools_in(ToolStates::of(&[ToolState::OutputError]))).len(), edited);
        assert_eq!(ids(copy.tools_in(pending)), expected_pending, "the copy keeps its states");
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

    #[test]
    fn changed_since_names_every_part_an_edit_or_a_push_may_have_changed() {
        let earlier = parts(GROUP_PARTS + 3 * CHUNK_PARTS + 2);
        assert!(earlier.changed_since(&earlier.clone()).is_empty(), "a copy shares everything");
        let mut later = earlier.clone();
        *later.get_mut(2 * CHUNK_PARTS + 1).expect("a part") = text(1000);
        later.push(text(2000));
        let end = GROUP_PARTS + 3 * CHUNK_PARTS + 3;
        let tail = GROUP_PARTS + 3 * CHUNK_PARTS;
        assert_eq!(later.changed_since(&earlier), vec![2 * CHUNK_PARTS..3 * CHUNK_PARTS, tail..end]);
        let unchanged = |index: usize| later.changed_since(&earlier).iter().all(|range| !range.contains(&index));
        assert!((0..earlier.len()).filter(|&index| unchanged(index)).all(|index| later[index] == earlier[index]));
        let parsed: Parts = serde_json::from_str(&serde_json::to_string(&later).expect("serialises")).expect("parses");
        assert_eq!(parsed.changed_since(&later), vec![0..end], "a parsed copy shares nothing");
        let mut shorter = later.clone();
        shorter.truncate(3);
        assert_eq!(shorter.changed_since(&later), vec![0..3]);
    }

    #[test]
    fn tool_positions_finds_every_part_of_a_call() {
        let mut built = Parts::new();
        for index in 0..GROUP_PARTS + 2 * CHUNK_PARTS {
            built.push(if index % 5 == 0 { tool(&format!("tc-{index}"), "first") } else { text(index) });
        }
        built.push(tool("tc-5", "again"));
        assert_eq!(built.tool_positions("tc-5"), vec![5, GROUP_PARTS + 2 * CHUNK_PARTS]);
        assert_eq!(built.tool_positions("tc-10"), vec![10]);
        assert!(built.tool_positions("tc-1").is_empty());
    }

    /// One step of a model test: push a tool or a text, edit a part in
    /// place (its state, its call id, its text's streaming), pop, truncate,
    /// keep a copy (so later edits copy what they touch), or look a call up
    /// (so the indexes are built, and later edits update them).
    #[derive(Clone, Debug)]
    enum Edit {
        PushTool(u8, u8),
        PushText(bool),
        SetState(usize, u8),
        Rename(usize, u8),
        Stream(usize, bool),
        Pop,
        Truncate(usize),
        KeepCopy,
        Look(u8, u8),
    }

    fn an_edit() -> impl proptest::strategy::Strategy<Value = Edit> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0u8..40, 0u8..7).prop_map(|(call, state)| Edit::PushTool(call, state)),
            2 => any::<bool>().prop_map(Edit::PushText),
            6 => (any::<usize>(), 0u8..7).prop_map(|(at, state)| Edit::SetState(at, state)),
            2 => (any::<usize>(), 0u8..40).prop_map(|(at, call)| Edit::Rename(at, call)),
            2 => (any::<usize>(), any::<bool>()).prop_map(|(at, streaming)| Edit::Stream(at, streaming)),
            1 => Just(Edit::Pop),
            1 => any::<usize>().prop_map(Edit::Truncate),
            1 => Just(Edit::KeepCopy),
            4 => (0u8..40, 0u8..7).prop_map(|(call, state)| Edit::Look(call, state)),
        ]
    }

    fn apply(parts: &mut Parts, edit: &Edit) {
        let len = parts.len();
        match *edit {
            Edit::PushTool(call, state) => {
                parts.push(with_state(&format!("tc-{call}"), ALL_TOOL_STATES[usize::from(state)]))
            }
            Edit::PushText(streaming) => parts.push(Part::Text {
                id: "t".into(),
                text: "x".into(),
                state: if streaming { TextState::Streaming } else { TextState::Done },
            }),
            _ if len == 0 => {}
            Edit::SetState(at, state) => {
                if let Some(Part::Tool(tool)) = parts.get_mut(at % len) {
                    tool.state = ALL_TOOL_STATES[usize::from(state)];
                }
            }
            Edit::Rename(at, call) => {
                if let Some(Part::Tool(tool)) = parts.get_mut(at % len) {
                    tool.call_id = format!("tc-{call}");
                }
            }
            Edit::Stream(at, streaming) => {
                if let Some(Part::Text { state, .. }) = parts.get_mut(at % len) {
                    *state = if streaming { TextState::Streaming } else { TextState::Done };
                }
            }
            Edit::Pop => {
                parts.pop();
            }
            Edit::Truncate(keep) => parts.truncate(keep % (len + 1)),
            Edit::KeepCopy => {}
            Edit::Look(call, state) => {
                parts.find_tool(&format!("tc-{call}"));
                let _ = parts.tools_in(ToolStates::of(&[ALL_TOOL_STATES[usize::from(state)]])).count();
            }
        }
    }

    proptest::proptest! {
        /// Whatever edits a long batch goes through, every lookup the
        /// indexes serve answers as a plain scan of the parts does, in the
        /// edited copy and in every copy kept along the way.
        #[test]
        fn the_indexes_answer_as_a_scan_after_any_edits(
            edits in proptest::collection::vec(an_edit(), 1..600),
        ) {
            let mut parts = Parts::new();
            let mut copies: Vec<(Parts, Vec<Part>)> = Vec::new();
            for edit in &edits {
                apply(&mut parts, edit);
                if matches!(edit, Edit::KeepCopy) {
                    copies.push((parts.clone(), parts.to_vec()));
                }
            }
            copies.push((parts.clone(), parts.to_vec()));
            for (copy, plain) in &copies {
                for call in 0..40 {
                    let call_id = format!("tc-{call}");
                    let scanned: Vec<usize> = (0..plain.len()).filter(|&at| is_tool_of(&plain[at], &call_id)).collect();
                    proptest::prop_assert_eq!(copy.tool_positions(&call_id), scanned.clone(), "{}", call_id);
                    proptest::prop_assert_eq!(copy.find_tool(&call_id), scanned.first().copied());
                }
                for state in ALL_TOOL_STATES {
                    let wanted = ToolStates::of(&[state]);
                    let scanned = plain.iter().filter_map(|part| match part {
                        Part::Tool(tool) if tool.state == state => Some(tool.call_id.clone()),
                        _ => None,
                    });
                    proptest::prop_assert_eq!(ids(copy.tools_in(wanted)), scanned.collect::<Vec<_>>());
                }
                let streaming = plain.iter().filter(|part| is_streaming_text(part)).count();
                proptest::prop_assert_eq!(copy.clone().edit_streaming_text(|_| {}), streaming);
            }
        }
    }
}

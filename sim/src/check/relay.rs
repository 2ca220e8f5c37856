//! What a consumer is streamed of a model call is what the model streamed,
//! in its order, each piece once: the relay a client connection (as chunk
//! frames) and a `chat()` caller (as `on_event` calls) are owed while a
//! request runs. Judged between rests, where a later transcript or
//! take-back would otherwise hide a chunk lost, doubled or swapped.
//!
//! A stream is read as a sequence of atoms, so that an engine may split or
//! join deltas as it likes: a part's start, a text or reasoning part's
//! end, each character of a text, reasoning or tool-input delta, and a
//! tool call's finishing (which an engine may also send for a call the
//! model finished only with its step). The
//! model's atoms of a request are those of its calls while the engine
//! listened to them (not after it cancelled a call, started another call
//! for the same request, or died). A consumer's atoms of a request since
//! it was last given the whole state (a connection's connect, a transcript
//! frame, a take-back; a caller's start or take-back) must be the model's,
//! contiguous, from where the model was at that point. And where the
//! request's stream comes to a stop for the consumer (a `done` frame, a
//! take-back, a terminal callback, a client leaving), it has been sent
//! every atom the model streamed before then.

use std::collections::BTreeMap;

use turnsim_engine::Chunk;

use crate::history::{Boundary, History};

/// Which kind of part an atom belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Reasoning,
    Tool,
}

/// What an atom is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Start,
    Char(char),
    End,
    /// A tool call finished (its input complete).
    Called,
}

/// One indivisible piece of a stream. Two atoms are the same piece when
/// they are of the same kind and what, and, for a tool's, of the same
/// call: an engine may name text and reasoning parts as it likes (the AI
/// SDK names a step's text anew when the model reuses an id), never a
/// tool call otherwise than the model did.
#[derive(Clone, Copy, Debug)]
pub struct Atom<'a> {
    pub kind: Kind,
    pub id: &'a str,
    pub what: What,
    /// A finished call's tool name and input: every consumer is owed the
    /// call the model made, not only its id.
    pub call: Option<(&'a str, &'a serde_json::Value)>,
}

impl PartialEq for Atom<'_> {
    fn eq(&self, other: &Self) -> bool {
        let same_call = self.what != What::Called || self.call == other.call;
        self.kind == other.kind
            && self.what == other.what
            && (self.kind != Kind::Tool || self.id == other.id)
            && same_call
    }
}

impl std::fmt::Display for Atom<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Text => "text",
            Kind::Reasoning => "reasoning",
            Kind::Tool => "tool input",
        };
        match self.what {
            What::Start => write!(f, "the start of {kind} {}", self.id),
            What::Char(c) => write!(f, "{c:?} of {kind} {}", self.id),
            What::End => write!(f, "the end of {kind} {}", self.id),
            What::Called => match self.call {
                Some((name, input)) => write!(f, "the finished call {} ({name} {input})", self.id),
                None => write!(f, "the finished call {}", self.id),
            },
        }
    }
}

/// The atoms of one chunk, in order (none for a step's finish, an error,
/// or the end of a tool's input), read as they are needed: a delta's
/// characters are not collected first.
pub fn atoms(chunk: &Chunk) -> impl Iterator<Item = Atom<'_>> {
    type Read<'a> = (Option<Atom<'a>>, (Kind, &'a str, &'a str));
    fn one(kind: Kind, id: &str, what: What) -> Read<'_> {
        (Some(Atom { kind, id, what, call: None }), (kind, id, ""))
    }
    fn chars<'a>(kind: Kind, id: &'a str, delta: &'a str) -> Read<'a> {
        (None, (kind, id, delta))
    }
    let (single, (kind, id, delta)) = match chunk {
        Chunk::TextStart { id } => one(Kind::Text, id, What::Start),
        Chunk::TextDelta { id, delta } => chars(Kind::Text, id, delta),
        Chunk::TextEnd { id } => one(Kind::Text, id, What::End),
        Chunk::ReasoningStart { id } => one(Kind::Reasoning, id, What::Start),
        Chunk::ReasoningDelta { id, delta } => chars(Kind::Reasoning, id, delta),
        Chunk::ReasoningEnd { id } => one(Kind::Reasoning, id, What::End),
        Chunk::ToolInputStart { id, .. } => one(Kind::Tool, id, What::Start),
        Chunk::ToolInputDelta { id, delta } => chars(Kind::Tool, id, delta),
        Chunk::ToolCall { id, name, input, .. } => {
            let atom = Atom { kind: Kind::Tool, id, what: What::Called, call: Some((name, input)) };
            (Some(atom), (Kind::Tool, id.as_str(), ""))
        }
        // A UI stream has no end of a tool's input (its finished call says
        // it is complete), so an engine need not relay it.
        Chunk::ToolInputEnd { .. } | Chunk::FinishStep { .. } | Chunk::Finish { .. } | Chunk::Error { .. } => {
            (None, (Kind::Text, "", ""))
        }
    };
    single.into_iter().chain(delta.chars().map(move |c| Atom { kind, id, what: What::Char(c), call: None }))
}

/// Every request's model stream, as the engine listened to it: each atom
/// with the crossing it came in at.
pub struct ModelStreams<'a> {
    streams: BTreeMap<&'a str, Vec<(usize, Atom<'a>)>>,
}

impl<'a> ModelStreams<'a> {
    pub fn new(history: &'a History) -> Self {
        let mut request_of: BTreeMap<u32, &'a str> = BTreeMap::new();
        let mut listened: BTreeMap<&'a str, u32> = BTreeMap::new();
        let mut streams: BTreeMap<&'a str, Vec<(usize, Atom<'a>)>> = BTreeMap::new();
        for (index, crossing) in history.iter().enumerate() {
            match &crossing.what {
                Boundary::ModelRequest { call, request } => {
                    request_of.insert(*call, &request.request_id);
                    listened.insert(&request.request_id, *call);
                }
                Boundary::ModelCancel { call } => {
                    listened.retain(|_, listening| listening != call);
                }
                Boundary::Killed => listened.clear(),
                Boundary::ModelChunk { call, chunk } => {
                    let Some(request) = request_of.get(call) else { continue };
                    if listened.get(request) != Some(call) {
                        continue;
                    }
                    let stream = streams.entry(request).or_default();
                    stream.extend(atoms(chunk).map(|atom| (index, atom)));
                }
                _ => {}
            }
        }
        Self { streams }
    }

    fn stream(&self, request: &str) -> &[(usize, Atom<'a>)] {
        self.streams.get(request).map_or(&[], Vec::as_slice)
    }

    /// How many atoms of `request` the model streamed before crossing `index`.
    pub fn before(&self, request: &str, index: usize) -> usize {
        self.stream(request).partition_point(|(at, _)| *at < index)
    }

    /// How many atoms of `request` the model streamed before sim time
    /// `at_us` (crossings strictly earlier in time).
    fn before_time(&self, history: &History, request: &str, at_us: u64) -> usize {
        self.stream(request).partition_point(|(at, _)| history.crossings[*at].at_us < at_us)
    }

    /// Whether tool call `id` is one the model's stream of `request`
    /// finished only with its step (no finished call of its own), and its
    /// input came before `position`: an engine may tell a consumer of that
    /// finishing as a finished call where the step ends.
    fn finished_at_step(&self, request: &str, id: &str, position: usize) -> bool {
        let stream = self.stream(request);
        let of_call = |atom: &Atom| atom.kind == Kind::Tool && atom.id == id;
        let started = stream[..position.min(stream.len())].iter().any(|(_, atom)| of_call(atom));
        started && !stream.iter().any(|(_, atom)| of_call(atom) && atom.what == What::Called)
    }

    fn atom(&self, request: &str, position: usize) -> Option<Atom<'a>> {
        self.stream(request).get(position).map(|(_, atom)| *atom)
    }
}

/// One consumer following the model's streams: where it was last given
/// the whole state, and how far into each request's stream it has been
/// sent since.
#[derive(Default)]
pub struct Follower<'h> {
    synced_at: usize,
    next: BTreeMap<&'h str, usize>,
}

impl<'h> Follower<'h> {
    /// The consumer was given the whole state at crossing `index` (what the
    /// model streamed before it is in it).
    pub fn sync(&mut self, index: usize) {
        self.synced_at = index;
        self.next.clear();
    }

    /// It was sent `chunk` of `request` (made at crossing `index`): each of
    /// its atoms the next the model streamed, already streamed then, or a
    /// description of the first that is wrong. The request's stream and how
    /// far the model was into it at `index` are looked up once per chunk.
    pub fn sent(
        &mut self,
        streams: &ModelStreams<'h>,
        request: &'h str,
        chunk: &Chunk,
        index: usize,
    ) -> Option<String> {
        let stream = streams.stream(request);
        let synced_at = self.synced_at;
        let next = self.next.entry(request).or_insert_with(|| streams.before(request, synced_at));
        let streamed = streams.before(request, index);
        for atom in atoms(chunk) {
            let expected = stream.get(*next).map(|(_, atom)| *atom);
            if expected.is_some_and(|expected| expected == atom) {
                if streamed <= *next {
                    *next = usize::MAX;
                    return Some(format!("{atom} before the model streamed it"));
                }
                *next += 1;
                continue;
            }
            if atom.what == What::Called && streams.finished_at_step(request, atom.id, *next) {
                continue;
            }
            let text = match expected {
                Some(expected) => format!("{atom} where the model streamed {expected} next"),
                None if *next == 0 => format!("{atom}, which the model never streamed for request {request}"),
                None => format!("{atom} after everything the model streamed for request {request}"),
            };
            // Judged once: what follows is judged from where the stream now is.
            *next = usize::MAX;
            return Some(text);
        }
        None
    }

    /// Whether it has been sent every atom of `request` the model streamed
    /// before crossing `index`; if not, the first it missed.
    pub fn missed(&self, streams: &ModelStreams<'h>, request: &str, index: usize) -> Option<Atom<'h>> {
        let next = self.position(streams, request);
        let owed = streams.before(request, index);
        (next < owed).then(|| streams.atom(request, next)).flatten()
    }

    /// As [`Self::missed`], counting only what the model streamed before
    /// sim time `at_us`.
    pub fn missed_before_time(
        &self,
        streams: &ModelStreams<'h>,
        history: &History,
        request: &str,
        at_us: u64,
    ) -> Option<Atom<'h>> {
        let next = self.position(streams, request);
        let owed = streams.before_time(history, request, at_us);
        (next < owed).then(|| streams.atom(request, next)).flatten()
    }

    /// The requests it has been sent anything of since its last sync.
    pub fn following(&self) -> impl Iterator<Item = &'h str> + '_ {
        self.next.iter().filter(|(_, next)| **next != usize::MAX).map(|(request, _)| *request)
    }

    fn position(&self, streams: &ModelStreams<'h>, request: &str) -> usize {
        self.next.get(request).copied().unwrap_or_else(|| streams.before(request, self.synced_at))
    }
}

//! A first pass over a scenario file, before serde reads it.
//!
//! It enforces the bounds that keep hostile input from crashing, hanging or
//! exhausting the harness — valid UTF-8 without control characters, one
//! document, nesting depth, alias expansion, no custom tags — and records the
//! line and column of every node by its path (`model[0][2].repeat.times`), so
//! that errors found after parsing (fault targets, fixtures, budgets) are
//! located like the parser's own. It walks the event stream of an iterative
//! parser, so no input can overflow the stack here.

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, Span};

use super::limits::{MAX_YAML_DEPTH, MAX_YAML_NODES};

/// A problem at a line and column (both 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Located {
    fn at(span: Span, message: impl Into<String>) -> Self {
        Self { line: span.start.line(), column: span.start.col() + 1, message: message.into() }
    }
}

/// Where each node of a document starts, by path.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    nodes: BTreeMap<String, (usize, usize)>,
}

impl Locator {
    /// The line and column of `path`, or of its nearest ancestor that has one.
    pub fn find(&self, path: &str) -> Option<(usize, usize)> {
        let mut path = path;
        loop {
            if let Some(&found) = self.nodes.get(path) {
                return Some(found);
            }
            path = parent_path(path)?;
        }
    }
}

/// `a.b[2]` → `a.b`, `a.b` → `a`, `a` → none.
fn parent_path(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

/// Checks the bytes and the YAML structure; returns the text and its locator.
pub fn prescan(bytes: &[u8]) -> Result<(&str, Locator), Located> {
    let text = utf8(bytes)?;
    no_control_characters(text)?;
    let locator = walk(text)?;
    Ok((text, locator))
}

fn utf8(bytes: &[u8]) -> Result<&str, Located> {
    std::str::from_utf8(bytes).map_err(|error| {
        let (line, column) = line_column(&bytes[..error.valid_up_to()]);
        Located { line, column, message: "the file is not valid UTF-8 text".into() }
    })
}

fn no_control_characters(text: &str) -> Result<(), Located> {
    let Some((offset, character)) =
        text.char_indices().find(|&(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    else {
        return Ok(());
    };
    let (line, column) = line_column(&text.as_bytes()[..offset]);
    Err(Located {
        line,
        column,
        message: format!("control character U+{:04X} is not allowed in YAML", character as u32),
    })
}

/// Line and column (1-based, in characters) just after `before`.
fn line_column(before: &[u8]) -> (usize, usize) {
    let text = String::from_utf8_lossy(before);
    let line = text.matches('\n').count() + 1;
    let column = text.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    (line, column)
}

fn too_deep() -> String {
    format!("the YAML nests deeper than {MAX_YAML_DEPTH} levels (the nesting bound of a scenario)")
}

/// An open collection while walking the events.
struct Frame {
    path: String,
    mapping: bool,
    /// Sequences: the next index. Mappings: 0 while a key is expected, 1 while its value is.
    next: usize,
    key: String,
    anchor: usize,
    nodes_at_start: u64,
}

#[derive(Default)]
struct Walk {
    locator: Locator,
    stack: Vec<Frame>,
    /// Nodes seen so far, aliases counted as the nodes they stand for.
    nodes: u64,
    anchor_sizes: BTreeMap<usize, u64>,
    documents: usize,
}

fn walk(text: &str) -> Result<Locator, Located> {
    let mut walk = Walk::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|error| {
            let marker = error.marker();
            // The parser's own limit, met while it looks ahead past ours:
            // the file broke our bound, so say that one.
            let message = match error.info() {
                "recursion limit exceeded" => too_deep(),
                info => info.to_string(),
            };
            Located { line: marker.line(), column: marker.col() + 1, message }
        })?;
        walk.event(event, span)?;
    }
    Ok(walk.locator)
}

impl Walk {
    fn event(&mut self, event: Event, span: Span) -> Result<(), Located> {
        match event {
            Event::DocumentStart(_) => self.document(span),
            Event::Scalar(value, _, anchor, tag) => {
                no_tag(tag.as_deref(), span)?;
                self.node(span, Some(&value))?;
                self.count(1, span)?;
                self.remember_anchor(anchor, 1);
                Ok(())
            }
            Event::Alias(anchor) => {
                self.node(span, None)?;
                let size = self.anchor_sizes.get(&anchor).copied().unwrap_or(1);
                self.count(size, span)
            }
            Event::SequenceStart(anchor, tag) => {
                no_tag(tag.as_deref(), span)?;
                self.open(span, anchor, false)
            }
            Event::MappingStart(anchor, tag) => {
                no_tag(tag.as_deref(), span)?;
                self.open(span, anchor, true)
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.close();
                Ok(())
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
        }
    }

    fn document(&mut self, span: Span) -> Result<(), Located> {
        self.documents += 1;
        if self.documents > 1 {
            return Err(Located::at(span, "a scenario file holds one YAML document; a second one starts here"));
        }
        Ok(())
    }

    /// Places a node under its parent and returns its path; a scalar that is
    /// a mapping key only names the value that follows.
    fn node(&mut self, span: Span, scalar: Option<&str>) -> Result<Option<String>, Located> {
        let Some(parent) = self.stack.last_mut() else {
            self.locator.nodes.entry(String::new()).or_insert((span.start.line(), span.start.col() + 1));
            return Ok(Some(String::new()));
        };
        let path = if parent.mapping {
            if parent.next == 0 {
                parent.next = 1;
                parent.key = scalar.unwrap_or("?").to_string();
                let key_path = format!("{}#key", join_key(&parent.path, &parent.key));
                if let (Some(key), Some(&(line, _))) = (scalar, self.locator.nodes.get(&key_path)) {
                    // Reported where it repeats: the first one is not the mistake.
                    return Err(Located::at(span, format!("duplicate key `{key}` (it is first given on line {line})")));
                }
                self.locator.nodes.insert(key_path, position(span));
                return Ok(None);
            }
            parent.next = 0;
            join_key(&parent.path, &parent.key)
        } else {
            parent.next += 1;
            format!("{}[{}]", parent.path, parent.next - 1)
        };
        self.locator.nodes.entry(path.clone()).or_insert(position(span));
        Ok(Some(path))
    }

    fn open(&mut self, span: Span, anchor: usize, mapping: bool) -> Result<(), Located> {
        let path = self.node(span, None)?.unwrap_or_else(|| {
            // A collection used as a mapping key: give it a path of its own.
            let parent = self.stack.last().map_or(String::new(), |frame| frame.path.clone());
            join_key(&parent, "?")
        });
        if self.stack.len() >= MAX_YAML_DEPTH {
            return Err(Located::at(span, too_deep()));
        }
        self.count(1, span)?;
        let nodes_at_start = self.nodes;
        self.stack.push(Frame { path, mapping, next: 0, key: String::new(), anchor, nodes_at_start });
        Ok(())
    }

    fn close(&mut self) {
        if let Some(frame) = self.stack.pop() {
            self.remember_anchor(frame.anchor, self.nodes - frame.nodes_at_start + 1);
        }
    }

    fn remember_anchor(&mut self, anchor: usize, size: u64) {
        if anchor != 0 {
            self.anchor_sizes.insert(anchor, size);
        }
    }

    fn count(&mut self, nodes: u64, span: Span) -> Result<(), Located> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_YAML_NODES {
            return Err(Located::at(
                span,
                format!(
                    "the file expands to more than {MAX_YAML_NODES} YAML nodes (aliases count as what they repeat); \
                     this is the size bound of a scenario"
                ),
            ));
        }
        Ok(())
    }
}

fn position(span: Span) -> (usize, usize) {
    (span.start.line(), span.start.col() + 1)
}

fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn no_tag(tag: Option<&saphyr_parser::Tag>, span: Span) -> Result<(), Located> {
    match tag {
        Some(tag) if !tag.is_yaml_core_schema() => Err(Located::at(
            span,
            format!("YAML tags (`{}{}`) are not part of the scenario format", tag.handle, tag.suffix),
        )),
        _ => Ok(()),
    }
}

//! The engine's modules form layers, not a circle: leaf modules (chunk,
//! clock, regression, post, transcript with its parts, durable, events,
//! client) at the bottom, then config, input and ports, then the seam and
//! the messenger, with the session on top. A module's files count as one
//! module (`session/turn.rs` is the session, `transcript/parts.rs` the
//! transcript): a parent and its children may use each other.
//!
//! The test reads each module's source, collects the `crate::` paths it
//! names outside comments (a `use crate::{a, b::C}` group names `a` and
//! `b`; a root re-export such as `crate::Role` names the module `lib.rs`
//! re-exports it from) and fails when the modules' graph has a cycle, or
//! when config or ports reach, even through another module, the session,
//! the messenger or the seam they sit below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module name → the modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The modules that sit under the session and what drives it.
const FOUNDATIONS: [&str; 2] = ["config", "ports"];

/// What the foundations must never reach.
const ABOVE_FOUNDATIONS: [&str; 3] = ["session", "messenger", "seam"];

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = engine_graph();
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the engine's modules import each other in a circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn config_and_ports_stay_below_the_session_messenger_and_seam() {
    let graph = engine_graph();
    for foundation in FOUNDATIONS {
        let reached = reachable(&graph, foundation);
        for above in ABOVE_FOUNDATIONS {
            assert!(
                !reached.contains_key(above),
                "`{foundation}` depends on `{above}` (via {}): it must only use modules below it",
                reached[above].join(" -> ")
            );
        }
    }
}

#[test]
fn the_graph_sees_the_edges_the_source_has() {
    // Guards the parser: an empty graph would pass both tests above.
    let graph = engine_graph();
    for module in ["session", "messenger", "seam", "ports", "config", "input", "client", "post", "transcript"] {
        assert!(graph.contains_key(module), "module `{module}` was not read");
    }
    let edges = [("session", "ports"), ("session", "transcript"), ("input", "client"), ("events", "durable")];
    for (from, to) in edges {
        assert!(graph[from].contains(to), "`{from}` uses `{to}`, but the parser missed it");
    }
}

#[test]
fn the_parser_reads_use_groups_root_items_and_skips_comments() {
    let root_items = BTreeMap::from([("Role".to_string(), "transcript".to_string())]);
    let source = "use crate::{ports::{A, B}, clock::Instant};\n\
                  // crate::session::Session in a comment\n\
                  /// [`crate::seam::Engine`] in a doc link\n\
                  let x = crate::Role::User; let y = crate::events::EngineEvent::Idle;";
    let named = modules_named(source, &root_items);
    let expected: BTreeSet<String> = ["ports", "clock", "transcript", "events"].map(String::from).into();
    assert_eq!(named, expected);
}

/// The engine's modules and what each one names.
fn engine_graph() -> Graph {
    let source_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(source_dir.join("lib.rs")).expect("engine/src/lib.rs is readable");
    let root_items = root_reexports(&lib);
    let mut graph = Graph::new();
    for (module, file) in module_files(&source_dir) {
        let source = std::fs::read_to_string(&file).expect("a module file is readable");
        let named = graph.entry(module.clone()).or_default();
        named.extend(modules_named(&source, &root_items).into_iter().filter(|name| *name != module));
    }
    graph
}

/// Each `.rs` file under `src` but `lib.rs`, with the top-level module it
/// belongs to (`session/turn.rs` belongs to `session`).
fn module_files(source_dir: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(source_dir).expect("engine/src is readable") {
        let path = entry.expect("a directory entry").path();
        let stem = path.file_stem().expect("a file name").to_string_lossy().into_owned();
        if path.is_dir() {
            files.extend(rust_files_under(&path).into_iter().map(|file| (stem.clone(), file)));
        } else if path.extension().is_some_and(|extension| extension == "rs") && stem != "lib" {
            files.push((stem, path));
        }
    }
    files.sort();
    files
}

fn rust_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a module directory is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files_under(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files
}

/// Item name → the module `lib.rs` re-exports it from (`pub use ports::{Ports, …};`
/// names `Ports`; `pub use transcript::parts::{self, Parts};` names `parts` and `Parts`).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let lib = strip_comments(lib);
    let mut items = BTreeMap::new();
    for statement in lib.split(';').filter_map(|statement| statement.trim().strip_prefix("pub use ")) {
        let (module, rest) = statement.split_once("::").expect("a re-export names its module");
        let names = rest.split(|character: char| !(character.is_alphanumeric() || character == '_'));
        for name in names.filter(|name| !name.is_empty() && *name != "self") {
            items.insert(name.to_string(), module.trim().to_string());
        }
    }
    items
}

/// The modules `source` names through `crate::` outside comments.
fn modules_named(source: &str, root_items: &BTreeMap<String, String>) -> BTreeSet<String> {
    let code = strip_comments(source);
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let first_names = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![identifier(rest)],
        };
        for name in first_names.into_iter().filter(|name| !name.is_empty()) {
            named.insert(root_items.get(&name).cloned().unwrap_or(name));
        }
    }
    named
}

/// The first path segment of each entry of a `{a::B, c}` group (`group`
/// starts after the opening brace).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = vec![identifier(group.trim_start())];
    let mut depth = 0;
    for (at, character) in group.char_indices() {
        match character {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => heads.push(identifier(group[at + 1..].trim_start())),
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> String {
    text.chars().take_while(|character| character.is_alphanumeric() || *character == '_').collect()
}

/// `source` without its `//` line comments (doc comments included: a doc
/// link is not a dependency) and `/* */` block comments.
fn strip_comments(source: &str) -> String {
    let mut code = String::new();
    let mut rest = source;
    while let Some(at) = rest.find("/*") {
        code.push_str(&rest[..at]);
        rest = rest[at..].split_once("*/").map_or("", |(_, after)| after);
    }
    code.push_str(rest);
    code.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// A cycle of the graph as the modules along it, first module repeated last.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    let mut finished = BTreeSet::new();
    for start in graph.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = cycle_from(graph, start, &mut path, &mut finished) {
            return Some(cycle);
        }
    }
    None
}

fn cycle_from(
    graph: &Graph,
    module: &str,
    path: &mut Vec<String>,
    finished: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|on_path| on_path == module) {
        let mut cycle = path[at..].to_vec();
        cycle.push(module.to_string());
        return Some(cycle);
    }
    if finished.contains(module) {
        return None;
    }
    path.push(module.to_string());
    for next in graph.get(module).into_iter().flatten() {
        if let Some(cycle) = cycle_from(graph, next, path, finished) {
            return Some(cycle);
        }
    }
    path.pop();
    finished.insert(module.to_string());
    None
}

/// Every module `from` reaches, with the path that reaches it.
fn reachable(graph: &Graph, from: &str) -> BTreeMap<String, Vec<String>> {
    let mut reached = BTreeMap::from([(from.to_string(), vec![from.to_string()])]);
    let mut waiting = vec![from.to_string()];
    while let Some(module) = waiting.pop() {
        for next in graph.get(&module).into_iter().flatten() {
            if !reached.contains_key(next) {
                let mut path = reached[&module].clone();
                path.push(next.clone());
                reached.insert(next.clone(), path);
                waiting.push(next.clone());
            }
        }
    }
    reached
}

//! The checks judge the boundary history alone, by layout too: the history
//! (`history.rs`, with how a run ends and how connections are numbered)
//! sits below both the world that records it and the checks that read it.
//! The checks take from the world only the record it hands over
//! (`RunRecord`); the world never reaches into the checks; the history
//! names neither. The test reads the sources outside comments.

use std::path::{Path, PathBuf};

fn sources(under: &Path) -> Vec<PathBuf> {
    if under.is_file() {
        return vec![under.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(under).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The source's lines with `//` comments cut off.
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("a readable source");
    text.lines().enumerate().map(|(at, line)| (at + 1, line.split("//").next().unwrap_or("").to_string())).collect()
}

/// Every `crate::MODULE...` path `files` name, with where.
fn names(files: &[PathBuf], module: &str) -> Vec<String> {
    let wanted = format!("crate::{module}");
    let mut found = Vec::new();
    for file in files {
        for (line, text) in code(file) {
            let mut rest = text.as_str();
            while let Some(at) = rest.find(&wanted) {
                let tail = &rest[at + wanted.len()..];
                let path: String = tail.chars().take_while(|c| c.is_alphanumeric() || "_:{}, ".contains(*c)).collect();
                found.push(format!("{}:{line}: {wanted}{}", file.display(), path.trim_end()));
                rest = tail;
            }
        }
    }
    found
}

fn src(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(path)
}

#[test]
fn the_checks_take_only_the_run_record_from_the_world() {
    let uses = names(&sources(&src("check")), "world");
    let other: Vec<&String> = uses.iter().filter(|found| !found.ends_with("crate::world::RunRecord")).collect();
    assert!(other.is_empty(), "the checks reach into the world beyond its RunRecord:\n{other:#?}");
    assert!(!uses.is_empty(), "the reader found the checks' one use of the world (the parser works)");
}

#[test]
fn the_world_never_reaches_into_the_checks() {
    let uses = names(&sources(&src("world")), "check");
    assert!(uses.is_empty(), "the world uses the checks:\n{uses:#?}");
    // The reader sees the world's uses of the history (the parser works).
    assert!(!names(&sources(&src("world")), "history").is_empty());
}

#[test]
fn the_history_names_neither_the_world_nor_the_checks() {
    let history = sources(&src("history.rs"));
    for module in ["world", "check"] {
        let uses = names(&history, module);
        assert!(uses.is_empty(), "the history uses `{module}`:\n{uses:#?}");
    }
}

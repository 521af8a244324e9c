//! One spelling for the project's stable error codes: dotted segments, each lowercase
//! kebab-case (`json.duplicate-key`, `roll.cursor.different-log`), the spelling of the lint and
//! compatibility rule ids too. The check reads every string literal in the crates' sources and
//! every code quoted in the docs, so a new code in another spelling fails here. Codes another
//! protocol defines on its wire (Roll's `EVENT_CURSOR_EXPIRED`, JSON-RPC's numbers) keep that
//! protocol's spelling and are not ours to change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The first segment of every code family the crates define.
const FAMILIES: &[&str] = &[
    "baseline",
    "client",
    "codegen",
    "conformance",
    "events",
    "export",
    "fast",
    "identity",
    "input",
    "json",
    "jsonrpc",
    "lint",
    "project",
    "proxy",
    "roll",
    "runlog",
    "runtime",
    "schema",
    "serve",
    "usage",
    "validate",
    "version",
];

fn kebab(segment: &str) -> bool {
    !segment.is_empty()
        && segment.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// A dotted name in one of the families, in any spelling: what could be a code.
fn code_like(text: &str) -> bool {
    let Some((family, rest)) = text.split_once('.') else {
        return false;
    };
    FAMILIES.contains(&family)
        && !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        // A word with a capital in it is a method or event name (`userInput.request`), or an
        // UPPER_SNAKE wire code: neither is one of our dotted codes.
        && rest.split('.').all(|s| !s.bytes().any(|b| b.is_ascii_uppercase()))
}

fn files(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}

/// The contents of every `"…"` literal on each line (escapes are not needed: codes have none).
fn string_literals(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut parts = line.split('"');
        parts.next();
        while let Some(inside) = parts.next() {
            out.push((number + 1, inside));
            parts.next();
        }
    }
    out
}

/// The contents of every `` `…` `` span on each line.
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut parts = line.split('`');
        parts.next();
        while let Some(inside) = parts.next() {
            out.push((number + 1, inside));
            parts.next();
        }
    }
    out
}

#[test]
fn every_error_code_is_dotted_kebab_case() {
    let root = agentwire_testkit::repo_root();
    let mut sources = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            files(&src, "rs", &mut sources);
        }
    }
    let mut docs = Vec::new();
    files(&root.join("docs"), "md", &mut docs);
    docs.push(root.join("README.md"));
    docs.push(root.join("ARCHITECTURE.md"));

    let mut seen = 0;
    let mut wrong = Vec::new();
    let mut check = |path: &Path, line: usize, text: &str| {
        // A code may be followed by details in prose (`json.too-deep: …`); take the name.
        let name = text.split([' ', ':', '(', '`']).next().unwrap_or_default();
        if code_like(name) {
            seen += 1;
            if !name.split('.').all(kebab) {
                wrong.push(format!(
                    "{}:{line}: {name}",
                    path.strip_prefix(&root).unwrap_or(path).display()
                ));
            }
        }
    };
    for path in &sources {
        let text = std::fs::read_to_string(path).unwrap();
        for (line, literal) in string_literals(&text) {
            check(path, line, literal);
        }
    }
    for path in &docs {
        let text = std::fs::read_to_string(path).unwrap();
        for (line, span) in code_spans(&text) {
            check(path, line, span);
        }
    }
    // The scan must see the codes at all: a broken scan would pass every tree.
    assert!(seen > 300, "only {seen} codes found");
    assert!(
        wrong.is_empty(),
        "{} codes are not dotted kebab-case:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_spelling_rule_tells_codes_apart() {
    assert!(kebab("duplicate-key") && kebab("v2") && kebab("too-deep"));
    assert!(!kebab("different_log") && !kebab("Expired") && !kebab("a--b") && !kebab(""));
    assert!(code_like("roll.cursor.different_log") && code_like("json.duplicate-key"));
    assert!(!code_like("userInput.request") && !code_like("thread.create"));
    assert!(!code_like("roll.EVENT_CURSOR_EXPIRED") && !code_like("json"));
}

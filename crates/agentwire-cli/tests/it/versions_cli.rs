//! `agentwire schema export --version V`: the strict schema of one wire version of an annotated
//! document, which rejects what that version does not know.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use crate::support;
use serde_json::{Value, json};

fn staged() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-schema/tests/data/versions/staged-runtime.json")
}

fn agentwire(args: &[&str]) -> std::process::Output {
    support::agentwire().args(args).output()
}

#[test]
fn exports_one_version_in_canonical_text() {
    let schema = staged();
    let out = agentwire(&[
        "schema",
        "export",
        "--version",
        "1.1",
        schema.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let doc = agentwire_schema::SchemaDocument::open(&schema).unwrap();
    let expected = agentwire_schema::export_version(&doc, "1.1").unwrap();
    assert_eq!(text, agentwire_schema::canonical_text(&expected, true));
    let exported: Value = serde_json::from_str(&text).unwrap();
    assert!(exported.get("x-agentwire").is_none());
    assert_eq!(
        exported["$defs"]["TurnStatus"]["enum"],
        json!(["running", "completed"])
    );
}

#[test]
fn exports_one_version_to_draft_07() {
    let schema = staged();
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("v1.2.json");
    let out = agentwire(&[
        "--format",
        "json",
        "schema",
        "export",
        "--version",
        "1.2",
        "--draft",
        "07",
        "--out",
        out_path.to_str().unwrap(),
        schema.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let exported: Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
    assert_eq!(
        exported["$schema"],
        json!("http://json-schema.org/draft-07/schema#")
    );
    assert!(exported["definitions"]["ServerRequest"].is_object());
}

#[test]
fn unknown_version_exits_2() {
    let schema = staged();
    let out = agentwire(&[
        "schema",
        "export",
        "--version",
        "2.0",
        schema.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("version \"2.0\" is not one of the document's versions"),
        "{stderr}"
    );
}

//! `agentwire digest` and `agentwire fmt`: on the peers' real artifacts and on small documents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, utf8 as text};
use std::process::Output;

fn agentwire(args: &[&str], stdin: Option<&[u8]>) -> Output {
    support::agentwire().args(args).stdin_opt(stdin).output()
}

#[test]
fn digest_of_the_chainlesschain_schema_is_the_published_one() {
    let path = agentwire_testkit::chainlesschain_schema_path();
    let out = agentwire(&["digest", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        format!("{}\n", agentwire_testkit::chainlesschain_published_digest())
    );
}

#[test]
fn the_openclaw_schema_is_already_canonical_without_a_newline() {
    let path = agentwire_testkit::openclaw_schema_path();
    let out = agentwire(
        &["--format", "json", "fmt", "--check", path.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["canonical"], true);
    let out = agentwire(
        &["fmt", "--check", "--newline", path.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn fmt_rewrites_in_place_and_check_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    std::fs::write(&file, br#"{"b":[1.50,{}],"a":"\u00e9\u0001","c":1E21}"#).unwrap();
    let path = file.to_str().unwrap();
    assert_eq!(
        agentwire(&["fmt", "--check", path], None).status.code(),
        Some(1)
    );
    let out = agentwire(&["fmt", "--newline", path], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), format!("{path}: rewritten\n"));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\n  \"b\": [\n    1.5,\n    {}\n  ],\n  \"a\": \"é\\u0001\",\n  \"c\": 1e+21\n}\n"
    );
    assert_eq!(
        agentwire(&["fmt", "--check", "--newline", path], None)
            .status
            .code(),
        Some(0)
    );
    let out = agentwire(&["fmt", "--newline", path], None);
    assert_eq!(text(&out.stdout), format!("{path}: unchanged\n"));
}

#[test]
fn fmt_reads_standard_input_and_rejects_bad_json() {
    let out = agentwire(&["fmt", "-"], Some(b"[1,{\"x\":null}]"));
    assert_eq!(text(&out.stdout), "[\n  1,\n  {\n    \"x\": null\n  }\n]");
    let out = agentwire(
        &["--format", "json", "fmt", "-"],
        Some(b"{\"a\":1,\"a\":2}"),
    );
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"]["code"], "json.duplicate-key");
    let out = agentwire(
        &["digest", "-"],
        Some(b"{\"$schema\": \"http://json-schema.org/draft-04/schema#\"}"),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("schema.unknown-draft at /$schema"),
        "{}",
        text(&out.stderr)
    );
}

//! `agentwire lint` end to end: the report for people and for programs, exit codes, documents
//! that do not load, and input that is not JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use crate::support::{agentwire, dir_with, stdout};
use agentwire_testkit::openclaw_schema_path;
use serde_json::{Value, json};

/// A draft-07 document that does not load (two unresolved refs) and breaks several rules.
const BROKEN: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "a": {"$ref": "#/definitions/Missing"},
    "b": {"type": "int"},
    "c": {"$ref": "#/definitions/AlsoMissing"},
    "d": {"enum": ["x", "y", "x"]},
    "u": {"$ref": "#/definitions/Used"}
  },
  "required": ["a", "e"],
  "additionalProperties": false,
  "definitions": {"Used": true, "Unused": true}
}"##;

const CLEAN: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {"id": {"$ref": "#/$defs/Id"}, "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["id"],
  "additionalProperties": false,
  "$defs": {"Id": {"type": "string", "pattern": "^[a-z]+$"}}
}"##;

fn run(dir: &Path, args: &[&str]) -> Output {
    agentwire().args(args).current_dir(dir).output()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn human_report_and_exit_1_on_errors() {
    let dir = dir_with(&[("broken.json", BROKEN.as_bytes())]);
    let output = run(dir.path(), &["lint", "broken.json"]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(stdout(&output));
    assert_eq!(stderr(&output), "");
}

#[test]
fn json_report() {
    let dir = dir_with(&[("broken.json", BROKEN.as_bytes())]);
    let output = run(dir.path(), &["--format", "json", "lint", "broken.json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["file"], "broken.json");
    assert_eq!(
        report["summary"],
        json!({"errors": 4, "warnings": 2, "infos": 0})
    );
    assert_eq!(
        report["findings"][0],
        json!({"code": "AW032", "severity": "error", "pointer": "/required/1",
               "message": "\"e\" is required but additionalProperties: false forbids it: no object passes"})
    );
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["AW032", "AW001", "AW020", "AW001", "AW030", "AW050"]
    );
}

#[test]
fn a_clean_document_exits_0() {
    let dir = dir_with(&[("clean.json", CLEAN.as_bytes())]);
    let output = run(dir.path(), &["lint", "clean.json"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "clean.json: 0 errors, 0 warnings, 0 infos\n"
    );
}

#[test]
fn warnings_alone_exit_0() {
    let dir = dir_with(&[("open.json", br#"{"properties": {"a": {}}}"#)]);
    let output = run(dir.path(), &["lint", "open.json"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout(&output).ends_with("open.json: 0 errors, 1 warning, 0 infos\n"));
}

#[test]
fn definitions_flag_chooses_how_unreferenced_definitions_are_reported() {
    let doc = br##"{"$ref": "#/$defs/A", "$defs": {"A": true, "B": true, "C": true}}"##;
    let dir = dir_with(&[("reg.json", doc)]);
    let auto = stdout(&run(dir.path(), &["lint", "reg.json"]));
    assert!(auto.starts_with("info AW051 /$defs: 2 of 3 definitions"));
    let rooted = stdout(&run(
        dir.path(),
        &["lint", "--definitions", "rooted", "reg.json"],
    ));
    assert_eq!(
        rooted,
        "warning AW050 /$defs/B: definition \"B\" is referenced neither from the root schema nor from a registry\n\
         warning AW050 /$defs/C: definition \"C\" is referenced neither from the root schema nor from a registry\n\
         reg.json: 0 errors, 2 warnings, 0 infos\n"
    );
    let registry = stdout(&run(
        dir.path(),
        &["lint", "--definitions", "registry", "reg.json"],
    ));
    assert_eq!(registry, "reg.json: 0 errors, 0 warnings, 0 infos\n");
}

#[test]
fn input_that_is_not_json_exits_2() {
    let dir = dir_with(&[
        ("bad.json", b"{\"a\": "),
        ("latin1.json", b"{\"a\": \"\xe9\"}"),
        ("dup.json", br#"{"a": 1, "a": 2}"#),
    ]);
    for (file, code) in [
        ("bad.json", "json.unexpected-end"),
        ("latin1.json", "json.invalid-utf8"),
        ("dup.json", "json.duplicate-key"),
    ] {
        let output = run(dir.path(), &["lint", file]);
        assert_eq!(output.status.code(), Some(2), "{file}");
        assert!(
            stderr(&output).starts_with(&format!("error: cannot parse {file}: ")),
            "{file}"
        );
        let output = run(dir.path(), &["--format", "json", "lint", file]);
        assert_eq!(output.status.code(), Some(2));
        let err: Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(err["error"]["code"], code, "{file}");
    }
    let output = run(dir.path(), &["lint", "missing.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("error: cannot read missing.json: "));
}

#[test]
fn a_100000_deep_document_is_an_error_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let dir = dir_with(&[("deep.json", deep.as_bytes())]);
    let output = run(dir.path(), &["--format", "json", "lint", "deep.json"]);
    assert_eq!(output.status.code(), Some(2));
    let err: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(err["error"]["code"], "json.too-deep");
}

#[test]
fn openclaw_protocol_schema() {
    let path = openclaw_schema_path();
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &["--format", "json", "lint", path.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        report["summary"],
        json!({"errors": 0, "warnings": 2, "infos": 1})
    );
}

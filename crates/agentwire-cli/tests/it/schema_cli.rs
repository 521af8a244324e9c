//! `agentwire schema export` end to end: the canonical text it writes, `--out`, reports for
//! people and programs, errors with their code and pointer, and the real schemas there and back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use crate::support::{agentwire, dir_with, stdout};
use agentwire_testkit::{chainlesschain_schema_path, openclaw_schema_path};
use serde_json::{Value, json};

const TUPLE07: &str = r##"{"$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "https://example.com/pair.json",
  "type": "object",
  "properties": {"pair": {"$ref": "#/definitions/Pair"}, "first": {"$ref": "#/definitions/Pair/items/0"}},
  "additionalProperties": false,
  "definitions": {"Pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false}}}"##;

fn run(dir: &Path, args: &[&str]) -> Output {
    agentwire().args(args).current_dir(dir).output()
}

#[test]
fn export_to_2020_12_prints_canonical_text() {
    let dir = dir_with(&[("pair.json", TUPLE07.as_bytes())]);
    let output = run(
        dir.path(),
        &["schema", "export", "--draft", "2020-12", "pair.json"],
    );
    assert_eq!(output.status.code(), Some(0));
    insta::assert_snapshot!(stdout(&output));
}

#[test]
fn out_file_round_trip_and_reports() {
    let dir = dir_with(&[("pair.json", TUPLE07.as_bytes())]);
    let output = run(
        dir.path(),
        &[
            "schema",
            "export",
            "--draft",
            "2020-12",
            "--out",
            "pair2020.json",
            "pair.json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let exported = std::fs::read_to_string(dir.path().join("pair2020.json")).unwrap();
    let digest = agentwire_schema::digest(&serde_json::from_str::<Value>(&exported).unwrap());
    assert_eq!(
        stdout(&output),
        format!("pair.json -> pair2020.json (draft 2020-12, {digest})\n")
    );

    let output = run(
        dir.path(),
        &[
            "--format",
            "json",
            "schema",
            "export",
            "--draft",
            "07",
            "--out",
            "back.json",
            "pair2020.json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let back = std::fs::read_to_string(dir.path().join("back.json")).unwrap();
    let back_value: Value = serde_json::from_str(&back).unwrap();
    assert_eq!(
        report,
        json!({"file": "pair2020.json", "out": "back.json", "draft": "07",
               "digest": agentwire_schema::digest(&back_value).as_str()})
    );
    assert_eq!(back_value, serde_json::from_str::<Value>(TUPLE07).unwrap());
    assert_eq!(back, agentwire_schema::canonical_text(&back_value, true));
}

#[test]
fn draft_defaults_to_the_documents_own() {
    let dir = dir_with(&[("doc.json", br#"{"title": "no $schema"}"#)]);
    let output = run(dir.path(), &["schema", "export", "doc.json"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n  \"title\": \"no $schema\"\n}\n"
    );
}

#[test]
fn what_the_target_cannot_express_exits_2_with_code_and_pointer() {
    let doc = br#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {"a": {"unevaluatedProperties": false}}}"#;
    let dir = dir_with(&[("u.json", doc)]);
    let output = run(dir.path(), &["schema", "export", "--draft", "07", "u.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: cannot export u.json to 07: export.inexpressible at /properties/a/unevaluatedProperties: \
         unevaluatedProperties has no draft-07 equivalent\n"
    );
    let output = run(
        dir.path(),
        &[
            "--format", "json", "schema", "export", "--draft", "07", "u.json",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&output)).unwrap(),
        json!({"error": {"code": "export.inexpressible", "pointer": "/properties/a/unevaluatedProperties",
                         "message": "unevaluatedProperties has no draft-07 equivalent"}})
    );
    assert!(!dir.path().join("out.json").exists());
}

#[test]
fn bad_input_exits_2() {
    let dir = dir_with(&[
        ("bad.json", b"[1,"),
        (
            "cycle.json",
            br##"{"$defs": {"A": {"$ref": "#/$defs/A"}}}"##,
        ),
        (
            "draft4.json",
            br#"{"$schema": "http://json-schema.org/draft-04/schema#"}"#,
        ),
    ]);
    for (file, code) in [
        ("bad.json", "schema.json"),
        ("cycle.json", "schema.ref-cycle"),
        ("draft4.json", "schema.unknown-draft"),
    ] {
        let output = run(
            dir.path(),
            &[
                "--format", "json", "schema", "export", "--draft", "07", file,
            ],
        );
        assert_eq!(output.status.code(), Some(2), "{file}");
        let err: Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(err["error"]["code"], code, "{file}");
    }
    let output = run(
        dir.path(),
        &["schema", "export", "--draft", "04", "bad.json"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("unknown draft \"04\"; expected 07 or 2020-12")
    );
}

#[test]
fn openclaw_there_and_back_gives_the_published_file() {
    let path = openclaw_schema_path();
    let original = std::fs::read_to_string(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &[
            "schema",
            "export",
            "--draft",
            "2020-12",
            "--out",
            "oc2020.json",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let output = run(
        dir.path(),
        &["schema", "export", "--draft", "07", "oc2020.json"],
    );
    assert_eq!(output.status.code(), Some(0));
    // The published file has no final line feed; export always writes one.
    assert!(stdout(&output) == format!("{original}\n"));
}

#[test]
fn chainlesschain_there_and_back_keeps_the_published_digest() {
    let path = chainlesschain_schema_path();
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &[
            "schema",
            "export",
            "--draft",
            "07",
            "--out",
            "cc07.json",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let output = run(
        dir.path(),
        &[
            "--format",
            "json",
            "schema",
            "export",
            "--draft",
            "2020-12",
            "--out",
            "cc.json",
            "cc07.json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        report["digest"],
        agentwire_testkit::CHAINLESSCHAIN_SCHEMA_DIGEST
    );
}

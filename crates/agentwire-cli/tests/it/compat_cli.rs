//! `agentwire compat` end to end: reports for people and programs and the exit codes
//! (0 compatible, 1 breaking, 2 errors), on small schemas and on ChainlessChain's baseline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use crate::support::agentwire;
use agentwire_testkit::{chainlesschain_schema_path, peer_fixture};
use serde_json::{Value, json};

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path.display().to_string()
}

fn run(args: &[&str]) -> Output {
    agentwire().args(args).output()
}

fn status_schema(values: &[&str]) -> Value {
    json!({
        "x-agentwire": {"name": "demo", "version": "1"},
        "$defs": {"Event": {
            "x-agentwire-direction": "runtime-to-host",
            "type": "object", "additionalProperties": false, "required": ["status"],
            "properties": {"status": {"enum": values}}
        }}
    })
}

#[test]
fn breaking_change_exits_1_with_a_human_report() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(dir.path(), "old.json", &status_schema(&["running"]));
    let new = write(
        dir.path(),
        "new.json",
        &status_schema(&["running", "waiting"]),
    );
    let out = run(&["compat", &old, &new]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap(), @r#"
    breaking enum-value-added             /$defs/Event/properties/status/enum [runtime-to-host] new "waiting"
    1 change: 1 breaking, 0 additive
    "#);
}

#[test]
fn json_report_and_direction_default() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(dir.path(), "old.json", &json!({"enum": ["a"]}));
    let new = write(dir.path(), "new.json", &json!({"enum": ["a", "b"]}));
    let out = run(&["--format", "json", "compat", &old, &new]);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report,
        json!({"compatible": true, "breaking": 0, "additive": 1, "changes": [
            {"rule": "enum-value-added", "class": "additive", "direction": "unspecified", "pointer": "/enum", "new": "b"}
        ]})
    );
    let out = run(&[
        "--format",
        "json",
        "compat",
        "--direction-default",
        "runtime-to-host",
        &old,
        &new,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["changes"][0]["class"], json!("breaking"));
}

#[test]
fn errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", &json!({"type": "string"}));
    let missing = dir.path().join("missing.json").display().to_string();
    assert_eq!(run(&["compat", &good, &missing]).status.code(), Some(2));
    std::fs::write(dir.path().join("bad.json"), b"{not json").unwrap();
    let bad = dir.path().join("bad.json").display().to_string();
    let out = run(&["--format", "json", "compat", &good, &bad]);
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], json!("schema.json"));
    assert_eq!(
        run(&["compat", "--direction-default", "sideways", &good, &good])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn chainlesschain_baseline_is_compatible_with_sdk_029() {
    let baseline = peer_fixture("chainlesschain/fixtures/schema/baselines/v1.json");
    let sdk = chainlesschain_schema_path();
    let out = run(&[
        "--format",
        "json",
        "compat",
        baseline.to_str().unwrap(),
        sdk.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            report["compatible"].clone(),
            report["breaking"].clone(),
            report["additive"].clone()
        ),
        (json!(true), json!(0), json!(128))
    );
    // The other way round, the 90 definitions the SDK added are removed: breaking.
    let out = run(&["compat", sdk.to_str().unwrap(), baseline.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn definitions_selects_what_is_compared() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(
        dir.path(),
        "old.json",
        &json!({"oneOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": {"type": "string"}, "B": {"type": "string"}}}),
    );
    let new = write(
        dir.path(),
        "new.json",
        &json!({"oneOf": [{"$ref": "#/$defs/C"}], "$defs": {"A": {"type": "string"}, "C": {"type": "string"}}}),
    );
    assert_eq!(run(&["compat", &old, &new]).status.code(), Some(1));
    let out = run(&["compat", "--definitions", "A", &old, &new]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap(), @"0 changes: 0 breaking, 0 additive");
    let out = run(&["compat", "--definitions", "A,B", &old, &new]);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["compat", "--definitions", "Nowhere", &old, &new]);
    assert_eq!(out.status.code(), Some(2));
}

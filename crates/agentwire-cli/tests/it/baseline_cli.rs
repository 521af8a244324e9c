//! `agentwire baseline freeze`: writes canonical text, and replaces an existing baseline only
//! after a wire-version bump that breaks nothing still supported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::BIN;
use agentwire_testkit::{chainlesschain_schema_path, peer_fixture};
use serde_json::{Value, json};

fn freeze(schema: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["--format", "json", "baseline", "freeze"])
        .arg(schema)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn decision(out: &Output) -> (Option<i32>, String) {
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stdout)));
    (
        out.status.code(),
        v["decision"].as_str().unwrap_or_default().to_owned(),
    )
}

fn schema(version: &str, minimum: &str, props: Value, required: &[&str]) -> Value {
    json!({
        "x-agentwire": {"name": "demo", "version": version, "minimumCompatibleVersion": minimum},
        "x-agentwire-direction": "host-to-runtime",
        "type": "object", "additionalProperties": false, "required": required, "properties": props
    })
}

fn put(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
    path
}

#[test]
fn freezing_follows_the_wire_version() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    let s = json!({"type": "string"});
    let v1 = put(
        dir.path(),
        "v1.json",
        &schema("1", "1", json!({"a": s}), &[]),
    );
    assert_eq!(
        decision(&freeze(&v1, &baseline, &[])),
        (Some(0), "baseline.created".to_owned())
    );
    let written = std::fs::read_to_string(&baseline).unwrap();
    let expected = agentwire_schema::canonical_text(
        &serde_json::from_slice(&std::fs::read(&v1).unwrap()).unwrap(),
        true,
    );
    assert_eq!(
        written, expected,
        "the baseline is canonical text with a final newline"
    );
    assert_eq!(
        decision(&freeze(&v1, &baseline, &[])),
        (Some(0), "baseline.unchanged".to_owned())
    );

    // Same version, additive change: refused, unless additive re-freezing is allowed.
    let v1_more = put(
        dir.path(),
        "v1-more.json",
        &schema("1", "1", json!({"a": s, "b": s}), &[]),
    );
    assert_eq!(
        decision(&freeze(&v1_more, &baseline, &[])),
        (Some(1), "baseline.same-version".to_owned())
    );
    assert_eq!(
        std::fs::read_to_string(&baseline).unwrap(),
        written,
        "a refused freeze leaves the file alone"
    );
    // For people, a refusal says why on standard error: the changes, then the reason.
    let refused = crate::support::agentwire()
        .args(["baseline", "freeze"])
        .arg(&v1_more)
        .arg("--out")
        .arg(&baseline)
        .output();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        refused.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(stderr.contains("/properties/b"), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .contains(": refused: the wire version was not bumped"),
        "{stderr}"
    );
    assert_eq!(
        decision(&freeze(&v1_more, &baseline, &["--additive"])),
        (Some(0), "baseline.additive".to_owned())
    );

    // Same version, breaking change: refused even with --additive.
    let v1_break = put(
        dir.path(),
        "v1-break.json",
        &schema("1", "1", json!({"a": s, "b": s}), &["a"]),
    );
    assert_eq!(
        decision(&freeze(&v1_break, &baseline, &["--additive"])),
        (Some(1), "baseline.breaking".to_owned())
    );

    // Bumped, but still claiming compatibility with 1: the breaking change is refused.
    let v2_compat = put(
        dir.path(),
        "v2-compat.json",
        &schema("2", "1", json!({"a": s, "b": s}), &["a"]),
    );
    assert_eq!(
        decision(&freeze(&v2_compat, &baseline, &[])),
        (Some(1), "baseline.breaking".to_owned())
    );
    // Bumped and dropping 1: allowed.
    let v2 = put(
        dir.path(),
        "v2.json",
        &schema("2", "2", json!({"a": s, "b": s}), &["a"]),
    );
    assert_eq!(
        decision(&freeze(&v2, &baseline, &[])),
        (Some(0), "baseline.bumped".to_owned())
    );
    // Back to 1: refused.
    assert_eq!(
        decision(&freeze(&v1, &baseline, &[])),
        (Some(1), "baseline.downgrade".to_owned())
    );
}

#[test]
fn a_schema_without_a_version_cannot_replace_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    let plain = put(dir.path(), "plain.json", &json!({"type": "string"}));
    let other = put(dir.path(), "other.json", &json!({"type": "integer"}));
    assert_eq!(
        decision(&freeze(&plain, &baseline, &[])),
        (Some(0), "baseline.created".to_owned())
    );
    assert_eq!(
        decision(&freeze(&other, &baseline, &[])),
        (Some(1), "baseline.no-version".to_owned())
    );
}

#[test]
fn chainlesschain_sdk_refreezes_over_its_v1_baseline_only_as_additive() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("v1.json");
    std::fs::copy(
        peer_fixture("chainlesschain/fixtures/schema/baselines/v1.json"),
        &baseline,
    )
    .unwrap();
    let sdk = chainlesschain_schema_path();
    assert_eq!(
        decision(&freeze(&sdk, &baseline, &[])),
        (Some(1), "baseline.same-version".to_owned())
    );
    assert_eq!(
        decision(&freeze(&sdk, &baseline, &["--additive"])),
        (Some(0), "baseline.additive".to_owned())
    );
    let digest = agentwire_schema::SchemaDocument::open(&baseline)
        .unwrap()
        .digest();
    assert_eq!(
        digest.as_str(),
        "sha256:ff1860d17b798060c95cce217ff27bef2f99e209dcb369cf2d70514a4d6f08d7"
    );
}

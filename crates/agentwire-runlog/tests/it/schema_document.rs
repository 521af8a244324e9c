//! The schema document is the single source of the shapes: it loads, lints clean, is in canonical
//! text with a stable digest, and the crate's hand-written checks agree with the schema
//! validator (and with Ajv) on every fixture, every mock run and every coerced wrapper.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use std::path::PathBuf;

use agentwire_runlog::{
    CoerceOptions, SCHEMA_TEXT, get_scenario, is_valid_event, scenarios, to_run_events,
    validate_event,
};
use agentwire_schema::{SchemaDocument, Severity};
use serde_json::{Value, json};

/// The digest of the schema document. Changing the schema changes it: update it here, in
/// docs/runlog.md, and think about compatibility (same major version: optional fields only).
const SCHEMA_DIGEST: &str =
    "sha256:158047cb8d56ef722e4213dff9b8e8336f2640692548db5b95f931096bf74386";

fn repo() -> PathBuf {
    agentwire_testkit::repo_root()
}

fn document() -> SchemaDocument {
    SchemaDocument::from_slice(SCHEMA_TEXT.as_bytes()).expect("schema loads")
}

fn fixtures() -> Vec<(String, Value)> {
    agentwire_testkit::files_with_extension(repo().join("protocols/tasklens/fixtures"), "json")
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            (name, agentwire_testkit::read_json(&p))
        })
        .collect()
}

/// Every instance the agreement tests check, with a name.
fn instances() -> Vec<(String, Value)> {
    let mut out = fixtures();
    for scenario in scenarios() {
        let events = get_scenario(scenario.name).expect("scenario");
        for e in events {
            out.push((format!("{}#{}", scenario.name, e.seq), e.to_value()));
        }
    }
    let messy =
        json!([{"type": "tool:call"}, 7, {"type": "approval:decision", "decision": "maybe"}]);
    let coerced = to_run_events(messy, &CoerceOptions::default());
    for (i, e) in coerced.renderable.iter().enumerate() {
        out.push((format!("wrapper#{i}"), e.to_value()));
    }
    out
}

#[test]
fn the_file_is_the_embedded_document_in_canonical_text() {
    let on_disk = std::fs::read_to_string(repo().join("protocols/tasklens/run-events.schema.json"))
        .expect("schema file");
    assert_eq!(on_disk, SCHEMA_TEXT);
    assert_eq!(
        document().canonical_text(true),
        SCHEMA_TEXT,
        "run `agentwire fmt` on the schema"
    );
}

#[test]
fn the_digest_is_stable() {
    assert_eq!(document().digest().as_str(), SCHEMA_DIGEST);
}

#[test]
fn the_schema_lints_without_errors() {
    let findings = agentwire_schema::lint(&document());
    let errors: Vec<_> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn the_identity_block_names_the_protocol() {
    let doc = document();
    let identity = &doc.value()["x-agentwire"];
    assert_eq!(identity["name"], "tasklens-run-events");
    assert_eq!(identity["version"], "1");
}

#[test]
fn fixture_names_say_their_verdict() {
    let all = fixtures();
    assert!(all.len() >= 40, "{} fixtures", all.len());
    for (name, value) in all {
        let want = name.starts_with("valid-");
        assert!(want || name.starts_with("invalid-"), "{name}");
        assert_eq!(
            is_valid_event(&value),
            want,
            "{name}: {:?}",
            validate_event(&value)
        );
    }
}

#[test]
fn hand_written_checks_agree_with_the_schema_validator() {
    let validator = document().validator().expect("validator");
    for (name, value) in instances() {
        let ours = is_valid_event(&value);
        assert_eq!(
            ours,
            validate_event(&value).is_empty(),
            "{name}: verdict and issues agree"
        );
        let schema = validator.is_valid(&value);
        assert_eq!(
            ours,
            schema,
            "{name}: ours {:?} / schema {:?}",
            validate_event(&value),
            validator.validate(&value)
        );
    }
}

#[test]
fn hand_written_checks_agree_with_ajv() {
    let all = instances();
    let values: Vec<Value> = all.iter().map(|(_, v)| v.clone()).collect();
    let path = repo().join("protocols/tasklens/run-events.schema.json");
    let verdicts = agentwire_testkit::ajv_verdicts(&path, None, &values);
    for ((name, value), verdict) in all.iter().zip(&verdicts) {
        assert_eq!(
            is_valid_event(value),
            verdict.valid,
            "{name}: ajv {:?}",
            verdict.errors
        );
    }
}

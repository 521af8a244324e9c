//! The generated wire types are fresh, and every valid message of every version, upstream and
//! our own, decodes into them (and through the typed parse) and encodes back to the same JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentwire_codegen::{Language, Options};
use agentwire_roll::ProtocolVersion;
use agentwire_roll::generated::RollRuntimeMessage;
use agentwire_roll::parse::{Message, parse_message};
use agentwire_testkit::{RollFixture, repo_root, roll_own_fixtures, roll_upstream_fixtures};
use serde_json::Value;

const REGENERATE: &str = "agentwire gen --lang rust --out crates/agentwire-roll/src/generated --name roll_runtime --all-versions --rust-types crates/agentwire-roll/src/generated/rust-types.json protocols/roll-runtime/roll-runtime.schema.json";

#[test]
fn generated_types_are_fresh() {
    let schema = repo_root().join("protocols/roll-runtime/roll-runtime.schema.json");
    let document = agentwire_schema::SchemaDocument::open(&schema).unwrap();
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let rust_types: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(out.join("rust-types.json")).unwrap())
            .unwrap();
    let mut options = Options::for_schema("roll-runtime.schema.json");
    options.base_name = "roll_runtime".to_owned();
    options.all_versions = true;
    options.rust_types = rust_types;
    let files = agentwire_codegen::generate_from_document(
        &document,
        "roll-runtime.schema.json",
        &[Language::Rust],
        &options,
    )
    .unwrap();
    let stale = agentwire_codegen::check(&out, &files);
    assert!(
        stale.is_empty(),
        "stale generated types {stale:?}; run: {REGENERATE}"
    );
}

/// Every fixture whose name says valid and that is valid under its version, with that version.
fn valid_fixtures() -> Vec<(RollFixture, ProtocolVersion)> {
    roll_upstream_fixtures()
        .into_iter()
        .chain(roll_own_fixtures())
        .filter_map(|fixture| {
            let version = ProtocolVersion::parse(fixture.version()).expect("a Roll version");
            (fixture.valid && agentwire_roll::schema::is_valid(version, &fixture.message))
                .then_some((fixture, version))
        })
        .collect()
}

#[test]
fn every_valid_message_of_every_version_round_trips_through_the_generated_types() {
    let mut per_version: BTreeMap<ProtocolVersion, usize> = BTreeMap::new();
    for (fixture, version) in valid_fixtures() {
        let name = fixture.name();
        let typed: RollRuntimeMessage = serde_json::from_value(fixture.message.clone())
            .unwrap_or_else(|e| panic!("{name} under {version}: {e}"));
        assert_eq!(
            serde_json::to_value(&typed).unwrap(),
            fixture.message,
            "{name}"
        );
        *per_version.entry(version).or_default() += 1;
    }
    // Every version has messages, so every version's shapes are exercised.
    let counts: Vec<(&str, usize)> = per_version.iter().map(|(v, n)| (v.as_str(), *n)).collect();
    assert_eq!(
        counts,
        [
            ("1.0", 8),
            ("1.1", 9),
            ("1.2", 16),
            ("1.3", 12),
            ("1.4", 16),
            ("1.5", 6)
        ]
    );
}

#[test]
fn every_valid_message_of_every_version_round_trips_through_the_typed_parse() {
    let mut checked = 0;
    for (fixture, version) in valid_fixtures() {
        let name = fixture.name();
        let message = &fixture.message;
        let typed = parse_message(version, message)
            .unwrap_or_else(|e| panic!("{name} under {version}: {e}"));
        let encoded = match typed {
            Message::Request { params, .. } => serde_json::to_value(&*params),
            Message::ServerRequest { params, .. } => serde_json::to_value(&*params),
            Message::Event(envelope) => serde_json::to_value(&*envelope),
            Message::Cancel(cancel) => serde_json::to_value(&cancel),
            Message::Response { .. } | Message::Error { .. } => continue,
        }
        .unwrap();
        let expected = message.get("params").cloned().unwrap_or(Value::Null);
        assert_eq!(encoded, expected, "{name} under {version}");
        checked += 1;
    }
    // The rest are responses, whose results are typed only once the method is known (they
    // round-trip through the generated `SuccessResponse` above).
    assert_eq!(checked, 36);
}

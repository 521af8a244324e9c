//! The generated 1.5 types are fresh, and every valid 1.5 message decodes into them and encodes
//! back to the same JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use agentwire_codegen::{Language, Options};
use agentwire_roll::generated::ProtocolMessage;
use agentwire_testkit::{repo_root, roll_own_fixtures, roll_upstream_fixtures};

#[test]
fn generated_types_are_fresh() {
    let export = repo_root().join("protocols/roll-runtime/exports/roll-runtime-1.5.schema.json");
    let document = agentwire_schema::SchemaDocument::open(&export).unwrap();
    let mut options = Options::for_schema("roll-runtime-1.5.schema.json");
    options.base_name = "roll_runtime_1_5".to_owned();
    let files = agentwire_codegen::generate_from_document(
        &document,
        "roll-runtime-1.5.schema.json",
        &[Language::Rust],
        &options,
    )
    .unwrap();
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let stale = agentwire_codegen::check(&out, &files);
    assert!(
        stale.is_empty(),
        "stale generated types {stale:?}; run: agentwire gen --lang rust --out crates/agentwire-roll/src/generated --name roll_runtime_1_5 protocols/roll-runtime/exports/roll-runtime-1.5.schema.json"
    );
}

#[test]
fn valid_1_5_messages_round_trip_through_the_generated_types() {
    // Every valid fixture of any folder that is also a valid 1.5 message.
    let fixtures = roll_upstream_fixtures()
        .into_iter()
        .chain(roll_own_fixtures());
    let mut checked = 0;
    for fixture in fixtures {
        let (name, message) = (fixture.name(), fixture.message);
        if !fixture.valid
            || !agentwire_roll::schema::is_valid(agentwire_roll::ProtocolVersion::V1_5, &message)
        {
            continue;
        }
        let typed: ProtocolMessage =
            serde_json::from_value(message.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serde_json::to_value(&typed).unwrap(), message, "{name}");
        checked += 1;
    }
    eprintln!("{checked} messages");
    assert!(checked >= 40, "{checked}");
}

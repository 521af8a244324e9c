//! The per-version exports in `protocols/roll-runtime/exports/` are the canonical document's views.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

fn protocol_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../protocols/roll-runtime")
}

#[test]
fn exports_are_fresh() {
    let dir = protocol_dir();
    let text = std::fs::read_to_string(dir.join("roll-runtime.schema.json")).unwrap();
    let document: serde_json::Value = serde_json::from_str(&text).unwrap();
    let loaded = agentwire_schema::SchemaDocument::from_value(document.clone()).unwrap();
    assert_eq!(
        agentwire_schema::canonical_text(&document, true),
        text,
        "roll-runtime.schema.json is not in canonical text; run `agentwire fmt` on it"
    );
    let bless = std::env::var_os("AGENTWIRE_BLESS").is_some();
    let mut stale = Vec::new();
    for version in ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"] {
        let export = agentwire_schema::export_version(&loaded, version).unwrap();
        let expected = agentwire_schema::canonical_text(&export, true);
        let path = dir.join(format!("exports/roll-runtime-{version}.schema.json"));
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        if actual != expected {
            if bless {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, expected).unwrap();
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale exports {stale:?}; run `AGENTWIRE_BLESS=1 cargo test -p agentwire-roll --test it exports`"
    );
}

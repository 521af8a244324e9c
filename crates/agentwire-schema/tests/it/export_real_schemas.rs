//! Export of the real protocol schemas: each export validates against its draft's metaschema,
//! and converting there and back gives the original document, byte for byte in canonical text.

use agentwire_schema::{Draft, SchemaDocument, export};
use agentwire_testkit::{
    CHAINLESSCHAIN_SCHEMA_DIGEST, chainlesschain_schema_path, openclaw_schema_path,
};
use serde_json::Value;

fn assert_metaschema(value: &Value, draft: Draft) {
    let result = match draft {
        Draft::Draft07 => jsonschema::draft7::meta::validate(value),
        Draft::Draft202012 => jsonschema::draft202012::meta::validate(value),
    };
    if let Err(err) = result {
        panic!(
            "the {draft} metaschema rejects the export at {}: {err}",
            err.instance_path().as_str()
        );
    }
}

/// Every `$ref` string of a document, in document order.
fn refs(value: &Value) -> Vec<String> {
    let doc = SchemaDocument::from_value(value.clone()).unwrap();
    doc.refs().iter().map(|r| r.reference.clone()).collect()
}

#[test]
fn openclaw_07_to_2020_12_and_back() {
    let path = openclaw_schema_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let original = SchemaDocument::open(&path).unwrap();
    assert_eq!(original.draft(), Draft::Draft07);

    let exported = export(&original, Draft::Draft202012).unwrap();
    assert_metaschema(&exported, Draft::Draft202012);
    assert!(exported.get("definitions").is_none());
    assert_eq!(exported["$defs"].as_object().unwrap().len(), 877);
    assert_eq!(exported["$id"], original.value()["$id"]);
    assert_eq!(exported["methods"], original.value()["methods"]);
    assert_eq!(
        refs(&exported),
        [
            "#/$defs/RequestFrame",
            "#/$defs/ResponseFrame",
            "#/$defs/EventFrame"
        ]
    );
    assert_eq!(
        exported["discriminator"]["mapping"]["req"],
        "#/$defs/RequestFrame"
    );
    // The 43 tuple arrays become prefixItems.
    let text2020 = agentwire_schema::canonical_text(&exported, false);
    assert_eq!(text2020.matches("\"prefixItems\"").count(), 43);
    assert_eq!(text2020.matches("\"additionalItems\"").count(), 0);

    let reloaded = SchemaDocument::from_value(exported).unwrap();
    let back = export(&reloaded, Draft::Draft07).unwrap();
    assert_metaschema(&back, Draft::Draft07);
    assert!(
        back == *original.value(),
        "07 → 2020-12 → 07 changed the OpenClaw schema"
    );
    assert!(agentwire_schema::canonical_text(&back, false) == text);
}

#[test]
fn chainlesschain_2020_12_to_07_and_back() {
    let path = chainlesschain_schema_path();
    let original = SchemaDocument::open(&path).unwrap();
    assert_eq!(original.draft(), Draft::Draft202012);

    let exported = export(&original, Draft::Draft07).unwrap();
    assert_metaschema(&exported, Draft::Draft07);
    assert!(exported.get("$defs").is_none());
    assert_eq!(exported["definitions"].as_object().unwrap().len(), 127);
    assert_eq!(exported["x-cc-protocol"], original.value()["x-cc-protocol"]);
    let exported_refs = refs(&exported);
    let original_refs: Vec<String> = original
        .refs()
        .iter()
        .map(|r| r.reference.clone())
        .collect();
    assert_eq!(exported_refs.len(), original_refs.len());
    for (new, old) in exported_refs.iter().zip(&original_refs) {
        assert_eq!(new, &old.replacen("#/$defs/", "#/definitions/", 1));
    }

    let reloaded = SchemaDocument::from_value(exported).unwrap();
    let back = export(&reloaded, Draft::Draft202012).unwrap();
    assert_metaschema(&back, Draft::Draft202012);
    assert!(
        back == *original.value(),
        "2020-12 → 07 → 2020-12 changed the ChainlessChain schema"
    );
    // The round trip keeps the protocol digest the SDK publishes.
    assert_eq!(
        agentwire_schema::digest(&back).as_str(),
        CHAINLESSCHAIN_SCHEMA_DIGEST
    );
}

#[test]
fn same_draft_exports_are_the_document() {
    for path in [openclaw_schema_path(), chainlesschain_schema_path()] {
        let doc = SchemaDocument::open(&path).unwrap();
        let out = export(&doc, doc.draft()).unwrap();
        assert!(out == *doc.value(), "{} changed", path.display());
    }
}

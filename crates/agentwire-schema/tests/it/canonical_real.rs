//! Canonical text and digest on the peers' published artifacts: the ChainlessChain schema's digest
//! equals the one its SDK publishes, and OpenClaw's `protocol.schema.json` re-emits byte for byte.

use agentwire_schema::{SchemaDocument, canonical_text, parse_json};

#[test]
fn chainlesschain_digest_equals_the_published_constant() {
    let path = agentwire_testkit::chainlesschain_schema_path();
    let doc = SchemaDocument::open(&path).unwrap();
    let published = agentwire_testkit::chainlesschain_published_digest();
    assert_eq!(
        published,
        "sha256:ff1860d17b798060c95cce217ff27bef2f99e209dcb369cf2d70514a4d6f08d7"
    );
    assert_eq!(doc.digest().as_str(), published);
    // The digest is over canonical text plus one line feed: 131,498 bytes for this schema.
    assert_eq!(doc.canonical_text(true).len(), 131_498);
}

#[test]
fn openclaw_schema_reemits_byte_for_byte() {
    let path = agentwire_testkit::openclaw_schema_path();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 3_583_003);
    let value = parse_json(&bytes).unwrap();
    let text = canonical_text(&value, false);
    assert!(
        text.as_bytes() == bytes.as_slice(),
        "canonical text differs from the published file"
    );
    assert_eq!(
        agentwire_schema::Digest::of_bytes(text.as_bytes()).hex(),
        "971f2c0d2f0e267a062213b21a398518849c019d2cff1c1d54ff6ee1af7cddf1"
    );
}

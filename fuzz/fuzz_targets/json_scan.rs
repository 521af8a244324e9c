//! The JSON byte scanners on arbitrary bytes, held against two parsers: a value the scanner's
//! grammar refuses is refused by the strict parser and by serde_json, a document the strict
//! parser accepts is one value by the grammar, and text the scanner calls canonical is exactly
//! serde_json's compact writing of the value it parses to.

#![no_main]

use agentwire_jsonscan::{canonical_end, skip_ws, value_end};
use agentwire_schema::{JsonErrorKind, MAX_JSON_DEPTH, parse_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The scanners read UTF-8 already checked, as every caller hands them.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let b = text.as_bytes();
    let start = skip_ws(b, 0);
    let one_value = value_end(b, start, MAX_JSON_DEPTH).is_some_and(|end| skip_ws(b, end) == b.len());
    match parse_json(b) {
        Ok(_) => assert!(one_value, "the strict parser accepts what the grammar refuses"),
        // Grammatical text the strict parser refuses by its own rules.
        Err(e) if matches!(e.kind, JsonErrorKind::DuplicateKey | JsonErrorKind::NumberOutOfRange) => {}
        Err(e) => assert!(!one_value, "the grammar accepts what the strict parser refuses: {e}"),
    }
    match serde_json::from_slice::<serde_json::Value>(b) {
        Ok(_) => assert!(one_value, "serde_json accepts what the grammar refuses"),
        Err(e) if e.to_string().starts_with("number out of range") => {}
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {}
        Err(e) => assert!(!one_value, "the grammar accepts what serde_json refuses: {e}"),
    }
    if canonical_end(b, 0, 64) == Some(b.len()) {
        let value: serde_json::Value = serde_json::from_slice(b).unwrap_or_else(|e| panic!("canonical text does not parse: {e}"));
        let written = serde_json::to_string(&value).unwrap_or_default();
        assert_eq!(written.as_bytes(), b, "canonical text is not serde_json's writing");
    }
});

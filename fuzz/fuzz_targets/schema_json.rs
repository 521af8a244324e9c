//! The strict JSON parser on arbitrary bytes: it answers with a value or a typed error, never
//! a panic, and what it accepts reads back the same after printing.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match agentwire_schema::parse_json(data) {
        Ok(value) => {
            let text = serde_json::to_string(&value).unwrap_or_default();
            let again = agentwire_schema::parse_json(text.as_bytes());
            assert_eq!(again.as_ref().ok(), Some(&value), "{text}");
        }
        Err(err) => {
            assert!(!err.kind.code().is_empty());
            assert!(!err.message.is_empty());
        }
    }
});

//! The parse tape on arbitrary bytes: it accepts exactly what the strict parser accepts, and a
//! validation on the tape gives the verdict the same validation gives on the parsed value.

#![no_main]

use std::sync::OnceLock;

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::{FastSchema, Tape, Target, parse};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// A schema that looks at every kind of value: properties, patterns, items, unions, numbers.
fn schema() -> &'static (FastSchema, Target) {
    static SCHEMA: OnceLock<(FastSchema, Target)> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let doc = SchemaDocument::from_value(json!({
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"}, "n": {"multipleOf": 0.5}},
                    "patternProperties": {"^x-": {"type": ["number", "null"]}},
                    "additionalProperties": {"type": "array", "items": {"minimum": 0}, "uniqueItems": true}
                },
                {"type": "array", "items": {"$ref": "#"}, "maxItems": 8},
                {"type": "string", "maxLength": 16},
                {"enum": [true, 1, "one"]}
            ]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let fast = FastSchema::compile(&doc).unwrap_or_else(|e| panic!("{e}"));
        let root = fast.root();
        (fast, root)
    })
}

fuzz_target!(|data: &[u8]| {
    let (fast, root) = schema();
    let strict = agentwire_schema::parse_json(data);
    let mut tape = Tape::new();
    match (parse(data, &mut tape), strict) {
        (Ok(parsed), Ok(value)) => {
            assert_eq!(
                parsed.is_valid(fast, *root),
                fast.is_valid(*root, &value),
                "{value}"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("tape {:?} and strict parser {:?} disagree", a.is_ok(), b.is_ok()),
    }
});

//! Fuzz target: a line through the strict parser and the JSON-RPC decoder never panics, and
//! every request it accepts can be answered with a response that decodes back to its id.

#![no_main]

use agentwire_jsonrpc::{Decoded, Incoming, decode, encode_line};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|input: &[u8]| {
    let Some((&flags, line)) = input.split_first() else {
        return;
    };
    let Ok(value) = agentwire_schema::parse_json(line) else {
        return;
    };
    let structured = flags & 1 == 1;
    match decode(value, structured) {
        Decoded::Message(Incoming::Request { id, .. }) => {
            let response = json!({"jsonrpc": "2.0", "id": id, "result": null});
            let Ok(encoded) = encode_line(&response, usize::MAX, None) else {
                panic!("a response to a decoded request always encodes");
            };
            let reparsed = agentwire_schema::parse_json(&encoded[..encoded.len() - 1]);
            let Ok(reparsed) = reparsed else {
                panic!("our own response does not parse");
            };
            match decode(reparsed, structured) {
                Decoded::Message(Incoming::Response { id: back, outcome }) => {
                    assert_eq!(back, id);
                    assert_eq!(outcome, Ok(serde_json::Value::Null));
                }
                other => panic!("our own response decoded as {other:?}"),
            }
        }
        Decoded::Invalid(invalid) => assert!(!invalid.reason.is_empty()),
        _ => {}
    }
});

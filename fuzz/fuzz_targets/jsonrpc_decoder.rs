//! Fuzz target: a line through the JSON-RPC decoder never panics, accepts exactly the lines the
//! strict parser accepts, keeps params and results as text that reads back to the value the
//! strict parser gives, and every request it accepts can be answered with a response that
//! decodes back to its id.

#![no_main]

use agentwire_jsonrpc::{Decoded, Incoming, decode, encode_line};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|input: &[u8]| {
    let Some((&flags, line)) = input.split_first() else {
        return;
    };
    let structured = flags & 1 == 1;
    let strict = agentwire_schema::parse_json(line);
    let decoded = decode(line, structured);
    let decoded = match (strict, decoded) {
        (Ok(value), Ok(decoded)) => {
            if let Decoded::Message(Incoming::Request { params: Some(params), .. }) = &decoded {
                let text = params.to_value().expect("params text reads back");
                assert_eq!(Some(&text), value.get("params"));
            }
            decoded
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "the decoder reports the strict parser's error");
            return;
        }
        (strict, decoded) => panic!("strict parser {strict:?}, decoder {decoded:?}"),
    };
    match decoded {
        Decoded::Message(Incoming::Request { id, .. }) => {
            let response = json!({"jsonrpc": "2.0", "id": id, "result": null});
            let Ok(encoded) = encode_line(&response, usize::MAX, None) else {
                panic!("a response to a decoded request always encodes");
            };
            match decode(&encoded[..encoded.len() - 1], structured) {
                Ok(Decoded::Message(Incoming::Response { id: back, outcome })) => {
                    assert_eq!(back, id);
                    assert_eq!(outcome.map(|r| r.get().to_owned()), Ok("null".to_owned()));
                }
                other => panic!("our own response decoded as {other:?}"),
            }
        }
        Decoded::Invalid(invalid) => assert!(!invalid.reason.is_empty()),
        _ => {}
    }
});

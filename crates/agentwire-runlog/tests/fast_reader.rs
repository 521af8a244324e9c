//! The fast line reader of the streamed path reads exactly what the strict path reads: the
//! state of `coerce_and_derive_ndjson` equals the full coercer's on lines written every way
//! JSON allows (escapes, number spellings, whitespace, nesting, duplicate keys, extra fields),
//! on the calling thread (small inputs) and with the reading thread (inputs of 1 MiB or more).

use agentwire_runlog::{
    CoerceOptions, Json, PIPELINE_MIN_BYTES, RunState, coerce_and_derive_ndjson,
    derive_run_state_owned, to_run_events_from_slice,
};
use proptest::prelude::*;

fn full(bytes: &[u8]) -> RunState {
    derive_run_state_owned(to_run_events_from_slice(bytes, &CoerceOptions::default()).into_events())
}

/// Spellings of opaque values: canonical ones the reader keeps as text, others it must
/// canonicalize or decline.
const OPAQUE: &[&str] = &[
    r#"{"table":"users","limit":20}"#,
    r#"{ "table" : "users" }"#,
    r#"{"a":1.0,"b":1e5,"c":-0,"d":1E2,"e":0.1,"f":-12,"g":18446744073709551616}"#,
    r#"{"s":"line\nbreak \"q\" \u00e9 \/ \u0001 \u001F é 中"}"#,
    r#"{"a":{"b":{"c":[1,[2,[3,{"d":null}]]]}}}"#,
    r#"{"a":1,"a":2}"#,
    r#"{"a":{"x":1,"x":1}}"#,
    r#"[]"#,
    r#"{}"#,
    r#""plain text""#,
    r#"42"#,
    r#"4.50"#,
    r#"true"#,
    r#"null"#,
    r#"1e400"#,
    r#"[1,2,3,"x",{"k":[true,false]}]"#,
];

/// Spellings of strings the fold reads (`stepId`, `name`, `message`, ...).
const TEXT: &[&str] = &[
    r#""plain""#,
    r#""with \"quotes\" and \\ backslash""#,
    r#""caf\u00e9""#,
    r#""tab\there""#,
    r#""""#,
    r#""é 中 😀""#,
    r#""a\/b""#,
];

/// Spellings of numbers (`ms`, `cost`, `tokens`, `progress`).
const NUMBER: &[&str] = &[
    "0",
    "41",
    "0.5",
    "1.0",
    "1e2",
    "-3",
    "-0",
    "7.0",
    "0.0012",
    "1E-3",
    "2.5e+1",
    "100000000000000000000",
];

/// One line of a valid-looking run, spelled with the picks.
fn line(n: u64, kind: u8, o: usize, t: usize, x: usize, ws: bool) -> String {
    let opaque = OPAQUE[o % OPAQUE.len()];
    let text = TEXT[t % TEXT.len()];
    let num = NUMBER[x % NUMBER.len()];
    let step = if t.is_multiple_of(3) {
        r#""s1""#.to_owned()
    } else {
        text.to_owned()
    };
    let call = format!(r#""c{}""#, n / 3);
    let payload = match kind % 12 {
        0 => format!(r#""type":"step:start","stepId":{step},"title":{text}"#),
        1 => format!(
            r#""type":"tool:call","stepId":{step},"callId":{call},"name":{text},"args":{opaque}"#
        ),
        2 => format!(
            r#""type":"tool:result","callId":{call},"ok":true,"result":{opaque},"ms":{num},"tokens":{num},"cost":{num}"#
        ),
        3 => format!(
            r#""type":"tool:result","callId":{call},"ok":false,"error":{{"message":{text},"code":"E"}},"ms":{num}"#
        ),
        4 => format!(r#""type":"step:progress","stepId":{step},"progress":{num},"message":{text}"#),
        5 => format!(r#""type":"step:done","stepId":{step},"output":{opaque}"#),
        6 => format!(r#""type":"step:error","stepId":{step},"error":{text},"retryable":true"#),
        7 => format!(
            r#""type":"approval:request","stepId":{step},"approvalId":"a{n}","summary":{text},"risk":"high","preview":{opaque}"#
        ),
        8 => format!(
            r#""type":"approval:decision","approvalId":"a{}","decision":"edit","by":{text},"edited":{opaque}"#,
            n - 1
        ),
        9 => format!(
            r#""type":"plan","steps":[{{"id":"s1","title":{text}}},{{"id":"s2","title":"two"}}]"#
        ),
        10 => format!(
            r#""type":"retry:request","stepId":{step},"fromEventId":"e1","attempt":{num},"extra":{opaque}"#
        ),
        _ => format!(r#""type":"run:done","output":{opaque},"summary":{text}"#),
    };
    let sep = if ws { ", " } else { "," };
    let line = format!(
        r#"{{"id":"e{n}"{sep}"runId":"r","seq":{n},"at":{},"schemaVersion":1,{payload}}}"#,
        1000 + n
    );
    if ws { format!("  {line}\t") } else { line }
}

fn log(lines: &[(u8, usize, usize, usize, bool)], repeat: usize) -> Vec<u8> {
    let mut out = String::from(
        r#"{"id":"e0","runId":"r","seq":0,"at":1000,"schemaVersion":1,"type":"run:start","goal":"g"}"#,
    );
    out.push('\n');
    let mut n = 0;
    for _ in 0..repeat {
        for &(kind, o, t, x, ws) in lines {
            n += 1;
            out.push_str(&line(n, kind, o, t, x, ws));
            out.push('\n');
        }
    }
    out.into_bytes()
}

#[test]
fn every_spelling_reads_the_same_on_both_paths() {
    for kind in 0..12u8 {
        for o in 0..OPAQUE.len() {
            for t in 0..TEXT.len() {
                let x = o + t;
                let bytes = log(&[(0, 0, 0, 0, false), (kind, o, t, x, o % 2 == 0)], 1);
                assert_eq!(
                    coerce_and_derive_ndjson(&bytes, &CoerceOptions::default()),
                    full(&bytes),
                    "{}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }
}

#[test]
fn opaque_values_are_kept_as_canonical_text() {
    let bytes = log(&[(1, 2, 0, 0, false), (2, 3, 0, 0, true)], 1);
    let state = coerce_and_derive_ndjson(&bytes, &CoerceOptions::default());
    let call = &state.tool_calls[0];
    assert_eq!(
        call.args.as_ref().map(Json::as_str),
        Some(
            r#"{"a":1.0,"b":100000.0,"c":-0.0,"d":100.0,"e":0.1,"f":-12,"g":1.8446744073709552e+19}"#
        )
    );
    assert_eq!(
        call.result.as_ref().map(Json::as_str),
        Some("{\"s\":\"line\\nbreak \\\"q\\\" é / \\u0001 \\u001f é 中\"}")
    );
}

#[test]
fn a_large_input_is_read_on_a_second_thread_and_reads_the_same() {
    let picks: Vec<_> = (0..48u8)
        .map(|i| {
            let i = usize::from(i);
            (
                i as u8 % 12,
                i % OPAQUE.len(),
                i % TEXT.len(),
                i % NUMBER.len(),
                i % 5 == 0,
            )
        })
        .collect();
    let bytes = log(&picks, 400);
    assert!(bytes.len() >= PIPELINE_MIN_BYTES, "{} bytes", bytes.len());
    assert_eq!(
        coerce_and_derive_ndjson(&bytes, &CoerceOptions::default()),
        full(&bytes)
    );
    // A line the reader declines (not UTF-8) and one that needs the full coercer, both late.
    let mut broken = bytes.clone();
    broken.extend_from_slice(b"{\"id\":\"x\xff\",\"runId\":\"r\",\"seq\":99999999,\"at\":1,\"schemaVersion\":1,\"type\":\"step:start\",\"stepId\":\"s1\"}\n");
    assert_eq!(
        coerce_and_derive_ndjson(&broken, &CoerceOptions::default()),
        full(&broken)
    );
    let mut back = bytes;
    back.extend_from_slice(br#"{"id":"late","runId":"r","seq":1,"at":1,"schemaVersion":1,"type":"step:start","stepId":"s1"}"#);
    assert_eq!(
        coerce_and_derive_ndjson(&back, &CoerceOptions::default()),
        full(&back)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_spellings_read_the_same(
        picks in prop::collection::vec(
            (0u8..12, 0usize..64, 0usize..64, 0usize..64, any::<bool>()), 1..30)
    ) {
        let bytes = log(&picks, 1);
        prop_assert_eq!(
            coerce_and_derive_ndjson(&bytes, &CoerceOptions::default()),
            full(&bytes)
        );
    }
}

//! The fast line reader of the streamed path reads exactly what the strict path reads: the
//! state of the streamed path (`StreamedState::derive`) equals the full coercer's on lines written every way
//! JSON allows (escapes, number spellings, whitespace, nesting, duplicate keys, extra fields),
//! on the calling thread (small inputs) and scanned in parallel (inputs of 1 MiB or more).

use agentwire_runlog::{CoerceOptions, Json, PIPELINE_MIN_BYTES, RunState, StreamedState};
use proptest::prelude::*;

use crate::support::coerce_and_derive;

fn full(bytes: &[u8]) -> RunState {
    crate::support::full_state(bytes, &CoerceOptions::default())
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
                    coerce_and_derive(&bytes, &CoerceOptions::default()),
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
    let state = coerce_and_derive(&bytes, &CoerceOptions::default());
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

/// Picks for a log every line of which is valid as written, so it streams: objects without
/// repeated keys for opaque values, non-empty names, numbers each field accepts (`41` or `1.0`;
/// progress `1.0`). About half its lines are read fast, the others declined and parsed strictly.
fn clean_picks() -> Vec<(u8, usize, usize, usize, bool)> {
    const OBJECTS: [usize; 5] = [0, 1, 2, 3, 4];
    const NAMES: [usize; 6] = [0, 1, 2, 3, 5, 6];
    (0..48usize)
        .map(|i| {
            let kind = (i % 12) as u8;
            let number = if kind == 4 || i % 2 == 1 { 3 } else { 1 };
            (kind, OBJECTS[i % 5], NAMES[i % 6], number, i % 5 == 0)
        })
        .collect()
}

fn tool_call(id: &str, seq: u64, step: &str) -> String {
    format!(
        r#"{{"id":"{id}","runId":"r","seq":{seq},"at":1,"schemaVersion":1,"type":"tool:call","stepId":"{step}","callId":"k{id}{seq}","name":"n"}}"#
    )
}

/// A tool call the reader declines (a `\u00e9` escape) and the strict path folds.
fn declined(id: &str, seq: u64) -> String {
    tool_call(id, seq, "caf\\u00e9")
}

/// A tool call the reader reads fast.
fn fast(id: &str, seq: u64) -> String {
    tool_call(id, seq, "s1")
}

/// `base` with lines added after its first line and at its end.
fn with_lines(base: &[u8], early: &[String], late: &[String]) -> Vec<u8> {
    let text = String::from_utf8_lossy(base);
    let first_nl = text.find('\n').map_or(0, |i| i + 1);
    let mut log = text[..first_nl].to_owned();
    for l in early {
        log.push_str(l);
        log.push('\n');
    }
    log.push_str(&text[first_nl..]);
    for l in late {
        log.push_str(l);
        log.push('\n');
    }
    log.into_bytes()
}

/// Repeated ids, between lines read fast and lines declined, each way; a line delivered twice;
/// a line that is not UTF-8; an incomplete envelope; a `seq` going back. None streams (each
/// needs the full coercer); all derive what the full coercer derives. A tool call keeps its
/// event id in the state, so a fold that missed a repetition would show.
fn needs_the_full_coercer(base: &[u8], last: u64) {
    let cases = [
        with_lines(base, &[], &[declined("e7", last + 1)]),
        with_lines(base, &[declined("d1", 0)], &[fast("d1", last + 1)]),
        with_lines(
            base,
            &[],
            &[declined("d1", last + 1), declined("d1", last + 2)],
        ),
        with_lines(base, &[], &[fast("f1", last + 1), fast("f1", last + 1)]),
        with_lines(base, &[], &[fast("e3", last + 1)]),
        // An incomplete envelope.
        with_lines(base, &[], &[r#"{"id":"x","seq":1}"#.to_owned()]),
        with_lines(base, &[], &[fast("late", 2)]),
    ];
    let mut not_utf8 = base.to_vec();
    not_utf8.extend_from_slice(b"{\"id\":\"x\xff\",\"runId\":\"r\",\"seq\":99999999,\"at\":1,\"schemaVersion\":1,\"type\":\"step:start\",\"stepId\":\"s1\"}\n");
    for log in cases.iter().chain([&not_utf8]) {
        let options = CoerceOptions::default();
        assert!(
            StreamedState::derive(log, &options).is_none(),
            "streamed: {}",
            String::from_utf8_lossy(&log[log.len().saturating_sub(300)..])
        );
        assert_eq!(coerce_and_derive(log, &options), full(log));
    }
}

#[test]
fn a_clean_log_streams_and_repetitions_do_not() {
    let base = log(&clean_picks(), 1);
    let options = CoerceOptions::default();
    let streamed = StreamedState::derive(&base, &options);
    assert!(streamed.is_some(), "{}", String::from_utf8_lossy(&base));
    assert_eq!(streamed, Some(full(&base)));
    // With lines the reader reads fast and lines it declines, both valid, the log streams.
    let mixed = with_lines(&base, &[], &[declined("d9", 49), fast("f9", 50)]);
    assert_eq!(StreamedState::derive(&mixed, &options), Some(full(&mixed)));
    needs_the_full_coercer(&base, 48);
}

#[test]
fn a_large_input_is_scanned_in_parallel_and_reads_the_same() {
    let base = log(&clean_picks(), 400);
    assert!(base.len() >= PIPELINE_MIN_BYTES, "{} bytes", base.len());
    let options = CoerceOptions::default();
    let streamed = StreamedState::derive(&base, &options);
    assert!(streamed.is_some());
    assert_eq!(streamed, Some(full(&base)));
    let last = 48 * 400;
    let mixed = with_lines(
        &base,
        &[],
        &[declined("d9", last + 1), fast("f9", last + 2)],
    );
    assert_eq!(StreamedState::derive(&mixed, &options), Some(full(&mixed)));
    needs_the_full_coercer(&base, last);
    // The messier spellings too (some need the full coercer, some do not).
    let picks: Vec<_> = (0..48usize)
        .map(|i| {
            (
                (i % 12) as u8,
                i % OPAQUE.len(),
                i % TEXT.len(),
                i % NUMBER.len(),
                i % 5 == 0,
            )
        })
        .collect();
    let messy = log(&picks, 400);
    assert_eq!(coerce_and_derive(&messy, &options), full(&messy));
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
            coerce_and_derive(&bytes, &CoerceOptions::default()),
            full(&bytes)
        );
    }
}

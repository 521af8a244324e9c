//! The streamed path (`StreamedState::derive`) and the line-by-line plan derive exactly the state of the full
//! coercer followed by derivation, on clean logs (streamed) and on logs that need a whole-log
//! rule (sent through the full coercer); `derive_run_state_from_slice` (what `runlog state`
//! prints) equals the normalized full path the same way. The same text pushed in pieces
//! (`StreamedState`) or read from a line source (`plan_by_line_from`) gives the same answers.

#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use std::borrow::Cow;

use agentwire_runlog::{
    CoerceOptions, LineSource, MockRunOptions, RunState, StreamedState, create_mock_event,
    create_mock_run, derive_run_state_from_slice, plan_by_line, plan_by_line_from, scenarios,
    to_run_events_from_slice,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{
    coerce_and_derive, example_log, full_state as full, normalized_state as normalized,
};

fn ndjson(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend(line.to_string().into_bytes());
        out.push(b'\n');
    }
    out
}

/// `bytes` cut into pieces of at least `size` bytes that end just after a line feed (the last
/// one where the text ends), as a reader of a file or pipe hands them to [`StreamedState`].
fn pieces(bytes: &[u8], size: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let cut = match rest
            .get(size..)
            .and_then(|after| after.iter().position(|&b| b == b'\n'))
        {
            Some(i) => size + i + 1,
            None => rest.len(),
        };
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out
}

/// The state [`StreamedState`] folds from `bytes` pushed in pieces of about `size` bytes.
fn pushed(bytes: &[u8], size: usize, options: &CoerceOptions) -> Option<RunState> {
    let mut stream = StreamedState::new(options);
    for piece in pieces(bytes, size) {
        // A piece is borrowed for the push only: the fold cannot keep the text.
        let piece = piece.to_vec();
        stream.push(&piece);
    }
    stream.finish()
}

/// A text read a line at a time on each pass, every line handed over as an owned copy (what a
/// file read again gives).
struct Reread<'a>(&'a [u8]);

impl LineSource for Reread<'_> {
    fn lines(&self) -> Box<dyn Iterator<Item = Cow<'_, [u8]>> + '_> {
        Box::new(
            self.0
                .split(|&b| b == b'\n')
                .map(|l| Cow::Owned(l.to_vec())),
        )
    }
}

/// Pushed in pieces (one line, a few lines, the whole text), the fold answers what the streamed
/// path answers on the whole text; a plan read from a source gives the whole-text plan's
/// result whenever it gives a plan.
fn assert_pieces_agree(bytes: &[u8], options: &CoerceOptions) {
    let whole = StreamedState::derive(bytes, options);
    // Large logs in pieces the parallel scan takes, and in many small ones.
    let sizes: &[usize] = if bytes.len() > 1 << 20 {
        &[64 << 10, 1 << 20]
    } else {
        &[0, 300, usize::MAX]
    };
    for &size in sizes {
        assert_eq!(
            pushed(bytes, size, options),
            whole,
            "pieces of {size} bytes, input:\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
    let source = Reread(bytes);
    if let Some(plan) = plan_by_line_from(&source, options) {
        let from_slice = plan_by_line(bytes, options).expect("the slice's plan");
        assert_eq!(
            plan.collect(),
            from_slice.collect(),
            "input:\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

fn assert_same(bytes: &[u8]) {
    assert_same_with(bytes, &[true, false]);
}

fn assert_same_with(bytes: &[u8], synthesize: &[bool]) {
    for &synthesize_run_start in synthesize {
        let options = CoerceOptions {
            synthesize_run_start,
            ..CoerceOptions::default()
        };
        assert_eq!(
            coerce_and_derive(bytes, &options),
            full(bytes, &options),
            "input:\n{}",
            String::from_utf8_lossy(bytes)
        );
        assert_eq!(
            derive_run_state_from_slice(bytes, &options),
            normalized(bytes, &options),
            "input:\n{}",
            String::from_utf8_lossy(bytes)
        );
        assert_pieces_agree(bytes, &options);
    }
}

#[test]
fn mock_runs_and_scenarios_derive_the_same_state() {
    let mut runs = vec![create_mock_run(&MockRunOptions::default())];
    runs.extend(scenarios().iter().map(|s| create_mock_run(&s.options)));
    for events in runs {
        let lines: Vec<Value> = events.iter().map(|e| e.to_value()).collect();
        assert_same(&ndjson(&lines));
    }
}

#[test]
fn the_example_log_derives_the_same_state() {
    assert_same(&example_log());
}

#[test]
fn documents_and_empty_inputs_derive_the_same_state() {
    let one = json!({"id": "e1", "runId": "r", "seq": 1, "at": 5, "schemaVersion": 1,
        "type": "run:start", "payload": {"goal": "g"}});
    assert_same(b"");
    assert_same(b"  \n ");
    assert_same(one.to_string().as_bytes());
    assert_same(json!([one]).to_string().as_bytes());
    assert_same(json!({"events": [one]}).to_string().as_bytes());
    let pretty = serde_json::to_string_pretty(&one).unwrap_or_default();
    assert_same(pretty.as_bytes());
}

/// A clean run of `n` events; over 4 MiB at 25,000, where the full coercer parses in parallel.
fn long_run(n: u64) -> Vec<Value> {
    let mut lines =
        vec![create_mock_event("r", 1, 10, "run:start", json!({"goal": "long"})).to_value()];
    for seq in 2..=n {
        let call = format!("c{}", seq / 2);
        let (ty, payload) = if seq % 2 == 0 {
            (
                "tool:call",
                json!({"callId": call, "name": "db.query",
                "args": {"where": "last_login < now() - interval '30 days'", "n": seq}}),
            )
        } else {
            (
                "tool:result",
                json!({"ok": seq % 7 != 0, "ms": 4, "tokens": 9, "cost": 0.01,
                "result": {"rows": [1, 2, 3, 4, 5, 6, 7, 8], "note": "some rows were found"}}),
            )
        };
        lines.push(create_mock_event("r", seq, 10 + seq, ty, payload).to_value());
    }
    lines
}

#[test]
fn long_logs_derive_the_same_state_clean_or_not() {
    let clean = long_run(25_000);
    let bytes = ndjson(&clean);
    assert!(bytes.len() > 4 << 20, "{} bytes", bytes.len());
    assert_same(&bytes);

    // Each needs the full coercer, found early, midway or only at the end.
    let mut late_garbage = clean.clone();
    late_garbage.push(json!("not an object"));
    let mut seq_back = clean.clone();
    seq_back[12_000]["seq"] = json!(3);
    let mut no_start = clean.clone();
    no_start.remove(0);
    let mut repeated_id = clean.clone();
    repeated_id[20_000]["id"] = clean[5]["id"].clone();
    for lines in [late_garbage, seq_back, no_start, repeated_id] {
        assert_same_with(&ndjson(&lines), &[true]);
    }
}

/// One line of a messy log: mostly complete events, sometimes something that needs a rule.
fn line_of(n: u64, pick: (u8, u8, bool)) -> Value {
    let (kind, variant, flag) = pick;
    let step = format!("s{}", kind % 3);
    let call = format!("c{}", n / 2);
    let (ty, payload) = match kind % 8 {
        0 => ("run:start", json!({"goal": "g"})),
        1 => ("step:start", json!({"stepId": step})),
        2 => (
            "tool:call",
            json!({"stepId": step, "callId": call, "name": "t"}),
        ),
        3 => ("tool:result", json!({"callId": call, "ok": flag, "ms": 2})),
        4 => ("tool:result", json!({"ms": 2})),
        5 => ("step:done", json!({"stepId": step})),
        6 => (
            "approval:request",
            json!({"approvalId": "a", "risk": "low"}),
        ),
        _ => (
            "approval:decision",
            json!({"decision": if flag { "yes" } else { "maybe" }}),
        ),
    };
    let mut event = json!({"id": format!("e{n}"), "runId": "r", "seq": n, "at": 100 + n,
        "schemaVersion": 1, "type": ty, "payload": payload});
    match variant {
        0 => {
            if let Some(m) = event.as_object_mut() {
                m.remove("seq");
            }
        }
        1 => event["id"] = json!("e1"),
        2 => event["runId"] = json!("other"),
        3 => event["seq"] = json!(n.saturating_sub(3)),
        4 => event["type"] = json!("ToolCall"),
        5 => return json!("not an object"),
        _ => {}
    }
    event
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn messy_logs_derive_the_same_state(
        picks in prop::collection::vec((0u8..8, 0u8..40, any::<bool>()), 1..40)
    ) {
        let lines: Vec<Value> = picks
            .iter()
            .enumerate()
            .map(|(i, &p)| line_of(i as u64 + 1, p))
            .collect();
        assert_same(&ndjson(&lines));
    }
}

#[test]
fn a_source_read_again_gives_the_plan_of_the_whole_text() {
    let options = CoerceOptions::default();
    let envelope_less: Vec<u8> = (0..50)
        .flat_map(|i| {
            format!(
                "{{\"type\":\"step:start\",\"stepId\":\"s{i}\",\"title\":\"t\"}}\n\n  {{\"type\":\"step:done\",\"stepId\":\"s{i}\"}}\r\n"
            )
            .into_bytes()
        })
        .collect();
    let mut with_bom = b"\xef\xbb\xbf".to_vec();
    with_bom.extend_from_slice(&envelope_less);
    let mut not_json_first = b"garbage\n".to_vec();
    not_json_first.extend_from_slice(&envelope_less);
    for bytes in [&envelope_less, &with_bom, &not_json_first] {
        let source = Reread(bytes);
        let plan = plan_by_line_from(&source, &options).expect("planned from the source");
        assert_eq!(
            plan.lines(),
            plan_by_line(bytes, &options).map_or(0, |p| p.lines())
        );
        assert_eq!(plan.collect(), to_run_events_from_slice(bytes, &options));
    }
    // A document, or what may be one, is left to the caller holding the whole text.
    let pretty = b"{\n  \"events\": []\n}\n";
    assert!(plan_by_line_from(&Reread(pretty), &options).is_none());
    let one_line = b"{\"type\":\"run:start\"}\n";
    assert!(plan_by_line_from(&Reread(one_line), &options).is_none());
}

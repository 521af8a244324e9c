//! The line-by-line coercer gives exactly the full coercer's result, item by item.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{
    CoerceOptions, IssueList, LineItem, TextOptions, derive_run_state_from_slice, plan_by_line,
    render_html, to_run_events_from_slice, write_html_by_line, write_text, write_text_by_line,
};
use proptest::prelude::*;

/// Lines of every kind the coercer meets: complete envelopes, envelope-less lines, lines to
/// pair, to infer, to degrade, unknown types, values that are not objects, text that is not
/// JSON, and control characters.
const POOL: &[&str] = &[
    r#"{"type":"run:start","goal":"g"}"#,
    r#"{"type":"plan","steps":["a","b"]}"#,
    r#"{"type":"step:start","stepId":"s1"}"#,
    r#"{"type":"step_start","stepId":"s2","title":"t\u001b[2J"}"#,
    r#"{"type":"tool:call","stepId":"s1","name":"db.query","args":{"n":1}}"#,
    r#"{"type":"tool:call","name":"x"}"#,
    r#"{"type":"tool:call","stepId":"s1"}"#,
    r#"{"type":"tool:result","ok":true,"result":[1]}"#,
    r#"{"type":"tool:result","error":"boom"}"#,
    r#"{"type":"step_end","stepId":"s1"}"#,
    r#"{"type":"step:error","stepId":"s2","error":"e"}"#,
    r#"{"type":"approval:request","summary":"ok?","stepId":"s1"}"#,
    r#"{"type":"approval:request","title":"t"}"#,
    r#"{"type":"approval:decision","decision":"yes"}"#,
    r#"{"type":"approval:decision","decision":"maybe"}"#,
    r#"{"type":"run:paused"}"#,
    r#"{"type":"agent:thought","text":"hm"}"#,
    r#"{"stepId":"s1"}"#,
    r#"{"type":"step:progress","stepId":"s1","progress":2}"#,
    r#"{"type":"step:done","stepId":"s1","at":1700000000000}"#,
    r#"{"type":"step:done","stepId":"s1","schemaVersion":2}"#,
    r#"{"type":"step:done","stepId":"s1","runId":7}"#,
    r#"{"type":"step:done","stepId":"s1","id":"","seq":"x"}"#,
    r#"{"type":"run:done","runId":"r2"}"#,
    r#"[1,2]"#,
    r#""text""#,
    "not json at all",
    r#"{"type":"step:done","stepId":"s1","a":1,"a":2}"#,
    "",
];

fn full(bytes: &[u8]) -> serde_json::Value {
    serde_json::to_value(to_run_events_from_slice(bytes, &CoerceOptions::default())).expect("json")
}

fn by_line(bytes: &[u8], options: &CoerceOptions) -> Option<serde_json::Value> {
    let plan = plan_by_line(bytes, options)?;
    Some(serde_json::to_value(plan.collect()).expect("json"))
}

fn log(picks: &[usize], ids: bool, seqs: bool) -> Vec<u8> {
    let mut text = String::new();
    for (i, &p) in picks.iter().enumerate() {
        let line = POOL[p % POOL.len()];
        let mut line = line.to_owned();
        if line.starts_with("{\"type\"") {
            let mut extra = String::new();
            if ids {
                extra.push_str(&format!("\"id\":\"x{i}\","));
            }
            if seqs {
                extra.push_str(&format!("\"seq\":{},", i * 2));
            }
            line.insert_str(1, &extra);
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn by_line_equals_the_full_coercer(
        picks in proptest::collection::vec(0usize..64, 2..40),
        ids: bool,
        seqs: bool,
        synthesize: bool,
        bom: bool,
    ) {
        let mut bytes = log(&picks, ids, seqs);
        if bom {
            bytes.splice(0..0, [0xEF, 0xBB, 0xBF]);
        }
        let options = CoerceOptions { synthesize_run_start: synthesize, ..CoerceOptions::default() };
        let want = serde_json::to_value(to_run_events_from_slice(&bytes, &options)).expect("json");
        if let Some(got) = by_line(&bytes, &options) {
            prop_assert_eq!(&got, &want);
            // Serialized pass by pass, it is the same document.
            let plan = plan_by_line(&bytes, &options).expect("plan");
            prop_assert_eq!(serde_json::to_value(&plan).expect("json"), want);
            // And its state is the normalized derivation.
            let normalized = crate::support::normalized_state(&bytes, &options);
            if plan.run_ids().len() <= 1 {
                prop_assert_eq!(&plan.derive(), &normalized);
                // The terminal view written from passes is the view of the whole result.
                let result = to_run_events_from_slice(&bytes, &options);
                for issues in [IssueList::Grouped, IssueList::All] {
                    let text = TextOptions { color: false, issues };
                    let (mut passes, mut whole) = (Vec::new(), Vec::new());
                    let state = write_text_by_line(&mut passes, &plan, &text).expect("write");
                    write_text(&mut whole, &result, &normalized, &text).expect("write");
                    prop_assert_eq!(&state, &normalized);
                    prop_assert_eq!(String::from_utf8_lossy(&passes), String::from_utf8_lossy(&whole));
                }
                // So is the HTML page.
                let mut page = Vec::new();
                let written = write_html_by_line(&mut page, &plan).expect("write");
                prop_assert_eq!(&written.state, &normalized);
                prop_assert_eq!(String::from_utf8_lossy(&page), render_html(&result, &normalized));
            }
            prop_assert_eq!(derive_run_state_from_slice(&bytes, &options), normalized);
        } else {
            // Declined only for a document, or a log whose payload pass is not in input order.
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim_start_matches('\u{feff}');
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            prop_assert!(lines < 2 || (seqs && !ids) || text.trim_start().starts_with('['), "{}", text);
        }
    }
}

#[test]
fn the_example_log_by_line_is_the_full_result() {
    let bytes = crate::support::example_log();
    assert_eq!(
        by_line(&bytes, &CoerceOptions::default()),
        Some(full(&bytes))
    );
}

/// A long envelope-less log is taken line by line, and its items come in output order.
#[test]
fn envelope_less_lines_are_coerced_one_at_a_time() {
    let mut text = String::from("{\"type\":\"run:start\",\"goal\":\"g\"}\n");
    for i in 0..5000 {
        text.push_str(&format!(
            "{{\"type\":\"step:start\",\"stepId\":\"s{i}\"}}\n"
        ));
    }
    let bytes = text.into_bytes();
    let options = CoerceOptions::default();
    let plan = plan_by_line(&bytes, &options).expect("taken line by line");
    let mut seqs = Vec::new();
    for (item, issues) in plan.items() {
        let Some(LineItem::Event(e)) = item else {
            panic!("{item:?}")
        };
        assert_eq!(issues.len(), 5, "{issues:?}");
        seqs.push(e.seq);
    }
    assert_eq!(seqs, (1..=5001).collect::<Vec<u64>>());
    assert_eq!(
        serde_json::to_value(plan.collect()).ok(),
        Some(full(&bytes))
    );
}

/// A seq going back or an id used twice needs the full coercer.
#[test]
fn logs_that_compare_lines_are_declined() {
    let options = CoerceOptions::default();
    let back = b"{\"type\":\"run:start\",\"seq\":5}\n{\"type\":\"step:start\",\"stepId\":\"s\",\"seq\":3}\n";
    assert!(plan_by_line(back, &options).is_none());
    let twice = b"{\"type\":\"run:start\",\"id\":\"a\"}\n{\"type\":\"step:start\",\"stepId\":\"s\",\"id\":\"a\"}\n";
    assert!(plan_by_line(twice, &options).is_none());
    assert!(plan_by_line(b"[{\"type\":\"run:start\"}\n]", &options).is_none());
}

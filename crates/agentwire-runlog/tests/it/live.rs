//! The live coercer: what it repairs in a stream read as it arrives, and that it gives the
//! line-by-line coercer's items wherever the whole-log rules need no look-ahead.
#![allow(clippy::expect_used, clippy::unwrap_used)] // In tests, a panic is the failure report.

use agentwire_runlog::{
    CoerceOptions, DEFAULT_RUN_ID, Issue, IssueLevel, LineItem, LiveCoercer, plan_by_line,
};
use proptest::prelude::*;
use serde_json::json;

/// Lines of a log that names no run and no `at`, every one with a `seq` and an id (when it is
/// an object): the logs on which the whole-log rules look at nothing ahead.
const POOL: &[&str] = &[
    r#"{"type":"run:start","goal":"g"}"#,
    r#"{"type":"plan","steps":["a","b"]}"#,
    r#"{"type":"step:start","stepId":"s1"}"#,
    r#"{"type":"step_start","stepId":"s2"}"#,
    r#"{"type":"tool:call","stepId":"s1","name":"db.query","args":{"n":1}}"#,
    r#"{"type":"tool:call","name":"x"}"#,
    r#"{"type":"tool:call","stepId":"s1"}"#,
    r#"{"type":"tool:result","ok":true,"result":[1]}"#,
    r#"{"type":"tool:result","error":"boom"}"#,
    r#"{"type":"step_end","stepId":"s1"}"#,
    r#"{"type":"step:error","stepId":"s2","error":"e"}"#,
    r#"{"type":"approval:request","summary":"ok?","stepId":"s1"}"#,
    r#"{"type":"approval:decision","decision":"yes"}"#,
    r#"{"type":"approval:decision","decision":"maybe"}"#,
    r#"{"type":"run:paused"}"#,
    r#"{"type":"agent:thought","text":"hm"}"#,
    r#"{"stepId":"s1"}"#,
    r#"{"type":"step:progress","stepId":"s1","progress":2}"#,
    r#"{"type":"step:done","stepId":"s1","schemaVersion":2}"#,
    r#"[1,2]"#,
    "not json at all",
];

fn log(picks: &[usize]) -> Vec<String> {
    picks
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let mut line = POOL[p % POOL.len()].to_owned();
            if line.starts_with('{') {
                line.insert_str(1, &format!("\"id\":\"x{i}\",\"seq\":{},", i * 2));
            }
            line
        })
        .collect()
}

fn live(lines: &[String]) -> Vec<(LineItem, Vec<Issue>)> {
    let mut coercer = LiveCoercer::new(DEFAULT_RUN_ID, 0);
    lines
        .iter()
        .map(|l| coercer.push_line(l.as_bytes()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn live_equals_line_by_line_when_nothing_needs_look_ahead(
        picks in proptest::collection::vec(0usize..64, 2..40),
    ) {
        let lines = log(&picks);
        let text = lines.join("\n");
        let options = CoerceOptions { synthesize_run_start: false, ..CoerceOptions::default() };
        let plan = plan_by_line(text.as_bytes(), &options).expect("every seq goes forward");
        let want: Vec<(LineItem, Vec<Issue>)> = plan
            .items()
            .map(|(item, issues)| (item.expect("a line's item"), issues))
            .collect();
        prop_assert_eq!(live(&lines), want);
    }
}

fn codes(issues: &[Issue]) -> Vec<(IssueLevel, &'static str)> {
    issues.iter().map(|i| (i.level, i.code)).collect()
}

fn event(item: &LineItem) -> &agentwire_runlog::RunEvent {
    item.event().expect("a valid event")
}

#[test]
fn envelope_less_lines_get_the_stream_run_and_arrival_numbers() {
    let mut live = LiveCoercer::new("turn-1", 1_700_000_000_000);
    let (first, issues) = live.push_value(json!({"type": "step:start", "stepId": "s"}));
    assert_eq!(
        codes(&issues),
        [
            (IssueLevel::Fixed, "id-filled"),
            (IssueLevel::Fixed, "run-id-filled"),
            (IssueLevel::Fixed, "at-filled"),
            (IssueLevel::Fixed, "schema-version-filled"),
            (IssueLevel::Fixed, "seq-filled"),
        ]
    );
    let first = event(&first);
    assert_eq!(
        (
            first.id.as_str(),
            first.run_id.as_str(),
            first.seq,
            first.at
        ),
        ("e_1", "turn-1", 1, 1_700_000_000_000)
    );
    let (second, issues) =
        live.push_value(json!({"type": "tool_call", "name": "grep", "seq": 7, "at": 5}));
    // The step is the only one running, and the naming style is repaired.
    assert_eq!(
        codes(&issues),
        [
            (IssueLevel::Fixed, "id-filled"),
            (IssueLevel::Fixed, "run-id-filled"),
            (IssueLevel::Fixed, "schema-version-filled"),
            (IssueLevel::Fixed, "type-normalized"),
            (IssueLevel::Fixed, "step-id-inferred"),
        ]
    );
    let second = event(&second);
    assert_eq!(second.event_type, "tool:call");
    assert_eq!((second.seq, second.at), (7, 5));
    assert_eq!(second.str_field("stepId"), Some("s"));
    let (third, issues) = live.push_value(json!({"type": "tool:result", "result": 3}));
    let third = event(&third);
    // Paired with the call, which is identified by its event id; numbered after line 2.
    assert_eq!(third.str_field("callId"), Some("e_2"));
    assert_eq!(third.payload["ok"], json!(true));
    assert_eq!((third.seq, third.at), (8, 5));
    assert!(issues.iter().any(|i| i.code == "seq-filled"
        && i.message == "seq missing; numbered 8, after the line before it"));
    assert_eq!(live.lines(), 3);
}

#[test]
fn what_cannot_be_repaired_is_degraded_or_dropped_never_guessed() {
    let mut live = LiveCoercer::new("r", 0);
    let (item, issues) = live.push_value(json!({"type": "tool:call", "name": "x"}));
    assert!(matches!(item, LineItem::Degraded { line: 1, .. }));
    assert_eq!(
        issues.last().map(|i| (i.level, i.code, i.message.as_str())),
        Some((
            IssueLevel::Degraded,
            "step-id-ambiguous",
            "stepId missing and 0 steps are running: not guessing"
        ))
    );
    let (item, issues) = live.push_line(b"{oops");
    assert!(matches!(&item, LineItem::Dropped { line: 2, text } if text == "{oops"));
    assert_eq!(codes(&issues), [(IssueLevel::Dropped, "unparsable-line")]);
    let (item, issues) = live.push_value(json!([1]));
    assert!(matches!(item, LineItem::Degraded { line: 3, .. }));
    assert_eq!(codes(&issues), [(IssueLevel::Degraded, "not-an-object")]);
    let (item, issues) = live.push_value(json!({"type": "whatever.else"}));
    assert!(item.event().is_some());
    assert_eq!(
        codes(&issues).last(),
        Some(&(IssueLevel::Info, "unknown-type"))
    );
}

#[test]
fn a_repeated_id_is_a_duplicate_delivery_and_a_reused_one_is_reassigned() {
    let mut live = LiveCoercer::new("r", 0);
    let line = json!({"id": "e_2", "runId": "r", "seq": 1, "at": 1, "schemaVersion": 1, "type": "run:start"});
    let (_, issues) = live.push_value(line.clone());
    assert!(issues.is_empty());
    // A generated id skips the ids seen so far.
    let (item, _) = live.push_value(json!({"type": "run:done"}));
    assert_eq!(event(&item).id, "e_1");
    let (item, _) = live.push_value(json!({"type": "run:done"}));
    assert_eq!(event(&item).id, "e_3");
    let (item, issues) = live.push_value(line);
    assert_eq!(event(&item).id, "e_2");
    assert_eq!(
        issues
            .iter()
            .map(|i| i.message.as_str())
            .collect::<Vec<_>>(),
        ["same id e_2 and same content as line 1: kept for deduplication"]
    );
    let (item, issues) = live.push_value(
        json!({"id": "e_2", "runId": "r", "seq": 9, "at": 1, "schemaVersion": 1, "type": "run:done"}),
    );
    assert_eq!(event(&item).id, "e_4");
    assert_eq!(
        issues
            .iter()
            .map(|i| i.message.as_str())
            .collect::<Vec<_>>(),
        ["id e_2 is already used by line 1 with different content; assigned e_4"]
    );
    // A line that gives an id the coercer generated is re-assigned too.
    let (item, issues) = live.push_value(json!({"id": "e_3", "type": "run:done"}));
    assert_eq!(event(&item).id, "e_5");
    assert_eq!(codes(&issues)[0], (IssueLevel::Fixed, "id-reassigned"));
}

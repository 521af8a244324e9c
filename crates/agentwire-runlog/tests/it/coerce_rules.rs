//! One test per inference rule of the lenient parser and per "does not guess" rule.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{
    CoerceOptions, CoerceResult, InputShape, Issue, IssueLevel, MALFORMED_EVENT_TYPE, RunEvent,
    to_run_events, to_run_events_from_slice,
};
use serde_json::{Value, json};

fn coerce(input: Value) -> CoerceResult {
    to_run_events(input, &CoerceOptions::default())
}

/// Envelope fields for a line that has them all.
fn env(seq: u64, ty: &str, payload: Value) -> Value {
    let mut v = json!({"id": format!("e{seq}"), "runId": "r", "seq": seq, "at": 1000 + seq,
                       "schemaVersion": 1, "type": ty});
    if let (Value::Object(m), Value::Object(p)) = (&mut v, payload) {
        m.extend(p);
    }
    v
}

fn start() -> Value {
    env(1, "run:start", json!({"goal": "g"}))
}

fn with_codes<'a>(r: &'a CoerceResult, code: &str) -> Vec<&'a Issue> {
    r.issues.iter().filter(|i| i.code == code).collect()
}

fn one(r: &CoerceResult, code: &str) -> Issue {
    let found = with_codes(r, code);
    assert_eq!(
        found.len(),
        1,
        "one {code} issue expected in {:#?}",
        r.issues
    );
    found[0].clone()
}

fn event_at_line<'a>(r: &'a CoerceResult, id: &str) -> &'a RunEvent {
    r.renderable
        .iter()
        .find(|e| e.id == id)
        .expect("event by id")
}

fn no_degraded(r: &CoerceResult) {
    assert!(r.malformed.is_empty(), "{:#?}", r.issues);
    assert_eq!(
        r.issues_at(IssueLevel::Degraded).count(),
        0,
        "{:#?}",
        r.issues
    );
}

// ---- unpacking ----

#[test]
fn accepts_an_array_an_events_object_a_single_object_and_ndjson() {
    let a = coerce(json!([start()]));
    assert_eq!((a.meta.input, a.events().count()), (InputShape::Array, 1));
    let b = coerce(json!({"events": [start()]}));
    assert_eq!((b.meta.input, b.events().count()), (InputShape::Events, 1));
    let c = coerce(start());
    assert_eq!((c.meta.input, c.events().count()), (InputShape::Object, 1));
    let text = format!("{}\n\n{}\n", start(), env(2, "run:done", json!({})));
    let d = to_run_events_from_slice(text.as_bytes(), &CoerceOptions::default());
    assert_eq!((d.meta.input, d.events().count()), (InputShape::Ndjson, 2));
    // Lines are text lines: the blank line 2 is skipped but counted.
    assert_eq!(d.renderable[1].seq, 2);
    let e = to_run_events_from_slice(b"  \n", &CoerceOptions::default());
    assert_eq!(e.meta.input, InputShape::Empty);
    assert_eq!(one(&e, "empty-input").level, IssueLevel::Info);
}

#[test]
fn an_unparsable_ndjson_line_is_dropped_with_its_text_kept() {
    let text = format!(
        "{}\n{{\"type\": \"plan\", oops\n{}\n",
        start(),
        env(3, "run:done", json!({}))
    );
    let r = to_run_events_from_slice(text.as_bytes(), &CoerceOptions::default());
    let issue = one(&r, "unparsable-line");
    assert_eq!((issue.level, issue.line), (IssueLevel::Dropped, 2));
    assert_eq!(r.malformed.len(), 1);
    assert_eq!(r.malformed[0].line, 2);
    assert_eq!(
        r.malformed[0].text.as_deref(),
        Some("{\"type\": \"plan\", oops")
    );
    assert_eq!(r.events().count(), 2);
    assert_eq!(
        r.renderable.len(),
        2,
        "a dropped line is not in the timeline"
    );
}

#[test]
fn a_line_with_a_duplicate_key_is_dropped_not_read_two_ways() {
    let text = "{\"id\":\"a\",\"id\":\"b\",\"runId\":\"r\",\"seq\":1,\"at\":1,\"schemaVersion\":1,\"type\":\"run:start\"}\n{\"id\":\"c\",\"runId\":\"r\",\"seq\":2,\"at\":1,\"schemaVersion\":1,\"type\":\"run:start\"}";
    let r = to_run_events_from_slice(text.as_bytes(), &CoerceOptions::default());
    let issue = one(&r, "unparsable-line");
    assert!(
        issue.message.contains("json.duplicate-key"),
        "{}",
        issue.message
    );
}

#[test]
fn a_value_that_is_not_an_object_is_degraded_and_wrapped() {
    let r = coerce(json!([start(), 42]));
    let issue = one(&r, "not-an-object");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 2));
    assert_eq!(r.malformed[0].raw, Some(json!(42)));
    let wrapper = &r.renderable[1];
    assert_eq!(wrapper.event_type, MALFORMED_EVENT_TYPE);
    assert_eq!(wrapper.payload["raw"], json!(42));
    assert!(!r.is_valid_entry(1));
    assert!(
        agentwire_runlog::is_valid_event(&wrapper.to_value()),
        "the wrapper is a valid envelope"
    );
}

// ---- envelope ----

#[test]
fn missing_envelope_fields_are_filled() {
    let r = coerce(json!([{"type": "run:start", "goal": "g"}]));
    let e = r.events().next().expect("event");
    assert_eq!(
        (
            e.id.as_str(),
            e.run_id.as_str(),
            e.seq,
            e.at,
            e.schema_version
        ),
        ("e_1", "run_1", 1, 0, 1)
    );
    for code in [
        "id-filled",
        "run-id-filled",
        "at-filled",
        "schema-version-filled",
        "seq-renumbered",
    ] {
        assert_eq!(one(&r, code).level, IssueLevel::Fixed, "{code}");
    }
}

#[test]
fn missing_run_id_takes_the_only_run_of_the_log() {
    let mut line = env(2, "run:done", json!({}));
    line.as_object_mut().expect("object").remove("runId");
    let r = coerce(json!([start(), line]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e2").run_id, "r");
    assert!(one(&r, "run-id-filled").message.contains("one run: r"));
}

#[test]
fn missing_at_takes_the_nearest_line_that_has_one() {
    let mut line = env(2, "run:done", json!({}));
    line.as_object_mut().expect("object").remove("at");
    let r = coerce(json!([start(), line]));
    assert_eq!(event_at_line(&r, "e2").at, 1001);
    one(&r, "at-filled");
}

#[test]
fn seq_is_renumbered_in_input_order_when_some_lines_lack_it() {
    let mut second = env(7, "plan", json!({"steps": []}));
    second.as_object_mut().expect("object").remove("seq");
    let third = env(9, "run:done", json!({}));
    let r = coerce(json!([env(5, "run:start", json!({})), second, third]));
    let seqs: Vec<u64> = r.events().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    let issues = with_codes(&r, "seq-renumbered");
    assert_eq!(issues.len(), 3);
    assert!(
        issues[0].message.contains("seq 5 replaced by 1"),
        "{}",
        issues[0].message
    );
    assert!(
        issues[1].message.contains("seq missing"),
        "{}",
        issues[1].message
    );
}

#[test]
fn seq_is_left_alone_when_every_line_has_one() {
    let r = coerce(json!([
        env(10, "run:start", json!({})),
        env(3, "run:done", json!({}))
    ]));
    let seqs: Vec<u64> = r.events().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![10, 3], "audit fidelity: nothing renumbered");
    assert!(with_codes(&r, "seq-renumbered").is_empty());
}

#[test]
fn an_id_collision_with_different_content_is_reassigned() {
    let a = env(1, "run:start", json!({"goal": "a"}));
    let mut b = env(2, "run:done", json!({}));
    b["id"] = json!("e1");
    let r = coerce(json!([a, b]));
    let issue = one(&r, "id-reassigned");
    assert_eq!((issue.level, issue.line), (IssueLevel::Fixed, 2));
    let ids: Vec<&str> = r.events().map(|e| e.id.as_str()).collect();
    assert_eq!(ids[0], "e1");
    assert_ne!(ids[1], "e1");
}

#[test]
fn an_identical_duplicate_delivery_is_kept_for_dedupe() {
    let r = coerce(json!([start(), start()]));
    let issue = one(&r, "duplicate-delivery");
    assert_eq!((issue.level, issue.line), (IssueLevel::Info, 2));
    let ids: Vec<&str> = r.events().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, vec!["e1", "e1"]);
    assert_eq!(agentwire_runlog::normalize(&r.into_events()).len(), 1);
}

#[test]
fn type_naming_styles_are_normalized() {
    for (written, want) in [
        ("tool_call", "tool:call"),
        ("toolCall", "tool:call"),
        ("ToolCall", "tool:call"),
        ("APPROVAL_REQUEST", "approval:request"),
        ("run-start", "run:start"),
    ] {
        let r = coerce(json!([
            start(),
            env(
                2,
                written,
                json!({"stepId": "s", "name": "t", "summary": "x", "risk": "low"})
            )
        ]));
        assert_eq!(event_at_line(&r, "e2").event_type, want, "{written}");
        assert_eq!(one(&r, "type-normalized").level, IssueLevel::Fixed);
    }
}

#[test]
fn step_end_and_step_finish_are_aliases_of_step_done() {
    for written in ["step_end", "step_finish", "stepEnd", "step:finish"] {
        let r = coerce(json!([start(), env(2, written, json!({"stepId": "s"}))]));
        assert_eq!(event_at_line(&r, "e2").event_type, "step:done", "{written}");
        one(&r, "type-alias");
    }
}

#[test]
fn an_unknown_type_folds_with_an_info_issue() {
    let r = coerce(json!([
        start(),
        env(2, "agent:thought", json!({"text": "hm"}))
    ]));
    no_degraded(&r);
    let issue = one(&r, "unknown-type");
    assert_eq!(issue.level, IssueLevel::Info);
    assert_eq!(event_at_line(&r, "e2").event_type, "agent:thought");
}

#[test]
fn a_newer_major_version_is_an_unknown_event_and_is_not_normalized() {
    let mut line = env(2, "tool_call", json!({}));
    line["schemaVersion"] = json!(2);
    let r = coerce(json!([start(), line]));
    no_degraded(&r);
    assert_eq!(one(&r, "newer-major-version").level, IssueLevel::Info);
    let e = event_at_line(&r, "e2");
    assert_eq!((e.event_type.as_str(), e.kind()), ("tool_call", None));
}

// ---- payload inferences ----

#[test]
fn plan_steps_given_as_text_become_id_and_title() {
    let r = coerce(json!([
        start(),
        env(
            2,
            "plan",
            json!({"steps": ["a", {"id": "x", "title": "b"}, "c"]})
        )
    ]));
    no_degraded(&r);
    assert_eq!(
        event_at_line(&r, "e2").payload["steps"],
        json!([{"id": "step_1", "title": "a"}, {"id": "x", "title": "b"}, {"id": "step_3", "title": "c"}])
    );
    assert!(
        one(&r, "plan-steps-from-strings")
            .message
            .starts_with("2 plan step(s)")
    );
}

#[test]
fn tool_result_without_call_id_pairs_with_the_latest_unpaired_call() {
    let r = coerce(json!([
        start(),
        env(2, "step:start", json!({"stepId": "s"})),
        env(
            3,
            "tool:call",
            json!({"stepId": "s", "callId": "c1", "name": "a"})
        ),
        env(
            4,
            "tool:call",
            json!({"stepId": "s", "callId": "c2", "name": "b"})
        ),
        env(5, "tool:result", json!({"ok": true})),
        env(6, "tool:result", json!({"ok": true})),
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e5").payload["callId"], "c2");
    assert_eq!(event_at_line(&r, "e6").payload["callId"], "c1");
}

#[test]
fn tool_result_without_call_id_and_no_unpaired_call_is_degraded() {
    let r = coerce(json!([start(), env(2, "tool:result", json!({"ok": true}))]));
    let issue = one(&r, "call-id-unpaired");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 2));
    assert_eq!(r.malformed.len(), 1);
}

#[test]
fn tool_result_ok_comes_from_error() {
    let r = coerce(json!([
        start(),
        env(2, "tool:result", json!({"callId": "c", "error": "boom"})),
        env(3, "tool:result", json!({"callId": "d", "result": 1})),
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e2").payload["ok"], false);
    assert_eq!(event_at_line(&r, "e3").payload["ok"], true);
    assert_eq!(with_codes(&r, "ok-inferred").len(), 2);
}

#[test]
fn step_id_goes_to_the_only_running_step() {
    let r = coerce(json!([
        start(),
        env(2, "step:start", json!({"stepId": "s1"})),
        env(3, "tool:call", json!({"name": "t"})),
        env(
            4,
            "approval:request",
            json!({"summary": "ok?", "risk": "low"})
        ),
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e3").payload["stepId"], "s1");
    assert_eq!(event_at_line(&r, "e4").payload["stepId"], "s1");
    assert_eq!(with_codes(&r, "step-id-inferred").len(), 2);
}

#[test]
fn step_id_is_not_guessed_when_two_steps_run() {
    let r = coerce(json!([
        start(),
        env(2, "step:start", json!({"stepId": "s1"})),
        env(3, "step:start", json!({"stepId": "s2"})),
        env(4, "tool:call", json!({"name": "t"})),
    ]));
    let issue = one(&r, "step-id-ambiguous");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 4));
    assert!(issue.message.contains("2 steps are running"));
}

#[test]
fn step_id_is_not_guessed_when_no_step_runs() {
    let r = coerce(json!([
        start(),
        env(2, "step:start", json!({"stepId": "s1"})),
        env(3, "step:done", json!({"stepId": "s1"})),
        env(
            4,
            "approval:request",
            json!({"summary": "x", "risk": "low"})
        ),
    ]));
    assert!(
        one(&r, "step-id-ambiguous")
            .message
            .contains("0 steps are running")
    );
}

#[test]
fn a_tool_name_is_never_invented() {
    let r = coerce(json!([
        start(),
        env(2, "step:start", json!({"stepId": "s"})),
        env(3, "tool:call", json!({"stepId": "s"}))
    ]));
    let issue = one(&r, "tool-name-missing");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 3));
    assert_eq!(
        r.malformed[0].raw.as_ref().map(|v| v["type"].clone()),
        Some(json!("tool:call"))
    );
}

#[test]
fn approval_decision_pairs_with_the_only_pending_approval() {
    let r = coerce(json!([
        start(),
        env(
            2,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a1", "summary": "x", "risk": "low"})
        ),
        env(3, "approval:decision", json!({"decision": "approve"})),
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e3").payload["approvalId"], "a1");
    one(&r, "approval-id-paired");
}

#[test]
fn approval_decision_is_not_paired_when_two_approvals_wait() {
    let r = coerce(json!([
        start(),
        env(
            2,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a1", "summary": "x", "risk": "low"})
        ),
        env(
            3,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a2", "summary": "y", "risk": "low"})
        ),
        env(4, "approval:decision", json!({"decision": "approve"})),
    ]));
    let issue = one(&r, "approval-id-ambiguous");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 4));
}

#[test]
fn decision_synonyms_converge_to_approve_edit_reject() {
    for (written, want) in [
        ("approved", "approve"),
        ("ok", "approve"),
        ("Yes", "approve"),
        ("denied", "reject"),
        ("rejected", "reject"),
        ("no", "reject"),
        ("edited", "edit"),
        (" Modified ", "edit"),
    ] {
        let r = coerce(json!([
            start(),
            env(
                2,
                "approval:decision",
                json!({"approvalId": "a", "decision": written})
            )
        ]));
        no_degraded(&r);
        assert_eq!(
            event_at_line(&r, "e2").payload["decision"],
            want,
            "{written}"
        );
        one(&r, "decision-synonym");
    }
}

#[test]
fn decision_maybe_is_degraded() {
    let r = coerce(json!([
        start(),
        env(
            2,
            "approval:decision",
            json!({"approvalId": "a", "decision": "maybe"})
        )
    ]));
    let issue = one(&r, "decision-unknown");
    assert_eq!((issue.level, issue.line), (IssueLevel::Degraded, 2));
    assert_eq!(r.renderable[1].event_type, MALFORMED_EVENT_TYPE);
    assert_eq!(
        r.renderable[1].payload["codes"],
        json!(["decision-unknown"])
    );
}

#[test]
fn approval_request_risk_defaults_to_medium() {
    let r = coerce(json!([
        start(),
        env(
            2,
            "approval:request",
            json!({"stepId": "s", "summary": "x"})
        )
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e2").payload["risk"], "medium");
    one(&r, "risk-defaulted");
}

#[test]
fn approval_request_summary_comes_from_title_message_or_reason() {
    for field in ["title", "message", "reason"] {
        let r = coerce(json!([
            start(),
            env(
                2,
                "approval:request",
                json!({"stepId": "s", "risk": "low", field: "send?"})
            )
        ]));
        no_degraded(&r);
        assert_eq!(
            event_at_line(&r, "e2").payload["summary"],
            "send?",
            "{field}"
        );
        assert!(one(&r, "summary-from-synonym").message.ends_with(field));
    }
}

#[test]
fn approval_request_without_any_summary_is_degraded() {
    let r = coerce(json!([
        start(),
        env(2, "approval:request", json!({"stepId": "s", "risk": "low"}))
    ]));
    assert_eq!(one(&r, "summary-missing").level, IssueLevel::Degraded);
}

#[test]
fn step_error_retryable_defaults_to_false() {
    let r = coerce(json!([
        start(),
        env(2, "step:error", json!({"stepId": "s", "error": "x"}))
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e2").payload["retryable"], false);
    one(&r, "retryable-defaulted");
}

#[test]
fn paused_reason_is_approval_while_one_is_pending_and_user_otherwise() {
    let r = coerce(json!([
        start(),
        env(2, "run:paused", json!({})),
        env(
            3,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a", "summary": "x", "risk": "low"})
        ),
        env(4, "run:paused", json!({})),
    ]));
    no_degraded(&r);
    assert_eq!(event_at_line(&r, "e2").payload["reason"], "user");
    assert_eq!(event_at_line(&r, "e4").payload["reason"], "approval");
    assert_eq!(with_codes(&r, "paused-reason-inferred").len(), 2);
}

#[test]
fn a_run_without_run_start_gets_one_synthesized() {
    let r = coerce(json!([env(3, "step:start", json!({"stepId": "s"}))]));
    let issue = one(&r, "run-start-synthesized");
    assert_eq!((issue.level, issue.line), (IssueLevel::Fixed, 1));
    assert_eq!(r.renderable[0].event_type, "run:start");
    assert_eq!(r.renderable[0].seq, 2, "just before the run's first seq");
    assert!(r.renderable[0].payload.is_empty(), "no goal is invented");
    assert_eq!(r.meta.synthesized, 1);
}

#[test]
fn run_start_synthesis_can_be_switched_off() {
    let options = CoerceOptions {
        synthesize_run_start: false,
        ..CoerceOptions::default()
    };
    let r = to_run_events(
        json!([env(3, "step:start", json!({"stepId": "s"}))]),
        &options,
    );
    assert!(with_codes(&r, "run-start-synthesized").is_empty());
    assert_eq!(r.renderable.len(), 1);
}

// ---- does not guess ----

#[test]
fn a_line_without_type_is_degraded() {
    let r = coerce(json!([start(), {"stepId": "s"}]));
    assert_eq!(one(&r, "type-missing").level, IssueLevel::Degraded);
    assert_eq!(r.malformed[0].raw, Some(json!({"stepId": "s"})));
}

#[test]
fn run_id_is_not_guessed_when_the_log_names_several_runs() {
    let mut other = env(2, "run:start", json!({}));
    other["runId"] = json!("r2");
    other["id"] = json!("x");
    let r = coerce(
        json!([start(), other, {"type": "run:done", "seq": 3, "id": "y", "at": 1, "schemaVersion": 1}]),
    );
    assert_eq!(one(&r, "run-id-ambiguous").line, 3);
}

#[test]
fn a_mistyped_field_is_degraded_not_converted() {
    let r = coerce(json!([
        start(),
        env(2, "tool:result", json!({"callId": "c", "ok": "yes"}))
    ]));
    let issue = one(&r, "invalid-payload");
    assert!(issue.message.contains("/ok"), "{}", issue.message);
}

#[test]
fn degraded_lines_keep_input_order_in_renderable() {
    let r = coerce(json!([start(), {"nothing": 1}, env(3, "run:done", json!({}))]));
    let types: Vec<&str> = r.renderable.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, vec!["run:start", MALFORMED_EVENT_TYPE, "run:done"]);
    assert_eq!(r.meta.lines, 3);
    assert_eq!(
        (r.meta.events, r.meta.degraded, r.meta.malformed),
        (2, 1, 1)
    );
}

#[test]
fn fixes_of_a_degraded_line_are_not_reported_as_made() {
    // risk would default, but the line has no summary: nothing of it is executed.
    let r = coerce(json!([
        start(),
        env(2, "approval:request", json!({"stepId": "s"}))
    ]));
    assert!(with_codes(&r, "risk-defaulted").is_empty());
    one(&r, "summary-missing");
}

#[test]
fn a_coerce_result_is_recognised() {
    let r = coerce(json!([start()]));
    let v = serde_json::to_value(&r).expect("json");
    assert!(agentwire_runlog::is_coerce_result(&v));
    assert!(!agentwire_runlog::is_coerce_result(&json!([start()])));
}

#[test]
fn a_large_ndjson_log_parsed_in_parallel_keeps_order_and_line_numbers() {
    let options = agentwire_runlog::MockRunOptions {
        step_count: 6_000,
        ..Default::default()
    };
    let events = agentwire_runlog::create_mock_run(&options);
    let mut text = String::new();
    let bad_line = events.len() * 3 / 4;
    for (i, e) in events.iter().enumerate() {
        if i + 1 == bad_line {
            text.push_str("not json\n\n");
        }
        text.push_str(&serde_json::to_string(e).expect("json"));
        text.push('\n');
    }
    assert!(
        text.len() > agentwire_runlog::coerce::PARALLEL_PARSE_MIN_BYTES,
        "{}",
        text.len()
    );
    let r = to_run_events_from_slice(text.as_bytes(), &CoerceOptions::default());
    assert_eq!(one(&r, "unparsable-line").line, bad_line);
    assert_eq!(r.into_events(), events, "every event, in order");
}

/// A container's goal with no run to give it to is kept with the container's other keys.
#[test]
fn a_container_goal_without_a_run_id_is_kept_not_dropped() {
    let r = coerce(json!({"goal": "G", "events": [start()]}));
    assert_eq!(
        serde_json::to_value(&r.malformed).expect("json"),
        json!([{"line": 0, "raw": {"goal": "G"}}])
    );
    assert_eq!(one(&r, "container-keys-kept").level, IssueLevel::Degraded);
    assert_eq!(r.meta.goal.as_deref(), Some("g"));
}

//! Run-state derivation: what a panel shows for each kind of event.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{
    Applied, ApprovalStatus, CoerceOptions, Deriver, ErrorSource, Json, PauseReason, RunEvent,
    RunStatus, StepStatus, ToolCallStatus, create_mock_event, derive_run_state, get_scenario,
    has_pending_approval, normalize, to_run_events,
};
use serde_json::{Value, json};

fn ev(seq: u64, ty: &str, payload: Value) -> RunEvent {
    create_mock_event("r", seq, 1000 + seq, ty, payload)
}

#[test]
fn a_pending_approval_pauses_the_run() {
    let state = derive_run_state(&get_scenario("approval-pending").expect("scenario"));
    assert_eq!(state.status, RunStatus::Paused);
    assert_eq!(state.paused_reason, Some(PauseReason::Approval));
    assert_eq!(state.pending_approvals, 1);
    assert!(has_pending_approval(&state, Some("step_3")));
    assert!(!has_pending_approval(&state, Some("step_1")));
    let a = &state.approvals[0];
    assert_eq!(
        (a.status, a.risk_weight, a.call_id.as_deref()),
        (ApprovalStatus::Pending, 3, Some("call_3"))
    );
    assert_eq!(state.steps_left, 1);
}

#[test]
fn a_decision_resumes_a_run_paused_for_approval() {
    let events = vec![
        ev(1, "run:start", json!({"goal": "g"})),
        ev(
            2,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a", "summary": "x", "risk": "low"}),
        ),
        ev(3, "run:paused", json!({"reason": "approval"})),
        ev(
            4,
            "approval:decision",
            json!({"approvalId": "a", "decision": "edit", "edited": {"n": 1}}),
        ),
    ];
    let state = derive_run_state(&events);
    assert_eq!(state.status, RunStatus::Running);
    assert_eq!(state.pending_approvals, 0);
    assert_eq!(state.approvals[0].status, ApprovalStatus::Edited);
    assert_eq!(
        state.approvals[0].edited.as_ref().map(Json::as_str),
        Some(r#"{"n":1}"#)
    );
}

#[test]
fn a_repeated_request_updates_the_pending_approval() {
    let events = vec![
        ev(
            1,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a", "summary": "x", "risk": "low"}),
        ),
        ev(
            2,
            "approval:request",
            json!({"stepId": "s", "approvalId": "a", "summary": "y", "risk": "high"}),
        ),
    ];
    let state = derive_run_state(&events);
    assert_eq!(state.approvals.len(), 1);
    assert_eq!(
        (
            state.approvals[0].summary.as_deref(),
            state.pending_approvals
        ),
        (Some("y"), 1)
    );
}

#[test]
fn a_retry_is_anchored_and_the_step_starts_again() {
    let state = derive_run_state(&get_scenario("retry-after-failure").expect("scenario"));
    assert_eq!(state.status, RunStatus::Done);
    assert_eq!(state.retries.len(), 1);
    assert_eq!(state.retries[0].from_event_id, "e_3");
    let step = state.step("step_1").expect("step");
    assert_eq!(
        (
            step.status,
            step.attempts,
            step.retries,
            step.error.as_ref()
        ),
        (StepStatus::Done, 2, 1, None)
    );
    let sources: Vec<ErrorSource> = state.errors.iter().map(|e| e.source).collect();
    assert_eq!(sources, vec![ErrorSource::Tool, ErrorSource::Step]);
    assert_eq!(state.errors[1].retryable, Some(true));
    assert_eq!(state.totals.failed_tool_calls, 1);
}

#[test]
fn tool_calls_pair_with_results_and_sum_totals() {
    let state = derive_run_state(&get_scenario("happy-path").expect("scenario"));
    assert_eq!(state.tool_calls.len(), 3);
    assert!(
        state
            .tool_calls
            .iter()
            .all(|c| c.status == ToolCallStatus::Ok)
    );
    assert_eq!(state.tool_calls[0].ms, Some(40.into()));
    assert_eq!(state.totals.tokens, 360);
    assert_eq!((state.steps_left, state.status), (0, RunStatus::Done));
}

#[test]
fn a_result_without_its_call_is_kept() {
    let state = derive_run_state(&[ev(
        1,
        "tool:result",
        json!({"callId": "c9", "ok": false, "error": "x"}),
    )]);
    let call = &state.tool_calls[0];
    assert_eq!(
        (call.call_id.as_str(), call.name.as_deref(), call.status),
        ("c9", None, ToolCallStatus::Error)
    );
}

#[test]
fn unknown_events_and_newer_versions_fold_with_their_raw_json() {
    let mut newer = ev(2, "step:start", json!({"stepId": "s"}));
    newer.schema_version = 2;
    let state = derive_run_state(&[ev(1, "agent:thought", json!({"text": "t"})), newer]);
    assert_eq!(state.unknown.len(), 2);
    assert_eq!(state.unknown[0].raw["text"], "t");
    assert!(
        state.steps.is_empty(),
        "a newer-version step:start is not executed"
    );
}

#[test]
fn duplicates_other_runs_and_late_events_are_reported_by_the_deriver() {
    let mut d = Deriver::new();
    assert_eq!(d.push(&ev(2, "run:start", json!({}))), Applied::Folded);
    assert_eq!(d.push(&ev(2, "run:start", json!({}))), Applied::Duplicate);
    let other = create_mock_event("r2", 3, 1, "run:done", json!({}));
    assert_eq!(d.push(&other), Applied::OtherRun);
    assert_eq!(d.push(&ev(1, "plan", json!({"steps": []}))), Applied::Late);
    let state = d.into_state();
    assert_eq!(
        (state.event_count, state.other_run_events, state.late_events),
        (2, 1, 1)
    );
}

#[test]
fn normalize_then_derive_equals_deriving_in_order() {
    let events = get_scenario("everything").expect("scenario");
    let mut shuffled: Vec<RunEvent> = events.iter().rev().cloned().collect();
    shuffled.extend(events.iter().take(5).cloned());
    assert_eq!(
        derive_run_state(&normalize(&shuffled)),
        derive_run_state(&events)
    );
}

#[test]
fn derive_from_unknown_never_fails() {
    for input in [
        json!(null),
        json!(42),
        json!("x"),
        json!([1, {"type": 3}]),
        json!({"events": 5}),
    ] {
        let state = to_run_events(input, &CoerceOptions::default()).into_state();
        assert!(state.tool_calls.is_empty());
    }
    let state = to_run_events(
        json!([{"type": "run:start", "goal": "g"}, {"type": "step:start", "stepId": "s"}]),
        &CoerceOptions::default(),
    )
    .into_state();
    assert_eq!((state.goal.as_deref(), state.steps.len()), (Some("g"), 1));
}

//! Invariants over random streams: coercing a valid stream changes nothing, `split_events`
//! partitions its input, and incremental derivation equals full derivation after every event.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{
    ApprovalOutcome, CoerceOptions, Deriver, IssueLevel, MockRunOptions, RunEvent,
    create_mock_event, create_mock_run, derive_run_state, derive_run_state_owned, is_valid_event,
    is_valid_run_event, split_events, to_run_events, to_run_events_from_slice,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One random event of a run with three steps, three calls and two approvals.
fn event_of(seq: u64, pick: (usize, usize, usize, bool)) -> RunEvent {
    let (kind, s, c, flag) = pick;
    let step = format!("s{s}");
    let call = format!("c{c}");
    let approval = format!("a{}", c % 2);
    let (ty, payload) = match kind {
        0 => ("run:start", json!({"goal": "g"})),
        1 => ("run:done", json!({"summary": "ok"})),
        2 => ("run:error", json!({"error": {"message": "x", "code": "E"}})),
        3 => (
            "run:paused",
            json!({"reason": if flag { "approval" } else { "user" }}),
        ),
        4 => (
            "plan",
            json!({"steps": [{"id": "s0", "title": "a"}, {"id": "s1", "title": "b"}]}),
        ),
        5 => ("step:start", json!({"stepId": step, "title": "t"})),
        6 => ("step:progress", json!({"stepId": step, "progress": 0.25})),
        7 => ("step:done", json!({"stepId": step})),
        8 => (
            "step:error",
            json!({"stepId": step, "error": "e", "retryable": flag}),
        ),
        9 => (
            "tool:call",
            json!({"stepId": step, "callId": call, "name": "tool", "args": {"n": s}}),
        ),
        10 => (
            "tool:result",
            json!({"callId": call, "ok": flag, "ms": 3, "tokens": 7, "cost": 0.5}),
        ),
        11 => (
            "approval:request",
            json!({"stepId": step, "approvalId": approval, "summary": "x", "risk": "high"}),
        ),
        12 => (
            "approval:decision",
            json!({"approvalId": approval, "decision": if flag { "approve" } else { "reject" }}),
        ),
        13 => (
            "retry:request",
            json!({"stepId": step, "fromEventId": "e_1", "attempt": 2}),
        ),
        _ => ("agent:thought", json!({"text": "unknown types fold"})),
    };
    create_mock_event("run_p", seq, 1000 + seq, ty, payload)
}

fn stream() -> impl Strategy<Value = Vec<RunEvent>> {
    prop::collection::vec((0usize..15, 0usize..3, 0usize..3, any::<bool>()), 0..40).prop_map(
        |picks| {
            let mut events = vec![event_of(1, (0, 0, 0, true))];
            for (i, pick) in picks.into_iter().enumerate() {
                events.push(event_of(i as u64 + 2, pick));
            }
            events
        },
    )
}

/// A stream with some events delivered twice (as after a reconnect).
fn stream_with_redeliveries() -> impl Strategy<Value = Vec<RunEvent>> {
    (
        stream(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..5),
    )
        .prop_map(|(mut events, dups)| {
            for d in dups {
                let at = d.index(events.len());
                let copy = events[at].clone();
                events.insert(at + 1, copy);
            }
            events
        })
}

fn mock_options() -> impl Strategy<Value = MockRunOptions> {
    (
        1usize..6,
        any::<bool>(),
        0usize..4,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(steps, approval, outcome, failure, unknown)| MockRunOptions {
                step_count: steps,
                with_approval: approval,
                approval_outcome: [
                    ApprovalOutcome::Approve,
                    ApprovalOutcome::Edit,
                    ApprovalOutcome::Reject,
                    ApprovalOutcome::Pending,
                ][outcome],
                with_failure: failure,
                with_unknown_event: unknown,
                ..MockRunOptions::default()
            },
        )
}

fn as_values(events: &[RunEvent]) -> Value {
    Value::Array(events.iter().map(RunEvent::to_value).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn coercing_a_valid_stream_changes_nothing(events in stream_with_redeliveries()) {
        let result = to_run_events(as_values(&events), &CoerceOptions::default());
        let out: Vec<RunEvent> = result.events().cloned().collect();
        prop_assert_eq!(&out, &events);
        prop_assert_eq!(&result.renderable, &events);
        prop_assert!(result.malformed.is_empty());
        for issue in &result.issues {
            prop_assert_eq!(issue.level, IssueLevel::Info, "{:?}", issue);
        }
    }

    #[test]
    fn coercing_a_mock_run_changes_nothing(options in mock_options()) {
        let events = create_mock_run(&options);
        let result = to_run_events(as_values(&events), &CoerceOptions::default());
        prop_assert_eq!(result.into_events(), events);
    }

    #[test]
    fn split_events_partitions_its_input(
        events in stream(),
        junk in prop::collection::vec(prop_oneof![
            Just(json!(null)), Just(json!(7)), Just(json!("text")), Just(json!({"type": "plan"})),
            Just(json!({"id": "", "runId": "r", "seq": 1, "at": 1, "schemaVersion": 1, "type": "x"})),
            Just(json!({"id": "i", "runId": "r", "seq": -1, "at": 1, "schemaVersion": 1, "type": "x"})),
            Just(json!({"id": "i", "runId": "r", "seq": 1, "at": 1, "schemaVersion": 1, "type": "tool:call"})),
        ], 0..10),
        positions in prop::collection::vec(any::<prop::sample::Index>(), 10),
    ) {
        let mut input: Vec<Value> = events.iter().map(RunEvent::to_value).collect();
        for (i, j) in junk.iter().enumerate() {
            let at = positions[i % positions.len()].index(input.len() + 1);
            input.insert(at, j.clone());
        }
        let split = split_events(Value::Array(input.clone()));
        prop_assert_eq!(split.events.len() + split.malformed.len(), input.len());
        let valid: Vec<Value> = input.iter().filter(|v| is_valid_event(v)).cloned().collect();
        let invalid: Vec<Value> = input.iter().filter(|v| !is_valid_event(v)).cloned().collect();
        prop_assert_eq!(split.events.iter().map(RunEvent::to_value).collect::<Vec<_>>(), valid);
        prop_assert_eq!(&split.malformed, &invalid);
        prop_assert_eq!(split.ok, invalid.is_empty());
    }

    #[test]
    fn incremental_derivation_equals_full_derivation_after_every_event(events in stream_with_redeliveries()) {
        let mut deriver = Deriver::new();
        for (i, event) in events.iter().enumerate() {
            deriver.push(event);
            prop_assert_eq!(deriver.state(), &derive_run_state(&events[..=i]));
        }
    }

    #[test]
    fn owned_derivation_equals_borrowed_derivation(events in stream_with_redeliveries()) {
        prop_assert_eq!(derive_run_state_owned(events.clone()), derive_run_state(&events));
    }

    #[test]
    fn coercion_keeps_every_line_and_outputs_only_valid_events(
        picks in prop::collection::vec((0usize..15, 0usize..3, 0usize..3, any::<bool>(), 0usize..8, any::<prop::sample::Index>()), 0..30),
    ) {
        // Lines of a log damaged in every way: fields removed, text cut, junk.
        const FIELDS: [&str; 8] = ["id", "runId", "seq", "at", "schemaVersion", "type", "stepId", "callId"];
        let mut text = String::new();
        let mut lines = 0usize;
        for (i, (kind, s, c, flag, damage, cut)) in picks.into_iter().enumerate() {
            let mut value = event_of(i as u64 + 1, (kind, s, c, flag)).to_value();
            let line = match damage {
                0..=3 => {
                    if let Some(map) = value.as_object_mut() {
                        map.remove(FIELDS[(damage * 2 + usize::from(flag)) % FIELDS.len()]);
                    }
                    value.to_string()
                }
                4 => {
                    let full = value.to_string();
                    let at = cut.index(full.len());
                    full.chars().take(at).collect()
                }
                5 => "[1, 2".to_owned(),
                6 => json!({"type": "approval:decision", "decision": "maybe"}).to_string(),
                _ => value.to_string(),
            };
            if line.trim().is_empty() {
                continue;
            }
            text.push_str(&line);
            text.push('\n');
            lines += 1;
        }
        let r = to_run_events_from_slice(text.as_bytes(), &CoerceOptions::default());
        prop_assert_eq!(r.meta.lines, lines);
        prop_assert_eq!(r.renderable.len(), r.meta.events + r.meta.degraded);
        prop_assert_eq!(r.meta.events + r.meta.degraded + r.meta.dropped, lines + r.meta.synthesized);
        prop_assert_eq!(r.malformed.len(), r.meta.degraded + r.meta.dropped);
        for e in &r.renderable {
            prop_assert!(is_valid_event(&e.to_value()), "renderable entry {:?}", e);
        }
        for e in r.events() {
            prop_assert!(is_valid_run_event(e), "event {:?}", e);
        }
        let state = derive_run_state(r.events());
        prop_assert!(state.event_count as usize <= r.meta.events);
    }
}

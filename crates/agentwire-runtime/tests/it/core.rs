//! The runtime core without I/O: the stored form of events, the fold and its refusals, restart
//! repairs, paging, the idempotency cache and the demo agent's commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentwire_runtime::demo::{MAX_BURST_OPERATIONS, MAX_EXPLANATION_CHARS};
use agentwire_runtime::*;
use proptest::prelude::*;
use serde_json::json;

fn at(ms: u64, event: ThreadEvent) -> StampedEvent {
    StampedEvent { at_ms: ms, event }
}

fn created() -> StampedEvent {
    at(
        1,
        ThreadEvent::ThreadCreated {
            title: Some("t".into()),
            model: None,
            parent_thread_id: None,
            alias: None,
        },
    )
}

fn started(turn: &str, text: &str) -> ThreadEvent {
    ThreadEvent::TurnStarted {
        turn_id: turn.into(),
        input: TurnInput {
            text: text.into(),
            attachments: vec![],
        },
    }
}

fn approval(id: &str, turn: &str, expires: u64) -> Interaction {
    Interaction {
        id: id.into(),
        turn_id: turn.into(),
        expires_at_ms: expires,
        ask: InteractionKind::Approval {
            approval_id: format!("approval-{id}"),
            agent_name: "demo".into(),
            tool_name: "shell".into(),
            preview: json!({"command": "ls", "explanation": "Lists files."}),
            reason: None,
        },
        binding: None,
    }
}

fn operation(id: &str) -> Operation {
    Operation {
        id: id.into(),
        tool_call_id: format!("call-{id}"),
        agent_name: "demo".into(),
        tool_name: "shell".into(),
        input: json!({"command": "ls"}),
        outcome: ToolOutcome {
            kind: OutcomeKind::Success,
            reason: None,
        },
        display: json!({"text": "ran ls"}),
        app_output: None,
    }
}

#[test]
fn events_are_stored_as_tagged_camel_case_json() {
    let event = at(
        5,
        ThreadEvent::InteractionResolved {
            interaction_id: "i1".into(),
            turn_id: None,
            approval_id: None,
            resolution: Resolution::Rejected {
                reason: Some("no".into()),
            },
            via: None,
            decision: None,
        },
    );
    let text = serde_json::to_string(&event).unwrap();
    assert_eq!(
        text,
        r#"{"atMs":5,"event":{"type":"interaction.resolved","interactionId":"i1","resolution":{"status":"rejected","reason":"no"}}}"#
    );
    let opened = at(
        6,
        ThreadEvent::InteractionOpened {
            interaction: approval("i2", "t1", 99),
        },
    );
    assert_eq!(
        serde_json::to_value(&opened).unwrap(),
        json!({"atMs": 6, "event": {"type": "interaction.opened", "interaction": {
            "id": "i2", "turnId": "t1", "expiresAtMs": 99,
            "ask": {"kind": "approval", "approvalId": "approval-i2", "agentName": "demo",
                    "toolName": "shell", "preview": {"command": "ls", "explanation": "Lists files."}}}}})
    );
    for event in [event, opened] {
        let back: StampedEvent =
            serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
        assert_eq!(back, event);
    }
    let unknown = serde_json::from_str::<StampedEvent>(
        r#"{"atMs":1,"event":{"type":"thread.created","extra":1}}"#,
    );
    assert!(unknown.is_err(), "unknown keys are refused, not dropped");
}

#[test]
fn a_turn_with_a_tool_and_an_approval_folds_into_the_snapshot_state() {
    let log = vec![
        created(),
        at(2, started("t1", "hello")),
        at(
            3,
            ThreadEvent::InteractionOpened {
                interaction: approval("i1", "t1", 500),
            },
        ),
        at(
            4,
            ThreadEvent::TurnStatusChanged {
                turn_id: "t1".into(),
                status: TurnStatus::WaitingForUser,
            },
        ),
    ];
    let mut state = ThreadState::replay(&log).unwrap();
    assert_eq!(
        state.active_turn.as_ref().unwrap().status,
        TurnStatus::WaitingForUser
    );
    assert_eq!(state.pending.len(), 1);
    assert_eq!(state.expired_interactions(499).len(), 0);
    assert_eq!(state.expired_interactions(500)[0].id, "i1");
    let rest = vec![
        at(
            5,
            ThreadEvent::InteractionResolved {
                interaction_id: "i1".into(),
                turn_id: Some("t1".into()),
                approval_id: Some("approval-i1".into()),
                resolution: Resolution::Approved,
                via: None,
                decision: None,
            },
        ),
        at(
            6,
            ThreadEvent::TurnStatusChanged {
                turn_id: "t1".into(),
                status: TurnStatus::Running,
            },
        ),
        at(
            7,
            ThreadEvent::OperationCompleted {
                turn_id: "t1".into(),
                operation: operation("o1"),
            },
        ),
        at(
            8,
            ThreadEvent::MessageCompleted {
                turn_id: "t1".into(),
                stream_id: "s1".into(),
                text: "done".into(),
            },
        ),
        at(
            9,
            ThreadEvent::TurnCompleted {
                turn_id: "t1".into(),
            },
        ),
    ];
    for event in &rest {
        state.apply(state.next_position, event).unwrap();
    }
    assert!(state.active_turn.is_none());
    assert!(state.pending.is_empty());
    assert_eq!(state.operations, vec![std::sync::Arc::new(operation("o1"))]);
    let roles: Vec<(Role, u64)> = state
        .messages
        .iter()
        .map(|m| (m.role, m.sequence))
        .collect();
    assert_eq!(roles, [(Role::User, 0), (Role::Assistant, 1)]);
    assert_eq!(
        state.messages[1].parts,
        vec![MessagePart::Text {
            text: "done".into()
        }]
    );
    assert_eq!(
        (
            state.created_at_ms,
            state.updated_at_ms,
            state.next_position
        ),
        (1, 9, 9)
    );
    let whole: Vec<StampedEvent> = log.into_iter().chain(rest).collect();
    assert_eq!(
        ThreadState::replay(&whole).unwrap(),
        state,
        "replay equals live folding"
    );
}

#[test]
fn a_restart_fails_the_running_turn_and_cancels_its_interactions() {
    let log = vec![
        created(),
        at(2, started("t1", "hi")),
        at(
            3,
            ThreadEvent::InteractionOpened {
                interaction: approval("i1", "t1", 500),
            },
        ),
        at(
            3,
            ThreadEvent::InteractionOpened {
                interaction: approval("i0", "t1", 400),
            },
        ),
    ];
    let mut state = ThreadState::replay(&log).unwrap();
    let repairs = state.repairs_after_restart();
    let kinds: Vec<&str> = repairs.iter().map(ThreadEvent::kind).collect();
    assert_eq!(
        kinds,
        [
            "interaction.resolved",
            "interaction.resolved",
            "turn.failed"
        ]
    );
    assert!(matches!(
        &repairs[2],
        ThreadEvent::TurnFailed { stage: FailStage::Execute, turn_id, .. } if turn_id == "t1"
    ));
    for event in repairs {
        state.apply(state.next_position, &at(10, event)).unwrap();
    }
    assert!(state.active_turn.is_none() && state.pending.is_empty());
    assert!(
        state.repairs_after_restart().is_empty(),
        "a second restart repairs nothing"
    );
}

#[test]
fn logs_that_do_not_fit_are_refused_with_their_code_and_leave_the_state_unchanged() {
    let base = vec![created(), at(2, started("t1", "x"))];
    let cases: Vec<(StampedEvent, &str)> = vec![
        (created(), "runtime.fold.creation"),
        (
            at(3, started("t2", "y")),
            "runtime.fold.turn-already-active",
        ),
        (
            at(
                3,
                ThreadEvent::TurnCompleted {
                    turn_id: "t9".into(),
                },
            ),
            "runtime.fold.turn-not-active",
        ),
        (
            at(
                3,
                ThreadEvent::InteractionResolved {
                    interaction_id: "nope".into(),
                    turn_id: None,
                    approval_id: None,
                    resolution: Resolution::Expired,
                    via: None,
                    decision: None,
                },
            ),
            "runtime.fold.interaction",
        ),
    ];
    for (event, code) in cases {
        let mut state = ThreadState::replay(&base).unwrap();
        let before = state.clone();
        assert_eq!(state.apply(2, &event).unwrap_err().code(), code);
        assert_eq!(state, before);
    }
    let mut state = ThreadState::replay(&base).unwrap();
    assert_eq!(
        state.apply(5, &created()).unwrap_err().code(),
        "runtime.fold.position"
    );
    let first = ThreadState::replay(&[at(1, ThreadEvent::ThreadDeleted)]).unwrap_err();
    assert_eq!(first.code(), "runtime.fold.creation");
    let deleted = vec![
        created(),
        at(2, ThreadEvent::ThreadDeleted),
        at(3, started("t", "x")),
    ];
    assert_eq!(
        ThreadState::replay(&deleted).unwrap_err().code(),
        "runtime.fold.after-deletion"
    );
}

#[test]
fn pages_are_the_newest_first_then_older_each_oldest_first() {
    let mut log = vec![created()];
    for i in 0..125 {
        let turn = format!("t{i}");
        log.push(at(2, started(&turn, &format!("m{i}"))));
        log.push(at(2, ThreadEvent::TurnCompleted { turn_id: turn }));
    }
    let state = ThreadState::replay(&log).unwrap();
    let first = state.messages_page(None, 100);
    assert_eq!(
        (
            first.items[0].sequence,
            first.items[99].sequence,
            first.next_before
        ),
        (25, 124, Some(25))
    );
    let second = state.messages_page(first.next_before, 100);
    assert_eq!(
        (
            second.items.len(),
            second.items[0].sequence,
            second.next_before
        ),
        (25, 0, None)
    );
    assert!(state.messages_page(Some(0), 100).items.is_empty());
    assert_eq!(state.operations_page(None, 100).next_before, None);
}

#[test]
fn the_idempotency_store_replays_refuses_and_evicts_only_completed_entries() {
    let limits = IdempotencyLimits {
        entries: 2,
        ..IdempotencyLimits::default()
    };
    let cache = IdempotencyStore::new(limits, Arc::new(SystemClock));
    let create = fingerprint(&[b"create", b"{}"]);
    let rename = fingerprint(&[b"rename", b"{}"]);
    let titled = fingerprint(&[b"create", b"{\"title\":1}"]);
    assert_eq!(cache.admit("roll", "r1", &create), Admission::Run);
    assert_eq!(cache.admit("roll", "r1", &create), Admission::InFlight);
    assert_eq!(cache.admit("roll", "r1", &rename), Admission::Mismatch);
    assert_eq!(
        cache.admit("other", "r1", &rename),
        Admission::Run,
        "scopes are apart"
    );
    cache.abandon("other", "r1");
    cache.complete("roll", "r1", b"10");
    assert_eq!(
        cache.admit("roll", "r1", &create),
        Admission::Replay(Arc::from(&b"10"[..]))
    );
    assert_eq!(cache.admit("roll", "r1", &titled), Admission::Mismatch);
    assert_eq!(cache.admit("roll", "long", &create), Admission::Run);
    for (id, value) in [("r2", b"20"), ("r3", b"30")] {
        assert_eq!(cache.admit("roll", id, &create), Admission::Run);
        cache.complete("roll", id, value);
    }
    assert_eq!(cache.completed_len(), 2);
    assert_eq!(
        cache.admit("roll", "r1", &create),
        Admission::Run,
        "the oldest completed entry was evicted"
    );
    assert_eq!(
        cache.admit("roll", "long", &create),
        Admission::InFlight,
        "in-flight entries are never evicted"
    );
    cache.abandon("roll", "long");
    assert_eq!(cache.admit("roll", "long", &create), Admission::Run);
}

#[test]
fn demo_commands_parse_deterministically_with_usage_for_everything_else() {
    use agentwire_runtime::demo::DemoCommand as D;
    assert_eq!(
        D::parse("hello there"),
        D::Echo {
            text: "hello there".into()
        }
    );
    assert_eq!(
        D::parse("/tool read_file {\"path\":\"a\"}"),
        D::Tool {
            name: "read_file".into(),
            input: json!({"path": "a"})
        }
    );
    assert_eq!(
        D::parse("/approve rm -rf build"),
        D::Approve {
            command: "rm -rf build".into()
        }
    );
    assert_eq!(
        D::parse("/edit src/main.rs"),
        D::Edit {
            path: "src/main.rs".into()
        }
    );
    assert_eq!(
        D::parse("/ask which one?"),
        D::Ask {
            question: "which one?".into()
        }
    );
    assert_eq!(
        D::parse("/fail plan"),
        D::Fail {
            stage: FailStage::Plan
        }
    );
    assert_eq!(D::parse("/slow 3"), D::Slow { deltas: 3 });
    assert_eq!(D::parse("/burst 100"), D::Burst { operations: 100 });
    assert_eq!(D::parse("/big 1024"), D::Big { bytes: 1024 });
    assert_eq!(D::parse("/app"), D::App);
    for (input, problem) in [
        (
            "/fail later",
            "/fail takes bootstrap, plan or execute, not \"later\"",
        ),
        (
            "/slow 0",
            "/slow N takes a whole number from 1 to 1000, not \"0\"",
        ),
        (
            "/burst many",
            &format!(
                "/burst N takes a whole number from 1 to {MAX_BURST_OPERATIONS}, not \"many\""
            ),
        ),
        ("/approve", "/approve needs an argument"),
        ("/tool", "/tool NAME JSON needs a tool name"),
        ("/nope", "unknown command /nope"),
    ] {
        assert_eq!(
            D::parse(input),
            D::Usage {
                problem: problem.into()
            },
            "{input}"
        );
    }
    assert!(
        matches!(D::parse("/tool x {bad"), D::Usage { problem } if problem.starts_with("/tool x: the input is not JSON"))
    );
    let reply = D::echo_reply("one two three");
    let deltas = D::deltas(&reply);
    assert_eq!(deltas, ["echo: ", "one ", "two ", "three"]);
    assert_eq!(deltas.concat(), reply);
    let long = D::explanation(&"x".repeat(300));
    assert_eq!(long.chars().count(), MAX_EXPLANATION_CHARS);
    assert_eq!(D::explanation("ls"), "Runs `ls` in the workspace shell.");
}

/// A generated log that a runtime could write: turns that open and resolve interactions,
/// complete operations and messages, and end one of three ways.
fn valid_log() -> impl Strategy<Value = Vec<StampedEvent>> {
    prop::collection::vec((0u8..4, 0u8..3, 0u8..3, any::<bool>()), 0..12).prop_map(|turns| {
        let mut log = vec![created()];
        let mut t = 2;
        let mut push = |log: &mut Vec<StampedEvent>, event| {
            log.push(at(t, event));
            t += 1;
        };
        for (n, (ending, interactions, operations, renamed)) in turns.into_iter().enumerate() {
            let turn = format!("turn-{n}");
            push(&mut log, started(&turn, "go"));
            for i in 0..interactions {
                let id = format!("{turn}-i{i}");
                push(
                    &mut log,
                    ThreadEvent::InteractionOpened {
                        interaction: approval(&id, &turn, 1_000),
                    },
                );
                if i % 2 == 0 {
                    push(
                        &mut log,
                        ThreadEvent::InteractionResolved {
                            turn_id: Some(turn.clone()),
                            approval_id: Some(format!("approval-{id}")),
                            interaction_id: id,
                            resolution: Resolution::Expired,
                            via: None,
                            decision: None,
                        },
                    );
                }
            }
            for o in 0..operations {
                push(
                    &mut log,
                    ThreadEvent::OperationCompleted {
                        turn_id: turn.clone(),
                        operation: operation(&format!("{turn}-o{o}")),
                    },
                );
            }
            push(
                &mut log,
                ThreadEvent::MessageCompleted {
                    turn_id: turn.clone(),
                    stream_id: "s".into(),
                    text: "ok".into(),
                },
            );
            match ending {
                0 => push(&mut log, ThreadEvent::TurnCompleted { turn_id: turn }),
                1 => push(
                    &mut log,
                    ThreadEvent::TurnCancelled {
                        turn_id: turn,
                        reason: "user".into(),
                        message: "stop".into(),
                    },
                ),
                2 => push(
                    &mut log,
                    ThreadEvent::TurnFailed {
                        turn_id: turn,
                        stage: FailStage::Plan,
                        message: "x".into(),
                    },
                ),
                // Still running when the log ends.
                _ => break,
            }
            if renamed {
                push(
                    &mut log,
                    ThreadEvent::ThreadRenamed {
                        title: format!("after {n}"),
                    },
                );
            }
        }
        log
    })
}

proptest! {
    #[test]
    fn stored_and_replayed_logs_fold_to_the_same_state(log in valid_log()) {
        let live = ThreadState::replay(&log).unwrap();
        let stored: Vec<String> = log.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
        let read: Vec<StampedEvent> = stored.iter().map(|s| serde_json::from_str(s).unwrap()).collect();
        let replayed = ThreadState::replay(&read).unwrap();
        prop_assert_eq!(&replayed, &live);
        // After a restart's repairs nothing is left running or pending, and the log still folds.
        let mut repaired = read.clone();
        repaired.extend(live.repairs_after_restart().into_iter().map(|e| at(99, e)));
        let after = ThreadState::replay(&repaired).unwrap();
        prop_assert!(after.active_turn.is_none() && after.pending.is_empty());
        prop_assert_eq!(after.messages.len(), live.messages.len());
    }
}

//! Decisions on approvals in the core, over a real SQLite log and the demo agent: each of the
//! five kinds, the grants of `acceptForTurn` (identical requests later in the turn) and
//! `acceptForSession` (later in the thread, across a restart), and every way a decision fails
//! closed: invalid, an error, a timeout, a binding that is not the pending request's, a grant
//! beyond what the request asks for, an answer after the deadline or after another one.

use std::sync::Arc;
use std::time::Duration;

use agentwire_events::EventLog;
use agentwire_runtime::*;
use serde_json::{Value, json};

use agentwire_testkit::runtime::{input, is_turn_end, until};

async fn runtime_on(dir: &tempfile::TempDir, ttl: Duration) -> Runtime {
    let path = dir.path().join("events.db");
    let log: Arc<dyn EventLog> = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let config = RuntimeConfig {
        interaction_ttl: ttl,
        ..RuntimeConfig::default()
    };
    let agent = Arc::new(DemoAgent {
        slow_interval: Duration::from_millis(5),
    });
    Runtime::start(log, agent, Arc::new(SystemClock), config)
        .await
        .unwrap()
}

fn is_opened(event: &ThreadEvent) -> bool {
    matches!(event, ThreadEvent::InteractionOpened { .. })
}

/// Waits for the next approval the agent asks a host for (one a grant does not cover) and
/// returns the binding a face presents.
async fn next_ask(runtime: &Runtime, rx: &mut Subscription, thread: &str) -> ApprovalBinding {
    loop {
        let seen = until(rx, is_opened).await;
        let Some(Published::Durable { event, .. }) = seen.last() else {
            unreachable!("until ends on a durable event")
        };
        let ThreadEvent::InteractionOpened { interaction } = &event.event else {
            unreachable!("until ends on an opened interaction")
        };
        if let Ok(binding) = runtime.approval_binding(thread, &interaction.id).await {
            return binding;
        }
    }
}

/// How each approval of the turn was settled, and each operation's outcome, once it ends.
async fn turn_end(rx: &mut Subscription) -> (Vec<(bool, Option<Via>)>, Vec<ToolOutcome>) {
    let seen = until(rx, is_turn_end).await;
    let mut settled = Vec::new();
    let mut outcomes = Vec::new();
    for published in &seen {
        if let Published::Durable { event, .. } = published {
            match &event.event {
                ThreadEvent::InteractionResolved {
                    resolution, via, ..
                } => settled.push((*resolution == Resolution::Approved, *via)),
                ThreadEvent::OperationCompleted { operation, .. } => {
                    outcomes.push(operation.outcome.clone());
                }
                _ => {}
            }
        }
    }
    (settled, outcomes)
}

fn success() -> ToolOutcome {
    ToolOutcome {
        kind: OutcomeKind::Success,
        reason: None,
    }
}

fn rejected(reason: &str) -> ToolOutcome {
    ToolOutcome {
        kind: OutcomeKind::UserRejected,
        reason: Some(reason.into()),
    }
}

async fn decide(runtime: &Runtime, binding: &ApprovalBinding, decision: Value) -> Via {
    runtime
        .decide(binding, Answer::Value(decision))
        .await
        .unwrap()
}

#[tokio::test]
async fn accept_for_turn_approves_identical_requests_of_the_turn_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/repeat 3 ls"))
        .await
        .unwrap();
    let binding = next_ask(&runtime, &mut rx, &thread).await;
    assert_eq!(binding.turn_id, "t1");
    assert_eq!(binding.policy_digest, decision::policy_digest());
    assert_eq!(
        binding.requested_permissions,
        [PermissionGrant {
            capability: "shell".into(),
            scope: format!("operation:{}", binding.operation_digest),
            expires_at: None
        }]
    );
    let via = decide(&runtime, &binding, json!({"kind": "acceptForTurn"})).await;
    assert_eq!(via, Via::AcceptForTurn);
    let (settled, outcomes) = turn_end(&mut rx).await;
    assert_eq!(
        settled,
        [
            (true, Some(Via::AcceptForTurn)),
            (true, Some(Via::TurnGrant)),
            (true, Some(Via::TurnGrant))
        ]
    );
    assert_eq!(outcomes, [success(), success(), success()]);
    // The grant ended with its turn: the next turn asks again.
    runtime
        .start_turn(&thread, "t2", input("/approve ls"))
        .await
        .unwrap();
    let again = next_ask(&runtime, &mut rx, &thread).await;
    assert_eq!(again.turn_id, "t2");
    assert_eq!(again.operation_digest, binding.operation_digest);
    assert_ne!(again.nonce, binding.nonce);
    assert_eq!(
        decide(&runtime, &again, json!({"kind": "acceptOnce"})).await,
        Via::AcceptOnce
    );
    assert_eq!(
        turn_end(&mut rx).await,
        (vec![(true, Some(Via::AcceptOnce))], vec![success()])
    );
    assert!(
        runtime
            .snapshot(&thread)
            .await
            .unwrap()
            .turn_grants
            .is_empty()
    );
}

#[tokio::test]
async fn accept_for_session_is_a_durable_grant_of_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let thread;
    {
        let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
        thread = runtime.create_thread(None, None).await.unwrap();
        let mut rx = runtime.subscribe();
        runtime
            .start_turn(&thread, "t1", input("/approve ls"))
            .await
            .unwrap();
        let binding = next_ask(&runtime, &mut rx, &thread).await;
        let scope = format!("operation:{}", binding.operation_digest);
        let grant = json!({"kind": "acceptForSession", "permissions": [{"capability": "shell", "scope": scope}]});
        assert_eq!(
            decide(&runtime, &binding, grant).await,
            Via::AcceptForSession
        );
        turn_end(&mut rx).await;
        runtime
            .start_turn(&thread, "t2", input("/repeat 2 ls"))
            .await
            .unwrap();
        let (settled, outcomes) = turn_end(&mut rx).await;
        assert_eq!(
            settled,
            [
                (true, Some(Via::SessionGrant)),
                (true, Some(Via::SessionGrant))
            ]
        );
        assert_eq!(outcomes, [success(), success()]);
        // Only identical requests: another command is asked.
        runtime
            .start_turn(&thread, "t3", input("/approve pwd"))
            .await
            .unwrap();
        let other = next_ask(&runtime, &mut rx, &thread).await;
        assert_eq!(
            decide(
                &runtime,
                &other,
                json!({"kind": "decline", "reason": "not pwd"})
            )
            .await,
            Via::Decline
        );
        assert_eq!(
            turn_end(&mut rx).await,
            (vec![(false, Some(Via::Decline))], vec![rejected("not pwd")])
        );
        runtime.log().close().await.unwrap();
    }
    // After a restart the grant still holds: it is folded from the log.
    let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
    assert_eq!(
        runtime
            .snapshot(&thread)
            .await
            .unwrap()
            .session_grants
            .len(),
        1
    );
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t4", input("/approve ls"))
        .await
        .unwrap();
    assert_eq!(
        turn_end(&mut rx).await,
        (vec![(true, Some(Via::SessionGrant))], vec![success()])
    );
}

/// How a case presents the binding and what it answers.
type Presenting = dyn Fn(&mut ApprovalBinding) -> Answer;

#[tokio::test]
async fn a_decision_that_is_not_one_or_not_bound_to_the_request_declines() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    let mut stale_nonce = None;
    let cases: Vec<(Box<Presenting>, Via, String)> = vec![
        (
            Box::new(|_| Answer::Value(json!({"kind": "acceptOnce", "permissions": []}))),
            Via::Invalid,
            "the decision is not a valid ApprovalDecision: permissions is not a field of an acceptOnce decision".into(),
        ),
        (
            Box::new(|_| Answer::Error("the dialog crashed".into())),
            Via::Error,
            "the host answered with an error: the dialog crashed".into(),
        ),
        (
            Box::new(|_| Answer::Timeout(Duration::from_millis(1500))),
            Via::Timeout,
            "no decision within 1500 ms".into(),
        ),
        (
            Box::new(|b| {
                b.operation_digest = decision::operation_digest("demo", "shell", &json!({}));
                Answer::Value(json!({"kind": "acceptOnce"}))
            }),
            Via::Binding,
            String::new(),
        ),
        (
            Box::new(|b| {
                b.nonce = "a-card-from-before".into();
                Answer::Value(json!({"kind": "acceptOnce"}))
            }),
            Via::Binding,
            String::new(),
        ),
        (
            Box::new(|_| {
                Answer::Value(json!({"kind": "acceptForSession", "permissions": [{"capability": "shell", "scope": "*"}]}))
            }),
            Via::Binding,
            "the decision grants shell on *, which the request does not ask for".into(),
        ),
    ];
    for (i, (answer, via, reason)) in cases.into_iter().enumerate() {
        runtime
            .start_turn(&thread, &format!("t{i}"), input("/approve ls"))
            .await
            .unwrap();
        let pending = next_ask(&runtime, &mut rx, &thread).await;
        let mut presented = pending.clone();
        let answer = answer(&mut presented);
        if presented.nonce != pending.nonce {
            stale_nonce = Some(pending.nonce.clone());
        }
        assert_eq!(runtime.decide(&presented, answer).await.unwrap(), via);
        let (settled, outcomes) = turn_end(&mut rx).await;
        assert_eq!(settled, [(false, Some(via))], "case {i}");
        let reason = match (i, &stale_nonce) {
            (3, _) => format!(
                "the decision is bound to operationDigest {}, and the request's is {}",
                presented.operation_digest, pending.operation_digest
            ),
            (4, Some(nonce)) => format!(
                "the decision is bound to nonce a-card-from-before, and the request's is {nonce}"
            ),
            _ => reason,
        };
        assert_eq!(outcomes, [rejected(&reason)], "case {i}");
        // The turn went on: the agent said it did not run the command.
        let state = runtime.snapshot(&thread).await.unwrap();
        let last = state.messages.last().unwrap();
        assert_eq!(
            last.parts,
            [MessagePart::Text {
                text: "Did not run `ls`.".into()
            }]
        );
    }
    // Nothing refused was kept as a grant.
    let state = runtime.snapshot(&thread).await.unwrap();
    assert!(state.session_grants.is_empty() && state.turn_grants.is_empty());
}

#[tokio::test]
async fn an_answer_after_the_deadline_or_after_another_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir, Duration::from_millis(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/approve ls"))
        .await
        .unwrap();
    let binding = next_ask(&runtime, &mut rx, &thread).await;
    let (settled, _) = turn_end(&mut rx).await;
    assert_eq!(settled, [(false, None)]);
    assert!(matches!(
        runtime
            .decide(&binding, Answer::Value(json!({"kind": "acceptOnce"})))
            .await,
        Err(RuntimeError::InteractionNotFound(_))
    ));

    let runtime = runtime_on(&tempfile::tempdir().unwrap(), Duration::from_secs(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/approve ls"))
        .await
        .unwrap();
    let binding = next_ask(&runtime, &mut rx, &thread).await;
    assert_eq!(
        decide(&runtime, &binding, json!({"kind": "cancel"})).await,
        Via::Cancel
    );
    assert!(matches!(
        runtime
            .decide(&binding, Answer::Value(json!({"kind": "acceptOnce"})))
            .await,
        Err(RuntimeError::InteractionNotFound(_))
    ));
    assert_eq!(
        turn_end(&mut rx).await,
        (
            vec![(false, Some(Via::Cancel))],
            vec![rejected("the host chose cancel")]
        )
    );
}

#[tokio::test]
async fn an_approve_or_reject_is_recorded_as_accept_once_or_decline() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    for (i, (resolution, via)) in [
        (Resolution::Approved, Via::AcceptOnce),
        (Resolution::Rejected { reason: None }, Via::Decline),
    ]
    .into_iter()
    .enumerate()
    {
        runtime
            .start_turn(&thread, &format!("t{i}"), input("/approve ls"))
            .await
            .unwrap();
        let binding = next_ask(&runtime, &mut rx, &thread).await;
        let approved = resolution == Resolution::Approved;
        runtime
            .resolve(&thread, &binding.item_id, resolution)
            .await
            .unwrap();
        assert_eq!(turn_end(&mut rx).await.0, [(approved, Some(via))]);
    }
}

/// A session grant whose permission the host bounded with `expiresAt` is not remembered: the
/// next identical request is asked again, never approved past the end the host set.
#[tokio::test]
async fn a_session_grant_with_an_end_is_asked_again_rather_than_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_on(&dir, Duration::from_secs(300)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/approve ls"))
        .await
        .unwrap();
    let binding = next_ask(&runtime, &mut rx, &thread).await;
    let scope = format!("operation:{}", binding.operation_digest);
    let grant = json!({"kind": "acceptForSession", "permissions": [
        {"capability": "shell", "scope": scope, "expiresAt": "2000-01-01T00:00:00Z"}]});
    assert_eq!(
        decide(&runtime, &binding, grant).await,
        Via::AcceptForSession
    );
    assert_eq!(
        turn_end(&mut rx).await.0,
        [(true, Some(Via::AcceptForSession))]
    );
    runtime
        .start_turn(&thread, "t2", input("/approve ls"))
        .await
        .unwrap();
    let binding = next_ask(&runtime, &mut rx, &thread).await;
    assert_eq!(
        decide(&runtime, &binding, json!({"kind": "acceptOnce"})).await,
        Via::AcceptOnce
    );
    assert_eq!(turn_end(&mut rx).await.0, [(true, Some(Via::AcceptOnce))]);
}

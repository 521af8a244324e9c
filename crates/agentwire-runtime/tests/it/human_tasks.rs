//! Durable human tasks through the core over a real SQLite log: opened by the demo agent's
//! `/review`, decided with their binding checked, settled once, cancelled, expired by the
//! runtime's clock, and kept across a restart with a new nonce.

use std::sync::Arc;
use std::time::Duration;

use agentwire_events::EventLog;
use agentwire_runtime::*;

use agentwire_testkit::runtime::{input, is_turn_end, until};

const NOW: u64 = 1_700_000_000_000;

async fn open_log(dir: &tempfile::TempDir) -> Arc<dyn EventLog> {
    let path = dir.path().join("events.db");
    agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap()
}

async fn start(dir: &tempfile::TempDir, clock: Arc<ManualClock>) -> Runtime {
    Runtime::start(
        open_log(dir).await,
        Arc::new(DemoAgent::default()),
        clock,
        RuntimeConfig::default(),
    )
    .await
    .unwrap()
}

/// Starts `/review …` and waits until its task is open; returns the thread and the task.
async fn review(runtime: &Runtime, command: &str) -> (String, HumanTaskState) {
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "turn-1", input(command))
        .await
        .unwrap();
    until(&mut rx, |e| {
        matches!(e, ThreadEvent::HumanTaskOpened { .. })
    })
    .await;
    let task = runtime.human_tasks(&thread).await.unwrap().remove(0);
    (thread, task)
}

fn answer(task: &HumanTaskState, actor: &str, decision: Decision) -> HumanTaskAnswer {
    HumanTaskAnswer {
        task_id: task.task.id.clone(),
        run_id: task.task.turn_id.clone(),
        revision_digest: task.task.revision_digest.clone(),
        operation_digest: task.task.operation_digest.clone(),
        nonce: task.task.nonce.clone(),
        actor_id: actor.to_owned(),
        decision,
    }
}

fn approve() -> Decision {
    Decision::of(DecisionKind::AcceptOnce)
}

async fn turn_end(runtime: &Runtime, thread: &str) -> ThreadEvent {
    let mut rx = runtime.subscribe_thread(thread).await.unwrap();
    if runtime
        .snapshot(thread)
        .await
        .unwrap()
        .active_turn
        .is_none()
    {
        let page = runtime
            .stored_events(thread, 0, agentwire_events::MAX_PAGE_EVENTS)
            .await
            .unwrap();
        return page
            .events
            .iter()
            .rev()
            .map(|s| {
                serde_json::from_slice::<StampedEvent>(&s.payload)
                    .unwrap()
                    .event
            })
            .find(is_turn_end)
            .unwrap();
    }
    let seen = tokio::time::timeout(Duration::from_secs(20), until(&mut rx, is_turn_end))
        .await
        .expect("the turn ends");
    match seen.last() {
        Some(Published::Durable { event, .. }) => event.event.clone(),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn an_approval_settles_the_task_once_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
    let (thread, task) = review(&runtime, "/review").await;
    assert_eq!(task.status, HumanTaskStatus::Open);
    assert_eq!(task.task.quorum, 1);
    assert!(task.task.operation_digest.starts_with("sha256:"));
    let decided = runtime
        .decide_human_task(&thread, answer(&task, "reviewer-1", approve()))
        .await
        .unwrap();
    assert_eq!(decided.status, HumanTaskStatus::Decided);
    assert_eq!(decided.node_status(), "pending");
    let again = runtime
        .decide_human_task(&thread, answer(&task, "reviewer-1", approve()))
        .await
        .unwrap_err();
    assert_eq!(again.code(), "runtime.human-task-settled");
    assert!(matches!(
        turn_end(&runtime, &thread).await,
        ThreadEvent::TurnCompleted { .. }
    ));
    let task = runtime.human_task(&thread, &task.task.id).await.unwrap();
    assert_eq!(task.decisions.len(), 1);
}

#[tokio::test]
async fn a_mismatched_binding_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
    let (thread, task) = review(&runtime, "/review").await;
    type Spoil = fn(&mut HumanTaskAnswer);
    let cases: [(&str, Spoil); 4] = [
        ("runId", |a| a.run_id = "other".into()),
        ("revisionDigest", |a| a.revision_digest = "sha256:00".into()),
        ("operationDigest", |a| {
            a.operation_digest = "sha256:00".into()
        }),
        ("nonce", |a| a.nonce = "stale".into()),
    ];
    for (field, spoil) in cases {
        let mut wrong = answer(&task, "reviewer-1", approve());
        spoil(&mut wrong);
        match runtime.decide_human_task(&thread, wrong).await {
            Err(RuntimeError::HumanTaskBinding { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    let mut unknown = answer(&task, "reviewer-1", approve());
    unknown.task_id = "nope".into();
    assert_eq!(
        runtime
            .decide_human_task(&thread, unknown)
            .await
            .unwrap_err()
            .code(),
        "runtime.human-task-not-found"
    );
    // Nothing was recorded: the task is still open.
    assert!(
        runtime
            .human_task(&thread, &task.task.id)
            .await
            .unwrap()
            .is_open()
    );
}

#[tokio::test]
async fn a_decline_short_circuits_the_quorum_and_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
    let (thread, task) = review(&runtime, "/review quorum=2 sod").await;
    let decided = runtime
        .decide_human_task(
            &thread,
            answer(&task, "reviewer-1", Decision::decline("no")),
        )
        .await
        .unwrap();
    assert_eq!(decided.status, HumanTaskStatus::Decided);
    assert_eq!(decided.node_status(), "failed");
    match turn_end(&runtime, &thread).await {
        ThreadEvent::TurnFailed { message, .. } => {
            assert!(message.contains("declined by reviewer-1"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn separation_of_duties_refuses_a_repeat_actor() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
    let (thread, task) = review(&runtime, "/review quorum=2 sod hold").await;
    runtime
        .decide_human_task(&thread, answer(&task, "reviewer-1", approve()))
        .await
        .unwrap();
    assert_eq!(
        runtime
            .decide_human_task(&thread, answer(&task, "reviewer-1", approve()))
            .await
            .unwrap_err()
            .code(),
        "runtime.human-task-repeat-actor"
    );
    let decided = runtime
        .decide_human_task(&thread, answer(&task, "reviewer-2", approve()))
        .await
        .unwrap();
    assert_eq!(decided.status, HumanTaskStatus::Decided);
    assert_eq!(decided.decisions.len(), 2);
    // `hold`: the turn is still running with its step pending.
    assert!(
        runtime
            .snapshot(&thread)
            .await
            .unwrap()
            .active_turn
            .is_some()
    );
}

#[tokio::test]
async fn a_cancel_beats_a_late_decision_and_cancels_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
    let (thread, task) = review(&runtime, "/review").await;
    let cancelled = runtime
        .cancel_human_task(&thread, &task.task.id, "withdrawn")
        .await
        .unwrap();
    assert_eq!(cancelled.status, HumanTaskStatus::Cancelled);
    assert_eq!(
        runtime
            .decide_human_task(&thread, answer(&task, "reviewer-1", approve()))
            .await
            .unwrap_err()
            .code(),
        "runtime.human-task-settled"
    );
    assert!(matches!(
        turn_end(&runtime, &thread).await,
        ThreadEvent::TurnCancelled { .. }
    ));
}

#[tokio::test]
async fn the_deadline_expires_an_undecided_task_and_the_turn_fails() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let runtime = start(&dir, Arc::clone(&clock)).await;
    let (thread, task) = review(&runtime, "/review").await;
    clock.advance(5 * 60 * 1000);
    assert!(matches!(
        turn_end(&runtime, &thread).await,
        ThreadEvent::TurnFailed { .. }
    ));
    let task = runtime.human_task(&thread, &task.task.id).await.unwrap();
    assert_eq!(task.status, HumanTaskStatus::Expired);
}

#[tokio::test]
async fn a_restart_keeps_the_task_with_a_new_nonce_and_runs_the_turn_again() {
    let dir = tempfile::tempdir().unwrap();
    let (thread, before) = {
        let runtime = start(&dir, Arc::new(ManualClock::new(NOW))).await;
        review(&runtime, "/review hold").await
    };
    let runtime = start(&dir, Arc::new(ManualClock::new(NOW + 10))).await;
    let after = runtime.human_task(&thread, &before.task.id).await.unwrap();
    assert!(after.is_open());
    assert_ne!(after.task.nonce, before.task.nonce, "reissued");
    assert!(
        runtime
            .snapshot(&thread)
            .await
            .unwrap()
            .active_turn
            .is_some()
    );
    // A card issued before the restart carries the old nonce.
    match runtime
        .decide_human_task(&thread, answer(&before, "reviewer-1", approve()))
        .await
    {
        Err(RuntimeError::HumanTaskBinding { field, .. }) => assert_eq!(field, "nonce"),
        other => panic!("{other:?}"),
    }
    let decided = runtime
        .decide_human_task(&thread, answer(&after, "reviewer-1", approve()))
        .await
        .unwrap();
    assert_eq!(decided.status, HumanTaskStatus::Decided);
    // The resumed turn learns it and holds, running.
    runtime.cancel_turn(&thread, "turn-1").await.unwrap();
    assert!(matches!(
        turn_end(&runtime, &thread).await,
        ThreadEvent::TurnCancelled { .. }
    ));
}

#[test]
fn the_fold_refuses_a_decision_on_a_settled_task_and_keeps_old_checkpoints_readable() {
    let task = HumanTask {
        id: "h".into(),
        turn_id: "t".into(),
        node_id: "review".into(),
        attempt_id: "t:review:1".into(),
        revision_digest: "sha256:r".into(),
        operation_digest: "sha256:o".into(),
        operation: serde_json::json!({}),
        nonce: "n".into(),
        expires_at_ms: 10,
        quorum: 1,
        separation_of_duties: false,
    };
    let events = [
        ThreadEvent::ThreadCreated {
            title: None,
            model: None,
            parent_thread_id: None,
            alias: None,
        },
        ThreadEvent::TurnStarted {
            turn_id: "t".into(),
            input: input("/review"),
        },
        ThreadEvent::HumanTaskOpened { task },
        ThreadEvent::HumanTaskDecided {
            task_id: "h".into(),
            turn_id: "t".into(),
            actor_id: "a".into(),
            decision: Decision::of(DecisionKind::AcceptOnce),
        },
    ];
    let stamped: Vec<StampedEvent> = events
        .into_iter()
        .map(|event| StampedEvent { at_ms: 1, event })
        .collect();
    let mut state = ThreadState::replay(&stamped).unwrap();
    assert_eq!(state.human_tasks["h"].status, HumanTaskStatus::Decided);
    let late = StampedEvent {
        at_ms: 2,
        event: ThreadEvent::HumanTaskDecided {
            task_id: "h".into(),
            turn_id: "t".into(),
            actor_id: "b".into(),
            decision: Decision::of(DecisionKind::AcceptOnce),
        },
    };
    let error = state.apply(state.next_position, &late).unwrap_err();
    assert_eq!(error.code(), "runtime.fold.human-task");
    // The state round-trips through its checkpoint form; one without tasks reads as before.
    let text = serde_json::to_string(&state).unwrap();
    assert_eq!(serde_json::from_str::<ThreadState>(&text).unwrap(), state);
    let empty = ThreadState::replay(&stamped[..2]).unwrap();
    assert!(
        !serde_json::to_string(&empty)
            .unwrap()
            .contains("humanTasks")
    );
}

#[test]
fn review_reads_its_quorum_separation_of_duties_and_hold() {
    assert_eq!(
        DemoCommand::parse("/review"),
        DemoCommand::Review {
            quorum: 1,
            separation_of_duties: false,
            hold: false
        }
    );
    assert_eq!(
        DemoCommand::parse("/review quorum=2 sod hold"),
        DemoCommand::Review {
            quorum: 2,
            separation_of_duties: true,
            hold: true
        }
    );
    for bad in ["/review quorum=0", "/review quorum=65", "/review maybe"] {
        assert!(
            matches!(DemoCommand::parse(bad), DemoCommand::Usage { .. }),
            "{bad}"
        );
    }
}

/// An agent that resumes turns and goes on whatever its task's outcome. `hang` stands for a
/// process that stops after the decline committed and before the turn's end did.
#[derive(Debug)]
struct GoesOn {
    hang: bool,
}

/// The human task the tests' agents open: a gate on `deploy`.
fn gate() -> HumanTaskSpec {
    HumanTaskSpec {
        node_id: "gate".into(),
        operation: serde_json::json!({"tool": "deploy"}),
        quorum: 1,
        separation_of_duties: false,
    }
}

#[async_trait::async_trait]
impl Agent for GoesOn {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        let _outcome = turn.human_task(gate()).await;
        if self.hang {
            std::future::pending::<()>().await;
        }
        TurnEnd::Completed
    }
    fn resumes_turns(&self) -> bool {
        true
    }
}

async fn start_with(dir: &tempfile::TempDir, agent: Arc<dyn Agent>) -> Runtime {
    Runtime::start(
        open_log(dir).await,
        agent,
        Arc::new(ManualClock::new(NOW)),
        RuntimeConfig::default(),
    )
    .await
    .unwrap()
}

/// A decline fails its turn whatever the agent returns, also when the runtime stopped between
/// the decline's commit and the turn's end: the turn run again after the restart is failed.
#[tokio::test]
async fn a_decline_still_fails_the_turn_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let thread = {
        let runtime = start_with(&dir, Arc::new(GoesOn { hang: true })).await;
        let (thread, task) = review(&runtime, "anything").await;
        runtime
            .decide_human_task(
                &thread,
                answer(&task, "reviewer-1", Decision::decline("no")),
            )
            .await
            .unwrap();
        thread
    };
    // The process stops here, before the turn's end is recorded; a new one starts.
    let runtime = start_with(&dir, Arc::new(GoesOn { hang: false })).await;
    match turn_end(&runtime, &thread).await {
        ThreadEvent::TurnFailed { .. } => {}
        other => panic!("a declined turn ended {other:?}"),
    }
}

/// An agent that, once its turn is cancelled, still asks for an approval and opens a human
/// task before it returns.
#[derive(Debug)]
struct AsksWhileCancelling;

#[async_trait::async_trait]
impl Agent for AsksWhileCancelling {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        turn.cancelled().await;
        let asked = turn.ask(crate::shell_approval()).await.unwrap();
        assert!(matches!(asked, Resolution::Cancelled { .. }), "{asked:?}");
        let _outcome = turn.human_task(gate()).await;
        TurnEnd::Completed
    }
}

/// A turn being cancelled stays `cancelling` when its agent asks or opens a human task: the
/// turn is never shown waiting for a user it no longer waits for, and ends cancelled.
#[tokio::test]
async fn an_ask_or_a_task_while_cancelling_leaves_the_turn_cancelling() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = start_with(&dir, Arc::new(AsksWhileCancelling)).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "turn-1", input("go"))
        .await
        .unwrap();
    runtime.cancel_turn(&thread, "turn-1").await.unwrap();
    until(&mut rx, is_turn_end).await;
    let page = runtime
        .stored_events(&thread, 0, agentwire_events::MAX_PAGE_EVENTS)
        .await
        .unwrap();
    let statuses: Vec<TurnStatus> = page
        .events
        .iter()
        .filter_map(|stored| {
            let stamped: StampedEvent = serde_json::from_slice(&stored.payload).unwrap();
            match stamped.event {
                ThreadEvent::TurnStatusChanged { status, .. } => Some(status),
                _ => None,
            }
        })
        .collect();
    assert!(
        !statuses.contains(&TurnStatus::WaitingForUser),
        "{statuses:?}"
    );
    assert!(matches!(
        turn_end(&runtime, &thread).await,
        ThreadEvent::TurnCancelled { .. }
    ));
}

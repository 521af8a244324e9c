//! The running core over a real SQLite event log: turns of each demo command, approvals approved,
//! rejected, expired and cancelled, user input, cancellation, a crashing agent, publication only
//! after commit, and a restart that ends what the stop interrupted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentwire_events::{After, EventLog, ThreadId};
use agentwire_runtime::*;
use async_trait::async_trait;
use serde_json::json;

use agentwire_testkit::runtime::{input, is_turn_end, until};

/// A bound on how long a test waits for an event, so a bug fails instead of hanging.
const WAIT: Duration = Duration::from_secs(20);

async fn open_log(dir: &tempfile::TempDir) -> Arc<dyn EventLog> {
    let path = dir.path().join("events.db");
    agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap()
}

async fn runtime_with(log: Arc<dyn EventLog>, agent: Arc<dyn Agent>, ttl: Duration) -> Runtime {
    let config = RuntimeConfig {
        interaction_ttl: ttl,
        ..RuntimeConfig::default()
    };
    Runtime::start(log, agent, Arc::new(SystemClock), config)
        .await
        .unwrap()
}

async fn demo_runtime(dir: &tempfile::TempDir) -> Runtime {
    runtime_with(
        open_log(dir).await,
        Arc::new(DemoAgent {
            slow_interval: Duration::from_millis(5),
        }),
        Duration::from_secs(300),
    )
    .await
}

fn durable_kinds(seen: &[Published]) -> Vec<&'static str> {
    seen.iter()
        .filter_map(|p| match p {
            Published::Durable { event, .. } => Some(event.event.kind()),
            Published::Live { .. } => None,
        })
        .collect()
}

fn durable(seen: &[Published]) -> Vec<&ThreadEvent> {
    seen.iter()
        .filter_map(|p| match p {
            Published::Durable { event, .. } => Some(&event.event),
            Published::Live { .. } => None,
        })
        .collect()
}

fn opened_interaction(seen: &[Published]) -> Interaction {
    durable(seen)
        .into_iter()
        .find_map(|e| match e {
            ThreadEvent::InteractionOpened { interaction } => Some(interaction.clone()),
            _ => None,
        })
        .expect("an interaction was opened")
}

#[tokio::test]
async fn an_echo_turn_streams_deltas_then_records_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    let thread = runtime
        .create_thread(Some("demo".into()), None)
        .await
        .unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("hello world"))
        .await
        .unwrap();
    let seen = until(&mut rx, is_turn_end).await;
    assert_eq!(
        durable_kinds(&seen),
        ["turn.started", "message.completed", "turn.completed"]
    );
    let deltas: Vec<String> = seen
        .iter()
        .filter_map(|p| match p {
            Published::Live {
                event: LiveEvent::MessageDelta { delta, .. },
                ..
            } => Some(delta.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["echo: ", "hello ", "world"]);
    let state = runtime.snapshot(&thread).await.unwrap();
    let texts: Vec<&MessagePart> = state.messages.iter().flat_map(|m| &m.parts).collect();
    assert_eq!(
        texts,
        [
            &MessagePart::Text {
                text: "hello world".into()
            },
            &MessagePart::Text {
                text: "echo: hello world".into()
            }
        ]
    );
    assert!(state.active_turn.is_none());
}

#[tokio::test]
async fn every_durable_event_is_in_the_log_when_it_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/burst 20"))
        .await
        .unwrap();
    let log = Arc::clone(runtime.log());
    let id = ThreadId::new(thread.clone()).unwrap();
    let mut durable = 0;
    tokio::time::timeout(WAIT, async {
        loop {
            if let Published::Durable {
                seq,
                event_id,
                event,
                ..
            } = rx.recv().await.unwrap()
            {
                // Read at the moment of publication: the commit came first.
                let after = match seq.checked_sub(1) {
                    None => After::Start,
                    Some(prev) => After::Position(agentwire_events::Position {
                        log_id: log.log_id(),
                        seq: prev,
                    }),
                };
                let page = log.read(&id, after, 1).await.unwrap();
                assert_eq!(page.events[0].seq, seq);
                assert_eq!(page.events[0].event_id, event_id);
                durable += 1;
                if is_turn_end(&event.event) {
                    break;
                }
            }
        }
    })
    .await
    .unwrap();
    // turn.started, 20 operations, the reply, turn.completed.
    assert_eq!(durable, 23);
    assert_eq!(
        runtime.snapshot(&thread).await.unwrap().operations.len(),
        20
    );
}

#[tokio::test]
async fn approvals_approved_rejected_and_expired_decide_the_tool_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    for (n, (resolution, outcome)) in [
        (Some(Resolution::Approved), OutcomeKind::Success),
        (
            Some(Resolution::Rejected {
                reason: Some("no".into()),
            }),
            OutcomeKind::UserRejected,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let thread = runtime.create_thread(None, None).await.unwrap();
        let mut rx = runtime.subscribe();
        let turn = format!("t{n}");
        runtime
            .start_turn(&thread, &turn, input("/approve ls -la"))
            .await
            .unwrap();
        let opened = until(&mut rx, |e| {
            matches!(
                e,
                ThreadEvent::TurnStatusChanged {
                    status: TurnStatus::WaitingForUser,
                    ..
                }
            )
        })
        .await;
        let interaction = opened_interaction(&opened);
        match &interaction.ask {
            InteractionKind::Approval {
                preview, tool_name, ..
            } => {
                assert_eq!(tool_name, "shell");
                assert_eq!(preview["command"], "ls -la");
                assert_eq!(
                    preview["explanation"],
                    "Runs `ls -la` in the workspace shell."
                );
            }
            other => panic!("{other:?}"),
        }
        let waiting = runtime.snapshot(&thread).await.unwrap();
        assert_eq!(
            waiting.active_turn.unwrap().status,
            TurnStatus::WaitingForUser
        );
        assert!(waiting.pending.contains_key(&interaction.id));
        runtime
            .resolve(&thread, &interaction.id, resolution.unwrap())
            .await
            .unwrap();
        // A second answer to the same interaction is refused: exactly once.
        let again = runtime
            .resolve(&thread, &interaction.id, Resolution::Approved)
            .await;
        assert_eq!(again.unwrap_err().code(), "runtime.interaction-not-found");
        until(&mut rx, is_turn_end).await;
        let state = runtime.snapshot(&thread).await.unwrap();
        assert_eq!(state.operations[0].outcome.kind, outcome);
        assert!(state.pending.is_empty());
    }
}

#[tokio::test]
async fn an_unanswered_approval_expires_and_the_turn_goes_on_without_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_with(
        open_log(&dir).await,
        Arc::new(DemoAgent::default()),
        Duration::from_millis(200),
    )
    .await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/approve rm -rf /"))
        .await
        .unwrap();
    let seen = until(&mut rx, is_turn_end).await;
    let resolved = durable(&seen).into_iter().find_map(|e| match e {
        ThreadEvent::InteractionResolved { resolution, .. } => Some(resolution.clone()),
        _ => None,
    });
    assert_eq!(resolved, Some(Resolution::Expired));
    assert_eq!(durable_kinds(&seen).last(), Some(&"turn.completed"));
    let state = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(
        state.operations[0].outcome,
        ToolOutcome {
            kind: OutcomeKind::UserRejected,
            reason: Some("the approval expired".into())
        }
    );
}

#[tokio::test]
async fn a_submitted_form_is_quoted_and_a_cancelled_turn_ends_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/ask Which color?"))
        .await
        .unwrap();
    let seen = until(&mut rx, |e| {
        matches!(
            e,
            ThreadEvent::TurnStatusChanged {
                status: TurnStatus::WaitingForUser,
                ..
            }
        )
    })
    .await;
    let form = opened_interaction(&seen);
    let values = json!([{"id": "answer", "value": "blue"}, {"id": "confidence", "value": "sure"}]);
    runtime
        .resolve(&thread, &form.id, Resolution::Submitted { values })
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
    let state = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(
        state.messages.last().unwrap().parts,
        vec![MessagePart::Text {
            text: "You answered: answer=\"blue\", confidence=\"sure\"".into()
        }]
    );

    runtime
        .start_turn(&thread, "t2", input("/ask Still there?"))
        .await
        .unwrap();
    until(&mut rx, |e| {
        matches!(
            e,
            ThreadEvent::TurnStatusChanged {
                status: TurnStatus::WaitingForUser,
                ..
            }
        )
    })
    .await;
    assert!(runtime.cancel_turn(&thread, "t2").await.unwrap());
    let seen = until(&mut rx, is_turn_end).await;
    assert_eq!(durable_kinds(&seen).last(), Some(&"turn.cancelled"));
    let state = runtime.snapshot(&thread).await.unwrap();
    assert!(state.active_turn.is_none() && state.pending.is_empty());
    assert_eq!(
        runtime.cancel_turn(&thread, "t2").await.unwrap_err().code(),
        "runtime.turn-not-found"
    );
}

#[tokio::test]
async fn one_active_turn_per_thread_and_failures_at_the_asked_stage() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/slow 50"))
        .await
        .unwrap();
    let busy = runtime
        .start_turn(&thread, "t2", input("hi"))
        .await
        .unwrap_err();
    assert_eq!(busy.code(), "runtime.turn-already-active");
    until(&mut rx, is_turn_end).await;
    runtime
        .start_turn(&thread, "t3", input("/fail plan"))
        .await
        .unwrap();
    let seen = until(&mut rx, is_turn_end).await;
    assert!(durable(&seen).into_iter().any(|e| matches!(
        e,
        ThreadEvent::TurnFailed {
            stage: FailStage::Plan,
            ..
        }
    )));
    assert_eq!(
        runtime
            .start_turn("nope", "t", input("x"))
            .await
            .unwrap_err()
            .code(),
        "runtime.thread-not-found"
    );
}

#[derive(Debug)]
struct PanickingAgent;

#[async_trait]
impl Agent for PanickingAgent {
    async fn run_turn(&self, _turn: TurnContext) -> TurnEnd {
        panic!("the agent broke");
    }
}

#[tokio::test]
async fn an_agent_that_panics_fails_only_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_with(
        open_log(&dir).await,
        Arc::new(PanickingAgent),
        Duration::from_secs(1),
    )
    .await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime.start_turn(&thread, "t1", input("x")).await.unwrap();
    let seen = until(&mut rx, is_turn_end).await;
    assert!(durable(&seen).into_iter().any(|e| matches!(e, ThreadEvent::TurnFailed { stage: FailStage::Execute, message, .. } if message == "the agent stopped unexpectedly")));
    runtime
        .start_turn(&thread, "t2", input("again"))
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
}

#[tokio::test]
async fn a_deletion_interrupted_before_its_events_were_removed_is_finished_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let thread = {
        let runtime = demo_runtime(&dir).await;
        let thread = runtime.create_thread(None, None).await.unwrap();
        // The deletion committed, then the stop: the events are still there.
        let log_thread = ThreadId::new(thread.clone()).unwrap();
        let payload = serde_json::to_vec(&StampedEvent {
            at_ms: 1,
            event: ThreadEvent::ThreadDeleted,
        })
        .unwrap();
        runtime
            .log()
            .append(
                &log_thread,
                agentwire_events::Expected::Next(1),
                vec![agentwire_events::NewEvent::new("thread.deleted", payload)],
            )
            .await
            .unwrap();
        runtime.log().close().await.unwrap();
        thread
    };
    let runtime = demo_runtime(&dir).await;
    assert!(runtime.thread_ids().is_empty());
    let info = runtime
        .log()
        .thread(&ThreadId::new(thread).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(info.deleted);
}

#[tokio::test]
async fn a_restart_brings_threads_back_and_ends_what_the_stop_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (thread, deleted, first_instance, before) = {
        let runtime = demo_runtime(&dir).await;
        let thread = runtime
            .create_thread(Some("kept".into()), None)
            .await
            .unwrap();
        let deleted = runtime.create_thread(None, None).await.unwrap();
        runtime.delete_thread(&deleted).await.unwrap();
        let mut rx = runtime.subscribe();
        runtime
            .start_turn(&thread, "t1", input("/approve make"))
            .await
            .unwrap();
        until(&mut rx, |e| {
            matches!(
                e,
                ThreadEvent::TurnStatusChanged {
                    status: TurnStatus::WaitingForUser,
                    ..
                }
            )
        })
        .await;
        let before = runtime.snapshot(&thread).await.unwrap();
        runtime.log().close().await.unwrap();
        (thread, deleted, runtime.instance_id().to_owned(), before)
    };
    assert_eq!(before.pending.len(), 1);
    let runtime = demo_runtime(&dir).await;
    assert_ne!(runtime.instance_id(), first_instance);
    assert_eq!(runtime.thread_ids(), std::slice::from_ref(&thread));
    assert_eq!(
        runtime.snapshot(&deleted).await.unwrap_err().code(),
        "runtime.thread-not-found"
    );
    // The deleted thread's events are gone from the log; its tombstone stays.
    let deleted_log = ThreadId::new(deleted.clone()).unwrap();
    assert!(
        runtime
            .log()
            .thread(&deleted_log)
            .await
            .unwrap()
            .unwrap()
            .deleted
    );
    assert!(matches!(
        runtime.log().read(&deleted_log, After::Start, 10).await,
        Err(agentwire_events::Error::ThreadDeleted { .. })
    ));
    let state = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(state.title.as_deref(), Some("kept"));
    assert!(state.active_turn.is_none() && state.pending.is_empty());
    assert_eq!(state.messages, before.messages);
    let log = runtime.log();
    let page = log
        .read(&ThreadId::new(thread.clone()).unwrap(), After::Start, 100)
        .await
        .unwrap();
    let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["interaction.resolved", "turn.failed"]
    );
    let last: StampedEvent = serde_json::from_slice(&page.events.last().unwrap().payload).unwrap();
    assert!(matches!(
        last.event,
        ThreadEvent::TurnFailed {
            stage: FailStage::Execute,
            ..
        }
    ));
    // The thread serves turns again.
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t2", input("back"))
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
}

/// Waits until the thread's checkpoint covers at least `events` events.
async fn checkpoint_covering(
    log: &dyn EventLog,
    thread: &str,
    events: u64,
) -> agentwire_events::Checkpoint {
    let thread = ThreadId::new(thread).unwrap();
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(checkpoint) = log.checkpoint(&thread).await.unwrap()
                && checkpoint.through + 1 >= events
            {
                return checkpoint;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the checkpoint is written")
}

#[tokio::test]
async fn a_thread_trimmed_after_its_checkpoint_comes_back_whole_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let bursts = CHECKPOINT_EVERY_EVENTS + 50;
    let (thread, before) = {
        let runtime = demo_runtime(&dir).await;
        let thread = runtime
            .create_thread(Some("long".into()), None)
            .await
            .unwrap();
        let mut rx = runtime.subscribe();
        runtime
            .start_turn(&thread, "t1", input(&format!("/burst {bursts}")))
            .await
            .unwrap();
        until(&mut rx, |e| matches!(e, ThreadEvent::TurnCompleted { .. })).await;
        let before = runtime.snapshot(&thread).await.unwrap();
        let checkpoint =
            checkpoint_covering(&**runtime.log(), &thread, CHECKPOINT_EVERY_EVENTS).await;
        assert!(checkpoint.through < before.next_position);
        // Everything up to the checkpoint goes, and some events after it stay.
        let retention = agentwire_events::Retention {
            max_records: before.next_position - checkpoint.through - 1,
            ..agentwire_events::Retention::default()
        };
        let done = runtime
            .log()
            .trim(
                &ThreadId::new(thread.clone()).unwrap(),
                &retention,
                std::time::SystemTime::now(),
            )
            .await
            .unwrap();
        assert_eq!(done.low_watermark, checkpoint.through + 1);
        runtime.log().close().await.unwrap();
        (thread, before)
    };
    let runtime = demo_runtime(&dir).await;
    assert!(runtime.unavailable_threads().is_empty());
    assert_eq!(runtime.snapshot(&thread).await.unwrap(), before);
    assert_eq!(before.operations.len() as u64, bursts);
    // It serves turns again.
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t2", input("hi"))
        .await
        .unwrap();
    until(&mut rx, |e| matches!(e, ThreadEvent::TurnCompleted { .. })).await;
}

#[tokio::test]
async fn a_checkpoint_that_does_not_decode_is_ignored_when_the_log_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (thread, before) = {
        let runtime = demo_runtime(&dir).await;
        let thread = runtime.create_thread(None, None).await.unwrap();
        let mut rx = runtime.subscribe();
        runtime
            .start_turn(&thread, "t1", input("hello"))
            .await
            .unwrap();
        until(&mut rx, |e| matches!(e, ThreadEvent::TurnCompleted { .. })).await;
        let before = runtime.snapshot(&thread).await.unwrap();
        runtime
            .log()
            .put_checkpoint(
                &ThreadId::new(thread.clone()).unwrap(),
                agentwire_events::Checkpoint {
                    through: 1,
                    payload: b"{\"format\":99}".to_vec(),
                },
            )
            .await
            .unwrap();
        runtime.log().close().await.unwrap();
        (thread, before)
    };
    let runtime = demo_runtime(&dir).await;
    assert_eq!(runtime.snapshot(&thread).await.unwrap(), before);
}

#[tokio::test]
async fn a_thread_trimmed_from_its_start_comes_back_with_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let (thread, before) = {
        let runtime = demo_runtime(&dir).await;
        let thread = runtime
            .create_thread(Some("trimmed".into()), None)
            .await
            .unwrap();
        let mut rx = runtime.subscribe();
        runtime
            .start_turn(&thread, "t1", input("hello"))
            .await
            .unwrap();
        until(&mut rx, |e| matches!(e, ThreadEvent::TurnCompleted { .. })).await;
        let before = runtime.snapshot(&thread).await.unwrap();
        // The checkpoint written at the turn's end.
        let checkpoint = checkpoint_covering(&**runtime.log(), &thread, before.next_position).await;
        // Retention asks for every event to go; the cut stops after the checkpoint.
        let retention = agentwire_events::Retention {
            max_records: 0,
            ..agentwire_events::Retention::default()
        };
        let done = runtime
            .log()
            .trim(
                &ThreadId::new(thread.clone()).unwrap(),
                &retention,
                std::time::SystemTime::now(),
            )
            .await
            .unwrap();
        assert_eq!(done.removed, before.next_position);
        assert_eq!(done.low_watermark, checkpoint.through + 1);
        runtime.log().close().await.unwrap();
        (thread, before)
    };
    let runtime = demo_runtime(&dir).await;
    assert!(runtime.unavailable_threads().is_empty());
    assert_eq!(runtime.snapshot(&thread).await.unwrap(), before);
}

/// A host may choose a thread's id: taken once, never again (not even after a deletion), and
/// one the log cannot hold is refused as input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_created_with_a_chosen_id_is_unique_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(&dir).await;
    let runtime = runtime_with(
        Arc::clone(&log),
        Arc::new(DemoAgent::default()),
        Duration::from_secs(60),
    )
    .await;
    runtime
        .create_thread_as("thread-a", Some("A".into()), None)
        .await
        .unwrap();
    assert_eq!(
        runtime.summary("thread-a").unwrap().title.as_deref(),
        Some("A")
    );
    let again = runtime.create_thread_as("thread-a", None, None).await;
    assert_eq!(again.unwrap_err().code(), "runtime.thread-exists");
    runtime.delete_thread("thread-a").await.unwrap();
    let after_deletion = runtime.create_thread_as("thread-a", None, None).await;
    assert_eq!(after_deletion.unwrap_err().code(), "runtime.thread-exists");
    for bad in ["", "a\nb"] {
        let refused = runtime.create_thread_as(bad, None, None).await;
        assert_eq!(
            refused.unwrap_err().code(),
            "runtime.invalid-input",
            "{bad:?}"
        );
    }
    // Two creations of one new id at once: one is created, the other refused.
    let (one, two) = tokio::join!(
        runtime.create_thread_as("thread-b", None, None),
        runtime.create_thread_as("thread-b", None, None)
    );
    let mut outcomes = [one.is_ok(), two.is_ok()];
    outcomes.sort_unstable();
    assert_eq!(outcomes, [false, true]);
    assert!(runtime.contains_thread("thread-b"));
}

/// A fork records its parent; an archived thread takes no turn; both survive a restart (they
/// are folded from the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_and_archives_are_durable_and_an_archived_thread_takes_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = demo_runtime(&dir).await;
    runtime
        .create_thread_as("source", Some("S".into()), None)
        .await
        .unwrap();
    let fork = runtime
        .fork_thread("source", Some("fork"), None, None)
        .await
        .unwrap();
    assert_eq!(fork, "fork");
    assert_eq!(
        runtime
            .fork_thread("missing", None, None, None)
            .await
            .unwrap_err()
            .code(),
        "runtime.thread-not-found"
    );
    runtime.archive_thread("source").await.unwrap();
    // Again: nothing changes.
    runtime.archive_thread("source").await.unwrap();
    let refused = runtime.start_turn("source", "t-1", input("hi")).await;
    assert_eq!(refused.unwrap_err().code(), "runtime.thread-archived");
    // The refused turn id stays free.
    runtime
        .start_turn("fork", "t-1", input("/slow 400"))
        .await
        .unwrap();
    let busy = runtime.archive_thread("fork").await;
    assert_eq!(busy.unwrap_err().code(), "runtime.turn-already-active");
    runtime.log().close().await.unwrap();
    drop(runtime);

    let runtime = demo_runtime(&dir).await;
    let source = runtime.summary("source").unwrap();
    assert!(source.archived);
    assert_eq!(source.parent_thread_id, None);
    let fork = runtime.summary("fork").unwrap();
    assert!(!fork.archived);
    assert_eq!(fork.parent_thread_id.as_deref(), Some("source"));
    let refused = runtime.start_turn("source", "t-2", input("hi")).await;
    assert_eq!(refused.unwrap_err().code(), "runtime.thread-archived");
}

//! The core's face-neutral API under many observers: per-thread subscriptions (2 and 100 of one
//! thread), a stalled subscriber that catches up through the core, an approval opened while a
//! subscriber lags, one check-and-append for concurrent mutations, turn ids unique per store,
//! deletion with an approval outstanding, and interaction deadlines on the test clock.

use std::sync::Arc;
use std::time::Duration;

use agentwire_events::EventLog;
use agentwire_runtime::*;

use agentwire_testkit::runtime::{input, is_turn_end, until};

/// A bound on how long a test waits, so a bug fails instead of hanging.
const WAIT: Duration = Duration::from_secs(30);

async fn open_log(dir: &tempfile::TempDir) -> Arc<dyn EventLog> {
    let path = dir.path().join("events.db");
    agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap()
}

async fn start(log: Arc<dyn EventLog>, clock: Arc<dyn Clock>, config: RuntimeConfig) -> Runtime {
    let agent = Arc::new(DemoAgent {
        slow_interval: Duration::from_millis(1),
    });
    Runtime::start(log, agent, clock, config).await.unwrap()
}

/// A runtime on `log` with the system clock and the default settings.
async fn on_log(log: &Arc<dyn EventLog>) -> Runtime {
    start(
        Arc::clone(log),
        Arc::new(SystemClock),
        RuntimeConfig::default(),
    )
    .await
}

async fn runtime(dir: &tempfile::TempDir, config: RuntimeConfig) -> Runtime {
    start(open_log(dir).await, Arc::new(SystemClock), config).await
}

/// Every durable event a subscription delivers until `thread`'s turn ends, as (seq, kind).
async fn durable_until_turn_end(sub: &mut Subscription, thread: &str) -> Vec<(u64, &'static str)> {
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, async {
        loop {
            if let Published::Durable {
                thread_id,
                seq,
                event,
                ..
            } = sub.recv().await.unwrap()
            {
                assert_eq!(thread_id, thread);
                out.push((seq, event.event.kind()));
                if is_turn_end(&event.event) {
                    return;
                }
            }
        }
    })
    .await
    .expect("the turn ended");
    out
}

fn contiguous(events: &[(u64, &str)], first: u64) {
    for (offset, (seq, _)) in events.iter().enumerate() {
        assert_eq!(*seq, first + offset as u64, "a gap or a repeat at {offset}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_and_a_hundred_subscribers_of_one_thread_see_every_durable_event_in_order() {
    for count in [2usize, 100] {
        let dir = tempfile::tempdir().unwrap();
        let runtime = runtime(&dir, RuntimeConfig::default()).await;
        let thread = runtime.create_thread(None, None).await.unwrap();
        let mut subs = Vec::new();
        for _ in 0..count {
            subs.push(runtime.subscribe_thread(&thread).await.unwrap());
        }
        runtime
            .start_turn(&thread, &format!("t{count}"), input("/burst 50"))
            .await
            .unwrap();
        let mut first: Option<Vec<(u64, &str)>> = None;
        for sub in &mut subs {
            let seen = durable_until_turn_end(sub, &thread).await;
            contiguous(&seen, 1);
            assert_eq!(seen.first().map(|e| e.1), Some("turn.started"));
            match &first {
                None => first = Some(seen),
                Some(first) => assert_eq!(&seen, first),
            }
        }
        assert!(first.unwrap().len() > 50);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_does_not_slow_the_others_and_catches_up_without_gap_or_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 4 * 1024,
        ..RuntimeConfig::default()
    };
    let runtime = runtime(&dir, config).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut reader = runtime.subscribe_thread(&thread).await.unwrap();
    let mut stalled = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "burst", input("/burst 400"))
        .await
        .unwrap();
    // The reader gets the whole turn while the other subscriber reads nothing.
    let read = durable_until_turn_end(&mut reader, &thread).await;
    contiguous(&read, 1);
    assert!(
        stalled.queued_bytes() <= 4 * 1024 + 2048,
        "the stalled queue holds {} bytes",
        stalled.queued_bytes()
    );
    // Once it reads, it gets the same events: the queued prefix, then the rest from the log.
    let caught_up = durable_until_turn_end(&mut stalled, &thread).await;
    assert_eq!(caught_up, read);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_opened_while_a_subscriber_lags_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 2 * 1024,
        ..RuntimeConfig::default()
    };
    let runtime = runtime(&dir, config).await;
    let busy = runtime.create_thread(None, None).await.unwrap();
    let asking = runtime.create_thread(None, None).await.unwrap();
    let mut lagging = runtime.subscribe();
    let mut watcher = runtime.subscribe_thread(&asking).await.unwrap();
    runtime
        .start_turn(&busy, "busy", input("/burst 300"))
        .await
        .unwrap();
    runtime
        .start_turn(&asking, "asking", input("/approve rm -rf build"))
        .await
        .unwrap();
    // The approval is open (its thread's own subscriber saw it) while the other subscriber
    // has read nothing: its queue overflowed long before.
    until(&mut watcher, |e| {
        matches!(e, ThreadEvent::InteractionOpened { .. })
    })
    .await;
    let opened = tokio::time::timeout(WAIT, async {
        loop {
            if let Published::Durable {
                thread_id, event, ..
            } = lagging.recv().await.unwrap()
                && thread_id == asking
                && let ThreadEvent::InteractionOpened { interaction } = &event.event
            {
                return interaction.clone();
            }
        }
    })
    .await
    .expect("the approval reached the lagging subscriber");
    assert!(matches!(opened.ask, InteractionKind::Approval { .. }));
    runtime
        .resolve(&asking, &opened.id, Resolution::Approved)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_turn_starts_on_one_thread_at_once_start_one_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, RuntimeConfig::default()).await;
    for round in 0..20 {
        let thread = runtime.create_thread(None, None).await.unwrap();
        let (first, second) = (format!("a{round}"), format!("b{round}"));
        let (a, b) = tokio::join!(
            runtime.start_turn(&thread, &first, input("/approve ls")),
            runtime.start_turn(&thread, &second, input("/approve ls")),
        );
        let refused = match (a, b) {
            (Ok(()), Err(e)) | (Err(e), Ok(())) => e,
            other => panic!("round {round}: {other:?}"),
        };
        assert_eq!(refused.code(), "runtime.turn-already-active");
        runtime.delete_thread(&thread).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_id_is_unique_per_store_across_threads_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(&dir).await;
    let runtime = on_log(&log).await;
    let a = runtime.create_thread(None, None).await.unwrap();
    let b = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&a).await.unwrap();
    runtime.start_turn(&a, "t1", input("hi")).await.unwrap();
    until(&mut sub, is_turn_end).await;
    let again = runtime.start_turn(&a, "t1", input("hi")).await.unwrap_err();
    assert_eq!(again.code(), "runtime.turn-already-started");
    let other = runtime.start_turn(&b, "t1", input("hi")).await.unwrap_err();
    assert_eq!(other.code(), "runtime.turn-id-in-use");
    assert!(matches!(other, RuntimeError::TurnIdInUse { ref thread_id, .. } if *thread_id == a));
    // Nothing ran on b.
    assert!(runtime.snapshot(&b).await.unwrap().messages.is_empty());
    drop(sub);
    drop(runtime);

    let restarted = on_log(&log).await;
    let after = restarted
        .start_turn(&b, "t1", input("hi"))
        .await
        .unwrap_err();
    assert_eq!(after.code(), "runtime.turn-id-in-use");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_with_an_approval_outstanding_always_resolves_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, RuntimeConfig::default()).await;
    for round in 0..100 {
        let thread = runtime.create_thread(None, None).await.unwrap();
        let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
        runtime
            .start_turn(&thread, &format!("d{round}"), input("/approve make"))
            .await
            .unwrap();
        let opened = until(&mut sub, |e| {
            matches!(e, ThreadEvent::InteractionOpened { .. })
        })
        .await;
        runtime.delete_thread(&thread).await.unwrap();
        let rest = until(&mut sub, |e| matches!(e, ThreadEvent::ThreadDeleted)).await;
        let kinds: Vec<&str> = rest
            .iter()
            .filter_map(|p| match p {
                Published::Durable { event, .. } => Some(event.event.kind()),
                Published::Live { .. } => None,
            })
            .collect();
        assert_eq!(
            kinds.last().copied(),
            Some("thread.deleted"),
            "round {round}: {kinds:?}"
        );
        assert!(
            kinds.contains(&"interaction.resolved"),
            "round {round}: the approval was withdrawn before the deletion: {kinds:?} after {}",
            opened.len()
        );
        assert!(!runtime.contains_thread(&thread));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_thread_stays_deleted_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(&dir).await;
    let runtime = on_log(&log).await;
    let kept = runtime
        .create_thread(Some("kept".into()), None)
        .await
        .unwrap();
    let gone = runtime
        .create_thread(Some("gone".into()), None)
        .await
        .unwrap();
    runtime.delete_thread(&gone).await.unwrap();
    drop(runtime);
    let restarted = on_log(&log).await;
    assert_eq!(restarted.thread_ids(), [kept]);
    assert_eq!(
        restarted.snapshot(&gone).await.unwrap_err().code(),
        "runtime.thread-not-found"
    );
}

/// The interaction a thread's subscription sees opened.
async fn opened(sub: &mut Subscription) -> Interaction {
    let seen = until(sub, |e| matches!(e, ThreadEvent::InteractionOpened { .. })).await;
    seen.iter()
        .find_map(|p| match p {
            Published::Durable { event, .. } => match &event.event {
                ThreadEvent::InteractionOpened { interaction } => Some(interaction.clone()),
                _ => None,
            },
            Published::Live { .. } => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interaction_expires_by_the_test_clock_at_the_sooner_of_its_ttl_and_the_turns_time() {
    const T0: u64 = 1_800_000_000_000;
    for (ttl_s, turn_s) in [(30u64, 60u64), (300, 60)] {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let config = RuntimeConfig {
            interaction_ttl: Duration::from_secs(ttl_s),
            turn_timeout: Some(Duration::from_secs(turn_s)),
            ..RuntimeConfig::default()
        };
        let runtime = start(open_log(&dir).await, clock.clone(), config).await;
        let thread = runtime.create_thread(None, None).await.unwrap();
        let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
        runtime
            .start_turn(&thread, "x", input("/approve deploy"))
            .await
            .unwrap();
        let interaction = opened(&mut sub).await;
        let deadline = T0 + ttl_s.min(turn_s) * 1_000;
        assert_eq!(interaction.expires_at_ms, deadline);
        // A millisecond short of the deadline, nothing happens.
        clock.set(deadline - 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(runtime.snapshot(&thread).await.unwrap().pending.len(), 1);
        clock.set(deadline);
        let rest = until(&mut sub, is_turn_end).await;
        let resolution = rest.iter().find_map(|p| match p {
            Published::Durable { event, .. } => match &event.event {
                ThreadEvent::InteractionResolved { resolution, .. } => Some(resolution.clone()),
                _ => None,
            },
            Published::Live { .. } => None,
        });
        assert_eq!(
            resolution,
            Some(Resolution::Expired),
            "ttl {ttl_s}s, turn {turn_s}s"
        );
        let Some(Published::Durable { event, .. }) = rest.last() else {
            panic!("no end")
        };
        if ttl_s >= turn_s {
            assert_eq!(
                event.event,
                ThreadEvent::TurnFailed {
                    turn_id: "x".into(),
                    stage: FailStage::Execute,
                    message: "the turn ran out of time".into()
                }
            );
        } else {
            assert_eq!(event.event.kind(), "turn.completed");
        }
        // An answer after the deadline changes nothing.
        let late = runtime
            .resolve(&thread, &interaction.id, Resolution::Approved)
            .await
            .unwrap_err();
        assert_eq!(late.code(), "runtime.interaction-not-found");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_answer_wins_and_an_answer_of_another_kind_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, RuntimeConfig::default()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "first", input("/approve ls"))
        .await
        .unwrap();
    let interaction = opened(&mut sub).await;
    let (a, b) = tokio::join!(
        runtime.resolve(&thread, &interaction.id, Resolution::Approved),
        runtime.resolve(
            &thread,
            &interaction.id,
            Resolution::Rejected { reason: None }
        ),
    );
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
    let lost = a.err().or(b.err()).unwrap();
    assert_eq!(lost.code(), "runtime.interaction-not-found");
    until(&mut sub, is_turn_end).await;

    runtime
        .start_turn(&thread, "second", input("/approve ls"))
        .await
        .unwrap();
    let interaction = opened(&mut sub).await;
    let refused = runtime
        .resolve(
            &thread,
            &interaction.id,
            Resolution::Submitted {
                values: serde_json::json!({}),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "runtime.answer-refused");
    let rest = until(&mut sub, is_turn_end).await;
    let Some(Published::Durable { event, .. }) = rest.last() else {
        panic!("no end")
    };
    assert_eq!(event.event.kind(), "turn.failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_whose_missed_events_were_trimmed_is_told_and_goes_on_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 1024,
        ..RuntimeConfig::default()
    };
    let runtime = runtime(&dir, config).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut reader = runtime.subscribe_thread(&thread).await.unwrap();
    let mut stalled = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "first", input("/burst 200"))
        .await
        .unwrap();
    let first = durable_until_turn_end(&mut reader, &thread).await;
    let head = first.last().unwrap().0 + 1;
    // Everything the checkpoint at the turn's end covers goes.
    let log_thread = agentwire_events::ThreadId::new(thread.clone()).unwrap();
    let retention = agentwire_events::Retention {
        max_records: 0,
        ..agentwire_events::Retention::default()
    };
    let low = tokio::time::timeout(WAIT, async {
        loop {
            let trimmed = runtime
                .log()
                .trim(&log_thread, &retention, std::time::SystemTime::now())
                .await
                .unwrap();
            if trimmed.low_watermark == head {
                return trimmed.low_watermark;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the turn's end was checkpointed");
    // The stalled subscriber reads what its queue held, then is told the rest is gone.
    let error = tokio::time::timeout(WAIT, async {
        loop {
            if let Err(error) = stalled.recv().await {
                return error;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(error.code(), "runtime.log");
    assert!(matches!(
        error,
        RuntimeError::Log(agentwire_events::Error::Expired { low_watermark, .. }) if low_watermark == low
    ));
    // It goes on with the thread's next events, from the log's oldest.
    runtime
        .start_turn(&thread, "second", input("hi"))
        .await
        .unwrap();
    let next = durable_until_turn_end(&mut stalled, &thread).await;
    assert_eq!(next.first(), Some(&(low, "turn.started")));
    contiguous(&next, low);
}

//! The conformance suite: every case runs against SQLite and against a real PostgreSQL server,
//! through the `EventLog` trait only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{Store, events, thread};
use agentwire_events::{
    After, Checkpoint, CheckpointInfo, Error, EventLog, Expected, LogId, MAX_CHECKPOINT_BYTES,
    MAX_PAGE_EVENTS, MAX_RECORD_BYTES, NewEvent, Position, Retention, Tail,
};
use uuid::Uuid;

/// A bound on waits that should end at once, so a broken wake-up fails instead of hanging.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn after(log: &dyn EventLog, seq: u64) -> After {
    After::Position(Position {
        log_id: log.log_id(),
        seq,
    })
}

async fn read_all(log: &dyn EventLog, name: &str) -> Vec<agentwire_events::StoredEvent> {
    let t = thread(name);
    let mut out = Vec::new();
    let mut from = After::Start;
    loop {
        let page = log.read(&t, from, MAX_PAGE_EVENTS).await.expect("read");
        let Some(last) = page.events.last() else {
            return out;
        };
        from = after(log, last.seq);
        out.extend(page.events);
    }
}

async fn ordering_and_gap_free_sequences(store: Store) {
    let log = store.open().await;
    let t = thread("order");
    let mut acked = Vec::new();
    for (i, n) in [3usize, 1, 5].into_iter().enumerate() {
        let ack = log
            .append(&t, Expected::Any, events("note", &format!("b{i}"), n))
            .await
            .expect("append");
        assert_eq!(ack.log_id, log.log_id());
        acked.push(ack);
    }
    assert_eq!(
        acked.iter().map(|a| a.first_seq).collect::<Vec<_>>(),
        vec![0, 3, 4]
    );
    assert_eq!(acked[2].next_seq(), 9);
    let stored = read_all(&*log, "order").await;
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (0..9).collect::<Vec<_>>()
    );
    let payloads: Vec<String> = stored
        .iter()
        .map(|e| String::from_utf8(e.payload.clone()).expect("utf8"))
        .collect();
    assert_eq!(
        payloads,
        [
            "b0-0", "b0-1", "b0-2", "b1-0", "b2-0", "b2-1", "b2-2", "b2-3", "b2-4"
        ]
    );
    let ids: Vec<Uuid> = acked.iter().flat_map(|a| a.event_ids.clone()).collect();
    assert_eq!(stored.iter().map(|e| e.event_id).collect::<Vec<_>>(), ids);
    assert!(stored.iter().all(|e| e.kind == "note"));
    for (ack, range) in acked.iter().zip([0..3, 3..4, 4..9]) {
        for e in &stored[range] {
            assert_eq!(e.committed_at_ms, ack.committed_at_ms);
        }
    }
    // A caller-chosen id is kept.
    let id = Uuid::new_v4();
    let ack = log
        .append(
            &t,
            Expected::Next(9),
            vec![NewEvent::new("note", "x").with_id(id)],
        )
        .await
        .expect("append with id");
    assert_eq!(ack.event_ids, vec![id]);
    let info = log.thread(&t).await.expect("thread").expect("known");
    assert_eq!(
        (info.low_watermark, info.next_seq, info.records),
        (0, 10, 10)
    );
    let bytes: usize = stored.iter().map(|e| e.record_size()).sum::<usize>() + "note".len() + 1;
    assert_eq!(info.bytes, bytes as u64);
}

async fn conflicting_append_writes_nothing(store: Store) {
    let log = store.open().await;
    let t = thread("conflict");
    log.append(&t, Expected::Next(0), events("a", "first", 2))
        .await
        .expect("first append");
    let err = log
        .append(&t, Expected::Next(0), events("a", "second", 3))
        .await
        .expect_err("stale expectation");
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 0,
                actual: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "events.conflict");
    let err = log
        .append(&t, Expected::Next(7), events("a", "ahead", 1))
        .await
        .expect_err("expectation ahead");
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 7,
                actual: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(read_all(&*log, "conflict").await.len(), 2);
    log.append(&t, Expected::Next(2), events("a", "third", 1))
        .await
        .expect("right expectation");
    assert_eq!(read_all(&*log, "conflict").await.len(), 3);
    // A conflict on a thread never written leaves it unknown.
    let fresh = thread("conflict-fresh");
    let err = log
        .append(&fresh, Expected::Next(1), events("a", "x", 1))
        .await
        .expect_err("new thread expects 0");
    assert!(
        matches!(
            err,
            Error::Conflict {
                expected: 1,
                actual: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(log.thread(&fresh).await.expect("thread"), None);
}

async fn read_after_and_paging(store: Store) {
    let log = store.open().await;
    let t = thread("paging");
    log.append(&t, Expected::Any, events("e", "p", 25))
        .await
        .expect("append");
    let page = log.read(&t, After::Start, 10).await.expect("page 1");
    assert_eq!(page.events.first().map(|e| e.seq), Some(0));
    assert_eq!(page.events.len(), 10);
    assert!(!page.at_head());
    let page = log.read(&t, after(&*log, 9), 10).await.expect("page 2");
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (10..20).collect::<Vec<_>>()
    );
    let page = log.read(&t, after(&*log, 19), 10).await.expect("page 3");
    assert_eq!(page.events.len(), 5);
    assert!(page.at_head());
    assert_eq!((page.next_seq, page.low_watermark), (25, 0));
    let page = log.read(&t, after(&*log, 24), 10).await.expect("at head");
    assert!(page.events.is_empty() && page.at_head());
    let err = log
        .read(&t, after(&*log, 25), 10)
        .await
        .expect_err("beyond head");
    assert!(
        matches!(
            err,
            Error::PositionAhead {
                seq: 25,
                next_seq: 25,
                ..
            }
        ),
        "{err:?}"
    );
    let foreign = After::Position(Position {
        log_id: LogId(Uuid::new_v4()),
        seq: 3,
    });
    let err = log.read(&t, foreign, 10).await.expect_err("foreign log");
    assert_eq!(err.code(), "events.foreign-log");
    for limit in [0, MAX_PAGE_EVENTS + 1] {
        let err = log.read(&t, After::Start, limit).await.expect_err("limit");
        assert_eq!(err.code(), "events.invalid-limit");
    }
    // A thread never written reads as empty from the start, and knows no later position.
    let none = thread("paging-none");
    let page = log.read(&none, After::Start, 10).await.expect("empty");
    assert!(page.events.is_empty());
    assert_eq!((page.next_seq, page.low_watermark), (0, 0));
    let err = log
        .read(&none, after(&*log, 0), 10)
        .await
        .expect_err("ahead");
    assert_eq!(err.code(), "events.position-ahead");
}

async fn live_tail_wakes_on_commit(store: Store) {
    let log = store.open().await;
    let t = thread("tail");
    log.append(&t, Expected::Any, events("e", "old", 2))
        .await
        .expect("append");
    let mut tail = Tail::new(Arc::clone(&log), t.clone(), after(&*log, 1), 100);
    let waiter = tokio::spawn(async move {
        let page = tail.next_page().await.expect("tail page");
        (tail, page)
    });
    // The tail has caught up; it returns only once a new commit lands.
    log.append(&t, Expected::Any, events("e", "new", 3))
        .await
        .expect("append");
    let (mut tail, page) = tokio::time::timeout(HANG_GUARD, waiter)
        .await
        .expect("tail woke")
        .expect("join");
    assert_eq!(page.events.first().map(|e| e.seq), Some(2));
    let seen: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    let mut all = seen.clone();
    if all.len() < 3 {
        let rest = tokio::time::timeout(HANG_GUARD, tail.next_page())
            .await
            .expect("tail woke")
            .expect("page");
        all.extend(rest.events.iter().map(|e| e.seq));
    }
    assert_eq!(all, vec![2, 3, 4]);
    assert_eq!(tail.position(), after(&*log, 4));
    // A second round through another task.
    let writer = Arc::clone(&log);
    let t2 = t.clone();
    let appender = tokio::spawn(async move {
        writer
            .append(&t2, Expected::Next(5), events("e", "later", 1))
            .await
    });
    let page = tokio::time::timeout(HANG_GUARD, tail.next_page())
        .await
        .expect("tail woke")
        .expect("page");
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![5]
    );
    appender.await.expect("join").expect("append");
}

async fn retention_by_count_is_exact(store: Store) {
    let log = store.open().await;
    let t = thread("keep-count");
    log.append(&t, Expected::Any, events("e", "c", 10))
        .await
        .expect("append");
    let policy = Retention {
        max_records: 4,
        ..Retention::default()
    };
    let trimmed = log
        .trim(&t, &policy, SystemTime::now())
        .await
        .expect("trim");
    assert_eq!(
        (trimmed.removed, trimmed.low_watermark, trimmed.next_seq),
        (6, 6, 10)
    );
    let again = log
        .trim(&t, &policy, SystemTime::now())
        .await
        .expect("trim");
    assert_eq!((again.removed, again.low_watermark), (0, 6));
    let err = log
        .read(&t, After::Start, 10)
        .await
        .expect_err("start expired");
    assert!(
        matches!(
            err,
            Error::Expired {
                low_watermark: 6,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "events.expired");
    // After 4 wants 5, which is gone: never a shorter answer.
    let err = log
        .read(&t, after(&*log, 4), 10)
        .await
        .expect_err("expired");
    assert!(
        matches!(
            err,
            Error::Expired {
                low_watermark: 6,
                ..
            }
        ),
        "{err:?}"
    );
    // After 5 wants 6, the first kept.
    let page = log.read(&t, after(&*log, 5), 10).await.expect("boundary");
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![6, 7, 8, 9]
    );
    assert_eq!(page.low_watermark, 6);
    let info = log.thread(&t).await.expect("thread").expect("known");
    assert_eq!(
        (info.low_watermark, info.next_seq, info.records),
        (6, 10, 4)
    );
    assert_eq!(info.bytes, 4 * ("e".len() + "c-0".len()) as u64);
    // Appends go on after the trimmed prefix.
    let ack = log
        .append(&t, Expected::Next(10), events("e", "d", 1))
        .await
        .expect("append");
    assert_eq!(ack.first_seq, 10);
}

async fn retention_by_bytes_is_exact(store: Store) {
    let log = store.open().await;
    let t = thread("keep-bytes");
    // Each record is 100 bytes: kind "k" and 99 payload bytes.
    let batch: Vec<NewEvent> = (0..10)
        .map(|_| NewEvent::new("k", vec![b'x'; 99]))
        .collect();
    log.append(&t, Expected::Any, batch).await.expect("append");
    let keep = |max_bytes| Retention {
        max_bytes,
        ..Retention::default()
    };
    // 300 bytes hold exactly three records.
    let trimmed = log
        .trim(&t, &keep(300), SystemTime::now())
        .await
        .expect("trim");
    assert_eq!((trimmed.removed, trimmed.low_watermark), (7, 7));
    // 299 bytes hold two.
    let trimmed = log
        .trim(&t, &keep(299), SystemTime::now())
        .await
        .expect("trim");
    assert_eq!((trimmed.removed, trimmed.low_watermark), (1, 8));
    let info = log.thread(&t).await.expect("thread").expect("known");
    assert_eq!((info.records, info.bytes), (2, 200));
    // Zero bytes keep nothing; the low-watermark reaches the head.
    let trimmed = log
        .trim(&t, &keep(0), SystemTime::now())
        .await
        .expect("trim");
    assert_eq!(
        (trimmed.removed, trimmed.low_watermark, trimmed.next_seq),
        (2, 10, 10)
    );
    let page = log
        .read(&t, after(&*log, 9), 10)
        .await
        .expect("after the last");
    assert!(page.events.is_empty());
    let err = log
        .read(&t, after(&*log, 8), 10)
        .await
        .expect_err("expired");
    assert_eq!(err.code(), "events.expired");
}

async fn retention_by_age_is_exact(store: Store) {
    let log = store.open().await;
    let t = thread("keep-age");
    let first = log
        .append(&t, Expected::Any, events("e", "old", 3))
        .await
        .expect("append");
    // A later commit time for the second batch (the clock has millisecond steps). A batch
    // committed in the first batch's millisecond is as old as it, so it counts as old.
    let mut old = 3;
    let second = loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let batch = log
            .append(&t, Expected::Any, events("e", "young", 2))
            .await
            .expect("append");
        if batch.committed_at_ms != first.committed_at_ms {
            break batch;
        }
        old += 2;
    };
    let max_age = Duration::from_secs(3600);
    let policy = Retention {
        max_age,
        ..Retention::default()
    };
    let at = |ms: i64| UNIX_EPOCH + Duration::from_millis(ms as u64) + max_age;
    // Exactly max_age after the first batch: it is not older than max_age, so it stays.
    let trimmed = log
        .trim(&t, &policy, at(first.committed_at_ms))
        .await
        .expect("trim");
    assert_eq!((trimmed.removed, trimmed.low_watermark), (0, 0));
    // One millisecond later it goes, and only it.
    let trimmed = log
        .trim(&t, &policy, at(first.committed_at_ms + 1))
        .await
        .expect("trim");
    assert_eq!((trimmed.removed, trimmed.low_watermark), (old, old));
    let page = log.read(&t, after(&*log, old - 1), 10).await.expect("read");
    assert_eq!(page.events.first().map(|e| e.seq), Some(old));
    let next = page.next_seq;
    let trimmed = log
        .trim(&t, &policy, at(second.committed_at_ms + 1))
        .await
        .expect("trim");
    assert_eq!((trimmed.low_watermark, trimmed.next_seq), (next, next));
}

async fn thread_deletion(store: Store) {
    let log = store.open().await;
    let t = thread("doomed");
    log.append(&t, Expected::Any, events("e", "d", 3))
        .await
        .expect("append");
    assert!(log.delete_thread(&t).await.expect("delete"));
    let err = log.read(&t, After::Start, 10).await.expect_err("deleted");
    assert_eq!(err.code(), "events.thread-deleted");
    let err = log
        .append(&t, Expected::Any, events("e", "d", 1))
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), "events.thread-deleted");
    let info = log.thread(&t).await.expect("thread").expect("known");
    assert!(info.deleted);
    assert_eq!((info.records, info.bytes), (0, 0));
    assert!(!log.delete_thread(&thread("never")).await.expect("delete"));
    // Other threads are untouched.
    let other = thread("survivor");
    log.append(&other, Expected::Any, events("e", "s", 2))
        .await
        .expect("append");
    assert_eq!(read_all(&*log, "survivor").await.len(), 2);
}

async fn checkpoints(store: Store) {
    let log = store.open().await;
    let t = thread("kept");
    let checkpoint = |through: u64, text: &str| Checkpoint {
        through,
        payload: text.as_bytes().to_vec(),
    };
    assert_eq!(log.checkpoint(&t).await.expect("read"), None);
    assert_eq!(log.checkpoint_info(&t).await.expect("info"), None);
    // Only a position the thread has reached.
    let err = log
        .put_checkpoint(&t, checkpoint(0, "x"))
        .await
        .expect_err("ahead");
    assert_eq!(err.code(), "events.position-ahead");
    log.append(&t, Expected::Any, events("e", "k", 10))
        .await
        .expect("append");
    let err = log
        .put_checkpoint(&t, checkpoint(10, "x"))
        .await
        .expect_err("ahead");
    assert_eq!(err.code(), "events.position-ahead");
    log.put_checkpoint(&t, checkpoint(4, "through 4"))
        .await
        .expect("put");
    // A newer one replaces it; an older or equal one is ignored.
    log.put_checkpoint(&t, checkpoint(7, "through 7"))
        .await
        .expect("put");
    log.put_checkpoint(&t, checkpoint(5, "through 5"))
        .await
        .expect("put");
    log.put_checkpoint(&t, checkpoint(7, "again 7"))
        .await
        .expect("put");
    assert_eq!(
        log.checkpoint(&t).await.expect("read"),
        Some(checkpoint(7, "through 7"))
    );
    assert_eq!(
        log.checkpoint_info(&t).await.expect("info"),
        Some(CheckpointInfo {
            through: 7,
            bytes: 9
        })
    );
    // Retention does not touch it, and never trims past it: the events after a checkpoint
    // are what its reader folds on top of it. Asked to trim every event, the cut stops there.
    let everything = Retention {
        max_records: 0,
        ..Retention::default()
    };
    let trimmed = log
        .trim(&t, &everything, SystemTime::now())
        .await
        .expect("trim");
    assert_eq!(trimmed.low_watermark, 8);
    assert_eq!(trimmed.removed, 8);
    assert_eq!(
        log.checkpoint(&t).await.expect("read"),
        Some(checkpoint(7, "through 7"))
    );
    // Over the limit.
    let err = log
        .put_checkpoint(
            &t,
            Checkpoint {
                through: 9,
                payload: vec![0; MAX_CHECKPOINT_BYTES + 1],
            },
        )
        .await
        .expect_err("too large");
    assert_eq!(err.code(), "events.checkpoint-too-large");
    // It goes with the thread, and a deleted thread takes no new one.
    assert!(log.delete_thread(&t).await.expect("delete"));
    assert_eq!(log.checkpoint(&t).await.expect("read"), None);
    assert_eq!(log.checkpoint_info(&t).await.expect("info"), None);
    let err = log
        .put_checkpoint(&t, checkpoint(9, "late"))
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), "events.thread-deleted");
    // It survives a restart.
    let other = thread("reopened");
    log.append(&other, Expected::Any, events("e", "r", 3))
        .await
        .expect("append");
    log.put_checkpoint(&other, checkpoint(2, "state"))
        .await
        .expect("put");
    log.close().await.expect("close");
    let log = store.open().await;
    assert_eq!(
        log.checkpoint(&other).await.expect("read"),
        Some(checkpoint(2, "state"))
    );
}

async fn record_limit(store: Store) {
    let log = store.open().await;
    let t = thread("big");
    let kind = "blob";
    let fits = NewEvent::new(kind, vec![7u8; MAX_RECORD_BYTES - kind.len()]);
    let ack = log
        .append(&t, Expected::Any, vec![fits])
        .await
        .expect("a record of exactly the limit");
    let over = NewEvent::new(kind, vec![7u8; MAX_RECORD_BYTES - kind.len() + 1]);
    let err = log
        .append(&t, Expected::Any, vec![NewEvent::new("small", "s"), over])
        .await
        .expect_err("over the limit");
    assert!(
        matches!(err, Error::RecordTooLarge { size, limit } if size == MAX_RECORD_BYTES + 1 && limit == MAX_RECORD_BYTES),
        "{err:?}"
    );
    assert_eq!(err.code(), "events.record-too-large");
    let page = log.read(&t, After::Start, 10).await.expect("read");
    assert_eq!(page.events.len(), 1, "the rejected append wrote nothing");
    assert_eq!(page.events[0].payload.len(), MAX_RECORD_BYTES - kind.len());
    assert_eq!(page.events[0].event_id, ack.event_ids[0]);
    let err = log
        .append(&t, Expected::Any, Vec::new())
        .await
        .expect_err("empty");
    assert_eq!(err.code(), "events.invalid-append");
    let err = log
        .append(&t, Expected::Any, vec![NewEvent::new("", "x")])
        .await
        .expect_err("no kind");
    assert_eq!(err.code(), "events.invalid-kind");
}

async fn restart_keeps_positions_watermarks_and_log_id(store: Store) {
    let log = store.open().await;
    let t = thread("restart");
    log.append(&t, Expected::Any, events("e", "r", 8))
        .await
        .expect("append");
    let policy = Retention {
        max_records: 5,
        ..Retention::default()
    };
    log.trim(&t, &policy, SystemTime::now())
        .await
        .expect("trim");
    let log_id = log.log_id();
    let before = log
        .read(&t, after(&*log, 2), 10)
        .await
        .expect("read")
        .events;
    assert_eq!(before.len(), 5);
    log.close().await.expect("close");
    let err = log
        .append(&t, Expected::Any, events("e", "late", 1))
        .await
        .expect_err("closed");
    assert_eq!(err.code(), "events.closed");
    drop(log);

    let log = store.open().await;
    assert_eq!(log.log_id(), log_id);
    let info = log.thread(&t).await.expect("thread").expect("known");
    assert_eq!((info.low_watermark, info.next_seq), (3, 8));
    let err = log.read(&t, After::Start, 10).await.expect_err("expired");
    assert!(
        matches!(
            err,
            Error::Expired {
                low_watermark: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let page = log.read(&t, after(&*log, 2), 10).await.expect("read");
    assert_eq!(page.events, before);
    let ack = log
        .append(&t, Expected::Next(8), events("e", "more", 1))
        .await
        .expect("append after restart");
    assert_eq!(ack.first_seq, 8);
}

async fn concurrent_writers_on_one_thread(store: Store) {
    let log = store.open().await;
    let t = thread("contended");
    const TARGET: u64 = 120;
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let log = Arc::clone(&log);
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            let mut conflicts = 0u32;
            loop {
                let head = log.read(&t, After::Start, 1).await.expect("read").next_seq;
                if head >= TARGET {
                    return (won, conflicts);
                }
                match log
                    .append(
                        &t,
                        Expected::Next(head),
                        events("w", &format!("w{writer}"), 1),
                    )
                    .await
                {
                    Ok(ack) => {
                        assert_eq!(ack.first_seq, head);
                        won.push((ack.first_seq, ack.event_ids[0]));
                    }
                    Err(Error::Conflict {
                        expected, actual, ..
                    }) => {
                        assert_eq!(expected, head);
                        assert!(actual > head, "a conflict means someone else won");
                        conflicts += 1;
                    }
                    Err(other) => panic!("append: {other:?}"),
                }
            }
        }));
    }
    let mut winners = BTreeMap::new();
    for task in tasks {
        let (won, _) = task.await.expect("join");
        for (seq, id) in won {
            assert!(winners.insert(seq, id).is_none(), "two writers won {seq}");
        }
    }
    let stored = read_all(&*log, "contended").await;
    assert_eq!(stored.len() as u64, TARGET);
    for event in &stored {
        assert_eq!(winners.get(&event.seq), Some(&event.event_id));
    }
    assert_eq!(winners.len() as u64, TARGET);
}

async fn many_threads(store: Store) {
    let log = store.open().await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let log = Arc::clone(&log);
        tasks.push(tokio::spawn(async move {
            let t = thread(&format!("many-{i:02}"));
            for j in 0..5 {
                log.append(&t, Expected::Any, events("m", &format!("{i}.{j}"), 2))
                    .await
                    .expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.expect("join");
    }
    for i in 0..40 {
        let name = format!("many-{i:02}");
        let stored = read_all(&*log, &name).await;
        let payloads: Vec<String> = stored
            .iter()
            .map(|e| String::from_utf8(e.payload.clone()).expect("utf8"))
            .collect();
        let expected: Vec<String> = (0..5)
            .flat_map(|j| (0..2).map(move |k| format!("{i}.{j}-{k}")))
            .collect();
        assert_eq!(payloads, expected, "thread {name}");
    }
    // Threads list in id order, paged.
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = log.threads(cursor.as_ref(), 7).await.expect("threads");
        let Some(last) = page.last() else { break };
        cursor = Some(last.thread.clone());
        listed.extend(page);
    }
    let names: Vec<String> = listed.iter().map(|t| t.thread.to_string()).collect();
    let expected: Vec<String> = (0..40).map(|i| format!("many-{i:02}")).collect();
    assert_eq!(names, expected);
    assert!(listed.iter().all(|t| t.next_seq == 10 && t.records == 10));
    let unique: HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), 40);
}

/// Appends queued together (most often one group commit) are each decided as if alone and in
/// order: several appends of one thread, chained or not, beside a new thread, a conflict on a
/// thread never written, a deleted thread, a thread whose first queued append conflicts and
/// whose second is right, and an expectation past every position.
async fn appends_queued_together_are_each_decided_in_order(store: Store) {
    let log = store.open().await;
    let (a, b, c, d, e, g) = (
        thread("q-a"),
        thread("q-b"),
        thread("q-c"),
        thread("q-d"),
        thread("q-e"),
        thread("q-g"),
    );
    log.append(&a, Expected::Next(0), events("k", "a0", 2))
        .await
        .expect("a");
    log.append(&d, Expected::Any, events("k", "d0", 1))
        .await
        .expect("d");
    assert!(log.delete_thread(&d).await.expect("delete"));
    log.append(&e, Expected::Any, events("k", "e0", 1))
        .await
        .expect("e");
    log.append(&g, Expected::Any, events("k", "g0", 3))
        .await
        .expect("g");
    let queued = [
        (&a, Expected::Next(2), events("k", "a1", 1)),
        (&b, Expected::Next(0), events("k", "b0", 1)),
        (&a, Expected::Any, events("k", "a2", 2)),
        (&c, Expected::Next(3), events("k", "c0", 1)),
        (&e, Expected::Next(0), events("k", "e-stale", 1)),
        (&b, Expected::Next(1), events("k", "b1", 2)),
        (&d, Expected::Any, events("k", "d1", 1)),
        (&a, Expected::Next(5), events("k", "a3", 1)),
        (&e, Expected::Next(1), events("k", "e1", 1)),
        (&g, Expected::Next(u64::MAX), events("k", "g-far", 1)),
    ];
    let outcomes = futures_util::future::join_all(
        queued
            .into_iter()
            .map(|(t, expected, batch)| log.append(t, expected, batch)),
    )
    .await;
    let described: Vec<String> = outcomes
        .iter()
        .map(|outcome| match outcome {
            Ok(ack) => format!("ok {} +{}", ack.first_seq, ack.event_ids.len()),
            Err(Error::Conflict {
                expected, actual, ..
            }) => format!("conflict {expected} {actual}"),
            Err(other) => other.code().to_string(),
        })
        .collect();
    assert_eq!(
        described,
        [
            "ok 2 +1",
            "ok 0 +1",
            "ok 3 +2",
            "conflict 3 0",
            "conflict 0 1",
            "ok 1 +2",
            "events.thread-deleted",
            "ok 5 +1",
            "ok 1 +1",
            &format!("conflict {} 3", u64::MAX),
        ]
    );
    let payloads = |stored: Vec<agentwire_events::StoredEvent>| -> Vec<String> {
        stored
            .into_iter()
            .map(|e| String::from_utf8(e.payload).expect("utf8"))
            .collect()
    };
    assert_eq!(
        payloads(read_all(&*log, "q-a").await),
        ["a0-0", "a0-1", "a1-0", "a2-0", "a2-1", "a3-0"]
    );
    assert_eq!(
        payloads(read_all(&*log, "q-b").await),
        ["b0-0", "b1-0", "b1-1"]
    );
    assert_eq!(payloads(read_all(&*log, "q-e").await), ["e0-0", "e1-0"]);
    assert_eq!(payloads(read_all(&*log, "q-g").await).len(), 3);
    assert_eq!(log.thread(&c).await.expect("thread"), None);
    let info = log.thread(&a).await.expect("thread").expect("a is known");
    assert_eq!((info.next_seq, info.records), (6, 6));
    let stored_bytes: u64 = [("a0", 2), ("a1", 1), ("a2", 2), ("a3", 1)]
        .iter()
        .flat_map(|(prefix, n)| events("k", prefix, *n))
        .map(|event| event.record_size() as u64)
        .sum();
    assert_eq!(info.bytes, stored_bytes);
}

macro_rules! conformance {
    ($engine:ident, $store:expr) => {
        mod $engine {
            use super::*;

            macro_rules! case {
                ($name:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        super::$name($store).await;
                    }
                };
            }

            case!(ordering_and_gap_free_sequences);
            case!(conflicting_append_writes_nothing);
            case!(read_after_and_paging);
            case!(live_tail_wakes_on_commit);
            case!(retention_by_count_is_exact);
            case!(retention_by_bytes_is_exact);
            case!(retention_by_age_is_exact);
            case!(thread_deletion);
            case!(checkpoints);
            case!(record_limit);
            case!(restart_keeps_positions_watermarks_and_log_id);
            case!(concurrent_writers_on_one_thread);
            case!(many_threads);
            case!(appends_queued_together_are_each_decided_in_order);
        }
    };
}

conformance!(sqlite, Store::sqlite());
conformance!(postgres, Store::postgres());

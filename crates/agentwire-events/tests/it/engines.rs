//! What each engine does beyond the shared contract: versioned migrations, SQLite's WAL bounds,
//! durability setting and append queue, PostgreSQL's concurrent first open, migrations and
//! checkpoints written beside appends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentwire_events::{
    After, Expected, NewEvent, POSTGRES_SCHEMA_VERSION, SQLITE_SCHEMA_VERSION, Settings, StoreUrl,
    Synchronous, Tail, ThreadId, open, open_with,
};

fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).unwrap()
}

fn checkpoint(through: u64, payload: &[u8]) -> agentwire_events::Checkpoint {
    agentwire_events::Checkpoint {
        through,
        payload: payload.to_vec(),
    }
}

fn sqlite_url(dir: &tempfile::TempDir) -> (std::path::PathBuf, String) {
    let path = dir.path().join("events.db");
    let url = format!("sqlite:{}", path.display());
    (path, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_is_created_at_the_current_schema_version_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    log.close().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SQLITE_SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let stored_id: String = conn
        .query_row("SELECT value FROM aw_meta WHERE key = 'log_id'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored_id, log.log_id().to_string());
    // Reopening migrates nothing and keeps the id.
    drop(conn);
    let again = open(&url).await.unwrap();
    assert_eq!(again.log_id(), log.log_id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_of_schema_version_1_is_migrated_with_its_events_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    let t = thread("old");
    log.append(&t, Expected::Any, vec![NewEvent::new("e", b"one".to_vec())])
        .await
        .unwrap();
    let log_id = log.log_id();
    log.close().await.unwrap();
    // What a version 1 store is: no checkpoint table.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE aw_checkpoints; PRAGMA user_version = 1;")
        .unwrap();
    drop(conn);
    let log = open(&url).await.unwrap();
    assert_eq!(log.log_id(), log_id);
    let page = log.read(&t, After::Start, 10).await.unwrap();
    assert_eq!(page.events[0].payload, b"one");
    log.put_checkpoint(&t, checkpoint(0, b"state"))
        .await
        .unwrap();
    assert_eq!(log.checkpoint(&t).await.unwrap().unwrap().through, 0);
    log.close().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SQLITE_SCHEMA_VERSION);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    open(&url).await.unwrap().close().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA user_version = {}",
        SQLITE_SCHEMA_VERSION + 1
    ))
    .unwrap();
    drop(conn);
    let err = open(&url).await.unwrap_err();
    assert_eq!(err.code(), "events.schema-too-new");
    assert!(
        err.to_string()
            .contains(&format!("version {}", SQLITE_SCHEMA_VERSION + 1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_wal_stays_bounded_by_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let limit = 1024 * 1024;
    let settings = Settings {
        wal_autocheckpoint_pages: 100,
        journal_size_limit: limit,
        synchronous: Synchronous::Normal,
        ..Settings::default()
    };
    let log = open_with(&url, settings).await.unwrap();
    let t = thread("big-writer");
    // 24 MiB through the log, 64 KiB per event.
    for _ in 0..96 {
        let events = (0..4)
            .map(|_| NewEvent::new("b", vec![1u8; 64 * 1024]))
            .collect();
        log.append(&t, Expected::Any, events).await.unwrap();
    }
    let wal = std::fs::metadata(path.with_extension("db-wal"))
        .unwrap()
        .len();
    // Without checkpoints the WAL would hold all 24 MiB; with them it holds about one
    // checkpoint interval plus the last commit.
    assert!(wal <= 4 * limit, "WAL is {wal} bytes");
    let info = log.thread(&t).await.unwrap().unwrap();
    assert_eq!(info.records, 384);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_full_queue_makes_appends_wait_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    let settings = Settings {
        queue_capacity: 1,
        max_batch_appends: 2,
        ..Settings::default()
    };
    let log = open_with(&url, settings).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let log = Arc::clone(&log);
        tasks.push(tokio::spawn(async move {
            log.append(
                &thread("queued"),
                Expected::Any,
                vec![NewEvent::new("q", format!("{i}"))],
            )
            .await
        }));
    }
    let mut firsts = Vec::new();
    for task in tasks {
        firsts.push(task.await.unwrap().unwrap().first_seq);
    }
    firsts.sort_unstable();
    assert_eq!(firsts, (0..32).collect::<Vec<_>>());
    let page = log
        .read(&thread("queued"), After::Start, 100)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 32);
}

/// Appends that fill the queue's byte budget wait for the writer, and are all committed, one
/// larger than the whole budget among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_over_the_queue_bytes_wait_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    let settings = Settings {
        queue_bytes: 1000,
        ..Settings::default()
    };
    let log = open_with(&url, settings).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let log = Arc::clone(&log);
        let size = if i == 7 { 5000 } else { 600 };
        tasks.push(tokio::spawn(async move {
            log.append(
                &thread(&format!("bytes-{i}")),
                Expected::Any,
                vec![NewEvent::new("q", "x".repeat(size))],
            )
            .await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap().first_seq, 0);
    }
    let page = log
        .read(&thread("bytes-7"), After::Start, 10)
        .await
        .unwrap();
    assert_eq!(page.events[0].payload.len(), 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_urls_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    for bad in [
        Settings {
            queue_capacity: 0,
            ..Settings::default()
        },
        Settings {
            max_record_bytes: agentwire_events::MAX_RECORD_BYTES + 1,
            ..Settings::default()
        },
        Settings {
            readers: 0,
            ..Settings::default()
        },
        Settings {
            max_batch_bytes: agentwire_events::MAX_BATCH_BYTES + 1,
            ..Settings::default()
        },
        // Past these, the queue's channel or the readers' semaphore would panic.
        Settings {
            queue_capacity: usize::MAX,
            ..Settings::default()
        },
        Settings {
            readers: usize::MAX,
            ..Settings::default()
        },
        Settings {
            queue_bytes: 0,
            ..Settings::default()
        },
        Settings {
            queue_bytes: usize::MAX,
            ..Settings::default()
        },
    ] {
        let err = open_with(&url, bad).await.unwrap_err();
        assert_eq!(err.code(), "events.invalid-setting");
    }
    for bad in [
        "",
        "sqlite:",
        "mysql://x/y",
        "postgres://host:notaport/db",
        "events.db",
    ] {
        let err = StoreUrl::parse(bad).unwrap_err();
        assert_eq!(err.code(), "events.invalid-url", "{bad:?}");
    }
    assert_eq!(
        StoreUrl::parse("sqlite://var/e.db").unwrap(),
        StoreUrl::Sqlite("var/e.db".into())
    );
    assert_eq!(
        StoreUrl::parse("postgresql://u@h:5/d").unwrap(),
        StoreUrl::Postgres("postgresql://u@h:5/d".into())
    );
    // A smaller record limit is honoured.
    let small = Settings {
        max_record_bytes: 10,
        ..Settings::default()
    };
    let log = open_with(&url, small).await.unwrap();
    let err = log
        .append(
            &thread("t"),
            Expected::Any,
            vec![NewEvent::new("k", vec![0u8; 10])],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "events.record-too-large");
    for bad in [
        "",
        &"x".repeat(agentwire_events::MAX_THREAD_ID_BYTES + 1),
        "a\nb",
    ] {
        assert_eq!(
            ThreadId::new(bad).unwrap_err().code(),
            "events.invalid-thread-id"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_instances_opening_a_new_database_together_share_one_log() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { open(&url).await })
        })
        .collect();
    let mut ids = Vec::new();
    let mut logs = Vec::new();
    for o in opens {
        let log = o.await.unwrap().unwrap();
        ids.push(log.log_id());
        logs.push(log);
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    // Appends from every instance land in one order.
    let t = thread("shared");
    for (i, log) in logs.iter().enumerate() {
        let ack = log
            .append(
                &t,
                Expected::Next(i as u64),
                vec![NewEvent::new("i", format!("{i}"))],
            )
            .await
            .unwrap();
        assert_eq!(ack.first_seq, i as u64);
    }
    let page = logs[0].read(&t, After::Start, 10).await.unwrap();
    assert_eq!(page.events.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_from_a_newer_build_is_refused() {
    let server = agentwire_testkit::postgres_server();
    let url = server.fresh_database("engines");
    open(&url).await.unwrap().close().await.unwrap();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .execute(
            "UPDATE aw_meta SET value = $1 WHERE key = 'schema_version'",
            &[&(POSTGRES_SCHEMA_VERSION + 1).to_string()],
        )
        .await
        .unwrap();
    let err = open(&url).await.unwrap_err();
    assert_eq!(err.code(), "events.schema-too-new");
}

async fn pg_client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// A thread whose stored events were edited by hand to a negative position makes a trim by
/// size fail with `events.corrupt` on PostgreSQL too, not the writer: the log goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_trim_over_a_hand_edited_negative_position_is_corrupt_and_the_log_goes_on() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let t = thread("t");
    log.append(&t, Expected::Any, vec![NewEvent::new("e", "x")])
        .await
        .unwrap();
    pg_client(&url)
        .await
        .execute(
            "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES ('t', -1, gen_random_uuid(), 'e', 0, 100, '\\x00')",
            &[],
        )
        .await
        .unwrap();
    let retention = agentwire_events::Retention {
        max_records: u64::MAX,
        max_bytes: 2,
        max_age: std::time::Duration::from_secs(1_000_000_000),
    };
    let err = log
        .trim(&t, &retention, std::time::SystemTime::now())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "events.corrupt", "{err}");
    assert!(err.to_string().contains("a position of -1"), "{err}");
    let deleted = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        log.delete_thread(&thread("other")),
    )
    .await
    .expect("the writer answers after the refused trim");
    assert!(!deleted.unwrap());
    log.close().await.unwrap();
}

/// Three instances append to the same sixteen threads at once, each from eight tasks, a task's
/// appends one after the other (one or three events, any position): the group statements of
/// the instances queue on the threads' rows, and every thread ends gap-free with every
/// acknowledged append whole at the position its acknowledgement gave and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_instances_appending_to_the_same_threads_lose_nothing_and_agree_on_positions() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let mut logs = Vec::new();
    for _ in 0..3 {
        logs.push(open(&url).await.unwrap());
    }
    let threads: Vec<ThreadId> = (0..16).map(|i| thread(&format!("race-{i:02}"))).collect();
    let mut tasks = Vec::new();
    for (instance, log) in logs.iter().enumerate() {
        for task in 0..8 {
            let log = Arc::clone(log);
            let threads = threads.clone();
            tasks.push(tokio::spawn(async move {
                let mut acks = Vec::new();
                for round in 0..12 {
                    let t = &threads[(task * 5 + round * 3 + instance) % threads.len()];
                    let n = if (task + round) % 4 == 0 { 3 } else { 1 };
                    let name = format!("{instance}.{task}.{round}");
                    let events = (0..n)
                        .map(|k| NewEvent::new("race", format!("{name}.{k}")))
                        .collect();
                    let ack = log.append(t, Expected::Any, events).await.unwrap();
                    acks.push((t.clone(), ack.first_seq, name, n));
                }
                acks
            }));
        }
    }
    let mut expected: std::collections::BTreeMap<(String, u64), String> = Default::default();
    for task in tasks {
        for (t, first, name, n) in task.await.unwrap() {
            for k in 0..n {
                let previous = expected.insert((t.to_string(), first + k), format!("{name}.{k}"));
                assert_eq!(
                    previous,
                    None,
                    "two appends acknowledged at {t} {}",
                    first + k
                );
            }
        }
    }
    let mut stored = 0usize;
    for t in &threads {
        let page = logs[1].read(t, After::Start, 1_000).await.unwrap();
        assert_eq!(page.next_seq, page.events.len() as u64, "{t}");
        for event in &page.events {
            assert_eq!(
                expected
                    .get(&(t.to_string(), event.seq))
                    .map(String::as_bytes),
                Some(event.payload.as_slice()),
                "{t} {}",
                event.seq
            );
        }
        stored += page.events.len();
    }
    assert_eq!(stored, expected.len());
    for log in logs {
        log.close().await.unwrap();
    }
    // The instances lock the threads' rows in one order, so none waited for a deadlock to be
    // found (a second each) and then appended one by one. A backend adds its deadlocks to the
    // database's statistics when it exits.
    let client = pg_client(&url).await;
    for _ in 0..100 {
        let others: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if others == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let deadlocks: i64 = client
        .query_one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(deadlocks, 0);
}

/// The backends on `client`'s database other than its own that match `filter` (a condition
/// on `pg_stat_activity`), once their count is `want` (or after five seconds).
async fn backends_once(client: &tokio_postgres::Client, filter: &str, want: i64) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND ({filter})"
    );
    let mut count = -1;
    for _ in 0..250 {
        count = client.query_one(&sql, &[]).await.unwrap().get(0);
        if count == want {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    count
}

/// The connections that listen for commits (their last statement the listener's `LISTEN`),
/// once their count is `want` (or after five seconds).
async fn listeners_once(client: &tokio_postgres::Client, want: i64) -> i64 {
    backends_once(client, "query LIKE 'LISTEN %'", want).await
}

/// An instance listens for other instances' commits only while something follows them: with no
/// tail it holds no listening connection; a tail gets another instance's commit, and the
/// connection closes once the tail is gone and opens again for the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_instance_listens_for_other_instances_only_while_followed() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let (writer, follower) = (open(&url).await.unwrap(), open(&url).await.unwrap());
    let client = pg_client(&url).await;
    let t = thread("followed");
    writer
        .append(&t, Expected::Any, vec![NewEvent::new("e", "0")])
        .await
        .unwrap();
    assert_eq!(listeners_once(&client, 0).await, 0);
    for round in 1..=2u64 {
        let mut tail = Tail::new(
            Arc::clone(&follower),
            t.clone(),
            After::Position(agentwire_events::Position {
                log_id: follower.log_id(),
                seq: round - 1,
            }),
            10,
        );
        let next = tokio::spawn(async move {
            let page = tail.next_page().await;
            (tail, page)
        });
        assert_eq!(listeners_once(&client, 1).await, 1);
        writer
            .append(
                &t,
                Expected::Next(round),
                vec![NewEvent::new("e", format!("{round}"))],
            )
            .await
            .unwrap();
        let (tail, page) = tokio::time::timeout(std::time::Duration::from_secs(10), next)
            .await
            .expect("the other instance's commit woke the tail")
            .unwrap();
        let events = page.unwrap().events;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seq, round);
        drop(tail);
        assert_eq!(listeners_once(&client, 0).await, 0);
    }
    writer.close().await.unwrap();
    follower.close().await.unwrap();
}

/// A thread whose row is behind its events (its next position already taken) fails the group
/// commit's one statement, which commits nothing; every append of that group is then decided on
/// its own: the one to that thread is a conflict and writes nothing, the others commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_position_taken_behind_a_thread_row_fails_only_its_own_append() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let (behind, other) = (thread("behind"), thread("other"));
    for t in [&behind, &other] {
        log.append(
            t,
            Expected::Any,
            vec![NewEvent::new("e", "0"), NewEvent::new("e", "1")],
        )
        .await
        .unwrap();
    }
    let client = pg_client(&url).await;
    client
        .execute(
            "UPDATE aw_threads SET next_seq = 1 WHERE thread = 'behind'",
            &[],
        )
        .await
        .unwrap();
    let (taken, committed) = tokio::join!(
        log.append(&behind, Expected::Any, vec![NewEvent::new("e", "late")]),
        log.append(&other, Expected::Next(2), vec![NewEvent::new("e", "2")]),
    );
    let err = taken.unwrap_err();
    assert!(
        matches!(
            err,
            agentwire_events::Error::Conflict {
                expected: 1,
                actual: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(committed.unwrap().first_seq, 2);
    let count = |name: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(
                    "SELECT count(*), (array_agg(payload ORDER BY seq DESC))[1] FROM aw_events WHERE thread = $1",
                    &[&name],
                )
                .await
                .unwrap();
            (row.get::<_, i64>(0), row.get::<_, Vec<u8>>(1))
        }
    };
    assert_eq!(count("behind").await, (2, b"1".to_vec()));
    assert_eq!(count("other").await, (3, b"2".to_vec()));
    log.close().await.unwrap();
}

/// A checkpoint's transaction holds its thread's row `FOR KEY SHARE` while its payload is
/// written (on the checkpoints' own connection): appends to the thread, and the writer behind
/// them, go on meanwhile, and a deletion of the thread waits for the checkpoint to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_checkpoint_being_written_holds_up_no_append_and_no_checkpoint_outlives_a_deletion()
 {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let t = thread("checkpointed");
    log.append(&t, Expected::Next(0), vec![NewEvent::new("e", "0")])
        .await
        .unwrap();
    // A checkpoint in the middle of writing, as `put_checkpoint` holds it.
    let mut holder = pg_client(&url).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM aw_threads WHERE thread = $1 FOR KEY SHARE",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    let appended = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        log.append(&t, Expected::Next(1), vec![NewEvent::new("e", "1")]),
    )
    .await
    .expect("an append waited for a checkpoint being written")
    .unwrap();
    assert_eq!(appended.first_seq, 1);
    let trimmed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        log.trim(
            &t,
            &agentwire_events::Retention::default(),
            std::time::SystemTime::now(),
        ),
    )
    .await
    .expect("a trim waited for a checkpoint being written")
    .unwrap();
    assert_eq!(trimmed.next_seq, 2);
    let deletion = {
        let log = Arc::clone(&log);
        let t = t.clone();
        tokio::spawn(async move { log.delete_thread(&t).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !deletion.is_finished(),
        "a deletion did not wait for the checkpoint"
    );
    tx.execute(
        "INSERT INTO aw_checkpoints (thread, through, payload) VALUES ($1, 1, '\\x00')",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(deletion.await.unwrap().unwrap());
    assert_eq!(log.checkpoint(&t).await.unwrap(), None);
    let err = log
        .put_checkpoint(&t, checkpoint(1, b"late"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "events.thread-deleted");
    assert_eq!(log.checkpoint(&t).await.unwrap(), None);
    log.close().await.unwrap();
}

/// The append function's definition and the checkpoint payload's storage (`e` external, `x`
/// extended).
async fn append_lock_and_checkpoint_storage(client: &tokio_postgres::Client) -> (String, String) {
    let row = client
        .query_one(
            "SELECT pg_get_functiondef('aw_append'::regproc),
                    (SELECT attstorage::text FROM pg_attribute
                     WHERE attrelid = 'aw_checkpoints'::regclass AND attname = 'payload')",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// A store of schema version 2 (checkpoints compressed, appends locking thread rows
/// `FOR UPDATE`) is brought to the current version with its events and checkpoint kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_of_schema_version_2_is_migrated_with_its_events_kept() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let t = thread("kept");
    log.append(&t, Expected::Next(0), vec![NewEvent::new("e", "0")])
        .await
        .unwrap();
    log.put_checkpoint(&t, checkpoint(0, b"state"))
        .await
        .unwrap();
    log.close().await.unwrap();
    let client = pg_client(&url).await;
    let (function, storage) = append_lock_and_checkpoint_storage(&client).await;
    assert!(function.contains("FOR NO KEY UPDATE"), "{function}");
    assert_eq!(storage, "e");
    // Back to what version 2 wrote.
    client
        .batch_execute(&format!(
            "ALTER TABLE aw_checkpoints ALTER COLUMN payload SET STORAGE EXTENDED;
             UPDATE aw_meta SET value = '2' WHERE key = 'schema_version';
             {}",
            function.replace("FOR NO KEY UPDATE", "FOR UPDATE")
        ))
        .await
        .unwrap();
    let (function, storage) = append_lock_and_checkpoint_storage(&client).await;
    assert!(!function.contains("FOR NO KEY UPDATE"), "{function}");
    assert_eq!(storage, "x");
    let log = open(&url).await.unwrap();
    let (function, storage) = append_lock_and_checkpoint_storage(&client).await;
    assert!(function.contains("FOR NO KEY UPDATE"), "{function}");
    assert_eq!(storage, "e");
    let version: String = client
        .query_one(
            "SELECT value FROM aw_meta WHERE key = 'schema_version'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, POSTGRES_SCHEMA_VERSION.to_string());
    let page = log.read(&t, After::Start, 10).await.unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(log.checkpoint(&t).await.unwrap().unwrap().payload, b"state");
    log.append(&t, Expected::Next(1), vec![NewEvent::new("e", "1")])
        .await
        .unwrap();
    log.close().await.unwrap();
}

/// An append that fails after it began to write (here: its event's row is already taken, which
/// only a damaged or hand-edited store can hold) fails alone: the appends committed in the same
/// group commit stand, and nothing of the failed one remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_append_failing_after_it_wrote_is_rolled_back_alone_in_its_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    log.append(
        &thread("warm"),
        Expected::Any,
        vec![NewEvent::new("e", "0")],
    )
    .await
    .unwrap();
    // A row for position 0 of a thread the store does not list.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker
        .execute(
            "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES ('damaged', 0, x'00', 'e', 0, 1, x'00')",
            [],
        )
        .unwrap();
    // Hold the write lock, so that the first append waits in the writer while the next two
    // queue up behind it and are gathered into one group commit.
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let append = |name: &'static str, expected: Expected| {
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            log.append(&thread(name), expected, vec![NewEvent::new("e", name)])
                .await
        })
    };
    let first = append("warm", Expected::Next(1));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let damaged = append("damaged", Expected::Next(0));
    let healthy = append("healthy", Expected::Next(0));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(first.await.unwrap().unwrap().first_seq, 1);
    let err = damaged.await.unwrap().unwrap_err();
    assert_eq!(err.code(), "events.sqlite", "{err}");
    assert_eq!(healthy.await.unwrap().unwrap().first_seq, 0);
    assert!(log.thread(&thread("damaged")).await.unwrap().is_none());
    let page = log
        .read(&thread("healthy"), After::Start, 10)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 1);
    // The damaged thread's next append meets the same row and fails the same way.
    let err = log
        .append(
            &thread("damaged"),
            Expected::Next(0),
            vec![NewEvent::new("e", "x")],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "events.sqlite", "{err}");
}

/// A statement error that makes SQLite roll the whole transaction back (as some full-disk,
/// I/O and out-of-memory errors do; here a trigger's `RAISE(ROLLBACK)`) fails the whole group
/// commit: no append of it is answered as committed, none is stored, and no statement after
/// the error commits on its own. The log takes appends again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_group_commit_rolled_back_as_a_whole_fails_every_append_and_stores_none() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    log.append(
        &thread("warm"),
        Expected::Any,
        vec![NewEvent::new("e", "0")],
    )
    .await
    .unwrap();
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker
        .execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON aw_events WHEN NEW.kind = 'boom'
             BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;",
        )
        .unwrap();
    // The first append waits in the writer while the next three queue up behind it and are
    // gathered into one group commit.
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let append = |name: &'static str, kind: &'static str| {
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            log.append(
                &thread(name),
                Expected::Any,
                vec![NewEvent::new(kind, name)],
            )
            .await
        })
    };
    let first = append("warm", "e");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let before = append("before", "e");
    let boom = append("boom", "boom");
    let after = append("after", "e");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(first.await.unwrap().unwrap().first_seq, 1);
    for (name, answer) in [("before", before), ("boom", boom), ("after", after)] {
        let err = answer.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "events.write-failed", "{name}: {err}");
        assert!(err.to_string().contains("rolled back"), "{name}: {err}");
        assert!(
            log.thread(&thread(name)).await.unwrap().is_none(),
            "{name} was stored"
        );
    }
    for name in ["before", "after"] {
        let appended = log
            .append(
                &thread(name),
                Expected::Next(0),
                vec![NewEvent::new("e", name)],
            )
            .await
            .unwrap();
        assert_eq!(appended.first_seq, 0);
    }
    log.close().await.unwrap();
}

/// Reads whose callers stop waiting keep their reader connection counted until the read ends:
/// no more than `readers` connections are ever open, and none is kept beyond them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reads_whose_callers_stop_waiting_open_no_more_than_readers_connections() {
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let settings = Settings {
        readers: 1,
        foreign_commit_poll: None,
        ..Settings::default()
    };
    let log = open_with(&url, settings).await.unwrap();
    let t = thread("big");
    for _ in 0..10 {
        let events = (0..100)
            .map(|_| NewEvent::new("e", vec![b'7'; 10_000]))
            .collect();
        log.append(&t, Expected::Any, events).await.unwrap();
    }
    for _ in 0..64 {
        assert!(log.read(&t, After::Start, 1_000).now_or_never().is_none());
    }
    // Every read runs to its end; then one more, awaited, finds the one connection free.
    assert_eq!(
        log.read(&t, After::Start, 1_000)
            .await
            .unwrap()
            .events
            .len(),
        1_000
    );
    let db = std::fs::canonicalize(&path).unwrap();
    let open = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.unwrap().path()).ok())
        .filter(|target| *target == db)
        .count();
    // The writer's connection and one reader's.
    assert_eq!(open, 2, "connections open on the file with readers = 1");
    log.close().await.unwrap();
}

/// A thread whose stored events were edited by hand to a negative position makes a trim by
/// size fail with `events.corrupt`, not the writer: the log goes on taking appends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_trim_over_a_hand_edited_negative_position_is_corrupt_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    let t = thread("t");
    log.append(&t, Expected::Any, vec![NewEvent::new("e", "x")])
        .await
        .unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES ('t', -1, x'00000000000000000000000000000000', 'e', 0, 100, x'00')",
            [],
        )
        .unwrap();
    let retention = agentwire_events::Retention {
        max_records: u64::MAX,
        max_bytes: 2,
        max_age: std::time::Duration::from_secs(1_000_000_000),
    };
    let err = log
        .trim(&t, &retention, std::time::SystemTime::now())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "events.corrupt", "{err}");
    assert!(err.to_string().contains("a position of -1"), "{err}");
    let appended = log
        .append(&thread("u"), Expected::Any, vec![NewEvent::new("e", "y")])
        .await
        .unwrap();
    assert_eq!(appended.first_seq, 0);
    log.close().await.unwrap();
}

/// A thread's row moves on once every `SETTLE_EVENTS` (256) events, not at every append; what
/// the row leaves out (its tail) is read from the events, so bounds and sizes stay exact, for
/// this writer, for a second log on the same file, and after reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thread_rows_settle_lazily_and_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    let t = thread("lazy");
    let mut bytes = 0u64;
    for i in 0..300u64 {
        let event = NewEvent::new("e", vec![b'x'; (i % 7) as usize]);
        bytes += event.record_size() as u64;
        let appended = log
            .append(&t, Expected::Next(i), vec![event])
            .await
            .unwrap();
        assert_eq!(appended.first_seq, i);
        if i % 50 == 0 {
            let info = log.thread(&t).await.unwrap().unwrap();
            assert_eq!(
                (info.next_seq, info.records, info.bytes),
                (i + 1, i + 1, bytes)
            );
        }
    }
    let row = |path: &std::path::Path| -> (i64, i64) {
        rusqlite::Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT next_seq, bytes FROM aw_threads WHERE thread = 'lazy'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    // Created with the first event, settled once by the 256 after it: the row leaves out the 43
    // since.
    assert_eq!(row(&path).0, 257);
    let listed = log.threads(None, 10).await.unwrap();
    assert_eq!((listed[0].next_seq, listed[0].bytes), (300, bytes));

    // A second log on the same file appends; the first one's memory of the thread is dropped.
    let other = open(&url).await.unwrap();
    let err = other
        .append(
            &t,
            Expected::Next(299),
            vec![NewEvent::new("e", b"x".to_vec())],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, agentwire_events::Error::Conflict { actual: 300, .. }),
        "{err}"
    );
    other
        .append(
            &t,
            Expected::Next(300),
            vec![NewEvent::new("e", b"y".to_vec())],
        )
        .await
        .unwrap();
    let err = log
        .append(
            &t,
            Expected::Next(300),
            vec![NewEvent::new("e", b"z".to_vec())],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, agentwire_events::Error::Conflict { actual: 301, .. }),
        "{err}"
    );
    log.append(
        &t,
        Expected::Next(301),
        vec![NewEvent::new("e", b"z".to_vec())],
    )
    .await
    .unwrap();
    bytes += 4;
    other.close().await.unwrap();

    // Every event once, in order, and a checkpoint at the true head is accepted.
    let mut seqs = Vec::new();
    let mut after = After::Start;
    loop {
        let page = log.read(&t, after, 100).await.unwrap();
        let Some(last) = page.events.last() else {
            break;
        };
        after = After::Position(last.position(log.log_id()));
        seqs.extend(page.events.iter().map(|e| e.seq));
    }
    assert_eq!(seqs, (0..302).collect::<Vec<_>>());
    log.put_checkpoint(&t, checkpoint(301, b"state"))
        .await
        .unwrap();
    // The checkpoint settled the row.
    assert_eq!(row(&path), (302, bytes as i64));
    log.append(
        &t,
        Expected::Next(302),
        vec![NewEvent::new("e", b"w".to_vec())],
    )
    .await
    .unwrap();
    bytes += 2;
    log.close().await.unwrap();

    let log = open(&url).await.unwrap();
    let info = log.thread(&t).await.unwrap().unwrap();
    assert_eq!((info.next_seq, info.bytes), (303, bytes));
    log.append(
        &t,
        Expected::Next(303),
        vec![NewEvent::new("e", b"v".to_vec())],
    )
    .await
    .unwrap();
    assert!(log.delete_thread(&t).await.unwrap());
    let info = log.thread(&t).await.unwrap().unwrap();
    assert_eq!(
        (info.deleted, info.low_watermark, info.next_seq, info.bytes),
        (true, 304, 304, 0)
    );
    log.close().await.unwrap();
}

/// With the writer idle, an append is committed within the call, on the caller's thread: its
/// future is ready at its first poll, on a runtime of one thread where nothing else could run
/// meanwhile. Checkpoints (run by the writer thread) and appends then alternate, and what was
/// answered is what is stored.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_append_with_the_writer_idle_commits_within_the_call() {
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    let t = thread("inline");
    for i in 0..20u64 {
        let ack = log
            .append(
                &t,
                Expected::Next(i),
                vec![NewEvent::new("e", format!("{i}").into_bytes())],
            )
            .now_or_never()
            .expect("committed within the call")
            .unwrap();
        assert_eq!(ack.first_seq, i);
        if i % 5 == 4 {
            log.put_checkpoint(
                &t,
                agentwire_events::Checkpoint {
                    through: i,
                    payload: b"state".to_vec(),
                },
            )
            .await
            .unwrap();
        }
    }
    let page = log.read(&t, After::Start, 100).await.unwrap();
    let payloads: Vec<Vec<u8>> = page.events.iter().map(|e| e.payload.clone()).collect();
    let expected: Vec<Vec<u8>> = (0..20).map(|i| format!("{i}").into_bytes()).collect();
    assert_eq!(payloads, expected);
    assert_eq!(log.checkpoint(&t).await.unwrap().unwrap().through, 19);
    log.close().await.unwrap();
}

/// Appenders that take the writer themselves and the writer thread share it without losing or
/// reordering anything: 32 tasks appending to their own threads and to one shared thread,
/// beside checkpoints, trims and a deletion that only the writer thread runs, and appends
/// whose callers give up waiting (their futures dropped after the first poll), which commit or
/// not but never block the others. Then the log closes and reopens with every answered event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_on_callers_and_on_the_writer_thread_lose_nothing() {
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    let log = open(&url).await.unwrap();
    let shared = thread("shared");
    let mut tasks = Vec::new();
    for i in 0..32 {
        let (log, shared) = (Arc::clone(&log), shared.clone());
        tasks.push(tokio::spawn(async move {
            let own = thread(&format!("own-{i:02}"));
            let mut shared_acks = Vec::new();
            for j in 0..40u64 {
                let ack = log
                    .append(
                        &own,
                        Expected::Next(j),
                        vec![NewEvent::new("e", format!("{i}.{j}").into_bytes())],
                    )
                    .await
                    .unwrap();
                assert_eq!(ack.first_seq, j);
                let ack = log
                    .append(
                        &shared,
                        Expected::Any,
                        vec![NewEvent::new("s", format!("{i}.{j}").into_bytes())],
                    )
                    .await
                    .unwrap();
                shared_acks.push((ack.first_seq, format!("{i}.{j}")));
                if j % 10 == 0 {
                    // Given up at once: queued or committed, but nobody waits for it.
                    let given_up = thread(&format!("given-up-{i:02}"));
                    let _ = log
                        .append(&given_up, Expected::Any, vec![NewEvent::new("g", vec![])])
                        .now_or_never();
                }
            }
            shared_acks
        }));
    }
    let side = {
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            let doomed = thread("doomed");
            log.append(&doomed, Expected::Any, vec![NewEvent::new("d", vec![])])
                .await
                .unwrap();
            for k in 0..20u64 {
                let own = thread("own-00");
                if let Some(info) = log.thread(&own).await.unwrap()
                    && info.next_seq > 0
                {
                    log.put_checkpoint(
                        &own,
                        agentwire_events::Checkpoint {
                            through: info.next_seq - 1,
                            payload: format!("state {k}").into_bytes(),
                        },
                    )
                    .await
                    .unwrap();
                }
                log.trim(
                    &thread("own-01"),
                    &agentwire_events::Retention {
                        max_records: 1_000,
                        max_bytes: u64::MAX,
                        max_age: std::time::Duration::from_secs(3600),
                    },
                    std::time::SystemTime::now(),
                )
                .await
                .unwrap();
                tokio::task::yield_now().await;
            }
            assert!(log.delete_thread(&doomed).await.unwrap());
        })
    };
    let mut shared_expected = std::collections::BTreeMap::new();
    for task in tasks {
        for (seq, payload) in task.await.unwrap() {
            assert!(
                shared_expected.insert(seq, payload).is_none(),
                "{seq} twice"
            );
        }
    }
    side.await.unwrap();
    log.close().await.unwrap();

    let log = open(&url).await.unwrap();
    for i in 0..32 {
        let page = log
            .read(&thread(&format!("own-{i:02}")), After::Start, 100)
            .await
            .unwrap();
        let payloads: Vec<String> = page
            .events
            .iter()
            .map(|e| String::from_utf8(e.payload.clone()).unwrap())
            .collect();
        let expected: Vec<String> = (0..40).map(|j| format!("{i}.{j}")).collect();
        assert_eq!(payloads, expected);
    }
    let mut stored = std::collections::BTreeMap::new();
    let mut after = After::Start;
    loop {
        let page = log.read(&shared, after, 500).await.unwrap();
        let Some(last) = page.events.last() else {
            break;
        };
        after = After::Position(last.position(log.log_id()));
        for event in &page.events {
            stored.insert(event.seq, String::from_utf8(event.payload.clone()).unwrap());
        }
    }
    assert_eq!(stored, shared_expected);
    assert_eq!(
        stored.keys().copied().collect::<Vec<_>>(),
        (0..1280).collect::<Vec<u64>>()
    );
    assert!(
        log.thread(&thread("doomed"))
            .await
            .unwrap()
            .unwrap()
            .deleted
    );
}

/// A close that follows a checkpoint at once ends the writer: the writer thread, woken once
/// for both, answers the checkpoint and still finds the queue closed (a thread that went back
/// to sleep after the answer would never wake again, and the close would never return). The
/// checkpoint is answered, stored or `Closed`.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_close_right_after_a_checkpoint_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    let t = thread("checkpointed");
    for round in 0..50u64 {
        let log = open(&url).await.unwrap();
        log.append(&t, Expected::Next(round), vec![NewEvent::new("e", vec![1])])
            .await
            .unwrap();
        let put = tokio::spawn({
            let (log, t) = (Arc::clone(&log), t.clone());
            async move { log.put_checkpoint(&t, checkpoint(round, b"state")).await }
        });
        // The checkpoint is queued (and its ring sent) before the close, both before the
        // writer thread, asleep, has woken.
        tokio::task::yield_now().await;
        tokio::time::timeout(std::time::Duration::from_secs(20), log.close())
            .await
            .expect("the close returns")
            .unwrap();
        match put.await.unwrap() {
            Ok(()) | Err(agentwire_events::Error::Closed) => {}
            Err(other) => panic!("checkpoint: {other:?}"),
        }
    }
}

/// Closing while appends are being sent ends the writer once the queue is drained: every
/// append is answered (committed, or `Closed`), and the close returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_close_during_appends_answers_every_append_and_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = sqlite_url(&dir);
    for round in 0..20 {
        let log = open(&url).await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let t = thread(&format!("closing-{round}-{i}"));
                    loop {
                        match log
                            .append(&t, Expected::Any, vec![NewEvent::new("e", vec![1])])
                            .await
                        {
                            Ok(_) => tokio::task::yield_now().await,
                            Err(agentwire_events::Error::Closed) => return,
                            Err(other) => panic!("append: {other:?}"),
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        tokio::time::timeout(std::time::Duration::from_secs(20), log.close())
            .await
            .expect("the close returns")
            .unwrap();
        for task in tasks {
            tokio::time::timeout(std::time::Duration::from_secs(20), task)
                .await
                .expect("every append is answered")
                .unwrap();
        }
    }
}

/// An append that finds the writer free is committed on its caller's task, and a caller that
/// stops waiting while its commit is in flight does not take the commit with it: the append
/// behind it, queued meanwhile and waiting on the same writer, is still answered, and both are
/// stored in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_append_whose_caller_stops_waiting_mid_commit_leaves_the_next_one_answered() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let t = thread("leader");
    log.append(&t, Expected::Next(0), vec![NewEvent::new("k", "0")])
        .await
        .unwrap();
    for round in 1..=20u64 {
        let first = round * 2 - 1;
        let mut leading = Box::pin(log.append(
            &t,
            Expected::Next(first),
            vec![NewEvent::new("k", first.to_string())],
        ));
        // Polled once: queued, and its commit sent on the caller's task.
        assert!(futures_util::poll!(leading.as_mut()).is_pending());
        let behind = {
            let log = Arc::clone(&log);
            let t = t.clone();
            tokio::spawn(async move {
                log.append(
                    &t,
                    Expected::Next(first + 1),
                    vec![NewEvent::new("k", (first + 1).to_string())],
                )
                .await
            })
        };
        // The append behind is queued, waiting for the writer the dropped caller holds.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(leading);
        let appended = tokio::time::timeout(std::time::Duration::from_secs(10), behind)
            .await
            .expect("the append behind a dropped one is answered")
            .unwrap()
            .unwrap();
        assert_eq!(appended.first_seq, first + 1);
    }
    let page = log.read(&t, After::Start, 100).await.unwrap();
    let payloads: Vec<String> = page
        .events
        .iter()
        .map(|e| String::from_utf8(e.payload.clone()).unwrap())
        .collect();
    let want: Vec<String> = (0..=40).map(|n: u64| n.to_string()).collect();
    assert_eq!(payloads, want);
    log.close().await.unwrap();
}

/// The connections an instance writes on break (the server ends them): the appends in flight
/// fail with the reason, the next ones are committed again, and the instance connects both
/// again (the writer's and the appenders').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_appends_are_committed_again_once_the_writing_connections_are_ended() {
    let url = agentwire_testkit::postgres_server().fresh_database("engines");
    let log = open(&url).await.unwrap();
    let t = thread("ended");
    let client = pg_client(&url).await;
    // The writer's connection, then the appenders', connected by the first append that found
    // the queue free.
    for _ in 0..3 {
        log.append(&t, Expected::Any, vec![NewEvent::new("k", "before")])
            .await
            .unwrap();
    }
    let writing = "application_name IN ('agentwire writer', 'agentwire appenders')";
    assert_eq!(backends_once(&client, writing, 2).await, 2);
    // Each backend ended, and gone, before the count returns.
    let ended: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
                 FROM pg_stat_activity WHERE datname = current_database() AND {writing}"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ended, 2, "the writer's and the appenders' connections");
    let mut failed = 0;
    let mut committed = 0;
    for _ in 0..100 {
        let append = log.append(&t, Expected::Any, vec![NewEvent::new("k", "after")]);
        match tokio::time::timeout(std::time::Duration::from_secs(10), append)
            .await
            .expect("an append is answered")
        {
            Ok(_) => committed += 1,
            Err(err) => {
                assert!(
                    matches!(
                        err.code(),
                        "events.closed" | "events.commit-outcome-unknown" | "events.write-failed"
                    ),
                    "{err}"
                );
                assert_eq!(committed, 0, "a failure after a commit: {err}");
                failed += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
        if committed == 10 {
            break;
        }
    }
    assert_eq!(committed, 10, "{failed} appends failed");
    // A deletion runs on the writer's thread, which connects again before it if it has not
    // yet; the appenders' connection is connected again by a task.
    // (A deletion sent before the thread noticed its connection ended fails, as an append
    // does, and the next one connects again.)
    let mut deleted = Err(agentwire_events::Error::Closed);
    for _ in 0..3 {
        deleted = log.delete_thread(&thread("never written")).await;
        if deleted.is_ok() {
            break;
        }
    }
    deleted.unwrap();
    assert_eq!(backends_once(&client, writing, 2).await, 2);
    let page = log.read(&t, After::Start, 100).await.unwrap();
    assert!(page.events.len() >= 13, "{}", page.events.len());
    log.close().await.unwrap();
}

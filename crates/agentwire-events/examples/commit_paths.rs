//! What one SQLite commit of one event costs by the path it takes, each path on its own file
//! with the event log's table shapes, all four alternating commit by commit from one task of a
//! multi-threaded tokio runtime (as a host's code runs):
//!
//! - `insert`: `BEGIN IMMEDIATE`, one `INSERT` into `aw_events`, `COMMIT`, on the caller's
//!   thread (the anchor of the runtime's appends benchmark);
//! - `update+insert`: the same with the thread row moved on first (`UPDATE aw_threads …
//!   RETURNING`), which the log does once every 256 events of a thread (docs/events.md);
//! - `hand-off`: the `insert` run by a writer thread that blocks on a tokio channel and answers
//!   on a oneshot, as the log's writer does;
//! - `block_in_place`: the `insert` on the caller's worker thread through
//!   `tokio::task::block_in_place`.
//!
//! usage: cargo run --release -p agentwire-events --example commit_paths [-- full|normal [N]]
//! (default `full`, 3,000 commits a path). Prints p50 and p99 in microseconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

fn open(path: &Path, synchronous: &str) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};
         CREATE TABLE aw_threads (thread TEXT PRIMARY KEY, next_seq INTEGER NOT NULL,
             low_seq INTEGER NOT NULL, bytes INTEGER NOT NULL,
             deleted INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);
         CREATE TABLE aw_events (thread TEXT NOT NULL, seq INTEGER NOT NULL,
             event_id BLOB NOT NULL, kind TEXT NOT NULL, committed_at INTEGER NOT NULL,
             size INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (thread, seq));
         INSERT INTO aw_threads VALUES ('t', 0, 0, 0, 0, 0);"
    ))
    .unwrap();
    conn
}

/// One transaction of one event at `seq`, the thread row moved on first when `update`.
fn commit(conn: &Connection, seq: &mut i64, update: bool) {
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    if update {
        let _: i64 = conn
            .prepare_cached(
                "UPDATE aw_threads SET next_seq = next_seq + ?2, bytes = bytes + ?3
                 WHERE thread = ?1 AND deleted = 0 AND (?4 < 0 OR next_seq = ?4)
                 RETURNING next_seq",
            )
            .unwrap()
            .query_row(params!["t", 1i64, 120i64, -1i64], |r| r.get(0))
            .unwrap();
    }
    conn.prepare_cached(
        "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .unwrap()
    .execute(params![
        "t",
        *seq,
        uuid::Uuid::new_v4().as_bytes().as_slice(),
        "thread.renamed",
        1i64,
        120i64,
        vec![b'x'; 100]
    ])
    .unwrap();
    *seq += 1;
    conn.execute_batch("COMMIT").unwrap();
}

fn micros(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6
}

fn main() {
    let synchronous = match std::env::args().nth(1).as_deref() {
        None | Some("full") => "FULL",
        Some("normal") => "NORMAL",
        Some(other) => panic!("full|normal, not {other}"),
    };
    let commits: usize = std::env::args()
        .nth(2)
        .map_or(3000, |n| n.parse().expect("N commits"));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let measured = tokio.spawn(async move {
        let dir = tempfile::tempdir().unwrap();
        let insert = open(&dir.path().join("insert.db"), synchronous);
        let update = open(&dir.path().join("update.db"), synchronous);
        let in_place = open(&dir.path().join("in-place.db"), synchronous);
        let writer = open(&dir.path().join("hand-off.db"), synchronous);
        let (requests, mut queue) = mpsc::channel::<oneshot::Sender<()>>(64);
        let writer_thread = std::thread::spawn(move || {
            let mut seq = 0;
            while let Some(reply) = queue.blocking_recv() {
                commit(&writer, &mut seq, false);
                let _ = reply.send(());
            }
        });
        let mut seqs = [0i64; 3];
        let mut times: [Vec<Duration>; 4] = Default::default();
        for i in 0..commits {
            for k in 0..4 {
                let path = (i + k) % 4;
                let started = Instant::now();
                match path {
                    0 => commit(&insert, &mut seqs[0], false),
                    1 => commit(&update, &mut seqs[1], true),
                    2 => {
                        let (reply, answer) = oneshot::channel();
                        requests.send(reply).await.unwrap();
                        answer.await.unwrap();
                    }
                    _ => tokio::task::block_in_place(|| commit(&in_place, &mut seqs[2], false)),
                }
                times[path].push(started.elapsed());
            }
        }
        drop(requests);
        writer_thread.join().unwrap();
        times
    });
    let mut times = tokio.block_on(measured).unwrap();
    println!("one-event commits, synchronous = {synchronous}, {commits} a path, alternating");
    for (name, sorted) in ["insert", "update+insert", "hand-off", "block_in_place"]
        .iter()
        .zip(times.iter_mut())
    {
        sorted.sort();
        println!(
            "  {name:<15} p50 {:7.1} us  p99 {:7.1} us",
            micros(sorted, 0.5),
            micros(sorted, 0.99)
        );
    }
}

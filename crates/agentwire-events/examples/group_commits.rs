//! What one SQLite transaction of `rows` one-event appends costs when each row is on a thread
//! of its own (as a group commit of that many concurrent appenders is), by the number of rows
//! and by the length of the thread key. Each shape runs on its own file with the event log's
//! table shapes and settings (WAL, the chosen `synchronous`, the log's checkpoint bounds); the
//! shapes alternate transaction by transaction, so that all sample the same disk.
//!
//! - rows: 1, 16, 31 and 32 (32 concurrent appenders whose commits alternate in two halves commit
//!   16 and 16, or 31 and 1, a transaction; the runtime's appends benchmark compares them with
//!   32-row transactions);
//! - thread keys: 5 bytes (`raw-7`, the appends benchmark's anchor) and 36 bytes (a UUID, as
//!   the runtime's thread ids are).
//!
//! usage: cargo run --release -p agentwire-events --example group_commits [-- full|normal [N]]
//! (default `full`, 400 transactions a shape). Prints the median transaction and the rows a
//! second it gives, then, for each key length, the most that 32 appenders each awaiting its
//! own commit reach against 32-row transactions when every commit takes what arrived during the
//! one before (two commits a round, 31 + 1 or 16 + 16, with no cost besides the commits):
//! t(32) / (t(31) + t(1)) and t(32) / (2 t(16)).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use agentwire_events::Settings;
use rusqlite::{Connection, params};

fn open(path: &Path, synchronous: &str) -> Connection {
    let conn = Connection::open(path).unwrap();
    let settings = Settings::default();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};
         PRAGMA wal_autocheckpoint = {}; PRAGMA journal_size_limit = {};
         CREATE TABLE aw_events (thread TEXT NOT NULL, seq INTEGER NOT NULL,
             event_id BLOB NOT NULL, kind TEXT NOT NULL, committed_at INTEGER NOT NULL,
             size INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (thread, seq));",
        settings.wal_autocheckpoint_pages, settings.journal_size_limit
    ))
    .unwrap();
    conn
}

/// One transaction: one event at position `seq` on each of `threads`.
fn commit(conn: &Connection, threads: &[String], seq: i64, payload: &[u8]) {
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut insert = conn
        .prepare_cached(&agentwire_testkit::multi_row_insert(
            "aw_events",
            &agentwire_testkit::AW_EVENTS_COLUMNS,
            1,
        ))
        .unwrap();
    for thread in threads {
        insert
            .execute(params![
                thread,
                seq,
                uuid::Uuid::new_v4().as_bytes().as_slice(),
                "thread.renamed",
                1_796_000_000_000i64,
                payload.len() as i64 + 40,
                payload
            ])
            .unwrap();
    }
    drop(insert);
    conn.execute_batch("COMMIT").unwrap();
}

struct Shape {
    name: String,
    conn: Connection,
    threads: Vec<String>,
    times: Vec<Duration>,
}

fn main() {
    let synchronous = match std::env::args().nth(1).as_deref() {
        None | Some("full") => "FULL",
        Some("normal") => "NORMAL",
        Some(other) => panic!("full|normal, not {other}"),
    };
    let transactions: usize = std::env::args()
        .nth(2)
        .map_or(400, |n| n.parse().expect("N transactions"));
    let dir = tempfile::tempdir().unwrap();
    let payload = br#"{"at_ms":1796000000000,"event":{"type":"thread.renamed","title":"a title of the usual length for a thread"}}"#;
    let mut shapes = Vec::new();
    for rows in [1usize, 16, 31, 32] {
        for (keys, key) in [
            ("5-byte", (|i| format!("raw-{i}")) as fn(usize) -> String),
            ("36-byte", |i| {
                uuid::Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0000 + i as u128)
                    .to_string()
            }),
        ] {
            let name = format!("{rows:>2} rows, {keys} keys");
            shapes.push(Shape {
                conn: open(&dir.path().join(format!("{rows}-{keys}.db")), synchronous),
                threads: (0..rows).map(key).collect(),
                name,
                times: Vec::with_capacity(transactions),
            });
        }
    }
    let count = shapes.len();
    for i in 0..transactions {
        for k in 0..count {
            let shape = &mut shapes[(i + k) % count];
            let started = Instant::now();
            commit(&shape.conn, &shape.threads, i as i64, payload);
            shape.times.push(started.elapsed());
        }
    }
    println!(
        "transactions of one event on each of N threads, synchronous = {synchronous}, {transactions} a shape, alternating"
    );
    let mut medians = std::collections::HashMap::new();
    for shape in &mut shapes {
        shape.times.sort();
        let median = shape.times[shape.times.len() / 2];
        println!(
            "  {:<22} median {:7.1} us, {:>8.0} rows/s",
            shape.name,
            median.as_secs_f64() * 1e6,
            shape.threads.len() as f64 / median.as_secs_f64()
        );
        medians.insert(shape.name.clone(), median.as_secs_f64());
    }
    for keys in ["5-byte", "36-byte"] {
        let t = |rows: usize| medians[&format!("{rows:>2} rows, {keys} keys")];
        println!(
            "  {keys} keys: two commits a round against one 32-row transaction: 31 + 1 {:.2}x, 16 + 16 {:.2}x",
            t(32) / (t(31) + t(1)),
            t(32) / (2.0 * t(16))
        );
    }
}

//! Event log benchmarks, each printed as a ratio against an anchor measured in the same run on
//! the same engine and disk: durable appends with 1, 4 and 16 concurrent writers (500-byte
//! events) against a raw batched insert of the same rows, each measurement alternating with
//! its anchor (medians of [`APPEND_ROUNDS`] pairs, the order swapped every pair);
//! acknowledgement latency; read-after against a raw keyset read of the same rows (medians of
//! alternating passes after one untimed pass each); live-tail delivery latency.
//!
//! `cargo bench -p agentwire-events` runs SQLite (a file in a temporary folder) and PostgreSQL
//! (a private server started from testkit). It takes about a minute.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_events::{
    After, EventLog, Expected, MAX_PAGE_EVENTS, NewEvent, Position, Tail, ThreadId,
};

/// Payload bytes of every event.
const EVENT_BYTES: usize = 500;
/// Rows per transaction of the raw insert anchor.
const RAW_BATCH: usize = 100;
/// Appends per writer in the runs with one event per append.
const SINGLE_APPENDS_PER_WRITER: usize = 100;
/// Rows of the raw one-row-per-transaction anchor.
const RAW_SINGLE_ROWS: usize = 300;
/// Events appended per run with [`RAW_BATCH`] events per append.
const BATCHED_EVENTS: usize = 30_000;
/// Events in the thread the read benchmarks page through.
const READ_EVENTS: usize = 30_000;
/// Timed passes over the read thread, per side.
const READ_PASSES: usize = 7;
/// Pairs of rounds (ours and the anchor's, alternating) of each append measurement.
const APPEND_ROUNDS: usize = 3;
/// Live-tail deliveries measured.
const TAIL_ROUNDS: usize = 200;

fn payload(i: usize) -> Vec<u8> {
    let mut p = format!("{i:08}").into_bytes();
    p.resize(EVENT_BYTES, b'x');
    p
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Appends `total` events from `writers` tasks, each on its own thread, `per_append` events per
/// call; returns events per second and the sorted acknowledgement latencies.
async fn appends(
    log: &Arc<dyn EventLog>,
    tag: String,
    writers: usize,
    per_append: usize,
    total: usize,
) -> (f64, Vec<Duration>) {
    let calls_per_writer = total / writers / per_append;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let log = Arc::clone(log);
        let thread = ThreadId::new(format!("{tag}-{w}")).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(calls_per_writer);
            for c in 0..calls_per_writer {
                let events = (0..per_append)
                    .map(|i| NewEvent::new("bench", payload(c * per_append + i)))
                    .collect();
                let t = Instant::now();
                log.append(&thread, Expected::Any, events).await.unwrap();
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let events = (calls_per_writer * writers * per_append) as f64;
    (events / elapsed.as_secs_f64(), latencies)
}

/// Reads a whole thread through the log in pages; returns events per second.
/// The median of rates.
fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

async fn log_read(log: &Arc<dyn EventLog>, thread: &ThreadId) -> f64 {
    let start = Instant::now();
    let mut from = After::Start;
    let mut n = 0usize;
    let mut bytes = 0usize;
    loop {
        let page = log.read(thread, from, MAX_PAGE_EVENTS).await.unwrap();
        let Some(last) = page.events.last() else {
            break;
        };
        from = After::Position(Position {
            log_id: log.log_id(),
            seq: last.seq,
        });
        n += page.events.len();
        bytes += page.events.iter().map(|e| e.payload.len()).sum::<usize>();
    }
    assert_eq!(n, READ_EVENTS);
    assert!(bytes > 0);
    n as f64 / start.elapsed().as_secs_f64()
}

/// Tail delivery: a tail waits; the time from the start of an append to the tail's page.
async fn tail_latency(
    writer: &Arc<dyn EventLog>,
    reader: &Arc<dyn EventLog>,
    tag: &str,
) -> Vec<Duration> {
    let thread = ThreadId::new(format!("{tag}-tail")).unwrap();
    writer
        .append(
            &thread,
            Expected::Any,
            vec![NewEvent::new("bench", payload(0))],
        )
        .await
        .unwrap();
    let start = After::Position(Position {
        log_id: reader.log_id(),
        seq: 0,
    });
    let mut tail = Tail::new(Arc::clone(reader), thread.clone(), start, 10);
    let mut latencies = Vec::with_capacity(TAIL_ROUNDS);
    for i in 0..TAIL_ROUNDS {
        let t = Instant::now();
        let w = Arc::clone(writer);
        let th = thread.clone();
        let append = tokio::spawn(async move {
            w.append(&th, Expected::Any, vec![NewEvent::new("bench", payload(i))])
                .await
                .unwrap()
        });
        let page = tail.next_page().await.unwrap();
        latencies.push(t.elapsed());
        assert_eq!(page.events.len(), 1);
        append.await.unwrap();
    }
    latencies.sort();
    latencies
}

struct Report {
    engine: &'static str,
    lines: Vec<String>,
}

impl Report {
    /// A rate against its anchor; `target` `None` for a figure printed without one.
    fn ratio(
        &mut self,
        what: &str,
        ours: f64,
        anchor_name: &str,
        anchor: f64,
        ratio: f64,
        target: Option<f64>,
    ) {
        let verdict = match target {
            Some(target) if ratio >= target => format!("meets target {target}"),
            Some(target) => format!("below target {target}"),
            // One event an append against 100 rows a transaction is not the same work: the
            // runtime's appends benchmark holds one-event appends to their own anchors.
            None => "no target: one event an append against 100-row transactions".to_owned(),
        };
        self.lines.push(format!(
            "{:<8} {what:<44} {ours:>10.0}/s  {anchor_name} {anchor:>10.0}/s  ratio {ratio:.2} ({verdict})",
            self.engine
        ));
    }

    fn second_anchor(&mut self, anchor_name: &str, ours: f64, anchor: f64) {
        self.lines.push(format!(
            "{:<8} {:<44} {:>10}    {anchor_name} {anchor:>10.0}/s  ratio {:.2}",
            self.engine,
            "",
            "",
            ours / anchor
        ));
    }

    fn latency(&mut self, what: &str, sorted: &[Duration]) {
        self.lines.push(format!(
            "{:<8} {what:<44} p50 {}  p99 {}",
            self.engine,
            us(percentile(sorted, 0.5)),
            us(percentile(sorted, 0.99))
        ));
    }
}

mod sqlite_raw {
    //! The SQLite anchors: the same table shape and pragmas, written and read directly.
    use std::path::Path;
    use std::time::Instant;

    use rusqlite::{Connection, params};

    /// One row as the anchor reads it: seq, event id, kind, commit time, payload.
    type RawRow = (i64, Vec<u8>, String, i64, Vec<u8>);

    pub(super) fn open(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        conn.execute_batch(
            "PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS raw_events (thread TEXT NOT NULL, seq INTEGER NOT NULL,
                 event_id BLOB NOT NULL, kind TEXT NOT NULL, committed_at INTEGER NOT NULL,
                 size INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (thread, seq));",
        )
        .unwrap();
        conn
    }

    /// Inserts `total` rows into one thread, `batch` rows per transaction; rows per second.
    pub(super) fn insert(conn: &mut Connection, thread: &str, total: usize, batch: usize) -> f64 {
        let start = Instant::now();
        let id = uuid::Uuid::new_v4();
        for b in 0..total / batch {
            let tx = conn.transaction().unwrap();
            {
                let mut stmt = tx
                    .prepare_cached(
                        "INSERT INTO raw_events (thread, seq, event_id, kind, committed_at, size, payload)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )
                    .unwrap();
                for i in 0..batch {
                    let seq = b * batch + i;
                    let p = super::payload(seq);
                    stmt.execute(params![
                        thread,
                        seq as i64,
                        id.as_bytes().as_slice(),
                        "bench",
                        0i64,
                        p.len() as i64,
                        p
                    ])
                    .unwrap();
                }
            }
            tx.commit().unwrap();
        }
        total as f64 / start.elapsed().as_secs_f64()
    }

    /// Reads a thread by keyset pages of `page` rows; rows per second.
    pub(super) fn read(conn: &Connection, thread: &str, page: usize) -> f64 {
        let start = Instant::now();
        let mut after = -1i64;
        let mut n = 0usize;
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, event_id, kind, committed_at, payload FROM raw_events
                 WHERE thread = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )
            .unwrap();
        loop {
            let rows: Vec<RawRow> = stmt
                .query_map(params![thread, after, page as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let Some(last) = rows.last() else { break };
            after = last.0;
            n += rows.len();
        }
        n as f64 / start.elapsed().as_secs_f64()
    }
}

mod postgres_raw {
    //! The PostgreSQL anchors: the same table shape, multi-row inserts and keyset reads.
    use std::time::Instant;

    use tokio_postgres::{Client, NoTls};

    /// One row as the anchor inserts it, in column order.
    type InsertRow<'a> = (String, i64, uuid::Uuid, &'a str, i64, i64, Vec<u8>);

    pub(super) async fn connect(url: &str) -> Client {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(
                "SET synchronous_commit = on;
                 CREATE TABLE IF NOT EXISTS raw_events (thread text NOT NULL, seq bigint NOT NULL,
                     event_id uuid NOT NULL, kind text NOT NULL, committed_at bigint NOT NULL,
                     size bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (thread, seq));",
            )
            .await
            .unwrap();
        client
    }

    /// Inserts `total` rows into one thread as multi-row inserts of `batch` rows (one
    /// transaction each); rows per second.
    pub(super) async fn insert(client: &Client, thread: &str, total: usize, batch: usize) -> f64 {
        let sql = agentwire_testkit::multi_row_insert(
            "raw_events",
            &agentwire_testkit::AW_EVENTS_COLUMNS,
            batch,
        );
        let stmt = client.prepare(&sql).await.unwrap();
        let start = Instant::now();
        for n in 0..total / batch {
            let rows: Vec<InsertRow<'_>> = (0..batch)
                .map(|i| {
                    let seq = n * batch + i;
                    let p = super::payload(seq);
                    (
                        thread.to_string(),
                        seq as i64,
                        uuid::Uuid::new_v4(),
                        "bench",
                        0i64,
                        p.len() as i64,
                        p,
                    )
                })
                .collect();
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
            for r in &rows {
                params.extend([
                    &r.0 as &(dyn tokio_postgres::types::ToSql + Sync),
                    &r.1,
                    &r.2,
                    &r.3,
                    &r.4,
                    &r.5,
                    &r.6,
                ]);
            }
            client.execute(&stmt, &params).await.unwrap();
        }
        total as f64 / start.elapsed().as_secs_f64()
    }

    /// Reads a thread by keyset pages of `page` rows; rows per second.
    pub(super) async fn read(client: &Client, thread: &str, page: usize) -> f64 {
        let stmt = client
            .prepare(
                "SELECT seq, event_id, kind, committed_at, payload FROM raw_events
                 WHERE thread = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .await
            .unwrap();
        let start = Instant::now();
        let mut after = -1i64;
        let mut n = 0usize;
        loop {
            let rows = client
                .query(&stmt, &[&thread, &after, &(page as i64)])
                .await
                .unwrap();
            let Some(last) = rows.last() else { break };
            after = last.get(0);
            for r in &rows {
                let _: (uuid::Uuid, &str, i64, &[u8]) = (r.get(1), r.get(2), r.get(3), r.get(4));
            }
            n += rows.len();
        }
        n as f64 / start.elapsed().as_secs_f64()
    }
}

async fn append_suite(report: &mut Report, log: &Arc<dyn EventLog>, raw: &mut Raw) {
    for writers in [1usize, 4, 16] {
        let total = writers * SINGLE_APPENDS_PER_WRITER;
        let (rate, raw_batched, ratio, lat) = alternating(raw, total, RAW_BATCH, |round| {
            appends(log, format!("w{writers}x1r{round}"), writers, 1, total)
        })
        .await;
        report.ratio(
            &format!("append, {writers:>2} writers, 1 event per append"),
            rate,
            "raw",
            raw_batched,
            ratio,
            None,
        );
        let raw_single = raw.insert(RAW_SINGLE_ROWS, 1).await;
        report.second_anchor("raw 1 row/txn", rate, raw_single);
        report.latency(&format!("ack latency, {writers:>2} writers, 1 event"), &lat);
    }
    for writers in [1usize, 4, 16] {
        let (rate, raw_batched, ratio, lat) =
            alternating(raw, BATCHED_EVENTS, RAW_BATCH, |round| {
                appends(
                    log,
                    format!("w{writers}x{RAW_BATCH}r{round}"),
                    writers,
                    RAW_BATCH,
                    BATCHED_EVENTS,
                )
            })
            .await;
        report.ratio(
            &format!("append, {writers:>2} writers, {RAW_BATCH} events per append"),
            rate,
            "raw",
            raw_batched,
            ratio,
            Some(0.8),
        );
        report.latency(
            &format!("ack latency, {writers:>2} writers, {RAW_BATCH} events"),
            &lat,
        );
    }
}

/// The anchor's connection, on the engine under measurement.
enum Raw {
    Sqlite(rusqlite::Connection),
    Postgres(tokio_postgres::Client),
}

impl Raw {
    /// Inserts `total` rows into a new thread, `batch` rows per transaction; rows per second.
    async fn insert(&mut self, total: usize, batch: usize) -> f64 {
        let thread = format!("raw-{}", uuid::Uuid::new_v4());
        match self {
            Raw::Sqlite(conn) => sqlite_raw::insert(conn, &thread, total, batch),
            Raw::Postgres(client) => postgres_raw::insert(client, &thread, total, batch).await,
        }
    }
}

/// `ours` (a round of appends of `rows` events in all) and the anchor's insert of `rows` rows,
/// `raw_batch` a transaction, [`APPEND_ROUNDS`] pairs alternating (the order swapped every
/// pair): the median rate of each side, the median of the pairs' ratios, and the latencies of
/// every round of ours, sorted.
async fn alternating<F, Fut>(
    raw: &mut Raw,
    rows: usize,
    raw_batch: usize,
    mut ours: F,
) -> (f64, f64, f64, Vec<Duration>)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = (f64, Vec<Duration>)>,
{
    let (mut our_rates, mut raw_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut latencies = Vec::new();
    for round in 0..APPEND_ROUNDS {
        let (mut rate, mut anchor) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let (r, lat) = ours(round).await;
                rate = r;
                latencies.extend(lat);
            } else {
                anchor = raw.insert(rows, raw_batch).await;
            }
        }
        our_rates.push(rate);
        raw_rates.push(anchor);
        ratios.push(rate / anchor);
    }
    latencies.sort();
    (
        median(our_rates),
        median(raw_rates),
        median(ratios),
        latencies,
    )
}

async fn fill(log: &Arc<dyn EventLog>, thread: &ThreadId) {
    for c in 0..READ_EVENTS / 1000 {
        let events = (0..1000)
            .map(|i| NewEvent::new("bench", payload(c * 1000 + i)))
            .collect();
        log.append(thread, Expected::Any, events).await.unwrap();
    }
}

async fn sqlite(report: &mut Report) {
    let dir = tempfile::tempdir().unwrap();
    // The append anchors write a database of their own, so the read anchor's table holds its
    // thread alone.
    let mut raw = sqlite_raw::open(&dir.path().join("raw.db"));
    sqlite_raw::insert(&mut raw, "raw-read", READ_EVENTS, 1000);
    let mut appends_raw = Raw::Sqlite(sqlite_raw::open(&dir.path().join("raw-appends.db")));
    let url = format!("sqlite:{}", dir.path().join("log.db").display());
    let log = agentwire_events::open(&url).await.unwrap();
    append_suite(report, &log, &mut appends_raw).await;
    let thread = ThreadId::new("read").unwrap();
    fill(&log, &thread).await;
    // Each side reads the thread once first (connections opened, statements prepared), then
    // [`READ_PASSES`] times, alternating; the medians are compared.
    sqlite_raw::read(&raw, "raw-read", MAX_PAGE_EVENTS);
    log_read(&log, &thread).await;
    let (mut raw_rates, mut our_rates) = (Vec::new(), Vec::new());
    for _ in 0..READ_PASSES {
        raw_rates.push(sqlite_raw::read(&raw, "raw-read", MAX_PAGE_EVENTS));
        our_rates.push(log_read(&log, &thread).await);
    }
    let (raw_read, ours) = (median(raw_rates), median(our_rates));
    report.ratio(
        "read-after, pages of 1000",
        ours,
        "raw keyset",
        raw_read,
        ours / raw_read,
        Some(0.8),
    );
    let lat = tail_latency(&log, &log, "sqlite").await;
    report.latency("live tail delivery (append start -> page)", &lat);
    log.close().await.unwrap();
}

async fn postgres(report: &mut Report) {
    let server = agentwire_testkit::postgres_server();
    let raw_url = server.fresh_database("bench_raw");
    // As for SQLite, the append anchors write a database of their own.
    let raw = postgres_raw::connect(&raw_url).await;
    postgres_raw::insert(&raw, "raw-read", READ_EVENTS, 1000).await;
    let mut appends_raw =
        Raw::Postgres(postgres_raw::connect(&server.fresh_database("bench_raw_appends")).await);
    let url = server.fresh_database("bench_log");
    let log = agentwire_events::open(&url).await.unwrap();
    append_suite(report, &log, &mut appends_raw).await;
    let thread = ThreadId::new("read").unwrap();
    fill(&log, &thread).await;
    // As for SQLite: one untimed pass each, then the medians of alternating passes.
    postgres_raw::read(&raw, "raw-read", MAX_PAGE_EVENTS).await;
    log_read(&log, &thread).await;
    let (mut raw_rates, mut our_rates) = (Vec::new(), Vec::new());
    for _ in 0..READ_PASSES {
        raw_rates.push(postgres_raw::read(&raw, "raw-read", MAX_PAGE_EVENTS).await);
        our_rates.push(log_read(&log, &thread).await);
    }
    let (raw_read, ours) = (median(raw_rates), median(our_rates));
    report.ratio(
        "read-after, pages of 1000",
        ours,
        "raw keyset",
        raw_read,
        ours / raw_read,
        Some(0.8),
    );
    // The tail reads through a second instance, woken by the coalesced NOTIFY.
    let other = agentwire_events::open(&url).await.unwrap();
    let lat = tail_latency(&log, &other, "postgres").await;
    report.latency("live tail delivery, other instance (NOTIFY)", &lat);
    other.close().await.unwrap();
    log.close().await.unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // `cargo bench -p agentwire-events -- sqlite` (or `postgres`) runs one engine; the bench
    // harness's own flags (`--bench`) are not engine names.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a == "sqlite" || a == "postgres")
        .collect();
    let mut lines = Vec::new();
    for engine in ["sqlite", "postgres"] {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == engine) {
            continue;
        }
        let mut report = Report {
            engine,
            lines: Vec::new(),
        };
        let start = Instant::now();
        runtime.block_on(async {
            match engine {
                "sqlite" => sqlite(&mut report).await,
                _ => postgres(&mut report).await,
            }
        });
        eprintln!("{engine}: {:.1} s", start.elapsed().as_secs_f64());
        lines.extend(report.lines);
    }
    println!(
        "events: {EVENT_BYTES}-byte events; the raw anchor inserts {RAW_BATCH} rows per transaction \
         (SQLite WAL synchronous=FULL; PostgreSQL multi-row INSERT, synchronous_commit=on); \
         rows with 1 event per append also show a raw insert of 1 row per transaction"
    );
    for line in lines {
        println!("{line}");
    }
}

//! The runtime's durable appends through its API, each figure against the store's engine doing
//! the same commits in the same run, rounds alternating, each ratio printed with its target and
//! `met` or `MISSED`; on SQLite and then on PostgreSQL (the test tools' server). The anchor
//! ("raw") is a plain connection to a store of the event log's schema inserting the same rows
//! into `aw_events` in transactions of its own: on SQLite a `rusqlite` connection with the log's
//! settings (WAL, the same `synchronous`), on the caller's thread; on PostgreSQL a
//! `tokio-postgres` connection (`synchronous_commit = on`), a transaction being one multi-row
//! `INSERT`:
//!
//! - one awaited append (`Runtime::rename_thread`: admitted, committed, folded, published, its
//!   ticket answered), p50 and p99 latency, against a raw one-row commit of the same record on
//!   the same thread id (target: at most 1.2x);
//! - 32 concurrent appenders, each renaming its own thread, events per second, against raw
//!   32-row transactions of the same rows, one row for each of the same 32 thread ids (target:
//!   at least 0.8x). Printed beside it, without a target: the event log alone under 32 concurrent
//!   one-event appends (`EventLog::append`), which shows what the runtime adds to the log.
//!
//! usage: cargo bench -p agentwire-runtime --bench appends [-- --appends N] [--store
//! sqlite|postgres] [--synchronous normal] (default 500 appends a round, both stores,
//! `synchronous = FULL`; `normal` leaves the fsync out of both sides on SQLite, measuring the
//! path alone, and runs SQLite only)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_events::{EventLog, Expected, NewEvent, Settings, Synchronous, ThreadId};
use agentwire_runtime::{
    DemoAgent, Runtime, RuntimeConfig, StampedEvent, SystemClock, ThreadEvent,
};

/// The allocator the `agentwire` binary runs the runtime on.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROUNDS: usize = 5;
/// Pairs of rounds of the concurrent measurement (each round is short).
const CONCURRENT_ROUNDS: usize = 15;
const APPENDERS: usize = 32;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ratio(ours: Duration, theirs: Duration) -> f64 {
    ours.as_secs_f64() / theirs.as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// A `thread.renamed` record as the runtime stores it.
fn renamed_record(title: &str) -> NewEvent {
    let event = StampedEvent {
        at_ms: 1_796_000_000_000,
        event: ThreadEvent::ThreadRenamed {
            title: title.to_owned(),
        },
    };
    NewEvent::new("thread.renamed", serde_json::to_vec(&event).unwrap())
}

/// Where a measurement runs: SQLite files in a temporary directory, with the chosen
/// `synchronous`, or fresh databases on the test tools' PostgreSQL server
/// (`synchronous_commit = on`).
enum Store {
    Sqlite {
        dir: tempfile::TempDir,
        synchronous: Synchronous,
    },
    Postgres,
}

impl Store {
    fn label(&self) -> String {
        match self {
            Store::Sqlite { synchronous, .. } => format!("sqlite: (synchronous {synchronous:?})"),
            Store::Postgres => "postgres:// (synchronous_commit=on)".to_owned(),
        }
    }

    /// The URL of a new, empty store named `name`: a file in the directory, or a fresh
    /// database.
    fn url(&self, name: &str) -> String {
        match self {
            Store::Sqlite { dir, .. } => format!(
                "sqlite:{}",
                dir.path().join(format!("{name}.sqlite")).display()
            ),
            Store::Postgres => agentwire_testkit::postgres_server()
                .fresh_database(&format!("bench_appends_{name}")),
        }
    }

    /// A log at `url` with this store's settings.
    async fn open_at(&self, url: &str) -> Arc<dyn EventLog> {
        let synchronous = match self {
            Store::Sqlite { synchronous, .. } => *synchronous,
            Store::Postgres => Synchronous::Full,
        };
        let settings = Settings {
            synchronous,
            ..Settings::default()
        };
        agentwire_events::open_with(url, settings).await.unwrap()
    }

    /// A new, empty log of this store, named `name`.
    async fn open(&self, name: &str) -> Arc<dyn EventLog> {
        self.open_at(&self.url(name)).await
    }
}

/// The anchor: the engine itself, on a store of the event log's schema and settings, inserting
/// into `aw_events` in transactions of its own.
enum Raw {
    /// A plain `rusqlite` connection, with the log's settings.
    Sqlite(rusqlite::Connection),
    /// A plain `tokio-postgres` connection; a transaction is one multi-row `INSERT`.
    Postgres {
        client: tokio_postgres::Client,
        one: tokio_postgres::Statement,
        all: tokio_postgres::Statement,
    },
}

impl Raw {
    async fn open(store: &Store, name: &str) -> Raw {
        // The event log creates the schema; then the store is the plain connection's alone.
        let url = store.url(name);
        store.open_at(&url).await.close().await.unwrap();
        match store {
            Store::Sqlite { synchronous, .. } => {
                let path = url.strip_prefix("sqlite:").expect("a sqlite: URL");
                let conn = rusqlite::Connection::open(path).unwrap();
                let sync = match synchronous {
                    Synchronous::Full => "FULL",
                    Synchronous::Normal => "NORMAL",
                };
                let settings = Settings::default();
                conn.execute_batch(&format!(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync};
                     PRAGMA wal_autocheckpoint = {}; PRAGMA journal_size_limit = {};",
                    settings.wal_autocheckpoint_pages, settings.journal_size_limit
                ))
                .unwrap();
                Raw::Sqlite(conn)
            }
            Store::Postgres => {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                let insert = |rows| {
                    agentwire_testkit::multi_row_insert(
                        "aw_events",
                        &agentwire_testkit::AW_EVENTS_COLUMNS,
                        rows,
                    )
                };
                let one = client.prepare(&insert(1)).await.unwrap();
                let all = client.prepare(&insert(APPENDERS)).await.unwrap();
                Raw::Postgres { client, one, all }
            }
        }
    }

    /// One transaction inserting `rows` (thread, position) of `record`.
    async fn commit(&mut self, rows: &[(&str, u64)], record: &NewEvent) {
        match self {
            Raw::Sqlite(conn) => {
                conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                let mut insert = conn
                    .prepare_cached(&agentwire_testkit::multi_row_insert(
                        "aw_events",
                        &agentwire_testkit::AW_EVENTS_COLUMNS,
                        1,
                    ))
                    .unwrap();
                for (thread, seq) in rows {
                    insert
                        .execute(rusqlite::params![
                            thread,
                            *seq as i64,
                            uuid::Uuid::new_v4().as_bytes().as_slice(),
                            record.kind,
                            1_796_000_000_000i64,
                            record.record_size() as i64,
                            record.payload,
                        ])
                        .unwrap();
                }
                drop(insert);
                conn.execute_batch("COMMIT").unwrap();
            }
            Raw::Postgres { client, one, all } => {
                let statement = match rows.len() {
                    1 => one,
                    APPENDERS => all,
                    other => panic!("no anchor statement for {other} rows"),
                };
                let size = record.record_size() as i64;
                let committed_at = 1_796_000_000_000i64;
                let values: Vec<(i64, uuid::Uuid)> = rows
                    .iter()
                    .map(|(_, seq)| (*seq as i64, uuid::Uuid::new_v4()))
                    .collect();
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    Vec::with_capacity(rows.len() * 7);
                for ((thread, _), (seq, event_id)) in rows.iter().zip(&values) {
                    params.push(thread);
                    params.push(seq);
                    params.push(event_id);
                    params.push(&record.kind);
                    params.push(&committed_at);
                    params.push(&size);
                    params.push(&record.payload);
                }
                client.execute(statement, &params).await.unwrap();
            }
        }
    }
}

fn main() {
    let mut appends = 500usize;
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--appends") {
        appends = args[at + 1].parse().expect("--appends N");
    }
    // `--synchronous normal` leaves the fsync out of both sides: what remains is the cost of
    // the path itself.
    let synchronous = match args.iter().position(|a| a == "--synchronous") {
        Some(at) if args[at + 1] == "normal" => Synchronous::Normal,
        Some(at) if args[at + 1] == "full" => Synchronous::Full,
        Some(_) => panic!("--synchronous full|normal"),
        None => Synchronous::Full,
    };
    let only = args
        .iter()
        .position(|a| a == "--store")
        .map(|at| args[at + 1].clone());
    assert!(
        only.as_deref()
            .is_none_or(|s| s == "sqlite" || s == "postgres"),
        "--store sqlite|postgres"
    );
    // `synchronous` is SQLite's: PostgreSQL always runs with `synchronous_commit = on`.
    assert!(
        !(only.as_deref() == Some("postgres") && synchronous == Synchronous::Normal),
        "--synchronous normal is SQLite's (PostgreSQL always syncs): it runs SQLite only"
    );
    let postgres = only.as_deref() != Some("sqlite") && synchronous == Synchronous::Full;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if only.as_deref() != Some("postgres") {
        let store = Store::Sqlite {
            dir: tempfile::tempdir().unwrap(),
            synchronous,
        };
        // The measurement runs in a task of the runtime, as a host's code does (not on the
        // thread that blocks on it, which every wake-up would have to reach from a worker).
        tokio
            .block_on(tokio.spawn(measure(store, appends)))
            .unwrap();
    }
    if postgres {
        tokio
            .block_on(tokio.spawn(measure(Store::Postgres, appends)))
            .unwrap();
    }
}

/// Both measurements on `store`, `appends` appends a round.
async fn measure(store: Store, appends: usize) {
    let title = "a title of the usual length for a thread";
    let runtime = Runtime::start(
        store.open("runtime").await,
        Arc::new(DemoAgent::default()),
        Arc::new(SystemClock),
        RuntimeConfig::default(),
    )
    .await
    .unwrap();
    let mut raw = Raw::open(&store, "raw").await;
    let log = store.open("log").await;
    let record = renamed_record(title);

    // One awaited append: ours and the raw commit alternate append by append (the order
    // swapped each time), so that both sample the same disk; a ratio per round, the median
    // of the rounds' ratios reported.
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut raw_next = 0u64;
    let (mut r50s, mut r99s) = (Vec::new(), Vec::new());
    let (mut ours_all, mut theirs_all) = (Vec::new(), Vec::new());
    let mut log_all = Vec::new();
    // The log alone appends on the same thread ids too, in its own file.
    let log_thread = ThreadId::new(thread.clone()).unwrap();
    for _ in 0..ROUNDS {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for i in 0..appends {
            // Unscored: the event log alone.
            let started = Instant::now();
            log.append(&log_thread, Expected::Any, vec![renamed_record(title)])
                .await
                .unwrap();
            log_all.push(started.elapsed());
            for side in [i % 2, 1 - i % 2] {
                let started = Instant::now();
                if side == 0 {
                    runtime
                        .rename_thread(&thread, title.to_owned())
                        .await
                        .unwrap();
                    ours.push(started.elapsed());
                } else {
                    raw.commit(&[(thread.as_str(), raw_next)], &record).await;
                    raw_next += 1;
                    theirs.push(started.elapsed());
                }
            }
        }
        ours.sort();
        theirs.sort();
        r50s.push(ratio(percentile(&ours, 0.5), percentile(&theirs, 0.5)));
        r99s.push(ratio(percentile(&ours, 0.99), percentile(&theirs, 0.99)));
        ours_all.extend(ours);
        theirs_all.extend(theirs);
    }
    ours_all.sort();
    theirs_all.sort();
    log_all.sort();
    let (r50, r99) = (median(&mut r50s), median(&mut r99s));
    println!(
        "agentwire-runtime durable appends, store {}, {appends} appends a round",
        store.label()
    );
    println!(
        "  one awaited append: p50 {:.3} ms, p99 {:.3} ms; raw one-row commit p50 {:.3} ms, p99 {:.3} ms; ratios {r50:.2}x and {r99:.2}x (target <= 1.2x: {} and {}; medians of {ROUNDS} rounds, the sides alternating append by append)",
        ms(percentile(&ours_all, 0.5)),
        ms(percentile(&ours_all, 0.99)),
        ms(percentile(&theirs_all, 0.5)),
        ms(percentile(&theirs_all, 0.99)),
        verdict(r50 <= 1.2),
        verdict(r99 <= 1.2),
    );
    println!(
        "    the log alone, one-event appends: p50 {:.3} ms, p99 {:.3} ms",
        ms(percentile(&log_all, 0.5)),
        ms(percentile(&log_all, 0.99)),
    );

    // 32 concurrent appenders, each on its own thread, against one writer committing
    // 32-row appends; short rounds alternating, a ratio per pair of rounds.
    let mut threads = Vec::with_capacity(APPENDERS);
    for _ in 0..APPENDERS {
        threads.push(runtime.create_thread(None, None).await.unwrap());
    }
    let per = (appends / APPENDERS).max(4);
    let mut batch_next = 0u64;
    let (mut ratios, mut ours_rates, mut raw_rates) = (Vec::new(), Vec::new(), Vec::new());
    let mut log_rates = Vec::new();
    let log_threads: Vec<ThreadId> = threads
        .iter()
        .map(|thread| ThreadId::new(thread.clone()).unwrap())
        .collect();
    for round in 0..CONCURRENT_ROUNDS {
        let (mut ours, mut theirs) = (0.0, 0.0);
        // Also, unscored: the log's own group commit under 32 concurrent one-event appends
        // (what the runtime adds is the difference to this).
        let started = Instant::now();
        let tasks: Vec<_> = log_threads
            .iter()
            .map(|thread| {
                let (log, thread) = (Arc::clone(&log), thread.clone());
                tokio::spawn(async move {
                    for _ in 0..per {
                        log.append(&thread, Expected::Any, vec![renamed_record(title)])
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        log_rates.push((APPENDERS * per) as f64 / started.elapsed().as_secs_f64());
        for side in [round % 2, 1 - round % 2] {
            let started = Instant::now();
            if side == 0 {
                let tasks: Vec<_> = threads
                    .iter()
                    .map(|thread| {
                        let (runtime, thread) = (runtime.clone(), thread.clone());
                        tokio::spawn(async move {
                            for _ in 0..per {
                                runtime
                                    .rename_thread(&thread, title.to_owned())
                                    .await
                                    .unwrap();
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                ours = (APPENDERS * per) as f64 / started.elapsed().as_secs_f64();
            } else {
                for _ in 0..per {
                    // The runtime's own rows: the same thread ids (36-byte UUIDs, each
                    // a key of every row and of the primary key's index), in a file of
                    // their own.
                    let rows: Vec<(&str, u64)> = threads
                        .iter()
                        .map(|thread| (thread.as_str(), batch_next))
                        .collect();
                    raw.commit(&rows, &record).await;
                    batch_next += 1;
                }
                theirs = (APPENDERS * per) as f64 / started.elapsed().as_secs_f64();
            }
        }
        ratios.push(ours / theirs);
        ours_rates.push(ours);
        raw_rates.push(theirs);
    }
    let ratio = median(&mut ratios);
    println!(
        "  {APPENDERS} concurrent appenders ({per} appends each a round): {:.0} events/s; raw {APPENDERS}-row transactions (a row on each of the {APPENDERS} threads) {:.0} rows/s; ratio {ratio:.2}x (target >= 0.8x: {}; median of {CONCURRENT_ROUNDS} pairs of alternating rounds)",
        median(&mut ours_rates),
        median(&mut raw_rates),
        verdict(ratio >= 0.8)
    );
    println!(
        "    the log alone, {APPENDERS} concurrent one-event appends: {:.0} events/s",
        median(&mut log_rates)
    );
    log.close().await.unwrap();
}

//! The runtime over its real transport: `agentwire serve --stdio` (release) driven through a
//! pipe, each figure printed with the anchor measured in the same run, rounds alternating, the
//! medians of five of each, the ratio with its target and `met` or `MISSED`:
//!
//! - durable events delivered to a host that reads the pipe raw (`/burst N`, counted until
//!   `turn.completed`) against Python's `sqlite3` inserting the same rows (the runtime's own,
//!   read back from its store) into a WAL database with `synchronous=FULL` in 1,000-row
//!   transactions (target: at least 0.5x);
//! - a resume replay of every event of a thread of 100,000 events (a burst of its own) to the
//!   client against a raw cursor read of the same rows, in pages of the log's largest (target:
//!   at least 0.5x), with the CPU time each side took (and the reading host's own) beside it;
//! - the latency from `turn.start` to the first delta of a plain-text turn.
//!
//! Each figure is measured on SQLite (the anchor: Python's `sqlite3`, as above) and then on
//! PostgreSQL (the test kit's private server, `synchronous_commit = on`; the anchor: the same rows
//! inserted in 1,000-row transactions of one multi-row `INSERT` each into a table of the same
//! shape on the same server; target: at least 0.5x).
//!
//! usage: cargo bench -p agentwire-cli --bench serve_roll [-- --events N] [--replay-events N]
//! [--store sqlite|postgres] (default 50,000 events a burst, 100,000 replayed, both stores);
//! needs `python3` and the test tools' PostgreSQL. `AGENTWIRE_BENCH_BIN=PATH` runs another
//! build of the `agentwire` binary instead of this one's (two builds compared through the same
//! client, in alternating runs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use agentwire_events::{After, Position, ThreadId};
use serde_json::{Value, json};

struct Runtime {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Runtime {
    fn start(store: &str) -> Runtime {
        // Another build of the binary, to compare two builds through the same client.
        let binary = std::env::var("AGENTWIRE_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_agentwire").to_owned());
        let mut child = Command::new(binary)
            .args(["serve", "--stdio", "--store", store])
            .env("AGENTWIRE_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("agentwire serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        Runtime {
            child,
            stdin,
            stdout,
            next_id: 0,
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let line =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        self.next_id
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the runtime closed"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// The next frame's line, unparsed.
    fn read_line(&mut self, line: &mut String) {
        line.clear();
        assert!(
            self.stdout.read_line(line).unwrap() > 0,
            "the runtime closed"
        );
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let frame = self.read();
            if frame["id"] == id && frame.get("method").is_none() {
                return frame["result"].clone();
            }
        }
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// What the replay measurement reads of a frame.
#[derive(serde::Deserialize)]
struct Frame<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    params: Option<FrameParams<'a>>,
}

#[derive(serde::Deserialize)]
struct FrameParams<'a> {
    durability: Option<&'a str>,
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn start_turn(runtime: &mut Runtime, thread: &str, text: &str) -> String {
    let turn = uuid();
    runtime.send(
        "turn.start",
        json!({"requestId": uuid(), "threadId": thread, "turnId": turn, "input": {"text": text}}),
    );
    turn
}

/// Replays, and raw reads, timed per run; each figure is their median.
const ROUNDS: usize = 5;

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The nanoseconds of CPU a thread has taken, from its `schedstat` file; `None` when the
/// thread is gone or the file does not read.
fn schedstat_ns(path: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The CPU time the threads of process `pid` (`self` for this one) have taken, from the
/// scheduler's per-thread nanoseconds (a thread that ended meanwhile counts nothing).
fn cpu_of(pid: &str) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        total += schedstat_ns(&task.unwrap().path().join("schedstat")).unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// The CPU time the calling thread has taken.
fn thread_cpu() -> Duration {
    Duration::from_nanos(schedstat_ns("/proc/thread-self/schedstat".as_ref()).unwrap())
}

fn rate(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

fn median_rate(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// The anchor of durable delivery: Python's `sqlite3` inserting the rows the runtime stored for
/// `thread` (read from `store` first) into a new WAL database with `synchronous=FULL`, in
/// 1,000-row transactions, into a table of the same shape; rows per second, timed in Python.
fn python_inserts(store: &std::path::Path, thread: &str, anchor: &std::path::Path) -> f64 {
    const SCRIPT: &str = r#"
import sqlite3, sys, time
src, thread, dst = sys.argv[1:4]
rows = sqlite3.connect("file:" + src + "?mode=ro", uri=True).execute(
    "SELECT seq, event_id, kind, committed_at, size, payload FROM aw_events"
    " WHERE thread = ? ORDER BY seq", (thread,)).fetchall()
db = sqlite3.connect(dst, isolation_level=None)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = FULL")
db.execute("CREATE TABLE aw_events (thread TEXT NOT NULL, seq INTEGER NOT NULL,"
           " event_id BLOB NOT NULL, kind TEXT NOT NULL, committed_at INTEGER NOT NULL,"
           " size INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (thread, seq))")
started = time.perf_counter()
for at in range(0, len(rows), 1000):
    db.execute("BEGIN")
    db.executemany("INSERT INTO aw_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(thread,) + row for row in rows[at:at + 1000]])
    db.execute("COMMIT")
print(len(rows), time.perf_counter() - started)
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(store)
        .arg(thread)
        .arg(anchor)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut fields = text.split_whitespace();
    let rows: f64 = fields.next().unwrap().parse().unwrap();
    let seconds: f64 = fields.next().unwrap().parse().unwrap();
    rows / seconds
}

fn main() {
    let mut events = 50_000usize;
    let mut replay_events = 100_000usize;
    let mut only: Option<String> = None;
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--events") {
        events = args[at + 1].parse().expect("--events N");
    }
    if let Some(at) = args.iter().position(|a| a == "--replay-events") {
        replay_events = args[at + 1].parse().expect("--replay-events N");
    }
    if let Some(at) = args.iter().position(|a| a == "--store") {
        let store = args[at + 1].clone();
        assert!(
            store == "sqlite" || store == "postgres",
            "--store sqlite|postgres"
        );
        only = Some(store);
    }
    let dir = tempfile::tempdir().unwrap();
    if only.as_deref() != Some("postgres") {
        run(&Store::sqlite(dir.path()), events, replay_events);
    }
    if only.as_deref() != Some("sqlite") {
        let url = agentwire_testkit::postgres_server().fresh_database("bench_serve");
        run(&Store::postgres(url), events, replay_events);
    }
}

/// The runtime's store in one measurement, and its delivery anchor.
struct Store {
    url: String,
    label: &'static str,
    anchor: &'static str,
    kind: StoreKind,
}

enum StoreKind {
    /// The runtime's database file and the folder of the anchor's.
    Sqlite(std::path::PathBuf, std::path::PathBuf),
    Postgres,
}

impl Store {
    fn sqlite(dir: &std::path::Path) -> Store {
        let file = dir.join("runtime.sqlite");
        Store {
            url: format!("sqlite:{}", file.display()),
            label: "sqlite: (defaults)",
            anchor: "Python sqlite3 (WAL, synchronous=FULL, 1,000-row transactions, the same rows)",
            kind: StoreKind::Sqlite(file, dir.to_path_buf()),
        }
    }

    fn postgres(url: String) -> Store {
        Store {
            url,
            label: "postgres:// (synchronous_commit=on)",
            anchor: "1,000-row multi-row INSERT transactions of the same rows into a table of the same shape, one connection",
            kind: StoreKind::Postgres,
        }
    }

    /// The anchor's rows per second for the rows the runtime stored for `thread`.
    fn anchor_inserts(&self, thread: &str, round: usize) -> f64 {
        match &self.kind {
            StoreKind::Sqlite(file, dir) => {
                python_inserts(file, thread, &dir.join(format!("anchor-{round}.sqlite")))
            }
            StoreKind::Postgres => postgres_inserts(&self.url, thread, round),
        }
    }
}

/// The anchor of durable delivery on PostgreSQL: the rows the runtime stored for `thread`,
/// inserted into a new table of `aw_events`' shape (`LIKE aw_events INCLUDING ALL`) on the same
/// server, in 1,000-row transactions of one multi-row `INSERT` each, on one connection; rows
/// per second.
fn postgres_inserts(url: &str, thread: &str, round: usize) -> f64 {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let table = format!("anchor_events_{round}");
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (LIKE aw_events INCLUDING ALL)"
            ))
            .await
            .unwrap();
        let rows = client
            .query(
                "SELECT thread, seq, event_id, kind, committed_at, size, payload FROM aw_events \
                 WHERE thread = $1 ORDER BY seq",
                &[&thread],
            )
            .await
            .unwrap();
        type Row = (String, i64, uuid::Uuid, String, i64, i64, Vec<u8>);
        let rows: Vec<Row> = rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    r.get(3),
                    r.get(4),
                    r.get(5),
                    r.get(6),
                )
            })
            .collect();
        let mut statements = std::collections::HashMap::new();
        let started = Instant::now();
        for chunk in rows.chunks(1000) {
            let statement = match statements.get(&chunk.len()) {
                Some(statement) => statement,
                None => {
                    let sql = agentwire_testkit::multi_row_insert(
                        &table,
                        &agentwire_testkit::AW_EVENTS_COLUMNS,
                        chunk.len(),
                    );
                    let prepared = client.prepare(&sql).await.unwrap();
                    statements.entry(chunk.len()).or_insert(prepared)
                }
            };
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                Vec::with_capacity(chunk.len() * 7);
            for row in chunk {
                params.extend([
                    &row.0 as &(dyn tokio_postgres::types::ToSql + Sync),
                    &row.1,
                    &row.2,
                    &row.3,
                    &row.4,
                    &row.5,
                    &row.6,
                ]);
            }
            client.batch_execute("BEGIN").await.unwrap();
            client.execute(statement, &params).await.unwrap();
            client.batch_execute("COMMIT").await.unwrap();
        }
        rows.len() as f64 / started.elapsed().as_secs_f64()
    })
}

fn run(store: &Store, events: usize, replay_events: usize) {
    let mut runtime = Runtime::start(&store.url);
    runtime.call(
        "initialize",
        json!({"protocolVersions": ["1.5"], "client": {"name": "bench", "version": "1"}}),
    );
    runtime.call(
        "client.capabilities.set",
        json!({"revision": 1, "serverRequestMethods": ["approval.request"]}),
    );
    let thread = runtime.call("thread.create", json!({"requestId": uuid()}))["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Turn start to first delta.
    let mut latencies = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let turn = start_turn(&mut runtime, &thread, "hello there");
        let mut first = None;
        loop {
            let frame = runtime.read();
            let params = &frame["params"];
            if params["turnId"] != turn.as_str() {
                continue;
            }
            if first.is_none() && params["event"]["type"] == "message.delta" {
                first = Some(started.elapsed());
            }
            if params["event"]["type"] == "turn.completed" {
                break;
            }
        }
        latencies.push(first.unwrap());
    }
    latencies.sort();
    let first_delta = latencies[latencies.len() / 2];

    // Durable events delivered per second, against Python's sqlite3 committing the same rows,
    // rounds alternating.
    let mut bursts = Vec::with_capacity(ROUNDS);
    let mut inserts = Vec::with_capacity(ROUNDS);
    let mut delivered = 0usize;
    for round in 0..ROUNDS {
        let burst = runtime.call("thread.create", json!({"requestId": uuid()}))["thread"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let started = Instant::now();
        let turn = start_turn(&mut runtime, &burst, &format!("/burst {events}"));
        delivered = 0;
        let mut line = String::new();
        loop {
            runtime.read_line(&mut line);
            // Raw: the durable notifications are counted by their bytes, the end parsed.
            if line.contains(r#""durability":"durable""#) {
                delivered += 1;
                if line.contains(r#""type":"turn.completed""#) && line.contains(turn.as_str()) {
                    break;
                }
            }
        }
        bursts.push(rate(delivered, started.elapsed()));
        inserts.push(store.anchor_inserts(&burst, round));
    }
    let delivered_rate = median_rate(&mut bursts);
    let insert_rate = median_rate(&mut inserts);

    // Resume replays of every event of a thread of `replay_events` (a burst of its own, not
    // timed) against raw cursor reads of the same rows through a second log on the same store,
    // ROUNDS of each, alternating (the first replay follows the burst, with the reader's page
    // cache cold); medians, with the CPU each side took (the server's threads, and this
    // process's for the raw read).
    let replay_thread = runtime.call("thread.create", json!({"requestId": uuid()}))["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let turn = start_turn(
        &mut runtime,
        &replay_thread,
        &format!("/burst {replay_events}"),
    );
    let mut line = String::new();
    loop {
        runtime.read_line(&mut line);
        if line.contains(r#""type":"turn.completed""#) && line.contains(turn.as_str()) {
            break;
        }
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let log = tokio.block_on(agentwire_events::open(&store.url)).unwrap();
    let thread_id = ThreadId::new(replay_thread.clone()).unwrap();
    let server = runtime.child.id();
    let mut replays = Vec::with_capacity(ROUNDS);
    let mut reads = Vec::with_capacity(ROUNDS);
    let (mut replay_cpu, mut read_cpu) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    let mut host_cpu = Vec::with_capacity(ROUNDS);
    let mut replayed = 0usize;
    let mut raw_read_count = 0usize;
    for _ in 0..ROUNDS {
        let cpu = cpu_of(&server.to_string());
        let host = thread_cpu();
        let started = Instant::now();
        let id = runtime.send(
            "runtime.events.resume",
            json!({"threadId": replay_thread, "afterCursor": null}),
        );
        // Each frame is parsed in full (a syntax error fails the run), keeping only the fields
        // counted, as a client that reads the stream would.
        replayed = 0;
        loop {
            runtime.read_line(&mut line);
            let frame: Frame<'_> = serde_json::from_str(&line).unwrap();
            if frame.id == Some(id) {
                let answer: Value = serde_json::from_str(&line).unwrap();
                assert_eq!(answer["result"]["replayedCount"], json!(replayed));
                break;
            }
            if frame
                .params
                .is_some_and(|p| p.durability == Some("durable"))
            {
                replayed += 1;
            }
        }
        replays.push(started.elapsed());
        replay_cpu.push(cpu_of(&server.to_string()) - cpu);
        host_cpu.push(thread_cpu() - host);

        let cpu = cpu_of("self");
        let started = Instant::now();
        raw_read_count = tokio.block_on(async {
            let mut after = After::Start;
            let mut count = 0usize;
            loop {
                let page = log
                    .read(&thread_id, after, agentwire_events::MAX_PAGE_EVENTS)
                    .await
                    .unwrap();
                let Some(last) = page.events.last() else {
                    break;
                };
                count += page.events.len();
                after = After::Position(Position {
                    log_id: log.log_id(),
                    seq: last.seq,
                });
                if page.at_head() {
                    break;
                }
            }
            count
        });
        reads.push(started.elapsed());
        read_cpu.push(cpu_of("self") - cpu);
    }
    let replay_elapsed = median(&mut replays);
    let raw_read = median(&mut reads);
    let (replay_cpu, read_cpu) = (median(&mut replay_cpu), median(&mut read_cpu));
    let host_cpu = median(&mut host_cpu);
    tokio.block_on(log.close()).unwrap();
    runtime.stop();

    let replay_rate = rate(replayed, replay_elapsed);
    let read_rate = rate(raw_read_count, raw_read);
    println!(
        "agentwire serve --stdio (release), Roll 1.5 over a pipe, store {}",
        store.label
    );
    let ratio = delivered_rate / insert_rate;
    println!(
        "  durable events delivered (/burst {events}, {delivered} each): {delivered_rate:.0}/s; {} {insert_rate:.0}/s; ratio {ratio:.2}x (target >= 0.5x: {}; medians of {ROUNDS} alternating rounds)",
        store.anchor,
        verdict(ratio >= 0.5)
    );
    println!(
        "  resume replay: {replayed} events in {:.2} s = {:.0}/s; raw cursor read of the same rows {:.0}/s; ratio {:.2}x (target >= 0.5x: {}; medians of {ROUNDS} alternating runs each)",
        replay_elapsed.as_secs_f64(),
        replay_rate,
        read_rate,
        replay_rate / read_rate,
        verdict(replay_rate / read_rate >= 0.5)
    );
    println!(
        "    cpu: the server {:.0} ms for the replay ({:.2} us/event), the host reading it {:.0} ms ({:.2} us/event), the raw read {:.0} ms ({:.2} us/event), no target",
        replay_cpu.as_secs_f64() * 1e3,
        replay_cpu.as_secs_f64() * 1e6 / replayed as f64,
        host_cpu.as_secs_f64() * 1e3,
        host_cpu.as_secs_f64() * 1e6 / replayed as f64,
        read_cpu.as_secs_f64() * 1e3,
        read_cpu.as_secs_f64() * 1e6 / raw_read_count as f64,
    );
    println!(
        "  turn.start to first delta: median {:.2} ms over {} turns (min {:.2} ms, max {:.2} ms)",
        first_delta.as_secs_f64() * 1e3,
        latencies.len(),
        latencies[0].as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3
    );
}

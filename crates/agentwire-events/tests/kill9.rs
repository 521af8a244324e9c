//! Durability under kill -9: a child process (this binary, re-run in child mode) appends in a
//! loop from several tasks and reports every acknowledged append on its stdout pipe; the parent
//! kills it with SIGKILL at a random moment (from the very start, so some rounds land during
//! startup and WAL recovery), reopens the log and checks that every acknowledged event is there,
//! in order, contiguous from 0, and that no batch is half written. The same runs against SQLite
//! and against the test PostgreSQL server (there the client process is the one killed).
//!
//! It has its own `main` (no libtest harness) so that the child mode is not a test of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire_events::{After, Error, Expected, MAX_PAGE_EVENTS, NewEvent, Position, ThreadId};

/// The child's store URL; its presence puts this binary in child mode.
const CHILD_URL_ENV: &str = "AGENTWIRE_EVENTS_KILL9_URL";
/// The round number, so batch ids are unique across rounds.
const CHILD_ROUND_ENV: &str = "AGENTWIRE_EVENTS_KILL9_ROUND";
const ROUNDS: u32 = 50;
/// Appending tasks in the child, one thread each, so their appends share group commits.
const WRITERS: usize = 4;
/// The longest a SQLite child runs before it is killed.
const MAX_RUN_SQLITE: Duration = Duration::from_millis(80);
/// The longest a PostgreSQL child runs before it is killed (it connects three times and
/// migrates before its first append, so it needs longer to get going).
const MAX_RUN_POSTGRES: Duration = Duration::from_millis(400);

/// One case: runs its rounds and returns a summary, or why it failed.
type Case = fn() -> Result<String, String>;

fn main() -> ExitCode {
    if let Ok(url) = std::env::var(CHILD_URL_ENV) {
        let round: u32 = std::env::var(CHILD_ROUND_ENV)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        child(&url, round);
        return ExitCode::SUCCESS;
    }
    let mut passed = 0;
    let mut failed = 0;
    let cases: [(&str, Case); 2] = [
        ("kill9::sqlite_survives_sigkill", || {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let url = format!("sqlite:{}", dir.path().join("events.db").display());
            let summary = std::panic::catch_unwind(|| rounds(&url, MAX_RUN_SQLITE))
                .map_err(|_| "see the panic above".to_string());
            drop(dir);
            summary
        }),
        ("kill9::postgres_survives_sigkill", || {
            std::panic::catch_unwind(|| {
                let url = agentwire_testkit::postgres_server().fresh_database("kill9");
                rounds(&url, MAX_RUN_POSTGRES)
            })
            .map_err(|_| "see the panic above".to_string())
        }),
    ];
    for (name, case) in cases {
        match case() {
            Ok(summary) => {
                println!("test {name} ... ok ({summary})");
                passed += 1;
            }
            Err(reason) => {
                println!("test {name} ... FAILED ({reason})");
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn thread_name(writer: usize) -> String {
    format!("kill9-{writer}")
}

/// The child: appends batches of 1 to 7 events forever, printing `thread first_seq count batch`
/// after each acknowledgement.
fn child(url: &str, round: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let log = agentwire_events::open(url).await.expect("child open");
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let log = Arc::clone(&log);
            let out = Arc::clone(&out);
            tasks.push(tokio::spawn(async move {
                let thread = ThreadId::new(thread_name(writer)).expect("thread");
                let mut head = log
                    .thread(&thread)
                    .await
                    .expect("head")
                    .map_or(0, |t| t.next_seq);
                for i in 0u64.. {
                    let n = 1 + (i as usize + writer) % 7;
                    let batch = format!("r{round}w{writer}b{i}");
                    let events = (0..n)
                        .map(|j| {
                            NewEvent::new("kill9", format!("{batch}:{j}/{n}:{}", "x".repeat(200)))
                        })
                        .collect();
                    match log.append(&thread, Expected::Next(head), events).await {
                        Ok(ack) => {
                            head = ack.next_seq();
                            let mut out = out.lock().expect("stdout");
                            writeln!(out, "{} {} {n} {batch}", thread, ack.first_seq)
                                .expect("pipe");
                            out.flush().expect("pipe");
                        }
                        // A commit of the killed predecessor may land after this child read
                        // its head (PostgreSQL finishes a COMMIT it already received).
                        Err(Error::Conflict { actual, .. }) => head = actual,
                        Err(other) => panic!("child append: {other}"),
                    }
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
}

/// A small deterministic generator for the kill delays; the seed is printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Debug, Clone)]
struct Ack {
    first_seq: u64,
    count: u64,
    batch: String,
}

fn rounds(url: &str, max_run: Duration) -> String {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("kill9 {url}: seed {seed}");
    let mut rng = Rng(seed);
    let exe = std::env::current_exe().expect("current exe");
    let mut acked: BTreeMap<String, Vec<Ack>> = BTreeMap::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut total_acked = 0u64;
    let mut total_stored = 0u64;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .env(CHILD_URL_ENV, url)
            .env(CHILD_ROUND_ENV, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        let delay = rng.next() % (max_run.as_millis() as u64 + 1);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("wait");
        assert!(
            status.code().is_none(),
            "round {round}: the child exited by itself ({status}) instead of being killed (seed {seed})"
        );
        for line in reader.join().expect("reader") {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 4, "round {round}: malformed ack line {line:?}");
            acked.entry(parts[0].to_string()).or_default().push(Ack {
                first_seq: parts[1].parse().expect("first_seq"),
                count: parts[2].parse().expect("count"),
                batch: parts[3].to_string(),
            });
            total_acked += parts[2].parse::<u64>().expect("count");
        }
        total_stored = runtime.block_on(verify(url, &acked, round, seed));
    }
    assert!(
        total_acked > 0,
        "no append was ever acknowledged in {ROUNDS} rounds (seed {seed})"
    );
    format!("{ROUNDS} rounds, {total_acked} acknowledged events, {total_stored} stored")
}

/// Reopens the log and checks every thread: contiguous from 0, whole batches only, and every
/// acknowledged batch at its acknowledged place. Returns the number of stored events.
async fn verify(url: &str, acked: &BTreeMap<String, Vec<Ack>>, round: u32, seed: u64) -> u64 {
    let log = agentwire_events::open(url)
        .await
        .expect("reopen after kill");
    let mut stored_total = 0;
    for writer in 0..WRITERS {
        let name = thread_name(writer);
        let thread = ThreadId::new(name.clone()).expect("thread");
        let mut stored = Vec::new();
        let mut from = After::Start;
        loop {
            let page = log
                .read(&thread, from, MAX_PAGE_EVENTS)
                .await
                .expect("read");
            let Some(last) = page.events.last() else {
                break;
            };
            from = After::Position(Position {
                log_id: log.log_id(),
                seq: last.seq,
            });
            stored.extend(page.events);
        }
        stored_total += stored.len() as u64;
        for (i, event) in stored.iter().enumerate() {
            assert_eq!(
                event.seq, i as u64,
                "round {round} {name}: gap (seed {seed})"
            );
        }
        // Whole batches: each event says which batch it belongs to, its index and the count.
        let mut i = 0;
        let mut batches = BTreeMap::new();
        while i < stored.len() {
            let text = String::from_utf8(stored[i].payload.clone()).expect("utf8");
            let (batch, rest) = text.split_once(':').expect("batch id");
            let (index, count) = rest
                .split(':')
                .next()
                .and_then(|p| p.split_once('/'))
                .expect("index/count");
            assert_eq!(
                index, "0",
                "round {round} {name}: batch {batch} starts mid-way (seed {seed})"
            );
            let count: usize = count.parse().expect("count");
            assert!(
                i + count <= stored.len(),
                "round {round} {name}: batch {batch} is half written (seed {seed})"
            );
            for (j, event) in stored[i..i + count].iter().enumerate() {
                let text = String::from_utf8(event.payload.clone()).expect("utf8");
                assert!(
                    text.starts_with(&format!("{batch}:{j}/{count}:")),
                    "round {round} {name}: event {} is not part {j} of batch {batch} (seed {seed})",
                    event.seq
                );
            }
            batches.insert(batch.to_string(), (i as u64, count as u64));
            i += count;
        }
        for ack in acked.get(&name).into_iter().flatten() {
            assert_eq!(
                batches.get(&ack.batch),
                Some(&(ack.first_seq, ack.count)),
                "round {round} {name}: acknowledged batch {} at {} is missing (seed {seed})",
                ack.batch,
                ack.first_seq
            );
        }
    }
    log.close().await.expect("close");
    stored_total
}

//! The runtime's durable appends through its API, each figure against the event log underneath
//! doing the same commits in the same run, rounds alternating, medians of five, each ratio
//! printed with its target and `met` or `MISSED`:
//!
//! - one awaited append (`Runtime::rename_thread`: admitted, committed, folded, published, its
//!   ticket answered), p50 and p99 latency, against a raw one-row commit of the same record
//!   (`EventLog::append`) on the same engine and settings (target: at most 1.2x);
//! - 32 concurrent appenders, each renaming its own thread, events per second, against raw
//!   32-row appends in one commit each (target: at least 0.8x).
//!
//! usage: cargo bench -p agentwire-runtime --bench appends [-- --appends N] [--synchronous normal]
//! (default 500 appends a round, `synchronous = FULL`; `normal` leaves the fsync out of both
//! sides, measuring the path alone)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_events::{EventLog, Expected, NewEvent, Settings, Synchronous, ThreadId};
use agentwire_runtime::{
    DemoAgent, Runtime, RuntimeConfig, StampedEvent, SystemClock, ThreadEvent,
};

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

async fn open(dir: &tempfile::TempDir, name: &str, synchronous: Synchronous) -> Arc<dyn EventLog> {
    let settings = Settings {
        synchronous,
        ..Settings::default()
    };
    let url = format!("sqlite:{}", dir.path().join(name).display());
    agentwire_events::open_with(&url, settings).await.unwrap()
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
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::start(
            open(&dir, "runtime.sqlite", synchronous).await,
            Arc::new(DemoAgent::default()),
            Arc::new(SystemClock),
            RuntimeConfig::default(),
        )
        .await
        .unwrap();
        let raw = open(&dir, "raw.sqlite", synchronous).await;
        let title = "a title of the usual length for a thread";

        // One awaited append: ours and the raw commit alternate append by append (the order
        // swapped each time), so that both sample the same disk; a ratio per round, the median
        // of the rounds' ratios reported.
        let thread = runtime.create_thread(None, None).await.unwrap();
        let raw_thread = ThreadId::new("raw-single").unwrap();
        let mut raw_next = 0u64;
        let (mut r50s, mut r99s) = (Vec::new(), Vec::new());
        let (mut ours_all, mut theirs_all) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for i in 0..appends {
                for side in [i % 2, 1 - i % 2] {
                    let started = Instant::now();
                    if side == 0 {
                        runtime.rename_thread(&thread, title.to_owned()).await.unwrap();
                        ours.push(started.elapsed());
                    } else {
                        raw.append(&raw_thread, Expected::Next(raw_next), vec![renamed_record(title)])
                            .await
                            .unwrap();
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
        let (r50, r99) = (median(&mut r50s), median(&mut r99s));
        println!("agentwire-runtime durable appends, store sqlite: (synchronous {synchronous:?}), {appends} appends a round");
        println!(
            "  one awaited append: p50 {:.3} ms, p99 {:.3} ms; raw one-row commit p50 {:.3} ms, p99 {:.3} ms; ratios {r50:.2}x and {r99:.2}x (target <= 1.2x: {} and {}; medians of {ROUNDS} rounds, the sides alternating append by append)",
            ms(percentile(&ours_all, 0.5)),
            ms(percentile(&ours_all, 0.99)),
            ms(percentile(&theirs_all, 0.5)),
            ms(percentile(&theirs_all, 0.99)),
            verdict(r50 <= 1.2),
            verdict(r99 <= 1.2),
        );

        // 32 concurrent appenders, each on its own thread, against one writer committing
        // 32-row appends; short rounds alternating, a ratio per pair of rounds.
        let mut threads = Vec::with_capacity(APPENDERS);
        for _ in 0..APPENDERS {
            threads.push(runtime.create_thread(None, None).await.unwrap());
        }
        let per = (appends / APPENDERS).max(4);
        let raw_batch = ThreadId::new("raw-batch").unwrap();
        let mut batch_next = 0u64;
        let (mut ratios, mut ours_rates, mut raw_rates) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..CONCURRENT_ROUNDS {
            let (mut ours, mut theirs) = (0.0, 0.0);
            for side in [round % 2, 1 - round % 2] {
                let started = Instant::now();
                if side == 0 {
                    let tasks: Vec<_> = threads
                        .iter()
                        .map(|thread| {
                            let (runtime, thread) = (runtime.clone(), thread.clone());
                            tokio::spawn(async move {
                                for _ in 0..per {
                                    runtime.rename_thread(&thread, title.to_owned()).await.unwrap();
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
                        let records = (0..APPENDERS).map(|_| renamed_record(title)).collect();
                        raw.append(&raw_batch, Expected::Next(batch_next), records)
                            .await
                            .unwrap();
                        batch_next += APPENDERS as u64;
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
            "  {APPENDERS} concurrent appenders ({per} appends each a round): {:.0} events/s; raw {APPENDERS}-row commits {:.0} rows/s; ratio {ratio:.2}x (target >= 0.8x: {}; median of {CONCURRENT_ROUNDS} pairs of alternating rounds)",
            median(&mut ours_rates),
            median(&mut raw_rates),
            verdict(ratio >= 0.8)
        );
        raw.close().await.unwrap();
    });
}

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
//! usage: cargo bench -p agentwire-runtime --bench appends [-- --appends N] (default 500 a round)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_events::{EventLog, Expected, NewEvent, ThreadId};
use agentwire_runtime::{
    DemoAgent, Runtime, RuntimeConfig, StampedEvent, SystemClock, ThreadEvent,
};

const ROUNDS: usize = 5;
const APPENDERS: usize = 32;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
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

async fn open(dir: &tempfile::TempDir, name: &str) -> Arc<dyn EventLog> {
    agentwire_events::open(&format!("sqlite:{}", dir.path().join(name).display()))
        .await
        .unwrap()
}

fn main() {
    let mut appends = 500usize;
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--appends") {
        appends = args[at + 1].parse().expect("--appends N");
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Runtime::start(
            open(&dir, "runtime.sqlite").await,
            Arc::new(DemoAgent::default()),
            Arc::new(SystemClock),
            RuntimeConfig::default(),
        )
        .await
        .unwrap();
        let raw = open(&dir, "raw.sqlite").await;
        let title = "a title of the usual length for a thread";

        // One awaited append.
        let thread = runtime.create_thread(None, None).await.unwrap();
        let raw_thread = ThreadId::new("raw-single").unwrap();
        let mut raw_next = 0u64;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            for _ in 0..appends {
                let started = Instant::now();
                runtime.rename_thread(&thread, title.to_owned()).await.unwrap();
                ours.push(started.elapsed());
            }
            for _ in 0..appends {
                let started = Instant::now();
                raw.append(&raw_thread, Expected::Next(raw_next), vec![renamed_record(title)])
                    .await
                    .unwrap();
                raw_next += 1;
                theirs.push(started.elapsed());
            }
        }
        ours.sort();
        theirs.sort();
        let (p50, p99) = (percentile(&ours, 0.5), percentile(&ours, 0.99));
        let (raw50, raw99) = (percentile(&theirs, 0.5), percentile(&theirs, 0.99));
        let (r50, r99) = (
            p50.as_secs_f64() / raw50.as_secs_f64(),
            p99.as_secs_f64() / raw99.as_secs_f64(),
        );
        println!("agentwire-runtime durable appends, store sqlite: (defaults), {appends} appends a round");
        println!(
            "  one awaited append: p50 {:.3} ms, p99 {:.3} ms; raw one-row commit p50 {:.3} ms, p99 {:.3} ms; ratios {r50:.2}x and {r99:.2}x (target <= 1.2x: {} and {}; {ROUNDS} alternating rounds)",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            raw50.as_secs_f64() * 1e3,
            raw99.as_secs_f64() * 1e3,
            verdict(r50 <= 1.2),
            verdict(r99 <= 1.2),
        );

        // 32 concurrent appenders, each on its own thread.
        let mut threads = Vec::with_capacity(APPENDERS);
        for _ in 0..APPENDERS {
            threads.push(runtime.create_thread(None, None).await.unwrap());
        }
        let per = appends.max(APPENDERS) / APPENDERS * 4;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let raw_batch = ThreadId::new("raw-batch").unwrap();
        let mut batch_next = 0u64;
        for _ in 0..ROUNDS {
            let started = Instant::now();
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
            ours.push((APPENDERS * per) as f64 / started.elapsed().as_secs_f64());
            let started = Instant::now();
            for _ in 0..per {
                let records = (0..APPENDERS).map(|_| renamed_record(title)).collect();
                raw.append(&raw_batch, Expected::Next(batch_next), records)
                    .await
                    .unwrap();
                batch_next += APPENDERS as u64;
            }
            theirs.push((APPENDERS * per) as f64 / started.elapsed().as_secs_f64());
        }
        let (ours, theirs) = (median(&mut ours), median(&mut theirs));
        let ratio = ours / theirs;
        println!(
            "  {APPENDERS} concurrent appenders ({per} appends each a round): {ours:.0} events/s; raw {APPENDERS}-row commits {theirs:.0} rows/s; ratio {ratio:.2}x (target >= 0.8x: {}; medians of {ROUNDS} alternating rounds)",
            verdict(ratio >= 0.8)
        );
        raw.close().await.unwrap();
    });
}

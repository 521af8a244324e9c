//! JSON-RPC over a pipe, each figure against an anchor measured in the same run, printed as a
//! ratio (`cargo bench -p agentwire-jsonrpc --bench roundtrip`).
//!
//! - Round trips: our `Peer` as the client sends requests with ~1 KB params to an echo peer in
//!   a child process over its stdin/stdout pipes. The anchor is `tools/node/jsonrpc-echo.mjs`
//!   (readline + `JSON.parse` + `JSON.stringify`); ours is this same benchmark binary
//!   re-executed as an echo server (a `Peer` on stdio, single-threaded runtime, as Node is),
//!   once with a typed handler (params read into a struct, the struct written back: how a
//!   Rust method handler is written) and once with a `Value` handler. Once with one request in
//!   flight (latency-bound), once with 32 in flight.
//! - Streamed notifications (200 B each, one direction): receiving, a `Peer` reads them from
//!   `cat FILE` and hands each to a handler, against reading the same pipe raw; sending, a
//!   `Peer` writes them into `cat > /dev/null`, against writing the same bytes raw. The raw side
//!   is the ceiling; the figure is the fraction of it.

// Benchmark helpers fail loudly on broken setup, like the tests they serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::{self, ChildProcess};
use agentwire_jsonrpc::{Handlers, Peer, Profile, encode_line};
use criterion::{Criterion, Throughput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Set in the environment of the re-executed benchmark binary that serves as the echo peer.
const ECHO_SERVER_ENV: &str = "AGENTWIRE_JSONRPC_BENCH_ECHO";
/// Notifications per streamed batch.
const STREAM_COUNT: usize = 100_000;
/// Requests in flight in the windowed round-trip benchmark.
const WINDOW: usize = 32;

type Totals = Rc<RefCell<BTreeMap<String, (u64, Duration)>>>;

/// The echoed params, as a method handler would declare them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EchoParams {
    thread_id: String,
    turn_id: String,
    items: Vec<EchoItem>,
    note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct EchoItem {
    index: u32,
    kind: String,
    text: String,
}

fn params_1k() -> EchoParams {
    let params = EchoParams {
        thread_id: "3f0c2b9e-8d5a-4c61-9d0e-6b7a1f2c3d4e".into(),
        turn_id: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d".into(),
        items: (0..10)
            .map(|index| EchoItem {
                index,
                kind: "text".into(),
                text: "the quick brown fox jumps over the lazy dog, twice".into(),
            })
            .collect(),
        note: "é✓ non-ASCII text is part of the payload".into(),
    };
    let len = serde_json::to_vec(&params).unwrap().len();
    assert!((900..1200).contains(&len), "params are {len} bytes");
    params
}

fn notification_200b(i: usize) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "method": "item/delta",
        "params": {"threadId": "t-1", "turnId": "u-1", "itemId": format!("item-{i:08}"), "delta": {"type": "text_delta", "text": "streamed words of an answer, a few at a time..."}},
    }))
    .unwrap();
    line.resize(199, b' ');
    line.push(b'\n');
    line
}

fn echo_server(handler: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let handlers = match handler {
        "typed" => Handlers::new()
            .on_typed_request("echo", |_ctx, params: EchoParams| async move { Ok(params) }),
        _ => Handlers::new()
            .on_any_request(|_ctx, params| async move { Ok(params.unwrap_or(Value::Null)) }),
    };
    runtime.block_on(async {
        let (stdin, stdout) = transport::stdio();
        Peer::spawn(stdin, stdout, Profile::generic(), handlers)
            .closed()
            .await;
    });
}

fn spawn_echo(which: &str) -> (ChildProcess, Peer) {
    let command = match which {
        "node" => tokio::process::Command::from(agentwire_testkit::node_script("jsonrpc-echo.mjs")),
        handler => {
            let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
            command.env(ECHO_SERVER_ENV, handler);
            command
        }
    };
    let (child, stdout, stdin) = ChildProcess::spawn(command).unwrap();
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), Handlers::new());
    (child, peer)
}

async fn round_trips(peer: &Peer, params: &Arc<EchoParams>, count: u64, window: usize) -> Duration {
    let started = Instant::now();
    let per_worker = count.div_ceil(window as u64);
    let mut workers = Vec::new();
    for worker in 0..window as u64 {
        let n = per_worker.min(count.saturating_sub(worker * per_worker));
        let (peer, params) = (peer.clone(), Arc::clone(params));
        workers.push(tokio::spawn(async move {
            for _ in 0..n {
                let echoed: EchoParams = peer.request("echo", &*params).await.unwrap();
                debug_assert_eq!(echoed, *params);
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    started.elapsed()
}

async fn receive(stream: &std::path::Path, raw: bool) -> Duration {
    let started = Instant::now();
    let mut cat = tokio::process::Command::new("cat");
    cat.arg(stream).stdout(Stdio::piped()).kill_on_drop(true);
    let mut child = cat.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    if raw {
        let mut buffer = vec![0u8; 64 * 1024];
        while stdout.read(&mut buffer).await.unwrap() > 0 {}
    } else {
        let seen = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&seen);
        let handlers = Handlers::new().on_notification("item/delta", move |_ctx, _params| {
            counter.fetch_add(1, Ordering::Relaxed);
            async {}
        });
        let peer = Peer::spawn(stdout, tokio::io::sink(), Profile::generic(), handlers);
        peer.closed().await;
        // The notification task finishes the ones already read after the input ends.
        tokio::time::timeout(Duration::from_secs(60), async {
            while seen.load(Ordering::Relaxed) < STREAM_COUNT as u64 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every notification reaches the handler");
    }
    child.wait().await.unwrap();
    started.elapsed()
}

async fn send(count: usize, raw: bool) -> Duration {
    let started = Instant::now();
    let mut cat = tokio::process::Command::new("sh");
    cat.args(["-c", "exec cat > /dev/null"])
        .stdin(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cat.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let params = json!({"threadId": "t-1", "turnId": "u-1", "delta": {"type": "text_delta", "text": "streamed words of an answer, a few at a time, about two hundred bytes a line."}});
    if raw {
        // The same bytes the peer writes for these notifications.
        let line = encode_line(
            &json!({"jsonrpc": "2.0", "method": "item/delta", "params": params}),
            usize::MAX,
            None,
        )
        .unwrap();
        assert_eq!(line.len(), 200);
        let all = line.repeat(count);
        stdin.write_all(&all).await.unwrap();
        stdin.shutdown().await.unwrap();
        drop(stdin);
    } else {
        // A reader that stays open and silent: an ended input would close the connection.
        let (silent, _open) = tokio::io::duplex(64);
        let peer = Peer::spawn(silent, stdin, Profile::generic(), Handlers::new());
        for _ in 0..count {
            peer.notify("item/delta", &params).await.unwrap();
        }
        peer.close().await;
    }
    child.wait().await.unwrap();
    started.elapsed()
}

fn record(totals: &Totals, name: &str, iters: u64, elapsed: Duration) {
    let mut totals = totals.borrow_mut();
    let entry = totals.entry(name.to_owned()).or_default();
    entry.0 += iters;
    entry.1 += elapsed;
}

fn rate(totals: &Totals, name: &str) -> f64 {
    let totals = totals.borrow();
    let (iters, elapsed) = totals[name];
    iters as f64 / elapsed.as_secs_f64()
}

fn main() {
    if let Ok(handler) = std::env::var(ECHO_SERVER_ENV) {
        echo_server(&handler);
        return;
    }
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let totals: Totals = Rc::default();
    let params = Arc::new(params_1k());

    let mut group = criterion.benchmark_group("jsonrpc/roundtrip");
    group.throughput(Throughput::Elements(1));
    for (window, label) in [(1usize, "serial"), (WINDOW, "window32")] {
        for which in ["node", "typed", "value"] {
            let (mut child, peer) = runtime.block_on(async { spawn_echo(which) });
            let name = format!("{label}/{which}");
            let (totals_ref, params) = (Rc::clone(&totals), Arc::clone(&params));
            group.bench_function(&name, |b| {
                b.iter_custom(|iters| {
                    let elapsed = runtime.block_on(round_trips(&peer, &params, iters, window));
                    record(&totals_ref, &name, iters, elapsed);
                    elapsed
                });
            });
            runtime.block_on(async {
                peer.close().await;
                child.shutdown(Duration::from_secs(5)).await.unwrap();
            });
        }
    }
    group.finish();

    let dir = tempfile::tempdir().unwrap();
    let stream_path = dir.path().join("notifications.ndjson");
    let lines: Vec<Vec<u8>> = (0..STREAM_COUNT).map(notification_200b).collect();
    std::fs::write(&stream_path, lines.concat()).unwrap();
    let mut group = criterion.benchmark_group("jsonrpc/notifications");
    group.throughput(Throughput::Elements(STREAM_COUNT as u64));
    for (direction, raw, which) in [
        ("receive", true, "cat"),
        ("receive", false, "ours"),
        ("send", true, "cat"),
        ("send", false, "ours"),
    ] {
        let name = format!("{direction}/{which}");
        let totals_ref = Rc::clone(&totals);
        group.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    elapsed += runtime.block_on(async {
                        if direction == "receive" {
                            receive(&stream_path, raw).await
                        } else {
                            send(STREAM_COUNT, raw).await
                        }
                    });
                }
                record(&totals_ref, &name, iters * STREAM_COUNT as u64, elapsed);
                elapsed
            });
        });
    }
    group.finish();
    criterion.final_summary();

    println!("\nJSON-RPC over a pipe, ~1 KB params (ratios from the samples above):");
    for label in ["serial", "window32"] {
        let node = rate(&totals, &format!("{label}/node"));
        for (handler, target) in [("typed", " (target >= 2x)"), ("value", "")] {
            let ours = rate(&totals, &format!("{label}/{handler}"));
            println!(
                "  round trips, {label:<8}, {handler} handler: ours {ours:>9.0}/s  node echo {node:>9.0}/s  ratio {:.2}x{target}",
                ours / node
            );
        }
    }
    println!("Streamed notifications, 200 B each, {STREAM_COUNT} per run:");
    for direction in ["receive", "send"] {
        let (cat, ours) = (
            rate(&totals, &format!("{direction}/cat")),
            rate(&totals, &format!("{direction}/ours")),
        );
        println!(
            "  {direction:<7}: ours {ours:>10.0}/s  raw pipe through cat {cat:>10.0}/s  fraction of the ceiling {:.2}",
            ours / cat
        );
    }
}

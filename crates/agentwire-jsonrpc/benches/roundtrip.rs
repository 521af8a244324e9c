//! JSON-RPC over a pipe through the `Peer` a user runs, each figure against an anchor measured
//! in the same run, rounds alternating, medians of five, each ratio printed with its target
//! and `met` or `MISSED` (`scripts/bench.sh --jsonrpc`, or `cargo bench -p agentwire-jsonrpc
//! --bench roundtrip`):
//!
//! - Round trips, 1 and 32 requests in flight, ~1 KB params. The client is the same `Peer`
//!   for every server (a two-worker runtime, `request::<_, EchoParams>`). Ours: this benchmark
//!   binary re-executed as an echo server, a `Peer` on `transport::stdio()` with a typed
//!   handler (params read into a struct, the struct written back) on a single-threaded
//!   runtime. The anchor: the same binary as a minimal Rust echo over std pipes (`read_until`,
//!   the request line turned into its response by replacing `"method":"echo","params":` with
//!   `"result":`, `write_all`, a flush once no complete line is buffered; no JSON): the
//!   physical limit. Target: at least 0.5x its round trips per second.
//! - Server CPU per request: the echo child's user + system time over the same rounds, as
//!   `getrusage` counts it for that process (read from `/proc/<pid>/stat` while it runs: the
//!   crate forbids `unsafe`, and the child's start-up is left out), against the Node.js
//!   readline + `JSON.parse`/`JSON.stringify` peer (`tools/node/jsonrpc-echo.mjs`) serving the
//!   same client. Target: at most 0.5x Node's.
//! - Streamed notifications, 200 B each, one direction (no target: the fraction of the raw
//!   pipe's rate): receiving, a `Peer` reads them from `cat FILE` and hands each to a handler,
//!   against reading the same pipe raw; sending, a `Peer` writes them into `cat > /dev/null`,
//!   against writing the same bytes raw.
//!
//! usage: cargo bench -p agentwire-jsonrpc --bench roundtrip [-- --requests N] [--rounds R]
//!   --requests N  round trips a round with one in flight (default 20,000; 32 in flight: 2.5 N)
//!   --rounds R    rounds of each side (default 5)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead as _, BufReader, BufWriter, Write as _};
use std::os::fd::AsFd as _;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::{self, ChildProcess};
use agentwire_jsonrpc::{Handlers, Peer, Profile, encode_line};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Set in the environment of the re-executed benchmark binary that serves as an echo peer.
const ECHO_SERVER_ENV: &str = "AGENTWIRE_JSONRPC_BENCH_ECHO";
/// Notifications per streamed batch.
const STREAM_COUNT: usize = 100_000;
/// Requests in flight in the windowed round trips.
const WINDOW: usize = 32;
/// What the raw echo replaces to turn a request of the client into its response.
const REQUEST_MARK: &[u8] = b",\"method\":\"echo\",\"params\":";

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

/// Ours: a `Peer` on stdio with a typed handler, on a single-threaded runtime (as Node is).
fn peer_echo_server() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let handlers = Handlers::new()
        .on_typed_request("echo", |_ctx, params: EchoParams| async move { Ok(params) });
    runtime.block_on(async {
        let (stdin, stdout) = transport::stdio();
        Peer::spawn(stdin, stdout, Profile::generic(), handlers)
            .closed()
            .await;
    });
}

/// The anchor: the least a program does to answer each line over std pipes, with no JSON.
fn raw_echo_server() {
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned().unwrap());
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().unwrap());
    let mut input = BufReader::with_capacity(64 * 1024, stdin);
    let mut output = BufWriter::with_capacity(64 * 1024, stdout);
    let finder = memchr::memmem::Finder::new(REQUEST_MARK);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        let at = finder
            .find(&line)
            .expect("a request of the benchmark's client");
        output.write_all(&line[..at]).unwrap();
        output.write_all(b",\"result\":").unwrap();
        output.write_all(&line[at + REQUEST_MARK.len()..]).unwrap();
        if memchr::memchr(b'\n', input.buffer()).is_none() {
            output.flush().unwrap();
        }
    }
    output.flush().unwrap();
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Server {
    Raw,
    Ours,
    Node,
}

impl Server {
    const ALL: [Server; 3] = [Server::Raw, Server::Ours, Server::Node];

    fn name(self) -> &'static str {
        match self {
            Server::Raw => "raw Rust echo",
            Server::Ours => "ours (Peer, typed handler)",
            Server::Node => "Node echo",
        }
    }
}

struct Echo {
    child: ChildProcess,
    peer: Peer,
    pid: u32,
}

fn spawn_echo(server: Server) -> Echo {
    let command = match server {
        Server::Node => {
            tokio::process::Command::from(agentwire_testkit::node_script("jsonrpc-echo.mjs"))
        }
        Server::Raw | Server::Ours => {
            let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
            command.env(
                ECHO_SERVER_ENV,
                if server == Server::Raw { "raw" } else { "peer" },
            );
            command
        }
    };
    let (child, stdout, stdin) = ChildProcess::spawn(command).unwrap();
    let pid = child.id().unwrap();
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), Handlers::new());
    Echo { child, peer, pid }
}

/// User + system CPU time of a running process, as `getrusage` counts it for that process.
fn cpu_time(pid: u32, ticks_per_second: f64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at its closing parenthesis:
    // utime and stime are fields 14 and 15, the 12th and 13th after the state.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_secs_f64(ticks as f64 / ticks_per_second)
}

fn clock_ticks_per_second() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf CLK_TCK");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .map_or(default, |at| args[at + 1].parse().expect(name))
}

fn main() {
    match std::env::var(ECHO_SERVER_ENV).as_deref() {
        Ok("raw") => return raw_echo_server(),
        Ok(_) => return peer_echo_server(),
        Err(_) => {}
    }
    let args: Vec<String> = std::env::args().collect();
    let requests = arg(&args, "--requests", 20_000);
    let rounds = arg(&args, "--rounds", 5).max(1) as usize;
    let ticks = clock_ticks_per_second();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let params = Arc::new(params_1k());
    println!(
        "JSON-RPC over a pipe: {rounds} alternating rounds of each side; load average before: {}",
        load_average()
    );

    let mut report = Vec::new();
    let mut echoes: Vec<(Server, Echo)> = runtime.block_on(async {
        let mut echoes = Vec::new();
        for server in Server::ALL {
            let echo = spawn_echo(server);
            // Warm up: the child's start, the JIT, the pipes.
            round_trips(&echo.peer, &params, 2_000, WINDOW).await;
            echoes.push((server, echo));
        }
        echoes
    });
    for (window, count) in [(1usize, requests), (WINDOW, requests * 5 / 2)] {
        // Per server: round trips per second, CPU seconds per request.
        let mut rates = [Vec::new(), Vec::new(), Vec::new()];
        let mut cpus = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..rounds {
            for turn in 0..Server::ALL.len() {
                // Each round starts with the next side, so that none is always first.
                let at = (round + turn) % Server::ALL.len();
                let echo = &echoes[at].1;
                let before = cpu_time(echo.pid, ticks);
                let elapsed = runtime.block_on(round_trips(&echo.peer, &params, count, window));
                let cpu = cpu_time(echo.pid, ticks).saturating_sub(before);
                rates[at].push(count as f64 / elapsed.as_secs_f64());
                cpus[at].push(cpu.as_secs_f64() / count as f64);
            }
        }
        let rate: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
        let cpu: Vec<f64> = cpus.iter_mut().map(|c| median(c)).collect();
        let (raw, ours, node) = (0, 1, 2);
        let ratio = rate[ours] / rate[raw];
        report.push(format!(
            "  round trips, {window:>2} in flight ({count} a round): ours {:.0}/s; raw Rust echo {:.0}/s; ratio {ratio:.2}x (target >= 0.5x: {}); Node echo {:.0}/s",
            rate[ours],
            rate[raw],
            verdict(ratio >= 0.5),
            rate[node],
        ));
        let ratio = cpu[ours] / cpu[node];
        report.push(format!(
            "  server CPU per request, {window:>2} in flight: ours {:.1} us; Node echo {:.1} us; ratio {ratio:.2}x (target <= 0.5x: {}); raw Rust echo {:.1} us",
            cpu[ours] * 1e6,
            cpu[node] * 1e6,
            verdict(ratio <= 0.5),
            cpu[raw] * 1e6,
        ));
    }
    runtime.block_on(async {
        for (_, echo) in &mut echoes {
            echo.peer.close().await;
            echo.child.shutdown(Duration::from_secs(5)).await.unwrap();
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let stream_path = dir.path().join("notifications.ndjson");
    let lines: Vec<Vec<u8>> = (0..STREAM_COUNT).map(notification_200b).collect();
    std::fs::write(&stream_path, lines.concat()).unwrap();
    for direction in ["receive", "send"] {
        let (mut raw_rates, mut our_rates) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for raw in [round % 2 == 0, round % 2 == 1] {
                let elapsed = runtime.block_on(async {
                    if direction == "receive" {
                        receive(&stream_path, raw).await
                    } else {
                        send(STREAM_COUNT, raw).await
                    }
                });
                let rate = STREAM_COUNT as f64 / elapsed.as_secs_f64();
                if raw {
                    raw_rates.push(rate);
                } else {
                    our_rates.push(rate);
                }
            }
        }
        let (cat, ours) = (median(&mut raw_rates), median(&mut our_rates));
        report.push(format!(
            "  notifications {direction:<7} (200 B, {STREAM_COUNT} a round): ours {ours:.0}/s; raw pipe through cat {cat:.0}/s; fraction of the ceiling {:.2} (no target)",
            ours / cat
        ));
    }

    println!(
        "\nJSON-RPC over a pipe, ~1 KB params, medians of {rounds} alternating rounds (load average after: {}):",
        load_average()
    );
    for line in report {
        println!("{line}");
    }
    println!("  servers: {}", Server::ALL.map(Server::name).join(", "));
}

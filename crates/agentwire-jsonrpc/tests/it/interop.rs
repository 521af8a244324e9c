//! Interop with other languages' readers: a Python asyncio NDJSON peer and a Node.js readline
//! peer (`tools/python/jsonrpc_peer.py`, `tools/node/jsonrpc-peer.mjs`) exchange requests both
//! ways with ours, including requests they make while ours wait on them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentwire_jsonrpc::transport::ChildProcess;
use agentwire_jsonrpc::{CallError, Handlers, Peer, Profile};
use serde_json::{Value, json};

/// A guard against a hung test, not a timing assertion.
const STUCK: Duration = Duration::from_secs(60);
const CONCURRENT: usize = 200;

async fn exchange(command: std::process::Command, who: &str) {
    let (mut child, stdout, stdin) =
        ChildProcess::spawn(tokio::process::Command::from(command)).expect("spawn the peer");
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let handlers = Handlers::new()
        .on_request("host/double", |_ctx, params| async move {
            let n = params
                .as_ref()
                .and_then(|p| p["n"].as_i64())
                .ok_or_else(|| agentwire_jsonrpc::ErrorObject::invalid_params("n"))?;
            Ok(json!({ "value": n * 2 }))
        })
        .on_notification("done", move |_ctx, params| {
            let done_tx = done_tx.clone();
            async move {
                let _ = done_tx.send(params);
            }
        });
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), handlers);

    let work = async {
        // They ask us CONCURRENT things while we ask them as many.
        peer.notify("start", &json!({ "count": CONCURRENT }))
            .await
            .expect("notify");
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..CONCURRENT {
            let peer = peer.clone();
            calls.spawn(async move {
                let text = format!("é✓ {i} \"quoted\"\n");
                let echoed: Value = peer
                    .request("echo", &json!({ "i": i, "text": text }))
                    .await
                    .expect("echo");
                assert_eq!(echoed, json!({ "i": i, "text": text }));
                // A request they can only answer after asking us one.
                let asked: Value = peer.request("ask", &json!({ "n": i })).await.expect("ask");
                assert_eq!(asked, json!({ "doubled": 2 * i }));
            });
        }
        while let Some(call) = calls.join_next().await {
            call.expect("call task");
        }
        let unknown = peer.request::<_, Value>("nope", &json!({})).await;
        assert!(
            matches!(&unknown, Err(CallError::Remote(error)) if error.code == -32601),
            "{unknown:?}"
        );
        done_rx.recv().await.expect("done notification")
    };
    let done = tokio::time::timeout(STUCK, work)
        .await
        .unwrap_or_else(|_| panic!("{who} exchange hung; stderr: {}", child.stderr_tail()));
    assert_eq!(
        done,
        Some(json!({ "ok": true, "count": CONCURRENT })),
        "{who}"
    );
    let stats = peer.stats();
    assert_eq!(stats.requests_received, (2 * CONCURRENT) as u64, "{who}");
    assert_eq!(stats.unparsable_lines + stats.invalid_messages, 0, "{who}");

    peer.close().await;
    let status = child
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
    assert!(
        status.success(),
        "{who} exited with {status}; stderr: {}",
        child.stderr_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_asyncio_peer_exchanges_requests_both_ways() {
    exchange(
        agentwire_testkit::python_script("jsonrpc_peer.py"),
        "python",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_readline_peer_exchanges_requests_both_ways() {
    exchange(agentwire_testkit::node_script("jsonrpc-peer.mjs"), "node").await;
}

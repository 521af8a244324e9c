//! The peer over real transports: requests both ways at once, 10,000 interleaved requests,
//! garbage between valid lines, exactly-once answers, overload, cancellation, timeouts, close,
//! batches, line limits, events and counters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_jsonrpc::transport::{self, ChildProcess, MemoryEnd};
use agentwire_jsonrpc::{
    CallError, ErrorObject, Event, Frame, FrameError, FrameReader, Handlers, Id, Peer, PeerBuilder,
    Profile,
};
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt as _, ReadHalf, WriteHalf};

/// A guard against a hung test, not a timing assertion.
const STUCK: Duration = Duration::from_secs(20);

/// The other end of a connection, driven by hand: raw lines in, parsed lines out.
struct Raw<W> {
    lines: FrameReader<ReadHalf<tokio::io::DuplexStream>>,
    out: W,
}

impl<W: AsyncWrite + Unpin> Raw<W> {
    async fn send(&mut self, bytes: &[u8]) {
        self.out.write_all(bytes).await.expect("write");
        self.out.flush().await.expect("flush");
    }

    async fn next(&mut self) -> Value {
        serde_json::from_slice(&self.next_line().await).expect("the peer wrote JSON")
    }

    /// The next line's bytes, line feed excluded.
    async fn next_line(&mut self) -> Vec<u8> {
        let frame = tokio::time::timeout(STUCK, self.lines.next_frame())
            .await
            .expect("no line from the peer")
            .expect("read");
        match frame {
            Some(Frame::Line(line)) => line.to_vec(),
            other => panic!("expected a line, got {other:?}"),
        }
    }

    /// Reads until end of input and returns what was left.
    async fn rest(&mut self) -> Vec<Value> {
        let mut values = Vec::new();
        loop {
            let frame = tokio::time::timeout(STUCK, self.lines.next_frame())
                .await
                .expect("the peer did not close")
                .expect("read");
            match frame {
                Some(Frame::Line(line)) => {
                    values.push(serde_json::from_slice(line).expect("JSON"));
                }
                Some(Frame::Oversize { length }) => panic!("oversize line of {length}"),
                None => return values,
            }
        }
    }
}

fn raw(end: MemoryEnd) -> Raw<WriteHalf<tokio::io::DuplexStream>> {
    let (read, write) = end;
    Raw {
        lines: FrameReader::new(read, 64 << 20),
        out: write,
    }
}

fn echo_handlers() -> Handlers {
    Handlers::new().on_request("echo", |_ctx, params| async move {
        Ok(params.unwrap_or(Value::Null))
    })
}

fn serve(profile: Profile, handlers: Handlers) -> (Peer, Raw<WriteHalf<tokio::io::DuplexStream>>) {
    let (ours, theirs) = transport::memory_pair();
    let peer = Peer::spawn(ours.0, ours.1, profile, handlers);
    (peer, raw(theirs))
}

fn connected(a: Handlers, b: Handlers) -> (Peer, Peer) {
    let (one, two) = transport::memory_pair();
    (
        Peer::spawn(one.0, one.1, Profile::generic(), a),
        Peer::spawn(two.0, two.1, Profile::generic(), b),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_request_at_once_while_handlers_await_each_other() {
    // A's handler asks B, whose handler asks A back before either answers.
    let a = Handlers::new()
        .on_request("a/start", |ctx, _| async move {
            let answer: Value = ctx
                .peer()
                .request("b/middle", &json!({"from": "a"}))
                .await
                .map_err(|_| ErrorObject::internal())?;
            Ok(json!({"a": answer}))
        })
        .on_request(
            "a/leaf",
            |_, params| async move { Ok(json!({"leaf": params})) },
        );
    let b = Handlers::new().on_request("b/middle", |ctx, params| async move {
        let leaf: Value = ctx
            .peer()
            .request("a/leaf", &params)
            .await
            .map_err(|_| ErrorObject::internal())?;
        Ok(json!({"b": leaf}))
    });
    let (peer_a, peer_b) = connected(a, b);
    let b_side = peer_b.clone();
    let (start, direct) = (json!({}), json!({"from": "a-direct"}));
    let (from_b, from_a) = tokio::time::timeout(STUCK, async {
        tokio::join!(
            b_side.request::<_, Value>("a/start", &start),
            peer_a.request::<_, Value>("b/middle", &direct)
        )
    })
    .await
    .expect("deadlock: the nested requests never completed");
    assert_eq!(
        from_b.expect("b → a"),
        json!({"a": {"b": {"leaf": {"from": "a"}}}})
    );
    assert_eq!(
        from_a.expect("a → b"),
        json!({"b": {"leaf": {"from": "a-direct"}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_interleaved_requests_each_way_are_neither_lost_nor_duplicated() {
    const N: usize = 10_000;
    const WINDOW: usize = 1_000;
    let counted = |counter: Arc<AtomicUsize>| {
        Handlers::new().on_request("echo", move |_ctx, params| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                Ok(params.unwrap_or(Value::Null))
            }
        })
    };
    let (served_a, served_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // An OS socket pair, so the bytes really cross a pipe.
    let (left, right) = tokio::net::UnixStream::pair().expect("socket pair");
    let (lr, lw) = transport::unix(left);
    let (rr, rw) = transport::unix(right);
    let a = Peer::spawn(lr, lw, Profile::generic(), counted(Arc::clone(&served_a)));
    let b = Peer::spawn(rr, rw, Profile::generic(), counted(Arc::clone(&served_b)));
    let run = |peer: Peer, side: &'static str| {
        tokio::spawn(async move {
            // Up to WINDOW calls in flight per side, within the default inbound bound.
            let window = Arc::new(tokio::sync::Semaphore::new(WINDOW));
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..N {
                let peer = peer.clone();
                let slot = Arc::clone(&window).acquire_owned().await.expect("window");
                calls.spawn(async move {
                    let _slot = slot;
                    let params = json!({"side": side, "i": i});
                    let result: Value = peer.request("echo", &params).await.expect("call");
                    assert_eq!(result, params);
                    i
                });
            }
            let mut seen = vec![false; N];
            while let Some(done) = calls.join_next().await {
                let i = done.expect("call task");
                assert!(!seen[i], "result {i} arrived twice");
                seen[i] = true;
            }
            assert!(seen.iter().all(|s| *s));
        })
    };
    let (one, two) = (run(a.clone(), "a"), run(b.clone(), "b"));
    tokio::time::timeout(Duration::from_secs(120), async {
        one.await.expect("a's calls");
        two.await.expect("b's calls");
    })
    .await
    .expect("the requests never all completed");
    assert_eq!(served_a.load(Ordering::SeqCst), N);
    assert_eq!(served_b.load(Ordering::SeqCst), N);
    assert_eq!(a.stats().requests_received, N as u64);
    assert_eq!(a.stats().responses_received, N as u64);
    assert_eq!(a.stats().unknown_responses, 0);
    assert_eq!(a.pending_requests(), 0);
    assert_eq!(b.incoming_in_flight(), 0);
}

fn garbage(limit: usize) -> Vec<Vec<u8>> {
    vec![
        b"this is not json\n".to_vec(),
        b"\xff\xfe{\"jsonrpc\":\"2.0\"}\n".to_vec(),
        // A byte order mark: JSON text must not have one (RFC 8259 §8.1).
        b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":\"bom\",\"method\":\"echo\",\"params\":{}}\n"
            .to_vec(),
        [
            b"{\"pad\":\"".to_vec(),
            vec![b'x'; limit + 10],
            b"\"}\n".to_vec(),
        ]
        .concat(),
        b"\n".to_vec(),
        b"   \t \r\n".to_vec(),
        b"[{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"echo\",\"params\":{}}]\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"id\":2}\n".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}\n".to_vec(),
    ]
}

async fn garbage_between_valid_requests(profile: Profile) -> (Vec<Value>, Peer) {
    let limit = 4096;
    let builder = PeerBuilder::new(profile.with_max_inbound_frame(limit)).handlers(echo_handlers());
    let mut events = builder.subscribe();
    let (ours, theirs) = transport::memory_pair();
    let peer = builder.spawn(ours.0, ours.1);
    let mut raw = raw(theirs);
    let mut replies = Vec::new();
    for (i, junk) in garbage(limit).into_iter().enumerate() {
        raw.send(format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{i}\",\"method\":\"echo\",\"params\":{{\"i\":{i}}}}}\r\n").as_bytes()).await;
        replies.push(raw.next().await);
        raw.send(&junk).await;
    }
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"echo\",\"params\":{}}\n")
        .await;
    loop {
        let reply = raw.next().await;
        let last = reply["id"] == "last";
        replies.push(reply);
        if last {
            break;
        }
    }
    let mut codes = Vec::new();
    while let Ok(event) = events.try_recv() {
        codes.push(event.code());
    }
    assert_eq!(
        codes,
        vec![
            "jsonrpc.unparsable-line",
            "jsonrpc.unparsable-line",
            "jsonrpc.unparsable-line",
            "jsonrpc.oversize-line",
            "jsonrpc.batch-rejected",
            "jsonrpc.unparsable-line",
            "jsonrpc.unknown-response",
        ]
    );
    (replies, peer)
}

fn echo_reply(id: &str, i: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"i": i}})
}

#[tokio::test]
async fn garbage_gets_no_reply_and_changes_nothing_for_valid_requests_chainlesschain() {
    let (replies, peer) =
        garbage_between_valid_requests(Profile::chainlesschain_app_server()).await;
    let mut expected: Vec<Value> = (0..9).map(|i| echo_reply(&i.to_string(), i)).collect();
    expected.push(json!({"jsonrpc": "2.0", "id": "last", "result": {}}));
    assert_eq!(replies, expected);
    let stats = peer.stats();
    assert_eq!(stats.unparsable_lines, 4);
    assert_eq!(stats.oversize_lines, 1);
    assert_eq!(stats.requests_received, 10);
    assert_eq!(stats.unknown_responses, 1);
}

#[tokio::test]
async fn roll_answers_a_batch_with_one_id_null_error_and_nothing_else_changes() {
    let (replies, _peer) = garbage_between_valid_requests(Profile::roll()).await;
    let mut expected: Vec<Value> = (0..7).map(|i| echo_reply(&i.to_string(), i)).collect();
    expected.push(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "batches are not supported"}}));
    expected.extend((7..9).map(|i| echo_reply(&i.to_string(), i)));
    expected.push(json!({"jsonrpc": "2.0", "id": "last", "result": {}}));
    assert_eq!(replies, expected);
}

#[tokio::test]
async fn invalid_requests_get_minus_32600_with_their_id_or_per_profile_null() {
    for (profile, null_reply) in [
        (Profile::roll(), true),
        (Profile::chainlesschain_app_server(), false),
    ] {
        let (_peer, mut raw) = serve(profile, echo_handlers());
        raw.send(b"{\"id\":\"7\",\"method\":\"echo\"}\n").await;
        assert_eq!(
            raw.next().await,
            json!({"jsonrpc":"2.0","id":"7","error":{"code":-32600,"message":"\"jsonrpc\" must be \"2.0\""}})
        );
        raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":3}\n")
            .await;
        assert_eq!(
            raw.next().await,
            json!({"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"\"method\" must be a string"}})
        );
        raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"echo\"}\n")
            .await;
        raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"echo\",\"params\":[]}\n")
            .await;
        let next = raw.next().await;
        if null_reply {
            assert_eq!(
                next,
                json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a request id must not be null"}})
            );
            assert_eq!(
                raw.next().await,
                json!({"jsonrpc":"2.0","id":8,"result":[]})
            );
        } else {
            assert_eq!(next, json!({"jsonrpc":"2.0","id":8,"result":[]}));
        }
    }
}

#[tokio::test]
async fn unknown_methods_and_bad_typed_params_get_their_codes() {
    let handlers = Handlers::new().on_typed_request("add", |_ctx, (a, b): (i64, i64)| async move {
        Ok::<_, ErrorObject>(a + b)
    });
    let (_peer, mut raw) = serve(Profile::generic(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: nope"}})
    );
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"add\",\"params\":[2,3]}\n")
        .await;
    assert_eq!(raw.next().await, json!({"jsonrpc":"2.0","id":2,"result":5}));
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"add\",\"params\":{\"a\":1}}\n")
        .await;
    let reply = raw.next().await;
    assert_eq!(reply["id"], 3);
    assert_eq!(reply["error"]["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_minus_32603_once_and_the_peer_keeps_serving() {
    let handlers = echo_handlers().on_request("boom", |_ctx, _| async move {
        tokio::task::yield_now().await;
        panic!("handler bug");
    });
    let (_peer, mut raw) = serve(Profile::generic(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"boom\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":"p","error":{"code":-32603,"message":"internal error"}})
    );
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"echo\",\"params\":[1]}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":"q","result":[1]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbound_queue_answers_overloaded_with_retry_after() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let wait = Arc::clone(&gate);
    let handlers = Handlers::new().on_request("wait", move |_ctx, _| {
        let wait = Arc::clone(&wait);
        async move {
            wait.notified().await;
            Ok(json!("released"))
        }
    });
    let (peer, mut raw) = serve(Profile::generic().with_max_inbound_requests(2), handlers);
    for id in 1..=3 {
        raw.send(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"wait\",\"params\":{{}}}}\n")
                .as_bytes(),
        )
        .await;
    }
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"overloaded","data":{"retryAfterMs":100}}})
    );
    assert_eq!(peer.stats().overloaded_replies, 1);
    while peer.incoming_in_flight() == 2 {
        gate.notify_waiters();
        tokio::task::yield_now().await;
    }
    let mut ids = vec![
        raw.next().await["id"].clone(),
        raw.next().await["id"].clone(),
    ];
    ids.sort_by_key(|id| id.as_i64());
    assert_eq!(ids, vec![json!(1), json!(2)]);
}

#[tokio::test]
async fn generic_profile_answers_a_cancelled_request_with_minus_32800() {
    let handlers = Handlers::new().on_request("forever", |_ctx, _| async move {
        std::future::pending::<()>().await;
        Ok(Value::Null)
    });
    let (peer, mut raw) = serve(Profile::generic(), handlers.clone());
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"forever\",\"params\":{}}\n")
        .await;
    raw.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":\"c1\"}}\n").await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":"c1","error":{"code":-32800,"message":"request cancelled"}})
    );
    assert_eq!(peer.incoming_in_flight(), 0);
}

#[tokio::test]
async fn roll_profile_never_answers_a_cancelled_request() {
    let handlers = echo_handlers().on_request("forever", |_ctx, _| async move {
        std::future::pending::<()>().await;
        Ok(Value::Null)
    });
    let (peer, mut raw) = serve(Profile::roll(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"forever\",\"params\":{}}\n")
        .await;
    while peer.incoming_in_flight() == 0 {
        tokio::task::yield_now().await;
    }
    assert!(peer.cancel_incoming(&Id::from("c1")));
    assert!(!peer.cancel_incoming(&Id::from("c1")));
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"after\",\"method\":\"echo\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":"after","result":{}})
    );
}

#[tokio::test]
async fn a_timed_out_request_fails_is_withdrawn_and_a_late_answer_is_ignored() {
    let (peer, mut raw) = serve(Profile::generic(), Handlers::new());
    let params = json!({});
    let call = peer.request_with::<_, Value>("slow", &params, Some(Duration::from_millis(20)));
    assert_eq!(call.await, Err(CallError::Timeout { timeout_ms: 20 }));
    let request = raw.next().await;
    assert_eq!(request["method"], "slow");
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId": request["id"]}})
    );
    assert_eq!(peer.pending_requests(), 0);
    let mut events = peer.subscribe();
    raw.send(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":1}}\n",
            request["id"]
        )
        .as_bytes(),
    )
    .await;
    let event = tokio::time::timeout(STUCK, events.recv())
        .await
        .expect("event")
        .expect("open");
    assert_eq!(event, Event::UnknownResponse { id: Id::from(1) });
}

#[tokio::test]
async fn a_dropped_call_is_withdrawn() {
    let (peer, mut raw) = serve(Profile::generic(), Handlers::new());
    {
        let params = json!([]);
        let call = peer.request::<_, Value>("never", &params);
        tokio::pin!(call);
        // Poll once so the request is written, then drop it.
        assert!(futures_poll_once(call.as_mut()).await.is_none());
    }
    assert_eq!(raw.next().await["method"], "never");
    assert_eq!(raw.next().await["method"], "$/cancel_request");
    assert_eq!(peer.pending_requests(), 0);
}

async fn futures_poll_once<F: std::future::Future + Unpin>(mut future: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut future).poll(cx) {
        std::task::Poll::Ready(value) => std::task::Poll::Ready(Some(value)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// The server's runtime is torn down while its handler awaits: the handler is dropped with every
/// other task of that peer, the teardown does not panic, and the caller's request fails as
/// closed instead of waiting for an answer that can no longer come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_torn_down_under_a_running_handler_fails_the_call_instead_of_hanging() {
    let (ours, theirs) = transport::memory_pair();
    let client = Peer::spawn(ours.0, ours.1, Profile::generic(), Handlers::new());
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let handlers = Handlers::new().on_request("hang", move |_ctx, _params| {
            let started = started_tx.clone();
            async move {
                started.send(()).unwrap();
                std::future::pending::<Result<Value, ErrorObject>>().await
            }
        });
        let peer = {
            let _inside = runtime.enter();
            Peer::spawn(theirs.0, theirs.1, Profile::generic(), handlers)
        };
        stop_rx.recv().unwrap();
        // Every task of the server (reader, writer, the handler's) is dropped here.
        drop(runtime);
        drop(peer);
    });
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.request::<_, Value>("hang", &json!({})).await }
    });
    tokio::task::spawn_blocking(move || started_rx.recv_timeout(STUCK))
        .await
        .unwrap()
        .expect("the handler never started");
    stop_tx.send(()).unwrap();
    server.join().expect("tearing the server down panicked");
    let outcome = tokio::time::timeout(STUCK, call)
        .await
        .expect("the call hung after the server's runtime went away")
        .unwrap();
    assert_eq!(outcome, Err(CallError::Closed));
    tokio::time::timeout(STUCK, client.closed())
        .await
        .expect("the client never saw the connection close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_fails_every_pending_call_at_once_and_later_calls_too() {
    let (peer, raw) = serve(Profile::generic(), Handlers::new());
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request::<_, Value>("hang", &json!({})).await })
        })
        .collect();
    while peer.pending_requests() < 5 {
        tokio::task::yield_now().await;
    }
    // The other side goes away.
    drop(raw);
    for call in calls {
        let result = tokio::time::timeout(STUCK, call)
            .await
            .expect("a caller hung")
            .expect("task");
        assert_eq!(result, Err(CallError::Closed));
    }
    peer.closed().await;
    assert_eq!(
        peer.request::<_, Value>("after", &json!({})).await,
        Err(CallError::Closed)
    );
    assert_eq!(
        peer.notify("after", &json!({})).await,
        Err(CallError::Closed)
    );
}

#[tokio::test]
async fn a_local_close_cancels_handlers_flushes_and_ends_the_output() {
    let handlers = Handlers::new().on_request("forever", |_ctx, _| async move {
        std::future::pending::<()>().await;
        Ok(Value::Null)
    });
    let (peer, mut raw) = serve(Profile::generic(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"forever\",\"params\":{}}\n")
        .await;
    while peer.incoming_in_flight() == 0 {
        tokio::task::yield_now().await;
    }
    peer.notify("bye", &json!({})).await.expect("notify");
    peer.close().await;
    assert_eq!(
        raw.rest().await,
        vec![json!({"jsonrpc":"2.0","method":"bye","params":{}})]
    );
    assert_eq!(peer.incoming_in_flight(), 0);
}

#[tokio::test]
async fn generic_batches_are_answered_with_one_array() {
    let (_peer, mut raw) = serve(Profile::generic(), echo_handlers());
    raw.send(br#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]},{"jsonrpc":"2.0","method":"note","params":{}},{"jsonrpc":"2.0","id":2},{"jsonrpc":"2.0","id":3,"method":"echo","params":[3]}]
"#).await;
    let Value::Array(mut answers) = raw.next().await else {
        panic!("a batch is answered with an array");
    };
    answers.sort_by_key(|answer| answer["id"].as_i64());
    assert_eq!(
        answers,
        vec![
            json!({"jsonrpc":"2.0","id":1,"result":[1]}),
            json!({"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"a message needs \"method\", \"result\" or \"error\""}}),
            json!({"jsonrpc":"2.0","id":3,"result":[3]}),
        ]
    );
    raw.send(b"[{\"jsonrpc\":\"2.0\",\"method\":\"note\",\"params\":{}}]\n[]\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"an empty batch"}})
    );
}

#[tokio::test]
async fn a_notification_batch_is_written_in_order_or_not_at_all() {
    // A 64 KiB write queue: the 3 MB batch is queued as dozens of buffers.
    let mut profile = Profile::chainlesschain_app_server();
    profile.write_queue_bytes = 64 * 1024;
    let (peer, mut raw) = serve(profile, echo_handlers());
    let pad = "p".repeat(1_000);
    let items: Vec<Value> = (0..3_000).map(|i| json!({"i": i, "pad": pad})).collect();
    // Read while it is queued: the queue only drains as the other side reads.
    let sender = peer.clone();
    let sent = tokio::spawn(async move { sender.notify_batch("item/delta", &items).await });
    for i in 0..3_000 {
        let line = raw.next().await;
        assert_eq!(line["method"], "item/delta");
        assert_eq!(line["params"]["i"], i);
    }
    sent.await.unwrap().unwrap();
    // One item over the line limit: nothing of the batch is written.
    let big = vec![
        json!({"i": "a"}),
        json!({"delta": "x".repeat(70_000)}),
        json!({"i": "c"}),
    ];
    let error = peer
        .notify_batch("item/delta", &big)
        .await
        .expect_err("too long");
    assert_eq!(error.code(), "jsonrpc.line-too-long");
    peer.notify("item/delta", &json!({"i": "after"}))
        .await
        .unwrap();
    assert_eq!(raw.next().await["params"]["i"], "after");
}

/// Params written as text and params serialized make the same lines; a notification the
/// batch refuses (over the line limit, or failed by its writer) leaves the batch as it was.
#[tokio::test]
async fn a_batch_takes_params_as_text_or_serialized() {
    let (peer, mut raw) = serve(Profile::chainlesschain_app_server(), echo_handlers());
    let mut batch = peer.notification_batch("item/\"delta\"", 3);
    batch.push(&json!({"i": 1, "s": "é\n"})).unwrap();
    batch
        .push_with(|out| {
            out.extend_from_slice(br#"{"i":2,"s":"\u0001"}"#);
            Ok(())
        })
        .unwrap();
    let error = batch
        .push_with(|out| {
            out.extend_from_slice(b"{\"pad\":\"");
            out.resize(out.len() + 70_000, b'x');
            out.extend_from_slice(b"\"}");
            Ok(())
        })
        .expect_err("too long");
    assert!(matches!(
        error,
        FrameError::LineTooLong { limit: 65_536, .. }
    ));
    let error = batch
        .push_with(|out| {
            out.extend_from_slice(b"{\"half\":");
            Err(FrameError::Encode("refused".into()))
        })
        .expect_err("refused");
    assert!(matches!(error, FrameError::Encode(_)));
    batch.push(&3).unwrap();
    assert_eq!(batch.len(), 3);
    peer.send_batch(batch).await.unwrap();
    for expected in [
        r#"{"jsonrpc":"2.0","method":"item/\"delta\"","params":{"i":1,"s":"é\n"}}"#,
        r#"{"jsonrpc":"2.0","method":"item/\"delta\"","params":{"i":2,"s":"\u0001"}}"#,
        r#"{"jsonrpc":"2.0","method":"item/\"delta\"","params":3}"#,
    ] {
        assert_eq!(String::from_utf8(raw.next_line().await).unwrap(), expected);
    }
}

#[tokio::test]
async fn chainlesschain_lines_stay_under_64_kib() {
    let big = "x".repeat(70_000);
    let result = big.clone();
    let handlers = Handlers::new().on_request("big", move |_ctx, _| {
        let result = result.clone();
        async move { Ok(json!(result)) }
    });
    let (peer, mut raw) = serve(Profile::chainlesschain_app_server(), handlers);
    let error = peer
        .notify("item/delta", &json!({"delta": big}))
        .await
        .expect_err("too long");
    assert!(matches!(
        error,
        CallError::Frame(FrameError::LineTooLong { limit: 65_536, .. })
    ));
    assert_eq!(error.code(), "jsonrpc.line-too-long");
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"method\":\"big\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"internal error","data":{"reason":"jsonrpc.line-too-long"}}})
    );
}

#[tokio::test]
async fn server_request_ids_keep_the_profile_style_and_responses_match_by_type() {
    let (peer, mut raw) = serve(Profile::chainlesschain_app_server(), Handlers::new());
    let call = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.request::<_, Value>("approval/decide", &json!({"request": {}}))
                .await
        }
    });
    let request = raw.next().await;
    assert_eq!(
        request,
        json!({"jsonrpc":"2.0","id":"server:1","method":"approval/decide","params":{"request":{}}})
    );
    // The same digits as a number are another id.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"wrong\"}}\n")
        .await;
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"server:1\",\"result\":{\"kind\":\"acceptOnce\"}}\n")
        .await;
    assert_eq!(call.await.expect("task"), Ok(json!({"kind": "acceptOnce"})));
    assert_eq!(peer.stats().unknown_responses, 1);
}

#[tokio::test]
async fn a_remote_error_and_an_uncorrelated_error_are_reported() {
    let mut builder = PeerBuilder::new(Profile::roll());
    let mut events = builder.subscribe();
    let (ours, theirs) = transport::memory_pair();
    builder = builder.handlers(Handlers::new());
    let peer = builder.spawn(ours.0, ours.1);
    let mut raw = raw(theirs);
    let call = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.request::<_, Value>("approval.request", &json!({}))
                .await
        }
    });
    let request = raw.next().await;
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse error\"}}\n").await;
    raw.send(format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32601,\"message\":\"no handler\"}}}}\n", request["id"]).as_bytes()).await;
    let error = call.await.expect("task").expect_err("remote error");
    assert_eq!(
        error.remote(),
        Some(&ErrorObject::new(-32601, "no handler"))
    );
    assert_eq!(
        events.recv().await.expect("event"),
        Event::UncorrelatedError(ErrorObject::new(-32700, "parse error"))
    );
}

#[tokio::test]
async fn a_duplicate_id_in_flight_is_refused() {
    let handlers = echo_handlers().on_request("forever", |_ctx, _| async move {
        std::future::pending::<()>().await;
        Ok(Value::Null)
    });
    let (_peer, mut raw) = serve(Profile::generic(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"forever\",\"params\":{}}\n")
        .await;
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"echo\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"request id already in use"}})
    );
}

#[tokio::test]
async fn notifications_reach_their_handler_in_order() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handlers = Handlers::new().on_notification("runtime.event", move |_ctx, params| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(params);
        }
    });
    let (_peer, mut raw) = serve(Profile::roll(), handlers);
    for i in 0..50 {
        raw.send(format!("{{\"jsonrpc\":\"2.0\",\"method\":\"runtime.event\",\"params\":{{\"sequence\":{i}}}}}\n").as_bytes()).await;
    }
    for i in 0..50 {
        assert_eq!(
            rx.recv().await.expect("notification"),
            Some(json!({"sequence": i}))
        );
    }
}

#[tokio::test]
async fn tcp_transport_on_loopback_port_zero() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let (read, write) = transport::tcp(stream);
        let peer = Peer::spawn(read, write, Profile::generic(), echo_handlers());
        peer.closed().await;
    });
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (read, write) = transport::tcp(stream);
    let client = Peer::spawn(read, write, Profile::generic(), Handlers::new());
    let result: Value = client
        .request("echo", &json!({"over": "tcp"}))
        .await
        .expect("call");
    assert_eq!(result, json!({"over": "tcp"}));
    client.close().await;
    tokio::time::timeout(STUCK, server)
        .await
        .expect("server closed")
        .expect("task");
}

#[tokio::test]
async fn unix_socket_transport() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rpc.sock");
    let listener = tokio::net::UnixListener::bind(&path).expect("bind");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let (read, write) = transport::unix(stream);
        Peer::spawn(read, write, Profile::generic(), echo_handlers())
            .closed()
            .await;
    });
    let (read, write) = transport::unix(
        tokio::net::UnixStream::connect(&path)
            .await
            .expect("connect"),
    );
    let client = Peer::spawn(read, write, Profile::generic(), Handlers::new());
    let result: Value = client.request("echo", &json!([true])).await.expect("call");
    assert_eq!(result, json!([true]));
    client.close().await;
    tokio::time::timeout(STUCK, server)
        .await
        .expect("server closed")
        .expect("task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_transport_drains_stderr_and_closes_gracefully() {
    // `cat` sends every line back: our request comes back to our own handler, and our answer
    // comes back to our waiting call.
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", "echo starting >&2; head -c 20000 /dev/zero | tr '\\0' e >&2; echo >&2; echo; echo ready >&2; exec cat"]);
    let (child, stdout, stdin) = ChildProcess::spawn(command).expect("spawn sh");
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), echo_handlers());
    let result: Value = peer
        .request("echo", &json!({"via": "cat"}))
        .await
        .expect("call");
    assert_eq!(result, json!({"via": "cat"}));
    peer.close().await;
    let mut child = child;
    let status = child
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
    assert!(status.success(), "cat exits 0 on end of input: {status:?}");
    let tail = child.stderr_tail();
    assert!(
        tail.ends_with("starting\n[stderr line of 20000 bytes]\nready\n"),
        "stderr tail: {tail:?}"
    );
}

#[tokio::test]
async fn child_stderr_tail_keeps_the_last_bytes() {
    let mut command = tokio::process::Command::new("sh");
    command.args([
        "-c",
        "i=0; while [ $i -lt 3000 ]; do echo line-$i >&2; i=$((i+1)); done; echo last-line >&2",
    ]);
    let (child, stdout, stdin) = ChildProcess::spawn(command).expect("spawn sh");
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), Handlers::new());
    peer.closed().await;
    let mut child = child;
    let status = child
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
    assert!(status.success());
    let tail = child.stderr_tail();
    assert!(tail.len() <= transport::STDERR_TAIL_BYTES);
    assert!(
        tail.ends_with("line-2998\nline-2999\nlast-line\n"),
        "stderr tail ends {:?}",
        &tail[tail.len().saturating_sub(60)..]
    );
    assert!(!tail.contains("line-0\n"));
}

#[tokio::test]
async fn notifications_read_before_end_of_input_are_all_handled() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handlers = Handlers::new().on_notification("runtime.event", move |_ctx, params| {
        let tx = tx.clone();
        async move {
            tokio::task::yield_now().await;
            let _ = tx.send(params);
        }
    });
    let (peer, mut raw) = serve(Profile::roll(), handlers);
    let mut stream = Vec::new();
    for i in 0..500 {
        stream.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"method\":\"runtime.event\",\"params\":{{\"sequence\":{i}}}}}\n")
                .as_bytes(),
        );
    }
    raw.send(&stream).await;
    drop(raw);
    peer.closed().await;
    for i in 0..500 {
        assert_eq!(
            rx.recv().await.expect("notification"),
            Some(json!({"sequence": i}))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_request_is_answered_before_anything_read_after_it_is_handled() {
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handlers = Handlers::new()
        .exclusive("init")
        .on_request("init", {
            let ready = Arc::clone(&ready);
            move |_ctx, _params| {
                let ready = Arc::clone(&ready);
                async move {
                    // Slow on purpose: a later request handled concurrently would see `false`.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ready.store(true, Ordering::SeqCst);
                    Ok(json!("initialized"))
                }
            }
        })
        .on_request("work", {
            let ready = Arc::clone(&ready);
            move |_ctx, _params| {
                let ready = Arc::clone(&ready);
                async move { Ok(json!(ready.load(Ordering::SeqCst))) }
            }
        });
    let (_peer, mut raw) = serve(Profile::generic(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"init\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"work\"}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":1,"result":"initialized"})
    );
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":2,"result":true})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_after_the_answer_writes_after_it_and_a_started_request_knows_its_id() {
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let seen_tx = Arc::new(std::sync::Mutex::new(Some(seen_tx)));
    let handlers = Handlers::new().on_request("ack", move |ctx, _params| {
        let seen_tx = Arc::clone(&seen_tx);
        async move {
            let peer = ctx.peer().clone();
            ctx.after_answer(move || {
                tokio::spawn(async move {
                    let call = peer
                        .start_request("follow-up", &json!({}), None)
                        .await
                        .expect("sent");
                    let id = call.id().clone();
                    let answer = call.answer().await.expect("answered");
                    if let Some(tx) = seen_tx.lock().unwrap().take() {
                        let _ = tx.send((id, answer));
                    }
                });
            });
            // Anything the hook sends must not overtake this answer.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(json!("acked"))
        }
    });
    let (_peer, mut raw) = serve(Profile::roll(), handlers);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ack\",\"params\":{}}\n")
        .await;
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":7,"result":"acked"})
    );
    let request = raw.next().await;
    assert_eq!(request["method"], "follow-up");
    assert_eq!(request["id"], "runtime:1");
    raw.send(
        format!(
            "{}\n",
            json!({"jsonrpc":"2.0","id":"runtime:1","result":{"echo":"runtime:1"}})
        )
        .as_bytes(),
    )
    .await;
    // The started request knew its id and got its answer.
    let (id, answer) = tokio::time::timeout(STUCK, seen_rx)
        .await
        .expect("the follow-up was answered")
        .expect("the hook ran");
    assert_eq!(id, Id::String("runtime:1".into()));
    assert_eq!(answer, json!({"echo": "runtime:1"}));
}

/// Handlers for the inline tests: `now` answers without waiting, `later` waits for `gate`.
fn now_and_later(gate: &Arc<tokio::sync::Notify>) -> Handlers {
    let wait = Arc::clone(gate);
    Handlers::new()
        .on_request("now", |_ctx, params| async move {
            Ok(params.unwrap_or(Value::Null))
        })
        .on_request("later", move |_ctx, params| {
            let wait = Arc::clone(&wait);
            async move {
                wait.notified().await;
                Ok(params.unwrap_or(Value::Null))
            }
        })
}

fn request_line(id: u64, method: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":[{id}]}}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_that_answer_at_once_and_handlers_that_wait_are_each_answered_once() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let (peer, mut raw) = serve(Profile::generic(), now_and_later(&gate));
    // One write: a waiting handler first, then ten that answer at once.
    let mut burst = request_line(1, "later");
    for id in 2..=11 {
        burst.push_str(&request_line(id, "now"));
    }
    raw.send(burst.as_bytes()).await;
    // The ones that answer at once are not held up by the one that waits, and come in order.
    for id in 2..=11 {
        assert_eq!(
            raw.next().await,
            json!({"jsonrpc":"2.0","id":id,"result":[id]})
        );
    }
    assert_eq!(peer.incoming_in_flight(), 1);
    while peer.incoming_in_flight() == 1 {
        gate.notify_waiters();
        tokio::task::yield_now().await;
    }
    assert_eq!(
        raw.next().await,
        json!({"jsonrpc":"2.0","id":1,"result":[1]})
    );
    assert_eq!(peer.stats().requests_received, 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_is_not_run_inline_beyond_the_concurrency_limit() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let (peer, mut raw) = serve(
        Profile::generic().with_max_concurrent_handlers(1),
        now_and_later(&gate),
    );
    raw.send(format!("{}{}", request_line(1, "later"), request_line(2, "now")).as_bytes())
        .await;
    // The waiting handler holds the only slot: the other waits in the queue for it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(peer.incoming_in_flight(), 2);
    while peer.incoming_in_flight() == 2 {
        gate.notify_waiters();
        tokio::task::yield_now().await;
    }
    let mut ids = vec![
        raw.next().await["id"].clone(),
        raw.next().await["id"].clone(),
    ];
    ids.sort_by_key(|id| id.as_i64());
    assert_eq!(ids, vec![json!(1), json!(2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_to_input_read_before_its_end_is_written_before_closed_returns() {
    let (ours, theirs) = transport::memory_pair();
    let peer = Peer::spawn(ours.0, ours.1, Profile::generic(), echo_handlers());
    let mut raw = raw(theirs);
    let mut burst = String::new();
    for id in 1..=500 {
        burst.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"echo\",\"params\":{{\"n\":{id}}}}}\n"
        ));
    }
    raw.send(burst.as_bytes()).await;
    raw.out.shutdown().await.unwrap();
    tokio::time::timeout(STUCK, peer.closed())
        .await
        .expect("the peer closes at end of input");
    // Everything is in the pipe already (25 KB, under its 64 KiB).
    let answers = raw.rest().await;
    assert_eq!(answers.len(), 500);
    for (n, answer) in (1..=500).zip(&answers) {
        assert_eq!(answer, &json!({"jsonrpc":"2.0","id":n,"result":{"n":n}}));
    }
}

/// A host that writes all its requests before it reads any answer (a script piping a file in)
/// is served: the reader never waits for room in the output, so it keeps reading while the
/// answers wait for the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_writes_everything_before_reading_is_served_without_a_deadlock() {
    let mut profile = Profile::generic();
    profile.write_queue_bytes = 64 * 1024;
    let (_peer, mut raw) = serve(profile, echo_handlers());
    const REQUESTS: usize = 400;
    let text = "x".repeat(8 * 1024);
    let mut lines = Vec::new();
    for id in 0..REQUESTS {
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": "echo", "params": {"text": text}});
        lines.extend(serde_json::to_vec(&request).unwrap());
        lines.push(b'\n');
    }
    // Some 3 MiB of requests, more than the pipe and the output budget together hold.
    tokio::time::timeout(STUCK, raw.send(&lines))
        .await
        .expect("the peer keeps reading while its answers wait");
    let mut answered = 0;
    for _ in 0..REQUESTS {
        let answer = raw.next().await;
        if answer.get("result").is_some() {
            assert_eq!(
                answer["result"]["text"].as_str().map(str::len),
                Some(8 * 1024)
            );
        }
        answered += 1;
    }
    assert_eq!(answered, REQUESTS);
}

/// Handlers that hold what holds the peer (a session that keeps its connection's `Peer`) leave
/// no cycle behind: the connection's handlers go when its reader ends, so the session is freed
/// once the connection closed and its handlers finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_holding_their_peer_are_freed_once_the_connection_closed() {
    struct Session {
        peer: std::sync::OnceLock<Peer>,
    }
    let session = Arc::new(Session {
        peer: std::sync::OnceLock::new(),
    });
    let handlers = Handlers::new().on_request("echo", {
        let session = Arc::clone(&session);
        move |_ctx, params| {
            let session = Arc::clone(&session);
            async move {
                assert!(session.peer.get().is_some());
                Ok(params.unwrap_or(Value::Null))
            }
        }
    });
    let (ours, theirs) = transport::memory_pair();
    let peer = Peer::spawn(ours.0, ours.1, Profile::generic(), handlers);
    let _ = session.peer.set(peer.clone());
    let mut other = raw(theirs);
    other
        .send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[1]}\n")
        .await;
    assert_eq!(other.next().await["result"], json!([1]));
    drop(other);
    tokio::time::timeout(STUCK, peer.closed())
        .await
        .expect("the connection closes at the end of its input");
    drop(peer);
    let started = std::time::Instant::now();
    while Arc::strong_count(&session) > 1 {
        assert!(
            started.elapsed() < STUCK,
            "the session is still held by its handlers"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

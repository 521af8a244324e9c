//! The App Server face at its edges, driven by raw JSON-RPC lines as the ChainlessChain SDK
//! writes them: free text that would make a line too long, turns another connection started,
//! interrupts racing a turn's end, pages and their `hasMore`, and the ids hosts match
//! notifications by. Every line a host reads is held to the SDK's 64 KiB limit.

use std::sync::Arc;
use std::time::Duration;

use agentwire_runtime::{
    Agent, DemoAgent, FailStage, Runtime, RuntimeConfig, SystemClock, TurnContext, TurnEnd,
};
use agentwire_serve::app_server::{AppServerConfig, AppServerFace};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

/// A host on a raw connection: lines in, the messages it read.
struct Host {
    writer: WriteHalf<DuplexStream>,
    lines: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
    seen: Vec<Value>,
    paused: Arc<std::sync::atomic::AtomicBool>,
}

impl Host {
    async fn connect(face: &Arc<AppServerFace>) -> Host {
        let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (writer, lines) = crate::support::app_server_host::connect(face, Arc::clone(&paused));
        let mut host = Host {
            writer,
            lines,
            next_id: 0,
            seen: Vec::new(),
            paused,
        };
        let init = host
            .call(
                "initialize",
                json!({"protocolVersion": 1, "minimumProtocolVersion": 1,
                       "client": {"name": "edges", "version": "1"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "{init}");
        host
    }

    async fn send(&mut self, line: &Value) {
        let mut text = line.to_string();
        text.push('\n');
        self.writer.write_all(text.as_bytes()).await.unwrap();
    }

    /// The response to a request, within [`WAIT`].
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(format!("{}", self.next_id));
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.until(|m| m.get("method").is_none() && m["id"] == id)
            .await
            .unwrap_or_else(|| panic!("{method} not answered within {WAIT:?}"))
    }

    /// The first message read that matches `want`, within [`WAIT`].
    async fn until(&mut self, want: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(m) = self.seen.iter().find(|m| want(m)) {
            return Some(m.clone());
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(m)) => {
                    self.seen.push(m.clone());
                    if want(&m) {
                        return Some(m);
                    }
                }
                _ => return None,
            }
        }
    }

    fn methods(&self) -> Vec<&Value> {
        self.seen.iter().map(|m| &m["method"]).collect()
    }
}

async fn face_with(agent: Arc<dyn Agent>) -> (tempfile::TempDir, Arc<AppServerFace>) {
    face_configured(agent, AppServerConfig::default()).await
}

async fn face_configured(
    agent: Arc<dyn Agent>,
    config: AppServerConfig,
) -> (tempfile::TempDir, Arc<AppServerFace>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("log.sqlite").display());
    let log = agentwire_events::open(&url).await.unwrap();
    let runtime = Runtime::start(log, agent, Arc::new(SystemClock), RuntimeConfig::default())
        .await
        .unwrap();
    (dir, AppServerFace::new(runtime, config))
}

async fn demo_face() -> (tempfile::TempDir, Arc<AppServerFace>) {
    face_with(Arc::new(DemoAgent::default())).await
}

/// An agent whose turns fail with a 70,000-character message.
#[derive(Debug)]
struct LongFailure;

#[async_trait::async_trait]
impl Agent for LongFailure {
    async fn run_turn(&self, _turn: TurnContext) -> TurnEnd {
        TurnEnd::Failed {
            stage: FailStage::Execute,
            message: "e".repeat(70_000),
        }
    }
}

/// A failure message longer than a line holds is cut in `turn/completed`: the host hears the
/// turn end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_failure_message_is_cut_and_the_turn_completes() {
    let (_dir, face) = face_with(Arc::new(LongFailure)).await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    let started = host
        .call("turn/start", json!({"threadId": "th", "input": "go"}))
        .await;
    assert!(started.get("result").is_some(), "{started}");
    let ended = host.until(|m| m["method"] == "turn/completed").await;
    let ended = ended.unwrap_or_else(|| panic!("no turn/completed: {:?}", host.methods()));
    let message = ended["params"]["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with('…') && message.len() < 9000,
        "{}",
        message.len()
    );
}

/// A host's error reply to `approval/decide` as long as a line becomes the tool's refusal,
/// cut in `tool/result`: the host hears the tool end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_error_reply_is_cut_in_the_tool_result() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    host.call(
        "turn/start",
        json!({"threadId": "th", "input": "/approve ls"}),
    )
    .await;
    let ask = host
        .until(|m| m["method"] == "approval/decide")
        .await
        .unwrap();
    host.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
        "error": {"code": -32603, "message": "x".repeat(70_000)}}))
        .await;
    assert!(
        host.until(|m| m["method"] == "turn/completed")
            .await
            .is_some()
    );
    let result = host.until(|m| m["method"] == "tool/result").await;
    let result = result.unwrap_or_else(|| panic!("no tool/result: {:?}", host.methods()));
    assert_eq!(result["params"]["isError"], true);
}

/// A connection that did not see a turn start (another connection started it) interrupts it:
/// the answer says the turn stopped, at once, and this connection hears the turn: its start
/// and its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_another_connection_started_is_interrupted_and_heard() {
    let (_dir, face) = demo_face().await;
    let mut a = Host::connect(&face).await;
    let mut b = Host::connect(&face).await;
    a.call("thread/start", json!({"threadId": "th"})).await;
    let started = a
        .call(
            "turn/start",
            json!({"threadId": "th", "turnId": "tu", "input": "/slow 1000"}),
        )
        .await;
    assert!(started.get("result").is_some(), "{started}");
    let asked = std::time::Instant::now();
    let answer = b
        .call("turn/interrupt", json!({"threadId": "th", "turnId": "tu"}))
        .await;
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(answer["result"]["physicallySettled"], true, "{answer}");
    assert_eq!(answer["result"]["turn"]["id"], "tu");
    assert_eq!(answer["result"]["turn"]["status"], "interrupted");
    let ended = b.until(|m| m["method"] == "turn/completed").await.unwrap();
    assert_eq!(ended["params"]["turn"]["id"], "tu");
    let ended = a.until(|m| m["method"] == "turn/completed").await.unwrap();
    assert_eq!(ended["params"]["turn"]["status"], "interrupted");
}

/// An interrupt that comes after the turn ended in the runtime, while this connection is
/// still writing what came before the end, is answered `alreadyTerminal`, not "no active
/// turn".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_just_after_the_end_is_already_terminal() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    host.call(
        "turn/start",
        json!({"threadId": "th", "turnId": "tu", "input": "/big 15000000"}),
    )
    .await;
    // The host stops reading: the connection blocks writing the message's deltas while the
    // runtime records the turn's end.
    host.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    host.send(
        &json!({"jsonrpc": "2.0", "id": "int", "method": "turn/interrupt",
        "params": {"threadId": "th", "turnId": "tu"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    host.paused
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let message = tokio::time::timeout_at(deadline, host.lines.recv())
            .await
            .expect("the interrupt answered within 60 s")
            .unwrap();
        if message.get("method").is_none() && message["id"] == "int" {
            break message;
        }
    };
    assert_eq!(answer["result"]["alreadyTerminal"], true, "{answer}");
}

/// `thread/read` with a `limit` under the thread's event count says `hasMore`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_stopped_by_its_limit_has_more() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    host.call("turn/start", json!({"threadId": "th", "input": "hi"}))
        .await;
    host.until(|m| m["method"] == "turn/completed")
        .await
        .unwrap();
    let all = host.call("thread/read", json!({"threadId": "th"})).await;
    let count = all["result"]["events"].as_array().unwrap().len();
    assert!(count > 2, "{all}");
    assert_eq!(all["result"]["hasMore"], false);
    let page = host
        .call("thread/read", json!({"threadId": "th", "limit": 2}))
        .await;
    assert_eq!(page["result"]["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["result"]["hasMore"], true, "{count} events: {page}");
    let rest = host
        .call(
            "thread/read",
            json!({"threadId": "th", "afterEventSeq": 2, "limit": count - 2}),
        )
        .await;
    assert_eq!(
        rest["result"]["events"].as_array().unwrap().len(),
        count - 2
    );
    assert_eq!(rest["result"]["hasMore"], false, "{rest}");
}

/// Pages are measured with the host's names in them, which are longer than the runtime's
/// ids: `thread/list` of 400 threads and `thread/read` of 80 turns, every name 150
/// characters and more, each answer within a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_with_long_names_fit_a_line() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    for i in 0..400 {
        let name = format!("t{i:03}-{}", "x".repeat(150));
        let started = host.call("thread/start", json!({"threadId": name})).await;
        assert!(started.get("result").is_some(), "{started}");
    }
    let list = host.call("thread/list", json!({"limit": 1000})).await;
    assert_eq!(list["result"]["hasMore"], true, "{list}");
    let thread = format!("th-{}", "x".repeat(150));
    host.call("thread/start", json!({"threadId": thread})).await;
    for i in 0..80 {
        let turn = format!("tu{i:03}-{}", "y".repeat(150));
        host.call(
            "turn/start",
            json!({"threadId": thread, "turnId": turn, "input": "/tool t {}"}),
        )
        .await;
        host.until(|m| m["method"] == "turn/completed" && m["params"]["turn"]["id"] == json!(turn))
            .await
            .unwrap();
    }
    let read = host.call("thread/read", json!({"threadId": thread})).await;
    assert_eq!(read["result"]["hasMore"], true, "{read}");
    assert_eq!(
        read["result"]["events"][0]["thread_id"],
        json!(thread),
        "named"
    );
}

/// `tool/requested` and `tool/result` of one call carry the same `itemId` (and `toolUseId`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_request_and_result_share_the_item() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    host.call(
        "turn/start",
        json!({"threadId": "th", "input": "/tool t {}"}),
    )
    .await;
    let asked = host
        .until(|m| m["method"] == "tool/requested")
        .await
        .unwrap();
    let done = host.until(|m| m["method"] == "tool/result").await.unwrap();
    assert_eq!(asked["params"]["toolUseId"], done["params"]["toolUseId"]);
    assert_eq!(
        asked["params"]["itemId"], done["params"]["itemId"],
        "{asked} {done}"
    );
}

/// A turn named with a 160-character Identifier gets items whose ids are Identifiers too
/// (named after the turn's own id when the host's name leaves no room).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_items_of_a_long_named_turn_have_identifier_ids() {
    let (_dir, face) = demo_face().await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    let turn = "t".repeat(160);
    let started = host
        .call(
            "turn/start",
            json!({"threadId": "th", "turnId": turn, "input": "hi"}),
        )
        .await;
    assert!(started.get("result").is_some(), "{started}");
    let item = host.until(|m| m["method"] == "item/started").await.unwrap();
    agentwire_serve::app_server::schema::check_message(&item).unwrap();
    assert_eq!(item["params"]["item"]["turnId"], json!(turn));
    host.until(|m| m["method"] == "turn/completed")
        .await
        .unwrap();
    let short = {
        host.call(
            "turn/start",
            json!({"threadId": "th", "turnId": "tu", "input": "hi"}),
        )
        .await;
        host.until(|m| m["method"] == "item/started" && m["params"]["item"]["turnId"] == "tu")
            .await
            .unwrap()
    };
    assert_eq!(short["params"]["item"]["id"], "tu:assistant");
}

/// A retry with the same `idempotencyKey` on another connection is answered the first answer
/// under the host's names, and that connection follows what the method follows: it hears the
/// turn a replayed `turn/start` started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_on_another_connection_names_and_follows() {
    let (_dir, face) = demo_face().await;
    let mut a = Host::connect(&face).await;
    let mut b = Host::connect(&face).await;
    let params = json!({"threadId": "named", "idempotencyKey": "k1"});
    let first = a.call("thread/start", params.clone()).await;
    assert_eq!(first["result"]["thread"]["id"], "named", "{first}");
    let again = b.call("thread/start", params).await;
    assert_eq!(again["result"], first["result"]);
    let params =
        json!({"threadId": "named", "turnId": "tu", "input": "/slow 20", "idempotencyKey": "k2"});
    a.call("turn/start", params.clone()).await;
    let again = b.call("turn/start", params).await;
    assert_eq!(again["result"]["turn"]["id"], "tu", "{again}");
    let ended = b.until(|m| m["method"] == "turn/completed").await;
    let ended = ended.unwrap_or_else(|| panic!("b never hears the turn end: {:?}", b.methods()));
    assert_eq!(ended["params"]["turn"]["id"], "tu");
}

/// A `turn/start` whose `turn/started` this connection could not write in time (its host does
/// not read) is answered the turn all the same: the answer is kept, and a retry of its
/// `idempotencyKey` is answered it instead of starting a second turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_start_not_yet_written_is_answered_and_kept() {
    let config = AppServerConfig {
        settle_limit: Duration::from_millis(300),
        ..AppServerConfig::default()
    };
    let (_dir, face) = face_configured(Arc::new(DemoAgent::default()), config).await;
    let mut host = Host::connect(&face).await;
    host.call("thread/start", json!({"threadId": "busy"})).await;
    host.call("thread/start", json!({"threadId": "th"})).await;
    host.call(
        "turn/start",
        json!({"threadId": "busy", "input": "/big 15000000"}),
    )
    .await;
    host.paused.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = json!({"jsonrpc": "2.0", "id": "once", "method": "turn/start",
        "params": {"threadId": "th", "input": "hi", "idempotencyKey": "k-once"}});
    host.send(&start).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    host.paused
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let first = loop {
        let message = tokio::time::timeout_at(deadline, host.lines.recv())
            .await
            .expect("answered within 60 s")
            .unwrap();
        if message.get("method").is_none() && message["id"] == "once" {
            break message;
        }
    };
    assert_eq!(first["result"]["turn"]["threadId"], "th", "{first}");
    let retry = host
        .call(
            "turn/start",
            json!({"threadId": "th", "input": "hi", "idempotencyKey": "k-once"}),
        )
        .await;
    assert_eq!(
        retry["result"]["turn"]["id"], first["result"]["turn"]["id"],
        "{retry}"
    );
}

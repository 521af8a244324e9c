//! `agentwire serve --listen`: the OpenClaw gateway face, driven by the seed's minimal Node
//! client (npm `ws`) and by a Python `websockets` client (`tools/python/gateway_driver.py`).
//! Every frame the gateway sends in these tests is checked against our schema of the gateway
//! surface and against OpenClaw's published schema.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use agentwire_testkit::openclaw_schema_path;
use serde_json::{Value, json};

use crate::gateway_schema::{Fixture, openclaw_problems, problems, read, schema_path};
use crate::support::BIN;

const TOKEN: &str = "T0ken-abc";

/// A gateway serving on a free loopback port; stopped when dropped.
pub(crate) struct Gateway {
    child: Child,
    pub(crate) port: u16,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agentwire serve --listen 127.0.0.1:0` with `args`, and reads the port it bound.
fn start(args: &[&str]) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = start_with(Command::new(BIN), dir.path(), args);
    gateway._dir = Some(dir);
    gateway
}

/// Starts `command` (the `agentwire` binary, perhaps wrapped) with `serve --listen 127.0.0.1:0`,
/// a SQLite store in `store_dir` and `args`, and reads the port it bound.
pub(crate) fn start_with(
    mut command: Command,
    store_dir: &std::path::Path,
    args: &[&str],
) -> Gateway {
    let store = format!("sqlite:{}", store_dir.join("runtime.sqlite").display());
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("the gateway ended before it listened")
            .unwrap();
        if let Some(at) = line.find("gateway listening on ws://127.0.0.1:") {
            let rest = &line[at + "gateway listening on ws://127.0.0.1:".len()..];
            break rest.trim().parse::<u16>().unwrap();
        }
    };
    // Keep reading its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Gateway {
        child,
        port,
        _dir: None,
    }
}

/// Runs a driver scenario against `gateway`; its report. Every frame the gateway sent is
/// valid under our schema and OpenClaw's.
fn drive(gateway: &Gateway, scenario: &str) -> Value {
    let output = agentwire_testkit::python_script("gateway_driver.py")
        .arg(gateway.port.to_string())
        .arg(TOKEN)
        .arg(scenario)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the driver failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    check_frames(&report["frames"]);
    report
}

/// Every frame is valid under our gateway schema and OpenClaw's.
pub(crate) fn check_frames(frames: &Value) {
    let ours = read(schema_path());
    let ours_doc = SchemaDocument::open(schema_path()).unwrap();
    let ours_compiler = ValidatorCompiler::new(&ours_doc).unwrap();
    let theirs_doc = SchemaDocument::open(openclaw_schema_path()).unwrap();
    let theirs = theirs_doc.value().clone();
    let theirs_compiler = ValidatorCompiler::new(&theirs_doc).unwrap();
    let frames = frames.as_array().unwrap();
    assert!(!frames.is_empty());
    for (i, recorded) in frames.iter().enumerate() {
        let frame = recorded["frame"].clone();
        let kind = frame["type"].as_str().unwrap().to_owned();
        let subject = match kind.as_str() {
            "event" => frame["event"].as_str().unwrap().to_owned(),
            _ => recorded["method"].as_str().unwrap().to_owned(),
        };
        // A response to a request the driver wrote by hand is checked as a frame.
        let kind = if subject.is_empty() {
            "frame".to_owned()
        } else {
            kind
        };
        let fixture = Fixture {
            name: format!("frame {i}"),
            frame,
            kind,
            subject,
        };
        let found = problems(&ours_compiler, &ours, &fixture);
        assert!(
            found.is_empty(),
            "our schema refuses {}: {found:?}",
            fixture.frame
        );
        let found = openclaw_problems(&theirs_compiler, &ours, &theirs, &fixture);
        assert!(
            found.is_empty(),
            "OpenClaw's schema refuses {}: {found:?}",
            fixture.frame
        );
    }
}

fn error(res: &Value) -> (&str, &str) {
    (
        res["error"]["code"].as_str().unwrap(),
        res["error"]["details"]["code"].as_str().unwrap_or(""),
    )
}

/// The seed's minimal client, verbatim but for the address: connect, hello-ok, health.
const SEED_CLIENT: &str = r#"import { WebSocket } from "ws";

const ws = new WebSocket(process.env.GATEWAY_URL);

ws.on("open", () => {
  ws.send(
    JSON.stringify({
      type: "req",
      id: "c1",
      method: "connect",
      params: {
        minProtocol: 4,
        maxProtocol: 4,
        client: {
          id: "cli",
          displayName: "example",
          version: "dev",
          platform: "node",
          mode: "cli",
        },
      },
    }),
  );
});

ws.on("message", (data) => {
  const msg = JSON.parse(String(data));
  if (msg.type === "res" && msg.id === "c1" && msg.ok) {
    ws.send(JSON.stringify({ type: "req", id: "h1", method: "health" }));
  }
  if (msg.type === "res" && msg.id === "h1") {
    console.log("health:", msg.payload);
    ws.close();
  }
});
"#;

#[test]
fn the_seeds_minimal_node_client_connects_and_reads_health() {
    // Without a token, on loopback: the client is a read-only operator, which health needs.
    let gateway = start(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("client.mjs"), SEED_CLIENT).unwrap();
    let modules = agentwire_testkit::require_node_module("ws");
    std::os::unix::fs::symlink(modules.parent().unwrap(), dir.path().join("node_modules")).unwrap();
    let output = agentwire_testkit::require_node()
        .arg(dir.path().join("client.mjs"))
        .env("GATEWAY_URL", format!("ws://127.0.0.1:{}", gateway.port))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("health: { ok: true, ts: "), "{stdout}");
    assert!(stdout.contains("defaultAgentId: 'main'"), "{stdout}");
}

#[test]
fn the_handshake_grants_what_the_token_allows_and_every_method_checks_its_scope() {
    let gateway = start(&["--token", TOKEN]);
    let report = drive(&gateway, "handshake");
    let challenge = &report["challenge"];
    assert_eq!(challenge["event"], "connect.challenge");
    assert!(challenge.get("seq").is_none());
    assert_eq!(challenge["payload"]["nonce"].as_str().unwrap().len(), 36);
    let hello = &report["hello"]["payload"];
    assert_eq!(hello["type"], "hello-ok");
    assert_eq!(hello["protocol"], 4);
    assert_eq!(
        hello["features"]["methods"],
        json!(agentwire_serve::gateway::scopes::METHODS)
    );
    assert_eq!(
        hello["auth"],
        json!({"role": "operator", "scopes": ["operator.read"]})
    );
    assert_eq!(
        hello["policy"],
        json!({"maxPayload": 26_214_400, "maxBufferedBytes": 52_428_800, "tickIntervalMs": 30_000})
    );
    assert_eq!(hello["snapshot"]["authMode"], "token");
    assert_eq!(report["health"]["payload"]["ok"], true);
    assert_eq!(report["status"]["payload"]["sessions"]["count"], 0);
    assert_eq!(report["system-presence"]["payload"][0]["mode"], "gateway");
    assert_eq!(report["sessions.list"]["payload"]["sessions"], json!([]));
    assert_eq!(
        error(&report["unknown_method"]),
        ("FORBIDDEN", "MISSING_SCOPE")
    );
    assert_eq!(
        report["unknown_method"]["error"]["details"]["missingScope"],
        "operator.admin"
    );
    let forbidden = &report["chat_send_read_only"]["error"];
    assert_eq!(forbidden["message"], "missing scope: operator.write");
    assert_eq!(
        forbidden["details"],
        json!({"code": "MISSING_SCOPE", "missingScope": "operator.write", "requiredScopes": ["operator.write"]})
    );
    assert_eq!(
        report["bad_params"]["error"]["message"],
        "invalid sessions.list params: params/limit: 0 is less than the minimum 1"
    );
    assert_eq!(
        error(&report["second_connect"]),
        ("FORBIDDEN", "MISSING_SCOPE")
    );
    assert_eq!(report["numeric_id"]["id"], "7");
    assert_eq!(error(&report["numeric_id"]).0, "INVALID_REQUEST");
    assert!(
        report["numeric_id"]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid request frame: /id: ")
    );
    // A frame that is not JSON is dropped, and the connection goes on.
    assert_eq!(report["after_garbage"]["ok"], true);
}

#[test]
fn handshake_refusals_and_oversized_frames_close_with_the_documented_codes() {
    let gateway = start(&["--token", TOKEN]);
    let report = drive(&gateway, "errors");
    let closed = |case: &str| {
        let c = &report[case];
        (
            c["code"].as_u64().unwrap(),
            c["reason"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(closed("mismatch"), (1002, "protocol mismatch".into()));
    let mismatch = &report["mismatch"]["frames"][0];
    assert_eq!(mismatch["ok"], false);
    assert_eq!(
        mismatch["error"],
        json!({"code": "INVALID_REQUEST", "message": "protocol mismatch", "details": {
            "code": "PROTOCOL_MISMATCH", "clientMinProtocol": 5, "clientMaxProtocol": 5,
            "expectedProtocol": 4, "minimumProbeProtocol": 3}})
    );
    let first = "invalid handshake: first request must be connect";
    assert_eq!(closed("first_not_connect"), (1008, first.into()));
    assert_eq!(
        report["first_not_connect"]["frames"][0]["error"]["message"],
        first
    );
    assert_eq!(
        closed("first_not_request"),
        (1008, "invalid request frame".into())
    );
    assert_eq!(report["first_not_request"]["frames"], json!([]));
    assert_eq!(closed("not_json"), (1008, "invalid request frame".into()));
    let (code, reason) = closed("invalid_params");
    assert_eq!(code, 1008);
    assert!(
        reason.starts_with("invalid connect params: params/client/mode: "),
        "{reason}"
    );
    assert!(reason.len() <= 120);
    assert_eq!(
        error(&report["invalid_params"]["frames"][0]),
        ("INVALID_REQUEST", "")
    );
    assert_eq!(closed("wrong_token").0, 1008);
    assert_eq!(
        error(&report["wrong_token"]["frames"][0]),
        ("INVALID_REQUEST", "AUTH_TOKEN_MISMATCH")
    );
    assert_eq!(
        report["wrong_token"]["frames"][0]["error"]["details"]["recommendedNextStep"],
        "update_auth_credentials"
    );
    assert_eq!(
        error(&report["no_token"]["frames"][0]),
        ("INVALID_REQUEST", "AUTH_TOKEN_MISSING")
    );
    // The pre-auth cap: 64 KiB is read (and refused as a frame), one byte more is 1009.
    assert_eq!(closed("preauth_over"), (1009, String::new()));
    assert_eq!(
        closed("preauth_exact"),
        (1008, "invalid request frame".into())
    );
    assert_eq!(report["under_max_payload"]["ok"], true);
    assert_eq!(report["over_max_payload"]["code"], 1009);
}

#[test]
fn a_run_over_the_gateway_streams_chat_and_agent_events_and_takes_an_approval() {
    let gateway = start(&["--token", TOKEN]);
    let report = drive(&gateway, "run");
    let started = &report["chat_send"]["payload"];
    assert_eq!(started["status"], "started");
    let run_id = started["runId"].as_str().unwrap();
    // Retried while the run goes: in flight; after it ended: the first answer again; the key
    // with other params: refused.
    let retry = &report["chat_send_retry"]["payload"];
    assert_eq!(retry["runId"], run_id);
    assert!(["in_flight", "started"].contains(&retry["status"].as_str().unwrap()));
    assert_eq!(report["chat_send_after"]["payload"], *started);
    assert_eq!(error(&report["chat_send_other"]).0, "INVALID_REQUEST");
    let text = |f: &Value| f["payload"]["message"]["content"][0]["text"].clone();
    assert_eq!(text(&report["final_actor"]), "echo: hello there");
    assert_eq!(text(&report["final_watcher"]), "echo: hello there");
    let history = &report["history"]["payload"]["messages"];
    assert_eq!(history[0]["role"], "user");
    assert_eq!(history[1]["content"][0]["text"], "echo: hello there");
    // The agent run asks an approval; the gateway takes the decision.
    assert_eq!(report["agent"]["payload"]["status"], "accepted");
    let requested = &report["requested"]["payload"];
    assert_eq!(requested["request"]["command"], "ls");
    assert_eq!(requested["request"]["sessionKey"], "team");
    assert_eq!(report["late_requested"]["payload"], *requested);
    assert_eq!(report["resolve"]["payload"], json!({"ok": true}));
    assert_eq!(error(&report["resolve_again"]).0, "APPROVAL_NOT_FOUND");
    let resolved = &report["resolved"]["payload"];
    assert_eq!(resolved["id"], requested["id"]);
    assert_eq!(resolved["decision"], "allow-once");
    let end = &report["agent_end"];
    assert_eq!(end["payload"]["status"], "ok");
    assert_eq!(end["payload"]["runId"], report["agent"]["payload"]["runId"]);
    // Each connection numbers its events from 1 without a gap; the read-only watcher gets no
    // approval events; each run numbers its chat and agent events from 1.
    for (who, approvals) in [("actor_events", true), ("watcher_events", false)] {
        let events = report[who].as_array().unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        let first = seqs[0];
        assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{who}: {seqs:?}");
        assert!(first >= 1);
        let names: Vec<&str> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(
            names.contains(&"exec.approval.requested"),
            approvals,
            "{who}"
        );
        for stream in ["chat", "agent"] {
            let run_seqs: Vec<u64> = events
                .iter()
                .filter(|e| e["event"] == stream && e["runId"] == run_id)
                .map(|e| e["runSeq"].as_u64().unwrap())
                .collect();
            assert_eq!(
                run_seqs,
                (1..=run_seqs.len() as u64).collect::<Vec<_>>(),
                "{who} {stream}"
            );
        }
    }
}

#[test]
fn a_slow_consumer_is_closed_while_a_fast_one_keeps_receiving() {
    let gateway = start(&["--token", TOKEN, "--max-buffered-bytes", "2097152"]);
    let report = drive(&gateway, "slow");
    assert_eq!(report["reader_finals"], 24);
    assert_eq!(report["stalled_code"], 1008);
    assert_eq!(report["stalled_reason"], "slow consumer");
    // It got what its socket and queue held, not all 24 messages of 400 KB.
    assert!(report["stalled_frames"].as_u64().unwrap() < 24 * 2);
}

#[test]
fn a_browser_origin_other_than_the_gateways_own_is_refused() {
    let gateway = start(&["--token", TOKEN]);
    let report = drive(&gateway, "origins");
    assert_eq!(
        error(&report["foreign"]),
        ("INVALID_REQUEST", "CONTROL_UI_ORIGIN_NOT_ALLOWED")
    );
    assert_eq!(report["foreign_close"]["code"], 1008);
    assert_eq!(
        report["foreign_close"]["reason"],
        "origin not allowed: http://evil.example"
    );
    assert_eq!(report["own"]["ok"], true);
}

#[test]
fn ticks_arrive_at_the_configured_interval() {
    let gateway = start(&["--token", TOKEN, "--tick-interval-ms", "250"]);
    let report = drive(&gateway, "ticks");
    assert_eq!(report["interval_ms"], 250);
    for gap in report["gaps_ms"].as_array().unwrap() {
        let gap = gap.as_u64().unwrap();
        assert!((150..=600).contains(&gap), "{gap}");
    }
    let seqs: Vec<u64> = report["seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[test]
fn a_thousand_connections_are_served_at_once() {
    let _heavy = crate::support::HEAVY.blocking_lock();
    let gateway = start(&["--token", TOKEN]);
    let report = drive(&gateway, "many");
    assert_eq!(report["connected"], 1000);
    assert_eq!(report["health_ok"], 50);
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let output = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--listen 0.0.0.0:0 is not a loopback address: it needs --token"),
        "{stderr}"
    );
}

/// A gateway client in the test: frames in, frames out, the frames it saw.
struct WsClient {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    seen: Vec<Value>,
    next: u64,
}

impl WsClient {
    async fn connect(port: u16, scopes: &[&str]) -> WsClient {
        let (ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}"))
            .await
            .unwrap();
        let mut client = WsClient {
            ws,
            seen: Vec::new(),
            next: 0,
        };
        let challenge = client.read().await;
        assert_eq!(challenge["event"], "connect.challenge");
        let hello = client
            .call(
                "connect",
                json!({"minProtocol": 4, "maxProtocol": 4,
                       "client": {"id": "test", "version": "1", "platform": "rust", "mode": "test"},
                       "scopes": scopes, "auth": {"token": TOKEN}}),
            )
            .await;
        assert_eq!(hello["payload"]["type"], "hello-ok");
        client
    }

    async fn read(&mut self) -> Value {
        use futures_util::StreamExt;
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("a frame within 30 s")
                .expect("the gateway keeps the connection")
                .unwrap();
            if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                self.seen.push(frame.clone());
                return frame;
            }
        }
    }

    async fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|f| wanted(f)) {
            return found.clone();
        }
        loop {
            let frame = self.read().await;
            if wanted(&frame) {
                return frame;
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        use futures_util::SinkExt;
        self.next += 1;
        let id = format!("t{}", self.next);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.ws
            .send(tokio_tungstenite::tungstenite::Message::text(
                frame.to_string(),
            ))
            .await
            .unwrap();
        self.wait_for(|f| f["type"] == "res" && f["id"] == id.as_str())
            .await
    }
}

#[tokio::test]
async fn a_gateway_client_and_a_roll_host_watch_the_same_turn() {
    use crate::support::roll_host::Host;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("roll.sock");
    let store = dir.path().join("runtime.sqlite");
    let gateway = start(&["--token", TOKEN, "--roll-socket", socket.to_str().unwrap()]);
    let mut client = WsClient::connect(
        gateway.port,
        &["operator.read", "operator.write", "operator.approvals"],
    )
    .await;
    let sent = client
        .call(
            "chat.send",
            json!({"sessionKey": "shared", "message": "/approve ls", "idempotencyKey": "x-1"}),
        )
        .await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    let requested = client
        .wait_for(|f| f["event"] == "exec.approval.requested")
        .await;
    // The Roll host opens the session's thread (a UUID the runtime derived from its key) and
    // is asked the same approval.
    let thread = agentwire_serve::app_server::wire::core_id("gateway-session", "", "shared");
    let mut roll = Host::connect(&socket, &store).await;
    roll.open("1.5", &["approval.request", "userInput.request"])
        .await;
    roll.call("thread.open", json!({"threadId": thread}))
        .await
        .unwrap();
    let to_roll = roll.wait_for(|f| f["method"] == "approval.request").await;
    assert_eq!(
        to_roll["params"]["interactionId"],
        requested["payload"]["id"]
    );
    assert_eq!(to_roll["params"]["turnId"], run_id.as_str());
    // The gateway client decides; the Roll host sees the same outcome.
    let resolved = client
        .call(
            "exec.approval.resolve",
            json!({"id": requested["payload"]["id"], "decision": "allow-once"}),
        )
        .await;
    assert_eq!(resolved["payload"], json!({"ok": true}));
    let final_chat = client
        .wait_for(|f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run_id.as_str()
                && f["payload"]["state"] == "final"
        })
        .await;
    let roll_events = roll.turn_events(&run_id).await;
    assert_eq!(
        roll_events.last().unwrap()["event"]["type"],
        "turn.completed"
    );
    let roll_text = roll_events
        .iter()
        .rfind(|e| e["event"]["type"] == "message.completed")
        .unwrap()["event"]["text"]
        .clone();
    assert_eq!(
        final_chat["payload"]["message"]["content"][0]["text"],
        roll_text
    );
    assert_eq!(roll_text, "Ran `ls`.");
    let roll_tool = roll_events
        .iter()
        .find(|e| e["event"]["type"] == "tool.completed")
        .unwrap()["event"]
        .clone();
    assert_eq!(roll_tool["outcome"]["kind"], "success");
    let gateway_tool = client
        .seen
        .iter()
        .find(|f| f["event"] == "agent" && f["payload"]["stream"] == "tool")
        .unwrap()["payload"]["data"]
        .clone();
    assert_eq!(gateway_tool["isError"], false);
    assert_eq!(gateway_tool["toolCallId"], roll_tool["toolCallId"]);
    let approval = roll_events
        .iter()
        .find(|e| e["event"]["type"] == "approval.resolved")
        .unwrap();
    assert_eq!(approval["event"]["resolution"]["decision"], "approve");
}

#[tokio::test]
async fn a_stopping_gateway_says_so_and_closes_going_away() {
    use futures_util::StreamExt;
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.read"]).await;
    let status = Command::new("kill")
        .args(["-TERM", &gateway.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let shutdown = client.wait_for(|f| f["event"] == "shutdown").await;
    assert_eq!(
        shutdown["payload"],
        json!({"reason": "the runtime is stopping"})
    );
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(10), client.ws.next())
            .await
            .expect("closed within 10 s")
        {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(frame))) => break frame,
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    };
    let frame = close.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1001);
    assert_eq!(frame.reason.as_str(), "gateway stopping");
}

/// `chat.history` of a session nobody wrote to is an empty page, as on the real gateway; and
/// `agent` with an empty `sessionKey` runs in the main session, so its events carry a key
/// both schemas accept.
#[tokio::test]
async fn a_fresh_session_has_an_empty_history_and_an_empty_key_is_the_main_session() {
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.write"]).await;
    let history = client
        .call("chat.history", json!({"sessionKey": "never-written"}))
        .await;
    assert_eq!(
        history["payload"],
        json!({"sessionKey": "never-written", "messages": []}),
        "{history}"
    );
    check_frames(&json!([{"frame": history, "method": "chat.history"}]));
    let sent = client
        .call(
            "agent",
            json!({"message": "hi", "sessionKey": "", "idempotencyKey": "k-empty"}),
        )
        .await;
    assert_eq!(sent["ok"], true, "{sent}");
    let run = sent["payload"]["runId"].as_str().unwrap().to_owned();
    let end = client
        .wait_for(|f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run.as_str()
                && f["payload"]["state"] == "final"
        })
        .await;
    assert_eq!(end["payload"]["sessionKey"], "main");
    check_frames(&json!([{"frame": end, "method": ""}]));
}

/// One frame larger than `maxBufferedBytes` reaches a client that keeps up: what is already
/// queued decides, not the frame (the real gateway checks the socket's buffered amount). The
/// history of a 100,000-character answer is one such frame, into an empty queue.
#[tokio::test]
async fn one_frame_larger_than_the_bound_does_not_close_a_client_that_keeps_up() {
    let gateway = start(&["--token", TOKEN, "--max-buffered-bytes", "65536"]);
    let mut writer = WsClient::connect(gateway.port, &["operator.write"]).await;
    // The run's own frames come in a burst, which may close this connection: it is not read.
    {
        use futures_util::SinkExt;
        let send = json!({"type": "req", "id": "big", "method": "chat.send", "params":
            {"sessionKey": "big", "message": "/big 100000", "idempotencyKey": "big"}});
        writer
            .ws
            .send(tokio_tungstenite::tungstenite::Message::text(
                send.to_string(),
            ))
            .await
            .unwrap();
    }
    // A reader connected while the run streams may be closed by the burst: each attempt is a
    // new connection, until one that connected after the run reads the history.
    let port = gateway.port;
    let started = std::time::Instant::now();
    loop {
        let attempt = tokio::spawn(async move {
            let mut reader = WsClient::connect(port, &["operator.read"]).await;
            reader
                .call("chat.history", json!({"sessionKey": "big"}))
                .await
        })
        .await;
        if let Ok(history) = attempt {
            let messages = history["payload"]["messages"].as_array().unwrap();
            if messages.iter().any(|m| m["role"] == "assistant") {
                assert!(history.to_string().len() > 65536);
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no reader read the history"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A retry of `agent` after its run ended is answered the run's end, as the real gateway's
/// cache does: the OpenClaw CLI (`expectFinal`) takes `accepted` as interim and would wait for
/// a second answer that never comes.
#[tokio::test]
async fn an_agent_retry_after_its_run_ended_is_answered_the_end() {
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.write"]).await;
    let params = json!({"message": "hi", "sessionKey": "retried", "idempotencyKey": "k-agent"});
    let first = client.call("agent", params.clone()).await;
    assert_eq!(first["payload"]["status"], "accepted");
    let id = first["id"].as_str().unwrap().to_owned();
    let end = client
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["status"] != "accepted"
        })
        .await;
    assert_eq!(end["payload"]["status"], "ok");
    let retry = client.call("agent", params).await;
    assert_eq!(retry["ok"], true, "{retry}");
    assert_eq!(retry["payload"], end["payload"]);
    check_frames(&json!([{"frame": retry, "method": "agent"}]));
}

/// A text frame that is not UTF-8 closes the connection 1007, as the `ws` library does, before
/// and after the handshake.
#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_1007() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    async fn close_code(
        ws: &mut tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) -> u16 {
        let bad = Frame::message(vec![b'"', 0xff, 0xfe, b'"'], OpCode::Data(Data::Text), true);
        ws.send(Message::Frame(bad)).await.unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .unwrap()
            {
                Some(Ok(Message::Close(frame))) => {
                    break u16::from(frame.expect("a close frame").code);
                }
                Some(Ok(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    }
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.read"]).await;
    assert_eq!(close_code(&mut client.ws).await, 1007);
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{}", gateway.port))
        .await
        .unwrap();
    assert_eq!(close_code(&mut ws).await, 1007, "in the handshake");
}

/// The client that starts a run reads the answer naming it before any of its events: a client
/// matching events by the answer's `runId` misses none (20 runs of each method).
#[tokio::test]
async fn a_runs_events_follow_the_answer_that_names_it() {
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.write"]).await;
    for i in 0..20 {
        for method in ["chat.send", "agent"] {
            let before = client.seen.len();
            let sent = client
                .call(
                    method,
                    json!({"sessionKey": format!("{method}-{i}"), "message": "hi", "idempotencyKey": format!("{method}-{i}")}),
                )
                .await;
            let run = sent["payload"]["runId"].as_str().unwrap().to_owned();
            let early: Vec<&Value> = client.seen[before..]
                .iter()
                .filter(|f| f["type"] == "event" && f["payload"]["runId"] == run.as_str())
                .collect();
            assert!(early.is_empty(), "{method} {i}: {early:?} before {sent}");
        }
    }
}

/// The params the schema says the gateway acts on are acted on: `sessions.create` with a
/// `message` starts a run, `sessions.list` filters by `search` and `agentId`, `agent` stops its
/// run after `timeout` seconds, and an `agentId` other than the gateway's one agent is refused.
#[tokio::test]
async fn session_and_agent_params_are_acted_on() {
    let gateway = start(&["--token", TOKEN]);
    let mut client = WsClient::connect(gateway.port, &["operator.write"]).await;
    let created = client
        .call(
            "sessions.create",
            json!({"key": "with-message", "message": "hello", "label": "Alpha team"}),
        )
        .await;
    assert_eq!(created["payload"]["runStarted"], true, "{created}");
    let run = created["payload"]["runId"].as_str().unwrap().to_owned();
    client
        .wait_for(|f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run.as_str()
                && f["payload"]["state"] == "final"
        })
        .await;
    let history = client
        .call("chat.history", json!({"sessionKey": "with-message"}))
        .await;
    assert_eq!(
        history["payload"]["messages"][0]["role"], "user",
        "{history}"
    );
    check_frames(&json!([{"frame": created, "method": "sessions.create"}]));

    client.call("sessions.create", json!({"key": "beta"})).await;
    let listed = client
        .call("sessions.list", json!({"search": "ALPHA"}))
        .await;
    assert_eq!(listed["payload"]["count"], 1, "{listed}");
    assert_eq!(listed["payload"]["sessions"][0]["key"], "with-message");
    let listed = client
        .call("sessions.list", json!({"agentId": "other"}))
        .await;
    assert_eq!(listed["payload"]["count"], 0, "{listed}");

    let refused = client
        .call(
            "agent",
            json!({"message": "hi", "agentId": "other", "idempotencyKey": "k-other"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");

    let started = std::time::Instant::now();
    let first = client
        .call(
            "agent",
            json!({"message": "/slow 1000", "sessionKey": "timed", "timeout": 1, "idempotencyKey": "k-timed"}),
        )
        .await;
    let id = first["id"].as_str().unwrap().to_owned();
    let end = client
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["status"] != "accepted"
        })
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(end["ok"], false, "{end}");
    assert_eq!(end["payload"]["status"], "error", "{end}");
}

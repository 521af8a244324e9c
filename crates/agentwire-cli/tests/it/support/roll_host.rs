//! A scripted Roll host for flow tests: runs `agentwire serve --stdio` as a child on a real
//! pipe, writes raw frames, and checks every frame the runtime writes against the negotiated
//! version's export (and, where one exists, against the shape of the upstream fixture).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentwire_roll::{ProtocolVersion, schema};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, Command};

/// A guard against a hung test, not a timing assertion.
pub(crate) const STUCK: Duration = Duration::from_secs(60);

pub(crate) fn shared_dir() -> PathBuf {
    match std::env::var_os("AGENTWIRE_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    }
}

/// The upstream fixture `folder/name.json`.
pub(crate) fn fixture(folder: &str, name: &str) -> Value {
    let path = shared_dir()
        .join("peers/roll-agent/fixtures")
        .join(folder)
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the upstream fixture {} is missing: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Slots whose content is free-form JSON: their inside is not compared.
const FREE_FORM: [&str; 7] = [
    "preview", "display", "input", "manifest", "data", "details", "controls",
];

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Keys the protocol makes optional: compared when both have them.
const OPTIONAL: [&str; 8] = [
    "reason",
    "title",
    "description",
    "model",
    "displayName",
    "minLength",
    "maxLength",
    "turnId",
];

/// Every key the fixture has is in `ours` with the same JSON type (optional keys the fixture
/// shows are expected too; array items are compared with the first item of each).
pub(crate) fn assert_fixture_shape(ours: &Value, fixture: &Value, path: &str) {
    match (ours, fixture) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, expected) in b {
                let here = format!("{path}/{key}");
                let Some(found) = a.get(key) else {
                    if OPTIONAL.contains(&key.as_str()) {
                        continue;
                    }
                    panic!("{here} is in the upstream fixture but not in {ours}");
                };
                if FREE_FORM.contains(&key.as_str()) || key == "id" && found.is_number() {
                    continue;
                }
                if !(found.is_null() || expected.is_null()) {
                    assert_eq!(kind(found), kind(expected), "type of {here}");
                }
                assert_fixture_shape(found, expected, &here);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(x), Some(y)) = (a.first(), b.first())
                && kind(x) == kind(y)
                && x.get("type") == y.get("type")
            {
                assert_fixture_shape(x, y, &format!("{path}/0"));
            }
        }
        _ => {}
    }
}

type Input = Box<dyn AsyncWrite + Unpin + Send>;
type Output = Box<dyn AsyncRead + Unpin + Send>;

pub(crate) struct Host {
    /// The runtime, when this host started it (`None` for a host on its socket).
    pub(crate) child: Option<Child>,
    stdin: Option<Input>,
    lines: Lines<BufReader<Output>>,
    pub(crate) version: Option<ProtocolVersion>,
    next_id: u64,
    /// Notifications and server requests read while waiting for something else.
    pub(crate) inbox: VecDeque<Value>,
    /// Every frame the runtime wrote, in order.
    pub(crate) written: Vec<Value>,
    pub(crate) store: PathBuf,
}

pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Host {
    /// Starts `agentwire serve --stdio` on `store` (an SQLite file) with extra flags.
    pub(crate) async fn start(store: &Path, flags: &[&str]) -> Host {
        let mut child = Command::new(super::BIN)
            .arg("serve")
            .arg("--stdio")
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .args(flags)
            .env("AGENTWIRE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("agentwire serve starts");
        let stdin = child.stdin.take().map(|s| Box::new(s) as Input);
        let stdout = Box::new(child.stdout.take().expect("stdout")) as Output;
        Host {
            child: Some(child),
            stdin,
            lines: BufReader::with_capacity(1 << 20, stdout).lines(),
            version: None,
            next_id: 0,
            inbox: VecDeque::new(),
            written: Vec::new(),
            store: store.to_path_buf(),
        }
    }

    /// Connects to a runtime's Roll socket (`agentwire serve --roll-socket PATH`).
    pub(crate) async fn connect(socket: &Path, store: &Path) -> Host {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .expect("the runtime listens on its socket");
        let (read, write) = stream.into_split();
        Host {
            child: None,
            stdin: Some(Box::new(write)),
            lines: BufReader::with_capacity(1 << 20, Box::new(read) as Output).lines(),
            version: None,
            next_id: 0,
            inbox: VecDeque::new(),
            written: Vec::new(),
            store: store.to_path_buf(),
        }
    }

    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).await.expect("write");
        stdin.flush().await.expect("flush");
    }

    pub(crate) async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// What the host's death does to the runtime: both ends of its pipes closed at once, with
    /// nothing read or written after. Returns the runtime, still to be waited for.
    pub(crate) fn die(mut self) -> Child {
        drop(self.stdin.take());
        drop(self.lines);
        self.child.take().expect("a runtime this host started")
    }

    /// Closes the runtime's input and waits for it to exit.
    pub(crate) async fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let child = self.child.as_mut().expect("a runtime this host started");
        tokio::time::timeout(STUCK, child.wait())
            .await
            .expect("the runtime exits when its input ends")
            .expect("wait")
    }

    /// The next frame the runtime writes, checked against the negotiated version.
    pub(crate) async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(STUCK, self.lines.next_line())
            .await
            .expect("the runtime wrote nothing")
            .expect("read")
            .expect("the runtime closed its output");
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the runtime wrote a line that is not JSON ({e}): {line}"));
        self.check(&value);
        self.written.push(value.clone());
        value
    }

    /// Whether the runtime writes nothing more within `wait`.
    pub(crate) async fn quiet_for(&mut self, wait: Duration) -> bool {
        match tokio::time::timeout(wait, self.lines.next_line()).await {
            Err(_) => true,
            Ok(Ok(Some(line))) => panic!("unexpected frame: {line}"),
            Ok(_) => panic!("the runtime closed its output"),
        }
    }

    fn check(&self, value: &Value) {
        let version = self.version.or_else(|| {
            value
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse)
        });
        let version = version.unwrap_or(ProtocolVersion::V1_0);
        if let Err(issues) = schema::validate_message(version, value) {
            panic!("the runtime wrote a frame invalid under {version}: {value}\n{issues:#?}");
        }
    }

    /// Sends a request and waits for its answer (`Ok(result)` or `Err(error)`); notifications
    /// and server requests read meanwhile go to the inbox.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.answer_of(&json!(id)).await
    }

    /// Sends a request without waiting; returns its id.
    pub(crate) async fn send_request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub(crate) async fn answer_of(&mut self, id: &Value) -> Result<Value, Value> {
        loop {
            let frame = self.read().await;
            if frame.get("method").is_none() && frame.get("id") == Some(id) {
                if let Some(error) = frame.get("error") {
                    return Err(error.clone());
                }
                return Ok(frame["result"].clone());
            }
            self.inbox.push_back(frame);
        }
    }

    /// The next notification or server request (inbox first).
    pub(crate) async fn next_message(&mut self) -> Value {
        if let Some(frame) = self.inbox.pop_front() {
            return frame;
        }
        self.read().await
    }

    /// Reads until a message matching `wanted`, keeping the others in order in the inbox.
    pub(crate) async fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(index) = self.inbox.iter().position(&wanted) {
            return self.inbox.remove(index).unwrap();
        }
        loop {
            let frame = self.read().await;
            if wanted(&frame) {
                return frame;
            }
            self.inbox.push_back(frame);
        }
    }

    /// The `runtime.event` events of a turn until its terminal event, in order (the
    /// inbox is drained of them).
    pub(crate) async fn turn_events(&mut self, turn_id: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let frame = self
                .wait_for(|f| f["method"] == "runtime.event" && f["params"]["turnId"] == turn_id)
                .await;
            let kind = frame["params"]["event"]["type"]
                .as_str()
                .unwrap()
                .to_owned();
            events.push(frame["params"].clone());
            if matches!(
                kind.as_str(),
                "turn.completed" | "turn.cancelled" | "turn.failed"
            ) {
                return events;
            }
        }
    }

    /// `initialize` with one version; on 1.2+ also `client.capabilities.set` with `methods`.
    pub(crate) async fn open(&mut self, version: &str, methods: &[&str]) -> Value {
        let result = self
            .call(
                "initialize",
                json!({"protocolVersions": [version], "client": {"name": "flow-test", "version": "1.0.0"}}),
            )
            .await
            .expect("initialize");
        self.version = ProtocolVersion::parse(version);
        assert_eq!(result["protocolVersion"], version);
        if self.version.unwrap() >= ProtocolVersion::V1_2 {
            let ack = self
                .call(
                    "client.capabilities.set",
                    json!({"revision": 1, "serverRequestMethods": methods}),
                )
                .await
                .expect("capabilities");
            assert_eq!(ack["revision"], 1);
        }
        result
    }

    pub(crate) async fn create_thread(&mut self, title: &str) -> String {
        let result = self
            .call(
                "thread.create",
                json!({"requestId": uuid(), "title": title}),
            )
            .await
            .expect("thread.create");
        result["thread"]["id"].as_str().unwrap().to_owned()
    }

    /// Starts a turn; returns its id.
    pub(crate) async fn start_turn(&mut self, thread_id: &str, text: &str) -> String {
        let turn_id = uuid();
        let result = self
            .call(
                "turn.start",
                json!({"requestId": uuid(), "threadId": thread_id, "turnId": turn_id, "input": {"text": text}}),
            )
            .await
            .expect("turn.start");
        assert_eq!(result, json!({"accepted": true, "turnId": turn_id}));
        turn_id
    }
}

/// The `type`s of a list of envelopes.
pub(crate) fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap().to_owned())
        .collect()
}

/// The `rollCode` of an error answer.
pub(crate) fn roll_code(error: &Value) -> &str {
    error["data"]["rollCode"].as_str().unwrap_or_default()
}

//! `agentwire proxy --stdio` in front of `agentwire serve --stdio` with a scripted host: bytes
//! both ways identical to what each side wrote, the same answers as without the proxy, the
//! recording, violations forwarded and reported, lines over the limit, how the session ends
//! and its exit codes; and `agentwire proxy replay` for people and programs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::BIN;
use serde_json::{Value, json};

/// A guard against a hung test, not a timing assertion.
const STUCK: Duration = Duration::from_secs(60);

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn serve_command(store: &Path) -> String {
    format!(
        "{} serve --stdio --store {}",
        shell_quote(BIN),
        shell_quote(&format!("sqlite:{}", store.display()))
    )
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A host on a child's standard input and output: what it wrote and read, byte for byte.
struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Vec<u8>>,
    stderr: std::thread::JoinHandle<String>,
    written: Vec<u8>,
    read: Vec<u8>,
    /// Frames read while waiting for something else.
    inbox: Vec<Value>,
    next_id: u64,
}

impl Host {
    fn start(args: &[&str]) -> Host {
        let mut child = Command::new(BIN)
            .args(args)
            .env("AGENTWIRE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Host {
            child,
            stdin,
            lines,
            stderr,
            written: Vec::new(),
            read: Vec::new(),
            inbox: Vec::new(),
            next_id: 0,
        }
    }

    /// `agentwire proxy --stdio RUNTIME` with `extra` arguments (`--record FILE`, …).
    fn proxy(runtime: &str, extra: &[&str]) -> Host {
        let mut args = vec!["proxy", "--stdio", runtime];
        args.extend_from_slice(extra);
        Host::start(&args)
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.written.extend_from_slice(bytes);
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    fn read_frame(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(STUCK)
            .expect("the runtime wrote nothing more");
        self.read.extend_from_slice(&line);
        serde_json::from_slice(&line).unwrap()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its answer frame.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.wait_for(|f| f.get("method").is_none() && f["id"] == id)
    }

    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.inbox.iter().position(&wanted) {
            return self.inbox.remove(at);
        }
        loop {
            let frame = self.read_frame();
            if wanted(&frame) {
                return frame;
            }
            self.inbox.push(frame);
        }
    }

    /// Closes the input, reads the output to its end and waits for the exit.
    fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        while let Ok(line) = self.lines.recv_timeout(STUCK) {
            self.read.extend_from_slice(&line);
        }
        let status = wait(&mut self.child);
        Finished {
            status,
            stderr: self.stderr.join().unwrap(),
            written: self.written,
            read: self.read,
        }
    }
}

struct Finished {
    status: ExitStatus,
    stderr: String,
    written: Vec<u8>,
    read: Vec<u8>,
}

fn wait(child: &mut Child) -> ExitStatus {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < STUCK, "the process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn frames(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// A scripted session: 1.3 negotiated, a thread, a turn to its end, a resume, and a
/// `turn.start` whose `turnId` is not a UUID.
fn script(host: &mut Host) -> String {
    let init = host.call(
        "initialize",
        json!({"protocolVersions": ["1.3"], "client": {"name": "proxy-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "1.3");
    host.call(
        "client.capabilities.set",
        json!({"revision": 1, "serverRequestMethods": []}),
    );
    let created = host.call(
        "thread.create",
        json!({"requestId": uuid(), "title": "proxied"}),
    );
    let thread = created["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let turn = uuid();
    host.call(
        "turn.start",
        json!({"requestId": uuid(), "threadId": thread, "turnId": turn, "input": {"text": "hello"}}),
    );
    host.wait_for(|f| {
        f["params"]["event"]["type"] == "turn.completed" && f["params"]["turnId"] == turn
    });
    host.call(
        "runtime.events.resume",
        json!({"threadId": thread, "afterCursor": null}),
    );
    let refused = host.call(
        "turn.start",
        json!({"requestId": uuid(), "threadId": thread, "turnId": "not-a-uuid", "input": {"text": "x"}}),
    );
    assert_eq!(refused["error"]["data"]["rollCode"], "INVALID_PARAMS");
    thread
}

/// Ids, times and cursors replaced, so two runs of one script compare equal.
fn normalized(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            if uuid::Uuid::parse_str(text).is_ok() {
                return json!("<uuid>");
            }
            if let Some(rest) = text.strip_prefix("rte1:") {
                let sequence = rest.split(':').nth(1).unwrap_or_default();
                return json!(format!("rte1:<log>:{sequence}:<event>"));
            }
            let bytes = text.as_bytes();
            if bytes.len() >= 20 && bytes[4] == b'-' && bytes[7] == b'-' && bytes[10] == b'T' {
                return json!("<time>");
            }
            value.clone()
        }
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The answers by id, then the notifications in order, normalized.
fn answers_and_events(read: &[u8]) -> (Vec<Value>, Vec<Value>) {
    let mut answers: Vec<Value> = Vec::new();
    let mut events = Vec::new();
    for frame in frames(read) {
        if frame.get("method").is_some() {
            events.push(normalized(&frame));
        } else {
            answers.push(normalized(&frame));
        }
    }
    answers.sort_by_key(|a| a["id"].as_u64());
    (answers, events)
}

fn records(path: &Path) -> Vec<Value> {
    frames(&std::fs::read(path).unwrap())
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runtime.sqlite");
    (dir, store)
}

#[test]
fn both_directions_reach_the_other_side_byte_for_byte() {
    let (dir, store) = temp();
    let seen_in = dir.path().join("runtime-in.bin");
    let seen_out = dir.path().join("runtime-out.bin");
    // The runtime's own input and output, tapped on its side of the proxy.
    let runtime = format!(
        "sh -c {}",
        shell_quote(&format!(
            "tee {} | {} | tee {}",
            shell_quote(&seen_in.display().to_string()),
            serve_command(&store),
            shell_quote(&seen_out.display().to_string())
        ))
    );
    let mut host = Host::proxy(&runtime, &[]);
    script(&mut host);
    // Bytes the proxy must not touch: CRLF, a blank line, spacing inside a frame.
    host.send_raw(b"\r\n  \n{ \"jsonrpc\" : \"2.0\", \"id\": 99, \"method\": \"thread.list\", \"params\": {} }\r\n");
    host.wait_for(|f| f["id"] == 99);
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);
    let runtime_in = std::fs::read(&seen_in).unwrap();
    let runtime_out = std::fs::read(&seen_out).unwrap();
    assert_eq!(runtime_in, finished.written, "what the runtime read");
    assert_eq!(runtime_out, finished.read, "what the host read");
}

#[test]
fn the_host_gets_the_same_answers_as_without_the_proxy() {
    let (_dir, store) = temp();
    let mut direct = Host::start(&[
        "serve",
        "--stdio",
        "--store",
        &format!("sqlite:{}", store.display()),
    ]);
    script(&mut direct);
    let direct = direct.finish();
    assert_eq!(direct.status.code(), Some(0), "{}", direct.stderr);

    let (_dir, store) = temp();
    let mut proxied = Host::proxy(&serve_command(&store), &[]);
    script(&mut proxied);
    let proxied = proxied.finish();
    assert_eq!(proxied.status.code(), Some(0), "{}", proxied.stderr);

    let (direct_answers, direct_events) = answers_and_events(&direct.read);
    let (proxied_answers, proxied_events) = answers_and_events(&proxied.read);
    assert_eq!(proxied_answers, direct_answers);
    assert_eq!(proxied_events, direct_events);
    assert!(direct_events.len() > 5, "{direct_events:?}");
}

#[test]
fn the_recording_holds_every_frame_with_its_direction_and_the_violations() {
    let (dir, store) = temp();
    let record = dir.path().join("session.ndjson");
    let record_arg = record.display().to_string();
    let mut host = Host::proxy(&serve_command(&store), &["--record", &record_arg]);
    script(&mut host);
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);

    let records = records(&record);
    let of = |dir: &str| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r["dir"] == dir)
            .map(|r| r["frame"].clone())
            .collect()
    };
    assert_eq!(of("host->runtime"), frames(&finished.written));
    assert_eq!(of("runtime->host"), frames(&finished.read));
    assert_eq!(
        records.len(),
        frames(&finished.written).len() + frames(&finished.read).len()
    );
    // Times never go back.
    let times: Vec<&str> = records.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(
        times.iter().all(|t| t.len() == 24 && t.ends_with('Z')),
        "{times:?}"
    );

    // The bad turnId was forwarded (the runtime refused it) and reported, in the record
    // and on standard error; nothing else was.
    let flagged: Vec<&Value> = records
        .iter()
        .filter(|r| !r["violations"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(flagged.len(), 1, "{flagged:#?}");
    assert_eq!(flagged[0]["dir"], "host->runtime");
    assert_eq!(flagged[0]["frame"]["params"]["turnId"], "not-a-uuid");
    let violation = &flagged[0]["violations"][0];
    assert_eq!(violation["code"], "proxy.schema");
    assert_eq!(violation["instancePath"], "/params/turnId");
    let id = &flagged[0]["frame"]["id"];
    let reported: Vec<&str> = finished
        .stderr
        .lines()
        .filter(|l| l.starts_with("proxy: "))
        .collect();
    assert_eq!(
        reported[0],
        format!(
            "proxy: host->runtime id {id} turn.start: [proxy.schema] /params/turnId: \"not-a-uuid\" is not a valid uuid"
        )
    );
    assert_eq!(
        reported[1],
        format!(
            "proxy: 1 violation in 1 of {} frames ({} host->runtime, {} runtime->host)",
            records.len(),
            of("host->runtime").len(),
            of("runtime->host").len()
        )
    );
    assert_eq!(reported.len(), 2, "{}", finished.stderr);
}

#[test]
fn violations_on_standard_error_escape_control_characters() {
    let (_dir, store) = temp();
    let mut host = Host::proxy(&serve_command(&store), &[]);
    host.send_raw(b"not json \x1b[2J\x07 at all\n");
    host.call(
        "initialize",
        json!({"protocolVersions": ["1.5"], "client": {"name": "t", "version": "1"}}),
    );
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);
    let line = finished
        .stderr
        .lines()
        .find(|l| l.starts_with("proxy: host->runtime"))
        .unwrap();
    assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
    assert!(
        line.starts_with("proxy: host->runtime line: [proxy.not-json] not JSON:"),
        "{line}"
    );
}

#[test]
fn a_line_over_the_limit_is_forwarded_and_reported() {
    let (dir, store) = temp();
    let record = dir.path().join("session.ndjson");
    let record_arg = record.display().to_string();
    let mut host = Host::proxy(
        &serve_command(&store),
        &["--record", &record_arg, "--max-line-bytes", "1024"],
    );
    host.call(
        "initialize",
        json!({"protocolVersions": ["1.3"], "client": {"name": "t", "version": "1"}}),
    );
    host.call(
        "client.capabilities.set",
        json!({"revision": 1, "serverRequestMethods": []}),
    );
    let created = host.call(
        "thread.create",
        json!({"requestId": uuid(), "title": "long"}),
    );
    let thread = created["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = "word ".repeat(400) + "end";
    let turn = uuid();
    let started = host.call(
        "turn.start",
        json!({"requestId": uuid(), "threadId": thread, "turnId": turn, "input": {"text": text}}),
    );
    // The runtime got the whole frame, and its echo of the text is a line over the limit too.
    assert_eq!(started["result"]["accepted"], true);
    let completed = host.wait_for(|f| f["params"]["event"]["type"] == "message.completed");
    assert_eq!(
        completed["params"]["event"]["text"],
        format!("echo: {text}")
    );
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);
    let records = records(&record);
    let oversize: Vec<&Value> = records
        .iter()
        .filter(|r| r.get("bytes").is_some())
        .collect();
    assert_eq!(oversize.len(), 2, "{oversize:#?}");
    assert_eq!(oversize[0]["dir"], "host->runtime");
    assert_eq!(oversize[1]["dir"], "runtime->host");
    let sent = frames(&finished.written)[3].clone();
    assert_eq!(
        oversize[0]["bytes"],
        json!(serde_json::to_vec(&sent).unwrap().len())
    );
    assert_eq!(oversize[0]["violations"][0]["code"], "proxy.line-too-long");
    assert!(oversize[0].get("frame").is_none());
    assert!(
        finished.stderr.contains("[proxy.line-too-long] a line of "),
        "{}",
        finished.stderr
    );
}

#[test]
fn the_proxy_exits_with_the_runtimes_code_when_it_exits_first() {
    // The runtime reads one line and exits 5 while the host keeps its end open.
    let mut host = Host::proxy("sh -c 'read line; echo \"$line\"; exit 5'", &[]);
    host.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "thread.list", "params": {}}));
    let echoed = host.read_frame();
    assert_eq!(echoed["method"], "thread.list");
    let status = wait(&mut host.child);
    assert_eq!(status.code(), Some(5));
    // The echoed request went the wrong way: a host method from the runtime.
    drop(host.stdin.take());
    let stderr = host.stderr.join().unwrap();
    assert!(
        stderr.contains("proxy: runtime->host id 1 thread.list: [proxy.direction]"),
        "{stderr}"
    );
}

#[test]
fn the_host_closing_its_input_closes_the_runtimes_and_waits_for_it() {
    // `cat` ends when its input does; the proxy then exits with its code.
    let mut host = Host::proxy("cat", &[]);
    host.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"runtime.event\",\"params\":{}}\n");
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(0), "{}", finished.stderr);
    assert_eq!(finished.read, finished.written);
}

#[test]
fn a_runtime_ended_by_a_signal_is_reported_as_128_plus_it() {
    let host = Host::proxy("sh -c 'kill -9 $$'", &[]);
    let finished = host.finish();
    assert_eq!(finished.status.code(), Some(128 + 9));
}

#[test]
fn usage_errors_exit_2() {
    for (args, needle) in [
        (vec!["proxy"], "choose --stdio"),
        (vec!["proxy", "--stdio", ""], "the runtime command is empty"),
        (
            vec!["proxy", "--stdio", "a 'b"],
            "cannot split the runtime command",
        ),
        (
            vec!["proxy", "--stdio", "agentwire-no-such-runtime --stdio"],
            "cannot start the runtime `agentwire-no-such-runtime`",
        ),
        (
            vec![
                "proxy",
                "--stdio",
                "cat",
                "--record",
                "/nonexistent-dir/x.ndjson",
            ],
            "cannot create the recording",
        ),
        (
            vec!["proxy", "replay", "/nonexistent-dir/x.ndjson"],
            "cannot read",
        ),
        (vec!["proxy", "--record", "x.ndjson"], "--stdio"),
    ] {
        let output = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// A recording written by hand: fixed times, every kind of line.
const RECORDING: &str = r#"{"at":"2025-03-01T10:00:00.000Z","dir":"host->runtime","frame":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersions":["1.3","1.2"],"client":{"name":"ide","version":"1"}}},"violations":[]}
{"at":"2025-03-01T10:00:00.012Z","dir":"runtime->host","frame":{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1.3","runtimeInstanceId":"00000000-0000-4000-8000-000000000001","server":{"name":"s","version":"1","runtimeVersion":"1"},"features":[],"limits":{"maxFrameBytes":4194304,"maxPageSize":500,"eventReplay":true,"idempotencyCacheEntries":10000}}},"violations":[]}
{"at":"2025-03-01T10:00:00.020Z","dir":"host->runtime","frame":{"jsonrpc":"2.0","id":2,"method":"turn.start","params":{"requestId":"00000000-0000-4000-8000-000000000002","threadId":"6f1c2a9e-0d7b-4c1e-9a53-2b8e4f0c7d11","turnId":"x\u001b[2J","input":{"text":"deploy\nnow"}}},"violations":[{"code":"proxy.schema","message":"\"x\\u001b[2J\" is not a valid uuid","instancePath":"/params/turnId","schemaPath":"/$defs/sharedUuid/format"}]}
{"at":"2025-03-01T10:00:00.031Z","dir":"runtime->host","frame":{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid turn.start params","data":{"rollCode":"INVALID_PARAMS","retryable":false}}},"violations":[]}
{"at":"2025-03-01T10:00:01.500Z","dir":"runtime->host","frame":{"jsonrpc":"2.0","method":"runtime.event","params":{"protocolVersion":"1.3","runtimeInstanceId":"00000000-0000-4000-8000-000000000001","sequence":0,"timestamp":"2025-03-01T10:00:01.500Z","threadId":"6f1c2a9e-0d7b-4c1e-9a53-2b8e4f0c7d11","turnId":"00000000-0000-4000-8000-000000000003","durability":"durable","eventId":"00000000-0000-4000-8000-000000000004","cursor":"rte1:00000000-0000-4000-8000-000000000005:7:00000000-0000-4000-8000-000000000004","event":{"type":"message.completed","streamId":"00000000-0000-4000-8000-000000000006","text":"echo: hello"}}},"violations":[]}
{"at":"2025-03-01T10:00:01.501Z","dir":"host->runtime","raw":"garbage","violations":[{"code":"proxy.not-json","message":"not JSON: expected value at line 1 column 1"}]}
{"at":"2025-03-01T10:00:02.000Z","dir":"runtime->host","bytes":20000000,"violations":[{"code":"proxy.line-too-long","message":"a line of 20000000 bytes, over the proxy's limit of 17825792 bytes: forwarded, not checked"}]}
not a record
"#;

fn replay(recording: &str, extra: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.ndjson");
    std::fs::write(&path, recording).unwrap();
    let mut args = extra.to_vec();
    let path = path.display().to_string();
    args.extend(["proxy", "replay", &path]);
    let output = Command::new(BIN).args(&args).output().unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn replay_shows_a_timeline_for_people() {
    let (code, text) = replay(RECORDING, &[]);
    assert_eq!(code, Some(1), "violations were recorded");
    insta::assert_snapshot!(text, @r#"
    session recorded from 2025-03-01T10:00:00.000Z (→ host to runtime, ← runtime to host)
       +0.000s  → request  1          initialize               offers 1.3, 1.2
       +0.012s  ← result   1          initialize               version 1.3
       +0.020s  → request  2          turn.start               "deploy\nnow"
                !! [proxy.schema] /params/turnId: "x\u001b[2J" is not a valid uuid
       +0.031s  ← error    2          turn.start               INVALID_PARAMS "invalid turn.start params"
       +1.500s  ← notify              runtime.event            message.completed #7 "echo: hello"
       +1.501s  → raw                                          not JSON: "garbage"
                !! [proxy.not-json] not JSON: expected value at line 1 column 1
       +2.000s  ← oversize                                     a line of 20000000 bytes, not checked
                !! [proxy.line-too-long] a line of 20000000 bytes, over the proxy's limit of 17825792 bytes: forwarded, not checked
                !! line 8: not a record of a proxied session: expected ident at line 1 column 2
    7 frames (3 →, 4 ←), version 1.3; 3 violations in 3 frames; 1 line not a record
    "#);
}

#[test]
fn replay_prints_ndjson_for_programs() {
    let (code, text) = replay(RECORDING, &["--format", "json"]);
    assert_eq!(code, Some(1));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 9);
    assert_eq!(
        lines[2],
        json!({"line": 3, "offsetMs": 20, "at": "2025-03-01T10:00:00.020Z", "dir": "host->runtime",
               "kind": "request", "id": 2, "method": "turn.start", "summary": "\"deploy\\nnow\"",
               "violations": [{"code": "proxy.schema", "message": "\"x\\u001b[2J\" is not a valid uuid",
                               "instancePath": "/params/turnId", "schemaPath": "/$defs/sharedUuid/format"}]})
    );
    assert_eq!(
        lines[3]["method"], "turn.start",
        "an answer names its request's method"
    );
    assert_eq!(lines[7]["error"]["code"], "proxy.replay.unreadable");
    assert_eq!(
        lines[8],
        json!({"summary": {"records": 7, "hostToRuntime": 3, "runtimeToHost": 4, "version": "1.3",
                           "violations": 3, "recordsWithViolations": 3, "unreadable": 1}})
    );
}

#[test]
fn replay_of_a_clean_recording_exits_0() {
    let clean: String = RECORDING
        .lines()
        .take(2)
        .map(|l| format!("{l}\n"))
        .collect();
    let (code, text) = replay(&clean, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.ends_with("2 frames (1 →, 1 ←), version 1.3; no violations\n"),
        "{text}"
    );
}

#[test]
fn replay_of_a_real_session_names_every_frame() {
    let (dir, store) = temp();
    let record = dir.path().join("session.ndjson");
    let record_arg = record.display().to_string();
    let mut host = Host::proxy(&serve_command(&store), &["--record", &record_arg]);
    script(&mut host);
    assert_eq!(host.finish().status.code(), Some(0));
    let output = Command::new(BIN)
        .args(["proxy", "replay", &record_arg])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "the bad turnId");
    let text = String::from_utf8(output.stdout).unwrap();
    // Offsets and ids vary from run to run; the rest of each request and answer line is fixed.
    let shown: Vec<String> = text
        .lines()
        .filter(|l| l.contains(" request ") || l.contains(" result ") || l.contains(" error "))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            format!("{} {} {}", fields[1], fields[2], fields[4])
        })
        .collect();
    assert_eq!(
        shown,
        [
            "→ request initialize",
            "← result initialize",
            "→ request client.capabilities.set",
            "← result client.capabilities.set",
            "→ request thread.create",
            "← result thread.create",
            "→ request turn.start",
            "← result turn.start",
            "→ request runtime.events.resume",
            "← result runtime.events.resume",
            "→ request turn.start",
            "← error turn.start",
        ]
    );
    assert!(
        text.contains("runtime.event            turn.completed #"),
        "{text}"
    );
    assert!(
        text.contains("!! [proxy.schema] /params/turnId: \"not-a-uuid\" is not a valid uuid"),
        "{text}"
    );
}

#[test]
fn a_host_that_stops_reading_ends_the_session() {
    let (_dir, store) = temp();
    let mut proxy = Command::new(BIN)
        .args(["proxy", "--stdio", &serve_command(&store)])
        .env("AGENTWIRE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The host closes its reading end but keeps writing.
    drop(proxy.stdout.take());
    let mut stdin = proxy.stdin.take().unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersions": ["1.5"], "client": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{request}").unwrap();
    stdin.flush().unwrap();
    // The answer cannot be delivered: the runtime's input is closed, it exits, and so does
    // the proxy, though the host's end of its input is still open.
    let status = wait(&mut proxy);
    assert_eq!(status.code(), Some(0));
    drop(stdin);
}

//! `agentwire serve --app-server` driven by the real ChainlessChain Python SDK
//! (`chainlesschain-agent-sdk`'s `AppServerClient`, which spawns the binary as
//! `<exe> serve --app-server --app-server-state-dir DIR`), through `tools/python/app_server_driver.py`;
//! the SDK's own `validate_protocol_message` checks every line the server wrote. Also a host
//! writing raw lines: garbage, a blank line, a batch, a request before `initialize`, an 8 MiB
//! line.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::BIN;

/// Runs one scenario of the driver against a fresh state directory; its report. The SDK
/// spawns a wrapper that copies everything the server writes to a file: every line of it
/// must also be valid under our own schema of the App Server surface.
fn scenario(name: &str) -> Value {
    scenario_with(name, "")
}

/// [`scenario`] with `extra` appended to the command line the SDK spawns.
fn scenario_with(name: &str, extra: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("server-output.ndjson");
    let wrapper = dir.path().join("agentwire-tee");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n'{}' \"$@\" {extra} | tee -a '{}'\n",
            BIN,
            copy.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let output = agentwire_testkit::python_script("app_server_driver.py")
        .arg(&wrapper)
        .arg(dir.path().join("state"))
        .arg(name)
        .env("AGENTWIRE_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the driver failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report.get("invalid_lines").cloned().unwrap_or(json!([])),
        json!([]),
        "the SDK's validator refused lines"
    );
    let written = std::fs::read_to_string(&copy).unwrap();
    assert!(!written.is_empty());
    for line in written.lines() {
        assert!(line.len() <= 65_536, "a line of {} bytes", line.len());
        let message: Value = serde_json::from_str(line).unwrap();
        if let Err(problems) = agentwire_serve::app_server::schema::check_message(&message) {
            panic!("our schema refuses a line the server wrote: {problems}\n{line}");
        }
    }
    report
}

fn methods(notifications: &Value) -> Vec<&str> {
    notifications
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["method"].as_str().unwrap())
        .collect()
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn the_sdk_starts_a_thread_runs_a_turn_and_closes() {
    let report = scenario("basic");
    let init = &report["initialize"];
    assert_eq!(init["server"]["name"], "agentwire");
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["minimumProtocolVersion"], 1);
    assert_eq!(
        init["features"],
        json!([
            "thread_turn_item",
            "structured_approval",
            "durable_human_task",
            "bounded_transport"
        ])
    );
    assert_eq!(init["downgraded"], false);
    assert_eq!(init["transports"], json!(["stdio"]));
    assert_eq!(init["limits"]["maxLineBytes"], 8 * 1024 * 1024);
    assert_eq!(init["limits"]["maxOutboundLineBytes"], 65_536);
    assert_eq!(init["limits"]["maxPendingRequests"], 256);
    assert_eq!(
        init["schema"]["id"],
        "https://agentwire.dev/protocols/chainlesschain-app-server/app-server.schema.json"
    );
    assert_eq!(
        init["schema"]["digest"],
        agentwire_serve::app_server::protocol::SCHEMA_DIGEST
    );
    assert_eq!(
        init["peerSchema"]["id"],
        "https://schemas.chainlesschain.com/agent/cc-agent-protocol-v1.schema.json"
    );
    assert_eq!(error_code(&report["second_initialize"]), -32009);

    let thread = &report["thread_start"]["result"]["thread"];
    assert_eq!(thread["id"], "thread-1");
    assert_eq!(thread["title"], "First");
    assert_eq!(thread["status"], "idle");
    assert_eq!(error_code(&report["thread_start_again"]), -32009);
    assert_eq!(error_code(&report["thread_start_bad_id"]), -32602);

    // turn/started is written before the answer to turn/start.
    let started = &report["turn_start"];
    assert_eq!(started["result"]["turn"]["id"], "turn-1");
    assert_eq!(started["result"]["turn"]["status"], "running");
    assert!(
        started["notifications_before"].as_u64().unwrap() >= 1,
        "{started}"
    );
    let notifications = &report["turn_notifications"];
    assert_eq!(notifications[0]["method"], "turn/started");
    assert_eq!(
        notifications[0]["params"]["turn"],
        started["result"]["turn"]
    );
    assert_eq!(
        methods(notifications),
        [
            "turn/started",
            "item/started",
            "item/delta",
            "item/delta",
            "item/delta",
            "item/completed",
            "turn/completed",
            "thread/updated"
        ]
    );
    let text: String = notifications
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "item/delta")
        .map(|n| n["params"]["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "echo: hello there");
    let completed_item = &notifications[5]["params"]["item"];
    assert_eq!(completed_item["id"], "turn-1:assistant");
    assert_eq!(completed_item["status"], "completed");
    assert_eq!(
        completed_item["content"],
        json!({"text": "echo: hello there"})
    );
    let completed_turn = &notifications[6]["params"];
    assert_eq!(completed_turn["turn"]["status"], "completed");
    assert_eq!(completed_turn["error"], Value::Null);
    assert_eq!(notifications[7]["params"]["thread"]["status"], "idle");

    // A 200,000-byte message reaches the host as deltas of at most 8 KiB, each line under the
    // SDK's 64 KiB; its completion gives its length instead of the text.
    let big = &report["big"];
    let sizes: Vec<u64> = big["delta_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(sizes.iter().sum::<u64>(), 200_000);
    assert!(sizes.iter().all(|n| *n <= 8 * 1024), "{sizes:?}");
    assert_eq!(
        big["completed"][0]["content"],
        json!({"textBytes": 200_000})
    );
    // A retried turn/start with the same idempotencyKey gets the first answer (no second
    // turn); the key with other params is a conflict.
    assert_eq!(report["idem_first"]["result"]["turn"]["id"], "idem-1");
    assert_eq!(report["idem_again"], report["idem_first"]);
    assert_eq!(error_code(&report["idem_other"]), -32009);
    assert_eq!(error_code(&report["empty_input"]), -32602);
    assert_eq!(error_code(&report["unknown_thread"]), -32004);
    assert_eq!(error_code(&report["unknown_method"]), -32601);
    assert_eq!(error_code(&report["read_unknown"]), -32004);

    let threads = &report["thread_list"]["result"]["threads"];
    assert_eq!(threads.as_array().unwrap().len(), 1);
    assert_eq!(threads[0]["id"], "thread-1");
    let read = &report["thread_read"]["result"];
    let kinds: Vec<&str> = read["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "thread.created",
            "turn.started",
            "message.completed",
            "turn.completed",
            "turn.started",
            "message.completed",
            "turn.completed",
            "turn.started",
            "message.completed",
            "turn.completed"
        ]
    );
    // The big message's event is listed by its size, so the page stays one line.
    let big_event = &read["events"][5];
    assert!(big_event.get("payload").is_none(), "{big_event}");
    assert!(big_event["payload_bytes"].as_u64().unwrap() > 200_000);
    // Numbered from 1; the thread's revision is its last event's number.
    assert_eq!(read["events"][0]["event_seq"], 1);
    assert_eq!(read["events"][1]["turn_id"], "turn-1");
    let count = read["events"].as_array().unwrap().len();
    assert_eq!(read["thread"]["revision"], count);
    assert_eq!(read["hasMore"], false);
    assert_eq!(report["running_after_close"], false);
}

/// The `approval/resolved` params of a case, in order.
fn resolutions(notifications: &Value) -> Vec<(bool, String)> {
    notifications
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "approval/resolved")
        .map(|n| {
            let p = &n["params"];
            (
                p["approved"].as_bool().unwrap(),
                p["via"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The `tool/result` errors of a case, in order (`null` for a tool that ran).
fn tool_errors(notifications: &Value) -> Vec<Value> {
    notifications
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "tool/result")
        .map(|n| n["params"]["error"].clone())
        .collect()
}

#[test]
fn approvals_are_taken_only_from_accept_decisions_and_everything_else_refuses_the_tool() {
    let report = scenario("approvals");
    assert_eq!(report["invalid_lines"], json!([]));
    for (case, approved, via) in [
        ("accept-once", true, "acceptOnce"),
        ("accept-turn", true, "acceptForTurn"),
        ("accept-session", true, "acceptForSession"),
        ("decline", false, "decline"),
        ("invalid", false, "invalid"),
        ("error", false, "error"),
        ("beyond-request", false, "binding"),
    ] {
        let notifications = &report[case]["notifications"];
        let order = methods(notifications);
        let requested = order
            .iter()
            .position(|m| *m == "approval/requested")
            .unwrap();
        let resolved = order
            .iter()
            .position(|m| *m == "approval/resolved")
            .unwrap();
        let result = order.iter().position(|m| *m == "tool/result").unwrap();
        assert!(
            requested < resolved && resolved < result,
            "{case}: {order:?}"
        );
        assert_eq!(order.last(), Some(&"thread/updated"), "{case}");
        let list = notifications.as_array().unwrap();
        let resolution = &list[resolved]["params"];
        assert_eq!(resolution["approved"], approved, "{case}");
        assert_eq!(resolution["via"], via, "{case}");
        // One request per case: the first of its turn.
        let requests = report[case]["requests"].as_array().unwrap();
        assert_eq!(requests.len(), 1, "{case}");
        let request = &requests[0];
        assert_eq!(request["method"], "approval/decide");
        assert!(request["id"].as_str().unwrap().starts_with("server:"));
        assert_eq!(
            request["params"]["request"], list[requested]["params"]["request"],
            "{case}"
        );
        let binding = &request["params"]["request"]["binding"];
        assert_eq!(binding["threadId"], "thread-a");
        let digest = binding["operationDigest"].as_str().unwrap();
        assert!(digest.starts_with("sha256:"));
        assert_eq!(
            request["params"]["request"]["requestedPermissions"],
            json!([{"capability": "shell", "scope": format!("operation:{digest}")}])
        );
        assert_eq!(resolution["approvalId"], request["params"]["request"]["id"]);
        let tool = &list[result]["params"];
        assert_eq!(tool["isError"], !approved, "{case}");
        // The agent goes on either way: the turn completes.
        let end = list
            .iter()
            .find(|n| n["method"] == "turn/completed")
            .unwrap();
        assert_eq!(end["params"]["turn"]["status"], "completed", "{case}");
    }
    // acceptForTurn: the two identical runs after it are approved without asking, and said so.
    let turn = &report["accept-turn"]["notifications"];
    let granted = |via: &str| (true, via.to_owned());
    assert_eq!(
        resolutions(turn),
        [
            granted("acceptForTurn"),
            granted("turnGrant"),
            granted("turnGrant")
        ]
    );
    assert_eq!(tool_errors(turn), [Value::Null, Value::Null, Value::Null]);
    assert_eq!(
        methods(turn)
            .iter()
            .filter(|m| **m == "approval/requested")
            .count(),
        3
    );
    // acceptForSession: a later turn's identical runs are not asked at all.
    let later = &report["session-later"];
    assert_eq!(later["requests"], json!([]));
    assert_eq!(
        resolutions(&later["notifications"]),
        [granted("sessionGrant"), granted("sessionGrant")]
    );
    assert_eq!(
        tool_errors(&report["decline"]["notifications"]),
        [json!("not today")]
    );
    assert_eq!(
        tool_errors(&report["error"]["notifications"]),
        [json!("the host answered with an error: the dialog crashed")]
    );
    assert_eq!(
        tool_errors(&report["invalid"]["notifications"]),
        [json!(
            "the decision is not a valid ApprovalDecision: permissions is not a field of an acceptOnce decision"
        )]
    );
    assert_eq!(
        tool_errors(&report["beyond-request"]["notifications"]),
        [json!(
            "the decision grants shell on /, which the request does not ask for"
        )]
    );
}

#[test]
fn an_interrupt_answers_once_the_turn_has_stopped() {
    let report = scenario("interrupt");
    assert_eq!(report["turn_start"]["result"]["turn"]["status"], "running");
    assert_eq!(error_code(&report["second_turn"]), -32009);
    let interrupted = &report["interrupt"]["result"];
    assert_eq!(interrupted["physicallySettled"], true);
    assert_eq!(interrupted["turn"]["status"], "interrupted");
    assert!(interrupted["turn"]["completedAt"].is_string());
    // turn/completed was handed to the host before the interrupt's answer.
    let completed = report["completed_before_reply"].as_array().unwrap();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["params"]["turn"], interrupted["turn"]);
    let again = &report["interrupt_again"]["result"];
    assert_eq!(again["alreadyTerminal"], true);
    assert_eq!(again["turn"], interrupted["turn"]);
    assert_eq!(error_code(&report["interrupt_unknown"]), -32004);
}

#[test]
fn features_are_intersected_in_server_order_and_a_smaller_set_is_downgraded() {
    let report = scenario("negotiation");
    assert_eq!(report["reduced"]["features"], json!(["thread_turn_item"]));
    assert_eq!(report["reduced"]["downgraded"], true);
    assert_eq!(report["empty"]["features"], json!([]));
    assert_eq!(report["empty"]["downgraded"], true);
}

/// A host writing raw lines: what cannot be parsed or is a batch gets no answer (an answer
/// would need `id: null`, which the SDK cannot read), a request before `initialize` is
/// refused with `-32002`, an 8 MiB line is read and answered, and the session goes on.
#[test]
fn bad_lines_from_a_host_are_dropped_or_answered_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--app-server", "--app-server-state-dir"])
        .arg(dir.path())
        .env("AGENTWIRE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send("this is not json");
    send("");
    send(r#"[{"jsonrpc":"2.0","id":"9","method":"thread/list","params":{}}]"#);
    send(r#"{"jsonrpc":"2.0","id":"1","method":"thread/list","params":{}}"#);
    send(
        r#"{"jsonrpc":"2.0","id":"2","method":"initialize","params":{"protocolVersion":1,"minimumProtocolVersion":1,"client":{"name":"raw","version":"1"}}}"#,
    );
    let big = "x".repeat(8 * 1024 * 1024 - 200);
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":"3","method":"thread/start","params":{{"title":"{big}"}}}}"#
    ));
    send(r#"{"jsonrpc":"2.0","id":"4","method":"thread/start","params":{"threadId":"raw-1"}}"#);
    // Read up to the last answer, then close standard input: the server exits.
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut closed = Some(stdin);
    while stdout.read_line(&mut line).unwrap() > 0 {
        assert!(line.len() <= 65_537, "a line of {} bytes", line.len());
        assert!(!line.trim().is_empty(), "a blank line");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == "4" {
            closed.take();
        }
        lines.push(message);
        line.clear();
    }
    assert!(closed.is_none(), "the output ended before the last answer");
    let status = child.wait().unwrap();
    assert!(status.success());
    let answers: Vec<&Value> = lines.iter().filter(|l| l.get("id").is_some()).collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!("1"), &json!("2"), &json!("3"), &json!("4")]);
    assert_eq!(answers[0]["error"]["code"], -32002);
    assert_eq!(answers[1]["result"]["protocolVersion"], 1);
    assert_eq!(answers[2]["error"]["code"], -32602);
    assert_eq!(answers[3]["result"]["thread"]["id"], "raw-1");
    assert!(
        lines.iter().all(|l| l.get("id") != Some(&Value::Null)),
        "{lines:?}"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.is_empty(), "the dropped lines are logged");
}

#[test]
fn every_spawn_option_of_the_sdk_is_taken() {
    let report = scenario("spawn");
    assert_eq!(report["with_dir"]["limits"]["maxPendingRequests"], 7);
    let again = &report["listed_again"]["result"]["threads"];
    assert_eq!(again.as_array().unwrap().len(), 1);
    assert_eq!(again[0]["id"], "kept");
    // Another store: none of the first one's threads.
    assert_eq!(report["listed_by_path"]["result"]["threads"], json!([]));
}

#[test]
fn threads_fork_with_their_parent_and_archived_ones_take_no_turn() {
    let report = scenario("threads");
    let fork = &report["fork"]["result"];
    assert_eq!(fork["thread"]["id"], "forked");
    assert_eq!(fork["thread"]["parentThreadId"], "source");
    assert_eq!(fork["thread"]["title"], "Fork");
    assert_eq!(fork["historyForked"], false);
    assert_eq!(error_code(&report["fork_unknown"]), -32004);
    assert_eq!(error_code(&report["fork_taken"]), -32009);
    assert_eq!(error_code(&report["archive_active"]), -32009);
    assert_eq!(report["archive"]["result"]["thread"]["status"], "archived");
    assert_eq!(error_code(&report["turn_on_archived"]), -32009);
    let ids = |answer: &Value| -> Vec<String> {
        let mut ids: Vec<String> = answer["result"]["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&report["list"]), ["forked"]);
    assert_eq!(ids(&report["list_all"]), ["forked", "source"]);
}

/// A host speaking the App Server protocol raw over the runtime's standard input and output.
struct AppHost {
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    /// Every message read, in order.
    seen: Vec<Value>,
}

impl AppHost {
    async fn send(&mut self, message: &Value) {
        use tokio::io::AsyncWriteExt as _;
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(crate::support::roll_host::STUCK, self.lines.next_line())
            .await
            .expect("the runtime wrote nothing")
            .unwrap()
            .expect("the runtime closed its output");
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Err(problems) = agentwire_serve::app_server::schema::check_message(&message) {
            panic!("our schema refuses a line the server wrote: {problems}\n{line}");
        }
        self.seen.push(message.clone());
        message
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id.to_string());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.read().await;
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }

    async fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|m| wanted(m)) {
            return found.clone();
        }
        loop {
            let message = self.read().await;
            if wanted(&message) {
                return message;
            }
        }
    }
}

/// One runtime serving an App Server host on stdio and a Roll host on its socket: the Roll host
/// lists every thread (one the App Server host named otherwise than by a UUID under the UUID the
/// runtime derived from the name) and follows the thread the App Server host started, both are asked the same approval, the Roll
/// host's answer settles it for both, and both see the same message, tool call and end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_server_host_and_a_roll_host_watch_the_same_turn() {
    use crate::support::roll_host::{Host, STUCK};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("roll.sock");
    let mut runtime = tokio::process::Command::new(BIN)
        .args(["serve", "--app-server", "--roll-socket"])
        .arg(&socket)
        .arg("--app-server-state-dir")
        .arg(dir.path().join("state"))
        .env("AGENTWIRE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut app = AppHost {
        stdin: runtime.stdin.take().unwrap(),
        lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            runtime.stdout.take().unwrap(),
        )),
        next_id: 0,
        seen: Vec::new(),
    };
    let init = app
        .call(
            "initialize",
            json!({"protocolVersion": 1, "minimumProtocolVersion": 1,
                   "client": {"name": "raw", "version": "1"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    // A thread id any App Server host may choose, and one a Roll host can name (a UUID).
    let shared = "0b7c2a1e-3f4d-4c5b-9a6e-7d8f9e0a1b2c";
    let started = app
        .call(
            "thread/start",
            json!({"threadId": shared, "title": "Shared"}),
        )
        .await;
    assert_eq!(started["result"]["thread"]["id"], shared);
    let own = app
        .call("thread/start", json!({"threadId": "app-only"}))
        .await;
    assert_eq!(own["result"]["thread"]["id"], "app-only");

    tokio::time::timeout(STUCK, async {
        while !socket.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the runtime listens");
    let mut roll = Host::connect(&socket, &dir.path().join("state/runtime.sqlite")).await;
    roll.open("1.5", &["approval.request", "userInput.request"])
        .await;
    // The Roll host lists both: the thread named by a UUID under that id, the other under the
    // UUID the runtime derived from its name.
    let listed = roll.call("thread.list", json!({})).await.unwrap();
    let mut ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    let derived = agentwire_serve::app_server::wire::core_id("thread", "", "app-only");
    let mut expected = [shared, derived.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    roll.call("thread.open", json!({"threadId": shared}))
        .await
        .unwrap();

    let turn = app
        .call(
            "turn/start",
            json!({"threadId": shared, "turnId": "cross-1", "input": "/approve ls"}),
        )
        .await;
    assert_eq!(turn["result"]["turn"]["id"], "cross-1");
    // Both are asked.
    let to_app = app.wait_for(|m| m["method"] == "approval/decide").await;
    let to_roll = roll.wait_for(|f| f["method"] == "approval.request").await;
    assert_eq!(
        to_app["params"]["request"]["id"],
        to_roll["params"]["interactionId"]
    );
    // The Roll host answers first: it settles the approval for both.
    roll.send(&json!({"jsonrpc": "2.0", "id": to_roll["id"], "result": {"decision": "approve"}}))
        .await;
    let resolved = app.wait_for(|m| m["method"] == "approval/resolved").await;
    assert_eq!(resolved["params"]["approved"], true);
    // The Roll face's approve is the decision acceptOnce.
    assert_eq!(resolved["params"]["via"], "acceptOnce");
    // The App Server host's late decline changes nothing.
    app.send(&json!({"jsonrpc": "2.0", "id": to_app["id"], "result": {"kind": "decline"}}))
        .await;
    let completed = app
        .wait_for(|m| m["method"] == "turn/completed" && m["params"]["turn"]["id"] == "cross-1")
        .await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    // The Roll host knows the turn by the UUID the runtime derived from the App Server name.
    let core_turn = agentwire_serve::app_server::wire::core_id("turn", shared, "cross-1");
    assert_eq!(to_roll["params"]["turnId"], core_turn.as_str());
    let roll_events = roll.turn_events(&core_turn).await;
    assert_eq!(
        roll_events.last().unwrap()["event"]["type"],
        "turn.completed"
    );

    // The same message, the same tool call and outcome on both faces.
    let app_text: String = app
        .seen
        .iter()
        .filter(|m| m["method"] == "item/delta" && m["params"]["turnId"] == "cross-1")
        .map(|m| m["params"]["delta"]["text"].as_str().unwrap())
        .collect();
    let roll_text = roll_events
        .iter()
        .find(|e| e["event"]["type"] == "message.completed")
        .unwrap()["event"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(app_text, roll_text);
    let app_tool = app
        .seen
        .iter()
        .find(|m| m["method"] == "tool/result")
        .unwrap()["params"]
        .clone();
    let roll_tool = roll_events
        .iter()
        .find(|e| e["event"]["type"] == "tool.completed")
        .unwrap()["event"]
        .clone();
    assert_eq!(app_tool["isError"], false);
    assert_eq!(roll_tool["outcome"]["kind"], "success");
    assert_eq!(app_tool["tool"], roll_tool["toolName"]);
    assert_eq!(app_tool["result"], roll_tool["display"]);

    drop(roll);
    drop(app);
    let status = tokio::time::timeout(STUCK, runtime.wait())
        .await
        .expect("the runtime exits when its input ends")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// No decision within the approval timeout is a decline: the tool is refused, the turn goes on,
/// and the host's late acceptance changes nothing.
#[test]
fn an_approval_not_decided_in_time_refuses_the_tool() {
    let report = scenario_with("approval_timeout", "--approval-timeout 1");
    let notifications = report["notifications"].as_array().unwrap();
    let resolved = notifications
        .iter()
        .find(|n| n["method"] == "approval/resolved")
        .unwrap();
    assert_eq!(resolved["params"]["approved"], false);
    assert_eq!(resolved["params"]["via"], "timeout");
    let tool = notifications
        .iter()
        .find(|n| n["method"] == "tool/result")
        .unwrap();
    assert_eq!(tool["params"]["isError"], true);
    assert_eq!(tool["params"]["error"], "no decision within 1000 ms");
    let end = notifications
        .iter()
        .find(|n| n["method"] == "turn/completed")
        .unwrap();
    assert_eq!(end["params"]["turn"]["status"], "completed");
}

/// A long connection stays bounded: of the turns it saw end, it remembers the newest 1,024
/// (an interrupt of one of them is `alreadyTerminal`); an older one is forgotten (`-32004`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_remembers_a_bounded_number_of_ended_turns() {
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = tokio::process::Command::new(BIN)
        .args(["serve", "--app-server", "--app-server-state-dir"])
        .arg(dir.path())
        .env("AGENTWIRE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut app = AppHost {
        stdin: runtime.stdin.take().unwrap(),
        lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            runtime.stdout.take().unwrap(),
        )),
        next_id: 0,
        seen: Vec::new(),
    };
    app.call(
        "initialize",
        json!({"protocolVersion": 1, "minimumProtocolVersion": 1,
               "client": {"name": "raw", "version": "1"}}),
    )
    .await;
    app.call("thread/start", json!({"threadId": "long"})).await;
    const TURNS: usize = 1_030;
    for n in 0..TURNS {
        let turn = format!("t-{n}");
        app.call(
            "turn/start",
            json!({"threadId": "long", "turnId": turn, "input": "hi"}),
        )
        .await;
        app.wait_for(|m| m["method"] == "turn/completed" && m["params"]["turn"]["id"] == turn)
            .await;
        // Only what is still needed is kept of what was read.
        app.seen.clear();
    }
    let newest = app
        .call(
            "turn/interrupt",
            json!({"threadId": "long", "turnId": format!("t-{}", TURNS - 1)}),
        )
        .await;
    assert_eq!(newest["result"]["alreadyTerminal"], true, "{newest}");
    assert_eq!(newest["result"]["turn"]["id"], format!("t-{}", TURNS - 1));
    let oldest = app
        .call(
            "turn/interrupt",
            json!({"threadId": "long", "turnId": "t-0"}),
        )
        .await;
    assert_eq!(oldest["error"]["code"], -32004, "{oldest}");
    drop(app);
    let status = runtime.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_sdks_default_decline_of_a_human_task_is_refused_and_an_exact_answer_settles_it() {
    let report = scenario("human_tasks");
    assert!(
        report["initialize"]["features"]
            .as_array()
            .unwrap()
            .contains(&json!("durable_human_task"))
    );
    // No handler: the SDK answered `{"kind":"decline",…}`, which is not a HumanTaskDecideResult.
    let refused = &report["default_decline"]["params"];
    assert_eq!(refused["code"], "humanTask.invalid-reply", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("HumanTaskDecideResult"),
        "{refused}"
    );
    assert!(
        !report["default_decline_notifications"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["params"]["type"] == "humanTask/settled"),
        "the task stays open"
    );
    // A handler repeating the task's binding exactly: recorded, settled, and the turn goes on.
    let requests = report["exact_requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["method"], "humanTask/decide");
    assert_eq!(requests[0]["params"]["task"]["status"], "open");
    let notifications = report["exact_notifications"].as_array().unwrap();
    let events: Vec<&str> = notifications
        .iter()
        .filter(|n| n["method"] == "graph/event")
        .map(|n| n["params"]["type"].as_str().unwrap())
        .collect();
    assert!(
        events.contains(&"humanTask/decided") && events.contains(&"humanTask/settled"),
        "{events:?}"
    );
    let completed = notifications
        .iter()
        .find(|n| n["method"] == "turn/completed")
        .unwrap();
    assert_eq!(completed["params"]["turn"]["status"], "completed");
}

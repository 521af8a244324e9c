//! `agentwire serve --stdio` through a real pipe, version by version: negotiation,
//! capabilities, thread lifecycle, every demo-agent command, approvals and user input on each
//! version's write path, resume and recovery, idempotent retries, and bad input. Every frame
//! the runtime writes is validated against the negotiated version's export.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::BIN;
use crate::support::roll_host::{
    Host, STUCK, assert_fixture_shape, fixture, roll_code, types, uuid,
};
use serde_json::{Value, json};

const VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];
const HANDLERS: [&str; 2] = ["approval.request", "userInput.request"];

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.sqlite");
    (dir, path)
}

fn is_new(version: &str) -> bool {
    version >= "1.3"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_negotiates_and_runs_the_demo_commands() {
    for version in VERSIONS {
        let (_dir, path) = store();
        let mut host = Host::start(&path, &[]).await;
        let init = host.open(version, &HANDLERS).await;
        if version >= "1.4" {
            let folder = format!("v{version}");
            assert_fixture_shape(
                &json!({"jsonrpc": "2.0", "id": 1, "result": init}),
                &fixture(&folder, "valid-initialize-response"),
                "",
            );
        }
        assert_eq!(init["limits"]["eventReplay"], json!(is_new(version)));
        let thread = host.create_thread("flow").await;
        let list = host
            .call("thread.list", json!({"limit": 10}))
            .await
            .unwrap();
        assert_eq!(list["items"][0]["id"], thread.as_str());
        assert_eq!(list["nextCursor"], Value::Null);

        // Plain text: streamed deltas, then the completed message.
        let turn = host.start_turn(&thread, "hello there").await;
        let events = host.turn_events(&turn).await;
        let kinds = types(&events);
        assert_eq!(kinds.first().map(String::as_str), Some("turn.started"));
        assert_eq!(kinds.last().map(String::as_str), Some("turn.completed"));
        let deltas: String = events
            .iter()
            .filter(|e| e["event"]["type"] == "message.delta")
            .map(|e| e["event"]["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, "echo: hello there");
        let completed = events
            .iter()
            .find(|e| e["event"]["type"] == "message.completed")
            .unwrap();
        assert_eq!(completed["event"]["text"], "echo: hello there");
        if is_new(version) {
            assert_eq!(completed["durability"], "durable");
            assert_fixture_shape(
                &json!({"jsonrpc": "2.0", "method": "runtime.event", "params": completed}),
                &fixture("v1.3", "valid-runtime-durable-event-notification"),
                "",
            );
            let delta = events
                .iter()
                .find(|e| e["event"]["type"] == "message.delta")
                .unwrap();
            assert_eq!(delta["durability"], "ephemeral");
            assert!(delta.get("cursor").is_none());
        } else {
            assert!(completed.get("cursor").is_none());
        }

        // A tool: started, two stdout lines, completed success.
        let turn = host
            .start_turn(&thread, "/tool search {\"q\":\"rust\"}")
            .await;
        let events = host.turn_events(&turn).await;
        let kinds = types(&events);
        assert_eq!(
            kinds[..5],
            [
                "turn.started",
                "tool.started",
                "tool.output",
                "tool.output",
                "tool.completed"
            ]
        );
        assert_eq!(kinds.last().map(String::as_str), Some("turn.completed"));
        let tool = events
            .iter()
            .find(|e| e["event"]["type"] == "tool.completed")
            .unwrap();
        assert_eq!(tool["event"]["outcome"]["kind"], "success");
        assert_eq!(tool["event"]["toolName"], "search");
        assert_eq!(
            tool["event"].get("appOutput").is_some(),
            version == "1.5",
            "appOutput only on 1.5"
        );

        // A failure at a stage.
        let turn = host.start_turn(&thread, "/fail plan").await;
        let events = host.turn_events(&turn).await;
        let last = events.last().unwrap();
        assert_eq!(last["event"]["type"], "turn.failed");
        assert_eq!(last["event"]["stage"], "plan");

        // The snapshot holds the transcript: three user messages and the agent's replies.
        let snapshot = host
            .call("thread.snapshot", json!({"threadId": thread, "limit": 100}))
            .await
            .unwrap();
        let messages = snapshot["messages"]["items"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(messages[0]["parts"][0]["text"], "hello there");
        assert_eq!(messages[1]["parts"][0]["text"], "echo: hello there");
        assert_eq!(snapshot["operations"]["items"][0]["toolName"], "search");
        assert_eq!(snapshot.get("eventCursor").is_some(), is_new(version));
        assert_eq!(
            snapshot.get("pendingInteractions").is_some(),
            version >= "1.2"
        );
        assert_eq!(host.finish().await.code(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_on_each_versions_write_path_approve_and_reject() {
    for version in VERSIONS {
        let (_dir, path) = store();
        let mut host = Host::start(&path, &[]).await;
        host.open(version, &HANDLERS).await;
        let thread = host.create_thread("approvals").await;
        for approve in [true, false] {
            let turn = host.start_turn(&thread, "/approve ls -la").await;
            if version == "1.0" {
                // 1.0: the approval.required event is the control event; approval.respond answers.
                let required = host
                    .wait_for(|f| f["params"]["event"]["type"] == "approval.required")
                    .await;
                let approval = &required["params"]["event"]["approval"];
                assert_eq!(approval["preview"]["command"], "ls -la");
                let answer = host
                    .call(
                        "approval.respond",
                        json!({
                            "requestId": uuid(), "threadId": thread, "turnId": turn,
                            "approvalId": approval["id"],
                            "decision": if approve { "approve" } else { "reject" },
                        }),
                    )
                    .await
                    .unwrap();
                assert_eq!(answer, json!({"resolved": true}));
            } else {
                let request = host.wait_for(|f| f["method"] == "approval.request").await;
                let folder = if version == "1.1" { "v1" } else { "v1.2" };
                assert_fixture_shape(&request, &fixture(folder, "valid-approval-request"), "");
                // The server request comes before the view-only event of the same approval.
                let approval_id = &request["params"]["approval"]["id"];
                let request_at = host
                    .written
                    .iter()
                    .position(|f| f["id"] == request["id"] && f["method"] == "approval.request")
                    .unwrap();
                let required_at = host.written.iter().position(|f| {
                    f["params"]["event"]["type"] == "approval.required"
                        && &f["params"]["event"]["approval"]["id"] == approval_id
                });
                assert!(
                    required_at.is_none_or(|at| at > request_at),
                    "approval.required was written before approval.request"
                );
                assert_eq!(
                    request["params"]["approval"]["preview"]["command"],
                    "ls -la"
                );
                let decision = if approve {
                    json!({"decision": "approve"})
                } else {
                    json!({"decision": "reject", "reason": "not now"})
                };
                host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": decision}))
                    .await;
            }
            let events = host.turn_events(&turn).await;
            let tool = events
                .iter()
                .find(|e| e["event"]["type"] == "tool.completed")
                .expect("the tool completes");
            let expected = if approve { "success" } else { "user_rejected" };
            assert_eq!(
                tool["event"]["outcome"]["kind"], expected,
                "version {version}"
            );
            let resolved: Vec<&Value> = events
                .iter()
                .filter(|e| e["event"]["type"] == "approval.resolved")
                .collect();
            if version == "1.0" {
                assert!(resolved.is_empty(), "1.0 has no approval.resolved");
            } else {
                let decision = if approve { "approve" } else { "reject" };
                assert_eq!(resolved[0]["event"]["resolution"]["decision"], decision);
            }
            assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");
        }
        assert_eq!(host.finish().await.code(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_expires_and_its_request_is_cancelled() {
    for version in ["1.1", "1.2", "1.5"] {
        let (_dir, path) = store();
        let mut host = Host::start(&path, &["--interaction-timeout", "1"]).await;
        host.open(version, &HANDLERS).await;
        let thread = host.create_thread("expiry").await;
        let turn = host.start_turn(&thread, "/approve rm -rf build").await;
        let request = host.wait_for(|f| f["method"] == "approval.request").await;
        let cancel = host
            .wait_for(|f| f["method"] == "runtime.serverRequest.cancel")
            .await;
        if version == "1.1" {
            assert_eq!(cancel["params"]["serverRequestId"], request["id"]);
        } else {
            assert_eq!(
                cancel["params"]["interactionId"],
                request["params"]["interactionId"]
            );
            assert_fixture_shape(
                &cancel,
                &fixture("v1.2", "valid-server-request-cancel-notification"),
                "",
            );
        }
        let events = host.turn_events(&turn).await;
        let resolved = events
            .iter()
            .find(|e| e["event"]["type"] == "approval.resolved")
            .unwrap();
        assert_eq!(resolved["event"]["resolution"]["status"], "expired");
        let tool = events
            .iter()
            .find(|e| e["event"]["type"] == "tool.completed")
            .unwrap();
        assert_eq!(tool["event"]["outcome"]["kind"], "user_rejected");
        assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");
        // A late answer is ignored; the session goes on.
        host.send(
            &json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "approve"}}),
        )
        .await;
        let list = host.call("thread.list", json!({"limit": 5})).await.unwrap();
        assert_eq!(list["items"].as_array().unwrap().len(), 1);
        assert_eq!(host.finish().await.code(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_turn_cancels_its_pending_approval() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.3", &HANDLERS).await;
    let thread = host.create_thread("cancel").await;
    let turn = host.start_turn(&thread, "/approve make deploy").await;
    let request = host.wait_for(|f| f["method"] == "approval.request").await;
    let cancelling = host
        .call(
            "turn.cancel",
            json!({"requestId": uuid(), "threadId": thread, "turnId": turn}),
        )
        .await
        .unwrap();
    assert_eq!(cancelling, json!({"cancelling": true}));
    let cancel = host
        .wait_for(|f| f["method"] == "runtime.serverRequest.cancel")
        .await;
    assert_eq!(
        cancel["params"]["interactionId"],
        request["params"]["interactionId"]
    );
    let events = host.turn_events(&turn).await;
    let resolved = events
        .iter()
        .find(|e| e["event"]["type"] == "approval.resolved")
        .unwrap();
    assert_eq!(resolved["event"]["resolution"]["status"], "cancelled");
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.cancelled");
    // Cancelling a finished turn is TURN_NOT_FOUND.
    let again = host
        .call(
            "turn.cancel",
            json!({"requestId": uuid(), "threadId": thread, "turnId": turn}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&again), "TURN_NOT_FOUND");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_approval_answer_fails_closed() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.2", &HANDLERS).await;
    let thread = host.create_thread("fail closed").await;
    for answer in [
        json!({"result": {"decision": "defer"}}),
        json!({"error": {"code": -32603, "message": "handler threw"}}),
    ] {
        let turn = host.start_turn(&thread, "/approve shutdown now").await;
        let request = host.wait_for(|f| f["method"] == "approval.request").await;
        let mut reply = json!({"jsonrpc": "2.0", "id": request["id"]});
        reply
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        host.send(&reply).await;
        let events = host.turn_events(&turn).await;
        let resolved = events
            .iter()
            .find(|e| e["event"]["type"] == "approval.resolved")
            .unwrap();
        assert_eq!(resolved["event"]["resolution"]["status"], "cancelled");
        assert!(
            !events.iter().any(|e| e["event"]["type"] == "tool.completed"
                && e["event"]["outcome"]["kind"] == "success"),
            "the tool never runs on an invalid answer"
        );
        let last = events.last().unwrap();
        assert_eq!(last["event"]["type"], "turn.failed");
        assert_eq!(last["event"]["stage"], "execute");
    }
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_input_is_submitted_cancelled_or_refused_against_its_form() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.2", &HANDLERS).await;
    let thread = host.create_thread("forms").await;

    let turn = host.start_turn(&thread, "/ask Which region?").await;
    let request = host.wait_for(|f| f["method"] == "userInput.request").await;
    assert_fixture_shape(&request, &fixture("v1.2", "valid-user-input-request"), "");
    let controls = request["params"]["controls"].as_array().unwrap();
    let text_id = controls.iter().find(|c| c["type"] == "text").unwrap()["id"].clone();
    let choice = controls.iter().find(|c| c["type"] == "choice").unwrap();
    let option = choice["options"][0]["id"].clone();
    // While the form is open the snapshot lists it (metadata only) and the turn waits.
    let snapshot = host
        .call("thread.snapshot", json!({"threadId": thread, "limit": 10}))
        .await
        .unwrap();
    assert_eq!(snapshot["activeTurn"]["status"], "waiting-for-user");
    assert_eq!(
        snapshot["pendingInteractions"][0]["method"],
        "userInput.request"
    );
    host.send(
        &json!({"jsonrpc": "2.0", "id": request["id"], "result": {"status": "submitted",
        "values": [{"id": choice["id"], "value": option}, {"id": text_id, "value": "eu-west"}]}}),
    )
    .await;
    let events = host.turn_events(&turn).await;
    let reply = events
        .iter()
        .find(|e| e["event"]["type"] == "message.completed")
        .unwrap();
    let text = reply["event"]["text"].as_str().unwrap();
    assert!(text.contains("eu-west"), "{text}");
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");

    let turn = host.start_turn(&thread, "/ask Which region?").await;
    let request = host.wait_for(|f| f["method"] == "userInput.request").await;
    host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"status": "cancelled", "reason": "closed"}}))
        .await;
    let events = host.turn_events(&turn).await;
    let reply = events
        .iter()
        .find(|e| e["event"]["type"] == "message.completed")
        .unwrap();
    assert!(reply["event"]["text"].as_str().unwrap().contains("cancel"));
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");

    // Unknown control, wrong type, missing required: refused, the turn fails closed.
    for values in [
        json!([{"id": "no-such-control", "value": "x"}]),
        json!([{"id": text_id, "value": 5}]),
        json!([]),
    ] {
        let turn = host.start_turn(&thread, "/ask Which region?").await;
        let request = host.wait_for(|f| f["method"] == "userInput.request").await;
        host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"status": "submitted", "values": values}}))
            .await;
        let events = host.turn_events(&turn).await;
        let last = events.last().unwrap();
        assert_eq!(last["event"]["type"], "turn.failed", "values {values}");
    }
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_interaction_is_sent_before_the_capability_ack() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.call(
        "initialize",
        json!({"protocolVersions": ["1.3"], "client": {"name": "t", "version": "1"}}),
    )
    .await
    .unwrap();
    host.version = agentwire_roll::ProtocolVersion::parse("1.3");
    let thread = host.create_thread("late ack").await;
    let turn = host.start_turn(&thread, "/approve echo hi").await;
    host.wait_for(|f| f["params"]["event"]["type"] == "approval.required")
        .await;
    assert!(
        !host
            .written
            .iter()
            .any(|f| f["method"] == "approval.request"),
        "an interaction was sent before the ACK"
    );
    let ack = host
        .call(
            "client.capabilities.set",
            json!({"revision": 1, "serverRequestMethods": ["approval.request", "future.request"]}),
        )
        .await
        .unwrap();
    assert_eq!(
        ack,
        json!({"revision": 1, "acceptedServerRequestMethods": ["approval.request"]})
    );
    let ack_at = host.written.len() - 1;
    let request = host.wait_for(|f| f["method"] == "approval.request").await;
    let request_at = host
        .written
        .iter()
        .position(|f| f["method"] == "approval.request")
        .unwrap();
    assert!(
        request_at > ack_at,
        "the ACK is written before the interaction"
    );
    host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "approve"}}))
        .await;
    let events = host.turn_events(&turn).await;
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");
    // A stale revision conflicts.
    let stale = host
        .call(
            "client.capabilities.set",
            json!({"revision": 1, "serverRequestMethods": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&stale), "CAPABILITY_REVISION_CONFLICT");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_replays_after_a_cursor_and_answers_with_the_barrier() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.3", &HANDLERS).await;
    let thread = host.create_thread("resume").await;
    let empty = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": null}),
        )
        .await
        .unwrap();
    assert_eq!(empty, json!({"throughCursor": null, "replayedCount": 0}));
    assert_fixture_shape(
        &json!({"jsonrpc": "2.0", "id": 1, "result": empty}),
        &fixture("v1.3", "valid-runtime-events-resume-response"),
        "",
    );
    let mut live = Vec::new();
    for text in ["one", "/tool t {}", "three"] {
        let turn = host.start_turn(&thread, text).await;
        live.extend(
            host.turn_events(&turn)
                .await
                .into_iter()
                .filter(|e| e["durability"] == "durable"),
        );
    }
    let cursors: Vec<&str> = live.iter().map(|e| e["cursor"].as_str().unwrap()).collect();
    // From null: everything, in order, then the barrier.
    for (after, from) in [
        (Value::Null, 0),
        (json!(cursors[2]), 3),
        (json!(cursors[cursors.len() - 1]), cursors.len()),
    ] {
        let id = host
            .send_request(
                "runtime.events.resume",
                json!({"threadId": thread, "afterCursor": after}),
            )
            .await;
        let mut replayed = Vec::new();
        let answer = loop {
            let frame = host.read().await;
            if frame["id"] == id {
                break frame["result"].clone();
            }
            assert_eq!(
                frame["method"], "runtime.event",
                "only replay before the barrier"
            );
            replayed.push(frame["params"].clone());
        };
        assert_eq!(answer["replayedCount"], json!(live.len() - from));
        assert_eq!(answer["throughCursor"], json!(cursors[cursors.len() - 1]));
        let ids: Vec<&Value> = replayed.iter().map(|e| &e["eventId"]).collect();
        let expected: Vec<&Value> = live[from..].iter().map(|e| &e["eventId"]).collect();
        assert_eq!(ids, expected);
        for (a, b) in replayed.iter().zip(&live[from..]) {
            assert_eq!(a["event"], b["event"]);
            assert_eq!(a["cursor"], b["cursor"]);
        }
    }
    // A cursor of another thread, a forged one, a malformed one: EVENT_CURSOR_GAP / params.
    let other = host.create_thread("other").await;
    let turn = host.start_turn(&other, "x").await;
    let other_cursor = host
        .turn_events(&turn)
        .await
        .into_iter()
        .find(|e| e["durability"] == "durable")
        .unwrap()["cursor"]
        .clone();
    let gap = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": other_cursor}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&gap), "EVENT_CURSOR_GAP");
    let forged =
        cursors[0].rsplit_once(':').unwrap().0.to_owned() + ":00000000-0000-4000-8000-000000000007";
    let gap = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": forged}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&gap), "EVENT_CURSOR_GAP");
    let bad = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": "00000000-0000-4000-8000-000000000007"}),
        )
        .await
        .unwrap_err();
    assert_eq!(bad["code"], -32602);
    assert_eq!(roll_code(&bad), "INVALID_PARAMS");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_survive_a_restart_and_a_trimmed_prefix_is_expired() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    let first = host.open("1.5", &HANDLERS).await;
    let thread = host.create_thread("restart").await;
    let turn = host.start_turn(&thread, "before restart").await;
    let before: Vec<Value> = host
        .turn_events(&turn)
        .await
        .into_iter()
        .filter(|e| e["durability"] == "durable")
        .collect();
    assert_eq!(host.finish().await.code(), Some(0));

    let mut host = Host::start(&path, &[]).await;
    let second = host.open("1.5", &HANDLERS).await;
    assert_ne!(first["runtimeInstanceId"], second["runtimeInstanceId"]);
    let turn = host.start_turn(&thread, "after restart").await;
    let after: Vec<Value> = host
        .turn_events(&turn)
        .await
        .into_iter()
        .filter(|e| e["durability"] == "durable")
        .collect();
    let resumed = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": before.last().unwrap()["cursor"]}),
        )
        .await
        .unwrap();
    assert_eq!(resumed["replayedCount"], json!(after.len()));
    assert_eq!(resumed["throughCursor"], after.last().unwrap()["cursor"]);
    let replayed: Vec<Value> = host
        .inbox
        .drain(..)
        .filter(|f| f["method"] == "runtime.event")
        .map(|f| f["params"]["eventId"].clone())
        .collect();
    let expected: Vec<Value> = after.iter().map(|e| e["eventId"].clone()).collect();
    assert_eq!(replayed, expected);

    // Trim the oldest events: a resume from null is expired, never a shorter replay.
    let status = std::process::Command::new(BIN)
        .args(["events", "trim", "--store"])
        .arg(format!("sqlite:{}", path.display()))
        .args(["--thread", &thread, "--max-records", "3"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let expired = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": null}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&expired), "EVENT_CURSOR_EXPIRED");
    let expired = host
        .call(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": before[0]["cursor"]}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&expired), "EVENT_CURSOR_EXPIRED");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recovery_snapshot_of_a_thread_of_ten_thousand_events_fits_one_small_frame() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.3", &HANDLERS).await;
    let thread = host.create_thread("big").await;
    let turn = host.start_turn(&thread, "/burst 10000").await;
    let events = host.turn_events(&turn).await;
    let durable: Vec<&Value> = events
        .iter()
        .filter(|e| e["durability"] == "durable")
        .collect();
    assert!(durable.len() > 10_000, "{}", durable.len());
    // Gap-free cursors from 0.
    for (index, event) in durable.iter().enumerate() {
        let cursor = agentwire_roll::EventCursor::parse(event["cursor"].as_str().unwrap()).unwrap();
        assert_eq!(cursor.sequence(), index as u64);
    }
    let recovery = host
        .call(
            "thread.snapshot",
            json!({"threadId": thread, "limit": 1, "recovery": true}),
        )
        .await
        .unwrap();
    assert_eq!(recovery["recoveryProjection"], true);
    assert_eq!(recovery["eventCursor"], durable.last().unwrap()["cursor"]);
    assert_eq!(recovery["messages"]["items"], json!([]));
    let frame = serde_json::to_vec(host.written.last().unwrap()).unwrap();
    assert!(
        frame.len() < 4096,
        "the recovery frame has {} bytes",
        frame.len()
    );
    assert_fixture_shape(
        host.written.last().unwrap(),
        &fixture("v1.3", "valid-thread-recovery-snapshot-response"),
        "",
    );
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_events_during_a_replay_are_deduplicated_into_one_gap_free_sequence() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.4", &HANDLERS).await;
    let thread = host.create_thread("barrier").await;
    let turn = host.start_turn(&thread, "/burst 3000").await;
    // Resume from the start while the burst is still being written.
    let id = host
        .send_request(
            "runtime.events.resume",
            json!({"threadId": thread, "afterCursor": null}),
        )
        .await;
    let mut by_id = std::collections::BTreeMap::new();
    let mut barrier = None;
    let mut ended = false;
    while barrier.is_none() || !ended {
        let frame = host.read().await;
        if frame["id"] == id {
            barrier = Some(frame["result"].clone());
            continue;
        }
        let params = &frame["params"];
        if params["durability"] == "durable" {
            let cursor =
                agentwire_roll::EventCursor::parse(params["cursor"].as_str().unwrap()).unwrap();
            if let Some(previous) = by_id.insert(cursor.sequence(), params["eventId"].clone()) {
                assert_eq!(previous, params["eventId"], "one event id per position");
            }
            if params["event"]["type"] == "turn.completed" && params["turnId"] == turn {
                ended = true;
            }
        }
    }
    let positions: Vec<u64> = by_id.keys().copied().collect();
    let expected: Vec<u64> = (0..positions.len() as u64).collect();
    assert_eq!(positions, expected, "gap-free after de-duplication");
    assert!(barrier.unwrap()["replayedCount"].as_u64().unwrap() <= positions.len() as u64);
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_are_idempotent_by_request_id() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.2", &HANDLERS).await;
    let request_id = uuid();
    let first = host
        .call(
            "thread.create",
            json!({"requestId": request_id, "title": "once"}),
        )
        .await
        .unwrap();
    let retry = host
        .call(
            "thread.create",
            json!({"requestId": request_id, "title": "once"}),
        )
        .await
        .unwrap();
    assert_eq!(first, retry);
    let list = host
        .call("thread.list", json!({"limit": 10}))
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let mismatch = host
        .call(
            "thread.create",
            json!({"requestId": request_id, "title": "twice"}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&mismatch), "INVALID_PARAMS");
    let thread = first["thread"]["id"].as_str().unwrap().to_owned();
    let rename = json!({"requestId": uuid(), "threadId": thread, "title": "  renamed  "});
    let renamed = host.call("thread.rename", rename.clone()).await.unwrap();
    assert_eq!(renamed["thread"]["title"], "renamed");
    assert_eq!(host.call("thread.rename", rename).await.unwrap(), renamed);
    // turn.start: the same request, and the same turn id under another request, start one turn.
    let turn_id = uuid();
    let start = json!({"requestId": uuid(), "threadId": thread, "turnId": turn_id, "input": {"text": "hi"}});
    let accepted = host.call("turn.start", start.clone()).await.unwrap();
    assert_eq!(host.call("turn.start", start).await.unwrap(), accepted);
    let again = json!({"requestId": uuid(), "threadId": thread, "turnId": turn_id, "input": {"text": "hi"}});
    assert_eq!(host.call("turn.start", again).await.unwrap(), accepted);
    let events = host.turn_events(&turn_id).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["event"]["type"] == "turn.started")
            .count(),
        1
    );
    let delete = json!({"requestId": uuid(), "threadId": thread});
    let deleted = host.call("thread.delete", delete.clone()).await.unwrap();
    assert_eq!(deleted, json!({"deleted": true}));
    assert_eq!(host.call("thread.delete", delete).await.unwrap(), deleted);
    let gone = host
        .call("thread.snapshot", json!({"threadId": thread, "limit": 1}))
        .await
        .unwrap_err();
    assert_eq!(roll_code(&gone), "THREAD_NOT_FOUND");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_documented_answer_and_the_session_goes_on() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &["--max-frame-bytes", "65536"]).await;
    // Before initialize: INITIALIZE_REQUIRED.
    let early = host
        .call("thread.list", json!({"limit": 1}))
        .await
        .unwrap_err();
    assert_eq!(roll_code(&early), "INITIALIZE_REQUIRED");
    host.open("1.2", &HANDLERS).await;
    // Garbage lines: no answer at all.
    host.send_raw(b"this is not json\n{\"unterminated\": \n\x00\xff\n")
        .await;
    // An oversize frame: skipped, no answer.
    let mut big =
        br#"{"jsonrpc":"2.0","id":99,"method":"thread.list","params":{"limit":1,"x":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 70_000));
    big.extend(b"\"}}\n");
    host.send_raw(&big).await;
    assert!(host.quiet_for(Duration::from_millis(300)).await);
    // An unknown method, and a method of a newer version: -32601.
    let unknown = host.call("thread.fly", json!({})).await.unwrap_err();
    assert_eq!(unknown["code"], -32601);
    let newer = host
        .call(
            "runtime.events.resume",
            json!({"threadId": uuid(), "afterCursor": null}),
        )
        .await
        .unwrap_err();
    assert_eq!(newer["code"], -32601);
    // Params of a newer version: INVALID_PARAMS.
    let thread = host.create_thread("bad input").await;
    let params = host
        .call(
            "thread.snapshot",
            json!({"threadId": thread, "limit": 1, "recovery": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(params["code"], -32602);
    assert_eq!(roll_code(&params), "INVALID_PARAMS");
    // approval.respond on 1.1+: CAPABILITY_UNAVAILABLE.
    let respond = host
        .call(
            "approval.respond",
            json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(), "approvalId": uuid(), "decision": "approve"}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&respond), "CAPABILITY_UNAVAILABLE");
    // A response to a server request that does not exist: ignored.
    host.send(&json!({"jsonrpc": "2.0", "id": "runtime:404", "result": {"decision": "approve"}}))
        .await;
    // A second initialize: CAPABILITY_UNAVAILABLE, nothing changes.
    let second = host
        .call(
            "initialize",
            json!({"protocolVersions": ["1.5"], "client": {"name": "t", "version": "1"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&second), "CAPABILITY_UNAVAILABLE");
    // Unknown thread and turn ids.
    let missing = host
        .call("thread.snapshot", json!({"threadId": uuid(), "limit": 1}))
        .await
        .unwrap_err();
    assert_eq!(roll_code(&missing), "THREAD_NOT_FOUND");
    // The session goes on.
    let list = host.call("thread.list", json!({"limit": 5})).await.unwrap();
    assert_eq!(list["items"][0]["id"], thread.as_str());
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_common_version_is_refused() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    let refused = host
        .call(
            "initialize",
            json!({"protocolVersions": ["2.0", "0.9"], "client": {"name": "t", "version": "1"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&refused), "PROTOCOL_VERSION_UNSUPPORTED");
    let ok = host.open("1.1", &[]).await;
    assert_eq!(ok["protocolVersion"], "1.1");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_output_is_read_back_with_operation_result_get() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.5", &HANDLERS).await;
    let thread = host.create_thread("app").await;
    let turn = host.start_turn(&thread, "/app").await;
    let events = host.turn_events(&turn).await;
    let tool = events
        .iter()
        .find(|e| e["event"]["type"] == "tool.completed")
        .unwrap();
    assert_eq!(tool["event"]["appOutput"]["status"], "available");
    let operation_id = tool["event"]["operationId"].clone();
    let result = host
        .call(
            "operation.result.get",
            json!({"threadId": thread, "operationId": operation_id}),
        )
        .await
        .unwrap();
    assert_eq!(result["result"]["output"]["data"]["city"], "Lisbon");
    assert_eq!(result["result"]["operationId"], operation_id);
    let view = host
        .call(
            "operation.get",
            json!({"threadId": thread, "operationId": operation_id}),
        )
        .await
        .unwrap();
    assert_eq!(view["operation"]["appOutput"]["schemaId"], "demo.weather");
    let none = host
        .call(
            "operation.get",
            json!({"threadId": thread, "operationId": uuid()}),
        )
        .await
        .unwrap();
    assert_eq!(none, json!({"operation": null}));
    assert_eq!(host.finish().await.code(), Some(0));
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_staged_verified_committed_and_sent_with_a_turn() {
    use base64::Engine as _;
    let (dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    let init = host.open("1.4", &HANDLERS).await;
    assert!(
        init["features"]
            .as_array()
            .unwrap()
            .contains(&json!("attachments"))
    );
    let thread = host.create_thread("files").await;

    // A local file: verified and committed at stage.
    let notes = b"# Notes\nship it\n".to_vec();
    let file = dir.path().join("notes.md");
    std::fs::write(&file, &notes).unwrap();
    let stage = json!({"requestId": uuid(), "threadId": thread, "fileName": "notes.md",
        "mediaType": "text/markdown", "bytes": notes.len(), "sha256": sha256_hex(&notes),
        "source": "local-path", "sourcePath": file});
    let local = host.call("attachment.stage", stage).await.unwrap();
    assert_eq!(local["state"], "committed");
    assert_eq!(local["descriptor"]["displayName"], "notes.md");
    assert!(local["descriptor"].get("sourcePath").is_none());
    assert_fixture_shape(
        &json!({"jsonrpc": "2.0", "id": 1, "result": local}),
        &fixture("v1.4", "valid-attachment-stage-response"),
        "",
    );

    // Chunks: staged, uploaded in order, verified at commit.
    // Every call is sent twice with the same requestId (a retry after a lost answer): the
    // retry gets the first answer and changes nothing.
    let image: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let stage = json!({"requestId": uuid(), "threadId": thread, "fileName": "plot.png",
        "mediaType": "image/png", "bytes": image.len(), "sha256": sha256_hex(&image),
        "source": "chunks"});
    let chunked = host.call("attachment.stage", stage.clone()).await.unwrap();
    assert_eq!(chunked["state"], "staged");
    assert_eq!(host.call("attachment.stage", stage).await.unwrap(), chunked);
    let id = chunked["attachmentId"].clone();
    for (sequence, part) in image.chunks(2000).enumerate() {
        let chunk = json!({"requestId": uuid(), "threadId": thread, "attachmentId": id,
            "sequence": sequence,
            "dataBase64": base64::engine::general_purpose::STANDARD.encode(part)});
        let progress = host.call("attachment.chunk", chunk.clone()).await.unwrap();
        assert_eq!(progress["nextSequence"], sequence + 1);
        assert_eq!(
            host.call("attachment.chunk", chunk).await.unwrap(),
            progress
        );
    }
    // Not committed yet: a turn may not use it.
    let early = host
        .call(
            "turn.start",
            json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
                "input": {"text": "", "attachments": [id]}}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&early), "ATTACHMENT_NOT_COMMITTED");
    let commit = json!({"requestId": uuid(), "threadId": thread, "attachmentId": id});
    let committed = host
        .call("attachment.commit", commit.clone())
        .await
        .unwrap();
    assert_eq!(committed["descriptor"]["bytes"], image.len());
    assert_eq!(
        host.call("attachment.commit", commit).await.unwrap(),
        committed
    );
    assert_fixture_shape(
        &json!({"jsonrpc": "2.0", "id": 1, "result": committed}),
        &fixture("v1.4", "valid-attachment-commit-response"),
        "",
    );

    // A turn with both and no text.
    let turn_id = uuid();
    host.call(
        "turn.start",
        json!({"requestId": uuid(), "threadId": thread, "turnId": turn_id,
            "input": {"text": "", "attachments": [local["attachmentId"], id]}}),
    )
    .await
    .unwrap();
    host.turn_events(&turn_id).await;
    let snapshot = host
        .call("thread.snapshot", json!({"threadId": thread, "limit": 10}))
        .await
        .unwrap();
    let parts = &snapshot["messages"]["items"][0]["parts"];
    assert_eq!(parts[0]["type"], "attachment");
    assert_eq!(parts[0]["mediaType"], "text/markdown");
    assert_eq!(parts[1]["bytes"], image.len());
    assert_fixture_shape(
        host.written.last().unwrap(),
        &fixture("v1.4", "valid-thread-snapshot-attachment-part-response"),
        "",
    );

    // A wrong hash at commit: refused, the data discarded. A short upload: incomplete.
    for (declared, chunk, code) in [
        (
            sha256_hex(b"something else"),
            &b"hello"[..],
            "ATTACHMENT_HASH_MISMATCH",
        ),
        (
            sha256_hex(b"hello world"),
            &b"hello"[..],
            "ATTACHMENT_UPLOAD_INCOMPLETE",
        ),
    ] {
        let bytes = if code == "ATTACHMENT_HASH_MISMATCH" {
            5
        } else {
            11
        };
        let staged = host
            .call(
                "attachment.stage",
                json!({"requestId": uuid(), "threadId": thread, "fileName": "a.txt",
                    "mediaType": "text/plain", "bytes": bytes, "sha256": declared, "source": "chunks"}),
            )
            .await
            .unwrap();
        host.call(
            "attachment.chunk",
            json!({"requestId": uuid(), "threadId": thread, "attachmentId": staged["attachmentId"],
                "sequence": 0, "dataBase64": base64::engine::general_purpose::STANDARD.encode(chunk)}),
        )
        .await
        .unwrap();
        let refused = host
            .call(
                "attachment.commit",
                json!({"requestId": uuid(), "threadId": thread, "attachmentId": staged["attachmentId"]}),
            )
            .await
            .unwrap_err();
        assert_eq!(roll_code(&refused), code);
    }
    // A relative path is rejected; nine attachments break the schema.
    let relative = host
        .call(
            "attachment.stage",
            json!({"requestId": uuid(), "threadId": thread, "fileName": "notes.md",
                "mediaType": "text/markdown", "bytes": 3, "sha256": sha256_hex(b"abc"),
                "source": "local-path", "sourcePath": "notes.md"}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&relative), "ATTACHMENT_PATH_REJECTED");
    let nine: Vec<String> = (0..9).map(|_| uuid()).collect();
    let too_many = host
        .call(
            "turn.start",
            json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
                "input": {"text": "x", "attachments": nine}}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&too_many), "INVALID_PARAMS");
    let release = json!({"requestId": uuid(), "threadId": thread, "attachmentId": id});
    let released = host
        .call("attachment.release", release.clone())
        .await
        .unwrap();
    assert_eq!(released, json!({"released": true}));
    assert_eq!(
        host.call("attachment.release", release).await.unwrap(),
        released
    );
    // A new request to release it again has nothing to release.
    let again = host
        .call(
            "attachment.release",
            json!({"requestId": uuid(), "threadId": thread, "attachmentId": id}),
        )
        .await
        .unwrap();
    assert_eq!(again, json!({"released": false}));
    assert_eq!(host.finish().await.code(), Some(0));

    // On 1.3 the attachment shapes do not exist.
    let mut host = Host::start(&path, &[]).await;
    host.open("1.3", &HANDLERS).await;
    let old = host
        .call(
            "turn.start",
            json!({"requestId": uuid(), "threadId": thread, "turnId": uuid(),
                "input": {"text": "x", "attachments": [uuid()]}}),
        )
        .await
        .unwrap_err();
    assert_eq!(roll_code(&old), "INVALID_PARAMS");
    let snapshot = host
        .call("thread.snapshot", json!({"threadId": thread, "limit": 10}))
        .await
        .unwrap();
    assert_eq!(snapshot["messages"]["items"][0]["parts"], json!([]));
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_process_runs_a_turn_with_an_approved_tool_call() {
    let (_dir, path) = store();
    let agent = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/agents/echo_agent.py");
    let command = format!("python3 '{}'", agent.display());
    let mut host = Host::start(&path, &["--agent-cmd", &command]).await;
    host.open("1.5", &HANDLERS).await;
    let thread = host.create_thread("agent process").await;
    let turn = host.start_turn(&thread, "/shell echo hi").await;
    let request = host.wait_for(|f| f["method"] == "approval.request").await;
    assert_eq!(request["params"]["approval"]["toolName"], "shell");
    host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "approve"}}))
        .await;
    let events = host.turn_events(&turn).await;
    let tool = events
        .iter()
        .find(|e| e["event"]["type"] == "tool.completed")
        .unwrap();
    assert_eq!(tool["event"]["outcome"]["kind"], "success");
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");
    let turn = host.start_turn(&thread, "plain words").await;
    let events = host.turn_events(&turn).await;
    let reply = events
        .iter()
        .find(|e| e["event"]["type"] == "message.completed")
        .unwrap();
    assert_eq!(reply["event"]["text"], "echo: plain words");
    assert_eq!(host.finish().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_slow_and_big_turns_and_retried_cancels_and_detaches() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.5", &HANDLERS).await;
    let thread = host.create_thread("more commands").await;

    // /edit: the approval previews the diff; the completed tool shows {text, diff}.
    let turn = host.start_turn(&thread, "/edit src/lib.rs").await;
    let request = host.wait_for(|f| f["method"] == "approval.request").await;
    let diff = &request["params"]["approval"]["preview"]["diff"];
    assert_eq!(diff["path"], "src/lib.rs");
    assert!(diff["truncated"].is_boolean());
    host.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "approve"}}))
        .await;
    let events = host.turn_events(&turn).await;
    let tool = events
        .iter()
        .find(|e| e["event"]["type"] == "tool.completed")
        .unwrap();
    assert_eq!(tool["event"]["outcome"]["kind"], "success");
    assert_eq!(tool["event"]["display"]["diff"]["path"], "src/lib.rs");
    assert!(tool["event"]["display"]["text"].is_string());

    // /slow 5: five deltas; /big: one completed message of exactly that many bytes.
    let turn = host.start_turn(&thread, "/slow 5").await;
    let events = host.turn_events(&turn).await;
    let deltas = events
        .iter()
        .filter(|e| e["event"]["type"] == "message.delta")
        .count();
    assert_eq!(deltas, 5);
    let turn = host.start_turn(&thread, "/big 200000").await;
    let events = host.turn_events(&turn).await;
    let big = events
        .iter()
        .find(|e| e["event"]["type"] == "message.completed")
        .unwrap();
    assert_eq!(big["event"]["text"].as_str().unwrap().len(), 200_000);

    // A retried turn.cancel gets the first answer; a retried detach too.
    let turn = host.start_turn(&thread, "/slow 200").await;
    let cancel = json!({"requestId": uuid(), "threadId": thread, "turnId": turn});
    let first = host.call("turn.cancel", cancel.clone()).await.unwrap();
    assert_eq!(first, json!({"cancelling": true}));
    assert_eq!(host.call("turn.cancel", cancel).await.unwrap(), first);
    let events = host.turn_events(&turn).await;
    assert_eq!(events.last().unwrap()["event"]["type"], "turn.cancelled");
    let detach = json!({"requestId": uuid(), "threadId": thread});
    let detached = host.call("thread.detach", detach.clone()).await.unwrap();
    assert_eq!(detached, json!({"detached": true}));
    assert_eq!(host.call("thread.detach", detach).await.unwrap(), detached);
    let again = host
        .call(
            "thread.detach",
            json!({"requestId": uuid(), "threadId": thread}),
        )
        .await
        .unwrap();
    assert_eq!(again, json!({"detached": false}));
    assert_eq!(host.finish().await.code(), Some(0));
}

/// The socket file appears only once the runtime listens on it (bound under a name of its own
/// and linked), so a host that connects as soon as the file exists is accepted; a second
/// runtime on the same path is refused while the first listens; a stale socket file is
/// replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roll_socket_appears_listening_refuses_a_second_runtime_and_replaces_a_stale_one() {
    let (dir, path) = store();
    let serve = |socket: &std::path::Path| {
        tokio::process::Command::new(BIN)
            .args(["serve", "--roll-socket"])
            .arg(socket)
            .arg("--store")
            .arg(format!("sqlite:{}", path.display()))
            .env("AGENTWIRE_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let socket = dir.path().join("roll.sock");
    let first = serve(&socket);
    tokio::time::timeout(STUCK, async {
        while !socket.exists() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the socket file appears");
    std::os::unix::net::UnixStream::connect(&socket).expect("the socket file listens");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sock"))
        .collect();
    assert_eq!(names, ["roll.sock"], "the socket's temporary name is gone");
    let second = serve(&socket).wait_with_output().await.unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("is in use"), "{stderr}");
    drop(first);

    // A socket file nobody listens on, as a killed runtime leaves it.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(std::os::unix::net::UnixStream::connect(&stale).is_err());
    let _third = serve(&stale);
    tokio::time::timeout(STUCK, async {
        while std::os::unix::net::UnixStream::connect(&stale).is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the stale socket is replaced by a listening one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_on_the_roll_socket_both_get_the_approval_and_the_first_answer_wins() {
    let (dir, path) = store();
    let socket = dir.path().join("roll.sock");
    let mut runtime = tokio::process::Command::new(BIN)
        .args(["serve", "--roll-socket"])
        .arg(&socket)
        .arg("--store")
        .arg(format!("sqlite:{}", path.display()))
        .env("AGENTWIRE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::timeout(STUCK, async {
        while !socket.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the runtime listens");
    let mut first = Host::connect(&socket, &path).await;
    let mut second = Host::connect(&socket, &path).await;
    first.open("1.3", &HANDLERS).await;
    second.open("1.3", &HANDLERS).await;
    let thread = first.create_thread("shared").await;
    second
        .call("thread.open", json!({"threadId": thread}))
        .await
        .unwrap();
    let turn = first.start_turn(&thread, "/approve ls").await;
    let to_first = first.wait_for(|f| f["method"] == "approval.request").await;
    let to_second = second.wait_for(|f| f["method"] == "approval.request").await;
    let interaction = to_first["params"]["interactionId"].clone();
    assert_eq!(to_second["params"]["interactionId"], interaction);

    // The first host answers; the second is told the request is withdrawn, and its late
    // answer changes nothing.
    first
        .send(&json!({"jsonrpc": "2.0", "id": to_first["id"], "result": {"decision": "approve"}}))
        .await;
    let cancel = second
        .wait_for(|f| f["method"] == "runtime.serverRequest.cancel")
        .await;
    assert_eq!(cancel["params"]["interactionId"], interaction);
    second
        .send(&json!({"jsonrpc": "2.0", "id": to_second["id"], "result": {"decision": "reject"}}))
        .await;
    for host in [&mut first, &mut second] {
        let events = host.turn_events(&turn).await;
        let resolved = events
            .iter()
            .find(|e| e["event"]["type"] == "approval.resolved")
            .expect("both see the resolution");
        assert_eq!(resolved["event"]["resolution"]["decision"], "approve");
        let tool = events
            .iter()
            .find(|e| e["event"]["type"] == "tool.completed")
            .expect("the tool runs");
        assert_eq!(tool["event"]["outcome"]["kind"], "success");
        assert_eq!(events.last().unwrap()["event"]["type"], "turn.completed");
    }
    drop((first, second));
    let pid = i32::try_from(runtime.id().unwrap()).unwrap();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(STUCK, runtime.wait())
        .await
        .expect("the runtime stops on SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!socket.exists(), "the socket file is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_inbound_bound_are_answered_as_roll_errors() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.5", &HANDLERS).await;
    // Answers of some 15 KB each, so that unread ones fill the pipe and the write queue.
    for n in 0..50 {
        host.create_thread(&format!("{n:03}{}", "t".repeat(190)))
            .await;
    }
    const SENT: u64 = 2_400;
    let mut lines = Vec::new();
    for id in 0..SENT {
        let request = json!({"jsonrpc": "2.0", "id": format!("l{id}"), "method": "thread.list", "params": {}});
        lines.extend(serde_json::to_vec(&request).unwrap());
        lines.push(b'\n');
    }
    // All at once, read only after a while: the runtime's queues fill.
    host.send_raw(&lines).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut overloaded = 0;
    for _ in 0..SENT {
        // `read` checks every frame against the 1.5 export.
        let frame = host.read().await;
        if let Some(error) = frame.get("error") {
            assert_eq!(error["code"], -32000, "{frame}");
            assert_eq!(roll_code(error), "INTERNAL_ERROR");
            assert_eq!(error["data"]["retryable"], true);
            assert!(error["data"]["details"]["retryAfterMs"].as_u64().unwrap() > 0);
            overloaded += 1;
        }
    }
    assert!(overloaded > 0, "no request was over the bound");
    assert_eq!(host.finish().await.code(), Some(0));
}

/// The runtime's resident set in KiB, from `/proc`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The resident set `agentwire serve` may reach while attachment chunks stream through it,
/// whatever their total (docs/roll-runtime.md, "Memory").
const CHUNK_TRAFFIC_RSS_BOUND_KIB: u64 = 160 * 1024;

/// Chunks sent before the resident set is taken as the baseline (allocator arenas warm up).
const WARM_UP: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachment_chunk_traffic_leaves_the_runtimes_memory_bounded() {
    use base64::Engine as _;
    let (_dir, path) = store();
    let mut host = Host::start(&path, &[]).await;
    host.open("1.5", &HANDLERS).await;
    let thread = host.create_thread("chunks").await;
    let pid = host.child.as_ref().unwrap().id().unwrap();
    // Chunks at the protocol's limit, 128 MiB of base64 in all: a runtime that kept anything of
    // each (a retry cache holding params did) grows by about that much after the warm-up.
    let raw: Vec<u8> = (0..agentwire_roll::constants::MAX_ATTACHMENT_CHUNK_BYTES)
        .map(|i| (i % 251) as u8)
        .collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&raw);
    let cycles = (128 << 20) / encoded.len() + 1;
    let (mut warm, mut peak) = (0, 0);
    for cycle in 0..cycles {
        let stage = json!({"requestId": uuid(), "threadId": thread, "fileName": "blob.png",
            "mediaType": "image/png", "bytes": raw.len(), "sha256": sha256_hex(&raw),
            "source": "chunks"});
        let staged = host.call("attachment.stage", stage).await.unwrap();
        let id = staged["attachmentId"].clone();
        let chunk = json!({"requestId": uuid(), "threadId": thread, "attachmentId": id,
            "sequence": 0, "dataBase64": encoded});
        host.call("attachment.chunk", chunk).await.unwrap();
        let release = json!({"requestId": uuid(), "threadId": thread, "attachmentId": id});
        host.call("attachment.release", release).await.unwrap();
        if cycle == WARM_UP {
            warm = rss_kib(pid);
        }
        peak = peak.max(rss_kib(pid));
    }
    assert!(
        peak < CHUNK_TRAFFIC_RSS_BOUND_KIB,
        "the runtime reached {peak} KiB over {cycles} chunks"
    );
    let traffic_after_warm_up = (cycles - WARM_UP) * encoded.len() / 1024;
    assert!(
        peak - warm < traffic_after_warm_up as u64 / 4,
        "the runtime grew from {warm} to {peak} KiB over {traffic_after_warm_up} KiB of chunks"
    );
    assert_eq!(host.finish().await.code(), Some(0));
}

/// The points of a session at which the host dies in `a_dead_host_leaves_no_runtime_behind`.
#[derive(Debug, Clone, Copy)]
enum DeathPoint {
    MidHandshake,
    MidTurn,
    ApprovalPending,
    MidReplay,
    MidBurst,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_host_leaves_no_runtime_behind_and_its_store_consistent() {
    use DeathPoint::*;
    for point in [MidHandshake, MidTurn, ApprovalPending, MidReplay, MidBurst] {
        let (_dir, path) = store();
        let mut host = Host::start(&path, &[]).await;
        match point {
            MidHandshake => {
                host.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersions\":[\"1.5\"],")
                    .await;
            }
            MidTurn | ApprovalPending | MidReplay | MidBurst => {
                host.open("1.5", &HANDLERS).await;
                let thread = host.create_thread("dies").await;
                let text = match point {
                    MidTurn => "/slow 500",
                    ApprovalPending => "/approve rm -rf build",
                    _ => "/burst 5000",
                };
                let turn = host.start_turn(&thread, text).await;
                match point {
                    ApprovalPending => {
                        host.wait_for(|f| f["method"] == "approval.request").await;
                    }
                    MidReplay => {
                        host.turn_events(&turn).await;
                        host.send_request(
                            "runtime.events.resume",
                            json!({"threadId": thread, "afterCursor": null}),
                        )
                        .await;
                        // Some of the replay is on its way.
                        host.read().await;
                    }
                    _ => {
                        host.read().await;
                    }
                }
            }
        }
        let mut runtime = host.die();
        let status = tokio::time::timeout(Duration::from_secs(5), runtime.wait())
            .await
            .unwrap_or_else(|_| panic!("{point:?}: the runtime outlived its host by 5 s"))
            .unwrap();
        assert_eq!(status.code(), Some(0), "{point:?}");

        // The store is consistent: a new runtime serves it, nothing left running or pending.
        let mut next = Host::start(&path, &[]).await;
        next.open("1.5", &HANDLERS).await;
        let list = next.call("thread.list", json!({})).await.unwrap();
        for item in list["items"].as_array().unwrap() {
            let snapshot = next
                .call("thread.snapshot", json!({"threadId": item["id"]}))
                .await
                .unwrap();
            assert!(snapshot["activeTurn"].is_null(), "{point:?}: {snapshot}");
            assert_eq!(snapshot["pendingInteractions"], json!([]), "{point:?}");
        }
        assert_eq!(next.finish().await.code(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_announced_idempotency_limit_is_the_one_the_runtime_keeps() {
    let (_dir, path) = store();
    let mut host = Host::start(&path, &["--idempotency-entries", "2"]).await;
    let init = host.open("1.5", &HANDLERS).await;
    assert_eq!(init["limits"]["idempotencyCacheEntries"], 2);
    let first = uuid();
    let create = |id: &str| json!({"requestId": id, "title": "kept"});
    let a = host.call("thread.create", create(&first)).await.unwrap();
    assert_eq!(
        host.call("thread.create", create(&first)).await.unwrap(),
        a,
        "a retry is answered again"
    );
    for _ in 0..2 {
        host.call("thread.create", create(&uuid())).await.unwrap();
    }
    // Two later mutations evicted the first: its retry runs again.
    let again = host.call("thread.create", create(&first)).await.unwrap();
    assert_ne!(again["thread"]["id"], a["thread"]["id"]);
    assert_eq!(host.finish().await.code(), Some(0));
}

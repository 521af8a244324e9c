//! Projection: each rule of the protocol, and for any valid 1.5 message, a projection to every
//! older version that is valid there (or refused for a documented reason).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::ProtocolVersion::{self, *};
use agentwire_roll::project::{
    ProjectionError, project_event_envelope, project_message, project_server_request_cancel_params,
    project_server_request_params, project_thread_snapshot,
};
use agentwire_roll::schema;
use proptest::prelude::*;
use serde_json::{Value, json};

const T: &str = "00000000-0000-4000-8000-000000000002";
const U: &str = "00000000-0000-4000-8000-000000000003";
const CURSOR: &str =
    "rte1:00000000-0000-4000-8000-000000000008:0:00000000-0000-4000-8000-000000000007";

fn response(result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": result})
}

fn snapshot(status: &str, attachment: bool, interactions: bool, app: Value) -> Value {
    let mut parts = vec![json!({"type": "text", "text": "hi"})];
    if attachment {
        parts.push(json!({"type": "attachment", "mediaType": "image/png", "bytes": 3}));
    }
    let pending: Vec<Value> = if interactions {
        vec![
            json!({"method": "approval.request", "interactionId": "00000000-0000-4000-8000-000000000006", "threadId": T,
            "turnId": U, "expiresAt": "2026-07-29T12:10:00.000Z", "sensitivity": "normal", "approvalId": "00000000-0000-4000-8000-000000000005"}),
        ]
    } else {
        vec![]
    };
    json!({
        "thread": {"id": T, "createdAt": "2026-07-28T12:00:00Z", "updatedAt": "2026-07-28T12:00:00Z", "messageCount": 1},
        "messages": {"items": [{"sequence": 0, "role": "user", "createdAt": "2026-07-28T12:00:00Z", "parts": parts}], "nextBeforeSequence": null},
        "operations": {"items": [{"id": "00000000-0000-4000-8000-000000000009", "sequence": 0, "toolCallId": "c", "agentName": "a", "toolName": "t",
            "createdAt": "2026-07-28T12:00:00Z", "outcome": {"kind": "success"}, "display": "ok", "appOutput": app}], "nextBeforeSequence": 0},
        "activeTurn": {"id": U, "status": status, "startedAt": "2026-07-28T12:00:00Z"},
        "pendingApprovals": [],
        "pendingInteractions": pending,
        "transcriptCompleteness": "complete",
        "eventCursor": CURSOR
    })
}

fn recovery() -> Value {
    json!({
        "thread": {"id": T, "title": "t".repeat(1024), "createdAt": "2026-07-28T12:00:00Z", "updatedAt": "2026-07-28T12:00:00Z", "messageCount": 9},
        "messages": {"items": [], "nextBeforeSequence": null}, "operations": {"items": [], "nextBeforeSequence": null},
        "activeTurn": {"id": U, "status": "waiting-for-user", "startedAt": "2026-07-28T12:00:00Z"},
        "pendingApprovals": [], "pendingInteractions": [], "transcriptCompleteness": "complete",
        "eventCursor": null, "recoveryProjection": true
    })
}

fn event(durable: bool, event: Value) -> Value {
    let mut params = json!({"protocolVersion": "1.5", "runtimeInstanceId": "00000000-0000-4000-8000-000000000001", "sequence": 3,
        "timestamp": "2026-07-30T12:00:00.000Z", "threadId": T, "turnId": U, "event": event});
    if durable {
        params["durability"] = json!("durable");
        params["eventId"] = json!("00000000-0000-4000-8000-000000000007");
        params["cursor"] = json!(CURSOR);
    } else {
        params["durability"] = json!("ephemeral");
    }
    json!({"jsonrpc": "2.0", "method": "runtime.event", "params": params})
}

#[test]
fn snapshot_rules_per_version() {
    let full = snapshot(
        "waiting-for-user",
        true,
        true,
        json!({"status": "available", "schemaId": "s", "schemaVersion": 1}),
    );
    assert!(schema::validate_definition(V1_5, "sharedThreadSnapshot", &full).is_ok());
    let v14 = project_thread_snapshot(&full, V1_4);
    assert!(v14["operations"]["items"][0].get("appOutput").is_none());
    assert_eq!(
        v14["messages"]["items"][0]["parts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let v13 = project_thread_snapshot(&full, V1_3);
    assert_eq!(
        v13["messages"]["items"][0]["parts"],
        json!([{"type": "text", "text": "hi"}])
    );
    assert_eq!(v13["eventCursor"], json!(CURSOR));
    let v12 = project_thread_snapshot(&full, V1_2);
    assert!(v12.get("eventCursor").is_none());
    assert_eq!(v12["activeTurn"]["status"], "waiting-for-user");
    assert_eq!(v12["pendingInteractions"].as_array().unwrap().len(), 1);
    let v11 = project_thread_snapshot(&full, V1_1);
    assert!(v11.get("pendingInteractions").is_none());
    assert_eq!(v11["activeTurn"]["status"], "running");
    for (version, projected) in [
        (V1_4, v14),
        (V1_3, v13),
        (V1_2, v12),
        (V1_1, v11.clone()),
        (V1_0, project_thread_snapshot(&full, V1_0)),
    ] {
        assert_eq!(
            schema::validate_definition(version, "sharedThreadSnapshot", &projected),
            Ok(()),
            "{version}"
        );
    }
    assert_eq!(project_thread_snapshot(&full, V1_0), v11);
}

#[test]
fn a_recovery_snapshot_becomes_an_ordinary_one_below_1_3() {
    let projected = project_thread_snapshot(&recovery(), V1_2);
    assert!(projected.get("recoveryProjection").is_none());
    assert!(projected.get("eventCursor").is_none());
    assert_eq!(
        schema::validate_definition(V1_2, "sharedThreadSnapshot", &projected),
        Ok(())
    );
    assert_eq!(
        schema::validate_definition(
            V1_3,
            "sharedThreadSnapshot",
            &project_thread_snapshot(&recovery(), V1_3)
        ),
        Ok(())
    );
}

#[test]
fn event_rules_per_version() {
    let completed = json!({"type": "tool.completed", "toolCallId": "c", "agentName": "a", "toolName": "t", "display": "ok"});
    let message = event(true, completed);
    let v15 = project_event_envelope(&message["params"], V1_5).unwrap();
    assert_eq!(v15["event"]["appOutput"], json!({"status": "not_provided"}));
    let v14 = project_event_envelope(&v15, V1_4).unwrap();
    assert!(v14["event"].get("appOutput").is_none());
    assert_eq!(v14["cursor"], json!(CURSOR));
    assert_eq!(v14["protocolVersion"], "1.4");
    let v12 = project_event_envelope(&v15, V1_2).unwrap();
    for key in ["durability", "eventId", "cursor"] {
        assert!(v12.get(key).is_none(), "{key}");
    }
    let resolved = event(
        true,
        json!({"type": "approval.resolved", "approvalId": "00000000-0000-4000-8000-000000000005",
        "resolution": {"status": "expired"}}),
    );
    assert!(project_event_envelope(&resolved["params"], V1_1).is_ok());
    let err = project_event_envelope(&resolved["params"], V1_0).unwrap_err();
    assert_eq!(err.code(), "roll.project.unsupported");
}

#[test]
fn server_requests_and_cancels() {
    let params = json!({"interactionId": "00000000-0000-4000-8000-000000000006", "threadId": T, "turnId": U,
        "expiresAt": "2026-07-29T12:10:00.000Z", "sensitivity": "normal",
        "approval": {"id": "00000000-0000-4000-8000-000000000005", "turnId": U, "agentName": "a", "toolName": "t", "preview": {}}});
    assert_eq!(
        project_server_request_params("approval.request", &params, V1_2).unwrap(),
        params
    );
    let legacy = project_server_request_params("approval.request", &params, V1_1).unwrap();
    assert_eq!(
        legacy,
        json!({"threadId": T, "approval": params["approval"], "expiresAt": "2026-07-29T12:10:00.000Z"})
    );
    assert_eq!(
        schema::validate_definition(V1_1, "approvalRequestParams", &legacy),
        Ok(())
    );
    assert!(matches!(
        project_server_request_params("userInput.request", &params, V1_1),
        Err(ProjectionError::Unsupported { .. })
    ));
    assert!(matches!(
        project_server_request_params("approval.request", &params, V1_0),
        Err(ProjectionError::Unsupported { .. })
    ));

    let cancel = json!({"interactionId": "00000000-0000-4000-8000-000000000006", "serverRequestId": "runtime:1",
        "approvalId": "00000000-0000-4000-8000-000000000005", "reason": "turn-cancelled"});
    assert_eq!(
        project_server_request_cancel_params(&cancel, V1_3).unwrap(),
        json!({"interactionId": "00000000-0000-4000-8000-000000000006", "reason": "turn-cancelled"})
    );
    assert_eq!(
        project_server_request_cancel_params(&cancel, V1_1).unwrap(),
        json!({"serverRequestId": "runtime:1", "approvalId": "00000000-0000-4000-8000-000000000005", "reason": "turn-cancelled"})
    );
    assert!(project_server_request_cancel_params(&cancel, V1_0).is_err());
    let wire = json!({"interactionId": "00000000-0000-4000-8000-000000000006", "reason": "x"});
    assert_eq!(
        project_server_request_cancel_params(&wire, V1_1),
        Err(ProjectionError::MissingServerRequestId)
    );
}

#[test]
fn whole_messages_and_refusals() {
    let init = response(
        json!({"protocolVersion": "1.5", "runtimeInstanceId": "00000000-0000-4000-8000-000000000001",
        "server": {"name": "r", "version": "1", "runtimeVersion": "1"},
        "features": ["thread-management", "attachments", "app-output"],
        "limits": {"maxFrameBytes": 4194304, "maxPageSize": 500, "eventReplay": true, "idempotencyCacheEntries": 10000,
            "maxAttachmentBytes": 16777216, "maxAttachmentChunkBytes": 2097152, "maxTurnAttachments": 8, "maxStagedAttachments": 16}}),
    );
    let v12 = project_message(&init, V1_5, V1_2).unwrap();
    assert_eq!(v12["result"]["features"], json!(["thread-management"]));
    assert_eq!(v12["result"]["limits"]["eventReplay"], json!(false));
    assert_eq!(
        project_message(&init, V1_2, V1_5),
        Err(ProjectionError::Upward {
            from: V1_2,
            to: V1_5
        })
    );
    let attach = json!({"jsonrpc": "2.0", "id": 1, "method": "turn.start", "params": {"requestId": "00000000-0000-4000-8000-00000000000a",
        "threadId": T, "turnId": U, "input": {"text": "", "attachments": ["00000000-0000-4000-8000-0000000000a1"]}}});
    assert!(matches!(
        project_message(&attach, V1_5, V1_3),
        Err(ProjectionError::Unsupported { .. })
    ));
    let result_get = json!({"jsonrpc": "2.0", "id": 1, "method": "operation.result.get", "params": {"threadId": T, "operationId": U}});
    assert!(matches!(
        project_message(&result_get, V1_5, V1_4),
        Err(ProjectionError::Unsupported { .. })
    ));
    let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "gap", "data": {"rollCode": "EVENT_CURSOR_GAP", "retryable": false}}});
    assert!(project_message(&error, V1_5, V1_3).is_ok());
    assert!(matches!(
        project_message(&error, V1_5, V1_2),
        Err(ProjectionError::Unsupported { .. })
    ));
    assert!(matches!(
        project_message(&json!({"jsonrpc": "2.0"}), V1_5, V1_2),
        Err(ProjectionError::InvalidInput { .. })
    ));
    // A result whose only producers are missing in the target is refused, not mangled.
    let decision = json!({"jsonrpc": "2.0", "id": "runtime:1", "result": {"decision": "approve"}});
    assert!(project_message(&decision, V1_2, V1_1).is_ok());
    let err = project_message(&decision, V1_2, V1_0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a result of approval.request cannot be projected to 1.0"
    );
    let ack = json!({"jsonrpc": "2.0", "id": 2, "result": {"revision": 1, "acceptedServerRequestMethods": []}});
    assert_eq!(
        project_message(&ack, V1_5, V1_1).unwrap_err().code(),
        "roll.project.unsupported"
    );
}

fn status() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("running"),
        Just("cancelling"),
        Just("waiting-for-user")
    ]
}

fn app_output() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"status": "not_provided"})),
        Just(json!({"status": "denied"})),
        (1u32..5).prop_map(|v| json!({"status": "available", "schemaId": "s", "schemaVersion": v})),
        Just(json!({"status": "rejected", "reason": "credential_field", "field": "token"})),
    ]
}

fn event_payload() -> impl Strategy<Value = (bool, Value)> {
    prop_oneof![
        Just((true, json!({"type": "turn.started"}))),
        Just((false, json!({"type": "message.delta", "streamId": "00000000-0000-4000-8000-000000000004", "delta": "d"}))),
        Just((true, json!({"type": "message.completed", "streamId": "00000000-0000-4000-8000-000000000004", "text": "t"}))),
        Just((false, json!({"type": "tool.output", "toolCallId": "c", "agentName": "a", "toolName": "t", "stream": "stderr", "delta": "x"}))),
        app_output().prop_map(|app| (true, json!({"type": "tool.completed", "toolCallId": "c", "agentName": "a", "toolName": "t", "display": null, "appOutput": app}))),
        Just((true, json!({"type": "turn.failed", "stage": "plan", "message": "m"}))),
        Just((true, json!({"type": "approval.resolved", "approvalId": "00000000-0000-4000-8000-000000000005", "resolution": {"status": "cancelled", "reason": "r"}}))),
    ]
}

fn server_request() -> impl Strategy<Value = Value> {
    let approval = json!({"interactionId": "00000000-0000-4000-8000-000000000006", "threadId": T, "turnId": U,
        "expiresAt": "2026-07-29T12:10:00.000Z", "sensitivity": "normal",
        "approval": {"id": "00000000-0000-4000-8000-000000000005", "turnId": U, "agentName": "a", "toolName": "t",
            "preview": {"explanation": "why"}}});
    prop_oneof![
        Just(json!({"jsonrpc": "2.0", "id": "runtime:1", "method": "approval.request", "params": approval})),
        (1usize..=16).prop_map(|n| {
            let controls: Vec<Value> =
                (0..n).map(|i| json!({"type": "boolean", "id": format!("c{i}"), "label": "L", "required": false})).collect();
            json!({"jsonrpc": "2.0", "id": 9, "method": "userInput.request", "params": {"interactionId": "00000000-0000-4000-8000-000000000006",
                "threadId": T, "turnId": U, "expiresAt": "2026-07-29T12:10:00.000Z", "sensitivity": "normal", "controls": controls}})
        }),
        Just(json!({"jsonrpc": "2.0", "method": "runtime.serverRequest.cancel",
            "params": {"interactionId": "00000000-0000-4000-8000-000000000006", "reason": "turn-cancelled"}})),
    ]
}

fn initialize_or_operation() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::sample::subsequence(
            vec!["thread-management", "snapshots", "turns", "approvals", "attachments", "app-output"], 0..=6
        )
        .prop_map(|features| response(json!({"protocolVersion": "1.5", "runtimeInstanceId": "00000000-0000-4000-8000-000000000001",
            "server": {"name": "r", "version": "1", "runtimeVersion": "1"}, "features": features,
            "limits": {"maxFrameBytes": 4194304, "maxPageSize": 500, "eventReplay": true, "idempotencyCacheEntries": 10000,
                "maxAttachmentBytes": 16777216, "maxAttachmentChunkBytes": 2097152, "maxTurnAttachments": 8, "maxStagedAttachments": 16}}))),
        app_output().prop_map(|app| response(json!({"operation": {"id": "00000000-0000-4000-8000-000000000009", "sequence": 0,
            "toolCallId": "c", "agentName": "a", "toolName": "t", "createdAt": "2026-07-28T12:00:00Z", "outcome": {"kind": "success"},
            "display": "ok", "appOutput": app}}))),
    ]
}

fn message_1_5() -> impl Strategy<Value = Value> {
    prop_oneof![
        (status(), any::<bool>(), any::<bool>(), app_output())
            .prop_map(|(s, a, i, app)| response(snapshot(s, a, i, app))),
        Just(response(recovery())),
        event_payload().prop_map(|(durable, payload)| event(durable, payload)),
        server_request(),
        initialize_or_operation(),
    ]
}
fn older() -> impl Strategy<Value = ProtocolVersion> {
    prop_oneof![
        Just(V1_0),
        Just(V1_1),
        Just(V1_2),
        Just(V1_3),
        Just(V1_4),
        Just(V1_5)
    ]
}

proptest! {
    #[test]
    fn projecting_a_valid_1_5_message_yields_a_valid_message(message in message_1_5(), to in older()) {
        prop_assert_eq!(schema::validate_message(V1_5, &message), Ok(()));
        match project_message(&message, V1_5, to) {
            Ok(projected) => prop_assert!(schema::is_valid(to, &projected)),
            Err(ProjectionError::Unsupported { .. }) => {
                // Only what the target has no form for: approval.resolved, server requests and
                // cancels below 1.1, userInput.request below 1.2.
                let method = message["method"].as_str().unwrap_or_default();
                let resolved = message["params"]["event"]["type"] == "approval.resolved";
                let server = matches!(method, "approval.request" | "runtime.serverRequest.cancel");
                prop_assert!(
                    (to == V1_0 && (resolved || server)) || (method == "userInput.request" && to < V1_2),
                    "{message}"
                );
            }
            Err(ProjectionError::MissingServerRequestId) => {
                prop_assert_eq!(to, V1_1);
                prop_assert_eq!(&message["method"], "runtime.serverRequest.cancel");
            }
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }
}

//! Every length and count limit of the schema, at its boundary and one past it, per definition.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::ProtocolVersion::{self, *};
use agentwire_roll::constants::*;
use agentwire_roll::schema::validate_definition;
use serde_json::{Value, json};

const T: &str = "00000000-0000-4000-8000-000000000002";
const U: &str = "00000000-0000-4000-8000-000000000003";
const R: &str = "00000000-0000-4000-8000-00000000000a";
const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// (version, definition, value at the limit, value one past it)
fn cases() -> Vec<(ProtocolVersion, &'static str, Value, Value)> {
    let chunk = |n: usize| json!({"requestId": R, "threadId": T, "attachmentId": U, "sequence": 0, "dataBase64": "A".repeat(n)});
    let stage = |name: String, bytes: u64| json!({"requestId": R, "threadId": T, "fileName": name, "mediaType": "image/png", "bytes": bytes, "sha256": SHA, "source": "chunks"});
    let turn = |n: usize| {
        let ids: Vec<String> = (0..n)
            .map(|i| format!("00000000-0000-4000-8000-0000000001{i:02x}"))
            .collect();
        json!({"requestId": R, "threadId": T, "turnId": U, "input": {"text": "", "attachments": ids}})
    };
    let form = |controls: Value| json!({"interactionId": U, "threadId": T, "turnId": U, "expiresAt": "2026-07-29T12:10:00Z", "sensitivity": "normal", "controls": controls});
    let booleans = |n: usize| {
        Value::Array((0..n).map(|i| json!({"type": "boolean", "id": format!("b{i}"), "label": "B", "required": false})).collect())
    };
    let choice = |n: usize| {
        let options: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("o{i}"), "label": "O"}))
            .collect();
        json!([{"type": "choice", "id": "c", "label": "C", "required": false, "multiple": true, "options": options}])
    };
    let text = |field: &str, n: usize| {
        let mut control = json!({"type": "text", "id": "t", "label": "T", "required": false});
        control[field] = json!("x".repeat(n));
        json!([control])
    };
    let recovery = |created: String| {
        json!({"thread": {"id": T, "createdAt": created, "updatedAt": "2026-07-30T12:00:00Z", "messageCount": 0},
            "messages": {"items": [], "nextBeforeSequence": null}, "operations": {"items": [], "nextBeforeSequence": null},
            "pendingApprovals": [], "pendingInteractions": [], "transcriptCompleteness": "complete", "eventCursor": null, "recoveryProjection": true})
    };
    // 2026-07-30T12:00:00.<fraction>Z is 25 characters around the fraction.
    let timestamp = |n: usize| format!("2026-07-30T12:00:00.{}Z", "1".repeat(n - 21));
    let cursor = |n: usize| {
        let prefix = "rte1:00000000-0000-4000-8000-000000000008:";
        let suffix = ":00000000-0000-4000-8000-000000000007";
        format!(
            "{prefix}1{}{suffix}",
            "0".repeat(n - prefix.len() - suffix.len() - 1)
        )
    };
    let resume = |c: String| json!({"threadId": T, "afterCursor": c});
    let app = |n: usize| {
        json!({"operation": {"id": U, "sequence": 0, "toolCallId": "c", "agentName": "a", "toolName": "t",
        "createdAt": "2026-07-30T12:00:00Z", "outcome": {"kind": "success"}, "display": null,
        "appOutput": {"status": "available", "schemaId": "s".repeat(n), "schemaVersion": 1}}})
    };
    vec![
        (
            V1_4,
            "attachmentChunkParams",
            chunk(MAX_ATTACHMENT_CHUNK_BASE64_CHARS as usize),
            chunk(MAX_ATTACHMENT_CHUNK_BASE64_CHARS as usize + 1),
        ),
        (
            V1_4,
            "attachmentStageParams",
            stage(
                "f".repeat(MAX_ATTACHMENT_FILE_NAME_CHARS),
                MAX_ATTACHMENT_BYTES,
            ),
            stage("f".repeat(MAX_ATTACHMENT_FILE_NAME_CHARS + 1), 1),
        ),
        (
            V1_4,
            "attachmentStageParams",
            stage("a.png".into(), MAX_ATTACHMENT_BYTES),
            stage("a.png".into(), MAX_ATTACHMENT_BYTES + 1),
        ),
        (
            V1_4,
            "turnStartParams",
            turn(MAX_TURN_ATTACHMENTS),
            turn(MAX_TURN_ATTACHMENTS + 1),
        ),
        (
            V1_0,
            "threadCreateParams",
            json!({"requestId": R, "title": "t".repeat(200)}),
            json!({"requestId": R, "title": "t".repeat(201)}),
        ),
        (
            V1_0,
            "threadListParams",
            json!({"limit": MAX_PAGE_LIMIT}),
            json!({"limit": MAX_PAGE_LIMIT + 1}),
        ),
        (
            V1_0,
            "threadSnapshotParams",
            json!({"threadId": T, "limit": MAX_PAGE_LIMIT}),
            json!({"threadId": T, "limit": MAX_PAGE_LIMIT + 1}),
        ),
        (
            V1_2,
            "userInputRequestParams",
            form(booleans(MAX_USER_INPUT_CONTROLS)),
            form(booleans(MAX_USER_INPUT_CONTROLS + 1)),
        ),
        (
            V1_2,
            "userInputRequestParams",
            form(choice(MAX_USER_INPUT_OPTIONS)),
            form(choice(MAX_USER_INPUT_OPTIONS + 1)),
        ),
        (
            V1_2,
            "userInputRequestParams",
            form(text("id", MAX_USER_INPUT_ID_CHARS)),
            form(text("id", MAX_USER_INPUT_ID_CHARS + 1)),
        ),
        (
            V1_2,
            "userInputRequestParams",
            form(text("label", MAX_USER_INPUT_LABEL_CHARS)),
            form(text("label", MAX_USER_INPUT_LABEL_CHARS + 1)),
        ),
        (
            V1_2,
            "userInputRequestParams",
            form(text("description", MAX_USER_INPUT_DESCRIPTION_CHARS)),
            form(text("description", MAX_USER_INPUT_DESCRIPTION_CHARS + 1)),
        ),
        (
            V1_2,
            "clientCapabilitiesSetParams",
            json!({"revision": 1, "serverRequestMethods": (0..MAX_CAPABILITY_METHODS).map(|i| format!("m{i}")).collect::<Vec<_>>()}),
            json!({"revision": 1, "serverRequestMethods": (0..=MAX_CAPABILITY_METHODS).map(|i| format!("m{i}")).collect::<Vec<_>>()}),
        ),
        (
            V1_3,
            "sharedThreadSnapshot",
            recovery(timestamp(MAX_RECOVERY_TIMESTAMP_CHARS)),
            recovery(timestamp(MAX_RECOVERY_TIMESTAMP_CHARS + 1)),
        ),
        (
            V1_3,
            "runtimeEventsResumeParams",
            resume(cursor(MAX_EVENT_CURSOR_CHARS)),
            resume(cursor(MAX_EVENT_CURSOR_CHARS + 1)),
        ),
        (V1_5, "operationGetResult", app(256), app(257)),
    ]
}

#[test]
fn each_limit_accepts_its_boundary_and_rejects_one_past_it() {
    for (version, definition, at, past) in cases() {
        assert_eq!(
            validate_definition(version, definition, &at),
            Ok(()),
            "{definition} at the limit"
        );
        assert!(
            validate_definition(version, definition, &past).is_err(),
            "{definition} past the limit"
        );
    }
}

#[test]
fn the_limit_constants_have_the_protocol_values() {
    assert_eq!(MAX_DURABLE_EVENT_RECORD_BYTES, 16_777_216);
    assert_eq!(MIN_CLIENT_INBOUND_FRAME_BYTES_V13, 17_825_792);
    assert_eq!(
        (DEFAULT_REPLAY_BUFFER_RECORDS, DEFAULT_REPLAY_BUFFER_BYTES),
        (10_000, 33_554_432)
    );
    assert_eq!(MAX_DURABLE_RECORDS_PER_THREAD, 10_000);
    assert_eq!(
        (MAX_ATTACHMENT_BYTES, MAX_ATTACHMENT_CHUNK_BYTES),
        (16_777_216, 2_097_152)
    );
    assert_eq!((MAX_TURN_ATTACHMENTS, MAX_STAGED_ATTACHMENTS), (8, 16));
    assert_eq!(DEFAULT_MAX_FRAME_BYTES, 4_194_304);
    // 2 MiB of data is 2,796,204 base64 characters; the limit leaves the padding room upstream has.
    assert!(MAX_ATTACHMENT_CHUNK_BASE64_CHARS >= MAX_ATTACHMENT_CHUNK_BYTES.div_ceil(3) * 4);
}

#[test]
fn registries_per_version() {
    let count = |v: ProtocolVersion| v.methods().count();
    assert_eq!(
        [V1_0, V1_1, V1_2, V1_3, V1_4, V1_5].map(count),
        [13, 13, 14, 15, 19, 20]
    );
    let codes = |v: ProtocolVersion| v.error_codes().count();
    assert_eq!(
        [V1_0, V1_1, V1_2, V1_3, V1_4, V1_5].map(codes),
        [12, 12, 13, 15, 23, 23]
    );
    let features = |v: ProtocolVersion| v.features().count();
    assert_eq!([V1_0, V1_3, V1_4, V1_5].map(features), [8, 8, 9, 10]);
    assert_eq!(
        V1_1.required_server_request_methods(),
        &[agentwire_roll::ServerRequestMethod::ApprovalRequest]
    );
    assert!(V1_2.required_server_request_methods().is_empty());
    assert_eq!(V1_0.server_request_methods().count(), 0);
    assert_eq!(V1_2.server_request_methods().count(), 2);
    assert_eq!(V1_3.limits_keys().len(), 4);
    assert_eq!(V1_4.limits_keys().len(), 8);
    assert_eq!(
        agentwire_roll::SUPPORTED_VERSIONS.map(|v| v.as_str()),
        ["1.5", "1.4", "1.3", "1.2", "1.1", "1.0"]
    );
    assert_eq!(agentwire_roll::LATEST_VERSION, V1_5);
    assert_eq!(
        agentwire_roll::RollErrorCode::EVENT_CURSOR_GAP.jsonrpc_code(),
        -32000
    );
    assert_eq!(
        agentwire_roll::RollErrorCode::INVALID_PARAMS.jsonrpc_code(),
        -32602
    );
}

/// Each version's export has exactly the registry's methods, features and error codes.
#[test]
fn exports_agree_with_the_registries() {
    for version in agentwire_roll::SUPPORTED_VERSIONS {
        let export = agentwire_roll::schema::export(version);
        let defs = export["$defs"].as_object().unwrap();
        let requests: Vec<&str> = defs["clientRequest"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|branch| {
                let name = branch["$ref"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("#/$defs/");
                defs[name]["properties"]["method"]["const"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        let registry: Vec<&str> = version.methods().map(|m| m.as_str()).collect();
        assert_eq!(requests, registry, "{version}");
        let features: Vec<&str> = defs["sharedFeature"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            features,
            version.features().map(|f| f.as_str()).collect::<Vec<_>>(),
            "{version}"
        );
        let codes: Vec<&str> = defs["sharedRollErrorCode"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            codes,
            version
                .error_codes()
                .map(|c| c.as_str())
                .collect::<Vec<_>>(),
            "{version}"
        );
        let limits: Vec<&str> = defs["initializeResult"]["properties"]["limits"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(limits, version.limits_keys(), "{version}");
        let server: Vec<&str> = defs
            .get("serverRequest")
            .map(|s| {
                s["oneOf"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| {
                        let name = b["$ref"].as_str().unwrap().trim_start_matches("#/$defs/");
                        defs[name]["properties"]["method"]["const"]
                            .as_str()
                            .unwrap()
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            server,
            version
                .server_request_methods()
                .map(|m| m.as_str())
                .collect::<Vec<_>>(),
            "{version}"
        );
    }
}

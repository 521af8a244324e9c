//! Cross-validators: Ajv 8 (Node.js) and Python `jsonschema` give the same verdict as our
//! validator on every fixture, each of the three run against our exports of the schema in both
//! drafts (draft-07 and 2020-12). The fixtures are the ChainlessChain ones (peers' test data) and
//! the OpenClaw handshake frames of its protocol documentation.

use std::fmt::Write as _;

use agentwire_schema::{Draft, SchemaDocument, export};
use agentwire_testkit::{
    ajv_verdicts, chainlesschain_schema_path, openclaw_schema_path, peer_fixture,
    py_jsonschema_verdicts, read_json, write_temp_json,
};
use serde_json::{Value, json};

/// One instance and the verdict every validator must give.
struct Case {
    label: String,
    /// A definition name, or `None` for the root schema.
    definition: Option<&'static str>,
    value: Value,
    valid: bool,
}

fn case(label: &str, definition: Option<&'static str>, value: Value, valid: bool) -> Case {
    Case {
        label: label.to_owned(),
        definition,
        value,
        valid,
    }
}

/// Runs every case through our validator, Ajv and Python `jsonschema`, on the export of
/// `schema` to each draft, and returns how many verdicts were compared.
fn check(schema: &SchemaDocument, cases: &[Case]) -> usize {
    let mut definitions: Vec<Option<&'static str>> = Vec::new();
    for c in cases {
        if !definitions.contains(&c.definition) {
            definitions.push(c.definition);
        }
    }
    let mut disagreements = String::new();
    let mut compared = 0;
    for draft in [Draft::Draft07, Draft::Draft202012] {
        let exported = export(schema, draft).unwrap();
        let file = write_temp_json(&exported);
        let doc = SchemaDocument::from_value(exported).unwrap();
        for definition in &definitions {
            let group: Vec<&Case> = cases
                .iter()
                .filter(|c| c.definition == *definition)
                .collect();
            let values: Vec<Value> = group.iter().map(|c| c.value.clone()).collect();
            let validator = match definition {
                Some(name) => doc.validator_for(name).unwrap(),
                None => doc.validator().unwrap(),
            };
            // The two runners are separate processes: let them run side by side.
            let (ajv, py) = std::thread::scope(|scope| {
                let ajv = scope.spawn(|| ajv_verdicts(file.path(), *definition, &values));
                let py = py_jsonschema_verdicts(file.path(), *definition, &values);
                (ajv.join().unwrap(), py)
            });
            for ((c, ajv), py) in group.iter().zip(&ajv).zip(&py) {
                let issues = validator.validate(&c.value);
                let ours = validator.is_valid(&c.value);
                assert_eq!(
                    ours,
                    issues.is_empty(),
                    "{}: is_valid and validate disagree",
                    c.label
                );
                let target = definition.unwrap_or("(root)");
                for (who, verdict, detail) in [
                    ("agentwire", ours, format!("{issues:?}")),
                    ("ajv", ajv.valid, format!("{:?}", ajv.errors)),
                    ("python-jsonschema", py.valid, format!("{:?}", py.errors)),
                ] {
                    compared += 1;
                    if verdict != c.valid {
                        let _ = writeln!(
                            disagreements,
                            "{draft} {target} {}: {who} says {verdict}, expected {}: {detail}",
                            c.label, c.valid
                        );
                    }
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "verdicts disagree:\n{disagreements}"
    );
    compared
}

/// The cases of one ChainlessChain fixture file (`[{name, valid, value, injectUndefinedAt?}]`).
///
/// The `injectUndefinedAt` case expects rejection because the JavaScript test puts `undefined`
/// into the value, which JSON cannot carry: `JSON.stringify` drops the key, so the message as it
/// travels (and as every validator here receives it) is the fixture's `value`, which is valid.
fn chainlesschain_cases(file: &str, definition: &'static str) -> Vec<Case> {
    let path = peer_fixture(format!("chainlesschain/fixtures/test/fixtures/{file}.json"));
    let Value::Array(items) = read_json(path) else {
        panic!("{file} is not an array")
    };
    items
        .into_iter()
        .map(|item| {
            let name = item["name"].as_str().unwrap().to_owned();
            let valid = item.get("injectUndefinedAt").is_some() || item["valid"].as_bool().unwrap();
            case(
                &format!("{file}: {name}"),
                Some(definition),
                item["value"].clone(),
                valid,
            )
        })
        .collect()
}

#[test]
fn chainlesschain_fixtures() {
    let schema = SchemaDocument::open(chainlesschain_schema_path()).unwrap();
    let mut cases = chainlesschain_cases("approval-decisions", "ApprovalDecision");
    cases.extend(chainlesschain_cases(
        "agent-stream-events",
        "AgentStreamEventEnvelope",
    ));
    cases.extend(chainlesschain_cases(
        "canonical-agent-stream-payloads",
        "CanonicalAgentStreamEvent",
    ));
    assert_eq!(cases.len(), 9 + 7 + 18);
    // agent-stream-events has 5 invalid cases; its injectUndefinedAt one is valid on the wire.
    assert_eq!(cases.iter().filter(|c| !c.valid).count(), 4 + 4 + 5);
    // 34 instances, three validators, two drafts.
    assert_eq!(check(&schema, &cases), 34 * 3 * 2);
}

fn connect_params() -> Value {
    json!({
        "minProtocol": 4,
        "maxProtocol": 4,
        "client": {"id": "cli", "version": "1.2.3", "platform": "linux", "mode": "cli"},
        "caps": ["tool-events"],
        "role": "operator",
        "scopes": ["operator.read"]
    })
}

fn hello_ok() -> Value {
    json!({
        "type": "hello-ok",
        "protocol": 4,
        "server": {"version": "2026.9.1", "connId": "conn-1"},
        "features": {"methods": ["health", "chat.send"], "events": ["tick", "presence"]},
        "snapshot": {
            "presence": [],
            "health": {},
            "stateVersion": {"presence": 0, "health": 0},
            "uptimeMs": 12
        },
        "auth": {"role": "operator", "scopes": ["operator.read"]},
        "policy": {"maxPayload": 26_214_400, "maxBufferedBytes": 52_428_800, "tickIntervalMs": 30_000}
    })
}

/// `value` with the member at `pointer` set (added when absent).
fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    value
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .insert(key.to_owned(), new);
    value
}

fn without(mut value: Value, pointer: &str, key: &str) -> Value {
    value
        .pointer_mut(pointer)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .shift_remove(key);
    value
}

#[test]
fn openclaw_handshake_frames() {
    let schema = SchemaDocument::open(openclaw_schema_path()).unwrap();
    let connect =
        json!({"type": "req", "id": "c1", "method": "connect", "params": connect_params()});
    let hello = json!({"type": "res", "id": "c1", "ok": true, "payload": hello_ok()});
    let challenge = json!({
        "type": "event", "event": "connect.challenge",
        "payload": {"nonce": "1f0f5a0e-8c1f-4f7a-9a39-6c2b8f8f9b11", "ts": 1_767_225_600_000_u64}
    });
    let tick = json!({"type": "event", "event": "tick", "payload": {"ts": 1_767_225_630_000_u64}, "seq": 7});
    let device =
        json!({"id": "d1", "publicKey": "pk", "signature": "sig", "signedAt": 1, "nonce": "n"});
    let cases = vec![
        // Frames, against the root (a discriminated oneOf of req/res/event).
        case("connect request", None, connect.clone(), true),
        case("hello-ok response", None, hello.clone(), true),
        case("connect.challenge event", None, challenge, true),
        case("tick event", None, tick.clone(), true),
        case(
            "error response",
            None,
            json!({"type": "res", "id": "c1", "ok": false, "error": {"code": "INVALID_REQUEST", "message": "protocol mismatch", "details": {"code": "PROTOCOL_MISMATCH"}}}),
            true,
        ),
        case(
            "numeric request id",
            None,
            with(connect.clone(), "/id", json!(1)),
            false,
        ),
        case(
            "empty request id",
            None,
            with(connect.clone(), "/id", json!("")),
            false,
        ),
        case(
            "extra key on a request",
            None,
            with(connect.clone(), "/extra", json!(true)),
            false,
        ),
        case(
            "unknown frame type",
            None,
            with(tick.clone(), "/type", json!("evt")),
            false,
        ),
        case(
            "negative seq",
            None,
            with(tick.clone(), "/seq", json!(-1)),
            false,
        ),
        case(
            "response without ok",
            None,
            without(hello.clone(), "", "ok"),
            false,
        ),
        case(
            "error without message",
            None,
            json!({"type": "res", "id": "c1", "ok": false, "error": {"code": "X"}}),
            false,
        ),
        // The connect params, hello-ok payload and tick payload, against their definitions.
        case(
            "connect params",
            Some("ConnectParams"),
            connect_params(),
            true,
        ),
        case(
            "connect params with device",
            Some("ConnectParams"),
            with(connect_params(), "/device", device.clone()),
            true,
        ),
        case(
            "docs' client.mode operator",
            Some("ConnectParams"),
            with(connect_params(), "/client/mode", json!("operator")),
            false,
        ),
        case(
            "docs' client.id ios-node",
            Some("ConnectParams"),
            with(connect_params(), "/client/id", json!("ios-node")),
            false,
        ),
        case(
            "minProtocol 0",
            Some("ConnectParams"),
            with(connect_params(), "/minProtocol", json!(0)),
            false,
        ),
        case(
            "missing maxProtocol",
            Some("ConnectParams"),
            without(connect_params(), "", "maxProtocol"),
            false,
        ),
        case(
            "device without nonce",
            Some("ConnectParams"),
            with(connect_params(), "/device", without(device, "", "nonce")),
            false,
        ),
        case(
            "extra key in client",
            Some("ConnectParams"),
            with(connect_params(), "/client/extra", json!(1)),
            false,
        ),
        case("hello-ok", Some("HelloOk"), hello_ok(), true),
        case(
            "hello-ok without policy",
            Some("HelloOk"),
            without(hello_ok(), "", "policy"),
            false,
        ),
        case(
            "hello-ok with tickIntervalMs 0",
            Some("HelloOk"),
            with(hello_ok(), "/policy/tickIntervalMs", json!(0)),
            false,
        ),
        case(
            "hello-ok of another type",
            Some("HelloOk"),
            with(hello_ok(), "/type", json!("hello")),
            false,
        ),
        case(
            "hello-ok with an unknown server key",
            Some("HelloOk"),
            with(hello_ok(), "/server/canvasHostUrl", json!("http://x")),
            false,
        ),
        case("tick payload", Some("TickEvent"), json!({"ts": 0}), true),
        case(
            "tick payload with negative ts",
            Some("TickEvent"),
            json!({"ts": -1}),
            false,
        ),
        case(
            "tick payload with an extra key",
            Some("TickEvent"),
            json!({"ts": 1, "x": 1}),
            false,
        ),
    ];
    let n = cases.len();
    assert_eq!(check(&schema, &cases), n * 3 * 2);
}

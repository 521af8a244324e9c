//! The validator against OpenClaw's real `protocol.schema.json` (npm
//! `@openclaw/gateway-protocol@2026.9.1`): the document compiles whole and per definition, the
//! handshake frames validate, and the invalid frames its documentation warns about fail at the
//! right place. Ajv, the validator OpenClaw itself runs, gives the same verdicts.

use std::time::Instant;

use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use agentwire_testkit::{ajv_verdicts, openclaw_schema_path};
use serde_json::{Value, json};

fn schema() -> SchemaDocument {
    SchemaDocument::open(openclaw_schema_path()).unwrap()
}

fn connect() -> Value {
    json!({
        "type": "req",
        "id": "c1",
        "method": "connect",
        "params": {
            "minProtocol": 3,
            "maxProtocol": 4,
            "client": {
                "id": "openclaw-macos",
                "displayName": "macos",
                "version": "1.0.0",
                "platform": "macos 15.1",
                "mode": "ui",
                "instanceId": "A1B2"
            }
        }
    })
}

fn hello_ok() -> Value {
    json!({
        "type": "res",
        "id": "c1",
        "ok": true,
        "payload": {
            "type": "hello-ok",
            "protocol": 4,
            "server": {"version": "dev", "connId": "ws-1"},
            "features": {"methods": ["health"], "events": ["tick"]},
            "snapshot": {
                "presence": [],
                "health": {},
                "stateVersion": {"presence": 0, "health": 0},
                "uptimeMs": 0
            },
            "auth": {"role": "operator", "scopes": ["operator.read"]},
            "policy": {"maxPayload": 1048576, "maxBufferedBytes": 1048576, "tickIntervalMs": 30000}
        }
    })
}

fn valid_frames() -> Vec<Value> {
    vec![
        json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": "0f8fad5b-d9cb-469f-a165-70867728950e", "ts": 1730000000000_u64}}),
        connect(),
        json!({"type": "req", "id": "c1", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "displayName": "example", "version": "dev", "platform": "node", "mode": "cli"}
        }}),
        hello_ok(),
        json!({"type": "event", "event": "tick", "payload": {"ts": 1730000000}, "seq": 12}),
        json!({"type": "req", "id": "r1", "method": "health"}),
        json!({"type": "res", "id": "r1", "ok": true, "payload": {"ok": true}}),
        json!({"type": "event", "event": "presence", "seq": 3, "stateVersion": {"presence": 1, "health": 0}}),
    ]
}

#[test]
fn loads_and_compiles_every_definition() {
    let doc = schema();
    assert_eq!(doc.definitions().count(), 877);
    let started = Instant::now();
    let compiler = ValidatorCompiler::new(&doc).unwrap();
    compiler.root().unwrap();
    for (name, _) in doc.definitions() {
        let validator = compiler
            .definition(name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(validator.schema_pointer(), format!("/definitions/{name}"));
    }
    eprintln!(
        "compiled the root and 877 definitions in {:?}",
        started.elapsed()
    );
}

#[test]
fn handshake_frames_validate() {
    let doc = schema();
    let compiler = ValidatorCompiler::new(&doc).unwrap();
    let root = compiler.root().unwrap();
    for frame in valid_frames() {
        assert_eq!(root.validate(&frame), vec![], "{frame}");
        assert!(root.is_valid(&frame));
    }
    // The frame schema leaves params and payload open; their own definitions check them.
    let params = compiler.definition("ConnectParams").unwrap();
    assert_eq!(params.validate(&connect()["params"]), vec![]);
    let hello = compiler.definition("HelloOk").unwrap();
    assert_eq!(hello.validate(&hello_ok()["payload"]), vec![]);
    let tick = compiler.definition("TickEvent").unwrap();
    assert_eq!(tick.validate(&json!({"ts": 1730000000})), vec![]);
}

/// `(definition or root, frame, [(instance pointer, code)])`.
type Case = (
    Option<&'static str>,
    Value,
    Vec<(&'static str, &'static str)>,
);

fn invalid_cases() -> Vec<Case> {
    let mut with_device = connect()["params"].clone();
    with_device["device"] = json!({"id": "d1", "publicKey": "k", "signature": "s"});
    let mut extra_in_client = connect()["params"].clone();
    extra_in_client["client"]["color"] = json!("blue");
    vec![
        (
            None,
            json!({"type": "req", "id": 1, "method": "health"}),
            vec![("/id", "validate.type")],
        ),
        (
            None,
            json!({"type": "req", "id": "r1", "method": "health", "extra": true}),
            vec![("/extra", "validate.additional-property")],
        ),
        (
            None,
            json!({"type": "res", "id": "r1"}),
            vec![("", "validate.required")],
        ),
        (
            None,
            json!({"type": "request", "id": "r1", "method": "health"}),
            vec![("/type", "validate.discriminator")],
        ),
        (
            None,
            json!({"id": "r1", "method": "health"}),
            vec![("", "validate.required")],
        ),
        (
            None,
            json!({"type": "event", "event": "tick", "seq": -1, "stateVersion": {"presence": 0}}),
            vec![
                ("/seq", "validate.minimum"),
                ("/stateVersion", "validate.required"),
            ],
        ),
        (
            Some("ConnectParams"),
            json!({"minProtocol": 4, "maxProtocol": 4, "client": {"id": "cli", "version": "dev", "platform": "node", "mode": "operator"}}),
            vec![("/client/mode", "validate.enum")],
        ),
        (
            Some("ConnectParams"),
            json!({"minProtocol": 4, "maxProtocol": 4, "client": {"id": "ios-node", "version": "dev", "platform": "ios", "mode": "node"}}),
            vec![("/client/id", "validate.enum")],
        ),
        (
            Some("ConnectParams"),
            with_device,
            vec![
                ("/device", "validate.required"),
                ("/device", "validate.required"),
            ],
        ),
        (
            Some("ConnectParams"),
            extra_in_client,
            vec![("/client/color", "validate.additional-property")],
        ),
        (
            Some("ConnectParams"),
            json!({"minProtocol": 0, "client": {"id": "cli", "version": "", "platform": "node", "mode": "cli"}}),
            vec![
                ("", "validate.required"),
                ("/minProtocol", "validate.minimum"),
                ("/client/version", "validate.min-length"),
            ],
        ),
        (
            Some("TickEvent"),
            json!({"ts": 1.5}),
            vec![("/ts", "validate.type")],
        ),
    ]
}

#[test]
fn invalid_frames_fail_where_the_facts_say() {
    let doc = schema();
    let compiler = ValidatorCompiler::new(&doc).unwrap();
    for (definition, frame, expected) in invalid_cases() {
        let validator = match definition {
            Some(name) => compiler.definition(name).unwrap(),
            None => compiler.root().unwrap(),
        };
        let issues = validator.validate(&frame);
        let mut found: Vec<(&str, &str)> = issues
            .iter()
            .map(|i| (i.instance_pointer.as_str(), i.code.code()))
            .collect();
        found.sort_unstable();
        let mut expected = expected;
        expected.sort_unstable();
        assert_eq!(found, expected, "{definition:?} {frame}: {issues:#?}");
        assert!(!validator.is_valid(&frame));
        for issue in &issues {
            assert!(
                !issue.message.is_empty() && !issue.schema_pointer.is_empty(),
                "{issue:?}"
            );
        }
    }
}

#[test]
fn device_without_all_fields_names_each_missing_one() {
    let doc = schema();
    let params = doc.validator_for("ConnectParams").unwrap();
    let mut value = connect()["params"].clone();
    value["device"] = json!({"id": "d1", "publicKey": "k", "signature": "s"});
    let messages: Vec<String> = params
        .validate(&value)
        .into_iter()
        .map(|i| i.message)
        .collect();
    assert_eq!(
        messages,
        [
            "missing required property \"signedAt\"",
            "missing required property \"nonce\""
        ]
    );
}

#[test]
fn ajv_gives_the_same_verdicts() {
    let path = openclaw_schema_path();
    let doc = schema();
    let compiler = ValidatorCompiler::new(&doc).unwrap();
    let mut by_definition: Vec<(Option<&str>, Vec<Value>)> = vec![(None, valid_frames())];
    for (definition, frame, _) in invalid_cases() {
        match by_definition.iter_mut().find(|(d, _)| *d == definition) {
            Some((_, frames)) => frames.push(frame),
            None => by_definition.push((definition, vec![frame])),
        }
    }
    for (definition, frames) in by_definition {
        let validator = match definition {
            Some(name) => compiler.definition(name).unwrap(),
            None => compiler.root().unwrap(),
        };
        let ajv = ajv_verdicts(&path, definition, &frames);
        for (frame, verdict) in frames.iter().zip(ajv) {
            assert_eq!(
                validator.is_valid(frame),
                verdict.valid,
                "{definition:?} {frame}: Ajv says {:?}",
                verdict.errors
            );
        }
    }
}

/// The report of an invalid frame is made by the engine of the branch its `type` selects (the
/// root is a tagged `oneOf` and nothing else); it must be the report the union's own engine
/// gives. The same document with a `type` assertion that never fails beside the root `oneOf`
/// is reported through the union, and both reports agree on generated frames broken in one
/// place, on frames with an unknown or missing tag, and on values that are not objects.
#[test]
fn a_report_through_the_tags_branch_equals_the_report_through_the_union() {
    use agentwire_schema::fast::sample::{Generator, Rng, Size, mutate};

    let doc = schema();
    let tagged = doc.validator().unwrap();
    let mut whole = doc.value().clone();
    whole["type"] = json!(["object", "array", "string", "number", "boolean", "null"]);
    let whole = SchemaDocument::from_value(whole)
        .unwrap()
        .validator()
        .unwrap();
    let generator = Generator::new(&doc, Size::Small);
    let mut rng = Rng::new(0x7a9);
    let mut frames: Vec<Value> = Vec::new();
    for name in [
        "ConnectParams",
        "ChatSendParams",
        "HelloOk",
        "TickEvent",
        "ChatEvent",
    ] {
        let part = generator.instance(&doc.definition_pointer(name).unwrap(), &mut rng);
        frames.extend([
            json!({"type": "req", "id": "r1", "method": "connect", "params": part.clone()}),
            json!({"type": "res", "id": "r1", "ok": true, "payload": part.clone()}),
            json!({"type": "event", "event": "chat", "payload": part, "seq": 3}),
        ]);
    }
    let mut reported = 0;
    for frame in &frames {
        for _ in 0..40 {
            let broken = mutate(frame, &mut rng);
            let issues = tagged.validate(&broken);
            assert_eq!(issues, whole.validate(&broken), "{broken}");
            reported += usize::from(!issues.is_empty());
        }
    }
    assert!(reported > 200, "only {reported} broken frames were invalid");
    for odd in [
        json!({"type": "request", "id": "r1"}),
        json!({"id": "r1"}),
        json!({"type": 7}),
        json!([1, 2]),
        json!("req"),
    ] {
        let issues = tagged.validate(&odd);
        assert!(!issues.is_empty(), "{odd}");
        assert_eq!(issues, whole.validate(&odd), "{odd}");
    }
}

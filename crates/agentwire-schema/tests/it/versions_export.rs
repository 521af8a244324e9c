//! Per-version exports of a multi-version document: each version's export is a strict schema
//! that loads, validates against its metaschema, carries no annotation, and rejects what that
//! version does not know.

use agentwire_schema::versions::{VersionErrorKind, export_version};
use agentwire_schema::{IdentitySource, SchemaDocument};
use serde_json::{Value, json};

use crate::support::staged_runtime;

fn export(version: &str) -> Value {
    export_version(&staged_runtime(), version).unwrap_or_else(|e| panic!("export {version}: {e}"))
}

fn valid(version: &str, message: &Value) -> bool {
    SchemaDocument::from_value(export(version))
        .expect("export loads")
        .validator()
        .expect("compiles")
        .is_valid(message)
}

fn has_annotation(value: &Value) -> bool {
    match value {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| k.starts_with("x-agentwire") || has_annotation(v)),
        Value::Array(items) => items.iter().any(has_annotation),
        _ => false,
    }
}

#[test]
fn identity_lists_the_versions() {
    let id = staged_runtime().identity().expect("identity");
    assert_eq!(id.source, Some(IdentitySource::Agentwire));
    assert_eq!(id.name.as_deref(), Some("staged-runtime"));
    let versions: Vec<&str> = id.versions.iter().map(|v| v.as_str()).collect();
    assert_eq!(versions, ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"]);
}

#[test]
fn every_export_is_a_strict_schema_without_annotations() {
    for version in ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"] {
        let value = export(version);
        assert!(
            !has_annotation(&value),
            "{version} still carries annotations"
        );
        assert!(
            jsonschema::meta::is_valid(&value),
            "{version} fails its metaschema"
        );
        SchemaDocument::from_value(value).expect("export loads");
    }
}

#[test]
fn definitions_come_and_go_with_their_versions() {
    let defs = |v: &str| -> Vec<String> {
        export(v)["$defs"]
            .as_object()
            .expect("defs")
            .keys()
            .cloned()
            .collect()
    };
    assert!(!defs("1.0").contains(&"ServerRequest".to_owned()));
    assert!(defs("1.1").contains(&"ServerRequest".to_owned()));
    assert!(!defs("1.3").contains(&"Attachment".to_owned()));
    assert!(defs("1.4").contains(&"Attachment".to_owned()));
    assert!(!defs("1.4").contains(&"AppOutput".to_owned()));
    // The root union loses the branch whose definition is gone.
    assert_eq!(export("1.0")["oneOf"].as_array().expect("oneOf").len(), 2);
    assert_eq!(export("1.1")["oneOf"].as_array().expect("oneOf").len(), 3);
}

#[test]
fn properties_enum_values_overrides_and_version_constants() {
    let v10 = export("1.0");
    let params = &v10["$defs"]["RequestParams"]["properties"];
    assert!(
        params.get("legacyMode").is_some()
            && params.get("recovery").is_none()
            && params.get("attachments").is_none()
    );
    let v13 = export("1.3");
    let params = &v13["$defs"]["RequestParams"]["properties"];
    assert!(params.get("legacyMode").is_none() && params.get("recovery").is_some());
    assert_eq!(
        v10["$defs"]["TurnStatus"]["enum"],
        json!(["running", "completed"])
    );
    assert_eq!(
        export("1.2")["$defs"]["TurnStatus"]["enum"],
        json!(["running", "waiting-for-user", "completed"])
    );
    assert_eq!(
        v10["$defs"]["EventEnvelope"]["properties"]["protocolVersion"],
        json!({"type": "string", "const": "1.0"})
    );
    assert_eq!(
        v10["$defs"]["EventEnvelope"]["properties"]["sequence"]["minimum"],
        json!(0)
    );
    assert_eq!(
        v13["$defs"]["EventEnvelope"]["properties"]["sequence"]["minimum"],
        json!(1)
    );
    assert_eq!(
        v13["$defs"]["EventEnvelope"]["required"],
        json!([
            "protocolVersion",
            "runtimeInstanceId",
            "sequence",
            "threadId",
            "event",
            "durability"
        ])
    );
    // Overrides for 1.1 only, and `required` loses properties that do not exist yet.
    assert_eq!(
        export("1.1")["$defs"]["ServerRequest"]["properties"]["params"]["required"],
        json!(["approvalId"])
    );
    assert_eq!(
        export("1.2")["$defs"]["ServerRequest"]["properties"]["params"]["required"],
        json!(["approvalId", "interactionId"])
    );
    // A property whose definition does not exist yet is gone with it.
    let tool = &export("1.4")["$defs"]["RuntimeEvent"]["oneOf"][3]["properties"];
    assert!(tool.get("appOutput").is_none());
    assert!(
        export("1.5")["$defs"]["RuntimeEvent"]["oneOf"][3]["properties"]
            .get("appOutput")
            .is_some()
    );
}

fn envelope(version: &str, extra: Value, event: Value) -> Value {
    let mut params = json!({
        "protocolVersion": version, "runtimeInstanceId": "rt", "sequence": 1, "threadId": "t1", "event": event
    });
    for (k, v) in extra.as_object().expect("extra").clone() {
        params[k] = v;
    }
    json!({"jsonrpc": "2.0", "method": "runtime.event", "params": params})
}

#[test]
fn what_a_version_does_not_know_is_rejected() {
    let started = json!({"type": "turn.started", "turnId": "u1"});
    // Durable envelope fields arrive in 1.3 (and are required there).
    let durable = envelope(
        "1.3",
        json!({"durability": "durable", "eventId": "e1", "cursor": "c1"}),
        started.clone(),
    );
    assert!(valid("1.3", &durable));
    assert!(!valid(
        "1.2",
        &envelope("1.2", json!({"durability": "durable"}), started.clone())
    ));
    assert!(valid("1.2", &envelope("1.2", json!({}), started.clone())));
    assert!(!valid("1.3", &envelope("1.3", json!({}), started.clone())));
    // The version constant pins each export to its own version.
    assert!(!valid("1.2", &envelope("1.5", json!({}), started.clone())));
    // An enum value from 1.2.
    let waiting = json!({"type": "turn.status", "status": "waiting-for-user"});
    assert!(valid("1.2", &envelope("1.2", json!({}), waiting.clone())));
    assert!(!valid("1.1", &envelope("1.1", json!({}), waiting)));
    // A union branch from 1.1.
    let resolved = json!({"type": "approval.resolved", "approvalId": "a1", "decision": "approved"});
    assert!(valid("1.1", &envelope("1.1", json!({}), resolved.clone())));
    assert!(!valid("1.0", &envelope("1.0", json!({}), resolved)));
    // A definition from 1.1 and an enum value of it from 1.2.
    let ask = |method: &str| json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"approvalId": "a1", "interactionId": "i1"}});
    assert!(!valid("1.0", &ask("approval.request")));
    assert!(
        !valid("1.1", &ask("approval.request")),
        "interactionId is unknown in 1.1"
    );
    assert!(valid("1.2", &ask("userInput.request")));
    // A property from 1.4, and one that ends before 1.2.
    let open = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "thread.open", "params": params});
    let attached =
        open(json!({"threadId": "t1", "attachments": [{"id": "f1", "mediaType": "text/plain"}]}));
    assert!(valid("1.4", &attached));
    assert!(!valid("1.3", &attached));
    assert!(valid(
        "1.1",
        &open(json!({"threadId": "t1", "legacyMode": true}))
    ));
    assert!(!valid(
        "1.2",
        &open(json!({"threadId": "t1", "legacyMode": true}))
    ));
}

#[test]
fn unknown_versions_and_bad_annotations_are_errors() {
    assert_eq!(
        export_version(&staged_runtime(), "1.6").unwrap_err().kind,
        VersionErrorKind::UnknownVersion
    );
    assert_eq!(
        export_version(&staged_runtime(), "one").unwrap_err().kind,
        VersionErrorKind::Malformed
    );
    let plain = SchemaDocument::from_value(json!({"type": "string"})).expect("loads");
    assert_eq!(
        export_version(&plain, "1").unwrap_err().kind,
        VersionErrorKind::UnknownVersion
    );
    let bad = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "2", "versions": ["1", "2"]},
        "properties": {"a": {"x-agentwire-since": "soon"}}
    }))
    .expect("loads");
    let err = export_version(&bad, "1").unwrap_err();
    assert_eq!(
        (err.kind, err.pointer.as_str()),
        (
            VersionErrorKind::BadAnnotation,
            "/properties/a/x-agentwire-since"
        )
    );
    let bad_override = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "2", "versions": ["1", "2"]},
        "x-agentwire-versions": [{"since": "2", "schema": {"x-agentwire-since": "1"}}]
    }))
    .expect("loads");
    assert_eq!(
        export_version(&bad_override, "2").unwrap_err().kind,
        VersionErrorKind::BadAnnotation
    );
}

#[test]
fn export_of_one_version_is_stable() {
    insta::assert_json_snapshot!("staged-runtime-1.1", export("1.1"));
}

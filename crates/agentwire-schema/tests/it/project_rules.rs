//! Down-projection of hand-written messages: exactly what the annotations say is stripped and
//! mapped, and what cannot be projected fails with a specific error at the right place.

use agentwire_schema::{ProjectErrorKind, ProjectTarget, Projector, SchemaDocument, project};
use serde_json::{Value, json};

use crate::support::staged_runtime;

fn event(version: &str, extra: Value, event: Value) -> Value {
    let mut params = json!({"protocolVersion": version, "runtimeInstanceId": "rt", "sequence": 3, "threadId": "t1"});
    for (k, v) in extra.as_object().expect("extra") {
        params[k] = v.clone();
    }
    params["event"] = event;
    json!({"jsonrpc": "2.0", "method": "runtime.event", "params": params})
}

fn durable() -> Value {
    json!({"durability": "durable", "eventId": "e7", "cursor": "c7"})
}

#[test]
fn newer_envelope_fields_are_stripped_and_the_version_relabelled() {
    let doc = staged_runtime();
    let message = event(
        "1.5",
        durable(),
        json!({"type": "tool.completed", "toolName": "grep", "appOutput": {"status": "not_provided"}}),
    );
    let to_14 = project(&doc, &message, "1.5", "1.4", ProjectTarget::Root).expect("1.4");
    assert_eq!(
        to_14,
        event(
            "1.4",
            durable(),
            json!({"type": "tool.completed", "toolName": "grep"})
        )
    );
    let to_12 = project(&doc, &message, "1.5", "1.2", ProjectTarget::Root).expect("1.2");
    assert_eq!(
        to_12,
        event(
            "1.2",
            json!({}),
            json!({"type": "tool.completed", "toolName": "grep"})
        )
    );
}

#[test]
fn enum_values_map_down() {
    let doc = staged_runtime();
    let waiting = event(
        "1.5",
        durable(),
        json!({"type": "turn.status", "status": "waiting-for-user"}),
    );
    let to_12 = project(&doc, &waiting, "1.5", "1.2", ProjectTarget::Root).expect("1.2");
    assert_eq!(
        to_12["params"]["event"]["status"],
        json!("waiting-for-user")
    );
    let to_11 = project(&doc, &waiting, "1.5", "1.1", ProjectTarget::Root).expect("1.1");
    assert_eq!(
        to_11["params"]["event"],
        json!({"type": "turn.status", "status": "running"})
    );
    assert_eq!(to_11["params"]["protocolVersion"], json!("1.1"));
}

#[test]
fn a_variant_the_target_lacks_is_an_error_at_its_place() {
    let doc = staged_runtime();
    let resolved = event(
        "1.3",
        durable(),
        json!({"type": "approval.resolved", "approvalId": "a1", "decision": "denied"}),
    );
    project(&doc, &resolved, "1.3", "1.1", ProjectTarget::Root)
        .expect("1.1 knows approval.resolved");
    let err = project(&doc, &resolved, "1.3", "1.0", ProjectTarget::Root).unwrap_err();
    assert_eq!(
        (err.kind, err.pointer.as_str()),
        (ProjectErrorKind::VariantUnavailable, "/params/event")
    );
    assert_eq!(err.code(), "project.variant-unavailable");
    let ask = json!({"jsonrpc": "2.0", "id": 4, "method": "approval.request", "params": {"approvalId": "a1", "interactionId": "i1"}});
    let err = project(&doc, &ask, "1.5", "1.0", ProjectTarget::Root).unwrap_err();
    assert_eq!(
        (err.kind, err.pointer.as_str()),
        (ProjectErrorKind::VariantUnavailable, "")
    );
}

#[test]
fn a_value_the_target_lacks_is_an_error() {
    let doc = staged_runtime();
    let ask = json!({"jsonrpc": "2.0", "id": 4, "method": "userInput.request", "params": {"approvalId": "a1", "interactionId": "i1"}});
    let err = project(&doc, &ask, "1.5", "1.1", ProjectTarget::Root).unwrap_err();
    assert_eq!(
        (err.kind, err.pointer.as_str()),
        (ProjectErrorKind::ValueUnavailable, "/method")
    );
    let approval = json!({"jsonrpc": "2.0", "id": 4, "method": "approval.request", "params": {"approvalId": "a1", "interactionId": "i1"}});
    let to_11 = project(&doc, &approval, "1.5", "1.1", ProjectTarget::Root).expect("1.1");
    assert_eq!(to_11["params"], json!({"approvalId": "a1"}));
}

#[test]
fn requests_lose_newer_parameters() {
    let doc = staged_runtime();
    let open = json!({"jsonrpc": "2.0", "id": 1, "method": "thread.open", "params": {
        "threadId": "t1", "recovery": true, "attachments": [{"id": "f1", "mediaType": "image/png"}]
    }});
    let to_13 = project(&doc, &open, "1.5", "1.3", ProjectTarget::Root).expect("1.3");
    assert_eq!(to_13["params"], json!({"threadId": "t1", "recovery": true}));
    let to_10 = project(&doc, &open, "1.5", "1.0", ProjectTarget::Root).expect("1.0");
    assert_eq!(to_10["params"], json!({"threadId": "t1"}));
}

#[test]
fn a_definition_can_be_the_target() {
    let doc = staged_runtime();
    let projector = Projector::new(
        &doc,
        "1.4",
        "1.2",
        ProjectTarget::Definition("EventEnvelope"),
    )
    .expect("projector");
    let envelope = json!({"protocolVersion": "1.4", "runtimeInstanceId": "rt", "sequence": 1, "threadId": "t1",
        "durability": "ephemeral", "event": {"type": "turn.started", "turnId": "u1"}});
    assert_eq!(
        projector.project(&envelope).expect("projects"),
        json!({"protocolVersion": "1.2", "runtimeInstanceId": "rt", "sequence": 1, "threadId": "t1",
            "event": {"type": "turn.started", "turnId": "u1"}})
    );
    let err =
        Projector::new(&doc, "1.5", "1.3", ProjectTarget::Definition("AppOutput")).unwrap_err();
    assert_eq!(err.kind, ProjectErrorKind::UnknownDefinition);
}

#[test]
fn setup_and_source_errors() {
    let doc = staged_runtime();
    assert_eq!(
        Projector::new(&doc, "1.2", "1.3", ProjectTarget::Root)
            .unwrap_err()
            .kind,
        ProjectErrorKind::NotDownward
    );
    assert_eq!(
        Projector::new(&doc, "1.9", "1.3", ProjectTarget::Root)
            .unwrap_err()
            .kind,
        ProjectErrorKind::Version
    );
    let err = project(
        &doc,
        &json!({"jsonrpc": "2.0"}),
        "1.5",
        "1.3",
        ProjectTarget::Root,
    )
    .unwrap_err();
    assert_eq!(err.kind, ProjectErrorKind::InvalidSource);
    // Version 1.3 requires durability: a 1.2 message cannot be "projected" from 1.3.
    let old = event(
        "1.3",
        json!({}),
        json!({"type": "turn.started", "turnId": "u1"}),
    );
    assert_eq!(
        project(&doc, &old, "1.3", "1.2", ProjectTarget::Root)
            .unwrap_err()
            .kind,
        ProjectErrorKind::InvalidSource
    );
}

#[test]
fn chained_map_down_entries_compose() {
    let doc = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "3", "versions": ["1", "2", "3"]},
        "type": "object",
        "properties": {"state": {
            "enum": ["idle", "paused", "suspended"],
            "x-agentwire-enum-since": {"paused": "2", "suspended": "3"},
            "x-agentwire-map-down": [{"below": "2", "map": {"paused": "idle"}}, {"below": "3", "map": {"suspended": "paused"}}]
        }}
    }))
    .expect("loads");
    let message = json!({"state": "suspended"});
    assert_eq!(
        project(&doc, &message, "3", "2", ProjectTarget::Root).expect("2"),
        json!({"state": "paused"})
    );
    assert_eq!(
        project(&doc, &message, "3", "1", ProjectTarget::Root).expect("1"),
        json!({"state": "idle"})
    );
}

#[test]
fn an_override_the_annotations_cannot_repair_is_reported() {
    let doc = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "2", "versions": ["1", "2"]},
        "type": "string",
        "maxLength": 10,
        "x-agentwire-versions": [{"until": "2", "schema": {"maxLength": 3}}]
    }))
    .expect("loads");
    let err = project(&doc, &json!("abcdef"), "2", "1", ProjectTarget::Root).unwrap_err();
    assert_eq!(err.kind, ProjectErrorKind::NotValidInTarget);
    assert_eq!(
        project(&doc, &json!("abc"), "2", "1", ProjectTarget::Root).expect("fits"),
        json!("abc")
    );
}

/// A variant restructured in a newer version maps onto the older variant with `{"below", "as"}`:
/// the walk continues in the target's view, keeping what the older variant declares.
#[test]
fn a_variant_maps_down_as_another_schema() {
    let doc = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "2", "versions": ["1", "2"]},
        "oneOf": [
            {"$ref": "#/$defs/Legacy", "x-agentwire-until": "2"},
            {"$ref": "#/$defs/Durable", "x-agentwire-since": "2"}
        ],
        "$defs": {
            "Legacy": {"x-agentwire-until": "2", "type": "object", "additionalProperties": false,
                "required": ["seq"], "properties": {"seq": {"type": "integer"}, "status": {"enum": ["running"]}}},
            "Durable": {"x-agentwire-since": "2", "type": "object", "additionalProperties": false,
                "required": ["seq", "cursor"],
                "properties": {"seq": {"type": "integer"}, "cursor": {"type": "string"},
                    "status": {"enum": ["running", "waiting"], "x-agentwire-enum-since": {"waiting": "2"},
                        "x-agentwire-map-down": [{"below": "2", "map": {"waiting": "running"}}]}},
                "x-agentwire-map-down": [{"below": "2", "as": "#/$defs/Legacy"}]}
        }
    }))
    .expect("loads");
    let message = json!({"seq": 4, "cursor": "c4", "status": "running"});
    assert_eq!(
        project(&doc, &message, "2", "1", ProjectTarget::Root).expect("maps"),
        json!({"seq": 4, "status": "running"})
    );
    // Values are checked against the schema the variant maps to: `waiting` is not in Legacy.
    let waiting = json!({"seq": 4, "cursor": "c4", "status": "waiting"});
    let err = project(&doc, &waiting, "2", "1", ProjectTarget::Root).unwrap_err();
    assert_eq!(
        (err.kind, err.pointer.as_str()),
        (ProjectErrorKind::ValueUnavailable, "/status"),
        "{err}"
    );
}

/// Keyword overrides that give an older version a smaller closed set of properties drop the rest.
#[test]
fn properties_an_override_removes_are_dropped() {
    let doc = SchemaDocument::from_value(json!({
        "x-agentwire": {"name": "p", "version": "2", "versions": ["1", "2"]},
        "type": "object", "additionalProperties": false, "required": ["a"],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "x-agentwire-versions": [{"until": "2", "schema": {"properties": {"a": {"type": "string"}}}}]
    }))
    .expect("loads");
    let message = json!({"a": "x", "b": "y"});
    assert_eq!(
        project(&doc, &message, "2", "1", ProjectTarget::Root).expect("1"),
        json!({"a": "x"})
    );
}

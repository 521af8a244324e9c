//! Projection on the Roll Runtime protocol document: the upstream fixtures of each version,
//! projected down to every older version, follow the projection rules of the reference
//! implementation (event envelopes lose `durability`/`eventId`/`cursor` below 1.3, methods and
//! events that do not exist yet cannot be sent, and what an older version requires but the message
//! lacks — the legacy cancel notification's `serverRequestId`, a turn's text — is not invented).

use std::path::PathBuf;

use agentwire_schema::{ProjectErrorKind, ProjectTarget, Projector, SchemaDocument};
use agentwire_testkit::{peer_fixture, read_json};
use serde_json::{Value, json};

const VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

/// The Roll Runtime document (its 1.3 envelopes map down to the legacy envelope with the
/// `{"below", "as"}` form of `x-agentwire-map-down`).
fn roll() -> SchemaDocument {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../protocols/roll-runtime/roll-runtime.schema.json");
    SchemaDocument::from_value(read_json(&path)).expect("roll-runtime loads")
}

/// `(version, folder/file name, message)` for every valid upstream fixture (folder `v1` is 1.1),
/// through the test kit's walk.
fn fixtures() -> Vec<(&'static str, String, Value)> {
    agentwire_testkit::roll_upstream_fixtures()
        .into_iter()
        .filter(|f| f.valid)
        .map(|f| (f.folder_version, f.name(), f.message))
        .collect()
}

#[test]
fn every_fixture_projects_or_is_refused_for_a_named_reason() {
    let doc = roll();
    let (mut projected, mut refused) = (0, 0);
    let mut projectors = std::collections::HashMap::new();
    for (from, name, message) in fixtures() {
        // Fixtures that carry their own protocolVersion are messages of that version.
        let from = match message
            .pointer("/params/protocolVersion")
            .and_then(Value::as_str)
        {
            Some(v) if VERSIONS.contains(&v) => VERSIONS.iter().find(|x| **x == v).unwrap(),
            _ => from,
        };
        for to in VERSIONS.iter().filter(|v| **v <= from) {
            let projector = projectors
                .entry((from, *to))
                .or_insert_with(|| Projector::new(&doc, from, to, ProjectTarget::Root).unwrap());
            match projector.project(&message) {
                Ok(_) => projected += 1,
                Err(e) => {
                    assert!(
                        matches!(
                            e.kind,
                            ProjectErrorKind::VariantUnavailable
                                | ProjectErrorKind::ValueUnavailable
                                | ProjectErrorKind::NotValidInTarget
                        ),
                        "{name} {from} -> {to}: {e}"
                    );
                    assert_ne!(from, *to, "{name} refused onto its own version: {e}");
                    refused += 1;
                }
            }
        }
    }
    assert!(
        projected > 0 && refused > 0,
        "projected {projected}, refused {refused}"
    );
}

#[test]
fn durable_event_envelope_loses_its_cursor_below_1_3() {
    let doc = roll();
    let message = read_json(peer_fixture(
        "roll-agent/fixtures/v1.3/valid-runtime-durable-event-notification.json",
    ));
    let projector = Projector::new(&doc, "1.3", "1.2", ProjectTarget::Root).unwrap();
    let projected = projector.project(&message).unwrap();
    let mut expected = message.clone();
    let params = expected["params"].as_object_mut().unwrap();
    for key in ["durability", "eventId", "cursor"] {
        params.shift_remove(key);
    }
    params["protocolVersion"] = json!("1.2");
    assert_eq!(projected, expected);
}

#[test]
fn a_method_newer_than_the_target_cannot_be_sent() {
    let doc = roll();
    let message = read_json(peer_fixture(
        "roll-agent/fixtures/v1.3/valid-runtime-events-resume-request.json",
    ));
    let err = Projector::new(&doc, "1.3", "1.2", ProjectTarget::Root)
        .unwrap()
        .project(&message)
        .unwrap_err();
    assert_eq!(err.kind, ProjectErrorKind::VariantUnavailable, "{err}");
}

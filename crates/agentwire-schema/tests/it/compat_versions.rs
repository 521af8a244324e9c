//! Multi-version documents are compared version by version: adding a version changes nothing in
//! the older views, a change inside one version's view is reported with that version, and a
//! version that disappears is breaking.

use agentwire_schema::SchemaDocument;
use agentwire_schema::compat::{self, ChangeClass, Rule};
use serde_json::{Value, json};

use crate::support::data_path;

fn staged() -> Value {
    let path = data_path("versions/staged-runtime.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn report(old: Value, new: Value) -> Vec<(Rule, ChangeClass, String, Option<String>)> {
    let old = SchemaDocument::from_value(old).unwrap();
    let new = SchemaDocument::from_value(new).unwrap();
    compat::compat(&old, &new)
        .changes
        .into_iter()
        .map(|c| (c.rule, c.class, c.pointer, c.version))
        .collect()
}

#[test]
fn adding_a_version_changes_no_older_view() {
    let mut next = staged();
    next["x-agentwire"]["version"] = json!("1.6");
    next["x-agentwire"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(json!("1.6"));
    next["$defs"]["RequestParams"]["properties"]["priority"] =
        json!({"type": "integer", "x-agentwire-since": "1.6"});
    next["$defs"]["TurnStatus"]["enum"]
        .as_array_mut()
        .unwrap()
        .push(json!("paused"));
    next["$defs"]["TurnStatus"]["x-agentwire-enum-since"]["paused"] = json!("1.6");
    assert_eq!(report(staged(), next), []);
}

#[test]
fn a_change_inside_one_version_is_reported_with_it() {
    let mut next = staged();
    // `recovery` moves from 1.3 to 1.4: a 1.3 host's request is now rejected by a 1.3 runtime.
    next["$defs"]["RequestParams"]["properties"]["recovery"]["x-agentwire-since"] = json!("1.4");
    assert_eq!(
        report(staged(), next),
        [(
            Rule::PropertyRemoved,
            ChangeClass::Breaking,
            "/$defs/RequestParams/properties/recovery".to_owned(),
            Some("1.3".to_owned())
        )]
    );
}

#[test]
fn dropping_a_version_is_breaking() {
    let mut next = staged();
    next["x-agentwire"]["versions"]
        .as_array_mut()
        .unwrap()
        .remove(0);
    next["x-agentwire"]["minimumCompatibleVersion"] = json!("1.1");
    let changes = report(staged(), next);
    assert_eq!(
        changes,
        [(
            Rule::VersionRemoved,
            ChangeClass::Breaking,
            "/x-agentwire/versions".to_owned(),
            Some("1.0".to_owned())
        )]
    );
}

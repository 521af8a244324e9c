//! Direction-awareness: the same change gets opposite verdicts in opposite directions, openness
//! turns a breaking addition into an additive one, and directions are inherited through nesting
//! and references; a selection of definitions compares only those.

use agentwire_schema::SchemaDocument;
use agentwire_schema::compat::{self, ChangeClass, CompatOptions, Direction, Rule};
use serde_json::{Value, json};

fn changes(old: Value, new: Value) -> Vec<(Rule, ChangeClass, Direction, String)> {
    changes_with(old, new, CompatOptions::default())
}

fn changes_with(
    old: Value,
    new: Value,
    options: CompatOptions,
) -> Vec<(Rule, ChangeClass, Direction, String)> {
    let old = SchemaDocument::from_value(old).expect("old");
    let new = SchemaDocument::from_value(new).expect("new");
    compat::compat_with(&old, &new, &options)
        .changes
        .into_iter()
        .map(|c| (c.rule, c.class, c.direction, c.pointer))
        .collect()
}

fn status_doc(direction: &str, values: &[&str], open: bool) -> Value {
    let mut status = json!({"type": "string", "enum": values});
    if open {
        status["x-agentwire-open"] = json!(true);
    }
    json!({
        "$defs": {
            "Status": status,
            "Event": {
                "x-agentwire-direction": direction,
                "type": "object",
                "additionalProperties": false,
                "required": ["status"],
                "properties": {"status": {"$ref": "#/$defs/Status"}}
            }
        }
    })
}

#[test]
fn enum_value_added_breaks_the_host_but_not_the_runtime() {
    for (direction, want) in [
        ("runtime-to-host", ChangeClass::Breaking),
        ("host-to-runtime", ChangeClass::Additive),
        ("both", ChangeClass::Breaking),
    ] {
        let got = changes(
            status_doc(direction, &["running"], false),
            status_doc(direction, &["running", "waiting"], false),
        );
        assert_eq!(
            got,
            [(
                Rule::EnumValueAdded,
                want,
                Direction::parse(direction).expect("dir"),
                "/$defs/Status/enum".to_owned()
            )],
            "{direction}"
        );
    }
}

#[test]
fn open_enum_tolerates_new_values() {
    let got = changes(
        status_doc("runtime-to-host", &["running"], true),
        status_doc("runtime-to-host", &["running", "waiting"], true),
    );
    assert_eq!(got[0].1, ChangeClass::Additive);
}

#[test]
fn removing_a_value_breaks_the_runtime_but_not_the_host() {
    for (direction, want) in [
        ("runtime-to-host", ChangeClass::Additive),
        ("host-to-runtime", ChangeClass::Breaking),
    ] {
        let got = changes(
            status_doc(direction, &["running", "waiting"], false),
            status_doc(direction, &["running"], false),
        );
        assert_eq!(got[0].0, Rule::EnumValueRemoved);
        assert_eq!(got[0].1, want, "{direction}");
    }
}

fn object(direction: &str, props: Value, required: &[&str], closed: bool) -> Value {
    let mut o = json!({"x-agentwire-direction": direction, "type": "object", "required": required, "properties": props});
    if closed {
        o["additionalProperties"] = json!(false);
    }
    o
}

#[test]
fn optional_property_added_to_a_closed_object() {
    let s = json!({"type": "string"});
    for (direction, closed, want) in [
        ("runtime-to-host", true, ChangeClass::Breaking),
        ("runtime-to-host", false, ChangeClass::Additive),
        ("host-to-runtime", true, ChangeClass::Additive),
    ] {
        let got = changes(
            object(direction, json!({"a": s}), &[], closed),
            object(direction, json!({"a": s, "b": s}), &[], closed),
        );
        assert_eq!(
            got,
            [(
                Rule::PropertyAdded,
                want,
                Direction::parse(direction).expect("d"),
                "/properties/b".to_owned()
            )]
        );
    }
}

#[test]
fn required_added_breaks_the_runtime_only() {
    let s = json!({"type": "string"});
    for (direction, want) in [
        ("host-to-runtime", ChangeClass::Breaking),
        ("runtime-to-host", ChangeClass::Additive),
    ] {
        let got = changes(
            object(direction, json!({"a": s}), &[], true),
            object(direction, json!({"a": s}), &["a"], true),
        );
        assert_eq!(got[0].0, Rule::RequiredAdded);
        assert_eq!(got[0].1, want, "{direction}");
    }
}

#[test]
fn a_definition_reached_from_both_directions_is_both() {
    let doc = |values: &[&str]| {
        json!({
            "$defs": {
                "Status": {"enum": values},
                "Request": {"x-agentwire-direction": "host-to-runtime", "properties": {"s": {"$ref": "#/$defs/Status"}}},
                "Event": {"x-agentwire-direction": "runtime-to-host", "properties": {"s": {"$ref": "#/$defs/Status"}}}
            }
        })
    };
    let got = changes(doc(&["a"]), doc(&["a", "b"]));
    assert_eq!(
        got,
        [(
            Rule::EnumValueAdded,
            ChangeClass::Breaking,
            Direction::Both,
            "/$defs/Status/enum".to_owned()
        )]
    );
}

#[test]
fn direction_on_a_root_branch_reaches_its_references() {
    let doc = |values: &[&str]| {
        json!({
            "oneOf": [
                {"x-agentwire-direction": "host-to-runtime", "$ref": "#/$defs/Request"},
                {"x-agentwire-direction": "runtime-to-host", "$ref": "#/$defs/Notification"}
            ],
            "$defs": {
                "Request": {"type": "object", "properties": {"kind": {"enum": values}}},
                "Notification": {"type": "object", "properties": {"kind": {"enum": values}}}
            }
        })
    };
    let got = changes(doc(&["a"]), doc(&["a", "b"]));
    assert_eq!(
        got,
        [
            (
                Rule::EnumValueAdded,
                ChangeClass::Additive,
                Direction::HostToRuntime,
                "/$defs/Request/properties/kind/enum".to_owned()
            ),
            (
                Rule::EnumValueAdded,
                ChangeClass::Breaking,
                Direction::RuntimeToHost,
                "/$defs/Notification/properties/kind/enum".to_owned()
            ),
        ]
    );
}

#[test]
fn variant_added_to_a_union_the_host_receives() {
    let doc = |direction: &str, open: bool, kinds: &[&str]| {
        let branches: Vec<Value> = kinds
            .iter()
            .map(|k| json!({"type": "object", "required": ["kind"], "properties": {"kind": {"const": k}}}))
            .collect();
        let mut d = json!({"x-agentwire-direction": direction, "oneOf": branches});
        if open {
            d["x-agentwire-open"] = json!(true);
        }
        d
    };
    for (direction, open, want) in [
        ("runtime-to-host", false, ChangeClass::Breaking),
        ("runtime-to-host", true, ChangeClass::Additive),
        ("host-to-runtime", false, ChangeClass::Additive),
    ] {
        let got = changes(
            doc(direction, open, &["a", "c"]),
            doc(direction, open, &["a", "b", "c"]),
        );
        assert_eq!(
            got,
            [(
                Rule::VariantAdded,
                want,
                Direction::parse(direction).expect("d"),
                "/oneOf/1".to_owned()
            )]
        );
    }
}

#[test]
fn unannotated_documents_default_by_identity() {
    let old = json!({"enum": ["a"]});
    let new = json!({"enum": ["a", "b"]});
    // No identity block, no direction: judged like ChainlessChain's checker.
    assert_eq!(
        changes(old.clone(), new.clone())[0].1,
        ChangeClass::Additive
    );
    assert_eq!(
        changes(old.clone(), new.clone())[0].2,
        Direction::Unspecified
    );
    // Our own documents default to both directions.
    let ours = |v: &Value| {
        let mut v = v.clone();
        v["x-agentwire"] = json!({"name": "p", "version": "1"});
        v
    };
    assert_eq!(changes(ours(&old), ours(&new))[0].1, ChangeClass::Breaking);
    // And the caller can choose.
    let strict = CompatOptions {
        default_direction: Some(Direction::RuntimeToHost),
        ..CompatOptions::default()
    };
    assert_eq!(changes_with(old, new, strict)[0].1, ChangeClass::Breaking);
}

/// With a selection of definitions, only those and what they reference are compared: the root
/// and the other definitions are left out, and a selected definition the new document lacks is
/// still removed.
#[test]
fn a_selection_compares_the_named_definitions_and_what_they_reference() {
    let old = json!({
        "oneOf": [{"$ref": "#/$defs/A"}],
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "string"},
            "C": {"type": "string"},
            "D": {"type": "string"}
        }
    });
    let new = json!({
        "oneOf": [{"$ref": "#/$defs/X"}],
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "string", "minLength": 1},
            "C": {"type": "integer"},
            "X": {"type": "string"}
        }
    });
    let selected = |names: &[&str]| CompatOptions {
        definitions: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        ..CompatOptions::default()
    };
    let rules = |options| -> Vec<(Rule, String)> {
        let report = compat::compat_with(
            &SchemaDocument::from_value(old.clone()).unwrap(),
            &SchemaDocument::from_value(new.clone()).unwrap(),
            &options,
        );
        report
            .changes
            .into_iter()
            .map(|c| (c.rule, c.pointer))
            .collect()
    };
    assert_eq!(
        rules(selected(&["A"])),
        vec![(Rule::LowerBoundTightened, "/$defs/B/minLength".to_owned())]
    );
    assert_eq!(
        rules(selected(&["D"])),
        vec![(Rule::DefinitionRemoved, "/$defs/D".to_owned())]
    );
    // Without a selection the root and every definition count.
    assert!(rules(CompatOptions::default()).len() > 3);
}

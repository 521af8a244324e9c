//! Every compatibility rule has a pair of small schemas in `tests/data/compat/rules/<rule>.json`
//! (`old`, `new`, the root `direction` and the exact expected changes); this file checks each
//! verdict and that no rule is left without a case.

use std::path::PathBuf;

use agentwire_schema::SchemaDocument;
use agentwire_schema::compat::{self, CompatOptions, Direction, MAX_COMPARE_DEPTH, Rule};
use serde_json::{Value, json};

use crate::support::data_path;

fn rules_dir() -> PathBuf {
    data_path("compat/rules")
}

fn with_direction(mut schema: Value, direction: Option<&str>) -> Value {
    if let (Some(d), Value::Object(map)) = (direction, &mut schema) {
        map.insert("x-agentwire-direction".to_owned(), json!(d));
    }
    schema
}

fn verdict(old: Value, new: Value) -> Vec<(String, String, String)> {
    let old = SchemaDocument::from_value(old).expect("old loads");
    let new = SchemaDocument::from_value(new).expect("new loads");
    compat::compat(&old, &new)
        .changes
        .iter()
        .map(|c| {
            (
                c.rule.id().to_owned(),
                c.class.id().to_owned(),
                c.pointer.clone(),
            )
        })
        .collect()
}

#[test]
fn every_rule_case_gives_its_verdict() {
    let mut checked = 0;
    for entry in std::fs::read_dir(rules_dir()).expect("rules dir") {
        let path = entry.expect("entry").path();
        let case: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        let direction = case.get("direction").and_then(Value::as_str);
        let got = verdict(
            with_direction(case["old"].clone(), direction),
            with_direction(case["new"].clone(), direction),
        );
        let want: Vec<(String, String, String)> = case["expect"]
            .as_array()
            .expect("expect")
            .iter()
            .map(|e| {
                (
                    e[0].as_str().expect("rule").to_owned(),
                    e[1].as_str().expect("class").to_owned(),
                    e[2].as_str().expect("pointer").to_owned(),
                )
            })
            .collect();
        assert_eq!(got, want, "{}", path.display());
        checked += 1;
    }
    assert_eq!(
        checked,
        Rule::ALL.len() - 1,
        "one case per rule (comparison-too-deep is built in code)"
    );
}

#[test]
fn every_rule_has_a_case_file() {
    for rule in Rule::ALL {
        if *rule == Rule::ComparisonTooDeep {
            continue;
        }
        let path = rules_dir().join(format!("{}.json", rule.id()));
        assert!(
            path.is_file(),
            "no case for rule {}: {}",
            rule.id(),
            path.display()
        );
    }
}

#[test]
fn identical_documents_have_no_changes() {
    for entry in std::fs::read_dir(rules_dir()).expect("rules dir") {
        let case: Value =
            serde_json::from_slice(&std::fs::read(entry.expect("entry").path()).expect("read"))
                .expect("json");
        assert!(verdict(case["new"].clone(), case["new"].clone()).is_empty());
    }
}

/// A chain of definitions whose references are all retargeted goes deeper than the limit: the
/// checker stops there and fails closed instead of overflowing the stack.
#[test]
fn comparison_depth_is_bounded() {
    let n = MAX_COMPARE_DEPTH + 10;
    let mut old_defs = serde_json::Map::new();
    let mut new_defs = serde_json::Map::new();
    for i in 0..n {
        let next = |p: &str| json!({"type": "object", "properties": {"next": {"$ref": format!("#/$defs/{p}{}", i + 1)}}});
        let leaf = json!({"type": "string"});
        for (defs, p) in [(&mut old_defs, "D"), (&mut new_defs, "E")] {
            defs.insert(
                format!("D{i}"),
                if i + 1 == n { leaf.clone() } else { next(p) },
            );
            defs.insert(
                format!("E{i}"),
                if i + 1 == n {
                    json!({"type": "integer"})
                } else {
                    next(p)
                },
            );
        }
    }
    let old =
        SchemaDocument::from_value(json!({"$defs": old_defs, "$ref": "#/$defs/D0"})).expect("old");
    let new =
        SchemaDocument::from_value(json!({"$defs": new_defs, "$ref": "#/$defs/D0"})).expect("new");
    let report = compat::compat_with(
        &old,
        &new,
        &CompatOptions {
            default_direction: Some(Direction::Both),
            ..CompatOptions::default()
        },
    );
    assert!(
        report
            .changes
            .iter()
            .any(|c| c.rule == Rule::ComparisonTooDeep)
    );
    assert!(!report.is_compatible());
}

/// Mutually recursive definitions whose references are retargeted into each other terminate
/// (the seen-set stops the cycle) and report each retargeting once.
#[test]
fn reference_cycles_terminate() {
    let tree = |to: &str| json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": format!("#/$defs/{to}")}}}});
    let old = json!({"$defs": {"A": tree("A"), "B": tree("B")}, "$ref": "#/$defs/A"});
    let new = json!({"$defs": {"A": tree("B"), "B": tree("A")}, "$ref": "#/$defs/A"});
    let got = verdict(old, new);
    assert_eq!(
        got,
        [
            (
                "ref-retargeted".to_owned(),
                "breaking".to_owned(),
                "/$defs/A/properties/kids/items/$ref".to_owned()
            ),
            (
                "ref-retargeted".to_owned(),
                "breaking".to_owned(),
                "/$defs/B/properties/kids/items/$ref".to_owned()
            ),
        ]
    );
}

/// A property added (or removed) where the object gives the properties it does not name a
/// schema is that schema changed to the property's (or back), in both directions: with
/// additional properties strings, an old host rejects `{"b": 1}` once `b` is an integer, and
/// `{"b": "x"}` from an old host is rejected now.
#[test]
fn a_property_named_over_an_additional_properties_schema_is_that_schema_changed() {
    let object = |extra: Option<Value>| {
        let mut properties = json!({"a": {"type": "string"}});
        if let Some(extra) = extra {
            properties["b"] = extra;
        }
        json!({"type": "object", "properties": properties, "additionalProperties": {"type": "string"}})
    };
    for direction in ["runtime-to-host", "host-to-runtime"] {
        let added = verdict(
            with_direction(object(None), Some(direction)),
            with_direction(object(Some(json!({"type": "integer"}))), Some(direction)),
        );
        assert!(
            added
                .iter()
                .any(|(rule, class, pointer)| rule == "type-changed"
                    && class == "breaking"
                    && pointer == "/properties/b/type"),
            "{direction}: {added:?}"
        );
        let removed = verdict(
            with_direction(object(Some(json!({"type": "integer"}))), Some(direction)),
            with_direction(object(None), Some(direction)),
        );
        assert!(
            removed.iter().any(|(_, class, _)| class == "breaking"),
            "{direction}: {removed:?}"
        );
    }
    // Over an unconstrained object, an added optional property is what it was: additive for
    // a runtime that receives it.
    let open = |extra: bool| {
        let mut schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        if extra {
            schema["properties"]["b"] = json!({"type": "integer"});
        }
        with_direction(schema, Some("host-to-runtime"))
    };
    assert_eq!(
        verdict(open(false), open(true)),
        [(
            "property-added".to_owned(),
            "additive".to_owned(),
            "/properties/b".to_owned()
        )]
    );
}

/// A node that becomes a `$ref` with keywords beside it (2020-12 applies them too) is compared
/// as the target with those keywords: a `maxLength` beside the `$ref` tightens what the runtime
/// receives. Draft-07 ignores them, and so does the comparison there.
#[test]
fn keywords_beside_a_ref_are_compared_with_its_target_from_2020_12_on() {
    for (schema, tightened) in [
        ("https://json-schema.org/draft/2020-12/schema", true),
        ("http://json-schema.org/draft-07/schema#", false),
    ] {
        let defs = if tightened { "$defs" } else { "definitions" };
        let old = json!({"$schema": schema, "type": "string"});
        let mut new = json!({"$schema": schema, "$ref": format!("#/{defs}/S"), "maxLength": 5});
        new[defs] = json!({"S": {"type": "string"}});
        let got = verdict(
            with_direction(old, Some("host-to-runtime")),
            with_direction(new, Some("host-to-runtime")),
        );
        assert_eq!(
            got.iter().any(|(_, class, _)| class == "breaking"),
            tightened,
            "{schema}: {got:?}"
        );
    }
}

/// A `$ref` whose target the comparison of the definitions does not reach (a definition nested
/// in another, one under another keyword, one in a second definitions block) is compared through
/// its target: each of these turning a string into an integer breaks what the runtime receives.
#[test]
fn a_ref_to_a_target_outside_the_definitions_block_is_compared_through_it() {
    let schema = "https://json-schema.org/draft/2020-12/schema";
    let cases = [
        (
            "#/$defs/A/$defs/B",
            json!({"$defs": {"A": {"$defs": {"B": {"type": "TYPE"}}}}}),
        ),
        (
            "#/components/B",
            json!({"components": {"B": {"type": "TYPE"}}}),
        ),
        (
            "#/definitions/B",
            json!({"$defs": {"C": {"type": "string"}}, "definitions": {"B": {"type": "TYPE"}}}),
        ),
    ];
    for (reference, holder) in cases {
        let document = |ty: &str| {
            let mut doc =
                serde_json::from_str::<Value>(&holder.to_string().replace("TYPE", ty)).unwrap();
            doc["$schema"] = json!(schema);
            doc["type"] = json!("object");
            doc["properties"] = json!({"x": {"$ref": reference}});
            with_direction(doc, Some("host-to-runtime"))
        };
        let got = verdict(document("string"), document("integer"));
        assert!(
            got.iter().any(|(_, class, _)| class == "breaking"),
            "{reference}: {got:?}"
        );
    }
}

/// A `oneOf` or `anyOf` that appears or goes is a changed constraint, breaking both ways, not a
/// branch added or removed: one appearing beside `type: object` rejects `{}`, one giving way to
/// a wider `type` accepts `5`.
#[test]
fn a_union_that_appears_or_goes_is_a_changed_constraint() {
    for key in ["oneOf", "anyOf"] {
        for direction in ["runtime-to-host", "host-to-runtime"] {
            let plain = with_direction(json!({"type": "object"}), Some(direction));
            let mut union = json!({"type": "object"});
            union[key] = json!([{"required": ["a"]}]);
            let union = with_direction(union, Some(direction));
            for (old, new) in [(plain.clone(), union.clone()), (union, plain)] {
                assert_eq!(
                    verdict(old, new),
                    [(
                        "constraint-changed".to_owned(),
                        "breaking".to_owned(),
                        format!("/{key}")
                    )],
                    "{key} {direction}"
                );
            }
        }
    }
}

/// A property added with the very schema the object gives its unnamed properties changes
/// nothing an old receiver checks: additive in both directions.
#[test]
fn a_property_added_with_the_additional_properties_schema_is_additive() {
    for direction in ["runtime-to-host", "host-to-runtime"] {
        let mut old = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let mut new = old.clone();
        new["properties"] = json!({"b": {"type": "string"}});
        old = with_direction(old, Some(direction));
        new = with_direction(new, Some(direction));
        assert_eq!(
            verdict(old, new),
            [(
                "property-added".to_owned(),
                "additive".to_owned(),
                "/properties/b".to_owned()
            )],
            "{direction}"
        );
    }
}

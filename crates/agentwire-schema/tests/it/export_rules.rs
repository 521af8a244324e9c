//! Each export conversion rule on a small document: the exact output, the way back, and the
//! target metaschema's verdict.

use agentwire_schema::{Draft, ExportErrorKind, SchemaDocument, export};
use serde_json::{Value, json};

const D07: &str = "http://json-schema.org/draft-07/schema#";
const D2020: &str = "https://json-schema.org/draft/2020-12/schema";

fn load(value: Value) -> SchemaDocument {
    SchemaDocument::from_value(value).unwrap()
}

fn metaschema_accepts(value: &Value, draft: Draft) -> bool {
    match draft {
        Draft::Draft07 => jsonschema::draft7::meta::is_valid(value),
        Draft::Draft202012 => jsonschema::draft202012::meta::is_valid(value),
    }
}

/// Exports `from` to `draft`, checks it equals `to`, validates against the metaschema, loads,
/// and converts back to `from`.
fn converts(from: Value, draft: Draft, to: Value) {
    let doc = load(from.clone());
    let out = export(&doc, draft).unwrap();
    assert_eq!(out, to);
    assert!(metaschema_accepts(&out, draft));
    let back = export(&load(out), doc.draft()).unwrap();
    assert_eq!(back, from);
}

#[test]
fn definitions_and_refs_with_escapes() {
    let d07 = json!({
        "$schema": D07,
        "$id": "https://example.com/p.json",
        "oneOf": [
            {"$ref": "#/definitions/a~1b"},
            {"$ref": "#/definitions/m~0n"},
            {"$ref": "#/definitions/per%25cent"},
            {"$ref": "https://example.com/p.json#/definitions/Plain/properties/definitions"}
        ],
        "discriminator": {"propertyName": "k", "mapping": {"x": "#/definitions/Plain"}},
        "definitions": {
            "a/b": {"type": "string"},
            "m~n": {"type": "integer"},
            "per%cent": {"const": {"definitions": {"$ref": "#/definitions/Plain"}}},
            "Plain": {"type": "object", "properties": {"definitions": {"type": "boolean"}}}
        }
    });
    let d2020 = json!({
        "$schema": D2020,
        "$id": "https://example.com/p.json",
        "oneOf": [
            {"$ref": "#/$defs/a~1b"},
            {"$ref": "#/$defs/m~0n"},
            {"$ref": "#/$defs/per%25cent"},
            {"$ref": "https://example.com/p.json#/$defs/Plain/properties/definitions"}
        ],
        "discriminator": {"propertyName": "k", "mapping": {"x": "#/$defs/Plain"}},
        "$defs": {
            "a/b": {"type": "string"},
            "m~n": {"type": "integer"},
            "per%cent": {"const": {"definitions": {"$ref": "#/definitions/Plain"}}},
            "Plain": {"type": "object", "properties": {"definitions": {"type": "boolean"}}}
        }
    });
    converts(d07.clone(), Draft::Draft202012, d2020.clone());
    converts(d2020, Draft::Draft07, d07);
}

#[test]
fn tuple_items() {
    let d07 = json!({
        "$schema": D07,
        "type": "object",
        "properties": {
            "pair": {"items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false},
            "open": {"items": [{"type": "string"}]},
            "rest": {"additionalItems": {"type": "null"}, "items": [true]},
            "list": {"items": {"type": "string"}},
            "second": {"$ref": "#/properties/pair/items/1"},
            "tail": {"$ref": "#/properties/rest/additionalItems"},
            "each": {"$ref": "#/properties/list/items"}
        }
    });
    let d2020 = json!({
        "$schema": D2020,
        "type": "object",
        "properties": {
            "pair": {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
            "open": {"prefixItems": [{"type": "string"}]},
            "rest": {"items": {"type": "null"}, "prefixItems": [true]},
            "list": {"items": {"type": "string"}},
            "second": {"$ref": "#/properties/pair/prefixItems/1"},
            "tail": {"$ref": "#/properties/rest/items"},
            "each": {"$ref": "#/properties/list/items"}
        }
    });
    converts(d07.clone(), Draft::Draft202012, d2020.clone());
    converts(d2020, Draft::Draft07, d07);
}

#[test]
fn dependencies_split_and_merge() {
    let d07 = json!({
        "$schema": D07,
        "dependencies": {"card": ["billing"], "vip": {"required": ["tier"]}},
        "properties": {"again": {"$ref": "#/dependencies/vip"}}
    });
    let d2020 = json!({
        "$schema": D2020,
        "dependentRequired": {"card": ["billing"]},
        "dependentSchemas": {"vip": {"required": ["tier"]}},
        "properties": {"again": {"$ref": "#/dependentSchemas/vip"}}
    });
    converts(d07, Draft::Draft202012, d2020);

    // One name in both: draft-07 needs allOf of the two.
    let both = json!({
        "$schema": D2020,
        "dependentRequired": {"a": ["b"]},
        "dependentSchemas": {"a": {"minProperties": 3}},
        "properties": {"x": {"$ref": "#/dependentSchemas/a"}}
    });
    let out = export(&load(both), Draft::Draft07).unwrap();
    assert_eq!(
        out,
        json!({
            "$schema": D07,
            "dependencies": {"a": {"allOf": [{"required": ["b"]}, {"minProperties": 3}]}},
            "properties": {"x": {"$ref": "#/dependencies/a/allOf/1"}}
        })
    );
    assert!(metaschema_accepts(&out, Draft::Draft07));
}

#[test]
fn plain_name_ids_are_anchors() {
    let d07 = json!({"$schema": D07, "definitions": {"A": {"$id": "#thing", "type": "string"}}});
    let d2020 = json!({"$schema": D2020, "$defs": {"A": {"$anchor": "thing", "type": "string"}}});
    converts(d07, Draft::Draft202012, d2020);
}

#[test]
fn schema_uri_is_set_and_vendor_data_kept() {
    let without = json!({
        "title": "no $schema",
        "methods": {"a.b": {"since": "1", "scope": "read", "items": [1]}},
        "x-meta": {"definitions": {"$ref": "#/definitions/X"}, "items": [true]},
        "enum": [{"definitions": 1}],
        "default": {"$defs": {}},
        "properties": {"v": {"x-agentwire-since": "1.2", "examples": [{"prefixItems": []}]}}
    });
    let out = export(&load(without.clone()), Draft::Draft07).unwrap();
    let mut expected = json!({"$schema": D07});
    for (k, v) in without.as_object().unwrap() {
        expected
            .as_object_mut()
            .unwrap()
            .insert(k.clone(), v.clone());
    }
    assert_eq!(out, expected);
    assert_eq!(
        out.as_object().unwrap().keys().next().map(String::as_str),
        Some("$schema")
    );
    // Same draft: only $schema changes.
    let out = export(&load(without.clone()), Draft::Draft202012).unwrap();
    assert_eq!(out["$schema"], D2020);
    assert_eq!(
        out.as_object().unwrap().len(),
        without.as_object().unwrap().len() + 1
    );
}

#[test]
fn exclusive_bounds_and_shared_keywords_are_kept() {
    let d07 = json!({
        "$schema": D07,
        "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10, "multipleOf": 0.5,
        "if": {"minimum": 5}, "then": {"maximum": 8}, "else": {"not": {"const": 1}},
        "contains": {"type": "string"}, "propertyNames": {"pattern": "^[a-z]+$"}
    });
    let mut d2020 = d07.clone();
    d2020["$schema"] = json!(D2020);
    converts(d07, Draft::Draft202012, d2020);
}

#[test]
fn ref_siblings_into_07_move_into_all_of() {
    let d2020 = json!({
        "$schema": D2020,
        "$defs": {"Id": {"type": "string"}},
        "properties": {
            "a": {"$ref": "#/$defs/Id", "maxLength": 8, "description": "kept beside"},
            "b": {"$ref": "#/$defs/Id", "allOf": [{"minLength": 1}]},
            "c": {"$ref": "#/$defs/Id", "description": "annotations stay beside"}
        }
    });
    let out = export(&load(d2020), Draft::Draft07).unwrap();
    assert_eq!(
        out["properties"],
        json!({
            "a": {"allOf": [{"$ref": "#/definitions/Id"}], "maxLength": 8, "description": "kept beside"},
            "b": {"allOf": [{"minLength": 1}, {"$ref": "#/definitions/Id"}]},
            "c": {"$ref": "#/definitions/Id", "description": "annotations stay beside"}
        })
    );
    assert!(metaschema_accepts(&out, Draft::Draft07));
}

fn export_error(value: Value, draft: Draft) -> (ExportErrorKind, String, String) {
    let err = export(&load(value), draft).unwrap_err();
    (err.kind, err.pointer.clone(), err.to_string())
}

#[test]
fn what_07_cannot_say_is_an_error_with_its_pointer() {
    let (kind, pointer, text) = export_error(
        json!({"$schema": D2020, "properties": {"a": {"type": "object", "unevaluatedProperties": false}}}),
        Draft::Draft07,
    );
    assert_eq!(kind, ExportErrorKind::Inexpressible);
    assert_eq!(pointer, "/properties/a/unevaluatedProperties");
    assert_eq!(
        text,
        "export.inexpressible at /properties/a/unevaluatedProperties: unevaluatedProperties has no draft-07 equivalent"
    );
    for (value, at) in [
        (
            json!({"$schema": D2020, "$dynamicAnchor": "n", "items": {"$dynamicRef": "#n"}}),
            "/$dynamicAnchor",
        ),
        (
            json!({"$schema": D2020, "anyOf": [{"contains": true, "minContains": 2}]}),
            "/anyOf/0/minContains",
        ),
        (
            json!({"$schema": D2020, "$defs": {"A": {"unevaluatedItems": false}}}),
            "/$defs/A/unevaluatedItems",
        ),
    ] {
        let (kind, pointer, _) = export_error(value, Draft::Draft07);
        assert_eq!(
            (kind, pointer.as_str()),
            (ExportErrorKind::Inexpressible, at)
        );
    }
    let (kind, pointer, _) = export_error(
        json!({"$schema": D2020, "$defs": {"A": {"$anchor": "a", "$id": "https://x.example/a"}}}),
        Draft::Draft07,
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (ExportErrorKind::Inexpressible, "/$defs/A/$anchor")
    );
}

#[test]
fn keywords_the_source_ignores_are_not_brought_to_life() {
    for (value, draft, at) in [
        (
            json!({"$schema": D07, "properties": {"t": {"prefixItems": [true]}}}),
            Draft::Draft202012,
            "/properties/t/prefixItems",
        ),
        (
            json!({"$schema": D07, "dependentRequired": {"a": ["b"]}}),
            Draft::Draft202012,
            "/dependentRequired",
        ),
        (
            json!({"$schema": D07, "items": {"type": "string"}, "additionalItems": false}),
            Draft::Draft202012,
            "/additionalItems",
        ),
        (
            json!({"$schema": D2020, "items": [true]}),
            Draft::Draft07,
            "/items",
        ),
        (
            json!({"$schema": D2020, "additionalItems": false}),
            Draft::Draft07,
            "/additionalItems",
        ),
        (
            json!({"$schema": D2020, "dependencies": {"a": ["b"]}}),
            Draft::Draft07,
            "/dependencies",
        ),
    ] {
        let (kind, pointer, _) = export_error(value, draft);
        assert_eq!(
            (kind, pointer.as_str()),
            (ExportErrorKind::ForeignKeyword, at)
        );
    }
}

#[test]
fn ref_siblings_from_07_are_an_error() {
    let (kind, pointer, text) = export_error(
        json!({"$schema": D07, "definitions": {"Id": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/Id", "title": "ok", "maxLength": 3}}}),
        Draft::Draft202012,
    );
    assert_eq!(kind, ExportErrorKind::RefSiblings);
    assert_eq!(pointer, "/properties/a/maxLength");
    assert_eq!(
        text,
        "export.ref-siblings at /properties/a/maxLength: draft-07 ignores maxLength beside $ref, but 2020-12 would enforce it"
    );
}

#[test]
fn both_definition_keywords_conflict() {
    let (kind, pointer, _) = export_error(
        json!({"$schema": D07, "definitions": {"A": true}, "$defs": {"B": true}}),
        Draft::Draft202012,
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (ExportErrorKind::DefinitionsConflict, "")
    );
}

#[test]
fn a_document_the_metaschema_rejects_is_an_error() {
    let (kind, pointer, _) = export_error(
        json!({"$schema": D2020, "properties": {"a": {"minLength": -1}}}),
        Draft::Draft07,
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (ExportErrorKind::Metaschema, "/properties/a/minLength")
    );
    let (kind, pointer, _) = export_error(json!({"$schema": D07, "type": "int"}), Draft::Draft07);
    assert_eq!(
        (kind, pointer.as_str()),
        (ExportErrorKind::Metaschema, "/type")
    );
}

#[test]
fn error_codes_are_stable() {
    let codes: Vec<&str> = [
        ExportErrorKind::Inexpressible,
        ExportErrorKind::ForeignKeyword,
        ExportErrorKind::RefSiblings,
        ExportErrorKind::DefinitionsConflict,
        ExportErrorKind::TooDeep,
        ExportErrorKind::Metaschema,
    ]
    .iter()
    .map(|k| k.code())
    .collect();
    assert_eq!(
        codes,
        [
            "export.inexpressible",
            "export.foreign-keyword",
            "export.ref-siblings",
            "export.definitions-conflict",
            "export.too-deep",
            "export.metaschema"
        ]
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut schema = json!({"type": "string"});
    for _ in 0..200 {
        schema = json!({"not": schema});
    }
    schema["$schema"] = json!(D07);
    let (kind, _, _) = export_error(schema, Draft::Draft202012);
    assert_eq!(kind, ExportErrorKind::TooDeep);
}

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    /// Draft-07 schemas built from every construct that has a 2020-12 spelling.
    fn schema07() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            prop::sample::select(vec!["string", "integer", "object", "array", "null"])
                .prop_map(|t| json!({"type": t})),
            any::<i32>().prop_map(|n| json!({"const": n, "description": "c"})),
            any::<bool>().prop_map(Value::Bool),
            (0u32..10).prop_map(|n| json!({"minimum": n, "exclusiveMaximum": n + 5})),
            prop::sample::select(vec!["a/b", "Plain"])
                .prop_map(|d| json!({"$ref": format!("#/definitions/{}", d.replace('~', "~0").replace('/', "~1"))})),
        ];
        leaf.prop_recursive(4, 48, 4, |inner| {
            prop_oneof![
                prop::collection::btree_map("[a-z]{1,3}", inner.clone(), 1..4).prop_map(
                    |m| json!({"type": "object", "properties": m, "additionalProperties": false})
                ),
                (prop::collection::vec(inner.clone(), 1..3), inner.clone())
                    .prop_map(|(items, rest)| json!({"items": items, "additionalItems": rest})),
                prop::collection::vec(inner.clone(), 1..3)
                    .prop_map(|items| json!({"items": items})),
                inner
                    .clone()
                    .prop_map(|s| json!({"items": s, "maxItems": 3})),
                prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"anyOf": v})),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"if": a, "then": b})),
                inner
                    .clone()
                    .prop_map(|s| json!({"dependencies": {"a": ["b", "c"], "d": s}})),
                inner
                    .clone()
                    .prop_map(|s| json!({"not": s, "x-note": {"items": [1]}})),
            ]
        })
    }

    fn document07() -> impl Strategy<Value = Value> {
        (schema07(), schema07()).prop_map(|(root, def)| {
            let mut doc = json!({
                "$schema": D07,
                "definitions": {
                    "a/b": {"type": "string"},
                    "m~n": def,
                    "Plain": true,
                    "Wrap": {"$ref": "#/definitions/m~0n"}
                }
            });
            if let (Value::Object(doc), Value::Object(root)) = (&mut doc, root) {
                doc.extend(root);
            }
            doc
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn draft07_there_and_back_is_identity(doc in document07()) {
            let loaded = SchemaDocument::from_value(doc.clone()).unwrap();
            let out = export(&loaded, Draft::Draft202012).unwrap();
            prop_assert!(metaschema_accepts(&out, Draft::Draft202012));
            let text = out.to_string();
            prop_assert!(!text.contains("\"additionalItems\"") && !text.contains("\"definitions\""));
            let back = export(&SchemaDocument::from_value(out).unwrap(), Draft::Draft07).unwrap();
            prop_assert_eq!(back, doc);
        }
    }
}

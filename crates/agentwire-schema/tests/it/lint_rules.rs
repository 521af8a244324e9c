//! Each lint rule on the smallest document that shows it, with the exact findings.

use agentwire_schema::lint::{DefinitionRoots, LintOptions, lint_document, lint_value_with};
use agentwire_schema::{Draft, LintCode, LoadOptions, SchemaDocument, Severity, lint, lint_value};
use serde_json::{Value, json};

const D07: &str = "http://json-schema.org/draft-07/schema#";
const D2020: &str = "https://json-schema.org/draft/2020-12/schema";

/// `(code, pointer)` of every finding, in report order.
fn found(value: Value) -> Vec<(String, String)> {
    lint_value(&value)
        .into_iter()
        .map(|f| (f.code.code().to_owned(), f.pointer))
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(c, p)| ((*c).to_owned(), (*p).to_owned()))
        .collect()
}

#[test]
fn a_clean_document_has_no_findings() {
    let doc = json!({
        "$schema": D2020,
        "type": "object",
        "properties": {"kind": {"$ref": "#/$defs/Kind"}},
        "required": ["kind"],
        "additionalProperties": false,
        "$defs": {"Kind": {"enum": ["a", "b"], "title": "Kind", "x-agentwire-since": "1.0"}}
    });
    assert_eq!(found(doc), []);
}

#[test]
fn every_unresolved_ref_is_reported_not_just_the_first() {
    let value = json!({
        "$schema": D2020,
        "$id": "https://example.com/p.json",
        "anyOf": [
            {"$ref": "#/$defs/Missing"},
            {"$ref": "#/$defs/AlsoMissing"},
            {"$ref": "#nowhere"},
            {"$ref": "#/$defs/a%ZZ"},
            {"$ref": "https://example.com/p.json#/$defs/Here"},
            {"$ref": "other.json#/x"},
            {"$ref": "#/$defs/Here/type"},
            {"$ref": 7}
        ],
        "$defs": {"Here": {"type": "string"}}
    });
    assert!(SchemaDocument::from_value(value.clone()).is_err());
    let findings = lint_value(&value);
    let got: Vec<(&str, &str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str(), f.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "AW001",
                "/anyOf/0/$ref",
                "\"#/$defs/Missing\" does not resolve to anything in this document"
            ),
            (
                "AW001",
                "/anyOf/1/$ref",
                "\"#/$defs/AlsoMissing\" does not resolve to anything in this document"
            ),
            (
                "AW001",
                "/anyOf/2/$ref",
                "\"#nowhere\" names no $anchor \"nowhere\" in this document"
            ),
            (
                "AW001",
                "/anyOf/3/$ref",
                "\"#/$defs/a%ZZ\" has a malformed percent escape"
            ),
            (
                "AW002",
                "/anyOf/5/$ref",
                "\"other.json#/x\" points into another document; only references inside this document are followed"
            ),
            (
                "AW001",
                "/anyOf/6/$ref",
                "\"#/$defs/Here/type\" points at a value that is not a schema"
            ),
            ("AW005", "/anyOf/7/$ref", "$ref must be a string"),
        ]
    );
    assert!(findings.iter().all(|f| f.severity == Severity::Error));
}

#[test]
fn references_resolve_as_the_loader_resolves_them() {
    // Draft-07 plain-name `$id` anchors resolve in lint exactly as in the loader.
    let value = json!({"$schema": D07, "definitions": {"A": {"$id": "#a"}}, "$ref": "#a"});
    assert!(SchemaDocument::from_value(value.clone()).is_ok());
    let codes: Vec<&str> = lint_value(&value).iter().map(|f| f.code.code()).collect();
    assert!(!codes.contains(&"AW001"), "{codes:?}");
    let missing = json!({"$schema": D07, "definitions": {"A": {"$id": "#a"}}, "$ref": "#b"});
    assert!(SchemaDocument::from_value(missing.clone()).is_err());
    let findings = lint_value(&missing);
    assert_eq!(findings[0].code.code(), "AW001");
    assert_eq!(findings[0].pointer, "/$ref");
    assert_eq!(
        findings[0].message,
        "\"#b\" names no $anchor \"b\" in this document"
    );
}

#[test]
fn discriminator_mappings_are_references() {
    let value = json!({
        "$schema": D07,
        "oneOf": [{"$ref": "#/definitions/A"}],
        "discriminator": {"propertyName": "type", "mapping": {"a": "#/definitions/A", "b": "#/definitions/B"}},
        "definitions": {"A": {"type": "object", "additionalProperties": false}}
    });
    assert_eq!(
        found(value),
        pairs(&[("AW001", "/discriminator/mapping/b")])
    );
}

#[test]
fn ref_cycles_are_reported_once_refs_resolve() {
    let value = json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"});
    assert_eq!(found(value), pairs(&[("AW003", "/$defs/B/anyOf/0")]));
}

#[test]
fn unknown_draft_is_an_error_and_skips_keyword_rules() {
    let value = json!({"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {}, "nullable": true});
    assert_eq!(found(value), pairs(&[("AW004", "/$schema")]));
}

#[test]
fn unknown_keywords_and_known_extensions() {
    let value = json!({
        "$schema": D07,
        "title": "t", "description": "d", "examples": [1], "default": 1, "deprecated": true,
        "readOnly": true, "writeOnly": false, "$comment": "c",
        "x-vendor": {"anything": true},
        "discriminator": "type",
        "methods": {"a.b": {"since": "1", "scope": "read"}},
        "nullable": true,
        "properties": {"nullable": {"type": "string"}, "p": {"methods": {}}},
        "additionalProperties": false
    });
    assert_eq!(
        found(value),
        pairs(&[("AW010", "/nullable"), ("AW010", "/properties/p/methods")])
    );
}

#[test]
fn keywords_of_the_other_draft_have_their_own_code() {
    let in07 = json!({
        "$schema": D07,
        "$defs": {"A": true},
        "prefixItems": [true],
        "unevaluatedProperties": false,
        "dependentRequired": {"a": ["b"]},
        "$anchor": "x"
    });
    assert_eq!(
        found(in07),
        pairs(&[
            ("AW011", "/$defs"),
            ("AW011", "/prefixItems"),
            ("AW011", "/unevaluatedProperties"),
            ("AW011", "/dependentRequired"),
            ("AW011", "/$anchor"),
            ("AW051", "/$defs"),
        ])
    );
    let in2020 = json!({
        "$schema": D2020,
        "definitions": {"A": true},
        "items": [true],
        "additionalItems": false,
        "dependencies": {"a": ["b"]},
        "$ref": "#/definitions/A"
    });
    let findings = lint_value(&in2020);
    let got: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW011", "/definitions"),
            ("AW011", "/items"),
            ("AW011", "/additionalItems"),
            ("AW011", "/dependencies")
        ]
    );
    assert_eq!(
        findings[1].message,
        "array-form items is draft-07; 2020-12 spells it prefixItems"
    );
    assert_eq!(
        findings[0].message,
        "definitions is a draft-07 keyword; 2020-12 ignores it"
    );
    assert_eq!(findings[0].severity, Severity::Warning);
}

#[test]
fn default_draft_follows_load_options() {
    let value = json!({"definitions": {}});
    let opts = LintOptions {
        load: LoadOptions {
            default_draft: Draft::Draft07,
        },
        ..LintOptions::default()
    };
    assert!(lint_value_with(&value, opts).is_empty());
    assert_eq!(found(value), pairs(&[("AW011", "/definitions")]));
}

#[test]
fn type_values_must_be_json_schema_types() {
    let value = json!({
        "anyOf": [{"type": "int"}, {"type": ["string", "date", "string"]}, {"type": 3}, {"type": ["null", 1]}]
    });
    let findings = lint_value(&value);
    let got: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW020", "/anyOf/0/type"),
            ("AW020", "/anyOf/1/type/1"),
            ("AW005", "/anyOf/1/type/2"),
            ("AW005", "/anyOf/2/type"),
            ("AW005", "/anyOf/3/type/1"),
        ]
    );
    assert_eq!(
        findings[0].message,
        "\"int\" is not a JSON Schema type (one of null, boolean, object, array, number, string, integer)"
    );
}

#[test]
fn contradictory_bounds() {
    let value = json!({"anyOf": [
        {"minimum": 5, "maximum": 4},
        {"minimum": 4, "maximum": 4},
        {"exclusiveMinimum": 4, "maximum": 4},
        {"minimum": 4, "exclusiveMaximum": 4},
        {"minLength": 3, "maxLength": 2},
        {"minItems": 1, "maxItems": 0},
        {"minProperties": 2.0, "maxProperties": 1},
        {"minContains": 2, "maxContains": 1},
        {"required": ["a", "b"], "maxProperties": 1},
        {"minLength": 2, "maxLength": 2}
    ]});
    let findings = lint_value(&value);
    let got: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW021", "/anyOf/0/minimum"),
            ("AW021", "/anyOf/2/exclusiveMinimum"),
            ("AW021", "/anyOf/3/minimum"),
            ("AW021", "/anyOf/4/minLength"),
            ("AW021", "/anyOf/5/minItems"),
            ("AW021", "/anyOf/6/minProperties"),
            ("AW021", "/anyOf/7/minContains"),
            ("AW021", "/anyOf/8/maxProperties"),
        ]
    );
    assert_eq!(
        findings[0].message,
        "minimum 5 and maximum 4 leave no number that passes"
    );
    assert_eq!(
        findings[3].message,
        "minLength 3 is above maxLength 2: no string passes"
    );
}

#[test]
fn malformed_keyword_values() {
    let value = json!({"anyOf": [
        {"minLength": -1}, {"maxItems": 1.5}, {"minimum": "3"}, {"multipleOf": 0},
        {"required": "a"}, {"required": ["a", "a"]}, {"enum": {}}, {"pattern": 3},
        {"properties": []}, {"allOf": {}}, {"not": 3}, {"items": "x"}, {"properties": {"a": 1}}
    ]});
    let got: Vec<(String, String)> = found(value);
    assert_eq!(
        got,
        pairs(&[
            ("AW005", "/anyOf/0/minLength"),
            ("AW005", "/anyOf/1/maxItems"),
            ("AW005", "/anyOf/2/minimum"),
            ("AW005", "/anyOf/3/multipleOf"),
            ("AW005", "/anyOf/4/required"),
            ("AW005", "/anyOf/5/required/1"),
            ("AW005", "/anyOf/6/enum"),
            ("AW005", "/anyOf/7/pattern"),
            ("AW005", "/anyOf/8/properties"),
            ("AW005", "/anyOf/9/allOf"),
            ("AW005", "/anyOf/10/not"),
            ("AW005", "/anyOf/11/items"),
            ("AW040", "/anyOf/12"),
            ("AW005", "/anyOf/12/properties/a"),
        ])
    );
}

#[test]
fn patterns_must_be_ecma_262() {
    let value = json!({
        "type": "object",
        "properties": {
            "ok": {"pattern": "^[\\p{L}\\d]+$"},
            "surrogates": {"pattern": "^[^\\uD800-\\uDFFF]*$"},
            "lookbehind": {"pattern": "(?<=a)b"},
            "rust_only": {"pattern": "(?i)abc"},
            "unclosed": {"pattern": "(ab"}
        },
        "patternProperties": {"^x-[": true, "^y-.*$": true},
        "additionalProperties": false
    });
    let findings = lint_value(&value);
    let got: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW022", "/patternProperties/^x-["),
            ("AW022", "/properties/rust_only/pattern"),
            ("AW022", "/properties/unclosed/pattern"),
        ]
    );
    assert_eq!(
        findings[2].message,
        "\"(ab\" is not an ECMA-262 regular expression"
    );
}

#[test]
fn duplicate_enum_values_use_json_equality() {
    let value = json!({"anyOf": [
        {"enum": ["a", "b", "a"]},
        {"enum": [1, 1.0, true, "1"]},
        {"enum": [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}, {"a": 2}]},
        {"enum": [null, false, 0, "", [], {}]}
    ]});
    let findings = lint_value(&value);
    let got: Vec<(&str, &str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str(), f.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW030", "/anyOf/0/enum/2", "enum value 2 equals value 0"),
            ("AW030", "/anyOf/1/enum/1", "enum value 1 equals value 0"),
            ("AW030", "/anyOf/2/enum/1", "enum value 1 equals value 0"),
        ]
    );
}

#[test]
fn required_names_missing_from_properties() {
    let value = json!({"anyOf": [
        // Open object: the name is required but has no schema (a typo, most likely).
        {"properties": {"name": {}}, "required": ["name", "nmae"], "additionalProperties": true},
        {"properties": {"name": {}}, "required": ["nmae"]},
        // Closed object: no instance can pass.
        {"properties": {"a": {}}, "required": ["b"], "additionalProperties": false},
        // A pattern or an additionalProperties schema can supply the name.
        {"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "required": ["x-b"], "additionalProperties": false},
        {"properties": {"a": {}}, "required": ["b"], "additionalProperties": {"type": "string"}},
        // No properties at all: the rule does not apply.
        {"required": ["b"]}
    ]});
    let findings = lint_value(&value);
    let got: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("AW031", "/anyOf/1/required/0"),
            ("AW040", "/anyOf/1"),
            ("AW032", "/anyOf/2/required/0")
        ]
    );
    assert_eq!(
        findings[0].message,
        "\"nmae\" is required but not declared in properties"
    );
    assert_eq!(findings[0].severity, Severity::Warning);
    assert_eq!(
        findings[2].message,
        "\"b\" is required but additionalProperties: false forbids it: no object passes"
    );
    assert_eq!(findings[2].severity, Severity::Error);
}

#[test]
fn branches_may_require_what_the_enclosing_schema_declares() {
    let value = json!({
        "$schema": D07,
        "type": "object",
        "properties": {"kind": {"type": "string"}, "a": {}, "b": {}, "not": {"properties": {"x": {}}, "required": ["y"]}},
        "additionalProperties": false,
        "oneOf": [
            {"properties": {"kind": {"const": "a"}}, "required": ["kind", "a"]},
            {"properties": {"kind": {"const": "b"}}, "required": ["kind", "b", "c"]},
            {"allOf": [{"$ref": "#/definitions/Base"}, {"properties": {"kind": {}}, "required": ["base"]}]}
        ],
        "definitions": {"Base": {"properties": {"base": {}}, "additionalProperties": true}}
    });
    let got = found(value);
    // Only the name nobody declares is reported; the branches inherit the root's closed policy.
    // `/properties/not` is a property named "not", not a branch, so it stands alone.
    assert_eq!(
        got,
        pairs(&[
            ("AW031", "/properties/not/required/0"),
            ("AW040", "/properties/not"),
            ("AW031", "/oneOf/1/required/2")
        ])
    );
}

#[test]
fn objects_without_additional_properties_policy() {
    let value = json!({
        "$schema": D2020,
        "anyOf": [
            {"type": "object", "properties": {"a": {}}},
            {"type": "object", "properties": {"a": {}}, "additionalProperties": true},
            {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false},
            {"type": "object", "patternProperties": {"^a": {}}}
        ]
    });
    let findings = lint_value(&value);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, LintCode::OpenObject);
    assert_eq!(findings[0].pointer, "/anyOf/0");
    assert_eq!(findings[0].severity, Severity::Warning);
    // Conditions are not shapes; a property named `if` is.
    let value = json!({
        "$schema": D2020, "type": "object", "additionalProperties": false,
        "properties": {
            "if": {"type": "object", "properties": {"a": {}}},
            "b": {"if": {"properties": {"a": {"const": 1}}}, "not": {"properties": {"c": {}}}}
        }
    });
    assert_eq!(found(value), pairs(&[("AW040", "/properties/if")]));
    // In draft-07 unevaluatedProperties is nothing (and reported as a 2020-12 keyword).
    let value = json!({"$schema": D07, "properties": {"a": {}}, "unevaluatedProperties": false});
    assert_eq!(
        found(value),
        pairs(&[("AW011", "/unevaluatedProperties"), ("AW040", "")])
    );
}

fn rooted_document() -> Value {
    json!({
        "$schema": D2020,
        "$ref": "#/$defs/Message",
        "x-registry": {"methods": {"ping": {"params": "PingParams", "result": "#/$defs/PingResult"}}},
        "$defs": {
            "Message": {"oneOf": [{"$ref": "#/$defs/Request"}, {"$ref": "#/$defs/Notice"}]},
            "Request": {"type": "object", "properties": {"id": {"$ref": "#/$defs/Id"}}, "additionalProperties": false},
            "Notice": {"type": "object", "properties": {"n": {"x-agentwire-versions": [{"since": "2", "schema": {"$ref": "#/$defs/NoticeV2"}}]}}, "additionalProperties": false},
            "NoticeV2": true,
            "Id": {"type": "string"},
            "PingParams": {"$ref": "#/$defs/Shared"},
            "PingResult": true,
            "Shared": true,
            "Unused": {"$ref": "#/$defs/AlsoUnused"},
            "AlsoUnused": true
        }
    })
}

#[test]
fn unreachable_definitions_in_a_rooted_document() {
    let value = rooted_document();
    let findings = lint_value(&value);
    let got: Vec<(&str, &str, &str)> = findings
        .iter()
        .map(|f| (f.code.code(), f.pointer.as_str(), f.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "AW050",
                "/$defs/Unused",
                "definition \"Unused\" is referenced neither from the root schema nor from a registry"
            ),
            (
                "AW050",
                "/$defs/AlsoUnused",
                "definition \"AlsoUnused\" is referenced neither from the root schema nor from a registry"
            ),
        ]
    );
    let doc = SchemaDocument::from_value(value).unwrap();
    assert_eq!(lint(&doc), findings);
    assert_eq!(lint_document(&doc, DefinitionRoots::Registry), []);
}

#[test]
fn a_document_whose_definitions_are_mostly_unreferenced_is_a_registry() {
    let value = json!({
        "$schema": D07,
        "oneOf": [{"$ref": "#/definitions/Frame"}],
        "methods": {"a.b": {"since": "1", "scope": "read"}},
        "definitions": {"Frame": true, "AParams": true, "BParams": true, "CEvent": true}
    });
    let findings = lint_value(&value);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, LintCode::RegistryDocument);
    assert_eq!(findings[0].severity, Severity::Info);
    assert_eq!(findings[0].pointer, "/definitions");
    assert_eq!(
        findings[0].message,
        "3 of 4 definitions are referenced neither from the root schema nor from a registry: the \
         document is read as a registry whose definitions are entry points by name, so \
         unreferenced definitions are not reported one by one"
    );
    let rooted = LintOptions {
        definitions: DefinitionRoots::Rooted,
        ..LintOptions::default()
    };
    let got: Vec<String> = lint_value_with(&value, rooted)
        .into_iter()
        .map(|f| f.pointer)
        .collect();
    assert_eq!(
        got,
        [
            "/definitions/AParams",
            "/definitions/BParams",
            "/definitions/CEvent"
        ]
    );
}

#[test]
fn a_non_schema_document() {
    let findings = lint_value(&json!([1, 2]));
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].code, LintCode::MalformedKeyword);
    assert_eq!(findings[0].pointer, "");
    assert_eq!(lint_value(&json!(true)), []);
}

#[test]
fn findings_print_as_one_line() {
    let findings = lint_value(&json!({"properties": {"a": {}}, "nope": 1}));
    let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "warning AW010 /nope: nope is not a 2020-12 keyword (vendor data belongs under an x- key)",
            "warning AW040 (root): object has properties but no additionalProperties policy: unknown \
             properties pass silently (say additionalProperties: false to close it, or true to keep \
             it open on purpose)",
        ]
    );
    let json = serde_json::to_value(&findings[0]).unwrap();
    assert_eq!(
        json,
        json!({"code": "AW010", "severity": "warning", "pointer": "/nope",
               "message": "nope is not a 2020-12 keyword (vendor data belongs under an x- key)"})
    );
}

#[test]
fn every_code_has_a_fixed_severity_and_name() {
    let table: Vec<String> = LintCode::ALL
        .iter()
        .map(|c| format!("{} {} {}", c.code(), c.severity(), c.name()))
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// JSON values shaped like schemas: keyword-ish keys, nested objects and arrays.
    fn schema_like() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(vec![
            "type",
            "properties",
            "required",
            "items",
            "$ref",
            "enum",
            "minimum",
            "maximum",
            "pattern",
            "allOf",
            "oneOf",
            "not",
            "$defs",
            "definitions",
            "additionalProperties",
            "x-a",
            "methods",
            "a",
            "minLength",
            "maxLength",
            "discriminator",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            prop::sample::select(vec![
                "string",
                "int",
                "#/$defs/a",
                "#/definitions/a",
                "(",
                "^a$",
                "a"
            ])
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5).prop_map(|entries| {
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                    )
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Lint accepts any value, reports pointers that exist, and on a document that loads
        /// says the same through both entry points.
        #[test]
        fn lint_is_total_and_consistent(value in schema_like()) {
            let findings = lint_value(&value);
            for finding in &findings {
                prop_assert_eq!(finding.severity, finding.code.severity());
                prop_assert!(
                    value.pointer(&finding.pointer).is_some(),
                    "{} points nowhere", finding
                );
            }
            if let Ok(doc) = SchemaDocument::from_value(value.clone()) {
                prop_assert_eq!(lint(&doc), findings);
            }
        }
    }
}

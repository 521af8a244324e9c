//! Validator behaviour on small schemas: every issue with its pointers, keyword, code and
//! sentence; discriminated unions; strict input; formats and ECMA-262 patterns; compile errors.

use agentwire_schema::{IssueCode, JsonErrorKind, SchemaDocument, SchemaErrorKind, Validator};
use serde_json::{Value, json};

use crate::support::{self, IssueRow, doc, one};

/// Every issue of `instance` (see [`support::issues`]).
fn issues(validator: &Validator, instance: Value) -> Vec<IssueRow> {
    support::issues(validator, &instance)
}

fn shapes() -> SchemaDocument {
    doc(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/shapes.json",
        "$defs": {
            "X": {
                "type": "object",
                "properties": {
                    "y": {"type": "string", "minLength": 5},
                    "n": {"type": "integer", "minimum": 1, "maximum": 9},
                    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "maxItems": 3},
                    "id": {"$ref": "#/$defs/Id"}
                },
                "required": ["y", "n"],
                "additionalProperties": false
            },
            "Id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:/-]*$", "maxLength": 8}
        },
        "$ref": "#/$defs/X"
    }))
}

#[test]
fn reports_every_issue_with_document_locations() {
    let v = shapes().validator_for("X").unwrap();
    assert_eq!(v.schema_pointer(), "/$defs/X");
    assert_eq!(issues(&v, json!({"y": "okay-long", "n": 3})), vec![]);
    assert_eq!(
        issues(
            &v,
            json!({"y": "abc", "n": 0, "tags": ["a", "c", "a", "b"], "id": " bad id too long", "extra": 1})
        ),
        vec![
            one(
                "/y",
                "/$defs/X/properties/y/minLength",
                "validate.min-length",
                "\"abc\" is shorter than 5 characters"
            ),
            one(
                "/n",
                "/$defs/X/properties/n/minimum",
                "validate.minimum",
                "0 is less than the minimum 1"
            ),
            one(
                "/tags",
                "/$defs/X/properties/tags/maxItems",
                "validate.max-items",
                "the array has 4 items, more than the maximum of 3"
            ),
            one(
                "/tags",
                "/$defs/X/properties/tags/uniqueItems",
                "validate.unique-items",
                "items 0 and 2 are equal; items must be unique"
            ),
            one(
                "/tags/1",
                "/$defs/X/properties/tags/items/enum",
                "validate.enum",
                "\"c\" is not one of \"a\" or \"b\""
            ),
            one(
                "/id",
                "/$defs/Id/maxLength",
                "validate.max-length",
                "\" bad id too long\" is longer than 8 characters"
            ),
            one(
                "/id",
                "/$defs/Id/pattern",
                "validate.pattern",
                "\" bad id too long\" does not match the pattern ^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
            ),
            one(
                "/extra",
                "/$defs/X/additionalProperties",
                "validate.additional-property",
                "property \"extra\" is not allowed here"
            ),
        ]
    );
    assert_eq!(
        issues(&v, json!({"n": "3"})),
        vec![
            one(
                "",
                "/$defs/X/required",
                "validate.required",
                "missing required property \"y\""
            ),
            one(
                "/n",
                "/$defs/X/properties/n/type",
                "validate.type",
                "\"3\" is a string, expected integer"
            ),
        ]
    );
}

#[test]
fn root_validator_follows_the_root_ref() {
    let v = shapes().validator().unwrap();
    assert_eq!(v.schema_pointer(), "");
    assert_eq!(
        issues(&v, json!({"y": "abcdef"})),
        vec![one(
            "",
            "/$defs/X/required",
            "validate.required",
            "missing required property \"n\""
        )]
    );
}

fn frames() -> SchemaDocument {
    doc(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://example.com/frames.json",
        "oneOf": [{"$ref": "#/definitions/Req"}, {"$ref": "#/definitions/Res"}],
        "discriminator": {"propertyName": "type", "mapping": {"req": "#/definitions/Req", "res": "#/definitions/Res"}},
        "definitions": {
            "Req": {
                "type": "object",
                "properties": {"type": {"const": "req"}, "id": {"type": "string", "minLength": 1}, "method": {"type": "string"}},
                "required": ["type", "id", "method"],
                "additionalProperties": false
            },
            "Res": {
                "type": "object",
                "properties": {"type": {"const": "res"}, "id": {"type": "string"}, "ok": {"type": "boolean"}},
                "required": ["type", "id", "ok"],
                "additionalProperties": false
            }
        }
    }))
}

#[test]
fn discriminator_selects_the_branch_to_report() {
    let v = frames().validator().unwrap();
    assert_eq!(
        issues(&v, json!({"type": "req", "id": "1", "method": "health"})),
        vec![]
    );
    assert_eq!(
        issues(
            &v,
            json!({"type": "req", "id": 1, "method": "health", "x": true})
        ),
        vec![
            one(
                "/id",
                "/definitions/Req/properties/id/type",
                "validate.type",
                "1 is an integer, expected string"
            ),
            one(
                "/x",
                "/definitions/Req/additionalProperties",
                "validate.additional-property",
                "property \"x\" is not allowed here"
            ),
        ]
    );
    assert_eq!(
        issues(&v, json!({"type": "rpc", "id": "1"})),
        vec![one(
            "/type",
            "/discriminator",
            "validate.discriminator",
            "\"rpc\" is not a known \"type\"; expected \"req\" or \"res\""
        )]
    );
    assert_eq!(
        issues(&v, json!({"id": "1"})),
        vec![one(
            "",
            "/discriminator",
            "validate.required",
            "missing required property \"type\", which selects the kind of object (\"req\" or \"res\")"
        )]
    );
    let found = v.validate(&json!({"type": "rpc"}));
    assert_eq!(found[0].keyword, "discriminator");
    assert_eq!(found[0].code, IssueCode::Discriminator);
}

#[test]
fn detected_tags_dispatch_anyof_and_nested_unions() {
    let d = doc(json!({
        "$defs": {
            "Decision": {
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "acceptOnce"}}, "required": ["kind"], "additionalProperties": false},
                    {"type": "object", "properties": {"kind": {"const": "decline"}, "reason": {"type": "string", "maxLength": 4}}, "required": ["kind"], "additionalProperties": false}
                ]
            }
        },
        "type": "object",
        "properties": {"decision": {"$ref": "#/$defs/Decision"}, "value": {"anyOf": [{"type": "string"}, {"type": "null"}]}}
    }));
    let v = d.validator().unwrap();
    assert_eq!(
        issues(
            &v,
            json!({"decision": {"kind": "acceptOnce", "permissions": []}})
        ),
        vec![one(
            "/decision/permissions",
            "/$defs/Decision/oneOf/0/additionalProperties",
            "validate.additional-property",
            "property \"permissions\" is not allowed here"
        )]
    );
    assert_eq!(
        issues(
            &v,
            json!({"decision": {"kind": "decline", "reason": "too long"}})
        ),
        vec![one(
            "/decision/reason",
            "/$defs/Decision/oneOf/1/properties/reason/maxLength",
            "validate.max-length",
            "\"too long\" is longer than 4 characters"
        )]
    );
    assert_eq!(
        issues(&v, json!({"decision": {"kind": "maybe"}})),
        vec![one(
            "/decision/kind",
            "/$defs/Decision/oneOf",
            "validate.discriminator",
            "\"maybe\" is not a known \"kind\"; expected \"acceptOnce\" or \"decline\""
        )]
    );
    // No tag tells the anyOf branches apart: one issue summarising each branch.
    assert_eq!(
        issues(&v, json!({"value": 3})),
        vec![one(
            "/value",
            "/properties/value/anyOf",
            "validate.any-of-none",
            "3 matches none of the 2 alternatives: alternative 1: 3 is an integer, expected string; alternative 2: 3 is an integer, expected null"
        )]
    );
}

#[test]
fn oneof_with_several_matches_names_them() {
    let v = doc(json!({"oneOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}], "$defs": {"A": {"type": "number"}}})).validator().unwrap();
    assert_eq!(
        issues(&v, json!(3)),
        vec![one(
            "",
            "/oneOf",
            "validate.one-of-many",
            "matches 2 alternatives (A, alternative 2) where exactly one must match"
        )]
    );
}

#[test]
fn bytes_go_through_the_strict_parser() {
    let v = shapes().validator_for("Id").unwrap();
    let codes = |bytes: &[u8]| -> Vec<&'static str> {
        v.validate_bytes(bytes)
            .into_iter()
            .map(|i| i.code.code())
            .collect()
    };
    assert_eq!(codes(b"\"abc\""), Vec::<&str>::new());
    assert_eq!(codes(b"{\"a\":1,"), ["json.unexpected-end"]);
    assert_eq!(codes(b"\"\xff\""), ["json.invalid-utf8"]);
    assert_eq!(codes(b"{\"a\":1,\"a\":2}"), ["json.duplicate-key"]);
    assert_eq!(codes(b"NaN"), ["json.syntax"]);
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    assert_eq!(codes(deep.as_bytes()), ["json.too-deep"]);
    let issue = &v.validate_bytes(b"[1,\n2,]")[0];
    assert_eq!(issue.code, IssueCode::Json(JsonErrorKind::Syntax));
    assert_eq!(issue.message, "trailing comma at line 2 column 3");
    assert_eq!(
        (
            issue.instance_pointer.as_str(),
            issue.schema_pointer.as_str(),
            issue.keyword
        ),
        ("", "", "")
    );
}

#[test]
fn deep_values_built_in_memory_are_refused_not_recursed() {
    let v = doc(json!({"$defs": {"T": {"type": "array", "items": {"$ref": "#/$defs/T"}}}, "$ref": "#/$defs/T"})).validator().unwrap();
    let mut value = json!([]);
    for _ in 0..1000 {
        value = json!([value]);
    }
    assert!(!v.is_valid(&value));
    let found = v.validate(&value);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].code, IssueCode::Json(JsonErrorKind::TooDeep));
    // serde_json drops nested values recursively; unwind by hand.
    let mut current = value;
    while let Value::Array(mut items) = current {
        current = items.pop().unwrap_or(Value::Null);
    }
}

#[test]
fn formats_are_assertions_in_both_drafts() {
    for draft in [
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2020-12/schema",
    ] {
        let v = doc(json!({
            "$schema": draft,
            "properties": {
                "at": {"format": "date-time"}, "id": {"format": "uuid"}, "mail": {"format": "email"}, "link": {"format": "uri"}
            }
        }))
        .validator()
        .unwrap();
        let good = json!({"at": "2026-11-30T07:48:58.5+01:00", "id": "0f8fad5b-d9cb-469f-a165-70867728950e", "mail": "a@example.com", "link": "https://example.com/x?y#z"});
        assert_eq!(issues(&v, good), vec![]);
        let bad =
            json!({"at": "2026-11-30", "id": "0f8fad5b", "mail": "nobody", "link": "not a uri"});
        let codes: Vec<_> = issues(&v, bad)
            .into_iter()
            .map(|(p, _, c, m)| (p, c, m))
            .collect();
        assert_eq!(
            codes,
            vec![
                (
                    "/at".to_owned(),
                    "validate.format",
                    "\"2026-11-30\" is not a valid date-time".to_owned()
                ),
                (
                    "/id".to_owned(),
                    "validate.format",
                    "\"0f8fad5b\" is not a valid uuid".to_owned()
                ),
                (
                    "/mail".to_owned(),
                    "validate.format",
                    "\"nobody\" is not a valid email".to_owned()
                ),
                (
                    "/link".to_owned(),
                    "validate.format",
                    "\"not a uri\" is not a valid uri".to_owned()
                ),
            ],
            "{draft}"
        );
    }
}

#[test]
fn patterns_are_ecma_262() {
    let v = doc(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "name": {"type": "string", "pattern": "^(?!\\.{1,2}$)(?:[^\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])+$"},
            "word": {"type": "string", "pattern": "^[a-z]+$"},
            "text": {"type": "string", "pattern": "\\S"}
        }
    }))
    .validator()
    .unwrap();
    assert!(v.is_valid(&json!({"name": "note 😀.md", "word": "abc", "text": " x "})));
    assert!(!v.is_valid(&json!({"name": ".."})));
    assert!(!v.is_valid(&json!({"word": "abc\n"})));
    assert!(!v.is_valid(&json!({"text": "\u{feff}\u{a0} "})));
}

#[test]
fn definitions_of_documents_without_id_resolve() {
    let d = doc(
        json!({"definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"type": "string"}}, "$schema": "http://json-schema.org/draft-07/schema#"}),
    );
    let v = d.validator_for("A").unwrap();
    assert!(v.is_valid(&json!("x")));
    assert_eq!(
        issues(&v, json!(1)),
        vec![one(
            "",
            "/definitions/B/type",
            "validate.type",
            "1 is an integer, expected string"
        )]
    );
    let d = doc(json!({"$id": "relative.json", "$defs": {"a b": {"type": "null"}}}));
    let v = d.validator_for("a b").unwrap();
    assert!(v.is_valid(&json!(null)));
    assert_eq!(v.schema_pointer(), "/$defs/a b");
}

#[test]
fn compile_errors_are_schema_errors() {
    let d = shapes();
    let err = d.validator_for("Missing").unwrap_err();
    assert_eq!(err.kind, SchemaErrorKind::UnknownDefinition);
    assert_eq!(err.code(), "schema.unknown-definition");
    let err = doc(json!({"$defs": {"P": {"pattern": "(unclosed"}}}))
        .validator_for("P")
        .unwrap_err();
    assert_eq!(err.kind, SchemaErrorKind::InvalidSchema);
    assert!(
        err.message.contains("not an ECMA-262 regular expression"),
        "{err}"
    );
    let err = doc(json!({"type": 12})).validator().unwrap_err();
    assert_eq!(err.kind, SchemaErrorKind::InvalidSchema);
}

mod properties {
    use super::*;
    use agentwire_schema::parse_json;
    use proptest::prelude::*;

    fn json_like() -> impl Strategy<Value = Vec<u8>> {
        // Fragments that assemble into mostly-JSON text, so that parsing often succeeds and the
        // validator sees many shapes.
        let token = prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"y\"",
            "\"n\"",
            "\"tags\"",
            "\"id\"",
            "\"a\"",
            "\"abcdef\"",
            "1",
            "0",
            "-3",
            "2.5",
            "true",
            "null",
            "\"\\u00e9\"",
            " ",
            "\"😀\"",
        ]);
        prop::collection::vec(token, 0..40).prop_map(|t| t.concat().into_bytes())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any bytes give a report, never a panic, and the report agrees with the verdict.
        #[test]
        fn reports_agree_with_verdicts(bytes in prop_oneof![json_like(), prop::collection::vec(any::<u8>(), 0..64)]) {
            let v = shapes().validator_for("X").unwrap();
            let issues = v.validate_bytes(&bytes);
            match parse_json(&bytes) {
                Ok(value) => {
                    prop_assert_eq!(issues.is_empty(), v.is_valid(&value));
                    prop_assert_eq!(&issues, &v.validate(&value));
                    for issue in &issues {
                        prop_assert!(agentwire_schema::pointer::resolve(&value, &issue.instance_pointer).is_some(), "{:?}", issue);
                        prop_assert!(!issue.message.is_empty());
                    }
                }
                Err(err) => {
                    prop_assert_eq!(issues.len(), 1);
                    prop_assert_eq!(issues[0].code, IssueCode::Json(err.kind));
                }
            }
        }
    }
}

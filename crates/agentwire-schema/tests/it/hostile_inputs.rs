//! The hostile inputs of the schema crate: each test rebuilds one input that used to crash,
//! hang, blow up or answer wrongly, and checks the answer it gets now (the verdict, the issue
//! codes and sentences, the error and its code).

use agentwire_schema::{SchemaDocument, SchemaErrorKind, Validator, parse_json};
use serde_json::{Value, json};

use crate::support::{doc, issues, one};

#[test]
fn multiple_of_is_decided_by_the_quotient_on_both_passes() {
    let v = doc(json!({"multipleOf": 0.1})).validator().unwrap();
    for x in [0.3, 0.7] {
        assert_eq!(
            issues(&v, &json!(x)),
            [one(
                "",
                "/multipleOf",
                "validate.multiple-of",
                &format!("{x} is not a multiple of 0.1")
            )]
        );
    }
    for x in [0.2, 3.3000000000000003, 0.0, 5.0] {
        assert!(issues(&v, &json!(x)).is_empty(), "{x}");
    }
}

#[test]
fn multiple_of_under_not_gives_one_verdict_whatever_else_the_schema_has() {
    for schema in [
        json!({"not": {"multipleOf": 0.1}}),
        json!({"not": {"multipleOf": 0.1}, "title": "x", "minimum": -100}),
        json!({"allOf": [{"not": {"multipleOf": 0.1}}], "type": "number"}),
    ] {
        let v = doc(schema.clone()).validator().unwrap();
        for x in [0.3, 0.7] {
            assert!(issues(&v, &json!(x)).is_empty(), "{schema} {x}");
        }
        for x in [0.2, 3.3000000000000003] {
            let found = issues(&v, &json!(x));
            assert_eq!(found.len(), 1, "{schema} {x}");
            assert_eq!(found[0].2, "validate.not");
        }
    }
}

#[test]
fn multiple_of_zero_or_negative_is_a_schema_error() {
    for bad in [json!(0), json!(-0.1), json!(-3)] {
        let err = SchemaDocument::from_value(json!({"multipleOf": bad})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::InvalidSchema);
        assert_eq!(err.code(), "schema.invalid");
        assert_eq!(err.pointer, "/multipleOf");
    }
}

#[test]
fn a_byte_order_mark_is_reported_as_one() {
    let v = doc(json!({"type": "object"})).validator().unwrap();
    let found = v.validate_bytes(b"\xef\xbb\xbf{}");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].code.code(), "json.byte-order-mark");
    assert!(found[0].message.contains("byte order mark"), "{}", found[0]);
    let err = SchemaDocument::from_slice(b"\xef\xbb\xbf{}").unwrap_err();
    assert!(err.message.contains("byte order mark (U+FEFF)"), "{err}");
}

#[test]
fn a_lone_surrogate_is_reported_as_one() {
    let v = doc(json!({"type": "string"})).validator().unwrap();
    let found = v.validate_bytes(br#""\ud800""#);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].code.code(), "json.lone-surrogate");
    assert_eq!(
        found[0].message,
        "lone surrogate \"\\ud800\" in a string: a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one at line 1 column 2"
    );
    assert_eq!(
        parse_json(br#"{"a": "\udc00"}"#).unwrap_err().kind.code(),
        "json.lone-surrogate"
    );
}

#[test]
fn a_cycle_through_the_root_is_named_with_hash() {
    let err = SchemaDocument::from_slice(br##"{"$ref":"#"}"##).unwrap_err();
    assert_eq!(err.kind, SchemaErrorKind::RefCycle);
    assert_eq!(
        err.message,
        "reference cycle: # leads back to # without descending into the instance"
    );
}

#[test]
fn huge_count_limits_are_reported_as_written() {
    let v = doc(json!({"minLength": 1e40, "maxLength": 1e40}))
        .validator()
        .unwrap();
    assert_eq!(
        issues(&v, &json!("abc")),
        [one(
            "",
            "/minLength",
            "validate.min-length",
            "\"abc\" is shorter than 1e40 characters"
        )]
    );
    let v = doc(json!({"minItems": 1e20})).validator().unwrap();
    assert_eq!(
        issues(&v, &json!([1])),
        [one(
            "",
            "/minItems",
            "validate.min-items",
            "the array has 1 items, fewer than the minimum of 1e20"
        )]
    );
}

/// `^(a+)+$` against `aaa…a!` doubles its time per character on a backtracking engine.
#[test]
fn nested_quantifiers_run_in_linear_time() {
    let evil = format!("{}!", "a".repeat(100_000));
    let v = doc(json!({"pattern": "^(a+)+$"})).validator().unwrap();
    let found = v.validate(&json!(evil));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].code.code(), "validate.pattern");
    assert!(!v.is_valid(&json!(evil)));
    assert!(v.is_valid(&json!("a".repeat(100_000))));

    let v = doc(json!({"propertyNames": {"pattern": "^(a+)+$"}}))
        .validator()
        .unwrap();
    let found = issues(&v, &json!({evil.clone(): 1}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2, "validate.property-names");

    let v = doc(json!({"patternProperties": {"^(a+)+$": false}}))
        .validator()
        .unwrap();
    assert!(issues(&v, &json!({evil.clone(): 1})).is_empty());
}

/// Backreferences and lookbehind need backtracking: a budget ends the search with its own code.
#[test]
fn backtracking_patterns_give_up_with_their_own_code() {
    let evil = format!("{}!", "a".repeat(30));
    for pattern in ["^(a|a)+\\1$", "^(a|aa)+(?<=b)$"] {
        let v = doc(json!({"pattern": pattern})).validator().unwrap();
        assert_eq!(
            issues(&v, &json!(evil)),
            [one(
                "",
                "/pattern",
                "validate.pattern-budget",
                &format!(
                    "the pattern gave up after 1000000 backtracking steps on \"{evil}\" without deciding whether it matches {pattern}"
                )
            )]
        );
        // The same pattern decides short inputs.
        assert!(issues(&v, &json!("aa")).is_empty() != pattern.contains("<=b"));
    }
    let v = doc(json!({"patternProperties": {"^(a|a)+\\1$": false}}))
        .validator()
        .unwrap();
    let found = issues(&v, &json!({evil.clone(): 1}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2, "validate.pattern-budget");
}

/// A property the Rust engines do not know used to send the whole pattern to an ECMA-262
/// backtracking engine with no step bound: `^(a+)+$` beside it then took exponential time.
#[test]
fn patterns_with_properties_rust_lacks_run_in_linear_time() {
    let evil = format!("{}!", "a".repeat(100_000));
    let pattern = "^(?:\\p{Changes_When_NFKC_Casefolded}|(a+)+)$";
    let v = doc(json!({"pattern": pattern})).validator().unwrap();
    let preview = v.validate(&json!(evil));
    assert_eq!(preview.len(), 1);
    assert_eq!(preview[0].code.code(), "validate.pattern");
    assert!(!v.is_valid(&json!(evil)));
    assert!(v.is_valid(&json!("a".repeat(100_000))));
    // U+00AD SOFT HYPHEN changes under NFKC case folding; `b` does not.
    assert!(v.is_valid(&json!("\u{ad}")));
    assert!(!v.is_valid(&json!("b")));

    let v = doc(json!({"propertyNames": {"pattern": pattern}}))
        .validator()
        .unwrap();
    let found = issues(&v, &json!({evil.clone(): 1}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2, "validate.property-names");
}

/// What neither the linear-time engine nor the step-budgeted one can run with its ECMA-262
/// meaning (a backreference inside a lookbehind, matched backwards) is refused when the schema
/// is compiled, never run without a bound.
#[test]
fn a_pattern_no_bounded_engine_runs_is_a_schema_error() {
    let err = doc(json!({"pattern": "(?<=(a)\\1)b|^(a+)+$"}))
        .validator()
        .unwrap_err();
    assert_eq!(err.code(), "schema.invalid");
    assert!(
        err.message
            .contains("the pattern cannot be run by the linear-time or the step-budgeted engine"),
        "{err}"
    );
}

/// A reference to a group that opens later matches the empty string (ECMA-262), so the pattern
/// needs no backtracking engine: it runs in linear time beside a nested quantifier.
#[test]
fn a_reference_before_its_group_matches_empty_and_runs_in_linear_time() {
    let v = doc(json!({"pattern": "\\k<x>(?<x>a)|^(a+)+$"}))
        .validator()
        .unwrap();
    assert!(v.is_valid(&json!("a")));
    assert!(v.is_valid(&json!("xyz-a")));
    let evil = format!("{}!", "b".repeat(100_000));
    assert_eq!(
        issues(&v, &json!(evil))
            .iter()
            .map(|i| i.2)
            .collect::<Vec<_>>(),
        ["validate.pattern"]
    );
}

#[test]
fn lint_checks_required_names_against_patterns_in_linear_time() {
    let evil = format!("{}!", "a".repeat(100_000));
    let schema = json!({
        "type": "object",
        "properties": {},
        "required": [evil],
        "patternProperties": {"^(a+)+$": {}},
        "additionalProperties": false
    });
    let findings = agentwire_schema::lint_value(&schema);
    let codes: Vec<_> = findings.iter().map(|f| f.code.code()).collect();
    assert_eq!(codes, ["AW032"], "{findings:?}");
}

/// `d0 → d1 → … → dN`, each link made by `link(next)`, the last a string.
fn chain(n: usize, link: impl Fn(String) -> Value) -> SchemaDocument {
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        defs.insert(format!("d{i}"), link(format!("#/$defs/d{}", i + 1)));
    }
    defs.insert(format!("d{n}"), json!({"type": "string"}));
    doc(json!({"$defs": defs, "$ref": "#/$defs/d0"}))
}

#[test]
fn a_50000_long_ref_chain_validates_and_reports() {
    let d = chain(
        50_000,
        |next| json!({"$ref": next, "description": "a link"}),
    );
    let compiler = agentwire_schema::ValidatorCompiler::new(&d).unwrap();
    for v in [compiler.root().unwrap(), compiler.definition("d0").unwrap()] {
        assert!(issues(&v, &json!("x")).is_empty());
        assert_eq!(
            issues(&v, &json!(5)),
            [one(
                "",
                "/$defs/d50000/type",
                "validate.type",
                "5 is an integer, expected string"
            )]
        );
    }
}

#[test]
fn a_chain_of_applicators_deeper_than_the_limit_is_refused_with_its_code() {
    let v = chain(3_000, |next| json!({"allOf": [{"$ref": next}]}))
        .validator()
        .unwrap();
    for instance in [json!("x"), json!(5)] {
        let found = issues(&v, &instance);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].2, "validate.depth-limit");
        assert_eq!(
            found[0].3,
            "the schema nests deeper than 1024 levels of applicators on this value; whether it is valid is not decided"
        );
    }
    // Under the limit the same chain decides.
    let v = chain(500, |next| json!({"allOf": [{"$ref": next}]}))
        .validator()
        .unwrap();
    assert!(issues(&v, &json!("x")).is_empty());
    assert_eq!(issues(&v, &json!(5))[0].1, "/$defs/d500/type");
}

/// `L_i = {allOf: [{$ref: L_{i+1}}, {$ref: L_{i+1}}]}`: 2^depth paths to the last level.
fn fan_out(depth: usize) -> Validator {
    chain(
        depth,
        |next| json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
    )
    .validator()
    .unwrap()
}

#[test]
fn allof_fan_out_reports_each_issue_once() {
    let v = fan_out(12);
    assert!(issues(&v, &json!("x")).is_empty());
    assert_eq!(
        issues(&v, &json!(5)),
        [one(
            "",
            "/$defs/d12/type",
            "validate.type",
            "5 is an integer, expected string"
        )]
    );
}

/// Issue 35: past the walk budget of a plain walk, the plan keeps each subschema's verdict on
/// each value, so `"x"` under 2^30 paths is decided valid, not refused. An invalid value is
/// decided invalid the same way; its full report (whose walk visits every path) is over the
/// budget, so it is one issue at the first error.
#[test]
fn allof_fan_out_is_decided_whatever_its_depth() {
    for depth in [22, 30, 40] {
        let v = fan_out(depth);
        assert!(issues(&v, &json!("x")).is_empty(), "{depth}");
        assert!(v.validate_bytes(b"\"x\"").is_empty(), "{depth}");
        let mut tape = agentwire_schema::fast::Tape::new();
        assert!(
            v.validate_bytes_in(b"\"x\"", &mut tape).is_empty(),
            "{depth}"
        );
        let message = "the value is invalid; listing its issues takes more steps than the budget (the report visits every branch of applicators that fan out), so the first error alone is located";
        for instance in [json!(5), json!({"a": [1, "x"]})] {
            assert_eq!(
                issues(&v, &instance),
                [one("", "", "validate.report-budget", message)],
                "{depth} {instance}"
            );
        }
    }
    // Inside a message, the first error is located where it is.
    let mut defs = serde_json::Map::new();
    for i in 0..30 {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert("d30".to_owned(), json!({"type": "string"}));
    let v = doc(json!({
        "$defs": defs,
        "type": "object",
        "properties": {"name": {"$ref": "#/$defs/d0"}}
    }))
    .validator()
    .unwrap();
    assert!(issues(&v, &json!({"name": "x"})).is_empty());
    let found = issues(&v, &json!({"name": 7}));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].0.as_str(), found[0].2),
        ("/name", "validate.report-budget")
    );
}

/// A document the compiled plan does not take (`unevaluatedProperties` at the end of the
/// chain) is walked by the engine alone: its walk is counted against the same budget first.
fn fan_out_without_plan(depth: usize) -> Validator {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(
        format!("d{depth}"),
        json!({"type": ["string", "object"], "unevaluatedProperties": false}),
    );
    let d = doc(json!({"$defs": defs, "$ref": "#/$defs/d0"}));
    assert!(
        agentwire_schema::fast::FastSchema::compile(&d).is_err(),
        "the plan takes it"
    );
    d.validator().unwrap()
}

#[test]
fn allof_fan_out_without_a_plan_stops_with_the_same_code() {
    for depth in [22, 40] {
        let v = fan_out_without_plan(depth);
        for instance in [json!("x"), json!(5), json!({"a": 1})] {
            assert_eq!(
                issues(&v, &instance),
                [one(
                    "",
                    "",
                    "validate.walk-budget",
                    "checking this value against the schema takes more steps than the budget (its applicators fan out); whether it is valid is not decided"
                )],
                "{depth} {instance}"
            );
        }
    }
    // A fan-out within the budget is decided, each issue reported once.
    let v = fan_out_without_plan(10);
    assert!(issues(&v, &json!("x")).is_empty());
    assert_eq!(
        issues(&v, &json!(5)),
        [one(
            "",
            "/$defs/d10/type",
            "validate.type",
            "5 is an integer, expected string or object"
        )]
    );
}

#[test]
fn a_deep_chain_without_a_plan_is_refused_with_the_depth_code() {
    let chain_of = |n: usize| {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            defs.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": format!("#/$defs/d{}", i + 1)}]}),
            );
        }
        defs.insert(format!("d{n}"), json!({"unevaluatedProperties": false}));
        doc(json!({"$defs": defs, "$ref": "#/$defs/d0"}))
            .validator()
            .unwrap()
    };
    let found = issues(&chain_of(3_000), &json!("x"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2, "validate.depth-limit");
    // A $ref alone takes no level: 500 links of an allOf of one reference are 500 levels.
    assert!(issues(&chain_of(500), &json!({})).is_empty());
}

/// The budget grows with the instance: a large array of values that each take a few steps
/// is decided, not stopped.
#[test]
fn the_walk_budget_grows_with_the_instance() {
    let v = doc(json!({
        "$defs": {"Item": {"allOf": [{"type": "integer"}, {"minimum": 0}]}},
        "type": "array",
        "items": {"$ref": "#/$defs/Item"}
    }))
    .validator()
    .unwrap();
    let mut items: Vec<Value> = (0..400_000).map(|i| json!(i)).collect();
    assert!(issues(&v, &Value::Array(items.clone())).is_empty());
    items[399_999] = json!(-1);
    let found = issues(&v, &Value::Array(items));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "/399999");
    assert_eq!(found[0].2, "validate.minimum");
}

#[test]
fn unique_items_over_200000_items_is_decided_by_sorting() {
    let v = doc(json!({"uniqueItems": true})).validator().unwrap();
    let mut items: Vec<Value> = (0..200_000)
        .map(|i| match i % 4 {
            0 => json!(i),
            1 => json!({"n": i, "k": [i]}),
            2 => json!([i, "x"]),
            _ => json!(f64::from(i) + 0.5),
        })
        .collect();
    assert!(issues(&v, &Value::Array(items.clone())).is_empty());
    // An object equal to an earlier one with its members in another order, and 8.0 equal
    // to 8.
    items.push(json!({"k": [5], "n": 5}));
    let found = issues(&v, &Value::Array(items.clone()));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].2, "validate.unique-items");
    items.pop();
    items.push(json!(8.0));
    assert_eq!(
        issues(&v, &Value::Array(items))[0].2,
        "validate.unique-items"
    );
}

#[test]
fn compat_of_two_large_enums_is_linear() {
    let old: Vec<Value> = (0..200_000).map(|i| json!(format!("v{i}"))).collect();
    let mut new: Vec<Value> = (0..300_000).map(|i| json!(format!("v{}", i + 1))).collect();
    new.push(json!(7));
    let old = doc(json!({"$defs": {"E": {"enum": old}}}));
    let new = doc(json!({"$defs": {"E": {"enum": new}}}));
    let report = agentwire_schema::compat(&old, &new);
    let count =
        |rule: agentwire_schema::Rule| report.changes.iter().filter(|c| c.rule == rule).count();
    assert_eq!(count(agentwire_schema::Rule::EnumValueRemoved), 1);
    assert_eq!(count(agentwire_schema::Rule::EnumValueAdded), 100_002);
    let removed = report
        .changes
        .iter()
        .find(|c| c.rule == agentwire_schema::Rule::EnumValueRemoved)
        .unwrap();
    assert_eq!(removed.old, Some(json!("v0")));
}

#[test]
fn compat_of_two_large_required_lists_is_linear() {
    // A search of one list per name of the other would take 4·10^10 comparisons here.
    let old: Vec<String> = (0..200_000).map(|i| format!("r{i}")).collect();
    let new: Vec<String> = (1..=200_000).map(|i| format!("r{i}")).collect();
    let old = doc(json!({"$defs": {"O": {"type": "object", "required": old}}}));
    let new = doc(json!({"$defs": {"O": {"type": "object", "required": new}}}));
    let report = agentwire_schema::compat(&old, &new);
    let found: Vec<(agentwire_schema::Rule, &str, Option<&Value>, Option<&Value>)> = report
        .changes
        .iter()
        .map(|c| (c.rule, c.pointer.as_str(), c.old.as_ref(), c.new.as_ref()))
        .collect();
    assert_eq!(
        found,
        [
            (
                agentwire_schema::Rule::RequiredAdded,
                "/$defs/O/required",
                None,
                Some(&json!("r200000"))
            ),
            (
                agentwire_schema::Rule::RequiredRemoved,
                "/$defs/O/required",
                Some(&json!("r0")),
                None
            ),
        ]
    );
}

/// `d_i = {type: object, properties: {next: {$ref: d_{i+1}}}}`, 100,000 deep: the engine that
/// lists issues compiles such a chain in quadratic time (minutes), so the compiled plan decides
/// valid values alone, and the report of an invalid one compiles only the definitions it
/// reaches.
fn object_chain(n: usize) -> SchemaDocument {
    chain(
        n,
        |next| json!({"type": "object", "properties": {"next": {"$ref": next}, "v": {"type": "string"}}}),
    )
}

#[test]
fn a_document_of_100000_chained_definitions_decides_values_and_reports_what_they_reach() {
    let v = object_chain(100_000).validator().unwrap();
    let valid = json!({"v": "a", "next": {"v": "b", "next": {"next": {}}}});
    assert!(v.is_valid(&valid));
    assert!(v.validate(&valid).is_empty());
    assert!(v.validate_bytes(valid.to_string().as_bytes()).is_empty());
    assert!(!v.is_valid(&json!({"next": {"v": 5}})));
    // One engine for the whole chain would take minutes; the report builds one for the
    // definitions the value reaches.
    assert_eq!(
        issues(&v, &json!("x")),
        [one(
            "",
            "/$defs/d0/type",
            "validate.type",
            "\"x\" is a string, expected object"
        )]
    );
    assert_eq!(
        issues(&v, &json!({"v": 1, "next": {"next": {"v": true}}})),
        [
            one(
                "/v",
                "/$defs/d0/properties/v/type",
                "validate.type",
                "1 is an integer, expected string"
            ),
            one(
                "/next/next/v",
                "/$defs/d2/properties/v/type",
                "validate.type",
                "true is a boolean, expected string"
            ),
        ]
    );
}

#[test]
fn a_report_from_the_reached_definitions_equals_the_report_of_the_whole_document() {
    // 1,500 nested definitions are past `MAX_ENGINE_REF_DEPTH`, 12 are not: the same values
    // get the same issues from a pruned engine and from one built for everything.
    const { assert!(agentwire_schema::validate::MAX_ENGINE_REF_DEPTH < 1_500) };
    let deep = object_chain(1_500).validator().unwrap();
    let short = object_chain(12).validator().unwrap();
    for value in [
        json!(5),
        json!({"v": 1}),
        json!({"next": {"v": [1], "next": 7}}),
        json!({"next": {"next": {"next": {"v": {}, "next": null}}}, "v": "ok"}),
        json!({"next": {"next": {"next": {"next": {"v": "fine"}}}}}),
    ] {
        assert_eq!(issues(&deep, &value), issues(&short, &value), "{value}");
    }
    assert!(!issues(&deep, &json!({"next": {"v": 1}})).is_empty());
}

#[test]
fn the_engine_is_built_for_the_first_report_and_reports_as_before() {
    let v = object_chain(2_000).validator().unwrap();
    assert_eq!(
        issues(&v, &json!({"next": {"v": 5}})),
        [one(
            "/next/v",
            "/$defs/d1/properties/v/type",
            "validate.type",
            "5 is an integer, expected string"
        )]
    );
    assert!(issues(&v, &json!({"next": {"v": "x"}})).is_empty());
}

//! `agentwire validate` end to end: reports for people and programs, exit codes, and every kind
//! of bad input (not JSON, not UTF-8, 100,000-deep nesting, broken schemas) handled without a
//! panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use crate::support::{agentwire, dir_with, utf8 as text};
use serde_json::{Value, json};

const SCHEMA: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "https://example.com/frames.json",
  "oneOf": [{"$ref": "#/definitions/Req"}, {"$ref": "#/definitions/Event"}],
  "discriminator": {"propertyName": "type", "mapping": {"req": "#/definitions/Req", "event": "#/definitions/Event"}},
  "definitions": {
    "Req": {
      "type": "object",
      "properties": {"type": {"const": "req"}, "id": {"type": "string", "minLength": 1}, "method": {"type": "string"}},
      "required": ["type", "id", "method"],
      "additionalProperties": false
    },
    "Event": {
      "type": "object",
      "properties": {"type": {"const": "event"}, "event": {"type": "string"}, "seq": {"type": "integer", "minimum": 0}},
      "required": ["type", "event"],
      "additionalProperties": false
    }
  }
}"##;

fn run(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    agentwire()
        .args(args)
        .current_dir(dir)
        .stdin_opt(stdin)
        .output()
}

#[test]
fn documents_are_reported_one_by_one() {
    let dir = dir_with(&[
        ("schema.json", SCHEMA.as_bytes()),
        ("ok.json", br#"{"type":"req","id":"1","method":"health"}"#),
        (
            "bad.json",
            br#"{"type":"req","id":1,"method":"health","x":0}"#,
        ),
    ]);
    let out = run(
        dir.path(),
        &["validate", "--schema", "schema.json", "ok.json", "bad.json"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "ok.json: valid\n\
         bad.json: invalid\n  \
         /id: 1 is an integer, expected string [validate.type at /definitions/Req/properties/id/type]\n  \
         /x: property \"x\" is not allowed here [validate.additional-property at /definitions/Req/additionalProperties]\n\
         2 messages: 1 valid, 1 invalid\n"
    );
    let out = run(
        dir.path(),
        &["validate", "--schema", "schema.json", "ok.json"],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "ok.json: valid\n1 message: 1 valid, 0 invalid\n"
    );
}

#[test]
fn ndjson_reports_lines_and_continues_past_bad_ones() {
    let dir = dir_with(&[("schema.json", SCHEMA.as_bytes())]);
    let input = b"{\"type\":\"req\",\"id\":\"c1\",\"method\":\"connect\"}\n\
                  \n\
                  {\"type\":\"evnt\",\"event\":\"tick\"}\r\n\
                  not json\n\
                  {\"type\":\"event\",\"event\":\"tick\",\"seq\":-1}";
    let out = run(
        dir.path(),
        &["validate", "--schema", "schema.json", "--ndjson", "-"],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(1));
    let invalid = "line 3: invalid\n  \
         /type: \"evnt\" is not a known \"type\"; expected \"req\" or \"event\" [validate.discriminator at /discriminator]\n\
         line 4: invalid\n  \
         expected ident at line 1 column 2 [json.syntax]\n\
         line 5: invalid\n  \
         /seq: -1 is less than the minimum 0 [validate.minimum at /definitions/Event/properties/seq/minimum]\n";
    let summary = "4 messages: 1 valid, 3 invalid\n";
    // By default a stream's report lists what is wrong, then the summary.
    assert_eq!(text(&out.stdout), format!("{invalid}{summary}"));
    // --verbose lists every message.
    let out = run(
        dir.path(),
        &[
            "validate",
            "--verbose",
            "--schema",
            "schema.json",
            "--ndjson",
        ],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!("line 1: valid\n{invalid}{summary}")
    );
    // --quiet keeps only the summary.
    let out = run(
        dir.path(),
        &["validate", "-q", "--schema", "schema.json", "--ndjson"],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), summary);
}

#[test]
fn json_format_has_one_object_per_message_and_a_summary() {
    let dir = dir_with(&[
        ("schema.json", SCHEMA.as_bytes()),
        (
            "m.ndjson",
            b"{\"type\":\"event\",\"event\":\"tick\"}\n{\"type\":\"req\"}\n",
        ),
    ]);
    let records = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["--format", "json", "validate"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--schema", "schema.json", "--ndjson", "m.ndjson"]);
        let out = run(dir.path(), &args, None);
        assert_eq!(out.status.code(), Some(1));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let valid = json!({"input": "m.ndjson", "line": 1, "valid": true, "issues": []});
    let invalid = json!({"input": "m.ndjson", "line": 2, "valid": false, "issues": [
        {"instancePath": "", "schemaPath": "/definitions/Req/required", "keyword": "required", "code": "validate.required", "message": "missing required property \"id\""},
        {"instancePath": "", "schemaPath": "/definitions/Req/required", "keyword": "required", "code": "validate.required", "message": "missing required property \"method\""}
    ]});
    let summary =
        json!({"summary": {"messages": 2, "valid": 1, "invalid": 1, "undecided": 0, "errors": 0}});
    assert_eq!(
        records(&["--verbose"]),
        vec![valid, invalid.clone(), summary.clone()]
    );
    assert_eq!(records(&[]), vec![invalid, summary.clone()]);
    assert_eq!(records(&["--quiet"]), vec![summary]);
}

#[test]
fn a_definition_can_be_chosen() {
    let dir = dir_with(&[
        ("schema.json", SCHEMA.as_bytes()),
        ("e.json", br#"{"type":"event","event":"tick","seq":2}"#),
    ]);
    let out = run(
        dir.path(),
        &[
            "validate",
            "--schema",
            "schema.json",
            "--def",
            "Event",
            "e.json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(
        dir.path(),
        &[
            "validate",
            "--schema",
            "schema.json",
            "--def",
            "Req",
            "e.json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let out = run(
        dir.path(),
        &[
            "validate",
            "--schema",
            "schema.json",
            "--def",
            "Nope",
            "e.json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("schema.unknown-definition"),
        "{}",
        text(&out.stderr)
    );
}

/// Not JSON, not UTF-8, nested 100,000 deep, duplicate keys: each an invalid message with its
/// own code, never a crash.
#[test]
fn bad_messages_are_issues_not_crashes() {
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("syntax", b"{\"type\":".to_vec(), "json.unexpected-end"),
        (
            "utf8",
            b"{\"type\":\"req\",\"id\":\"\xff\xfe\",\"method\":\"m\"}".to_vec(),
            "json.invalid-utf8",
        ),
        ("deep", deep.into_bytes(), "json.too-deep"),
        (
            "dup",
            br#"{"type":"req","type":"event"}"#.to_vec(),
            "json.duplicate-key",
        ),
    ];
    for (name, bytes, code) in cases {
        let dir = dir_with(&[("schema.json", SCHEMA.as_bytes()), ("m.json", &bytes)]);
        let out = run(
            dir.path(),
            &[
                "--format",
                "json",
                "validate",
                "--schema",
                "schema.json",
                "m.json",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{name}");
        let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
        assert_eq!(first["valid"], false, "{name}");
        assert_eq!(first["issues"][0]["code"], code, "{name}: {first}");
        // The same through a stream.
        let mut line = bytes.clone();
        line.push(b'\n');
        let out = run(
            dir.path(),
            &[
                "--format",
                "json",
                "validate",
                "--schema",
                "schema.json",
                "--ndjson",
            ],
            Some(&line),
        );
        assert_eq!(out.status.code(), Some(1), "{name}");
        let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
        assert_eq!(first["issues"][0]["code"], code, "{name}: {first}");
    }
    let dir = dir_with(&[
        ("schema.json", SCHEMA.as_bytes()),
        ("m.json", b"\"\xc3\x28\""),
    ]);
    let out = run(
        dir.path(),
        &["validate", "--schema", "schema.json", "m.json"],
        None,
    );
    assert_eq!(
        text(&out.stdout).lines().nth(1).unwrap(),
        "  invalid UTF-8 at byte 1 [json.invalid-utf8]"
    );
}

/// A broken schema stops the command with exit 2 and the error's code and pointer.
#[test]
fn bad_schemas_are_fatal_with_their_code() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "cycle",
            r##"{"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"}"##,
            "schema.ref-cycle",
        ),
        (
            "draft",
            r#"{"$schema": "http://json-schema.org/draft-03/schema#"}"#,
            "schema.unknown-draft",
        ),
        (
            "unresolved",
            r##"{"$ref": "#/$defs/Missing"}"##,
            "schema.unresolved-ref",
        ),
        ("not json", "{", "schema.json"),
        ("pattern", r#"{"pattern": "(unclosed"}"#, "schema.invalid"),
    ];
    for (name, schema, code) in cases {
        let dir = dir_with(&[("schema.json", schema.as_bytes()), ("m.json", b"{}")]);
        let out = run(
            dir.path(),
            &["validate", "--schema", "schema.json", "m.json"],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(out.stdout.is_empty(), "{name}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains(code),
            "{name}: {stderr}"
        );
        let out = run(
            dir.path(),
            &[
                "--format",
                "json",
                "validate",
                "--schema",
                "schema.json",
                "m.json",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{name}");
        let error: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        assert_eq!(error["error"]["code"], *code, "{name}: {error}");
    }
    let dir = dir_with(&[(
        "schema.json",
        br#"{"$schema": "http://json-schema.org/draft-03/schema#"}"#,
    )]);
    let out = run(
        dir.path(),
        &["validate", "--schema", "schema.json", "m.json"],
        None,
    );
    assert!(
        text(&out.stderr).contains("at /$schema: unknown dialect"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn usage_and_io_errors_exit_2() {
    let dir = dir_with(&[
        ("schema.json", SCHEMA.as_bytes()),
        ("ok.json", br#"{"type":"event","event":"e"}"#),
    ]);
    let out = run(dir.path(), &["validate", "ok.json"], None);
    assert_eq!(out.status.code(), Some(2), "missing --schema");
    let out = run(
        dir.path(),
        &["validate", "--schema", "missing.json", "ok.json"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read missing.json"),
        "{}",
        text(&out.stderr)
    );
    // An unreadable input is reported and the others still are.
    let out = run(
        dir.path(),
        &[
            "--format",
            "json",
            "validate",
            "--schema",
            "schema.json",
            "nope.json",
            "ok.json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let records: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[0]["input"], "nope.json");
    assert_eq!(records[0]["error"]["code"], "io");
    assert_eq!(
        records[1],
        json!({"input": "ok.json", "line": null, "valid": true, "issues": []})
    );
    assert_eq!(
        records[2],
        json!({"summary": {"messages": 1, "valid": 1, "invalid": 0, "undecided": 0, "errors": 1}})
    );
}

/// `L_i = {allOf: [{$ref: L_{i+1}}, {$ref: L_{i+1}}]}` to `depth`, `L_depth` a string (or, with
/// `without_plan`, a string or object without unevaluated properties: a document the compiled
/// plan does not take, checked by the reference engine alone).
fn fan_out_schema(depth: usize, without_plan: bool) -> Vec<u8> {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/L{}", i + 1);
        defs.insert(
            format!("L{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    let last = if without_plan {
        json!({"type": ["string", "object"], "unevaluatedProperties": false})
    } else {
        json!({"type": "string"})
    };
    defs.insert(format!("L{depth}"), last);
    serde_json::to_vec(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": defs,
        "$ref": "#/$defs/L0"
    }))
    .unwrap()
}

/// Issue 35: a valid value under 2^30 paths of `allOf` is valid (each subschema's verdict on
/// each value is kept once the plain walk spends its budget), and an invalid one is invalid.
#[test]
fn a_value_under_an_exponential_allof_gets_its_true_verdict() {
    let dir = dir_with(&[
        ("s.json", &fan_out_schema(30, false)),
        ("x.json", b"\"x\""),
        ("m.ndjson", b"\"x\"\n5\n"),
    ]);
    let out = run(
        dir.path(),
        &["validate", "--schema", "s.json", "x.json"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "x.json: valid\n1 message: 1 valid, 0 invalid\n"
    );
    let out = run(
        dir.path(),
        &[
            "validate", "--schema", "s.json", "--def", "L0", "--ndjson", "m.ndjson",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "line 2: invalid\n  (root): the value is invalid; listing its issues takes more steps \
         than the budget (the report visits every branch of applicators that fan out), so the \
         first error alone is located [validate.report-budget at /$defs/L0]\n\
         2 messages: 1 valid, 1 invalid\n"
    );
}

/// Where a limit still stops the check (a document without a compiled plan counts every path
/// of its applicators; a chain of applicators deeper than the limit), the message is neither
/// valid nor invalid: `undecided`, and the command exits 2.
#[test]
fn a_message_a_limit_stops_is_undecided_and_exits_2() {
    let mut deep = serde_json::Map::new();
    for i in 0..3_000 {
        deep.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": format!("#/$defs/d{}", i + 1)}]}),
        );
    }
    deep.insert("d3000".to_owned(), json!({"type": "string"}));
    let deep = serde_json::to_vec(&json!({"$defs": deep, "$ref": "#/$defs/d0"})).unwrap();
    let dir = dir_with(&[
        ("fan.json", &fan_out_schema(30, true)),
        ("deep.json", &deep),
        ("m.ndjson", b"\"x\"\n"),
    ]);
    for (schema, code) in [
        ("fan.json", "validate.walk-budget"),
        ("deep.json", "validate.depth-limit"),
    ] {
        let out = run(
            dir.path(),
            &["validate", "--schema", schema, "--ndjson", "m.ndjson"],
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{schema}: {}",
            text(&out.stderr)
        );
        let report = text(&out.stdout);
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), 3, "{report}");
        assert_eq!(lines[0], "line 1: undecided");
        assert!(lines[1].ends_with(&format!("[{code} at ]")), "{report}");
        assert_eq!(lines[2], "1 message: 0 valid, 0 invalid, 1 undecided");
        let out = run(
            dir.path(),
            &[
                "--format", "json", "validate", "--schema", schema, "--ndjson", "m.ndjson",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2));
        let records: Vec<Value> = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0]["valid"], Value::Null);
        assert_eq!(records[0]["issues"][0]["code"], code);
        assert_eq!(
            records[1],
            json!({"summary": {"messages": 1, "valid": 0, "invalid": 0, "undecided": 1, "errors": 0}})
        );
    }
}

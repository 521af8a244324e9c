//! Differential test of the fast validation path against the `jsonschema` crate and AJV 8 on the
//! real OpenClaw and ChainlessChain schemas (100,000 generated and mutated messages each) and on
//! the project's own protocols (20,000 each): identical verdicts from all of them (the fast path
//! both on parsed values and on bytes), and the same first failing instance path as AJV wherever
//! a message is invalid.

// Test and benchmark helpers fail loudly on broken setup, like the tests they serve.
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::sample::{Generator, Rng, Size, mutate};
use agentwire_schema::fast::{FastSchema, Tape, Target, parse};
use agentwire_testkit::{chainlesschain_schema_path, node_script, openclaw_schema_path, run_ok};
use serde_json::{Value, json};

/// Messages per peer schema.
const MESSAGES: usize = 100_000;
/// Messages per schema of our own protocols (smaller documents).
const OWN_MESSAGES: usize = 20_000;

/// Every how many messages one is generated large rather than small.
const LARGE_EVERY: usize = 25;

/// Mismatches listed in a failure message.
const SHOWN_MISMATCHES: usize = 8;

/// Definitions of OpenClaw exercised by every run: the handshake, chat and agent traffic.
const OPENCLAW_TARGETS: &[&str] = &[
    "ConnectParams",
    "HelloOk",
    "ChatSendParams",
    "AgentParams",
    "ChatEvent",
    "TickEvent",
    "ShutdownEvent",
    "ErrorShape",
    "ChatHistoryParams",
    "AgentEvent",
    "TalkEvent",
    "SessionMemberEvidence",
    "ExecApprovalPresentation",
    "EnvironmentsListResult",
];

/// Further OpenClaw definitions drawn by seed, so coverage moves over the whole document.
const OPENCLAW_SAMPLED: usize = 26;

struct Verdicts {
    valid: Vec<bool>,
    first_paths: Vec<Option<String>>,
}

fn ajv_bulk(schema_path: &Path, lines: &[(String, Value)]) -> Verdicts {
    let mut file = tempfile_in_target();
    for (t, m) in lines {
        serde_json::to_writer(&mut file.0, &json!({"t": t, "m": m})).unwrap();
        file.0.write_all(b"\n").unwrap();
    }
    file.0.flush().unwrap();
    let mut cmd = node_script("ajv-verdicts-bulk.mjs");
    cmd.arg(schema_path).arg(&file.1);
    let out = run_ok(&mut cmd);
    let _ = std::fs::remove_file(&file.1);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut valid = Vec::new();
    let mut first_paths = Vec::new();
    for line in text.lines() {
        if line == "1" {
            valid.push(true);
            first_paths.push(None);
        } else {
            let path: String = serde_json::from_str(line.strip_prefix("0 ").unwrap()).unwrap();
            valid.push(false);
            first_paths.push(Some(path));
        }
    }
    assert_eq!(
        valid.len(),
        lines.len(),
        "AJV answered {} of {} lines",
        valid.len(),
        lines.len()
    );
    Verdicts { valid, first_paths }
}

fn tempfile_in_target() -> (std::fs::File, std::path::PathBuf) {
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "agentwire-fast-diff-{}-{:?}.ndjson",
        std::process::id(),
        std::thread::current().id()
    ));
    (std::fs::File::create(&path).unwrap(), path)
}

fn reference_validator(doc: &SchemaDocument, target: &str) -> jsonschema::Validator {
    let mut schema = doc.value().clone();
    if !target.is_empty() {
        let obj = schema.as_object_mut().unwrap();
        for key in [
            "oneOf",
            "anyOf",
            "allOf",
            "$ref",
            "type",
            "properties",
            "required",
        ] {
            obj.remove(key);
        }
        let ptr = doc.definition_pointer(target).unwrap();
        obj.insert("$ref".to_owned(), Value::String(format!("#{ptr}")));
    }
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn differential(schema_path: &Path, targets: &[String], seed: u64, messages: usize) {
    let doc = SchemaDocument::open(schema_path).unwrap();
    let fast = FastSchema::compile(&doc).unwrap();
    let small = Generator::new(&doc, Size::Small);
    let large = Generator::new(&doc, Size::Large);
    let mut rng = Rng::new(seed);
    let mut lines: Vec<(String, Value)> = Vec::with_capacity(messages);
    for i in 0..messages {
        let target = &targets[i % targets.len()];
        let ptr = if target.is_empty() {
            String::new()
        } else {
            doc.definition_pointer(target).unwrap()
        };
        let generator = if i % LARGE_EVERY == 0 { &large } else { &small };
        let mut value = generator.instance(&ptr, &mut rng);
        if rng.chance(0.5) {
            value = mutate(&value, &mut rng);
        }
        lines.push((target.clone(), value));
    }
    let ajv = ajv_bulk(schema_path, &lines);

    let mut reference: HashMap<&str, jsonschema::Validator> = HashMap::new();
    let mut fast_targets: HashMap<&str, Target> = HashMap::new();
    let mut tape = Tape::new();
    let mut mismatches = Vec::new();
    let mut valid_count = 0;
    let mut paths_compared = 0;
    for (i, (target, value)) in lines.iter().enumerate() {
        let reference = reference
            .entry(target)
            .or_insert_with(|| reference_validator(&doc, target));
        let t = *fast_targets.entry(target).or_insert_with(|| {
            if target.is_empty() {
                fast.root()
            } else {
                fast.definition(target).unwrap()
            }
        });
        let text = serde_json::to_string(value).unwrap();
        let on_value = fast.is_valid(t, value);
        let on_bytes = parse(text.as_bytes(), &mut tape)
            .unwrap()
            .is_valid(&fast, t);
        let by_crate = reference.is_valid(value);
        let by_ajv = ajv.valid[i];
        let fast_path = fast.first_error_path(t, value);
        let path_ok = by_ajv || fast_path == ajv.first_paths[i];
        if !by_ajv {
            paths_compared += 1;
        }
        if on_value {
            valid_count += 1;
        }
        if !(on_value == on_bytes && on_value == by_crate && on_value == by_ajv && path_ok) {
            mismatches.push(format!(
                "#{i} target {target:?}: fast(value) {on_value} fast(bytes) {on_bytes} jsonschema {by_crate} ajv {by_ajv}; \
                 first error fast {fast_path:?} ajv {:?}; message {}",
                ajv.first_paths[i],
                truncate(&text, 400)
            ));
        }
    }
    let invalid_count = messages - valid_count;
    assert!(
        mismatches.is_empty(),
        "{} of {messages} messages disagree (seed {seed}); first ones:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(SHOWN_MISMATCHES)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Both sides of the verdict must be well represented, or the comparison says little.
    assert!(
        valid_count > messages / 5,
        "only {valid_count} valid messages"
    );
    assert!(
        invalid_count > messages / 5,
        "only {invalid_count} invalid messages"
    );
    assert_eq!(paths_compared, invalid_count);
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[test]
fn openclaw_fast_path_agrees_with_jsonschema_and_ajv() {
    let path = openclaw_schema_path();
    let doc = SchemaDocument::open(&path).unwrap();
    let mut targets: Vec<String> = vec![String::new()];
    targets.extend(OPENCLAW_TARGETS.iter().map(|s| (*s).to_owned()));
    let names: Vec<&str> = doc.definitions().map(|(n, _)| n).collect();
    let mut rng = Rng::new(0x0C1A);
    while targets.len() < 1 + OPENCLAW_TARGETS.len() + OPENCLAW_SAMPLED {
        let name = (*rng.pick(&names)).to_owned();
        if !targets.contains(&name) {
            targets.push(name);
        }
    }
    differential(&path, &targets, 0x0C1A_5EED, MESSAGES);
}

#[test]
fn chainlesschain_fast_path_agrees_with_jsonschema_and_ajv() {
    let path = chainlesschain_schema_path();
    let doc = SchemaDocument::open(&path).unwrap();
    let mut targets: Vec<String> = vec![String::new(), String::new(), String::new()];
    targets.extend(doc.definitions().map(|(n, _)| n.to_owned()));
    differential(&path, &targets, 0xCC29, MESSAGES);
}

/// The root (every other message) and every definition of one of our protocols.
fn own_protocol(relative: &str, seed: u64) {
    let path = agentwire_testkit::repo_root().join(relative);
    let doc = SchemaDocument::open(&path).unwrap();
    let mut targets: Vec<String> = Vec::new();
    let definitions: Vec<String> = doc.definitions().map(|(n, _)| n.to_owned()).collect();
    for name in &definitions {
        targets.push(String::new());
        targets.push(name.clone());
    }
    differential(&path, &targets, seed, OWN_MESSAGES);
}

/// TaskLens run events: an `allOf` of conditionals dispatched on `type`, whose `if` also pins
/// `schemaVersion` (the fast path reads such an `if` as lookups).
#[test]
fn tasklens_fast_path_agrees_with_jsonschema_and_ajv() {
    own_protocol("protocols/tasklens/run-events.schema.json", 0x7A5C);
}

#[test]
fn roll_runtime_fast_path_agrees_with_jsonschema_and_ajv() {
    own_protocol("protocols/roll-runtime/roll-runtime.schema.json", 0x5011);
}

/// Verdicts of the fast path (on the value and on its bytes) and of the `jsonschema` crate on
/// the root of `doc`, which must all be `expect`.
fn assert_verdicts(doc: &SchemaDocument, cases: &[(Value, bool)]) {
    let fast = FastSchema::compile(doc).unwrap();
    let reference = reference_validator(doc, "");
    let mut tape = Tape::new();
    for (value, expect) in cases {
        let text = serde_json::to_string(value).unwrap();
        let on_bytes = parse(text.as_bytes(), &mut tape)
            .unwrap()
            .is_valid(&fast, fast.root());
        assert_eq!(
            (
                fast.is_valid(fast.root(), value),
                on_bytes,
                reference.is_valid(value)
            ),
            (*expect, *expect, *expect),
            "{text}"
        );
    }
}

/// A conditional dispatched on a tag whose `if` pins a second property: the payload applies
/// only when both hold, and a missing required property makes the `if` false. The same
/// conditionals inline and reached through references.
#[test]
fn tag_dispatched_conditionals_check_their_whole_if() {
    let cond = |kind: &str, then: Value| {
        json!({"if": {"required": ["kind", "v"], "properties": {"kind": {"const": kind}, "v": {"const": 1}}},
               "then": then})
    };
    let a = cond("a", json!({"required": ["x"]}));
    let b = cond(
        "b",
        json!({"required": ["y"], "properties": {"y": {"type": "string"}}}),
    );
    let inline = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [a, b]
    });
    let referenced = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
        "$defs": {"a": a, "b": {"$ref": "#/$defs/b2"}, "b2": b}
    });
    for schema in [inline, referenced] {
        assert_verdicts(
            &SchemaDocument::from_value(schema).unwrap(),
            &[
                (json!({"kind": "a", "v": 1, "x": 0}), true),
                (json!({"kind": "a", "v": 1}), false),
                // `v` other than 1, or missing: the `if` is false, `then` does not apply.
                (json!({"kind": "a", "v": 2}), true),
                (json!({"kind": "a"}), true),
                (json!({"kind": "b", "v": 1, "y": "s"}), true),
                (json!({"kind": "b", "v": 1, "y": 5}), false),
                (json!({"kind": "b", "v": 1}), false),
                (json!({"kind": "b", "v": "1"}), true),
                (json!({"kind": "c", "v": 1}), true),
                (json!({"kind": 1, "v": 1}), true),
                (json!([1]), true),
            ],
        );
    }
}

/// The same on TaskLens run events: a known type at another schema version is an envelope
/// only; at version 1 its payload applies.
#[test]
fn tasklens_payloads_apply_at_version_1_only() {
    let path = agentwire_testkit::repo_root().join("protocols/tasklens/run-events.schema.json");
    let doc = SchemaDocument::open(&path).unwrap();
    let event = |version: u64, payload: Value| {
        let mut e = json!({"id": "e1", "runId": "r1", "seq": 1, "at": 5, "schemaVersion": version, "type": "tool:call"});
        e.as_object_mut()
            .unwrap()
            .extend(payload.as_object().unwrap().clone());
        e
    };
    assert_verdicts(
        &doc,
        &[
            (event(1, json!({"stepId": "s1", "name": "db.query"})), true),
            (event(1, json!({"stepId": "s1"})), false),
            (event(1, json!({"stepId": "", "name": "db.query"})), false),
            (event(2, json!({"stepId": "s1"})), true),
            (event(2, json!({})), true),
        ],
    );
}

/// A union told apart by a tag: an object without the tag can pass only the branches that do
/// not require it, and one whose tag is not a string passes none.
#[test]
fn tagged_unions_without_a_string_tag() {
    let doc = SchemaDocument::from_value(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "oneOf": [
            {"type": "object", "required": ["kind", "a"], "properties": {"kind": {"const": "a"}, "a": {"type": "integer"}}},
            {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["b", "c"]}}},
            {"type": "object", "required": ["z"], "properties": {"kind": {"const": "z"}, "z": {"type": "string"}}}
        ]
    }))
    .unwrap();
    assert_verdicts(
        &doc,
        &[
            (json!({"kind": "a", "a": 1}), true),
            (json!({"kind": "b"}), true),
            (json!({"kind": "d"}), false),
            // No tag: only the third branch (which does not require it) can pass.
            (json!({"z": "s"}), true),
            (json!({"z": 1}), false),
            (json!({"a": 1}), false),
            (json!({}), false),
            // A tag that is not a string: no branch takes it.
            (json!({"kind": 1, "z": "s"}), false),
            (json!({"kind": null, "a": 1}), false),
            (json!("a"), false),
        ],
    );
}

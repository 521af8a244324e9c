//! Differential test of the fast validation path against the `jsonschema` crate and AJV 8 on the
//! real OpenClaw and ChainlessChain schemas: 100,000 generated and mutated messages per schema,
//! identical verdicts from all of them (the fast path both on parsed values and on bytes), and
//! the same first failing instance path as AJV wherever a message is invalid.

// Test and benchmark helpers fail loudly on broken setup, like the tests they serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::sample::{Generator, Rng, Size, mutate};
use agentwire_schema::fast::{FastSchema, Tape, Target, parse};
use agentwire_testkit::{chainlesschain_schema_path, node_script, openclaw_schema_path, run_ok};
use serde_json::{Value, json};

/// Messages per schema.
const MESSAGES: usize = 100_000;

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

fn differential(schema_path: &Path, targets: &[String], seed: u64) {
    let doc = SchemaDocument::open(schema_path).unwrap();
    let fast = FastSchema::compile(&doc).unwrap();
    let small = Generator::new(&doc, Size::Small);
    let large = Generator::new(&doc, Size::Large);
    let mut rng = Rng::new(seed);
    let mut lines: Vec<(String, Value)> = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
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
    let invalid_count = MESSAGES - valid_count;
    assert!(
        mismatches.is_empty(),
        "{} of {MESSAGES} messages disagree (seed {seed}); first ones:\n{}",
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
        valid_count > MESSAGES / 5,
        "only {valid_count} valid messages"
    );
    assert!(
        invalid_count > MESSAGES / 5,
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
    differential(&path, &targets, 0x0C1A_5EED);
}

#[test]
fn chainlesschain_fast_path_agrees_with_jsonschema_and_ajv() {
    let path = chainlesschain_schema_path();
    let doc = SchemaDocument::open(&path).unwrap();
    let mut targets: Vec<String> = vec![String::new(), String::new(), String::new()];
    targets.extend(doc.definitions().map(|(n, _)| n.to_owned()));
    differential(&path, &targets, 0xCC29);
}

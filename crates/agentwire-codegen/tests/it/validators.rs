//! The validators generated into TypeScript and Python, run on the real schemas against the
//! peers' own validators: on ChainlessChain 0.2.9 both agree with the SDK's
//! `generated_app_protocol.py` (the oracle) on every fixture and on generated messages for every
//! definition, valid ones and mutated ones (a member removed, added, retyped, out of range), with
//! the same first failing instance pointer where both report one; on OpenClaw 2026.9.1 both agree
//! with AJV 8 (with ajv-formats) on generated messages for every definition.
//!
//! The generator stays out of the points where the SDK reads JSON Schema its own way (listed in
//! `agentwire-schema`'s validator docs): no boolean where a number was or the reverse, no float
//! with a zero fraction, no string ending in a line feed, date-times in RFC 3339 or broken so
//! that every reading rejects them. The SDK points a missing required property at the property,
//! ours (like AJV) at its object: the comparison takes the SDK's pointer's parent for those.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use agentwire_codegen::{Language, Options};
use agentwire_schema::SchemaDocument;
use serde_json::{Map, Value, json};

/// Instances generated per definition before mutation.
const PER_DEFINITION: usize = 3;
/// Mutations of each generated instance.
const MUTATIONS: usize = 6;
/// Deepest nesting the instance generator builds.
const MAX_GEN_DEPTH: usize = 6;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, so a failure reproduces.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

struct Generator<'a> {
    root: &'a Value,
    rng: Rng,
}

impl Generator<'_> {
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn string(&mut self, node: &Value) -> Value {
        if node.get("format").and_then(Value::as_str) == Some("date-time") {
            return json!("2026-05-06T07:08:09Z");
        }
        if node.get("format").and_then(Value::as_str) == Some("uuid") {
            return json!("123e4567-e89b-12d3-a456-426614174000");
        }
        if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
            && pattern.starts_with("^sha256:")
        {
            return Value::String(format!("sha256:{}", "a".repeat(64)));
        }
        let min = node.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = node
            .get("maxLength")
            .and_then(Value::as_u64)
            .unwrap_or(64)
            .min(64) as usize;
        let len = 3.max(min).min(max.max(min));
        Value::String("abcdefgh".chars().cycle().take(len).collect())
    }

    fn number(&mut self, node: &Value, integer: bool) -> Value {
        let min = node
            .get("minimum")
            .and_then(Value::as_f64)
            .or_else(|| {
                node.get("exclusiveMinimum")
                    .and_then(Value::as_f64)
                    .map(|m| m + 1.0)
            })
            .unwrap_or(0.0);
        let max = node
            .get("maximum")
            .and_then(Value::as_f64)
            .unwrap_or(f64::MAX);
        let base = if min <= 1.0 && max >= 1.0 { 1.0 } else { min };
        if integer {
            json!(base as i64)
        } else if base + 0.5 <= max {
            json!(base + 0.5)
        } else {
            json!(base as i64)
        }
    }

    fn instance(&mut self, node: &Value, depth: usize) -> Value {
        let Value::Object(map) = node else {
            return json!("x");
        };
        if depth > 40 {
            return Value::Null;
        }
        if let Some(Value::String(reference)) = map.get("$ref") {
            let target = self
                .resolve(reference)
                .cloned()
                .unwrap_or(Value::Bool(true));
            return self.instance(&target, depth + 1);
        }
        if let Some(c) = map.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(values)) = map.get("enum")
            && !values.is_empty()
        {
            let i = self.rng.below(values.len());
            return values[i].clone();
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = map.get(key)
                && !branches.is_empty()
                && !map.contains_key("properties")
            {
                let i = self.rng.below(branches.len());
                return self.instance(&branches[i], depth + 1);
            }
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            let mut out = Map::new();
            for part in parts {
                if let Value::Object(m) = self.instance(part, depth + 1) {
                    out.extend(m);
                }
            }
            let mut rest = map.clone();
            rest.remove("allOf");
            if let Value::Object(m) = self.instance(&Value::Object(rest), depth + 1) {
                out.extend(m);
            }
            return Value::Object(out);
        }
        let ty = match map.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("null")
                .to_owned(),
            _ if map.contains_key("properties") || map.contains_key("required") => "object".into(),
            _ if map.contains_key("items") => "array".into(),
            _ => return json!({"any": [1, "two"]}),
        };
        match ty.as_str() {
            "string" => self.string(node),
            "integer" => self.number(node, true),
            "number" => self.number(node, false),
            "boolean" => json!(true),
            "null" => Value::Null,
            "array" => {
                let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = map.get("maxItems").and_then(Value::as_u64).unwrap_or(3) as usize;
                let n = if depth >= MAX_GEN_DEPTH {
                    min
                } else {
                    1.max(min).min(max)
                };
                let items = map.get("items").cloned().unwrap_or(Value::Bool(true));
                let mut out: Vec<Value> = Vec::new();
                for i in 0..n {
                    let item = match &items {
                        Value::Array(tuple) => tuple.get(i).cloned().unwrap_or(Value::Bool(true)),
                        other => other.clone(),
                    };
                    let mut v = self.instance(&item, depth + 1);
                    // uniqueItems: strings and numbers get distinct values.
                    match &mut v {
                        Value::String(s) if i > 0 => s.push_str(&"abcdefgh"[..i.min(8)]),
                        Value::Number(_) if i > 0 => v = json!(i as i64 + 1),
                        _ => {}
                    }
                    out.push(v);
                }
                Value::Array(out)
            }
            _ => {
                let mut out = Map::new();
                let required: Vec<String> = map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (name, schema) in props {
                        let wanted = required.contains(name)
                            || (depth < MAX_GEN_DEPTH && self.rng.below(2) == 0);
                        if wanted {
                            out.insert(name.clone(), self.instance(schema, depth + 1));
                        }
                    }
                }
                for name in &required {
                    if !out.contains_key(name) {
                        out.insert(name.clone(), json!("req"));
                    }
                }
                Value::Object(out)
            }
        }
    }

    /// One change the validators must judge alike: a member removed, added or retyped, or a
    /// value pushed out of its range.
    fn mutate(&mut self, value: &mut Value) {
        let paths = agentwire_testkit::value_paths(value);
        let path = paths[self.rng.below(paths.len())].clone();
        let choice = self.rng.below(5);
        let Some(target) = agentwire_testkit::value_at_path_mut(value, &path) else {
            return;
        };
        match (choice, target) {
            (0, Value::Object(m)) if !m.is_empty() => {
                let key = m
                    .keys()
                    .nth(self.rng.below(m.len()))
                    .cloned()
                    .unwrap_or_default();
                m.shift_remove(&key);
            }
            (1, Value::Object(m)) => {
                m.insert("zzExtra".into(), json!(7));
            }
            (2, v @ Value::String(_)) => *v = json!([1]),
            (2, v @ Value::Number(_)) => *v = json!("12"),
            (2, v @ Value::Bool(_)) => *v = json!("true"),
            (2, v @ Value::Array(_)) => *v = json!({"a": 1}),
            (2, v @ Value::Object(_)) => *v = json!(["a"]),
            (3, Value::String(s)) => s.push_str(&"long".repeat(1200)),
            (3, v @ Value::Number(_)) => *v = json!(-1_000_001),
            (3, Value::Array(items)) => {
                for _ in 0..70 {
                    items.push(json!("more"));
                }
            }
            (4, Value::String(s)) => s.clear(),
            (4, v @ Value::Number(_)) => *v = json!(99_999_999_999i64),
            (_, v) => *v = Value::Null,
        }
    }
}

/// Instances for every definition: generated ones and their mutations, as `{"t": definition,
/// "m": instance}`.
fn corpus(schema: &Value, seed: u64) -> Vec<Value> {
    let keyword = if schema.get("$defs").is_some() {
        "$defs"
    } else {
        "definitions"
    };
    let defs = schema[keyword].as_object().unwrap();
    let mut g = Generator {
        root: schema,
        rng: Rng(seed),
    };
    let mut out = Vec::new();
    for (name, node) in defs {
        for _ in 0..PER_DEFINITION {
            let base = g.instance(node, 0);
            out.push(json!({"t": name, "m": base.clone()}));
            for _ in 0..MUTATIONS {
                let mut m = base.clone();
                g.mutate(&mut m);
                out.push(json!({"t": name, "m": m}));
            }
        }
    }
    out
}

fn generate(schema: &Path, base: &str, root_name: Option<&str>) -> PathBuf {
    let doc = SchemaDocument::open(schema).unwrap();
    let name = schema.file_name().unwrap().to_str().unwrap();
    let mut options = Options::for_schema(name);
    options.base_name = base.to_owned();
    options.kotlin_package = format!("agentwire.generated.{base}");
    options.root_name = root_name.map(str::to_owned);
    let files = agentwire_codegen::generate_from_document(
        &doc,
        name,
        &[Language::TypeScript, Language::Python],
        &options,
    )
    .unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("codegen-validators")
        .join(base);
    let _ = std::fs::remove_dir_all(&dir);
    agentwire_codegen::write(&dir, &files).unwrap();
    // TypeScript compiled to CommonJS so Node can load it.
    agentwire_testkit::run_ok(
        agentwire_testkit::require_tsc()
            .args([
                "--strict", "--target", "es2020", "--module", "commonjs", "--outDir",
            ])
            .arg(dir.join("js"))
            .arg(dir.join(format!("ts/{base}.ts"))),
    );
    dir
}

fn write_ndjson(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// `[ok, first instance pointer or null]` per corpus line from the generated TypeScript.
fn ts_verdicts(dir: &Path, base: &str, corpus: &Path) -> Vec<Value> {
    let script = r#"
const m = require(process.argv[1]);
const lines = require("fs").readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l !== "");
const out = [];
for (const line of lines) {
  const { t, m: value } = JSON.parse(line);
  const r = t === "" ? m.validateProtocolMessage(value) : m.validateDefinition(t, value);
  out.push(JSON.stringify([r.ok, r.ok ? null : r.errors[0].instancePath]));
}
process.stdout.write(out.join("\n") + "\n");
"#;
    let output = agentwire_testkit::run_ok(
        agentwire_testkit::require_node()
            .arg("-e")
            .arg(script)
            .arg(dir.join(format!("js/{base}.js")))
            .arg(corpus),
    );
    parse_lines(&output.stdout)
}

/// `[ok, first pointer or null]` per corpus line from the generated Python, followed (with
/// `oracle`) by the ChainlessChain SDK's `[ok, first pointer or null]`.
fn py_verdicts(dir: &Path, base: &str, corpus: &Path, oracle: bool) -> Vec<Value> {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
mod = __import__(sys.argv[2])
oracle = None
if sys.argv[4] == "1":
    from chainlesschain_agent_sdk import generated_app_protocol as oracle
for line in open(sys.argv[3], encoding="utf-8"):
    if not line.strip():
        continue
    case = json.loads(line)
    t, value = case["t"], case["m"]
    r = mod.validate_protocol_message(value) if t == "" else mod.validate_definition(t, value)
    row = [r.ok, None if r.ok else r.errors[0].instance_path]
    if oracle is not None:
        ok, errors = oracle.validate_protocol_message(value) if t == "" else oracle.validate_protocol_definition(t, value)
        first = None
        if not ok:
            pointer, _, message = errors[0].partition(" ")
            pointer = pointer[1:]
            # The SDK points a missing property at the property; ours at its object.
            if message == "is required":
                pointer = pointer.rsplit("/", 1)[0]
            first = pointer
        row += [ok, first]
    print(json.dumps(row))
"#;
    let output = agentwire_testkit::run_ok(
        agentwire_testkit::require_python()
            .arg("-c")
            .arg(script)
            .arg(dir.join("py"))
            .arg(base)
            .arg(corpus)
            .arg(if oracle { "1" } else { "0" }),
    );
    parse_lines(&output.stdout)
}

/// The verdict program of one schema's generated Kotlin (its own `parseJson` reads the corpus
/// lines, `writeJson` prints `[ok, first instance pointer or null]` per line), in package
/// `agentwire.verdicts.<base>`.
fn kotlin_verdicts_main(base: &str) -> String {
    format!(
        r#"package agentwire.verdicts.{base}

import agentwire.generated.{base}.parseJson
import agentwire.generated.{base}.validateDefinition
import agentwire.generated.{base}.validateProtocolMessage
import agentwire.generated.{base}.writeJson

fun main(args: Array<String>) {{
    val out = StringBuilder()
    java.io.File(args[0]).forEachLine(Charsets.UTF_8) {{ line ->
        if (line.isNotBlank()) {{
            val case = parseJson(line) as Map<*, *>
            val t = case["t"] as String
            val r = if (t == "") validateProtocolMessage(case["m"]) else validateDefinition(t, case["m"])
            out.append(writeJson(listOf(r.ok, if (r.ok) null else r.errors[0].instancePath))).append('\n')
        }}
    }}
    print(out)
}}
"#
    )
}

/// The verdict programs this file contributes to the one compile of `crate::kotlin` (the
/// bindings they call come from `crate::real_schemas`, generated with the same options).
pub(crate) fn kotlin_mains(dir: &Path) -> Vec<PathBuf> {
    ["chainlesschain", "openclaw"]
        .into_iter()
        .map(|base| {
            // `Verdicts.kt` in each package's folder: its main class is `<package>.VerdictsKt`.
            let folder = dir.join("verdicts").join(base);
            std::fs::create_dir_all(&folder).unwrap();
            let path = folder.join("Verdicts.kt");
            std::fs::write(&path, kotlin_verdicts_main(base)).unwrap();
            path
        })
        .collect()
}

/// `[ok, first instance pointer or null]` per corpus line from the generated Kotlin.
fn kt_verdicts(base: &str, corpus: &Path) -> Vec<Value> {
    parse_lines(&crate::kotlin::run(
        &format!("agentwire.verdicts.{base}.VerdictsKt"),
        &[corpus],
    ))
}

fn parse_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn fixture_corpus() -> Vec<Value> {
    let mut out = Vec::new();
    for (file, def) in [
        ("approval-decisions.json", "ApprovalDecision"),
        ("agent-stream-events.json", "AgentStreamEventEnvelope"),
        (
            "canonical-agent-stream-payloads.json",
            "CanonicalAgentStreamEvent",
        ),
    ] {
        let cases = agentwire_testkit::read_json(agentwire_testkit::peer_fixture(format!(
            "chainlesschain/fixtures/test/fixtures/{file}"
        )));
        for c in cases.as_array().unwrap() {
            // `undefined` is not JSON: the fixture marks where a JavaScript caller injects it.
            if c.get("injectUndefinedAt").is_none() {
                out.push(json!({"t": def, "m": c["value"], "valid": c["valid"]}));
            }
        }
    }
    // The four message kinds through the document root.
    for m in [
        json!({"jsonrpc": "2.0", "id": "1", "method": "initialize", "params": {"protocolVersion": 1, "minimumProtocolVersion": 1, "client": {"name": "sdk", "version": "1"}, "features": []}}),
        json!({"jsonrpc": "2.0", "id": 1, "result": {"ok": true}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "approval/decide", "params": {"kind": "acceptOnce"}}),
        json!({"jsonrpc": "2.0", "method": "turn/started", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "context/plan", "params": {"bogus": true}}),
        json!({"seq": 1}),
    ] {
        out.push(json!({"t": "", "m": m}));
    }
    out
}

#[test]
fn chainlesschain_validators_agree_with_the_sdk() {
    let schema_path = agentwire_testkit::chainlesschain_schema_path();
    let schema = agentwire_testkit::read_json(&schema_path);
    let dir = generate(&schema_path, "chainlesschain", None);
    let mut cases = fixture_corpus();
    cases.extend(corpus(&schema, 0x5eed_c0de_0012));
    let corpus_path = dir.join("corpus.ndjson");
    write_ndjson(&corpus_path, &cases);
    let ts = ts_verdicts(&dir, "chainlesschain", &corpus_path);
    let py = py_verdicts(&dir, "chainlesschain", &corpus_path, true);
    let kt = kt_verdicts("chainlesschain", &corpus_path);
    assert_eq!(ts.len(), cases.len());
    assert_eq!(py.len(), cases.len());
    assert_eq!(kt.len(), cases.len());
    let (mut valid, mut invalid, mut pointers) = (0, 0, 0);
    let mut problems = Vec::new();
    for (((case, ts), py), kt) in cases.iter().zip(&ts).zip(&py).zip(&kt) {
        let oracle_ok = py[2].as_bool().unwrap();
        if let Some(expected) = case.get("valid").and_then(Value::as_bool) {
            assert_eq!(
                oracle_ok, expected,
                "the SDK disagrees with its fixture: {case}"
            );
        }
        if ts[0] != py[2] || py[0] != py[2] || kt[0] != py[2] {
            problems.push(format!(
                "verdicts ts={} py={} kt={} sdk={}: {case}",
                ts[0], py[0], kt[0], py[2]
            ));
            continue;
        }
        if oracle_ok {
            valid += 1;
            continue;
        }
        invalid += 1;
        if ts[1] != py[3] || py[1] != py[3] || kt[1] != py[3] {
            problems.push(format!(
                "first pointer ts={} py={} kt={} sdk={}: {case}",
                ts[1], py[1], kt[1], py[3]
            ));
        } else {
            pointers += 1;
        }
    }
    eprintln!(
        "{} cases: {valid} valid, {invalid} invalid, {pointers} with the same first pointer",
        cases.len()
    );
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The corpus exercises both verdicts on a real share of the definitions.
    assert!(valid >= 300, "{valid} valid cases");
    assert!(invalid >= 1000, "{invalid} invalid cases");
}

/// AJV 8 (draft-07, ajv-formats, `strict: false`) over a corpus of `{"t": definition, "m":
/// instance}` lines: one AJV instance holds the document, so each definition's validator is
/// compiled once and shares the compiled references of the others. Prints `1` or `0` per line.
const AJV_BULK: &str = r#"
const [ajvDir, formatsDir, schemaPath, corpusPath] = process.argv.slice(1);
const fs = require("fs");
const load = (dir) => { const m = require(dir); return m.default || m; };
const Ajv = load(ajvDir);
const addFormats = load(formatsDir);
const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
const ajv = new Ajv({ strict: false, allErrors: false, logger: false });
addFormats(ajv);
ajv.addSchema(schema, "doc");
const keyword = schema.$defs !== undefined ? "$defs" : "definitions";
const cache = new Map();
const out = [];
for (const line of fs.readFileSync(corpusPath, "utf8").split("\n")) {
  if (line === "") continue;
  const { t, m } = JSON.parse(line);
  let validate = cache.get(t);
  if (validate === undefined) {
    const token = t.replace(/~/g, "~0").replace(/\//g, "~1");
    validate = ajv.getSchema(t === "" ? "doc" : "doc#/" + keyword + "/" + encodeURIComponent(token));
    if (validate === undefined) throw new Error("no definition " + t);
    cache.set(t, validate);
  }
  out.push(validate(m) ? "1" : "0");
}
process.stdout.write(out.join("\n") + "\n");
"#;

#[test]
fn openclaw_validators_agree_with_ajv() {
    let schema_path = agentwire_testkit::openclaw_schema_path();
    let schema = agentwire_testkit::read_json(&schema_path);
    let dir = generate(&schema_path, "openclaw", Some("GatewayFrame"));
    let cases = corpus(&schema, 0x5eed_0c1a_0012);
    let corpus_path = dir.join("corpus.ndjson");
    write_ndjson(&corpus_path, &cases);
    let ts = ts_verdicts(&dir, "openclaw", &corpus_path);
    let py = py_verdicts(&dir, "openclaw", &corpus_path, false);
    let kt = kt_verdicts("openclaw", &corpus_path);
    let ajv = agentwire_testkit::run_ok(
        agentwire_testkit::require_node()
            .arg("-e")
            .arg(AJV_BULK)
            .arg(agentwire_testkit::require_node_module("ajv"))
            .arg(agentwire_testkit::require_node_module("ajv-formats"))
            .arg(&schema_path)
            .arg(&corpus_path),
    );
    let ajv: Vec<bool> = String::from_utf8_lossy(&ajv.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l == "1")
        .collect();
    assert_eq!(ajv.len(), cases.len());
    let mut problems = Vec::new();
    let mut valid = 0;
    assert_eq!(kt.len(), cases.len());
    for ((((case, ts), py), kt), ajv) in cases.iter().zip(&ts).zip(&py).zip(&kt).zip(&ajv) {
        if ts[0] != json!(*ajv) || py[0] != json!(*ajv) || kt[0] != json!(*ajv) {
            problems.push(format!(
                "ts={} py={} kt={} ajv={ajv}: {case}",
                ts[0], py[0], kt[0]
            ));
        }
        valid += usize::from(*ajv);
    }
    eprintln!("{} cases, {valid} valid", cases.len());
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n").chars().take(20000).collect::<String>()
    );
    assert!(valid >= 500, "{valid} valid cases");
    assert!(
        cases.len() - valid >= 2000,
        "{} invalid cases",
        cases.len() - valid
    );
}

//! Every Roll fixture (the peer's and our own) and every TaskLens fixture through the checked-in
//! bindings' decoders in TypeScript, Python and Kotlin: each language's verdict is the one
//! `agentwire-schema`'s validator gives on the same document, and a valid message decoded and
//! encoded again is the same JSON value (open objects keep their extra keys).
//!
//! TypeScript and Python type plain JSON values, so their decoder is the validator and their
//! encoding is the value itself; Kotlin builds typed values (`decodeProtocolMessage`, the
//! `fromWire` functions) and writes them back (`encodeProtocolMessage`, `toWire`).

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use agentwire_schema::SchemaDocument;
use agentwire_schema::validate::ValidatorCompiler;
use serde_json::{Value, json};

/// One protocol: its key in the corpus, schema, checked-in bindings and fixture files.
struct Protocol {
    key: &'static str,
    schema: &'static str,
    ts: &'static str,
    py: &'static str,
    kt: &'static str,
    kotlin_package: &'static str,
    fixtures: Vec<PathBuf>,
}

fn protocols() -> Vec<Protocol> {
    let repo = agentwire_testkit::repo_root();
    vec![
        Protocol {
            key: "roll",
            schema: "protocols/roll-runtime/roll-runtime.schema.json",
            ts: "protocols/roll-runtime/generated/ts/roll_runtime.ts",
            py: "roll_runtime",
            kt: "protocols/roll-runtime/generated/kt/RollRuntime.kt",
            kotlin_package: "agentwire.generated.roll_runtime",
            fixtures: agentwire_testkit::roll_upstream_fixtures()
                .into_iter()
                .chain(agentwire_testkit::roll_own_fixtures())
                .map(|f| f.path)
                .collect(),
        },
        Protocol {
            key: "tasklens",
            schema: "protocols/tasklens/run-events.schema.json",
            ts: "protocols/tasklens/generated/ts/run_events.ts",
            py: "run_events",
            kt: "protocols/tasklens/generated/kt/RunEvents.kt",
            kotlin_package: "agentwire.generated.run_events",
            fixtures: agentwire_testkit::files_with_extension(
                repo.join("protocols/tasklens/fixtures"),
                "json",
            ),
        },
    ]
}

/// `{"s": protocol, "name": file, "m": message, "valid": our validator's verdict}` per fixture.
fn corpus() -> Vec<Value> {
    let repo = agentwire_testkit::repo_root();
    let mut out = Vec::new();
    for p in protocols() {
        let doc = SchemaDocument::open(repo.join(p.schema)).unwrap();
        let validator = ValidatorCompiler::new(&doc).unwrap().root().unwrap();
        let files = &p.fixtures;
        assert!(files.len() >= 50, "{}: {} fixtures", p.key, files.len());
        for file in files {
            let value = agentwire_testkit::read_json(file);
            let valid = validator.is_valid(&value);
            let name = file
                .strip_prefix(&repo)
                .unwrap_or(file)
                .display()
                .to_string();
            out.push(json!({"s": p.key, "name": name, "m": value, "valid": valid}));
        }
    }
    out
}

/// Numbers compare by value (`1` and `1.0` are one JSON number), everything else exactly.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("codegen-round-trips");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_corpus(cases: &[Value]) -> PathBuf {
    let path = scratch().join("corpus.ndjson");
    let text: String = cases
        .iter()
        .map(|c| format!("{}\n", json!({"s": c["s"], "m": c["m"]})))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Checks one language's `[ok, re-encoded message or null, error or null]` lines against the
/// corpus; returns the problems.
fn compare(lang: &str, cases: &[Value], got: &[Value]) -> Vec<String> {
    assert_eq!(got.len(), cases.len(), "{lang}: one verdict per case");
    let mut problems = Vec::new();
    for (case, row) in cases.iter().zip(got) {
        let name = case["name"].as_str().unwrap();
        if row[0] != case["valid"] {
            problems.push(format!(
                "{lang} {name}: decoded={} validator={} ({})",
                row[0], case["valid"], row[2]
            ));
        } else if row[0] == json!(true) && !same_json(&row[1], &case["m"]) {
            problems.push(format!("{lang} {name}: re-encoded as {}", row[1]));
        }
    }
    problems
}

const TS_SCRIPT: &str = r#"
const fs = require("fs");
const modules = { roll: require(process.argv[1]), tasklens: require(process.argv[2]) };
const out = [];
for (const line of fs.readFileSync(process.argv[3], "utf8").split("\n")) {
  if (line === "") continue;
  const { s, m } = JSON.parse(line);
  const r = modules[s].validateProtocolMessage(m);
  out.push(JSON.stringify([r.ok, r.ok ? JSON.parse(JSON.stringify(m)) : null, r.ok ? null : r.errors[0].instancePath + " " + r.errors[0].keyword]));
}
process.stdout.write(out.join("\n") + "\n");
"#;

const PY_SCRIPT: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import roll_runtime, run_events
modules = {"roll": roll_runtime, "tasklens": run_events}
for line in open(sys.argv[3], encoding="utf-8"):
    if not line.strip():
        continue
    case = json.loads(line)
    r = modules[case["s"]].validate_protocol_message(case["m"])
    back = json.loads(json.dumps(case["m"])) if r.ok else None
    error = None if r.ok else r.errors[0].instance_path + " " + r.errors[0].keyword
    print(json.dumps([r.ok, back, error]))
"#;

/// The round-trip program this file contributes to the one compile of `crate::kotlin` (the
/// checked-in bindings it calls are among `crate::real_schemas`'s sources).
pub(crate) fn kotlin_main_file(dir: &Path) -> PathBuf {
    let path = dir.join("RoundTrip.kt");
    std::fs::write(&path, kotlin_main()).unwrap();
    path
}

fn kotlin_main() -> String {
    let mut imports = String::new();
    let mut arms = String::new();
    for p in protocols() {
        let alias = format!("{}Decode", p.key);
        imports.push_str(&format!(
            "import {}.decodeProtocolMessage as {alias}\nimport {}.encodeProtocolMessage as {}Encode\n",
            p.kotlin_package, p.kotlin_package, p.key
        ));
        arms.push_str(&format!(
            "                \"{}\" -> listOf({}Encode({alias}(m)), null)\n",
            p.key, p.key
        ));
    }
    crate::kotlin::decode_cases_main(
        "agentwire.roundtrip",
        "agentwire.generated.roll_runtime",
        &imports,
        "s",
        &arms,
    )
}

/// The open-union program this file contributes to the one compile: the agent protocol's two
/// `x-agentwire-open` unions through their deep `fromWire`.
pub(crate) fn kotlin_open_union_main_file(dir: &Path) -> PathBuf {
    let path = dir.join("OpenUnion.kt");
    let arms = [("runtime", "RuntimeMessage"), ("agent", "AgentMessage")]
        .iter()
        .map(|(key, union)| {
            format!(
                "                \"{key}\" -> {union}.fromWire(m).let {{ listOf(it.toWire(), if (it is {union}.Unknown) \"unknown\" else \"known\") }}\n"
            )
        })
        .collect::<String>();
    let main = crate::kotlin::decode_cases_main(
        "agentwire.openunion",
        "agentwire.generated.agent",
        "import agentwire.generated.agent.RuntimeMessage\nimport agentwire.generated.agent.AgentMessage\n",
        "u",
        &arms,
    );
    std::fs::write(&path, main).unwrap();
    path
}

/// Kotlin's deep `fromWire` of an `x-agentwire-open` union keeps a value whose tag no variant
/// knows as `Unknown` (as Rust, Swift, TypeScript and Python do), and still checks every known
/// variant, and a value without a string tag, against the schema.
#[test]
fn kotlin_keeps_unknown_variants_of_open_unions_and_checks_known_ones() {
    let cases = [
        (
            "runtime",
            json!({"type": "turn.cancel", "reason": "user"}),
            Some("known"),
        ),
        ("runtime", json!({"type": "turn.cancel", "reason": 5}), None),
        (
            "runtime",
            json!({"type": "turn.pause", "at": 5, "why": {"x": [1]}}),
            Some("unknown"),
        ),
        ("runtime", json!({"type": 7}), None),
        ("runtime", json!({"reason": "no tag"}), None),
        (
            "agent",
            json!({"type": "message.delta", "delta": "hi"}),
            Some("known"),
        ),
        ("agent", json!({"type": "message.delta"}), None),
        (
            "agent",
            json!({"type": "future:event", "n": 1}),
            Some("unknown"),
        ),
    ];
    let path = scratch().join("open-unions.ndjson");
    let text: String = cases
        .iter()
        .map(|(u, m, _)| format!("{}\n", json!({"u": u, "m": m})))
        .collect();
    std::fs::write(&path, text).unwrap();
    let got = lines(&crate::kotlin::run(
        "agentwire.openunion.OpenUnionKt",
        &[&path],
    ));
    assert_eq!(got.len(), cases.len());
    for ((union, message, expect), row) in cases.iter().zip(&got) {
        match expect {
            Some(kind) => assert_eq!(
                row,
                &json!([true, message, kind]),
                "{union} {message}: kept as {kind} and written back as it came"
            ),
            None => assert_eq!(
                row[0],
                json!(false),
                "{union} {message}: rejected, got {row}"
            ),
        }
    }
}

#[test]
fn roll_and_tasklens_fixtures_decode_as_the_validator_says_and_round_trip() {
    let repo = agentwire_testkit::repo_root();
    let cases = corpus();
    let corpus_path = write_corpus(&cases);
    let valid = cases.iter().filter(|c| c["valid"] == json!(true)).count();
    assert!(
        valid >= 40 && cases.len() - valid >= 40,
        "{valid} valid of {}",
        cases.len()
    );
    let mut problems = Vec::new();

    let js = scratch().join("js");
    let ps = protocols();
    agentwire_testkit::run_ok(
        agentwire_testkit::require_tsc()
            .args([
                "--strict", "--target", "es2020", "--module", "commonjs", "--outDir",
            ])
            .arg(&js)
            .args(ps.iter().map(|p| repo.join(p.ts))),
    );
    let ts = agentwire_testkit::run_ok(
        agentwire_testkit::require_node()
            .arg("-e")
            .arg(TS_SCRIPT)
            // tsc keeps the folders below the inputs' common root (`protocols/`).
            .arg(js.join("roll-runtime/generated/ts/roll_runtime.js"))
            .arg(js.join("tasklens/generated/ts/run_events.js"))
            .arg(&corpus_path),
    );
    problems.extend(compare("ts", &cases, &lines(&ts.stdout)));

    let py_dir = |p: &Protocol| {
        repo.join(p.kt.replace("/kt/", "/py/"))
            .parent()
            .unwrap()
            .to_path_buf()
    };
    assert!(
        ps.iter()
            .all(|p| py_dir(p).join(format!("{}.py", p.py)).is_file())
    );
    let py = agentwire_testkit::run_ok(
        agentwire_testkit::require_python()
            .arg("-c")
            .arg(PY_SCRIPT)
            .arg(py_dir(&ps[0]))
            .arg(py_dir(&ps[1]))
            .arg(&corpus_path),
    );
    problems.extend(compare("py", &cases, &lines(&py.stdout)));

    let kt = crate::kotlin::run("agentwire.roundtrip.RoundTripKt", &[&corpus_path]);
    problems.extend(compare("kt", &cases, &lines(&kt)));

    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

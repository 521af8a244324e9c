//! Parse + validate throughput of Roll messages under the 1.5 export: this crate's compiled
//! export, the schema crate's reference validator and its fast plan, against Ajv 8 in node on
//! the same messages, printed as messages per second and ratios.
//!
//! Run: `cargo bench -p agentwire-roll --bench roll_validate` (needs node and the test tools:
//! `scripts/install-test-tools.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use agentwire_roll::{ProtocolVersion, schema};
use agentwire_schema::fast::{FastSchema, Tape};
use agentwire_schema::validate::ValidatorCompiler;
use agentwire_schema::{SchemaDocument, parse_json};
use agentwire_testkit::{node_script, repo_root, roll_own_fixtures, roll_upstream_fixtures};
use serde_json::{Value, json};

/// Messages in the workload (the fixtures, repeated).
const MESSAGES: usize = 2_000;
/// Shortest timed round.
const MIN_ROUND: Duration = Duration::from_secs(2);

fn corpus() -> Vec<String> {
    let fixtures = roll_upstream_fixtures()
        .into_iter()
        .chain(roll_own_fixtures());
    // Messages of every size would let the few 10 KB fixtures dominate; keep the frames a
    // runtime sends most (under 4 KB), valid and invalid alike.
    let texts: Vec<String> = fixtures
        .map(|f| serde_json::to_string(&f.message).unwrap())
        .filter(|t| t.len() < 4_096)
        .collect();
    texts.iter().cycle().take(MESSAGES).cloned().collect()
}

/// Best of three rounds of at least [`MIN_ROUND`], in messages per second.
fn rate(messages: &[String], mut check: impl FnMut(&str) -> bool) -> (f64, usize) {
    let mut best = 0.0f64;
    let mut valid = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut done = 0usize;
        while start.elapsed() < MIN_ROUND {
            valid = 0;
            for message in messages {
                valid += usize::from(check(message));
            }
            done += messages.len();
        }
        best = best.max(done as f64 / start.elapsed().as_secs_f64());
    }
    (best, valid)
}

fn main() {
    let messages = corpus();
    let export_path =
        repo_root().join("protocols/roll-runtime/exports/roll-runtime-1.5.schema.json");
    let document =
        SchemaDocument::from_slice(schema::export_text(ProtocolVersion::V1_5).as_bytes()).unwrap();
    let reference = ValidatorCompiler::new(&document).unwrap().root().unwrap();
    let fast = FastSchema::compile(&document).unwrap();
    let root = fast.root();

    let (crate_rate, crate_valid) = rate(&messages, |text| {
        let value: Value = serde_json::from_str(text).unwrap();
        schema::is_valid(ProtocolVersion::V1_5, &value)
    });
    let (reference_rate, reference_valid) = rate(&messages, |text| {
        parse_json(text.as_bytes()).is_ok_and(|value| reference.is_valid(&value))
    });
    let mut tape = Tape::default();
    let (fast_rate, fast_valid) = rate(&messages, |text| {
        fast.check_bytes(root, text.as_bytes(), &mut tape)
            .unwrap_or(false)
    });
    assert_eq!(crate_valid, reference_valid, "the validators disagree");
    assert_eq!(crate_valid, fast_valid, "the fast plan disagrees");

    let workload = std::env::temp_dir().join("agentwire-roll-bench.json");
    let checks: Vec<Value> = messages.iter().map(|_| json!([["", ""]])).collect();
    std::fs::write(
        &workload,
        serde_json::to_vec(&json!({"schema": export_path, "messages": messages, "checks": checks}))
            .unwrap(),
    )
    .unwrap();
    let output = node_script("bench-ajv.mjs")
        .arg(&workload)
        .arg(MIN_ROUND.as_secs_f64().to_string())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ajv: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ajv_rate = ajv["parse_validate_per_s"].as_f64().unwrap();

    println!(
        "roll-runtime 1.5, {} messages ({} valid), parse + validate, messages/s:",
        messages.len(),
        crate_valid
    );
    println!("  ajv 8 (node)                 {ajv_rate:>12.0}  1.00x");
    for (name, value) in [
        ("agentwire-roll schema::is_valid", crate_rate),
        ("agentwire-schema reference", reference_rate),
        ("agentwire-schema fast plan", fast_rate),
    ] {
        println!("  {name:<28} {value:>12.0}  {:.2}x", value / ajv_rate);
    }
}

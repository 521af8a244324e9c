//! The validator against ChainlessChain's real artifacts: the canonical schema of
//! `chainlesschain-agent-sdk==0.2.9`, the peer's published fixtures, and a differential test
//! against the SDK's own `validate_protocol_message` / `validate_protocol_definition`.
//!
//! Where the SDK and JSON Schema disagree (ChainlessChain FACTS §8), our verdicts follow JSON
//! Schema and the generator below stays out of the disputed cases, listed here once:
//! - `const` / `enum` use Python `==` in the SDK, so `true` passes `const: 1` (and `1.0`
//!   passes `const: 1`). Mutations never put a boolean where a number was or the reverse, and
//!   never write a float with a zero fraction.
//! - `integer` is `int and not bool` in the SDK, so `1.0` is not an integer there but is one in
//!   JSON Schema. Generated floats always have a fraction (`k + 0.5`).
//! - `pattern` runs Python `re.search`, whose `$` also matches before a final line feed:
//!   generated strings never end in `\n`.
//! - `date-time` is `datetime.fromisoformat` in the SDK, which also takes a date alone, a time
//!   without offset, or a space separator; JSON Schema's is RFC 3339. Generated date-times are
//!   RFC 3339 (valid in both) or broken in a way both reject (month 13, hour 25, prose).
//! - The SDK reads messages with `json.loads`, which accepts duplicate keys, `NaN` and lone
//!   surrogates that our strict parser rejects: generated messages are plain JSON values.
//!
//! Cases where both agree although JavaScript would not, kept in the generator on purpose:
//! strings with astral characters measured against `minLength`/`maxLength` (code points in
//! both; JavaScript counts UTF-16 units), integers beyond 2^53 (JavaScript's
//! `Number.isSafeInteger` rejects them).

use std::collections::BTreeMap;

use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use agentwire_testkit::{cc_sdk_verdicts, chainlesschain_schema_path, peer_fixture, read_json};
use serde_json::{Map, Value, json};

fn schema() -> SchemaDocument {
    SchemaDocument::open(chainlesschain_schema_path()).unwrap()
}

fn fixture(name: &str) -> Vec<Value> {
    let path = peer_fixture(format!("chainlesschain/fixtures/test/fixtures/{name}.json"));
    match read_json(path) {
        Value::Array(cases) => cases,
        other => panic!("{name}: expected an array of cases, found {other}"),
    }
}

/// Every case of a fixture file gives its expected verdict against the named definition, and the
/// SDK agrees with us on each.
fn check_fixture(file: &str, definition: &str) -> usize {
    let compiler = ValidatorCompiler::new(&schema()).unwrap();
    let validator = compiler.definition(definition).unwrap();
    let cases = fixture(file);
    let values: Vec<Value> = cases.iter().map(|c| c["value"].clone()).collect();
    let sdk = cc_sdk_verdicts(&values, Some(definition));
    for (case, sdk) in cases.iter().zip(&sdk) {
        let name = case["name"].as_str().unwrap_or_default();
        if case.get("injectUndefinedAt").is_some() {
            continue; // checked by `inject_undefined_is_not_wire_data`
        }
        let expected = case["valid"].as_bool().unwrap();
        let issues = validator.validate(&case["value"]);
        assert_eq!(issues.is_empty(), expected, "{file}: {name}: {issues:#?}");
        assert_eq!(
            validator.is_valid(&case["value"]),
            expected,
            "{file}: {name}"
        );
        assert_eq!(
            sdk.valid, expected,
            "{file}: {name}: the SDK disagrees with the fixture"
        );
    }
    cases.len()
}

#[test]
fn approval_decision_fixtures() {
    assert_eq!(check_fixture("approval-decisions", "ApprovalDecision"), 9);
}

#[test]
fn agent_stream_event_fixtures() {
    assert_eq!(
        check_fixture("agent-stream-events", "AgentStreamEventEnvelope"),
        7
    );
}

#[test]
fn canonical_agent_stream_payload_fixtures() {
    assert_eq!(
        check_fixture(
            "canonical-agent-stream-payloads",
            "CanonicalAgentStreamEvent"
        ),
        18
    );
}

/// The `injectUndefinedAt` case: the JavaScript test puts `undefined` at `payload.missing` and
/// expects rejection because `undefined` is not JSON wire data. A JSON value (ours, or the
/// SDK's `json.loads` result) cannot hold it, and `JSON.stringify` would silently drop the key,
/// so the message as it would travel is the fixture's `value`, which is valid. What can reach a
/// validator is the text a careless producer writes, `"missing":undefined`: our byte-level entry
/// point rejects that as not JSON, at the exact position of the token.
#[test]
fn inject_undefined_is_not_wire_data() {
    let validator = schema().validator_for("AgentStreamEventEnvelope").unwrap();
    let cases = fixture("agent-stream-events");
    let case = cases
        .iter()
        .find(|c| c.get("injectUndefinedAt").is_some())
        .unwrap();
    assert_eq!(case["injectUndefinedAt"], "payload.missing");
    assert_eq!(case["valid"], false);
    // Without the injection: valid for us and for the SDK.
    assert!(validator.validate(&case["value"]).is_empty());
    assert!(cc_sdk_verdicts(&[case["value"].clone()], Some("AgentStreamEventEnvelope"))[0].valid);
    // With it, as text on the wire.
    let text = br#"{"type":"result","payload":{"present":true,"missing":undefined}}"#;
    let issues = validator.validate_bytes(text);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].code.code(), "json.syntax");
    assert_eq!(issues[0].message, "expected value at line 1 column 54");
}

#[test]
fn messages_report_the_selected_method_branch() {
    let validator = schema().validator().unwrap();
    // The four message kinds share no tag: one issue summarising each kind. Inside
    // ClientRequest the `method` tag picks the `initialize` branch, whose issues lead.
    let issues = validator.validate(&json!({
        "jsonrpc": "2.0", "id": "1", "method": "initialize",
        "params": {"protocolVersion": 0, "minimumProtocolVersion": 1, "client": {"name": "x"}}
    }));
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].code.code(), "validate.one-of-none");
    assert_eq!(issues[0].schema_pointer, "/oneOf");
    assert!(
        issues[0].message.contains(
            "ClientRequest: at /params/protocolVersion 0 is less than the minimum 1 (+1 more); "
        ),
        "{}",
        issues[0].message
    );
    let client_request = schema().validator_for("ClientRequest").unwrap();
    let issues = client_request.validate(&json!({
        "jsonrpc": "2.0", "id": "1", "method": "initialize",
        "params": {"protocolVersion": 0, "minimumProtocolVersion": 1, "client": {"name": "x"}}
    }));
    let found: Vec<(&str, &str, &str)> = issues
        .iter()
        .map(|i| {
            (
                i.instance_pointer.as_str(),
                i.schema_pointer.as_str(),
                i.code.code(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "/params/protocolVersion",
                "/$defs/InitializeParams/properties/protocolVersion/minimum",
                "validate.minimum"
            ),
            (
                "/params/client",
                "/$defs/InitializeParams/properties/client/required",
                "validate.required"
            ),
        ]
    );
    let issues =
        client_request.validate(&json!({"jsonrpc": "2.0", "id": 2, "method": "thread/exploded"}));
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].code.code(), "validate.discriminator");
    assert_eq!(issues[0].instance_pointer, "/method");
}

// ---------------------------------------------------------------------------------------------
// Differential test against the SDK.

/// Messages generated for the whole protocol (root `oneOf` of the four message kinds).
const ROOT_MESSAGES: usize = 8000;
/// Definitions checked one by one (each costs one start of the SDK): the fixtures' three and
/// the richest structures of the protocol.
const DEFINITIONS: &[&str] = &[
    "ApprovalDecision",
    "AgentStreamEventEnvelope",
    "CanonicalAgentStreamEvent",
    "ApprovalRequest",
    "HumanTask",
    "GraphDefinition",
    "GraphRun",
    "InitializeParams",
    "ContextPlanRequest",
    "ContextPlan",
    "MemoryRecord",
    "MemoryRecallResult",
    "ContextCompactionReceipt",
    "TaskCheckpoint",
];
/// Instances generated per definition of [`DEFINITIONS`].
const PER_DEFINITION: usize = 220;
/// Seed of the generator: the run is the same every time.
const SEED: u64 = 0x5eed_cc02_0209;
/// Deepest nesting the generator builds before it stops adding optional parts.
const MAX_GEN_DEPTH: usize = 7;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
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
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A generator of instances from the ChainlessChain schema's keywords.
struct Generator<'d> {
    doc: &'d Value,
}

const ALPHABET: &[&str] = &[
    "a", "b", "Z", "0", "7", " ", "-", "_", ".", "é", "ß", "中", "😀", "🚀",
];

impl Generator<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        let mut current = schema;
        for _ in 0..16 {
            match current.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let ptr = r.trim_start_matches('#');
                    current = agentwire_schema::pointer::resolve(self.doc, ptr).unwrap_or(current);
                }
                None => break,
            }
        }
        current
    }

    fn value(&self, schema: &Value, rng: &mut Rng, depth: usize) -> Value {
        let schema = self.resolve(schema);
        let Some(map) = schema.as_object() else {
            return self.any(rng, depth);
        };
        if let Some(c) = map.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            return rng.pick(values).clone();
        }
        if let Some(Value::Array(members)) = map.get("allOf") {
            let mut out = Value::Object(Map::new());
            for member in members {
                merge(&mut out, self.value(member, rng, depth));
            }
            return out;
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                let branch = rng.pick(branches);
                return self.value(branch, rng, depth);
            }
        }
        let ty = match map.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(ts)) => rng.pick(ts).as_str().unwrap_or("null"),
            None if map.contains_key("properties") || map.contains_key("required") => "object",
            _ => return self.any(rng, depth),
        };
        match ty {
            "object" => self.object(map, rng, depth),
            "array" => self.array(map, rng, depth),
            "string" => self.string(map, rng),
            "integer" => json!(self.integer(map, rng)),
            "number" => {
                if rng.chance(50) {
                    json!(self.integer(map, rng))
                } else {
                    json!(self.integer(map, rng) as f64 + 0.5)
                }
            }
            "boolean" => json!(rng.chance(50)),
            _ => Value::Null,
        }
    }

    fn object(&self, map: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Value {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut out = Map::new();
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, property) in properties {
                let include =
                    required.contains(&name.as_str()) || (depth < MAX_GEN_DEPTH && rng.chance(50));
                if include {
                    out.insert(name.clone(), self.value(property, rng, depth + 1));
                }
            }
        }
        if let Some(extra @ Value::Object(_)) = map.get("additionalProperties")
            && depth < MAX_GEN_DEPTH
            && rng.chance(30)
        {
            out.insert(
                format!("x_{}", rng.below(100)),
                self.value(extra, rng, depth + 1),
            );
        }
        Value::Object(out)
    }

    fn array(&self, map: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Value {
        let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = map
            .get("maxItems")
            .and_then(Value::as_u64)
            .map_or(min + 3, |m| m as usize)
            .min(min + 3);
        let len = if depth >= MAX_GEN_DEPTH {
            min
        } else {
            min + rng.below(max - min + 1)
        };
        let items = map.get("items").cloned().unwrap_or(json!({}));
        let mut out: Vec<Value> = Vec::new();
        for _ in 0..len * 3 {
            if out.len() == len {
                break;
            }
            let item = self.value(&items, rng, depth + 1);
            if map.get("uniqueItems") == Some(&Value::Bool(true)) && out.contains(&item) {
                continue;
            }
            out.push(item);
        }
        Value::Array(out)
    }

    fn string(&self, map: &Map<String, Value>, rng: &mut Rng) -> Value {
        let min = map.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = map
            .get("maxLength")
            .and_then(Value::as_u64)
            .map_or(min + 12, |m| m as usize);
        if map.get("format").and_then(Value::as_str) == Some("date-time") {
            return json!(date_time(rng));
        }
        if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
            for _ in 0..8 {
                let s = from_pattern(pattern, rng);
                let n = s.chars().count();
                if n >= min && n <= max {
                    return json!(s);
                }
            }
        }
        let len = min + rng.below(max.min(min + 12) - min + 1);
        json!((0..len).map(|_| *rng.pick(ALPHABET)).collect::<String>())
    }

    fn integer(&self, map: &Map<String, Value>, rng: &mut Rng) -> i64 {
        let min = map.get("minimum").and_then(Value::as_i64).unwrap_or(-50);
        let max = map
            .get("maximum")
            .and_then(Value::as_i64)
            .unwrap_or(min.saturating_add(1000));
        let span = (max - min).clamp(0, 1_000_000) as usize;
        min + rng.below(span + 1) as i64
    }

    /// Any JSON value, small.
    fn any(&self, rng: &mut Rng, depth: usize) -> Value {
        let kinds = if depth >= MAX_GEN_DEPTH { 4 } else { 6 };
        match rng.below(kinds) {
            0 => Value::Null,
            1 => json!(rng.chance(50)),
            2 => json!(rng.below(1000) as i64 - 10),
            3 => json!(rng.pick(ALPHABET)),
            4 => Value::Array(
                (0..rng.below(3))
                    .map(|_| self.any(rng, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.below(3))
                    .map(|i| (format!("k{i}"), self.any(rng, depth + 1)))
                    .collect(),
            ),
        }
    }
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => a.extend(b),
        (slot, other) => *slot = other,
    }
}

fn date_time(rng: &mut Rng) -> String {
    let fraction = match rng.below(3) {
        0 => String::new(),
        1 => format!(".{:03}", rng.below(1000)),
        _ => format!(".{:06}", rng.below(1_000_000)),
    };
    let zone = if rng.chance(50) {
        "Z".to_owned()
    } else {
        format!("+{:02}:{:02}", rng.below(14), rng.pick(&[0, 30, 45]))
    };
    format!(
        "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}{zone}",
        rng.below(40) + 10,
        rng.below(12) + 1,
        rng.below(28) + 1,
        rng.below(24),
        rng.below(60),
        rng.below(60)
    )
}

/// A string matching a simple anchored pattern made of literals, classes `[...]`, escapes and
/// the quantifiers `*`, `+`, `?`, `{n}`, `{m,n}` (all the schema's patterns are of that form).
fn from_pattern(pattern: &str, rng: &mut Rng) -> String {
    let chars: Vec<char> = pattern
        .trim_start_matches('^')
        .trim_end_matches('$')
        .chars()
        .collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let mut choices: Vec<char> = Vec::new();
        match chars[i] {
            '[' => {
                i += 1;
                while i < chars.len() && chars[i] != ']' {
                    let c = if chars[i] == '\\' {
                        i += 1;
                        chars[i]
                    } else {
                        chars[i]
                    };
                    if i + 2 < chars.len() && chars[i + 1] == '-' && chars[i + 2] != ']' {
                        choices.extend(c..=chars[i + 2]);
                        i += 3;
                    } else {
                        choices.push(c);
                        i += 1;
                    }
                }
                i += 1;
            }
            '\\' => {
                choices.push(chars[i + 1]);
                i += 2;
            }
            c => {
                choices.push(c);
                i += 1;
            }
        }
        let (lo, hi) = match chars.get(i) {
            Some('*') => {
                i += 1;
                (0, 6)
            }
            Some('+') => {
                i += 1;
                (1, 6)
            }
            Some('?') => {
                i += 1;
                (0, 1)
            }
            Some('{') => {
                let end = chars[i..]
                    .iter()
                    .position(|&c| c == '}')
                    .map_or(chars.len(), |p| i + p);
                let inside: String = chars[i + 1..end].iter().collect();
                i = end + 1;
                let (lo, hi) = match inside.split_once(',') {
                    Some((a, b)) => (a.parse().unwrap_or(0), b.parse().unwrap_or(6)),
                    None => {
                        let n = inside.parse().unwrap_or(1);
                        (n, n)
                    }
                };
                (lo, hi.min(lo.max(6)))
            }
            _ => (1, 1),
        };
        let n = lo + rng.below(hi - lo + 1);
        for _ in 0..n {
            out.push(*rng.pick(&choices));
        }
    }
    out
}

/// Values that break a message in one place; see the module comment for what is left out.
fn mutate(value: &mut Value, rng: &mut Rng) {
    let paths = agentwire_testkit::value_paths(value);
    let path = rng.pick(&paths).clone();
    let Some(target) = agentwire_testkit::value_at_path_mut(value, &path) else {
        return;
    };
    match rng.below(10) {
        // Drop a key.
        0 => {
            if let Value::Object(map) = target
                && !map.is_empty()
            {
                let key = map
                    .keys()
                    .nth(rng.below(map.len()))
                    .cloned()
                    .unwrap_or_default();
                map.shift_remove(&key);
                return;
            }
            *target = Value::Null;
        }
        // Extra key on an object.
        1 => match target {
            Value::Object(map) => {
                map.insert("zz_unexpected".to_owned(), json!(1));
            }
            other => *other = json!({"zz_unexpected": 1}),
        },
        // Wrong type, never swapping booleans and numbers.
        2 => {
            *target = match target {
                Value::Bool(_) | Value::Number(_) => rng
                    .pick(&[json!("7"), Value::Null, json!([]), json!({})])
                    .clone(),
                Value::String(_) => rng
                    .pick(&[json!(7), Value::Null, json!(["x"]), json!({})])
                    .clone(),
                Value::Array(_) | Value::Object(_) => {
                    rng.pick(&[json!("x"), json!(3), Value::Null]).clone()
                }
                Value::Null => rng.pick(&[json!("x"), json!(3), json!({})]).clone(),
            };
        }
        // Bad enum / const / id values.
        3 | 4 => {
            *target = match &*target {
                Value::String(s) => {
                    let bad = [
                        String::new(),
                        format!("{s}!"),
                        format!(" {s}"),
                        "not-a-known-value".to_owned(),
                        "a b".to_owned(),
                        "-leading".to_owned(),
                        "x".repeat(200),
                        "😀".repeat(129),
                        "sha256:XYZ".to_owned(),
                        "2026-13-01T00:00:00Z".to_owned(),
                        "2026-01-01T25:00:00Z".to_owned(),
                        "yesterday".to_owned(),
                    ];
                    json!(rng.pick(&bad))
                }
                Value::Number(_) => rng
                    .pick(&[
                        json!(-1),
                        json!(0),
                        json!(1_000_000_000),
                        json!(9_007_199_254_740_993_u64),
                        json!(0.5),
                        json!(-7.5),
                    ])
                    .clone(),
                other => json!([other, other]),
            };
        }
        // Duplicate an array item, or empty the array.
        5 => match target {
            Value::Array(items) if !items.is_empty() && rng.chance(70) => {
                let dup = items[rng.below(items.len())].clone();
                items.push(dup);
            }
            Value::Array(items) => items.clear(),
            other => *other = json!([]),
        },
        // Out-of-range numbers.
        6 => {
            *target = rng
                .pick(&[
                    json!(-1),
                    json!(0),
                    json!(65),
                    json!(4097),
                    json!(1_000_000_000),
                ])
                .clone();
        }
        // Length extremes.
        7 => {
            *target = rng
                .pick(&[json!(""), json!("y".repeat(5000)), json!("é".repeat(65))])
                .clone();
        }
        // Null anywhere.
        8 => *target = Value::Null,
        // A message that is almost right: change one character of a string.
        _ => {
            if let Value::String(s) = target {
                s.push('/');
            } else {
                *target = json!("2.0");
            }
        }
    }
}

/// Generated instances: half as generated (valid or not), half mutated once or twice.
fn instances(
    generator: &Generator<'_>,
    schema: &Value,
    seeds: &[Value],
    n: usize,
    rng: &mut Rng,
) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut v = if !seeds.is_empty() && rng.chance(30) {
                rng.pick(seeds).clone()
            } else {
                generator.value(schema, rng, 0)
            };
            if i % 2 == 1 {
                mutate(&mut v, rng);
                if rng.chance(30) {
                    mutate(&mut v, rng);
                }
            }
            v
        })
        .collect()
}

struct Tally {
    compared: usize,
    valid: usize,
    mismatches: Vec<String>,
}

fn compare(
    tally: &mut Tally,
    what: &str,
    validator: &agentwire_schema::Validator,
    values: &[Value],
    definition: Option<&str>,
) {
    let sdk = cc_sdk_verdicts(values, definition);
    for (value, sdk) in values.iter().zip(sdk) {
        let issues = validator.validate(value);
        let ours = validator.is_valid(value);
        assert_eq!(
            ours,
            issues.is_empty(),
            "{what}: is_valid and validate disagree on {value}"
        );
        tally.compared += 1;
        tally.valid += usize::from(ours);
        if ours != sdk.valid {
            tally.mismatches.push(format!(
                "{what}: ours={ours} sdk={} value={value}\n  ours: {issues:?}\n  sdk: {:?}",
                sdk.valid, sdk.errors
            ));
        }
    }
}

#[test]
fn differential_against_the_sdk_validator() {
    let doc = schema();
    let compiler = ValidatorCompiler::new(&doc).unwrap();
    let generator = Generator { doc: doc.value() };
    let mut rng = Rng(SEED);
    let mut tally = Tally {
        compared: 0,
        valid: 0,
        mismatches: Vec::new(),
    };

    // Whole messages, as `validate_protocol_message` sees them; the fixtures' values ride as
    // notification params and as seeds.
    let mut seeds: Vec<Value> = Vec::new();
    for file in [
        "approval-decisions",
        "agent-stream-events",
        "canonical-agent-stream-payloads",
    ] {
        for case in fixture(file) {
            seeds.push(
                json!({"jsonrpc": "2.0", "method": "approval/resolved", "params": case["value"]}),
            );
            seeds.push(json!({"jsonrpc": "2.0", "id": "7", "method": "approval/decide", "params": case["value"]}));
        }
    }
    let root = compiler.root().unwrap();
    let messages = instances(&generator, doc.value(), &seeds, ROOT_MESSAGES, &mut rng);
    compare(&mut tally, "message", &root, &messages, None);

    // Definitions, as `validate_protocol_definition(name, value)` sees them; the fixture files
    // seed the definitions they are written for.
    let fixture_seeds: BTreeMap<&str, Vec<Value>> = [
        ("ApprovalDecision", "approval-decisions"),
        ("AgentStreamEventEnvelope", "agent-stream-events"),
        (
            "CanonicalAgentStreamEvent",
            "canonical-agent-stream-payloads",
        ),
    ]
    .into_iter()
    .map(|(def, file)| {
        (
            def,
            fixture(file)
                .into_iter()
                .map(|c| c["value"].clone())
                .collect(),
        )
    })
    .collect();
    assert_eq!(doc.definitions().count(), 127);
    for name in DEFINITIONS {
        let validator = compiler.definition(name).unwrap();
        let schema = doc.definition(name).unwrap();
        let seeds = fixture_seeds.get(name).cloned().unwrap_or_default();
        let values = instances(&generator, schema, &seeds, PER_DEFINITION, &mut rng);
        compare(&mut tally, name, &validator, &values, Some(name));
    }

    assert!(
        tally.compared >= 10_000,
        "only {} messages compared",
        tally.compared
    );
    let invalid = tally.compared - tally.valid;
    assert!(
        tally.valid >= 2_000 && invalid >= 4_000,
        "too one-sided: {} valid, {invalid} invalid",
        tally.valid
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} of {} verdicts differ from the SDK; first ones:\n{}",
        tally.mismatches.len(),
        tally.compared,
        tally
            .mismatches
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "differential: {} compared, {} valid, {invalid} invalid, all agree",
        tally.compared, tally.valid
    );
}

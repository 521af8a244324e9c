//! Seeded message generation for a schema: instances that aim to be valid (following refs,
//! unions, formats and patterns) and mutations of them that aim to break one thing. Tests and
//! benchmarks share it, so both see the same messages for the same seed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Map, Value, json};

use crate::document::{Draft, SchemaDocument};
use crate::fast::ecma;
use crate::pointer;

/// A small, fast, seeded pseudo-random generator (SplitMix64); the same seed gives the same
/// sequence on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One element of a non-empty slice.
    pub fn pick<'s, T>(&mut self, items: &'s [T]) -> &'s T {
        &items[self.below(items.len())]
    }
}

/// How big generated messages are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Required members, some optional ones, short strings and arrays.
    Small,
    /// Every optional member, long arrays and strings.
    Large,
}

/// Nesting beyond which only required members and minimal arrays are generated.
const GEN_DEPTH_SOFT: usize = 8;
/// Nesting beyond which generation gives `null` (a schema may recurse without end).
const GEN_DEPTH_HARD: usize = 24;
/// Attempts at a string that matches a pattern with lookaround.
const PATTERN_ATTEMPTS: usize = 8;

const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "session", "agent", "main", "tool", "result", "note",
    "hello", "world", "é", "日本", "😀", "x", "a-b", "run_1",
];

/// Generates instances of the schemas of one document.
#[derive(Debug)]
pub struct Generator<'d> {
    doc: &'d SchemaDocument,
    size: Size,
    /// Compiled patterns (checker and producer) by source, so each is built once.
    patterns: RefCell<HashMap<String, Option<PatternGen>>>,
    /// Values still to be generated in the current instance before generation turns minimal.
    budget: Cell<usize>,
}

/// Values generated per instance before only required members and minimal arrays follow.
const SMALL_BUDGET: usize = 40;
const LARGE_BUDGET: usize = 2_500;

/// What it takes to produce strings for one pattern: the checker and the producing expression.
#[derive(Debug)]
struct PatternGen {
    checker: ecma::Pattern,
    hir: Hir,
}

impl PatternGen {
    fn new(source: &str) -> Option<PatternGen> {
        let checker = ecma::Pattern::new(source).ok()?;
        let translated = ecma::translate(&strip_lookaround(source)).ok()?;
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(&translated)
            .ok()?;
        Some(PatternGen { checker, hir })
    }

    fn produce(&self, rng: &mut Rng) -> Option<String> {
        for _ in 0..PATTERN_ATTEMPTS {
            let mut out = String::new();
            emit(&self.hir, rng, &mut out);
            if self.checker.is_match(&out) == Some(true) {
                return Some(out);
            }
        }
        None
    }
}

impl<'d> Generator<'d> {
    /// A generator for `doc`.
    pub fn new(doc: &'d SchemaDocument, size: Size) -> Generator<'d> {
        Generator {
            doc,
            size,
            patterns: RefCell::new(HashMap::new()),
            budget: Cell::new(0),
        }
    }

    /// An instance of the schema at JSON Pointer `ptr` that aims to be valid.
    pub fn instance(&self, ptr: &str, rng: &mut Rng) -> Value {
        self.budget.set(match self.size {
            Size::Small => SMALL_BUDGET,
            Size::Large => LARGE_BUDGET,
        });
        match self.doc.resolve_pointer(ptr) {
            Some(schema) => self.generate(schema, ptr, rng, 0),
            None => Value::Null,
        }
    }

    /// Whether generation should stay minimal here (deep, or out of budget).
    fn minimal(&self, depth: usize) -> bool {
        depth > GEN_DEPTH_SOFT || self.budget.get() == 0
    }

    fn generate(&self, schema: &Value, at: &str, rng: &mut Rng, depth: usize) -> Value {
        if depth > GEN_DEPTH_HARD {
            return Value::Null;
        }
        self.budget.set(self.budget.get().saturating_sub(1));
        let map = match schema {
            Value::Object(m) => m,
            Value::Bool(false) => return Value::Null,
            _ => return self.any_value(rng, depth),
        };
        if let Some(Value::String(r)) = map.get("$ref")
            && let Ok((target, s)) = self.doc.resolve_ref(at, r)
        {
            let base = self.generate(s, &target, rng, depth + 1);
            return self.with_siblings(base, map, at, rng, depth);
        }
        if let Some(c) = map.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(values)) = map.get("enum")
            && !values.is_empty()
        {
            return rng.pick(values).clone();
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = map.get(key)
                && !branches.is_empty()
            {
                let i = rng.below(branches.len());
                let ptr = format!("{}/{i}", pointer::push(at, key));
                let base = self.generate(&branches[i], &ptr, rng, depth + 1);
                return self.with_siblings(base, map, at, rng, depth);
            }
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            let mut out = if has_type_keywords(map) {
                self.typed(map, at, rng, depth)
            } else {
                Value::Null
            };
            let conditionals: Vec<usize> = (0..parts.len())
                .filter(|i| parts[*i].get("if").is_some())
                .collect();
            // One conditional made true (its `if` and `then` merged in), the others left alone.
            let chosen = if conditionals.is_empty() || rng.chance(0.2) {
                None
            } else {
                Some(*rng.pick(&conditionals))
            };
            for (i, part) in parts.iter().enumerate() {
                let ptr = format!("{}/{i}", pointer::push(at, "allOf"));
                if part.get("if").is_some() {
                    if chosen == Some(i) {
                        out = merge(out, self.conditional(part, &ptr, rng, depth + 1));
                    }
                    continue;
                }
                out = merge(out, self.generate(part, &ptr, rng, depth + 1));
            }
            return out;
        }
        let out = self.typed(map, at, rng, depth);
        if map.contains_key("if") && rng.chance(0.5) {
            return merge(out, self.conditional(schema, at, rng, depth));
        }
        out
    }

    /// An instance meant to satisfy the `if` and `then` of `schema` at once.
    fn conditional(&self, schema: &Value, at: &str, rng: &mut Rng, depth: usize) -> Value {
        let cond = schema
            .get("if")
            .map(|s| self.generate(s, &pointer::push(at, "if"), rng, depth + 1));
        let then = schema
            .get("then")
            .map(|s| self.generate(s, &pointer::push(at, "then"), rng, depth + 1));
        match (cond, then) {
            (Some(c), Some(t)) => merge(t, c),
            (Some(c), None) => c,
            (None, Some(t)) => t,
            (None, None) => Value::Null,
        }
    }

    /// Applies the object/array/scalar keywords next to a union or a reference.
    fn with_siblings(
        &self,
        base: Value,
        map: &Map<String, Value>,
        at: &str,
        rng: &mut Rng,
        depth: usize,
    ) -> Value {
        if map.contains_key("properties") || map.contains_key("required") {
            let own = self.object(map, at, rng, depth);
            merge(own, base)
        } else {
            base
        }
    }

    fn typed(&self, map: &Map<String, Value>, at: &str, rng: &mut Rng, depth: usize) -> Value {
        let ty = match map.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) if !ts.is_empty() => {
                rng.pick(ts).as_str().unwrap_or("null").to_owned()
            }
            _ => {
                if map.contains_key("properties") || map.contains_key("required") {
                    "object".to_owned()
                } else if map.contains_key("items") || map.contains_key("prefixItems") {
                    "array".to_owned()
                } else if map.contains_key("pattern")
                    || map.contains_key("format")
                    || map.contains_key("minLength")
                {
                    "string".to_owned()
                } else if map.contains_key("minimum") || map.contains_key("maximum") {
                    "number".to_owned()
                } else {
                    return self.any_value(rng, depth);
                }
            }
        };
        match ty.as_str() {
            "object" => self.object(map, at, rng, depth),
            "array" => self.array(map, at, rng, depth),
            "string" => self.string(map, rng),
            "integer" => self.number(map, rng, true),
            "number" => self.number(map, rng, false),
            "boolean" => Value::Bool(rng.chance(0.5)),
            _ => Value::Null,
        }
    }

    fn any_value(&self, rng: &mut Rng, depth: usize) -> Value {
        if self.size == Size::Large && !self.minimal(depth) && rng.chance(0.5) {
            let n = 2 + rng.below(8);
            let mut m = Map::new();
            for k in 0..n {
                self.budget.set(self.budget.get().saturating_sub(1));
                let v = if rng.chance(0.4) {
                    Value::Array(
                        (0..1 + rng.below(6))
                            .map(|_| self.any_value(rng, depth + 2))
                            .collect(),
                    )
                } else {
                    self.any_value(rng, depth + 1)
                };
                m.insert(format!("field{k}"), v);
            }
            return Value::Object(m);
        }
        match rng.below(if self.minimal(depth) { 4 } else { 6 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.chance(0.5)),
            2 => json!(rng.below(1000)),
            3 => Value::String(self.text(rng, 1, 12)),
            4 => json!([rng.below(10), self.text(rng, 1, 6)]),
            _ => json!({ "note": self.text(rng, 1, 10), "n": rng.below(100) }),
        }
    }

    fn object(&self, map: &Map<String, Value>, at: &str, rng: &mut Rng, depth: usize) -> Value {
        let mut out = Map::new();
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let props = map.get("properties").and_then(Value::as_object);
        let base = pointer::push(at, "properties");
        let optional_p = match (self.size, self.minimal(depth)) {
            (_, true) => 0.0,
            (Size::Small, false) => 0.35,
            (Size::Large, false) => 0.9,
        };
        if let Some(props) = props {
            for (name, sub) in props {
                let wanted = required.contains(&name.as_str()) || rng.chance(optional_p);
                if wanted {
                    let v = self.generate(sub, &pointer::push(&base, name), rng, depth + 1);
                    out.insert(name.clone(), v);
                }
            }
        }
        for name in &required {
            if !out.contains_key(*name) {
                out.insert((*name).to_owned(), self.any_value(rng, depth + 1));
            }
        }
        if let Some(Value::Object(pp)) = map.get("patternProperties")
            && !self.minimal(depth)
            && rng.chance(0.5)
            && let Some((source, sub)) = pp.iter().next()
        {
            let key = self
                .pattern_string(source, rng)
                .unwrap_or_else(|| "key".to_owned());
            let ptr = pointer::push(&pointer::push(at, "patternProperties"), source);
            let v = self.generate(sub, &ptr, rng, depth + 1);
            out.entry(key).or_insert(v);
        }
        if let Some(extra @ Value::Object(_)) = map.get("additionalProperties") {
            let open = !map.contains_key("propertyNames") && !map.contains_key("patternProperties");
            if open && !self.minimal(depth) {
                let max = map
                    .get("maxProperties")
                    .and_then(Value::as_u64)
                    .map_or(usize::MAX, |m| m as usize);
                let n = match self.size {
                    Size::Small => rng.below(3),
                    Size::Large => 2 + rng.below(10),
                };
                let ptr = pointer::push(at, "additionalProperties");
                for k in 0..n {
                    if out.len() >= max {
                        break;
                    }
                    let v = self.generate(extra, &ptr, rng, depth + 1);
                    out.entry(format!("k{k}")).or_insert(v);
                }
            }
        }
        if let Some(min) = map.get("minProperties").and_then(Value::as_u64) {
            let mut k = 0;
            while (out.len() as u64) < min {
                out.insert(format!("extra{k}"), json!(k));
                k += 1;
            }
        }
        Value::Object(out)
    }

    fn array(&self, map: &Map<String, Value>, at: &str, rng: &mut Rng, depth: usize) -> Value {
        let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = map
            .get("maxItems")
            .and_then(Value::as_u64)
            .map(|m| m as usize);
        let spread = match (self.size, self.minimal(depth)) {
            (_, true) => 0,
            (Size::Small, false) => 3,
            (Size::Large, false) => 12,
        };
        let mut n = min + rng.below(spread + 1);
        if let Some(m) = max {
            n = n.min(m);
        }
        let draft07 = self.doc.draft() == Draft::Draft07;
        let (prefix, prefix_key, rest_key) = if draft07 {
            match map.get("items") {
                Some(Value::Array(p)) => (p.as_slice(), "items", "additionalItems"),
                _ => (&[][..], "", "items"),
            }
        } else {
            match map.get("prefixItems") {
                Some(Value::Array(p)) => (p.as_slice(), "prefixItems", "items"),
                _ => (&[][..], "", "items"),
            }
        };
        if (matches!(map.get(rest_key), Some(Value::Bool(false)))
            || (draft07 && !prefix.is_empty() && map.get(rest_key).is_none() && n > prefix.len()))
            && matches!(map.get(rest_key), Some(Value::Bool(false)))
        {
            n = n.min(prefix.len());
        }
        let unique = map.get("uniqueItems") == Some(&Value::Bool(true));
        let mut out: Vec<Value> = Vec::with_capacity(n);
        let mut attempts = 0;
        while out.len() < n && attempts < n * 4 + 4 {
            attempts += 1;
            let k = out.len();
            let v = if k < prefix.len() {
                self.generate(
                    &prefix[k],
                    &format!("{}/{k}", pointer::push(at, prefix_key)),
                    rng,
                    depth + 1,
                )
            } else {
                match map.get(rest_key) {
                    Some(s) => self.generate(s, &pointer::push(at, rest_key), rng, depth + 1),
                    None => self.any_value(rng, depth + 1),
                }
            };
            if unique && out.contains(&v) {
                continue;
            }
            out.push(v);
        }
        if let Some(c) = map.get("contains")
            && !out.iter().any(|_| false)
            && max.is_none_or(|m| out.len() < m)
        {
            let v = self.generate(c, &pointer::push(at, "contains"), rng, depth + 1);
            if !(unique && out.contains(&v)) {
                out.push(v);
            }
        }
        Value::Array(out)
    }

    fn string(&self, map: &Map<String, Value>, rng: &mut Rng) -> Value {
        let min = map.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = map
            .get("maxLength")
            .and_then(Value::as_u64)
            .map(|m| m as usize);
        if let Some(Value::String(f)) = map.get("format")
            && let Some(s) = format_string(f, rng)
        {
            return Value::String(s);
        }
        if let Some(Value::String(p)) = map.get("pattern") {
            for _ in 0..PATTERN_ATTEMPTS {
                if let Some(s) = self.pattern_string(p, rng) {
                    let n = s.chars().count();
                    if n >= min && max.is_none_or(|m| n <= m) {
                        return Value::String(s);
                    }
                }
            }
        }
        let hi = match self.size {
            Size::Small => min.max(1) + 16,
            Size::Large => min.max(1) + 3_000,
        };
        let hi = max.map_or(hi, |m| hi.min(m));
        Value::String(self.text(rng, min, hi.max(min)))
    }

    fn pattern_string(&self, source: &str, rng: &mut Rng) -> Option<String> {
        let mut cache = self.patterns.borrow_mut();
        let entry = cache
            .entry(source.to_owned())
            .or_insert_with(|| PatternGen::new(source));
        entry.as_ref()?.produce(rng)
    }

    /// Words joined by spaces, between `min` and `max` code points.
    fn text(&self, rng: &mut Rng, min: usize, max: usize) -> String {
        let target = min + rng.below(max.saturating_sub(min) + 1);
        let mut s = String::new();
        while s.chars().count() < target {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(WORDS[rng.below(WORDS.len())]);
        }
        let mut out: String = s.chars().take(target).collect();
        while out.chars().count() < min {
            out.push('x');
        }
        out
    }

    fn number(&self, map: &Map<String, Value>, rng: &mut Rng, integer: bool) -> Value {
        let f = |k: &str| map.get(k).and_then(Value::as_f64);
        let lo = f("minimum")
            .or(f("exclusiveMinimum").map(|x| x + 1.0))
            .unwrap_or(0.0);
        let hi = f("maximum")
            .or(f("exclusiveMaximum").map(|x| x - 1.0))
            .unwrap_or(lo + 10_000.0)
            .max(lo);
        let span = (hi - lo).min(1e9);
        let x = lo + (rng.below(span as usize + 1)) as f64;
        if integer || rng.chance(0.6) {
            json!(x.min(hi) as i64)
        } else {
            let y = (x + 0.5).min(hi);
            json!(y)
        }
    }
}

/// Merges two generated values: objects member-wise (later wins); an object is kept over a
/// value of another kind; otherwise the later value.
fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                x.insert(k, v);
            }
            Value::Object(x)
        }
        (Value::Object(x), _) => Value::Object(x),
        (_, b) => b,
    }
}

/// Whether a schema constrains the instance's own type or members (beyond applicators).
fn has_type_keywords(map: &Map<String, Value>) -> bool {
    [
        "type",
        "properties",
        "required",
        "items",
        "prefixItems",
        "enum",
        "const",
    ]
    .iter()
    .any(|k| map.contains_key(*k))
}

fn hex(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b"0123456789abcdef"[rng.below(16)]))
        .collect()
}

fn format_string(format: &str, rng: &mut Rng) -> Option<String> {
    Some(match format {
        "uuid" => format!(
            "{}-{}-4{}-a{}-{}",
            hex(rng, 8),
            hex(rng, 4),
            hex(rng, 3),
            hex(rng, 3),
            hex(rng, 12)
        ),
        "date-time" => format!(
            "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
            rng.below(40),
            1 + rng.below(12),
            1 + rng.below(28),
            rng.below(24),
            rng.below(60),
            rng.below(60),
            *rng.pick(&["Z", ".123Z", "+02:00", "-05:30"])
        ),
        "date" => format!(
            "20{:02}-{:02}-{:02}",
            rng.below(40),
            1 + rng.below(12),
            1 + rng.below(28)
        ),
        "email" => format!("{}@example.com", hex(rng, 6)),
        "uri" => format!("https://example.com/{}", hex(rng, 6)),
        _ => return None,
    })
}

/// A string matching a JavaScript pattern, when one can be built.
pub fn string_for_pattern(source: &str, rng: &mut Rng) -> Option<String> {
    PatternGen::new(source)?.produce(rng)
}

/// Removes `(?=…)`, `(?!…)`, `(?<=…)` and `(?<!…)` groups, which constrain but do not produce.
fn strip_lookaround(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
        let look = rest.starts_with("(?=")
            || rest.starts_with("(?!")
            || rest.starts_with("(?<=")
            || rest.starts_with("(?<!");
        if look {
            let mut depth = 0;
            while i < chars.len() {
                match chars[i] {
                    '\\' => i += 1,
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            continue;
        }
        if chars[i] == '\\' && i + 1 < chars.len() {
            out.push(chars[i]);
            out.push(chars[i + 1]);
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Upper bound on the repetitions generated for an unbounded `*` or `+`.
const REPEAT_SPREAD: u32 = 6;

fn emit(hir: &Hir, rng: &mut Rng, out: &mut String) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges();
            if ranges.is_empty() {
                return;
            }
            // Prefer printable ASCII when the class has it, so messages stay readable.
            let ascii: Vec<_> = ranges
                .iter()
                .filter(|r| r.start() <= '~' && r.end() >= ' ')
                .collect();
            let r = if !ascii.is_empty() && rng.chance(0.9) {
                **rng.pick(&ascii)
            } else {
                *rng.pick(ranges)
            };
            let (lo, hi) = if r.start() <= '~' && r.end() >= ' ' {
                ((r.start() as u32).max(0x20), (r.end() as u32).min(0x7E))
            } else {
                (r.start() as u32, r.end() as u32)
            };
            let span = (hi - lo).min(1 << 20);
            let mut cp = lo + rng.below(span as usize + 1) as u32;
            while char::from_u32(cp).is_none() {
                cp += 1;
            }
            out.push(char::from_u32(cp).unwrap_or('x'));
        }
        HirKind::Class(Class::Bytes(c)) => {
            if let Some(r) = c.ranges().first() {
                out.push(char::from(r.start()));
            }
        }
        HirKind::Repetition(rep) => {
            let max = rep
                .max
                .unwrap_or(rep.min + REPEAT_SPREAD)
                .min(rep.min + REPEAT_SPREAD);
            let n = rep.min + rng.below((max - rep.min) as usize + 1) as u32;
            for _ in 0..n {
                emit(&rep.sub, rng, out);
            }
        }
        HirKind::Capture(c) => emit(&c.sub, rng, out),
        HirKind::Concat(parts) => parts.iter().for_each(|p| emit(p, rng, out)),
        HirKind::Alternation(alts) => emit(rng.pick(alts), rng, out),
    }
}

/// Breaks a value in one place: a member removed, added or retyped, a string or number pushed
/// out of range, an array grown or emptied. Returns the mutated copy.
pub fn mutate(value: &Value, rng: &mut Rng) -> Value {
    let mut v = value.clone();
    // Pick a node by walking down a random path of indexes.
    let mut path = Vec::new();
    let mut cur = &v;
    for _ in 0..rng.below(6) {
        let next = match cur {
            Value::Object(m) if !m.is_empty() => {
                let k = rng.below(m.len());
                m.values().nth(k).map(|x| (k, x))
            }
            Value::Array(a) if !a.is_empty() => {
                let k = rng.below(a.len());
                Some((k, &a[k]))
            }
            _ => None,
        };
        let Some((k, x)) = next else { break };
        path.push(k);
        cur = x;
    }
    let replacement = mutate_here(cur, rng);
    let mut slot = &mut v;
    for k in path {
        slot = match slot {
            Value::Object(m) => match m.values_mut().nth(k) {
                Some(x) => x,
                None => return v.clone(),
            },
            Value::Array(a) => &mut a[k],
            _ => return v.clone(),
        };
    }
    *slot = replacement;
    v
}

fn mutate_here(v: &Value, rng: &mut Rng) -> Value {
    let scalar = [
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("2026-13-01T00:00:00Z"),
        json!("not-a-uuid"),
        json!([]),
        json!({}),
    ];
    match v {
        Value::Object(m) if !m.is_empty() && rng.chance(0.6) => {
            let mut m = m.clone();
            if rng.chance(0.5) {
                let k = rng.below(m.len());
                let key = m.keys().nth(k).cloned().unwrap_or_default();
                m.shift_remove(&key);
            } else {
                m.insert("unexpected".to_owned(), rng.pick(&scalar).clone());
            }
            Value::Object(m)
        }
        Value::String(s) if rng.chance(0.5) => match rng.below(4) {
            0 => json!(""),
            1 => json!(format!("{s}{}", "y".repeat(300))),
            2 => json!(format!(" {s}")),
            _ => json!(s.to_uppercase()),
        },
        Value::Number(n) if rng.chance(0.5) => {
            let f = n.as_f64().unwrap_or(0.0);
            match rng.below(3) {
                0 => json!(-f - 1.0),
                1 => json!(f + 0.5),
                _ => json!(1e12),
            }
        }
        Value::Array(a) if rng.chance(0.5) => {
            if a.is_empty() || rng.chance(0.5) {
                let mut a = a.clone();
                a.push(a.first().cloned().unwrap_or(Value::Null));
                json!(a)
            } else {
                json!([])
            }
        }
        _ => rng.pick(&scalar).clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_messages() {
        let doc = SchemaDocument::from_value(json!({
            "type": "object",
            "required": ["id", "kind"],
            "properties": {
                "id": {"type": "string", "pattern": "^[a-f0-9]{8}$"},
                "kind": {"enum": ["a", "b"]},
                "when": {"type": "string", "format": "date-time"},
                "n": {"type": "integer", "minimum": 3, "maximum": 9}
            },
            "additionalProperties": false
        }))
        .unwrap();
        let g = Generator::new(&doc, Size::Small);
        let a: Vec<Value> = (0..20).map(|i| g.instance("", &mut Rng::new(i))).collect();
        let b: Vec<Value> = (0..20).map(|i| g.instance("", &mut Rng::new(i))).collect();
        assert_eq!(a, b);
        let fast = crate::fast::FastSchema::compile(&doc).unwrap();
        for v in &a {
            assert!(fast.is_valid(fast.root(), v), "{v}");
        }
    }

    #[test]
    fn pattern_strings_match() {
        let mut rng = Rng::new(7);
        for p in [
            r"^[a-z][a-z0-9-]{0,31}$",
            r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
            r"^UTC[+-]\d{1,2}(?::[0-5]\d)?$",
        ] {
            let s = string_for_pattern(p, &mut rng).unwrap();
            assert!(
                ecma::Pattern::new(p).unwrap().is_match(&s).unwrap(),
                "{p} {s}"
            );
        }
    }
}

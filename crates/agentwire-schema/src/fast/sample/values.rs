//! The value of each instance type: objects with their required, some optional, pattern and
//! additional members, arrays within their item bounds, strings by format, pattern or length,
//! numbers within their bounds, and the words free text is made of.

use serde_json::{Map, Value, json};

use super::pattern::{PATTERN_ATTEMPTS, PatternGen};
use super::{Generator, Rng, Size};
use crate::document::Draft;
use crate::pointer;
const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "session", "agent", "main", "tool", "result", "note",
    "hello", "world", "é", "日本", "😀", "x", "a-b", "run_1",
];

impl Generator<'_> {
    pub(super) fn object(
        &self,
        map: &Map<String, Value>,
        at: &str,
        rng: &mut Rng,
        depth: usize,
    ) -> Value {
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

    pub(super) fn array(
        &self,
        map: &Map<String, Value>,
        at: &str,
        rng: &mut Rng,
        depth: usize,
    ) -> Value {
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

    pub(super) fn string(&self, map: &Map<String, Value>, rng: &mut Rng) -> Value {
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
    pub(super) fn text(&self, rng: &mut Rng, min: usize, max: usize) -> String {
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

    pub(super) fn number(&self, map: &Map<String, Value>, rng: &mut Rng, integer: bool) -> Value {
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

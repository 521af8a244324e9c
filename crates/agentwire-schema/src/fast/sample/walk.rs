//! The walk over a schema: a reference, `const` and `enum`, one branch of a union, the parts
//! of an `allOf` with at most one conditional made true, sibling keywords next to a union or a
//! reference, and then the instance type, named or inferred from the keywords present.

use serde_json::{Map, Value, json};

use super::{GEN_DEPTH_HARD, Generator, Rng, Size};
use crate::pointer;
impl Generator<'_> {
    pub(super) fn generate(&self, schema: &Value, at: &str, rng: &mut Rng, depth: usize) -> Value {
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

    pub(super) fn any_value(&self, rng: &mut Rng, depth: usize) -> Value {
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

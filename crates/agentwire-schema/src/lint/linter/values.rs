//! Value rules: `type` names, contradictory numeric, length and count bounds, patterns that are
//! not ECMA-262 regular expressions, and `enum` values that repeat (compared as JSON through an
//! equality key).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::{Linter, count};
use crate::json::MAX_JSON_DEPTH;
use crate::lint::LintCode;
use crate::pointer;

pub(super) const JSON_TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

impl Linter<'_> {
    pub(super) fn check_type(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(ty) = map.get("type") else { return };
        let here = pointer::push(at, "type");
        match ty {
            Value::String(name) => {
                if !JSON_TYPES.contains(&name.as_str()) {
                    self.push(LintCode::InvalidType, here, invalid_type_message(name));
                }
            }
            Value::Array(names) => {
                let mut seen = HashSet::new();
                for (i, name) in names.iter().enumerate() {
                    let item = format!("{here}/{i}");
                    match name {
                        Value::String(name) if !JSON_TYPES.contains(&name.as_str()) => {
                            self.push(LintCode::InvalidType, item, invalid_type_message(name));
                        }
                        Value::String(name) if !seen.insert(name.as_str()) => self.push(
                            LintCode::MalformedKeyword,
                            item,
                            format!("type lists {name:?} twice"),
                        ),
                        Value::String(_) => {}
                        _ => self.push(
                            LintCode::MalformedKeyword,
                            item,
                            "type names must be strings".to_owned(),
                        ),
                    }
                }
            }
            _ => self.push(
                LintCode::MalformedKeyword,
                here,
                "type must be a type name or an array of type names".to_owned(),
            ),
        }
    }

    pub(super) fn check_bounds(&mut self, at: &str, map: &Map<String, Value>) {
        let num = |key: &str| map.get(key).and_then(Value::as_f64);
        let lower = [
            ("minimum", num("minimum"), false),
            ("exclusiveMinimum", num("exclusiveMinimum"), true),
        ];
        let upper = [
            ("maximum", num("maximum"), false),
            ("exclusiveMaximum", num("exclusiveMaximum"), true),
        ];
        for (lo_key, lo, lo_strict) in lower {
            for (hi_key, hi, hi_strict) in upper {
                let (Some(lo), Some(hi)) = (lo, hi) else {
                    continue;
                };
                let empty = if lo_strict || hi_strict {
                    lo >= hi
                } else {
                    lo > hi
                };
                if empty {
                    self.push(
                        LintCode::ContradictoryBounds,
                        pointer::push(at, lo_key),
                        format!("{lo_key} {lo} and {hi_key} {hi} leave no number that passes"),
                    );
                }
            }
        }
        for (lo_key, hi_key, what) in [
            ("minLength", "maxLength", "string"),
            ("minItems", "maxItems", "array"),
            ("minProperties", "maxProperties", "object"),
            ("minContains", "maxContains", "array"),
        ] {
            let (Some(lo), Some(hi)) = (
                map.get(lo_key).and_then(count),
                map.get(hi_key).and_then(count),
            ) else {
                continue;
            };
            if lo > hi {
                self.push(
                    LintCode::ContradictoryBounds,
                    pointer::push(at, lo_key),
                    format!("{lo_key} {lo} is above {hi_key} {hi}: no {what} passes"),
                );
            }
        }
        if let (Some(Value::Array(required)), Some(max)) = (
            map.get("required"),
            map.get("maxProperties").and_then(count),
        ) {
            let distinct: HashSet<&str> = required.iter().filter_map(Value::as_str).collect();
            if distinct.len() as u64 > max {
                self.push(
                    LintCode::ContradictoryBounds,
                    pointer::push(at, "maxProperties"),
                    format!(
                        "maxProperties {max} is below the {} required properties: no object passes",
                        distinct.len()
                    ),
                );
            }
        }
    }

    pub(super) fn check_patterns(&mut self, at: &str, map: &Map<String, Value>) {
        if let Some(Value::String(pattern)) = map.get("pattern")
            && !is_ecma_regex(pattern)
        {
            self.push(
                LintCode::InvalidPattern,
                pointer::push(at, "pattern"),
                format!("{pattern:?} is not an ECMA-262 regular expression"),
            );
        }
        if let Some(Value::Object(entries)) = map.get("patternProperties") {
            let base = pointer::push(at, "patternProperties");
            for pattern in entries.keys() {
                if !is_ecma_regex(pattern) {
                    self.push(
                        LintCode::InvalidPattern,
                        pointer::push(&base, pattern),
                        format!("{pattern:?} is not an ECMA-262 regular expression"),
                    );
                }
            }
        }
    }

    pub(super) fn check_enum(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(Value::Array(values)) = map.get("enum") else {
            return;
        };
        let mut first: HashMap<String, usize> = HashMap::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let Some(key) = equality_key(value) else {
                continue;
            };
            if let Some(earlier) = first.get(&key) {
                self.push(
                    LintCode::DuplicateEnumValue,
                    format!("{}/{i}", pointer::push(at, "enum")),
                    format!("enum value {i} equals value {earlier}"),
                );
            } else {
                first.insert(key, i);
            }
        }
    }
}

pub(super) fn invalid_type_message(name: &str) -> String {
    format!(
        "{name:?} is not a JSON Schema type (one of {})",
        JSON_TYPES.join(", ")
    )
}

/// Flags patterns are compiled with: Unicode mode, as AJV and the validator compile them.
pub(super) const PATTERN_FLAGS: &str = "u";

/// Whether `pattern` compiles as the ECMA-262 `RegExp(pattern, "u")` validators run.
pub(super) fn is_ecma_regex(pattern: &str) -> bool {
    regress::Regex::with_flags(pattern, PATTERN_FLAGS).is_ok()
}

/// A text that is equal for two values exactly when they are equal as JSON: object key order
/// does not matter and numbers compare by value (`1` equals `1.0`). `None` for values nested
/// deeper than [`MAX_JSON_DEPTH`], which are then never reported as duplicates.
pub(super) fn equality_key(value: &Value) -> Option<String> {
    let mut out = String::new();
    write_key(&mut out, value, 0).then_some(out)
}

pub(super) fn write_key(out: &mut String, value: &Value, depth: usize) -> bool {
    if depth > MAX_JSON_DEPTH {
        return false;
    }
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                    let _ = write!(out, "{}", f as i64);
                } else {
                    let _ = write!(out, "{f:e}");
                }
            }
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                if !write_key(out, item, depth + 1) {
                    return false;
                }
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for key in keys {
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if !write_key(out, &map[key], depth + 1) {
                    return false;
                }
                out.push(',');
            }
            out.push('}');
        }
    }
    true
}

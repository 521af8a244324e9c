//! `type`, `enum` and `const`: the set of JSON types a node admits, compared as bits, and its
//! allowed values, compared value by value through a [`ValueSet`] so that large enums compare in
//! linear time.

use serde_json::{Map, Value};

use super::Comparer;
use crate::compat::Rule;
use crate::compat::direction::{Receivers, is_open};
use crate::pointer;

impl Comparer<'_> {
    pub(super) fn types(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        at: &str,
        dir: Receivers,
    ) {
        let (old_t, new_t) = (type_set(o.get("type")), type_set(n.get("type")));
        if old_t == new_t {
            return;
        }
        let rule = if new_t & !old_t == 0 {
            Rule::TypeNarrowed
        } else if old_t & !new_t == 0 {
            Rule::TypeWidened
        } else {
            Rule::TypeChanged
        };
        self.push(
            rule,
            pointer::push(at, "type"),
            o.get("type").cloned(),
            n.get("type").cloned(),
            dir,
            false,
        );
    }

    pub(super) fn values(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        at: &str,
        dir: Receivers,
    ) {
        let old_v = allowed_values(o);
        let new_v = allowed_values(n);
        let key = if n.contains_key("const") || (!n.contains_key("enum") && o.contains_key("const"))
        {
            "const"
        } else {
            "enum"
        };
        let here = pointer::push(at, key);
        match (old_v, new_v) {
            (None, None) => {}
            (None, Some(_)) => {
                let rule = if key == "const" {
                    Rule::ConstAdded
                } else {
                    Rule::EnumAdded
                };
                self.push(rule, here, None, n.get(key).cloned(), dir, false);
            }
            (Some(_), None) => {
                let rule = if o.contains_key("const") {
                    Rule::ConstRemoved
                } else {
                    Rule::EnumRemoved
                };
                let old_key = if o.contains_key("const") {
                    "const"
                } else {
                    "enum"
                };
                self.push(
                    rule,
                    pointer::push(at, old_key),
                    o.get(old_key).cloned(),
                    None,
                    dir,
                    false,
                );
            }
            (Some(ov), Some(nv)) => {
                if o.contains_key("const")
                    && n.contains_key("const")
                    && !o.contains_key("enum")
                    && !n.contains_key("enum")
                {
                    if ov != nv {
                        self.push(
                            Rule::ConstChanged,
                            here,
                            o.get("const").cloned(),
                            n.get("const").cloned(),
                            dir,
                            false,
                        );
                    }
                    return;
                }
                let open = is_open(o);
                let (old_set, new_set) = (ValueSet::new(&ov), ValueSet::new(&nv));
                for v in &ov {
                    if !new_set.contains(v) {
                        self.push(
                            Rule::EnumValueRemoved,
                            here.clone(),
                            Some((*v).clone()),
                            None,
                            dir,
                            false,
                        );
                    }
                }
                for v in &nv {
                    if !old_set.contains(v) {
                        self.push(
                            Rule::EnumValueAdded,
                            here.clone(),
                            None,
                            Some((*v).clone()),
                            dir,
                            open,
                        );
                    }
                }
            }
        }
    }
}

pub(super) const T_NULL: u8 = 1;
pub(super) const T_BOOL: u8 = 2;
pub(super) const T_OBJECT: u8 = 4;
pub(super) const T_ARRAY: u8 = 8;
pub(super) const T_STRING: u8 = 16;
pub(super) const T_INTEGER: u8 = 32;
pub(super) const T_FRACTION: u8 = 64;
pub(super) const T_ALL: u8 = 127;

pub(super) fn type_bits(name: &str) -> u8 {
    match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "object" => T_OBJECT,
        "array" => T_ARRAY,
        "string" => T_STRING,
        "integer" => T_INTEGER,
        "number" => T_INTEGER | T_FRACTION,
        _ => 0,
    }
}

pub(super) fn type_set(t: Option<&Value>) -> u8 {
    match t {
        None => T_ALL,
        Some(Value::String(s)) => type_bits(s),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .fold(0, |acc, s| acc | type_bits(s)),
        Some(_) => 0,
    }
}

pub(super) fn allowed_values(m: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(c) = m.get("const") {
        return Some(vec![c]);
    }
    match m.get("enum") {
        Some(Value::Array(items)) => Some(items.iter().collect()),
        _ => None,
    }
}

/// `enum` values looked up in constant time (arrays and objects, rare in an `enum`, by
/// comparison), so that comparing two enums of 300,000 values is linear.
pub(super) struct ValueSet<'a> {
    scalars: std::collections::HashSet<Scalar<'a>>,
    others: Vec<&'a Value>,
}

/// A value that is neither an array nor an object, keyed as `serde_json` compares it (`1` and
/// `1.0` differ).
#[derive(PartialEq, Eq, Hash)]
pub(super) enum Scalar<'a> {
    Null,
    Bool(bool),
    Number(String),
    String(&'a str),
}

impl<'a> ValueSet<'a> {
    fn new(values: &[&'a Value]) -> Self {
        let mut set = ValueSet {
            scalars: std::collections::HashSet::with_capacity(values.len()),
            others: Vec::new(),
        };
        for v in values {
            match scalar(v) {
                Some(key) => {
                    set.scalars.insert(key);
                }
                None => set.others.push(v),
            }
        }
        set
    }

    fn contains(&self, v: &Value) -> bool {
        match scalar(v) {
            Some(key) => self.scalars.contains(&key),
            None => self.others.contains(&v),
        }
    }
}

pub(super) fn scalar(v: &Value) -> Option<Scalar<'_>> {
    Some(match v {
        Value::Null => Scalar::Null,
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) => Scalar::Number(n.to_string()),
        Value::String(s) => Scalar::String(s),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

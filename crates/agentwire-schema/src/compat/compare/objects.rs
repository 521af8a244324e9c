//! Objects: `properties` (each compared as a node, removed or added), `required` (through a
//! [`StringSet`], linear in the list lengths), `additionalProperties` and
//! `unevaluatedProperties`, and `patternProperties`.

use serde_json::{Map, Value, json};

use super::Comparer;
use crate::compat::Rule;
use crate::compat::direction::{Receivers, is_open};
use crate::pointer;

impl Comparer<'_> {
    pub(super) fn objects(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let empty = Map::new();
        let old_props = o
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_props = n
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let old_req = string_set(o.get("required"));
        let new_req = string_set(n.get("required"));
        // A property named in one side only is, on the other, an additional property: where
        // that side constrains them with a schema, the property's schema changes from one to
        // the other, and is compared as such.
        let old_additional = additional_schema(o);
        let new_additional = additional_schema(n);
        // An old receiver keeps a member it does not name (checked by the schema, if any, which
        // the comparison below holds the new property's schema to).
        let open = is_open(o) || !is_closed_object(o);
        for (name, old_schema) in old_props {
            let old_p = pointer::push(&pointer::push(old_at, "properties"), name);
            match new_props.get(name) {
                None => {
                    self.push(
                        Rule::PropertyRemoved,
                        old_p.clone(),
                        Some(old_schema.clone()),
                        None,
                        dir,
                        false,
                    );
                    if let Some((key, additional)) = new_additional {
                        let new_p = pointer::push(new_at, key);
                        self.node(old_schema, additional, &old_p, &new_p, dir, depth + 1);
                    }
                }
                Some(new_schema) => {
                    let new_p = pointer::push(&pointer::push(new_at, "properties"), name);
                    self.node(old_schema, new_schema, &old_p, &new_p, dir, depth + 1);
                }
            }
        }
        for (name, new_schema) in new_props {
            if old_props.contains_key(name) {
                continue;
            }
            let new_p = pointer::push(&pointer::push(new_at, "properties"), name);
            let rule = if new_req.contains(name) {
                Rule::RequiredPropertyAdded
            } else {
                Rule::PropertyAdded
            };
            self.push(
                rule,
                new_p.clone(),
                None,
                Some(new_schema.clone()),
                dir,
                open,
            );
            if let Some((key, additional)) = old_additional {
                let old_p = pointer::push(old_at, key);
                self.node(additional, new_schema, &old_p, &new_p, dir, depth + 1);
            }
        }
        for &name in &new_req.order {
            if !old_req.contains(name)
                && (old_props.contains_key(name) || !new_props.contains_key(name))
            {
                self.push(
                    Rule::RequiredAdded,
                    pointer::push(new_at, "required"),
                    None,
                    Some(json!(name)),
                    dir,
                    false,
                );
            }
        }
        for &name in &old_req.order {
            if !new_req.contains(name)
                && (new_props.contains_key(name) || !old_props.contains_key(name))
            {
                self.push(
                    Rule::RequiredRemoved,
                    pointer::push(new_at, "required"),
                    Some(json!(name)),
                    None,
                    dir,
                    false,
                );
            }
        }
        for key in ["additionalProperties", "unevaluatedProperties"] {
            let (ov, nv) = (o.get(key), n.get(key));
            if ov == nv {
                continue;
            }
            let here = pointer::push(new_at, key);
            let was_false = ov == Some(&Value::Bool(false));
            let is_false = nv == Some(&Value::Bool(false));
            if is_false {
                self.push(
                    Rule::AdditionalPropertiesClosed,
                    here,
                    ov.cloned(),
                    nv.cloned(),
                    dir,
                    false,
                );
            } else if was_false {
                self.push(
                    Rule::AdditionalPropertiesOpened,
                    here,
                    ov.cloned(),
                    nv.cloned(),
                    dir,
                    is_open(o),
                );
            } else {
                let t = Value::Bool(true);
                self.node(
                    ov.unwrap_or(&t),
                    nv.unwrap_or(&t),
                    &pointer::push(old_at, key),
                    &here,
                    dir,
                    depth + 1,
                );
            }
        }
        let old_pp = o
            .get("patternProperties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_pp = n
            .get("patternProperties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (pattern, old_schema) in old_pp {
            let old_p = pointer::push(&pointer::push(old_at, "patternProperties"), pattern);
            match new_pp.get(pattern) {
                None => self.push(
                    Rule::PatternPropertiesChanged,
                    old_p,
                    Some(old_schema.clone()),
                    None,
                    dir,
                    false,
                ),
                Some(new_schema) => {
                    let new_p = pointer::push(&pointer::push(new_at, "patternProperties"), pattern);
                    self.node(old_schema, new_schema, &old_p, &new_p, dir, depth + 1);
                }
            }
        }
        for (pattern, new_schema) in new_pp {
            if !old_pp.contains_key(pattern) {
                let new_p = pointer::push(&pointer::push(new_at, "patternProperties"), pattern);
                self.push(
                    Rule::PatternPropertiesChanged,
                    new_p,
                    None,
                    Some(new_schema.clone()),
                    dir,
                    false,
                );
            }
        }
    }
}

/// The schema an object gives the properties it does not name (`additionalProperties`, else
/// `unevaluatedProperties`) when it is a schema object, not `true` or `false`; with its key.
fn additional_schema(m: &Map<String, Value>) -> Option<(&'static str, &Value)> {
    ["additionalProperties", "unevaluatedProperties"]
        .into_iter()
        .find_map(|key| m.get(key).filter(|v| v.is_object()).map(|v| (key, v)))
}

pub(super) fn is_closed_object(m: &Map<String, Value>) -> bool {
    m.get("additionalProperties") == Some(&Value::Bool(false))
        || m.get("unevaluatedProperties") == Some(&Value::Bool(false))
}

/// The strings of a `required` list, in order, with a set of them for lookups: two lists of
/// 200,000 names are compared in linear time, not by a search of one per name of the other.
pub(super) struct StringSet<'a> {
    order: Vec<&'a str>,
    set: std::collections::HashSet<&'a str>,
}

impl<'a> StringSet<'a> {
    fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }
}

pub(super) fn string_set(v: Option<&Value>) -> StringSet<'_> {
    let order: Vec<&str> = match v {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let set = order.iter().copied().collect();
    StringSet { order, set }
}

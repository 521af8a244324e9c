//! Which `oneOf` / `anyOf` branch an instance means: an explicit OpenAPI-style `discriminator`
//! (`{propertyName, mapping}` next to the applicator), or a property that every branch pins to
//! its own `const` / `enum` values (detected). With it a failed union reports the issues of the
//! branch the tag selects, or one issue at the tag, instead of "matches none of N".

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::document::SchemaDocument;
use crate::pointer;
use crate::walk;

/// Longest chain of `$ref` / `allOf` followed when looking for a branch's tag value; real
/// schemas need two or three, and a cycle stops here.
const MAX_PIN_DEPTH: usize = 16;

/// How one union picks its branch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dispatch {
    /// The tag property.
    pub(crate) property: String,
    /// Declared with a `discriminator` keyword (rather than detected).
    pub(crate) explicit: bool,
    /// Every tag value with the branch it selects, in branch order.
    pub(crate) tags: Vec<(Value, usize)>,
    /// An object without the tag matches no branch, so a missing tag is the one issue to report.
    pub(crate) tag_required: bool,
}

impl Dispatch {
    pub(crate) fn branch_for(&self, tag: &Value) -> Option<usize> {
        self.tags
            .iter()
            .find(|(value, _)| value == tag)
            .map(|(_, branch)| *branch)
    }

    pub(crate) fn tag_values(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.tags.iter().map(|(value, _)| value)
    }
}

/// Dispatch of every union of a document, keyed by the pointer of its `oneOf` / `anyOf`
/// keyword (e.g. `/$defs/ApprovalDecision/oneOf`).
pub(crate) type DispatchTable = HashMap<String, Dispatch>;

pub(crate) fn build(doc: &SchemaDocument) -> DispatchTable {
    let mut table = DispatchTable::new();
    walk::for_each_subschema(doc.value(), |at, schema| {
        let Value::Object(map) = schema else { return };
        for keyword in ["oneOf", "anyOf"] {
            let Some(Value::Array(branches)) = map.get(keyword) else {
                continue;
            };
            let union_at = pointer::push(at, keyword);
            if let Some(dispatch) = analyse(doc, map, &union_at, branches) {
                table.insert(union_at, dispatch);
            }
        }
    });
    table
}

fn analyse(
    doc: &SchemaDocument,
    parent: &Map<String, Value>,
    union_at: &str,
    branches: &[Value],
) -> Option<Dispatch> {
    if branches.len() < 2 {
        return None;
    }
    let pins: Vec<Pins> = branches
        .iter()
        .enumerate()
        .map(|(i, branch)| {
            let mut pins = Pins::default();
            pins.collect(doc, &format!("{union_at}/{i}"), branch, 0);
            pins
        })
        .collect();
    if let Some(Value::Object(discriminator)) = parent.get("discriminator")
        && let Some(Value::String(property)) = discriminator.get("propertyName")
    {
        return explicit(
            doc,
            union_at,
            branches,
            &pins,
            property,
            discriminator.get("mapping"),
        );
    }
    // Prefer names every branch requires: a missing tag is then a clear, single issue.
    let mut candidates: Vec<&String> = pins[0].values.keys().collect();
    candidates.sort_by_key(|name| (!pins[0].required.contains(*name), pins[0].order[*name]));
    candidates.into_iter().find_map(|name| {
        let mut tags: Vec<(Value, usize)> = Vec::new();
        for (i, branch) in pins.iter().enumerate() {
            for value in branch.values.get(name)? {
                if tags.iter().any(|(v, _)| v == value) {
                    return None;
                }
                tags.push((value.clone(), i));
            }
        }
        Some(Dispatch {
            property: name.clone(),
            explicit: false,
            tags,
            tag_required: pins.iter().all(|p| p.required.contains(name)),
        })
    })
}

fn explicit(
    doc: &SchemaDocument,
    union_at: &str,
    branches: &[Value],
    pins: &[Pins],
    property: &str,
    mapping: Option<&Value>,
) -> Option<Dispatch> {
    let mut tags: Vec<(Value, usize)> = Vec::new();
    let mut mapped: HashSet<usize> = HashSet::new();
    if let Some(Value::Object(mapping)) = mapping {
        let branch_targets: Vec<Option<String>> = branches
            .iter()
            .enumerate()
            .map(|(i, branch)| ref_target(doc, &format!("{union_at}/{i}"), branch))
            .collect();
        for (tag, reference) in mapping {
            let Value::String(reference) = reference else {
                continue;
            };
            let target = if reference.contains('#') {
                doc.resolve_ref(union_at, reference).ok().map(|(t, _)| t)
            } else {
                doc.definition_pointer(reference).ok()
            };
            let Some(target) = target else { continue };
            if let Some(i) = branch_targets
                .iter()
                .position(|t| t.as_deref() == Some(&target))
            {
                tags.push((Value::String(tag.clone()), i));
                mapped.insert(i);
            }
        }
    }
    for (i, branch) in pins.iter().enumerate() {
        if mapped.contains(&i) {
            continue;
        }
        for value in branch.values.get(property).into_iter().flatten() {
            if !tags.iter().any(|(v, _)| v == value) {
                tags.push((value.clone(), i));
            }
        }
    }
    if tags.is_empty() {
        return None;
    }
    tags.sort_by_key(|(_, i)| *i);
    Some(Dispatch {
        property: property.to_owned(),
        explicit: true,
        tags,
        tag_required: true,
    })
}

fn ref_target(doc: &SchemaDocument, at: &str, schema: &Value) -> Option<String> {
    let reference = schema.get("$ref")?.as_str()?;
    doc.resolve_ref(at, reference)
        .ok()
        .map(|(target, _)| target)
}

/// What one branch fixes: property name → the values it allows, and the names it requires.
#[derive(Default)]
struct Pins {
    values: HashMap<String, Vec<Value>>,
    order: HashMap<String, usize>,
    required: HashSet<String>,
}

impl Pins {
    fn collect(&mut self, doc: &SchemaDocument, at: &str, schema: &Value, depth: usize) {
        if depth > MAX_PIN_DEPTH {
            return;
        }
        let Value::Object(map) = schema else { return };
        if let Some(Value::String(reference)) = map.get("$ref")
            && let Ok((target, value)) = doc.resolve_ref(at, reference)
        {
            self.collect(doc, &target, value, depth + 1);
        }
        if let Some(Value::Array(members)) = map.get("allOf") {
            for (i, member) in members.iter().enumerate() {
                self.collect(
                    doc,
                    &format!("{}/{i}", pointer::push(at, "allOf")),
                    member,
                    depth + 1,
                );
            }
        }
        if let Some(Value::Array(required)) = map.get("required") {
            self.required
                .extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        let Some(Value::Object(properties)) = map.get("properties") else {
            return;
        };
        let base = pointer::push(at, "properties");
        for (name, property) in properties {
            let Some(values) = pinned_values(doc, &pointer::push(&base, name), property, depth)
            else {
                continue;
            };
            let next = self.order.len();
            self.order.entry(name.clone()).or_insert(next);
            self.values.entry(name.clone()).or_default().extend(values);
        }
    }
}

/// The values a property schema allows when it fixes them with `const` or `enum`.
fn pinned_values(
    doc: &SchemaDocument,
    at: &str,
    schema: &Value,
    depth: usize,
) -> Option<Vec<Value>> {
    if depth > MAX_PIN_DEPTH {
        return None;
    }
    let map = schema.as_object()?;
    if let Some(value) = map.get("const") {
        return Some(vec![value.clone()]);
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some(values.clone());
    }
    let reference = map.get("$ref")?.as_str()?;
    let (target, value) = doc.resolve_ref(at, reference).ok()?;
    pinned_values(doc, &target, value, depth + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(v: Value) -> DispatchTable {
        build(&SchemaDocument::from_value(v).unwrap())
    }

    #[test]
    fn detects_const_tags_through_refs() {
        let t = table(json!({
            "$defs": {
                "A": {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                "B": {"allOf": [{"properties": {"kind": {"enum": ["b"]}}, "required": ["kind"]}]}
            },
            "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]
        }));
        let d = &t["/oneOf"];
        assert_eq!(d.property, "kind");
        assert!(!d.explicit);
        assert!(d.tag_required);
        assert_eq!(d.branch_for(&json!("b")), Some(1));
        assert_eq!(d.branch_for(&json!("c")), None);
    }

    #[test]
    fn ambiguous_or_partial_tags_are_not_dispatch() {
        let t = table(json!({
            "anyOf": [
                {"properties": {"k": {"const": "a"}}},
                {"properties": {"k": {"enum": ["a", "b"]}}}
            ],
            "oneOf": [{"properties": {"k": {"const": "a"}}}, {"type": "string"}]
        }));
        assert!(t.is_empty());
    }

    #[test]
    fn explicit_discriminator_uses_mapping() {
        let t = table(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"R": {"type": "object"}, "S": {"type": "object"}},
            "oneOf": [{"$ref": "#/definitions/R"}, {"$ref": "#/definitions/S"}],
            "discriminator": {"propertyName": "type", "mapping": {"r": "#/definitions/R", "s": "S"}}
        }));
        let d = &t["/oneOf"];
        assert!(d.explicit);
        assert_eq!(d.tags, vec![(json!("r"), 0), (json!("s"), 1)]);
    }
}

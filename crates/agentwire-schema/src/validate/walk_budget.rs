//! The walk budget of documents the compiled plan does not take (`unevaluatedProperties`,
//! `$dynamicRef`, …): before the engine walks a value, the subschema applications it could
//! make are counted against the same budget as the plan's
//! ([`WALK_STEPS_BASE`] + [`WALK_STEPS_PER_VALUE`] per value) and the same depth limit
//! ([`MAX_EVAL_DEPTH`]), so an `allOf` that fans out stops with its code instead of running
//! (and collecting errors) for hours.
//!
//! The count is an upper bound: every applicator is counted as applying (all union branches,
//! `if`, `then` and `else`, every member for `patternProperties`), so it never misses a walk the
//! engine makes; counting stops as soon as the budget is spent, so it costs at most the budget.

use std::collections::HashMap;

use serde_json::Value;

use crate::document::SchemaDocument;
use crate::fast::{EvalLimit, MAX_EVAL_DEPTH, WALK_STEPS_BASE, WALK_STEPS_PER_VALUE};
use crate::{pointer, walk};

/// One subschema and where its applicators lead.
#[derive(Debug, Default)]
struct Node {
    /// Applied to the same value (`allOf`, `$ref`, `if`, …); references already followed to the
    /// end of any chain of schemas that are a `$ref` alone.
    in_place: Vec<usize>,
    /// Applied to the member of that name.
    properties: Vec<(String, usize)>,
    /// Applied to every member (`patternProperties`, `additionalProperties`, …).
    members: Vec<usize>,
    /// Applied to every item.
    items: Vec<usize>,
    /// `propertyNames`: one application per key.
    names: Vec<usize>,
}

/// The applicator graph of a document.
#[derive(Debug)]
pub(super) struct WalkGraph {
    nodes: Vec<Node>,
    at: HashMap<String, usize>,
    /// For a schema that is a `$ref` alone, the end of its chain.
    alias: Vec<Option<usize>>,
}

impl WalkGraph {
    pub(super) fn new(doc: &SchemaDocument) -> WalkGraph {
        let mut at = HashMap::new();
        walk::for_each_subschema(doc.value(), |ptr, _| {
            let next = at.len();
            at.entry(ptr.to_owned()).or_insert(next);
        });
        let mut nodes: Vec<Node> = (0..at.len()).map(|_| Node::default()).collect();
        // Each schema that is a `$ref` alone, with the end of its chain.
        let mut alias: Vec<Option<usize>> = vec![None; at.len()];
        walk::for_each_subschema(doc.value(), |ptr, schema| {
            let Some(&id) = at.get(ptr) else { return };
            let mut node = Node::default();
            if let Value::Object(map) = schema {
                for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
                    if let Some(Value::String(reference)) = map.get(key)
                        && let Some(target) = follow(doc, &at, ptr, reference)
                    {
                        node.in_place.push(target);
                    }
                }
            }
            walk::subschemas(ptr, schema, |child, _| {
                let Some(&c) = at.get(&child) else { return };
                let tokens = pointer::tokens(&child[ptr.len()..]).unwrap_or_default();
                match (tokens.first().map(String::as_str), tokens.get(1)) {
                    (Some("properties"), Some(name)) => node.properties.push((name.clone(), c)),
                    (
                        Some(
                            "patternProperties" | "additionalProperties" | "unevaluatedProperties",
                        ),
                        _,
                    ) => node.members.push(c),
                    (Some("propertyNames"), _) => node.names.push(c),
                    (
                        Some(
                            "items" | "prefixItems" | "additionalItems" | "contains"
                            | "unevaluatedItems",
                        ),
                        _,
                    ) => node.items.push(c),
                    (Some("$defs" | "definitions"), _) => {}
                    // allOf, anyOf, oneOf, not, if, then, else, dependentSchemas, dependencies.
                    _ => node.in_place.push(c),
                }
            });
            if matches!(schema.as_object(), Some(map) if map.len() == 1 && map.contains_key("$ref"))
            {
                alias[id] = node.in_place.first().copied();
            }
            nodes[id] = node;
        });
        // A `$ref` alone takes no step and no level, as on the compiled plan: whatever applies
        // one applies its target.
        let skip = |c: usize| alias[c].unwrap_or(c);
        for node in &mut nodes {
            for c in node
                .in_place
                .iter_mut()
                .chain(node.properties.iter_mut().map(|(_, c)| c))
                .chain(node.members.iter_mut())
                .chain(node.items.iter_mut())
                .chain(node.names.iter_mut())
            {
                *c = skip(*c);
            }
        }
        WalkGraph { nodes, at, alias }
    }

    /// Whether the engine's walk of `instance` against the schema at `ptr` stays within the
    /// budget and the depth limit.
    pub(super) fn check(&self, ptr: &str, instance: &Value) -> Result<(), EvalLimit> {
        let Some(&start) = self.at.get(ptr) else {
            return Ok(());
        };
        let start = self.alias[start].unwrap_or(start);
        let budget =
            WALK_STEPS_BASE.saturating_add(WALK_STEPS_PER_VALUE.saturating_mul(values(instance)));
        let mut count = Count {
            graph: self,
            left: budget,
        };
        count.apply(start, instance, 0)
    }
}

/// The end of the reference `reference` written at `ptr`, past schemas that are a `$ref` alone.
fn follow(
    doc: &SchemaDocument,
    at: &HashMap<String, usize>,
    ptr: &str,
    reference: &str,
) -> Option<usize> {
    let (mut target, mut schema) = doc.resolve_ref(ptr, reference).ok()?;
    // A chain of a million aliases is one step, as on the compiled plan; a cycle of them is
    // refused when the document loads, and the bound keeps this loop finite regardless.
    for _ in 0..at.len() {
        match schema.as_object() {
            Some(map) if map.len() == 1 => match map.get("$ref") {
                Some(Value::String(next)) => match doc.resolve_ref(&target, next) {
                    Ok((t, s)) => (target, schema) = (t, s),
                    Err(_) => break,
                },
                _ => break,
            },
            _ => break,
        }
    }
    at.get(&target).copied()
}

/// Values in `instance`, itself included.
fn values(instance: &Value) -> u64 {
    match instance {
        Value::Array(items) => 1 + items.iter().map(values).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(values).sum::<u64>(),
        _ => 1,
    }
}

struct Count<'g> {
    graph: &'g WalkGraph,
    left: u64,
}

impl Count<'_> {
    fn apply(&mut self, node: usize, value: &Value, depth: u32) -> Result<(), EvalLimit> {
        if depth > MAX_EVAL_DEPTH {
            return Err(EvalLimit::Depth);
        }
        self.left = self.left.checked_sub(1).ok_or(EvalLimit::Steps)?;
        let n = &self.graph.nodes[node];
        for &c in &n.in_place {
            self.apply(c, value, depth + 1)?;
        }
        match value {
            Value::Object(map) => {
                for (name, c) in &n.properties {
                    if let Some(member) = map.get(name) {
                        self.apply(*c, member, depth + 1)?;
                    }
                }
                for &c in &n.members {
                    for member in map.values() {
                        self.apply(c, member, depth + 1)?;
                    }
                }
                for &c in &n.names {
                    for key in map.keys() {
                        self.apply(c, &Value::String(key.clone()), depth + 1)?;
                    }
                }
            }
            Value::Array(items) => {
                for &c in &n.items {
                    for item in items {
                        self.apply(c, item, depth + 1)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

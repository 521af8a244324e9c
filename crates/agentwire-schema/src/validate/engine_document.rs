//! The document the engine (`jsonschema`) compiles for reports, and how it is kept small: chains
//! of `$ref`-only schemas are collapsed, and where references nest deeper than the engine
//! compiles in reasonable time, each report compiles only the references the value reaches.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::document::SchemaDocument;
use crate::export::ANNOTATIONS;
use crate::pointer;

/// Longest chain of nested references (a schema whose subtree refers to a schema whose subtree
/// refers on, counting each definition of a cycle once) for which reports use one engine built
/// for the whole document. The engine's compilation grows with the square of this depth
/// (20,000 nested definitions take seconds, 100,000 over a minute); past it, each report builds
/// an engine for the definitions the value reaches.
pub const MAX_ENGINE_REF_DEPTH: usize = 1_000;

/// Keywords beside a `$ref` that assert nothing, so that the schema means what its target
/// means: the annotations, plus an anchor and nested definitions, which only name schemas.
fn asserts_nothing(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword)
        || matches!(keyword, "$anchor" | "$defs" | "definitions")
        || keyword.starts_with("x-")
}

/// Keywords that name a schema by something other than its pointer: a document that has any of
/// them below its root is never pruned (a pruned target would take its name with it).
const NAMING_KEYWORDS: &[&str] = &[
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$dynamicRef",
    "$recursiveRef",
];

/// Whether some subschema below the root has its own `$id` (which changes how its references
/// resolve).
fn has_nested_id(doc: &SchemaDocument) -> bool {
    let mut nested_id = false;
    crate::walk::for_each_subschema(doc.value(), |at, schema| {
        if !at.is_empty()
            && let Some(Value::String(id)) = schema.get("$id")
            && !id.starts_with('#')
        {
            nested_id = true;
        }
    });
    nested_id
}

/// The document the engine compiles: every `$ref` that lands on a chain of schemas that are a
/// `$ref` alone points at the chain's end instead, so that a chain of any length is one
/// reference to compile and to follow (the engine recurses per reference, and compiles a long
/// chain in quadratic time). Where a subschema has its own `$id` (which changes how its
/// references resolve), the document is left as it is.
pub(super) fn collapse_ref_chains(doc: &SchemaDocument) -> Value {
    let mut value = doc.value().clone();
    if has_nested_id(doc) {
        return value;
    }
    let is_alias = |at: &str| {
        matches!(
            pointer::resolve(doc.value(), at),
            Some(Value::Object(map)) if map.keys().all(|k| k == "$ref" || asserts_nothing(k))
        )
    };
    let next: HashMap<&str, &str> = doc
        .refs()
        .iter()
        .filter(|r| is_alias(&r.at))
        .map(|r| (r.at.as_str(), r.target.as_str()))
        .collect();
    let mut ends: HashMap<&str, &str> = HashMap::new();
    for site in doc.refs() {
        let mut path = Vec::new();
        let mut at = site.target.as_str();
        let end = loop {
            if let Some(end) = ends.get(at) {
                break *end;
            }
            match next.get(at) {
                // The loader rejects cycles; the bound keeps this finite anyway.
                Some(target) if path.len() <= next.len() => {
                    path.push(at);
                    at = target;
                }
                _ => break at,
            }
        };
        for visited in path {
            ends.insert(visited, end);
        }
        if end != site.target
            && let Some(Value::Object(map)) = value.pointer_mut(&site.at)
        {
            map.insert(
                "$ref".to_owned(),
                Value::String(format!("#{}", fragment_escape(end))),
            );
        }
    }
    value
}

/// Percent-encodes a JSON Pointer for use as a URI fragment.
pub(super) fn fragment_escape(ptr: &str) -> String {
    let mut out = String::with_capacity(ptr.len());
    for byte in ptr.bytes() {
        let c = byte as char;
        if c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/".contains(c) {
            out.push(c);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The longest chain of nested references of the document, in linear time: the graph has an
/// edge from each reference target to the targets of the references inside its subtree; its
/// strongly connected components (Tarjan, iterative) count once per definition, and the
/// longest path runs through the DAG they form.
pub(super) fn longest_ref_chain(doc: &SchemaDocument) -> usize {
    let refs = doc.refs();
    let mut targets: Vec<&str> = refs.iter().map(|r| r.target.as_str()).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut sites: Vec<(&str, usize)> = refs
        .iter()
        .filter_map(|r| {
            Some((
                r.at.as_str(),
                targets.binary_search(&r.target.as_str()).ok()?,
            ))
        })
        .collect();
    sites.sort_unstable();
    let adjacency: Vec<Vec<usize>> = targets
        .iter()
        .map(|t| within(&sites, t).map(|(_, to)| *to).collect())
        .collect();
    let n = targets.len();
    const NEW: usize = usize::MAX;
    let mut order = vec![NEW; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut component = vec![NEW; n];
    let mut stack = Vec::new();
    let mut longest: Vec<usize> = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if order[root] != NEW {
            continue;
        }
        order[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        let mut calls = vec![(root, 0usize)];
        while let Some(&(v, next)) = calls.last() {
            if let Some(&w) = adjacency[v].get(next) {
                if let Some(top) = calls.last_mut() {
                    top.1 += 1;
                }
                if order[w] == NEW {
                    order[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(order[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(u, _)) = calls.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] != order[v] {
                continue;
            }
            // `v` roots a component; every component it reaches is already complete.
            let id = longest.len();
            let mut members = Vec::new();
            while let Some(w) = stack.pop() {
                on_stack[w] = false;
                component[w] = id;
                members.push(w);
                if w == v {
                    break;
                }
            }
            let beyond = members
                .iter()
                .flat_map(|m| &adjacency[*m])
                .filter(|w| component[**w] != id)
                .map(|w| longest[component[*w]])
                .max()
                .unwrap_or(0);
            longest.push(members.len() + beyond);
        }
    }
    longest.into_iter().max().unwrap_or(0)
}

/// The entries of `sorted` whose pointer is `at` or below it.
fn within<'s, 'p>(
    sorted: &'s [(&'p str, usize)],
    at: &str,
) -> impl Iterator<Item = &'s (&'p str, usize)> {
    let range = |from: &str, to: &str| {
        sorted.partition_point(|(p, _)| *p < from)..sorted.partition_point(|(p, _)| *p < to)
    };
    // Pointers below `at` are exactly those in [at + "/", at + "0"): '0' follows '/'.
    let exact = range(at, &format!("{at}\0"));
    let below = range(&format!("{at}/"), &format!("{at}0"));
    sorted[exact].iter().chain(&sorted[below])
}

/// A document whose references nest too deep for one engine: what a report needs to build an
/// engine for the part of the document a value reaches.
pub(super) struct Pruning {
    /// The engine's document ([`collapse_ref_chains`]), shared with the whole-document engine.
    document: Arc<Value>,
    /// Every reference target, sorted and distinct.
    targets: Vec<String>,
}

impl Pruning {
    /// `Some` when the document's references nest deeper than [`MAX_ENGINE_REF_DEPTH`] and no
    /// subschema below the root names itself (an `$id`, an anchor, a dynamic reference).
    pub(super) fn for_document(
        doc: &SchemaDocument,
        engine_document: &Arc<Value>,
    ) -> Option<Pruning> {
        // A chain cannot be longer than the references that make it: most documents stop here,
        // before any walk.
        if doc.refs().len() <= MAX_ENGINE_REF_DEPTH {
            return None;
        }
        let mut named = false;
        crate::walk::for_each_subschema(doc.value(), |at, schema| {
            if !at.is_empty() && NAMING_KEYWORDS.iter().any(|k| schema.get(*k).is_some()) {
                named = true;
            }
        });
        if named || longest_ref_chain(doc) <= MAX_ENGINE_REF_DEPTH {
            return None;
        }
        let mut targets: Vec<String> = doc.refs().iter().map(|r| r.target.clone()).collect();
        targets.sort_unstable();
        targets.dedup();
        Some(Pruning {
            document: Arc::clone(engine_document),
            targets,
        })
    }

    /// Every reference target of the document, sorted.
    pub(super) fn targets(&self) -> &[String] {
        &self.targets
    }

    /// The engine's document with each target the value does not reach (`reached[i]` false for
    /// `targets()[i]`) replaced by `true`. A target is reached when the value is checked
    /// against it, through a reference or in place (the compiled plan has one node per
    /// pointer), so the engine never evaluates a replaced one; a target that holds a reached
    /// one, or the schema at `root` (the one validated), stays. `None` when no target can be
    /// replaced.
    pub(super) fn document_for(&self, reached: &[bool], root: &str) -> Option<Value> {
        let mut kept: Vec<&str> = self
            .targets
            .iter()
            .zip(reached)
            .filter(|(_, r)| **r)
            .map(|(t, _)| t.as_str())
            .chain([root])
            .collect();
        kept.sort_unstable();
        let holds_kept = |t: &str| {
            let from = kept.partition_point(|k| *k < t);
            let to = kept.partition_point(|k| *k < format!("{t}0").as_str());
            kept[from..to]
                .iter()
                .any(|k| *k == t || k.as_bytes().get(t.len()) == Some(&b'/'))
        };
        let mut document = None;
        for (target, _) in self.targets.iter().zip(reached).filter(|(_, r)| !**r) {
            if holds_kept(target) {
                continue;
            }
            let doc = document.get_or_insert_with(|| Value::clone(&self.document));
            if let Some(schema) = Value::pointer_mut(doc, target) {
                *schema = Value::Bool(true);
            }
        }
        document
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(value: Value) -> SchemaDocument {
        SchemaDocument::from_value(value).expect("schema")
    }

    #[test]
    fn the_longest_chain_counts_nested_references_and_each_cycle_once() {
        let chain = doc(json!({"$defs": {
            "a": {"properties": {"x": {"$ref": "#/$defs/b"}}},
            "b": {"items": {"$ref": "#/$defs/c"}},
            "c": {"type": "string"},
            "w": {"$ref": "#/$defs/c"},
        }, "$ref": "#/$defs/a"}));
        assert_eq!(longest_ref_chain(&chain), 3);
        // a → b → a is one component of two; c below it makes three.
        let cycle = doc(json!({"$defs": {
            "a": {"properties": {"x": {"$ref": "#/$defs/b"}}},
            "b": {"properties": {"y": {"$ref": "#/$defs/a"}, "z": {"$ref": "#/$defs/c"}}},
            "c": {"type": "string"},
        }, "$ref": "#/$defs/a"}));
        assert_eq!(longest_ref_chain(&cycle), 3);
        // A sibling whose name extends another's (`a-b` after `a`) is not below it.
        let siblings = doc(json!({"$defs": {
            "a": {"type": "object"},
            "a-b": {"properties": {"x": {"$ref": "#/$defs/a"}}},
        }, "anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a-b"}]}));
        assert_eq!(longest_ref_chain(&siblings), 2);
        assert_eq!(longest_ref_chain(&doc(json!({"type": "string"}))), 0);
    }

    #[test]
    fn a_pruned_document_keeps_reached_targets_and_what_holds_them() {
        let mut defs = serde_json::Map::new();
        for i in 0..=MAX_ENGINE_REF_DEPTH + 1 {
            defs.insert(
                format!("d{i}"),
                json!({"properties": {"next": {"$ref": format!("#/$defs/d{}", i + 1)}}}),
            );
        }
        defs.insert(format!("d{}", MAX_ENGINE_REF_DEPTH + 2), json!({}));
        defs.insert("inner".into(), json!({"$defs": {"x": {"type": "null"}}}));
        let d = doc(
            json!({"$defs": defs, "$ref": "#/$defs/d0", "not": {"$ref": "#/$defs/inner/$defs/x"}, "if": {"$ref": "#/$defs/inner"}}),
        );
        let engine_document = Arc::new(collapse_ref_chains(&d));
        let pruning = Pruning::for_document(&d, &engine_document).expect("deep enough");
        let reached: Vec<bool> = pruning
            .targets()
            .iter()
            .map(|t| t == "/$defs/d0" || t == "/$defs/inner/$defs/x")
            .collect();
        let pruned = pruning
            .document_for(&reached, "")
            .expect("something pruned");
        assert_eq!(pruned.pointer("/$defs/d1"), Some(&Value::Bool(true)));
        assert_eq!(
            pruned.pointer("/$defs/d0"),
            engine_document.pointer("/$defs/d0")
        );
        // `inner` is not reached, but holds a target that is.
        assert_eq!(
            pruned.pointer("/$defs/inner/$defs/x"),
            Some(&json!({"type": "null"}))
        );
        // Everything reached: nothing to prune.
        assert_eq!(pruning.document_for(&vec![true; reached.len()], ""), None);
        // A document with an anchor below its root is never pruned.
        let named = doc(json!({"$defs": {"a": {"$anchor": "x"}}, "$ref": "#/$defs/a"}));
        assert!(Pruning::for_document(&named, &Arc::new(collapse_ref_chains(&named))).is_none());
    }
}

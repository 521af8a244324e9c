//! The comparison of two documents: the root, then every definition, node by node, each
//! difference reported as a [`Change`] classified for the direction of the node it is in.
//!
//! This module holds the walk: the [`Comparer`], its node step (`$ref`, `true`/`false`
//! schemas, the assertions without a finer rule) and how it recurses. The keywords with rules of
//! their own are compared in the submodules: `values` (`type`, `enum`, `const`), `objects`
//! (properties, `required`, additional and pattern properties), `bounds` (numeric and length
//! bounds, `multipleOf`, `pattern`, `format`), `arrays` (`uniqueItems`, the item keywords) and
//! `unions` (`oneOf`, `anyOf`, `allOf` and how their branches are paired).

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value, json};

use crate::compat::direction::{
    DirectionMap, Receivers, has_direction, local_ref_target, ref_definition,
};
use crate::compat::{Change, Direction, Rule, classify, definitions_of};
use crate::pointer;
use crate::versions::ANNOTATION_PREFIX;

mod arrays;
mod bounds;
mod objects;
mod unions;
mod values;

/// Which parts of the two documents are compared.
pub(in crate::compat) enum Selection {
    /// The root and every definition.
    All,
    /// Only these definitions (named ones and what they reach by `$ref`), not the root.
    Definitions(BTreeSet<String>),
}

impl Selection {
    /// The selection for `names` (`None`: everything): the named definitions plus every
    /// definition a selected one references, in either document, until nothing is added.
    pub(in crate::compat) fn new(old: &Value, new: &Value, names: Option<&[String]>) -> Self {
        let Some(names) = names else {
            return Self::All;
        };
        let mut selected: BTreeSet<String> = BTreeSet::new();
        let mut pending: Vec<String> = names.to_vec();
        while let Some(name) = pending.pop() {
            if !selected.insert(name.clone()) {
                continue;
            }
            for doc in [old, new] {
                if let Some((_, defs)) = definitions_of(doc)
                    && let Some(def) = defs.get(&name)
                {
                    collect_definition_refs(def, &mut pending);
                }
            }
        }
        Self::Definitions(selected)
    }

    fn root(&self) -> bool {
        matches!(self, Self::All)
    }

    fn has(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Definitions(names) => names.contains(name),
        }
    }
}

/// Pushes the definition name of every local `$ref` in `value` (iteratively: no recursion on
/// untrusted nesting).
fn collect_definition_refs(value: &Value, out: &mut Vec<String>) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(ref_definition)
                {
                    out.push(name);
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

/// Pushes every local `$ref` in `value` (iteratively: no recursion on untrusted nesting).
fn collect_refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    out.push(reference);
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

pub(super) fn compare_documents(
    old: &Value,
    new: &Value,
    ref_siblings: (bool, bool),
    selection: &Selection,
    (default, version): (Direction, Option<String>),
    max_depth: usize,
    out: &mut Vec<Change>,
) {
    let old_dirs = DirectionMap::build(old);
    let new_dirs = DirectionMap::build(new);
    let mut cmp = Comparer {
        old_root: old,
        new_root: new,
        ref_siblings,
        old_dirs: &old_dirs,
        new_dirs: &new_dirs,
        default,
        version,
        max_depth,
        seen: HashSet::new(),
        out,
    };
    if selection.root() {
        let root_dir = cmp.direction_at("", "", Receivers::NONE);
        cmp.node(old, new, "", "", root_dir, 0);
    }
    let empty = Map::new();
    let (old_kw, old_defs) = definitions_of(old).unwrap_or(("$defs", &empty));
    let (new_kw, new_defs) = definitions_of(new).unwrap_or((old_kw, &empty));
    for (name, old_def) in old_defs {
        if !selection.has(name) {
            continue;
        }
        let old_at = pointer::from_tokens([old_kw, name.as_str()]);
        let Some(new_def) = new_defs.get(name) else {
            let dir = cmp.direction_at(&old_at, &old_at, Receivers::NONE);
            cmp.push(
                Rule::DefinitionRemoved,
                old_at,
                Some(old_def.clone()),
                None,
                dir,
                false,
            );
            continue;
        };
        let new_at = pointer::from_tokens([new_kw, name.as_str()]);
        let dir = cmp.direction_at(&old_at, &new_at, Receivers::NONE);
        cmp.node(old_def, new_def, &old_at, &new_at, dir, 0);
    }
    if selection.root() {
        // Targets the definitions' comparison does not reach (a definition nested in another,
        // one under another keyword, one in a second definitions block) are compared once each,
        // through the references naming them: a node holding such a reference is skipped when it
        // is the same on both sides, yet its target may differ.
        let mut refs = Vec::new();
        collect_refs(old, &mut refs);
        refs.sort_unstable();
        refs.dedup();
        for reference in refs {
            if compared_by_name(reference, old) {
                continue;
            }
            if let Some(target) = local_ref_target(reference) {
                let dir = cmp.direction_at(&target, &target, Receivers::NONE);
                cmp.follow(reference, reference, dir, 0);
            }
        }
    }
    for (name, new_def) in new_defs {
        if selection.has(name) && !old_defs.contains_key(name) {
            let new_at = pointer::from_tokens([new_kw, name.as_str()]);
            let dir = cmp.direction_at(&new_at, &new_at, Receivers::NONE);
            cmp.push(
                Rule::DefinitionAdded,
                new_at,
                None,
                Some(new_def.clone()),
                dir,
                false,
            );
        }
    }
}

pub(super) struct Comparer<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    /// Whether keywords beside a `$ref` constrain the value too, in the old and the new
    /// document (2020-12; draft-07 ignores them).
    ref_siblings: (bool, bool),
    old_dirs: &'a DirectionMap,
    new_dirs: &'a DirectionMap,
    default: Direction,
    version: Option<String>,
    max_depth: usize,
    seen: HashSet<(String, String, u8)>,
    out: &'a mut Vec<Change>,
}

/// Assertion keywords without a finer rule: any difference is `constraint-changed`.
pub(super) const OTHER_ASSERTIONS: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "$dynamicRef",
    "$recursiveRef",
];

impl Comparer<'_> {
    fn direction_at(&self, old_at: &str, new_at: &str, inherited: Receivers) -> Receivers {
        let mut r = inherited;
        if let Some(x) = self.old_dirs.get(old_at) {
            r = r.union(x);
        }
        if let Some(x) = self.new_dirs.get(new_at) {
            r = r.union(x);
        }
        r
    }

    fn push(
        &mut self,
        rule: Rule,
        pointer: String,
        old: Option<Value>,
        new: Option<Value>,
        receivers: Receivers,
        open: bool,
    ) {
        let direction = receivers.direction(self.default);
        let class = classify(rule.effect(), direction, open);
        self.out.push(Change {
            rule,
            pointer,
            old,
            new,
            class,
            direction,
            version: self.version.clone(),
        });
    }

    fn node(
        &mut self,
        old: &Value,
        new: &Value,
        old_at: &str,
        new_at: &str,
        inherited: Receivers,
        depth: usize,
    ) {
        if old == new {
            return;
        }
        if depth > self.max_depth {
            self.push(
                Rule::ComparisonTooDeep,
                new_at.to_owned(),
                None,
                None,
                inherited,
                false,
            );
            return;
        }
        let dir = if has_direction(old) || has_direction(new) {
            self.direction_at(old_at, new_at, inherited)
        } else {
            inherited
        };
        let rule = match (old, new) {
            (Value::Object(o), Value::Object(n)) => Ok((o, n)),
            (_, Value::Bool(false)) => Err(Rule::SchemaRemoved),
            (Value::Bool(false), _) => Err(Rule::SchemaRestored),
            (Value::Bool(true), Value::Object(n)) if is_trivial(n) => return,
            (Value::Bool(true), Value::Object(_)) => Err(Rule::SchemaConstrained),
            (Value::Object(o), Value::Bool(true)) if is_trivial(o) => return,
            (Value::Object(_), Value::Bool(true)) => Err(Rule::SchemaUnconstrained),
            _ => Err(Rule::ConstraintChanged),
        };
        let (o, n) = match rule {
            Ok(pair) => pair,
            Err(rule) => {
                return self.push(
                    rule,
                    new_at.to_owned(),
                    Some(old.clone()),
                    Some(new.clone()),
                    dir,
                    false,
                );
            }
        };
        if self.references(o, n, old_at, new_at, dir, depth) {
            return;
        }
        self.types(o, n, new_at, dir);
        self.values(o, n, new_at, dir);
        self.objects(o, n, old_at, new_at, dir, depth);
        self.bounds(o, n, old_at, new_at, dir);
        self.strings(o, n, old_at, new_at, dir);
        self.arrays(o, n, old_at, new_at, dir, depth);
        self.unions(o, n, old_at, new_at, dir, depth);
        for key in OTHER_ASSERTIONS {
            if o.get(*key) != n.get(*key) {
                let at = pointer::push(if n.contains_key(*key) { new_at } else { old_at }, key);
                self.push(
                    Rule::ConstraintChanged,
                    at,
                    o.get(*key).cloned(),
                    n.get(*key).cloned(),
                    dir,
                    false,
                );
            }
        }
    }

    /// Handles `$ref`. Returns true when the nodes were compared through their targets and
    /// nothing else is left to compare.
    fn references(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) -> bool {
        let old_ref = o.get("$ref").and_then(Value::as_str);
        let new_ref = n.get("$ref").and_then(Value::as_str);
        match (old_ref, new_ref) {
            (None, None) => false,
            (Some(a), Some(b)) => {
                let (da, db) = (ref_definition(a), ref_definition(b));
                let same = match (&da, &db) {
                    (Some(x), Some(y)) => x == y,
                    _ => a == b,
                };
                if !same {
                    self.push(
                        Rule::RefRetargeted,
                        pointer::push(new_at, "$ref"),
                        Some(json!(a)),
                        Some(json!(b)),
                        dir,
                        false,
                    );
                    self.follow(a, b, dir, depth);
                }
                false
            }
            (Some(a), None) => {
                if let Some(target) = local_ref_target(a)
                    && let Some(resolved) = pointer::resolve(self.old_root, &target)
                    && self.seen.insert((target.clone(), new_at.to_owned(), dir.0))
                {
                    let (resolved, at) =
                        with_siblings(resolved, o, &target, old_at, self.ref_siblings.0);
                    self.node(
                        &resolved,
                        &Value::Object(n.clone()),
                        &at,
                        new_at,
                        dir,
                        depth + 1,
                    );
                }
                true
            }
            (None, Some(b)) => {
                if let Some(target) = local_ref_target(b)
                    && let Some(resolved) = pointer::resolve(self.new_root, &target)
                    && self.seen.insert((old_at.to_owned(), target.clone(), dir.0))
                {
                    let (resolved, at) =
                        with_siblings(resolved, n, &target, new_at, self.ref_siblings.1);
                    self.node(
                        &Value::Object(o.clone()),
                        &resolved,
                        old_at,
                        &at,
                        dir,
                        depth + 1,
                    );
                }
                true
            }
        }
    }

    fn follow(&mut self, a: &str, b: &str, dir: Receivers, depth: usize) {
        let (Some(ta), Some(tb)) = (local_ref_target(a), local_ref_target(b)) else {
            return;
        };
        let (Some(va), Some(vb)) = (
            pointer::resolve(self.old_root, &ta),
            pointer::resolve(self.new_root, &tb),
        ) else {
            return;
        };
        if self.seen.insert((ta.clone(), tb.clone(), dir.0)) {
            let dir = self.direction_at(&ta, &tb, dir);
            self.node(va, vb, &ta, &tb, dir, depth + 1);
        }
    }
}

/// A schema object with nothing but annotations accepts everything, like `true`.
pub(super) fn is_trivial(m: &Map<String, Value>) -> bool {
    m.keys().all(|k| {
        k.starts_with(ANNOTATION_PREFIX)
            || k.starts_with("x-")
            || matches!(
                k.as_str(),
                "title"
                    | "description"
                    | "default"
                    | "examples"
                    | "$comment"
                    | "deprecated"
                    | "readOnly"
                    | "writeOnly"
                    | "$id"
                    | "$anchor"
                    | "$schema"
            )
    })
}

/// The schema a node `{"$ref": …, siblings…}` stands for, given its `$ref`'s target `resolved`
/// at `target`: the target itself when siblings do not `apply` (draft-07) or the node has
/// nothing beside `$ref` but annotations,
/// and otherwise the target with the node's siblings applied too (they constrain the value as
/// well, as 2019-09 and 2020-12 read them), at the node's own pointer `at`. A sibling keyword the
/// target also has is kept in an `allOf` of both, so that neither is lost.
fn with_siblings(
    resolved: &Value,
    node: &Map<String, Value>,
    target: &str,
    at: &str,
    apply: bool,
) -> (Value, String) {
    if !apply {
        return (resolved.clone(), target.to_owned());
    }
    const ANNOTATIONS: [&str; 6] = [
        "$ref",
        "$comment",
        "description",
        "title",
        "examples",
        "$id",
    ];
    let siblings: Map<String, Value> = node
        .iter()
        .filter(|(key, _)| !ANNOTATIONS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if siblings.is_empty() {
        return (resolved.clone(), target.to_owned());
    }
    let Some(target_map) = resolved.as_object() else {
        return (resolved.clone(), target.to_owned());
    };
    let mut merged = target_map.clone();
    let mut clashing = Map::new();
    for (key, value) in siblings {
        match merged.get(&key) {
            Some(existing) if *existing != value => {
                clashing.insert(key, value);
            }
            _ => {
                merged.insert(key, value);
            }
        }
    }
    if !clashing.is_empty() {
        let both = serde_json::json!({"allOf": [Value::Object(merged), Value::Object(clashing)]});
        return (both, at.to_owned());
    }
    (Value::Object(merged), at.to_owned())
}

/// Whether the `$ref` `reference` names a definition of `root`'s definitions block, which the
/// comparison of the documents' definitions compares by name.
fn compared_by_name(reference: &str, root: &Value) -> bool {
    let (Some(name), Some((keyword, definitions))) =
        (ref_definition(reference), definitions_of(root))
    else {
        return false;
    };
    local_ref_target(reference).as_deref() == Some(&pointer::from_tokens([keyword, name.as_str()]))
        && definitions.contains_key(&name)
}

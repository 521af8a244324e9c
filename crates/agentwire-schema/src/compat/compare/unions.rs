//! Unions: `oneOf`, `anyOf` and `allOf`, whose branches are paired old to new (by
//! discriminating tag, referenced definition, equality, then position) before each pair is
//! compared as a node and the rest reported added or removed.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::Comparer;
use crate::compat::Rule;
use crate::compat::direction::{Receivers, is_open, local_ref_target, ref_definition};
use crate::pointer;

impl Comparer<'_> {
    pub(super) fn unions(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let empty: Vec<Value> = Vec::new();
        for key in ["oneOf", "anyOf", "allOf"] {
            let ov = o.get(key).and_then(Value::as_array).unwrap_or(&empty);
            let nv = n.get(key).and_then(Value::as_array).unwrap_or(&empty);
            if ov == nv {
                continue;
            }
            let (old_k, new_k) = (pointer::push(old_at, key), pointer::push(new_at, key));
            if key != "allOf" && (ov.is_empty() || nv.is_empty()) {
                // The keyword itself appeared or went: a value must now match one of the
                // branches, or need not any more. Not a branch added or removed: any difference
                // is judged as a changed constraint, breaking both ways (fail closed).
                let at = if nv.is_empty() { old_k } else { new_k };
                self.push(
                    Rule::ConstraintChanged,
                    at,
                    o.get(key).cloned(),
                    n.get(key).cloned(),
                    dir,
                    false,
                );
                continue;
            }
            let pairs = match_branches(ov, nv, self.old_root, self.new_root);
            let open = is_open(o);
            let (added, removed) = if key == "allOf" {
                (Rule::AllOfBranchAdded, Rule::AllOfBranchRemoved)
            } else {
                (Rule::VariantAdded, Rule::VariantRemoved)
            };
            let mut matched_new = vec![false; nv.len()];
            for (i, old_branch) in ov.iter().enumerate() {
                match pairs.get(&i) {
                    Some(&j) => {
                        matched_new[j] = true;
                        self.node(
                            old_branch,
                            &nv[j],
                            &format!("{old_k}/{i}"),
                            &format!("{new_k}/{j}"),
                            dir,
                            depth + 1,
                        );
                    }
                    None => self.push(
                        removed,
                        format!("{old_k}/{i}"),
                        Some(old_branch.clone()),
                        None,
                        dir,
                        false,
                    ),
                }
            }
            for (j, new_branch) in nv.iter().enumerate() {
                if !matched_new[j] {
                    self.push(
                        added,
                        format!("{new_k}/{j}"),
                        None,
                        Some(new_branch.clone()),
                        dir,
                        open,
                    );
                }
            }
        }
    }
}

/// Pairs old branches with new ones (old index → new index): by discriminating tag when every
/// branch has one, else by referenced definition, then by equality, then by position.
pub(super) fn match_branches(
    old: &[Value],
    new: &[Value],
    old_root: &Value,
    new_root: &Value,
) -> HashMap<usize, usize> {
    let mut pairs: HashMap<usize, usize> = HashMap::new();
    let mut used = vec![false; new.len()];
    if let Some(tag) = common_tag(old, new, old_root, new_root) {
        let old_tags: Vec<Vec<Value>> = old
            .iter()
            .map(|b| branch_tag(b, &tag, old_root).unwrap_or_default())
            .collect();
        let new_tags: Vec<Vec<Value>> = new
            .iter()
            .map(|b| branch_tag(b, &tag, new_root).unwrap_or_default())
            .collect();
        for (i, ot) in old_tags.iter().enumerate() {
            if let Some(j) =
                (0..new.len()).find(|&j| !used[j] && new_tags[j].iter().any(|v| ot.contains(v)))
            {
                used[j] = true;
                pairs.insert(i, j);
            }
        }
        return pairs;
    }
    // Same referenced definition.
    for (i, b) in old.iter().enumerate() {
        let Some(name) = b
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_definition)
        else {
            continue;
        };
        if let Some(j) = (0..new.len()).find(|&j| {
            !used[j]
                && new[j]
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(ref_definition)
                    .as_deref()
                    == Some(name.as_str())
        }) {
            used[j] = true;
            pairs.insert(i, j);
        }
    }
    // Identical branches.
    for (i, b) in old.iter().enumerate() {
        if pairs.contains_key(&i) {
            continue;
        }
        if let Some(j) = (0..new.len()).find(|&j| !used[j] && new[j] == *b) {
            used[j] = true;
            pairs.insert(i, j);
        }
    }
    // The rest by position among the unmatched, skipping branches that reference a definition
    // (those are matched by name or not at all).
    let is_ref = |b: &Value| {
        b.get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_definition)
            .is_some()
    };
    let mut free_new = (0..new.len()).filter(|&j| !used[j] && !is_ref(&new[j]));
    for (i, b) in old.iter().enumerate() {
        if pairs.contains_key(&i) || is_ref(b) {
            continue;
        }
        match free_new.next() {
            Some(j) => {
                pairs.insert(i, j);
            }
            None => break,
        }
    }
    pairs
}

/// A property that every branch on both sides fixes with `const` or a string `enum`.
pub(super) fn common_tag(
    old: &[Value],
    new: &[Value],
    old_root: &Value,
    new_root: &Value,
) -> Option<String> {
    let first = old.first().or(new.first())?;
    let root = if old.is_empty() { new_root } else { old_root };
    let candidates: Vec<String> = resolve_branch(first, root)?
        .get("properties")?
        .as_object()?
        .keys()
        .cloned()
        .collect();
    candidates.into_iter().find(|tag| {
        old.iter().all(|b| branch_tag(b, tag, old_root).is_some())
            && new.iter().all(|b| branch_tag(b, tag, new_root).is_some())
    })
}

pub(super) fn resolve_branch<'v>(branch: &'v Value, root: &'v Value) -> Option<&'v Value> {
    match branch.get("$ref").and_then(Value::as_str) {
        Some(r) => pointer::resolve(root, &local_ref_target(r)?),
        None => Some(branch),
    }
}

pub(super) fn branch_tag(branch: &Value, tag: &str, root: &Value) -> Option<Vec<Value>> {
    let schema = resolve_branch(branch, root)?.get("properties")?.get(tag)?;
    let schema = resolve_branch(schema, root)?;
    if let Some(c) = schema.get("const") {
        return Some(vec![c.clone()]);
    }
    match schema.get("enum") {
        Some(Value::Array(items)) if !items.is_empty() => Some(items.clone()),
        _ => None,
    }
}

//! The comparison of two documents: the root, then every definition, node by node, each
//! difference reported as a [`Change`] classified for the direction of the node it is in.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::compat::direction::{
    DirectionMap, Receivers, has_direction, is_open, local_ref_target, ref_definition,
};
use crate::compat::{Change, Direction, Rule, classify, definitions_of};
use crate::pointer;
use crate::versions::ANNOTATION_PREFIX;

pub(super) fn compare_documents(
    old: &Value,
    new: &Value,
    default: Direction,
    version: Option<String>,
    max_depth: usize,
    out: &mut Vec<Change>,
) {
    let old_dirs = DirectionMap::build(old);
    let new_dirs = DirectionMap::build(new);
    let mut cmp = Comparer {
        old_root: old,
        new_root: new,
        old_dirs: &old_dirs,
        new_dirs: &new_dirs,
        default,
        version,
        max_depth,
        seen: HashSet::new(),
        out,
    };
    let root_dir = cmp.direction_at("", "", Receivers::NONE);
    cmp.node(old, new, "", "", root_dir, 0);
    let empty = Map::new();
    let (old_kw, old_defs) = definitions_of(old).unwrap_or(("$defs", &empty));
    let (new_kw, new_defs) = definitions_of(new).unwrap_or((old_kw, &empty));
    for (name, old_def) in old_defs {
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
    for (name, new_def) in new_defs {
        if !old_defs.contains_key(name) {
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
    old_dirs: &'a DirectionMap,
    new_dirs: &'a DirectionMap,
    default: Direction,
    version: Option<String>,
    max_depth: usize,
    seen: HashSet<(String, String, u8)>,
    out: &'a mut Vec<Change>,
}

pub(super) const LOWER_BOUNDS: &[&str] = &["minLength", "minItems", "minProperties", "minContains"];
pub(super) const UPPER_BOUNDS: &[&str] = &["maxLength", "maxItems", "maxProperties", "maxContains"];
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
                    self.node(
                        resolved,
                        &Value::Object(n.clone()),
                        &target,
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
                    self.node(
                        &Value::Object(o.clone()),
                        resolved,
                        old_at,
                        &target,
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

    fn types(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, at: &str, dir: Receivers) {
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

    fn values(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, at: &str, dir: Receivers) {
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

    fn objects(
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
        let open = is_open(o) || !is_closed_object(o);
        for (name, old_schema) in old_props {
            let old_p = pointer::push(&pointer::push(old_at, "properties"), name);
            match new_props.get(name) {
                None => self.push(
                    Rule::PropertyRemoved,
                    old_p,
                    Some(old_schema.clone()),
                    None,
                    dir,
                    false,
                ),
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
            self.push(rule, new_p, None, Some(new_schema.clone()), dir, open);
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

    fn bounds(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
    ) {
        // Numeric bounds combine the inclusive and the exclusive keyword into one effective bound.
        for (lower, inclusive, exclusive) in [
            (true, "minimum", "exclusiveMinimum"),
            (false, "maximum", "exclusiveMaximum"),
        ] {
            let ob = numeric_bound(o, inclusive, exclusive, lower);
            let nb = numeric_bound(n, inclusive, exclusive, lower);
            if ob == nb {
                continue;
            }
            let tighter = match (&ob, &nb) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(a), Some(b)) => bound_is_tighter(b, a, lower),
                (None, None) => continue,
            };
            let key = nb.as_ref().or(ob.as_ref()).map_or(inclusive, |b| {
                if b.exclusive { exclusive } else { inclusive }
            });
            let at = pointer::push(if nb.is_some() { new_at } else { old_at }, key);
            let old_val = bound_keywords(o, inclusive, exclusive);
            let new_val = bound_keywords(n, inclusive, exclusive);
            let rule = match (lower, tighter) {
                (true, true) => Rule::LowerBoundTightened,
                (true, false) => Rule::LowerBoundLoosened,
                (false, true) => Rule::UpperBoundTightened,
                (false, false) => Rule::UpperBoundLoosened,
            };
            self.push(rule, at, old_val, new_val, dir, false);
        }
        for (lower, keys) in [(true, LOWER_BOUNDS), (false, UPPER_BOUNDS)] {
            for key in keys {
                let (ov, nv) = (
                    o.get(*key).and_then(Value::as_f64),
                    n.get(*key).and_then(Value::as_f64),
                );
                if ov == nv {
                    continue;
                }
                let tighter = match (ov, nv) {
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (Some(a), Some(b)) => {
                        if lower {
                            b > a
                        } else {
                            b < a
                        }
                    }
                    (None, None) => continue,
                };
                let at = pointer::push(if nv.is_some() { new_at } else { old_at }, key);
                let rule = match (lower, tighter) {
                    (true, true) => Rule::LowerBoundTightened,
                    (true, false) => Rule::LowerBoundLoosened,
                    (false, true) => Rule::UpperBoundTightened,
                    (false, false) => Rule::UpperBoundLoosened,
                };
                self.push(
                    rule,
                    at,
                    o.get(*key).cloned(),
                    n.get(*key).cloned(),
                    dir,
                    false,
                );
            }
        }
        let (om, nm) = (
            o.get("multipleOf").and_then(Value::as_f64),
            n.get("multipleOf").and_then(Value::as_f64),
        );
        if om != nm {
            let rule = match (om, nm) {
                (None, Some(_)) => Rule::MultipleOfTightened,
                (Some(_), None) => Rule::MultipleOfLoosened,
                (Some(a), Some(b)) if is_multiple(b, a) => Rule::MultipleOfTightened,
                (Some(a), Some(b)) if is_multiple(a, b) => Rule::MultipleOfLoosened,
                _ => Rule::MultipleOfChanged,
            };
            let at = pointer::push(if nm.is_some() { new_at } else { old_at }, "multipleOf");
            self.push(
                rule,
                at,
                o.get("multipleOf").cloned(),
                n.get("multipleOf").cloned(),
                dir,
                false,
            );
        }
    }

    fn strings(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
    ) {
        for (key, added, removed, changed) in [
            (
                "pattern",
                Rule::PatternAdded,
                Rule::PatternRemoved,
                Rule::PatternChanged,
            ),
            (
                "format",
                Rule::FormatAdded,
                Rule::FormatRemoved,
                Rule::FormatChanged,
            ),
        ] {
            let (ov, nv) = (o.get(key), n.get(key));
            let rule = match (ov, nv) {
                (a, b) if a == b => continue,
                (None, Some(_)) => added,
                (Some(_), None) => removed,
                _ => changed,
            };
            let at = pointer::push(if nv.is_some() { new_at } else { old_at }, key);
            self.push(rule, at, ov.cloned(), nv.cloned(), dir, false);
        }
    }

    fn arrays(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(n)) {
            (false, true) => self.push(
                Rule::UniqueItemsAdded,
                pointer::push(new_at, "uniqueItems"),
                o.get("uniqueItems").cloned(),
                n.get("uniqueItems").cloned(),
                dir,
                false,
            ),
            (true, false) => self.push(
                Rule::UniqueItemsRemoved,
                pointer::push(new_at, "uniqueItems"),
                o.get("uniqueItems").cloned(),
                n.get("uniqueItems").cloned(),
                dir,
                false,
            ),
            _ => {}
        }
        let t = Value::Bool(true);
        for key in [
            "items",
            "additionalItems",
            "unevaluatedItems",
            "prefixItems",
        ] {
            let (ov, nv) = (o.get(key), n.get(key));
            if ov == nv {
                continue;
            }
            let (old_k, new_k) = (pointer::push(old_at, key), pointer::push(new_at, key));
            match (ov.unwrap_or(&t), nv.unwrap_or(&t)) {
                (Value::Array(a), Value::Array(b)) => {
                    if a.len() != b.len() {
                        self.push(
                            Rule::ConstraintChanged,
                            new_k.clone(),
                            ov.cloned(),
                            nv.cloned(),
                            dir,
                            false,
                        );
                    }
                    for (i, (x, y)) in a.iter().zip(b).enumerate() {
                        self.node(
                            x,
                            y,
                            &format!("{old_k}/{i}"),
                            &format!("{new_k}/{i}"),
                            dir,
                            depth + 1,
                        );
                    }
                }
                (Value::Array(_), _) | (_, Value::Array(_)) => {
                    self.push(
                        Rule::ConstraintChanged,
                        new_k,
                        ov.cloned(),
                        nv.cloned(),
                        dir,
                        false,
                    );
                }
                (a, b) => self.node(a, b, &old_k, &new_k, dir, depth + 1),
            }
        }
    }

    fn unions(
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

pub(super) fn is_closed_object(m: &Map<String, Value>) -> bool {
    m.get("additionalProperties") == Some(&Value::Bool(false))
        || m.get("unevaluatedProperties") == Some(&Value::Bool(false))
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

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Bound {
    value: f64,
    exclusive: bool,
}

pub(super) fn numeric_bound(
    m: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
    lower: bool,
) -> Option<Bound> {
    let a = m.get(inclusive).and_then(Value::as_f64).map(|value| Bound {
        value,
        exclusive: false,
    });
    let b = m.get(exclusive).and_then(Value::as_f64).map(|value| Bound {
        value,
        exclusive: true,
    });
    match (a, b) {
        (Some(a), Some(b)) => Some(if bound_is_tighter(&b, &a, lower) {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// Whether bound `x` admits fewer numbers than bound `y`.
pub(super) fn bound_is_tighter(x: &Bound, y: &Bound, lower: bool) -> bool {
    if x.value == y.value {
        x.exclusive && !y.exclusive
    } else if lower {
        x.value > y.value
    } else {
        x.value < y.value
    }
}

pub(super) fn bound_keywords(
    m: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
) -> Option<Value> {
    let mut out = Map::new();
    for key in [inclusive, exclusive] {
        if let Some(v) = m.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

pub(super) fn is_multiple(x: f64, of: f64) -> bool {
    if of == 0.0 {
        return false;
    }
    let q = x / of;
    q.is_finite() && (q - q.round()).abs() < 1e-9
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

//! The effective schema of a node, as lowering sees it: references followed (with their
//! siblings folded in), `allOf` parts merged into one object and distributed over union parts,
//! under the view-step and variant limits.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::lower::Lowerer;
use super::union::is_constraint_only;
use super::{MAX_DISTRIBUTED_VARIANTS, MAX_LOWERING_DEPTH, MAX_VIEW_STEPS};
use crate::error::CodegenError;

impl Lowerer<'_> {
    /// The effective schema of a node: references followed, `allOf` merged.
    pub(super) fn view<'v>(
        &self,
        node: &'v Value,
        depth: usize,
    ) -> Result<Cow<'v, Value>, CodegenError> {
        let steps = self.view_steps.get() + 1;
        self.view_steps.set(steps);
        if steps > MAX_VIEW_STEPS {
            return Err(CodegenError::TooComplex {
                limit: MAX_VIEW_STEPS,
            });
        }
        if depth > MAX_LOWERING_DEPTH {
            return Err(CodegenError::TooDeep {
                pointer: String::new(),
                limit: MAX_LOWERING_DEPTH,
            });
        }
        let Value::Object(map) = node else {
            return Ok(Cow::Borrowed(node));
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            let (target, value) = self.doc.resolve_ref("", reference)?;
            let _ = target;
            let resolved = self.view(value, depth + 1)?.into_owned();
            if map.len() == 1 {
                return Ok(Cow::Owned(resolved));
            }
            let mut merged = resolved;
            let mut siblings = map.clone();
            siblings.remove("$ref");
            merge_object(&mut merged, &Value::Object(siblings));
            return Ok(Cow::Owned(merged));
        }
        if map.contains_key("allOf") {
            return Ok(Cow::Owned(self.merge_all_of(node, depth)?));
        }
        Ok(Cow::Borrowed(node))
    }

    /// Merges `allOf` parts into one schema; union parts are distributed (one merged variant per
    /// branch, capped at [`MAX_DISTRIBUTED_VARIANTS`]).
    pub(super) fn merge_all_of(&self, node: &Value, depth: usize) -> Result<Value, CodegenError> {
        let Value::Object(map) = node else {
            return Ok(node.clone());
        };
        let mut base_map = map.clone();
        let parts = match base_map.remove("allOf") {
            Some(Value::Array(parts)) => parts,
            _ => Vec::new(),
        };
        let mut base = Value::Object(base_map);
        let mut unions: Vec<(Vec<Value>, Option<Value>)> = Vec::new();
        for part in &parts {
            let view = self.view(part, depth + 1)?.into_owned();
            let union_key = ["oneOf", "anyOf"].into_iter().find(|k| {
                view.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|b| !b.iter().all(is_constraint_only))
            });
            match union_key {
                Some(key) => {
                    let mut rest = view.as_object().cloned().unwrap_or_default();
                    let branches = match rest.remove(key) {
                        Some(Value::Array(b)) => b,
                        _ => Vec::new(),
                    };
                    let discriminator = rest.remove("discriminator");
                    merge_object(&mut base, &Value::Object(rest));
                    unions.push((branches, discriminator));
                }
                None => merge_object(&mut base, &view),
            }
        }
        if unions.is_empty() {
            return Ok(base);
        }
        let mut variants = vec![base.clone()];
        let mut discriminator = None;
        for (branches, disc) in unions {
            if variants.len().saturating_mul(branches.len()) > MAX_DISTRIBUTED_VARIANTS {
                continue;
            }
            discriminator = discriminator.or(disc);
            let mut next = Vec::new();
            for v in &variants {
                for b in &branches {
                    let mut merged = v.clone();
                    let view = self.view(b, depth + 1)?;
                    merge_object(&mut merged, &view);
                    next.push(merged);
                }
            }
            variants = next;
        }
        let mut out = Map::new();
        for key in ["title", "description", "x-agentwire-open"] {
            if let Some(v) = base.get(key) {
                out.insert(key.to_owned(), v.clone());
            }
        }
        for v in &mut variants {
            if let Value::Object(m) = v {
                m.remove("title");
                m.remove("description");
            }
        }
        out.insert("anyOf".to_owned(), Value::Array(variants));
        if let Some(d) = discriminator {
            out.insert("discriminator".to_owned(), d);
        }
        Ok(Value::Object(out))
    }
}

/// Folds `part` into `base`: properties are united (a constant or enum refines a property that is
/// already there), `required` lists are united, `additionalProperties: false` wins, and other
/// keywords are kept from the first part that has them.
fn merge_object(base: &mut Value, part: &Value) {
    let (Value::Object(base), Value::Object(part)) = (base, part) else {
        return;
    };
    for (key, value) in part {
        match key.as_str() {
            "properties" => {
                let Value::Object(incoming) = value else {
                    continue;
                };
                let entry = base
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(props) = entry {
                    for (name, schema) in incoming {
                        // `allOf` intersects: a constant, an enum or a reference is narrower
                        // than what an earlier part declared, and anything is narrower than a
                        // bare `{type: X}`.
                        let refines = ["const", "enum", "$ref"]
                            .iter()
                            .any(|k| schema.get(*k).is_some());
                        match props.get(name) {
                            Some(existing) if !refines && !is_generic(existing) => {}
                            _ => {
                                props.insert(name.clone(), schema.clone());
                            }
                        }
                    }
                }
            }
            "required" => {
                let Value::Array(incoming) = value else {
                    continue;
                };
                let entry = base
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(req) = entry {
                    for r in incoming {
                        if !req.contains(r) {
                            req.push(r.clone());
                        }
                    }
                }
            }
            "additionalProperties" => {
                if value == &Value::Bool(false) || !base.contains_key(key) {
                    base.insert(key.clone(), value.clone());
                }
            }
            "not" | "if" | "then" | "else" | "$ref" | "allOf" => {}
            _ => {
                base.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
}

/// Whether a property schema says no more than a JSON type (`{}`, `{"type": "object"}`), so a
/// later `allOf` part's schema for the same property is at least as specific.
fn is_generic(schema: &Value) -> bool {
    match schema {
        Value::Bool(true) => true,
        Value::Object(map) => map
            .keys()
            .all(|k| matches!(k.as_str(), "type" | "title" | "description")),
        _ => false,
    }
}

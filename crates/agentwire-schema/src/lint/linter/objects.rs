//! Object rules: `required` names no property, pattern or extra property can carry, and
//! objects with properties but no `additionalProperties` policy, with the in-place group of
//! schemas (allOf/anyOf/oneOf, conditions, dependent schemas) that both read.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Linter, RefTarget};
use crate::document::Draft;
use crate::lint::LintCode;
use crate::pointer;
use crate::walk;

impl Linter<'_> {
    pub(super) fn check_required(&mut self, at: &str, map: &Map<String, Value>) {
        let (Some(Value::Array(required)), Some(Value::Object(properties))) =
            (map.get("required"), map.get("properties"))
        else {
            return;
        };
        let additional = map.get("additionalProperties");
        if additional.is_some_and(|a| a != &Value::Bool(false)) {
            // Any extra property may carry the name.
            return;
        }
        // `None` stands for a pattern that does not compile (AW022) or that only a backtracking
        // engine without a budget could run, either of which may match anything.
        let patterns: Vec<Option<crate::fast::ecma::Pattern>> = match map.get("patternProperties") {
            Some(Value::Object(entries)) => entries
                .keys()
                .map(|p| crate::fast::ecma::Pattern::new(p).ok())
                .collect(),
            _ => Vec::new(),
        };
        let closed = additional == Some(&Value::Bool(false));
        let mut group: Option<HashSet<String>> = None;
        for (i, name) in required.iter().enumerate() {
            let Value::String(name) = name else { continue };
            if properties.contains_key(name)
                || patterns
                    .iter()
                    .any(|p| p.as_ref().is_none_or(|re| re.is_match(name) != Some(false)))
            {
                continue;
            }
            let here = format!("{}/{i}", pointer::push(at, "required"));
            if closed {
                self.push(
                    LintCode::RequiredForbidden,
                    here,
                    format!(
                        "{name:?} is required but additionalProperties: false forbids it: no object passes"
                    ),
                );
                continue;
            }
            // A branch of allOf/oneOf/… often requires what its enclosing schema declares.
            let declared = group.get_or_insert_with(|| self.group_properties(at));
            if !declared.contains(name.as_str()) {
                self.push(
                    LintCode::RequiredUndeclared,
                    here,
                    format!("{name:?} is required but not declared in properties"),
                );
            }
        }
    }

    pub(super) fn check_open_object(&mut self, at: &str, map: &Map<String, Value>) {
        if !map.get("properties").is_some_and(Value::is_object) || self.has_policy(map) {
            return;
        }
        // `if` and `not` are conditions, not shapes: closing them would change what they test.
        if is_condition(at) {
            return;
        }
        // A branch of allOf/oneOf/… under a schema with a policy is governed by that policy.
        let mut parent = self.in_place_parent(at);
        while let Some(ptr) = parent {
            if let Some(Value::Object(enclosing)) = pointer::resolve(self.root, &ptr)
                && self.has_policy(enclosing)
            {
                return;
            }
            parent = self.in_place_parent(&ptr);
        }
        self.push(
            LintCode::OpenObject,
            at,
            "object has properties but no additionalProperties policy: unknown properties pass silently \
             (say additionalProperties: false to close it, or true to keep it open on purpose)"
                .to_owned(),
        );
    }

    /// The schema that evaluates the schema at `at` in place (its allOf/anyOf/oneOf,
    /// if/then/else, not or dependent-schema parent), if any.
    fn in_place_parent(&self, at: &str) -> Option<String> {
        let tokens = pointer::tokens(at)?;
        let n = tokens.len();
        let keep = match tokens.as_slice() {
            [.., k, _]
                if matches!(
                    k.as_str(),
                    "allOf" | "anyOf" | "oneOf" | "dependentSchemas" | "dependencies"
                ) =>
            {
                n - 2
            }
            [.., k] if matches!(k.as_str(), "if" | "then" | "else" | "not") => n - 1,
            _ => return None,
        };
        let parent = pointer::from_tokens(tokens[..keep].iter().map(String::as_str));
        // `/properties/not` is a property named "not", not a `not` keyword.
        self.schemas.contains(&parent).then_some(parent)
    }

    fn has_policy(&self, map: &Map<String, Value>) -> bool {
        map.contains_key("additionalProperties")
            || (self.draft == Some(Draft::Draft202012) && map.contains_key("unevaluatedProperties"))
    }

    /// Property names declared by the in-place group of the schema at `at`: the schemas it is
    /// a branch of (through allOf/anyOf/oneOf, if/then/else, not, dependent schemas), their
    /// in-place branches, and what their `$ref`s point at.
    fn group_properties(&self, at: &str) -> HashSet<String> {
        let mut top = at.to_owned();
        while let Some(parent) = self.in_place_parent(&top) {
            top = parent;
        }
        let mut names = HashSet::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut stack = vec![top];
        while let Some(ptr) = stack.pop() {
            if !seen.insert(ptr.clone()) {
                continue;
            }
            let Some(Value::Object(map)) = pointer::resolve(self.root, &ptr) else {
                continue;
            };
            if let Some(Value::Object(properties)) = map.get("properties") {
                names.extend(properties.keys().cloned());
            }
            if let Some(Value::String(reference)) = map.get("$ref")
                && let RefTarget::Pointer(target) = self.resolve(reference)
            {
                stack.push(target);
            }
            for key in ["allOf", "anyOf", "oneOf"] {
                if let Some(Value::Array(items)) = map.get(key) {
                    let base = pointer::push(&ptr, key);
                    stack.extend((0..items.len()).map(|i| format!("{base}/{i}")));
                }
            }
            for key in ["if", "then", "else", "not"] {
                if map.contains_key(key) {
                    stack.push(pointer::push(&ptr, key));
                }
            }
            for key in ["dependentSchemas", "dependencies"] {
                if let Some(Value::Object(entries)) = map.get(key) {
                    let base = pointer::push(&ptr, key);
                    stack.extend(entries.keys().map(|name| pointer::push(&base, name)));
                }
            }
        }
        names
    }
}

/// Whether the schema at `at` is the value of an `if` or `not` keyword (and not, say, a property
/// named `if`).
pub(super) fn is_condition(at: &str) -> bool {
    let Some((parent, last)) = at.rsplit_once('/') else {
        return false;
    };
    if last != "if" && last != "not" {
        return false;
    }
    let parent_token = parent.rsplit_once('/').map_or(parent, |(_, token)| token);
    !walk::MAP_SUBSCHEMA_KEYWORDS.contains(&parent_token) && parent_token != "dependencies"
}

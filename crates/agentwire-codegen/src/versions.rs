//! The all-versions view of a document annotated with wire versions (docs/versions.md): one
//! schema whose instances include the valid messages of every version, so that one set of types
//! decodes whatever a negotiated version sends (`agentwire gen --all-versions`, Rust only).
//!
//! A receiver validates a message against its version's export first; these types only have to
//! *accept* every version's messages and keep them exactly. The rules, node by node:
//!
//! - every node of every version is kept (`x-agentwire-since`/`until` are not applied), and so is
//!   every enum value of every version;
//! - a required property that does not exist in every version its object exists in becomes
//!   optional (its own range, and that of the definition it refers to, are narrower);
//! - a keyword override (`x-agentwire-versions`) that only adds properties or relaxes `required`
//!   merges into the node: properties united, `required` intersected; one that removes
//!   properties makes the node a union (`anyOf`) of the shapes, the newest first, each titled
//!   after the first version it covers (`Since 1.2`); one that changes `const` or `enum` unites
//!   the values (a boolean or number constant is its base type anyway); one that only constrains
//!   (lengths, bounds, patterns, constraint-only `anyOf`/`oneOf`/`allOf` beside `properties`) is
//!   left to the version's validator; any other change of shape is the error
//!   `codegen.version-merge`.

use agentwire_schema::SchemaDocument;
use agentwire_schema::pointer;
use agentwire_schema::versions::{OVERRIDES, SINCE, UNTIL, VersionRange, WireVersion};
use agentwire_schema::walk::{
    ARRAY_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS,
};
use serde_json::{Map, Value};

use crate::error::CodegenError;
use crate::ir::{CONSTRAINT_KEYWORDS, MAX_LOWERING_DEPTH};

/// Keywords an override may change, besides [`CONSTRAINT_KEYWORDS`], without changing the type
/// of the node.
const ANNOTATION_AND_CONDITION_KEYWORDS: &[&str] = &[
    "title",
    "description",
    "examples",
    "not",
    "if",
    "then",
    "else",
];

/// Whether an override of `key` leaves the node's type as it is.
fn only_constrains(key: &str) -> bool {
    CONSTRAINT_KEYWORDS.contains(&key) || ANNOTATION_AND_CONDITION_KEYWORDS.contains(&key)
}

/// Builds the all-versions view of `doc` (see the module documentation). A document that
/// declares no versions comes back unchanged.
pub fn all_versions(doc: &SchemaDocument) -> Result<SchemaDocument, CodegenError> {
    let identity = doc.identity()?;
    let merger = Merger {
        root: doc.value(),
        versions: identity.versions,
    };
    let everywhere = vec![true; merger.versions.len()];
    let value = merger.node(doc.value(), &everywhere, "", 0)?;
    Ok(SchemaDocument::from_value(value)?)
}

/// Versions as a mask over the document's version list.
type Versions = Vec<bool>;

struct Merger<'a> {
    root: &'a Value,
    versions: Vec<WireVersion>,
}

impl Merger<'_> {
    fn merge_error(&self, at: &str, message: String) -> CodegenError {
        CodegenError::VersionMerge {
            pointer: at.to_owned(),
            message,
        }
    }

    /// The versions of `range`, inside `within`.
    fn mask(&self, range: &VersionRange, within: &[bool]) -> Versions {
        self.versions
            .iter()
            .zip(within)
            .map(|(v, &inside)| inside && range.contains(v))
            .collect()
    }

    /// The versions a node exists in by its own range and, for a reference, by the range of
    /// what it refers to (following chains of references).
    fn exists_in(&self, node: &Value, at: &str) -> Result<Versions, CodegenError> {
        let mut mask = vec![true; self.versions.len()];
        let mut node = node;
        for _ in 0..MAX_LOWERING_DEPTH {
            let range =
                VersionRange::of_node(node).map_err(|e| self.merge_error(at, e.message.clone()))?;
            mask = self.mask(&range, &mask);
            let target = node
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
                .and_then(|p| self.root.pointer(p));
            match target {
                Some(next) => node = next,
                None => return Ok(mask),
            }
        }
        Err(CodegenError::TooDeep {
            pointer: at.to_owned(),
            limit: MAX_LOWERING_DEPTH,
        })
    }

    /// The all-versions form of the schema node at `at`, which exists in `context`.
    fn node(
        &self,
        node: &Value,
        context: &[bool],
        at: &str,
        depth: usize,
    ) -> Result<Value, CodegenError> {
        if depth > MAX_LOWERING_DEPTH {
            return Err(CodegenError::TooDeep {
                pointer: at.to_owned(),
                limit: MAX_LOWERING_DEPTH,
            });
        }
        let Value::Object(map) = node else {
            return Ok(node.clone());
        };
        let range =
            VersionRange::of_node(node).map_err(|e| self.merge_error(at, e.message.clone()))?;
        let here = self.mask(&range, context);
        let mut map = map.clone();
        if let Some(overrides) = map.remove(OVERRIDES) {
            map = self.apply_overrides(map, &overrides, &here, at)?;
        }
        let mut out = Map::new();
        for (key, value) in map {
            let child_at = pointer::push(at, &key);
            let value = match (key.as_str(), value) {
                ("$defs" | "definitions", Value::Object(defs)) => {
                    let everywhere = vec![true; self.versions.len()];
                    let mut kept = Map::new();
                    for (name, def) in defs {
                        let def_at = pointer::push(&child_at, &name);
                        kept.insert(name, self.node(&def, &everywhere, &def_at, depth + 1)?);
                    }
                    Value::Object(kept)
                }
                (k, Value::Object(children)) if MAP_SUBSCHEMA_KEYWORDS.contains(&k) => {
                    let mut kept = Map::new();
                    for (name, child) in children {
                        let at = pointer::push(&child_at, &name);
                        kept.insert(name, self.node(&child, &here, &at, depth + 1)?);
                    }
                    Value::Object(kept)
                }
                (k, Value::Array(items))
                    if ARRAY_SUBSCHEMA_KEYWORDS.contains(&k) || k == "items" =>
                {
                    let mut kept = Vec::with_capacity(items.len());
                    for (i, child) in items.iter().enumerate() {
                        let at = pointer::push(&child_at, &i.to_string());
                        kept.push(self.node(child, &here, &at, depth + 1)?);
                    }
                    Value::Array(kept)
                }
                (k, child) if SINGLE_SUBSCHEMA_KEYWORDS.contains(&k) || k == "items" => {
                    self.node(&child, &here, &child_at, depth + 1)?
                }
                (_, value) => value,
            };
            out.insert(key, value);
        }
        self.relax_required(&mut out, &here, at)?;
        Ok(Value::Object(out))
    }

    /// Drops from `required` every property that does not exist in all of `here`.
    fn relax_required(
        &self,
        map: &mut Map<String, Value>,
        here: &[bool],
        at: &str,
    ) -> Result<(), CodegenError> {
        let (Some(Value::Array(required)), Some(Value::Object(properties))) =
            (map.get("required"), map.get("properties"))
        else {
            return Ok(());
        };
        let mut kept = Vec::with_capacity(required.len());
        for name in required {
            let everywhere = match name.as_str().and_then(|n| properties.get(n)) {
                Some(property) => {
                    let exists = self.exists_in(property, at)?;
                    here.iter().zip(&exists).all(|(&h, &e)| !h || e)
                }
                None => true,
            };
            if everywhere {
                kept.push(name.clone());
            }
        }
        map.insert("required".to_owned(), Value::Array(kept));
        Ok(())
    }

    /// Folds the keyword overrides of a node into it (see the module documentation).
    fn apply_overrides(
        &self,
        base: Map<String, Value>,
        overrides: &Value,
        here: &[bool],
        at: &str,
    ) -> Result<Map<String, Value>, CodegenError> {
        let at = pointer::push(at, OVERRIDES);
        let Value::Array(entries) = overrides else {
            return Err(self.merge_error(&at, format!("{OVERRIDES} must be an array")));
        };
        let mut merged = base.clone();
        let mut shapes: Vec<(Versions, Map<String, Value>)> = Vec::new();
        let mut covered = vec![false; self.versions.len()];
        for (i, entry) in entries.iter().enumerate() {
            let entry_at = pointer::push(&at, &i.to_string());
            let (Some(Value::Object(schema)), Value::Object(bounds)) = (entry.get("schema"), entry)
            else {
                return Err(self.merge_error(&entry_at, "an override needs a schema".to_owned()));
            };
            let bounds: Map<String, Value> = bounds
                .iter()
                .filter(|(k, _)| k.as_str() != "schema")
                .map(|(k, v)| (format!("x-agentwire-{k}"), v.clone()))
                .collect();
            let range = VersionRange::of_node(&Value::Object(bounds))
                .map_err(|e| self.merge_error(&entry_at, e.message.clone()))?;
            let versions = self.mask(&range, here);
            let mut applied = base.clone();
            for (key, value) in schema {
                if value.is_null() {
                    applied.remove(key);
                } else {
                    applied.insert(key.clone(), value.clone());
                }
            }
            let mut shape_changed = false;
            for (key, value) in schema {
                if base.get(key) == Some(value) || only_constrains(key) {
                    continue;
                }
                match key.as_str() {
                    "properties" | "required" => shape_changed = true,
                    "const" | "enum" => unite_values(&mut merged, value, &entry_at)
                        .map_err(|m| self.merge_error(&entry_at, m))?,
                    "allOf" | "anyOf" | "oneOf" if base.contains_key("properties") => {}
                    other => {
                        return Err(self.merge_error(
                            &entry_at,
                            format!(
                                "the override changes {other:?}, which one type cannot carry for every version"
                            ),
                        ));
                    }
                }
            }
            if !shape_changed {
                continue;
            }
            let names = |m: &Map<String, Value>| -> Vec<String> {
                m.get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default()
            };
            let base_names = names(&base);
            let applied_names = names(&applied);
            if base_names.iter().all(|n| applied_names.contains(n)) {
                merge_shape(&mut merged, &applied);
            } else {
                for (slot, &v) in covered.iter_mut().zip(&versions) {
                    *slot |= v;
                }
                let mut shape = applied;
                for key in ["allOf", "anyOf", "oneOf"] {
                    if base.get(key) != shape.get(key) {
                        shape.remove(key);
                    }
                }
                shapes.push((versions, shape));
            }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            if base.get(key) != merged.get(key) {
                merged.remove(key);
            }
        }
        if shapes.is_empty() {
            return Ok(merged);
        }
        let newest: Versions = here.iter().zip(&covered).map(|(&h, &c)| h && !c).collect();
        let mut outer = Map::new();
        let mut inner = Map::new();
        for (key, value) in merged {
            if key.starts_with("x-agentwire") || key == "description" || key == "$comment" {
                outer.insert(key, value);
            } else {
                inner.insert(key, value);
            }
        }
        let mut branches = Vec::new();
        let mut all = vec![(newest, inner)];
        all.extend(shapes);
        for (versions, mut shape) in all {
            for key in ["description", "$comment"] {
                shape.remove(key);
            }
            shape.retain(|k, _| !k.starts_with("x-agentwire"));
            if let Some(first) = self.versions.iter().zip(&versions).find(|(_, v)| **v) {
                shape
                    .entry("title")
                    .or_insert_with(|| Value::String(format!("Since {}", first.0)));
                let last = self.versions.iter().zip(&versions).rposition(|(_, v)| *v);
                shape.insert(SINCE.to_owned(), Value::String(first.0.to_string()));
                if let Some(next) = last.and_then(|l| self.versions.get(l + 1)) {
                    shape.insert(UNTIL.to_owned(), Value::String(next.to_string()));
                }
            }
            branches.push(Value::Object(shape));
        }
        outer.insert("anyOf".to_owned(), Value::Array(branches));
        Ok(outer)
    }
}

/// Adds the properties `applied` has and `merged` lacks, and keeps in `required` only what both
/// require.
fn merge_shape(merged: &mut Map<String, Value>, applied: &Map<String, Value>) {
    if let Some(Value::Object(extra)) = applied.get("properties") {
        let properties = merged
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(properties) = properties {
            for (name, schema) in extra {
                if !properties.contains_key(name) {
                    properties.insert(name.clone(), schema.clone());
                }
            }
        }
    }
    let empty = Vec::new();
    let theirs = applied
        .get("required")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if let Some(Value::Array(ours)) = merged.get_mut("required") {
        ours.retain(|name| theirs.contains(name));
    }
}

/// Unites a `const` or `enum` of another version into the node: string values become one
/// `enum`; a boolean or number constant on a node of that base type needs nothing.
fn unite_values(merged: &mut Map<String, Value>, value: &Value, at: &str) -> Result<(), String> {
    let incoming: Vec<Value> = match value {
        Value::Array(values) => values.clone(),
        other => vec![other.clone()],
    };
    let scalar_type = merged
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| matches!(t, "boolean" | "number" | "integer"));
    if scalar_type && incoming.iter().all(|v| v.is_boolean() || v.is_number()) {
        return Ok(());
    }
    if !incoming.iter().all(|v| v.is_string() || v.is_null()) {
        return Err(format!(
            "{at}: only string values (or scalars of the node's own type) can be united across versions"
        ));
    }
    let mut values: Vec<Value> = match (merged.remove("enum"), merged.remove("const")) {
        (Some(Value::Array(values)), _) => values,
        (_, Some(one)) => vec![one],
        _ => Vec::new(),
    };
    for v in incoming {
        if !values.contains(&v) {
            values.push(v);
        }
    }
    merged.insert("enum".to_owned(), Value::Array(values));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(schema: Value) -> Result<Value, CodegenError> {
        let doc = SchemaDocument::from_value(schema)?;
        all_versions(&doc).map(|d| d.value().clone())
    }

    fn doc(defs: Value) -> Value {
        json!({"x-agentwire": {"name": "p", "version": "1.2", "minimumCompatibleVersion": "1.0",
            "versions": ["1.0", "1.1", "1.2"]}, "$defs": defs})
    }

    #[test]
    fn a_property_of_some_versions_is_optional() {
        let out = view(doc(json!({
            "Later": {"x-agentwire-since": "1.1", "type": "string"},
            "A": {"type": "object", "required": ["a", "b", "c"], "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "x-agentwire-since": "1.2"},
                "c": {"$ref": "#/$defs/Later"}}},
            "B": {"x-agentwire-since": "1.1", "type": "object", "required": ["c"],
                "properties": {"c": {"$ref": "#/$defs/Later"}}}
        })))
        .unwrap();
        assert_eq!(out["$defs"]["A"]["required"], json!(["a"]));
        // B exists from 1.1, as its property does: still required.
        assert_eq!(out["$defs"]["B"]["required"], json!(["c"]));
    }

    #[test]
    fn an_override_that_adds_properties_merges() {
        let out = view(doc(
            json!({"In": {"type": "object", "additionalProperties": false,
            "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}},
            "x-agentwire-versions": [{"since": "1.1", "schema": {
                "properties": {"text": {"type": "string"}, "files": {"type": "array"}},
                "anyOf": [{"required": ["files"]}, {"required": ["text"]}]}}]}}),
        ))
        .unwrap();
        assert_eq!(
            out["$defs"]["In"],
            json!({"type": "object", "additionalProperties": false, "required": ["text"],
                "properties": {"text": {"type": "string", "minLength": 1}, "files": {"type": "array"}}})
        );
    }

    #[test]
    fn an_override_that_removes_properties_is_a_union_newest_first() {
        let out = view(doc(json!({"Cancel": {"description": "d", "type": "object",
            "required": ["id", "reason"], "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
            "x-agentwire-versions": [{"until": "1.1", "schema": {"required": ["old"],
                "properties": {"old": {"type": "integer"}, "reason": {"type": "string"}}}}]}})))
        .unwrap();
        assert_eq!(
            out["$defs"]["Cancel"],
            json!({"description": "d", "anyOf": [
                {"type": "object", "required": ["id", "reason"], "title": "Since 1.1",
                 "x-agentwire-since": "1.1",
                 "properties": {"id": {"type": "string"}, "reason": {"type": "string"}}},
                {"type": "object", "required": ["old"], "title": "Since 1.0",
                 "x-agentwire-since": "1.0", "x-agentwire-until": "1.1",
                 "properties": {"old": {"type": "integer"}, "reason": {"type": "string"}}}]})
        );
    }

    #[test]
    fn constants_of_other_versions_are_united_or_need_nothing() {
        let out = view(doc(json!({
            "Flag": {"type": "boolean", "const": true,
                "x-agentwire-versions": [{"until": "1.1", "schema": {"const": false}}]},
            "Mode": {"const": "new", "x-agentwire-versions": [{"until": "1.1", "schema": {"enum": ["old", "older"]}}]}
        })))
        .unwrap();
        assert_eq!(
            out["$defs"]["Flag"],
            json!({"type": "boolean", "const": true})
        );
        assert_eq!(
            out["$defs"]["Mode"],
            json!({"enum": ["new", "old", "older"]})
        );
    }

    #[test]
    fn a_change_of_type_is_an_error() {
        let err = view(doc(json!({"N": {"type": "string",
            "x-agentwire-versions": [{"until": "1.1", "schema": {"type": "integer"}}]}})))
        .unwrap_err();
        assert_eq!(err.code(), "codegen.version-merge");
        assert!(
            err.to_string().contains("/$defs/N/x-agentwire-versions/0"),
            "{err}"
        );
    }
}

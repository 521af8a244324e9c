//! Loading a protocol schema document: draft detection, definitions, `$id`, local `$ref`
//! resolution (JSON Pointer and `$anchor`), and the load-time errors (unknown draft, unresolved
//! or unsupported references, reference cycles), each with the JSON Pointer of the culprit.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde_json::Value;

use crate::canonical::{self, Digest};
use crate::json::{self, JsonError};
use crate::pointer;
use crate::walk;

/// The JSON Schema dialects a document can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Draft {
    /// JSON Schema draft-07 (`definitions`, array-form `items`).
    Draft07,
    /// JSON Schema 2020-12 (`$defs`, `prefixItems`).
    Draft202012,
}

impl Draft {
    /// The canonical `$schema` URI of the draft.
    pub fn uri(self) -> &'static str {
        match self {
            Draft::Draft07 => "http://json-schema.org/draft-07/schema#",
            Draft::Draft202012 => "https://json-schema.org/draft/2020-12/schema",
        }
    }

    /// The short name used on the command line: `07` or `2020-12`.
    pub fn name(self) -> &'static str {
        match self {
            Draft::Draft07 => "07",
            Draft::Draft202012 => "2020-12",
        }
    }

    /// The keyword that holds reusable definitions in this draft.
    pub fn definitions_keyword(self) -> &'static str {
        match self {
            Draft::Draft07 => "definitions",
            Draft::Draft202012 => "$defs",
        }
    }

    /// Recognises a `$schema` URI (http or https, with or without the empty fragment).
    pub fn from_uri(uri: &str) -> Option<Draft> {
        let trimmed = uri.trim_end_matches('#');
        let rest = trimmed
            .strip_prefix("https://")
            .or_else(|| trimmed.strip_prefix("http://"))?;
        match rest {
            "json-schema.org/draft-07/schema" => Some(Draft::Draft07),
            "json-schema.org/draft/2020-12/schema" => Some(Draft::Draft202012),
            _ => None,
        }
    }

    /// Parses a command-line name: `07`, `draft-07`, `2020-12` or `draft-2020-12`.
    pub fn from_name(name: &str) -> Option<Draft> {
        match name
            .trim_start_matches("draft-")
            .trim_start_matches("draft")
        {
            "07" | "7" => Some(Draft::Draft07),
            "2020-12" => Some(Draft::Draft202012),
            _ => None,
        }
    }
}

impl fmt::Display for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of load-time problem a document has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaErrorKind {
    /// The bytes are not acceptable JSON (see [`JsonError`]).
    Json,
    /// `$schema` names a dialect this engine does not implement.
    UnknownDraft,
    /// A `$ref` whose target does not exist in the document.
    UnresolvedRef,
    /// A `$ref` to another document (only references inside the document are followed).
    UnsupportedRef,
    /// A chain of references and in-place applicators that comes back to itself without
    /// descending into the instance: validating against it would never end.
    RefCycle,
    /// The document is not a schema (not an object or boolean) or a keyword has the wrong type.
    InvalidSchema,
    /// No definition with the requested name.
    UnknownDefinition,
    /// Reading the file failed.
    Io,
}

impl SchemaErrorKind {
    /// Stable code of the error.
    pub fn code(self) -> &'static str {
        match self {
            SchemaErrorKind::Json => "schema.json",
            SchemaErrorKind::UnknownDraft => "schema.unknown-draft",
            SchemaErrorKind::UnresolvedRef => "schema.unresolved-ref",
            SchemaErrorKind::UnsupportedRef => "schema.unsupported-ref",
            SchemaErrorKind::RefCycle => "schema.ref-cycle",
            SchemaErrorKind::InvalidSchema => "schema.invalid",
            SchemaErrorKind::UnknownDefinition => "schema.unknown-definition",
            SchemaErrorKind::Io => "schema.io",
        }
    }
}

/// A document that cannot be used as a schema, with the JSON Pointer of the culprit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// What went wrong.
    pub kind: SchemaErrorKind,
    /// JSON Pointer into the document (empty for the whole document).
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl SchemaError {
    pub(crate) fn new(kind: SchemaErrorKind, pointer: impl Into<String>, message: String) -> Self {
        SchemaError {
            kind,
            pointer: pointer.into(),
            message,
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}: {}", self.code(), self.message)
        } else {
            write!(f, "{} at {}: {}", self.code(), self.pointer, self.message)
        }
    }
}

impl std::error::Error for SchemaError {}

impl From<JsonError> for SchemaError {
    fn from(err: JsonError) -> Self {
        SchemaError::new(SchemaErrorKind::Json, "", err.to_string())
    }
}

/// How to read a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Dialect assumed when the document has no `$schema`.
    pub default_draft: Draft,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            default_draft: Draft::Draft202012,
        }
    }
}

/// One `$ref` in a document and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefSite {
    /// Pointer of the schema object that holds the `$ref`.
    pub at: String,
    /// The reference as written.
    pub reference: String,
    /// The JSON Pointer it resolves to inside the document.
    pub target: String,
}

/// Why a `$ref` does not resolve inside its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefProblem {
    /// It points into another document.
    External,
    /// Its fragment has a malformed percent escape.
    MalformedEscape,
    /// No `$anchor` (or draft-07 fragment `$id`) has that name.
    NoAnchor(String),
    /// It points at a value that is not a schema.
    NotSchema,
    /// It points at nothing.
    Missing,
}

impl RefProblem {
    /// The end of a sentence that starts with the reference.
    pub(crate) fn describe(&self) -> String {
        match self {
            RefProblem::External => {
                "points into another document; only references inside this document are supported"
                    .to_owned()
            }
            RefProblem::MalformedEscape => "has a malformed percent escape".to_owned(),
            RefProblem::NoAnchor(name) => format!("names no $anchor {name:?} in this document"),
            RefProblem::NotSchema => "points at a value that is not a schema".to_owned(),
            RefProblem::Missing => "does not resolve to anything in this document".to_owned(),
        }
    }
}

/// The anchor a schema object declares: `$anchor`, or in draft-07 a fragment-only `$id`
/// (`"#name"`).
pub(crate) fn anchor_name(schema: &Value) -> Option<&str> {
    if let Some(Value::String(anchor)) = schema.get("$anchor") {
        return Some(anchor);
    }
    match schema.get("$id") {
        Some(Value::String(id)) => id
            .strip_prefix('#')
            .filter(|name| !name.is_empty() && !name.starts_with('/')),
        _ => None,
    }
}

/// Resolves a `$ref` against the document `root` (whose `$id` is `id` and whose anchors map
/// names to pointers) into a JSON Pointer inside it. The loader and lint share this, so a
/// document lint finds no reference problem in is a document that loads.
pub(crate) fn resolve_reference(
    root: &Value,
    id: Option<&str>,
    anchors: &HashMap<String, String>,
    reference: &str,
) -> Result<String, RefProblem> {
    let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
    if !base.is_empty() && id.map(|id| id.trim_end_matches('#')) != Some(base) {
        return Err(RefProblem::External);
    }
    let fragment = pointer::percent_decode(fragment).ok_or(RefProblem::MalformedEscape)?;
    let target = if fragment.is_empty() || fragment.starts_with('/') {
        fragment
    } else {
        anchors
            .get(&fragment)
            .cloned()
            .ok_or(RefProblem::NoAnchor(fragment))?
    };
    match pointer::resolve(root, &target) {
        Some(v) if walk::is_schema(v) => Ok(target),
        Some(_) => Err(RefProblem::NotSchema),
        None => Err(RefProblem::Missing),
    }
}

/// A loaded protocol schema document whose references all resolve.
#[derive(Debug, Clone)]
pub struct SchemaDocument {
    value: Value,
    draft: Draft,
    id: Option<String>,
    refs: Vec<RefSite>,
    anchors: HashMap<String, String>,
}

impl SchemaDocument {
    /// Loads a document from bytes with the default options.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, SchemaError> {
        Self::from_value(json::parse_json(bytes)?)
    }

    /// Loads a document from a file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SchemaError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            SchemaError::new(
                SchemaErrorKind::Io,
                "",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        Self::from_slice(&bytes)
    }

    /// Loads a parsed document with the default options.
    pub fn from_value(value: Value) -> Result<Self, SchemaError> {
        Self::from_value_with(value, LoadOptions::default())
    }

    /// Loads a parsed document.
    pub fn from_value_with(value: Value, options: LoadOptions) -> Result<Self, SchemaError> {
        if !walk::is_schema(&value) {
            return Err(SchemaError::new(
                SchemaErrorKind::InvalidSchema,
                "",
                "a schema document must be an object or a boolean".to_owned(),
            ));
        }
        let draft = match value.get("$schema") {
            None => options.default_draft,
            Some(Value::String(uri)) => Draft::from_uri(uri).ok_or_else(|| {
                SchemaError::new(
                    SchemaErrorKind::UnknownDraft,
                    "/$schema",
                    format!(
                        "unknown dialect {uri:?}; supported: {} and {}",
                        Draft::Draft07.uri(),
                        Draft::Draft202012.uri()
                    ),
                )
            })?,
            Some(_) => {
                return Err(SchemaError::new(
                    SchemaErrorKind::InvalidSchema,
                    "/$schema",
                    "$schema must be a string".to_owned(),
                ));
            }
        };
        let id = value.get("$id").and_then(Value::as_str).map(str::to_owned);
        let mut doc = SchemaDocument {
            value,
            draft,
            id,
            refs: Vec::new(),
            anchors: HashMap::new(),
        };
        doc.index()?;
        doc.check_cycles()?;
        Ok(doc)
    }

    fn index(&mut self) -> Result<(), SchemaError> {
        let mut raw_refs = Vec::new();
        let mut anchors = HashMap::new();
        let mut bad = None;
        walk::for_each_subschema(&self.value, |at, schema| {
            let Value::Object(map) = schema else { return };
            match map.get("$ref") {
                Some(Value::String(r)) => raw_refs.push((at.to_owned(), r.clone())),
                Some(_) if bad.is_none() => {
                    bad = Some(SchemaError::new(
                        SchemaErrorKind::InvalidSchema,
                        pointer::push(at, "$ref"),
                        "$ref must be a string".to_owned(),
                    ));
                }
                _ => {}
            }
            if bad.is_none()
                && let Some(m) = map.get("multipleOf")
                && !m.as_f64().is_some_and(|m| m > 0.0)
            {
                bad = Some(SchemaError::new(
                    SchemaErrorKind::InvalidSchema,
                    pointer::push(at, "multipleOf"),
                    format!("multipleOf must be a number greater than 0, not {m}"),
                ));
            }
            if let Some(name) = anchor_name(schema) {
                anchors.insert(name.to_owned(), at.to_owned());
            }
        });
        if let Some(err) = bad {
            return Err(err);
        }
        self.anchors = anchors;
        let mut refs = Vec::with_capacity(raw_refs.len());
        for (at, reference) in raw_refs {
            let target = self.ref_target(&at, &reference)?;
            refs.push(RefSite {
                at,
                reference,
                target,
            });
        }
        self.refs = refs;
        Ok(())
    }

    /// Turns a `$ref` string into a pointer inside this document.
    fn ref_target(&self, at: &str, reference: &str) -> Result<String, SchemaError> {
        resolve_reference(&self.value, self.id.as_deref(), &self.anchors, reference).map_err(
            |problem| {
                let kind = match problem {
                    RefProblem::External => SchemaErrorKind::UnsupportedRef,
                    _ => SchemaErrorKind::UnresolvedRef,
                };
                SchemaError::new(
                    kind,
                    pointer::push(at, "$ref"),
                    format!("{reference:?} {}", problem.describe()),
                )
            },
        )
    }

    /// Finds cycles of in-place evaluation (`$ref`, `allOf`/`anyOf`/`oneOf`, `not`,
    /// `if`/`then`/`else`, `dependentSchemas`) that never descend into the instance.
    fn check_cycles(&self) -> Result<(), SchemaError> {
        let ref_targets: HashMap<&str, &str> = self
            .refs
            .iter()
            .map(|r| (r.at.as_str(), r.target.as_str()))
            .collect();
        // Only schemas that are the target of a reference can close a cycle.
        let mut state: HashMap<String, u8> = HashMap::new(); // 1 = on stack, 2 = done
        let targets: BTreeMap<&str, ()> =
            self.refs.iter().map(|r| (r.target.as_str(), ())).collect();
        for start in targets.keys() {
            if state.get(*start) == Some(&2) {
                continue;
            }
            // Iterative DFS: (pointer, successors, next index).
            let mut stack: Vec<(String, Vec<String>, usize)> = Vec::new();
            let succ = self.in_place_successors(start, &ref_targets);
            state.insert((*start).to_owned(), 1);
            stack.push(((*start).to_owned(), succ, 0));
            while let Some((node, succs, idx)) = stack.last_mut() {
                if *idx < succs.len() {
                    let next = succs[*idx].clone();
                    *idx += 1;
                    match state.get(&next) {
                        Some(1) => {
                            let via = node.clone();
                            let message = format!(
                                "reference cycle: #{via} leads back to #{next} without descending into the instance"
                            );
                            return Err(SchemaError::new(SchemaErrorKind::RefCycle, via, message));
                        }
                        Some(_) => {}
                        None => {
                            let s = self.in_place_successors(&next, &ref_targets);
                            state.insert(next.clone(), 1);
                            stack.push((next, s, 0));
                        }
                    }
                } else {
                    let done = node.clone();
                    state.insert(done, 2);
                    stack.pop();
                }
            }
        }
        Ok(())
    }

    fn in_place_successors(&self, at: &str, ref_targets: &HashMap<&str, &str>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(target) = ref_targets.get(at) {
            out.push((*target).to_owned());
        }
        let Some(Value::Object(map)) = pointer::resolve(&self.value, at) else {
            return out;
        };
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(items)) = map.get(key) {
                for i in 0..items.len() {
                    out.push(format!("{}/{i}", pointer::push(at, key)));
                }
            }
        }
        for key in ["not", "if", "then", "else"] {
            if map.get(key).is_some_and(Value::is_object) {
                out.push(pointer::push(at, key));
            }
        }
        for key in ["dependentSchemas", "dependencies"] {
            if let Some(Value::Object(entries)) = map.get(key) {
                let base = pointer::push(at, key);
                for (name, schema) in entries {
                    // Draft-07 `dependencies` also holds property lists, which apply nothing.
                    if schema.is_object() {
                        out.push(pointer::push(&base, name));
                    }
                }
            }
        }
        out
    }

    /// The whole document.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Takes the document apart.
    pub fn into_value(self) -> Value {
        self.value
    }

    /// The dialect of the document.
    pub fn draft(&self) -> Draft {
        self.draft
    }

    /// The document's `$id`, if any.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Every `$ref` of the document with its resolved target, in document order.
    pub fn refs(&self) -> &[RefSite] {
        &self.refs
    }

    /// The keyword that holds this document's definitions: `$defs` when present, else
    /// `definitions` when present, else the draft's own keyword.
    pub fn definitions_keyword(&self) -> &'static str {
        if self.value.get("$defs").is_some() {
            "$defs"
        } else if self.value.get("definitions").is_some() {
            "definitions"
        } else {
            self.draft.definitions_keyword()
        }
    }

    /// The named definitions, in document order.
    pub fn definitions(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.value
            .get(self.definitions_keyword())
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// One definition by name.
    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.value.get(self.definitions_keyword())?.get(name)
    }

    /// The JSON Pointer of a definition (`/$defs/Name` or `/definitions/Name`).
    pub fn definition_pointer(&self, name: &str) -> Result<String, SchemaError> {
        if self.definition(name).is_none() {
            return Err(SchemaError::new(
                SchemaErrorKind::UnknownDefinition,
                "",
                format!(
                    "no definition named {name:?} in {}",
                    self.definitions_keyword()
                ),
            ));
        }
        Ok(pointer::push(
            &format!("/{}", self.definitions_keyword()),
            name,
        ))
    }

    /// Resolves a JSON Pointer inside the document.
    pub fn resolve_pointer(&self, ptr: &str) -> Option<&Value> {
        pointer::resolve(&self.value, ptr)
    }

    /// Follows a `$ref` written at schema location `at`.
    pub fn resolve_ref(&self, at: &str, reference: &str) -> Result<(String, &Value), SchemaError> {
        let target = self.ref_target(at, reference)?;
        let value = pointer::resolve(&self.value, &target).ok_or_else(|| {
            SchemaError::new(
                SchemaErrorKind::UnresolvedRef,
                at,
                format!("{reference:?} does not resolve"),
            )
        })?;
        Ok((target, value))
    }

    /// Canonical text of the document (`JSON.stringify(doc, null, 2)`).
    pub fn canonical_text(&self, trailing_newline: bool) -> String {
        canonical::canonical_text(&self.value, trailing_newline)
    }

    /// The protocol digest of the document.
    pub fn digest(&self) -> Digest {
        canonical::digest(&self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(v: Value) -> Result<SchemaDocument, SchemaError> {
        SchemaDocument::from_value(v)
    }

    #[test]
    fn detects_drafts() {
        let d = load(json!({"$schema": "http://json-schema.org/draft-07/schema#"})).unwrap();
        assert_eq!(d.draft(), Draft::Draft07);
        let d = load(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})).unwrap();
        assert_eq!(d.draft(), Draft::Draft202012);
        assert_eq!(load(json!({})).unwrap().draft(), Draft::Draft202012);
        let err = load(json!({"$schema": "http://json-schema.org/draft-04/schema#"})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::UnknownDraft);
        assert_eq!(err.pointer, "/$schema");
    }

    #[test]
    fn resolves_local_refs_with_escapes_and_id() {
        let d = load(json!({
            "$id": "https://example.com/p.json",
            "$defs": {"a/b": {"type": "string"}, "m~n": {"$ref": "https://example.com/p.json#/$defs/a~1b"}},
            "properties": {"x": {"$ref": "#/$defs/m~0n"}, "y": {"$ref": "#/$defs/a%7E1b"}}
        }))
        .unwrap();
        let targets: Vec<_> = d.refs().iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, ["/$defs/a~1b", "/$defs/m~0n", "/$defs/a~1b"]);
    }

    #[test]
    fn unresolved_ref_names_its_location() {
        let err = load(json!({"properties": {"x": {"$ref": "#/$defs/Missing"}}})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::UnresolvedRef);
        assert_eq!(err.pointer, "/properties/x/$ref");
    }

    #[test]
    fn external_refs_are_unsupported() {
        let err = load(json!({"$ref": "other.json#/x"})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::UnsupportedRef);
    }

    #[test]
    fn ref_cycles_are_errors_but_recursion_is_not() {
        let err = load(
            json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}}),
        )
        .unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::RefCycle);
        load(json!({"$defs": {"Tree": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}))
            .unwrap();
        let err = load(json!({"$defs": {"Self": {"$ref": "#/$defs/Self"}}})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::RefCycle);
    }

    #[test]
    fn a_cycle_at_the_root_names_it_as_a_fragment() {
        let err = load(json!({"$ref": "#"})).unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::RefCycle);
        assert_eq!(
            err.to_string(),
            "schema.ref-cycle: reference cycle: # leads back to # without descending into the instance"
        );
        let err = load(json!({"$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}}})).unwrap_err();
        assert_eq!(
            err.message,
            "reference cycle: #/$defs/A/allOf/0 leads back to #/$defs/A without descending into the instance"
        );
    }

    #[test]
    fn multiple_of_must_be_positive() {
        for bad in [json!(0), json!(-2), json!(-0.5), json!("1")] {
            let err = load(json!({"properties": {"n": {"multipleOf": bad}}})).unwrap_err();
            assert_eq!(err.kind, SchemaErrorKind::InvalidSchema, "{bad}");
            assert_eq!(err.pointer, "/properties/n/multipleOf");
            assert_eq!(
                err.message,
                format!("multipleOf must be a number greater than 0, not {bad}")
            );
        }
        load(json!({"multipleOf": 0.01})).unwrap();
    }

    #[test]
    fn draft07_dependencies_can_close_a_cycle() {
        let err = load(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"A": {"dependencies": {"x": {"$ref": "#/definitions/A"}, "y": ["z"]}}},
            "$ref": "#/definitions/A"
        }))
        .unwrap_err();
        assert_eq!(err.kind, SchemaErrorKind::RefCycle);
    }

    #[test]
    fn draft07_plain_name_ids_are_anchors() {
        let d = load(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"A": {"$id": "#item", "type": "string"}},
            "properties": {"a": {"$ref": "#item"}}
        }))
        .unwrap();
        assert_eq!(d.refs()[0].target, "/definitions/A");
    }

    #[test]
    fn anchors_resolve() {
        let d = load(json!({"$defs": {"A": {"$anchor": "thing"}}, "$ref": "#thing"})).unwrap();
        assert_eq!(d.refs()[0].target, "/$defs/A");
    }

    #[test]
    fn vendor_data_is_not_walked() {
        load(json!({"x-meta": {"$ref": "#/nowhere"}, "methods": {"a": {"$ref": 3}}})).unwrap();
    }
}

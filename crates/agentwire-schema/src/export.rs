//! Export: converting a schema document between draft-07 and 2020-12 without changing what it
//! accepts, and checking the result against the target draft's metaschema.
//!
//! What moves: `definitions` ↔ `$defs`, array-form `items` + `additionalItems` ↔ `prefixItems` +
//! `items`, `dependencies` ↔ `dependentRequired`/`dependentSchemas`, plain-name `$id` ↔
//! `$anchor`, and every `$ref` (and `discriminator.mapping` entry) that points through a moved
//! keyword, with the reference's other tokens kept exactly as written (escapes included).
//! Keyword order is kept, so converting there and back gives the original document. Data
//! (`const`, `enum`, `default`, `examples`, vendor `x-*` keys, OpenClaw's `methods`, unknown
//! keywords) is copied as it is. What the target draft cannot say is an error with the pointer
//! of the culprit, never silently dropped.

use std::fmt;

use serde_json::{Map, Value};

use crate::document::{Draft, SchemaDocument};
use crate::json::MAX_JSON_DEPTH;
use crate::pointer;
use crate::walk;

/// Why a document cannot be exported to a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportErrorKind {
    /// A keyword with no equivalent in the target draft (`unevaluatedProperties`,
    /// `$dynamicRef` … into draft-07).
    Inexpressible,
    /// A keyword of the other draft, which the source draft ignores but the target draft would
    /// enforce (`prefixItems` in a draft-07 document), or a form the source draft does not allow.
    ForeignKeyword,
    /// Draft-07 ignores the keywords beside a `$ref`; 2020-12 would enforce them.
    RefSiblings,
    /// One schema holds both `definitions` and `$defs`, which would collide.
    DefinitionsConflict,
    /// Schemas nested deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
    /// The converted document does not validate against the target draft's metaschema.
    Metaschema,
}

impl ExportErrorKind {
    /// Stable code of the error.
    pub fn code(self) -> &'static str {
        match self {
            ExportErrorKind::Inexpressible => "export.inexpressible",
            ExportErrorKind::ForeignKeyword => "export.foreign-keyword",
            ExportErrorKind::RefSiblings => "export.ref-siblings",
            ExportErrorKind::DefinitionsConflict => "export.definitions-conflict",
            ExportErrorKind::TooDeep => "export.too-deep",
            ExportErrorKind::Metaschema => "export.metaschema",
        }
    }
}

/// A document that cannot be exported, with the JSON Pointer of the culprit in the source
/// document (in the exported document for [`ExportErrorKind::Metaschema`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportError {
    /// What went wrong.
    pub kind: ExportErrorKind,
    /// JSON Pointer of the culprit.
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl ExportError {
    fn new(kind: ExportErrorKind, pointer: impl Into<String>, message: String) -> Self {
        ExportError {
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

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}: {}", self.code(), self.message)
        } else {
            write!(f, "{} at {}: {}", self.code(), self.pointer, self.message)
        }
    }
}

impl std::error::Error for ExportError {}

/// Converts a document to `target`, sets its `$schema`, and checks the result against the
/// target draft's metaschema.
pub fn export(doc: &SchemaDocument, target: Draft) -> Result<Value, ExportError> {
    let source = doc.draft();
    let mut out = if source == target {
        doc.value().clone()
    } else {
        let converter = Converter {
            root: doc.value(),
            target,
        };
        converter.schema(doc.value(), "", 0)?
    };
    if let Value::Object(map) = &mut out {
        set_schema_uri(map, target);
    }
    check_metaschema(&out, target)?;
    Ok(out)
}

/// Checks a document against the metaschema of `draft`.
pub fn check_metaschema(value: &Value, draft: Draft) -> Result<(), ExportError> {
    let validator = match draft {
        Draft::Draft07 => jsonschema::draft7::meta::validator(),
        Draft::Draft202012 => jsonschema::draft202012::meta::validator(),
    };
    validator.validate(value).map_err(|err| {
        ExportError::new(
            ExportErrorKind::Metaschema,
            err.instance_path().as_str().to_owned(),
            format!(
                "the {} metaschema rejects the document: {err}",
                draft_title(draft)
            ),
        )
    })
}

fn set_schema_uri(map: &mut Map<String, Value>, target: Draft) {
    let uri = Value::String(target.uri().to_owned());
    if let Some(existing) = map.get_mut("$schema") {
        *existing = uri;
    } else {
        map.shift_insert(0, "$schema".to_owned(), uri);
    }
}

fn draft_title(draft: Draft) -> &'static str {
    match draft {
        Draft::Draft07 => "draft-07",
        Draft::Draft202012 => "2020-12",
    }
}

/// Keywords that annotate a schema and change nothing about what it accepts.
pub(crate) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// Keywords that exist only in 2020-12 and have no draft-07 spelling.
const ONLY_202012: &[&str] = &[
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "minContains",
    "maxContains",
    "contentSchema",
    "$recursiveRef",
    "$recursiveAnchor",
];

/// 2020-12 keywords that a draft-07 document may carry as inert data but a 2020-12 validator
/// would enforce.
const FOREIGN_IN_07: &[&str] = &[
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$anchor",
    "$vocabulary",
    "minContains",
    "maxContains",
    "contentSchema",
];

/// Draft-07 keywords that a 2020-12 document may carry as inert data but a draft-07 validator
/// would enforce.
const FOREIGN_IN_202012: &[&str] = &["additionalItems", "dependencies"];

struct Converter<'v> {
    root: &'v Value,
    target: Draft,
}

impl Converter<'_> {
    fn schema(&self, schema: &Value, at: &str, depth: usize) -> Result<Value, ExportError> {
        if depth > MAX_JSON_DEPTH {
            return Err(ExportError::new(
                ExportErrorKind::TooDeep,
                at,
                format!("schemas nest deeper than {MAX_JSON_DEPTH} levels"),
            ));
        }
        let Value::Object(map) = schema else {
            return Ok(schema.clone());
        };
        match self.target {
            Draft::Draft202012 => self.to_202012(map, at, depth),
            Draft::Draft07 => self.to_07(map, at, depth),
        }
    }

    fn to_202012(
        &self,
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<Value, ExportError> {
        if map.contains_key("definitions") && map.contains_key("$defs") {
            return Err(conflict(at));
        }
        if let Some(key) = map.keys().find(|k| FOREIGN_IN_07.contains(&k.as_str())) {
            return Err(ExportError::new(
                ExportErrorKind::ForeignKeyword,
                pointer::push(at, key),
                format!(
                    "{key} is not a draft-07 keyword, so this document ignores it, but 2020-12 would enforce it"
                ),
            ));
        }
        if map.contains_key("$ref")
            && let Some(key) = map.keys().find(|k| !ref_sibling_is_inert(k))
        {
            return Err(ExportError::new(
                ExportErrorKind::RefSiblings,
                pointer::push(at, key),
                format!("draft-07 ignores {key} beside $ref, but 2020-12 would enforce it"),
            ));
        }
        let array_items = map.get("items").is_some_and(Value::is_array);
        if map.contains_key("additionalItems") && !array_items {
            return Err(ExportError::new(
                ExportErrorKind::ForeignKeyword,
                pointer::push(at, "additionalItems"),
                "additionalItems has no effect unless items is an array, and 2020-12 has no place for it; remove it".to_owned(),
            ));
        }
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            let here = pointer::push(at, key);
            match key.as_str() {
                "definitions" => {
                    out.insert("$defs".to_owned(), self.schema_map(value, &here, depth)?);
                }
                "items" if array_items => {
                    out.insert(
                        "prefixItems".to_owned(),
                        self.schema_array(value, &here, depth)?,
                    );
                }
                "additionalItems" => {
                    out.insert("items".to_owned(), self.schema(value, &here, depth + 1)?);
                }
                "dependencies" => {
                    let Value::Object(entries) = value else {
                        out.insert(key.clone(), value.clone());
                        continue;
                    };
                    let mut required = Map::new();
                    let mut schemas = Map::new();
                    for (name, entry) in entries {
                        if entry.is_array() {
                            required.insert(name.clone(), entry.clone());
                        } else {
                            schemas.insert(
                                name.clone(),
                                self.schema(entry, &pointer::push(&here, name), depth + 1)?,
                            );
                        }
                    }
                    if !required.is_empty() || schemas.is_empty() {
                        out.insert("dependentRequired".to_owned(), Value::Object(required));
                    }
                    if !schemas.is_empty() {
                        out.insert("dependentSchemas".to_owned(), Value::Object(schemas));
                    }
                }
                "$id" => match value.as_str().and_then(plain_name_fragment) {
                    Some(name) => {
                        out.insert("$anchor".to_owned(), Value::String(name.to_owned()));
                    }
                    None => {
                        out.insert(key.clone(), value.clone());
                    }
                },
                _ => {
                    out.insert(key.clone(), self.common(key, value, &here, depth)?);
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn to_07(
        &self,
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<Value, ExportError> {
        if map.contains_key("definitions") && map.contains_key("$defs") {
            return Err(conflict(at));
        }
        if let Some(key) = map.keys().find(|k| ONLY_202012.contains(&k.as_str())) {
            return Err(ExportError::new(
                ExportErrorKind::Inexpressible,
                pointer::push(at, key),
                format!("{key} has no draft-07 equivalent"),
            ));
        }
        if let Some(key) = map.keys().find(|k| FOREIGN_IN_202012.contains(&k.as_str())) {
            return Err(ExportError::new(
                ExportErrorKind::ForeignKeyword,
                pointer::push(at, key),
                format!(
                    "{key} is not a 2020-12 keyword, so this document ignores it, but draft-07 would enforce it"
                ),
            ));
        }
        if map.get("items").is_some_and(Value::is_array) {
            return Err(ExportError::new(
                ExportErrorKind::ForeignKeyword,
                pointer::push(at, "items"),
                "array-form items is not 2020-12 (use prefixItems)".to_owned(),
            ));
        }
        if map.contains_key("$anchor") && map.contains_key("$id") {
            return Err(ExportError::new(
                ExportErrorKind::Inexpressible,
                pointer::push(at, "$anchor"),
                "draft-07 spells an anchor as $id, which this schema already has".to_owned(),
            ));
        }
        let has_prefix = map.contains_key("prefixItems");
        // Draft-07 ignores everything beside $ref, so a $ref with assertions beside it moves
        // into allOf, where draft-07 evaluates it alongside them.
        let wrap_ref = map.contains_key("$ref") && map.keys().any(|k| !ref_sibling_is_inert(k));
        let mut dependencies_done = false;
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            let here = pointer::push(at, key);
            match key.as_str() {
                "$defs" => {
                    out.insert(
                        "definitions".to_owned(),
                        self.schema_map(value, &here, depth)?,
                    );
                }
                "prefixItems" => {
                    out.insert("items".to_owned(), self.schema_array(value, &here, depth)?);
                }
                "items" if has_prefix => {
                    out.insert(
                        "additionalItems".to_owned(),
                        self.schema(value, &here, depth + 1)?,
                    );
                }
                "dependentRequired" | "dependentSchemas" => {
                    if !dependencies_done {
                        dependencies_done = true;
                        out.insert(
                            "dependencies".to_owned(),
                            self.merge_dependencies(map, at, depth)?,
                        );
                    }
                }
                "$anchor" => match value {
                    Value::String(name) => {
                        out.insert("$id".to_owned(), Value::String(format!("#{name}")));
                    }
                    _ => {
                        out.insert(key.clone(), value.clone());
                    }
                },
                "$ref" if wrap_ref => {
                    let reference = Value::Object(
                        std::iter::once((key.clone(), self.reference(value))).collect(),
                    );
                    if !map.contains_key("allOf") {
                        out.insert("allOf".to_owned(), Value::Array(vec![reference]));
                    }
                }
                "allOf" if wrap_ref => {
                    let mut items = match self.schema_array(value, &here, depth)? {
                        Value::Array(items) => items,
                        other => vec![other],
                    };
                    if let Some(reference) = map.get("$ref") {
                        items.push(Value::Object(
                            std::iter::once(("$ref".to_owned(), self.reference(reference)))
                                .collect(),
                        ));
                    }
                    out.insert(key.clone(), Value::Array(items));
                }
                _ => {
                    out.insert(key.clone(), self.common(key, value, &here, depth)?);
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// `dependentRequired` and `dependentSchemas` as one draft-07 `dependencies`, names in the
    /// order they first appear. A name in both becomes `allOf` of its `required` and its schema.
    fn merge_dependencies(
        &self,
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<Value, ExportError> {
        let mut merged = Map::new();
        for key in map
            .keys()
            .filter(|k| matches!(k.as_str(), "dependentRequired" | "dependentSchemas"))
        {
            let Some(Value::Object(entries)) = map.get(key) else {
                return Err(ExportError::new(
                    ExportErrorKind::Inexpressible,
                    pointer::push(at, key),
                    format!("{key} must be an object"),
                ));
            };
            let base = pointer::push(at, key);
            for (name, entry) in entries {
                let entry = if key == "dependentSchemas" {
                    self.schema(entry, &pointer::push(&base, name), depth + 1)?
                } else {
                    entry.clone()
                };
                match merged.get_mut(name) {
                    None => {
                        merged.insert(name.clone(), entry);
                    }
                    Some(existing) => {
                        let (required, schema) = if key == "dependentSchemas" {
                            (existing.clone(), entry)
                        } else {
                            (entry, existing.clone())
                        };
                        let required = Value::Object(
                            std::iter::once(("required".to_owned(), required)).collect(),
                        );
                        *existing = Value::Object(
                            std::iter::once((
                                "allOf".to_owned(),
                                Value::Array(vec![required, schema]),
                            ))
                            .collect(),
                        );
                    }
                }
            }
        }
        Ok(Value::Object(merged))
    }

    /// A keyword both drafts spell alike: subschemas are converted, references rewritten, data
    /// copied.
    fn common(
        &self,
        key: &str,
        value: &Value,
        here: &str,
        depth: usize,
    ) -> Result<Value, ExportError> {
        if key == "$ref" {
            return Ok(self.reference(value));
        }
        if key == "discriminator" {
            return Ok(self.discriminator(value));
        }
        if walk::SINGLE_SUBSCHEMA_KEYWORDS.contains(&key) || key == "items" {
            return self.schema(value, here, depth + 1);
        }
        if walk::ARRAY_SUBSCHEMA_KEYWORDS.contains(&key) {
            return self.schema_array(value, here, depth);
        }
        if walk::MAP_SUBSCHEMA_KEYWORDS.contains(&key) {
            return self.schema_map(value, here, depth);
        }
        Ok(value.clone())
    }

    fn schema_array(&self, value: &Value, here: &str, depth: usize) -> Result<Value, ExportError> {
        let Value::Array(items) = value else {
            return Ok(value.clone());
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.schema(item, &format!("{here}/{i}"), depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }

    fn schema_map(&self, value: &Value, here: &str, depth: usize) -> Result<Value, ExportError> {
        let Value::Object(entries) = value else {
            return Ok(value.clone());
        };
        let mut out = Map::with_capacity(entries.len());
        for (name, item) in entries {
            out.insert(
                name.clone(),
                self.schema(item, &pointer::push(here, name), depth + 1)?,
            );
        }
        Ok(Value::Object(out))
    }

    fn discriminator(&self, value: &Value) -> Value {
        let mut value = value.clone();
        if let Some(Value::Object(mapping)) = value.get_mut("mapping") {
            for target in mapping.values_mut() {
                *target = self.reference(target);
            }
        }
        value
    }

    fn reference(&self, value: &Value) -> Value {
        match value {
            Value::String(reference) => Value::String(self.translate_ref(reference)),
            other => other.clone(),
        }
    }

    /// Rewrites the JSON Pointer fragment of a reference for the target draft: only the tokens
    /// naming a moved keyword change; every other token keeps its escapes as written.
    fn translate_ref(&self, reference: &str) -> String {
        let Some((base, fragment)) = reference.split_once('#') else {
            return reference.to_owned();
        };
        let Some(rest) = fragment.strip_prefix('/') else {
            return reference.to_owned();
        };
        let raw: Vec<&str> = rest.split('/').collect();
        let mut tokens: Vec<String> = Vec::with_capacity(raw.len());
        let mut node = Node::Schema(self.root);
        let mut i = 0;
        while i < raw.len() {
            let Some(token) =
                pointer::percent_decode(raw[i]).and_then(|t| pointer::unescape_token(&t))
            else {
                tokens.extend(raw[i..].iter().map(|t| (*t).to_owned()));
                break;
            };
            let step = self.step(node, &token, raw.get(i + 1).copied());
            tokens.push(
                step.renamed
                    .map_or_else(|| raw[i].to_owned(), str::to_owned),
            );
            i += 1;
            if !step.then.is_empty()
                && let Some(name_raw) = raw.get(i)
            {
                tokens.push((*name_raw).to_owned());
                tokens.extend(step.then.iter().map(|t| (*t).to_owned()));
                i += 1;
            }
            let next = step.next;
            node = next;
        }
        format!("{base}#/{}", tokens.join("/"))
    }

    /// One step of a pointer from `node` through `token`: the new spelling of the token (when
    /// it changes), tokens to insert after the following one, and where the step lands.
    fn step<'v>(&self, node: Node<'v>, token: &str, next_raw: Option<&str>) -> Step<'v> {
        match node {
            Node::Schema(Value::Object(map)) => {
                let child = map.get(token);
                let as_schema = |v: Option<&'v Value>| v.map_or(Node::Data, Node::Schema);
                let as_list = |v: Option<&'v Value>| v.map_or(Node::Data, Node::SchemaList);
                match (self.target, token) {
                    (Draft::Draft202012, "definitions") => Step::renamed("$defs", as_list(child)),
                    (Draft::Draft202012, "items") if child.is_some_and(Value::is_array) => {
                        Step::renamed("prefixItems", as_list(child))
                    }
                    (Draft::Draft202012, "additionalItems")
                        if map.get("items").is_some_and(Value::is_array) =>
                    {
                        Step::renamed("items", as_schema(child))
                    }
                    (Draft::Draft202012, "dependencies") => {
                        let entry = next_raw
                            .and_then(pointer::percent_decode)
                            .and_then(|t| pointer::unescape_token(&t))
                            .and_then(|name| child.and_then(|c| c.get(&name)));
                        match entry {
                            Some(Value::Array(_)) => Step::renamed("dependentRequired", Node::Data),
                            _ => Step::renamed("dependentSchemas", as_list(child)),
                        }
                    }
                    (Draft::Draft07, "$defs") => Step::renamed("definitions", as_list(child)),
                    (Draft::Draft07, "prefixItems") => Step::renamed("items", as_list(child)),
                    (Draft::Draft07, "items") if map.contains_key("prefixItems") => {
                        Step::renamed("additionalItems", as_schema(child))
                    }
                    (Draft::Draft07, "dependentRequired") => {
                        Step::renamed("dependencies", Node::Data)
                    }
                    (Draft::Draft07, "dependentSchemas") => {
                        let name = next_raw
                            .and_then(pointer::percent_decode)
                            .and_then(|t| pointer::unescape_token(&t));
                        let in_both = name.as_deref().is_some_and(|n| {
                            map.get("dependentRequired")
                                .is_some_and(|r| r.get(n).is_some())
                        });
                        if in_both {
                            let schema = name.and_then(|n| child.and_then(|c| c.get(&n)));
                            Step::then("dependencies", &["allOf", "1"], as_schema(schema))
                        } else {
                            Step::renamed("dependencies", as_list(child))
                        }
                    }
                    (_, key)
                        if walk::SINGLE_SUBSCHEMA_KEYWORDS.contains(&key) || key == "items" =>
                    {
                        match child {
                            Some(Value::Array(_)) => Step::same(as_list(child)),
                            _ => Step::same(as_schema(child)),
                        }
                    }
                    (_, key)
                        if walk::ARRAY_SUBSCHEMA_KEYWORDS.contains(&key)
                            || walk::MAP_SUBSCHEMA_KEYWORDS.contains(&key)
                            || key == "dependencies" =>
                    {
                        Step::same(as_list(child))
                    }
                    _ => Step::same(Node::Data),
                }
            }
            Node::SchemaList(list) => {
                let child = match list {
                    Value::Object(entries) => entries.get(token),
                    Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
                    _ => None,
                };
                Step::same(child.map_or(Node::Data, Node::Schema))
            }
            _ => Step::same(Node::Data),
        }
    }
}

/// One step of a pointer being translated.
struct Step<'v> {
    /// The new spelling of the token, when it changes.
    renamed: Option<&'static str>,
    /// Tokens to insert after the token that follows (a name that moves into `allOf`).
    then: &'static [&'static str],
    /// Where the step lands.
    next: Node<'v>,
}

impl<'v> Step<'v> {
    fn same(next: Node<'v>) -> Self {
        Step {
            renamed: None,
            then: &[],
            next,
        }
    }

    fn renamed(to: &'static str, next: Node<'v>) -> Self {
        Step {
            renamed: Some(to),
            then: &[],
            next,
        }
    }

    fn then(to: &'static str, then: &'static [&'static str], next: Node<'v>) -> Self {
        Step {
            renamed: Some(to),
            then,
            next,
        }
    }
}

/// Where a pointer stands while it is translated.
#[derive(Clone, Copy)]
enum Node<'v> {
    /// A schema.
    Schema(&'v Value),
    /// An array or a name → schema map of schemas.
    SchemaList(&'v Value),
    /// Anything else: the rest of the pointer is copied as written.
    Data,
}

fn conflict(at: &str) -> ExportError {
    ExportError::new(
        ExportErrorKind::DefinitionsConflict,
        at,
        "the schema has both definitions and $defs; merge them first".to_owned(),
    )
}

/// Keys that may sit beside `$ref` without meaning anything to a draft-07 validator.
fn ref_sibling_is_inert(key: &str) -> bool {
    key == "$ref"
        || ANNOTATIONS.contains(&key)
        || key.starts_with("x-")
        || matches!(
            key,
            "$schema" | "$id" | "definitions" | "$defs" | "discriminator" | "methods"
        )
}

/// The name of a plain-name fragment `$id` (`#foo`), draft-07's way of writing an anchor.
fn plain_name_fragment(id: &str) -> Option<&str> {
    let name = id.strip_prefix('#')?;
    (!name.is_empty() && !name.starts_with('/')).then_some(name)
}

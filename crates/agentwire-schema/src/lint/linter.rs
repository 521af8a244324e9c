//! The linter: one walk over a schema document (or a value that does not load) that applies
//! every rule and collects its findings.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::document::{self, Draft, RefProblem};
use crate::json::MAX_JSON_DEPTH;
use crate::lint::{DefinitionRoots, Finding, LintCode};
use crate::pointer;
use crate::walk;

/// Keywords both drafts know, including the annotations.
pub(super) const COMMON_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "items",
    "maxItems",
    "minItems",
    "uniqueItems",
    "contains",
    "maxProperties",
    "minProperties",
    "required",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "format",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords only draft-07 has.
pub(super) const DRAFT07_ONLY: &[&str] = &["definitions", "dependencies", "additionalItems"];

/// Keywords only 2020-12 has.
pub(super) const DRAFT202012_ONLY: &[&str] = &[
    "$defs",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedItems",
    "unevaluatedProperties",
    "minContains",
    "maxContains",
    "contentSchema",
];

/// Keys that are not JSON Schema keywords but carry protocol data the toolkit understands.
/// `methods` is only known at the root (OpenClaw's method table).
pub(super) const VENDOR_KEYWORDS: &[&str] = &["discriminator"];

pub(super) const JSON_TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Unreferenced definitions beyond this share (in percent) make a document a registry.
pub const REGISTRY_UNREFERENCED_PERCENT: usize = 50;

/// Where a reference points, or why it does not.
pub(super) enum RefTarget {
    Pointer(String),
    External,
    Unresolved(String),
}

pub(super) struct Linter<'v> {
    root: &'v Value,
    draft: Option<Draft>,
    id: Option<&'v str>,
    anchors: HashMap<String, String>,
    /// Pointers of every subschema, to tell keywords from property names.
    schemas: HashSet<String>,
    definitions: DefinitionRoots,
    findings: Vec<Finding>,
}

impl<'v> Linter<'v> {
    pub(super) fn new(
        root: &'v Value,
        draft: Option<Draft>,
        id: Option<&'v str>,
        definitions: DefinitionRoots,
    ) -> Self {
        let mut anchors = HashMap::new();
        let mut schemas = HashSet::new();
        walk::for_each_subschema(root, |at, schema| {
            schemas.insert(at.to_owned());
            if let Some(name) = document::anchor_name(schema) {
                anchors.insert(name.to_owned(), at.to_owned());
            }
        });
        Linter {
            root,
            draft,
            id,
            anchors,
            schemas,
            definitions,
            findings: Vec::new(),
        }
    }

    fn push(&mut self, code: LintCode, at: impl Into<String>, message: String) {
        self.findings.push(Finding::new(code, at, message));
    }

    pub(super) fn run(mut self) -> Vec<Finding> {
        let root = self.root;
        walk::for_each_subschema(root, |at, schema| self.check_schema(at, schema));
        self.check_definitions();
        self.findings
    }

    fn resolve(&self, reference: &str) -> RefTarget {
        match document::resolve_reference(self.root, self.id, &self.anchors, reference) {
            Ok(target) => RefTarget::Pointer(target),
            Err(RefProblem::External) => RefTarget::External,
            Err(problem) => RefTarget::Unresolved(problem.describe()),
        }
    }

    fn check_schema(&mut self, at: &str, schema: &Value) {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(_) => return,
            other => {
                self.push(
                    LintCode::MalformedKeyword,
                    at,
                    format!(
                        "a schema must be an object or a boolean, not {}",
                        kind_of(other)
                    ),
                );
                return;
            }
        };
        self.check_keywords(at, map);
        self.check_shapes(at, map);
        self.check_ref(at, map);
        self.check_discriminator(at, map);
        self.check_type(at, map);
        self.check_bounds(at, map);
        self.check_patterns(at, map);
        self.check_enum(at, map);
        self.check_required(at, map);
        self.check_open_object(at, map);
    }

    fn check_keywords(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(draft) = self.draft else { return };
        let (own, other, other_name) = match draft {
            Draft::Draft07 => (DRAFT07_ONLY, DRAFT202012_ONLY, "2020-12"),
            Draft::Draft202012 => (DRAFT202012_ONLY, DRAFT07_ONLY, "draft-07"),
        };
        for (key, value) in map {
            let key = key.as_str();
            let here = pointer::push(at, key);
            if key == "items" && value.is_array() && draft == Draft::Draft202012 {
                self.push(
                    LintCode::OtherDraftKeyword,
                    here,
                    "array-form items is draft-07; 2020-12 spells it prefixItems".to_owned(),
                );
                continue;
            }
            if COMMON_KEYWORDS.contains(&key)
                || own.contains(&key)
                || VENDOR_KEYWORDS.contains(&key)
                || key.starts_with("x-")
                || (at.is_empty() && key == "methods")
            {
                continue;
            }
            if other.contains(&key) {
                self.push(
                    LintCode::OtherDraftKeyword,
                    here,
                    format!(
                        "{key} is a {other_name} keyword; {} ignores it",
                        draft_title(draft)
                    ),
                );
            } else {
                self.push(
                    LintCode::UnknownKeyword,
                    here,
                    format!(
                        "{key} is not a {} keyword (vendor data belongs under an x- key)",
                        draft_title(draft)
                    ),
                );
            }
        }
    }

    fn check_shapes(&mut self, at: &str, map: &Map<String, Value>) {
        for (key, value) in map {
            let key = key.as_str();
            let here = || pointer::push(at, key);
            if walk::SINGLE_SUBSCHEMA_KEYWORDS.contains(&key) && !walk::is_schema(value) {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be a schema (an object or a boolean)"),
                );
            } else if walk::ARRAY_SUBSCHEMA_KEYWORDS.contains(&key) && !value.is_array() {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be an array of schemas"),
                );
            } else if walk::MAP_SUBSCHEMA_KEYWORDS.contains(&key) && !value.is_object() {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be an object whose values are schemas"),
                );
            } else if key == "items" && !walk::is_schema(value) && !value.is_array() {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    "items must be a schema or an array of schemas".to_owned(),
                );
            } else if matches!(key, "enum" | "required") && !value.is_array() {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be an array"),
                );
            } else if matches!(key, "pattern" | "$anchor" | "$id" | "$comment" | "format")
                && !value.is_string()
            {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be a string"),
                );
            } else if matches!(
                key,
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
            ) && !value.is_number()
            {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be a number"),
                );
            } else if key == "multipleOf" && !value.as_f64().is_some_and(|n| n > 0.0) {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    "multipleOf must be a number greater than 0".to_owned(),
                );
            } else if is_count_keyword(key) && count(value).is_none() {
                self.push(
                    LintCode::MalformedKeyword,
                    here(),
                    format!("{key} must be a non-negative integer"),
                );
            }
        }
        if let Some(Value::Array(names)) = map.get("required") {
            let mut seen = HashSet::new();
            for (i, name) in names.iter().enumerate() {
                let here = format!("{}/{i}", pointer::push(at, "required"));
                match name {
                    Value::String(name) if !seen.insert(name.as_str()) => self.push(
                        LintCode::MalformedKeyword,
                        here,
                        format!("required lists {name:?} twice"),
                    ),
                    Value::String(_) => {}
                    _ => self.push(
                        LintCode::MalformedKeyword,
                        here,
                        "required names must be strings".to_owned(),
                    ),
                }
            }
        }
    }

    fn check_ref(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(reference) = map.get("$ref") else {
            return;
        };
        let here = pointer::push(at, "$ref");
        let Value::String(reference) = reference else {
            self.push(
                LintCode::MalformedKeyword,
                here,
                "$ref must be a string".to_owned(),
            );
            return;
        };
        self.report_ref(here, reference);
    }

    fn report_ref(&mut self, here: String, reference: &str) {
        match self.resolve(reference) {
            RefTarget::Pointer(_) => {}
            RefTarget::External => self.push(
                LintCode::ExternalRef,
                here,
                format!("{reference:?} points into another document; only references inside this document are followed"),
            ),
            RefTarget::Unresolved(why) => {
                self.push(LintCode::UnresolvedRef, here, format!("{reference:?} {why}"));
            }
        }
    }

    fn check_discriminator(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(Value::Object(mapping)) = map.get("discriminator").and_then(|d| d.get("mapping"))
        else {
            return;
        };
        let base = pointer::push(&pointer::push(at, "discriminator"), "mapping");
        for (name, target) in mapping {
            let here = pointer::push(&base, name);
            match target {
                Value::String(reference) => self.report_ref(here, reference),
                _ => self.push(
                    LintCode::MalformedKeyword,
                    here,
                    "a discriminator mapping value must be a reference string".to_owned(),
                ),
            }
        }
    }

    fn check_type(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(ty) = map.get("type") else { return };
        let here = pointer::push(at, "type");
        match ty {
            Value::String(name) => {
                if !JSON_TYPES.contains(&name.as_str()) {
                    self.push(LintCode::InvalidType, here, invalid_type_message(name));
                }
            }
            Value::Array(names) => {
                let mut seen = HashSet::new();
                for (i, name) in names.iter().enumerate() {
                    let item = format!("{here}/{i}");
                    match name {
                        Value::String(name) if !JSON_TYPES.contains(&name.as_str()) => {
                            self.push(LintCode::InvalidType, item, invalid_type_message(name));
                        }
                        Value::String(name) if !seen.insert(name.as_str()) => self.push(
                            LintCode::MalformedKeyword,
                            item,
                            format!("type lists {name:?} twice"),
                        ),
                        Value::String(_) => {}
                        _ => self.push(
                            LintCode::MalformedKeyword,
                            item,
                            "type names must be strings".to_owned(),
                        ),
                    }
                }
            }
            _ => self.push(
                LintCode::MalformedKeyword,
                here,
                "type must be a type name or an array of type names".to_owned(),
            ),
        }
    }

    fn check_bounds(&mut self, at: &str, map: &Map<String, Value>) {
        let num = |key: &str| map.get(key).and_then(Value::as_f64);
        let lower = [
            ("minimum", num("minimum"), false),
            ("exclusiveMinimum", num("exclusiveMinimum"), true),
        ];
        let upper = [
            ("maximum", num("maximum"), false),
            ("exclusiveMaximum", num("exclusiveMaximum"), true),
        ];
        for (lo_key, lo, lo_strict) in lower {
            for (hi_key, hi, hi_strict) in upper {
                let (Some(lo), Some(hi)) = (lo, hi) else {
                    continue;
                };
                let empty = if lo_strict || hi_strict {
                    lo >= hi
                } else {
                    lo > hi
                };
                if empty {
                    self.push(
                        LintCode::ContradictoryBounds,
                        pointer::push(at, lo_key),
                        format!("{lo_key} {lo} and {hi_key} {hi} leave no number that passes"),
                    );
                }
            }
        }
        for (lo_key, hi_key, what) in [
            ("minLength", "maxLength", "string"),
            ("minItems", "maxItems", "array"),
            ("minProperties", "maxProperties", "object"),
            ("minContains", "maxContains", "array"),
        ] {
            let (Some(lo), Some(hi)) = (
                map.get(lo_key).and_then(count),
                map.get(hi_key).and_then(count),
            ) else {
                continue;
            };
            if lo > hi {
                self.push(
                    LintCode::ContradictoryBounds,
                    pointer::push(at, lo_key),
                    format!("{lo_key} {lo} is above {hi_key} {hi}: no {what} passes"),
                );
            }
        }
        if let (Some(Value::Array(required)), Some(max)) = (
            map.get("required"),
            map.get("maxProperties").and_then(count),
        ) {
            let distinct: HashSet<&str> = required.iter().filter_map(Value::as_str).collect();
            if distinct.len() as u64 > max {
                self.push(
                    LintCode::ContradictoryBounds,
                    pointer::push(at, "maxProperties"),
                    format!(
                        "maxProperties {max} is below the {} required properties: no object passes",
                        distinct.len()
                    ),
                );
            }
        }
    }

    fn check_patterns(&mut self, at: &str, map: &Map<String, Value>) {
        if let Some(Value::String(pattern)) = map.get("pattern")
            && !is_ecma_regex(pattern)
        {
            self.push(
                LintCode::InvalidPattern,
                pointer::push(at, "pattern"),
                format!("{pattern:?} is not an ECMA-262 regular expression"),
            );
        }
        if let Some(Value::Object(entries)) = map.get("patternProperties") {
            let base = pointer::push(at, "patternProperties");
            for pattern in entries.keys() {
                if !is_ecma_regex(pattern) {
                    self.push(
                        LintCode::InvalidPattern,
                        pointer::push(&base, pattern),
                        format!("{pattern:?} is not an ECMA-262 regular expression"),
                    );
                }
            }
        }
    }

    fn check_enum(&mut self, at: &str, map: &Map<String, Value>) {
        let Some(Value::Array(values)) = map.get("enum") else {
            return;
        };
        let mut first: HashMap<String, usize> = HashMap::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let Some(key) = equality_key(value) else {
                continue;
            };
            if let Some(earlier) = first.get(&key) {
                self.push(
                    LintCode::DuplicateEnumValue,
                    format!("{}/{i}", pointer::push(at, "enum")),
                    format!("enum value {i} equals value {earlier}"),
                );
            } else {
                first.insert(key, i);
            }
        }
    }

    fn check_required(&mut self, at: &str, map: &Map<String, Value>) {
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

    fn check_open_object(&mut self, at: &str, map: &Map<String, Value>) {
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

    /// Definitions are reachable from the root schema, from `discriminator.mapping`, and from
    /// registries: the root `methods` map and vendor `x-*` data that name a definition (by name
    /// or by reference) or hold `$ref`s.
    fn check_definitions(&mut self) {
        let Value::Object(root) = self.root else {
            return;
        };
        let containers: Vec<&str> = ["$defs", "definitions"]
            .into_iter()
            .filter(|k| root.get(*k).is_some_and(Value::is_object))
            .collect();
        let mut defs: Vec<(&str, &str, &Value)> = Vec::new();
        for container in &containers {
            if let Some(Value::Object(entries)) = root.get(*container) {
                defs.extend(
                    entries
                        .iter()
                        .map(|(name, v)| (*container, name.as_str(), v)),
                );
            }
        }
        if defs.is_empty() {
            return;
        }
        let index: HashMap<(&str, &str), usize> = defs
            .iter()
            .enumerate()
            .map(|(i, (c, n, _))| ((*c, *n), i))
            .collect();
        let by_name: HashMap<&str, usize> = defs
            .iter()
            .enumerate()
            .map(|(i, (_, n, _))| (*n, i))
            .rev()
            .collect();
        let mut reached = vec![false; defs.len()];
        let mut queue: Vec<usize> = Vec::new();
        let mark = |targets: Vec<usize>, reached: &mut Vec<bool>, queue: &mut Vec<usize>| {
            for t in targets {
                if !reached[t] {
                    reached[t] = true;
                    queue.push(t);
                }
            }
        };
        // The root schema without its definition containers, plus root registries.
        let mut targets = Vec::new();
        for (key, value) in root {
            if containers.contains(&key.as_str()) {
                continue;
            }
            if key.starts_with("x-") || key == "methods" {
                self.registry_targets(value, &index, &by_name, &mut targets);
            } else {
                let single: Map<String, Value> =
                    std::iter::once((key.clone(), value.clone())).collect();
                self.schema_targets(&Value::Object(single), &index, &by_name, &mut targets);
            }
        }
        mark(targets, &mut reached, &mut queue);
        while let Some(i) = queue.pop() {
            let mut targets = Vec::new();
            self.schema_targets(defs[i].2, &index, &by_name, &mut targets);
            mark(targets, &mut reached, &mut queue);
        }
        let unreached: Vec<usize> = (0..defs.len()).filter(|i| !reached[*i]).collect();
        if unreached.is_empty() {
            return;
        }
        let registry = match self.definitions {
            DefinitionRoots::Registry => return,
            DefinitionRoots::Rooted => false,
            DefinitionRoots::Auto => {
                unreached.len() * 100 > defs.len() * REGISTRY_UNREFERENCED_PERCENT
            }
        };
        if registry {
            let container = containers.first().copied().unwrap_or("$defs");
            self.push(
                LintCode::RegistryDocument,
                pointer::push("", container),
                format!(
                    "{} of {} definitions are referenced neither from the root schema nor from a registry: \
                     the document is read as a registry whose definitions are entry points by name, \
                     so unreferenced definitions are not reported one by one",
                    unreached.len(),
                    defs.len()
                ),
            );
            return;
        }
        for i in unreached {
            let (container, name, _) = defs[i];
            self.push(
                LintCode::UnreachableDefinition,
                pointer::push(&pointer::push("", container), name),
                format!("definition {name:?} is referenced neither from the root schema nor from a registry"),
            );
        }
    }

    /// Definitions a schema subtree references: `$ref`s, discriminator mappings, and the
    /// vendor data inside it.
    fn schema_targets(
        &self,
        schema: &Value,
        index: &HashMap<(&str, &str), usize>,
        by_name: &HashMap<&str, usize>,
        out: &mut Vec<usize>,
    ) {
        walk::for_each_subschema(schema, |_, node| {
            let Value::Object(map) = node else { return };
            if let Some(Value::String(reference)) = map.get("$ref") {
                out.extend(self.definition_of(reference, index));
            }
            if let Some(Value::Object(mapping)) =
                map.get("discriminator").and_then(|d| d.get("mapping"))
            {
                for target in mapping.values().filter_map(Value::as_str) {
                    out.extend(self.definition_of(target, index));
                }
            }
            for (key, value) in map {
                if key.starts_with("x-") {
                    self.registry_targets(value, index, by_name, out);
                }
            }
        });
    }

    /// Definitions named by registry data: a string equal to a definition name, a string that is
    /// a reference to one, or a `$ref` member.
    fn registry_targets(
        &self,
        data: &Value,
        index: &HashMap<(&str, &str), usize>,
        by_name: &HashMap<&str, usize>,
        out: &mut Vec<usize>,
    ) {
        let mut stack = vec![data];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(s) => {
                    if let Some(i) = by_name.get(s.as_str()) {
                        out.push(*i);
                    } else if s.contains('#') {
                        out.extend(self.definition_of(s, index));
                    }
                }
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => stack.extend(map.values()),
                _ => {}
            }
        }
    }

    fn definition_of(
        &self,
        reference: &str,
        index: &HashMap<(&str, &str), usize>,
    ) -> Option<usize> {
        let RefTarget::Pointer(target) = self.resolve(reference) else {
            return None;
        };
        let tokens = pointer::tokens(&target)?;
        let [container, name, ..] = tokens.as_slice() else {
            return None;
        };
        index.get(&(container.as_str(), name.as_str())).copied()
    }
}

pub(super) fn draft_title(draft: Draft) -> &'static str {
    match draft {
        Draft::Draft07 => "draft-07",
        Draft::Draft202012 => "2020-12",
    }
}

pub(super) fn invalid_type_message(name: &str) -> String {
    format!(
        "{name:?} is not a JSON Schema type (one of {})",
        JSON_TYPES.join(", ")
    )
}

pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn is_count_keyword(key: &str) -> bool {
    matches!(
        key,
        "minLength"
            | "maxLength"
            | "minItems"
            | "maxItems"
            | "minProperties"
            | "maxProperties"
            | "minContains"
            | "maxContains"
    )
}

/// A non-negative integer, written as an integer or as a float with no fraction (`2.0`).
pub(super) fn count(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    // u64::MAX as f64 rounds up to 2^64, which does not fit.
    (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64)
}

/// Flags patterns are compiled with: Unicode mode, as AJV and the validator compile them.
pub(super) const PATTERN_FLAGS: &str = "u";

/// Whether `pattern` compiles as the ECMA-262 `RegExp(pattern, "u")` validators run.
pub(super) fn is_ecma_regex(pattern: &str) -> bool {
    regress::Regex::with_flags(pattern, PATTERN_FLAGS).is_ok()
}

/// A text that is equal for two values exactly when they are equal as JSON: object key order
/// does not matter and numbers compare by value (`1` equals `1.0`). `None` for values nested
/// deeper than [`MAX_JSON_DEPTH`], which are then never reported as duplicates.
pub(super) fn equality_key(value: &Value) -> Option<String> {
    let mut out = String::new();
    write_key(&mut out, value, 0).then_some(out)
}

pub(super) fn write_key(out: &mut String, value: &Value, depth: usize) -> bool {
    if depth > MAX_JSON_DEPTH {
        return false;
    }
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                    let _ = write!(out, "{}", f as i64);
                } else {
                    let _ = write!(out, "{f:e}");
                }
            }
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                if !write_key(out, item, depth + 1) {
                    return false;
                }
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for key in keys {
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if !write_key(out, &map[key], depth + 1) {
                    return false;
                }
                out.push(',');
            }
            out.push('}');
        }
    }
    true
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equality_key_is_json_equality() {
        assert_eq!(equality_key(&json!(1)), equality_key(&json!(1.0)));
        assert_eq!(
            equality_key(&json!({"a": 1, "b": [2]})),
            equality_key(&json!({"b": [2.0], "a": 1}))
        );
        assert_ne!(equality_key(&json!(true)), equality_key(&json!(1)));
        assert_ne!(equality_key(&json!("1")), equality_key(&json!(1)));
        assert_ne!(equality_key(&json!(0.5)), equality_key(&json!(0.25)));
    }

    #[test]
    fn counts_accept_integral_floats_only() {
        assert_eq!(count(&json!(3)), Some(3));
        assert_eq!(count(&json!(3.0)), Some(3));
        assert_eq!(count(&json!(3.5)), None);
        assert_eq!(count(&json!(-1)), None);
        assert_eq!(count(&json!("3")), None);
    }
}

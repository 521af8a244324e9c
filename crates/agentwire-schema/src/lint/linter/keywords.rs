//! Keyword rules: keys that are not keywords of the document's draft (unknown, or of the other
//! draft) and keyword values of the wrong shape (a schema, an array, a string, a number or a
//! count where the keyword wants one, `required` names that repeat).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Linter, count};
use crate::document::Draft;
use crate::lint::LintCode;
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

impl Linter<'_> {
    pub(super) fn check_keywords(&mut self, at: &str, map: &Map<String, Value>) {
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

    pub(super) fn check_shapes(&mut self, at: &str, map: &Map<String, Value>) {
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
}

pub(super) fn draft_title(draft: Draft) -> &'static str {
    match draft {
        Draft::Draft07 => "draft-07",
        Draft::Draft202012 => "2020-12",
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

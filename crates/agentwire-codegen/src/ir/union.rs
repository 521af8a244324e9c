//! Lowering of `oneOf`/`anyOf`: null branches make a type nullable, string constants an enum,
//! a shared required constant property a tagged union (one variant per tag value), anything
//! else an untagged union; and the schema predicates those decisions read.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::lower::{Lowerer, dedup};
use super::types::{TagValue, Ty, TypeKind, UnionType, Variant};
use crate::error::CodegenError;
use crate::names::{self, NameScope};

impl Lowerer<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lower_union(
        &mut self,
        node: &Value,
        map: &Map<String, Value>,
        branches: &[Value],
        branches_ptr: &str,
        name: &str,
        ptr: &str,
        depth: usize,
        forced: Option<usize>,
    ) -> Result<Ty, CodegenError> {
        let mut nullable = false;
        let mut rest: Vec<(usize, &Value, Cow<'_, Value>)> = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let view = self.view(branch, depth)?;
            if is_null_schema(&view) {
                nullable = true;
            } else {
                rest.push((i, branch, view));
            }
        }
        let wrap = |ty: Ty| {
            // Any JSON value already includes null.
            if nullable && ty != Ty::Any {
                Ty::Nullable(Box::new(ty))
            } else {
                ty
            }
        };
        let forced = if nullable { None } else { forced };
        if rest.is_empty() {
            return Ok(Ty::Any);
        }
        if rest.len() == 1 {
            let (i, branch, _) = &rest[0];
            let ty = self.lower_inner(
                branch,
                name,
                &format!("{branches_ptr}/{i}"),
                depth + 1,
                forced,
            )?;
            return Ok(wrap(ty));
        }
        // String constants and enums only: one enum.
        let string_sets: Vec<Option<Vec<String>>> =
            rest.iter().map(|(_, _, v)| string_values(v)).collect();
        if string_sets.iter().all(Option::is_some) {
            let values = dedup(string_sets.into_iter().flatten().flatten().collect());
            let ty = self.named(node, name, ptr, forced, |_, _| Ok(TypeKind::Enum(values)))?;
            return Ok(wrap(ty));
        }
        // Known strings plus any string: a string.
        if rest.iter().all(|(_, _, v)| {
            string_values(v).is_some() || v.get("type") == Some(&Value::String("string".into()))
        }) {
            return Ok(wrap(Ty::String));
        }
        if covers_every_json_kind(rest.iter().map(|(_, _, v)| v.as_ref())) {
            return Ok(wrap(Ty::Any));
        }
        let explicit_open = map.get("x-agentwire-open").and_then(Value::as_bool);
        let tag = detect_tag(map, rest.iter().map(|(_, _, v)| v.as_ref()));
        let rest: Vec<(usize, Value, Value)> = rest
            .into_iter()
            .map(|(i, b, v)| (i, b.clone(), v.into_owned()))
            .collect();
        let ty = self.named(node, name, ptr, forced, |this, type_name| {
            let mut variants = Vec::new();
            let mut case_scope = NameScope::new();
            for (pos, (i, branch, view)) in rest.iter().enumerate() {
                let branch_ptr = format!("{branches_ptr}/{i}");
                let tags = match &tag {
                    Some(t) => view
                        .get("properties")
                        .and_then(|p| p.get(t))
                        .and_then(tag_values)
                        .unwrap_or_default(),
                    None => Vec::new(),
                };
                let is_ref = branch.get("$ref").is_some()
                    && branch.as_object().is_some_and(|m| m.len() == 1);
                if let (Some(t), false) = (&tag, tags.is_empty()) {
                    // One variant per tag value: an inline branch whose tag is an enum of several
                    // values becomes one type per value (its tag pinned to that value); a
                    // referenced definition is shared by its values' variants.
                    let ref_ty = if is_ref {
                        Some(this.lower(branch, type_name, &branch_ptr, depth + 1)?)
                    } else {
                        None
                    };
                    for value in &tags {
                        let label = value.label(t);
                        let ty = match &ref_ty {
                            Some(ty) => ty.clone(),
                            None => {
                                let mut pinned = view.clone();
                                if tags.len() > 1
                                    && let Some(Value::Object(props)) = pinned.get_mut("properties")
                                {
                                    props.insert(
                                        t.clone(),
                                        Value::Object(Map::from_iter([(
                                            "const".to_owned(),
                                            value.to_json(),
                                        )])),
                                    );
                                }
                                this.lower(
                                    &pinned,
                                    &format!("{type_name}{label}"),
                                    &branch_ptr,
                                    depth + 1,
                                )?
                            }
                        };
                        variants.push(Variant {
                            name: case_scope.claim(&label),
                            tags: vec![value.clone()],
                            ty,
                        });
                    }
                    continue;
                }
                let title = view.get("title").and_then(Value::as_str).map(names::pascal);
                let suggested = match &title {
                    Some(t) => format!("{type_name}{t}"),
                    None => format!("{type_name}Variant{}", pos + 1),
                };
                let target = if is_ref { branch } else { view };
                let ty = this.lower(target, &suggested, &branch_ptr, depth + 1)?;
                let case = case_scope.claim(&match (&title, &ty) {
                    (Some(t), _) => t.clone(),
                    (None, ty) => case_label(ty),
                });
                variants.push(Variant {
                    name: case,
                    tags: Vec::new(),
                    ty,
                });
            }
            // Only the schema's own word opens a union: JSON Schema rejects a tag no branch
            // names, and so does the validator.
            let open = explicit_open.unwrap_or(false);
            Ok(TypeKind::Union(UnionType {
                tag: tag.clone(),
                variants,
                open,
            }))
        })?;
        Ok(wrap(ty))
    }
}

const TYPE_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "$ref",
    "const",
    "enum",
    "items",
    "additionalProperties",
    "patternProperties",
    "prefixItems",
];

/// Whether a schema only constrains (required, not, pattern, …) without saying what type a value is.
pub(super) fn is_constraint_only(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    if TYPE_KEYWORDS.iter().any(|k| map.contains_key(*k)) {
        return false;
    }
    ["allOf", "anyOf", "oneOf"].iter().all(|k| {
        map.get(*k)
            .and_then(Value::as_array)
            .is_none_or(|b| b.iter().all(is_constraint_only))
    })
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&Value::String("null".into()))
        || schema.get("const") == Some(&Value::Null)
}

/// The strings a schema allows when it is a string constant or a string enum.
pub(super) fn string_values(schema: &Value) -> Option<Vec<String>> {
    if let Some(Value::String(s)) = schema.get("const") {
        return Some(vec![s.clone()]);
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        let strings: Vec<String> = values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        if !strings.is_empty() && strings.len() == values.len() {
            return Some(strings);
        }
    }
    if let Some(Value::Array(branches)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let mut out = Vec::new();
        for b in branches {
            out.extend(string_values(b)?);
        }
        return Some(out);
    }
    None
}

/// The values a tag property allows: a string, boolean or number constant, an enum of those, or
/// a union of such.
fn tag_values(schema: &Value) -> Option<Vec<TagValue>> {
    if let Some(c) = schema.get("const") {
        return TagValue::from_json(c).map(|t| vec![t]);
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        let tags: Vec<TagValue> = values.iter().filter_map(TagValue::from_json).collect();
        if !tags.is_empty() && tags.len() == values.len() {
            return Some(tags);
        }
        return None;
    }
    if let Some(Value::Array(branches)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let mut out = Vec::new();
        for b in branches {
            out.extend(tag_values(b)?);
        }
        return Some(out);
    }
    None
}

fn covers_every_json_kind<'a>(branches: impl Iterator<Item = &'a Value>) -> bool {
    let mut kinds = BTreeSet::new();
    for b in branches {
        match b.get("type") {
            Some(Value::String(t)) => {
                kinds.insert(if t == "integer" {
                    "number".to_owned()
                } else {
                    t.clone()
                });
            }
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).for_each(|t| {
                kinds.insert(if t == "integer" {
                    "number".to_owned()
                } else {
                    t.to_owned()
                });
            }),
            _ => return false,
        }
    }
    ["boolean", "number", "string", "array", "object"]
        .iter()
        .all(|k| kinds.contains(*k))
}

/// The tag property of a union: the explicit `discriminator.propertyName`, else the first
/// property of the first branch that is a required string constant or enum in every branch,
/// with no value shared between branches.
fn detect_tag<'a>(
    map: &Map<String, Value>,
    branches: impl Iterator<Item = &'a Value> + Clone,
) -> Option<String> {
    let candidates: Vec<String> = match map
        .get("discriminator")
        .and_then(|d| d.get("propertyName"))
        .and_then(Value::as_str)
    {
        Some(explicit) => vec![explicit.to_owned()],
        None => branches
            .clone()
            .next()?
            .get("properties")?
            .as_object()?
            .keys()
            .cloned()
            .collect(),
    };
    'candidates: for candidate in candidates {
        let mut seen = BTreeSet::new();
        for b in branches.clone() {
            let required = b
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(&candidate)));
            let Some(values) = b
                .get("properties")
                .and_then(|p| p.get(&candidate))
                .and_then(tag_values)
            else {
                continue 'candidates;
            };
            if !required {
                continue 'candidates;
            }
            for v in values {
                if !seen.insert(v.literal()) {
                    continue 'candidates;
                }
            }
        }
        return Some(candidate);
    }
    None
}

fn case_label(ty: &Ty) -> String {
    match ty {
        Ty::Any => "Json".to_owned(),
        Ty::Bool => "Bool".to_owned(),
        Ty::Int => "Integer".to_owned(),
        Ty::Number => "Number".to_owned(),
        Ty::String => "String".to_owned(),
        Ty::Array(_) => "Array".to_owned(),
        Ty::Map(_) => "Map".to_owned(),
        Ty::Ref(name) => name.clone(),
        Ty::Nullable(inner) => case_label(inner),
    }
}

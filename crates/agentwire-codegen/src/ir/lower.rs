//! The lowering walk: definitions and the document root claim their names first, then every
//! schema node becomes a type, with references, constants, enums, type lists, arrays and
//! objects handled here (unions in [`super::union`], `allOf` and reference views in
//! [`super::merge`]), and inline types named from the path that reaches them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use agentwire_schema::{SchemaDocument, canonical, pointer};
use serde_json::{Map, Value};

use super::document::{collect_names, read_identity};
use super::types::{Checks, Extra, Field, Ir, ObjectType, Ty, TypeDef, TypeKind};
use super::union::is_constraint_only;
use super::{CONSTRAINT_KEYWORDS, MAX_LOWERING_DEPTH, MAX_TYPES};
use crate::error::CodegenError;
use crate::names::{self, NameScope};

pub(super) struct Lowerer<'d> {
    pub(super) doc: &'d SchemaDocument,
    types: Vec<Option<TypeDef>>,
    scope: NameScope,
    /// Pointer of a definition (or another reference target) → its type name.
    by_pointer: HashMap<String, String>,
    /// Compact text of a node that became a named type → that name.
    by_text: HashMap<String, String>,
    /// Views computed so far (see [`MAX_VIEW_STEPS`](super::MAX_VIEW_STEPS)).
    pub(super) view_steps: std::cell::Cell<usize>,
}

impl<'d> Lowerer<'d> {
    pub(super) fn new(doc: &'d SchemaDocument) -> Self {
        Lowerer {
            doc,
            types: Vec::new(),
            scope: NameScope::new(),
            by_pointer: HashMap::new(),
            by_text: HashMap::new(),
            view_steps: std::cell::Cell::new(0),
        }
    }

    pub(super) fn run(
        mut self,
        schema_name: &str,
        root_name: Option<&str>,
    ) -> Result<Ir, CodegenError> {
        let doc = self.doc;
        let root = doc.value();
        let identity = read_identity(doc)?;
        let defs_kw = doc.definitions_keyword();
        let mut def_names = Vec::new();
        for (name, node) in doc.definitions() {
            let type_name = self.scope.claim(&names::pascal(name));
            let ptr = pointer::push(&format!("/{defs_kw}"), name);
            self.by_pointer.insert(ptr.clone(), type_name.clone());
            self.by_text
                .entry(canonical::compact_text(node))
                .or_insert_with(|| type_name.clone());
            def_names.push((type_name, ptr, node));
        }
        let root_is_schema = root.as_object().is_some_and(|m| {
            ["oneOf", "anyOf", "allOf", "properties", "type", "$ref"]
                .iter()
                .any(|k| m.contains_key(*k))
        });
        // `root_name` naming a definition makes that definition the root (the envelope of every
        // message); otherwise it names the document root's own type.
        let root_def = root_name.and_then(|wanted| {
            let wanted = names::pascal(wanted);
            def_names
                .iter()
                .find(|(type_name, _, _)| *type_name == wanted)
                .map(|(t, _, _)| t.clone())
        });
        let mut lower_document_root = false;
        let root_name = if let Some(type_name) = root_def {
            Some(type_name)
        } else if root_is_schema {
            let wanted = match (root_name, &identity.name) {
                (Some(root), _) => names::pascal(root),
                (None, Some(name)) => format!("{}Message", names::pascal(name)),
                (None, None) => "ProtocolMessage".to_owned(),
            };
            let claimed = self.scope.claim(&wanted);
            self.by_pointer.insert(String::new(), claimed.clone());
            lower_document_root = true;
            Some(claimed)
        } else {
            None
        };
        let definition_names: Vec<(String, String)> = doc
            .definitions()
            .map(|(key, _)| key.to_owned())
            .zip(def_names.iter().map(|(t, _, _)| t.clone()))
            .collect();
        for (type_name, ptr, node) in def_names {
            self.lower_forced(node, &type_name, &ptr, 0)?;
        }
        if let Some(name) = root_name.as_ref().filter(|_| lower_document_root) {
            let stripped = strip_document_keys(root);
            self.lower_forced(&stripped, name, "", 0)?;
        }
        let types: Vec<TypeDef> = self.types.into_iter().flatten().collect();
        let index = types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let (methods, events) = collect_names(doc);
        let mut ir = Ir {
            schema_name: schema_name.to_owned(),
            digest: doc.digest().as_str().to_owned(),
            schema_id: doc.id().map(str::to_owned),
            identity,
            methods,
            events,
            method_table: Vec::new(),
            types,
            root: root_name,
            schema_text: canonical::compact_text(doc.value()),
            definitions_keyword: defs_kw.to_owned(),
            draft_07: doc.draft() == agentwire_schema::document::Draft::Draft07,
            definitions: definition_names,
            index,
            cyclic: BTreeMap::new(),
            long_cycles: BTreeMap::new(),
        };
        ir.compute_cycles();
        ir.method_table = crate::methods::collect(&ir, doc);
        Ok(ir)
    }

    /// Lowers the node of a definition (or the root) under its already claimed name: a node
    /// that is not itself a named type becomes an alias.
    fn lower_forced(
        &mut self,
        node: &Value,
        name: &str,
        ptr: &str,
        depth: usize,
    ) -> Result<(), CodegenError> {
        let slot = self.reserve()?;
        let ty = self.lower_inner(node, name, ptr, depth, Some(slot))?;
        if self.types[slot].is_none() {
            // The node did not fill the slot: it is an alias for some other type.
            let ty = if ty == Ty::Ref(name.to_owned()) {
                Ty::Any
            } else {
                ty
            };
            self.types[slot] = Some(TypeDef {
                name: name.to_owned(),
                pointer: ptr.to_owned(),
                doc: doc_lines(node),
                kind: TypeKind::Alias(ty),
            });
        }
        Ok(())
    }

    fn reserve(&mut self) -> Result<usize, CodegenError> {
        if self.types.len() >= MAX_TYPES {
            return Err(CodegenError::TooManyTypes { limit: MAX_TYPES });
        }
        self.types.push(None);
        Ok(self.types.len() - 1)
    }

    pub(super) fn lower(
        &mut self,
        node: &Value,
        name: &str,
        ptr: &str,
        depth: usize,
    ) -> Result<Ty, CodegenError> {
        self.lower_inner(node, name, ptr, depth, None)
    }

    /// Creates (or reuses) a named type for `node`. With `forced`, the type takes `name` and the
    /// given slot; otherwise `name` is a suggestion and an identical earlier node is reused.
    pub(super) fn named(
        &mut self,
        node: &Value,
        name: &str,
        ptr: &str,
        forced: Option<usize>,
        build: impl FnOnce(&mut Self, &str) -> Result<TypeKind, CodegenError>,
    ) -> Result<Ty, CodegenError> {
        let (type_name, slot) = match forced {
            Some(slot) => (name.to_owned(), slot),
            None => {
                let text = canonical::compact_text(node);
                if let Some(existing) = self.by_text.get(&text) {
                    return Ok(Ty::Ref(existing.clone()));
                }
                let claimed = self.scope.claim(name);
                self.by_text.insert(text, claimed.clone());
                (claimed, self.reserve()?)
            }
        };
        let kind = build(self, &type_name)?;
        self.types[slot] = Some(TypeDef {
            name: type_name.clone(),
            pointer: ptr.to_owned(),
            doc: doc_lines(node),
            kind,
        });
        Ok(Ty::Ref(type_name))
    }

    pub(super) fn lower_inner(
        &mut self,
        node: &Value,
        name: &str,
        ptr: &str,
        depth: usize,
        forced: Option<usize>,
    ) -> Result<Ty, CodegenError> {
        if depth > MAX_LOWERING_DEPTH {
            return Err(CodegenError::TooDeep {
                pointer: ptr.to_owned(),
                limit: MAX_LOWERING_DEPTH,
            });
        }
        let Value::Object(map) = node else {
            return Ok(Ty::Any);
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            return self.lower_ref(ptr, reference, depth);
        }
        if let Some(c) = map.get("const") {
            return match c {
                Value::String(s) => self.named(node, name, ptr, forced, |_, _| {
                    Ok(TypeKind::Enum(vec![s.clone()]))
                }),
                Value::Bool(_) => Ok(Ty::Bool),
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Ty::Int),
                Value::Number(_) => Ok(Ty::Number),
                _ => Ok(Ty::Any),
            };
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let strings: Vec<String> = values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            let nulls = values.iter().filter(|v| v.is_null()).count();
            if !strings.is_empty() && strings.len() + nulls == values.len() {
                let strings = dedup(strings);
                let ty = self.named(
                    node,
                    name,
                    ptr,
                    if nulls == 0 { forced } else { None },
                    |_, _| Ok(TypeKind::Enum(strings)),
                )?;
                return Ok(if nulls > 0 {
                    Ty::Nullable(Box::new(ty))
                } else {
                    ty
                });
            }
            return Ok(Ty::Any);
        }
        if map.contains_key("allOf") {
            let merged = self.merge_all_of(node, depth)?;
            return self.lower_inner(&merged, name, ptr, depth + 1, forced);
        }
        let scalar_type = match map.get("type") {
            Some(Value::String(t)) if t != "object" && t != "array" => Some(t.as_str()),
            _ => None,
        };
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                let typed_siblings = map.contains_key("properties") || scalar_type.is_some();
                let constraint_only = branches.iter().all(is_constraint_only);
                if !(constraint_only && typed_siblings) && scalar_type.is_none() {
                    return self.lower_union(
                        node,
                        map,
                        branches,
                        &pointer::push(ptr, key),
                        name,
                        ptr,
                        depth,
                        forced,
                    );
                }
            }
        }
        match map.get("type") {
            Some(Value::Array(kinds)) => {
                let non_null: Vec<&str> = kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|k| *k != "null")
                    .collect();
                let nullable = non_null.len() < kinds.len();
                let mut single = map.clone();
                let inner = match non_null.as_slice() {
                    [] => Ty::Any,
                    [one] => {
                        single.insert("type".to_owned(), Value::String((*one).to_owned()));
                        let forced = if nullable { None } else { forced };
                        self.lower_inner(&Value::Object(single), name, ptr, depth + 1, forced)?
                    }
                    many => {
                        let branches: Vec<Value> = many
                            .iter()
                            .map(|k| {
                                let mut b = map.clone();
                                b.insert("type".to_owned(), Value::String((*k).to_owned()));
                                Value::Object(b)
                            })
                            .collect();
                        let forced = if nullable { None } else { forced };
                        let synthetic = Value::Object(Map::from_iter([(
                            "anyOf".to_owned(),
                            Value::Array(branches.clone()),
                        )]));
                        let Value::Object(smap) = &synthetic else {
                            return Ok(Ty::Any);
                        };
                        self.lower_union(
                            &synthetic, smap, &branches, ptr, name, ptr, depth, forced,
                        )?
                    }
                };
                Ok(if nullable {
                    Ty::Nullable(Box::new(inner))
                } else {
                    inner
                })
            }
            Some(Value::String(t)) => match t.as_str() {
                "string" => Ok(Ty::String),
                "integer" => Ok(Ty::Int),
                "number" => Ok(Ty::Number),
                "boolean" => Ok(Ty::Bool),
                "null" => Ok(Ty::Any),
                "array" => self.lower_array(map, name, ptr, depth),
                _ => self.lower_object(node, map, name, ptr, depth, forced),
            },
            _ => {
                if [
                    "properties",
                    "additionalProperties",
                    "patternProperties",
                    "required",
                ]
                .iter()
                .any(|k| map.contains_key(*k))
                {
                    self.lower_object(node, map, name, ptr, depth, forced)
                } else if map.contains_key("items") || map.contains_key("prefixItems") {
                    self.lower_array(map, name, ptr, depth)
                } else {
                    Ok(Ty::Any)
                }
            }
        }
    }

    fn lower_ref(&mut self, at: &str, reference: &str, depth: usize) -> Result<Ty, CodegenError> {
        let (target, value) = self.doc.resolve_ref(at, reference)?;
        if let Some(name) = self.by_pointer.get(&target) {
            return Ok(Ty::Ref(name.clone()));
        }
        // A reference into the middle of the document: the target becomes a named type of its own.
        let wanted = names::pascal(
            target
                .rsplit('/')
                .find(|s| !s.is_empty())
                .unwrap_or("Target"),
        );
        let name = self.scope.claim(&wanted);
        self.by_pointer.insert(target.clone(), name.clone());
        let value = value.clone();
        self.lower_forced(&value, &name, &target, depth + 1)?;
        Ok(Ty::Ref(name))
    }

    fn lower_array(
        &mut self,
        map: &Map<String, Value>,
        name: &str,
        ptr: &str,
        depth: usize,
    ) -> Result<Ty, CodegenError> {
        let item_name = format!("{name}Item");
        match map.get("items").or_else(|| map.get("prefixItems")) {
            Some(Value::Array(items)) => {
                // A tuple: one element type when every position agrees, else any JSON value.
                let mut tys = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    tys.push(self.lower(
                        item,
                        &item_name,
                        &format!("{ptr}/items/{i}"),
                        depth + 1,
                    )?);
                }
                let first = tys.first().cloned().unwrap_or(Ty::Any);
                let same = tys.iter().all(|t| *t == first);
                Ok(Ty::Array(Box::new(if same { first } else { Ty::Any })))
            }
            Some(item) => Ok(Ty::Array(Box::new(self.lower(
                item,
                &item_name,
                &pointer::push(ptr, "items"),
                depth + 1,
            )?))),
            None => Ok(Ty::Array(Box::new(Ty::Any))),
        }
    }

    fn lower_object(
        &mut self,
        node: &Value,
        map: &Map<String, Value>,
        name: &str,
        ptr: &str,
        depth: usize,
        forced: Option<usize>,
    ) -> Result<Ty, CodegenError> {
        let closed = matches!(map.get("additionalProperties"), Some(Value::Bool(false)))
            || matches!(map.get("unevaluatedProperties"), Some(Value::Bool(false)));
        let props = map.get("properties").and_then(Value::as_object);
        let value_name = format!("{name}Value");
        let extra_schema: Option<(Value, String)> = match map.get("additionalProperties") {
            Some(v @ Value::Object(_)) => {
                Some((v.clone(), pointer::push(ptr, "additionalProperties")))
            }
            _ => match map.get("patternProperties").and_then(Value::as_object) {
                Some(patterns) if patterns.len() == 1 && !closed => {
                    patterns.iter().next().map(|(k, v)| {
                        (
                            v.clone(),
                            pointer::push(&pointer::push(ptr, "patternProperties"), k),
                        )
                    })
                }
                _ => None,
            },
        };
        if props.is_none_or(|p| p.is_empty()) && !closed {
            let value_ty = match &extra_schema {
                Some((schema, at)) => self.lower(schema, &value_name, at, depth + 1)?,
                None => Ty::Any,
            };
            return Ok(Ty::Map(Box::new(value_ty)));
        }
        let required: BTreeSet<String> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let props = props.cloned().unwrap_or_default();
        self.named(node, name, ptr, forced, |this, type_name| {
            let mut fields = Vec::new();
            for (wire, schema) in &props {
                let field_ptr = pointer::push(&pointer::push(ptr, "properties"), wire);
                let ty = this.lower(
                    schema,
                    &format!("{type_name}{}", names::pascal(wire)),
                    &field_ptr,
                    depth + 1,
                )?;
                fields.push(Field {
                    wire: wire.clone(),
                    ty,
                    required: required.contains(wire),
                    doc: doc_lines(schema),
                    checks: checks_of(schema),
                });
            }
            let extra = if closed {
                Extra::Closed
            } else {
                match &extra_schema {
                    Some((schema, at)) => {
                        match this.lower(schema, &format!("{type_name}Value"), at, depth + 1)? {
                            Ty::Any => Extra::Any,
                            ty => Extra::Typed(ty),
                        }
                    }
                    None => Extra::Any,
                }
            };
            Ok(TypeKind::Object(ObjectType { fields, extra }))
        })
    }
}

fn strip_document_keys(root: &Value) -> Value {
    let Value::Object(map) = root else {
        return root.clone();
    };
    let mut out = map.clone();
    for key in [
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "methods",
        "x-agentwire",
        "x-cc-protocol",
    ] {
        out.remove(key);
    }
    Value::Object(out)
}

pub(super) fn dedup(values: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    values
        .into_iter()
        .filter(|v| seen.insert(v.clone()))
        .collect()
}

fn doc_lines(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Value::Object(map) = schema else {
        return out;
    };
    for key in ["title", "description"] {
        if let Some(Value::String(text)) = map.get(key) {
            out.extend(text.lines().map(|l| l.trim_end().to_owned()));
        }
    }
    let mut constraints = Vec::new();
    for &key in CONSTRAINT_KEYWORDS {
        if let Some(v) = map.get(key) {
            constraints.push(format!("{key}: {}", canonical::compact_text(v)));
        }
    }
    if let Some(Value::String(since)) = map
        .get("x-openclaw-since")
        .or_else(|| map.get("x-agentwire-since"))
    {
        constraints.push(format!("since: {since}"));
    }
    if !constraints.is_empty() {
        out.push(format!("Constraints: {}", constraints.join(", ")));
    }
    out
}

fn checks_of(schema: &Value) -> Checks {
    let u = |k: &str| schema.get(k).and_then(Value::as_u64);
    let i = |k: &str| schema.get(k).and_then(Value::as_i64);
    Checks {
        min_length: u("minLength"),
        max_length: u("maxLength"),
        minimum: i("minimum"),
        maximum: i("maximum"),
        min_items: u("minItems"),
        max_items: u("maxItems"),
    }
}

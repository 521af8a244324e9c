//! The compiled validation plan: every subschema of a document turned once into a flat node
//! with its checks in evaluation order, `$ref` resolved to node ids, property names indexed,
//! `required` as a bitset, patterns compiled, and `oneOf`/`anyOf` over literal tags turned into
//! dispatch tables.

use std::collections::{HashMap, VecDeque};

use ahash::AHashMap;
use serde_json::{Map, Value};

use crate::document::{Draft, SchemaDocument};
use crate::fast::FastError;
use crate::fast::ecma::{Format, Pattern};
use crate::fast::instance::key_print;
use crate::pointer;

mod types;
mod unions;

pub(crate) use types::*;

/// Keywords that change what a schema accepts and that the plan does not implement. A schema
/// using one of them is refused, so that callers fall back to the reference validator instead
/// of getting a different verdict.
const UNSUPPORTED_KEYWORDS: &[&str] = &[
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
    "contentSchema",
];

/// Object schemas with at most this many indexed names are looked up by a linear scan, which
/// beats hashing for short keys.
const LINEAR_LOOKUP_MAX: usize = 8;

/// Compiles schemas of one document into a shared plan.
pub(crate) struct Compiler<'d> {
    doc: &'d SchemaDocument,
    draft: Draft,
    plan: Plan,
    pending: VecDeque<(NodeId, String)>,
    pattern_ids: HashMap<String, u32>,
}

impl<'d> Compiler<'d> {
    pub(crate) fn new(doc: &'d SchemaDocument) -> Self {
        Compiler {
            doc,
            draft: doc.draft(),
            plan: Plan {
                nodes: Vec::new(),
                alias: Vec::new(),
                patterns: Vec::new(),
                by_pointer: HashMap::new(),
            },
            pending: VecDeque::new(),
            pattern_ids: HashMap::new(),
        }
    }

    /// Compiles the schema at `ptr` (and everything it references) and returns its node.
    pub(crate) fn compile_pointer(&mut self, ptr: &str) -> Result<NodeId, FastError> {
        let id = self.node_for(ptr);
        self.drain()?;
        Ok(id)
    }

    pub(crate) fn finish(mut self) -> Result<Plan, FastError> {
        self.drain()?;
        self.plan.alias = self.chain_ends();
        self.add_tag_tables();
        Ok(self.plan)
    }

    /// Where each node's chain of `$ref`-alone nodes ends, in time linear in the plan: a chain
    /// is walked once and every node on it gets its end. A chain that comes back to itself
    /// (the loader rejects those) ends where it closes, and evaluation follows it from there.
    fn chain_ends(&self) -> Vec<NodeId> {
        const UNKNOWN: NodeId = NodeId::MAX;
        let nodes = &self.plan.nodes;
        let mut ends = vec![UNKNOWN; nodes.len()];
        let mut on_path = vec![false; nodes.len()];
        let mut path = Vec::new();
        for start in 0..nodes.len() as NodeId {
            let mut id = start;
            let end = loop {
                let known = ends[id as usize];
                if known != UNKNOWN {
                    break known;
                }
                if on_path[id as usize] {
                    break id;
                }
                let n = &nodes[id as usize];
                match n.checks.as_slice() {
                    [Check::Ref(next)] if n.types == T_ANY => {
                        on_path[id as usize] = true;
                        path.push(id);
                        id = *next;
                    }
                    _ => break id,
                }
            };
            if ends[id as usize] == UNKNOWN {
                ends[id as usize] = end;
            }
            for visited in path.drain(..) {
                ends[visited as usize] = end;
                on_path[visited as usize] = false;
            }
        }
        ends
    }

    fn drain(&mut self) -> Result<(), FastError> {
        while let Some((id, ptr)) = self.pending.pop_front() {
            let schema = self
                .doc
                .resolve_pointer(&ptr)
                .ok_or_else(|| FastError::Unresolved {
                    pointer: ptr.clone(),
                })?;
            let node = self.compile_schema(&ptr, schema)?;
            self.plan.nodes[id as usize] = node;
        }
        Ok(())
    }

    /// The node for a schema pointer, compiled later if new.
    fn node_for(&mut self, ptr: &str) -> NodeId {
        if let Some(id) = self.plan.by_pointer.get(ptr) {
            return *id;
        }
        let id = self.plan.nodes.len() as NodeId;
        self.plan.nodes.push(Node {
            types: T_ANY,
            checks: Vec::new(),
        });
        self.plan.by_pointer.insert(ptr.to_owned(), id);
        self.pending.push_back((id, ptr.to_owned()));
        id
    }

    fn child(&mut self, at: &str, key: &str) -> NodeId {
        self.node_for(&pointer::push(at, key))
    }

    fn child2(&mut self, at: &str, key: &str, second: &str) -> NodeId {
        self.node_for(&pointer::push(&pointer::push(at, key), second))
    }

    fn compile_schema(&mut self, at: &str, schema: &Value) -> Result<Node, FastError> {
        let map = match schema {
            Value::Bool(true) => return Ok(node(at, T_ANY, Vec::new())),
            Value::Bool(false) => return Ok(node(at, T_ANY, vec![Check::False])),
            Value::Object(map) => map,
            _ => {
                return Err(FastError::invalid(
                    at,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        for key in UNSUPPORTED_KEYWORDS {
            if map.contains_key(*key) {
                return Err(FastError::Unsupported {
                    pointer: at.to_owned(),
                    keyword: (*key).to_owned(),
                });
            }
        }
        if self.draft == Draft::Draft07 && map.contains_key("$ref") {
            // Draft-07 ignores the siblings of `$ref`; AJV applies them. Only a bare `$ref`
            // (annotations aside) has one meaning.
            let ok = map.keys().all(|k| {
                matches!(
                    k.as_str(),
                    "$ref"
                        | "description"
                        | "title"
                        | "$comment"
                        | "default"
                        | "examples"
                        | "deprecated"
                ) || k.starts_with("x-")
            });
            if !ok {
                return Err(FastError::Unsupported {
                    pointer: at.to_owned(),
                    keyword: "$ref with sibling keywords in draft-07".to_owned(),
                });
            }
        }
        let mut types = T_ANY;
        if let Some(t) = map.get("type") {
            types = type_mask(t).ok_or_else(|| FastError::invalid(at, "bad type"))?;
        }
        let mut checks = Vec::new();
        // Untyped keywords, in AJV's order: $ref, const, enum, not, anyOf, oneOf, allOf, if.
        if let Some(Value::String(r)) = map.get("$ref") {
            let (target, _) = self
                .doc
                .resolve_ref(at, r)
                .map_err(|e| FastError::Unresolved { pointer: e.pointer })?;
            let id = self.node_for(&target);
            checks.push(Check::Ref(id));
        }
        if let Some(c) = map.get("const") {
            checks.push(match c {
                Value::String(s) => Check::ConstStr(s.as_str().into()),
                other => Check::Const(other.clone()),
            });
        }
        if let Some(e) = map.get("enum") {
            let Value::Array(values) = e else {
                return Err(FastError::invalid(at, "enum must be an array"));
            };
            checks.push(Check::Enum(Box::new(enum_set(values.iter().cloned()))));
        }
        if map.contains_key("not") {
            checks.push(Check::Not(self.child(at, "not")));
        }
        if let Some(Value::Array(items)) = map.get("anyOf") {
            let branches = self.branch_ids(at, "anyOf", items.len());
            checks.push(Check::AnyOf(Box::new(self.union(branches))));
        }
        if let Some(Value::Array(items)) = map.get("oneOf") {
            let branches = self.branch_ids(at, "oneOf", items.len());
            checks.push(Check::OneOf(Box::new(self.union(branches))));
        }
        if let Some(Value::Array(items)) = map.get("allOf") {
            let branches = self.branch_ids(at, "allOf", items.len());
            checks.push(Check::AllOf(branches.into()));
        }
        if map.contains_key("if") {
            let cond = self.child(at, "if");
            let then = map.contains_key("then").then(|| self.child(at, "then"));
            let otherwise = map.contains_key("else").then(|| self.child(at, "else"));
            if then.is_some() || otherwise.is_some() {
                checks.push(Check::If {
                    cond,
                    then,
                    otherwise,
                });
            }
        }
        if let Some(n) = self.num_checks(at, map)? {
            checks.push(Check::Num(Box::new(n)));
        }
        if let Some(s) = self.str_checks(at, map)? {
            checks.push(Check::Str(Box::new(s)));
        }
        if let Some(a) = self.arr_plan(at, map)? {
            checks.push(Check::Arr(Box::new(a)));
        }
        if let Some(o) = self.obj_plan(at, map)? {
            checks.push(Check::Obj(Box::new(o)));
        }
        Ok(node(at, types, checks))
    }

    fn branch_ids(&mut self, at: &str, key: &str, n: usize) -> Vec<NodeId> {
        (0..n)
            .map(|i| self.child2(at, key, &i.to_string()))
            .collect()
    }

    fn union(&self, branches: Vec<NodeId>) -> Union {
        Union {
            masks: vec![T_ANY; branches.len()].into(),
            branches: branches.into(),
            tag: None,
        }
    }

    fn num_checks(
        &self,
        at: &str,
        map: &Map<String, Value>,
    ) -> Result<Option<NumChecks>, FastError> {
        let mut n = NumChecks::default();
        let mut any = false;
        let mut num = |key: &str| -> Result<Option<f64>, FastError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(x)) => {
                    any = true;
                    Ok(x.as_f64())
                }
                Some(Value::Bool(_)) => Err(FastError::Unsupported {
                    pointer: at.to_owned(),
                    keyword: format!("boolean {key}"),
                }),
                Some(_) => Err(FastError::invalid(at, "numeric keyword is not a number")),
            }
        };
        n.maximum = num("maximum")?;
        n.minimum = num("minimum")?;
        n.exclusive_maximum = num("exclusiveMaximum")?;
        n.exclusive_minimum = num("exclusiveMinimum")?;
        n.multiple_of = num("multipleOf")?;
        Ok(any.then_some(n))
    }

    fn str_checks(
        &mut self,
        at: &str,
        map: &Map<String, Value>,
    ) -> Result<Option<StrChecks>, FastError> {
        let mut s = StrChecks {
            max_length: count(at, map, "maxLength")?,
            min_length: count(at, map, "minLength")?,
            ..StrChecks::default()
        };
        if let Some(p) = map.get("pattern") {
            let Value::String(p) = p else {
                return Err(FastError::invalid(at, "pattern must be a string"));
            };
            s.pattern = Some(self.pattern(at, p)?);
        }
        if let Some(Value::String(f)) = map.get("format") {
            s.format = Some(Format::from_name(f).ok_or_else(|| FastError::Unsupported {
                pointer: at.to_owned(),
                keyword: format!("format {f:?}"),
            })?);
        }
        let any = s.max_length.is_some()
            || s.min_length.is_some()
            || s.pattern.is_some()
            || s.format.is_some();
        Ok(any.then_some(s))
    }

    fn pattern(&mut self, at: &str, source: &str) -> Result<u32, FastError> {
        if let Some(id) = self.pattern_ids.get(source) {
            return Ok(*id);
        }
        let compiled = Pattern::new(source).map_err(|message| FastError::Pattern {
            pointer: at.to_owned(),
            pattern: source.to_owned(),
            message,
        })?;
        let id = self.plan.patterns.len() as u32;
        self.plan.patterns.push(compiled);
        self.pattern_ids.insert(source.to_owned(), id);
        Ok(id)
    }

    fn arr_plan(
        &mut self,
        at: &str,
        map: &Map<String, Value>,
    ) -> Result<Option<ArrPlan>, FastError> {
        let mut a = ArrPlan {
            max_items: count(at, map, "maxItems")?,
            min_items: count(at, map, "minItems")?,
            unique: map.get("uniqueItems") == Some(&Value::Bool(true)),
            prefix: Box::new([]),
            rest: Rest::Any,
            rest_first: false,
            contains: None,
            min_contains: 1,
            max_contains: None,
        };
        let mut any = a.max_items.is_some() || a.min_items.is_some() || a.unique;
        let rest_schema = |this: &mut Self, key: &str| -> Option<Rest> {
            match map.get(key) {
                None => None,
                Some(Value::Bool(true)) => Some(Rest::Any),
                Some(Value::Bool(false)) => Some(Rest::Deny),
                Some(_) => Some(Rest::Schema(this.child(at, key))),
            }
        };
        match self.draft {
            Draft::Draft07 => match map.get("items") {
                Some(Value::Array(items)) => {
                    any = true;
                    a.prefix = self.branch_ids(at, "items", items.len()).into();
                    if let Some(r) = rest_schema(self, "additionalItems") {
                        a.rest = r;
                        a.rest_first = true;
                    }
                }
                Some(_) => {
                    any = true;
                    a.rest = rest_schema(self, "items").unwrap_or(Rest::Any);
                }
                None => {}
            },
            Draft::Draft202012 => {
                if let Some(Value::Array(items)) = map.get("prefixItems") {
                    any = true;
                    a.prefix = self.branch_ids(at, "prefixItems", items.len()).into();
                }
                if let Some(r) = rest_schema(self, "items") {
                    any = true;
                    a.rest = r;
                }
            }
        }
        if map.contains_key("contains") {
            any = true;
            a.contains = Some(self.child(at, "contains"));
            if self.draft == Draft::Draft202012 {
                if let Some(n) = count(at, map, "minContains")? {
                    a.min_contains = n;
                }
                a.max_contains = count(at, map, "maxContains")?;
            }
        }
        Ok(any.then_some(a))
    }

    fn obj_plan(
        &mut self,
        at: &str,
        map: &Map<String, Value>,
    ) -> Result<Option<ObjPlan>, FastError> {
        let max_properties = count(at, map, "maxProperties")?;
        let min_properties = count(at, map, "minProperties")?;
        let mut names: Vec<Box<str>> = Vec::new();
        let mut index: AHashMap<Box<str>, u32> = AHashMap::new();
        let mut intern = |names: &mut Vec<Box<str>>, name: &str| -> u32 {
            if let Some(i) = index.get(name) {
                return *i;
            }
            let i = names.len() as u32;
            names.push(name.into());
            index.insert(name.into(), i);
            i
        };
        let mut props_list = Vec::new();
        if let Some(Value::Object(props)) = map.get("properties") {
            let base = pointer::push(at, "properties");
            for name in props.keys() {
                let i = intern(&mut names, name);
                props_list.push((i, self.node_for(&pointer::push(&base, name))));
            }
        }
        let mut required = Vec::new();
        if let Some(r) = map.get("required") {
            let Value::Array(r) = r else {
                return Err(FastError::invalid(at, "required must be an array"));
            };
            for name in r {
                let Value::String(name) = name else {
                    return Err(FastError::invalid(at, "required names must be strings"));
                };
                required.push(intern(&mut names, name));
            }
        }
        let mut dependent_required = Vec::new();
        let mut dependent_schemas = Vec::new();
        let mut deps = |this: &mut Self,
                        key: &str,
                        allow_schema: bool,
                        allow_names: bool|
         -> Result<(), FastError> {
            let Some(Value::Object(entries)) = map.get(key) else {
                return Ok(());
            };
            let base = pointer::push(at, key);
            for (name, dep) in entries {
                let i = intern(&mut names, name);
                match dep {
                    Value::Array(list) if allow_names => {
                        let mut ids = Vec::new();
                        for d in list {
                            let Value::String(d) = d else {
                                return Err(FastError::invalid(
                                    at,
                                    "dependency names must be strings",
                                ));
                            };
                            ids.push(intern(&mut names, d));
                        }
                        dependent_required.push((i, ids.into_boxed_slice()));
                    }
                    Value::Object(_) | Value::Bool(_) if allow_schema => {
                        dependent_schemas.push((i, this.node_for(&pointer::push(&base, name))));
                    }
                    _ => return Err(FastError::invalid(at, "bad dependency")),
                }
            }
            Ok(())
        };
        deps(self, "dependencies", true, true)?;
        deps(self, "dependentRequired", false, true)?;
        deps(self, "dependentSchemas", true, false)?;
        let mut pattern_props = Vec::new();
        if let Some(Value::Object(pp)) = map.get("patternProperties") {
            let base = pointer::push(at, "patternProperties");
            for source in pp.keys() {
                let p = self.pattern(at, source)?;
                pattern_props.push((p, self.node_for(&pointer::push(&base, source))));
            }
        }
        let additional = match map.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Rest::Any,
            Some(Value::Bool(false)) => Rest::Deny,
            Some(_) => Rest::Schema(self.child(at, "additionalProperties")),
        };
        let property_names = map
            .contains_key("propertyNames")
            .then(|| self.child(at, "propertyNames"));
        let any = max_properties.is_some()
            || min_properties.is_some()
            || !names.is_empty()
            || !pattern_props.is_empty()
            || !matches!(additional, Rest::Any)
            || property_names.is_some();
        if !any {
            return Ok(None);
        }
        let mut props = vec![None; names.len()];
        for (i, id) in props_list {
            props[i as usize] = Some(id);
        }
        let mut required_mask = [0u64; INLINE_NAME_BITS / 64];
        for &i in &required {
            if (i as usize) < INLINE_NAME_BITS {
                required_mask[i as usize / 64] |= 1 << (i % 64);
            }
        }
        let lookup = if names.len() <= LINEAR_LOOKUP_MAX {
            let prints: Box<[u64]> = names.iter().map(|n| key_print(n)).collect();
            let bits = prints.iter().fold(0, |bits, p| bits | print_bit(*p));
            Lookup::Linear(prints, bits)
        } else {
            Lookup::Hash(index)
        };
        Ok(Some(ObjPlan {
            max_properties,
            min_properties,
            names: names.into(),
            lookup,
            props: props.into(),
            required: required.into(),
            required_mask,
            property_names,
            additional,
            pattern_props: pattern_props.into(),
            dependent_required: dependent_required.into(),
            dependent_schemas: dependent_schemas.into(),
        }))
    }
}

fn node(_at: &str, types: u8, checks: Vec<Check>) -> Node {
    Node { types, checks }
}

fn count(at: &str, map: &Map<String, Value>, key: &str) -> Result<Option<usize>, FastError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            let f = n.as_f64().unwrap_or(-1.0);
            if f < 0.0 || f.fract() != 0.0 {
                return Err(FastError::invalid(
                    at,
                    "count keyword must be a non-negative integer",
                ));
            }
            Ok(Some(if f >= usize::MAX as f64 {
                usize::MAX
            } else {
                f as usize
            }))
        }
        Some(_) => Err(FastError::invalid(at, "count keyword must be a number")),
    }
}

fn type_name_mask(name: &str) -> Option<u8> {
    Some(match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_NUM | T_INT,
        "string" => T_STR,
        "array" => T_ARR,
        "object" => T_OBJ,
        _ => return None,
    })
}

fn type_mask(t: &Value) -> Option<u8> {
    match t {
        Value::String(s) => type_name_mask(s),
        Value::Array(items) => {
            let mut m = 0;
            for item in items {
                m |= type_name_mask(item.as_str()?)?;
            }
            Some(m)
        }
        _ => None,
    }
}

/// Threshold above which string enums are looked up by hash.
const ENUM_HASH_MIN: usize = 12;

pub(crate) fn enum_set(values: impl Iterator<Item = Value>) -> EnumSet {
    let mut set = EnumSet::default();
    for v in values {
        match v {
            Value::String(s) => set.strings.push(s.into()),
            other => set.others.push(other),
        }
    }
    if set.strings.len() >= ENUM_HASH_MIN {
        set.string_set = Some(set.strings.iter().cloned().collect());
    }
    set
}

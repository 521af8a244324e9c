//! The compiled validation plan: every subschema of a document turned once into a flat node
//! with its checks in evaluation order, `$ref` resolved to node ids, property names indexed,
//! `required` as a bitset, patterns compiled, and `oneOf`/`anyOf` over literal tags turned into
//! dispatch tables.

use std::collections::{HashMap, VecDeque};

use ahash::{AHashMap, AHashSet};
use serde_json::{Map, Value};

use crate::document::{Draft, SchemaDocument};
use crate::fast::FastError;
use crate::fast::ecma::{Format, Pattern};
use crate::fast::instance::{Key, key_print};
use crate::pointer;

/// Index of a node in [`Plan::nodes`].
pub(crate) type NodeId = u32;

/// Instance type bits, one per JSON type; `integer` is its own bit so that `type: integer` is a
/// single mask test.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_INT: u8 = 4;
pub(crate) const T_NUM: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_ARR: u8 = 32;
pub(crate) const T_OBJ: u8 = 64;
pub(crate) const T_ANY: u8 = 127;

/// Property names of one object schema beyond which the presence bitset lives on the heap.
pub(crate) const INLINE_NAME_BITS: usize = 256;

/// Object schemas with at most this many indexed names are looked up by a linear scan, which
/// beats hashing for short keys.
const LINEAR_LOOKUP_MAX: usize = 8;

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

#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) nodes: Vec<Node>,
    /// Per node: where its chain of nodes that are a `$ref` alone ends (the node itself for
    /// any other node). Evaluation jumps there directly, so a chain of any length costs one
    /// step and no stack.
    pub(crate) alias: Vec<NodeId>,
    pub(crate) patterns: Vec<Pattern>,
    /// Schema pointer → node, for every schema compiled.
    pub(crate) by_pointer: HashMap<String, NodeId>,
}

#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Allowed instance types (`T_ANY` when unconstrained).
    pub(crate) types: u8,
    /// Checks in the order AJV evaluates keywords, so that the first failure found while
    /// explaining matches AJV's first error.
    pub(crate) checks: Vec<Check>,
}

#[derive(Debug)]
pub(crate) enum Check {
    False,
    Ref(NodeId),
    ConstStr(Box<str>),
    Const(Value),
    Enum(Box<EnumSet>),
    Not(NodeId),
    AnyOf(Box<Union>),
    OneOf(Box<Union>),
    AllOf(Box<[NodeId]>),
    /// An `allOf` whose `if`/`then` members test one literal property: only the members whose
    /// `if` can hold for the instance's tag value are evaluated.
    AllOfTagged(Box<CondTable>),
    If {
        cond: NodeId,
        then: Option<NodeId>,
        otherwise: Option<NodeId>,
    },
    Num(Box<NumChecks>),
    Str(Box<StrChecks>),
    Arr(Box<ArrPlan>),
    Obj(Box<ObjPlan>),
}

#[derive(Debug, Default)]
pub(crate) struct EnumSet {
    pub(crate) strings: Vec<Box<str>>,
    pub(crate) string_set: Option<AHashSet<Box<str>>>,
    pub(crate) others: Vec<Value>,
}

impl EnumSet {
    pub(crate) fn contains_str(&self, s: &str) -> bool {
        match &self.string_set {
            Some(set) => set.contains(s),
            None => self.strings.iter().any(|c| &**c == s),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Union {
    pub(crate) branches: Box<[NodeId]>,
    /// Type mask of each branch: a branch whose mask excludes the instance's type fails.
    pub(crate) masks: Box<[u8]>,
    /// Branches told apart by a literal string property.
    pub(crate) tag: Option<TagTable>,
}

#[derive(Debug)]
pub(crate) struct TagTable {
    pub(crate) property: Box<str>,
    /// Tag value → indexes into `branches` of the branches that can accept it.
    pub(crate) table: AHashMap<Box<str>, Vec<u32>>,
    /// Indexes of the branches that do not require the tag: the only ones an object without
    /// it can pass (every branch takes string literals alone for it, so an object whose tag is
    /// not a string passes none).
    pub(crate) absent: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct CondTable {
    /// Every member, in order (non-object instances and error reports use these).
    pub(crate) all: Box<[NodeId]>,
    /// Members that are not tag-guarded conditionals, evaluated always.
    pub(crate) others: Box<[NodeId]>,
    pub(crate) property: Box<str>,
    /// Tag value → the conditional members whose `if` accepts it.
    pub(crate) table: AHashMap<Box<str>, Vec<Guard>>,
}

/// A tag-dispatched conditional member of an `allOf`.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) member: NodeId,
    /// Its `if` read as lookups, when that `if` is an object schema of `properties` and
    /// `required` alone.
    pub(crate) cond: Option<FastCond>,
}

/// An `if` of `properties` and `required` alone, on an object: each named property is looked
/// up in the instance (instead of every member of the instance being matched against the
/// names), then `then` applies when it holds.
#[derive(Debug)]
pub(crate) struct FastCond {
    pub(crate) props: Box<[CondProp]>,
    pub(crate) then: NodeId,
}

/// A property an [`FastCond`] looks up.
#[derive(Debug)]
pub(crate) struct CondProp {
    pub(crate) name: Box<str>,
    /// Its schema under `properties`, if any.
    pub(crate) schema: Option<NodeId>,
    pub(crate) required: bool,
}

#[derive(Debug, Default)]
pub(crate) struct NumChecks {
    pub(crate) maximum: Option<f64>,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_maximum: Option<f64>,
    pub(crate) exclusive_minimum: Option<f64>,
    pub(crate) multiple_of: Option<f64>,
}

#[derive(Debug, Default)]
pub(crate) struct StrChecks {
    pub(crate) max_length: Option<usize>,
    pub(crate) min_length: Option<usize>,
    pub(crate) pattern: Option<u32>,
    pub(crate) format: Option<Format>,
}

#[derive(Debug)]
pub(crate) enum Rest {
    Any,
    Deny,
    Schema(NodeId),
}

#[derive(Debug)]
pub(crate) struct ArrPlan {
    pub(crate) max_items: Option<usize>,
    pub(crate) min_items: Option<usize>,
    pub(crate) unique: bool,
    pub(crate) prefix: Box<[NodeId]>,
    pub(crate) rest: Rest,
    /// Draft-07 `additionalItems` beside array-form `items`: AJV checks the extra items before
    /// the tuple, so the first error comes from them.
    pub(crate) rest_first: bool,
    pub(crate) contains: Option<NodeId>,
    pub(crate) min_contains: usize,
    pub(crate) max_contains: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct ObjPlan {
    pub(crate) max_properties: Option<usize>,
    pub(crate) min_properties: Option<usize>,
    /// Every name the schema mentions (properties, required, dependencies), in first-seen order.
    pub(crate) names: Box<[Box<str>]>,
    pub(crate) lookup: Lookup,
    /// Schema of each name from `properties` (`None`: the name is not in `properties`).
    pub(crate) props: Box<[Option<NodeId>]>,
    /// Indexes of the required names, in schema order.
    pub(crate) required: Box<[u32]>,
    pub(crate) required_mask: [u64; INLINE_NAME_BITS / 64],
    pub(crate) property_names: Option<NodeId>,
    pub(crate) additional: Rest,
    pub(crate) pattern_props: Box<[(u32, NodeId)]>,
    pub(crate) dependent_required: Box<[(u32, Box<[u32]>)]>,
    pub(crate) dependent_schemas: Box<[(u32, NodeId)]>,
}

impl ObjPlan {
    pub(crate) fn index_of(&self, key: &str) -> Option<u32> {
        self.index_of_key(key)
    }

    /// [`ObjPlan::index_of`] of a [`Key`], whose text is made only for a name of eight bytes or
    /// more whose print matches (or for a large plan's hash lookup).
    #[inline]
    pub(crate) fn index_of_key<'a, K: Key<'a>>(&self, key: K) -> Option<u32> {
        match &self.lookup {
            Lookup::Linear(prints, bits) => {
                let print = key.print();
                if bits & print_bit(print) == 0 {
                    return None;
                }
                let short = print & 0xFF < 8;
                for (k, p) in prints.iter().enumerate() {
                    if *p == print
                        && (short || self.names.get(k).is_some_and(|n| **n == *key.text()))
                    {
                        return Some(k as u32);
                    }
                }
                None
            }
            Lookup::Hash(map) => map.get(key.text()).copied(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Lookup {
    /// Each name's [`key_print`], compared before the name itself, and the union of their
    /// [`print_bit`]s: a key whose bit is not in it is none of the names.
    Linear(Box<[u64]>, u64),
    Hash(AHashMap<Box<str>, u32>),
}

/// One of 64 bits picked by a print (for a set of names as one word).
#[inline]
pub(crate) fn print_bit(print: u64) -> u64 {
    1 << (print.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

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

    /// Second pass, once every node exists: branch type masks, literal-only unions merged into
    /// enums, and tag tables for unions told apart by a literal property.
    fn add_tag_tables(&mut self) {
        for id in 0..self.plan.nodes.len() {
            let mut checks = std::mem::take(&mut self.plan.nodes[id].checks);
            for check in &mut checks {
                let (Check::AnyOf(u) | Check::OneOf(u)) = check else {
                    continue;
                };
                u.masks = u
                    .branches
                    .iter()
                    .map(|b| self.effective_types(*b))
                    .collect();
                u.tag = self.tag_table(&u.branches);
            }
            for check in &mut checks {
                if let Check::AllOf(members) = check
                    && let Some(t) = self.cond_table(members)
                {
                    *check = Check::AllOfTagged(Box::new(t));
                }
            }
            // anyOf of plain literals (how TypeBox writes a union of string literals).
            for check in &mut checks {
                if let Check::AnyOf(u) = check
                    && let Some(set) = self.literal_union(&u.branches)
                {
                    *check = Check::Enum(Box::new(set));
                }
            }
            self.plan.nodes[id].checks = checks;
        }
    }

    /// The node after following bare `$ref` chains.
    fn target(&self, id: NodeId) -> NodeId {
        self.plan.alias[id as usize]
    }

    fn effective_types(&self, id: NodeId) -> u8 {
        let n = &self.plan.nodes[self.target(id) as usize];
        let mut mask = n.types;
        if mask & T_NUM != 0 {
            mask |= T_INT;
        }
        mask
    }

    /// String literals a node accepts when it accepts nothing else.
    fn literals(&self, id: NodeId) -> Option<Vec<Box<str>>> {
        let n = &self.plan.nodes[self.target(id) as usize];
        if n.types & T_STR == 0 {
            return None;
        }
        match n.checks.as_slice() {
            [Check::ConstStr(s)] => Some(vec![s.clone()]),
            [Check::Enum(e)] if e.others.is_empty() => Some(e.strings.clone()),
            _ => None,
        }
    }

    fn literal_union(&self, branches: &[NodeId]) -> Option<EnumSet> {
        let mut all = Vec::new();
        for b in branches {
            all.extend(self.literals(*b)?);
        }
        Some(enum_set(all.into_iter().map(|s| Value::String(s.into()))))
    }

    /// The `if` and `then` of a member that is an `if`/`then` alone (no `else`, no type),
    /// through `$ref`s.
    fn conditional(&self, member: NodeId) -> Option<(NodeId, NodeId)> {
        let id = self.target(member);
        let n = &self.plan.nodes[id as usize];
        match n.checks.as_slice() {
            [
                Check::If {
                    cond,
                    then: Some(then),
                    otherwise: None,
                },
            ] if n.types == T_ANY => Some((*cond, *then)),
            _ => None,
        }
    }

    /// The tag property and values a conditional member's `if` demands, when its `if`
    /// requires one literal string property and it has no `else`.
    fn guarded(&self, member: NodeId) -> Option<Guarded> {
        let (cond, _) = self.conditional(member)?;
        let c = &self.plan.nodes[self.target(cond) as usize];
        let o = c.checks.iter().find_map(|c| {
            if let Check::Obj(o) = c {
                Some(&**o)
            } else {
                None
            }
        })?;
        let tags = o
            .required
            .iter()
            .filter_map(|r| {
                let values = self.literals(o.props[*r as usize]?)?;
                Some((o.names[*r as usize].clone(), values))
            })
            .collect::<Vec<_>>();
        (!tags.is_empty()).then_some((member, tags))
    }

    /// The `if` of a guarded member as lookups (see [`FastCond`]), when it is that simple. The
    /// tag `property` is left out: the dispatch found its value among the literals the `if`
    /// accepts for it.
    fn fast_cond(&self, member: NodeId, property: &str) -> Option<FastCond> {
        let (cond, then) = self.conditional(member)?;
        let c = &self.plan.nodes[self.target(cond) as usize];
        let [Check::Obj(o)] = c.checks.as_slice() else {
            return None;
        };
        let simple = c.types & T_OBJ != 0
            && o.max_properties.is_none()
            && o.min_properties.is_none()
            && matches!(o.additional, Rest::Any)
            && o.pattern_props.is_empty()
            && o.property_names.is_none()
            && o.dependent_required.is_empty()
            && o.dependent_schemas.is_empty();
        if !simple {
            return None;
        }
        let props = o
            .names
            .iter()
            .enumerate()
            .filter(|(_, name)| &***name != property)
            .map(|(k, name)| CondProp {
                name: name.clone(),
                schema: o.props[k],
                required: o.required.contains(&(k as u32)),
            })
            .collect();
        Some(FastCond { props, then })
    }

    fn cond_table(&self, members: &[NodeId]) -> Option<CondTable> {
        let guarded: Vec<_> = members.iter().filter_map(|m| self.guarded(*m)).collect();
        if guarded.len() < 2 {
            return None;
        }
        // The tag: a property every guarded member's `if` requires as a literal.
        let property = guarded[0].1.iter().map(|(n, _)| n.clone()).find(|name| {
            guarded
                .iter()
                .all(|(_, tags)| tags.iter().any(|(n, _)| n == name))
        })?;
        let mut table: AHashMap<Box<str>, Vec<Guard>> = AHashMap::new();
        for (member, tags) in &guarded {
            let Some((_, values)) = tags.iter().find(|(n, _)| *n == property) else {
                continue;
            };
            for v in values {
                table.entry(v.clone()).or_default().push(Guard {
                    member: *member,
                    cond: self.fast_cond(*member, &property),
                });
            }
        }
        let dispatched: Vec<NodeId> = guarded.iter().map(|(m, _)| *m).collect();
        Some(CondTable {
            all: members.into(),
            others: members
                .iter()
                .copied()
                .filter(|m| !dispatched.contains(m))
                .collect(),
            property,
            table,
        })
    }

    fn tag_table(&self, branches: &[NodeId]) -> Option<TagTable> {
        if branches.len() < 2 {
            return None;
        }
        let objs: Vec<&ObjPlan> = branches
            .iter()
            .map(|b| {
                let n = &self.plan.nodes[self.target(*b) as usize];
                n.checks.iter().find_map(|c| {
                    if let Check::Obj(o) = c {
                        Some(&**o)
                    } else {
                        None
                    }
                })
            })
            .collect::<Option<_>>()?;
        'candidate: for (i, name) in objs[0].names.iter().enumerate() {
            let Some(first) = objs[0].props[i] else {
                continue;
            };
            let mut table: AHashMap<Box<str>, Vec<u32>> = AHashMap::new();
            for (bi, o) in objs.iter().enumerate() {
                let prop = if bi == 0 {
                    Some(first)
                } else {
                    o.index_of(name).and_then(|j| o.props[j as usize])
                };
                let Some(values) = prop.and_then(|p| self.literals(p)) else {
                    continue 'candidate;
                };
                for v in values {
                    table.entry(v).or_default().push(bi as u32);
                }
            }
            let absent = objs
                .iter()
                .enumerate()
                .filter(|(_, o)| o.index_of(name).is_none_or(|j| !o.required.contains(&j)))
                .map(|(bi, _)| bi as u32)
                .collect();
            return Some(TagTable {
                property: name.clone(),
                table,
                absent,
            });
        }
        None
    }
}

/// A conditional member and the literal properties (name, accepted values) its `if` requires.
type Guarded = (NodeId, Vec<(Box<str>, Vec<Box<str>>)>);

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

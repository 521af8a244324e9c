//! The intermediate representation every generator reads, and its lowering from a
//! [`SchemaDocument`]: named types (objects, string enums, unions, aliases) with wire names kept
//! exactly, inline types named from their path, and the protocol identity and name lists.
//!
//! The lowering rules are documented in `docs/codegen.md`; the short form:
//! - a definition keeps its name; an inline object, enum or union is named after the path that
//!   reaches it (`Parent` + `Property`, `Item` for array items, `Value` for map values, the tag
//!   value for a union branch, `Variant<i>` for an untagged branch); a node whose text equals a
//!   definition or an earlier inline node reuses that type; a taken name gets `2`, `3`, …;
//! - `allOf` is merged into one object, and distributed over a union part;
//! - `oneOf`/`anyOf`: null branches make the type nullable; string constants make an enum; a
//!   property that is a required string constant (or enum) in every branch, with distinct values,
//!   makes a tagged union (an explicit `discriminator` wins); anything else is an untagged union
//!   tried in order; a union covering every JSON kind is a free JSON value;
//! - a union is open (unknown variants are kept raw) only when it says `x-agentwire-open: true`:
//!   a `oneOf`/`anyOf` whose every branch pins the tag rejects any other tag value (whether the
//!   union is the root or its variants are open objects, which admit unknown keys, not unknown
//!   tags), and the decoders agree with the validator on that.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use agentwire_schema::identity::{AGENTWIRE_IDENTITY, CHAINLESSCHAIN_IDENTITY, IdentitySource};
use agentwire_schema::versions::WireVersion;
use agentwire_schema::{SchemaDocument, canonical, pointer};
use serde_json::{Map, Value};

use crate::error::CodegenError;
use crate::names::{self, NameScope};

/// Most named types one document may lower to.
pub const MAX_TYPES: usize = 50_000;
/// Most variants `allOf` distribution over union parts may create for one node.
pub const MAX_DISTRIBUTED_VARIANTS: usize = 256;
/// Most reference/`allOf` views one lowering computes: `allOf` parts that share references
/// fan out, and a document built to fan out exponentially stops here instead of running away.
pub const MAX_VIEW_STEPS: usize = 250_000;
/// Fewest types in a reference cycle (through any containment) that Rust output cuts with a
/// wrapper ending the compiler's drop check: a longer chain overflows its recursion limit.
pub const LONG_CYCLE: usize = 24;
/// Deepest nesting of schema nodes the lowering follows (the JSON parser already stops at 127).
pub const MAX_LOWERING_DEPTH: usize = 256;
/// Keywords that constrain a value without changing its type, kept in documentation comments.
pub const CONSTRAINT_KEYWORDS: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "default",
    "deprecated",
];

/// The protocol's identity, from the root `x-agentwire` block or ChainlessChain's `x-cc-protocol`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// Protocol name.
    pub name: Option<String>,
    /// Newest wire version.
    pub version: Option<Version>,
    /// Oldest wire version a peer may speak.
    pub min_version: Option<Version>,
    /// Feature names, in document order.
    pub features: Vec<String>,
}

/// A protocol version as written: an integer (`1`) or a dotted string (`"1.5"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// An integer version.
    Integer(i64),
    /// A dotted version string.
    Text(String),
}

/// Everything a generator needs.
#[derive(Debug, Clone)]
pub struct Ir {
    /// File name of the schema (for the header).
    pub schema_name: String,
    /// Protocol digest of the schema.
    pub digest: String,
    /// `$id` of the schema.
    pub schema_id: Option<String>,
    /// Protocol identity.
    pub identity: Identity,
    /// Method names: the root `methods` map, then every `method` constant or enum, first seen first.
    pub methods: Vec<String>,
    /// Event names: every `event` constant or enum, then the values of `*EventType` enums.
    pub events: Vec<String>,
    /// Every method with its direction, params and result types (see [`crate::methods`]).
    pub method_table: Vec<crate::methods::Method>,
    /// Named types in a deterministic order (definitions in document order, each followed by
    /// the inline types first reached from it).
    pub types: Vec<TypeDef>,
    /// The type of a whole message, when the document root is a schema of its own.
    pub root: Option<String>,
    /// The whole document as compact JSON text: the generated validators walk it.
    pub schema_text: String,
    /// `$defs` or `definitions`.
    pub definitions_keyword: String,
    /// Whether the document is draft-07 (a `$ref` hides its siblings, `items` may be a tuple).
    pub draft_07: bool,
    /// Every definition: its key in the document and its type's name, in document order.
    pub definitions: Vec<(String, String)>,
    index: BTreeMap<String, usize>,
    cyclic: BTreeMap<String, usize>,
    long_cycles: BTreeMap<String, usize>,
}

/// One named type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDef {
    /// Type name (PascalCase, unique in the document).
    pub name: String,
    /// JSON Pointer of the schema node it comes from.
    pub pointer: String,
    /// Documentation lines (description, constraints).
    pub doc: Vec<String>,
    /// What it is.
    pub kind: TypeKind,
}

/// The kinds of named types.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// An object with named properties.
    Object(ObjectType),
    /// A closed set of strings.
    Enum(Vec<String>),
    /// A union of types.
    Union(UnionType),
    /// Another name for a type.
    Alias(Ty),
}

/// An object type.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectType {
    /// Properties in schema order.
    pub fields: Vec<Field>,
    /// What other properties may be present.
    pub extra: Extra,
}

/// Properties beyond the named ones.
#[derive(Debug, Clone, PartialEq)]
pub enum Extra {
    /// None allowed (`additionalProperties: false`): decoding rejects unknown keys.
    Closed,
    /// Any JSON value allowed, kept when decoding.
    Any,
    /// Values of this type allowed, kept when decoding.
    Typed(Ty),
}

/// One property of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Wire name, exactly as in the schema.
    pub wire: String,
    /// Its type.
    pub ty: Ty,
    /// Whether the property must be present.
    pub required: bool,
    /// Documentation lines.
    pub doc: Vec<String>,
    /// Constraints a generator may check.
    pub checks: Checks,
}

/// Constraints on a property's own value that generators can turn into checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks {
    /// `minLength` (strings, in code points).
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minimum`, when it is an integer.
    pub minimum: Option<i64>,
    /// `maximum`, when it is an integer.
    pub maximum: Option<i64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
}

impl Checks {
    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        *self == Checks::default()
    }
}

/// A union.
#[derive(Debug, Clone, PartialEq)]
pub struct UnionType {
    /// The tag property of a tagged union.
    pub tag: Option<String>,
    /// Variants in schema order.
    pub variants: Vec<Variant>,
    /// Whether unknown variants are kept (raw JSON) instead of rejected.
    pub open: bool,
}

/// One variant of a union.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Case name (PascalCase, unique in the union).
    pub name: String,
    /// The tag value that selects this variant (tagged unions only: exactly one).
    pub tags: Vec<TagValue>,
    /// The variant's type.
    pub ty: Ty,
}

/// A value of a union's tag property: a string, boolean or number constant.
#[derive(Debug, Clone, PartialEq)]
pub enum TagValue {
    /// A string constant.
    Text(String),
    /// `true` or `false`.
    Bool(bool),
    /// A number constant.
    Number(serde_json::Number),
}

impl TagValue {
    fn from_json(value: &Value) -> Option<TagValue> {
        match value {
            Value::String(s) => Some(TagValue::Text(s.clone())),
            Value::Bool(b) => Some(TagValue::Bool(*b)),
            Value::Number(n) => Some(TagValue::Number(n.clone())),
            _ => None,
        }
    }

    /// The value as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            TagValue::Text(s) => Value::String(s.clone()),
            TagValue::Bool(b) => Value::Bool(*b),
            TagValue::Number(n) => Value::Number(n.clone()),
        }
    }

    /// The string, for a string tag.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            TagValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a JSON literal (`"req"`, `true`, `1`), which is also a TypeScript, Kotlin
    /// and Swift literal of it.
    pub fn literal(&self) -> String {
        canonical::compact_text(&self.to_json())
    }

    /// The case name of the variant it selects: a string in PascalCase (`acceptOnce` →
    /// `AcceptOnce`); a boolean or number after the tag and the value (`ok: true` → `OkTrue`).
    pub fn label(&self, tag: &str) -> String {
        match self {
            TagValue::Text(s) => names::pascal(s),
            other => names::pascal(&format!("{tag}_{}", other.literal())),
        }
    }
}

/// The type of a value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ty {
    /// Any JSON value.
    Any,
    /// `true` or `false`.
    Bool,
    /// An integer (64-bit signed).
    Int,
    /// Any JSON number, kept exactly as written.
    Number,
    /// A string.
    String,
    /// An array.
    Array(Box<Ty>),
    /// An object used as a map from strings.
    Map(Box<Ty>),
    /// A named type.
    Ref(String),
    /// The type or `null`.
    Nullable(Box<Ty>),
}

impl Ty {
    /// Whether `null` is a value of this type.
    pub fn admits_null(&self) -> bool {
        matches!(self, Ty::Any | Ty::Nullable(_))
    }
}

impl Ir {
    /// Lowers a document. `schema_name` is what the header names (usually the file name).
    pub fn lower(doc: &SchemaDocument, schema_name: &str) -> Result<Ir, CodegenError> {
        Lowerer::new(doc).run(schema_name, None)
    }

    /// Lowers a document, naming the root type `root_name` (e.g. `GatewayFrame`) instead of
    /// `<ProtocolName>Message`.
    pub fn lower_with_root_name(
        doc: &SchemaDocument,
        schema_name: &str,
        root_name: Option<&str>,
    ) -> Result<Ir, CodegenError> {
        Lowerer::new(doc).run(schema_name, root_name)
    }

    /// A named type.
    pub fn get(&self, name: &str) -> Option<&TypeDef> {
        self.index.get(name).map(|&i| &self.types[i])
    }

    /// Whether `ty` is a string, directly or through aliases.
    pub fn string_leaf(&self, ty: &Ty) -> bool {
        let mut ty = ty;
        for _ in 0..MAX_LOWERING_DEPTH {
            match ty {
                Ty::String => return true,
                Ty::Ref(name) => match self.get(name).map(|t| &t.kind) {
                    Some(TypeKind::Alias(inner)) => ty = inner,
                    _ => return false,
                },
                _ => return false,
            }
        }
        false
    }

    /// The object behind a type, following aliases.
    pub fn object_of(&self, ty: &Ty) -> Option<&ObjectType> {
        let mut ty = ty;
        for _ in 0..MAX_LOWERING_DEPTH {
            match ty {
                Ty::Ref(name) => match &self.get(name)?.kind {
                    TypeKind::Object(o) => return Some(o),
                    TypeKind::Alias(inner) => ty = inner,
                    _ => return None,
                },
                _ => return None,
            }
        }
        None
    }

    /// Whether a value of type `target` held directly (not through an array or map) inside
    /// `owner` closes a cycle of direct containment, so languages with inline storage need a box.
    pub fn needs_indirection(&self, owner: &str, target: &Ty) -> bool {
        let Some(&owner_scc) = self.cyclic.get(owner) else {
            return false;
        };
        match target {
            Ty::Ref(name) => self.cyclic.get(name) == Some(&owner_scc),
            Ty::Nullable(inner) => self.needs_indirection(owner, inner),
            _ => false,
        }
    }

    /// The string values of a single-value or multi-value enum type.
    pub fn enum_values(&self, ty: &Ty) -> Option<&[String]> {
        match ty {
            Ty::Ref(name) => match &self.get(name)?.kind {
                TypeKind::Enum(values) => Some(values),
                TypeKind::Alias(inner) => self.enum_values(inner),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a value of type `target` (a reference, however deeply inside arrays, maps or
    /// `null`) held by `owner` is an edge of a long reference cycle ([`LONG_CYCLE`] or more
    /// types, through any containment): Rust's drop check walks such a chain one type at a time
    /// and overflows its recursion limit (E0320) unless the chain is cut by a wrapper with its
    /// own destructor.
    pub fn in_long_cycle(&self, owner: &str, target: &str) -> bool {
        match (self.long_cycles.get(owner), self.long_cycles.get(target)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// Whether any type is part of a long reference cycle (see [`Ir::in_long_cycle`]).
    pub fn has_long_cycles(&self) -> bool {
        !self.long_cycles.is_empty()
    }

    fn compute_cycles(&mut self) {
        let direct = self.successors(false);
        for (id, members) in strongly_connected(&direct).into_iter().enumerate() {
            for m in members {
                self.cyclic.insert(self.types[m].name.clone(), id);
            }
        }
        let any = self.successors(true);
        for (id, members) in strongly_connected(&any)
            .into_iter()
            .filter(|m| m.len() >= LONG_CYCLE)
            .enumerate()
        {
            for m in members {
                self.long_cycles.insert(self.types[m].name.clone(), id);
            }
        }
    }

    /// The types each type refers to: directly (through `null` only), or with `through_all`
    /// also through arrays, maps and typed extra properties.
    fn successors(&self, through_all: bool) -> Vec<Vec<usize>> {
        self.types
            .iter()
            .map(|t| {
                let mut out = BTreeSet::new();
                let mut add = |ty: &Ty| {
                    let mut ty = ty;
                    loop {
                        match ty {
                            Ty::Nullable(inner) => ty = inner,
                            Ty::Array(inner) | Ty::Map(inner) if through_all => ty = inner,
                            _ => break,
                        }
                    }
                    if let Ty::Ref(name) = ty
                        && let Some(&i) = self.index.get(name)
                    {
                        out.insert(i);
                    }
                };
                match &t.kind {
                    TypeKind::Object(o) => {
                        o.fields.iter().for_each(|f| add(&f.ty));
                        if let (Extra::Typed(ty), true) = (&o.extra, through_all) {
                            add(ty);
                        }
                    }
                    TypeKind::Union(u) => u.variants.iter().for_each(|v| add(&v.ty)),
                    TypeKind::Alias(ty) => add(ty),
                    TypeKind::Enum(_) => {}
                }
                out.into_iter().collect()
            })
            .collect()
    }
}

/// The cyclic strongly connected components of a graph (Tarjan's algorithm, iteratively, so a
/// long chain cannot overflow the stack): each has several members or a self-edge.
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut out = Vec::new();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut counter = 0usize;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(start, 0)];
        index[start] = counter;
        low[start] = counter;
        counter += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            if *next < succ[v].len() {
                let w = succ[v][*next];
                *next += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 || succ[v].contains(&v) {
                        members.sort_unstable();
                        out.push(members);
                    }
                }
            }
        }
    }
    out
}

struct Lowerer<'d> {
    doc: &'d SchemaDocument,
    types: Vec<Option<TypeDef>>,
    scope: NameScope,
    /// Pointer of a definition (or another reference target) → its type name.
    by_pointer: HashMap<String, String>,
    /// Compact text of a node that became a named type → that name.
    by_text: HashMap<String, String>,
    /// Views computed so far (see [`MAX_VIEW_STEPS`]).
    view_steps: std::cell::Cell<usize>,
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

impl<'d> Lowerer<'d> {
    fn new(doc: &'d SchemaDocument) -> Self {
        Lowerer {
            doc,
            types: Vec::new(),
            scope: NameScope::new(),
            by_pointer: HashMap::new(),
            by_text: HashMap::new(),
            view_steps: std::cell::Cell::new(0),
        }
    }

    fn run(mut self, schema_name: &str, root_name: Option<&str>) -> Result<Ir, CodegenError> {
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

    fn lower(
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
    fn named(
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

    fn lower_inner(
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

    #[allow(clippy::too_many_arguments)]
    fn lower_union(
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

    /// The effective schema of a node: references followed, `allOf` merged.
    fn view<'v>(&self, node: &'v Value, depth: usize) -> Result<Cow<'v, Value>, CodegenError> {
        let steps = self.view_steps.get() + 1;
        self.view_steps.set(steps);
        if steps > MAX_VIEW_STEPS {
            return Err(CodegenError::TooComplex {
                limit: MAX_VIEW_STEPS,
            });
        }
        if depth > MAX_LOWERING_DEPTH {
            return Err(CodegenError::TooDeep {
                pointer: String::new(),
                limit: MAX_LOWERING_DEPTH,
            });
        }
        let Value::Object(map) = node else {
            return Ok(Cow::Borrowed(node));
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            let (target, value) = self.doc.resolve_ref("", reference)?;
            let _ = target;
            let resolved = self.view(value, depth + 1)?.into_owned();
            if map.len() == 1 {
                return Ok(Cow::Owned(resolved));
            }
            let mut merged = resolved;
            let mut siblings = map.clone();
            siblings.remove("$ref");
            merge_object(&mut merged, &Value::Object(siblings));
            return Ok(Cow::Owned(merged));
        }
        if map.contains_key("allOf") {
            return Ok(Cow::Owned(self.merge_all_of(node, depth)?));
        }
        Ok(Cow::Borrowed(node))
    }

    /// Merges `allOf` parts into one schema; union parts are distributed (one merged variant per
    /// branch, capped at [`MAX_DISTRIBUTED_VARIANTS`]).
    fn merge_all_of(&self, node: &Value, depth: usize) -> Result<Value, CodegenError> {
        let Value::Object(map) = node else {
            return Ok(node.clone());
        };
        let mut base_map = map.clone();
        let parts = match base_map.remove("allOf") {
            Some(Value::Array(parts)) => parts,
            _ => Vec::new(),
        };
        let mut base = Value::Object(base_map);
        let mut unions: Vec<(Vec<Value>, Option<Value>)> = Vec::new();
        for part in &parts {
            let view = self.view(part, depth + 1)?.into_owned();
            let union_key = ["oneOf", "anyOf"].into_iter().find(|k| {
                view.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|b| !b.iter().all(is_constraint_only))
            });
            match union_key {
                Some(key) => {
                    let mut rest = view.as_object().cloned().unwrap_or_default();
                    let branches = match rest.remove(key) {
                        Some(Value::Array(b)) => b,
                        _ => Vec::new(),
                    };
                    let discriminator = rest.remove("discriminator");
                    merge_object(&mut base, &Value::Object(rest));
                    unions.push((branches, discriminator));
                }
                None => merge_object(&mut base, &view),
            }
        }
        if unions.is_empty() {
            return Ok(base);
        }
        let mut variants = vec![base.clone()];
        let mut discriminator = None;
        for (branches, disc) in unions {
            if variants.len().saturating_mul(branches.len()) > MAX_DISTRIBUTED_VARIANTS {
                continue;
            }
            discriminator = discriminator.or(disc);
            let mut next = Vec::new();
            for v in &variants {
                for b in &branches {
                    let mut merged = v.clone();
                    let view = self.view(b, depth + 1)?;
                    merge_object(&mut merged, &view);
                    next.push(merged);
                }
            }
            variants = next;
        }
        let mut out = Map::new();
        for key in ["title", "description", "x-agentwire-open"] {
            if let Some(v) = base.get(key) {
                out.insert(key.to_owned(), v.clone());
            }
        }
        for v in &mut variants {
            if let Value::Object(m) = v {
                m.remove("title");
                m.remove("description");
            }
        }
        out.insert("anyOf".to_owned(), Value::Array(variants));
        if let Some(d) = discriminator {
            out.insert("discriminator".to_owned(), d);
        }
        Ok(Value::Object(out))
    }
}

/// Folds `part` into `base`: properties are united (a constant or enum refines a property that is
/// already there), `required` lists are united, `additionalProperties: false` wins, and other
/// keywords are kept from the first part that has them.
fn merge_object(base: &mut Value, part: &Value) {
    let (Value::Object(base), Value::Object(part)) = (base, part) else {
        return;
    };
    for (key, value) in part {
        match key.as_str() {
            "properties" => {
                let Value::Object(incoming) = value else {
                    continue;
                };
                let entry = base
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(props) = entry {
                    for (name, schema) in incoming {
                        // `allOf` intersects: a constant, an enum or a reference is narrower
                        // than what an earlier part declared, and anything is narrower than a
                        // bare `{type: X}`.
                        let refines = ["const", "enum", "$ref"]
                            .iter()
                            .any(|k| schema.get(*k).is_some());
                        match props.get(name) {
                            Some(existing) if !refines && !is_generic(existing) => {}
                            _ => {
                                props.insert(name.clone(), schema.clone());
                            }
                        }
                    }
                }
            }
            "required" => {
                let Value::Array(incoming) = value else {
                    continue;
                };
                let entry = base
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(req) = entry {
                    for r in incoming {
                        if !req.contains(r) {
                            req.push(r.clone());
                        }
                    }
                }
            }
            "additionalProperties" => {
                if value == &Value::Bool(false) || !base.contains_key(key) {
                    base.insert(key.clone(), value.clone());
                }
            }
            "not" | "if" | "then" | "else" | "$ref" | "allOf" => {}
            _ => {
                base.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
}

/// Whether a property schema says no more than a JSON type (`{}`, `{"type": "object"}`), so a
/// later `allOf` part's schema for the same property is at least as specific.
fn is_generic(schema: &Value) -> bool {
    match schema {
        Value::Bool(true) => true,
        Value::Object(map) => map
            .keys()
            .all(|k| matches!(k.as_str(), "type" | "title" | "description")),
        _ => false,
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

/// Whether a schema only constrains (required, not, pattern, …) without saying what type a value is.
fn is_constraint_only(schema: &Value) -> bool {
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
fn string_values(schema: &Value) -> Option<Vec<String>> {
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

fn dedup(values: Vec<String>) -> Vec<String> {
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

/// The identity through the schema engine ([`SchemaDocument::identity`]); a version written as a
/// JSON integer (ChainlessChain) stays an integer in the generated constants.
fn read_identity(doc: &SchemaDocument) -> Result<Identity, CodegenError> {
    let id = doc.identity()?;
    let block = match id.source {
        Some(IdentitySource::Agentwire) => doc.value().get(AGENTWIRE_IDENTITY),
        Some(IdentitySource::ChainlessChain) => doc.value().get(CHAINLESSCHAIN_IDENTITY),
        _ => None,
    };
    let version = |v: Option<&WireVersion>, key: &str| {
        let v = v?;
        let numeric = block.and_then(|b| b.get(key)).is_some_and(Value::is_number);
        Some(match v.as_str().parse::<i64>() {
            Ok(i) if numeric => Version::Integer(i),
            _ => Version::Text(v.as_str().to_owned()),
        })
    };
    Ok(Identity {
        name: id.name.clone(),
        version: version(id.version.as_ref(), "version"),
        min_version: version(
            id.minimum_compatible_version.as_ref(),
            "minimumCompatibleVersion",
        ),
        features: id.features.clone(),
    })
}

fn collect_names(doc: &SchemaDocument) -> (Vec<String>, Vec<String>) {
    let mut methods = Vec::new();
    let mut events = Vec::new();
    if let Some(Value::Object(map)) = doc.value().get("methods") {
        methods.extend(map.keys().cloned());
    }
    let mut event_types = Vec::new();
    agentwire_schema::walk::for_each_subschema(doc.value(), |at, schema| {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            if let Some(values) = props.get("method").and_then(string_values) {
                methods.extend(values);
            }
            if let Some(values) = props.get("event").and_then(string_values) {
                events.extend(values);
            }
        }
        let defs_prefix = format!("/{}/", doc.definitions_keyword());
        if let Some(name) = at.strip_prefix(&defs_prefix)
            && !name.contains('/')
            && name.ends_with("EventType")
            && let Some(values) = string_values(schema)
        {
            event_types.extend(values);
        }
    });
    events.extend(event_types);
    (dedup(methods), dedup(events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lower(v: Value) -> Ir {
        let doc = SchemaDocument::from_value(v).unwrap();
        Ir::lower(&doc, "test.schema.json").unwrap()
    }

    #[test]
    fn inline_objects_are_named_from_their_path_and_deduplicated() {
        let ir = lower(json!({"$defs": {
            "A": {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            "B": {"type": "object", "properties": {"same": {"type": "object", "properties": {"x": {"type": "string"}}}}}
        }}));
        let names: Vec<_> = ir.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["A", "AInner", "B"]);
        let TypeKind::Object(b) = &ir.get("B").unwrap().kind else {
            panic!()
        };
        assert_eq!(b.fields[0].ty, Ty::Ref("AInner".into()));
    }

    #[test]
    fn detects_tags_and_openness() {
        let ir = lower(json!({"$defs": {"D": {"oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {"kind": {"const": "a"}}},
            {"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {"kind": {"enum": ["b", "c"]}}}
        ]}}}));
        let TypeKind::Union(u) = &ir.get("D").unwrap().kind else {
            panic!()
        };
        assert_eq!(u.tag.as_deref(), Some("kind"));
        assert!(!u.open);
        let names: Vec<_> = u.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "C"]);
        assert_eq!(u.variants[2].tags, [TagValue::Text("c".into())]);
    }

    #[test]
    fn free_json_values_and_recursion() {
        let ir = lower(json!({"$defs": {
            "J": {"oneOf": [{"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
                {"type": "array", "items": {"$ref": "#/$defs/J"}}, {"type": "object", "additionalProperties": {"$ref": "#/$defs/J"}}]},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
        }}));
        assert_eq!(ir.get("J").unwrap().kind, TypeKind::Alias(Ty::Any));
        assert!(ir.needs_indirection("Node", &Ty::Ref("Node".into())));
        assert!(!ir.needs_indirection("J", &Ty::Ref("Node".into())));
    }

    #[test]
    fn root_name_can_name_a_definition_and_the_root_stays_closed() {
        let schema = json!({"oneOf": [{"$ref": "#/$defs/Frame"}], "$defs": {"Frame": {"oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["type"], "properties": {"type": {"const": "req"}}},
            {"type": "object", "additionalProperties": false, "required": ["type"], "properties": {"type": {"const": "res"}}}
        ]}}});
        let doc = SchemaDocument::from_value(schema).unwrap();
        let plain = Ir::lower(&doc, "f.json").unwrap();
        assert_eq!(plain.root.as_deref(), Some("ProtocolMessage"));
        let rooted = Ir::lower_with_root_name(&doc, "f.json", Some("Frame")).unwrap();
        let TypeKind::Union(u) = &rooted.get("Frame").unwrap().kind else {
            panic!()
        };
        // Being the root does not open a union: the schema rejects an unknown `type`.
        assert!(!u.open);
        assert_eq!(rooted.root.as_deref(), Some("Frame"));
        assert!(rooted.get("ProtocolMessage").is_none());
    }

    #[test]
    fn only_the_schema_opens_a_union() {
        // Open object variants admit unknown keys, not unknown tags.
        let variants = json!([
            {"type": "object", "required": ["type"], "properties": {"type": {"const": "a"}}},
            {"type": "object", "required": ["type"], "properties": {"type": {"const": "b"}}}
        ]);
        let ir = lower(json!({"$defs": {
            "Closed": {"oneOf": variants.clone()},
            "Open": {"oneOf": variants, "x-agentwire-open": true}
        }}));
        let open = |name: &str| match &ir.get(name).unwrap().kind {
            TypeKind::Union(u) => (u.tag.clone(), u.open),
            other => panic!("{other:?}"),
        };
        assert_eq!(open("Closed"), (Some("type".into()), false));
        assert_eq!(open("Open"), (Some("type".into()), true));
    }

    #[test]
    fn exponential_all_of_fan_out_is_an_error() {
        let mut defs = serde_json::Map::new();
        defs.insert(
            "A0".into(),
            json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        );
        for i in 1..40 {
            let prev = format!("#/$defs/A{}", i - 1);
            defs.insert(
                format!("A{i}"),
                json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}),
            );
        }
        let doc = SchemaDocument::from_value(json!({"$defs": defs})).unwrap();
        let err = Ir::lower(&doc, "fan.json").unwrap_err();
        assert_eq!(err.code(), "codegen.too-complex");
    }

    #[test]
    fn all_of_distributes_over_unions() {
        let ir = lower(json!({"$defs": {
            "Base": {"type": "object", "required": ["t"], "properties": {"t": {"type": "string"}, "seq": {"type": "integer"}}},
            "E": {"allOf": [{"$ref": "#/$defs/Base"}, {"oneOf": [
                {"properties": {"t": {"const": "x"}, "a": {"type": "string"}}},
                {"properties": {"t": {"const": "y"}}}
            ]}]}
        }}));
        let TypeKind::Union(u) = &ir.get("E").unwrap().kind else {
            panic!()
        };
        assert_eq!(u.tag.as_deref(), Some("t"));
        let names: Vec<_> = u.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["X", "Y"]);
        let TypeKind::Object(x) = &ir.get("EX").unwrap().kind else {
            panic!()
        };
        let wires: Vec<_> = x.fields.iter().map(|f| f.wire.as_str()).collect();
        assert_eq!(wires, ["t", "seq", "a"]);
    }
}

//! The IR's data types, which every generator reads: the protocol identity, the named types
//! (objects, string enums, unions, aliases) with their fields, variants and tag values, the type
//! of a value, and the lookups generators make through aliases.

use std::collections::BTreeMap;

use agentwire_schema::canonical;
use serde_json::Value;

use super::MAX_LOWERING_DEPTH;
use crate::names;

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
    pub(super) index: BTreeMap<String, usize>,
    pub(super) cyclic: BTreeMap<String, usize>,
    pub(super) long_cycles: BTreeMap<String, usize>,
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
    pub(super) fn from_json(value: &Value) -> Option<TagValue> {
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
}

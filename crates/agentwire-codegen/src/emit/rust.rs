//! Rust bindings: serde structs and enums that round-trip every valid message exactly.
//!
//! Closed objects deny unknown fields; open objects keep unknown fields in a flattened map.
//! Optional properties are `Option` and skipped when `None`; an optional property that admits
//! `null` is `Option<Option<T>>` (or `Option<Value>`) so that absent and `null` stay apart.
//! Numbers are `serde_json::Number` (kept exactly as written), integers `i64`. Tagged unions
//! dispatch on the tag by hand: unknown tags are an error for closed unions and kept as raw JSON
//! in `Unknown` for open ones. A variant's one-value tag (`emit::TagConstants`) is an associated
//! constant of its struct, not a field: the struct's serde code writes it and checks it.

use std::collections::BTreeMap;

use crate::emit::{Quote, TagConstants, TypeNames, header_text, push_doc, quote};
use crate::ir::{Extra, Ir, ObjectType, TagValue, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::names::{self, NameScope};

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "try", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof",
    "unsized", "virtual", "yield", "union",
];
/// The method-table types, emitted before `METHOD_TABLE` when the schema has methods.
const METHOD_SUPPORT: &str = r#"
/// Who sends a method's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodDirection {
    /// A request the client sends and the server answers.
    ClientRequest,
    /// A request the server sends and the client answers.
    ServerRequest,
    /// A message nobody answers.
    Notification,
}

/// One method: its wire name, who sends it, the names of its params and result types (`None`
/// when they are not a named type: no params, any JSON value), and the schema's `scope` and
/// `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: &'static str,
    pub direction: MethodDirection,
    pub params: ::std::option::Option<&'static str>,
    pub result: ::std::option::Option<&'static str>,
    pub scope: ::std::option::Option<&'static str>,
    pub since: ::std::option::Option<&'static str>,
}

impl MethodInfo {
    /// The method named `name` sent in `direction`.
    pub fn find(name: &str, direction: MethodDirection) -> ::std::option::Option<&'static MethodInfo> {
        METHOD_TABLE.iter().find(|m| m.name == name && m.direction == direction)
    }
}

/// A method as a type: its wire name, direction, and the types of its params and result (`()`
/// for a message without params and for a notification's result).
pub trait Method {
    const METHOD: &'static str;
    const DIRECTION: MethodDirection;
    type Params;
    type Result;
}
"#;

/// Cannot be raw identifiers.
const NON_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];
/// Prelude and helper names a generated type must not shadow.
const RESERVED_TYPES: &[&str] = &[
    "Self",
    "Option",
    "Result",
    "Some",
    "None",
    "Ok",
    "Err",
    "Vec",
    "String",
    "Box",
    "Default",
    "Clone",
    "Copy",
    "Debug",
    "PartialEq",
    "Eq",
    "Serialize",
    "Deserialize",
    "Value",
    "Map",
    "Number",
    "BTreeMap",
    "Send",
    "Sync",
    "Sized",
    "Fn",
    "From",
    "Into",
    "Iterator",
    "ToString",
    "ToOwned",
    "Drop",
    "Ord",
    "PartialOrd",
    "Hash",
    "Method",
    "MethodInfo",
    "MethodDirection",
];

/// The wrapper that cuts a long reference cycle for the drop check: its own destructor ends the
/// compiler's walk (a `Box` chain of many types overflows it, E0320), and the value it owns sits
/// in a `ManuallyDrop` that the destructor takes back, so no `unsafe` is needed.
const INDIRECT: &str = r#"
    /// A boxed value inside a long reference cycle of types; it dereferences to the value and
    /// (de)serializes as the value itself.
    pub struct Indirect<T>(::std::mem::ManuallyDrop<::std::option::Option<::std::boxed::Box<T>>>);

    impl<T> Indirect<T> {
        /// Wraps a value.
        pub fn new(value: T) -> Self {
            Indirect(::std::mem::ManuallyDrop::new(::std::option::Option::Some(::std::boxed::Box::new(value))))
        }
    }

    impl<T> ::std::ops::Deref for Indirect<T> {
        type Target = T;
        fn deref(&self) -> &T {
            match &*self.0 {
                ::std::option::Option::Some(value) => value,
                // Only the destructor empties the slot.
                ::std::option::Option::None => ::std::unreachable!("Indirect is empty only while it is dropped"),
            }
        }
    }

    impl<T> ::std::ops::DerefMut for Indirect<T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut *self.0 {
                ::std::option::Option::Some(value) => value,
                ::std::option::Option::None => ::std::unreachable!("Indirect is empty only while it is dropped"),
            }
        }
    }

    impl<T> ::std::ops::Drop for Indirect<T> {
        fn drop(&mut self) {
            let slot = ::std::mem::replace(&mut self.0, ::std::mem::ManuallyDrop::new(::std::option::Option::None));
            ::std::mem::drop(::std::mem::ManuallyDrop::into_inner(slot));
        }
    }

    impl<T: ::std::clone::Clone> ::std::clone::Clone for Indirect<T> {
        fn clone(&self) -> Self {
            Indirect::new((**self).clone())
        }
    }

    impl<T: ::std::fmt::Debug> ::std::fmt::Debug for Indirect<T> {
        fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
            (**self).fmt(f)
        }
    }

    impl<T: ::std::cmp::PartialEq> ::std::cmp::PartialEq for Indirect<T> {
        fn eq(&self, other: &Self) -> bool {
            **self == **other
        }
    }

    impl<T: serde::Serialize> serde::Serialize for Indirect<T> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
            (**self).serialize(serializer)
        }
    }

    impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Indirect<T> {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
            T::deserialize(deserializer).map(Indirect::new)
        }
    }
"#;

/// The serde support of variants whose one-value tags are constants: a serializer that writes
/// the tags before the fields the derived code writes, and the check that removes them before
/// the derived code (which does not know them, and may deny unknown fields) reads the rest.
const TAGGED: &str = r#"
    /// Serializes a variant's struct with its tags (wire name, value) first: the derived code
    /// writes a struct (or, with flattened extra properties, a map) and nothing else.
    pub(super) struct Tagged<S> {
        pub(super) inner: S,
        pub(super) tags: &'static [(&'static str, &'static str)],
    }

    fn not_an_object<E: serde::ser::Error>() -> E {
        E::custom("a tagged variant serializes as an object")
    }

    impl<S: serde::Serializer> serde::Serializer for Tagged<S> {
        type Ok = S::Ok;
        type Error = S::Error;
        type SerializeSeq = serde::ser::Impossible<S::Ok, S::Error>;
        type SerializeTuple = serde::ser::Impossible<S::Ok, S::Error>;
        type SerializeTupleStruct = serde::ser::Impossible<S::Ok, S::Error>;
        type SerializeTupleVariant = serde::ser::Impossible<S::Ok, S::Error>;
        type SerializeMap = S::SerializeMap;
        type SerializeStruct = S::SerializeStruct;
        type SerializeStructVariant = serde::ser::Impossible<S::Ok, S::Error>;

        fn serialize_struct(self, name: &'static str, len: usize) -> ::std::result::Result<S::SerializeStruct, S::Error> {
            let mut out = self.inner.serialize_struct(name, len + self.tags.len())?;
            for &(key, value) in self.tags {
                serde::ser::SerializeStruct::serialize_field(&mut out, key, value)?;
            }
            ::std::result::Result::Ok(out)
        }

        fn serialize_map(self, len: ::std::option::Option<usize>) -> ::std::result::Result<S::SerializeMap, S::Error> {
            let mut out = self.inner.serialize_map(len.map(|n| n + self.tags.len()))?;
            for &(key, value) in self.tags {
                serde::ser::SerializeMap::serialize_entry(&mut out, key, value)?;
            }
            ::std::result::Result::Ok(out)
        }

        fn is_human_readable(&self) -> bool {
            self.inner.is_human_readable()
        }

        fn serialize_bool(self, _: bool) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_i8(self, _: i8) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_i16(self, _: i16) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_i32(self, _: i32) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_i64(self, _: i64) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_u8(self, _: u8) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_u16(self, _: u16) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_u32(self, _: u32) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_u64(self, _: u64) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_f32(self, _: f32) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_f64(self, _: f64) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_char(self, _: char) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_str(self, _: &str) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_bytes(self, _: &[u8]) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_none(self) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_some<T: ?Sized + serde::Serialize>(self, _: &T) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_unit(self) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_unit_struct(self, _: &'static str) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_newtype_struct<T: ?Sized + serde::Serialize>(self, _: &'static str, _: &T) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_newtype_variant<T: ?Sized + serde::Serialize>(self, _: &'static str, _: u32, _: &'static str, _: &T) -> ::std::result::Result<S::Ok, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_seq(self, _: ::std::option::Option<usize>) -> ::std::result::Result<Self::SerializeSeq, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_tuple(self, _: usize) -> ::std::result::Result<Self::SerializeTuple, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> ::std::result::Result<Self::SerializeTupleStruct, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> ::std::result::Result<Self::SerializeTupleVariant, S::Error> { ::std::result::Result::Err(not_an_object()) }
        fn serialize_struct_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> ::std::result::Result<Self::SerializeStructVariant, S::Error> { ::std::result::Result::Err(not_an_object()) }
    }

    /// Checks a variant's tags (wire name, value) in `value` and removes them, keeping the
    /// order of the other keys: a missing or different tag is an error naming the expected one.
    /// A value that is not an object is left for the derived code to reject.
    pub(super) fn untag<E: serde::de::Error>(
        mut value: ::serde_json::Value,
        what: &str,
        tags: &[(&str, &str)],
    ) -> ::std::result::Result<::serde_json::Value, E> {
        if let ::serde_json::Value::Object(map) = &mut value {
            for &(key, expected) in tags {
                match map.get(key) {
                    ::std::option::Option::Some(::serde_json::Value::String(found)) if found == expected => {}
                    ::std::option::Option::Some(found) => {
                        return ::std::result::Result::Err(E::custom(::std::format!("{what}: expected `{key}` to be {expected:?}, found {found}")));
                    }
                    ::std::option::Option::None => {
                        return ::std::result::Result::Err(E::custom(::std::format!("{what}: missing `{key}` (expected {expected:?})")));
                    }
                }
            }
            let all = ::std::mem::take(map);
            *map = all.into_iter().filter(|(key, _)| !tags.iter().any(|(tag, _)| tag == key)).collect();
        }
        ::std::result::Result::Ok(value)
    }
"#;

fn field_ident(wire: &str) -> String {
    let s = names::snake(wire);
    if NON_RAW.contains(&s.as_str()) {
        format!("{s}_")
    } else if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

struct Gen<'a> {
    ir: &'a Ir,
    type_names: TypeNames,
    /// One-value tags written as constants of their variant's struct.
    tags: TagConstants,
    /// Rust types chosen in place of generated ones (`Options::rust_types`).
    rust_types: &'a BTreeMap<String, String>,
    out: String,
}

/// Generates the Rust module text.
pub(crate) fn generate(ir: &Ir, rust_types: &BTreeMap<String, String>) -> String {
    let type_names = TypeNames::claim(ir, RESERVED_TYPES);
    let mut g = Gen {
        ir,
        type_names,
        tags: TagConstants::find(ir),
        rust_types,
        out: String::new(),
    };
    g.preamble();
    for t in &ir.types {
        g.type_def(t);
    }
    g.methods();
    g.out
}

impl Gen<'_> {
    fn name(&self, ir_name: &str) -> String {
        self.type_names.get(ir_name)
    }

    fn preamble(&mut self) {
        let ir = self.ir;
        let q = |s: &str| quote(s, Quote::Braced);
        let mut o = format!("// {}\n", header_text(ir));
        o.push_str(&format!(
            "//! Protocol types of `{}`.\n",
            ir.schema_name.replace('`', "'")
        ));
        o.push_str("#![allow(clippy::all, dead_code, non_camel_case_types, unused_imports, rustdoc::all)]\n\n");
        o.push_str("use serde::{Deserialize, Serialize};\n\n");
        o.push_str(&format!("/// Protocol digest of the schema these types come from.\npub const SCHEMA_DIGEST: &str = {};\n", q(&ir.digest)));
        if let Some(id) = &ir.schema_id {
            o.push_str(&format!(
                "/// `$id` of the schema.\npub const SCHEMA_ID: &str = {};\n",
                q(id)
            ));
        }
        let id = &ir.identity;
        if let Some(name) = &id.name {
            o.push_str(&format!(
                "/// Protocol name.\npub const PROTOCOL_NAME: &str = {};\n",
                q(name)
            ));
        }
        let version = |v: &Version| match v {
            Version::Integer(i) => ("i64", i.to_string()),
            Version::Text(t) => ("&str", q(t)),
        };
        if let Some(v) = &id.version {
            let (t, lit) = version(v);
            o.push_str(&format!(
                "/// Newest wire version.\npub const PROTOCOL_VERSION: {t} = {lit};\n"
            ));
        }
        if let Some(v) = &id.min_version {
            let (t, lit) = version(v);
            o.push_str(&format!("/// Oldest wire version a peer may speak.\npub const PROTOCOL_MIN_VERSION: {t} = {lit};\n"));
        }
        let list = |items: &[String]| {
            items
                .iter()
                .map(|s| format!("    {},\n", q(s)))
                .collect::<String>()
        };
        // An empty list says nothing: it is left out.
        if !id.features.is_empty() {
            o.push_str(&format!(
                "/// Protocol features.\npub const PROTOCOL_FEATURES: &[&str] = &[\n{}];\n",
                list(&id.features)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.methods.is_empty() {
            o.push_str(&format!(
                "/// Method names.\npub const METHODS: &[&str] = &[\n{}];\n",
                list(&ir.methods)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.events.is_empty() {
            o.push_str(&format!(
                "/// Event names.\npub const EVENTS: &[&str] = &[\n{}];\n\n",
                list(&ir.events)
            ));
        }
        o.push_str(
            "/// Serde helpers of the generated types.\nmod support {\n    \
             /// Deserializes a present property, even `null`, as `Some`, so that an absent property\n    \
             /// (`None`, from `default`) and an explicit `null` stay apart.\n    \
             pub(super) fn present<'de, D, T>(deserializer: D) -> ::std::result::Result<::std::option::Option<T>, D::Error>\n    \
             where\n        D: serde::Deserializer<'de>,\n        T: serde::Deserialize<'de>,\n    {\n        \
             T::deserialize(deserializer).map(::std::option::Option::Some)\n    }\n",
        );
        if ir.has_long_cycles() {
            o.push_str(INDIRECT);
        }
        if !self.tags.is_empty() {
            o.push_str(TAGGED);
        }
        o.push_str("}\n");
        self.out.push_str(&o);
    }

    fn ty(&self, owner: &str, ty: &Ty) -> String {
        self.ty_at(owner, ty, true)
    }

    /// `ty` with its string leaf (through `Option` and `Vec`) written as `path`; `None` when
    /// the leaf is not a string.
    fn retyped(&self, ty: &Ty, path: &str) -> Option<String> {
        match ty {
            Ty::Nullable(inner) => Some(format!(
                "::std::option::Option<{}>",
                self.retyped(inner, path)?
            )),
            Ty::Array(inner) => Some(format!("::std::vec::Vec<{}>", self.retyped(inner, path)?)),
            ty if self.ir.string_leaf(ty) => Some(path.to_owned()),
            _ => None,
        }
    }

    /// The method table (`METHOD_TABLE`), the `Method` trait and one type per method
    /// implementing it; nothing when the schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let q = |s: &str| quote(s, Quote::Braced);
        let opt = |s: Option<&str>| match s {
            Some(s) => format!("::std::option::Option::Some({})", q(s)),
            None => "::std::option::Option::None".to_owned(),
        };
        let named = |ty: Option<&Ty>| match ty {
            Some(Ty::Ref(name)) => Some(self.name(name)),
            _ => None,
        };
        let mut s = String::from(METHOD_SUPPORT);
        s.push_str("\n/// Every method of the protocol, in schema order.\npub const METHOD_TABLE: &[MethodInfo] = &[\n");
        for m in &ir.method_table {
            s.push_str(&format!(
                "    MethodInfo {{ name: {}, direction: MethodDirection::{:?}, params: {}, result: {}, scope: {}, since: {} }},\n",
                q(&m.name),
                m.direction,
                opt(named(m.params.as_ref()).as_deref()),
                opt(named(m.result.as_ref()).as_deref()),
                opt(m.scope.as_deref()),
                opt(m.since.as_deref()),
            ));
        }
        s.push_str("];\n\n/// One type per method, implementing [`Method`].\npub mod methods {\n");
        for m in &ir.method_table {
            s.push_str(&format!(
                "    /// `{}`.\n    #[derive(Debug, Clone, Copy, PartialEq, Eq)]\n    pub enum {} {{}}\n",
                m.name.replace('`', "'"),
                m.type_name
            ));
        }
        s.push_str("}\n");
        for m in &ir.method_table {
            let params = m
                .params
                .as_ref()
                .map_or_else(|| "()".to_owned(), |t| self.ty("", t));
            let result = m
                .result
                .as_ref()
                .map_or_else(|| "()".to_owned(), |t| self.ty("", t));
            s.push_str(&format!(
                "\nimpl Method for methods::{} {{\n    const METHOD: &'static str = {};\n    const DIRECTION: MethodDirection = MethodDirection::{:?};\n    type Params = {params};\n    type Result = {result};\n}}\n",
                m.type_name,
                q(&m.name),
                m.direction,
            ));
        }
        self.out.push_str(&s);
    }

    /// The Rust type of `ty` held by `owner`; `direct` when not inside an array or map (only a
    /// direct cycle needs a `Box`; a long cycle needs `Indirect` wherever it passes).
    fn ty_at(&self, owner: &str, ty: &Ty, direct: bool) -> String {
        match ty {
            Ty::Any => "::serde_json::Value".to_owned(),
            Ty::Bool => "bool".to_owned(),
            Ty::Int => "i64".to_owned(),
            Ty::Number => "::serde_json::Number".to_owned(),
            Ty::String => "::std::string::String".to_owned(),
            Ty::Array(inner) => format!("::std::vec::Vec<{}>", self.ty_at(owner, inner, false)),
            Ty::Map(inner) if **inner == Ty::Any => {
                "::serde_json::Map<::std::string::String, ::serde_json::Value>".to_owned()
            }
            Ty::Map(inner) => {
                format!(
                    "::std::collections::BTreeMap<::std::string::String, {}>",
                    self.ty_at(owner, inner, false)
                )
            }
            Ty::Ref(name) => {
                if self.ir.in_long_cycle(owner, name) {
                    format!("support::Indirect<{}>", self.name(name))
                } else if direct && self.ir.needs_indirection(owner, ty) {
                    format!("::std::boxed::Box<{}>", self.name(name))
                } else {
                    self.name(name)
                }
            }
            Ty::Nullable(inner) => format!(
                "::std::option::Option<{}>",
                self.ty_at(owner, inner, direct)
            ),
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        // A one-value enum used only as variants' tags: the variants hold the value as a constant.
        if matches!(t.kind, TypeKind::Enum(_)) && self.tags.skips(&t.name) {
            return;
        }
        self.out.push('\n');
        let mut doc = t.doc.clone();
        if doc.is_empty() {
            doc.push(format!("`{}`", t.pointer.replace('`', "'")));
        }
        let name = self.name(&t.name);
        if let Some(path) = self.rust_types.get(&t.name) {
            push_doc(&mut self.out, "", "///", &doc);
            self.out.push_str(&format!("pub type {name} = {path};\n"));
            return;
        }
        match &t.kind {
            TypeKind::Object(o) => {
                push_doc(&mut self.out, "", "///", &doc);
                self.object(&t.name, &name, o);
            }
            TypeKind::Enum(values) => {
                push_doc(&mut self.out, "", "///", &doc);
                self.enumeration(&name, values);
            }
            TypeKind::Union(u) => {
                push_doc(&mut self.out, "", "///", &doc);
                self.union(&t.name, &name, u);
            }
            TypeKind::Alias(ty) => {
                push_doc(&mut self.out, "", "///", &doc);
                let target = self.ty(&t.name, ty);
                self.out.push_str(&format!("pub type {name} = {target};\n"));
            }
        }
    }

    fn object(&mut self, ir_name: &str, name: &str, o: &ObjectType) {
        let mut s = String::from("#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]\n");
        if o.extra == Extra::Closed {
            s.push_str("#[serde(deny_unknown_fields)]\n");
        }
        let chosen_of = |f: &crate::ir::Field| {
            self.rust_types
                .get(&format!("{ir_name}.{}", f.wire))
                .or_else(|| self.rust_types.get(&format!("*.{}", f.wire)))
                .and_then(|path| self.retyped(&f.ty, path))
        };
        // The variant's one-value tags (wire name, value), unless a Rust type was chosen for one.
        let tags: Vec<(&crate::ir::Field, &str)> = o
            .fields
            .iter()
            .filter(|f| chosen_of(f).is_none())
            .filter_map(|f| Some((f, self.tags.value(ir_name, &f.wire)?)))
            .collect();
        if !tags.is_empty() {
            // The derived code (de)serializes the other fields; the impls below add the tags.
            s.push_str("#[serde(remote = \"Self\")]\n");
        }
        s.push_str(&format!("pub struct {name} {{\n"));
        let mut scope = NameScope::new();
        for f in &o.fields {
            if tags.iter().any(|(t, _)| std::ptr::eq(*t, f)) {
                continue;
            }
            let ident = scope.claim(&field_ident(&f.wire));
            push_doc(&mut s, "    ", "///", &f.doc);
            let mut attrs = Vec::new();
            if ident.trim_start_matches("r#") != f.wire {
                attrs.push(format!("rename = {}", quote(&f.wire, Quote::Braced)));
            }
            let chosen = chosen_of(f);
            let inner = chosen.unwrap_or_else(|| self.ty(ir_name, &f.ty));
            let ty = if f.required {
                inner
            } else {
                attrs.push("default".to_owned());
                attrs.push("skip_serializing_if = \"::std::option::Option::is_none\"".to_owned());
                if f.ty.admits_null() {
                    attrs.push("deserialize_with = \"support::present\"".to_owned());
                }
                format!("::std::option::Option<{inner}>")
            };
            if !attrs.is_empty() {
                s.push_str(&format!("    #[serde({})]\n", attrs.join(", ")));
            }
            s.push_str(&format!("    pub {ident}: {ty},\n"));
        }
        match &o.extra {
            Extra::Closed => {}
            Extra::Any => {
                let ident = scope.claim("extra");
                s.push_str("    /// Properties the schema does not name, kept as they are.\n    #[serde(flatten)]\n");
                s.push_str(&format!(
                    "    pub {ident}: ::serde_json::Map<::std::string::String, ::serde_json::Value>,\n"
                ));
            }
            Extra::Typed(ty) => {
                let ident = scope.claim("extra");
                s.push_str("    /// Properties the schema does not name, kept as they are.\n    #[serde(flatten)]\n");
                s.push_str(&format!(
                    "    pub {ident}: ::std::collections::BTreeMap<::std::string::String, {}>,\n",
                    self.ty_at(ir_name, ty, false)
                ));
            }
        }
        s.push_str("}\n");
        if !tags.is_empty() {
            s.push_str(&tagged_impls(name, &tags));
        }
        self.out.push_str(&s);
    }

    fn enumeration(&mut self, name: &str, values: &[String]) {
        let mut scope = NameScope::with_reserved(&["Self"]);
        let cases: Vec<String> = values
            .iter()
            .map(|v| scope.claim(&names::pascal(v)))
            .collect();
        let mut s = String::from(
            "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize",
        );
        if values.len() == 1 {
            s.push_str(", Default");
        }
        s.push_str(")]\n");
        s.push_str(&format!("pub enum {name} {{\n"));
        for (i, (case, value)) in cases.iter().zip(values).enumerate() {
            if values.len() == 1 && i == 0 {
                s.push_str("    #[default]\n");
            }
            s.push_str(&format!(
                "    #[serde(rename = {})]\n    {case},\n",
                quote(value, Quote::Braced)
            ));
        }
        s.push_str("}\n\n");
        s.push_str(&format!("impl {name} {{\n    /// Every value, in schema order.\n    pub const ALL: &'static [{name}] = &["));
        s.push_str(
            &cases
                .iter()
                .map(|c| format!("{name}::{c}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        s.push_str("];\n\n    /// The wire value.\n    pub fn as_str(self) -> &'static str {\n        match self {\n");
        for (case, value) in cases.iter().zip(values) {
            s.push_str(&format!(
                "            {name}::{case} => {},\n",
                quote(value, Quote::Braced)
            ));
        }
        s.push_str("        }\n    }\n}\n");
        self.out.push_str(&s);
    }

    /// How a variant's value is decoded strictly (known variants only, at every level of
    /// nested unions): a union type's own `decode_known`, anything else through serde.
    fn strict_decode(&self, ir_name: &str, ty: &Ty) -> String {
        let rust_ty = self.ty(ir_name, ty);
        let union_name = match ty {
            Ty::Ref(name) => match self.ir.get(name).map(|t| &t.kind) {
                Some(TypeKind::Union(_)) => Some(self.name(name)),
                _ => None,
            },
            _ => None,
        };
        match union_name {
            Some(inner) if rust_ty.starts_with("::std::boxed::Box<") => {
                format!("{inner}::decode_known(value).map(::std::boxed::Box::new)")
            }
            Some(inner) if rust_ty.starts_with("support::Indirect<") => {
                format!("{inner}::decode_known(value).map(support::Indirect::new)")
            }
            Some(inner) => format!("{inner}::decode_known(value)"),
            None => format!(
                "::serde_json::from_value::<{rust_ty}>(value.clone()).map_err(|e| e.to_string())"
            ),
        }
    }

    fn union(&mut self, ir_name: &str, name: &str, u: &UnionType) {
        let mut s = String::new();
        let unknown = unknown_case(u);
        let derive = "#[derive(Debug, Clone, PartialEq)]\n";
        s.push_str(derive);
        s.push_str(&format!("pub enum {name} {{\n"));
        for v in &u.variants {
            if let Some(tag) = &u.tag {
                let tags = v
                    .tags
                    .iter()
                    .map(|t| format!("`{}`", t.literal().replace('`', "'")))
                    .collect::<Vec<_>>()
                    .join(", ");
                s.push_str(&format!(
                    "    /// {}: {}\n",
                    tag.replace('`', "'"),
                    crate::emit::doc_safe(&tags)
                ));
            }
            s.push_str(&format!("    {}({}),\n", v.name, self.ty(ir_name, &v.ty)));
        }
        let open = u.open && u.tag.is_some();
        if open {
            s.push_str("    /// A variant this version does not know (its tag has another value), kept as raw JSON.\n");
            s.push_str(&format!("    {unknown}(::serde_json::Value),\n"));
        }
        s.push_str("}\n\n");
        s.push_str(&format!("impl Serialize for {name} {{\n"));
        s.push_str("    fn serialize<S: serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {\n        match self {\n");
        for v in &u.variants {
            s.push_str(&format!(
                "            {name}::{}(value) => value.serialize(serializer),\n",
                v.name
            ));
        }
        if open {
            s.push_str(&format!(
                "            {name}::{unknown}(value) => value.serialize(serializer),\n"
            ));
        }
        s.push_str("        }\n    }\n}\n\n");
        let err = |text: &str| quote(&format!("{name}: {text}"), Quote::Braced);
        s.push_str(&format!("impl {name} {{\n"));
        s.push_str("    /// Decodes a known variant only: an unknown one is an error here, at every level of\n    /// nested unions, so that an enclosing union can try its other variants first.\n");
        s.push_str("    pub fn decode_known(value: &::serde_json::Value) -> ::std::result::Result<Self, ::std::string::String> {\n");
        match &u.tag {
            None => {
                for v in &u.variants {
                    s.push_str(&format!(
                        "        if let ::std::result::Result::Ok(v) = {} {{\n            return ::std::result::Result::Ok({name}::{}(v));\n        }}\n",
                        self.strict_decode(ir_name, &v.ty),
                        v.name
                    ));
                }
                s.push_str(&format!(
                    "        ::std::result::Result::Err(::std::string::String::from({}))\n",
                    err("the value matches no variant")
                ));
            }
            Some(tag) => {
                s.push_str(&format!(
                    "        match value.get({}) {{\n",
                    quote(tag, Quote::Braced)
                ));
                for v in &u.variants {
                    for t in &v.tags {
                        s.push_str(&format!(
                            "            {} => {}.map({name}::{}),\n",
                            tag_pattern(t),
                            self.strict_decode(ir_name, &v.ty),
                            v.name
                        ));
                    }
                }
                s.push_str(&format!(
                    "            ::std::option::Option::Some(other) => ::std::result::Result::Err(::std::format!({}, other)),\n",
                    err(&format!(
                        "unknown {} {{}}",
                        tag.replace('{', "{{").replace('}', "}}")
                    ))
                ));
                s.push_str(&format!(
                    "            ::std::option::Option::None => ::std::result::Result::Err(::std::string::String::from({})),\n        }}\n",
                    err(&format!("expected an object with `{tag}`"))
                ));
            }
        }
        s.push_str("    }\n}\n\n");
        s.push_str(&format!("impl<'de> Deserialize<'de> for {name} {{\n"));
        s.push_str("    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {\n");
        s.push_str("        let value = ::serde_json::Value::deserialize(deserializer)?;\n");
        s.push_str("        let known = Self::decode_known(&value);\n");
        match &u.tag {
            None => {
                // A variant that is an open union may keep an unknown value, but only when no
                // variant knows it.
                s.push_str("        if known.is_ok() {\n            return known.map_err(serde::de::Error::custom);\n        }\n");
                for v in &u.variants {
                    let rust_ty = self.ty(ir_name, &v.ty);
                    s.push_str(&format!(
                        "        if let ::std::result::Result::Ok(v) = ::serde_json::from_value::<{rust_ty}>(value.clone()) {{\n            return ::std::result::Result::Ok({name}::{}(v));\n        }}\n",
                        v.name
                    ));
                }
                s.push_str("        known.map_err(serde::de::Error::custom)\n");
            }
            Some(tag) if open => {
                let known_tags: Vec<String> = u
                    .variants
                    .iter()
                    .flat_map(|v| v.tags.iter().map(tag_pattern))
                    .collect();
                let required = common_required(self.ir, u, tag);
                let string_tags = u
                    .variants
                    .iter()
                    .all(|v| v.tags.iter().all(|t| t.as_text().is_some()));
                let tag_kind = if string_tags {
                    "::std::option::Option::Some(::serde_json::Value::String(_))"
                } else {
                    "::std::option::Option::Some(_)"
                };
                s.push_str(&format!(
                    "        let tag = value.get({});\n",
                    quote(tag, Quote::Braced)
                ));
                s.push_str(&format!(
                    "        let known_tag = match tag {{\n{}            _ => false,\n        }};\n",
                    known_tags
                        .iter()
                        .map(|p| format!("            {p} => true,\n"))
                        .collect::<String>()
                ));
                s.push_str(&format!(
                    "        // An unknown tag keeps the value raw, when it has every key all variants require.\n        let envelope_keys: &[&str] = &[{}];\n        let envelope = envelope_keys.iter().all(|key| value.get(*key).is_some());\n",
                    required
                        .iter()
                        .map(|k| quote(k, Quote::Braced))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                s.push_str(&format!(
                    "        match known {{\n            ::std::result::Result::Ok(v) => ::std::result::Result::Ok(v),\n            ::std::result::Result::Err(_) if !known_tag && envelope && ::std::matches!(tag, {tag_kind}) => ::std::result::Result::Ok({name}::{unknown}(value)),\n            ::std::result::Result::Err(e) => ::std::result::Result::Err(serde::de::Error::custom(e)),\n        }}\n"
                ));
            }
            Some(_) => {
                s.push_str("        known.map_err(serde::de::Error::custom)\n");
            }
        }
        s.push_str("    }\n}\n");
        self.out.push_str(&s);
    }
}

/// The tag constants of a variant's struct and its `Serialize`/`Deserialize`: the derived code
/// (`remote = "Self"`, inherent functions) handles the fields, these write the tags first and
/// check and remove them before it decodes the rest.
fn tagged_impls(name: &str, tags: &[(&crate::ir::Field, &str)]) -> String {
    let q = |s: &str| quote(s, Quote::Braced);
    let mut scope = NameScope::new();
    let mut s = format!("\nimpl {name} {{\n");
    for (f, value) in tags {
        let constant = scope.claim(&names::screaming(&f.wire));
        push_doc(&mut s, "    ", "///", &f.doc);
        s.push_str(&format!(
            "    /// The value of `{}`, this variant's tag: always written, and checked when decoding.\n    pub const {constant}: &'static str = {};\n",
            f.wire.replace('`', "'"),
            q(value)
        ));
    }
    s.push_str("}\n");
    let list = tags
        .iter()
        .map(|(f, value)| format!("({}, {})", q(&f.wire), q(value)))
        .collect::<Vec<_>>()
        .join(", ");
    s.push_str(&format!(
        "\nimpl Serialize for {name} {{\n    fn serialize<S: serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {{\n        {name}::serialize(self, support::Tagged {{ inner: serializer, tags: &[{list}] }})\n    }}\n}}\n"
    ));
    s.push_str(&format!(
        "\nimpl<'de> Deserialize<'de> for {name} {{\n    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {{\n        let value = support::untag::<D::Error>(::serde_json::Value::deserialize(deserializer)?, {}, &[{list}])?;\n        {name}::deserialize(value).map_err(serde::de::Error::custom)\n    }}\n}}\n",
        q(name)
    ));
    s
}

/// The head of a match arm over `value.get(tag)` (an `Option<&Value>`) selecting one tag value:
/// a pattern and, for strings and numbers, its guard.
fn tag_pattern(t: &TagValue) -> String {
    match t {
        TagValue::Text(text) => format!(
            "::std::option::Option::Some(::serde_json::Value::String(t)) if t == {}",
            quote(text, Quote::Braced)
        ),
        TagValue::Bool(b) => format!("::std::option::Option::Some(::serde_json::Value::Bool({b}))"),
        TagValue::Number(n) => match n.as_f64() {
            Some(f) => format!(
                "::std::option::Option::Some(::serde_json::Value::Number(n)) if n.as_f64() == ::std::option::Option::Some({f:?})"
            ),
            None => "::std::option::Option::Some(::serde_json::Value::Number(_))".to_owned(),
        },
    }
}

/// The keys every variant of a tagged union requires besides the tag (the union's envelope):
/// an unknown variant must still have them.
pub(crate) fn common_required(ir: &Ir, u: &UnionType, tag: &str) -> Vec<String> {
    let mut common: Option<Vec<String>> = None;
    for v in &u.variants {
        let keys: Vec<String> = match ir.object_of(&v.ty) {
            Some(o) => o
                .fields
                .iter()
                .filter(|f| f.required && f.wire != tag)
                .map(|f| f.wire.clone())
                .collect(),
            None => return Vec::new(),
        };
        common = Some(match common {
            None => keys,
            Some(prev) => prev.into_iter().filter(|k| keys.contains(k)).collect(),
        });
    }
    common.unwrap_or_default()
}

/// The name of the catch-all case of an open union, clear of the variants' names.
pub(crate) fn unknown_case(u: &UnionType) -> String {
    let mut scope = NameScope::new();
    for v in &u.variants {
        scope.claim(&v.name);
    }
    scope.claim("Unknown")
}

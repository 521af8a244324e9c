//! The head of the generated module: the identity constants (digest, `$id`, protocol name,
//! versions, features, method and event names) and the private `support` module of serde
//! helpers, with `Indirect` when the schema has long reference cycles and the tag serializer
//! and check when variants hold their tags as constants.

use super::Gen;
use crate::emit::{Quote, header_text, quote};
use crate::ir::Version;
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

impl Gen<'_> {
    pub(super) fn preamble(&mut self) {
        let ir = self.ir;
        let q = |s: &str| quote(s, Quote::Braced);
        let mut o = format!("// {}\n", header_text(ir));
        o.push_str(&format!(
            "//! Protocol types of `{}`.\n",
            crate::emit::doc_name(&ir.schema_name)
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
}

//! Unions: the enum of variants, its `Serialize`, `decode_known` (known variants only, at every
//! level of nested unions) and the `Deserialize` that falls back to the `Unknown` case of an open
//! tagged union; with the tag patterns, the envelope keys every variant requires and the name of
//! the catch-all case, which the other printers share.

use super::Gen;
use crate::emit::{Quote, quote};
use crate::ir::{Ir, TagValue, Ty, TypeKind, UnionType};
use crate::names::NameScope;
impl Gen<'_> {
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

    pub(super) fn union(&mut self, ir_name: &str, name: &str, u: &UnionType) {
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
                    crate::emit::doc_name(tag),
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

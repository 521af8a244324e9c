//! Object and enum declarations: an object type becomes a serde struct (closed objects deny
//! unknown fields, open ones flatten the rest into a map) whose one-value tags are associated
//! constants written and checked by hand-made `Serialize`/`Deserialize` impls; a string enum
//! becomes a Rust enum with `ALL` and `as_str`.

use super::{Gen, field_ident};
use crate::emit::{Quote, push_doc, quote};
use crate::ir::{Extra, ObjectType};
use crate::names::{self, NameScope};
impl Gen<'_> {
    pub(super) fn object(&mut self, ir_name: &str, name: &str, o: &ObjectType) {
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

    pub(super) fn enumeration(&mut self, name: &str, values: &[String]) {
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
            crate::emit::doc_name(&f.wire),
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

//! Rust bindings: serde structs and enums that round-trip every valid message exactly.
//!
//! Closed objects deny unknown fields; open objects keep unknown fields in a flattened map.
//! Optional properties are `Option` and skipped when `None`; an optional property that admits
//! `null` is `Option<Option<T>>` (or `Option<Value>`) so that absent and `null` stay apart.
//! Numbers are `serde_json::Number` (kept exactly as written), integers `i64`. Tagged unions
//! dispatch on the tag by hand: unknown tags are an error for closed unions and kept as raw JSON
//! in `Unknown` for open ones. A variant's one-value tag (`emit::TagConstants`) is an associated
//! constant of its struct, not a field: the struct's serde code writes it and checks it.
//!
//! This module holds the printer's state, the names it claims and the mapping from IR types to
//! Rust types; `preamble.rs` writes the identity constants and the `support` module, `decl.rs`
//! the object structs and string enums, `union.rs` the unions and their decoders, `methods.rs`
//! the method table.

mod decl;
mod methods;
mod preamble;
mod union;

use std::collections::BTreeMap;

use crate::emit::{TagConstants, TypeNames, push_doc};
use crate::ir::{Ir, Ty, TypeDef, TypeKind};
use crate::names;

pub(crate) use union::{common_required, unknown_case};

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "try", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof",
    "unsized", "virtual", "yield", "union",
];

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
}

//! Swift bindings: `Codable, Sendable` structs and enums, a `JSONValue` for free JSON, tagged
//! unions decoded through their tag (an `unknown` case keeping the raw JSON for open unions, those
//! marked `x-agentwire-open: true`; an unknown tag throws for closed ones), and
//! strict decoding of closed objects (an unexpected key throws).
//!
//! This module holds the printer's state, the names it claims and the mapping from IR types to
//! Swift types; `preamble.rs` writes the protocol constants and the support types and gives the
//! helper names their per-file prefix, `object.rs` the object structs with their coding,
//! `union.rs` the unions and their decoders, `methods.rs` the method metadata.

mod methods;
mod object;
mod preamble;
mod union;

use crate::emit::{Quote, TagConstants, TypeNames, push_doc, quote};
use crate::ir::{Ir, Ty, TypeDef, TypeKind};
use crate::names::{self, NameScope};

use preamble::rename_helpers;

const KEYWORDS: &[&str] = &[
    "associatedtype",
    "class",
    "deinit",
    "enum",
    "extension",
    "fileprivate",
    "func",
    "import",
    "init",
    "inout",
    "internal",
    "let",
    "operator",
    "private",
    "protocol",
    "public",
    "rethrows",
    "static",
    "struct",
    "subscript",
    "typealias",
    "var",
    "break",
    "case",
    "continue",
    "default",
    "defer",
    "do",
    "else",
    "fallthrough",
    "for",
    "guard",
    "if",
    "in",
    "repeat",
    "return",
    "switch",
    "where",
    "while",
    "as",
    "catch",
    "false",
    "is",
    "nil",
    "super",
    "self",
    "Self",
    "throw",
    "throws",
    "true",
    "try",
    "open",
    "some",
    "any",
    "Type",
    "await",
    "async",
];
const RESERVED: &[&str] = &[
    "String",
    "Int",
    "Double",
    "Bool",
    "Array",
    "Dictionary",
    "Optional",
    "JSONValue",
    "Indirect",
    "Codable",
    "Sendable",
    "Error",
    "Type",
    "Self",
    "Protocol",
    "Any",
    "Decoder",
    "Encoder",
    "CodingKey",
    "Data",
    "Date",
    "URL",
    "Set",
    "Result",
    "Equatable",
    "Hashable",
    "AnyCodingKey",
    "Never",
    "Void",
    "Character",
    "Float",
];

/// Member names Swift does not allow even in backticks, or that `self.` would misread.
const MEMBER_RESERVED: &[&str] = &[
    "self",
    "Self",
    "Type",
    "Protocol",
    "init",
    "deinit",
    "subscript",
    "super",
];

fn q(s: &str) -> String {
    quote(s, Quote::Braced)
}

fn ident(text: &str) -> String {
    if KEYWORDS.contains(&text) {
        format!("`{text}`")
    } else {
        text.to_owned()
    }
}

struct Gen<'a> {
    ir: &'a Ir,
    type_names: TypeNames,
    /// Prefix of the module-level helper names (`ChainlessChainMethods`), so that several
    /// generated files can share one Swift module.
    prefix: String,
    /// Tags written as constants of their variant.
    tags: TagConstants,
    out: String,
}

/// The prefix of a file's helper names: the protocol name in PascalCase, else the file's base
/// name.
fn helper_prefix(ir: &Ir, base_name: &str) -> String {
    names::pascal(ir.identity.name.as_deref().unwrap_or(base_name))
}

/// Generates the Swift file text.
pub(crate) fn generate(ir: &Ir, base_name: &str) -> String {
    let prefix = helper_prefix(ir, base_name);
    let helpers: Vec<String> = [
        "MethodDirection",
        "MethodInfo",
        "Method",
        "Methods",
        "Protocol",
        "JSONValue",
        "Indirect",
        "AnyCodingKey",
    ]
    .iter()
    .map(|h| format!("{prefix}{h}"))
    .collect();
    let mut reserved: Vec<&str> = RESERVED.to_vec();
    reserved.extend(helpers.iter().map(String::as_str));
    let type_names = TypeNames::claim(ir, &reserved);
    let mut g = Gen {
        ir,
        type_names,
        prefix,
        tags: TagConstants::find(ir),
        out: String::new(),
    };
    g.preamble();
    for t in &ir.types {
        g.type_def(t);
    }
    g.methods();
    rename_helpers(&g.out, &g.prefix)
}

impl Gen<'_> {
    fn name(&self, ir_name: &str) -> String {
        self.type_names.get(ir_name)
    }

    fn ty(&self, owner: &str, ty: &Ty) -> String {
        match ty {
            Ty::Any => "JSONValue".to_owned(),
            Ty::Bool => "Bool".to_owned(),
            Ty::Int => "Int".to_owned(),
            Ty::Number => "Double".to_owned(),
            Ty::String => "String".to_owned(),
            Ty::Array(inner) => format!("[{}]", self.ty("", inner)),
            Ty::Map(inner) => format!("[String: {}]", self.ty("", inner)),
            Ty::Ref(name) => {
                if self.ir.needs_indirection(owner, ty) {
                    format!("Indirect<{}>", self.name(name))
                } else {
                    self.name(name)
                }
            }
            Ty::Nullable(inner) => {
                let t = self.ty(owner, inner);
                if t.ends_with('?') { t } else { format!("{t}?") }
            }
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        let name = self.name(&t.name);
        let mut s = String::from("\n");
        push_doc(&mut s, "", "///", &t.doc);
        match &t.kind {
            TypeKind::Object(o) => self.object(&mut s, &t.name, &name, o),
            TypeKind::Enum(_) if self.tags.skips(&t.name) => return,
            TypeKind::Enum(values) => {
                s.push_str(&format!(
                    "public enum {name}: String, Codable, Sendable, CaseIterable {{\n"
                ));
                let mut scope = NameScope::with_reserved(MEMBER_RESERVED);
                for v in values {
                    s.push_str(&format!(
                        "    case {} = {}\n",
                        ident(&scope.claim(&names::camel(v))),
                        q(v)
                    ));
                }
                s.push_str("}\n");
            }
            TypeKind::Alias(ty) => s.push_str(&format!(
                "public typealias {name} = {}\n",
                self.ty(&t.name, ty)
            )),
            TypeKind::Union(u) => self.union(&mut s, &t.name, &name, u),
        }
        self.out.push_str(&s);
    }
}

//! TypeScript bindings: types (interfaces, string-literal unions, discriminated unions), the
//! protocol constants, and type guards for tagged unions that fail closed (unknown tag, missing
//! required key, or an extra key on a closed variant → `false`).

use crate::emit::{Quote, TypeNames, header_text, push_block_doc, quote};
use crate::ir::{Extra, Ir, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::names;

const RESERVED: &[&str] = &[
    "Array",
    "Record",
    "Object",
    "String",
    "Number",
    "Boolean",
    "Symbol",
    "Function",
    "Date",
    "Error",
    "Map",
    "Set",
    "Promise",
    "Json",
    "ReadonlyArray",
    "Readonly",
    "Partial",
    "Required",
    "Pick",
    "Omit",
    "BigInt",
];

fn q(s: &str) -> String {
    quote(s, Quote::Json { dollar: false })
}

fn key(wire: &str) -> String {
    if names::is_plain_identifier(wire) {
        wire.to_owned()
    } else {
        q(wire)
    }
}

struct Gen<'a> {
    ir: &'a Ir,
    type_names: TypeNames,
    out: String,
}

/// Generates the TypeScript module text.
pub(crate) fn generate(ir: &Ir) -> String {
    let type_names = TypeNames::claim(ir, RESERVED);
    let mut g = Gen {
        ir,
        type_names,
        out: String::new(),
    };
    g.preamble();
    for t in &ir.types {
        g.type_def(t);
    }
    g.out
}

impl Gen<'_> {
    fn name(&self, ir_name: &str) -> String {
        self.type_names.get(ir_name)
    }

    fn preamble(&mut self) {
        let ir = self.ir;
        let mut o = format!("// {}\n/* eslint-disable */\n\n", header_text(ir));
        o.push_str(&format!("/** Protocol digest of the schema these types come from. */\nexport const SCHEMA_DIGEST = {} as const;\n", q(&ir.digest)));
        if let Some(id) = &ir.schema_id {
            o.push_str(&format!(
                "/** `$id` of the schema. */\nexport const SCHEMA_ID = {} as const;\n",
                q(id)
            ));
        }
        let id = &ir.identity;
        if let Some(name) = &id.name {
            o.push_str(&format!(
                "/** Protocol name. */\nexport const PROTOCOL_NAME = {} as const;\n",
                q(name)
            ));
        }
        let lit = |v: &Version| match v {
            Version::Integer(i) => i.to_string(),
            Version::Text(t) => q(t),
        };
        if let Some(v) = &id.version {
            o.push_str(&format!(
                "/** Newest wire version. */\nexport const PROTOCOL_VERSION = {} as const;\n",
                lit(v)
            ));
        }
        if let Some(v) = &id.min_version {
            o.push_str(&format!("/** Oldest wire version a peer may speak. */\nexport const PROTOCOL_MIN_VERSION = {} as const;\n", lit(v)));
        }
        let list = |items: &[String]| {
            items
                .iter()
                .map(|s| format!("  {},\n", q(s)))
                .collect::<String>()
        };
        o.push_str(&format!(
            "/** Protocol features. */\nexport const PROTOCOL_FEATURES = [\n{}] as const;\n",
            list(&id.features)
        ));
        o.push_str(&format!(
            "/** Method names. */\nexport const METHODS = [\n{}] as const;\n",
            list(&ir.methods)
        ));
        o.push_str("/** A method name. */\nexport type MethodName = (typeof METHODS)[number];\n");
        o.push_str(&format!(
            "/** Event names. */\nexport const EVENTS = [\n{}] as const;\n",
            list(&ir.events)
        ));
        o.push_str("/** An event name. */\nexport type EventName = (typeof EVENTS)[number];\n\n");
        o.push_str("/** Any JSON value. */\nexport type Json = null | boolean | number | string | Json[] | { [key: string]: Json };\n\n");
        o.push_str(
            "function isRecord(value: unknown): value is Record<string, unknown> {\n  \
             return typeof value === \"object\" && value !== null && !Array.isArray(value);\n}\n\n\
             function hasKeys(value: Record<string, unknown>, required: readonly string[], allowed: readonly string[] | null): boolean {\n  \
             for (const key of required) {\n    if (!Object.prototype.hasOwnProperty.call(value, key)) return false;\n  }\n  \
             if (allowed !== null) {\n    for (const key of Object.keys(value)) {\n      if (allowed.indexOf(key) < 0) return false;\n    }\n  }\n  \
             return true;\n}\n",
        );
        self.out.push_str(&o);
    }

    fn ty(&self, ty: &Ty) -> String {
        match ty {
            Ty::Any => "Json".to_owned(),
            Ty::Bool => "boolean".to_owned(),
            Ty::Int | Ty::Number => "number".to_owned(),
            Ty::String => "string".to_owned(),
            Ty::Array(inner) => format!("Array<{}>", self.ty(inner)),
            Ty::Map(inner) => format!("{{ [key: string]: {} }}", self.ty(inner)),
            Ty::Ref(name) => match self.ir.enum_values(ty) {
                Some([one]) => q(one),
                _ => self.name(name),
            },
            Ty::Nullable(inner) => format!("{} | null", self.ty(inner)),
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        self.out.push('\n');
        let name = self.name(&t.name);
        let mut s = String::new();
        push_block_doc(&mut s, "", &t.doc);
        match &t.kind {
            TypeKind::Object(o) => {
                s.push_str(&format!("export interface {name} {{\n"));
                for f in &o.fields {
                    push_block_doc(&mut s, "  ", &f.doc);
                    let opt = if f.required { "" } else { "?" };
                    s.push_str(&format!("  {}{opt}: {};\n", key(&f.wire), self.ty(&f.ty)));
                }
                if o.extra != Extra::Closed {
                    s.push_str("  [key: string]: unknown;\n");
                }
                s.push_str("}\n");
            }
            TypeKind::Enum(values) => {
                let lits = values.iter().map(|v| q(v)).collect::<Vec<_>>();
                s.push_str(&format!("export type {name} = {};\n", lits.join(" | ")));
                s.push_str(&format!(
                    "/** Every value of `{name}`, in schema order. */\n"
                ));
                s.push_str(&format!(
                    "export const {name}Values = [{}] as const;\n",
                    lits.join(", ")
                ));
            }
            TypeKind::Alias(ty) => s.push_str(&format!("export type {name} = {};\n", self.ty(ty))),
            TypeKind::Union(u) => {
                let parts: Vec<String> = u.variants.iter().map(|v| self.ty(&v.ty)).collect();
                s.push_str(&format!(
                    "export type {name} =\n  | {};\n",
                    parts.join("\n  | ")
                ));
                if let Some(tag) = &u.tag {
                    self.guard(&mut s, &name, tag, u);
                }
            }
        }
        self.out.push_str(&s);
    }

    fn guard(&self, s: &mut String, name: &str, tag: &str, u: &UnionType) {
        s.push_str(&format!(
            "\n/** Whether `value` is a known `{name}` variant with its required keys and, for a closed variant, no other key. */\n"
        ));
        s.push_str(&format!("export function is{name}(value: unknown): value is {name} {{\n  if (!isRecord(value)) return false;\n"));
        s.push_str(&format!("  switch (value[{}]) {{\n", q(tag)));
        for v in &u.variants {
            for t in &v.tags {
                s.push_str(&format!("    case {}:\n", q(t)));
            }
            match self.ir.object_of(&v.ty) {
                Some(o) => {
                    let required: Vec<String> = o
                        .fields
                        .iter()
                        .filter(|f| f.required)
                        .map(|f| q(&f.wire))
                        .collect();
                    let allowed = if o.extra == Extra::Closed {
                        format!(
                            "[{}]",
                            o.fields
                                .iter()
                                .map(|f| q(&f.wire))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        "null".to_owned()
                    };
                    s.push_str(&format!(
                        "      return hasKeys(value, [{}], {allowed});\n",
                        required.join(", ")
                    ));
                }
                None => s.push_str("      return true;\n"),
            }
        }
        s.push_str("    default:\n      return false;\n  }\n}\n");
    }
}

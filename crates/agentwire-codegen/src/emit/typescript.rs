//! TypeScript bindings: types (interfaces, string-literal unions, discriminated unions), the
//! protocol constants, and type guards for tagged unions that fail closed (unknown tag, missing
//! required key, or an extra key on a closed variant → `false`).

use crate::emit::{Quote, TypeNames, header_text, push_block_doc, quote};
use crate::ir::{Extra, Ir, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::methods::MethodDirection;
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
    "ValidationError",
    "ValidationResult",
    "ProtocolValidationError",
    "DefinitionName",
    "MethodDirection",
    "MethodInfo",
    "ClientRequests",
    "ServerRequests",
    "Notifications",
];

/// The schema walker every TypeScript file carries (no runtime dependency): JSON Schema
/// draft-07 and 2020-12 keywords over the embedded document.
const VALIDATOR: &str = include_str!("runtime/validator.ts");

/// The method-table types, emitted before `METHOD_TABLE` when the schema has methods.
const METHOD_SUPPORT: &str = r#"
/** Who sends a method's message. */
export type MethodDirection = "clientRequest" | "serverRequest" | "notification";

/**
 * One method: its wire name, who sends it, the names of its params and result types (`null`
 * when they are not a named type: no params, any JSON value), and the schema's `scope` and
 * `since`.
 */
export interface MethodInfo {
  readonly name: string;
  readonly direction: MethodDirection;
  readonly params: string | null;
  readonly result: string | null;
  readonly scope: string | null;
  readonly since: string | null;
}
"#;

/// `validateParams` and `validateResult`, after `METHOD_SCHEMAS`.
const METHOD_VALIDATORS: &str = r#"
function validateMethodPart(direction: MethodDirection, method: string, part: 0 | 1, value: unknown): ValidationResult {
  const schemas = Object.prototype.hasOwnProperty.call(METHOD_SCHEMAS, direction + " " + method)
    ? METHOD_SCHEMAS[direction + " " + method]
    : undefined;
  if (schemas === undefined) {
    return { ok: false, errors: [{ instancePath: "", keyword: "method", message: "unknown " + direction + " method " + JSON.stringify(method) }] };
  }
  const pointer = schemas[part];
  return pointer === null ? { ok: true, errors: [] } : validateAt(pointer, value);
}

/** Validates the params of `method` sent as `direction` against its params type (any value passes when the type is not a named one). */
export function validateParams(direction: MethodDirection, method: string, params: unknown): ValidationResult {
  return validateMethodPart(direction, method, 0, params);
}

/** Validates the result of a `method` request against its result type (any value passes when the schema does not name one). */
export function validateResult(direction: MethodDirection, method: string, result: unknown): ValidationResult {
  return validateMethodPart(direction, method, 1, result);
}
"#;

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
    g.definition_validators();
    g.methods();
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
        // An empty list says nothing: it is left out.
        if !id.features.is_empty() {
            o.push_str(&format!(
                "/** Protocol features. */\nexport const PROTOCOL_FEATURES = [\n{}] as const;\n",
                list(&id.features)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.methods.is_empty() {
            o.push_str(&format!(
                "/** Method names. */\nexport const METHODS = [\n{}] as const;\n",
                list(&ir.methods)
            ));
        }
        o.push_str(if ir.methods.is_empty() {
            "/** A method name (the schema names none). */\nexport type MethodName = never;\n"
        } else {
            "/** A method name. */\nexport type MethodName = (typeof METHODS)[number];\n"
        });
        // An empty list says nothing: it is left out.
        if !ir.events.is_empty() {
            o.push_str(&format!(
                "/** Event names. */\nexport const EVENTS = [\n{}] as const;\n",
                list(&ir.events)
            ));
        }
        o.push_str(if ir.events.is_empty() {
            "/** An event name (the schema names none). */\nexport type EventName = never;\n\n"
        } else {
            "/** An event name. */\nexport type EventName = (typeof EVENTS)[number];\n\n"
        });
        o.push_str("/** Any JSON value. */\nexport type Json = null | boolean | number | string | Json[] | { [key: string]: Json };\n\n");
        o.push_str(
            "function isRecord(value: unknown): value is Record<string, unknown> {\n  \
             return typeof value === \"object\" && value !== null && !Array.isArray(value);\n}\n\n",
        );
        o.push_str(
            "/** The schema document these types come from, walked by the validators below. */\n",
        );
        o.push_str(&format!(
            "const SCHEMA: any = JSON.parse({});\n",
            q(&ir.schema_text)
        ));
        o.push_str(&format!(
            "const DRAFT_07 = {};\nconst DEFINITIONS_KEY = {};\n",
            ir.draft_07,
            q(&ir.definitions_keyword)
        ));
        if ir.definitions.is_empty() {
            o.push_str("/** The name of a definition of the schema. */\nexport type DefinitionName = never;\n\n");
        } else {
            o.push_str(&format!(
                "/** The name of a definition of the schema. */\nexport type DefinitionName =\n  | {};\n\n",
                ir.definitions
                    .iter()
                    .map(|(k, _)| q(k))
                    .collect::<Vec<_>>()
                    .join("\n  | ")
            ));
        }
        o.push_str(VALIDATOR);
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
                    self.guard(&mut s, t, &name, tag, u);
                }
            }
        }
        self.out.push_str(&s);
    }

    fn guard(&self, s: &mut String, t: &TypeDef, name: &str, tag: &str, u: &UnionType) {
        let ptr = q(&t.pointer);
        s.push_str(&format!(
            "\n/** Whether `value` is a valid `{name}`: every level checked against the schema. */\n"
        ));
        s.push_str(&format!(
            "export function is{name}(value: unknown): value is {name} {{\n  return validateAt({ptr}, value).ok;\n}}\n"
        ));
        let known: Vec<String> = u
            .variants
            .iter()
            .flat_map(|v| {
                v.tags
                    .iter()
                    .map(|t| t.as_text().map(q).unwrap_or_else(|| t.literal()))
            })
            .collect();
        if u.open {
            let envelope = crate::emit::rust::common_required(self.ir, u, tag);
            s.push_str(&format!(
                "\n/** A `{name}` variant this version does not know: its tag and the whole object, kept as they are. */\nexport interface Unknown{name} {{\n  readonly unknown: true;\n  readonly tag: string;\n  readonly raw: {{ [key: string]: Json }};\n}}\n"
            ));
            s.push_str(&format!(
                "\n/**\n * Decodes a `{name}`: a valid known variant is returned as it is; an object whose {} is not\n * a known one (and that has every key all variants require) is an `Unknown{name}`; anything\n * else throws `ProtocolValidationError`.\n */\n",
                crate::emit::doc_name(tag)
            ));
            s.push_str(&format!(
                "export function decode{name}(value: unknown): {name} | Unknown{name} {{\n  const result = validateAt({ptr}, value);\n  if (result.ok) return value as {name};\n  if (isRecord(value)) {{\n    const tag = value[{}];\n    const known: readonly unknown[] = [{}];\n    const envelope = [{}].every((key) => Object.prototype.hasOwnProperty.call(value, key));\n    if (typeof tag === \"string\" && known.indexOf(tag) < 0 && envelope) return {{ unknown: true, tag, raw: value as {{ [key: string]: Json }} }};\n  }}\n  throw new ProtocolValidationError(result.errors);\n}}\n",
                q(tag),
                known.join(", "),
                envelope.iter().map(|k| q(k)).collect::<Vec<_>>().join(", ")
            ));
        } else {
            s.push_str(&format!(
                "\n/** Decodes a `{name}`, failing closed: an unknown {}, a missing or extra key, or any invalid level throws `ProtocolValidationError`. */\n",
                crate::emit::doc_name(tag)
            ));
            s.push_str(&format!(
                "export function decode{name}(value: unknown): {name} {{\n  assertValid(validateAt({ptr}, value));\n  return value as {name};\n}}\n"
            ));
        }
    }

    /// The method metadata: `METHOD_TABLE`, one interface per direction mapping each method to
    /// its params and result types, and `validateParams`/`validateResult`; nothing when the
    /// schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let lit = |s: Option<&str>| s.map_or_else(|| "null".to_owned(), q);
        let mut s = String::from(METHOD_SUPPORT);
        s.push_str("\n/** Every method of the protocol, in schema order. */\nexport const METHOD_TABLE: readonly MethodInfo[] = [\n");
        for m in &ir.method_table {
            let row = super::method_row(m, q, "null", |n| self.name(n));
            s.push_str(&format!(
                "  {{ name: {}, direction: {}, params: {}, result: {}, scope: {}, since: {} }},\n",
                row[0], row[1], row[2], row[3], row[4], row[5],
            ));
        }
        s.push_str("];\n");
        for (direction, interface, doc) in [
            (
                MethodDirection::ClientRequest,
                "ClientRequests",
                "Requests the client sends: method name to its params and result types",
            ),
            (
                MethodDirection::ServerRequest,
                "ServerRequests",
                "Requests the server sends: method name to its params and result types",
            ),
            (
                MethodDirection::Notification,
                "Notifications",
                "Notifications: method name to its params type",
            ),
        ] {
            let entries: Vec<_> = ir
                .method_table
                .iter()
                .filter(|m| m.direction == direction)
                .collect();
            // A direction without methods gets no interface.
            if entries.is_empty() {
                continue;
            }
            s.push_str(&format!(
                "\n/** {doc}. */\nexport interface {interface} {{\n"
            ));
            for m in entries {
                let params = m
                    .params
                    .as_ref()
                    .map_or_else(|| "undefined".to_owned(), |t| self.ty(t));
                match &m.result {
                    Some(result) => s.push_str(&format!(
                        "  {}: {{ params: {params}; result: {} }};\n",
                        q(&m.name),
                        self.ty(result)
                    )),
                    None => s.push_str(&format!("  {}: {{ params: {params} }};\n", q(&m.name))),
                }
            }
            s.push_str("}\n");
        }
        s.push_str(
            "\nconst METHOD_SCHEMAS: { [key: string]: [string | null, string | null] } = {\n",
        );
        for m in &ir.method_table {
            s.push_str(&format!(
                "  {}: [{}, {}],\n",
                q(&format!("{} {}", m.direction.wire(), m.name)),
                lit(m.params_schema.as_deref()),
                lit(m.result_schema.as_deref()),
            ));
        }
        s.push_str("};\n");
        s.push_str(METHOD_VALIDATORS);
        self.out.push_str(&s);
    }

    /// `validate<Definition>` and `assert<Definition>` for every definition.
    fn definition_validators(&mut self) {
        let mut scope = crate::names::NameScope::with_reserved(&[
            "validateAt",
            "validateProtocolMessage",
            "validateDefinition",
            "assertValid",
        ]);
        let mut s = String::new();
        for (key, ir_name) in &self.ir.definitions {
            let name = self.name(ir_name);
            let validate = scope.claim(&format!("validate{name}"));
            let assert = scope.claim(&format!("assert{name}"));
            s.push_str(&format!(
                "\n/** Validates `value` against the definition `{}`. */\nexport function {validate}(value: unknown): ValidationResult {{\n  return validateDefinition({}, value);\n}}\n",
                crate::emit::doc_name(key),
                q(key)
            ));
            s.push_str(&format!(
                "/** Throws `ProtocolValidationError` unless `value` is a valid `{name}`. */\nexport function {assert}(value: unknown): asserts value is {name} {{\n  assertValid(validateDefinition({}, value));\n}}\n",
                q(key)
            ));
        }
        self.out.push_str(&s);
    }
}

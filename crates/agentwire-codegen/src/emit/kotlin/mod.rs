//! Kotlin bindings: data classes, enum classes with wire values, sealed classes for unions (an
//! explicit `Unknown` case keeping the raw map for open unions), the protocol constants, and a
//! fail-closed `check*` function per tagged union over the decoded-JSON map form.
//!
//! Sealed classes rather than sealed interfaces, because Debian's `kotlinc` predates sealed
//! interfaces (Kotlin 1.5). The value of each variant is wrapped, so one type can be a variant
//! of several unions.
//!
//! `mod.rs` declares the types, constants, validators and method table; `wire.rs` writes the
//! `toWire`/`fromWire` code placed inside them.

mod wire;

use crate::emit::{
    Measure, Quote, TagConstants, TypeNames, field_bounds, header_text, push_block_doc, quote,
};
use crate::ir::{Extra, Ir, Ty, TypeDef, TypeKind, Version};
use crate::names::{self, NameScope};
use wire::{PRESENT, WIRE_HELPERS};

const KEYWORDS: &[&str] = &[
    "as",
    "break",
    "class",
    "continue",
    "do",
    "else",
    "false",
    "for",
    "fun",
    "if",
    "in",
    "interface",
    "is",
    "null",
    "object",
    "package",
    "return",
    "super",
    "this",
    "throw",
    "true",
    "try",
    "typealias",
    "typeof",
    "val",
    "var",
    "when",
    "while",
];
const RESERVED: &[&str] = &[
    "Any",
    "Unit",
    "Nothing",
    "String",
    "Long",
    "Int",
    "Double",
    "Number",
    "Boolean",
    "List",
    "Map",
    "Set",
    "Array",
    "Pair",
    "Triple",
    "Result",
    "Enum",
    "Comparable",
    "Throwable",
    "Exception",
    "Error",
    "Char",
    "Byte",
    "Short",
    "Float",
    "Collection",
    "Iterable",
    "Sequence",
    "Lazy",
    "Companion",
    "MethodDirection",
    "MethodInfo",
    "Methods",
    "ValidationError",
    "ValidationResult",
    "ProtocolValidationError",
    "JsonParser",
    "IllegalArgumentException",
    "StringBuilder",
    "LinkedHashMap",
    "ArrayList",
    "HashMap",
    "Regex",
    "Present",
];

/// The schema walker and JSON reader/writer every Kotlin file carries (the standard library
/// only): JSON Schema draft-07 and 2020-12 keywords over the embedded document.
const VALIDATOR: &str = include_str!("../runtime/validator.kt");

/// Characters per string constant of the embedded schema: a JVM string constant holds at most
/// 65535 bytes of modified UTF-8, three per character at worst.
const SCHEMA_CHUNK: usize = 16_000;

/// The method-table types, emitted before `object Methods` when the schema has methods.
const METHOD_SUPPORT: &str = r#"
/** Who sends a method's message. */
enum class MethodDirection(val wireValue: String) {
    /** A request the client sends and the server answers. */
    CLIENT_REQUEST("clientRequest"),
    /** A request the server sends and the client answers. */
    SERVER_REQUEST("serverRequest"),
    /** A message nobody answers. */
    NOTIFICATION("notification")
}

/**
 * One method: its wire name, who sends it, the names of its params and result types (null when
 * they are not a named type: no params, any JSON value), and the schema's scope and since. The
 * type parameters are the Kotlin types of the params and the result (`Unit`: none).
 */
class MethodInfo<P, R>(
    val name: String,
    val direction: MethodDirection,
    val params: String?,
    val result: String?,
    val scope: String?,
    val since: String?
)
"#;

fn q(s: &str) -> String {
    quote(s, Quote::Json { dollar: true })
}

fn strip_nullable(ty: &Ty) -> Ty {
    match ty {
        Ty::Nullable(inner) => (**inner).clone(),
        other => other.clone(),
    }
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
    /// The schema document, to tell which types' pointers state their whole schema.
    doc: serde_json::Value,
    /// Tags written as constants of their variant.
    tags: TagConstants,
    package: String,
    type_names: TypeNames,
    out: String,
}

/// Generates the Kotlin file text.
pub(crate) fn generate(ir: &Ir, package: &str) -> String {
    let type_names = TypeNames::claim(ir, RESERVED);
    let package = package
        .split('.')
        .map(|p| ident(&names::snake(p)))
        .collect::<Vec<_>>()
        .join(".");
    let mut g = Gen {
        ir,
        doc: serde_json::from_str(&ir.schema_text).unwrap_or(serde_json::Value::Null),
        tags: TagConstants::find(ir),
        package,
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
        let mut o = format!("// {}\n", header_text(ir));
        o.push_str("@file:Suppress(\"unused\", \"ClassName\", \"EnumEntryName\", \"PropertyName\", \"RemoveRedundantBackticks\", \"SpellCheckingInspection\")\n\n");
        o.push_str(&format!("package {}\n\n", self.package));
        o.push_str(&format!("/** Protocol digest of the schema these types come from. */\nconst val SCHEMA_DIGEST: String = {}\n", q(&ir.digest)));
        if let Some(id) = &ir.schema_id {
            o.push_str(&format!(
                "/** `\\$id` of the schema. */\nconst val SCHEMA_ID: String = {}\n",
                q(id)
            ));
        }
        let id = &ir.identity;
        if let Some(name) = &id.name {
            o.push_str(&format!(
                "/** Protocol name. */\nconst val PROTOCOL_NAME: String = {}\n",
                q(name)
            ));
        }
        let lit = |v: &Version| match v {
            Version::Integer(i) => ("Long", format!("{i}L")),
            Version::Text(t) => ("String", q(t)),
        };
        if let Some(v) = &id.version {
            let (t, l) = lit(v);
            o.push_str(&format!(
                "/** Newest wire version. */\nconst val PROTOCOL_VERSION: {t} = {l}\n"
            ));
        }
        if let Some(v) = &id.min_version {
            let (t, l) = lit(v);
            o.push_str(&format!("/** Oldest wire version a peer may speak. */\nconst val PROTOCOL_MIN_VERSION: {t} = {l}\n"));
        }
        let list = |items: &[String]| {
            if items.is_empty() {
                "emptyList()".to_owned()
            } else {
                // No trailing comma: Kotlin before 1.4 rejects it.
                let entries: Vec<String> = items.iter().map(|s| format!("    {}", q(s))).collect();
                format!("listOf(\n{}\n)", entries.join(",\n"))
            }
        };
        // An empty list says nothing: it is left out.
        if !id.features.is_empty() {
            o.push_str(&format!(
                "/** Protocol features. */\nval PROTOCOL_FEATURES: List<String> = {}\n",
                list(&id.features)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.methods.is_empty() {
            o.push_str(&format!(
                "/** Method names. */\nval METHODS: List<String> = {}\n",
                list(&ir.methods)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.events.is_empty() {
            o.push_str(&format!(
                "/** Event names. */\nval EVENTS: List<String> = {}\n\n",
                list(&ir.events)
            ));
        }
        if self.uses_present() {
            o.push_str(PRESENT);
        }
        o.push_str(WIRE_HELPERS);
        o.push_str(&format!(
            "\nprivate const val DRAFT_07: Boolean = {}\nprivate const val DEFINITIONS_KEY: String = {}\n\n",
            ir.draft_07,
            q(&ir.definitions_keyword)
        ));
        o.push_str("/** The schema document these types come from, walked by the validators below. */\nprivate val SCHEMA: Any? by lazy { parseJson(schemaText()) }\n\n");
        o.push_str(&format!(
            "private fun schemaText(): String {{\n    val text = StringBuilder({})\n",
            ir.schema_text.len()
        ));
        let mut chunk = String::new();
        for c in ir.schema_text.chars() {
            chunk.push(c);
            if chunk.len() >= SCHEMA_CHUNK {
                o.push_str(&format!("    text.append({})\n", q(&chunk)));
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            o.push_str(&format!("    text.append({})\n", q(&chunk)));
        }
        o.push_str("    return text.toString()\n}\n");
        o.push_str(VALIDATOR);
        self.out.push_str(&o);
    }

    /// `validate<Definition>` and `assert<Definition>` for every definition.
    fn definition_validators(&mut self) {
        let mut scope = NameScope::with_reserved(&[
            "validateAt",
            "validateProtocolMessage",
            "validateDefinition",
            "assertValid",
            "parseJson",
            "writeJson",
            "decodeProtocolMessage",
            "encodeProtocolMessage",
        ]);
        let mut s = String::new();
        if let Some(root) = &self.ir.root {
            let ty = Ty::Ref(root.clone());
            let name = self.ty(&ty, false);
            s.push_str(&format!(
                "\n/** Decodes a whole message (decoded JSON, see `parseJson`) as `{name}` after validating it against the document root; throws ProtocolValidationError or IllegalArgumentException. */\n\
                 fun decodeProtocolMessage(raw: Any?): {name} {{\n    assertValid(validateProtocolMessage(raw))\n    return {}\n}}\n",
                self.decode_variant(&ty, "raw", "false")
            ));
            s.push_str(&format!(
                "\n/** The wire form of a message, in the decoded-JSON form (`writeJson` writes it as text). */\nfun encodeProtocolMessage(value: {name}): Any? = {}\n",
                self.encode(&ty, "value", 0)
            ));
        }
        for (key, ir_name) in &self.ir.definitions {
            let name = self.name(ir_name);
            let validate = scope.claim(&format!("validate{name}"));
            let assert = scope.claim(&format!("assert{name}"));
            let doc_key = crate::emit::doc_name(key);
            s.push_str(&format!(
                "\n/** Validates `value` (decoded JSON) against the definition `{doc_key}`. */\nfun {validate}(value: Any?): ValidationResult = validateDefinition({}, value)\n",
                q(key)
            ));
            s.push_str(&format!(
                "/** Throws ProtocolValidationError unless `value` is a valid `{doc_key}`. */\nfun {assert}(value: Any?) = assertValid(validateDefinition({}, value))\n",
                q(key)
            ));
        }
        self.out.push_str(&s);
    }

    /// The method metadata: `MethodDirection`, `MethodInfo<P, R>` (whose type parameters are the
    /// params and result types) and `object Methods` with one value per method and `ALL`;
    /// nothing when the schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let mut s = String::from(METHOD_SUPPORT);
        s.push_str("\n/** Every method of the protocol, one value each, and `ALL` in schema order. */\nobject Methods {\n");
        let mut scope = NameScope::with_reserved(&["ALL"]);
        let mut values = Vec::new();
        for m in &ir.method_table {
            let value = scope.claim(&names::screaming(&m.type_name));
            let params = m
                .params
                .as_ref()
                .map_or_else(|| "Unit".to_owned(), |t| self.ty(t, false));
            let result = m
                .result
                .as_ref()
                .map_or_else(|| "Unit".to_owned(), |t| self.ty(t, false));
            let direction = names::screaming(m.direction.wire());
            let row = super::method_row(m, q, "null", |n| self.name(n));
            s.push_str(&format!(
                "    /** `{}`. */\n    val {value}: MethodInfo<{params}, {result}> = MethodInfo({}, MethodDirection.{direction}, {}, {}, {}, {})\n",
                crate::emit::doc_name(&m.name),
                row[0], row[2], row[3], row[4], row[5],
            ));
            values.push(value);
        }
        // No trailing comma: Kotlin before 1.4 rejects it.
        s.push_str(&format!(
            "\n    /** Every method, in schema order. */\n    val ALL: List<MethodInfo<*, *>> = listOf(\n{}\n    )\n}}\n",
            values.iter().map(|v| format!("        {v}")).collect::<Vec<_>>().join(",\n")
        ));
        self.out.push_str(&s);
    }

    /// `qualified`: inside a sealed class, whose case names (`Map`, `String`, a type's own
    /// name) shadow outer names, every type is written with its package.
    fn ty(&self, ty: &Ty, qualified: bool) -> String {
        let k = |short: &str, long: &str| {
            if qualified {
                long.to_owned()
            } else {
                short.to_owned()
            }
        };
        match ty {
            Ty::Any => k("Any?", "kotlin.Any?"),
            Ty::Bool => k("Boolean", "kotlin.Boolean"),
            Ty::Int => k("Long", "kotlin.Long"),
            Ty::Number => k("Number", "kotlin.Number"),
            Ty::String => k("String", "kotlin.String"),
            Ty::Array(inner) => format!(
                "{}<{}>",
                k("List", "kotlin.collections.List"),
                self.ty(inner, qualified)
            ),
            Ty::Map(inner) => format!(
                "{}<{}, {}>",
                k("Map", "kotlin.collections.Map"),
                k("String", "kotlin.String"),
                self.ty(inner, qualified)
            ),
            Ty::Ref(name) => {
                let n = self.name(name);
                if qualified {
                    format!("{}.{n}", self.package)
                } else {
                    n
                }
            }
            Ty::Nullable(inner) => {
                let t = self.ty(inner, qualified);
                if self.renders_nullable(inner) {
                    t
                } else {
                    format!("{t}?")
                }
            }
        }
    }

    /// Whether the Kotlin spelling of `ty` already admits null (`Any?`, `T?`, or an alias of
    /// one), so that no second `?` is added.
    fn renders_nullable(&self, ty: &Ty) -> bool {
        let mut ty = ty;
        for _ in 0..crate::ir::MAX_LOWERING_DEPTH {
            match ty {
                Ty::Any | Ty::Nullable(_) => return true,
                Ty::Ref(name) => match self.ir.get(name).map(|t| &t.kind) {
                    Some(TypeKind::Alias(inner)) => ty = inner,
                    _ => return false,
                },
                _ => return false,
            }
        }
        false
    }

    fn type_def(&mut self, t: &TypeDef) {
        let name = self.name(&t.name);
        let mut s = String::from("\n");
        push_block_doc(&mut s, "", &t.doc);
        match &t.kind {
            TypeKind::Object(o) => {
                let mut scope = NameScope::new();
                let mut params = Vec::new();
                let mut checks = Vec::new();
                let mut props = Vec::new();
                let mut consts = Vec::new();
                let mut const_scope = NameScope::with_reserved(&["KNOWN_KEYS"]);
                let mut body = String::new();
                for f in &o.fields {
                    let mut p = String::new();
                    let mut doc = f.doc.clone();
                    doc.push(format!("Wire name: `{}`.", f.wire.replace('`', "'")));
                    let prop = ident(&scope.claim(&names::camel(&f.wire)));
                    props.push(prop.clone());
                    if let Some(value) = self.tags.value(&t.name, &f.wire) {
                        // The tag of a variant: a constant, not a constructor parameter.
                        let constant = const_scope.claim(&names::screaming(&f.wire));
                        doc.push(format!(
                            "Always {} (`{constant}`): decoding checks it.",
                            q(value).replace("*/", "*\\/")
                        ));
                        push_block_doc(&mut body, "    ", &doc);
                        body.push_str(&format!("    val {prop}: String get() = {constant}\n"));
                        consts.push(Some(constant));
                        continue;
                    }
                    consts.push(None);
                    push_block_doc(&mut p, "    ", &doc);
                    let ty = self.ty(&f.ty, false);
                    let nullable = !f.required || self.renders_nullable(&f.ty);
                    let present = self.keeps_null(f);
                    for (measure, is_min, bound) in field_bounds(f) {
                        let (what, op) = if is_min { ("min", ">=") } else { ("max", "<=") };
                        // The checked value: the property, or its present value `x`.
                        let v = if present {
                            "x".to_owned()
                        } else {
                            prop.clone()
                        };
                        let (expr, lit, keyword) = match measure {
                            Measure::Length => (
                                format!("{v}.codePointCount(0, {v}.length)"),
                                bound.to_string(),
                                "Length",
                            ),
                            Measure::Value => (v.clone(), format!("{bound}L"), "imum"),
                            Measure::Items => (format!("{v}.size"), bound.to_string(), "Items"),
                        };
                        let cond = format!("{expr} {op} {lit}");
                        let cond = if present {
                            format!("{prop}?.value.let {{ x -> x == null || {cond} }}")
                        } else if nullable {
                            format!("{prop} == null || {cond}")
                        } else {
                            cond
                        };
                        let message = q(&format!("{name}.{}: {what}{keyword} {bound}", f.wire));
                        checks.push(format!("        require({cond}) {{ {message} }}\n"));
                    }
                    if f.required {
                        p.push_str(&format!("    val {prop}: {ty}"));
                    } else if present {
                        p.push_str(&format!("    val {prop}: Present<{ty}>? = null"));
                    } else {
                        p.push_str(&format!("    val {prop}: {ty}? = null"));
                    }
                    params.push(p);
                }
                if o.extra != Extra::Closed {
                    let prop = ident(&scope.claim("extra"));
                    props.push(prop.clone());
                    let value = match &o.extra {
                        Extra::Typed(ty) => self.ty(ty, false),
                        _ => "Any?".to_owned(),
                    };
                    params.push(format!(
                        "    /** Properties the schema does not name, kept as they are. */\n    val {prop}: Map<String, {value}> = emptyMap()"
                    ));
                }
                let wire = self.object_wire(&t.name, &name, o, &props, &consts);
                if params.is_empty() {
                    s.push_str(&format!(
                        "class {name} {{\n{body}    override fun equals(other: Any?): Boolean = other is {name}\n    override fun hashCode(): Int = 0\n    override fun toString(): String = {}\n{wire}}}\n",
                        q(&format!("{name}()"))
                    ));
                } else {
                    s.push_str(&format!(
                        "data class {name}(\n{}\n) {{\n",
                        params.join(",\n")
                    ));
                    s.push_str(&body);
                    if !checks.is_empty() {
                        s.push_str(&format!("    init {{\n{}    }}\n", checks.concat()));
                    }
                    s.push_str(&wire);
                    s.push_str("}\n");
                }
            }
            TypeKind::Enum(_) if self.tags.skips(&t.name) => return,
            TypeKind::Enum(values) => {
                let mut scope = NameScope::new();
                let entries: Vec<String> = values
                    .iter()
                    .map(|v| format!("    {}({})", scope.claim(&names::screaming(v)), q(v)))
                    .collect();
                s.push_str(&format!(
                    "enum class {name}(val wireValue: String) {{\n{};\n\n",
                    entries.join(",\n")
                ));
                s.push_str("    /** The wire form: the wire value. */\n    fun toWire(): String = wireValue\n\n");
                s.push_str(&format!(
                    "    companion object {{\n        /** The entry with this wire value, or null for a value this version does not know. */\n        fun fromWireValue(value: String): {name}? = values().firstOrNull {{ it.wireValue == value }}\n\n        \
                     /** Decodes the wire form (a string); throws IllegalArgumentException for another value. */\n        \
                     fun fromWire(raw: Any?): {name} = fromWireValue(wireString(raw, {what})) ?: throw IllegalArgumentException({what} + \": unknown value \" + raw)\n    }}\n}}\n",
                    what = q(&name)
                ));
            }
            TypeKind::Alias(ty) => {
                s.push_str(&format!("typealias {name} = {}\n", self.ty(ty, false)))
            }
            TypeKind::Union(u) => {
                s.push_str(&format!("sealed class {name} {{\n    /** The wire form, in the decoded-JSON form (`writeJson` writes it as text). */\n    abstract fun toWire(): kotlin.Any?\n\n"));
                for v in &u.variants {
                    s.push_str(&format!(
                        "    data class {}(val value: {}) : {name}() {{\n        override fun toWire(): kotlin.Any? = {}\n    }}\n",
                        v.name,
                        self.ty(&v.ty, true),
                        self.encode(&v.ty, "value", 0)
                    ));
                }
                if u.open && u.tag.is_some() {
                    let unknown = super::rust::unknown_case(u);
                    s.push_str("    /** A variant this version does not know, kept as the decoded JSON object. */\n");
                    s.push_str(&format!(
                        "    data class {unknown}(val raw: kotlin.collections.Map<kotlin.String, kotlin.Any?>) : {name}() {{\n        override fun toWire(): kotlin.Any? = raw\n    }}\n"
                    ));
                }
                s.push_str(&self.union_wire(&t.name, &name, u));
                s.push_str("}\n");
                if u.tag.is_some() {
                    self.checker(&mut s, &t.name, &name);
                }
            }
        }
        self.out.push_str(&s);
    }

    /// `check<Union>(raw)`: the deep check of a tagged union with a schema node of its own,
    /// returning the object.
    fn checker(&self, s: &mut String, ir_name: &str, name: &str) {
        let Some(pointer) = self.schema_pointer_of(ir_name) else {
            return;
        };
        s.push_str(&format!(
            "\n/** Checks a decoded `{name}` against the schema, every level (as `{name}.fromWire` does), and returns the object; throws ProtocolValidationError (an IllegalArgumentException). */\n\
             fun check{name}(raw: Any?): Map<String, Any?> {{\n    assertValid(validateAt({}, raw))\n    return wireObject(raw, {})\n}}\n",
            q(&pointer),
            q(name)
        ));
    }
}

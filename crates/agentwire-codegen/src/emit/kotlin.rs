//! Kotlin bindings: data classes, enum classes with wire values, sealed classes for unions (an
//! explicit `Unknown` case keeping the raw map for open unions), the protocol constants, and a
//! fail-closed `check*` function per tagged union over the decoded-JSON map form.
//!
//! Sealed classes rather than sealed interfaces, because Debian's `kotlinc` predates sealed
//! interfaces (Kotlin 1.5). The value of each variant is wrapped, so one type can be a variant
//! of several unions.

use crate::emit::{Measure, Quote, TypeNames, field_bounds, header_text, push_block_doc, quote};
use crate::ir::{Extra, Ir, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::names::{self, NameScope};

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
];

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

fn ident(text: &str) -> String {
    if KEYWORDS.contains(&text) {
        format!("`{text}`")
    } else {
        text.to_owned()
    }
}

struct Gen<'a> {
    ir: &'a Ir,
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
        package,
        type_names,
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
        o.push_str(
            "/** Checks the keys of a decoded JSON object; throws IllegalArgumentException when it is not an object, misses a required key, or has a key outside `allowed` (null: any key). */\n\
             private fun checkKeys(raw: Any?, what: String, required: List<String>, allowed: List<String>?): Map<String, Any?> {\n    \
             require(raw is Map<*, *>) { what + \": expected an object\" }\n    \
             val result = LinkedHashMap<String, Any?>()\n    \
             for ((key, value) in raw) {\n        \
             require(key is String) { what + \": keys must be strings\" }\n        \
             require(allowed == null || key in allowed) { what + \": unexpected key \" + key }\n        \
             result[key] = value\n    }\n    \
             for (key in required) {\n        require(result.containsKey(key)) { what + \": missing key \" + key }\n    }\n    \
             return result\n}\n",
        );
        self.out.push_str(&o);
    }

    /// The method metadata: `MethodDirection`, `MethodInfo<P, R>` (whose type parameters are the
    /// params and result types) and `object Methods` with one value per method and `ALL`;
    /// nothing when the schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let lit = |s: Option<&str>| s.map_or_else(|| "null".to_owned(), q);
        let named = |ty: Option<&Ty>| match ty {
            Some(Ty::Ref(name)) => Some(self.name(name)),
            _ => None,
        };
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
            s.push_str(&format!(
                "    /** `{}`. */\n    val {value}: MethodInfo<{params}, {result}> = MethodInfo({}, MethodDirection.{direction}, {}, {}, {}, {})\n",
                m.name.replace("*/", "*\\/").replace('`', "'"),
                q(&m.name),
                lit(named(m.params.as_ref()).as_deref()),
                lit(named(m.result.as_ref()).as_deref()),
                lit(m.scope.as_deref()),
                lit(m.since.as_deref()),
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
                for f in &o.fields {
                    let mut p = String::new();
                    let mut doc = f.doc.clone();
                    doc.push(format!("Wire name: `{}`.", f.wire.replace('`', "'")));
                    push_block_doc(&mut p, "    ", &doc);
                    let prop = ident(&scope.claim(&names::camel(&f.wire)));
                    let ty = self.ty(&f.ty, false);
                    let nullable = !f.required || self.renders_nullable(&f.ty);
                    for (measure, is_min, bound) in field_bounds(f) {
                        let (what, op) = if is_min { ("min", ">=") } else { ("max", "<=") };
                        let (expr, lit, keyword) = match measure {
                            Measure::Length => (
                                format!("{prop}.codePointCount(0, {prop}.length)"),
                                bound.to_string(),
                                "Length",
                            ),
                            Measure::Value => (prop.clone(), format!("{bound}L"), "imum"),
                            Measure::Items => (format!("{prop}.size"), bound.to_string(), "Items"),
                        };
                        let cond = format!("{expr} {op} {lit}");
                        let cond = if nullable {
                            format!("{prop} == null || {cond}")
                        } else {
                            cond
                        };
                        let message = q(&format!("{name}.{}: {what}{keyword} {bound}", f.wire));
                        checks.push(format!("        require({cond}) {{ {message} }}\n"));
                    }
                    if f.required {
                        p.push_str(&format!("    val {prop}: {ty}"));
                    } else {
                        let ty = if self.renders_nullable(&f.ty) {
                            ty
                        } else {
                            format!("{ty}?")
                        };
                        p.push_str(&format!("    val {prop}: {ty} = null"));
                    }
                    params.push(p);
                }
                if o.extra != Extra::Closed {
                    let prop = ident(&scope.claim("extra"));
                    let value = match &o.extra {
                        Extra::Typed(ty) => self.ty(ty, false),
                        _ => "Any?".to_owned(),
                    };
                    params.push(format!(
                        "    /** Properties the schema does not name, kept as they are. */\n    val {prop}: Map<String, {value}> = emptyMap()"
                    ));
                }
                if params.is_empty() {
                    s.push_str(&format!(
                        "class {name} {{\n    override fun equals(other: Any?): Boolean = other is {name}\n    override fun hashCode(): Int = 0\n    override fun toString(): String = {}\n}}\n",
                        q(&format!("{name}()"))
                    ));
                } else {
                    s.push_str(&format!("data class {name}(\n{}\n)", params.join(",\n")));
                    if checks.is_empty() {
                        s.push('\n');
                    } else {
                        s.push_str(&format!(
                            " {{\n    init {{\n{}    }}\n}}\n",
                            checks.concat()
                        ));
                    }
                }
            }
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
                s.push_str(&format!(
                    "    companion object {{\n        /** The entry with this wire value, or null for a value this version does not know. */\n        fun fromWireValue(value: String): {name}? = values().firstOrNull {{ it.wireValue == value }}\n    }}\n}}\n"
                ));
            }
            TypeKind::Alias(ty) => {
                s.push_str(&format!("typealias {name} = {}\n", self.ty(ty, false)))
            }
            TypeKind::Union(u) => {
                s.push_str(&format!("sealed class {name} {{\n"));
                for v in &u.variants {
                    s.push_str(&format!(
                        "    data class {}(val value: {}) : {name}()\n",
                        v.name,
                        self.ty(&v.ty, true)
                    ));
                }
                if u.open && u.tag.is_some() {
                    let unknown = super::rust::unknown_case(u);
                    s.push_str("    /** A variant this version does not know, kept as the decoded JSON object. */\n");
                    s.push_str(&format!(
                        "    data class {unknown}(val raw: kotlin.collections.Map<kotlin.String, kotlin.Any?>) : {name}()\n"
                    ));
                }
                s.push_str("}\n");
                if let Some(tag) = &u.tag {
                    self.checker(&mut s, &name, tag, u);
                }
            }
        }
        self.out.push_str(&s);
    }

    fn checker(&self, s: &mut String, name: &str, tag: &str, u: &UnionType) {
        s.push_str(&format!(
            "\n/** Checks the tag and keys of a decoded `{name}`; throws IllegalArgumentException for a missing key, an extra key on a closed variant{}. */\n",
            if u.open { "" } else { " or an unknown tag" }
        ));
        s.push_str(&format!(
            "fun check{name}(raw: Any?): Map<String, Any?> {{\n"
        ));
        s.push_str(&format!(
            "    val record = checkKeys(raw, {}, listOf({}), null)\n",
            q(name),
            q(tag)
        ));
        s.push_str(&format!("    val tag = record[{}]\n", q(tag)));
        s.push_str(&format!(
            "    require(tag is String) {{ {} }}\n",
            q(&format!("{name}: {tag} must be a string"))
        ));
        s.push_str("    return when (tag) {\n");
        for v in &u.variants {
            let tags = v
                .tags
                .iter()
                .map(|t| t.as_text().map(q).unwrap_or_else(|| t.literal()))
                .collect::<Vec<_>>()
                .join(", ");
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
                            "listOf({})",
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
                        "        {tags} -> checkKeys(record, {}, listOf({}), {allowed})\n",
                        q(name),
                        required.join(", ")
                    ));
                }
                None => s.push_str(&format!("        {tags} -> record\n")),
            }
        }
        if u.open {
            s.push_str("        else -> record\n");
        } else {
            s.push_str(&format!(
                "        else -> throw IllegalArgumentException({} + tag)\n",
                q(&format!("{name}: unknown {tag} "))
            ));
        }
        s.push_str("    }\n}\n");
    }
}

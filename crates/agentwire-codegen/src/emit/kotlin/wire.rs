//! The wire codec of the Kotlin bindings: each type's `toWire()` and its companion's
//! `fromWireUnchecked` and schema-checked `fromWire`, the decode and encode expressions they are
//! built from, and the `wire*` readers and `Present` they rely on. Kept apart from the
//! declarations in `mod.rs`, which only place this code inside each class.

use super::{Gen, q, strip_nullable};
use crate::emit::rust::{common_required, unknown_case};
use crate::ir::{Extra, Field, ObjectType, Ty, TypeKind, UnionType};

/// The readers `fromWire` builds on: each throws IllegalArgumentException for a value of
/// another JSON kind.
pub(super) const WIRE_HELPERS: &str = r#"
private fun wireObject(raw: Any?, what: String): Map<String, Any?> {
    require(raw is Map<*, *>) { what + ": expected an object" }
    for (key in raw.keys) require(key is String) { what + ": keys must be strings" }
    return raw as Map<String, Any?>
}

private fun wireField(o: Map<String, Any?>, key: String, what: String): Any? {
    require(o.containsKey(key)) { what + ": missing key " + key }
    return o[key]
}

private fun wireList(raw: Any?): List<Any?> {
    require(raw is List<*>) { "expected an array" }
    return raw
}

private fun wireString(raw: Any?, what: String): String {
    require(raw is String) { what + ": expected a string" }
    return raw
}

private fun wireBoolean(raw: Any?): Boolean {
    require(raw is Boolean) { "expected a boolean" }
    return raw
}

private fun wireLong(raw: Any?): Long = when (raw) {
    is Long -> raw
    is Int -> raw.toLong()
    is Double -> if (raw == Math.rint(raw) && Math.abs(raw) < 9.2e18) raw.toLong() else throw IllegalArgumentException("expected an integer")
    else -> throw IllegalArgumentException("expected an integer")
}

private fun wireNumber(raw: Any?): Number {
    require(raw is Number) { "expected a number" }
    return raw
}
"#;

/// The value of an optional property that admits `null`, when the property is present: absent
/// is Kotlin's `null`, a wire `null` is `Present(null)`.
pub(super) const PRESENT: &str = r#"
/**
 * A property that is present on the wire. An optional property whose schema admits `null` has
 * the type `Present<T?>?`: `null` when the property is absent, `Present(null)` when it is `null`,
 * `Present(value)` otherwise; `toWire` writes each back as it came.
 */
data class Present<out T>(val value: T)
"#;

impl Gen<'_> {
    /// Whether some object has an optional property that admits `null` (typed `Present<T?>?`).
    pub(super) fn uses_present(&self) -> bool {
        self.ir.types.iter().any(|t| match &t.kind {
            TypeKind::Object(o) => o.fields.iter().any(|f| self.keeps_null(f)),
            _ => false,
        })
    }

    /// Whether a property tells absent from `null`: optional, and its type admits `null`.
    pub(super) fn keeps_null(&self, f: &Field) -> bool {
        !f.required && self.renders_nullable(&f.ty)
    }

    /// The deep `fromWire` of a type with a schema node of its own: the schema check at
    /// `pointer`, then the unchecked build (`extra` are more arguments of both).
    fn checked_decoder(&self, name: &str, f: &str, pointer: &str, extra: &str) -> String {
        let known = if extra.is_empty() {
            ""
        } else {
            "; a tag no variant knows is an error even in an open union"
        };
        format!(
            "        /** Decodes the decoded-JSON form (see `parseJson`) after checking it against the schema: every level, every constraint{known}. Throws ProtocolValidationError (an IllegalArgumentException) when it is not a valid `{name}`. */\n        \
             fun {f}(raw: kotlin.Any?): {name} {{\n            assertValid(validateAt({}, raw))\n            return fromWireUnchecked(raw{extra})\n        }}\n",
            q(pointer)
        )
    }

    /// The wire form of an object type: `toWire()`, and in the companion `fromWireUnchecked(raw)`
    /// (kinds, required and closed keys, tags, the `init` bounds) and, when the type has a schema
    /// node of its own, the deep `fromWire(raw)`.
    pub(super) fn object_wire(
        &self,
        ir_name: &str,
        name: &str,
        o: &ObjectType,
        props: &[String],
        consts: &[Option<String>],
    ) -> String {
        let what = q(name);
        let mut s = String::from(
            "\n    /** The wire form, in the decoded-JSON form (`writeJson` writes it as text). */\n    fun toWire(): Map<String, Any?> {\n        val out = LinkedHashMap<String, Any?>()\n",
        );
        for ((f, prop), constant) in o.fields.iter().zip(props).zip(consts) {
            let key = q(&f.wire);
            if let Some(constant) = constant {
                s.push_str(&format!("        out[{key}] = {constant}\n"));
            } else if f.required {
                s.push_str(&format!(
                    "        out[{key}] = {}\n",
                    self.encode(&f.ty, &format!("this.{prop}"), 0)
                ));
            } else if self.keeps_null(f) {
                // Absent stays absent, `Present(null)` is written as null.
                s.push_str(&format!(
                    "        this.{prop}?.let {{ p -> out[{key}] = {} }}\n",
                    self.encode(&f.ty, "p.value", 1)
                ));
            } else {
                s.push_str(&format!(
                    "        this.{prop}?.let {{ v -> out[{key}] = {} }}\n",
                    self.encode(&strip_nullable(&f.ty), "v", 1)
                ));
            }
        }
        if o.extra != Extra::Closed {
            let prop = &props[o.fields.len()];
            let value = match &o.extra {
                Extra::Typed(ty) => self.encode(ty, "v", 1),
                _ => "v".to_owned(),
            };
            s.push_str(&format!(
                "        for ((k, v) in this.{prop}) if (!out.containsKey(k)) out[k] = {value}\n"
            ));
        }
        s.push_str("        return out\n    }\n\n    companion object {\n");
        if let Some(pointer) = self.schema_pointer_of(ir_name) {
            s.push_str(&self.checked_decoder(name, "fromWire", &pointer, ""));
            s.push('\n');
        }
        s.push_str(&format!(
            "        /** Builds the `{name}` of the decoded-JSON form, checking kinds, required and closed keys, tags and the `init` bounds only (the schema's other constraints are `fromWire`'s, or those of the type that contains it); throws IllegalArgumentException. */\n        \
             fun fromWireUnchecked(raw: Any?): {name} {{\n"
        ));
        s.push_str(&format!("            val o = wireObject(raw, {what})\n"));
        let known = o
            .fields
            .iter()
            .map(|f| q(&f.wire))
            .collect::<Vec<_>>()
            .join(", ");
        if o.extra == Extra::Closed {
            s.push_str(&format!(
                "            for (key in o.keys) require(key in KNOWN_KEYS) {{ {what} + \": unexpected key \" + key }}\n"
            ));
        }
        let mut args = Vec::new();
        for ((f, prop), constant) in o.fields.iter().zip(props).zip(consts) {
            let key = q(&f.wire);
            if let Some(constant) = constant {
                s.push_str(&format!(
                    "            require(wireField(o, {key}, {what}) == {constant}) {{ {what} + \": \" + {key} + \" must be \" + {constant} }}\n"
                ));
            } else if f.required {
                args.push(format!(
                    "                {prop} = {}",
                    self.decode(&f.ty, &format!("wireField(o, {key}, {what})"), 0)
                ));
            } else if self.keeps_null(f) {
                args.push(format!(
                    "                {prop} = if (o.containsKey({key})) Present({}) else null",
                    self.decode(&f.ty, &format!("o[{key}]"), 1)
                ));
            } else {
                args.push(format!(
                    "                {prop} = o[{key}]?.let {{ v -> {} }}",
                    self.decode(&strip_nullable(&f.ty), "v", 1)
                ));
            }
        }
        if o.extra != Extra::Closed {
            let prop = &props[o.fields.len()];
            let value = match &o.extra {
                Extra::Typed(ty) => self.decode(ty, "v", 1),
                _ => "v".to_owned(),
            };
            args.push(format!(
                "                {prop} = o.filterKeys {{ it !in KNOWN_KEYS }}.mapValues {{ (_, v) -> {value} }}"
            ));
        }
        if args.is_empty() {
            s.push_str(&format!("            return {name}()\n        }}\n"));
        } else {
            s.push_str(&format!(
                "            return {name}(\n{}\n            )\n        }}\n",
                args.join(",\n")
            ));
        }
        for ((f, prop), constant) in o.fields.iter().zip(props).zip(consts) {
            if let Some(constant) = constant {
                let value = self.tags.value(ir_name, &f.wire).unwrap_or_default();
                s.push_str(&format!(
                    "\n        /** The value of `{prop}`, the tag of this variant. */\n        const val {constant}: String = {}\n",
                    q(value)
                ));
            }
        }
        s.push_str(&format!(
            "\n        private val KNOWN_KEYS: Set<String> = setOf({known})\n    }}\n"
        ));
        s
    }

    /// The companion of a union: `fromWireUnchecked(raw, known)` (with `known`, an unknown tag is
    /// an error at every level, even in an open union) and, when the union has a schema node of
    /// its own, the deep `fromWire(raw)` and `fromWireKnown(raw)`.
    pub(super) fn union_wire(&self, ir_name: &str, name: &str, u: &UnionType) -> String {
        let what = q(name);
        let mut s = String::from("\n    companion object {\n");
        if let Some(pointer) = self.schema_pointer_of(ir_name) {
            match open_string_tags(u) {
                // The schema's branches name every tag, so the check would refuse the unknown
                // variants the union keeps: a tag no variant knows skips it, as in the other
                // languages (`fromWireUnchecked` still checks the keys every variant requires).
                Some((tag, tags)) => s.push_str(&format!(
                    "        /** Decodes the decoded-JSON form (see `parseJson`) after checking it against the schema: every level, every constraint; a value whose `{tag}` no variant knows is kept as `Unknown` (this union is open), with the keys every variant requires checked. Throws ProtocolValidationError (an IllegalArgumentException) when it is not a valid `{name}`. */\n        \
                     fun fromWire(raw: kotlin.Any?): {name} {{\n            val tag = (raw as? Map<*, *>)?.get({})\n            if (tag is String && tag !in setOf({})) return fromWireUnchecked(raw)\n            assertValid(validateAt({}, raw))\n            return fromWireUnchecked(raw)\n        }}\n",
                    q(&tag),
                    tags.iter().map(|t| q(t)).collect::<Vec<_>>().join(", "),
                    q(&pointer)
                )),
                None => s.push_str(&self.checked_decoder(name, "fromWire", &pointer, "")),
            }
            s.push_str(&self.checked_decoder(name, "fromWireKnown", &pointer, ", true"));
            s.push('\n');
        }
        s.push_str(&format!(
            "        /** Builds the `{name}` of the decoded-JSON form, checking kinds, keys and tags only (the schema's other constraints are `fromWire`'s, or those of the type that contains it); with `known`, a tag no variant knows is an error even in an open union. Throws IllegalArgumentException. */\n        \
             fun fromWireUnchecked(raw: kotlin.Any?, known: kotlin.Boolean = false): {name} {{\n"
        ));
        let qualified = format!("{}.{name}", self.package);
        match &u.tag {
            Some(tag) => {
                s.push_str(&format!(
                    "            val o = wireObject(raw, {what})\n            return when (wireField(o, {}, {what})) {{\n",
                    q(tag)
                ));
                for v in &u.variants {
                    let tags = v
                        .tags
                        .iter()
                        .map(|t| t.as_text().map(q).unwrap_or_else(|| t.literal()))
                        .collect::<Vec<_>>()
                        .join(", ");
                    s.push_str(&format!(
                        "                {tags} -> {qualified}.{}({})\n",
                        v.name,
                        self.decode_variant(&v.ty, "o", "known")
                    ));
                }
                let unknown_error = format!(
                    "throw IllegalArgumentException({what} + \": unknown \" + {} + \" \" + o[{}])",
                    q(tag),
                    q(tag)
                );
                if u.open {
                    let unknown = unknown_case(u);
                    let mut required = common_required(self.ir, u, tag);
                    required.insert(0, tag.clone());
                    s.push_str(&format!(
                        "                else -> {{\n                    if (known) {unknown_error}\n                    for (key in listOf({})) wireField(o, key, {what})\n                    {qualified}.{unknown}(o)\n                }}\n",
                        required.iter().map(|k| q(k)).collect::<Vec<_>>().join(", ")
                    ));
                } else {
                    s.push_str(&format!("                else -> {unknown_error}\n"));
                }
                s.push_str("            }\n        }\n");
            }
            None => {
                // Every variant strictly first (no unknown variant anywhere), then each variant
                // as itself: a value known somewhere is never kept raw by an open variant.
                for (strict, guard) in [("true", ""), ("false", "if (!known) ")] {
                    for v in &u.variants {
                        let decode = self.decode_variant(&v.ty, "raw", strict);
                        // Only a union decodes differently in the second pass.
                        let is_union = matches!(&v.ty, Ty::Ref(n) if matches!(self.ir.get(n).map(|t| &t.kind), Some(TypeKind::Union(_))));
                        if guard.is_empty() || is_union {
                            s.push_str(&format!(
                                "            {guard}try {{\n                return {qualified}.{}({decode})\n            }} catch (e: IllegalArgumentException) {{\n            }}\n",
                                v.name,
                            ));
                        }
                    }
                }
                s.push_str(&format!(
                    "            throw IllegalArgumentException({what} + \": no variant matches\")\n        }}\n"
                ));
            }
        }
        s.push_str("    }\n");
        s
    }

    /// The decode expression of a union variant's value, without a schema check: a union's
    /// `fromWireUnchecked` with the Kotlin Boolean expression `known`.
    pub(super) fn decode_variant(&self, ty: &Ty, expr: &str, known: &str) -> String {
        if let Ty::Ref(name) = ty
            && let Some(TypeKind::Union(_)) = self.ir.get(name).map(|t| &t.kind)
        {
            return format!(
                "{}.{}.fromWireUnchecked({expr}, {known})",
                self.package,
                self.name(name)
            );
        }
        self.decode(ty, expr, 2)
    }

    /// The pointer the deep `fromWire` of a type checks against: that of a definition, of the
    /// document root, or of an inline type whose pointer is a node of the document that states
    /// its whole schema. Types made by merging `allOf` parts (a variant distributed over a
    /// union, a property an `allOf` part declares) or by splitting `type: [...]` have no such
    /// node: the types that contain them check them.
    pub(super) fn schema_pointer_of(&self, ir_name: &str) -> Option<String> {
        let t = self.ir.get(ir_name)?;
        if !matches!(t.kind, TypeKind::Object(_) | TypeKind::Union(_)) {
            return None;
        }
        let is_definition = self.ir.definitions.iter().any(|(_, n)| n == ir_name);
        if is_definition || t.pointer.is_empty() || self.states_whole_schema(&t.pointer) {
            Some(t.pointer.clone())
        } else {
            None
        }
    }

    /// Whether `pointer` names a node of the document and no node above it merges `allOf`
    /// parts (whose lowered properties carry pointers that are not the whole of their schema).
    fn states_whole_schema(&self, pointer: &str) -> bool {
        let mut node = &self.doc;
        if !pointer.starts_with('/') {
            return false;
        }
        for raw in pointer[1..].split('/') {
            if node.get("allOf").is_some() {
                return false;
            }
            let token = raw.replace("~1", "/").replace("~0", "~");
            node = match node {
                serde_json::Value::Object(m) => match m.get(&token) {
                    Some(next) => next,
                    None => return false,
                },
                serde_json::Value::Array(items) => {
                    match token.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        Some(next) => next,
                        None => return false,
                    }
                }
                _ => return false,
            };
        }
        true
    }

    /// A Kotlin expression decoding `expr` (decoded JSON) as `ty`, without a schema check (the
    /// caller's check covers it); `depth` names lambda parameters apart.
    fn decode(&self, ty: &Ty, expr: &str, depth: usize) -> String {
        let x = format!("x{depth}");
        match ty {
            Ty::Any => expr.to_owned(),
            Ty::Bool => format!("wireBoolean({expr})"),
            Ty::Int => format!("wireLong({expr})"),
            Ty::Number => format!("wireNumber({expr})"),
            Ty::String => format!("wireString({expr}, \"string\")"),
            Ty::Array(inner) => format!(
                "wireList({expr}).map {{ {x} -> {} }}",
                self.decode(inner, &x, depth + 1)
            ),
            Ty::Map(inner) => format!(
                "wireObject({expr}, \"object\").mapValues {{ (_, {x}) -> {} }}",
                self.decode(inner, &x, depth + 1)
            ),
            Ty::Ref(name) => match self.ir.get(name).map(|t| &t.kind) {
                Some(TypeKind::Alias(target)) => self.decode(target, expr, depth),
                Some(TypeKind::Enum(_)) => {
                    format!("{}.{}.fromWire({expr})", self.package, self.name(name))
                }
                Some(_) => format!(
                    "{}.{}.fromWireUnchecked({expr})",
                    self.package,
                    self.name(name)
                ),
                None => expr.to_owned(),
            },
            Ty::Nullable(inner) => format!(
                "{expr}?.let {{ {x} -> {} }}",
                self.decode(inner, &x, depth + 1)
            ),
        }
    }

    /// A Kotlin expression encoding the Kotlin value `expr` of type `ty` into decoded JSON.
    pub(super) fn encode(&self, ty: &Ty, expr: &str, depth: usize) -> String {
        let x = format!("x{depth}");
        match ty {
            Ty::Any | Ty::Bool | Ty::Int | Ty::Number | Ty::String => expr.to_owned(),
            Ty::Array(inner) => match self.encode(inner, &x, depth + 1) {
                e if e == x => expr.to_owned(),
                e => format!("{expr}.map {{ {x} -> {e} }}"),
            },
            Ty::Map(inner) => match self.encode(inner, &x, depth + 1) {
                e if e == x => expr.to_owned(),
                e => format!("{expr}.mapValues {{ (_, {x}) -> {e} }}"),
            },
            Ty::Ref(name) => match self.ir.get(name).map(|t| &t.kind) {
                Some(TypeKind::Alias(target)) => self.encode(target, expr, depth),
                Some(_) => format!("{expr}.toWire()"),
                None => expr.to_owned(),
            },
            Ty::Nullable(inner) => match self.encode(inner, &x, depth + 1) {
                e if e == x => expr.to_owned(),
                e => format!("{expr}?.let {{ {x} -> {e} }}"),
            },
        }
    }
}

/// The tag member and the tag values of an open union whose tags are all strings: the one kind
/// of union whose `fromWire` keeps a value the schema refuses (an unknown string tag).
fn open_string_tags(u: &UnionType) -> Option<(String, Vec<String>)> {
    let tag = u.tag.as_ref().filter(|_| u.open)?;
    let mut tags = Vec::new();
    for v in &u.variants {
        for t in &v.tags {
            tags.push(t.as_text()?.to_owned());
        }
    }
    Some((tag.clone(), tags))
}

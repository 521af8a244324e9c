//! Swift bindings: `Codable, Sendable` structs and enums, a `JSONValue` for free JSON, tagged
//! unions decoded through their tag (an `unknown` case keeping the raw JSON for open unions, those
//! marked `x-agentwire-open: true`; an unknown tag throws for closed ones), and
//! strict decoding of closed objects (an unexpected key throws).

use crate::emit::{
    Measure, Quote, TagConstants, TypeNames, field_bounds, header_text, push_doc, quote,
};
use crate::ir::{Extra, Ir, ObjectType, Ty, TypeDef, TypeKind, UnionType, Version};
use crate::names::{self, NameScope};

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

/// The support types' names, prefixed with the file's helper prefix wherever they appear as an
/// identifier (not inside string literals or comments), so that several generated files can
/// share one module.
const HELPER_TYPES: &[&str] = &["JSONValue", "Indirect", "AnyCodingKey"];

fn rename_helpers(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let mut chars = line.char_indices().peekable();
        let mut word_start: Option<usize> = None;
        let flush = |out: &mut String, word: &str| {
            if HELPER_TYPES.contains(&word) {
                out.push_str(prefix);
            }
            out.push_str(word);
        };
        while let Some((i, c)) = chars.next() {
            if c.is_alphanumeric() || c == '_' {
                word_start.get_or_insert(i);
                continue;
            }
            if let Some(start) = word_start.take() {
                flush(&mut out, &line[start..i]);
            }
            if c == '/' && chars.peek().is_some_and(|(_, n)| *n == '/') {
                // A comment: the rest of the line as it is.
                out.push_str(&line[i..]);
                break;
            }
            out.push(c);
            if c == '"' {
                // A string literal: copied up to its closing quote.
                let mut escaped = false;
                for (_, d) in chars.by_ref() {
                    out.push(d);
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == '"' {
                        break;
                    }
                }
            }
        }
        if let Some(start) = word_start {
            flush(&mut out, &line[start..]);
        }
    }
    out
}

const SUPPORT: &str = r#"
/// Any JSON value.
public indirect enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// A value stored out of line, so that a type can contain itself.
public indirect enum Indirect<Wrapped: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    case boxed(Wrapped)

    public init(_ value: Wrapped) { self = .boxed(value) }

    /// The stored value.
    public var value: Wrapped {
        switch self {
        case .boxed(let value): return value
        }
    }

    public init(from decoder: Decoder) throws { self = .boxed(try Wrapped(from: decoder)) }

    public func encode(to encoder: Encoder) throws { try value.encode(to: encoder) }
}

/// A coding key for any property name.
public struct AnyCodingKey: CodingKey, Sendable {
    public let stringValue: String
    public let intValue: Int?
    public init(stringValue: String) { self.stringValue = stringValue; self.intValue = nil }
    public init?(intValue: Int) { self.stringValue = String(intValue); self.intValue = intValue }
}

/// Throws when the object being decoded has a key outside `allowed` (closed objects).
fileprivate func rejectUnknownKeys(_ decoder: Decoder, allowed: Set<String>, in type: String) throws {
    let container = try decoder.container(keyedBy: AnyCodingKey.self)
    for key in container.allKeys where !allowed.contains(key.stringValue) {
        throw DecodingError.dataCorruptedError(
            forKey: key, in: container, debugDescription: "\(type): unexpected key \(key.stringValue)")
    }
}
"#;

impl Gen<'_> {
    fn name(&self, ir_name: &str) -> String {
        self.type_names.get(ir_name)
    }

    fn preamble(&mut self) {
        let ir = self.ir;
        let mut head = format!("// {}\n\nimport Foundation\n\n", header_text(ir));
        let mut o = String::new();
        o.push_str(&format!("/// Protocol digest of the schema these types come from.\npublic let SCHEMA_DIGEST = {}\n", q(&ir.digest)));
        if let Some(id) = &ir.schema_id {
            o.push_str(&format!(
                "/// `$id` of the schema.\npublic let SCHEMA_ID = {}\n",
                q(id)
            ));
        }
        let id = &ir.identity;
        if let Some(name) = &id.name {
            o.push_str(&format!(
                "/// Protocol name.\npublic let PROTOCOL_NAME = {}\n",
                q(name)
            ));
        }
        let lit = |v: &Version| match v {
            Version::Integer(i) => format!("{i}"),
            Version::Text(t) => q(t),
        };
        if let Some(v) = &id.version {
            o.push_str(&format!(
                "/// Newest wire version.\npublic let PROTOCOL_VERSION = {}\n",
                lit(v)
            ));
        }
        if let Some(v) = &id.min_version {
            o.push_str(&format!(
                "/// Oldest wire version a peer may speak.\npublic let PROTOCOL_MIN_VERSION = {}\n",
                lit(v)
            ));
        }
        let list = |items: &[String]| {
            if items.is_empty() {
                "[]".to_owned()
            } else {
                format!(
                    "[\n{}]",
                    items
                        .iter()
                        .map(|s| format!("    {},\n", q(s)))
                        .collect::<String>()
                )
            }
        };
        // An empty list says nothing: it is left out.
        if !id.features.is_empty() {
            o.push_str(&format!(
                "/// Protocol features.\npublic let PROTOCOL_FEATURES: [String] = {}\n",
                list(&id.features)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.methods.is_empty() {
            o.push_str(&format!(
                "/// Method names.\npublic let METHODS: [String] = {}\n",
                list(&ir.methods)
            ));
        }
        // An empty list says nothing: it is left out.
        if !ir.events.is_empty() {
            o.push_str(&format!(
                "/// Event names.\npublic let EVENTS: [String] = {}\n",
                list(&ir.events)
            ));
        }
        // The constants live in one namespace per file, so that several files share a module.
        head.push_str(&format!(
            "/// The protocol constants of this file.\npublic enum {}Protocol {{\n",
            self.prefix
        ));
        for line in o.lines() {
            head.push_str(&format!(
                "    {}\n",
                line.replace("public let ", "public static let ")
            ));
        }
        head.push_str("}\n");
        head.push_str(SUPPORT);
        self.out.push_str(&head);
    }

    /// The method metadata: `<P>MethodDirection`, `<P>MethodInfo`, the protocol `<P>Method`
    /// (associated `Params` and `Result` types) and `enum <P>Methods` with one `…Method` type per
    /// method and `all`; nothing when the schema has no methods.
    fn methods(&mut self) {
        let ir = self.ir;
        if ir.method_table.is_empty() {
            return;
        }
        let p = &self.prefix;
        let lit = |s: Option<&str>| s.map_or_else(|| "nil".to_owned(), q);
        let named = |ty: Option<&Ty>| match ty {
            Some(Ty::Ref(name)) => Some(self.name(name)),
            _ => None,
        };
        let mut s = format!(
            "\n/// Who sends a method's message.\npublic enum {p}MethodDirection: String, Sendable {{\n    \
             /// A request the client sends and the server answers.\n    case clientRequest\n    \
             /// A request the server sends and the client answers.\n    case serverRequest\n    \
             /// A message nobody answers.\n    case notification\n}}\n\n\
             /// One method: its wire name, who sends it, the names of its params and result types (nil\n\
             /// when they are not a named type: no params, any JSON value), and the schema's scope and since.\n\
             public struct {p}MethodInfo: Sendable, Equatable {{\n    \
             public let name: String\n    public let direction: {p}MethodDirection\n    \
             public let params: String?\n    public let result: String?\n    \
             public let scope: String?\n    public let since: String?\n}}\n\n\
             /// A method as a type: its metadata and the types of its params and result (`Void`: none).\n\
             public protocol {p}Method {{\n    associatedtype Params\n    associatedtype Result\n    \
             static var info: {p}MethodInfo {{ get }}\n}}\n\n\
             /// One type per method, and `all` in schema order.\npublic enum {p}Methods {{\n"
        );
        let mut scope = NameScope::with_reserved(&["all"]);
        let mut cases = Vec::new();
        for m in &ir.method_table {
            let case = scope.claim(&format!("{}Method", m.type_name));
            let params = m
                .params
                .as_ref()
                .map_or_else(|| "Void".to_owned(), |t| self.ty("", t));
            let result = m
                .result
                .as_ref()
                .map_or_else(|| "Void".to_owned(), |t| self.ty("", t));
            s.push_str(&format!(
                "    /// `{}`.\n    public enum {case}: {p}Method {{\n        public typealias Params = {params}\n        public typealias Result = {result}\n        \
                 public static let info = {p}MethodInfo(name: {}, direction: .{}, params: {}, result: {}, scope: {}, since: {})\n    }}\n",
                m.name.replace('`', "'"),
                q(&m.name),
                m.direction.wire(),
                lit(named(m.params.as_ref()).as_deref()),
                lit(named(m.result.as_ref()).as_deref()),
                lit(m.scope.as_deref()),
                lit(m.since.as_deref()),
            ));
            cases.push(case);
        }
        s.push_str(&format!(
            "\n    /// Every method, in schema order.\n    public static let all: [{p}MethodInfo] = [\n{}    ]\n}}\n",
            cases.iter().map(|c| format!("        {c}.info,\n")).collect::<String>()
        ));
        self.out.push_str(&s);
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

    fn object(&self, s: &mut String, ir_name: &str, name: &str, o: &ObjectType) {
        s.push_str(&format!(
            "public struct {name}: Codable, Sendable, Equatable {{\n"
        ));
        let mut scope = NameScope::with_reserved(MEMBER_RESERVED);
        let props: Vec<(String, String, &crate::ir::Field)> = o
            .fields
            .iter()
            .map(|f| {
                let prop = scope.claim(&names::camel(&f.wire));
                let mut ty = self.ty(ir_name, &f.ty);
                if !f.required && !ty.ends_with('?') {
                    ty.push('?');
                }
                (prop, ty, f)
            })
            .collect();
        // The tag of a variant is a constant, checked when decoding.
        let tag = |f: &crate::ir::Field| self.tags.value(ir_name, &f.wire).map(q);
        for (prop, ty, f) in &props {
            push_doc(s, "    ", "///", &f.doc);
            match tag(f) {
                Some(value) => s.push_str(&format!(
                    "    /// Always {value}: decoding checks it.\n    public var {}: String {{ return {value} }}\n",
                    ident(prop)
                )),
                None => s.push_str(&format!("    public let {}: {ty}\n", ident(prop))),
            }
        }
        // Open objects keep the keys the schema does not name, and encode them again.
        let extra = match &o.extra {
            Extra::Closed => None,
            Extra::Any => Some((scope.claim("extra"), self.ty(ir_name, &Ty::Any))),
            Extra::Typed(ty) => Some((scope.claim("extra"), self.ty(ir_name, ty))),
        };
        let known = o
            .fields
            .iter()
            .map(|f| q(&f.wire))
            .collect::<Vec<_>>()
            .join(", ");
        if let Some((prop, ty)) = &extra {
            s.push_str(&format!(
                "    /// Properties the schema does not name, kept as they are.\n    public let {}: [String: {ty}]\n",
                ident(prop)
            ));
        }
        // Memberwise initializer (the explicit decoder below would otherwise hide it).
        let mut params: Vec<String> = props
            .iter()
            .filter(|(_, _, f)| tag(f).is_none())
            .map(|(p, ty, f)| {
                if ty.ends_with('?') && !f.required {
                    format!("{}: {ty} = nil", ident(p))
                } else {
                    format!("{}: {ty}", ident(p))
                }
            })
            .collect();
        if let Some((prop, ty)) = &extra {
            params.push(format!("{}: [String: {ty}] = [:]", ident(prop)));
        }
        s.push_str(&format!("\n    public init({}) {{\n", params.join(", ")));
        for (p, _, _) in props.iter().filter(|(_, _, f)| tag(f).is_none()) {
            s.push_str(&format!("        self.{p} = {}\n", ident(p)));
        }
        if let Some((prop, _)) = &extra {
            s.push_str(&format!("        self.{prop} = {}\n", ident(prop)));
        }
        s.push_str("    }\n");
        if !props.is_empty() {
            s.push_str("\n    private enum CodingKeys: String, CodingKey {\n");
            for (p, _, f) in &props {
                if p == &f.wire {
                    s.push_str(&format!("        case {}\n", ident(p)));
                } else {
                    s.push_str(&format!("        case {} = {}\n", ident(p), q(&f.wire)));
                }
            }
            s.push_str("    }\n");
        }
        s.push_str("\n    public init(from decoder: Decoder) throws {\n");
        if o.extra == Extra::Closed {
            let allowed = o
                .fields
                .iter()
                .map(|f| q(&f.wire))
                .collect::<Vec<_>>()
                .join(", ");
            s.push_str(&format!(
                "        try rejectUnknownKeys(decoder, allowed: [{allowed}], in: {})\n",
                q(name)
            ));
        }
        if !props.is_empty() {
            s.push_str("        let container = try decoder.container(keyedBy: CodingKeys.self)\n");
        }
        for (p, ty, f) in &props {
            if let Some(value) = tag(f) {
                s.push_str(&format!(
                    "        guard try container.decode(String.self, forKey: .{p}) == {value} else {{\n            throw DecodingError.dataCorruptedError(forKey: .{p}, in: container, debugDescription: {})\n        }}\n",
                    q(&format!("{name}: {} must be {value}", f.wire))
                ));
            } else if ty.ends_with('?') {
                let base = ty.trim_end_matches('?');
                if f.required {
                    // Required but nullable: the key must be present.
                    s.push_str(&format!(
                        "        guard container.contains(.{p}) else {{\n            throw DecodingError.keyNotFound(CodingKeys.{p}, DecodingError.Context(codingPath: container.codingPath, debugDescription: {}))\n        }}\n",
                        q(&format!("{name}: missing key {}", f.wire))
                    ));
                }
                s.push_str(&format!(
                    "        self.{p} = try container.decodeIfPresent({base}.self, forKey: .{p})\n"
                ));
            } else {
                s.push_str(&format!(
                    "        self.{p} = try container.decode({ty}.self, forKey: .{p})\n"
                ));
            }
        }
        let mut encode_checks = String::new();
        for (p, ty, f) in &props {
            for (measure, is_min, bound) in field_bounds(f) {
                let (what, op) = if is_min { ("min", "<") } else { ("max", ">") };
                let (expr, keyword) = match measure {
                    Measure::Length => ("value.unicodeScalars.count", "Length"),
                    Measure::Value => ("value", "imum"),
                    Measure::Items => ("value.count", "Items"),
                };
                let message = q(&format!("{name}.{}: {what}{keyword} {bound}", f.wire));
                let binding = if ty.ends_with('?') {
                    format!("let value = self.{p}")
                } else {
                    format!("case let value = self.{p}")
                };
                s.push_str(&format!(
                    "        if {binding}, {expr} {op} {bound} {{\n            throw DecodingError.dataCorruptedError(forKey: .{p}, in: container, debugDescription: {message})\n        }}\n"
                ));
                encode_checks.push_str(&format!(
                    "        if {binding}, {expr} {op} {bound} {{\n            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: {message}))\n        }}\n"
                ));
            }
        }
        if let Some((prop, ty)) = &extra {
            s.push_str(&format!(
                "        let all = try decoder.container(keyedBy: AnyCodingKey.self)\n        let known: Set<String> = [{known}]\n        var extra: [String: {ty}] = [:]\n        for key in all.allKeys where !known.contains(key.stringValue) {{\n            extra[key.stringValue] = try all.decode({ty}.self, forKey: key)\n        }}\n        self.{prop} = extra\n"
            ));
        }
        s.push_str("    }\n");
        // Encoding checks the same bounds as decoding, then writes the named and extra keys.
        let extra_encode = extra.as_ref().map(|(prop, _)| {
            format!(
                "        var rest = encoder.container(keyedBy: AnyCodingKey.self)\n        let known: Set<String> = [{known}]\n        for (key, value) in self.{prop} where !known.contains(key) {{\n            try rest.encode(value, forKey: AnyCodingKey(stringValue: key))\n        }}\n"
            )
        });
        if !props.is_empty() {
            s.push_str("\n    public func encode(to encoder: Encoder) throws {\n");
            s.push_str(&encode_checks);
            s.push_str("        var container = encoder.container(keyedBy: CodingKeys.self)\n");
            for (p, ty, f) in &props {
                if let Some(value) = tag(f) {
                    s.push_str(&format!(
                        "        try container.encode({value}, forKey: .{p})\n"
                    ));
                } else if ty.ends_with('?') && !f.required {
                    s.push_str(&format!(
                        "        try container.encodeIfPresent(self.{p}, forKey: .{p})\n"
                    ));
                } else {
                    s.push_str(&format!(
                        "        try container.encode(self.{p}, forKey: .{p})\n"
                    ));
                }
            }
            if let Some(e) = &extra_encode {
                s.push_str(e);
            }
            s.push_str("    }\n");
        } else if let Some(e) = &extra_encode {
            s.push_str(&format!(
                "\n    public func encode(to encoder: Encoder) throws {{\n{e}    }}\n"
            ));
        } else {
            s.push_str("\n    public func encode(to encoder: Encoder) throws {\n        _ = encoder.container(keyedBy: AnyCodingKey.self)\n    }\n");
        }
        s.push_str("}\n");
    }

    fn union(&self, s: &mut String, ir_name: &str, name: &str, u: &UnionType) {
        s.push_str(&format!(
            "public indirect enum {name}: Codable, Sendable, Equatable {{\n"
        ));
        let mut scope = NameScope::with_reserved(MEMBER_RESERVED);
        let cases: Vec<(String, String)> = u
            .variants
            .iter()
            .map(|v| {
                (
                    ident(&scope.claim(&names::camel(&v.name))),
                    self.ty(ir_name, &v.ty),
                )
            })
            .collect();
        for (case, ty) in &cases {
            s.push_str(&format!("    case {case}({ty})\n"));
        }
        let unknown = ident(&scope.claim("unknown"));
        let open = u.open && u.tag.is_some();
        if open {
            s.push_str("    /// A variant this version does not know, kept as raw JSON.\n");
            s.push_str(&format!("    case {unknown}(JSONValue)\n"));
        }
        // `decodeKnown` decodes known variants only, at every level of nested unions, so that
        // an enclosing union tries its other variants before an open one keeps a value raw.
        s.push_str("\n    /// Decodes a known variant only: an unknown one throws here.\n");
        s.push_str("    public static func decodeKnown(from decoder: Decoder) throws -> Self {\n");
        let strict = |ty: &str, v: &crate::ir::Variant| -> String {
            let is_union = matches!(&v.ty, Ty::Ref(n) if matches!(self.ir.get(n).map(|t| &t.kind), Some(TypeKind::Union(_))));
            if is_union && !ty.ends_with('?') && !ty.starts_with("Indirect<") {
                format!("{ty}.decodeKnown(from: decoder)")
            } else {
                format!("{ty}(from: decoder)")
            }
        };
        match &u.tag {
            Some(tag) => {
                let text_tags = u
                    .variants
                    .iter()
                    .all(|v| v.tags.iter().all(|t| t.as_text().is_some()));
                s.push_str(
                    "        let container = try decoder.container(keyedBy: AnyCodingKey.self)\n",
                );
                s.push_str(&format!(
                    "        let tagKey = AnyCodingKey(stringValue: {})\n",
                    q(tag)
                ));
                if text_tags {
                    s.push_str(
                        "        let tag = try container.decode(String.self, forKey: tagKey)\n",
                    );
                } else {
                    s.push_str(
                        "        let tag = try container.decode(JSONValue.self, forKey: tagKey)\n",
                    );
                }
                s.push_str("        switch tag {\n");
                for ((case, ty), v) in cases.iter().zip(&u.variants) {
                    let pats = v
                        .tags
                        .iter()
                        .map(|t| match t {
                            _ if text_tags => q(t.as_text().unwrap_or_default()),
                            crate::ir::TagValue::Text(x) => format!(".string({})", q(x)),
                            crate::ir::TagValue::Bool(b) => format!(".bool({b})"),
                            crate::ir::TagValue::Number(n) => format!(".number({})", n),
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    s.push_str(&format!(
                        "        case {pats}:\n            return .{case}(try {})\n",
                        strict(ty, v)
                    ));
                }
                s.push_str("        default:\n");
                s.push_str(&format!(
                    "            throw DecodingError.dataCorruptedError(forKey: tagKey, in: container, debugDescription: {})\n",
                    q(&format!("{name}: unknown {tag}"))
                ));
                s.push_str("        }\n    }\n");
                s.push_str("\n    public init(from decoder: Decoder) throws {\n");
                if open {
                    let envelope = crate::emit::rust::common_required(self.ir, u, tag);
                    let known: Vec<String> = u
                        .variants
                        .iter()
                        .flat_map(|v| v.tags.iter().filter_map(|t| t.as_text().map(q)))
                        .collect();
                    s.push_str("        let container = try decoder.container(keyedBy: AnyCodingKey.self)\n");
                    s.push_str(&format!(
                        "        let tagKey = AnyCodingKey(stringValue: {})\n",
                        q(tag)
                    ));
                    s.push_str(&format!(
                        "        // A value without the tag is an error; an unknown tag keeps the value raw when it\n        // has every key all variants require.\n        let tag = try container.decode(String.self, forKey: tagKey)\n        let known: Set<String> = [{}]\n        let envelope: [String] = [{}]\n",
                        known.join(", "),
                        envelope.iter().map(|k| q(k)).collect::<Vec<_>>().join(", ")
                    ));
                    s.push_str(&format!(
                        "        if !known.contains(tag) && envelope.allSatisfy({{ container.contains(AnyCodingKey(stringValue: $0)) }}) {{\n            self = .{unknown}(try JSONValue(from: decoder))\n            return\n        }}\n"
                    ));
                }
                s.push_str("        self = try Self.decodeKnown(from: decoder)\n    }\n");
            }
            None => {
                for ((case, ty), v) in cases.iter().zip(&u.variants) {
                    s.push_str(&format!(
                        "        if let value = try? {} {{\n            return .{case}(value)\n        }}\n",
                        strict(ty, v)
                    ));
                }
                s.push_str(&format!(
                    "        throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: {}))\n    }}\n",
                    q(&format!("{name}: no variant matches"))
                ));
                s.push_str("\n    public init(from decoder: Decoder) throws {\n");
                s.push_str("        if let value = try? Self.decodeKnown(from: decoder) {\n            self = value\n            return\n        }\n");
                for (case, ty) in &cases {
                    s.push_str(&format!(
                        "        if let value = try? {ty}(from: decoder) {{\n            self = .{case}(value)\n            return\n        }}\n"
                    ));
                }
                s.push_str(&format!(
                    "        throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: {}))\n    }}\n",
                    q(&format!("{name}: no variant matches"))
                ));
            }
        }
        s.push_str(
            "\n    public func encode(to encoder: Encoder) throws {\n        switch self {\n",
        );
        for (case, _) in &cases {
            s.push_str(&format!(
                "        case .{case}(let value): try value.encode(to: encoder)\n"
            ));
        }
        if open {
            s.push_str(&format!(
                "        case .{unknown}(let value): try value.encode(to: encoder)\n"
            ));
        }
        s.push_str("        }\n    }\n}\n");
    }
}

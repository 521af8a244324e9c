//! The head of the generated file and its shared names: the protocol constants in the file's
//! `<P>Protocol` namespace, the support types (`JSONValue`, `Indirect`, `AnyCodingKey`,
//! `rejectUnknownKeys`), and the pass that gives the support types' identifiers the file's
//! prefix so that several generated files can share one Swift module.

use super::{Gen, q};
use crate::emit::header_text;
use crate::ir::Version;
/// The support types' names, prefixed with the file's helper prefix wherever they appear as an
/// identifier (not inside string literals or comments), so that several generated files can
/// share one module.
const HELPER_TYPES: &[&str] = &["JSONValue", "Indirect", "AnyCodingKey"];

pub(super) fn rename_helpers(text: &str, prefix: &str) -> String {
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
    pub(super) fn preamble(&mut self) {
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
}

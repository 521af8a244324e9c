//! Unions: the indirect enum of variants, `decodeKnown` (known variants only, at every level of
//! nested unions), the decoder that keeps an open tagged union's unknown variant as raw JSON
//! when it has the envelope keys, and the encoder.

use super::{Gen, MEMBER_RESERVED, ident, q};
use crate::ir::{Ty, TypeKind, UnionType};
use crate::names::{self, NameScope};
impl Gen<'_> {
    pub(super) fn union(&self, s: &mut String, ir_name: &str, name: &str, u: &UnionType) {
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

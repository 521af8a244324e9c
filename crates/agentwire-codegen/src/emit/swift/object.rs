//! Object structs: their properties (a variant's tag a constant), the memberwise initializer,
//! `CodingKeys`, the decoder (unknown keys rejected for closed objects, tags and bounds checked,
//! the rest kept for open ones) and the encoder, which checks the same bounds.

use super::{Gen, MEMBER_RESERVED, ident, q};
use crate::emit::{Measure, field_bounds, push_doc};
use crate::ir::{Extra, ObjectType, Ty};
use crate::names::{self, NameScope};
impl Gen<'_> {
    pub(super) fn object(&self, s: &mut String, ir_name: &str, name: &str, o: &ObjectType) {
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
}

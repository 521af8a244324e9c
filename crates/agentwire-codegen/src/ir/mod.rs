//! The intermediate representation every generator reads, and its lowering from a
//! [`SchemaDocument`]: named types (objects, string enums, unions, aliases) with wire names kept
//! exactly, inline types named from their path, and the protocol identity and name lists.
//!
//! The lowering rules are documented in `docs/codegen.md`; the short form:
//! - a definition keeps its name; an inline object, enum or union is named after the path that
//!   reaches it (`Parent` + `Property`, `Item` for array items, `Value` for map values, the tag
//!   value for a union branch, `Variant<i>` for an untagged branch); a node whose text equals a
//!   definition or an earlier inline node reuses that type; a taken name gets `2`, `3`, …;
//! - `allOf` is merged into one object, and distributed over a union part;
//! - `oneOf`/`anyOf`: null branches make the type nullable; string constants make an enum; a
//!   property that is a required string constant (or enum) in every branch, with distinct values,
//!   makes a tagged union (an explicit `discriminator` wins); anything else is an untagged union
//!   tried in order; a union covering every JSON kind is a free JSON value;
//! - a union is open (unknown variants are kept raw) only when it says `x-agentwire-open: true`:
//!   a `oneOf`/`anyOf` whose every branch pins the tag rejects any other tag value (whether the
//!   union is the root or its variants are open objects, which admit unknown keys, not unknown
//!   tags), and the decoders agree with the validator on that.
//!
//! Code map: `types.rs` the data types and their lookups, `lower.rs` the walk over schema nodes,
//! `union.rs` `oneOf`/`anyOf`, `merge.rs` reference and `allOf` views, `cycles.rs` recursion,
//! `document.rs` the identity and name lists.

mod cycles;
mod document;
mod lower;
mod merge;
mod types;
mod union;

use agentwire_schema::SchemaDocument;

use crate::error::CodegenError;
use lower::Lowerer;

pub use types::{
    Checks, Extra, Field, Identity, Ir, ObjectType, TagValue, Ty, TypeDef, TypeKind, UnionType,
    Variant, Version,
};

/// Most named types one document may lower to.
pub const MAX_TYPES: usize = 50_000;
/// Most variants `allOf` distribution over union parts may create for one node.
pub const MAX_DISTRIBUTED_VARIANTS: usize = 256;
/// Most reference/`allOf` views one lowering computes: `allOf` parts that share references
/// fan out, and a document built to fan out exponentially stops here instead of running away.
pub const MAX_VIEW_STEPS: usize = 250_000;
/// Fewest types in a reference cycle (through any containment) that Rust output cuts with a
/// wrapper ending the compiler's drop check: a longer chain overflows its recursion limit.
pub const LONG_CYCLE: usize = 24;
/// Deepest nesting of schema nodes the lowering follows (the JSON parser already stops at 127).
pub const MAX_LOWERING_DEPTH: usize = 256;
/// Keywords that constrain a value without changing its type, kept in documentation comments.
pub const CONSTRAINT_KEYWORDS: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "default",
    "deprecated",
];

impl Ir {
    /// Lowers a document. `schema_name` is what the header names (usually the file name).
    pub fn lower(doc: &SchemaDocument, schema_name: &str) -> Result<Ir, CodegenError> {
        Lowerer::new(doc).run(schema_name, None)
    }

    /// Lowers a document, naming the root type `root_name` (e.g. `GatewayFrame`) instead of
    /// `<ProtocolName>Message`.
    pub fn lower_with_root_name(
        doc: &SchemaDocument,
        schema_name: &str,
        root_name: Option<&str>,
    ) -> Result<Ir, CodegenError> {
        Lowerer::new(doc).run(schema_name, root_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn lower(v: Value) -> Ir {
        let doc = SchemaDocument::from_value(v).unwrap();
        Ir::lower(&doc, "test.schema.json").unwrap()
    }

    #[test]
    fn inline_objects_are_named_from_their_path_and_deduplicated() {
        let ir = lower(json!({"$defs": {
            "A": {"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            "B": {"type": "object", "properties": {"same": {"type": "object", "properties": {"x": {"type": "string"}}}}}
        }}));
        let names: Vec<_> = ir.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["A", "AInner", "B"]);
        let TypeKind::Object(b) = &ir.get("B").unwrap().kind else {
            panic!()
        };
        assert_eq!(b.fields[0].ty, Ty::Ref("AInner".into()));
    }

    #[test]
    fn detects_tags_and_openness() {
        let ir = lower(json!({"$defs": {"D": {"oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {"kind": {"const": "a"}}},
            {"type": "object", "additionalProperties": false, "required": ["kind"], "properties": {"kind": {"enum": ["b", "c"]}}}
        ]}}}));
        let TypeKind::Union(u) = &ir.get("D").unwrap().kind else {
            panic!()
        };
        assert_eq!(u.tag.as_deref(), Some("kind"));
        assert!(!u.open);
        let names: Vec<_> = u.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "C"]);
        assert_eq!(u.variants[2].tags, [TagValue::Text("c".into())]);
    }

    #[test]
    fn free_json_values_and_recursion() {
        let ir = lower(json!({"$defs": {
            "J": {"oneOf": [{"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
                {"type": "array", "items": {"$ref": "#/$defs/J"}}, {"type": "object", "additionalProperties": {"$ref": "#/$defs/J"}}]},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
        }}));
        assert_eq!(ir.get("J").unwrap().kind, TypeKind::Alias(Ty::Any));
        assert!(ir.needs_indirection("Node", &Ty::Ref("Node".into())));
        assert!(!ir.needs_indirection("J", &Ty::Ref("Node".into())));
    }

    #[test]
    fn root_name_can_name_a_definition_and_the_root_stays_closed() {
        let schema = json!({"oneOf": [{"$ref": "#/$defs/Frame"}], "$defs": {"Frame": {"oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["type"], "properties": {"type": {"const": "req"}}},
            {"type": "object", "additionalProperties": false, "required": ["type"], "properties": {"type": {"const": "res"}}}
        ]}}});
        let doc = SchemaDocument::from_value(schema).unwrap();
        let plain = Ir::lower(&doc, "f.json").unwrap();
        assert_eq!(plain.root.as_deref(), Some("ProtocolMessage"));
        let rooted = Ir::lower_with_root_name(&doc, "f.json", Some("Frame")).unwrap();
        let TypeKind::Union(u) = &rooted.get("Frame").unwrap().kind else {
            panic!()
        };
        // Being the root does not open a union: the schema rejects an unknown `type`.
        assert!(!u.open);
        assert_eq!(rooted.root.as_deref(), Some("Frame"));
        assert!(rooted.get("ProtocolMessage").is_none());
    }

    #[test]
    fn only_the_schema_opens_a_union() {
        // Open object variants admit unknown keys, not unknown tags.
        let variants = json!([
            {"type": "object", "required": ["type"], "properties": {"type": {"const": "a"}}},
            {"type": "object", "required": ["type"], "properties": {"type": {"const": "b"}}}
        ]);
        let ir = lower(json!({"$defs": {
            "Closed": {"oneOf": variants.clone()},
            "Open": {"oneOf": variants, "x-agentwire-open": true}
        }}));
        let open = |name: &str| match &ir.get(name).unwrap().kind {
            TypeKind::Union(u) => (u.tag.clone(), u.open),
            other => panic!("{other:?}"),
        };
        assert_eq!(open("Closed"), (Some("type".into()), false));
        assert_eq!(open("Open"), (Some("type".into()), true));
    }

    #[test]
    fn exponential_all_of_fan_out_is_an_error() {
        let mut defs = serde_json::Map::new();
        defs.insert(
            "A0".into(),
            json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        );
        for i in 1..40 {
            let prev = format!("#/$defs/A{}", i - 1);
            defs.insert(
                format!("A{i}"),
                json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}),
            );
        }
        let doc = SchemaDocument::from_value(json!({"$defs": defs})).unwrap();
        let err = Ir::lower(&doc, "fan.json").unwrap_err();
        assert_eq!(err.code(), "codegen.too-complex");
    }

    #[test]
    fn all_of_distributes_over_unions() {
        let ir = lower(json!({"$defs": {
            "Base": {"type": "object", "required": ["t"], "properties": {"t": {"type": "string"}, "seq": {"type": "integer"}}},
            "E": {"allOf": [{"$ref": "#/$defs/Base"}, {"oneOf": [
                {"properties": {"t": {"const": "x"}, "a": {"type": "string"}}},
                {"properties": {"t": {"const": "y"}}}
            ]}]}
        }}));
        let TypeKind::Union(u) = &ir.get("E").unwrap().kind else {
            panic!()
        };
        assert_eq!(u.tag.as_deref(), Some("t"));
        let names: Vec<_> = u.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["X", "Y"]);
        let TypeKind::Object(x) = &ir.get("EX").unwrap().kind else {
            panic!()
        };
        let wires: Vec<_> = x.fields.iter().map(|f| f.wire.as_str()).collect();
        assert_eq!(wires, ["t", "seq", "a"]);
    }
}

//! Walking the subschemas of a document by keyword, so that data keywords (`const`, `enum`,
//! `default`, `examples`, vendor `x-*` keys, OpenClaw's `methods` map) are never mistaken for
//! schemas.

use serde_json::Value;

use crate::pointer;

/// Keywords whose value is one subschema.
pub const SINGLE_SUBSCHEMA_KEYWORDS: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
];

/// Keywords whose value is an array of subschemas.
pub const ARRAY_SUBSCHEMA_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value is an object mapping names to subschemas.
pub const MAP_SUBSCHEMA_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// Calls `visit(pointer, schema)` for the schema at `pointer` and every subschema below it,
/// parents before children, in document order.
pub fn for_each_subschema<'v>(root: &'v Value, mut visit: impl FnMut(&str, &'v Value)) {
    let mut stack: Vec<(String, &'v Value)> = vec![(String::new(), root)];
    while let Some((at, schema)) = stack.pop() {
        visit(&at, schema);
        let mut children = Vec::new();
        subschemas(&at, schema, |ptr, child| children.push((ptr, child)));
        stack.extend(children.into_iter().rev());
    }
}

/// Calls `visit(pointer, child)` for each direct subschema of `schema` (which sits at `at`).
pub fn subschemas<'v>(at: &str, schema: &'v Value, mut visit: impl FnMut(String, &'v Value)) {
    let Value::Object(map) = schema else { return };
    for (key, value) in map {
        let key = key.as_str();
        if SINGLE_SUBSCHEMA_KEYWORDS.contains(&key) {
            if is_schema(value) {
                visit(pointer::push(at, key), value);
            }
        } else if ARRAY_SUBSCHEMA_KEYWORDS.contains(&key) {
            if let Value::Array(items) = value {
                let base = pointer::push(at, key);
                for (i, item) in items.iter().enumerate() {
                    visit(format!("{base}/{i}"), item);
                }
            }
        } else if MAP_SUBSCHEMA_KEYWORDS.contains(&key) {
            if let Value::Object(entries) = value {
                let base = pointer::push(at, key);
                for (name, item) in entries {
                    visit(pointer::push(&base, name), item);
                }
            }
        } else if key == "items" {
            match value {
                Value::Array(items) => {
                    let base = pointer::push(at, key);
                    for (i, item) in items.iter().enumerate() {
                        visit(format!("{base}/{i}"), item);
                    }
                }
                other if is_schema(other) => visit(pointer::push(at, key), other),
                _ => {}
            }
        } else if key == "dependencies"
            && let Value::Object(entries) = value
        {
            let base = pointer::push(at, key);
            for (name, item) in entries {
                if item.is_object() {
                    visit(pointer::push(&base, name), item);
                }
            }
        }
    }
}

/// A schema is an object or a boolean.
pub fn is_schema(value: &Value) -> bool {
    matches!(value, Value::Object(_) | Value::Bool(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn visits_schemas_not_data() {
        let doc = json!({
            "properties": {"a/b": {"type": "string"}, "c": {"items": [{"const": {"$ref": "x"}}]}},
            "x-vendor": {"type": "object"},
            "enum": [{"type": "string"}],
            "$defs": {"D": {"anyOf": [true, {"not": false}]}}
        });
        let mut seen = Vec::new();
        for_each_subschema(&doc, |ptr, _| seen.push(ptr.to_owned()));
        assert_eq!(
            seen,
            [
                "",
                "/properties/a~1b",
                "/properties/c",
                "/properties/c/items/0",
                "/$defs/D",
                "/$defs/D/anyOf/0",
                "/$defs/D/anyOf/1",
                "/$defs/D/anyOf/1/not",
            ]
        );
    }
}

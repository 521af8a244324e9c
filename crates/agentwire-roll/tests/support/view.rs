//! A per-version view of a multi-version schema document, following docs/versions.md; used to
//! write and check the exports until the schema crate offers its own exporter.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

fn parse_version(text: &str) -> Vec<u64> {
    text.split('.').map(|part| part.parse().unwrap()).collect()
}

fn in_range(node: &Map<String, Value>, version: &str) -> bool {
    let v = parse_version(version);
    if let Some(Value::String(since)) = node.get("x-agentwire-since") {
        if v < parse_version(since) {
            return false;
        }
    }
    if let Some(Value::String(until)) = node.get("x-agentwire-until") {
        if v >= parse_version(until) {
            return false;
        }
    }
    true
}

fn entry_in_range(entry: &Map<String, Value>, version: &str) -> bool {
    let mut node = Map::new();
    if let Some(since) = entry.get("since") {
        node.insert("x-agentwire-since".into(), since.clone());
    }
    if let Some(until) = entry.get("until") {
        node.insert("x-agentwire-until".into(), until.clone());
    }
    in_range(&node, version)
}

/// The schema of exactly `version`, or `None` when the node does not exist in it.
fn view_node(node: &Value, version: &str, removed: &mut BTreeSet<String>) -> Option<Value> {
    let Value::Object(map) = node else {
        return Some(node.clone());
    };
    if !in_range(map, version) {
        return None;
    }
    let mut map = map.clone();
    if let Some(Value::Array(overrides)) = map.remove("x-agentwire-versions") {
        for entry in overrides {
            let Value::Object(entry) = entry else {
                continue;
            };
            if !entry_in_range(&entry, version) {
                continue;
            }
            if let Some(Value::Object(schema)) = entry.get("schema") {
                for (key, value) in schema {
                    if value.is_null() {
                        map.remove(key);
                    } else {
                        map.insert(key.clone(), value.clone());
                    }
                }
            }
        }
    }
    if map.get("x-agentwire-version-const") == Some(&Value::Bool(true)) {
        map.insert("const".into(), Value::String(version.into()));
    }
    if let Some(Value::Array(values)) = map.get("enum").cloned() {
        let since = map
            .get("x-agentwire-enum-since")
            .cloned()
            .unwrap_or(Value::Null);
        let until = map
            .get("x-agentwire-enum-until")
            .cloned()
            .unwrap_or(Value::Null);
        let v = parse_version(version);
        let kept: Vec<Value> = values
            .into_iter()
            .filter(|value| {
                let key = value.as_str().unwrap_or_default();
                let after = since
                    .get(key)
                    .and_then(Value::as_str)
                    .is_none_or(|s| v >= parse_version(s));
                let before = until
                    .get(key)
                    .and_then(Value::as_str)
                    .is_none_or(|u| v < parse_version(u));
                after && before
            })
            .collect();
        map.insert("enum".into(), Value::Array(kept));
    }
    map.retain(|key, _| !key.starts_with("x-agentwire"));
    let mut out = Map::new();
    for (key, value) in map {
        let new = match key.as_str() {
            "properties" | "$defs" | "patternProperties" => {
                let Value::Object(children) = value else {
                    continue;
                };
                let mut kept = Map::new();
                for (name, child) in children {
                    match view_node(&child, version, removed) {
                        Some(child) => {
                            kept.insert(name, child);
                        }
                        None if key == "$defs" => {
                            removed.insert(name);
                        }
                        None => {}
                    }
                }
                Value::Object(kept)
            }
            "oneOf" | "anyOf" | "allOf" | "prefixItems" => {
                let Value::Array(children) = value else {
                    continue;
                };
                Value::Array(
                    children
                        .iter()
                        .filter_map(|child| view_node(child, version, removed))
                        .collect(),
                )
            }
            "items" | "not" | "additionalProperties" | "if" | "then" | "else" | "contains" => {
                match view_node(&value, version, removed) {
                    Some(child) => child,
                    None => continue,
                }
            }
            _ => value,
        };
        out.insert(key, new);
    }
    // A property that disappeared also leaves `required`.
    if let (Some(Value::Object(props)), Some(Value::Array(required))) =
        (out.get("properties").cloned(), out.get_mut("required"))
    {
        required.retain(|name| name.as_str().is_some_and(|n| props.contains_key(n)));
    }
    Some(Value::Object(out))
}

/// Removes every property and branch that refers to a removed definition.
fn drop_dangling(node: &mut Value, removed: &BTreeSet<String>) -> bool {
    let Value::Object(map) = node else {
        return true;
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        if let Some(name) = reference.strip_prefix("#/$defs/") {
            if removed.contains(name) {
                return false;
            }
        }
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" => {
                if let Value::Object(children) = value {
                    children.retain(|_, child| drop_dangling(child, removed));
                }
            }
            "oneOf" | "anyOf" | "allOf" => {
                if let Value::Array(children) = value {
                    children.retain_mut(|child| drop_dangling(child, removed));
                }
            }
            "items" | "not" | "additionalProperties" => {
                drop_dangling(value, removed);
            }
            _ => {}
        }
    }
    if let (Some(Value::Object(props)), Some(Value::Array(required))) =
        (map.get("properties").cloned(), map.get_mut("required"))
    {
        required.retain(|name| name.as_str().is_some_and(|n| props.contains_key(n)));
    }
    true
}

/// The strict schema of one wire version.
pub fn export_version(document: &Value, version: &str) -> Value {
    let mut removed = BTreeSet::new();
    let mut out = view_node(document, version, &mut removed).unwrap();
    drop_dangling(&mut out, &removed);
    if let Value::Object(map) = &mut out {
        if let Some(Value::String(id)) = map.get("$id").cloned() {
            map.insert("$id".into(), Value::String(format!("{id}:{version}")));
        }
        if let Some(Value::String(title)) = map.get("title").cloned() {
            map.insert(
                "title".into(),
                Value::String(format!("{title} ({version})")),
            );
        }
    }
    out
}

//! Every place in a JSON value, for tests that break a message at one of them.

use serde_json::Value;

/// The path (object keys and array indexes as text) of every value in `value`, itself first,
/// in document order.
pub fn value_paths(value: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect(value, &mut Vec::new(), &mut out);
    out
}

fn collect(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                at.push(k.clone());
                collect(v, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(i.to_string());
                collect(v, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// The value at `path` (as [`value_paths`] spells it), or `None` when it is not there.
pub fn value_at_path_mut<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    let mut current = value;
    for token in path {
        current = match current {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

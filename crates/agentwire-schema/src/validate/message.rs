//! Sentences for people: how an instance value is quoted in a message and how lists of allowed
//! values are cut short.

use serde_json::Value;

/// Longest quotation of an instance value in a message, in characters.
pub const MAX_PREVIEW_CHARS: usize = 48;

/// Most allowed values listed in one message (enums, discriminator tags).
pub const MAX_LISTED_VALUES: usize = 8;

/// The value as compact JSON, cut at [`MAX_PREVIEW_CHARS`] characters with an ellipsis.
pub fn preview(value: &Value) -> String {
    let text = match value {
        // Containers can be huge: describe their size rather than serialise them whole.
        Value::Array(items) if items.len() > MAX_PREVIEW_CHARS => {
            return format!("an array of {} items", items.len());
        }
        Value::Object(map) if map.len() > MAX_PREVIEW_CHARS => {
            return format!("an object with {} properties", map.len());
        }
        Value::String(s) if s.len() > MAX_PREVIEW_CHARS * 4 => {
            let head: String = s.chars().take(MAX_PREVIEW_CHARS).collect();
            return format!("{}…", Value::String(head));
        }
        other => other.to_string(),
    };
    cut(&text)
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_PREVIEW_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_PREVIEW_CHARS).collect();
    out.push('…');
    out
}

/// `"a", "b" or "c"`, at most [`MAX_LISTED_VALUES`] of them, then `(and N more)`.
pub fn list_values<'v>(values: impl ExactSizeIterator<Item = &'v Value>) -> String {
    let total = values.len();
    let shown: Vec<String> = values.take(MAX_LISTED_VALUES).map(preview).collect();
    let mut out = match shown.len() {
        0 => String::from("nothing"),
        1 => shown[0].clone(),
        n => format!("{} or {}", shown[..n - 1].join(", "), shown[n - 1]),
    };
    if total > shown.len() {
        out.push_str(&format!(" (and {} more)", total - shown.len()));
    }
    out
}

/// The JSON type name of a value, as JSON Schema spells it.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `1 character`, `5 characters`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn previews_are_short() {
        assert_eq!(preview(&json!("abc")), "\"abc\"");
        let long = "x".repeat(500);
        assert_eq!(preview(&json!(long)).chars().count(), MAX_PREVIEW_CHARS + 3);
        assert_eq!(preview(&json!(vec![0; 100])), "an array of 100 items");
        assert_eq!(preview(&json!({"a": [1, 2]})), "{\"a\":[1,2]}");
    }

    #[test]
    fn lists_are_cut() {
        let v = json!(["a", "b", "c"]);
        assert_eq!(
            list_values(v.as_array().unwrap().iter()),
            "\"a\", \"b\" or \"c\""
        );
        let v = json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(
            list_values(v.as_array().unwrap().iter()),
            "1, 2, 3, 4, 5, 6, 7 or 8 (and 2 more)"
        );
    }
}

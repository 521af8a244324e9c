//! Opaque JSON values of the run state (`args`, `result`, `output`, `preview`, `edited`,
//! errors): kept as compact text, exactly what `serde_json` writes for the value, so the state
//! neither builds nor deep-copies a tree for data it only shows.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// A JSON value held as its compact canonical text: no whitespace, object keys in input order,
/// strings and numbers written as `serde_json` writes them. Two `Json` are equal exactly when
/// their values are (the text is canonical), so states derived from the same events compare equal
/// whichever path read them.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(Box<str>);

impl Json {
    /// The canonical text of a value.
    pub fn from_value(value: &Value) -> Json {
        Json::from_serialize(value)
    }

    /// The canonical text of an object's members (what [`Json::from_value`] writes for the
    /// object), without building the object.
    pub(crate) fn from_map(map: &serde_json::Map<String, Value>) -> Json {
        Json::from_serialize(map)
    }

    fn from_serialize(value: &impl Serialize) -> Json {
        thread_local! {
            /// Written into, then copied out at its exact length (one allocation per value).
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|scratch| {
            let Ok(mut buf) = scratch.try_borrow_mut() else {
                return Json(
                    serde_json::to_string(value)
                        .unwrap_or_default()
                        .into_boxed_str(),
                );
            };
            buf.clear();
            // Writing a Value into memory cannot fail, and serde_json writes UTF-8: the check is
            // `from_utf8`'s, whose ASCII fast path is quicker than the lossy scan's.
            let _ = serde_json::to_writer(&mut *buf, value);
            match std::str::from_utf8(&buf) {
                Ok(text) => Json(text.into()),
                Err(_) => Json(String::from_utf8_lossy(&buf).into()),
            }
        })
    }

    /// Text already known to be canonical (checked by [`canonical_end`]).
    pub(crate) fn from_canonical(text: &str) -> Json {
        Json(text.into())
    }

    /// The compact text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value, parsed from the text.
    pub fn to_value(&self) -> Value {
        // The text was written by serde_json or checked canonical, so it always parses.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl From<&Value> for Json {
    fn from(value: &Value) -> Json {
        Json::from_value(value)
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Json {
        Json::from_value(&value)
    }
}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Serialized as the value itself (so pretty output is indented like any other value),
/// streamed from the text without building a tree.
impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut de = serde_json::Deserializer::from_str(&self.0);
        serde_transcode::transcode(&mut de, serializer)
    }
}

/// Deeper values are left to the strict parser (whose bound, 127, is far above it).
const FAST_MAX_DEPTH: usize = 64;

/// Where the JSON value starting at `pos` of `b` ends, when it is written exactly as
/// [`Json::from_value`] would write it (so its text can be kept as is) and holds no duplicate
/// key; `None` when it is not, or is not JSON at all. `depth` is the nesting depth of the value
/// (the line's object is 1), bounded well inside the strict parser's bound.
pub(crate) fn canonical_end(b: &[u8], pos: usize, depth: usize) -> Option<usize> {
    agentwire_jsonscan::canonical_end(b, pos, FAST_MAX_DEPTH.saturating_sub(depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> bool {
        canonical_end(text.as_bytes(), 0, 1) == Some(text.len())
    }

    #[test]
    fn canonical_text_is_what_serde_json_writes() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#""line\nbreak \"quoted\" back\\slash \u0001""#,
            "0",
            "-12",
            "0.5",
            "0.0012",
            "1e+21",
            "1.5e-7",
            "1.0",
            "18446744073709551615",
            "[]",
            "{}",
            r#""é and 中""#,
        ] {
            assert!(canonical(text), "{text}");
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            assert_eq!(Json::from_value(&v).as_str(), text);
        }
    }

    #[test]
    fn other_spellings_are_not_canonical() {
        for text in [
            r#"{"a": 1}"#,
            r#"{"a":1,"a":2}"#,
            r#""\/""#,
            r#""\u00e9""#,
            r#""\u000a""#,
            r#""\u001F""#,
            "-0",
            "01",
            "1e21",
            "1E5",
            "100000000000000000000",
            "1.50",
            "[1,]",
            "{\"a\":1",
            "tru",
        ] {
            assert!(!canonical(text), "{text}");
        }
    }

    #[test]
    fn depth_is_bounded() {
        let deep = format!("{}{}", "[".repeat(70), "]".repeat(70));
        assert!(!canonical(&deep));
        let ok = format!("{}{}", "[".repeat(50), "]".repeat(50));
        assert!(canonical(&ok));
    }

    #[test]
    fn json_serializes_as_its_value() {
        let j = Json::from_value(&serde_json::json!({"b": [1, 2], "a": "x"}));
        assert_eq!(j.as_str(), r#"{"b":[1,2],"a":"x"}"#);
        assert_eq!(
            serde_json::to_string_pretty(&j).unwrap_or_default(),
            "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": \"x\"\n}"
        );
        assert_eq!(j, serde_json::json!({"b": [1, 2], "a": "x"}));
    }
}

//! Opaque JSON values of the run state (`args`, `result`, `output`, `preview`, `edited`,
//! errors): kept as compact text, exactly what `serde_json` writes for the value, so the state
//! neither builds nor deep-copies a tree for data it only shows.

use std::fmt;

use agentwire_schema::fast::string_special;
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
            // Writing a Value into memory cannot fail, and serde_json writes UTF-8.
            let _ = serde_json::to_writer(&mut *buf, value);
            Json(String::from_utf8_lossy(&buf).into())
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

/// Objects with more members than this are not checked for duplicate keys here; the caller
/// takes the strict parser's path.
const PAIRWISE_DUP_MAX: usize = 16;

/// Where the JSON value starting at `pos` of `b` ends, when it is written exactly as
/// [`Json::from_value`] would write it (so its text can be kept as is) and holds no duplicate
/// key; `None` when it is not, or is not JSON at all. `depth` is the nesting depth of the value
/// (the line's object is 1), bounded well inside the strict parser's bound.
pub(crate) fn canonical_end(b: &[u8], pos: usize, depth: usize) -> Option<usize> {
    match *b.get(pos)? {
        b'"' => string_end(b, pos),
        b'{' => {
            if depth >= FAST_MAX_DEPTH {
                return None;
            }
            let mut keys: [(usize, usize); PAIRWISE_DUP_MAX] = [(0, 0); PAIRWISE_DUP_MAX];
            let mut n = 0;
            let mut i = pos + 1;
            if *b.get(i)? == b'}' {
                return Some(i + 1);
            }
            loop {
                let key_end = string_end(b, i)?;
                let key = &b[i..key_end];
                if n == PAIRWISE_DUP_MAX || keys[..n].iter().any(|&(s, e)| &b[s..e] == key) {
                    return None;
                }
                keys[n] = (i, key_end);
                n += 1;
                if *b.get(key_end)? != b':' {
                    return None;
                }
                i = canonical_end(b, key_end + 1, depth + 1)?;
                match *b.get(i)? {
                    b',' => i += 1,
                    b'}' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            if depth >= FAST_MAX_DEPTH {
                return None;
            }
            let mut i = pos + 1;
            if *b.get(i)? == b']' {
                return Some(i + 1);
            }
            loop {
                i = canonical_end(b, i, depth + 1)?;
                match *b.get(i)? {
                    b',' => i += 1,
                    b']' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b't' => literal_end(b, pos, b"true"),
        b'f' => literal_end(b, pos, b"false"),
        b'n' => literal_end(b, pos, b"null"),
        b'-' | b'0'..=b'9' => {
            let end = number_end(b, pos);
            canonical_number(&b[pos..end]).then_some(end)
        }
        _ => None,
    }
}

fn literal_end(b: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    b[pos..].starts_with(word).then_some(pos + word.len())
}

/// The end of the number-looking run of bytes at `pos`.
pub(crate) fn number_end(b: &[u8], pos: usize) -> usize {
    let mut i = pos;
    while i < b.len() && matches!(b[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
        i += 1;
    }
    i
}

/// Whether number text is written the way serde_json writes the number it parses to: an
/// integer without sign noise or leading zeros that fits `u64`/`i64`, or a float whose shortest
/// round-trip form is the text itself.
fn canonical_number(t: &[u8]) -> bool {
    let digits = t.strip_prefix(b"-").unwrap_or(t);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return canonical_float(t);
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return false;
    }
    // `-0` reads as the float -0.0, written `-0.0`.
    if t[0] == b'-' {
        return digits != b"0" && std::str::from_utf8(t).is_ok_and(|s| s.parse::<i64>().is_ok());
    }
    std::str::from_utf8(t).is_ok_and(|s| s.parse::<u64>().is_ok())
}

fn canonical_float(t: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(t) else {
        return false;
    };
    if !valid_json_number(t) {
        return false;
    }
    match s.parse::<f64>() {
        // Compared with serde_json's own writing, whatever float formatter it uses.
        Ok(f) if f.is_finite() => serde_json::to_string(&f).is_ok_and(|w| w == s),
        _ => false,
    }
}

/// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
pub(crate) fn valid_json_number(t: &[u8]) -> bool {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < t.len() && t[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if t.first() == Some(&b'-') {
        i += 1;
    }
    match t.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if t.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == t.len()
}

/// Where the string starting at `pos` (its opening quote) ends, just past the closing quote,
/// when every escape in it is one serde_json writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`,
/// and `\u00XX` in lower-case hex for the other control characters) and it holds no raw control
/// character. The bytes are UTF-8 already (the caller checked the whole line).
pub(crate) fn string_end(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let mut i = pos + 1;
    loop {
        i = string_special(b, i)?;
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    let canonical = hex[0] == b'0'
                        && hex[1] == b'0'
                        && matches!(hex[2], b'0' | b'1')
                        && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                        && !matches!((hex[2], hex[3]), (b'0', b'8' | b'9' | b'a' | b'c' | b'd'));
                    if !canonical {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
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

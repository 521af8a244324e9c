//! Canonical text: byte-identical to JavaScript's `JSON.stringify(value, null, 2)`, and the
//! protocol digest computed over it.
//!
//! Key order is the document's own. Numbers print as ECMAScript `Number#toString` prints the
//! nearest double (`1e+21`, `0.1`, `-0` → `0`). Strings escape exactly what `JSON.stringify`
//! escapes: `"`, `\`, and control characters below U+0020 (with the short forms `\b \f \n \r \t`).

use std::fmt;
use std::fmt::Write as _;

use serde_json::{Number, Value};
use sha2::{Digest as _, Sha256};

/// Canonical text of a value, with or without a final line feed.
pub fn canonical_text(value: &Value, trailing_newline: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    if trailing_newline {
        out.push('\n');
    }
    out
}

/// Compact text of a value, byte-identical to `JSON.stringify(value)`.
pub fn compact_text(value: &Value) -> String {
    let mut out = String::new();
    write_compact(&mut out, value);
    out
}

/// A protocol digest: `sha256:` and the lowercase hex SHA-256 of canonical text plus `"\n"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// The digest of some bytes, in the `sha256:<hex>` form.
    pub fn of_bytes(bytes: &[u8]) -> Digest {
        let hash = Sha256::digest(bytes);
        let mut text = String::with_capacity(71);
        text.push_str("sha256:");
        for byte in hash.iter() {
            let _ = write!(text, "{byte:02x}");
        }
        Digest(text)
    }

    /// The digest as text, `sha256:` followed by 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits without the `sha256:` prefix.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The protocol digest of a value: SHA-256 over its canonical text and a final `"\n"`.
pub fn digest(value: &Value) -> Digest {
    Digest::of_bytes(canonical_text(value, true).as_bytes())
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline_indent(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            newline_indent(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline_indent(out, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item, depth + 1);
            }
            newline_indent(out, depth);
            out.push('}');
        }
        other => write_compact(out, other),
    }
}

fn write_compact(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_compact(out, item);
            }
            out.push('}');
        }
    }
}

fn newline_indent(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Writes a number the way ECMAScript prints the double nearest to it.
pub(crate) fn write_number(out: &mut String, n: &Number) {
    // Small integers print as themselves; everything else goes through the double, as in JS.
    if let Some(i) = n.as_i64()
        && i.unsigned_abs() <= (1u64 << 53)
    {
        let _ = write!(out, "{i}");
        return;
    }
    let f = n.as_f64().unwrap_or(0.0);
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format(f));
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape: &str = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_json_str;
    use serde_json::json;

    #[test]
    fn pretty_layout_matches_json_stringify() {
        let v = json!({"a": [1, {"b": []}, {}], "c": "x"});
        assert_eq!(
            canonical_text(&v, false),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    },\n    {}\n  ],\n  \"c\": \"x\"\n}"
        );
        assert_eq!(canonical_text(&json!([]), true), "[]\n");
    }

    #[test]
    fn numbers_print_as_ecmascript() {
        let cases = [
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.1", "0.1"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("1.5e-7", "1.5e-7"),
            ("0.000001", "0.000001"),
            ("12345678901234567891", "12345678901234567000"),
            ("-9007199254740993", "-9007199254740992"),
            ("9007199254740992", "9007199254740992"),
            ("123e-20", "1.23e-18"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ];
        for (input, expected) in cases {
            let v = parse_json_str(input).unwrap();
            assert_eq!(compact_text(&v), expected, "input {input}");
        }
    }

    #[test]
    fn strings_escape_as_json_stringify() {
        let v = json!("q\"b\\n\nt\tc\u{1}\u{1f}\u{7f}é\u{2028}/");
        assert_eq!(
            compact_text(&v),
            "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001f\u{7f}é\u{2028}/\""
        );
        assert_eq!(compact_text(&json!("\u{8}\u{c}\r")), "\"\\b\\f\\r\"");
    }

    #[test]
    fn digest_is_over_text_plus_newline() {
        let v = json!({"a": 1});
        let expected = Digest::of_bytes(b"{\n  \"a\": 1\n}\n");
        assert_eq!(digest(&v), expected);
        assert_eq!(
            Digest::of_bytes(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

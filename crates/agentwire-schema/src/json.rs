//! Strict JSON input: UTF-8 checked with the byte offset of the first bad sequence, duplicate
//! object keys rejected, nesting bounded, numbers that do not fit a double rejected.
//!
//! Every untrusted document (schemas and messages alike) goes through [`parse_json`], so the
//! rest of the toolkit never sees a value that two JSON parsers could read differently.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects accepted. Deeper input is a [`JsonErrorKind::TooDeep`]
/// error, never a stack overflow.
pub const MAX_JSON_DEPTH: usize = 127;

/// Why a document is not acceptable JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// Not JSON text (RFC 8259 grammar).
    Syntax,
    /// The document ends in the middle of a value.
    UnexpectedEnd,
    /// Non-whitespace after the value.
    TrailingCharacters,
    /// An object has the same key twice.
    DuplicateKey,
    /// Nesting deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
    /// A number outside the range of an IEEE 754 double.
    NumberOutOfRange,
    /// The text starts with a byte order mark (U+FEFF), which JSON text must not have
    /// (RFC 8259 §8.1).
    ByteOrderMark,
    /// A `\u` escape of a UTF-16 surrogate that is not a high surrogate followed by a low one:
    /// it stands for no character.
    LoneSurrogate,
}

impl JsonErrorKind {
    /// Stable code of the error, used in reports and `--format json` output.
    pub fn code(self) -> &'static str {
        match self {
            JsonErrorKind::InvalidUtf8 => "json.invalid-utf8",
            JsonErrorKind::Syntax => "json.syntax",
            JsonErrorKind::UnexpectedEnd => "json.unexpected-end",
            JsonErrorKind::TrailingCharacters => "json.trailing-characters",
            JsonErrorKind::DuplicateKey => "json.duplicate-key",
            JsonErrorKind::TooDeep => "json.too-deep",
            JsonErrorKind::NumberOutOfRange => "json.number-out-of-range",
            JsonErrorKind::ByteOrderMark => "json.byte-order-mark",
            JsonErrorKind::LoneSurrogate => "json.lone-surrogate",
        }
    }
}

/// A document that could not be parsed, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// What went wrong.
    pub kind: JsonErrorKind,
    /// 1-based line of the problem (0 when only a byte offset is known).
    pub line: usize,
    /// 1-based column of the problem (0 when only a byte offset is known).
    pub column: usize,
    /// Byte offset of the first invalid UTF-8 sequence, for [`JsonErrorKind::InvalidUtf8`].
    pub byte_offset: Option<usize>,
    /// A sentence a person understands.
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(offset) = self.byte_offset {
            write!(f, "{} at byte {offset}", self.message)
        } else if self.line > 0 {
            write!(
                f,
                "{} at line {} column {}",
                self.message, self.line, self.column
            )
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for JsonError {}

/// Parses one JSON document from bytes.
///
/// Keys keep document order. Duplicate keys, invalid UTF-8, nesting deeper than
/// [`MAX_JSON_DEPTH`] and numbers out of double range are errors.
pub fn parse_json(bytes: &[u8]) -> Result<Value, JsonError> {
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError {
        kind: JsonErrorKind::InvalidUtf8,
        line: 0,
        column: 0,
        byte_offset: Some(e.valid_up_to()),
        message: "invalid UTF-8".to_owned(),
    })?;
    parse_json_str(text)
}

/// Parses one JSON document from text, with the rules of [`parse_json`].
pub fn parse_json_str(text: &str) -> Result<Value, JsonError> {
    if text.starts_with('\u{feff}') {
        return Err(byte_order_mark());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue
        .deserialize(&mut de)
        .map_err(|e| convert(text, e))?;
    de.end().map_err(|e| convert(text, e))?;
    Ok(value)
}

/// The error of a document that starts with a byte order mark.
pub(crate) fn byte_order_mark() -> JsonError {
    JsonError {
        kind: JsonErrorKind::ByteOrderMark,
        line: 1,
        column: 1,
        byte_offset: None,
        message: "the text starts with a byte order mark (U+FEFF), which JSON text must not have"
            .to_owned(),
    }
}

/// The last `\u` escape of a surrogate that starts before 1-based `line` and `column` of
/// `text`: its line, column and the four hex digits as written. serde_json reports a lone
/// surrogate as the end of a hex escape; this finds the escape it stopped at.
fn lone_surrogate_before(text: &str, line: usize, column: usize) -> Option<(usize, usize, &str)> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    let end = (line_start + column).min(text.len());
    let bytes = text.as_bytes();
    (end.saturating_sub(16).max(line_start)..end)
        .rev()
        .find_map(|at| {
            if bytes.get(at) != Some(&b'\\') || bytes.get(at + 1) != Some(&b'u') {
                return None;
            }
            let code = agentwire_jsonscan::hex4(bytes, at + 2)?;
            let digits = text.get(at + 2..at + 6)?;
            (0xD800..=0xDFFF)
                .contains(&code)
                .then_some((line.max(1), at - line_start + 1, digits))
        })
}

fn convert(input: &str, err: serde_json::Error) -> JsonError {
    let text = err.to_string();
    // serde_json appends " at line L column C"; keep only the sentence.
    let message = match text.rfind(" at line ") {
        Some(idx) => text[..idx].to_owned(),
        None => text.clone(),
    };
    if matches!(
        message.as_str(),
        "unexpected end of hex escape" | "lone leading surrogate in hex escape"
    ) && let Some((line, column, digits)) =
        lone_surrogate_before(input, err.line(), err.column())
    {
        return JsonError {
            kind: JsonErrorKind::LoneSurrogate,
            line,
            column,
            byte_offset: None,
            message: format!(
                "lone surrogate \"\\u{digits}\" in a string: a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one"
            ),
        };
    }
    let kind = if message.starts_with("recursion limit exceeded") {
        JsonErrorKind::TooDeep
    } else if message.starts_with("duplicate key") {
        JsonErrorKind::DuplicateKey
    } else if message.starts_with("number out of range") {
        JsonErrorKind::NumberOutOfRange
    } else if message.starts_with("trailing characters") {
        JsonErrorKind::TrailingCharacters
    } else if err.is_eof() {
        JsonErrorKind::UnexpectedEnd
    } else {
        JsonErrorKind::Syntax
    };
    let message = match kind {
        JsonErrorKind::TooDeep => format!("nesting deeper than {MAX_JSON_DEPTH} levels"),
        _ => message,
    };
    JsonError {
        kind,
        line: err.line(),
        column: err.column(),
        byte_offset: None,
        message,
    }
}

/// A [`DeserializeSeed`] that reads one JSON value with the rules of [`parse_json`] (duplicate
/// keys rejected, numbers within a double), for typed deserializers that keep part of their
/// input as a raw value.
#[derive(Debug, Clone, Copy, Default)]
pub struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let value = access.next_value_seed(StrictValue)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_key_order() {
        let v = parse_json(br#"{"b":1,"a":2}"#).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a"]);
    }

    #[test]
    fn rejects_duplicate_keys_with_position() {
        let err = parse_json(b"{\"a\":1,\n \"a\":2}").unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::DuplicateKey);
        assert_eq!(err.message, "duplicate key \"a\"");
        assert_eq!(err.line, 2);
    }

    #[test]
    fn rejects_invalid_utf8_with_offset() {
        let err = parse_json(b"{\"a\":\"\xff\"}").unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::InvalidUtf8);
        assert_eq!(err.byte_offset, Some(6));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = parse_json(text.as_bytes()).unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::TooDeep);
        let ok = "[".repeat(MAX_JSON_DEPTH) + &"]".repeat(MAX_JSON_DEPTH);
        assert!(parse_json(ok.as_bytes()).is_ok());
        let over = "[".repeat(MAX_JSON_DEPTH + 1) + &"]".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(
            parse_json(over.as_bytes()).unwrap_err().kind,
            JsonErrorKind::TooDeep
        );
        assert!(parse_json(ok.as_bytes()).is_ok());
    }

    #[test]
    fn classifies_other_errors() {
        assert_eq!(
            parse_json(b"{").unwrap_err().kind,
            JsonErrorKind::UnexpectedEnd
        );
        assert_eq!(
            parse_json(b"{} x").unwrap_err().kind,
            JsonErrorKind::TrailingCharacters
        );
        assert_eq!(
            parse_json(b"1e400").unwrap_err().kind,
            JsonErrorKind::NumberOutOfRange
        );
        assert_eq!(parse_json(b"NaN").unwrap_err().kind, JsonErrorKind::Syntax);
        assert_eq!(parse_json(b"[1,2] ").unwrap(), json!([1, 2]));
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let err = parse_json(b"\xef\xbb\xbf{}").unwrap_err();
        assert_eq!(err.kind, JsonErrorKind::ByteOrderMark);
        assert_eq!(err.kind.code(), "json.byte-order-mark");
        assert_eq!(
            err.to_string(),
            "the text starts with a byte order mark (U+FEFF), which JSON text must not have at line 1 column 1"
        );
    }

    #[test]
    fn a_lone_surrogate_is_named() {
        for (text, column, digits) in [
            (r#""\ud800""#, 2, "ud800"),
            (r#""\udc00""#, 2, "udc00"),
            (r#""\ud800\u0041""#, 2, "ud800"),
            ("[\"a\",\n \"x\\uDBFFy\"]", 4, "uDBFF"),
        ] {
            let err = parse_json(text.as_bytes()).unwrap_err();
            assert_eq!(err.kind, JsonErrorKind::LoneSurrogate, "{text}");
            assert_eq!(err.column, column, "{text}");
            assert_eq!(
                err.message,
                format!(
                    "lone surrogate \"\\{digits}\" in a string: a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one"
                ),
                "{text}"
            );
        }
        assert_eq!(
            parse_json(r#""\ud83d\ude00""#.as_bytes()).unwrap(),
            json!("\u{1F600}")
        );
        assert_eq!(parse_json(b"[1,2] ").unwrap(), json!([1, 2]));
    }
}

//! JSON-RPC 2.0 messages: ids that keep their JSON type, the decoder that sorts a parsed line
//! into request, notification, response, batch or invalid message, and the outbound encodings.

use agentwire_schema::JsonError;
use agentwire_schema::fast::Tape;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use crate::error::ErrorObject;

/// A request id. It keeps its JSON type: `"7"` and `7` are different ids, and a response
/// carries the id exactly as the request did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    /// A numeric id.
    Number(Number),
    /// A string id.
    String(String),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<u64> for Id {
    fn from(value: u64) -> Self {
        Id::Number(value.into())
    }
}

impl From<&str> for Id {
    fn from(value: &str) -> Self {
        Id::String(value.to_owned())
    }
}

impl From<String> for Id {
    fn from(value: String) -> Self {
        Id::String(value)
    }
}

/// Nesting up to which [`RawJson`] text is checked for being compact before it is written as
/// it is (deeper text is rewritten).
const MAX_RAW_DEPTH: usize = 128;

/// One JSON value kept as its text: params and results cross the connection without being
/// built into a [`Value`], and are deserialised once, straight into the type that reads them
/// ([`RawJson::parse`]).
///
/// Written into an outgoing message, the text goes out as it is when it is compact (as
/// `serde_json` writes it, which is always the case for a value made by
/// [`RawJson::from_value`]); text read from the other side with whitespace in it is
/// rewritten compactly first, so every line written stays one compact object.
#[derive(Clone)]
pub struct RawJson {
    text: RawText,
    /// Known to be compact (written by `serde_json`, or read as canonical text); other read
    /// text is checked when written.
    compact: bool,
}

/// The text of a [`RawJson`]: checked by `serde_json` (a [`RawValue`]), or by the one-pass
/// canonical scan of [`Decoder::decode`], which proves it valid without building a
/// [`RawValue`] (that would read it again).
#[derive(Clone)]
enum RawText {
    Serde(Box<RawValue>),
    Scanned(Box<str>),
}

impl RawText {
    fn get(&self) -> &str {
        match self {
            RawText::Serde(raw) => raw.get(),
            RawText::Scanned(text) => text,
        }
    }
}

impl RawJson {
    /// The compact JSON text of `value`.
    ///
    /// # Errors
    /// When `value` cannot be serialised (a map with non-string keys, a failing `Serialize`).
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<RawJson> {
        serde_json::value::to_raw_value(value).map(|text| RawJson {
            text: RawText::Serde(text),
            compact: true,
        })
    }

    /// `null`.
    pub fn null() -> RawJson {
        RawJson {
            text: RawText::Serde(RawValue::NULL.to_owned()),
            compact: true,
        }
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.text.get()
    }

    /// Deserialises the text into `T`.
    ///
    /// # Errors
    /// When the value does not fit `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.text.get())
    }

    /// The value as a [`Value`].
    ///
    /// # Errors
    /// Never for text read by a [`Decoder`] or made by [`RawJson::from_value`]; kept for
    /// text whose nesting is deeper than `serde_json` reads.
    pub fn to_value(&self) -> serde_json::Result<Value> {
        self.parse()
    }

    /// The first byte of the text: what kind of value it is.
    fn first(&self) -> u8 {
        self.text.get().as_bytes().first().copied().unwrap_or(b'n')
    }

    fn borrowed(raw: &RawValue) -> RawJson {
        RawJson {
            text: RawText::Serde(raw.to_owned()),
            compact: false,
        }
    }

    /// Text the canonical scan of [`Decoder::decode`] read: valid, compact JSON.
    fn scanned(text: &str) -> RawJson {
        RawJson {
            text: RawText::Scanned(Box::from(text)),
            compact: true,
        }
    }

    /// Whether the text is known to be compact, so that it is written as it is.
    pub(crate) fn is_compact(&self) -> bool {
        self.compact
    }
}

impl std::fmt::Debug for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text.get())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.text.get() == other.text.get()
    }
}

impl From<&Value> for RawJson {
    fn from(value: &Value) -> Self {
        // A `Value` always serialises.
        RawJson::from_value(value).unwrap_or_else(|_| RawJson::null())
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.text.get().as_bytes();
        if self.compact
            || agentwire_jsonscan::canonical_end(text, 0, MAX_RAW_DEPTH) == Some(text.len())
        {
            return match &self.text {
                RawText::Serde(raw) => raw.serialize(serializer),
                // Scanned text is valid: only serde_json's own type writes text as it is. Our
                // answers and requests are written without this path (`OutResponse::write`).
                RawText::Scanned(text) => match serde_json::from_str::<&RawValue>(text) {
                    Ok(raw) => raw.serialize(serializer),
                    Err(error) => Err(serde::ser::Error::custom(error)),
                },
            };
        }
        // Whitespace (or a spelling serde_json would not write): rewrite it compactly.
        match self.to_value() {
            Ok(value) => value.serialize(serializer),
            Err(error) => Err(serde::ser::Error::custom(error)),
        }
    }
}

/// A single, valid JSON-RPC message read from the other side.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered exactly once.
    Request {
        /// Its id.
        id: Id,
        /// Its method.
        method: String,
        /// Its params, when present.
        params: Option<RawJson>,
    },
    /// A notification: never answered.
    Notification {
        /// Its method.
        method: String,
        /// Its params, when present.
        params: Option<RawJson>,
    },
    /// A response to one of our requests.
    Response {
        /// The id of the request it answers.
        id: Id,
        /// `result` or `error`.
        outcome: Result<RawJson, ErrorObject>,
    },
    /// An error response with `id: null`: it answers no request we can identify.
    UncorrelatedError(ErrorObject),
}

/// Well-formed JSON that is not a valid JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The id, when one could be read (a string or a number under `id`).
    pub id: Option<Id>,
    /// Whether the message looked like a response (never answered, whatever the profile).
    pub is_response: bool,
    /// Why it is invalid, for the log and the `-32600` message.
    pub reason: &'static str,
}

/// What one line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A single valid message.
    Message(Incoming),
    /// A JSON array: a batch, handled per the profile's [`crate::BatchPolicy`]; each element
    /// is sorted with [`Decoder::sort`].
    Batch(Vec<RawJson>),
    /// Not a valid JSON-RPC message.
    Invalid(Invalid),
}

/// Reads lines into messages: every line through the strict JSON rules of
/// [`agentwire_schema::parse_json`] (the same acceptance and errors, checked on a reusable tape
/// without building a value), then sorted into a message whose params and result stay JSON
/// text.
///
/// `structured_params` requires `params`, when present, to be an object or an array (JSON-RPC
/// 2.0); without it any JSON value is accepted (the ChainlessChain App Server allows scalars).
/// Members beyond those of JSON-RPC are ignored.
#[derive(Debug, Default)]
pub struct Decoder {
    tape: Tape,
    structured_params: bool,
}

impl Decoder {
    /// A decoder; see the type's documentation for `structured_params`.
    pub fn new(structured_params: bool) -> Decoder {
        Decoder {
            tape: Tape::new(),
            structured_params,
        }
    }

    /// Reads one line (without its line ending).
    ///
    /// # Errors
    /// The line is not JSON by the rules of [`agentwire_schema::parse_json`] (its error).
    pub fn decode(&mut self, line: &[u8]) -> Result<Decoded, JsonError> {
        if let Some(members) = Members::scan(line) {
            return Ok(members.sort(self.structured_params));
        }
        agentwire_schema::fast::parse(line, &mut self.tape)?;
        Ok(self.sort(line))
    }

    /// Sorts JSON text already known to be valid (a line [`Decoder::decode`] checked, or an
    /// element of a batch) into a message.
    pub fn sort(&self, text: &[u8]) -> Decoded {
        let start = agentwire_jsonscan::skip_ws(text, 0);
        match text.get(start) {
            Some(b'{') => {}
            Some(b'[') => {
                return match serde_json::from_slice::<Vec<&RawValue>>(text) {
                    Ok(items) => Decoded::Batch(items.into_iter().map(RawJson::borrowed).collect()),
                    Err(_) => invalid(None, false, "a message must be a JSON object"),
                };
            }
            _ => return invalid(None, false, "a message must be a JSON object"),
        }
        match serde_json::from_slice::<Envelope<'_>>(text) {
            Ok(envelope) => Members::from(envelope).sort(self.structured_params),
            Err(_) => invalid(None, false, "a message must be a JSON object"),
        }
    }
}

/// Reads one line with a fresh [`Decoder`].
///
/// # Errors
/// See [`Decoder::decode`].
pub fn decode(line: &[u8], structured_params: bool) -> Result<Decoded, JsonError> {
    Decoder::new(structured_params).decode(line)
}

/// The members of a message that JSON-RPC defines, each as its text when present (`null`
/// included).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn small<T: DeserializeOwned>(raw: &str) -> Option<T> {
    serde_json::from_str(raw).ok()
}

/// Nesting accepted inside a member by the one-pass scan; deeper lines take the strict
/// parser's path (which allows [`agentwire_schema::MAX_JSON_DEPTH`] levels in all).
const SCAN_MEMBER_DEPTH: usize = 120;
/// Members of a message the one-pass scan reads; more take the strict parser's path.
const SCAN_MAX_MEMBERS: usize = 16;

/// The JSON text of a member: checked by serde_json (the strict parser's path) or by the
/// one-pass scan.
#[derive(Clone, Copy)]
enum Text<'a> {
    Serde(&'a RawValue),
    Scanned(&'a str),
}

impl<'a> Text<'a> {
    fn get(self) -> &'a str {
        match self {
            Text::Serde(raw) => raw.get(),
            Text::Scanned(text) => text,
        }
    }

    fn to_raw(self) -> RawJson {
        match self {
            Text::Serde(raw) => RawJson::borrowed(raw),
            Text::Scanned(text) => RawJson::scanned(text),
        }
    }
}

/// The JSON-RPC members of one message, each as its JSON text when present (`null` included).
struct Members<'a> {
    jsonrpc: Option<Text<'a>>,
    id: Option<Text<'a>>,
    method: Option<Text<'a>>,
    params: Option<Text<'a>>,
    result: Option<Text<'a>>,
    error: Option<Text<'a>>,
}

impl<'a> From<Envelope<'a>> for Members<'a> {
    fn from(envelope: Envelope<'a>) -> Self {
        Members {
            jsonrpc: envelope.jsonrpc.map(Text::Serde),
            id: envelope.id.map(Text::Serde),
            method: envelope.method.map(Text::Serde),
            params: envelope.params.map(Text::Serde),
            result: envelope.result.map(Text::Serde),
            error: envelope.error.map(Text::Serde),
        }
    }
}

impl<'a> Members<'a> {
    /// Reads a line in one pass when it is an object written the way `serde_json` writes one
    /// (no whitespace, canonical strings and numbers, no duplicate key at any depth; see
    /// [`agentwire_jsonscan::canonical_end`]): such text is valid by the strict rules of
    /// [`agentwire_schema::parse_json`], and its members' spans are taken as they are.
    /// `None` for anything else, which then goes through the strict parser and its errors:
    /// this path accepts only what that one accepts, and sorts it the same way.
    fn scan(line: &'a [u8]) -> Option<Members<'a>> {
        let text = std::str::from_utf8(line).ok()?;
        let b = text.as_bytes();
        if b.first() != Some(&b'{') {
            return None;
        }
        let mut members = Members {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        };
        let mut keys: [&[u8]; SCAN_MAX_MEMBERS] = [&[]; SCAN_MAX_MEMBERS];
        let mut count = 0;
        let mut i = 1;
        if b.get(i) == Some(&b'}') {
            return (b.len() == 2).then_some(members);
        }
        loop {
            let key_end = agentwire_jsonscan::canonical_string_end(b, i)?;
            let key = &b[i + 1..key_end - 1];
            if count == SCAN_MAX_MEMBERS || keys[..count].contains(&key) {
                return None;
            }
            keys[count] = key;
            count += 1;
            if b.get(key_end) != Some(&b':') {
                return None;
            }
            let start = key_end + 1;
            let end = agentwire_jsonscan::canonical_end(b, start, SCAN_MEMBER_DEPTH)?;
            // A key spelled with an escape is none of these (none of them holds a character
            // that is escaped), so comparing the raw bytes is comparing the names.
            let slot = match key {
                b"jsonrpc" => &mut members.jsonrpc,
                b"id" => &mut members.id,
                b"method" => &mut members.method,
                b"params" => &mut members.params,
                b"result" => &mut members.result,
                b"error" => &mut members.error,
                _ => &mut None,
            };
            *slot = Some(Text::Scanned(text.get(start..end)?));
            match b.get(end) {
                Some(b',') => i = end + 1,
                Some(b'}') if end + 1 == b.len() => return Some(members),
                _ => return None,
            }
        }
    }

    /// A string member's value, without a second parse when it has no escape.
    fn string(text: &str) -> Option<String> {
        let inner = text.strip_prefix('"')?.strip_suffix('"')?;
        if inner.contains('\\') {
            small::<String>(text)
        } else {
            Some(inner.to_owned())
        }
    }

    fn sort(self, structured_params: bool) -> Decoded {
        let id_null = self.id.is_some_and(|raw| raw.get() == "null");
        let id = self
            .id
            .map(Text::get)
            .and_then(|raw| match raw.as_bytes().first() {
                Some(b'"' | b'-' | b'0'..=b'9') => small::<Id>(raw),
                _ => None,
            });
        let is_response = self.method.is_none() && (self.result.is_some() || self.error.is_some());
        let version_ok = self.jsonrpc.map(Text::get).is_some_and(|raw| {
            raw == "\"2.0\"" || small::<String>(raw).is_some_and(|v| v == VERSION)
        });
        if !version_ok {
            return invalid(id, is_response, "\"jsonrpc\" must be \"2.0\"");
        }
        if let Some(method) = self.method {
            let Some(method) = Members::string(method.get()) else {
                return invalid(id, false, "\"method\" must be a string");
            };
            let params = self.params.map(Text::to_raw);
            if structured_params
                && params
                    .as_ref()
                    .is_some_and(|p| !matches!(p.first(), b'{' | b'['))
            {
                return invalid(id, false, "\"params\" must be an object or an array");
            }
            return match (self.id, id) {
                (None, _) => Decoded::Message(Incoming::Notification { method, params }),
                (Some(_), _) if id_null => invalid(None, false, "a request id must not be null"),
                (Some(_), Some(id)) => Decoded::Message(Incoming::Request { id, method, params }),
                (Some(_), None) => {
                    invalid(None, false, "a request id must be a string or a number")
                }
            };
        }
        if !is_response {
            return invalid(
                id,
                false,
                "a message needs \"method\", \"result\" or \"error\"",
            );
        }
        let outcome = match (self.result, self.error) {
            (Some(result), None) => Ok(result.to_raw()),
            (None, Some(error)) => match small::<Value>(error.get()).and_then(error_object) {
                Some(error) => Err(error),
                None => {
                    return invalid(
                        id,
                        true,
                        "\"error\" needs an integer \"code\" and a string \"message\"",
                    );
                }
            },
            _ => {
                return invalid(
                    id,
                    true,
                    "a response has exactly one of \"result\" and \"error\"",
                );
            }
        };
        match (id, outcome) {
            (Some(id), outcome) => Decoded::Message(Incoming::Response { id, outcome }),
            (None, Err(error)) if id_null => Decoded::Message(Incoming::UncorrelatedError(error)),
            _ => invalid(None, true, "a response id must be a string or a number"),
        }
    }
}

fn error_object(value: Value) -> Option<ErrorObject> {
    let Value::Object(mut object) = value else {
        return None;
    };
    let code = object.get("code").and_then(Value::as_i64)?;
    let Some(Value::String(message)) = object.remove("message") else {
        return None;
    };
    Some(ErrorObject {
        code,
        message,
        data: object.remove("data"),
    })
}

fn invalid(id: Option<Id>, is_response: bool, reason: &'static str) -> Decoded {
    Decoded::Invalid(Invalid {
        id,
        is_response,
        reason,
    })
}

pub(crate) const VERSION: &str = "2.0";

/// An outbound request.
#[derive(Debug, Serialize)]
pub(crate) struct OutRequest<'a, P: ?Sized> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) id: &'a Id,
    pub(crate) method: &'a str,
    pub(crate) params: &'a P,
}

impl<'a, P: ?Sized> OutRequest<'a, P> {
    pub(crate) fn new(id: &'a Id, method: &'a str, params: &'a P) -> Self {
        OutRequest {
            jsonrpc: VERSION,
            id,
            method,
            params,
        }
    }
}

/// An outbound notification.
#[derive(Debug, Serialize)]
pub(crate) struct OutNotification<'a, P: ?Sized> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) method: &'a str,
    pub(crate) params: &'a P,
}

impl<'a, P: ?Sized> OutNotification<'a, P> {
    pub(crate) fn new(method: &'a str, params: &'a P) -> Self {
        OutNotification {
            jsonrpc: VERSION,
            method,
            params,
        }
    }
}

/// An outbound response; `id: None` writes `"id": null`.
#[derive(Debug, Serialize)]
pub(crate) struct OutResponse<'a> {
    pub(crate) jsonrpc: &'static str,
    pub(crate) id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<&'a RawJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<&'a ErrorObject>,
}

impl<'a> OutResponse<'a> {
    pub(crate) fn new(id: Option<&'a Id>, outcome: &'a Result<RawJson, ErrorObject>) -> Self {
        let (result, error) = match outcome {
            Ok(result) => (Some(result), None),
            Err(error) => (None, Some(error)),
        };
        OutResponse {
            jsonrpc: VERSION,
            id,
            result,
            error,
        }
    }
}

impl OutResponse<'_> {
    /// Appends the response's compact JSON text (no line feed) to `out`. A result known to be
    /// compact is copied as it is, with the bytes `serde_json` would write around it.
    pub(crate) fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match (self.result, self.error) {
            (Some(result), None) if result.is_compact() => {
                out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
                match self.id {
                    Some(id) => serde_json::to_writer(&mut *out, id)?,
                    None => out.extend_from_slice(b"null"),
                }
                out.extend_from_slice(b",\"result\":");
                out.extend_from_slice(result.get().as_bytes());
                out.push(b'}');
                Ok(())
            }
            _ => serde_json::to_writer(out, self),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The strict parser's path, which `decode` took for every line before the one-pass scan.
    fn strict(line: &[u8], structured: bool) -> Result<Decoded, JsonError> {
        let mut tape = Tape::new();
        agentwire_schema::fast::parse(line, &mut tape)?;
        Ok(Decoder::new(structured).sort(line))
    }

    fn agrees(line: &[u8]) {
        for structured in [true, false] {
            assert_eq!(
                Decoder::new(structured).decode(line),
                strict(line, structured),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn the_one_pass_scan_sorts_every_line_as_the_strict_parser_does() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{}{}}}",
            "[".repeat(130),
            "]".repeat(130)
        );
        let many = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",{}\"params\":{{}}}}",
            (0..20)
                .map(|n| format!("\"x{n}\":{n},"))
                .collect::<String>()
        );
        let lines: Vec<&[u8]> = vec![
            br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":[1,2.5,"x\n",null,true]}}"#,
            br#"{"jsonrpc":"2.0","id":"7","method":"echo","params":[]}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"echo","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"echo"}"#,
            br#"{"jsonrpc":"2.0","id":true,"method":"echo"}"#,
            br#"{"jsonrpc":"2.0","method":"note","params":{"k":"v"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"m","params":3}"#,
            br#"{"jsonrpc":"1.0","id":2,"method":"m"}"#,
            br#"{"id":2,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":5}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"m\u00e9"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"a\"b"}"#,
            br#"{"jsonrpc":"\u0032.0","id":2,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":{"ok":true}}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":null}"#,
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no","data":[1]}}"#,
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":"x","message":"no"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"no"}}"#,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
            br#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"\u0061":1,"a":2}}"#,
            br#"{}"#,
            br#"{"a":1}"#,
            br#"{ "jsonrpc": "2.0", "id": 1, "method": "m" }"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m""#,
            br#"{"jsonrpc":"2.0","id":1e400,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1E5,-0,0.10,1e2]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":["\ud800"]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":["\ud83d\ude00"]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":["caf\u00e9 \/"]}"#,
            br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[\"\xff\"]}",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}".as_bytes(),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"é✓\",\"params\":[\"é✓\"]}".as_bytes(),
            br#"[]"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            br#""str""#,
            deep.as_bytes(),
            many.as_bytes(),
        ];
        for line in lines {
            agrees(line);
        }
    }

    #[test]
    fn a_line_written_by_serde_json_is_read_in_one_pass_and_written_back_as_it_is() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":[1,2.5,"x\n"]}}"#;
        assert!(Members::scan(line).is_some());
        let Ok(Decoded::Message(Incoming::Request { params, .. })) = decode(line, true) else {
            panic!("a request");
        };
        let params = params.unwrap();
        assert!(params.is_compact());
        assert_eq!(
            serde_json::to_string(&params).unwrap(),
            r#"{"a":[1,2.5,"x\n"]}"#
        );
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn serialised_messages_sort_alike_on_both_paths(
            id in prop_oneof![json_value(), Just(Value::from(7))],
            method in any::<String>(),
            params in json_value(),
            kind in 0..4u8,
        ) {
            let message = match kind {
                0 => serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                1 => serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params}),
                2 => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": params}),
                _ => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": params}),
            };
            let line = serde_json::to_vec(&message).unwrap();
            agrees(&line);
            let pretty = serde_json::to_vec_pretty(&message).unwrap();
            agrees(&pretty);
        }
    }
}

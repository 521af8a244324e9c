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
    text: Box<RawValue>,
    /// Known to be compact (written by `serde_json`); read text is checked when written.
    compact: bool,
}

impl RawJson {
    /// The compact JSON text of `value`.
    ///
    /// # Errors
    /// When `value` cannot be serialised (a map with non-string keys, a failing `Serialize`).
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<RawJson> {
        serde_json::value::to_raw_value(value).map(|text| RawJson {
            text,
            compact: true,
        })
    }

    /// `null`.
    pub fn null() -> RawJson {
        RawJson {
            text: RawValue::NULL.to_owned(),
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
            text: raw.to_owned(),
            compact: false,
        }
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
            return self.text.serialize(serializer);
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
            Ok(envelope) => envelope.sort(self.structured_params),
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

fn small<T: DeserializeOwned>(raw: &RawValue) -> Option<T> {
    serde_json::from_str(raw.get()).ok()
}

impl Envelope<'_> {
    fn sort(self, structured_params: bool) -> Decoded {
        let id_null = self.id.is_some_and(|raw| raw.get() == "null");
        let id = self.id.and_then(|raw| match raw.get().as_bytes().first() {
            Some(b'"' | b'-' | b'0'..=b'9') => small::<Id>(raw),
            _ => None,
        });
        let is_response = self.method.is_none() && (self.result.is_some() || self.error.is_some());
        let version_ok = self.jsonrpc.is_some_and(|raw| {
            raw.get() == "\"2.0\"" || small::<String>(raw).is_some_and(|v| v == VERSION)
        });
        if !version_ok {
            return invalid(id, is_response, "\"jsonrpc\" must be \"2.0\"");
        }
        if let Some(method) = self.method {
            let Some(method) = method
                .get()
                .starts_with('"')
                .then(|| small::<String>(method))
                .flatten()
            else {
                return invalid(id, false, "\"method\" must be a string");
            };
            let params = self.params.map(RawJson::borrowed);
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
            (Some(result), None) => Ok(RawJson::borrowed(result)),
            (None, Some(error)) => match small::<Value>(error).and_then(error_object) {
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

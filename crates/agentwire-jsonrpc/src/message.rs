//! JSON-RPC 2.0 messages: ids that keep their JSON type, the decoder that sorts a parsed line
//! into request, notification, response, batch or invalid message, and the outbound encodings.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

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

impl Id {
    fn from_value(value: &Value) -> Option<Id> {
        match value {
            Value::Number(n) => Some(Id::Number(n.clone())),
            Value::String(s) => Some(Id::String(s.clone())),
            _ => None,
        }
    }
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
        params: Option<Value>,
    },
    /// A notification: never answered.
    Notification {
        /// Its method.
        method: String,
        /// Its params, when present.
        params: Option<Value>,
    },
    /// A response to one of our requests.
    Response {
        /// The id of the request it answers.
        id: Id,
        /// `result` or `error`.
        outcome: Result<Value, ErrorObject>,
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

/// What one parsed line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A single valid message.
    Message(Incoming),
    /// A JSON array: a batch, handled per the profile's [`crate::BatchPolicy`].
    Batch(Vec<Value>),
    /// Not a valid JSON-RPC message.
    Invalid(Invalid),
}

/// Sorts one parsed JSON value into a message.
///
/// `structured_params` requires `params`, when present, to be an object or an array (JSON-RPC
/// 2.0); without it any JSON value is accepted (the ChainlessChain App Server allows scalars).
/// Members beyond those of JSON-RPC are ignored.
pub fn decode(value: Value, structured_params: bool) -> Decoded {
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(items) => return Decoded::Batch(items),
        _ => return invalid(None, false, "a message must be a JSON object"),
    };
    let id_member = object.remove("id");
    let id = id_member.as_ref().and_then(Id::from_value);
    let is_response = !object.contains_key("method")
        && (object.contains_key("result") || object.contains_key("error"));
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, is_response, "\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(method) = object.remove("method") {
        let Value::String(method) = method else {
            return invalid(id, false, "\"method\" must be a string");
        };
        let params = object.remove("params");
        if structured_params
            && params
                .as_ref()
                .is_some_and(|p| !matches!(p, Value::Object(_) | Value::Array(_)))
        {
            return invalid(id, false, "\"params\" must be an object or an array");
        }
        return match id_member {
            None => Decoded::Message(Incoming::Notification { method, params }),
            Some(Value::Null) => invalid(None, false, "a request id must not be null"),
            Some(_) => match id {
                Some(id) => Decoded::Message(Incoming::Request { id, method, params }),
                None => invalid(None, false, "a request id must be a string or a number"),
            },
        };
    }
    if is_response {
        return decode_response(id_member, id, object);
    }
    invalid(
        id,
        false,
        "a message needs \"method\", \"result\" or \"error\"",
    )
}

fn decode_response(
    id_member: Option<Value>,
    id: Option<Id>,
    mut object: Map<String, Value>,
) -> Decoded {
    let result = object.remove("result");
    let error = object.remove("error");
    let outcome = match (result, error) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => match error_object(error) {
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
    match (id_member, id, outcome) {
        (_, Some(id), outcome) => Decoded::Message(Incoming::Response { id, outcome }),
        (Some(Value::Null), None, Err(error)) => {
            Decoded::Message(Incoming::UncorrelatedError(error))
        }
        _ => invalid(None, true, "a response id must be a string or a number"),
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

const VERSION: &str = "2.0";

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
    pub(crate) result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<&'a ErrorObject>,
}

impl<'a> OutResponse<'a> {
    pub(crate) fn new(id: Option<&'a Id>, outcome: &'a Result<Value, ErrorObject>) -> Self {
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

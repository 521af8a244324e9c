//! Identifiers that must never be mixed up: the JSON-RPC `id` of a frame, the `interactionId` of
//! a human interaction, the `requestId` idempotency key of a mutation, and the domain UUIDs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whether `text` is a UUID as the protocol accepts it: 8-4-4-4-12 hex in either case with a
/// version nibble 1..8 and a variant nibble 8, 9, a or b, or the nil UUID.
pub fn is_protocol_uuid(text: &str) -> bool {
    const NIL: &str = "00000000-0000-0000-0000-000000000000";
    let bytes = text.as_bytes();
    if bytes.len() != 36 {
        return false;
    }
    for (index, byte) in bytes.iter().enumerate() {
        let dash = matches!(index, 8 | 13 | 18 | 23);
        if dash != (*byte == b'-') || (!dash && !byte.is_ascii_hexdigit()) {
            return false;
        }
    }
    text == NIL
        || (matches!(bytes[14], b'1'..=b'8')
            && matches!(bytes[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B'))
}

/// The text was not a protocol UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a UUID: {0:?}")]
pub struct InvalidUuid(pub String);

impl InvalidUuid {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        "roll.invalid-uuid"
    }
}

macro_rules! uuid_id {
    ($($(#[$meta:meta])* $name:ident;)+) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Checks the text and wraps it; the spelling (case) is kept as sent.
            pub fn new(text: impl Into<String>) -> Result<Self, InvalidUuid> {
                let text = text.into();
                if is_protocol_uuid(&text) { Ok($name(text)) } else { Err(InvalidUuid(text)) }
            }

            /// The wire text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $name::new(text).map_err(serde::de::Error::custom)
            }
        }
    )+};
}

uuid_id! {
    /// Names one human interaction (approval or user input) across re-deliveries; 1.2+.
    InteractionId;
    /// The idempotency key of one mutation.
    RequestId;
    /// A thread.
    ThreadId;
    /// A turn.
    TurnId;
    /// An approval (the domain id inside `approval`).
    ApprovalId;
    /// A runtime process; `sequence` numbers are only comparable within one.
    RuntimeInstanceId;
    /// A durable event.
    EventId;
    /// A tool operation.
    OperationId;
    /// A message stream.
    StreamId;
    /// An attachment.
    AttachmentId;
}

/// The JSON-RPC `id` of one request frame: a string or a number. It correlates a response with
/// its request and nothing else; a re-delivered interaction gets a new one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum JsonRpcId {
    /// A string id, e.g. `"runtime:…"`.
    String(String),
    /// A numeric id.
    Number(serde_json::Number),
}

impl JsonRpcId {
    /// Reads an id from a JSON value (`null` and other types are not request ids).
    pub fn from_value(value: &serde_json::Value) -> Option<JsonRpcId> {
        match value {
            serde_json::Value::String(text) => Some(JsonRpcId::String(text.clone())),
            serde_json::Value::Number(number) => Some(JsonRpcId::Number(number.clone())),
            _ => None,
        }
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            JsonRpcId::String(text) => serde_json::Value::String(text.clone()),
            JsonRpcId::Number(number) => serde_json::Value::Number(number.clone()),
        }
    }
}

impl fmt::Display for JsonRpcId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonRpcId::String(text) => write!(f, "{text:?}"),
            JsonRpcId::Number(number) => write!(f, "{number}"),
        }
    }
}

impl From<i64> for JsonRpcId {
    fn from(number: i64) -> Self {
        JsonRpcId::Number(number.into())
    }
}

impl From<&str> for JsonRpcId {
    fn from(text: &str) -> Self {
        JsonRpcId::String(text.to_owned())
    }
}

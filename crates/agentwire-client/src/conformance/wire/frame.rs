//! The frames the runtime wrote, as scenarios look at them: a `Frame` with its number and its
//! wire length, the answer to a request (`Answer`, its error an `RpcError`), and the event
//! envelope helpers (its type, whether it ends its turn, the durable ones among a turn's).

use std::fmt;

use serde_json::Value;

use super::{EXCERPT_CHARS, cut};
/// One frame the runtime wrote, numbered from 1 in the order it was read.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) index: u64,
    pub(crate) value: Value,
    /// Its length on the wire, line ending excluded.
    pub(crate) bytes: usize,
}

impl Frame {
    pub(crate) fn method(&self) -> Option<&str> {
        self.value.get("method").and_then(Value::as_str)
    }

    fn is_response(&self) -> bool {
        self.value.get("method").is_none()
    }

    pub(super) fn is_response_to(&self, id: u64) -> bool {
        self.is_response() && self.value.get("id").and_then(Value::as_u64) == Some(id)
    }

    pub(crate) fn is_server_request(&self, method: &str) -> bool {
        self.method() == Some(method) && self.value.get("id").is_some()
    }

    pub(crate) fn params(&self) -> &Value {
        self.value.get("params").unwrap_or(&Value::Null)
    }

    /// The envelope of a `runtime.event` notification.
    pub(crate) fn event(&self) -> Option<&Value> {
        (self.method() == Some("runtime.event")).then(|| self.params())
    }

    /// A `runtime.event` of `thread_id`.
    pub(crate) fn event_of(&self, thread_id: &str) -> Option<&Value> {
        self.event().filter(|e| e["threadId"] == thread_id)
    }

    pub(crate) fn id(&self) -> &Value {
        self.value.get("id").unwrap_or(&Value::Null)
    }
}

/// What an event envelope's `event.type` is.
pub(crate) fn event_type(envelope: &Value) -> &str {
    envelope["event"]["type"].as_str().unwrap_or_default()
}

/// Whether an event ends its turn.
pub(crate) fn is_terminal(envelope: &Value) -> bool {
    matches!(
        event_type(envelope),
        "turn.completed" | "turn.cancelled" | "turn.failed"
    )
}

/// An error response.
#[derive(Debug, Clone)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) roll_code: Option<String>,
    pub(crate) value: Value,
}

impl RpcError {
    pub(super) fn from_value(value: Value) -> RpcError {
        RpcError {
            code: value.get("code").and_then(Value::as_i64).unwrap_or(0),
            roll_code: value
                .pointer("/data/rollCode")
                .and_then(Value::as_str)
                .map(str::to_owned),
            value,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.roll_code {
            Some(code) => write!(f, "{code} ({})", self.code)?,
            None => write!(f, "error {}", self.code)?,
        }
        if let Some(message) = self.value.get("message").and_then(Value::as_str) {
            write!(f, ": {}", cut(message, EXCERPT_CHARS))?;
        }
        Ok(())
    }
}

/// The answer to one request.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The frame's number.
    pub(crate) index: u64,
    /// Its length on the wire.
    pub(crate) bytes: usize,
    pub(crate) result: Result<Value, RpcError>,
}

/// The durable envelopes among `events` (1.3+).
pub(crate) fn durable(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["durability"] == "durable")
        .cloned()
        .collect()
}

//! The crate's errors: framing and encoding errors, errors of a call to the other side, and the
//! JSON-RPC error object with the numeric codes this crate sends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `-32700`: the text is not JSON. Defined by JSON-RPC 2.0; this crate never sends it, because
/// answering unparsable input invites a peer to answer back (an error storm).
pub const PARSE_ERROR: i64 = -32700;
/// `-32600`: valid JSON that is not a valid JSON-RPC request.
pub const INVALID_REQUEST: i64 = -32600;
/// `-32601`: no handler for the method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// `-32602`: the params do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// `-32603`: the handler failed (it panicked or was dropped without answering).
pub const INTERNAL_ERROR: i64 = -32603;
/// `-32001`: the inbound request queue is full; `data.retryAfterMs` says when to retry.
pub const OVERLOADED: i64 = -32001;
/// `-32800`: the request was cancelled (sent only on profiles whose cancelled requests still get
/// a response, as in the Agent Client Protocol).
pub const REQUEST_CANCELLED: i64 = -32800;

/// A JSON-RPC error object, as sent and received on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The numeric error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Extra data, when there is any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with `code` and `message` and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32601` for `method`.
    pub fn method_not_found(method: &str) -> Self {
        ErrorObject::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    /// `-32602` with a reason.
    pub fn invalid_params(reason: impl std::fmt::Display) -> Self {
        ErrorObject::new(INVALID_PARAMS, format!("invalid params: {reason}"))
    }

    /// `-32603` with the generic message (details stay in the log, not on the wire).
    pub fn internal() -> Self {
        ErrorObject::new(INTERNAL_ERROR, "internal error")
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

/// Why a message could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The encoded message is longer than the outbound frame limit.
    #[error("outbound message of {length} bytes exceeds the frame limit of {limit} bytes")]
    OutboundTooLarge {
        /// Encoded length (line feed excluded).
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// The encoded message is longer than the profile's maximum line length.
    #[error("outbound line of {length} bytes exceeds the profile's line limit of {limit} bytes")]
    LineTooLong {
        /// Encoded length (line feed excluded).
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// The value could not be serialised.
    #[error("cannot encode message: {0}")]
    Encode(String),
}

impl FrameError {
    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            FrameError::OutboundTooLarge { .. } => "jsonrpc.outbound-too-large",
            FrameError::LineTooLong { .. } => "jsonrpc.line-too-long",
            FrameError::Encode(_) => "jsonrpc.encode",
        }
    }
}

/// Why a request to the other side (or a notification) did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The other side answered with an error object.
    #[error("the peer answered with an error: {0}")]
    Remote(ErrorObject),
    /// No response arrived within the timeout; the request was withdrawn.
    #[error("no response within {timeout_ms} ms")]
    Timeout {
        /// The timeout in milliseconds.
        timeout_ms: u64,
    },
    /// The connection closed before the response arrived (or before the call was sent).
    #[error("the connection is closed")]
    Closed,
    /// The message could not be written (too large, or not serialisable).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// More requests are waiting for a response than the profile allows.
    #[error("{limit} requests are already waiting for a response")]
    TooManyPending {
        /// The limit ([`crate::Profile::max_pending_outbound`]).
        limit: usize,
    },
    /// The result did not deserialise into the expected type.
    #[error("unexpected result: {0}")]
    InvalidResult(String),
    /// The params could not be serialised.
    #[error("cannot encode params: {0}")]
    InvalidParams(String),
}

impl CallError {
    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::Remote(_) => "jsonrpc.remote-error",
            CallError::Timeout { .. } => "jsonrpc.timeout",
            CallError::Closed => "jsonrpc.closed",
            CallError::Frame(error) => error.code(),
            CallError::TooManyPending { .. } => "jsonrpc.too-many-pending",
            CallError::InvalidResult(_) => "jsonrpc.invalid-result",
            CallError::InvalidParams(_) => "jsonrpc.invalid-params",
        }
    }

    /// The remote error object, when the other side answered with one.
    pub fn remote(&self) -> Option<&ErrorObject> {
        match self {
            CallError::Remote(error) => Some(error),
            _ => None,
        }
    }
}

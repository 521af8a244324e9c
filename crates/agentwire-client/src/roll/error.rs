//! What can go wrong talking to a Roll runtime: [`ClientError`] with one stable `client.roll.*`
//! code per variant, the runtime's own error objects ([`RemoteError`]), the protocol violations
//! that close a connection ([`ProtocolViolation`]) and why a connection closed ([`CloseReason`]).

use std::fmt;

use agentwire_jsonrpc::{CallError, ErrorObject};
use agentwire_roll::negotiation::NegotiationError;
use agentwire_roll::parse::ParseError;
use agentwire_roll::{Feature, Method, ProtocolVersion, RollErrorCode, ServerRequestMethod};
use serde_json::Value;

use crate::recovery::RecoveryError;

/// An error object the runtime answered a call with.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    /// The JSON-RPC `error.code` (`-32000` for every Roll domain error, `-32602` for invalid
    /// params).
    pub code: i64,
    /// `error.message`.
    pub message: String,
    /// `error.data.rollCode`, when it names a code of the protocol.
    pub roll_code: Option<RollErrorCode>,
    /// `error.data.retryable` (false when absent).
    pub retryable: bool,
    /// `error.data.details`.
    pub details: Option<Value>,
    /// `error.data` as sent.
    pub data: Option<Value>,
}

impl RemoteError {
    /// Reads the Roll fields out of an error object; data that is not Roll's shape leaves them
    /// empty (`roll_code: None`, `retryable: false`).
    pub fn from_error_object(error: ErrorObject) -> RemoteError {
        let data = error.data;
        let object = data.as_ref().and_then(Value::as_object);
        let roll_code = object
            .and_then(|d| d.get("rollCode"))
            .and_then(Value::as_str)
            .and_then(RollErrorCode::from_wire);
        let retryable = object
            .and_then(|d| d.get("retryable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let details = object.and_then(|d| d.get("details")).cloned();
        RemoteError {
            code: error.code,
            message: error.message,
            roll_code,
            retryable,
            details,
            data,
        }
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.message, self.code)?;
        if let Some(code) = self.roll_code {
            write!(f, ", {code}")?;
        }
        if self.retryable {
            f.write_str(", retryable")?;
        }
        f.write_str(")")
    }
}

/// Something the runtime did that the protocol forbids; the client closes the connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// `initialize` answered a version the client did not offer (or no known version).
    #[error("initialize answered protocol version {answered:?}, which was not offered")]
    VersionNotOffered {
        /// The `protocolVersion` it answered, when it was a string.
        answered: Option<String>,
    },
    /// The `initialize` result breaks the negotiated version's schema.
    #[error("invalid initialize result: {0}")]
    InitializeResult(ParseError),
    /// The `client.capabilities.set` result breaks the negotiated version's schema.
    #[error("invalid client.capabilities.set result: {0}")]
    CapabilityResult(ParseError),
    /// The capability ACK echoes another revision or accepts a method that was not requested.
    #[error("capability ACK: {0}")]
    CapabilityAck(NegotiationError),
    /// An error response with `id: null`: it cannot be correlated with any call.
    #[error("the runtime sent an error response with id null: {message} ({code})")]
    UncorrelatedError {
        /// Its `error.code`.
        code: i64,
        /// Its `error.message`.
        message: String,
    },
    /// The transport's event stream overflowed, so an uncorrelated error may have been missed.
    #[error("{missed} transport events were missed; an uncorrelated error may be among them")]
    TransportEventsLost {
        /// Events missed.
        missed: u64,
    },
}

impl ProtocolViolation {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolViolation::VersionNotOffered { .. } => {
                "client.roll.violation.version-not-offered"
            }
            ProtocolViolation::InitializeResult(_) => "client.roll.violation.initialize-result",
            ProtocolViolation::CapabilityResult(_) => "client.roll.violation.capability-result",
            ProtocolViolation::CapabilityAck(_) => "client.roll.violation.capability-ack",
            ProtocolViolation::UncorrelatedError { .. } => {
                "client.roll.violation.uncorrelated-error"
            }
            ProtocolViolation::TransportEventsLost { .. } => {
                "client.roll.violation.transport-events-lost"
            }
        }
    }
}

/// Why the connection closed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// The runtime broke the protocol.
    #[error("protocol violation: {0}")]
    Violation(ProtocolViolation),
    /// [`crate::roll::RollClient::shutdown`] closed it.
    #[error("the client shut the runtime down")]
    Shutdown,
    /// The transport ended: end of input (the runtime exited or closed its output) or an I/O
    /// error.
    #[error("the connection ended: {0}")]
    Disconnected(String),
}

/// An error of the Roll client. Every variant has a stable [`code`](ClientError::code).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The runtime process could not be started.
    #[error("cannot start the runtime {program}: {message}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        message: String,
    },
    /// A call before `initialize` completed.
    #[error("initialize has not completed on this connection")]
    NotInitialized,
    /// `initialize` a second time (or while the first is running).
    #[error("initialize may be called only once per connection")]
    AlreadyInitialized,
    /// The versions to advertise break the 17 MiB rule or lack a required handler.
    #[error("cannot advertise these versions: {0}")]
    Advertisement(NegotiationError),
    /// The negotiated version does not serve the method; nothing was sent.
    #[error("{method} is not served on protocol {version}")]
    MethodUnavailable {
        /// The method.
        method: Method,
        /// The negotiated version.
        version: ProtocolVersion,
    },
    /// The method needs a feature the runtime did not announce; nothing was sent.
    #[error("{method} needs the runtime feature {feature}, which it did not announce")]
    FeatureUnavailable {
        /// The method.
        method: Method,
        /// The feature.
        feature: Feature,
    },
    /// The client sends this method itself.
    #[error("{method} is sent by the client itself; use {instead}")]
    ReservedMethod {
        /// The method.
        method: Method,
        /// What to call instead.
        instead: &'static str,
    },
    /// The params break the negotiated version's schema; nothing was sent.
    #[error("invalid {method} params: {error}")]
    InvalidParams {
        /// The method.
        method: Method,
        /// What is wrong.
        error: ParseError,
    },
    /// The params could not be serialised.
    #[error("cannot encode {method} params: {message}")]
    EncodeParams {
        /// The method.
        method: Method,
        /// The serialiser's error.
        message: String,
    },
    /// The request is longer than the outbound frame limit; nothing was sent.
    #[error("{method} request of up to {length} bytes exceeds the outbound frame limit of {limit}")]
    OutboundTooLarge {
        /// The method.
        method: Method,
        /// The encoded length, counting the longest request id.
        length: usize,
        /// `min(local budget, limits.maxFrameBytes)`.
        limit: usize,
    },
    /// No response within the request timeout; the call was withdrawn.
    #[error("{method}: no response within {timeout_ms} ms")]
    Timeout {
        /// The method.
        method: Method,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The runtime answered with an error.
    #[error("{method} failed: {error}")]
    Remote {
        /// The method.
        method: Method,
        /// The runtime's error.
        error: Box<RemoteError>,
    },
    /// The result breaks the negotiated version's schema.
    #[error("invalid {method} result: {error}")]
    InvalidResult {
        /// The method.
        method: Method,
        /// What is wrong.
        error: ParseError,
    },
    /// The runtime broke the protocol; the connection was closed.
    #[error("protocol violation: {0}")]
    ProtocolViolation(ProtocolViolation),
    /// The connection is closed.
    #[error("the connection is closed ({reason}){}", stderr_suffix(.stderr_tail))]
    Closed {
        /// Why.
        reason: CloseReason,
        /// The last lines the runtime wrote to stderr, when it is a child process.
        stderr_tail: Option<String>,
    },
    /// The transport refused the call (too many calls waiting, a frame it cannot write).
    #[error("transport: {0}")]
    Transport(CallError),
    /// The negotiated version requires a handler the new set lacks.
    #[error("protocol {version} requires a {method} handler")]
    RequiredHandler {
        /// The negotiated version.
        version: ProtocolVersion,
        /// The handler it requires.
        method: ServerRequestMethod,
    },
    /// The thread is already followed on this connection.
    #[error("thread {thread_id} is already followed on this connection")]
    AlreadyFollowing {
        /// The thread.
        thread_id: String,
    },
    /// Following a thread failed in a way no snapshot repairs.
    #[error("following the thread failed: {0}")]
    Recovery(RecoveryError),
    /// Stopping the runtime process failed.
    #[error("stopping the runtime failed: {0}")]
    Shutdown(String),
}

fn stderr_suffix(tail: &Option<String>) -> String {
    match tail.as_deref().map(str::trim_end) {
        Some(tail) if !tail.is_empty() => format!("; runtime stderr:\n{tail}"),
        _ => String::new(),
    }
}

impl ClientError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::Spawn { .. } => "client.roll.spawn",
            ClientError::NotInitialized => "client.roll.not-initialized",
            ClientError::AlreadyInitialized => "client.roll.already-initialized",
            ClientError::Advertisement(_) => "client.roll.advertisement",
            ClientError::MethodUnavailable { .. } => "client.roll.method-unavailable",
            ClientError::FeatureUnavailable { .. } => "client.roll.feature-unavailable",
            ClientError::ReservedMethod { .. } => "client.roll.reserved-method",
            ClientError::InvalidParams { .. } => "client.roll.invalid-params",
            ClientError::EncodeParams { .. } => "client.roll.encode-params",
            ClientError::OutboundTooLarge { .. } => "client.roll.outbound-too-large",
            ClientError::Timeout { .. } => "client.roll.timeout",
            ClientError::Remote { .. } => "client.roll.remote",
            ClientError::InvalidResult { .. } => "client.roll.invalid-result",
            ClientError::ProtocolViolation(_) => "client.roll.protocol-violation",
            ClientError::Closed { .. } => "client.roll.closed",
            ClientError::Transport(_) => "client.roll.transport",
            ClientError::RequiredHandler { .. } => "client.roll.required-handler",
            ClientError::AlreadyFollowing { .. } => "client.roll.already-following",
            ClientError::Recovery(_) => "client.roll.recovery",
            ClientError::Shutdown(_) => "client.roll.shutdown",
        }
    }

    /// The runtime's error, when it answered with one.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            ClientError::Remote { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }

    /// The numeric JSON-RPC code of the runtime's error.
    pub fn remote_code(&self) -> Option<i64> {
        self.remote().map(|e| e.code)
    }

    /// The runtime's `rollCode`.
    pub fn roll_code(&self) -> Option<RollErrorCode> {
        self.remote().and_then(|e| e.roll_code)
    }

    /// Whether the runtime marked its error retryable.
    pub fn is_retryable(&self) -> bool {
        self.remote().is_some_and(|e| e.retryable)
    }
}

//! Wire error codes (JSON-RPC numbers and Roll `rollCode` names) and this crate's own error type.

use std::fmt;

use crate::version::ProtocolVersion;

/// JSON-RPC: the line was not JSON.
pub const JSONRPC_PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const JSONRPC_INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: unknown method, or a server request the client has no (accepted) handler for.
pub const JSONRPC_METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: params failed validation (Roll adds `data.rollCode = "INVALID_PARAMS"`).
pub const JSONRPC_INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error, or a client handler that threw or returned an invalid result.
pub const JSONRPC_INTERNAL_ERROR: i64 = -32603;
/// Every Roll domain error; the reason is in `data.rollCode`.
pub const ROLL_DOMAIN_ERROR: i64 = -32000;

macro_rules! roll_codes {
    ($($variant:ident = $since:ident, $retry:literal, $meaning:literal;)+) => {
        /// A Roll domain error code (`error.data.rollCode`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[allow(non_camel_case_types)]
        pub enum RollErrorCode { $($variant),+ }

        impl RollErrorCode {
            /// Every code, in registry order.
            pub const ALL: [RollErrorCode; [$(stringify!($variant)),+].len()] = [$(RollErrorCode::$variant),+];

            /// The wire name, e.g. `"THREAD_NOT_FOUND"`.
            pub fn as_str(self) -> &'static str {
                match self { $(RollErrorCode::$variant => stringify!($variant)),+ }
            }

            /// The first version whose registry has the code.
            pub fn since(self) -> ProtocolVersion {
                match self { $(RollErrorCode::$variant => ProtocolVersion::$since),+ }
            }

            /// What the code means.
            pub fn meaning(self) -> &'static str {
                match self { $(RollErrorCode::$variant => $meaning),+ }
            }

            /// Whether a runtime marks the error retryable by default.
            pub fn default_retryable(self) -> bool {
                match self { $(RollErrorCode::$variant => $retry),+ }
            }
        }
    };
}

roll_codes! {
    PROTOCOL_VERSION_UNSUPPORTED = V1_0, false, "no protocol version in common";
    INITIALIZE_REQUIRED = V1_0, false, "a v1 method was called before initialize";
    INVALID_PARAMS = V1_0, false, "bad params, or a requestId reused for another method or params";
    THREAD_NOT_FOUND = V1_0, false, "unknown thread";
    THREAD_BUSY = V1_0, true, "the thread cannot do this now";
    TURN_NOT_FOUND = V1_0, false, "unknown or finished turn";
    TURN_ALREADY_ACTIVE = V1_0, false, "the thread already has an active turn";
    APPROVAL_NOT_FOUND = V1_0, false, "unknown or stale approval";
    CAPABILITY_UNAVAILABLE = V1_0, false, "capability not offered on this connection";
    RUNTIME_CLOSING = V1_0, false, "the runtime is shutting down";
    OUTCOME_UNKNOWN = V1_0, false, "the result of a side effect cannot be confirmed";
    INTERNAL_ERROR = V1_0, true, "unclassified runtime failure";
    CAPABILITY_REVISION_CONFLICT = V1_2, false, "stale revision, or the same revision with a different method set";
    EVENT_CURSOR_EXPIRED = V1_3, false, "the checkpoint (or the log start for null) was trimmed";
    EVENT_CURSOR_GAP = V1_3, false, "the cursor is not part of the thread's contiguous log";
    ATTACHMENT_NOT_FOUND = V1_4, false, "unknown, released, expired or another thread's attachment";
    ATTACHMENT_NOT_COMMITTED = V1_4, false, "turn.start references an uncommitted attachment";
    ATTACHMENT_TOO_LARGE = V1_4, false, "declared or actual bytes over the limit";
    ATTACHMENT_TYPE_UNSUPPORTED = V1_4, false, "media type not allowed or extension mismatch";
    ATTACHMENT_HASH_MISMATCH = V1_4, false, "content hash differs";
    ATTACHMENT_QUOTA_EXCEEDED = V1_4, false, "retained attachments reached maxStagedAttachments";
    ATTACHMENT_UPLOAD_INCOMPLETE = V1_4, false, "chunk total differs from the declared bytes at commit";
    ATTACHMENT_PATH_REJECTED = V1_4, false, "local path not absolute, a symlink, or not a regular file";
}

impl RollErrorCode {
    /// Looks a wire name up (in any version).
    pub fn from_wire(name: &str) -> Option<RollErrorCode> {
        RollErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The JSON-RPC `error.code` a runtime sends with this `rollCode`.
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            RollErrorCode::INVALID_PARAMS => JSONRPC_INVALID_PARAMS,
            _ => ROLL_DOMAIN_ERROR,
        }
    }

    /// Whether `version`'s registry has the code.
    pub fn is_available(self, version: ProtocolVersion) -> bool {
        self.since() <= version
    }
}

impl fmt::Display for RollErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

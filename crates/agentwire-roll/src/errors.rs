//! Wire error codes (JSON-RPC numbers and Roll `rollCode` names) and this crate's own error type.

use crate::registry::wire_enum;

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
        wire_enum! {
            /// A Roll domain error code (`error.data.rollCode`).
            #[allow(non_camel_case_types)]
            RollErrorCode { $($variant = stringify!($variant), since $since),+ }
        }

        impl RollErrorCode {
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
    /// The JSON-RPC `error.code` a runtime sends with this `rollCode`.
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            RollErrorCode::INVALID_PARAMS => JSONRPC_INVALID_PARAMS,
            _ => ROLL_DOMAIN_ERROR,
        }
    }
}

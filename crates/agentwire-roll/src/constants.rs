//! Named limits of the protocol: frames, replay staging, attachments, forms, previews.

/// One MiB.
pub const MIB: u64 = 1024 * 1024;
/// The largest durable event record the runtime stores and replays (16 MiB).
pub const MAX_DURABLE_EVENT_RECORD_BYTES: u64 = 16 * MIB;
/// The smallest inbound frame a client advertising 1.3+ must accept: one durable record plus
/// 1 MiB for the envelope and JSON-RPC metadata (17 MiB).
pub const MIN_CLIENT_INBOUND_FRAME_BYTES_V13: u64 = 17 * MIB;
/// Durable records retained per thread.
pub const MAX_DURABLE_RECORDS_PER_THREAD: u64 = 10_000;
/// Default replay staging window of a client: records.
pub const DEFAULT_REPLAY_BUFFER_RECORDS: u64 = 10_000;
/// Default replay staging window of a client: bytes (32 MiB).
pub const DEFAULT_REPLAY_BUFFER_BYTES: u64 = 32 * MIB;
/// Default inbound frame limit of the runtime (`limits.maxFrameBytes`, 4 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: u64 = 4 * MIB;
/// Default `limits.maxPageSize`.
pub const DEFAULT_MAX_PAGE_SIZE: u64 = 500;
/// Default `limits.idempotencyCacheEntries`.
pub const DEFAULT_IDEMPOTENCY_CACHE_ENTRIES: u64 = 10_000;
/// Default page size of `thread.list` and `thread.snapshot`.
pub const DEFAULT_PAGE_LIMIT: u64 = 100;
/// Largest page size a request may ask for.
pub const MAX_PAGE_LIMIT: u64 = 500;
/// Default local frame budget of the official Node client (17 MiB).
pub const DEFAULT_CLIENT_FRAME_BUDGET_BYTES: u64 = 17 * MIB;

/// Largest attachment (16 MiB).
pub const MAX_ATTACHMENT_BYTES: u64 = 16 * MIB;
/// Largest raw chunk (2 MiB).
pub const MAX_ATTACHMENT_CHUNK_BYTES: u64 = 2 * MIB;
/// Longest base64 chunk text: 2 MiB encoded, which fits a 4 MiB frame.
pub const MAX_ATTACHMENT_CHUNK_BASE64_CHARS: u64 = 2_796_208;
/// Attachments per turn.
pub const MAX_TURN_ATTACHMENTS: usize = 8;
/// Staged plus committed-but-unreleased attachments per runtime.
pub const MAX_STAGED_ATTACHMENTS: usize = 16;
/// Longest attachment file name.
pub const MAX_ATTACHMENT_FILE_NAME_CHARS: usize = 255;
/// Media types an attachment may have.
pub const ATTACHMENT_MEDIA_TYPES: [&str; 7] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
    "text/markdown",
];

/// Server-request methods a client may list in `client.capabilities.set`.
pub const MAX_CAPABILITY_METHODS: usize = 64;
/// Longest server-request method name a client may list.
pub const MAX_CAPABILITY_METHOD_CHARS: usize = 100;

/// Controls per user-input form.
pub const MAX_USER_INPUT_CONTROLS: usize = 16;
/// Longest control or option id.
pub const MAX_USER_INPUT_ID_CHARS: usize = 64;
/// Longest control, option or form label.
pub const MAX_USER_INPUT_LABEL_CHARS: usize = 200;
/// Longest control, option or form description.
pub const MAX_USER_INPUT_DESCRIPTION_CHARS: usize = 500;
/// Options per choice control.
pub const MAX_USER_INPUT_OPTIONS: usize = 50;
/// Longest submitted text.
pub const MAX_USER_INPUT_TEXT_CHARS: usize = 10_000;
/// Longest cancel reason.
pub const MAX_USER_INPUT_CANCEL_REASON_CHARS: usize = 500;

/// Longest approval explanation shown next to a shell command.
pub const MAX_APPROVAL_EXPLANATION_CHARS: usize = 100;
/// Longest path in a file-change preview.
pub const MAX_DIFF_PATH_CHARS: usize = 4_096;
/// Longest unified diff text in a file-change preview.
pub const MAX_DIFF_UNIFIED_CHARS: usize = 20_000;

/// Longest title or model in a recovery snapshot.
pub const MAX_RECOVERY_METADATA_CHARS: usize = 1_024;
/// Longest timestamp in a recovery snapshot.
pub const MAX_RECOVERY_TIMESTAMP_CHARS: usize = 64;
/// Longest event cursor.
pub const MAX_EVENT_CURSOR_CHARS: usize = 128;

/// Longest app-output result (256 KiB of UTF-8).
pub const MAX_APP_OUTPUT_RESULT_BYTES: u64 = 262_144;
/// Longest app-output schema (32 KiB).
pub const MAX_APP_OUTPUT_SCHEMA_BYTES: u64 = 32_768;
/// Longest app-output fallback text.
pub const MAX_APP_OUTPUT_FALLBACK_TEXT_CHARS: usize = 4_096;

/// Counts characters the way the protocol does: JavaScript `length`, i.e. UTF-16 code units.
pub fn js_length(text: &str) -> usize {
    text.encode_utf16().count()
}

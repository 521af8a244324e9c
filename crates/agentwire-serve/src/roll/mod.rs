//! The Roll Runtime Protocol face (1.0 to 1.5): one JSON-RPC connection on the runtime core.
//!
//! Every inbound request is checked against the connection's negotiation state and validated
//! against the negotiated version's schema (the compiled fast path) before it is acted on.
//! Durable events reach the client only after their append committed (they come from the
//! core's publication, which follows the commit); their `rte1:` cursors number the thread's
//! timeline events gap-free and carry an event id derived from the store's identity, so cursors
//! stay valid across restarts of the same store and a forged one is refused. Interactions are
//! sent as server requests in the negotiated version's shape, never before the capability
//! ACK is written, and any answer that cannot be taken fails closed.

mod session;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_jsonrpc::{ErrorObject, Profile};
use agentwire_roll::constants::{DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_PAGE_SIZE};
use agentwire_roll::cursor::Uuid128;
use agentwire_roll::{CursorKey, EventCursor, ProtocolVersion, RollErrorCode, SUPPORTED_VERSIONS};
use agentwire_runtime::{AttachmentStore, Runtime};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite};

pub use session::SessionEnd;

/// Settings of the Roll face.
#[derive(Debug, Clone)]
pub struct RollFaceConfig {
    /// The largest inbound frame (`limits.maxFrameBytes`).
    pub max_frame_bytes: u64,
    /// The largest page a client may ask for (`limits.maxPageSize`).
    pub max_page_size: u64,
    /// `server.name` of the initialize result.
    pub server_name: String,
    /// `server.version`.
    pub server_version: String,
    /// `server.runtimeVersion`.
    pub runtime_version: String,
    /// The versions served (a client's first listed one among them is chosen).
    pub versions: Vec<ProtocolVersion>,
    /// What `thread.capabilities` answers as `manifest`.
    pub manifest: Value,
    /// Where attachments are held (1.4+); without one the `attachments` feature is not
    /// announced and the attachment methods answer `CAPABILITY_UNAVAILABLE`.
    pub attachments: Option<AttachmentStore>,
}

impl Default for RollFaceConfig {
    fn default() -> Self {
        RollFaceConfig {
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
            server_name: "agentwire".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            versions: SUPPORTED_VERSIONS.to_vec(),
            manifest: json!({"agent": "demo"}),
            attachments: None,
        }
    }
}

/// The Roll face of one runtime. Serves any number of connections at once
/// ([`serve`](Self::serve)), each with its own negotiation, attachments to threads and server
/// requests; the runtime's threads, idempotency store and interactions are shared by all.
#[derive(Debug)]
pub struct RollFace {
    runtime: Runtime,
    config: RollFaceConfig,
    key: CursorKey,
    store_id: [u8; 16],
    sequence: AtomicU64,
}

impl RollFace {
    /// The face of `runtime`. Cursor event ids are keyed by the runtime's store identity, so a
    /// runtime restarted on the same store accepts the cursors it gave out before.
    pub fn new(runtime: Runtime, config: RollFaceConfig) -> Arc<RollFace> {
        let store_id = *runtime.store_id().as_bytes();
        let secret = Sha256::new()
            .chain_update(b"agentwire roll cursor key\0")
            .chain_update(store_id)
            .finalize();
        Arc::new(RollFace {
            key: CursorKey::new(&secret),
            store_id,
            sequence: AtomicU64::new(0),
            runtime,
            config,
        })
    }

    /// The runtime served.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The settings.
    pub fn config(&self) -> &RollFaceConfig {
        &self.config
    }

    /// Serves one connection until it closes. Pending server requests are withdrawn when it
    /// ends (their interactions stay pending, and the other connections, or the next one, are
    /// sent them).
    pub async fn serve<R, W>(self: &Arc<Self>, reader: R, writer: W) -> SessionEnd
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        session::run(Arc::clone(self), reader, writer).await
    }

    /// The JSON-RPC profile of a connection: the Roll runtime profile with this face's inbound
    /// frame limit, and a request over the inbound bound answered as a Roll error (retryable
    /// `INTERNAL_ERROR`, `details.retryAfterMs`), the shape every Roll version takes.
    pub fn profile(&self) -> Profile {
        let profile = Profile::roll();
        let retry_after = u64::try_from(profile.retry_after.as_millis()).unwrap_or(u64::MAX);
        let overloaded = roll_error(
            ProtocolVersion::V1_0,
            RollErrorCode::INTERNAL_ERROR,
            "overloaded: too many requests in flight",
            Some(json!({"retryAfterMs": retry_after})),
        );
        profile
            .with_max_inbound_frame(
                usize::try_from(self.config.max_frame_bytes).unwrap_or(usize::MAX),
            )
            .with_overloaded_reply(overloaded)
    }

    /// The event log id of a thread in cursors: derived from the store and the thread, so it
    /// is stable across restarts and differs between threads and stores.
    pub fn event_log_id(&self, thread_id: &str) -> Uuid128 {
        let digest = Sha256::new()
            .chain_update(b"agentwire roll event log\0")
            .chain_update(self.store_id)
            .chain_update(thread_id.as_bytes())
            .finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        id[6] = (id[6] & 0x0f) | 0x80;
        id[8] = (id[8] & 0x3f) | 0x80;
        id
    }

    /// The cursor of the timeline event `ordinal` of a thread.
    pub fn cursor(&self, thread_id: &str, ordinal: u64) -> EventCursor {
        self.key.mint(self.event_log_id(thread_id), ordinal)
    }

    pub(crate) fn key(&self) -> &CursorKey {
        &self.key
    }

    pub(crate) fn next_sequence(&self) -> u64 {
        self.sequence.fetch_add(1, Ordering::Relaxed)
    }
}

/// A Roll error answer: `-32000` (or `-32602` for `INVALID_PARAMS`) with
/// `data: {rollCode, retryable, details?}`. A code the negotiated version's registry does not
/// have is sent as `INTERNAL_ERROR`.
pub(crate) fn roll_error(
    version: ProtocolVersion,
    code: RollErrorCode,
    message: impl Into<String>,
    details: Option<Value>,
) -> ErrorObject {
    let code = if code.is_available(version) {
        code
    } else {
        RollErrorCode::INTERNAL_ERROR
    };
    let mut data = json!({"rollCode": code.as_str(), "retryable": code.default_retryable()});
    if let Some(details) = details {
        data["details"] = details;
    }
    ErrorObject::new(code.jsonrpc_code(), message).with_data(data)
}

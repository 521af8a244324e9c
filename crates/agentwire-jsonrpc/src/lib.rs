//! JSON-RPC 2.0 over NDJSON for agent protocols: a framer with byte limits over any tokio
//! reader and writer, a decoder with per-profile error rules, and a [`Peer`] that sends and
//! serves requests in both directions with concurrent handlers and bounded queues.
//!
//! The crate knows no protocol semantics: a [`Profile`] holds what differs between dialects
//! (batches, `id: null` replies, limits, cancellation), with constructors for the Roll Runtime
//! Protocol ([`Profile::roll`], [`Profile::roll_client`]), the ChainlessChain App Server
//! ([`Profile::chainlesschain_app_server`]) and plain JSON-RPC 2.0 ([`Profile::generic`]).
//! Every inbound line is read with the strict rules of [`agentwire_schema::parse_json`]; params
//! and results stay JSON text ([`RawJson`]) until a handler or caller reads them into its own
//! type. See `docs/jsonrpc.md`.
//!
//! ```no_run
//! use agentwire_jsonrpc::{Handlers, Peer, Profile, transport};
//! use serde_json::{Value, json};
//!
//! # async fn run() -> Result<(), agentwire_jsonrpc::CallError> {
//! let handlers = Handlers::new().on_request("ping", |ctx, _params| async move {
//!     // A handler may ask the other side something before it answers.
//!     let ok: Value = ctx.peer().request("host/confirm", &json!({})).await.map_err(|_| {
//!         agentwire_jsonrpc::ErrorObject::internal()
//!     })?;
//!     Ok(json!({ "pong": ok }))
//! });
//! let (stdin, stdout) = transport::stdio();
//! let peer = Peer::spawn(stdin, stdout, Profile::generic(), handlers);
//! peer.closed().await;
//! # Ok(())
//! # }
//! ```

mod error;
mod framer;
mod handler;
mod message;
mod observe;
mod peer;
mod profile;
pub mod transport;

pub use error::{
    CallError, ErrorObject, FrameError, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, OVERLOADED, PARSE_ERROR, REQUEST_CANCELLED,
};
pub use framer::{DEFAULT_MAX_INBOUND_FRAME, Frame, FrameReader, FrameWriter, encode_line};
pub use handler::{BoxFuture, Handlers, NotificationContext, RequestContext};
pub use message::{Decoded, Decoder, Id, Incoming, Invalid, RawJson, decode};
pub use observe::{Event, Stats};
pub use peer::{EVENT_CAPACITY, NotificationBatch, Peer, PeerBuilder, PendingCall};
pub use profile::{
    BatchPolicy, CHAINLESSCHAIN_MAX_INBOUND_FRAME, CHAINLESSCHAIN_MAX_LINE, CancelNotification,
    DEFAULT_MAX_CONCURRENT_HANDLERS, DEFAULT_MAX_INBOUND_REQUESTS, DEFAULT_MAX_PENDING_OUTBOUND,
    DEFAULT_NOTIFICATION_QUEUE, DEFAULT_RETRY_AFTER, DEFAULT_WRITE_QUEUE_BYTES, IdStyle, Profile,
    ROLL_CLIENT_MAX_INBOUND_FRAME,
};

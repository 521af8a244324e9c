//! Profiles: the settings that make one JSON-RPC dialect differ from another (batches, `id: null`
//! replies, line and frame limits, cancellation rules, queue bounds), with constructors for Roll,
//! the ChainlessChain App Server and a generic JSON-RPC 2.0 peer.

use std::time::Duration;

use crate::framer::DEFAULT_MAX_INBOUND_FRAME;

/// Roll's inbound frame budget for a client that advertises 1.3 or newer (17 MiB).
pub const ROLL_CLIENT_MAX_INBOUND_FRAME: usize = 17 * 1024 * 1024;
/// The largest line the ChainlessChain SDK reads: 65,536 bytes before the `\n`.
pub const CHAINLESSCHAIN_MAX_LINE: usize = 64 * 1024;
/// The largest line the ChainlessChain SDK writes by default (`max_line_length`, 8 MiB).
pub const CHAINLESSCHAIN_MAX_INBOUND_FRAME: usize = 8 * 1024 * 1024;
/// Default bound on inbound requests queued or running at once.
pub const DEFAULT_MAX_INBOUND_REQUESTS: usize = 1024;
/// Default number of inbound request handlers running at once.
pub const DEFAULT_MAX_CONCURRENT_HANDLERS: usize = 256;
/// Default bound on our requests waiting for a response.
pub const DEFAULT_MAX_PENDING_OUTBOUND: usize = 4096;
/// Default bound, in bytes, of encoded messages waiting for the writer.
pub const DEFAULT_WRITE_QUEUE_BYTES: usize = 8 * 1024 * 1024;
/// Default bound on notifications waiting for their (sequential) handler.
pub const DEFAULT_NOTIFICATION_QUEUE: usize = 1024;
/// Default `retryAfterMs` of an overloaded reply.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(100);

/// What to do with a JSON array on input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchPolicy {
    /// Batches are not part of the protocol: answer one `-32600` with `id: null` when the
    /// profile allows `id: null` replies, otherwise drop the line without a reply.
    Reject,
    /// JSON-RPC 2.0 batches: each element is handled as its own message and the responses to
    /// its requests are written together as one array (nothing when it holds only
    /// notifications; one `-32600` for an empty array).
    Process,
}

/// How our requests are given ids.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdStyle {
    /// Numbers counting up from 1.
    Number,
    /// Strings: the prefix followed by a number counting up from 1 (e.g. `"server:1"`).
    String(String),
}

/// A cancel notification: its method and the params member holding the cancelled request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelNotification {
    /// Method name, e.g. `$/cancel_request`.
    pub method: String,
    /// The params member with the request id, e.g. `requestId`.
    pub id_member: String,
}

/// The settings of one JSON-RPC dialect. Every limit has its own error or event.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Profile {
    /// Name used in logs and spans.
    pub name: &'static str,
    /// Inbound frame limit in bytes (line ending excluded); longer lines are skipped and
    /// reported as [`crate::Event::OversizeLine`].
    pub max_inbound_frame: usize,
    /// Outbound frame limit in bytes: a larger message is [`crate::FrameError::OutboundTooLarge`].
    pub max_outbound_frame: usize,
    /// The other side's maximum line length, when it has one smaller than the frame limit:
    /// [`crate::FrameError::LineTooLong`].
    pub max_outbound_line: Option<usize>,
    /// What to do with batches.
    pub batch: BatchPolicy,
    /// Whether `-32600` may be sent with `id: null` when the offending message has no readable
    /// id (JSON-RPC 2.0 and Roll: yes; the ChainlessChain SDK treats `id: null` as fatal).
    pub null_id_replies: bool,
    /// Whether `params` must be an object or an array.
    pub structured_params: bool,
    /// Whether a request cancelled by the other side still gets a response (`-32800`).
    pub respond_to_cancelled: bool,
    /// The notification the other side sends to cancel one of our requests, and that we send
    /// when one of ours is withdrawn (timeout or dropped call). `None`: no such notification.
    pub cancel_notification: Option<CancelNotification>,
    /// Inbound requests queued or running at once; one more gets `-32001` overloaded.
    pub max_inbound_requests: usize,
    /// Inbound request handlers running at once; the rest wait in the queue.
    pub max_concurrent_handlers: usize,
    /// `data.retryAfterMs` of the overloaded reply.
    pub retry_after: Duration,
    /// The dialect's own answer to a request over [`max_inbound_requests`](Self::max_inbound_requests),
    /// sent as is; `None`: `-32001 "overloaded"` with `data: {retryAfterMs}`.
    pub overloaded_reply: Option<crate::ErrorObject>,
    /// Our requests waiting for a response; one more fails with
    /// [`crate::CallError::TooManyPending`].
    pub max_pending_outbound: usize,
    /// Bytes of encoded messages waiting for the writer; senders wait when it is full.
    pub write_queue_bytes: usize,
    /// Notifications waiting for their handler; the reader waits when it is full.
    pub notification_queue: usize,
    /// Default timeout of our requests (`None`: wait until answered or closed).
    pub request_timeout: Option<Duration>,
    /// How our requests are given ids.
    pub id_style: IdStyle,
}

impl Profile {
    /// Plain JSON-RPC 2.0 with the Agent Client Protocol's cancellation: batches processed,
    /// `id: null` replies allowed, `$/cancel_request {requestId}` both ways, and a cancelled
    /// request still answered with `-32800`.
    pub fn generic() -> Self {
        Profile {
            name: "generic",
            max_inbound_frame: DEFAULT_MAX_INBOUND_FRAME,
            max_outbound_frame: DEFAULT_MAX_INBOUND_FRAME,
            max_outbound_line: None,
            batch: BatchPolicy::Process,
            null_id_replies: true,
            structured_params: true,
            respond_to_cancelled: true,
            cancel_notification: Some(CancelNotification {
                method: "$/cancel_request".to_owned(),
                id_member: "requestId".to_owned(),
            }),
            max_inbound_requests: DEFAULT_MAX_INBOUND_REQUESTS,
            max_concurrent_handlers: DEFAULT_MAX_CONCURRENT_HANDLERS,
            retry_after: DEFAULT_RETRY_AFTER,
            overloaded_reply: None,
            max_pending_outbound: DEFAULT_MAX_PENDING_OUTBOUND,
            write_queue_bytes: DEFAULT_WRITE_QUEUE_BYTES,
            notification_queue: DEFAULT_NOTIFICATION_QUEUE,
            request_timeout: None,
            id_style: IdStyle::Number,
        }
    }

    /// The Roll Runtime Protocol, runtime side: 4 MiB inbound (`limits.maxFrameBytes`), 17 MiB
    /// outbound (a 1.3+ client promises to read that much), no batches, `id: null` allowed on
    /// error replies, params objects. A cancelled server request is never answered (the
    /// client must not send a late response); the runtime cancels its own server requests with
    /// a protocol notification keyed by interaction, which the face sends itself.
    pub fn roll() -> Self {
        Profile {
            name: "roll",
            max_inbound_frame: DEFAULT_MAX_INBOUND_FRAME,
            max_outbound_frame: ROLL_CLIENT_MAX_INBOUND_FRAME,
            batch: BatchPolicy::Reject,
            respond_to_cancelled: false,
            cancel_notification: None,
            id_style: IdStyle::String("runtime:".to_owned()),
            ..Profile::generic()
        }
    }

    /// The Roll Runtime Protocol, client side: 17 MiB inbound, 4 MiB outbound (the runtime's
    /// default `maxFrameBytes`; lower it to the negotiated `limits.maxFrameBytes`), the official
    /// client's 30 s request timeout.
    pub fn roll_client() -> Self {
        Profile {
            name: "roll-client",
            max_inbound_frame: ROLL_CLIENT_MAX_INBOUND_FRAME,
            max_outbound_frame: DEFAULT_MAX_INBOUND_FRAME,
            request_timeout: Some(Duration::from_secs(30)),
            id_style: IdStyle::Number,
            ..Profile::roll()
        }
    }

    /// The ChainlessChain App Server, server side: 8 MiB inbound (what the SDK may send), every
    /// outbound line at most 65,536 bytes, never `id: null`, no batches, params of any JSON, no
    /// cancel notification, server request ids `"server:N"`.
    pub fn chainlesschain_app_server() -> Self {
        Profile {
            name: "chainlesschain-app-server",
            max_inbound_frame: CHAINLESSCHAIN_MAX_INBOUND_FRAME,
            max_outbound_frame: CHAINLESSCHAIN_MAX_INBOUND_FRAME,
            max_outbound_line: Some(CHAINLESSCHAIN_MAX_LINE),
            batch: BatchPolicy::Reject,
            null_id_replies: false,
            structured_params: false,
            respond_to_cancelled: false,
            cancel_notification: None,
            id_style: IdStyle::String("server:".to_owned()),
            ..Profile::generic()
        }
    }

    /// The same profile answering a request over the inbound bound with `error` (a dialect
    /// whose errors have a shape of their own).
    #[must_use]
    pub fn with_overloaded_reply(mut self, error: crate::ErrorObject) -> Self {
        self.overloaded_reply = Some(error);
        self
    }

    /// The same profile with another inbound frame limit.
    #[must_use]
    pub fn with_max_inbound_frame(mut self, bytes: usize) -> Self {
        self.max_inbound_frame = bytes;
        self
    }

    /// The same profile with another outbound frame limit.
    #[must_use]
    pub fn with_max_outbound_frame(mut self, bytes: usize) -> Self {
        self.max_outbound_frame = bytes;
        self
    }

    /// The same profile with another bound on queued and running inbound requests.
    #[must_use]
    pub fn with_max_inbound_requests(mut self, requests: usize) -> Self {
        self.max_inbound_requests = requests;
        self
    }

    /// The same profile with another number of concurrently running handlers.
    #[must_use]
    pub fn with_max_concurrent_handlers(mut self, handlers: usize) -> Self {
        self.max_concurrent_handlers = handlers.max(1);
        self
    }

    /// The same profile with another default request timeout.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The same profile with another id style.
    #[must_use]
    pub fn with_id_style(mut self, style: IdStyle) -> Self {
        self.id_style = style;
        self
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile::generic()
    }
}

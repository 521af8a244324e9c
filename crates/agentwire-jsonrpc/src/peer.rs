//! The peer: one connection that sends requests and notifications, routes responses to their
//! waiters, and serves incoming requests through concurrently running handlers, with bounded
//! queues everywhere and exactly one answer per request.
//!
//! Three tasks per connection: the reader (frames → decoder → dispatch; it never awaits a
//! handler), the writer (the only owner of the output, fed by a queue bounded in bytes) and the
//! notification task (notification handlers in arrival order). Each incoming request runs in
//! a task of its own, so a handler that awaits the other side blocks neither reading nor other
//! handlers.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tracing::Instrument as _;

use crate::error::{
    CallError, ErrorObject, FrameError, INVALID_REQUEST, OVERLOADED, REQUEST_CANCELLED,
};
use crate::framer::{Frame, FrameReader};
use crate::handler::{BoxFuture, Handlers, NotificationContext, NotificationFn, RequestContext};
use crate::message::{
    Decoded, Decoder, Id, Incoming, Invalid, OutNotification, OutRequest, OutResponse, RawJson,
};
use crate::observe::{Counters, Event, Stats, bump};
use crate::profile::{BatchPolicy, IdStyle, Profile};

/// Capacity of the event broadcast of one connection.
pub const EVENT_CAPACITY: usize = 256;

/// Size of the writer's output buffer; it is flushed whenever the queue runs empty.
const WRITE_BUFFER: usize = 64 * 1024;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

type Reply = Result<RawJson, ErrorObject>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One JSON-RPC connection. Cheap to clone; every clone is the same connection.
///
/// The connection lives until the other side closes its output, an I/O error, or
/// [`Peer::close`]; dropping every `Peer` handle does not close it (a server keeps serving).
/// Must be created inside a tokio runtime.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("profile", &self.inner.profile.name)
            .field("connection", &self.inner.connection)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

/// Sets a connection up before it starts: profile, handlers and event subscriptions.
#[derive(Debug)]
pub struct PeerBuilder {
    profile: Profile,
    handlers: Handlers,
    events: broadcast::Sender<Event>,
}

impl PeerBuilder {
    /// A connection with `profile` and no handlers.
    pub fn new(profile: Profile) -> Self {
        PeerBuilder {
            profile,
            handlers: Handlers::new(),
            events: broadcast::channel(EVENT_CAPACITY).0,
        }
    }

    /// The handlers of incoming requests and notifications.
    #[must_use]
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// Events from the first line on (subscribing after [`PeerBuilder::spawn`] may miss early
    /// ones).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Starts the connection's tasks over `reader` and `writer`.
    pub fn spawn<R, W>(self, reader: R, writer: W) -> Peer
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let connection = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!(
            "jsonrpc.connection",
            profile = self.profile.name,
            connection
        );
        let (write_tx, write_rx) = mpsc::unbounded_channel();
        let (notify_tx, notify_rx) = mpsc::channel(self.profile.notification_queue.max(1));
        let queue_bytes = self
            .profile
            .write_queue_bytes
            .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        let inner = Arc::new(Inner {
            writes: WriteQueue {
                tx: write_tx,
                bytes: Arc::new(Semaphore::new(queue_bytes)),
                capacity: queue_bytes,
            },
            pending: Mutex::new(HashMap::new()),
            inbound: Mutex::new(HashMap::new()),
            handler_slots: Arc::new(Semaphore::new(self.profile.max_concurrent_handlers.max(1))),
            closed: AtomicBool::new(false),
            closed_tx: watch::channel(false).0,
            next_id: AtomicU64::new(1),
            counters: Counters::default(),
            events: self.events,
            tasks: Mutex::new(Vec::new()),
            handlers: self.handlers,
            max_frame: self.profile.max_inbound_frame,
            profile: self.profile,
            connection,
            span: span.clone(),
        });
        let writer_task = tokio::spawn(
            run_writer(writer, write_rx, Arc::downgrade(&inner)).instrument(span.clone()),
        );
        let notify_task = tokio::spawn(run_notifications(notify_rx).instrument(span.clone()));
        let frames = FrameReader::new(reader, inner.max_frame);
        let reader_task =
            tokio::spawn(run_reader(Arc::clone(&inner), frames, notify_tx).instrument(span));
        lock(&inner.tasks).extend([
            reader_task.abort_handle(),
            notify_task.abort_handle(),
            writer_task.abort_handle(),
        ]);
        Peer { inner }
    }
}

impl Peer {
    /// Starts a connection with `profile` and `handlers` over `reader` and `writer`.
    pub fn spawn<R, W>(reader: R, writer: W, profile: Profile, handlers: Handlers) -> Peer
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        PeerBuilder::new(profile)
            .handlers(handlers)
            .spawn(reader, writer)
    }

    /// Sends a request and waits for its result, deserialised as `R`, within the profile's
    /// request timeout.
    ///
    /// Dropping the future withdraws the request: its waiter is removed (a late response is
    /// counted as unknown) and the profile's cancel notification, if any, is sent.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn request<P, R>(&self, method: &str, params: &P) -> Result<R, CallError>
    where
        P: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        self.request_with(method, params, self.inner.profile.request_timeout)
            .await
    }

    /// [`Peer::request`] with an explicit timeout (`None`: wait until answered or closed).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn request_with<P, R>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<R, CallError>
    where
        P: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let result = self
            .start_request(method, params, timeout)
            .await?
            .answer_raw()
            .await?;
        result
            .parse()
            .map_err(|e| CallError::InvalidResult(e.to_string()))
    }

    /// Sends a request and returns as soon as it is queued on the writer, with its id and a
    /// handle for the answer. Anything sent after this returns is written after the request
    /// (a protocol that must send a request before a related notification needs this), and
    /// the id is known before the answer (to cancel by id). Dropping the handle withdraws the
    /// call as dropping a [`Peer::request`] future does.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn start_request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<PendingCall, CallError> {
        let inner = &self.inner;
        if inner.is_closed() {
            return Err(CallError::Closed);
        }
        let id = inner.next_id();
        let line = inner.encode(&OutRequest::new(&id, method, params))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&inner.pending);
            if pending.len() >= inner.profile.max_pending_outbound {
                return Err(CallError::TooManyPending {
                    limit: inner.profile.max_pending_outbound,
                });
            }
            pending.insert(id.clone(), tx);
        }
        let call = PendingCall {
            guard: PendingGuard {
                inner: Arc::clone(inner),
                id,
                armed: true,
            },
            method: method.to_owned(),
            rx,
            timeout,
            started: Instant::now(),
        };
        // A close that ran before the insert could not see this waiter.
        if inner.is_closed() {
            return Err(CallError::Closed);
        }
        inner.writes.send(line).await?;
        Ok(call)
    }

    /// Sends a notification. It waits only for room in the write queue.
    ///
    /// # Errors
    /// [`CallError::Closed`] or [`CallError::Frame`].
    pub async fn notify<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), CallError> {
        if self.inner.is_closed() {
            return Err(CallError::Closed);
        }
        let line = self.inner.encode(&OutNotification::new(method, params))?;
        self.inner.writes.send(line).await
    }

    /// Sends several notifications of one method, in order, as few writes: for a stream of
    /// them (a replay) this costs one queue operation per buffer instead of one per message.
    /// Each is checked against the outbound limit; one that is over it fails the call before
    /// anything is queued.
    ///
    /// # Errors
    /// [`CallError::Closed`] or [`CallError::Frame`].
    pub async fn notify_batch<P: Serialize>(
        &self,
        method: &str,
        params: &[P],
    ) -> Result<(), CallError> {
        if self.inner.is_closed() {
            return Err(CallError::Closed);
        }
        // Encoded straight into buffers of about the queue's capacity (no line of its own),
        // all of them before any is queued.
        let capacity = self.inner.writes.capacity;
        let mut buffers = Vec::new();
        let mut buffer = Vec::new();
        let mut count = 0u64;
        for (index, p) in params.iter().enumerate() {
            crate::framer::append_line(
                &mut buffer,
                &OutNotification::new(method, p),
                self.inner.profile.max_outbound_frame,
                self.inner.profile.max_outbound_line,
            )?;
            count += 1;
            if buffer.len() >= capacity {
                buffers.push((std::mem::take(&mut buffer), count));
                count = 0;
            } else if count == 1 {
                // Room for the rest at the first one's size, up to a buffer's worth: the buffer
                // is not regrown (and copied) message by message.
                let left = params.len() - index;
                let wanted = buffer
                    .len()
                    .saturating_mul(left)
                    .min(capacity + buffer.len());
                buffer.reserve(wanted - buffer.len());
            }
        }
        if !buffer.is_empty() {
            buffers.push((buffer, count));
        }
        for (buffer, count) in buffers {
            self.inner.writes.send_buffer(buffer, count).await?;
        }
        Ok(())
    }

    /// Cancels an incoming request that is still queued or running: its handler is dropped and,
    /// when the profile says so, it is answered `-32800`. Returns whether it was found.
    pub fn cancel_incoming(&self, id: &Id) -> bool {
        self.inner.cancel_incoming(id)
    }

    /// Incoming requests queued or running.
    pub fn incoming_in_flight(&self) -> usize {
        lock(&self.inner.inbound).len()
    }

    /// Our requests waiting for a response.
    pub fn pending_requests(&self) -> usize {
        lock(&self.inner.pending).len()
    }

    /// The connection's counters.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// The connection's profile.
    pub fn profile(&self) -> &Profile {
        &self.inner.profile
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Waits until the connection is closed.
    pub async fn closed(&self) {
        let mut rx = self.inner.closed_tx.subscribe();
        // The sender lives in `inner`, which `self` keeps alive.
        let _ = rx.wait_for(|closed| *closed).await;
    }

    /// Closes the connection: pending calls fail with [`CallError::Closed`], incoming handlers
    /// are cancelled without an answer, queued output is written and the output is shut down
    /// (the other side reads end of input).
    pub async fn close(&self) {
        self.inner.begin_close("closed locally");
        self.inner.close_writer().await;
    }
}

struct PendingGuard {
    inner: Arc<Inner>,
    id: Id,
    armed: bool,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let withdrawn = lock(&self.inner.pending).remove(&self.id).is_some();
        if withdrawn && !self.inner.is_closed() {
            self.inner.send_cancel(&self.id);
        }
    }
}

/// A request that was sent and awaits its answer ([`Peer::start_request`]).
pub struct PendingCall {
    guard: PendingGuard,
    method: String,
    rx: oneshot::Receiver<Reply>,
    timeout: Option<Duration>,
    started: Instant,
}

impl std::fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCall")
            .field("id", &self.guard.id)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl PendingCall {
    /// The request's id on the wire.
    pub fn id(&self) -> &Id {
        &self.guard.id
    }

    /// Waits for the answer (or the timeout given at the start, or the close).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn answer(self) -> Result<Value, CallError> {
        self.answer_raw()
            .await?
            .to_value()
            .map_err(|e| CallError::InvalidResult(e.to_string()))
    }

    /// [`PendingCall::answer`], with the result as its JSON text.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn answer_raw(mut self) -> Result<RawJson, CallError> {
        let inner = Arc::clone(&self.guard.inner);
        let id = self.guard.id.clone();
        let method = std::mem::take(&mut self.method);
        let rx = &mut self.rx;
        let answer = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::debug!(parent: &inner.span, %id, method, "request timed out");
                    return Err(CallError::Timeout {
                        timeout_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                    });
                }
            },
            None => rx.await,
        };
        self.guard.armed = false;
        let outcome = match answer {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Remote(error)),
            Err(_) => Err(CallError::Closed),
        };
        tracing::debug!(
            parent: &inner.span,
            direction = "out",
            method,
            %id,
            duration_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            outcome = if outcome.is_ok() { "ok" } else { "error" },
            "request finished"
        );
        outcome
    }
}

enum WriteCmd {
    Line(Vec<u8>, Option<OwnedSemaphorePermit>),
    /// Several whole lines in one buffer, and how many.
    Lines(Vec<u8>, u64, OwnedSemaphorePermit),
    Close(oneshot::Sender<()>),
}

struct WriteQueue {
    tx: mpsc::UnboundedSender<WriteCmd>,
    bytes: Arc<Semaphore>,
    capacity: usize,
}

impl WriteQueue {
    /// Queues a line once the byte budget has room for it (a line larger than the whole
    /// budget waits for the queue to be empty).
    async fn send(&self, line: Vec<u8>) -> Result<(), CallError> {
        let wanted = u32::try_from(line.len().min(self.capacity)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.bytes)
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| CallError::Closed)?;
        self.tx
            .send(WriteCmd::Line(line, Some(permit)))
            .map_err(|_| CallError::Closed)
    }

    /// Queues a buffer of `count` encoded lines as one write.
    async fn send_buffer(&self, buffer: Vec<u8>, count: u64) -> Result<(), CallError> {
        let wanted = u32::try_from(buffer.len().min(self.capacity)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.bytes)
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| CallError::Closed)?;
        self.tx
            .send(WriteCmd::Lines(buffer, count, permit))
            .map_err(|_| CallError::Closed)
    }

    /// Queues a line outside the byte budget: only for small replies whose number is bounded
    /// by the in-flight limits (answers of dropped handlers, cancel notifications).
    fn send_now(&self, line: Vec<u8>) {
        let _ = self.tx.send(WriteCmd::Line(line, None));
    }
}

struct InboundEntry {
    abort: Option<AbortHandle>,
    cancelled: Arc<AtomicBool>,
}

struct NotifyJob {
    handler: NotificationFn,
    ctx: NotificationContext,
    params: Option<RawJson>,
}

struct Inner {
    profile: Profile,
    handlers: Handlers,
    max_frame: usize,
    writes: WriteQueue,
    pending: Mutex<HashMap<Id, oneshot::Sender<Reply>>>,
    inbound: Mutex<HashMap<Id, InboundEntry>>,
    handler_slots: Arc<Semaphore>,
    closed: AtomicBool,
    closed_tx: watch::Sender<bool>,
    next_id: AtomicU64,
    counters: Counters,
    events: broadcast::Sender<Event>,
    tasks: Mutex<Vec<AbortHandle>>,
    connection: u64,
    span: tracing::Span,
}

impl Inner {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn next_id(&self) -> Id {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        match &self.profile.id_style {
            IdStyle::Number => Id::from(n),
            IdStyle::String(prefix) => Id::String(format!("{prefix}{n}")),
        }
    }

    fn encode<T: Serialize + ?Sized>(&self, message: &T) -> Result<Vec<u8>, FrameError> {
        crate::framer::encode_line(
            message,
            self.profile.max_outbound_frame,
            self.profile.max_outbound_line,
        )
    }

    fn event(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Encodes a response, falling back to a `-32603` when the result is over a limit, so the
    /// request is still answered exactly once.
    fn encode_response(&self, id: Option<&Id>, outcome: &Reply) -> Vec<u8> {
        match self.encode(&OutResponse::new(id, outcome)) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(parent: &self.span, code = error.code(), %error, "response cannot be sent; answering -32603");
                let fallback = Err(ErrorObject::internal()
                    .with_data(serde_json::json!({ "reason": error.code() })));
                let mut line = Vec::with_capacity(128);
                // A small, fixed-shape error object always serialises.
                let _ = serde_json::to_writer(&mut line, &OutResponse::new(id, &fallback));
                line.push(b'\n');
                line
            }
        }
    }

    fn send_cancel(&self, id: &Id) {
        let Some(cancel) = &self.profile.cancel_notification else {
            return;
        };
        let mut params = serde_json::Map::new();
        params.insert(
            cancel.id_member.clone(),
            serde_json::to_value(id).unwrap_or(Value::Null),
        );
        if let Ok(line) = self.encode(&OutNotification::new(
            &cancel.method,
            &Value::Object(params),
        )) {
            self.writes.send_now(line);
        }
    }

    fn cancel_incoming(&self, id: &Id) -> bool {
        let entry = lock(&self.inbound).remove(id);
        match entry {
            Some(entry) => {
                entry.cancelled.store(true, Ordering::SeqCst);
                if let Some(abort) = entry.abort {
                    abort.abort();
                }
                tracing::debug!(parent: &self.span, %id, "incoming request cancelled");
                true
            }
            None => false,
        }
    }

    /// Marks the connection closed, fails every pending call and cancels every incoming
    /// handler. Returns false when it was already closed.
    fn begin_close(&self, reason: &str) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        let pending = std::mem::take(&mut *lock(&self.pending));
        let failed = pending.len();
        drop(pending);
        let inbound = std::mem::take(&mut *lock(&self.inbound));
        let cancelled = inbound.len();
        for entry in inbound.into_values() {
            if let Some(abort) = entry.abort {
                abort.abort();
            }
        }
        // The reader stops; the notification task finishes the notifications already read
        // (its queue closes with the reader) and the writer drains what is queued.
        if let Some(reader) = lock(&self.tasks).first() {
            reader.abort();
        }
        tracing::info!(parent: &self.span, reason, failed_calls = failed, cancelled_handlers = cancelled, "connection closed");
        self.event(Event::Closed {
            reason: reason.to_owned(),
        });
        self.closed_tx.send_replace(true);
        true
    }

    async fn close_writer(&self) {
        let (ack_tx, ack_rx) = oneshot::channel();
        if self.writes.tx.send(WriteCmd::Close(ack_tx)).is_ok() {
            let _ = ack_rx.await;
        }
    }

    async fn dispatch(self: &Arc<Self>, decoded: Decoded, notify: &mpsc::Sender<NotifyJob>) {
        match decoded {
            Decoded::Message(message) => self.handle_message(message, &Sink::Direct, notify).await,
            Decoded::Invalid(invalid) => self.handle_invalid(invalid, &Sink::Direct).await,
            Decoded::Batch(items) => self.handle_batch(items, notify).await,
        }
    }

    async fn handle_message(
        self: &Arc<Self>,
        message: Incoming,
        sink: &Sink,
        notify: &mpsc::Sender<NotifyJob>,
    ) {
        match message {
            Incoming::Request { id, method, params } => {
                bump(&self.counters.requests_received, 1);
                self.start_request(id, method, params, sink).await;
            }
            Incoming::Notification { method, params } => {
                bump(&self.counters.notifications_received, 1);
                self.handle_notification(method, params, notify).await;
            }
            Incoming::Response { id, outcome } => {
                bump(&self.counters.responses_received, 1);
                let waiter = lock(&self.pending).remove(&id);
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(outcome);
                    }
                    None => {
                        bump(&self.counters.unknown_responses, 1);
                        tracing::debug!(parent: &self.span, %id, "response to no waiting request");
                        self.event(Event::UnknownResponse { id });
                    }
                }
            }
            Incoming::UncorrelatedError(error) => {
                bump(&self.counters.responses_received, 1);
                tracing::warn!(parent: &self.span, code = error.code, message = %error.message, "error response with id null");
                self.event(Event::UncorrelatedError(error));
            }
        }
    }

    async fn handle_notification(
        self: &Arc<Self>,
        method: String,
        params: Option<RawJson>,
        notify: &mpsc::Sender<NotifyJob>,
    ) {
        if let Some(cancel) = &self.profile.cancel_notification
            && cancel.method == method
        {
            let id = params
                .as_ref()
                .and_then(|p| p.to_value().ok())
                .and_then(|p| p.get(&cancel.id_member).cloned())
                .and_then(|id| serde_json::from_value::<Id>(id).ok());
            match id {
                Some(id) => {
                    self.cancel_incoming(&id);
                }
                None => {
                    tracing::debug!(parent: &self.span, "cancel notification without a usable id")
                }
            }
            return;
        }
        let Some(handler) = self.handlers.notification(&method).cloned() else {
            tracing::debug!(parent: &self.span, method, "notification without a handler");
            return;
        };
        let job = NotifyJob {
            handler,
            ctx: NotificationContext {
                peer: Peer {
                    inner: Arc::clone(self),
                },
                method: Arc::from(method),
            },
            params,
        };
        // A full queue stops the reader: backpressure on the other side's output.
        let _ = notify.send(job).await;
    }

    async fn handle_invalid(&self, invalid: Invalid, sink: &Sink) {
        bump(&self.counters.invalid_messages, 1);
        let reply = !invalid.is_response && (invalid.id.is_some() || self.profile.null_id_replies);
        tracing::debug!(parent: &self.span, reason = invalid.reason, replied = reply, "invalid message");
        if reply {
            let outcome = Err(ErrorObject::new(INVALID_REQUEST, invalid.reason));
            self.reply(sink, invalid.id.as_ref(), &outcome).await;
        }
        self.event(Event::InvalidMessage {
            id: invalid.id,
            reason: invalid.reason,
            replied: reply,
        });
    }

    async fn handle_batch(self: &Arc<Self>, items: Vec<RawJson>, notify: &mpsc::Sender<NotifyJob>) {
        if self.profile.batch == BatchPolicy::Reject || items.is_empty() {
            bump(&self.counters.invalid_messages, 1);
            let replied = self.profile.null_id_replies;
            if replied {
                let reason = if items.is_empty() {
                    "an empty batch"
                } else {
                    "batches are not supported"
                };
                self.reply(
                    &Sink::Direct,
                    None,
                    &Err(ErrorObject::new(INVALID_REQUEST, reason)),
                )
                .await;
            }
            tracing::debug!(parent: &self.span, len = items.len(), replied, "batch rejected");
            self.event(Event::BatchRejected {
                len: items.len(),
                replied,
            });
            return;
        }
        let collector = Arc::new(BatchCollector {
            inner: Arc::downgrade(self),
            state: Mutex::new(BatchState {
                remaining: 1,
                lines: Vec::new(),
            }),
        });
        let sink = Sink::Batch(Arc::clone(&collector));
        let decoder = Decoder::new(self.profile.structured_params);
        for item in items {
            match decoder.sort(item.get().as_bytes()) {
                Decoded::Message(message) => self.handle_message(message, &sink, notify).await,
                Decoded::Invalid(invalid) => self.handle_invalid(invalid, &sink).await,
                Decoded::Batch(_) => {
                    let invalid = Invalid {
                        id: None,
                        is_response: false,
                        reason: "a batch inside a batch",
                    };
                    self.handle_invalid(invalid, &sink).await;
                }
            }
        }
        collector.done(None);
    }

    /// Answers from the reader itself (invalid, unknown method, overloaded).
    async fn reply(&self, sink: &Sink, id: Option<&Id>, outcome: &Reply) {
        let line = self.encode_response(id, outcome);
        match sink {
            Sink::Direct => {
                let _ = self.writes.send(line).await;
            }
            Sink::Batch(collector) => {
                collector.expect();
                collector.done(Some(line));
            }
        }
    }

    async fn start_request(
        self: &Arc<Self>,
        id: Id,
        method: String,
        params: Option<RawJson>,
        sink: &Sink,
    ) {
        let admitted = {
            let inbound = lock(&self.inbound);
            if inbound.len() >= self.profile.max_inbound_requests {
                Err(None)
            } else if inbound.contains_key(&id) {
                Err(Some("request id already in use"))
            } else {
                Ok(())
            }
        };
        match admitted {
            Ok(()) => {}
            Err(None) => {
                bump(&self.counters.overloaded_replies, 1);
                tracing::warn!(parent: &self.span, %id, method, "inbound queue full; answering overloaded");
                let retry_after =
                    u64::try_from(self.profile.retry_after.as_millis()).unwrap_or(u64::MAX);
                let outcome = Err(ErrorObject::new(OVERLOADED, "overloaded")
                    .with_data(serde_json::json!({ "retryAfterMs": retry_after })));
                self.reply(sink, Some(&id), &outcome).await;
                self.event(Event::Overloaded { id });
                return;
            }
            Err(Some(reason)) => {
                bump(&self.counters.invalid_messages, 1);
                self.reply(
                    sink,
                    Some(&id),
                    &Err(ErrorObject::new(INVALID_REQUEST, reason)),
                )
                .await;
                self.event(Event::InvalidMessage {
                    id: Some(id),
                    reason,
                    replied: true,
                });
                return;
            }
        }
        let exclusive = self.handlers.is_exclusive(&method);
        let Some(handler) = self.handlers.request(&method).cloned() else {
            tracing::debug!(parent: &self.span, %id, method, "no handler");
            self.reply(
                sink,
                Some(&id),
                &Err(ErrorObject::method_not_found(&method)),
            )
            .await;
            return;
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        lock(&self.inbound).insert(
            id.clone(),
            InboundEntry {
                abort: None,
                cancelled: Arc::clone(&cancelled),
            },
        );
        if let Sink::Batch(collector) = sink {
            collector.expect();
        }
        let method: Arc<str> = Arc::from(method);
        let span = tracing::debug_span!(parent: &self.span, "jsonrpc.request", direction = "in", method = %method, id = %id);
        let after_answer: crate::handler::AfterAnswer = Arc::default();
        let responder = Responder {
            inner: Arc::clone(self),
            id: id.clone(),
            sink: sink.clone(),
            cancelled,
            done: false,
            started: Instant::now(),
            after_answer: Arc::clone(&after_answer),
        };
        let ctx = RequestContext {
            peer: Peer {
                inner: Arc::clone(self),
            },
            id: id.clone(),
            method,
            after_answer,
        };
        let slots = Arc::clone(&self.handler_slots);
        let task = tokio::spawn(
            async move {
                let responder = responder;
                let Ok(_slot) = slots.acquire_owned().await else {
                    return;
                };
                let outcome = match CatchUnwind(handler(ctx, params)).await {
                    Ok(outcome) => outcome,
                    Err(()) => {
                        tracing::error!("request handler panicked; answering -32603");
                        Err(ErrorObject::internal())
                    }
                };
                responder.finish(outcome).await;
            }
            .instrument(span),
        );
        if let Some(entry) = lock(&self.inbound).get_mut(&id) {
            entry.abort = Some(task.abort_handle());
        }
        if exclusive {
            // Nothing read after this request is dispatched before it is answered.
            let _ = task.await;
        }
    }
}

/// Where a request's answer goes: the writer, or the array of a batch.
#[derive(Clone)]
enum Sink {
    Direct,
    Batch(Arc<BatchCollector>),
}

struct BatchState {
    /// Answers still expected, plus one until every element has been dispatched.
    remaining: usize,
    lines: Vec<Vec<u8>>,
}

struct BatchCollector {
    inner: Weak<Inner>,
    state: Mutex<BatchState>,
}

impl BatchCollector {
    fn expect(&self) {
        lock(&self.state).remaining += 1;
    }

    /// One expected answer arrived (`None`: the element is not answered, e.g. cancelled).
    fn done(&self, line: Option<Vec<u8>>) {
        let lines = {
            let mut state = lock(&self.state);
            if let Some(line) = line {
                state.lines.push(line);
            }
            state.remaining = state.remaining.saturating_sub(1);
            if state.remaining > 0 {
                return;
            }
            std::mem::take(&mut state.lines)
        };
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        if lines.is_empty() || inner.is_closed() {
            return;
        }
        let mut array = Vec::with_capacity(lines.iter().map(Vec::len).sum::<usize>() + 2);
        array.push(b'[');
        for (index, line) in lines.iter().enumerate() {
            if index > 0 {
                array.push(b',');
            }
            array.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
        }
        array.push(b']');
        let fits = array.len() <= inner.profile.max_outbound_frame
            && inner
                .profile
                .max_outbound_line
                .is_none_or(|limit| array.len() <= limit);
        if fits {
            array.push(b'\n');
            inner.writes.send_now(array);
        } else {
            // Each answer fits on its own line; only their sum does not.
            tracing::warn!(parent: &inner.span, "batch answer over the line limit; writing its answers one per line");
            for line in lines {
                inner.writes.send_now(line);
            }
        }
    }
}

/// Answers one incoming request exactly once: with the handler's outcome, or, when dropped
/// first (cancelled, aborted, or its task torn down), per the profile.
struct Responder {
    inner: Arc<Inner>,
    id: Id,
    sink: Sink,
    cancelled: Arc<AtomicBool>,
    done: bool,
    started: Instant,
    after_answer: crate::handler::AfterAnswer,
}

impl Responder {
    fn run_after_answer(&self) {
        let hook = self
            .after_answer
            .lock()
            .ok()
            .and_then(|mut slot| slot.take());
        if let Some(hook) = hook {
            hook();
        }
    }

    async fn finish(mut self, outcome: Reply) {
        let line = self.inner.encode_response(Some(&self.id), &outcome);
        match &self.sink {
            Sink::Direct => {
                let wanted =
                    u32::try_from(line.len().min(self.inner.writes.capacity)).unwrap_or(u32::MAX);
                let Ok(permit) = Arc::clone(&self.inner.writes.bytes)
                    .acquire_many_owned(wanted)
                    .await
                else {
                    return;
                };
                // From here nothing awaits, so a cancel cannot interleave with the answer.
                if self.inner.is_closed() || self.cancelled.load(Ordering::SeqCst) {
                    return;
                }
                self.done = true;
                lock(&self.inner.inbound).remove(&self.id);
                let _ = self
                    .inner
                    .writes
                    .tx
                    .send(WriteCmd::Line(line, Some(permit)));
                self.run_after_answer();
            }
            Sink::Batch(collector) => {
                if self.inner.is_closed() || self.cancelled.load(Ordering::SeqCst) {
                    return;
                }
                self.done = true;
                lock(&self.inner.inbound).remove(&self.id);
                collector.done(Some(line));
                self.run_after_answer();
            }
        }
        tracing::debug!(
            duration_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            outcome = match &outcome {
                Ok(_) => "ok",
                Err(_) => "error",
            },
            "request answered"
        );
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        lock(&self.inner.inbound).remove(&self.id);
        let outcome = if self.inner.is_closed() {
            None
        } else if self.cancelled.load(Ordering::SeqCst) {
            tracing::debug!(outcome = "cancelled", "request cancelled");
            self.inner
                .profile
                .respond_to_cancelled
                .then(|| Err(ErrorObject::new(REQUEST_CANCELLED, "request cancelled")))
        } else {
            tracing::error!(
                outcome = "dropped",
                "request handler dropped without answering; answering -32603"
            );
            Some(Err(ErrorObject::internal()))
        };
        let line = outcome.map(|outcome| self.inner.encode_response(Some(&self.id), &outcome));
        match &self.sink {
            Sink::Direct => {
                if let Some(line) = line {
                    self.inner.writes.send_now(line);
                }
            }
            Sink::Batch(collector) => collector.done(line),
        }
    }
}

/// Runs a handler's future, turning a panic into `Err(())` so the request is still answered.
struct CatchUnwind<T>(BoxFuture<T>);

impl<T> Future for CatchUnwind<T> {
    type Output = Result<T, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

async fn run_reader<R: AsyncRead + Unpin>(
    inner: Arc<Inner>,
    mut frames: FrameReader<R>,
    notify: mpsc::Sender<NotifyJob>,
) {
    let mut decoder = Decoder::new(inner.profile.structured_params);
    let reason = loop {
        let decoded = match frames.next_frame().await {
            Ok(None) => break "end of input".to_owned(),
            Err(error) => break format!("read error: {error}"),
            Ok(Some(Frame::Oversize { length })) => {
                bump(&inner.counters.lines_read, 1);
                bump(&inner.counters.bytes_read, length);
                bump(&inner.counters.oversize_lines, 1);
                tracing::warn!(
                    length,
                    limit = inner.max_frame,
                    "line over the frame limit skipped"
                );
                inner.event(Event::OversizeLine {
                    length,
                    limit: inner.max_frame,
                });
                continue;
            }
            Ok(Some(Frame::Line(bytes))) => {
                bump(&inner.counters.lines_read, 1);
                bump(&inner.counters.bytes_read, bytes.len() as u64);
                match decoder.decode(bytes) {
                    Ok(decoded) => decoded,
                    Err(error) => {
                        bump(&inner.counters.unparsable_lines, 1);
                        tracing::warn!(length = bytes.len(), code = error.kind.code(), %error, "line is not JSON; dropped without a reply");
                        inner.event(Event::UnparsableLine {
                            length: bytes.len(),
                            error,
                        });
                        continue;
                    }
                }
            }
        };
        let request = matches!(decoded, Decoded::Message(Incoming::Request { .. }));
        inner.dispatch(decoded, &notify).await;
        if request {
            // Let the request's handler (and the writer after it) run before the next line is
            // read, so answers stream out as their requests arrive instead of after the whole
            // buffer of input: the other side works on the first answers meanwhile.
            tokio::task::yield_now().await;
        }
    };
    drop(notify);
    inner.begin_close(&reason);
    inner.close_writer().await;
}

async fn run_writer<W: AsyncWrite + Unpin>(
    writer: W,
    mut rx: mpsc::UnboundedReceiver<WriteCmd>,
    inner: Weak<Inner>,
) {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER, writer);
    let (mut lines, mut bytes) = (0u64, 0u64);
    let result: std::io::Result<Option<oneshot::Sender<()>>> = async {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                WriteCmd::Line(line, permit) => {
                    out.write_all(&line).await?;
                    lines += 1;
                    bytes += line.len() as u64;
                    drop(permit);
                }
                WriteCmd::Lines(buffer, count, permit) => {
                    out.write_all(&buffer).await?;
                    lines += count;
                    bytes += buffer.len() as u64;
                    drop(permit);
                }
                WriteCmd::Close(ack) => {
                    out.flush().await?;
                    let _ = out.shutdown().await;
                    return Ok(Some(ack));
                }
            }
            if rx.is_empty() {
                out.flush().await?;
                if let Some(inner) = inner.upgrade() {
                    bump(&inner.counters.lines_written, lines);
                    bump(&inner.counters.bytes_written, bytes);
                }
                (lines, bytes) = (0, 0);
            }
        }
        out.flush().await?;
        Ok(None)
    }
    .await;
    if let Some(inner) = inner.upgrade() {
        bump(&inner.counters.lines_written, lines);
        bump(&inner.counters.bytes_written, bytes);
        match &result {
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "write failed; closing the connection");
                inner.begin_close(&format!("write error: {error}"));
            }
        }
    }
    // Unblock every sender still waiting for queue room.
    rx.close();
    if let Ok(Some(ack)) = result {
        let _ = ack.send(());
    }
}

async fn run_notifications(mut rx: mpsc::Receiver<NotifyJob>) {
    while let Some(job) = rx.recv().await {
        let method = Arc::clone(&job.ctx.method);
        if CatchUnwind((job.handler)(job.ctx, job.params))
            .await
            .is_err()
        {
            tracing::error!(method = %method, "notification handler panicked");
        }
    }
}

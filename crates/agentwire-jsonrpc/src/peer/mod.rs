//! The peer: one connection that sends requests and notifications, routes responses to their
//! waiters, and serves incoming requests through concurrently running handlers, with bounded
//! queues everywhere and exactly one answer per request.
//!
//! Three tasks per connection: the reader (frames → decoder → dispatch; it never waits for a
//! handler), the writer (the only owner of the output, draining a buffer bounded in bytes) and
//! the notification task (notification handlers in arrival order). The reader polls each
//! incoming request's handler once, inline: one that completes is answered into the output
//! buffer, which the writer is woken for once no complete line is left to read; one that waits
//! (for the other side, a timer, a lock) moves to a task of its own, so it blocks neither
//! reading nor other handlers.
//!
//! This module holds the connection's handle ([`Peer`], [`PeerBuilder`]), its notifications
//! out, and the state its tasks share (`Inner`: limits, waiters, in-flight requests, closing).
//! `calls` holds our requests and their waiters, `writer` the write queue and the writer task,
//! `reader` the reader task and the dispatch of what it reads (with the notification task and
//! batch answers), and `incoming` each incoming request's admission, handler task and answer, and `batch` the
//! notification batches (many notifications of one method queued as few writes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tracing::Instrument as _;

use crate::error::{CallError, ErrorObject, FrameError};
use crate::framer::FrameReader;
use crate::handler::Handlers;
use crate::message::{Id, OutNotification, OutResponse, RawJson};
use crate::observe::{Counters, Event, Stats};
use crate::profile::{IdStyle, Profile};

/// Capacity of the event broadcast of one connection.
pub const EVENT_CAPACITY: usize = 256;

mod batch;
mod calls;
mod incoming;
mod reader;
mod writer;

pub use batch::NotificationBatch;
pub use calls::PendingCall;
use reader::{run_notifications, run_reader};
use writer::{WriteQueue, run_writer};

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
        let (notify_tx, notify_rx) = mpsc::channel(self.profile.notification_queue.max(1));
        let queue_bytes = self
            .profile
            .write_queue_bytes
            .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        let writes = Arc::new(WriteQueue::new(queue_bytes));
        let inner = Arc::new(Inner {
            writes: Arc::clone(&writes),
            pending: Mutex::new(HashMap::new()),
            inbound: Mutex::new(HashMap::new()),
            handler_slots: Arc::new(Semaphore::new(self.profile.max_concurrent_handlers.max(1))),
            closed: AtomicBool::new(false),
            closed_tx: watch::channel(false).0,
            next_id: AtomicU64::new(1),
            counters: Counters::default(),
            events: self.events,
            tasks: Mutex::new(Vec::new()),
            max_frame: self.profile.max_inbound_frame,
            profile: self.profile,
            connection,
            span: span.clone(),
        });
        let writer_task = tokio::spawn(
            run_writer(writer, writes, Arc::downgrade(&inner)).instrument(span.clone()),
        );
        let notify_task = tokio::spawn(run_notifications(notify_rx).instrument(span.clone()));
        let frames = FrameReader::new(reader, inner.max_frame);
        let reader_task = tokio::spawn(
            run_reader(Arc::clone(&inner), self.handlers, frames, notify_tx).instrument(span),
        );
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

    /// Waits until the connection is closed and what was queued before is written (or the
    /// output failed).
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

struct InboundEntry {
    abort: Option<AbortHandle>,
    cancelled: Arc<AtomicBool>,
}

struct Inner {
    profile: Profile,
    max_frame: usize,
    writes: Arc<WriteQueue>,
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
        let mut line = Vec::with_capacity(match outcome {
            Ok(result) => result.get().len() + 48,
            Err(_) => 128,
        });
        let written = OutResponse::new(id, outcome)
            .write(&mut line)
            .map_err(|e| FrameError::Encode(e.to_string()))
            .and_then(|()| {
                crate::framer::check_line(
                    &line,
                    self.profile.max_outbound_frame,
                    self.profile.max_outbound_line,
                )
            });
        match written {
            Ok(()) => {
                line.push(b'\n');
                line
            }
            Err(error) => {
                tracing::error!(parent: &self.span, code = error.code(), %error, "response cannot be sent; answering -32603");
                let fallback = Err(ErrorObject::internal()
                    .with_data(serde_json::json!({ "reason": error.code() })));
                line.clear();
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
        if let Some(reader) = lock(&self.tasks).first()
            && tokio::task::try_id() != Some(reader.id())
        {
            // (The reader closing at end of input goes on to close the writer.)
            reader.abort();
        }
        tracing::info!(parent: &self.span, reason, failed_calls = failed, cancelled_handlers = cancelled, "connection closed");
        self.event(Event::Closed {
            reason: reason.to_owned(),
        });
        true
    }

    async fn close_writer(&self) {
        let (ack_tx, ack_rx) = oneshot::channel();
        if self.writes.close(ack_tx) {
            let _ = ack_rx.await;
        }
        // Only now: a server that ends when its connection does has written every answer.
        self.closed_tx.send_replace(true);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nothing can queue a line any more: the writer writes what is queued and ends.
        self.writes.end();
    }
}

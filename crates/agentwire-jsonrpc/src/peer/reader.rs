//! The reader task: frames → decoder → dispatch, never waiting for a handler (each is polled
//! once inline and moved to a task when it waits). Responses go to
//! their waiters, notifications to the notification task (which runs their handlers in arrival
//! order), requests to `incoming`, and the answers of a batch are collected into one array.

use std::sync::{Arc, Mutex, Weak};

use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use crate::error::{ErrorObject, INVALID_REQUEST};
use crate::framer::{Frame, FrameReader};
use crate::handler::{Handlers, NotificationContext, NotificationFn};
use crate::message::{Decoded, Decoder, Id, Incoming, Invalid, RawJson};
use crate::observe::{Event, bump};
use crate::profile::BatchPolicy;

use super::incoming::CatchUnwind;
use super::{Inner, Peer, Reply, lock};

/// Where the reader sends what it read: the connection's handlers (the reader owns them, so
/// they go when it ends: a handler that holds what holds the peer leaves no cycle behind) and
/// the notification task's queue.
#[derive(Clone, Copy)]
pub(super) struct Route<'a> {
    pub(super) handlers: &'a Handlers,
    notify: &'a mpsc::Sender<NotifyJob>,
}

pub(super) struct NotifyJob {
    handler: NotificationFn,
    ctx: NotificationContext,
    params: Option<RawJson>,
}

impl Inner {
    async fn dispatch(self: &Arc<Self>, decoded: Decoded, route: Route<'_>) {
        match decoded {
            Decoded::Message(message) => self.handle_message(message, &Sink::Direct, route).await,
            Decoded::Invalid(invalid) => self.handle_invalid(invalid, &Sink::Direct).await,
            Decoded::Batch(items) => self.handle_batch(items, route).await,
        }
    }

    async fn handle_message(self: &Arc<Self>, message: Incoming, sink: &Sink, route: Route<'_>) {
        match message {
            Incoming::Request { id, method, params } => {
                bump(&self.counters.requests_received, 1);
                self.start_request(id, method, params, sink, route.handlers)
                    .await;
            }
            Incoming::Notification { method, params } => {
                bump(&self.counters.notifications_received, 1);
                self.handle_notification(method, params, route).await;
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
        route: Route<'_>,
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
        let Some(handler) = route.handlers.notification(&method).cloned() else {
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
        if let Err(mpsc::error::TrySendError::Full(job)) = route.notify.try_send(job) {
            let _ = self.writes.wake();
            let _ = route.notify.send(job).await;
        }
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

    async fn handle_batch(self: &Arc<Self>, items: Vec<RawJson>, route: Route<'_>) {
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
                Decoded::Message(message) => self.handle_message(message, &sink, route).await,
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

    /// Answers from the reader itself (invalid, unknown method, overloaded), queued with its
    /// other answers.
    pub(super) async fn reply(&self, sink: &Sink, id: Option<&Id>, outcome: &Reply) {
        let line = self.encode_response(id, outcome);
        match sink {
            Sink::Direct => {
                if let Ok(permit) = self.writes.reserve(line.len()).await {
                    let _ = self.writes.push_reserved(line, 1, permit, false);
                }
            }
            Sink::Batch(collector) => {
                collector.expect();
                collector.done(Some(line));
            }
        }
    }
}

/// Where a request's answer goes: the writer, or the array of a batch.
#[derive(Clone)]
pub(super) enum Sink {
    Direct,
    Batch(Arc<BatchCollector>),
}

struct BatchState {
    /// Answers still expected, plus one until every element has been dispatched.
    remaining: usize,
    lines: Vec<Vec<u8>>,
}

pub(super) struct BatchCollector {
    inner: Weak<Inner>,
    state: Mutex<BatchState>,
}

impl BatchCollector {
    pub(super) fn expect(&self) {
        lock(&self.state).remaining += 1;
    }

    /// One expected answer arrived (`None`: the element is not answered, e.g. cancelled).
    pub(super) fn done(&self, line: Option<Vec<u8>>) {
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

pub(super) async fn run_reader<R: AsyncRead + Unpin>(
    inner: Arc<Inner>,
    handlers: Handlers,
    mut frames: FrameReader<R>,
    notify: mpsc::Sender<NotifyJob>,
) {
    let mut decoder = Decoder::new(inner.profile.structured_params);
    let reason = loop {
        if !frames.has_complete_line() && inner.writes.wake() {
            // The answers of everything read so far go out together, before anything more is
            // read: the writer runs first, so that the other side has them to work on while
            // it sends more (on a runtime of one thread, reading on would starve the writer).
            tokio::task::yield_now().await;
        }
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
        inner
            .dispatch(
                decoded,
                Route {
                    handlers: &handlers,
                    notify: &notify,
                },
            )
            .await;
    };
    drop(notify);
    let _ = inner.writes.wake();
    inner.begin_close(&reason);
    inner.close_writer().await;
}

pub(super) async fn run_notifications(mut rx: mpsc::Receiver<NotifyJob>) {
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

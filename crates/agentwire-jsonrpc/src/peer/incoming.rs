//! Incoming requests: admission (the in-flight limit, duplicate ids, unknown methods), the
//! handler polled once inline under the concurrency limit and moved to a task of its own only
//! when it waits, and the [`Responder`] that answers it exactly once, with the handler's
//! outcome or, when dropped first, per the profile.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use tracing::Instrument as _;

use crate::error::{ErrorObject, INVALID_REQUEST, OVERLOADED, REQUEST_CANCELLED};
use crate::handler::{BoxFuture, Handlers, RequestContext};
use crate::message::{Id, RawJson};
use crate::observe::{Event, bump};

use super::reader::Sink;
use super::{InboundEntry, Inner, Peer, Reply, lock};

impl Inner {
    pub(super) async fn start_request(
        self: &Arc<Self>,
        id: Id,
        method: String,
        params: Option<RawJson>,
        sink: &Sink,
        handlers: &Handlers,
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
                let outcome = Err(self.profile.overloaded_reply.clone().unwrap_or_else(|| {
                    ErrorObject::new(OVERLOADED, "overloaded")
                        .with_data(serde_json::json!({ "retryAfterMs": retry_after }))
                }));
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
        let exclusive = handlers.is_exclusive(&method);
        let Some(handler) = handlers.request(&method).cloned() else {
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
        let mut handler = CatchUnwind(handler(ctx, params));
        // Polled once here, inline, when a handler slot is free: a handler that completes
        // without waiting (most do) costs no task, and its answer joins the reader's others.
        let slot = match Arc::clone(&self.handler_slots).try_acquire_owned() {
            Ok(slot) => {
                let polled = std::future::poll_fn(|cx| {
                    let _entered = span.enter();
                    Poll::Ready(Pin::new(&mut handler).poll(cx))
                })
                .await;
                if let Poll::Ready(outcome) = polled {
                    drop(slot);
                    let outcome = outcome.unwrap_or_else(|()| {
                        tracing::error!(parent: &span, "request handler panicked; answering -32603");
                        Err(ErrorObject::internal())
                    });
                    // The reader never waits for room in the output: the other side may be
                    // writing before it reads. An answer that does not fit now is written by a
                    // task of its own (at most one per request in flight).
                    let line = self.encode_response(Some(&responder.id), &outcome);
                    if let Sink::Batch(_) = &responder.sink {
                        // A batch's answers are written with the batch.
                        responder.finish_batch(line, &outcome);
                        return;
                    }
                    match self.writes.try_reserve(line.len()) {
                        Some(Ok(permit)) => {
                            let _entered = span.enter();
                            responder.answer(line, permit, &outcome, true);
                        }
                        Some(Err(_)) => {}
                        None => {
                            tokio::spawn(
                                async move {
                                    let Ok(permit) =
                                        responder.inner.writes.reserve(line.len()).await
                                    else {
                                        return;
                                    };
                                    responder.answer(line, permit, &outcome, false);
                                }
                                .instrument(span),
                            );
                        }
                    }
                    return;
                }
                Some(slot)
            }
            Err(_) => None,
        };
        // It waits: it goes on in a task of its own (polled with the task's waker from now on).
        let slots = Arc::clone(&self.handler_slots);
        let task = tokio::spawn(
            async move {
                let responder = responder;
                let _slot = match slot {
                    Some(slot) => slot,
                    None => match slots.acquire_owned().await {
                        Ok(slot) => slot,
                        Err(_) => return,
                    },
                };
                let outcome = match handler.await {
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
            let _ = self.writes.wake();
            let _ = task.await;
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

    /// Queues the answer `line` (of `outcome`) whose room `permit` holds. `inline`: the reader
    /// runs this, and the writer is woken for the answer with the reader's others, once no
    /// complete line is left to read.
    fn answer(
        mut self,
        line: Vec<u8>,
        permit: tokio::sync::OwnedSemaphorePermit,
        outcome: &Reply,
        inline: bool,
    ) {
        // Nothing awaits here, so a cancel cannot interleave with the answer.
        if self.inner.is_closed() || self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        self.done = true;
        lock(&self.inner.inbound).remove(&self.id);
        let _ = self.inner.writes.push_reserved(line, 1, permit, !inline);
        self.run_after_answer();
        self.log_answered(outcome);
    }

    fn finish_batch(mut self, line: Vec<u8>, outcome: &Reply) {
        let Sink::Batch(collector) = &self.sink else {
            return;
        };
        if self.inner.is_closed() || self.cancelled.load(Ordering::SeqCst) {
            return;
        }
        self.done = true;
        lock(&self.inner.inbound).remove(&self.id);
        collector.done(Some(line));
        self.run_after_answer();
        self.log_answered(outcome);
    }

    fn log_answered(&self, outcome: &Reply) {
        tracing::debug!(
            duration_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            outcome = match outcome {
                Ok(_) => "ok",
                Err(_) => "error",
            },
            "request answered"
        );
    }

    /// Answers with `outcome`, waiting for room in the output (a handler's task, so the
    /// writer is woken for it).
    async fn finish(self, outcome: Reply) {
        let line = self.inner.encode_response(Some(&self.id), &outcome);
        if let Sink::Batch(_) = &self.sink {
            self.finish_batch(line, &outcome);
            return;
        }
        let Ok(permit) = self.inner.writes.reserve(line.len()).await else {
            return;
        };
        self.answer(line, permit, &outcome, false);
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
pub(super) struct CatchUnwind<T>(pub(super) BoxFuture<T>);

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

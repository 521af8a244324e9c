//! Our requests: [`Peer::request`] and [`Peer::start_request`] register a waiter for the answer
//! before the request is written, and [`PendingCall`] awaits it, withdrawing the request (and
//! sending the profile's cancel notification) when dropped unanswered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::CallError;
use crate::message::{Id, OutRequest, RawJson};

use super::{Inner, Peer, Reply, lock};

impl Peer {
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

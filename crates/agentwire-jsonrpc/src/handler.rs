//! The handler registry: closures that answer incoming requests and take incoming
//! notifications, plain (`Value` in, `Value` out) or typed through serde.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ErrorObject;
use crate::message::{Id, RawJson};
use crate::peer::Peer;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

pub(crate) type RequestFn = Arc<
    dyn Fn(RequestContext, Option<RawJson>) -> BoxFuture<Result<RawJson, ErrorObject>>
        + Send
        + Sync,
>;
pub(crate) type NotificationFn =
    Arc<dyn Fn(NotificationContext, Option<RawJson>) -> BoxFuture<()> + Send + Sync>;

/// A request handler on `Value`s as the connection calls it: params read from their text,
/// the result written to text.
fn value_request<F, Fut>(handler: F) -> RequestFn
where
    F: Fn(RequestContext, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
{
    Arc::new(
        move |ctx, params| match params.map(|p| p.to_value()).transpose() {
            Ok(params) => {
                let answer = handler(ctx, params);
                Box::pin(async move { answer.await.map(|value| RawJson::from(&value)) })
            }
            Err(error) => Box::pin(std::future::ready(Err(ErrorObject::invalid_params(error)))),
        },
    )
}

/// A notification handler on `Value`s as the connection calls it.
fn value_notification<F, Fut>(handler: F) -> NotificationFn
where
    F: Fn(NotificationContext, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(
        move |ctx, params| match params.map(|p| p.to_value()).transpose() {
            Ok(params) => Box::pin(handler(ctx, params)),
            Err(error) => {
                tracing::warn!(method = ctx.method(), %error, "notification params cannot be read; dropped");
                Box::pin(std::future::ready(()))
            }
        },
    )
}

/// What a request handler knows about its request; [`RequestContext::peer`] sends requests and
/// notifications back to the other side while the handler runs.
#[derive(Clone)]
pub struct RequestContext {
    pub(crate) peer: Peer,
    pub(crate) id: Id,
    pub(crate) method: Arc<str>,
    pub(crate) after_answer: AfterAnswer,
}

/// What runs once a request's answer is queued for writing (see
/// [`RequestContext::after_answer`]).
pub(crate) type AfterAnswer = Arc<std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>>;

impl std::fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestContext")
            .field("id", &self.id)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl RequestContext {
    /// The connection the request came on.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The request's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The request's method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Runs `hook` right after this request's answer is queued on the connection's writer, so
    /// that anything sent from the hook on is written after the answer (a protocol that orders
    /// later frames behind an acknowledgement needs this). A later call replaces an earlier
    /// hook; the hook does not run when no answer is written (the request was cancelled or the
    /// connection closed).
    pub fn after_answer(&self, hook: impl FnOnce() + Send + 'static) {
        if let Ok(mut slot) = self.after_answer.lock() {
            *slot = Some(Box::new(hook));
        }
    }
}

/// What a notification handler knows about its notification.
#[derive(Debug, Clone)]
pub struct NotificationContext {
    pub(crate) peer: Peer,
    pub(crate) method: Arc<str>,
}

impl NotificationContext {
    /// The connection the notification came on. Notification handlers run one at a time in
    /// arrival order: to await a request to the other side, spawn a task for it.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The notification's method.
    pub fn method(&self) -> &str {
        &self.method
    }
}

/// The handlers of one connection, looked up by method name.
///
/// An incoming request without a handler is answered `-32601`; a notification without one is
/// dropped (logged at debug level).
#[derive(Clone, Default)]
pub struct Handlers {
    pub(crate) requests: HashMap<String, RequestFn>,
    pub(crate) notifications: HashMap<String, NotificationFn>,
    pub(crate) fallback_request: Option<RequestFn>,
    pub(crate) fallback_notification: Option<NotificationFn>,
    pub(crate) exclusive: std::collections::HashSet<String>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut requests: Vec<&String> = self.requests.keys().collect();
        requests.sort();
        let mut notifications: Vec<&String> = self.notifications.keys().collect();
        notifications.sort();
        f.debug_struct("Handlers")
            .field("requests", &requests)
            .field("notifications", &notifications)
            .field("fallback_request", &self.fallback_request.is_some())
            .field(
                "fallback_notification",
                &self.fallback_notification.is_some(),
            )
            .field("exclusive", &self.exclusive)
            .finish()
    }
}

impl Handlers {
    /// No handlers: every request is answered `-32601`.
    pub fn new() -> Self {
        Handlers::default()
    }

    /// Answers `method` with `handler(context, params)`.
    #[must_use]
    pub fn on_request<F, Fut>(mut self, method: &str, handler: F) -> Self
    where
        F: Fn(RequestContext, Option<Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        self.requests
            .insert(method.to_owned(), value_request(handler));
        self
    }

    /// Answers `method` with a typed handler: params that do not deserialise into `P` are
    /// answered `-32602` without calling it (absent params read as `null`). The params are
    /// read from their text straight into `P`, and the result written straight to text, with
    /// no [`Value`] in between.
    #[must_use]
    pub fn on_typed_request<P, R, F, Fut>(mut self, method: &str, handler: F) -> Self
    where
        P: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(RequestContext, P) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ErrorObject>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let call: RequestFn = Arc::new(move |ctx, params: Option<RawJson>| {
            let handler = Arc::clone(&handler);
            Box::pin(async move {
                let params: P = match params {
                    Some(params) => params.parse(),
                    None => serde_json::from_str("null"),
                }
                .map_err(ErrorObject::invalid_params)?;
                let result = handler(ctx, params).await?;
                RawJson::from_value(&result).map_err(|error| {
                    tracing::error!(%error, "a handler's result cannot be serialised");
                    ErrorObject::internal()
                })
            })
        });
        self.requests.insert(method.to_owned(), call);
        self
    }

    /// Answers every request that has no handler of its own (instead of `-32601`).
    #[must_use]
    pub fn on_any_request<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(RequestContext, Option<Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        self.fallback_request = Some(value_request(handler));
        self
    }

    /// Takes notifications of `method`.
    #[must_use]
    pub fn on_notification<F, Fut>(mut self, method: &str, handler: F) -> Self
    where
        F: Fn(NotificationContext, Option<Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.notifications
            .insert(method.to_owned(), value_notification(handler));
        self
    }

    /// Takes every notification that has no handler of its own.
    #[must_use]
    pub fn on_any_notification<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(NotificationContext, Option<Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.fallback_notification = Some(value_notification(handler));
        self
    }

    /// Makes requests of `method` exclusive: one is answered before any frame read after it
    /// is dispatched (a handshake such as `initialize` that later requests depend on). The
    /// reader waits for the handler, so an exclusive handler must not wait for the other side.
    #[must_use]
    pub fn exclusive(mut self, method: &str) -> Self {
        self.exclusive.insert(method.to_owned());
        self
    }

    pub(crate) fn is_exclusive(&self, method: &str) -> bool {
        self.exclusive.contains(method)
    }

    pub(crate) fn request(&self, method: &str) -> Option<&RequestFn> {
        self.requests.get(method).or(self.fallback_request.as_ref())
    }

    pub(crate) fn notification(&self, method: &str) -> Option<&NotificationFn> {
        self.notifications
            .get(method)
            .or(self.fallback_notification.as_ref())
    }
}

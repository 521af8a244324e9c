//! Server requests (runtime → client): the host's handlers of `approval.request` and
//! `userInput.request` ([`Interactions`]), the requests they receive in the negotiated version's
//! shape, answering them (validated before sending, `-32601`/`-32602`/`-32603` as the protocol
//! says) and aborting them on `runtime.serverRequest.cancel` or a revoked capability, without a
//! late answer.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agentwire_jsonrpc::{ErrorObject, Id, Peer, RequestContext};
use agentwire_roll::approval::{
    ApprovalDecision, ApprovalRequestParams, LegacyApprovalRequestParams, PendingApproval,
};
use agentwire_roll::ids::{InteractionId, ThreadId};
use agentwire_roll::parse::{
    ServerRequestParams, parse_server_request_cancel_params, parse_server_request_params,
    parse_server_request_result,
};
use agentwire_roll::types::{ServerRequestCancelParams, UserInputRequestParams};
use agentwire_roll::user_input::{UserInputResult, normalize_user_input_result_for_form};
use agentwire_roll::{JsonRpcId, ProtocolVersion, ServerRequestMethod};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use super::calls::response_frame_length;
use super::events::ClientEvent;
use super::{Shared, lock};

/// A handler failed; the runtime is answered `-32603` and fails the interaction closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(pub String);

impl HandlerError {
    /// A failure with a message (kept in the log, never sent).
    pub fn new(message: impl Into<String>) -> HandlerError {
        HandlerError(message.into())
    }
}

impl From<&str> for HandlerError {
    fn from(message: &str) -> Self {
        HandlerError(message.to_owned())
    }
}

impl From<String> for HandlerError {
    fn from(message: String) -> Self {
        HandlerError(message)
    }
}

/// The future a handler returns.
pub type HandlerFuture<T> = Pin<Box<dyn Future<Output = Result<T, HandlerError>> + Send + 'static>>;

type ApprovalFn = Arc<dyn Fn(ApprovalRequest) -> HandlerFuture<ApprovalDecision> + Send + Sync>;
type UserInputFn = Arc<dyn Fn(UserInputRequest) -> HandlerFuture<UserInputResult> + Send + Sync>;

/// An `approval.request`, in the negotiated version's shape.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApprovalRequest {
    /// 1.1: named by its JSON-RPC id; `expiresAt` is optional.
    Legacy {
        /// The request's JSON-RPC id.
        id: JsonRpcId,
        /// Its params.
        params: LegacyApprovalRequestParams,
    },
    /// 1.2+: an interaction with an absolute deadline.
    Interaction {
        /// The request's JSON-RPC id (a re-delivery gets a new one).
        id: JsonRpcId,
        /// Its params.
        params: ApprovalRequestParams,
    },
}

impl ApprovalRequest {
    /// The JSON-RPC id of this delivery.
    pub fn id(&self) -> &JsonRpcId {
        match self {
            ApprovalRequest::Legacy { id, .. } | ApprovalRequest::Interaction { id, .. } => id,
        }
    }

    /// The thread.
    pub fn thread_id(&self) -> &ThreadId {
        match self {
            ApprovalRequest::Legacy { params, .. } => &params.thread_id,
            ApprovalRequest::Interaction { params, .. } => &params.thread_id,
        }
    }

    /// The approval to decide.
    pub fn approval(&self) -> &PendingApproval {
        match self {
            ApprovalRequest::Legacy { params, .. } => &params.approval,
            ApprovalRequest::Interaction { params, .. } => &params.approval,
        }
    }

    /// The deadline (always present from 1.2).
    pub fn expires_at(&self) -> Option<&str> {
        match self {
            ApprovalRequest::Legacy { params, .. } => params.expires_at.as_deref(),
            ApprovalRequest::Interaction { params, .. } => Some(&params.expires_at),
        }
    }

    /// The interaction (1.2+), stable across re-deliveries.
    pub fn interaction_id(&self) -> Option<&InteractionId> {
        match self {
            ApprovalRequest::Legacy { .. } => None,
            ApprovalRequest::Interaction { params, .. } => Some(&params.interaction_id),
        }
    }
}

/// A `userInput.request` (1.2+).
#[derive(Debug, Clone, PartialEq)]
pub struct UserInputRequest {
    /// The request's JSON-RPC id.
    pub id: JsonRpcId,
    /// Its params: the form (already checked against the form rules).
    pub params: UserInputRequestParams,
}

/// The host's server-request handlers. A handler runs in a task of its own, without the
/// request timeout (a human answers it); when the runtime cancels the request, the handler's
/// future is dropped and nothing is answered.
///
/// ```
/// use agentwire_client::roll::{HandlerError, Interactions};
/// use agentwire_roll::approval::ApprovalDecision;
/// use agentwire_roll::user_input::UserInputResult;
///
/// let interactions = Interactions::new()
///     .on_approval(|request| async move {
///         let _tool = request.approval().tool_name.clone();
///         Ok::<_, HandlerError>(ApprovalDecision::Approve {})
///     })
///     .on_user_input(|_request| async move {
///         Ok::<_, HandlerError>(UserInputResult::Cancelled { reason: None })
///     });
/// assert_eq!(interactions.methods().len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct Interactions {
    approval: Option<ApprovalFn>,
    user_input: Option<UserInputFn>,
}

impl fmt::Debug for Interactions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interactions")
            .field("approval", &self.approval.is_some())
            .field("user_input", &self.user_input.is_some())
            .finish()
    }
}

impl PartialEq for Interactions {
    /// Equal when the same handlers (by identity) are registered.
    fn eq(&self, other: &Self) -> bool {
        fn same<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        }
        same(&self.approval, &other.approval) && same(&self.user_input, &other.user_input)
    }
}

impl Interactions {
    /// No handlers: every server request is answered `-32601`.
    pub fn new() -> Interactions {
        Interactions::default()
    }

    /// Handles `approval.request`.
    #[must_use]
    pub fn on_approval<F, Fut>(mut self, handler: F) -> Interactions
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ApprovalDecision, HandlerError>> + Send + 'static,
    {
        self.approval = Some(Arc::new(move |request| Box::pin(handler(request))));
        self
    }

    /// Handles `userInput.request` (1.2+).
    #[must_use]
    pub fn on_user_input<F, Fut>(mut self, handler: F) -> Interactions
    where
        F: Fn(UserInputRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<UserInputResult, HandlerError>> + Send + 'static,
    {
        self.user_input = Some(Arc::new(move |request| Box::pin(handler(request))));
        self
    }

    /// The server requests with a handler, in registry order.
    pub fn methods(&self) -> Vec<ServerRequestMethod> {
        ServerRequestMethod::ALL
            .into_iter()
            .filter(|m| self.handles(*m))
            .collect()
    }

    /// Whether `method` has a handler.
    pub fn handles(&self, method: ServerRequestMethod) -> bool {
        match method {
            ServerRequestMethod::ApprovalRequest => self.approval.is_some(),
            ServerRequestMethod::UserInputRequest => self.user_input.is_some(),
        }
    }
}

/// The handler a server request goes to.
enum Route {
    Approval(ApprovalFn),
    UserInput(UserInputFn),
}

/// Most cancellations kept for requests whose handler has not started yet.
const EARLY_CANCELS: usize = 64;

/// What a cancellation names: a JSON-RPC id (1.1) or an interaction (1.2+).
#[derive(Debug, Clone, PartialEq, Eq)]
enum CancelKey {
    Id(Id),
    Interaction(InteractionId),
}

struct Running {
    method: ServerRequestMethod,
    interaction: Option<InteractionId>,
    cancel: oneshot::Sender<()>,
}

/// The server requests whose handlers are running, by JSON-RPC id and by interaction. Bounded
/// by the transport's inbound request limit.
#[derive(Default)]
pub(super) struct Inflight {
    running: HashMap<Id, Running>,
    by_interaction: HashMap<InteractionId, Id>,
    /// Cancellations that arrived before their handler started (the request and the cancel race
    /// through different tasks); oldest dropped first.
    early: VecDeque<CancelKey>,
}

impl Inflight {
    fn remember_early(&mut self, key: CancelKey) {
        if self.early.len() >= EARLY_CANCELS {
            self.early.pop_front();
        }
        self.early.push_back(key);
    }

    fn take_early(&mut self, key: &CancelKey) -> bool {
        match self.early.iter().position(|k| k == key) {
            Some(index) => {
                self.early.remove(index);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, id: &Id) -> Option<Running> {
        let running = self.running.remove(id)?;
        if let Some(interaction) = &running.interaction
            && self.by_interaction.get(interaction) == Some(id)
        {
            self.by_interaction.remove(interaction);
        }
        Some(running)
    }
}

/// Removes a running handler from the registry however it ends.
struct RunningGuard {
    shared: Arc<Shared>,
    id: Id,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        lock(&self.shared.inflight).remove(&self.id);
    }
}

pub(super) fn to_jsonrpc_id(id: &Id) -> JsonRpcId {
    match id {
        Id::Number(n) => JsonRpcId::Number(n.clone()),
        Id::String(s) => JsonRpcId::String(s.clone()),
    }
}

fn from_jsonrpc_id(id: &JsonRpcId) -> Id {
    match id {
        JsonRpcId::Number(n) => Id::Number(n.clone()),
        JsonRpcId::String(s) => Id::String(s.clone()),
    }
}

impl Shared {
    /// Where a server request goes: `-32601` unless the version has it, the runtime may send it
    /// (accepted by the last ACK, or requested by a capability change still awaiting its ACK)
    /// and a handler is registered.
    fn route(&self, method: ServerRequestMethod) -> Result<(ProtocolVersion, Route), ErrorObject> {
        let not_found = || ErrorObject::method_not_found(method.as_str());
        let state = lock(&self.state);
        let Some(session) = &state.session else {
            return Err(not_found());
        };
        let version = session.version;
        if !method.is_available(version) {
            return Err(not_found());
        }
        let negotiated = version.capabilities().server_request_capability_negotiation;
        let pending = state.pending.as_ref();
        if negotiated
            && !state.accepted.contains(&method)
            && !pending.is_some_and(|p| p.requested.contains(&method))
        {
            return Err(not_found());
        }
        let newest = pending
            .map(|p| &p.interactions)
            .filter(|i| i.handles(method))
            .unwrap_or(&state.interactions);
        let route = match method {
            ServerRequestMethod::ApprovalRequest => newest.approval.clone().map(Route::Approval),
            ServerRequestMethod::UserInputRequest => {
                newest.user_input.clone().map(Route::UserInput)
            }
        };
        route.map(|r| (version, r)).ok_or_else(not_found)
    }

    /// Registers a starting handler; `None` when its cancellation already arrived.
    fn begin(
        self: &Arc<Self>,
        id: &Id,
        method: ServerRequestMethod,
        interaction: Option<InteractionId>,
    ) -> Option<(oneshot::Receiver<()>, RunningGuard)> {
        let mut inflight = lock(&self.inflight);
        let cancelled_early = inflight.take_early(&CancelKey::Id(id.clone()))
            || interaction
                .as_ref()
                .is_some_and(|i| inflight.take_early(&CancelKey::Interaction(i.clone())));
        if cancelled_early {
            return None;
        }
        let (cancel, cancelled) = oneshot::channel();
        if let Some(interaction) = &interaction {
            inflight
                .by_interaction
                .insert(interaction.clone(), id.clone());
        }
        inflight.running.insert(
            id.clone(),
            Running {
                method,
                interaction,
                cancel,
            },
        );
        Some((
            cancelled,
            RunningGuard {
                shared: Arc::clone(self),
                id: id.clone(),
            },
        ))
    }

    /// Aborts the handler of `id`: the transport forgets the request (so nothing is ever
    /// answered) and the handler's future is dropped.
    fn abort_running(&self, peer: &Peer, id: &Id, reason: &str) -> bool {
        let running = {
            // One lock for the lookup and the note, so a handler starting meanwhile sees either.
            let mut inflight = lock(&self.inflight);
            let running = inflight.remove(id);
            let known_to_transport = peer.cancel_incoming(id);
            match running {
                Some(running) => running,
                None => {
                    if known_to_transport {
                        // Queued, its handler not started yet.
                        inflight.remember_early(CancelKey::Id(id.clone()));
                    }
                    return known_to_transport;
                }
            }
        };
        let _ = running.cancel.send(());
        tracing::debug!(%id, method = %running.method, reason, "server request cancelled");
        self.emit(ClientEvent::InteractionCancelled {
            method: running.method,
            id: to_jsonrpc_id(id),
            interaction_id: running.interaction,
            reason: reason.to_owned(),
        });
        true
    }

    /// `runtime.serverRequest.cancel`.
    pub(super) fn server_request_cancelled(&self, peer: &Peer, params: &Value) {
        let method = agentwire_roll::version::NOTIFICATION_SERVER_REQUEST_CANCEL;
        let Some(version) = self.version() else {
            self.reject(method, "client.roll.not-initialized", "before initialize");
            return;
        };
        match parse_server_request_cancel_params(version, params) {
            Err(error) => self.reject(method, error.code(), &error.to_string()),
            Ok(ServerRequestCancelParams::Legacy {
                server_request_id,
                reason,
                ..
            }) => {
                let id = from_jsonrpc_id(&server_request_id);
                if !self.abort_running(peer, &id, &reason) {
                    tracing::debug!(%id, "cancel for a server request that is not pending");
                }
            }
            Ok(ServerRequestCancelParams::Interaction {
                interaction_id,
                reason,
            }) => {
                let id = {
                    let mut inflight = lock(&self.inflight);
                    let id = inflight.by_interaction.get(&interaction_id).cloned();
                    if id.is_none() {
                        inflight.remember_early(CancelKey::Interaction(interaction_id));
                    }
                    id
                };
                if let Some(id) = id {
                    self.abort_running(peer, &id, &reason);
                }
            }
        }
    }

    /// Aborts the running handlers of methods the runtime no longer accepts.
    pub(super) fn abort_revoked(&self, peer: &Peer, revoked: &BTreeSet<ServerRequestMethod>) {
        if revoked.is_empty() {
            return;
        }
        let ids: Vec<Id> = lock(&self.inflight)
            .running
            .iter()
            .filter(|(_, r)| revoked.contains(&r.method))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.abort_running(peer, &id, "capability revoked");
        }
    }

    /// A rejected handler result: logged, reported, and answered `-32603`.
    fn failed_answer(
        &self,
        method: ServerRequestMethod,
        code: &'static str,
        message: &str,
    ) -> ErrorObject {
        self.reject(method.as_str(), code, message);
        ErrorObject::internal()
    }

    /// Validates an answer against the version and the outbound frame limit.
    fn answer<T: Serialize>(
        &self,
        version: ProtocolVersion,
        method: ServerRequestMethod,
        id: &Id,
        answer: &T,
    ) -> Result<Value, ErrorObject> {
        let value = serde_json::to_value(answer).map_err(|error| {
            self.failed_answer(method, "client.roll.handler-result", &error.to_string())
        })?;
        if let Err(error) = parse_server_request_result(version, method.as_str(), &value) {
            return Err(self.failed_answer(method, error.code(), &error.to_string()));
        }
        let length = response_frame_length(id, &value);
        let limit = self.outbound_limit();
        if length > limit {
            return Err(self.failed_answer(
                method,
                "client.roll.outbound-too-large",
                &format!("an answer of {length} bytes exceeds the outbound frame limit of {limit}"),
            ));
        }
        Ok(value)
    }
}

/// Serves one server request: route, parse, run the handler (abortable), validate the answer.
pub(super) async fn serve(
    shared: Arc<Shared>,
    method: ServerRequestMethod,
    ctx: RequestContext,
    params: Option<Value>,
) -> Result<Value, ErrorObject> {
    let id = ctx.id().clone();
    shared.until_initialized().await;
    let (version, route) = shared.route(method)?;
    let params = params.unwrap_or(Value::Null);
    let parsed = match parse_server_request_params(version, method.as_str(), &params) {
        Ok(parsed) => parsed,
        Err(error) => {
            shared.reject(method.as_str(), error.code(), &error.to_string());
            return Err(ErrorObject::invalid_params(&error));
        }
    };
    let interaction = match &parsed {
        ServerRequestParams::LegacyApproval(_) => None,
        ServerRequestParams::Approval(p) => Some(p.interaction_id.clone()),
        ServerRequestParams::UserInput(p) => Some(p.interaction_id.clone()),
    };
    let Some((cancelled, _guard)) = shared.begin(&id, method, interaction) else {
        // Cancelled before it started: the transport forgets it, so this error is never sent.
        ctx.peer().cancel_incoming(&id);
        return Err(ErrorObject::internal());
    };
    let json_id = to_jsonrpc_id(&id);
    let work = async {
        match (parsed, route) {
            (ServerRequestParams::LegacyApproval(params), Route::Approval(handler)) => {
                let request = ApprovalRequest::Legacy {
                    id: json_id,
                    params,
                };
                let decision = handler(request).await.map_err(|e| {
                    shared.failed_answer(method, "client.roll.handler-failed", &e.0)
                })?;
                shared.answer(version, method, &id, &decision)
            }
            (ServerRequestParams::Approval(params), Route::Approval(handler)) => {
                let request = ApprovalRequest::Interaction {
                    id: json_id,
                    params,
                };
                let decision = handler(request).await.map_err(|e| {
                    shared.failed_answer(method, "client.roll.handler-failed", &e.0)
                })?;
                shared.answer(version, method, &id, &decision)
            }
            (ServerRequestParams::UserInput(params), Route::UserInput(handler)) => {
                let controls = params.controls.clone();
                let request = UserInputRequest {
                    id: json_id,
                    params,
                };
                let result = handler(request).await.map_err(|e| {
                    shared.failed_answer(method, "client.roll.handler-failed", &e.0)
                })?;
                let normalized = normalize_user_input_result_for_form(&controls, result)
                    .map_err(|e| shared.failed_answer(method, e.code(), &e.to_string()))?;
                shared.answer(version, method, &id, &normalized)
            }
            // `route` and the parser agree on the method; a mismatch is a defect, answered as
            // a handler failure so the runtime fails closed.
            _ => Err(shared.failed_answer(
                method,
                "client.roll.handler-failed",
                "no handler for this request shape",
            )),
        }
    };
    tokio::select! {
        outcome = work => outcome,
        // Aborted: the transport already forgot the request, so nothing is sent.
        _ = cancelled => Err(ErrorObject::internal()),
    }
}

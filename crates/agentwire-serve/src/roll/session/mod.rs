//! One Roll connection: the request dispatcher and its methods. The event stream (live events
//! and resume replay) is in `events`, the server-request deliveries in `interactions`, the
//! thread reads in `threads`, the attachment methods in `attachments`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use agentwire_jsonrpc::{ErrorObject, Event, Handlers, Id, Peer, RequestContext};
use agentwire_roll::constants::js_length;
use agentwire_roll::negotiation::{Connection, NegotiationError};
use agentwire_roll::project::{project_initialize_result, project_operation_view};
use agentwire_roll::schema;
use agentwire_roll::{Feature, Method, ProtocolVersion, RollErrorCode, ServerRequestMethod};
use agentwire_runtime::{
    Admission, Interaction, Operation, Resolution, RuntimeError, TurnInput, fingerprint,
};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::wire;
use super::{RollFace, roll_error};

mod attachments;
mod events;
mod interactions;
mod threads;

/// Schema issues reported in an `INVALID_PARAMS` answer.
const MAX_REPORTED_ISSUES: usize = 8;

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The client closed its side.
    Closed,
    /// The client sent an error response with `id: null`; the runtime closed the connection.
    UncorrelatedError,
}

/// A server request in flight.
#[derive(Debug)]
struct Delivery {
    thread_id: String,
    method: ServerRequestMethod,
    approval_id: Option<String>,
    rpc_id: Option<Id>,
    task: Option<AbortHandle>,
    /// Withdrawn before its request id was known: the cancel is sent once it is.
    withdrawn: Option<String>,
}

pub(crate) struct Session {
    face: Arc<RollFace>,
    peer: OnceLock<Peer>,
    conn: Mutex<Connection>,
    attached: Mutex<HashSet<String>>,
    deliveries: Mutex<HashMap<String, Delivery>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Answer = Result<Value, ErrorObject>;

pub(crate) async fn run<R, W>(face: Arc<RollFace>, reader: R, writer: W) -> SessionEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(Session {
        conn: Mutex::new(Connection::with_supported(&face.config.versions)),
        face,
        peer: OnceLock::new(),
        attached: Mutex::new(HashSet::new()),
        deliveries: Mutex::new(HashMap::new()),
    });
    // Subscribed before the first request can be read, so nothing committed during the
    // connection is missed.
    let published = session.face.runtime.subscribe();
    // Nothing read after `initialize` is handled before it is answered, so a client that
    // pipelines its first calls behind it is served in order.
    let handlers = Handlers::new()
        .exclusive("initialize")
        .on_any_request({
            let session = Arc::clone(&session);
            move |ctx, params| {
                let session = Arc::clone(&session);
                async move { session.handle(ctx, params).await }
            }
        })
        .on_any_notification(|ctx, _| async move {
            tracing::debug!(
                method = ctx.method(),
                "a client notification has no meaning here; dropped"
            );
        });
    let peer = Peer::spawn(reader, writer, session.face.profile(), handlers);
    let mut peer_events = peer.subscribe();
    let _ = session.peer.set(peer.clone());
    let pump = tokio::spawn(Arc::clone(&session).pump(published));
    let end = tokio::select! {
        () = peer.closed() => SessionEnd::Closed,
        () = uncorrelated(&mut peer_events) => {
            tracing::warn!("the client sent an error with id null; closing the connection");
            peer.close().await;
            SessionEnd::UncorrelatedError
        }
    };
    pump.abort();
    session.disconnect();
    end
}

async fn uncorrelated(events: &mut broadcast::Receiver<Event>) {
    loop {
        match events.recv().await {
            Ok(Event::UncorrelatedError(_)) => return,
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

fn str_param<'a>(params: &'a Value, key: &str) -> &'a str {
    params.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The strings of the array `key` of `params` (empty when absent; the schema has checked the
/// items' type).
fn strings_param(params: &Value, key: &str) -> Vec<String> {
    params
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The idempotency scope of Roll's `requestId`s: one per runtime, shared by its connections
/// (a retry may come on a new connection).
const IDEMPOTENCY_SCOPE: &str = "roll";

/// A mutation's answer as the idempotency store keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
enum Kept {
    Result(Value),
    Error(ErrorObject),
}

fn encode_kept(answer: &Answer) -> Option<Vec<u8>> {
    let kept = match answer {
        Ok(value) => Kept::Result(value.clone()),
        Err(error) => Kept::Error(error.clone()),
    };
    serde_json::to_vec(&kept).ok()
}

fn decode_kept(bytes: &[u8]) -> Answer {
    match serde_json::from_slice::<Kept>(bytes) {
        Ok(Kept::Result(value)) => Ok(value),
        Ok(Kept::Error(error)) => Err(error),
        // Written by `encode_kept` of this build: not reachable, and never a silent success.
        Err(error) => Err(ErrorObject::new(
            agentwire_roll::errors::JSONRPC_INTERNAL_ERROR,
            format!("a kept answer cannot be read: {error}"),
        )),
    }
}

fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

impl Session {
    fn version(&self) -> Option<ProtocolVersion> {
        lock(&self.conn).version()
    }

    fn error_version(&self) -> ProtocolVersion {
        self.version().unwrap_or(ProtocolVersion::V1_0)
    }

    fn err(&self, code: RollErrorCode, message: impl Into<String>) -> ErrorObject {
        roll_error(self.error_version(), code, message, None)
    }

    fn attach(&self, thread_id: &str) {
        lock(&self.attached).insert(thread_id.to_owned());
    }

    fn is_attached(&self, thread_id: &str) -> bool {
        lock(&self.attached).contains(thread_id)
    }

    fn negotiation_error(&self, error: &NegotiationError) -> ErrorObject {
        let version = self.error_version();
        match error.roll_code() {
            Some(code) => roll_error(version, code, error.to_string(), None),
            None => ErrorObject::new(error.jsonrpc_code(), error.to_string()),
        }
    }

    fn runtime_error(&self, error: &RuntimeError) -> ErrorObject {
        use agentwire_events::Error as LogError;
        let code = match error {
            RuntimeError::ThreadNotFound(_) => RollErrorCode::THREAD_NOT_FOUND,
            RuntimeError::TurnAlreadyActive { .. } => RollErrorCode::TURN_ALREADY_ACTIVE,
            RuntimeError::TurnNotFound(_) => RollErrorCode::TURN_NOT_FOUND,
            RuntimeError::InteractionNotFound(_) => RollErrorCode::APPROVAL_NOT_FOUND,
            RuntimeError::InvalidInput(_) | RuntimeError::TurnIdInUse { .. } => {
                RollErrorCode::INVALID_PARAMS
            }
            RuntimeError::TurnAlreadyStarted { .. } => RollErrorCode::TURN_ALREADY_ACTIVE,
            RuntimeError::AnswerRefused { .. } => RollErrorCode::APPROVAL_NOT_FOUND,
            RuntimeError::Log(LogError::Closed) => RollErrorCode::RUNTIME_CLOSING,
            RuntimeError::Log(LogError::CommitOutcomeUnknown { .. }) => {
                RollErrorCode::OUTCOME_UNKNOWN
            }
            RuntimeError::Log(LogError::ThreadDeleted { .. }) => RollErrorCode::THREAD_NOT_FOUND,
            RuntimeError::Log(LogError::RecordTooLarge { .. }) => RollErrorCode::INVALID_PARAMS,
            _ => RollErrorCode::INTERNAL_ERROR,
        };
        if code == RollErrorCode::INTERNAL_ERROR {
            tracing::error!(%error, code = error.code(), "a runtime call failed");
        }
        self.err(code, error.to_string())
    }

    async fn handle(self: Arc<Self>, ctx: RequestContext, params: Option<Value>) -> Answer {
        let method = {
            let conn = lock(&self.conn);
            conn.check_call(ctx.method())
        }
        .map_err(|e| self.negotiation_error(&e))?;
        let params = params.unwrap_or(Value::Null);
        // `initialize` has one shape in every version; before it, the newest one checks it.
        let version = self.version().unwrap_or(agentwire_roll::LATEST_VERSION);
        if let Err(issues) =
            schema::validate_definition(version, &method.params_definition(), &params)
        {
            let details: Vec<Value> = issues
                .iter()
                .take(MAX_REPORTED_ISSUES)
                .map(|i| json!({"instancePath": i.instance_path, "message": i.message}))
                .collect();
            return Err(roll_error(
                self.error_version(),
                RollErrorCode::INVALID_PARAMS,
                format!("invalid {} params", method.as_str()),
                Some(json!({"issues": details})),
            ));
        }
        if method.is_idempotent_mutation() {
            return self.idempotent(ctx, method, params).await;
        }
        self.dispatch(ctx, method, version, params).await
    }

    /// Runs a mutation once per `requestId` (the runtime's idempotency store, scope
    /// [`IDEMPOTENCY_SCOPE`]): a retry with the same params gets the first answer; the same id
    /// with other params is `INVALID_PARAMS`. A retryable failure is not kept.
    async fn idempotent(
        self: Arc<Self>,
        ctx: RequestContext,
        method: Method,
        params: Value,
    ) -> Answer {
        let request_id = str_param(&params, "requestId").to_owned();
        let print = fingerprint(&[method.as_str().as_bytes(), canonical(&params).as_bytes()]);
        let store = self.face.runtime.idempotency();
        loop {
            let done = store.completed();
            match store.admit(IDEMPOTENCY_SCOPE, &request_id, &print) {
                Admission::Run => break,
                Admission::Replay(bytes) => return decode_kept(&bytes),
                Admission::Mismatch => {
                    return Err(self.err(
                        RollErrorCode::INVALID_PARAMS,
                        format!("requestId {request_id} was used for another mutation"),
                    ));
                }
                Admission::InFlight => done.await,
            }
        }
        let version = self.error_version();
        let answer = Arc::clone(&self)
            .dispatch(ctx, method, version, params)
            .await;
        let transient = matches!(&answer, Err(e) if e.data.as_ref()
            .and_then(|d| d.get("retryable"))
            .and_then(Value::as_bool)
            .unwrap_or(false));
        match encode_kept(&answer) {
            Some(bytes) if !transient => store.complete(IDEMPOTENCY_SCOPE, &request_id, &bytes),
            _ => store.abandon(IDEMPOTENCY_SCOPE, &request_id),
        }
        answer
    }

    async fn dispatch(
        self: Arc<Self>,
        ctx: RequestContext,
        method: Method,
        version: ProtocolVersion,
        params: Value,
    ) -> Answer {
        let runtime = &self.face.runtime;
        match method {
            Method::Initialize => self.initialize(&ctx, &params),
            Method::ClientCapabilitiesSet => self.set_capabilities(&ctx, &params),
            Method::ThreadList => self.thread_list(&params).await,
            Method::ThreadCreate => {
                let title = params
                    .get("title")
                    .and_then(Value::as_str)
                    .map(|t| self.title(t))
                    .transpose()?;
                let id = runtime
                    .create_thread(title, None)
                    .await
                    .map_err(|e| self.runtime_error(&e))?;
                self.attach(&id);
                self.thread_result(&id).await
            }
            Method::ThreadRename => {
                let thread_id = str_param(&params, "threadId");
                let title = self.title(str_param(&params, "title"))?;
                runtime
                    .rename_thread(thread_id, title)
                    .await
                    .map_err(|e| self.runtime_error(&e))?;
                self.thread_result(thread_id).await
            }
            Method::ThreadDelete => {
                let thread_id = str_param(&params, "threadId");
                runtime
                    .delete_thread(thread_id)
                    .await
                    .map_err(|e| self.runtime_error(&e))?;
                lock(&self.attached).remove(thread_id);
                if let Some(store) = &self.face.config.attachments
                    && let Err(error) = store.release_thread(thread_id).await
                {
                    tracing::warn!(%error, "could not release a deleted thread's attachments");
                }
                Ok(json!({"deleted": true}))
            }
            Method::ThreadDetach => {
                let thread_id = str_param(&params, "threadId");
                self.ensure_thread(thread_id)?;
                let detached = lock(&self.attached).remove(thread_id);
                Ok(json!({"detached": detached}))
            }
            Method::ThreadOpen => {
                let thread_id = str_param(&params, "threadId");
                // Attached first: an event committed while the snapshot is read is then sent
                // live (and may also be in the snapshot) rather than missed.
                let attached = lock(&self.attached).insert(thread_id.to_owned());
                let snapshot = self
                    .snapshot(version, thread_id, &json!({"threadId": thread_id}))
                    .await;
                if snapshot.is_err() && attached {
                    lock(&self.attached).remove(thread_id);
                }
                snapshot
            }
            Method::ThreadSnapshot => {
                let thread_id = str_param(&params, "threadId");
                self.snapshot(version, thread_id, &params).await
            }
            Method::ThreadCapabilities => {
                self.ensure_thread(str_param(&params, "threadId"))?;
                Ok(json!({"manifest": self.face.config.manifest}))
            }
            Method::RuntimeEventsResume => self.resume(&ctx, version, &params).await,
            Method::TurnStart => self.turn_start(&params).await,
            Method::TurnCancel => {
                let cancelling = runtime
                    .cancel_turn(str_param(&params, "threadId"), str_param(&params, "turnId"))
                    .await
                    .map_err(|e| self.runtime_error(&e))?;
                Ok(json!({"cancelling": cancelling}))
            }
            Method::ApprovalRespond => self.approval_respond(&params).await,
            Method::OperationGet => {
                let found = self.operation(&params).await?;
                let view = found.map(|(op, sequence, at)| {
                    project_operation_view(&wire::operation_view(sequence, &op, at), version)
                });
                Ok(json!({"operation": view}))
            }
            Method::OperationResultGet => {
                let found = self.operation(&params).await?;
                let view = found.map(|(op, _, at)| {
                    wire::operation_result_view(str_param(&params, "threadId"), &op, at)
                });
                Ok(json!({"result": view}))
            }
            Method::AttachmentStage
            | Method::AttachmentChunk
            | Method::AttachmentCommit
            | Method::AttachmentRelease => self.attachment(method, &params).await,
        }
    }

    /// The operation the params name, its sequence and its completion time (`None` when the
    /// thread has no such operation).
    async fn operation(
        &self,
        params: &Value,
    ) -> Result<Option<(Operation, usize, u64)>, ErrorObject> {
        let operation_id = str_param(params, "operationId");
        self.face
            .runtime
            .inspect(str_param(params, "threadId"), |state| {
                let sequence = state
                    .operations
                    .iter()
                    .position(|op| op.id == operation_id)?;
                let at = state.operation_times_ms.get(sequence).copied().unwrap_or(0);
                Some((state.operations[sequence].clone(), sequence, at))
            })
            .await
            .map_err(|e| self.runtime_error(&e))
    }

    /// `THREAD_NOT_FOUND` unless the runtime serves the thread (no copy of its state).
    fn ensure_thread(&self, thread_id: &str) -> Result<(), ErrorObject> {
        if self.face.runtime.contains_thread(thread_id) {
            Ok(())
        } else {
            Err(self.runtime_error(&RuntimeError::ThreadNotFound(thread_id.to_owned())))
        }
    }

    /// A title as the protocol takes it: trimmed, 1..200 characters.
    fn title(&self, raw: &str) -> Result<String, ErrorObject> {
        let trimmed = raw.trim();
        let length = js_length(trimmed);
        if length == 0 || length > 200 {
            return Err(self.err(
                RollErrorCode::INVALID_PARAMS,
                "a title has 1 to 200 characters after trimming",
            ));
        }
        Ok(trimmed.to_owned())
    }

    fn features(&self, version: ProtocolVersion) -> Vec<&'static str> {
        Feature::ALL
            .into_iter()
            .filter(|f| f.is_available(version))
            .filter(|f| match f {
                Feature::ReasoningSummary => false,
                Feature::Attachments => self.face.config.attachments.is_some(),
                _ => true,
            })
            .map(Feature::as_str)
            .collect()
    }

    fn initialize(self: &Arc<Self>, ctx: &RequestContext, params: &Value) -> Answer {
        let client = params.get("client").cloned().unwrap_or(Value::Null);
        for key in ["name", "version"] {
            let length = js_length(str_param(&client, key).trim());
            if length == 0 || length > 100 {
                return Err(self.err(
                    RollErrorCode::INVALID_PARAMS,
                    format!("client.{key} has 1 to 100 characters after trimming"),
                ));
            }
        }
        let offered = strings_param(params, "protocolVersions");
        // The lock is released before an error is built (building it reads the version).
        let negotiated = lock(&self.conn).initialize(&offered);
        let version = negotiated.map_err(|e| self.negotiation_error(&e))?;
        let config = &self.face.config;
        tracing::info!(version = %version, client = %str_param(&client, "name"), "initialized");
        let result = json!({
            "protocolVersion": version.as_str(),
            "runtimeInstanceId": self.face.runtime.instance_id(),
            "server": {
                "name": config.server_name,
                "version": config.server_version,
                "runtimeVersion": config.runtime_version,
            },
            "features": self.features(version),
            "limits": {
                "maxFrameBytes": config.max_frame_bytes,
                "maxPageSize": config.max_page_size,
                "eventReplay": version.capabilities().durable_events,
                "idempotencyCacheEntries": self.face.runtime.idempotency().limits().entries,
                "maxAttachmentBytes": agentwire_roll::constants::MAX_ATTACHMENT_BYTES,
                "maxAttachmentChunkBytes": agentwire_roll::constants::MAX_ATTACHMENT_CHUNK_BYTES,
                "maxTurnAttachments": agentwire_roll::constants::MAX_TURN_ATTACHMENTS,
                "maxStagedAttachments": agentwire_roll::constants::MAX_STAGED_ATTACHMENTS,
            },
        });
        if !version.capabilities().server_request_capability_negotiation {
            // 1.1 is interaction-ready at once: pending interactions follow the answer.
            self.deliver_pending_after(ctx);
        }
        Ok(project_initialize_result(&result, version))
    }

    fn set_capabilities(self: &Arc<Self>, ctx: &RequestContext, params: &Value) -> Answer {
        let revision = params.get("revision").and_then(Value::as_u64).unwrap_or(0);
        let methods = strings_param(params, "serverRequestMethods");
        let updated = lock(&self.conn).set_capabilities(revision, &methods);
        let update = updated.map_err(|e| self.negotiation_error(&e))?;
        for method in &update.revoked {
            self.revoke(*method);
        }
        self.deliver_pending_after(ctx);
        Ok(json!({
            "revision": update.ack.revision,
            "acceptedServerRequestMethods": update.ack.accepted.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        }))
    }

    /// Once this request's answer is queued, delivers every pending interaction the client
    /// now accepts: nothing reaches the client before the answer that allowed it.
    fn deliver_pending_after(self: &Arc<Self>, ctx: &RequestContext) {
        let session = Arc::clone(self);
        ctx.after_answer(move || {
            tokio::spawn(async move { session.deliver_pending().await });
        });
    }

    async fn deliver_pending(self: Arc<Self>) {
        let runtime = &self.face.runtime;
        for thread_id in runtime.thread_ids() {
            let Ok(mut pending) = runtime
                .inspect(&thread_id, |state| {
                    state
                        .pending
                        .values()
                        .cloned()
                        .collect::<Vec<Interaction>>()
                })
                .await
            else {
                continue;
            };
            pending.sort_by(|a, b| a.expires_at_ms.cmp(&b.expires_at_ms).then(a.id.cmp(&b.id)));
            for interaction in pending {
                self.deliver(&thread_id, interaction).await;
            }
        }
    }

    /// A revoked handler: its pending interactions are aborted, late results discarded.
    fn revoke(&self, method: ServerRequestMethod) {
        let revoked: Vec<(String, Delivery)> = lock(&self.deliveries)
            .extract_if(|_, d| d.method == method)
            .collect();
        for (interaction_id, delivery) in revoked {
            if let Some(task) = &delivery.task {
                task.abort();
            }
            let runtime = self.face.runtime.clone();
            let reason = format!("the client no longer handles {}", method.as_str());
            let thread_id = delivery.thread_id.clone();
            self.send_cancel(&interaction_id, &delivery, &reason);
            tokio::spawn(async move {
                let _ = runtime
                    .resolve(
                        &thread_id,
                        &interaction_id,
                        Resolution::Cancelled { reason },
                    )
                    .await;
            });
        }
    }

    async fn turn_start(&self, params: &Value) -> Answer {
        let thread_id = str_param(params, "threadId");
        let turn_id = str_param(params, "turnId");
        let input = params.get("input").cloned().unwrap_or(Value::Null);
        let text = str_param(&input, "text").to_owned();
        let ids = strings_param(&input, "attachments");
        if text.is_empty() && ids.is_empty() {
            return Err(self.err(
                RollErrorCode::INVALID_PARAMS,
                "a turn needs text or attachments",
            ));
        }
        let parts = if ids.is_empty() {
            Vec::new()
        } else {
            self.attachment_store()?
                .for_turn(thread_id, &ids)
                .await
                .map_err(|e| self.attachment_error(&e))?
        };
        let accepted = json!({"accepted": true, "turnId": turn_id});
        // Attached before the turn starts, so its first events reach this connection.
        let attached = lock(&self.attached).insert(thread_id.to_owned());
        match self
            .face
            .runtime
            .start_turn(
                thread_id,
                turn_id,
                TurnInput {
                    text,
                    attachments: parts,
                },
            )
            .await
        {
            Ok(()) => Ok(accepted),
            // A second start of the same turn is a retry: the first start stands.
            Err(RuntimeError::TurnAlreadyStarted { .. }) => Ok(accepted),
            Err(error) => {
                if attached {
                    lock(&self.attached).remove(thread_id);
                }
                Err(self.runtime_error(&error))
            }
        }
    }

    async fn approval_respond(&self, params: &Value) -> Answer {
        let thread_id = str_param(params, "threadId");
        let turn_id = str_param(params, "turnId");
        let approval_id = str_param(params, "approvalId");
        let pending = self
            .face
            .runtime
            .inspect(thread_id, |state| {
                state
                    .pending
                    .values()
                    .find(|i| i.ask.approval_id() == Some(approval_id) && i.turn_id == turn_id)
                    .cloned()
            })
            .await
            .map_err(|e| self.runtime_error(&e))?;
        let Some(interaction) = pending else {
            return Err(self.err(
                RollErrorCode::APPROVAL_NOT_FOUND,
                format!("approval {approval_id} is not pending on turn {turn_id}"),
            ));
        };
        let resolution = match str_param(params, "decision") {
            "approve" => Resolution::Approved,
            _ => Resolution::Rejected {
                reason: params
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
        };
        self.face
            .runtime
            .resolve(thread_id, &interaction.id, resolution)
            .await
            .map_err(|e| self.runtime_error(&e))?;
        Ok(json!({"resolved": true}))
    }
}

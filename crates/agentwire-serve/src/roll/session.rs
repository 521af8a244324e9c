//! One Roll connection: the request dispatcher, the event pump and the server-request
//! deliveries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use agentwire_events::{After, Position, ThreadId};
use agentwire_jsonrpc::{
    CallError, ErrorObject, Event, Handlers, Id, Peer, PendingCall, RequestContext,
};
use agentwire_roll::approval::ApprovalDecision;
use agentwire_roll::constants::{DEFAULT_PAGE_LIMIT, js_length};
use agentwire_roll::cursor::Uuid128;
use agentwire_roll::negotiation::{Connection, NegotiationError};
use agentwire_roll::parse::{ServerRequestResult, parse_server_request_result};
use agentwire_roll::project::{
    project_event_envelope, project_initialize_result, project_operation_view,
    project_server_request_cancel_params, project_server_request_params, project_thread_snapshot,
};
use agentwire_roll::schema;
use agentwire_roll::user_input::{Control, UserInputResult, normalize_user_input_result_for_form};
use agentwire_roll::{
    EventCursor, Feature, Method, ProtocolVersion, RollErrorCode, ServerRequestMethod,
};
use agentwire_runtime::{
    Admission, AttachmentError, AttachmentStore, Interaction, InteractionKind, Operation,
    Published, Resolution, RuntimeError, StageRequest, StageSource, StampedEvent, TurnInput,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::wire::{self, SnapshotPaging};
use super::{RollFace, roll_error};

/// Events read from the log per page while replaying.
const REPLAY_PAGE: usize = 500;
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
            RuntimeError::InvalidInput(_) => RollErrorCode::INVALID_PARAMS,
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

    /// Runs a mutation once per `requestId`: a retry with the same params gets the first
    /// answer; the same id with other params is `INVALID_PARAMS`.
    async fn idempotent(
        self: Arc<Self>,
        ctx: RequestContext,
        method: Method,
        params: Value,
    ) -> Answer {
        let request_id = str_param(&params, "requestId").to_owned();
        let fingerprint = format!("{}\n{}", method.as_str(), canonical(&params));
        loop {
            let done = self.face.idempotency_done().notified();
            let admission = self.face.idempotency().admit(&request_id, &fingerprint);
            match admission {
                Admission::Run => break,
                Admission::Replay(answer) => return answer,
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
        {
            let mut cache = self.face.idempotency();
            if transient {
                cache.abandon(&request_id);
            } else {
                cache.complete(&request_id, answer.clone());
            }
        }
        self.face.idempotency_done().notify_waiters();
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

    fn attachment_store(&self) -> Result<&AttachmentStore, ErrorObject> {
        self.face.config.attachments.as_ref().ok_or_else(|| {
            self.err(
                RollErrorCode::CAPABILITY_UNAVAILABLE,
                "this runtime does not accept attachments",
            )
        })
    }

    fn attachment_error(&self, error: &AttachmentError) -> ErrorObject {
        let code = match error.roll_code().and_then(RollErrorCode::from_wire) {
            Some(code) => code,
            None if error.is_invalid_params() => RollErrorCode::INVALID_PARAMS,
            None => {
                tracing::error!(%error, code = error.code(), "the attachment store failed");
                RollErrorCode::INTERNAL_ERROR
            }
        };
        roll_error(
            self.error_version(),
            code,
            error.to_string(),
            Some(json!({"code": error.code()})),
        )
    }

    async fn attachment(&self, method: Method, params: &Value) -> Answer {
        let store = self.attachment_store()?;
        let thread_id = str_param(params, "threadId");
        // Attachments belong to a served thread.
        self.ensure_thread(thread_id)?;
        let attachment_id = str_param(params, "attachmentId");
        match method {
            Method::AttachmentStage => {
                let source = match (str_param(params, "source"), params.get("sourcePath")) {
                    ("local-path", Some(Value::String(path))) => {
                        StageSource::LocalPath(std::path::PathBuf::from(path))
                    }
                    ("chunks", None) => StageSource::Chunks,
                    _ => {
                        return Err(self.err(
                            RollErrorCode::INVALID_PARAMS,
                            "source local-path needs sourcePath; source chunks forbids it",
                        ));
                    }
                };
                let request = StageRequest {
                    file_name: str_param(params, "fileName").to_owned(),
                    media_type: str_param(params, "mediaType").to_owned(),
                    bytes: params.get("bytes").and_then(Value::as_u64).unwrap_or(0),
                    sha256: str_param(params, "sha256").to_owned(),
                    source,
                };
                let staged = store
                    .stage(thread_id, request)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                let mut out =
                    json!({"attachmentId": staged.attachment_id, "state": staged.state.as_str()});
                if let Some(descriptor) = &staged.descriptor {
                    out["descriptor"] = wire::attachment_descriptor(descriptor);
                }
                Ok(out)
            }
            Method::AttachmentChunk => {
                use base64::Engine as _;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(str_param(params, "dataBase64"))
                    .map_err(|e| {
                        self.err(RollErrorCode::INVALID_PARAMS, format!("dataBase64: {e}"))
                    })?;
                let sequence = params.get("sequence").and_then(Value::as_u64).unwrap_or(0);
                let progress = store
                    .chunk(thread_id, attachment_id, sequence, &data)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(
                    json!({"receivedBytes": progress.received_bytes, "nextSequence": progress.next_sequence}),
                )
            }
            Method::AttachmentCommit => {
                let descriptor = store
                    .commit(thread_id, attachment_id)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(json!({"descriptor": wire::attachment_descriptor(&descriptor)}))
            }
            _ => {
                let released = store
                    .release(thread_id, attachment_id)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(json!({"released": released}))
            }
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
                "idempotencyCacheEntries": config.idempotency_entries,
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

    async fn thread_result(&self, thread_id: &str) -> Answer {
        let summary = self
            .face
            .runtime
            .inspect(thread_id, |state| wire::summary_of(thread_id, state))
            .await
            .map_err(|e| self.runtime_error(&e))?;
        Ok(json!({"thread": wire::thread_summary(&summary)}))
    }

    fn page_limit(&self, params: &Value) -> Result<usize, ErrorObject> {
        let limit = params
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_PAGE_LIMIT);
        if limit == 0 || limit > self.face.config.max_page_size {
            return Err(self.err(
                RollErrorCode::INVALID_PARAMS,
                format!("limit must be 1 to {}", self.face.config.max_page_size),
            ));
        }
        Ok(usize::try_from(limit).unwrap_or(usize::MAX))
    }

    async fn thread_list(&self, params: &Value) -> Answer {
        let limit = self.page_limit(params)?;
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(digits) => digits.parse::<usize>().unwrap_or(usize::MAX),
        };
        let summaries = self.face.runtime.summaries().await;
        let end = start.saturating_add(limit).min(summaries.len());
        let items: Vec<Value> = summaries
            .get(start.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(wire::thread_summary)
            .collect();
        let next = (end < summaries.len()).then(|| end.to_string());
        Ok(json!({"items": items, "nextCursor": next}))
    }

    fn event_cursor(&self, thread_id: &str, timeline_len: usize) -> Option<String> {
        timeline_len
            .checked_sub(1)
            .map(|last| self.face.cursor(thread_id, last as u64).as_str().to_owned())
    }

    async fn snapshot(&self, version: ProtocolVersion, thread_id: &str, params: &Value) -> Answer {
        let limit = self.page_limit(params)?;
        let recovery = params.get("recovery") == Some(&Value::Bool(true));
        let paging = SnapshotPaging {
            message_before: params.get("messageBeforeSequence").and_then(Value::as_u64),
            operation_before: params
                .get("operationBeforeSequence")
                .and_then(Value::as_u64),
            limit,
        };
        let snapshot = self
            .face
            .runtime
            .inspect(thread_id, |state| {
                let cursor = self.event_cursor(thread_id, state.timeline.len());
                if recovery {
                    wire::recovery_snapshot(thread_id, state, cursor)
                } else {
                    wire::full_snapshot(thread_id, state, paging, cursor)
                }
            })
            .await
            .map_err(|e| self.runtime_error(&e))?;
        Ok(project_thread_snapshot(&snapshot, version))
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
        if !self.face.remember_turn(turn_id) {
            // A second start of the same turn is a retry: the first start stands.
            return Ok(accepted);
        }
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
            Err(error) => {
                self.face.forget_turn(turn_id);
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

    async fn resume(
        &self,
        ctx: &RequestContext,
        version: ProtocolVersion,
        params: &Value,
    ) -> Answer {
        let thread_id = str_param(params, "threadId");
        let runtime = &self.face.runtime;
        // Attached before the replay's end is read, so every later event is sent live: the
        // replay and the live stream may overlap (the client de-duplicates by eventId) but
        // never leave a gap.
        let attached = lock(&self.attached).insert(thread_id.to_owned());
        let timeline = match runtime
            .inspect(thread_id, |state| state.timeline.clone())
            .await
        {
            Ok(timeline) => timeline,
            Err(error) => {
                if attached {
                    lock(&self.attached).remove(thread_id);
                }
                return Err(self.runtime_error(&error));
            }
        };
        let gap = |message: String| self.err(RollErrorCode::EVENT_CURSOR_GAP, message);
        let checkpoint = match params.get("afterCursor").and_then(Value::as_str) {
            None => None,
            Some(text) => {
                let cursor = EventCursor::parse(text).map_err(|e| gap(e.to_string()))?;
                cursor
                    .ensure_log(&self.face.event_log_id(thread_id))
                    .map_err(|e| gap(e.to_string()))?;
                self.face
                    .key()
                    .verify(&cursor)
                    .map_err(|e| gap(e.to_string()))?;
                if cursor.sequence() >= timeline.len() as u64 {
                    return Err(gap(format!(
                        "the cursor is beyond the thread's {} durable events",
                        timeline.len()
                    )));
                }
                Some(cursor)
            }
        };
        let log_thread = ThreadId::new(thread_id)
            .map_err(|e| self.err(RollErrorCode::THREAD_NOT_FOUND, e.to_string()))?;
        let low_watermark = runtime
            .log()
            .thread(&log_thread)
            .await
            .map_err(|e| self.runtime_error(&RuntimeError::Log(e)))?
            .map_or(0, |info| info.low_watermark);
        let start = checkpoint.as_ref().map_or(0, |c| c.sequence() as usize + 1);
        let expired = match &checkpoint {
            None => low_watermark > 0,
            Some(c) => timeline[c.sequence() as usize] < low_watermark,
        };
        if expired {
            return Err(self.err(
                RollErrorCode::EVENT_CURSOR_EXPIRED,
                "the events after this cursor were trimmed from the log",
            ));
        }
        let peer = ctx.peer();
        let mut ordinal = start;
        let after = match timeline.get(start) {
            Some(0) | None => After::Start,
            Some(&seq) => After::Position(Position {
                log_id: runtime.log().log_id(),
                seq: seq - 1,
            }),
        };
        // The next page is read and decoded while this one is encoded and written.
        let total = timeline.len();
        let log_id = self.face.event_log_id(thread_id);
        let mut pages = read_ahead(
            Arc::clone(runtime.log()),
            log_thread,
            after,
            Arc::new(timeline),
            start,
        );
        while ordinal < total {
            let Some(page) = pages.recv().await else {
                break;
            };
            let events = page.map_err(|e| match e {
                ReplayError::Log(agentwire_events::Error::Expired { .. }) => self.err(
                    RollErrorCode::EVENT_CURSOR_EXPIRED,
                    "the events after this cursor were trimmed from the log",
                ),
                ReplayError::Log(other) => self.runtime_error(&RuntimeError::Log(other)),
                ReplayError::Undecodable(reason) => self.err(
                    RollErrorCode::INTERNAL_ERROR,
                    format!("undecodable event: {reason}"),
                ),
            })?;
            if let Some((last, _)) = events.last() {
                ordinal = *last as usize + 1;
            }
            let batch: Vec<_> = events
                .iter()
                .filter_map(|(ordinal, event)| {
                    self.durable_envelope(version, thread_id, &log_id, *ordinal, event)
                })
                .collect();
            peer.notify_batch("runtime.event", &batch)
                .await
                .map_err(|_| self.err(RollErrorCode::RUNTIME_CLOSING, "connection closed"))?;
        }
        let through = self.event_cursor(thread_id, total).filter(|_| total > 0);
        Ok(json!({
            "throughCursor": through,
            "replayedCount": ordinal.saturating_sub(start),
        }))
    }

    fn envelope(
        &self,
        thread_id: &str,
        turn_id: Option<&str>,
        at_ms: u64,
        event: Value,
    ) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("protocolVersion".into(), json!("1.5"));
        out.insert(
            "runtimeInstanceId".into(),
            json!(self.face.runtime.instance_id()),
        );
        out.insert("sequence".into(), json!(self.face.next_sequence()));
        out.insert("timestamp".into(), json!(wire::timestamp(at_ms)));
        out.insert("threadId".into(), json!(thread_id));
        if let Some(turn_id) = turn_id {
            out.insert("turnId".into(), json!(turn_id));
        }
        out.insert("event".into(), event);
        out
    }

    /// The `runtime.event` envelope of a durable event as `version` carries it, or `None` when
    /// the event has no Roll form there.
    /// The envelope of a durable event; `log_id` is the thread's event log id
    /// ([`RollFace::event_log_id`], computed once per replay).
    fn durable_envelope<'a>(
        &'a self,
        version: ProtocolVersion,
        thread_id: &'a str,
        log_id: &Uuid128,
        ordinal: u64,
        stamped: &'a StampedEvent,
    ) -> Option<wire::DurableEnvelope<'a>> {
        let event = wire::durable_event(&stamped.event)?.project(version)?;
        let (durability, event_id, cursor) = if version.capabilities().durable_events {
            let cursor = self.face.key().mint(*log_id, ordinal);
            (
                Some("durable"),
                Some(cursor.event_id_text()),
                Some(cursor.into_text()),
            )
        } else {
            (None, None, None)
        };
        Some(wire::DurableEnvelope {
            protocol_version: version.as_str(),
            runtime_instance_id: self.face.runtime.instance_id(),
            sequence: self.face.next_sequence(),
            timestamp: wire::timestamp(stamped.at_ms),
            thread_id,
            turn_id: stamped.event.turn_id(),
            event,
            durability,
            event_id,
            cursor,
        })
    }

    async fn pump(self: Arc<Self>, mut published: broadcast::Receiver<Published>) {
        loop {
            match published.recv().await {
                Ok(event) => self.forward(event).await,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "the connection fell behind the runtime; the durable events it missed are read back with runtime.events.resume"
                    );
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    async fn forward(self: &Arc<Self>, published: Published) {
        let Some(version) = self.version() else {
            return;
        };
        let Some(peer) = self.peer.get() else {
            return;
        };
        match published {
            Published::Durable {
                thread_id,
                ordinal,
                event,
                ..
            } => {
                match &event.event {
                    // The server request goes first; the view-only event follows it.
                    agentwire_runtime::ThreadEvent::InteractionOpened { interaction } => {
                        self.deliver(&thread_id, interaction.clone()).await;
                    }
                    agentwire_runtime::ThreadEvent::InteractionResolved {
                        interaction_id,
                        resolution,
                        ..
                    } => self.withdraw(interaction_id, resolution),
                    _ => {}
                }
                let Some(ordinal) = ordinal else { return };
                if !self.is_attached(&thread_id) {
                    return;
                }
                if let Some(envelope) = self.durable_envelope(
                    version,
                    &thread_id,
                    &self.face.event_log_id(&thread_id),
                    ordinal,
                    &event,
                ) {
                    let _ = peer.notify("runtime.event", &envelope).await;
                }
            }
            Published::Live {
                thread_id,
                turn_id,
                event,
            } => {
                if !self.is_attached(&thread_id) {
                    return;
                }
                let at = self.face.runtime.now_ms();
                let mut envelope =
                    self.envelope(&thread_id, Some(&turn_id), at, wire::live_event(&event));
                envelope.insert("durability".into(), json!("ephemeral"));
                if let Ok(envelope) = project_event_envelope(&Value::Object(envelope), version) {
                    let _ = peer.notify("runtime.event", &envelope).await;
                }
            }
        }
    }

    /// Sends an interaction as a server request, if the client accepts its method now and it
    /// is not already out.
    async fn deliver(self: &Arc<Self>, thread_id: &str, interaction: Interaction) {
        let Some(version) = self.version() else {
            return;
        };
        let Some(peer) = self.peer.get() else {
            return;
        };
        let Some(method) = ServerRequestMethod::from_wire(wire::interaction_method(&interaction))
        else {
            return;
        };
        if lock(&self.conn).check_server_request(method).is_err() {
            return;
        }
        if interaction.expires_at_ms <= self.face.runtime.now_ms() {
            return;
        }
        {
            let mut deliveries = lock(&self.deliveries);
            if deliveries.contains_key(&interaction.id) {
                return;
            }
            deliveries.insert(
                interaction.id.clone(),
                Delivery {
                    thread_id: thread_id.to_owned(),
                    method,
                    approval_id: interaction.ask.approval_id().map(str::to_owned),
                    rpc_id: None,
                    task: None,
                    withdrawn: None,
                },
            );
        }
        let params = match project_server_request_params(
            method.as_str(),
            &wire::server_request_params(thread_id, &interaction),
            version,
        ) {
            Ok(params) => params,
            Err(error) => {
                lock(&self.deliveries).remove(&interaction.id);
                tracing::debug!(%error, "interaction not deliverable on this version");
                return;
            }
        };
        // Human interactions wait for the person, not for a request timeout.
        let call = match peer.start_request(method.as_str(), &params, None).await {
            Ok(call) => call,
            Err(error) => {
                lock(&self.deliveries).remove(&interaction.id);
                tracing::warn!(%error, "could not send {}", method.as_str());
                return;
            }
        };
        let rpc_id = call.id().clone();
        let interaction_id = interaction.id.clone();
        let session = Arc::clone(self);
        let owner = thread_id.to_owned();
        let task =
            tokio::spawn(
                async move { session.await_answer(owner, interaction, method, call).await },
            );
        let withdrawn = {
            let mut deliveries = lock(&self.deliveries);
            match deliveries.get_mut(&interaction_id) {
                Some(delivery) => {
                    delivery.rpc_id = Some(rpc_id);
                    delivery.task = Some(task.abort_handle());
                    delivery
                        .withdrawn
                        .take()
                        .map(|reason| (reason, deliveries.remove(&interaction_id)))
                }
                None => None,
            }
        };
        if let Some((reason, Some(delivery))) = withdrawn {
            task.abort();
            self.send_cancel(&interaction_id, &delivery, &reason);
        }
    }

    async fn await_answer(
        self: Arc<Self>,
        thread_id: String,
        interaction: Interaction,
        method: ServerRequestMethod,
        call: PendingCall,
    ) {
        let outcome = call.answer().await;
        if lock(&self.deliveries).remove(&interaction.id).is_none() {
            // Withdrawn (resolved otherwise, revoked, disconnected): a late answer is dropped.
            return;
        }
        let Some(version) = self.version() else {
            return;
        };
        let runtime = &self.face.runtime;
        let taken = match outcome {
            Ok(value) => resolution_of(version, method, &interaction, &value),
            Err(CallError::Closed) => return,
            Err(CallError::Remote(error)) => Err(format!(
                "the client answered {} with error {}: {}",
                method.as_str(),
                error.code,
                error.message
            )),
            Err(other) => Err(format!("{} failed: {other}", method.as_str())),
        };
        let result = match taken {
            Ok(resolution) => {
                runtime
                    .resolve(&thread_id, &interaction.id, resolution)
                    .await
            }
            Err(reason) => {
                tracing::warn!(interaction = %interaction.id, %reason, "failing closed");
                runtime
                    .fail_interaction(&thread_id, &interaction.id, &reason)
                    .await
            }
        };
        if let Err(error) = result {
            tracing::debug!(%error, "the interaction ended before the answer was taken");
        }
    }

    /// The interaction ended without this connection's answer: its server request is
    /// withdrawn with `runtime.serverRequest.cancel`.
    fn withdraw(&self, interaction_id: &str, resolution: &Resolution) {
        let reason = match resolution {
            Resolution::Expired => "the interaction expired".to_owned(),
            Resolution::Cancelled { reason } if !reason.is_empty() => reason.clone(),
            _ => "the interaction was resolved".to_owned(),
        };
        let delivery = {
            let mut deliveries = lock(&self.deliveries);
            match deliveries.get_mut(interaction_id) {
                Some(d) if d.rpc_id.is_none() => {
                    d.withdrawn = Some(reason.clone());
                    None
                }
                Some(_) => deliveries.remove(interaction_id),
                None => None,
            }
        };
        if let Some(delivery) = delivery {
            if let Some(task) = &delivery.task {
                task.abort();
            }
            self.send_cancel(interaction_id, &delivery, &reason);
        }
    }

    fn send_cancel(&self, interaction_id: &str, delivery: &Delivery, reason: &str) {
        let (Some(version), Some(peer)) = (self.version(), self.peer.get()) else {
            return;
        };
        let mut full = json!({"interactionId": interaction_id, "reason": reason});
        if let Some(id) = &delivery.rpc_id {
            full["serverRequestId"] = serde_json::to_value(id).unwrap_or(Value::Null);
        }
        if let Some(approval_id) = &delivery.approval_id {
            full["approvalId"] = json!(approval_id);
        }
        let Ok(params) = project_server_request_cancel_params(&full, version) else {
            return;
        };
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify("runtime.serverRequest.cancel", &params).await;
        });
    }

    /// The connection closed: its server requests are gone. The interactions stay pending and
    /// are delivered again (new request id, same interaction id) on the next connection.
    fn disconnect(&self) {
        for (_, delivery) in lock(&self.deliveries).drain() {
            if let Some(task) = delivery.task {
                task.abort();
            }
        }
    }
}

/// What a client's answer to a server request resolves, or why it cannot be taken (the
/// runtime then fails closed).
fn resolution_of(
    version: ProtocolVersion,
    method: ServerRequestMethod,
    interaction: &Interaction,
    value: &Value,
) -> Result<Resolution, String> {
    let parsed = parse_server_request_result(version, method.as_str(), value)
        .map_err(|e| format!("invalid {} result: {e}", method.as_str()))?;
    match (parsed, &interaction.ask) {
        (
            ServerRequestResult::Approval(ApprovalDecision::Approve {}),
            InteractionKind::Approval { .. },
        ) => Ok(Resolution::Approved),
        (
            ServerRequestResult::Approval(ApprovalDecision::Reject { reason }),
            InteractionKind::Approval { .. },
        ) => Ok(Resolution::Rejected { reason }),
        (ServerRequestResult::UserInput(result), InteractionKind::UserInput { controls, .. }) => {
            let controls: Vec<Control> = serde_json::from_value(controls.clone())
                .map_err(|e| format!("the form cannot be read back: {e}"))?;
            match normalize_user_input_result_for_form(&controls, result)
                .map_err(|e| format!("the submitted values do not fit the form: {e}"))?
            {
                UserInputResult::Submitted { values } => Ok(Resolution::Submitted {
                    values: serde_json::to_value(values).unwrap_or(Value::Null),
                }),
                UserInputResult::Cancelled { reason } => Ok(Resolution::Cancelled {
                    reason: reason.unwrap_or_else(|| "the user closed the form".to_owned()),
                }),
            }
        }
        _ => Err("the answer does not match the interaction".to_owned()),
    }
}

/// Why a replay stopped early.
enum ReplayError {
    Log(agentwire_events::Error),
    Undecodable(String),
}

/// The timeline events of `thread` from ordinal `start` (`after` is the log position before
/// it), page by page with their ordinals, read and decoded by a task one page ahead of the
/// receiver, up to the end of `timeline` or the first error; the task ends when the receiver
/// is dropped.
fn read_ahead(
    log: Arc<dyn agentwire_events::EventLog>,
    thread: ThreadId,
    mut after: After,
    timeline: Arc<Vec<u64>>,
    start: usize,
) -> tokio::sync::mpsc::Receiver<Result<Vec<(u64, StampedEvent)>, ReplayError>> {
    let (pages, received) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let mut ordinal = start;
        while ordinal < timeline.len() {
            let page = match log.read(&thread, after, REPLAY_PAGE).await {
                Ok(page) => page,
                Err(error) => {
                    let _ = pages.send(Err(ReplayError::Log(error))).await;
                    return;
                }
            };
            let Some(last) = page.events.last() else {
                return;
            };
            after = After::Position(last.position(log.log_id()));
            let mut events = Vec::with_capacity(page.events.len());
            for stored in &page.events {
                if ordinal >= timeline.len() || stored.seq != timeline[ordinal] {
                    continue;
                }
                match serde_json::from_slice::<StampedEvent>(&stored.payload) {
                    Ok(event) => events.push((ordinal as u64, event)),
                    Err(error) => {
                        let _ = pages
                            .send(Err(ReplayError::Undecodable(error.to_string())))
                            .await;
                        return;
                    }
                }
                ordinal += 1;
            }
            let at_head = page.at_head();
            if pages.send(Ok(events)).await.is_err() || at_head {
                return;
            }
        }
    });
    received
}

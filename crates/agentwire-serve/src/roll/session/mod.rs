//! One Roll connection: its state, and each request checked, decoded into the method table's
//! params type and dispatched by the table (`MethodParams::dispatch`) to the handler in `calls`.
//! The event stream (live events and resume replay) is in `events`, the server-request
//! deliveries in `interactions`, the thread reads in `threads`, the attachment methods in
//! `attachments`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::kept::Once;
use agentwire_jsonrpc::{ErrorObject, Event, Handlers, Id, Peer, RequestContext};
use agentwire_roll::constants::js_length;
use agentwire_roll::negotiation::{Connection, NegotiationError};
use agentwire_roll::parse::ParseError;
use agentwire_roll::types::{FeatureName, OperationParams};
use agentwire_roll::{
    Feature, Method, MethodParams, ProtocolVersion, RollErrorCode, ServerRequestMethod,
};
use agentwire_runtime::{Interaction, Operation, Resolution, RuntimeError, fingerprint};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::wire;
use super::{RollFace, roll_error};

mod attached;
mod attachments;
mod calls;
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
    /// The client answered; the answer is being recorded. Kept until it is, so the
    /// interaction, still pending, is not delivered to this connection again (a capability
    /// change delivers what is pending), and never withdrawn with a cancel.
    answered: bool,
}

pub(crate) struct Session {
    face: Arc<RollFace>,
    peer: OnceLock<Peer>,
    conn: Mutex<Connection>,
    attached: Mutex<attached::Attached>,
    deliveries: Mutex<HashMap<String, Delivery>>,
    /// Held by the connection's replay (`runtime.events.resume`): one at a time.
    replaying: tokio::sync::Mutex<()>,
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
        attached: Mutex::new(attached::Attached::default()),
        deliveries: Mutex::new(HashMap::new()),
        replaying: tokio::sync::Mutex::new(()),
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

/// The idempotency scope of Roll's `requestId`s: one per runtime, shared by its connections
/// (a retry may come on a new connection).
const IDEMPOTENCY_SCOPE: &str = "roll";

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
        lock(&self.attached).keep(thread_id);
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
            RuntimeError::InvalidInput(_)
            | RuntimeError::TurnIdInUse { .. }
            | RuntimeError::ThreadArchived(_) => RollErrorCode::INVALID_PARAMS,
            RuntimeError::TurnAlreadyStarted { .. } => RollErrorCode::TURN_ALREADY_ACTIVE,
            RuntimeError::AnswerRefused { .. } => RollErrorCode::APPROVAL_NOT_FOUND,
            _ => match error.log_error() {
                Some(LogError::Closed) => RollErrorCode::RUNTIME_CLOSING,
                Some(LogError::CommitOutcomeUnknown { .. }) => RollErrorCode::OUTCOME_UNKNOWN,
                Some(LogError::ThreadDeleted { .. }) => RollErrorCode::THREAD_NOT_FOUND,
                Some(LogError::RecordTooLarge { .. }) => RollErrorCode::INVALID_PARAMS,
                _ => RollErrorCode::INTERNAL_ERROR,
            },
        };
        if code == RollErrorCode::INTERNAL_ERROR {
            tracing::error!(%error, code = error.code(), "a runtime call failed");
        }
        self.err(code, error.to_string())
    }

    fn wire_error(&self, error: &wire::WireError) -> ErrorObject {
        tracing::error!(%error, "a record has no wire form");
        self.err(RollErrorCode::INTERNAL_ERROR, error.to_string())
    }

    /// The operation the params name, its sequence and its completion time (`None` when the
    /// thread has no such operation).
    async fn operation(
        &self,
        params: &OperationParams,
    ) -> Result<Option<(Arc<Operation>, usize, u64)>, ErrorObject> {
        let operation_id = params.operation_id.as_str();
        self.face
            .runtime
            .inspect(params.thread_id.as_str(), |state| {
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

    /// The features announced on `version`.
    fn features(&self, version: ProtocolVersion) -> Vec<FeatureName> {
        Feature::ALL
            .into_iter()
            .filter(|f| f.is_available(version))
            .filter(|f| match f {
                Feature::ReasoningSummary => false,
                Feature::Attachments => self.face.config.attachments.is_some(),
                _ => true,
            })
            .filter_map(|f| wire::wire_value("a feature", f.as_str()).ok())
            .collect()
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
        // An answered request is the client's already: its answer is being recorded.
        let revoked: Vec<(String, Delivery)> = lock(&self.deliveries)
            .extract_if(|_, d| d.method == method && !d.answered)
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

    /// Answers one request: checked against the connection's state, its params decoded once
    /// into the method table's type under the negotiated version (the schema checks them
    /// first), a mutation run once per `requestId`, then the table's dispatch.
    async fn handle(self: Arc<Self>, ctx: RequestContext, params: Option<Value>) -> Answer {
        let method = {
            let conn = lock(&self.conn);
            conn.check_call(ctx.method())
        }
        .map_err(|e| self.negotiation_error(&e))?;
        let params = params.unwrap_or(Value::Null);
        // `initialize` has one shape in every version; before it, the newest one checks it.
        let version = self.version().unwrap_or(agentwire_roll::LATEST_VERSION);
        let typed = method
            .parse_params(version, &params)
            .map_err(|e| self.parse_error(method, &e))?;
        let call = Call {
            session: self,
            ctx,
            version,
        };
        if method.is_idempotent_mutation() {
            return call.idempotent(method, typed, &params).await;
        }
        call.answer(typed).await
    }

    /// The answer to params that do not decode: `INVALID_PARAMS` with the schema's issues; an
    /// `afterCursor` that is not one of this runtime's cursors is `EVENT_CURSOR_GAP`.
    fn parse_error(&self, method: Method, error: &ParseError) -> ErrorObject {
        match error {
            ParseError::Schema { issues, .. } => {
                let details: Vec<Value> = issues
                    .iter()
                    .take(MAX_REPORTED_ISSUES)
                    .map(|i| json!({"instancePath": i.instance_path, "message": i.message}))
                    .collect();
                roll_error(
                    self.error_version(),
                    RollErrorCode::INVALID_PARAMS,
                    format!("invalid {} params", method.as_str()),
                    Some(json!({"issues": details})),
                )
            }
            ParseError::Decode(reason) if method == Method::RuntimeEventsResume => self.err(
                RollErrorCode::EVENT_CURSOR_GAP,
                format!("the cursor is not one this runtime gives out: {reason}"),
            ),
            other => self.err(
                RollErrorCode::INVALID_PARAMS,
                format!("invalid {} params: {other}", method.as_str()),
            ),
        }
    }
}

/// One request being answered: the connection, the request and the version it is answered in.
/// The method table's [`RollHandler`] is implemented on it (`calls`).
struct Call {
    session: Arc<Session>,
    ctx: RequestContext,
    version: ProtocolVersion,
}

impl Call {
    /// The table's dispatch, the typed result written as the answer.
    async fn answer(&self, params: MethodParams) -> Answer {
        let result = params.dispatch(self).await?;
        serde_json::to_value(&result).map_err(|error| {
            self.session.err(
                RollErrorCode::INTERNAL_ERROR,
                format!("the result cannot be written: {error}"),
            )
        })
    }

    /// Runs a mutation once per `requestId` (the runtime's idempotency store, scope
    /// [`IDEMPOTENCY_SCOPE`]): a retry with the same params gets the first answer; the same id
    /// with other params is `INVALID_PARAMS`. A retryable failure is not kept. `raw` are the
    /// params as sent, fingerprinted in canonical form.
    async fn idempotent(&self, method: Method, params: MethodParams, raw: &Value) -> Answer {
        // Every mutation's params have a `requestId`, which the schema requires.
        let request_id = raw
            .get("requestId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let print = fingerprint(&[
            method.as_str().as_bytes(),
            crate::kept::canonical(raw).as_bytes(),
        ]);
        let store = self.session.face.runtime.idempotency();
        let keep = |answer: &Answer| {
            let transient = matches!(answer, Err(e) if e.data.as_ref()
                .and_then(|d| d.get("retryable"))
                .and_then(Value::as_bool)
                .unwrap_or(false));
            crate::kept::encode(answer).filter(|_| !transient)
        };
        let work = self.answer(params);
        let interrupted = crate::kept::encode(&Err(self
            .session
            .err(RollErrorCode::INTERNAL_ERROR, crate::kept::INTERRUPTED)))
        .unwrap_or_default();
        match crate::kept::once(
            store,
            IDEMPOTENCY_SCOPE,
            &request_id,
            &print,
            work,
            keep,
            interrupted,
        )
        .await
        {
            Once::Ran(answer) => answer,
            Once::Replayed(bytes) => crate::kept::decode(&bytes),
            Once::Mismatch => Err(self.session.err(
                RollErrorCode::INVALID_PARAMS,
                format!("requestId {request_id} was used for another mutation"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{
        AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
    };

    use crate::roll::{RollFace, RollFaceConfig};

    async fn face() -> (tempfile::TempDir, Arc<RollFace>) {
        let (dir, runtime) = crate::test_runtime().await;
        (dir, RollFace::new(runtime, RollFaceConfig::default()))
    }

    struct Client {
        w: WriteHalf<DuplexStream>,
        r: Lines<BufReader<ReadHalf<DuplexStream>>>,
    }

    impl Client {
        async fn send(&mut self, v: Value) {
            let mut line = serde_json::to_vec(&v).unwrap();
            line.push(b'\n');
            self.w.write_all(&line).await.unwrap();
        }
        async fn next(&mut self) -> Option<Value> {
            match tokio::time::timeout(Duration::from_secs(5), self.r.next_line()).await {
                Ok(Ok(Some(line))) => Some(serde_json::from_str(&line).unwrap()),
                _ => None,
            }
        }
        async fn answer(&mut self, id: u64) -> Option<Value> {
            loop {
                let v = self.next().await?;
                if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                    return Some(v);
                }
            }
        }
    }

    async fn connect(face: &Arc<RollFace>, version: &str) -> Client {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (sr, sw) = tokio::io::split(server);
        let face = Arc::clone(face);
        tokio::spawn(async move { face.serve(sr, sw).await });
        let (cr, cw) = tokio::io::split(client);
        let mut c = Client {
            w: cw,
            r: BufReader::new(cr).lines(),
        };
        c.send(
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersions":[version],"client":{"name":"t","version":"1"}}}),
        )
        .await;
        let init = c.answer(1).await.unwrap();
        assert!(init.get("result").is_some(), "{init}");
        c
    }

    /// A host that sends a mutation and disconnects, then retries it with the same requestId
    /// on a new connection, is answered: the first answer, or that the first was interrupted
    /// (its outcome unknown). The mutation never runs twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mutation_retried_after_a_disconnect_is_answered() {
        let (_dir, face) = face().await;
        let threads = || face.runtime().thread_ids().len();
        for attempt in 0..10u64 {
            let rid = format!("00000000-0000-4000-8000-{attempt:012x}");
            let mut c = connect(&face, "1.5").await;
            c.send(
                json!({"jsonrpc":"2.0","id":2,"method":"thread.create","params":{"requestId":rid}}),
            )
            .await;
            c.w.shutdown().await.unwrap();
            while c.next().await.is_some() {}
            let mut c2 = connect(&face, "1.5").await;
            c2.send(
                json!({"jsonrpc":"2.0","id":3,"method":"thread.create","params":{"requestId":rid}}),
            )
            .await;
            let answer = c2
                .answer(3)
                .await
                .unwrap_or_else(|| panic!("attempt {attempt}: the retry of requestId {rid} hangs"));
            // The first answer, or that the first was interrupted; never a second thread.
            match answer.get("result") {
                Some(result) => assert!(result["thread"]["id"].is_string(), "{answer}"),
                None => assert!(
                    answer["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("outcome is unknown")),
                    "{answer}"
                ),
            }
            assert!(
                threads() <= attempt as usize + 1,
                "attempt {attempt}: a second thread"
            );
        }
    }

    /// A refused resume (a cursor of another log: EVENT_CURSOR_GAP) leaves the connection
    /// unattached: it is not sent the thread's live events.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_resume_does_not_attach() {
        let (_dir, face) = face().await;
        let mut a = connect(&face, "1.5").await;
        a.send(json!({"jsonrpc":"2.0","id":2,"method":"thread.create","params":{"requestId":"00000000-0000-4000-8000-000000000001"}})).await;
        let created = a.answer(2).await.unwrap();
        let thread = created["result"]["thread"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut b = connect(&face, "1.5").await;
        b.send(json!({"jsonrpc":"2.0","id":2,"method":"runtime.events.resume","params":{"threadId":thread,
            "afterCursor":"rte1:11111111-1111-4111-8111-111111111111:0:22222222-2222-4222-8222-222222222222"}})).await;
        let refused = b.answer(2).await.unwrap();
        assert_eq!(
            refused["error"]["data"]["rollCode"], "EVENT_CURSOR_GAP",
            "{refused}"
        );
        a.send(json!({"jsonrpc":"2.0","id":3,"method":"turn.start","params":{"requestId":"00000000-0000-4000-8000-000000000002",
            "threadId":thread,"turnId":"00000000-0000-4000-8000-000000000003","input":{"text":"hi"}}})).await;
        a.answer(3).await.unwrap();
        let leaked = tokio::time::timeout(Duration::from_secs(2), b.r.next_line()).await;
        assert!(
            leaked.is_err(),
            "a connection whose resume was refused got {leaked:?}"
        );
    }

    fn line(v: Value) -> Vec<u8> {
        let mut l = serde_json::to_vec(&v).unwrap();
        l.push(b'\n');
        l
    }

    fn rss_mib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb: u64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        kb / 1024
    }

    /// Resumes of one connection that does not read run one at a time: sixty of a 12 MB thread
    /// hold one replay's read-ahead, not sixty (about 1.4 GiB before they were serialised).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_resumes_of_a_connection_that_does_not_read_stay_bounded() {
        let (_dir, runtime) = crate::test_runtime().await;
        let face = RollFace::new(runtime.clone(), RollFaceConfig::default());
        let thread = runtime.create_thread(None, None).await.unwrap();
        for _ in 0..3 {
            runtime
                .start_turn(
                    &thread,
                    &uuid::Uuid::new_v4().to_string(),
                    agentwire_runtime::TurnInput {
                        text: "/big 4000000".into(),
                        attachments: Vec::new(),
                    },
                )
                .await
                .unwrap();
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if runtime
                    .inspect(&thread, |s| s.active_turn.is_none())
                    .await
                    .unwrap()
                {
                    break;
                }
            }
        }
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (sr, sw) = tokio::io::split(server);
        let f = Arc::clone(&face);
        tokio::spawn(async move { f.serve(sr, sw).await });
        let (cr, mut cw) = tokio::io::split(client);
        let mut lines = BufReader::new(cr).lines();
        cw.write_all(&line(
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersions":["1.5"],"client":{"name":"t","version":"1"}}}),
        ))
        .await
        .unwrap();
        let _ = lines.next_line().await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_mib();
        let mut all = Vec::new();
        for id in 0..60u64 {
            all.extend(line(json!({"jsonrpc":"2.0","id":10 + id,"method":"runtime.events.resume","params":{"threadId":thread,"afterCursor":null}})));
        }
        cw.write_all(&all).await.unwrap();
        tokio::time::sleep(Duration::from_secs(4)).await;
        let after = rss_mib();
        eprintln!("RSS before {before} MiB, with 60 stalled resumes {after} MiB");
        assert!(
            after - before < 256,
            "60 stalled resumes of one connection hold {} MiB",
            after - before
        );
        drop(lines);
    }

    /// An approval the host answered is not sent to it again while the answer is recorded: the
    /// same capability set right behind the answer (an idempotent retry), which delivers what
    /// is pending, sends neither a second request nor a cancel.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answered_approval_is_not_delivered_again() {
        let (_dir, face) = face().await;
        let mut c = connect(&face, "1.5").await;
        let set = |id: u64| {
            json!({"jsonrpc":"2.0","id":id,"method":"client.capabilities.set","params":{
                "revision":1,"serverRequestMethods":["approval.request"]}})
        };
        c.send(set(2)).await;
        c.answer(2).await.unwrap();
        c.send(
            json!({"jsonrpc":"2.0","id":3,"method":"thread.create","params":{
            "requestId":"00000000-0000-4000-8000-000000000001"}}),
        )
        .await;
        let created = c.answer(3).await.unwrap();
        let thread = created["result"]["thread"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut next_id = 10u64;
        for attempt in 0..10u64 {
            c.send(
                json!({"jsonrpc":"2.0","id":next_id,"method":"turn.start","params":{
                "requestId": format!("00000000-0000-4000-8000-1{attempt:011x}"), "threadId": thread,
                "turnId": format!("00000000-0000-4000-8000-2{attempt:011x}"),
                "input":{"text":"/approve ls"}}}),
            )
            .await;
            next_id += 1;
            let request = loop {
                let v = c.next().await.expect("an approval request");
                if v.get("method") == Some(&json!("approval.request")) {
                    break v;
                }
            };
            let interaction = request["params"]["interactionId"].clone();
            let mut bytes = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":request["id"],
                "result":{"decision":"approve"}}))
            .unwrap();
            bytes.push(b'\n');
            bytes.extend(serde_json::to_vec(&set(next_id)).unwrap());
            bytes.push(b'\n');
            next_id += 1;
            c.w.write_all(&bytes).await.unwrap();
            loop {
                let v = c.next().await.expect("the turn completes");
                let method = v.get("method").and_then(Value::as_str);
                assert!(
                    !(method == Some("approval.request")
                        && v["params"]["interactionId"] == interaction),
                    "attempt {attempt}: delivered again: {v}"
                );
                assert_ne!(
                    method,
                    Some("runtime.serverRequest.cancel"),
                    "attempt {attempt}: an answered request withdrawn: {v}"
                );
                if v["params"]["event"]["type"] == json!("turn.completed") {
                    break;
                }
            }
        }
    }
}

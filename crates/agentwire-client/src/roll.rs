//! The host side of the Roll Runtime Protocol over `agentwire-jsonrpc`: [`RollClient`] starts a
//! runtime as a child on stdio (or talks over any stream pair), negotiates the version and the
//! server-request capabilities, makes typed calls checked against the negotiated version, answers
//! the runtime's approval and user-input requests through the host's [`Interactions`], hands out
//! the runtime's events, follows threads gap-free across replays and snapshot fallbacks
//! ([`ThreadFollower`]), and shuts the runtime down in the official order. See `docs/client.md`.
//!
//! **Invariant:** nothing the runtime sends is acted on before it validated under the negotiated
//! version; nothing is sent that the negotiated version would refuse (unserved method, invalid
//! params, a frame over `min(local budget, limits.maxFrameBytes)`).

mod error;
mod events;
mod follow;
mod interaction;
mod options;
mod process;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::ChildProcess;
use agentwire_jsonrpc::{CallError, Event, Handlers, Id, Peer, PeerBuilder, Profile};
use agentwire_roll::ids::{InvalidUuid, RequestId, ThreadId, TurnId};
use agentwire_roll::negotiation::{
    advertisable_versions, check_advertisement, check_capability_ack, outbound_frame_limit,
};
use agentwire_roll::parse::ParseError;
use agentwire_roll::types::{
    ClientCapabilitiesSetParams, InitializeParams, InitializeResult, ThreadCreateParams,
    ThreadResult, TurnInput, TurnStartParams, TurnStartResult,
};
use agentwire_roll::{
    LATEST_VERSION, Method, ProtocolVersion, RollMethod, ServerRequestMethod, request, schema,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, broadcast, mpsc};

pub use error::{ClientError, CloseReason, ProtocolViolation, RemoteError};
pub use events::{ClientEvent, ClientStats};
pub use follow::{FollowOptions, Followed, ThreadFollower};
pub use interaction::{
    ApprovalRequest, HandlerError, HandlerFuture, Interactions, UserInputRequest,
};
pub use options::{
    ClientOptions, DEFAULT_EVENT_QUEUE, DEFAULT_READ_RETRY_DELAY, DEFAULT_REQUEST_TIMEOUT,
    InitializeOptions, Initialized, ShutdownTimeouts,
};
pub use process::{ShutdownReport, ShutdownStage};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh `requestId` for a mutation (a v4 UUID).
pub fn fresh_request_id() -> RequestId {
    fresh_uuid(RequestId::new)
}

/// A fresh `turnId` for `turn.start` (a v4 UUID).
pub fn fresh_turn_id() -> TurnId {
    fresh_uuid(TurnId::new)
}

fn fresh_uuid<T>(make: fn(String) -> Result<T, InvalidUuid>) -> T {
    match make(uuid::Uuid::new_v4().to_string()) {
        Ok(id) => id,
        // A v4 UUID has version nibble 4 and variant 10xx, which the protocol accepts.
        Err(error) => unreachable!("a v4 UUID is a protocol UUID: {error}"),
    }
}

/// Counts the bytes a value serialises to, without keeping them.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_length<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// The encoded length of a request, counting the longest numeric id (our ids are numbers).
fn request_frame_length(method: &str, params: &Value) -> usize {
    const FIXED: usize = r#"{"jsonrpc":"2.0","id":,"method":,"params":}"#.len();
    const LONGEST_ID: usize = "18446744073709551615".len();
    FIXED
        .saturating_add(LONGEST_ID)
        .saturating_add(json_length(method))
        .saturating_add(json_length(params))
}

/// The encoded length of the answer to a server request.
fn response_frame_length(id: &Id, result: &Value) -> usize {
    const FIXED: usize = r#"{"jsonrpc":"2.0","id":,"result":}"#.len();
    FIXED
        .saturating_add(json_length(id))
        .saturating_add(json_length(result))
}

fn validate_result(
    version: ProtocolVersion,
    method: Method,
    result: &Value,
) -> Result<(), ParseError> {
    schema::validate_definition(version, &method.result_definition(), result)
        .map_err(|issues| ParseError::Schema { version, issues })
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ParseError> {
    serde_json::from_value(value).map_err(|e| ParseError::Decode(e.to_string()))
}

struct Settings {
    max_frame_bytes: usize,
    request_timeout: Option<Duration>,
    read_retry_delay: Duration,
    shutdown: ShutdownTimeouts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Fresh,
    Initializing,
    Ready,
}

/// What `initialize` fixed for the connection.
struct Session {
    version: ProtocolVersion,
    result: InitializeResult,
    outbound_limit: usize,
}

/// A capability change sent and not yet acknowledged: the runtime may already send what it
/// requests, so its handlers serve from the moment it is sent.
struct PendingCapabilities {
    interactions: Interactions,
    requested: BTreeSet<ServerRequestMethod>,
}

struct State {
    phase: Phase,
    session: Option<Arc<Session>>,
    interactions: Interactions,
    pending: Option<PendingCapabilities>,
    revision: u64,
    accepted: BTreeSet<ServerRequestMethod>,
    close_reason: Option<CloseReason>,
}

/// What the connection's handlers and the client share.
struct Shared {
    settings: Settings,
    state: Mutex<State>,
    /// `initialize` and every capability change run one at a time.
    capability_lock: tokio::sync::Mutex<()>,
    inflight: Mutex<interaction::Inflight>,
    events: events::EventSink,
    followers: Mutex<HashMap<ThreadId, Arc<follow::FollowShared>>>,
    child: Mutex<Option<ChildProcess>>,
    handled_notifications: AtomicU64,
    notification_handled: Notify,
}

impl Shared {
    fn version(&self) -> Option<ProtocolVersion> {
        lock(&self.state).session.as_ref().map(|s| s.version)
    }

    fn outbound_limit(&self) -> usize {
        lock(&self.state)
            .session
            .as_ref()
            .map_or(self.settings.max_frame_bytes, |s| s.outbound_limit)
    }

    /// The first reason recorded wins.
    fn record_close(&self, reason: CloseReason) {
        lock(&self.state).close_reason.get_or_insert(reason);
    }

    fn stderr_tail(&self) -> Option<String> {
        lock(&self.child).as_ref().map(ChildProcess::stderr_tail)
    }
}

fn handlers(shared: &Arc<Shared>) -> Handlers {
    let approval = Arc::clone(shared);
    let user_input = Arc::clone(shared);
    let notifications = Arc::clone(shared);
    Handlers::new()
        .on_request(
            ServerRequestMethod::ApprovalRequest.as_str(),
            move |ctx, params| {
                interaction::serve(
                    Arc::clone(&approval),
                    ServerRequestMethod::ApprovalRequest,
                    ctx,
                    params,
                )
            },
        )
        .on_request(
            ServerRequestMethod::UserInputRequest.as_str(),
            move |ctx, params| {
                interaction::serve(
                    Arc::clone(&user_input),
                    ServerRequestMethod::UserInputRequest,
                    ctx,
                    params,
                )
            },
        )
        // Every notification, known or not, so that each one read is counted once handled.
        .on_any_notification(move |ctx, params| {
            let shared = Arc::clone(&notifications);
            async move { shared.notification(ctx.peer(), ctx.method(), params) }
        })
}

/// The connection and its shared state; cheap to clone into tasks.
#[derive(Clone)]
struct ClientCore {
    peer: Peer,
    shared: Arc<Shared>,
}

impl ClientCore {
    fn session(&self) -> Result<Arc<Session>, ClientError> {
        if self.peer.is_closed() {
            return Err(self.closed_error());
        }
        lock(&self.shared.state)
            .session
            .clone()
            .ok_or(ClientError::NotInitialized)
    }

    fn closed_error(&self) -> ClientError {
        let reason = lock(&self.shared.state)
            .close_reason
            .clone()
            .unwrap_or_else(|| CloseReason::Disconnected("the connection closed".to_owned()));
        ClientError::Closed {
            reason,
            stderr_tail: self.shared.stderr_tail(),
        }
    }

    /// Records the violation and closes the connection: every pending call fails with
    /// [`ClientError::Closed`] naming it.
    async fn violate(&self, violation: ProtocolViolation) -> ClientError {
        tracing::error!(code = violation.code(), %violation, "protocol violation; closing the connection");
        self.shared
            .record_close(CloseReason::Violation(violation.clone()));
        let peer = self.peer.clone();
        // Closing starts at once; writing what is queued may take longer and need not be
        // waited for.
        tokio::spawn(async move { peer.close().await });
        self.peer.closed().await;
        ClientError::ProtocolViolation(violation)
    }

    /// Waits until every notification read so far was handled. The transport hands a
    /// response to its caller directly but notifications through an ordered queue, so the
    /// events a runtime sent before an answer may still be queued when the answer arrives.
    async fn settle_notifications(&self) {
        let read = self.peer.stats().notifications_received;
        loop {
            let handled = self.shared.notification_handled.notified();
            tokio::pin!(handled);
            handled.as_mut().enable();
            if self.shared.handled_notifications.load(Ordering::SeqCst) >= read
                || self.peer.is_closed()
            {
                return;
            }
            tokio::select! {
                _ = handled => {}
                _ = self.peer.closed() => return,
            }
        }
    }

    async fn send(
        &self,
        method: Method,
        params: &Value,
        limit: usize,
    ) -> Result<Value, ClientError> {
        let length = request_frame_length(method.as_str(), params);
        if length > limit {
            return Err(ClientError::OutboundTooLarge {
                method,
                length,
                limit,
            });
        }
        let timeout = self.shared.settings.request_timeout;
        match self
            .peer
            .request_with::<_, Value>(method.as_str(), params, timeout)
            .await
        {
            Ok(result) => Ok(result),
            Err(CallError::Remote(error)) => Err(ClientError::Remote {
                method,
                error: Box::new(RemoteError::from_error_object(error)),
            }),
            Err(CallError::Timeout { timeout_ms }) => {
                Err(ClientError::Timeout { method, timeout_ms })
            }
            Err(CallError::Closed) => Err(self.closed_error()),
            Err(other) => Err(ClientError::Transport(other)),
        }
    }

    /// One call under the negotiated version: refused before sending when the version does not
    /// serve it, the runtime lacks its feature or the params are invalid; the result validated;
    /// retryable reads retried once.
    async fn request(
        &self,
        method: Method,
        params: Value,
        internal: bool,
    ) -> Result<Value, ClientError> {
        if !internal {
            let instead = match method {
                Method::Initialize => Some("RollClient::initialize"),
                Method::ClientCapabilitiesSet => Some("RollClient::set_handlers"),
                _ => None,
            };
            if let Some(instead) = instead {
                return Err(ClientError::ReservedMethod { method, instead });
            }
        }
        let session = self.session()?;
        let version = session.version;
        if !method.is_served(version) {
            return Err(ClientError::MethodUnavailable { method, version });
        }
        if let Some(feature) = method.required_feature()
            && !session
                .result
                .features
                .iter()
                .any(|f| f.as_str() == feature.as_str())
        {
            return Err(ClientError::FeatureUnavailable { method, feature });
        }
        schema::validate_definition(version, &method.params_definition(), &params).map_err(
            |issues| ClientError::InvalidParams {
                method,
                error: ParseError::Schema { version, issues },
            },
        )?;
        let mut retried = false;
        loop {
            match self.send(method, &params, session.outbound_limit).await {
                Ok(result) => {
                    validate_result(version, method, &result)
                        .map_err(|error| ClientError::InvalidResult { method, error })?;
                    return Ok(result);
                }
                Err(error) if !retried && method.is_retryable_read() && error.is_retryable() => {
                    retried = true;
                    tracing::debug!(%method, %error, "retryable read failed; retrying once");
                    tokio::time::sleep(self.shared.settings.read_retry_delay).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn invoke<M: RollMethod>(
        &self,
        params: M::Params,
        internal: bool,
    ) -> Result<M::Result, ClientError> {
        let method = M::METHOD;
        let params = serde_json::to_value(&params).map_err(|e| ClientError::EncodeParams {
            method,
            message: e.to_string(),
        })?;
        let result = self.request(method, params, internal).await?;
        decode(result).map_err(|error| ClientError::InvalidResult { method, error })
    }

    async fn call<M: RollMethod>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        self.invoke::<M>(params, false).await
    }

    async fn initialize(
        &self,
        options: InitializeOptions,
        interactions: &Interactions,
    ) -> Result<Initialized, ClientError> {
        let budget = self.shared.settings.max_frame_bytes;
        let budget_u64 = u64::try_from(budget).unwrap_or(u64::MAX);
        let handlers = interactions.methods();
        let offered: Vec<String> = match options.versions {
            None => advertisable_versions(budget_u64, &handlers)
                .into_iter()
                .map(|v| v.as_str().to_owned())
                .collect(),
            Some(versions) => {
                check_advertisement(&versions, budget_u64, &handlers)
                    .map_err(ClientError::Advertisement)?;
                versions
            }
        };
        let method = Method::Initialize;
        let params = InitializeParams {
            protocol_versions: offered.clone(),
            client: options.client,
        };
        let params = serde_json::to_value(&params).map_err(|e| ClientError::EncodeParams {
            method,
            message: e.to_string(),
        })?;
        // The shape of initialize never changed across versions.
        schema::validate_definition(LATEST_VERSION, &method.params_definition(), &params).map_err(
            |issues| ClientError::InvalidParams {
                method,
                error: ParseError::Schema {
                    version: LATEST_VERSION,
                    issues,
                },
            },
        )?;
        let result = self.send(method, &params, budget).await?;
        let answered = result.get("protocolVersion").and_then(Value::as_str);
        let version = answered
            .and_then(ProtocolVersion::parse)
            .filter(|v| offered.iter().any(|o| o == v.as_str()));
        let Some(version) = version else {
            let answered = answered.map(str::to_owned);
            return Err(self
                .violate(ProtocolViolation::VersionNotOffered { answered })
                .await);
        };
        let typed: InitializeResult =
            match validate_result(version, method, &result).and_then(|()| decode(result)) {
                Ok(typed) => typed,
                Err(error) => {
                    return Err(self
                        .violate(ProtocolViolation::InitializeResult(error))
                        .await);
                }
            };
        let outbound = outbound_frame_limit(budget_u64, typed.limits.max_frame_bytes);
        let outbound_frame_limit = usize::try_from(outbound).unwrap_or(usize::MAX);
        let negotiated = version.capabilities().server_request_capability_negotiation;
        {
            let mut state = lock(&self.shared.state);
            state.session = Some(Arc::new(Session {
                version,
                result: typed.clone(),
                outbound_limit: outbound_frame_limit,
            }));
            state.phase = Phase::Ready;
            if !negotiated {
                state.accepted = version
                    .server_request_methods()
                    .filter(|m| interactions.handles(*m))
                    .collect();
            }
        }
        tracing::info!(%version, runtime = %typed.runtime_instance_id, "initialized");
        let accepted = if negotiated {
            self.negotiate(interactions.clone()).await?
        } else {
            lock(&self.shared.state).accepted.clone()
        };
        Ok(Initialized {
            version,
            result: typed,
            offered,
            accepted,
            outbound_frame_limit,
        })
    }

    /// `client.capabilities.set` with the next revision (1.2+; the caller holds the capability
    /// lock).
    async fn negotiate(
        &self,
        interactions: Interactions,
    ) -> Result<BTreeSet<ServerRequestMethod>, ClientError> {
        let requested = interactions.methods();
        let names: Vec<String> = requested.iter().map(|m| m.as_str().to_owned()).collect();
        let revision = {
            let mut state = lock(&self.shared.state);
            state.revision += 1;
            state.pending = Some(PendingCapabilities {
                interactions: interactions.clone(),
                requested: requested.iter().copied().collect(),
            });
            state.revision
        };
        let params = ClientCapabilitiesSetParams {
            revision,
            server_request_methods: names.clone(),
        };
        let outcome = self
            .invoke::<request::ClientCapabilitiesSet>(params, true)
            .await;
        let clear_pending = || lock(&self.shared.state).pending = None;
        let ack = match outcome {
            Ok(ack) => ack,
            Err(ClientError::InvalidResult { error, .. }) => {
                clear_pending();
                return Err(self
                    .violate(ProtocolViolation::CapabilityResult(error))
                    .await);
            }
            Err(error) => {
                clear_pending();
                return Err(error);
            }
        };
        let acked: Vec<&str> = ack
            .accepted_server_request_methods
            .iter()
            .map(|m| m.as_str())
            .collect();
        let accepted = match check_capability_ack(revision, &names, ack.revision, &acked) {
            Ok(accepted) => accepted,
            Err(error) => {
                clear_pending();
                return Err(self.violate(ProtocolViolation::CapabilityAck(error)).await);
            }
        };
        let revoked: BTreeSet<ServerRequestMethod> = {
            let mut state = lock(&self.shared.state);
            let revoked = state.accepted.difference(&accepted).copied().collect();
            state.accepted = accepted.clone();
            state.interactions = interactions;
            state.pending = None;
            revoked
        };
        self.shared.abort_revoked(&self.peer, &revoked);
        tracing::info!(revision, accepted = ?accepted, "server-request capabilities acknowledged");
        Ok(accepted)
    }
}

async fn watch_transport(core: ClientCore, mut events: broadcast::Receiver<Event>) {
    loop {
        match events.recv().await {
            Ok(Event::UncorrelatedError(error)) => {
                core.violate(ProtocolViolation::UncorrelatedError {
                    code: error.code,
                    message: error.message,
                })
                .await;
            }
            Ok(Event::Closed { reason }) => {
                core.shared.record_close(CloseReason::Disconnected(reason));
                return;
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                core.violate(ProtocolViolation::TransportEventsLost { missed })
                    .await;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// A client of one Roll runtime connection. Create it inside a tokio runtime; dropping it kills a
/// spawned runtime and closes the connection ([`RollClient::shutdown`] ends it gracefully).
///
/// ```no_run
/// use agentwire_client::roll::{ClientOptions, InitializeOptions, Interactions, RollClient};
/// use agentwire_roll::approval::ApprovalDecision;
/// use agentwire_roll::request;
/// use agentwire_roll::types::ThreadListParams;
///
/// # async fn run() -> Result<(), agentwire_client::roll::ClientError> {
/// let interactions = Interactions::new()
///     .on_approval(|_request| async { Ok(ApprovalDecision::Reject { reason: None }) });
/// let options = ClientOptions::new("agentwire").args(["serve", "--stdio"]).interactions(interactions);
/// let client = RollClient::spawn(options)?;
/// let session = client.initialize(InitializeOptions::default()).await?;
/// println!("speaking {}", session.version);
/// let threads = client
///     .call::<request::ThreadList>(ThreadListParams { cursor: None, limit: Some(100) })
///     .await?;
/// println!("{} threads", threads.items.len());
/// let report = client.shutdown().await?;
/// println!("{:?} {:?}", report.stage, report.status);
/// # Ok(())
/// # }
/// ```
pub struct RollClient {
    core: ClientCore,
    events: Mutex<Option<mpsc::Receiver<ClientEvent>>>,
}

impl std::fmt::Debug for RollClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RollClient")
            .field("peer", &self.core.peer)
            .field("version", &self.version())
            .finish()
    }
}

impl RollClient {
    /// Starts `options.program` with `options.args` and `options.env`, and talks to it on its
    /// stdin and stdout (its stderr is logged and its tail kept for error messages).
    ///
    /// # Errors
    /// [`ClientError::Spawn`].
    pub fn spawn(options: ClientOptions) -> Result<RollClient, ClientError> {
        let mut command = tokio::process::Command::new(&options.program);
        command.args(&options.args);
        for (key, value) in &options.env {
            command.env(key, value);
        }
        if let Some(dir) = &options.current_dir {
            command.current_dir(dir);
        }
        let (child, stdout, stdin) =
            ChildProcess::spawn(command).map_err(|error| ClientError::Spawn {
                program: options.program.to_string_lossy().into_owned(),
                message: error.to_string(),
            })?;
        tracing::info!(pid = child.id(), program = ?options.program, "runtime started");
        Ok(RollClient::start(stdout, stdin, options, Some(child)))
    }

    /// Talks to a runtime over `reader` (what it writes) and `writer` (what it reads).
    pub fn connect<R, W>(reader: R, writer: W, options: ClientOptions) -> RollClient
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        RollClient::start(reader, writer, options, None)
    }

    fn start<R, W>(
        reader: R,
        writer: W,
        options: ClientOptions,
        child: Option<ChildProcess>,
    ) -> RollClient
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (events_tx, events_rx) = mpsc::channel(options.event_queue.max(1));
        let max_frame_bytes = options.max_frame_bytes;
        let shared = Arc::new(Shared {
            settings: Settings {
                max_frame_bytes,
                request_timeout: options.request_timeout,
                read_retry_delay: options.read_retry_delay,
                shutdown: options.shutdown,
            },
            state: Mutex::new(State {
                phase: Phase::Fresh,
                session: None,
                interactions: options.interactions,
                pending: None,
                revision: 0,
                accepted: BTreeSet::new(),
                close_reason: None,
            }),
            capability_lock: tokio::sync::Mutex::new(()),
            inflight: Mutex::default(),
            events: events::EventSink::new(events_tx),
            followers: Mutex::default(),
            child: Mutex::new(child),
            handled_notifications: AtomicU64::new(0),
            notification_handled: Notify::new(),
        });
        // The outbound limit is checked per call against the negotiated one; the transport's
        // is the local budget.
        let profile = Profile::roll_client()
            .with_max_inbound_frame(max_frame_bytes)
            .with_max_outbound_frame(max_frame_bytes)
            .with_request_timeout(options.request_timeout);
        let builder = PeerBuilder::new(profile).handlers(handlers(&shared));
        let transport_events = builder.subscribe();
        let peer = builder.spawn(reader, writer);
        let core = ClientCore { peer, shared };
        tokio::spawn(watch_transport(core.clone(), transport_events));
        RollClient {
            core,
            events: Mutex::new(Some(events_rx)),
        }
    }

    /// `initialize`, first and once, then on 1.2+ `client.capabilities.set` with the registered
    /// handlers (revision 1). Afterwards the outbound frame limit is
    /// `min(local budget, limits.maxFrameBytes)`.
    ///
    /// # Errors
    /// [`ClientError::AlreadyInitialized`]; [`ClientError::Advertisement`] for explicit versions
    /// the local budget or the handlers do not allow (nothing is sent); the runtime's error
    /// (e.g. `PROTOCOL_VERSION_UNSUPPORTED`; `initialize` may then be tried again);
    /// [`ClientError::ProtocolViolation`] for an answer the protocol forbids (an un-offered
    /// version, an invalid result, a capability ACK with another revision or an un-requested
    /// method), which closes the connection.
    pub async fn initialize(&self, options: InitializeOptions) -> Result<Initialized, ClientError> {
        let _serial = self.core.shared.capability_lock.lock().await;
        if self.core.peer.is_closed() {
            return Err(self.core.closed_error());
        }
        let interactions = {
            let mut state = lock(&self.core.shared.state);
            if state.phase != Phase::Fresh {
                return Err(ClientError::AlreadyInitialized);
            }
            state.phase = Phase::Initializing;
            state.interactions.clone()
        };
        let outcome = self.core.initialize(options, &interactions).await;
        if outcome.is_err() {
            let mut state = lock(&self.core.shared.state);
            if state.phase == Phase::Initializing {
                state.phase = Phase::Fresh;
            }
        }
        outcome
    }

    /// Replaces the server-request handlers. Before `initialize` they are only stored; on 1.2+
    /// `client.capabilities.set` is sent with the next revision and the ACK checked; running
    /// handlers of methods the runtime no longer accepts are aborted. Returns what the runtime
    /// may now send.
    ///
    /// # Errors
    /// On 1.1, [`ClientError::RequiredHandler`] without an `approval.request` handler; on 1.2+
    /// the call's errors, and [`ClientError::ProtocolViolation`] for a bad ACK (the connection
    /// closes).
    pub async fn set_handlers(
        &self,
        interactions: Interactions,
    ) -> Result<BTreeSet<ServerRequestMethod>, ClientError> {
        let _serial = self.core.shared.capability_lock.lock().await;
        let version = {
            let mut state = lock(&self.core.shared.state);
            match &state.session {
                Some(session) => session.version,
                None => {
                    state.interactions = interactions;
                    return Ok(BTreeSet::new());
                }
            }
        };
        if self.core.peer.is_closed() {
            return Err(self.core.closed_error());
        }
        if version.capabilities().server_request_capability_negotiation {
            return self.core.negotiate(interactions).await;
        }
        if let Some(method) = version
            .required_server_request_methods()
            .iter()
            .find(|m| !interactions.handles(**m))
        {
            return Err(ClientError::RequiredHandler {
                version,
                method: *method,
            });
        }
        let mut state = lock(&self.core.shared.state);
        state.accepted = version
            .server_request_methods()
            .filter(|m| interactions.handles(*m))
            .collect();
        state.interactions = interactions;
        Ok(state.accepted.clone())
    }

    /// A typed call of method `M`.
    ///
    /// ```no_run
    /// # async fn run(client: &agentwire_client::roll::RollClient) -> Result<(), agentwire_client::roll::ClientError> {
    /// use agentwire_roll::request;
    /// use agentwire_roll::types::ThreadSnapshotParams;
    /// # let thread_id = agentwire_roll::ids::ThreadId::new("00000000-0000-4000-8000-000000000002").unwrap();
    /// let snapshot = client
    ///     .call::<request::ThreadSnapshot>(ThreadSnapshotParams {
    ///         thread_id,
    ///         message_before_sequence: None,
    ///         operation_before_sequence: None,
    ///         limit: Some(100),
    ///         recovery: None,
    ///     })
    ///     .await?;
    /// # let _ = snapshot;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// Refused before sending: [`ClientError::NotInitialized`], [`ClientError::ReservedMethod`]
    /// (`initialize`, `client.capabilities.set`), [`ClientError::MethodUnavailable`],
    /// [`ClientError::FeatureUnavailable`], [`ClientError::InvalidParams`],
    /// [`ClientError::OutboundTooLarge`]. Then [`ClientError::Remote`] (after the one retry of a
    /// retryable `thread.list`, `thread.snapshot`, `thread.capabilities` or `operation.get`),
    /// [`ClientError::Timeout`], [`ClientError::InvalidResult`], [`ClientError::Closed`].
    pub async fn call<M: RollMethod>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        self.core.call::<M>(params).await
    }

    /// An untyped call, checked like [`RollClient::call`]. A mutation without `requestId` gets a
    /// fresh one, a `turn.start` without `turnId` a fresh one.
    ///
    /// # Errors
    /// As [`RollClient::call`].
    pub async fn call_value(
        &self,
        method: Method,
        mut params: Value,
    ) -> Result<Value, ClientError> {
        if let Some(object) = params.as_object_mut() {
            if method.is_idempotent_mutation() && !object.contains_key("requestId") {
                object.insert("requestId".into(), fresh_request_id().as_str().into());
            }
            if method == Method::TurnStart && !object.contains_key("turnId") {
                object.insert("turnId".into(), fresh_turn_id().as_str().into());
            }
        }
        self.core.request(method, params, false).await
    }

    /// `thread.create` with a fresh `requestId`.
    ///
    /// # Errors
    /// As [`RollClient::call`].
    pub async fn create_thread(&self, title: Option<String>) -> Result<ThreadResult, ClientError> {
        self.call::<request::ThreadCreate>(ThreadCreateParams {
            request_id: fresh_request_id(),
            title,
        })
        .await
    }

    /// `turn.start` with a fresh `requestId` and `turnId`; completion arrives as events.
    ///
    /// # Errors
    /// As [`RollClient::call`].
    pub async fn start_turn(
        &self,
        thread_id: ThreadId,
        input: TurnInput,
    ) -> Result<TurnStartResult, ClientError> {
        self.call::<request::TurnStart>(TurnStartParams {
            request_id: fresh_request_id(),
            thread_id,
            turn_id: fresh_turn_id(),
            input,
        })
        .await
    }

    /// The event queue (see [`ClientEvent`] for what it carries and how it overflows). It can be
    /// taken once; later calls return `None`.
    pub fn events(&self) -> Option<mpsc::Receiver<ClientEvent>> {
        lock(&self.events).take()
    }

    /// Follows a thread's durable events (1.3+): resumes after `options.after`, staging live
    /// events until the replay's barrier, and falls back to a recovery snapshot where the
    /// protocol says so. One follower per thread and connection.
    ///
    /// # Errors
    /// [`ClientError::NotInitialized`], [`ClientError::MethodUnavailable`] before 1.3,
    /// [`ClientError::AlreadyFollowing`], [`ClientError::Closed`].
    pub fn follow(
        &self,
        thread_id: ThreadId,
        options: FollowOptions,
    ) -> Result<ThreadFollower, ClientError> {
        let session = self.core.session()?;
        let method = Method::RuntimeEventsResume;
        if !method.is_served(session.version) {
            return Err(ClientError::MethodUnavailable {
                method,
                version: session.version,
            });
        }
        let instance = session.result.runtime_instance_id.as_str().to_owned();
        ThreadFollower::start(&self.core, thread_id, options, instance)
    }

    /// Shuts down: closes the connection (and so the runtime's stdin), waits
    /// [`ShutdownTimeouts::stdin`] for it to exit, then sends `SIGTERM` and waits
    /// [`ShutdownTimeouts::terminate`], then `SIGKILL` and waits [`ShutdownTimeouts::kill`].
    /// Pending calls fail with [`ClientError::Closed`].
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] when waiting for or signalling the process fails.
    pub async fn shutdown(&self) -> Result<ShutdownReport, ClientError> {
        let shared = &self.core.shared;
        shared.record_close(CloseReason::Shutdown);
        let timeouts = shared.settings.shutdown;
        let started = Instant::now();
        // A runtime that does not read could keep queued output from draining; closing then
        // shares the stdin grace.
        if tokio::time::timeout(timeouts.stdin, self.core.peer.close())
            .await
            .is_err()
        {
            tracing::warn!("queued output not written within the stdin grace");
        }
        let child = lock(&shared.child).take();
        let Some(mut child) = child else {
            return Ok(ShutdownReport {
                stage: ShutdownStage::NoChild,
                status: None,
                stderr_tail: String::new(),
            });
        };
        let report = process::stop(&mut child, timeouts, started).await;
        if let Ok(report) = &report {
            tracing::info!(stage = ?report.stage, status = ?report.status, "runtime stopped");
        }
        report
    }

    /// The negotiated version, once `initialize` succeeded.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.core.shared.version()
    }

    /// The `initialize` result, once it succeeded.
    pub fn initialize_result(&self) -> Option<InitializeResult> {
        lock(&self.core.shared.state)
            .session
            .as_ref()
            .map(|s| s.result.clone())
    }

    /// The outbound frame limit: the local budget before `initialize`,
    /// `min(local budget, limits.maxFrameBytes)` after.
    pub fn outbound_frame_limit(&self) -> usize {
        self.core.shared.outbound_limit()
    }

    /// The server requests the runtime may send (the last ACK on 1.2+).
    pub fn accepted_server_requests(&self) -> BTreeSet<ServerRequestMethod> {
        lock(&self.core.shared.state).accepted.clone()
    }

    /// The last capability revision sent (0 before the first).
    pub fn capability_revision(&self) -> u64 {
        lock(&self.core.shared.state).revision
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.core.peer.is_closed()
    }

    /// Waits until the connection is closed.
    pub async fn closed(&self) {
        self.core.peer.closed().await;
    }

    /// Why the connection closed (`None` while open, and briefly after the transport ended on
    /// its own).
    pub fn close_reason(&self) -> Option<CloseReason> {
        lock(&self.core.shared.state).close_reason.clone()
    }

    /// The last bytes a spawned runtime wrote to stderr (until [`RollClient::shutdown`]).
    pub fn stderr_tail(&self) -> Option<String> {
        self.core.shared.stderr_tail()
    }

    /// The process id of a spawned runtime while it runs.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.core.shared.child)
            .as_ref()
            .and_then(ChildProcess::id)
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        self.core.shared.events.stats()
    }

    /// The transport's counters (lines, bytes, dropped input).
    pub fn transport_stats(&self) -> agentwire_jsonrpc::Stats {
        self.core.peer.stats()
    }
}

impl Drop for RollClient {
    fn drop(&mut self) {
        // A spawned runtime is killed with its handle; the connection closes in the background.
        drop(lock(&self.core.shared.child).take());
        self.core.shared.record_close(CloseReason::Shutdown);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let peer = self.core.peer.clone();
            runtime.spawn(async move { peer.close().await });
        }
    }
}

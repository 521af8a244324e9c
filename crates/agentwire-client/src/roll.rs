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
//!
//! This module holds [`RollClient`], the connection's shared state and the handlers it serves;
//! `calls` one call under the negotiated version, `initialize` the version and capability
//! negotiation, `interaction` the server-request handlers, `events` the event queue and
//! notification dispatch, `follow` [`ThreadFollower`], `options` the settings, `process`
//! stopping the child, and `error` the errors and their codes.

mod calls;
mod error;
mod events;
mod follow;
mod initialize;
mod interaction;
mod options;
mod process;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::ChildProcess;
use agentwire_jsonrpc::{Event, Handlers, Peer, PeerBuilder, Profile};
use agentwire_roll::ids::{InvalidUuid, RequestId, ThreadId, TurnId};
use agentwire_roll::types::{
    InitializeResult, ThreadCreateParams, ThreadResult, TurnInput, TurnStartParams, TurnStartResult,
};
use agentwire_roll::{Method, ProtocolVersion, RollMethod, ServerRequestMethod, request};
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
    /// Rung when `initialize` ends, answered or not.
    initialized: Notify,
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

    /// Once the connection is not initializing: a server request read right behind the
    /// `initialize` answer (a 1.1 runtime sends the pending approvals then) is routed once the
    /// session that answer fixed is stored, not refused for lack of it.
    async fn until_initialized(&self) {
        loop {
            let initialized = self.initialized.notified();
            tokio::pin!(initialized);
            initialized.as_mut().enable();
            if lock(&self.state).phase != Phase::Initializing {
                return;
            }
            initialized.await;
        }
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
            initialized: Notify::new(),
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

//! The OpenClaw gateway face: WebSocket text frames (`req`, `res`, `event`) on a TCP listener,
//! as OpenClaw's clients speak them, on the runtime core.
//!
//! The server speaks first (`connect.challenge`); the first request must be `connect`, checked
//! for the protocol version, the token and the origin before `hello-ok` grants a role and scopes.
//! Until then a frame is capped at 64 KiB; after it at `maxPayload`. Every request is checked
//! for its scope (default-deny) and its params before it is acted on. Events go to every
//! connection whose scopes allow them, numbered per connection (`seq`), through an outbound queue
//! bounded in bytes: an event that may be dropped is skipped for a slow connection (its number
//! still used), anything else closes it 1008 "slow consumer". Sessions are the runtime's threads,
//! runs its turns, approvals its approval interactions. docs/gateway.md is the reference.

mod capped;
mod conn;
mod methods;
mod pump;
mod schema;
pub mod scopes;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentwire_runtime::Runtime;
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub use conn::ConnectionHandle;

/// The wire protocol version served.
pub const PROTOCOL_VERSION: u64 = 4;
/// The oldest version a probe client may ask for.
pub const MIN_PROBE_PROTOCOL_VERSION: u64 = 3;
/// The oldest version a node client may ask for.
pub const MIN_NODE_PROTOCOL_VERSION: u64 = 3;
/// The largest frame read before the handshake ends.
pub const PREAUTH_MAX_PAYLOAD: usize = 64 * 1024;
/// The default `maxPayload`: the largest frame read after the handshake.
pub const DEFAULT_MAX_PAYLOAD: usize = 25 * 1024 * 1024;
/// The default tick interval.
pub const DEFAULT_TICK_INTERVAL: Duration = Duration::from_secs(30);
/// `stateVersion.health`: the gateway's health is not refreshed, so its version does not move.
const HEALTH_VERSION: u64 = 1;
/// How long presence changes gather before one `presence` event reports them.
pub const PRESENCE_SETTLE: Duration = Duration::from_millis(200);
/// Longest close reason, in UTF-8 bytes.
pub const MAX_CLOSE_REASON_BYTES: usize = 120;

/// Settings of the gateway face.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The shared token a client must present; `None` serves loopback clients without one, as
    /// read-only operators.
    pub token: Option<String>,
    /// How often `tick` is sent.
    pub tick_interval: Duration,
    /// The largest frame read after the handshake (`policy.maxPayload`); a larger one closes
    /// the connection 1009.
    pub max_payload: usize,
    /// Bytes a connection's outbound queue holds (`policy.maxBufferedBytes`).
    pub max_buffered_bytes: usize,
    /// How long a client has to finish the handshake.
    pub handshake_timeout: Duration,
    /// How long one frame may take to write before the connection is dropped.
    pub write_timeout: Duration,
    /// Connections still in their handshake at once; one more is refused at the upgrade (HTTP
    /// 503).
    pub max_preauth_connections: usize,
    /// Browser origins allowed besides the gateway's own loopback address.
    pub allowed_origins: Vec<String>,
    /// `server.version` of `hello-ok`. (An approval's deadline is the runtime's: its
    /// interaction's `expiresAtMs`, from `RuntimeConfig::interaction_ttl`.)
    pub server_version: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            token: None,
            tick_interval: DEFAULT_TICK_INTERVAL,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_buffered_bytes: 2 * DEFAULT_MAX_PAYLOAD,
            handshake_timeout: Duration::from_secs(15),
            write_timeout: Duration::from_secs(10),
            max_preauth_connections: 32,
            allowed_origins: Vec::new(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A bind address that is not loopback without a token.
    #[error(
        "refusing to listen on {0} without a token: only a loopback address may be served without one (--token)"
    )]
    TokenRequired(SocketAddr),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The gateway face of one runtime.
#[derive(Debug)]
pub struct GatewayFace {
    runtime: Runtime,
    config: GatewayConfig,
    local: SocketAddr,
    started: Instant,
    next_conn: AtomicU64,
    preauth: AtomicUsize,
    connections: Mutex<HashMap<u64, Arc<ConnectionHandle>>>,
    presence_version: AtomicU64,
    /// Wakes the task that sends `presence`.
    presence_dirty: tokio::sync::Notify,
    /// The thread of each pending approval and when it opened, by id (as many as are
    /// pending).
    approvals: Mutex<HashMap<String, (String, u64)>>,
    /// Runs being started whose answer (the `res` that names them) is not queued yet: the
    /// pump holds their events until it is, so the client that started a run reads its answer
    /// before its events.
    announcing: Mutex<std::collections::HashSet<String>>,
    /// Rung when a run's answer was queued.
    announced: tokio::sync::Notify,
}

/// A run being started, until its answer is queued (dropped then): see
/// [`GatewayFace::until_announced`].
pub(super) struct Announcing<'a> {
    face: &'a GatewayFace,
    run_id: String,
}

impl Drop for Announcing<'_> {
    fn drop(&mut self) {
        lock(&self.face.announcing).remove(&self.run_id);
        self.face.announced.notify_waiters();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl GatewayFace {
    /// Binds `addr` for `runtime`. A non-loopback address needs a token.
    ///
    /// # Errors
    /// [`GatewayError::TokenRequired`] or [`GatewayError::Bind`].
    pub async fn bind(
        runtime: Runtime,
        addr: SocketAddr,
        config: GatewayConfig,
    ) -> Result<(Arc<GatewayFace>, TcpListener), GatewayError> {
        if !addr.ip().is_loopback() && config.token.is_none() {
            return Err(GatewayError::TokenRequired(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| GatewayError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| GatewayError::Bind { addr, source })?;
        let face = Arc::new(GatewayFace {
            runtime,
            config,
            local,
            started: Instant::now(),
            next_conn: AtomicU64::new(1),
            preauth: AtomicUsize::new(0),
            connections: Mutex::new(HashMap::new()),
            presence_version: AtomicU64::new(1),
            approvals: Mutex::new(HashMap::new()),
            presence_dirty: tokio::sync::Notify::new(),
            announcing: Mutex::new(std::collections::HashSet::new()),
            announced: tokio::sync::Notify::new(),
        });
        Ok((face, listener))
    }

    /// Holds the events of run `run_id` until its answer is queued (the guard is dropped).
    pub(super) fn announcing(&self, run_id: &str) -> Announcing<'_> {
        lock(&self.announcing).insert(run_id.to_owned());
        Announcing {
            face: self,
            run_id: run_id.to_owned(),
        }
    }

    /// Once the answer that names run `run_id` is queued (at once for a run not being
    /// started).
    pub(super) async fn until_announced(&self, run_id: &str) {
        // The pump asks at every event of a run: most runs are announced long since.
        if !lock(&self.announcing).contains(run_id) {
            return;
        }
        loop {
            let announced = self.announced.notified();
            tokio::pin!(announced);
            announced.as_mut().enable();
            if !lock(&self.announcing).contains(run_id) {
                return;
            }
            announced.await;
        }
    }

    /// The address served.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The runtime served.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Accepts connections until the task is dropped; also sends `tick` and forwards what the
    /// runtime publishes.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let ticks = tokio::spawn(Arc::clone(&self).tick());
        let pump = tokio::spawn(pump::run(Arc::clone(&self)));
        let presence = tokio::spawn(Arc::clone(&self).send_presence());
        let _stop = StopOnDrop(vec![ticks, pump, presence]);
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(conn::run(Arc::clone(&self), stream, peer));
                }
                Err(error) => {
                    // Out of descriptors, say: wait a little rather than spin.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Tells every connection the gateway stops (`shutdown {reason}`), then closes each 1001
    /// once what it was sent is written.
    pub fn shutdown(&self, reason: &str) {
        self.broadcast("shutdown", &json!({"reason": reason}), false);
        let conns: Vec<Arc<ConnectionHandle>> = self.lock_connections().values().cloned().collect();
        for conn in conns {
            conn.close(1001, "gateway stopping");
        }
    }

    /// Authenticated connections now.
    pub fn connection_count(&self) -> usize {
        self.lock_connections().len()
    }

    fn lock_connections(&self) -> MutexGuard<'_, HashMap<u64, Arc<ConnectionHandle>>> {
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn state_version(&self) -> Value {
        json!({
            "presence": self.presence_version.load(Ordering::Acquire),
            "health": HEALTH_VERSION,
        })
    }

    /// Milliseconds since the Unix epoch, by the runtime's clock.
    fn now_ms(&self) -> u64 {
        self.runtime.now_ms()
    }

    fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Sends `event` with `payload` to every authenticated connection its scope allows, each
    /// with its own `seq`. `droppable` events are skipped for a connection whose queue is full;
    /// anything else closes it.
    fn broadcast(&self, event: &str, payload: &Value, droppable: bool) {
        self.broadcast_frame(event, payload, droppable, "");
    }

    /// [`broadcast`](Self::broadcast) with `extra` members of the frame after `seq` (such as
    /// `,"stateVersion":{…}`).
    fn broadcast_frame(&self, event: &str, payload: &Value, droppable: bool, extra: &str) {
        self.send_where(event, payload, droppable, extra, |_| true);
    }

    /// Sends `event` to the connections that subscribed to sessions (and may read them).
    fn broadcast_to_subscribers(&self, event: &str, payload: &Value) {
        self.send_where(event, payload, false, "", ConnectionHandle::wants_sessions);
    }

    /// Sends `event` to every connection its scope allows and `wanted` selects, the payload
    /// encoded once.
    fn send_where(
        &self,
        event: &str,
        payload: &Value,
        droppable: bool,
        extra: &str,
        wanted: impl Fn(&ConnectionHandle) -> bool,
    ) {
        let Some(access) = scopes::event_scope(event) else {
            return;
        };
        let payload = payload.to_string();
        let targets: Vec<Arc<ConnectionHandle>> =
            self.lock_connections().values().cloned().collect();
        for conn in targets {
            if conn.may(access) && wanted(&conn) {
                conn.send_event(event, &payload, extra, droppable);
            }
        }
    }

    fn lock_approvals(&self) -> MutexGuard<'_, HashMap<String, (String, u64)>> {
        self.approvals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn approval_opened(&self, id: &str, thread_id: &str, at_ms: u64) {
        self.lock_approvals()
            .insert(id.to_owned(), (thread_id.to_owned(), at_ms));
    }

    fn approval_closed(&self, id: &str) {
        self.lock_approvals().remove(id);
    }

    fn approval_thread(&self, id: &str) -> Option<String> {
        self.lock_approvals()
            .get(id)
            .map(|(thread, _)| thread.clone())
    }

    /// Sends a connection that may decide approvals the ones pending when it joined, as
    /// `exec.approval.requested` events (those opened later reach it as they open).
    async fn send_pending_approvals(&self, conn: &ConnectionHandle) {
        let pending: Vec<(String, String, u64)> = self
            .lock_approvals()
            .iter()
            .map(|(id, (thread, at))| (id.clone(), thread.clone(), *at))
            .collect();
        for (id, thread, at) in pending {
            let interaction = self
                .runtime
                .inspect(&thread, |s| s.pending.get(&id).cloned())
                .await
                .ok()
                .flatten();
            if let Some(interaction) = interaction {
                let payload = pump::requested(&interaction, &self.session_key(&thread), at);
                conn.send_event("exec.approval.requested", &payload.to_string(), "", false);
            }
        }
    }

    fn pending_approval_count(&self) -> usize {
        self.lock_approvals().len()
    }

    /// A connection finished its handshake: it is counted in presence.
    fn joined(&self, conn: Arc<ConnectionHandle>) {
        let present = conn.present();
        self.lock_connections().insert(conn.id, conn);
        if present {
            self.presence_changed();
        }
    }

    /// A connection ended.
    fn left(&self, id: u64) {
        let gone = self.lock_connections().remove(&id);
        if gone.is_some_and(|c| c.present()) {
            self.presence_changed();
        }
    }

    /// A presence joined or left: the version moves now, and the list is sent once the changes
    /// of the next [`PRESENCE_SETTLE`] are in (a burst of joins is one event, not one each).
    fn presence_changed(&self) {
        self.presence_version.fetch_add(1, Ordering::AcqRel);
        self.presence_dirty.notify_one();
    }

    async fn send_presence(self: Arc<Self>) {
        loop {
            self.presence_dirty.notified().await;
            tokio::time::sleep(PRESENCE_SETTLE).await;
            let payload = json!({"presence": self.presence()});
            let extra = format!(r#","stateVersion":{}"#, self.state_version());
            self.broadcast_frame("presence", &payload, true, &extra);
        }
    }

    /// The presence list: the gateway itself, then each interactive client and node connected
    /// (calls from CLIs, probes, tests, workers and backends are not presences).
    fn presence(&self) -> Vec<Value> {
        let now = self.now_ms();
        let mut entries = vec![json!({
            "host": "agentwire",
            "version": self.config.server_version,
            "mode": "gateway",
            "reason": "self",
            "ts": now,
        })];
        let mut conns: Vec<Arc<ConnectionHandle>> = self
            .lock_connections()
            .values()
            .filter(|c| c.present())
            .cloned()
            .collect();
        conns.sort_by_key(|c| c.id);
        entries.extend(conns.iter().map(|c| c.presence_entry()));
        entries
    }

    async fn tick(self: Arc<Self>) {
        let mut interval = tokio::time::interval(self.config.tick_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            interval.tick().await;
            self.broadcast("tick", &json!({"ts": self.now_ms()}), true);
        }
    }
}

/// Aborts the tasks when dropped (the serve future ended or was dropped).
struct StopOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// `reason` cut to at most [`MAX_CLOSE_REASON_BYTES`] on a character boundary.
pub fn close_reason(reason: &str) -> &str {
    if reason.len() <= MAX_CLOSE_REASON_BYTES {
        return reason;
    }
    let mut end = MAX_CLOSE_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    use super::*;

    /// A connection that stops reading is closed as a slow consumer and goes: it is no longer
    /// served, a broadcast target or in presence, though the client keeps its socket open and
    /// neither reads nor closes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_consumer_is_dropped_though_its_client_keeps_the_socket() {
        let (_dir, runtime) = crate::test_runtime().await;
        let config = GatewayConfig {
            token: Some("tok".into()),
            max_buffered_bytes: 64 * 1024,
            write_timeout: Duration::from_millis(300),
            ..GatewayConfig::default()
        };
        let (face, listener) = GatewayFace::bind(runtime, "127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap();
        let addr = face.local_addr();
        let serving = tokio::spawn(Arc::clone(&face).serve(listener));
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let stream = socket.connect(addr).await.unwrap();
        let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), stream)
            .await
            .unwrap();
        let _challenge = ws.next().await.unwrap().unwrap();
        let connect = serde_json::json!({"type": "req", "id": "c", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "version": "1", "platform": "rust", "mode": "test"},
            "scopes": ["operator.read"], "auth": {"token": "tok"}}});
        ws.send(Message::text(connect.to_string())).await.unwrap();
        loop {
            if let Message::Text(text) = ws.next().await.unwrap().unwrap()
                && text.as_str().contains("hello-ok")
            {
                break;
            }
        }
        assert_eq!(face.connection_count(), 1);
        // Far more answers than the socket's buffers and the 64 KiB outbox hold, never read
        // (until the gateway drops the connection, which fails these writes).
        for i in 0..100_000u32 {
            let request = format!(r#"{{"type":"req","id":"h{i}","method":"health"}}"#);
            if ws.feed(Message::text(request)).await.is_err()
                || (i % 1_000 == 0 && ws.flush().await.is_err())
            {
                break;
            }
        }
        let _ = ws.flush().await;
        let started = Instant::now();
        while face.connection_count() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the slow consumer is still served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(ws);
        serving.abort();
    }

    /// A thread another face named ("team", the App Server's name for it) is listed under a
    /// key the gateway reads back: its history is that thread's, and a run sent to that key
    /// runs on it, not on a second thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_listed_session_key_names_the_listed_thread() {
        let (_dir, runtime) = crate::test_runtime().await;
        let id = crate::app_server::wire::core_id("thread", "", "team");
        let new = agentwire_runtime::NewThread {
            alias: Some("team".into()),
            ..Default::default()
        };
        runtime.create_thread_with(&id, new).await.unwrap();
        let config = GatewayConfig {
            token: Some("tok".into()),
            ..GatewayConfig::default()
        };
        let (face, listener) = GatewayFace::bind(runtime, "127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap();
        let addr = face.local_addr();
        let serving = tokio::spawn(Arc::clone(&face).serve(listener));
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), stream)
            .await
            .unwrap();
        let mut call = async |id: &str, method: &str, params: serde_json::Value| {
            let req =
                serde_json::json!({"type": "req", "id": id, "method": method, "params": params});
            ws.send(Message::text(req.to_string())).await.unwrap();
            loop {
                if let Message::Text(t) = ws.next().await.unwrap().unwrap() {
                    let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["id"] == id {
                        return v;
                    }
                }
            }
        };
        call(
            "c",
            "connect",
            serde_json::json!({"minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "version": "1", "platform": "rust", "mode": "cli"},
            "scopes": ["operator.write"], "auth": {"token": "tok"}}),
        )
        .await;
        let listed = call("l", "sessions.list", serde_json::json!({})).await;
        let key = listed["payload"]["sessions"][0]["key"]
            .as_str()
            .unwrap()
            .to_owned();
        let history = call("h", "chat.history", serde_json::json!({"sessionKey": key})).await;
        assert_eq!(
            history["payload"]["sessionId"],
            id.as_str(),
            "{listed} {history}"
        );
        let sent = call(
            "s",
            "chat.send",
            serde_json::json!({"sessionKey": key, "message": "hi", "idempotencyKey": "k"}),
        )
        .await;
        assert_eq!(sent["ok"], true, "{sent}");
        let listed = call("l2", "sessions.list", serde_json::json!({})).await;
        assert_eq!(listed["payload"]["count"], 1, "{listed}");
        serving.abort();
    }

    #[test]
    fn close_reasons_are_cut_on_a_character_boundary() {
        assert_eq!(close_reason("slow consumer"), "slow consumer");
        let long = "é".repeat(100);
        let cut = close_reason(&long);
        assert_eq!(cut.len(), 120);
        assert_eq!(close_reason(&"a".repeat(121)).len(), 120);
        let odd = format!("a{}", "é".repeat(100));
        assert_eq!(close_reason(&odd).len(), 119);
    }
}

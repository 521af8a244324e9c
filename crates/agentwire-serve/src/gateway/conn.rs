//! One gateway connection: the upgrade (origin, pre-auth limit), the challenge, the handshake,
//! then requests until it closes; its outbound queue, bounded in bytes, written by its own task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::capped::{Capped, Gate};
use super::scopes::{self, Access, READ};
use super::{
    GatewayFace, MIN_NODE_PROTOCOL_VERSION, MIN_PROBE_PROTOCOL_VERSION, PREAUTH_MAX_PAYLOAD,
    PROTOCOL_VERSION, close_reason,
};

/// Requests of one connection being handled at once; one more is answered `UNAVAILABLE`
/// (retryable).
const MAX_IN_FLIGHT: usize = 64;

/// A gateway error: `code`, `message`, and optional `details`, `retryable`, `retryAfterMs`;
/// and the response's `payload` beside the error, when it has one (`agent`'s failed run).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Failure {
    pub(super) code: &'static str,
    pub(super) message: String,
    pub(super) details: Option<Box<Value>>,
    pub(super) retry_after_ms: Option<u64>,
    pub(super) payload: Option<Box<Value>>,
}

impl Failure {
    pub(super) fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            details: None,
            retry_after_ms: None,
            payload: None,
        }
    }

    /// The failure answered with `payload` beside the error.
    pub(super) fn with_payload(mut self, payload: Value) -> Failure {
        self.payload = Some(Box::new(payload));
        self
    }

    pub(super) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new("INVALID_REQUEST", message)
    }

    pub(super) fn with_details(mut self, details: Value) -> Failure {
        self.details = Some(Box::new(details));
        self
    }

    /// The missing-scope refusal.
    pub(super) fn missing_scope(scope: &str) -> Failure {
        Failure::new("FORBIDDEN", format!("missing scope: {scope}")).with_details(json!({
            "code": "MISSING_SCOPE",
            "missingScope": scope,
            "requiredScopes": [scope],
        }))
    }

    pub(super) fn shape(&self) -> Value {
        let mut shape = json!({"code": self.code, "message": self.message});
        if let Some(details) = &self.details {
            shape["details"] = (**details).clone();
        }
        if let Some(after) = self.retry_after_ms {
            shape["retryable"] = json!(true);
            shape["retryAfterMs"] = json!(after);
        }
        shape
    }
}

/// What the writer task sends, in order.
enum Out {
    Text(String),
    /// Close after what was queued before.
    Close(u16, String),
}

/// A connection's outbound queue: frames in order, at most `max` bytes queued; a close goes
/// ahead of whatever is queued.
#[derive(Debug)]
struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    queued: Arc<AtomicUsize>,
    max: usize,
    closing: AtomicBool,
    close: std::sync::Mutex<Option<oneshot::Sender<(u16, String)>>>,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Out::Text(text) => write!(f, "Text({} bytes)", text.len()),
            Out::Close(code, reason) => write!(f, "Close({code}, {reason:?})"),
        }
    }
}

impl Outbox {
    /// Queues `text`; while what is already queued is over the bound, a droppable frame is
    /// skipped (`false`) and anything else closes the connection 1008 "slow consumer". The
    /// frame itself does not count against it, as the real gateway checks the socket's
    /// buffered amount before a send: one frame larger than the bound reaches a client that
    /// keeps up, and the queue holds at most the bound and one frame.
    fn push(&self, text: String, droppable: bool) -> bool {
        if self.closing.load(Ordering::Acquire) {
            return false;
        }
        let len = text.len();
        let before = self.queued.fetch_add(len, Ordering::AcqRel);
        if before > self.max {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            if !droppable {
                self.close_now(1008, "slow consumer");
            }
            return false;
        }
        self.tx.send(Out::Text(text)).is_ok()
    }

    /// Closes the connection with `code` and `reason` (cut to 120 bytes) once what is queued
    /// was written; once.
    fn close(&self, code: u16, reason: &str) {
        if self.closing.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self
            .tx
            .send(Out::Close(code, close_reason(reason).to_owned()));
    }

    /// Closes the connection with `code` and `reason` ahead of what is queued (which is
    /// dropped); once.
    fn close_now(&self, code: u16, reason: &str) {
        if self.closing.swap(true, Ordering::AcqRel) {
            return;
        }
        let sender = self
            .close
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sender) = sender {
            let _ = sender.send((code, close_reason(reason).to_owned()));
        }
    }
}

/// An authenticated connection as the rest of the gateway sees it.
#[derive(Debug)]
pub struct ConnectionHandle {
    pub(super) id: u64,
    conn_id: String,
    role: String,
    scopes: Vec<String>,
    client: Value,
    since_ms: u64,
    outbox: Outbox,
    /// The last broadcast `seq` sent; held while a frame is numbered and queued, so frames
    /// reach the wire in `seq` order whichever task sends them.
    seq: std::sync::Mutex<u64>,
    sessions_subscribed: AtomicBool,
}

impl ConnectionHandle {
    /// Its `connId`.
    pub fn conn_id(&self) -> &str {
        &self.conn_id
    }

    /// Closes it with `code` and `reason` once what is queued was written.
    pub(super) fn close(&self, code: u16, reason: &str) {
        self.outbox.close(code, reason);
    }

    /// Whether it counts in presence: an interactive client (`ui`, `webchat`) or a node.
    pub(super) fn present(&self) -> bool {
        matches!(
            self.client["mode"].as_str(),
            Some("ui" | "webchat" | "node")
        )
    }

    /// From now on it receives `sessions.changed`.
    pub(super) fn subscribe_sessions(&self) {
        self.sessions_subscribed.store(true, Ordering::Release);
    }

    /// Whether it asked for `sessions.changed`.
    pub(super) fn wants_sessions(&self) -> bool {
        self.sessions_subscribed.load(Ordering::Acquire)
    }

    /// Whether the connection holds `scope` (or one implying it).
    pub fn holds(&self, scope: &str) -> bool {
        scopes::satisfies(&self.role, &self.scopes, scope)
    }

    /// Whether the connection has `access`.
    pub(super) fn may(&self, access: Access) -> bool {
        match access {
            Access::Open => true,
            Access::Scope(scope) => self.holds(scope),
        }
    }

    /// Sends a broadcast event with the next `seq` (used even when the frame is dropped):
    /// `payload` is the payload's JSON, `extra` more members of the frame (`,"name":value`…).
    pub(super) fn send_event(&self, event: &str, payload: &str, extra: &str, droppable: bool) {
        let mut seq = self
            .seq
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *seq += 1;
        let frame = format!(
            r#"{{"type":"event","event":"{event}","payload":{payload},"seq":{}{extra}}}"#,
            *seq
        );
        self.outbox.push(frame, droppable);
    }

    /// Answers request `id` (also a second time, as `agent` does when its run ends).
    pub(super) fn respond(&self, id: &str, answer: Result<Value, Failure>) {
        self.outbox.push(response(id, answer), false);
    }

    pub(super) fn presence_entry(&self) -> Value {
        let client = &self.client;
        let mut entry = json!({
            "ts": self.since_ms,
            "onlineSince": self.since_ms,
            "reason": "connect",
            "roles": [self.role],
            "scopes": self.scopes,
            "instanceId": self.conn_id,
        });
        for (key, field) in [
            ("version", "version"),
            ("platform", "platform"),
            ("mode", "mode"),
            ("host", "displayName"),
            ("deviceFamily", "deviceFamily"),
        ] {
            if let Some(Value::String(value)) = client.get(field)
                && !value.is_empty()
            {
                entry[key] = json!(value);
            }
        }
        entry
    }
}

/// Holds a pre-auth slot until dropped.
struct PreAuth<'a>(&'a AtomicUsize);

impl Drop for PreAuth<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves one TCP connection until it closes.
pub(super) async fn run(face: Arc<GatewayFace>, stream: TcpStream, peer: SocketAddr) {
    let config = &face.config;
    let admitted = face.preauth.fetch_add(1, Ordering::AcqRel) < config.max_preauth_connections;
    let slot = PreAuth(&face.preauth);
    let gate = Gate::new(PREAUTH_MAX_PAYLOAD);
    let mut origin: Option<String> = None;
    let callback = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        if !admitted {
            let mut refused =
                ErrorResponse::new(Some("too many connections in their handshake".into()));
            *refused.status_mut() =
                tokio_tungstenite::tungstenite::http::StatusCode::SERVICE_UNAVAILABLE;
            return Err(refused);
        }
        origin = request
            .headers()
            .get("origin")
            .and_then(|o| o.to_str().ok())
            .map(str::to_owned);
        Ok(response)
    };
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(config.max_payload))
        .max_frame_size(Some(config.max_payload));
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(
        Capped::new(stream, Arc::clone(&gate)),
        callback,
        Some(ws_config),
    );
    let ws = match tokio::time::timeout(config.handshake_timeout, upgrade).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "the WebSocket upgrade failed");
            return;
        }
        Err(_) => return,
    };
    gate.upgraded();
    let (sink, mut frames) = ws.split();
    let (tx, rx) = mpsc::unbounded_channel();
    let (close_tx, close_rx) = oneshot::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let outbox = Outbox {
        tx,
        queued: Arc::clone(&queued),
        max: config.max_buffered_bytes,
        closing: AtomicBool::new(false),
        close: std::sync::Mutex::new(Some(close_tx)),
    };
    let mut writer = tokio::spawn(write(sink, rx, close_rx, queued, config.write_timeout));
    let nonce = uuid::Uuid::new_v4().to_string();
    outbox.push(
        json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": face.now_ms()}})
            .to_string(),
        false,
    );
    let id = face.next_conn.fetch_add(1, Ordering::AcqRel);
    let deadline = tokio::time::Instant::now() + config.handshake_timeout;
    let handshake = tokio::time::timeout_at(
        deadline,
        handshake(&face, &mut frames, &gate, &outbox, origin.as_deref(), id),
    )
    .await;
    let conn = match handshake {
        Ok(Some(accepted)) => accepted,
        Ok(None) => {
            drop(outbox);
            let _ = writer.await;
            return;
        }
        Err(_) => {
            // No handshake in time: a normal close without a reason.
            outbox.close(1000, "");
            drop(outbox);
            let _ = writer.await;
            return;
        }
    };
    let (conn, hello) = conn.finish(outbox, face.now_ms());
    drop(slot);
    gate.lift();
    let conn = Arc::new(conn);
    conn.respond(&hello.0, Ok(hello.1));
    face.joined(Arc::clone(&conn));
    if conn.holds(scopes::APPROVALS) {
        face.send_pending_approvals(&conn).await;
    }
    // The connection ends when the client goes, or when nothing more can be written to it (a
    // slow consumer closed 1008, a write that timed out): its requests are then not read or
    // run any more, and it is no longer a broadcast target.
    let written = tokio::select! {
        () = serve_requests(&face, &conn, &mut frames, &gate) => false,
        _ = &mut writer => true,
    };
    face.left(conn.id);
    conn.outbox.close(1000, "");
    drop(conn);
    if !written {
        let _ = writer.await;
    }
}

/// A handshake that succeeded: who connected, and the `hello-ok` to answer `connect` with.
struct Accepted {
    id: u64,
    role: String,
    scopes: Vec<String>,
    client: Value,
    request_id: String,
    hello: Value,
}

impl Accepted {
    fn finish(self, outbox: Outbox, since_ms: u64) -> (ConnectionHandle, (String, Value)) {
        let conn = ConnectionHandle {
            id: self.id,
            conn_id: format!("ws-{}", self.id),
            role: self.role,
            scopes: self.scopes,
            client: self.client,
            since_ms,
            outbox,
            seq: std::sync::Mutex::new(0),
            sessions_subscribed: AtomicBool::new(false),
        };
        (conn, (self.request_id, self.hello))
    }
}

type Frames =
    futures_util::stream::SplitStream<tokio_tungstenite::WebSocketStream<Capped<TcpStream>>>;

/// Reads the next text frame, counting it through the gate; `Err(code)` when the connection
/// must close with that code (`None`: it already closed).
async fn next_text(frames: &mut Frames, gate: &Gate) -> Result<String, Option<u16>> {
    loop {
        match frames.next().await {
            None | Some(Ok(Message::Close(_))) => return Err(None),
            Some(Ok(Message::Text(text))) => {
                gate.delivered(text.len());
                return Ok(text.as_str().to_owned());
            }
            Some(Ok(Message::Binary(bytes))) => {
                gate.delivered(bytes.len());
                // Not a text frame: read as a frame that is not JSON.
                return Ok(String::new());
            }
            Some(Ok(Message::Ping(data) | Message::Pong(data))) => gate.delivered(data.len()),
            Some(Ok(Message::Frame(_))) => {}
            Some(Err(WsError::Capacity(_))) => return Err(Some(1009)),
            Some(Err(_)) if gate.tripped() => return Err(Some(1009)),
            // As the `ws` library closes: a text frame that is not UTF-8 is 1007, a frame that
            // breaks the protocol 1002.
            Some(Err(WsError::Utf8(_))) => return Err(Some(1007)),
            Some(Err(WsError::Protocol(_))) => return Err(Some(1002)),
            Some(Err(_)) => return Err(None),
        }
    }
}

/// A request frame, read exactly: `type: "req"`, a non-empty string `id` and `method`, and
/// optional `params` and `traceparent`; nothing else.
struct RequestFrame {
    id: String,
    method: String,
    params: Value,
}

fn request_frame(text: &str) -> Result<RequestFrame, (Option<String>, String)> {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        return Err((None, "not JSON".into()));
    };
    let id = match frame.get("id") {
        Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
        // An id that is not a string is answered under its text, so the client can match it.
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    super::schema::check_request(&frame).map_err(|why| (id, why))?;
    let text_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Ok(RequestFrame {
        id: text_of(&frame["id"]),
        method: text_of(&frame["method"]),
        params: frame.get("params").cloned().unwrap_or(Value::Null),
    })
}

/// The response frame answering request `id`.
fn response(id: &str, answer: Result<Value, Failure>) -> String {
    match answer {
        Ok(payload) => json!({"type": "res", "id": id, "ok": true, "payload": payload}),
        Err(failure) => match &failure.payload {
            Some(payload) => {
                json!({"type": "res", "id": id, "ok": false, "payload": payload, "error": failure.shape()})
            }
            None => json!({"type": "res", "id": id, "ok": false, "error": failure.shape()}),
        },
    }
    .to_string()
}

/// The handshake: the first frame must be a `connect` request the gateway accepts. On a refusal
/// the answer (when the frame was a request) and the close are queued, and `None` returned.
async fn handshake(
    face: &GatewayFace,
    frames: &mut Frames,
    gate: &Gate,
    outbox: &Outbox,
    origin: Option<&str>,
    id: u64,
) -> Option<Accepted> {
    let text = match next_text(frames, gate).await {
        Ok(text) => text,
        Err(Some(code)) => {
            outbox.close(code, "");
            return None;
        }
        Err(None) => return None,
    };
    let frame = match request_frame(&text) {
        Ok(frame) => frame,
        Err(_) => {
            outbox.close(1008, "invalid request frame");
            return None;
        }
    };
    let refuse = |failure: Failure, code: u16, reason: &str| {
        outbox.push(response(&frame.id, Err(failure)), false);
        outbox.close(code, reason);
        None
    };
    if frame.method != "connect" {
        let message = "invalid handshake: first request must be connect";
        return refuse(Failure::invalid(message), 1008, message);
    }
    let connect = match super::methods::connect_params(&frame.params) {
        Ok(connect) => connect,
        Err(why) => {
            let message = format!("invalid connect params: {why}");
            return refuse(Failure::invalid(&message), 1008, &message);
        }
    };
    let (min, max) = (connect.min_protocol, connect.max_protocol);
    let mode = connect.client["mode"].as_str().unwrap_or_default();
    let role = connect
        .role
        .clone()
        .unwrap_or_else(|| "operator".to_owned());
    let fits = (min <= PROTOCOL_VERSION && max >= PROTOCOL_VERSION)
        || (mode == "probe" && max >= MIN_PROBE_PROTOCOL_VERSION && min <= PROTOCOL_VERSION)
        || (role == "node"
            && mode == "node"
            && max >= MIN_NODE_PROTOCOL_VERSION
            && min <= MIN_NODE_PROTOCOL_VERSION);
    if !fits {
        let failure = Failure::invalid("protocol mismatch").with_details(json!({
            "code": "PROTOCOL_MISMATCH",
            "clientMinProtocol": min,
            "clientMaxProtocol": max,
            "expectedProtocol": PROTOCOL_VERSION,
            "minimumProbeProtocol": MIN_PROBE_PROTOCOL_VERSION,
        }));
        return refuse(failure, 1002, "protocol mismatch");
    }
    if role != "operator" && role != "node" {
        let message = format!("invalid role: {role}");
        return refuse(Failure::invalid(&message), 1008, &message);
    }
    if let Some(origin) = origin
        && !face.origin_allowed(origin)
    {
        let message = format!("origin not allowed: {origin}");
        let failure = Failure::invalid(&message)
            .with_details(json!({"code": "CONTROL_UI_ORIGIN_NOT_ALLOWED", "origin": origin}));
        return refuse(failure, 1008, &message);
    }
    let granted = match &face.config.token {
        Some(token) => match connect.token.as_deref() {
            None => {
                let message =
                    "unauthorized: gateway token missing (set auth.token to this gateway's token)";
                let failure = Failure::invalid(message).with_details(json!({
                    "code": "AUTH_TOKEN_MISSING",
                    "authReason": "token_missing",
                    "canRetryWithDeviceToken": false,
                    "recommendedNextStep": "update_auth_configuration",
                }));
                return refuse(failure, 1008, message);
            }
            Some(given) if !constant_time_eq(given.as_bytes(), token.as_bytes()) => {
                let message = "unauthorized: gateway token mismatch (use this gateway's token)";
                let failure = Failure::invalid(message).with_details(json!({
                    "code": "AUTH_TOKEN_MISMATCH",
                    "authReason": "token_mismatch",
                    "canRetryWithDeviceToken": false,
                    "recommendedNextStep": "update_auth_credentials",
                }));
                return refuse(failure, 1008, message);
            }
            // A client with the token gets exactly the scopes it asks for.
            Some(_) => connect.scopes.clone().unwrap_or_default(),
        },
        // Without a token (loopback only) a client is a read-only operator at most.
        None => match &connect.scopes {
            None => vec![READ.to_owned()],
            Some(asked) => asked
                .iter()
                .filter(|s| scopes::satisfies("operator", &[READ.to_owned()], s))
                .cloned()
                .collect(),
        },
    };
    let granted = if role == "operator" {
        granted
    } else {
        granted
            .into_iter()
            .filter(|s| s.starts_with(&format!("{role}.")))
            .collect()
    };
    let protocol = if max >= PROTOCOL_VERSION {
        PROTOCOL_VERSION
    } else {
        max
    };
    tracing::info!(
        conn = id,
        client = %connect.client["id"].as_str().unwrap_or_default(),
        mode,
        %role,
        asked = ?connect.scopes,
        granted = ?granted,
        "a gateway client connected"
    );
    let hello = face.hello(protocol, id, &role, &granted);
    Some(Accepted {
        id,
        role,
        scopes: granted,
        client: connect.client,
        request_id: frame.id,
        hello,
    })
}

/// Compares secrets in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    // Equal-length digests, compared byte by byte without an early exit.
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// Reads requests until the connection ends; each is checked for its frame, scope and params,
/// then handled in its own task.
async fn serve_requests(
    face: &Arc<GatewayFace>,
    conn: &Arc<ConnectionHandle>,
    frames: &mut Frames,
    gate: &Gate,
) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        let text = match next_text(frames, gate).await {
            Ok(text) => text,
            Err(Some(code)) => {
                conn.outbox.close(code, "");
                return;
            }
            Err(None) => return,
        };
        let frame = match request_frame(&text) {
            Ok(frame) => frame,
            Err((Some(id), why)) => {
                conn.respond(
                    &id,
                    Err(Failure::invalid(format!("invalid request frame: {why}"))),
                );
                continue;
            }
            // Not JSON, or no id to answer: nothing to answer.
            Err((None, why)) => {
                tracing::debug!(conn = conn.id, %why, "an unreadable frame was dropped");
                continue;
            }
        };
        let access = match scopes::method_scope(&frame.method) {
            Some(access) => access,
            None => {
                // An unclassified method needs admin; an admin learns it does not exist.
                let failure = if conn.holds(scopes::ADMIN) {
                    Failure::invalid(format!("unknown method: {}", frame.method))
                } else {
                    Failure::missing_scope(scopes::ADMIN)
                };
                conn.respond(&frame.id, Err(failure));
                continue;
            }
        };
        if let Access::Scope(scope) = access
            && !conn.holds(scope)
        {
            conn.respond(&frame.id, Err(Failure::missing_scope(scope)));
            continue;
        }
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            let mut busy = Failure::new(
                "UNAVAILABLE",
                "too many requests in flight on this connection",
            );
            busy.retry_after_ms = Some(100);
            conn.respond(&frame.id, Err(busy));
            continue;
        };
        let (face, conn) = (Arc::clone(face), Arc::clone(conn));
        tokio::spawn(async move {
            let answer =
                super::methods::call(&face, &conn, &frame.id, &frame.method, frame.params).await;
            if let Some(answer) = answer {
                conn.respond(&frame.id, answer);
            }
            drop(permit);
        });
    }
}

/// The writer task: frames in order, each within the write timeout; a close goes out ahead of
/// what is queued.
async fn write<S>(
    mut sink: S,
    mut rx: mpsc::UnboundedReceiver<Out>,
    mut close: oneshot::Receiver<(u16, String)>,
    queued: Arc<AtomicUsize>,
    timeout: Duration,
) where
    S: futures_util::Sink<Message, Error = WsError> + Unpin,
{
    // Until the connection's outbox goes away, which ends the urgent close's channel.
    let mut urgent = true;
    loop {
        let out = tokio::select! {
            biased;
            closing = &mut close, if urgent => {
                match closing {
                    Ok((code, reason)) => {
                        send_close(&mut sink, code, reason, timeout).await;
                        break;
                    }
                    Err(_) => {
                        urgent = false;
                        continue;
                    }
                }
            }
            out = rx.recv() => out,
        };
        let text = match out {
            Some(Out::Text(text)) => text,
            Some(Out::Close(code, reason)) => {
                send_close(&mut sink, code, reason, timeout).await;
                break;
            }
            None => break,
        };
        let len = text.len();
        let sent = tokio::time::timeout(timeout, sink.send(Message::text(text))).await;
        queued.fetch_sub(len, Ordering::AcqRel);
        if !matches!(sent, Ok(Ok(()))) {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
}

/// Writes a close frame, within `timeout`.
async fn send_close<S>(sink: &mut S, code: u16, reason: String, timeout: Duration)
where
    S: futures_util::Sink<Message, Error = WsError> + Unpin,
{
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(timeout, sink.send(Message::Close(Some(frame)))).await;
}

/// The `connect` params the gateway reads.
pub(super) struct Connect {
    pub(super) min_protocol: u64,
    pub(super) max_protocol: u64,
    pub(super) client: Value,
    pub(super) role: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) token: Option<String>,
}

impl GatewayFace {
    /// Whether a browser at `origin` may connect: the gateway's own loopback address, or one
    /// configured.
    fn origin_allowed(&self, origin: &str) -> bool {
        let port = self.local.port();
        let own = [
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ];
        own.iter().any(|o| o == origin) || self.config.allowed_origins.iter().any(|o| o == origin)
    }

    /// The `hello-ok` of a connection granted `scopes` as `role`.
    fn hello(&self, protocol: u64, id: u64, role: &str, granted: &[String]) -> Value {
        let mut snapshot = Map::new();
        let can_read = scopes::satisfies(role, granted, READ);
        snapshot.insert(
            "presence".into(),
            if can_read {
                json!(self.presence())
            } else {
                json!([])
            },
        );
        snapshot.insert("health".into(), self.health_summary());
        snapshot.insert("stateVersion".into(), self.state_version());
        snapshot.insert("uptimeMs".into(), json!(self.uptime_ms()));
        snapshot.insert(
            "authMode".into(),
            json!(if self.config.token.is_some() {
                "token"
            } else {
                "none"
            }),
        );
        json!({
            "type": "hello-ok",
            "protocol": protocol,
            "server": {"version": self.config.server_version, "connId": format!("ws-{id}")},
            "features": {"methods": scopes::METHODS, "events": scopes::EVENTS},
            "snapshot": snapshot,
            "auth": {"role": role, "scopes": granted},
            "policy": {
                "maxPayload": self.config.max_payload,
                "maxBufferedBytes": self.config.max_buffered_bytes,
                "tickIntervalMs": u64::try_from(self.config.tick_interval.as_millis()).unwrap_or(u64::MAX).max(1),
            },
        })
    }

    /// What `health` answers, and the snapshot's `health`.
    pub(super) fn health_summary(&self) -> Value {
        json!({
            "ok": true,
            "ts": self.now_ms(),
            "durationMs": 0,
            "defaultAgentId": super::methods::AGENT_ID,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_frames_are_read_exactly() {
        let ok = request_frame(r#"{"type":"req","id":"a","method":"health"}"#)
            .ok()
            .unwrap();
        assert_eq!((ok.id.as_str(), ok.method.as_str()), ("a", "health"));
        assert_eq!(ok.params, Value::Null);
        let err = |text: &str| request_frame(text).err().unwrap();
        assert_eq!(err("nope"), (None, "not JSON".into()));
        assert_eq!(err("[1]").0, None);
        let (id, why) = err(r#"{"type":"req","id":7,"method":"health"}"#);
        assert_eq!(id.as_deref(), Some("7"));
        assert!(why.starts_with("/id: "), "{why}");
        let (id, why) = err(r#"{"type":"req","id":"a","method":"health","x":1}"#);
        assert_eq!(id.as_deref(), Some("a"));
        assert!(why.contains('x'), "{why}");
        assert!(
            err(r#"{"type":"event","id":"a","method":"health"}"#)
                .1
                .starts_with("/type: ")
        );
    }

    #[test]
    fn failures_have_the_error_shape() {
        assert_eq!(
            Failure::missing_scope("operator.write").shape(),
            json!({
                "code": "FORBIDDEN",
                "message": "missing scope: operator.write",
                "details": {"code": "MISSING_SCOPE", "missingScope": "operator.write", "requiredScopes": ["operator.write"]}
            })
        );
        assert!(constant_time_eq(b"a", b"a"));
        assert!(!constant_time_eq(b"a", b"b"));
    }

    /// What is already queued decides, not the frame: a frame larger than the bound is queued
    /// into an empty queue, and once the queue is over the bound a droppable frame is skipped
    /// and any other closes the connection.
    #[test]
    fn the_outbox_bound_counts_what_is_queued_not_the_frame() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (close_tx, mut close_rx) = oneshot::channel();
        let outbox = Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            max: 100,
            closing: AtomicBool::new(false),
            close: std::sync::Mutex::new(Some(close_tx)),
        };
        assert!(outbox.push("x".repeat(150), false));
        assert!(matches!(rx.try_recv(), Ok(Out::Text(t)) if t.len() == 150));
        assert!(close_rx.try_recv().is_err(), "closed for one large frame");
        assert!(
            !outbox.push("tick".into(), true),
            "a droppable frame over the bound"
        );
        assert!(close_rx.try_recv().is_err());
        assert!(!outbox.push("res".into(), false));
        assert_eq!(close_rx.try_recv().unwrap().0, 1008);
    }

    /// Broadcast frames reach the wire in `seq` order whichever tasks send them at once (the
    /// pump, `tick`, `presence` and requests' `sessions.changed` do): a client reads a
    /// backwards `seq` as a broken stream.
    #[test]
    fn broadcast_frames_are_queued_in_seq_order_under_concurrent_senders() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (close_tx, _close_rx) = oneshot::channel();
        let conn = Arc::new(ConnectionHandle {
            id: 1,
            conn_id: "ws-1".into(),
            role: "operator".into(),
            scopes: vec![],
            client: Value::Null,
            since_ms: 0,
            outbox: Outbox {
                tx,
                queued: Arc::new(AtomicUsize::new(0)),
                max: usize::MAX,
                closing: AtomicBool::new(false),
                close: std::sync::Mutex::new(Some(close_tx)),
            },
            seq: std::sync::Mutex::new(0),
            sessions_subscribed: AtomicBool::new(false),
        });
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let conn = Arc::clone(&conn);
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        conn.send_event("tick", "{}", "", true);
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        let mut expected = 1;
        while let Ok(Out::Text(text)) = rx.try_recv() {
            let frame: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(frame["seq"], expected, "{text}");
            expected += 1;
        }
        assert_eq!(expected, 100_001);
    }
}

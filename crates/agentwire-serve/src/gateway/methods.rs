//! The gateway's methods on the runtime core: sessions are threads (a session's `key` is the
//! thread's name), runs are turns, approvals are the core's approval interactions.

use std::sync::Arc;
use std::time::Duration;

use crate::kept::Once;
use agentwire_runtime::{
    Answer, Decision, DecisionKind, NewThread, Published, Role, RuntimeError, ThreadEvent,
    TurnInput, fingerprint,
};
use serde_json::{Map, Value, json};

use super::GatewayFace;
use super::conn::{Connect, ConnectionHandle, Failure};
use crate::app_server::wire::core_id;

/// Sessions `sessions.list` returns at most, and by default.
const MAX_LIST: usize = 1000;
const DEFAULT_LIST: usize = 100;
/// Messages `chat.history` returns at most, and by default.
const MAX_HISTORY: usize = 1000;
const DEFAULT_HISTORY: usize = 200;
/// The session `agent` runs in when it names none.
pub(super) const MAIN_SESSION: &str = "main";
/// The agent id the gateway reports.
pub(super) const AGENT_ID: &str = "main";

/// Handles one request whose scope was checked. `None` when the method answers by itself (it
/// already did).
pub(super) async fn call(
    face: &Arc<GatewayFace>,
    conn: &Arc<ConnectionHandle>,
    id: &str,
    method: &str,
    params: Value,
) -> Option<Result<Value, Failure>> {
    let params = match params {
        Value::Null => Value::Object(Map::new()),
        Value::Object(_) => params,
        _ => {
            return Some(Err(Failure::invalid(format!(
                "invalid {method} params: must be an object"
            ))));
        }
    };
    if let Err(why) = super::schema::check_params(method, &params) {
        return Some(Err(Failure::invalid(format!(
            "invalid {method} params: {why}"
        ))));
    }
    Some(match method {
        "health" => Ok(face.health_summary()),
        "status" => {
            let threads = face.runtime.summaries();
            Ok(json!({
                "ts": face.now_ms(),
                "server": {"version": face.config.server_version, "connId": conn.conn_id()},
                "uptimeMs": face.uptime_ms(),
                "sessions": {
                    "count": threads.len(),
                    "active": threads.iter().filter(|s| !s.archived).count(),
                },
                "pendingApprovals": face.pending_approval_count(),
            }))
        }
        "system-presence" => Ok(json!(face.presence())),
        "sessions.list" => Ok(sessions_list(face, &params)),
        "sessions.create" => {
            idempotent(face, "sessions", &params, sessions_create(face, &params))
                .await
                .0
        }
        "sessions.subscribe" => {
            conn.subscribe_sessions();
            Ok(json!({"subscribed": true}))
        }
        "chat.history" => chat_history(face, &params).await,
        "chat.send" => return chat_send(face, conn, id, &params).await,
        "agent" => return agent(face, conn, id, &params).await,
        "exec.approval.resolve" => approval_resolve(face, &params).await,
        other => Err(Failure::invalid(format!("unknown method: {other}"))),
    })
}

/// A string param.
fn text<'a>(params: &'a Value, name: &str) -> Option<&'a str> {
    params.get(name).and_then(Value::as_str)
}

/// A count param within `1..=max`, or `default`.
fn count(params: &Value, name: &str, default: usize, max: usize) -> usize {
    params
        .get(name)
        .and_then(Value::as_u64)
        .map_or(default, |n| usize::try_from(n).unwrap_or(max).clamp(1, max))
}

/// The runtime's thread a gateway session `key` makes.
fn gateway_thread(key: &str) -> String {
    core_id("gateway-session", "", key)
}

impl GatewayFace {
    /// The runtime's thread of session `key`: the thread whose id it is (a session another
    /// face made, which the gateway lists by its id), else the one a gateway session of that
    /// key makes.
    pub(super) fn thread_of(&self, key: &str) -> String {
        if self.runtime.contains_thread(key) {
            return key.to_owned();
        }
        gateway_thread(key)
    }

    /// The key a host knows the thread by: the key of a gateway session, else the thread's
    /// id (a thread another face made has a name in that face, under which the gateway would
    /// find another thread).
    pub(super) fn session_key(&self, thread_id: &str) -> String {
        self.runtime
            .summary(thread_id)
            .ok()
            .and_then(|s| s.alias)
            .filter(|alias| gateway_thread(alias) == thread_id)
            .unwrap_or_else(|| thread_id.to_owned())
    }

    /// Creates the thread of session `key` unless it exists.
    async fn ensure_session(&self, key: &str, label: Option<String>) -> Result<String, Failure> {
        let thread = self.thread_of(key);
        if self.runtime.contains_thread(&thread) {
            return Ok(thread);
        }
        let alias = (thread != key).then(|| key.to_owned());
        let new = NewThread {
            title: label,
            alias,
            ..NewThread::default()
        };
        match self.runtime.create_thread_with(&thread, new).await {
            Ok(()) => {
                self.sessions_changed(key, "created");
                Ok(thread)
            }
            Err(RuntimeError::ThreadExists(_)) => Ok(thread),
            Err(error) => Err(runtime_failure(&error)),
        }
    }

    fn sessions_changed(&self, key: &str, reason: &str) {
        let payload = json!({"sessionKey": key, "reason": reason, "ts": self.now_ms()});
        self.broadcast_to_subscribers("sessions.changed", &payload);
    }
}

fn runtime_failure(error: &RuntimeError) -> Failure {
    match error {
        RuntimeError::ThreadNotFound(_) | RuntimeError::ThreadArchived(_) => {
            Failure::invalid(error.to_string())
        }
        RuntimeError::TurnAlreadyActive { .. } => {
            let mut busy = Failure::new("UNAVAILABLE", error.to_string());
            busy.retry_after_ms = Some(500);
            busy
        }
        other => Failure::new("UNAVAILABLE", other.to_string()),
    }
}

fn sessions_list(face: &GatewayFace, params: &Value) -> Value {
    let limit = count(params, "limit", DEFAULT_LIST, MAX_LIST);
    let offset = params.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let archived = params.get("archived");
    let mut summaries = face.runtime.summaries();
    summaries.retain(|s| match archived {
        Some(Value::Bool(wanted)) => s.archived == *wanted,
        Some(_) => true,
        None => !s.archived,
    });
    // Every session is the one agent's.
    if text(params, "agentId").is_some_and(|agent| agent != AGENT_ID) {
        summaries.clear();
    }
    // `search`: the key, label or title contains the text, case aside.
    if let Some(search) = text(params, "search").map(str::to_lowercase) {
        summaries.retain(|s| {
            [s.alias.as_deref(), Some(s.id.as_str()), s.title.as_deref()]
                .into_iter()
                .flatten()
                .any(|field| field.to_lowercase().contains(&search))
        });
    }
    summaries.sort_by(|a, b| b.updated_at_ms.cmp(&a.updated_at_ms).then(a.id.cmp(&b.id)));
    let total = summaries.len();
    let sessions: Vec<Value> = summaries
        .iter()
        .skip(offset)
        .take(limit)
        .map(|s| {
            let mut entry = json!({
                "key": face.session_key(&s.id),
                "kind": "direct",
                "sessionId": s.id,
                "agentId": AGENT_ID,
                "createdAt": s.created_at_ms,
                "updatedAt": s.updated_at_ms,
                "archived": s.archived,
            });
            if let Some(title) = &s.title {
                entry["label"] = json!(title);
            }
            entry
        })
        .collect();
    let next = offset.saturating_add(sessions.len());
    let mut out = json!({
        "ts": face.now_ms(),
        "count": sessions.len(),
        "totalCount": total,
        "limitApplied": limit,
        "hasMore": next < total,
        "sessions": sessions,
    });
    if next < total {
        out["nextOffset"] = json!(next);
    }
    out
}

async fn sessions_create(face: &GatewayFace, params: &Value) -> Result<Value, Failure> {
    known_agent(params)?;
    let key = text(params, "key").map_or_else(
        || format!("session-{}", uuid::Uuid::new_v4()),
        str::to_owned,
    );
    let thread = face.thread_of(&key);
    if face.runtime.contains_thread(&thread) {
        return Err(Failure::invalid(format!("session {key} exists")));
    }
    let label = text(params, "label")
        .or_else(|| text(params, "displayName"))
        .map(str::to_owned);
    face.ensure_session(&key, label).await?;
    let mut answer = json!({"ok": true, "key": key, "sessionId": thread});
    // A first message starts a run on the new session at once; the session stands whether
    // or not the run could start.
    if let Some(message) = text(params, "message").filter(|m| !m.is_empty()) {
        let run_id = uuid::Uuid::new_v4().to_string();
        match start_run(face, &key, &run_id, message, None).await {
            Ok(run_id) => {
                answer["runStarted"] = json!(true);
                answer["runId"] = json!(run_id);
            }
            Err(failure) => {
                answer["runStarted"] = json!(false);
                answer["runError"] = failure.shape();
            }
        }
    }
    Ok(answer)
}

/// The idempotency store's scope of the gateway's kept answers.
const KEPT_SCOPE: &str = "openclaw-gateway";

/// Runs `work` once per `idempotencyKey` of `family` (the runtime's idempotency store, shared
/// by every connection and face): a retry with the same params gets the first answer (and
/// `true`); the same key with other params is refused. Without a key it simply runs.
async fn idempotent(
    face: &GatewayFace,
    family: &str,
    params: &Value,
    work: impl std::future::Future<Output = Result<Value, Failure>>,
) -> (Result<Value, Failure>, bool) {
    let Some(key) = text(params, "idempotencyKey") else {
        return (work.await, false);
    };
    let key = format!("{family}:{key}");
    let print = fingerprint(&[family.as_bytes(), crate::kept::canonical(params).as_bytes()]);
    let store = face.runtime.idempotency();
    // Only what was decided is kept; an unavailable runtime may answer otherwise later.
    let keep = |answer: &Result<Value, Failure>| match answer {
        Err(failure) if failure.code == "UNAVAILABLE" => None,
        _ => Some(encode_kept(answer).into_bytes()),
    };
    let interrupted =
        encode_kept(&Err(Failure::new("UNAVAILABLE", crate::kept::INTERRUPTED))).into_bytes();
    match crate::kept::once(store, KEPT_SCOPE, &key, &print, work, keep, interrupted).await {
        Once::Ran(answer) => (answer, false),
        Once::Replayed(bytes) => (decode_kept(&bytes), true),
        Once::Mismatch => {
            let failure = Failure::invalid(format!(
                "idempotencyKey {} was used for another request",
                &key[family.len() + 1..]
            ));
            (Err(failure), false)
        }
    }
}

fn encode_kept(answer: &Result<Value, Failure>) -> String {
    match answer {
        Ok(payload) => json!({"ok": true, "payload": payload}),
        Err(failure) => json!({
            "ok": false,
            "code": failure.code,
            "message": failure.message,
            "details": failure.details,
            "payload": failure.payload,
        }),
    }
    .to_string()
}

fn decode_kept(bytes: &[u8]) -> Result<Value, Failure> {
    let kept: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    if kept["ok"] == json!(true) {
        return Ok(kept["payload"].clone());
    }
    let code = match kept["code"].as_str() {
        Some("FORBIDDEN") => "FORBIDDEN",
        Some("APPROVAL_NOT_FOUND") => "APPROVAL_NOT_FOUND",
        // A run that failed, or an answer interrupted with its connection.
        Some("UNAVAILABLE") => "UNAVAILABLE",
        _ => "INVALID_REQUEST",
    };
    let mut failure = Failure::new(code, kept["message"].as_str().unwrap_or("kept answer"));
    if !kept["details"].is_null() {
        failure.details = Some(Box::new(kept["details"].clone()));
    }
    if !kept["payload"].is_null() {
        failure.payload = Some(Box::new(kept["payload"].clone()));
    }
    Err(failure)
}

async fn chat_history(face: &GatewayFace, params: &Value) -> Result<Value, Failure> {
    let key = text(params, "sessionKey").unwrap_or_default();
    let thread = face.thread_of(key);
    let limit = count(params, "limit", DEFAULT_HISTORY, MAX_HISTORY);
    let messages = face
        .runtime
        .inspect(&thread, |state| {
            let start = state.messages.len().saturating_sub(limit);
            state.messages[start..]
                .iter()
                .map(|m| {
                    let text: String = m
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            agentwire_runtime::MessagePart::Text { text } => Some(text.as_str()),
                            agentwire_runtime::MessagePart::Attachment(_) => None,
                        })
                        .collect();
                    json!({
                        "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
                        "content": [{"type": "text", "text": text}],
                        "timestamp": m.created_at_ms,
                        "runId": m.turn_id,
                    })
                })
                .collect::<Vec<_>>()
        })
        .await;
    // A session nobody wrote to yet has an empty history, as on the real gateway (a UI loads
    // the history of a session it opens).
    Ok(match messages {
        Ok(messages) => json!({"sessionKey": key, "sessionId": thread, "messages": messages}),
        Err(_) => json!({"sessionKey": key, "messages": []}),
    })
}

/// Starts a run of `message` in session `key`: a turn of its thread, created if new; its id. With
/// `watch`, the thread's subscription is put there before the run starts, so nothing of it is
/// missed.
async fn start_run(
    face: &GatewayFace,
    key: &str,
    run_id: &str,
    message: &str,
    watch: Option<&mut Option<agentwire_runtime::Subscription>>,
) -> Result<String, Failure> {
    let thread = face.ensure_session(key, None).await?;
    if let Some(watch) = watch {
        *watch = face.runtime.subscribe_thread(&thread).await.ok();
    }
    let run_id = run_id.to_owned();
    let input = TurnInput {
        text: message.to_owned(),
        attachments: vec![],
    };
    face.runtime
        .start_turn(&thread, &run_id, input)
        .await
        .map_err(|e| runtime_failure(&e))?;
    Ok(run_id)
}

/// `chat.send`: answers `started` with the run's id; the run's events follow the answer (the
/// pump holds them until it is queued).
async fn chat_send(
    face: &GatewayFace,
    conn: &ConnectionHandle,
    id: &str,
    params: &Value,
) -> Option<Result<Value, Failure>> {
    let key = text(params, "sessionKey").unwrap_or_default().to_owned();
    let message = text(params, "message").unwrap_or_default().to_owned();
    let run_id = uuid::Uuid::new_v4().to_string();
    let announcing = face.announcing(&run_id);
    let (answer, replayed) = idempotent(face, "chat", params, async {
        let run_id = start_run(face, &key, &run_id, &message, None).await?;
        Ok(json!({"runId": run_id, "status": "started"}))
    })
    .await;
    let answer = match answer {
        Ok(answer) if replayed => Ok(in_flight(face, &key, answer).await),
        other => other,
    };
    conn.respond(id, answer);
    drop(announcing);
    None
}

/// A kept run answer as a retry sees it: `in_flight` while its run is still going.
async fn in_flight(face: &GatewayFace, key: &str, mut answer: Value) -> Value {
    let Some(run_id) = answer["runId"].as_str() else {
        return answer;
    };
    let running = face
        .runtime
        .inspect(&face.thread_of(key), |s| {
            s.active_turn.as_ref().is_some_and(|t| t.id == run_id)
        })
        .await
        .unwrap_or(false);
    if running {
        answer["status"] = json!("in_flight");
    }
    answer
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The one agent (`main`), or an `agentId` naming another: `INVALID_REQUEST`.
fn known_agent(params: &Value) -> Result<(), Failure> {
    match text(params, "agentId") {
        Some(agent) if agent != AGENT_ID => Err(Failure::invalid(format!(
            "unknown agent id {agent:?}: this gateway runs the agent {AGENT_ID:?}"
        ))),
        _ => Ok(()),
    }
}

/// `agent`: answers `accepted` at once, then a second time when the run ends.
async fn agent(
    face: &Arc<GatewayFace>,
    conn: &Arc<ConnectionHandle>,
    id: &str,
    params: &Value,
) -> Option<Result<Value, Failure>> {
    // An empty key (the schema allows it) is the main session, as an absent one: a session
    // keyed "" would put `sessionKey: ""` in events no client's schema accepts.
    let key = text(params, "sessionKey")
        .filter(|key| !key.is_empty())
        .unwrap_or(MAIN_SESSION)
        .to_owned();
    let message = text(params, "message").unwrap_or_default().to_owned();
    if let Err(failure) = known_agent(params) {
        return Some(Err(failure));
    }
    let mut watch = None;
    let run_id = uuid::Uuid::new_v4().to_string();
    let announcing = face.announcing(&run_id);
    let (first, _) = idempotent(face, "agent", params, async {
        let run_id = start_run(face, &key, &run_id, &message, Some(&mut watch)).await?;
        Ok(json!({"runId": run_id, "agentId": AGENT_ID, "status": "accepted", "acceptedAt": face.now_ms()}))
    })
    .await;
    let first = match first {
        Ok(first) => first,
        Err(failure) => return Some(Err(failure)),
    };
    let Some(mut watch) = watch else {
        // A retry: `in_flight` while the first request's run goes (that request gives its
        // end); once it ended, its final answer (kept in place of `accepted`).
        return Some(Ok(in_flight(face, &key, first).await));
    };
    conn.respond(id, Ok(first.clone()));
    drop(announcing);
    let run_id = first["runId"].as_str().unwrap_or_default().to_owned();
    // `timeout`: the run is stopped after that many seconds (0: no limit of its own).
    let timeout = params
        .get("timeout")
        .and_then(Value::as_u64)
        .filter(|&seconds| seconds > 0);
    let _deadline = timeout.map(|seconds| {
        let (face, thread, run) = (Arc::clone(face), face.thread_of(&key), run_id.clone());
        AbortOnDrop(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            let _ = face.runtime.cancel_turn(&thread, &run).await;
        }))
    });
    let end = loop {
        match watch.recv_until_stopped().await {
            Some(Published::Durable { event, .. }) => match &event.event {
                ThreadEvent::TurnCompleted { turn_id } if *turn_id == run_id => {
                    break Ok(json!({"runId": run_id, "status": "ok", "summary": "completed"}));
                }
                ThreadEvent::TurnFailed {
                    turn_id, message, ..
                } if *turn_id == run_id => {
                    let payload = json!({"runId": run_id, "status": "error", "summary": message});
                    break Err((payload, message.clone()));
                }
                ThreadEvent::TurnCancelled {
                    turn_id, message, ..
                } if *turn_id == run_id => {
                    let summary = format!("aborted: {message}");
                    let payload = json!({"runId": run_id, "status": "error", "summary": summary});
                    break Err((payload, summary));
                }
                _ => {}
            },
            Some(Published::Live { .. }) => {}
            None => return None,
        }
    };
    let end = end
        .map_err(|(payload, message)| Failure::new("UNAVAILABLE", message).with_payload(payload));
    // A retry after the run ended is answered its end, as the real gateway's cache does: a
    // client that waits for the final answer (the CLI's `expectFinal`) would wait for good on
    // `accepted` alone.
    if let Some(idempotency_key) = text(params, "idempotencyKey") {
        face.runtime.idempotency().amend(
            KEPT_SCOPE,
            &format!("agent:{idempotency_key}"),
            encode_kept(&end).as_bytes(),
        );
    }
    conn.respond(id, end);
    None
}

async fn approval_resolve(face: &GatewayFace, params: &Value) -> Result<Value, Failure> {
    let id = text(params, "id").unwrap_or_default();
    let kind = match text(params, "decision").unwrap_or_default() {
        "allow-once" => DecisionKind::AcceptOnce,
        "allow-always" => DecisionKind::AcceptForSession,
        "deny" => DecisionKind::Decline,
        other => {
            return Err(Failure::invalid(format!(
                "invalid decision {other:?}: allow-once, allow-always or deny"
            )));
        }
    };
    let not_found = || {
        Failure::new(
            "APPROVAL_NOT_FOUND",
            format!("unknown or already resolved approval: {id}"),
        )
    };
    let thread = face.approval_thread(id).ok_or_else(not_found)?;
    let binding = face
        .runtime
        .approval_binding(&thread, id)
        .await
        .map_err(|_| not_found())?;
    face.runtime
        .decide(&binding, Answer::Decision(Decision::of(kind)))
        .await
        .map_err(|_| not_found())?;
    Ok(json!({"ok": true}))
}

/// Reads `connect` params exactly as `ConnectParams` has them.
pub(super) fn connect_params(params: &Value) -> Result<Connect, String> {
    super::schema::check_connect(params)?;
    let number = |name: &str| params[name].as_u64().unwrap_or(0);
    let strings = |value: &Value| -> Option<Vec<String>> {
        value.as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
    };
    Ok(Connect {
        min_protocol: number("minProtocol"),
        max_protocol: number("maxProtocol"),
        client: params["client"].clone(),
        role: params["role"].as_str().map(str::to_owned),
        scopes: strings(&params["scopes"]),
        token: params["auth"]["token"].as_str().map(str::to_owned),
    })
}

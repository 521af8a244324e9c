//! One App Server connection: `initialize` first and once, the thread and turn methods, and a
//! pump that turns what the runtime core publishes on the connection's threads into the App
//! Server's notifications, in the order of a turn (`turn/started`, items, tools, approvals,
//! `turn/completed`, `thread/updated`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use crate::kept::Once;
use agentwire_jsonrpc::{CallError, ErrorObject, Handlers, Peer, RequestContext};
use agentwire_runtime::{
    Answer, Interaction, InteractionKind, LiveEvent, NewThread, Published, Resolution,
    RuntimeError, StampedEvent, Subscription, ThreadEvent, TurnInput, fingerprint,
};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::wire::{self, ItemStatus, ItemView, TurnStatus};

#[path = "human_tasks.rs"]
mod human_tasks;
use super::{AppServerFace, FEATURES, PROTOCOL_VERSION};
use super::{protocol, schema};

/// The App Server's error codes (the SDK raises each as `AppServerRpcError(code, …)`).
mod code {
    pub(super) const INVALID_PARAMS: i64 = -32602;
    pub(super) const METHOD_NOT_FOUND: i64 = -32601;
    pub(super) const INTERNAL: i64 = -32603;
    pub(super) const NOT_INITIALIZED: i64 = -32002;
    pub(super) const NOT_FOUND: i64 = -32004;
    pub(super) const CONFLICT: i64 = -32009;
    pub(super) const TIMEOUT: i64 = -32010;
}

/// The most a `thread/list` or `thread/read` result holds in bytes (a page; the rest is read
/// with the next call), so that its line stays under the SDK's limit.
const MAX_RESULT_BYTES: usize = 48 * 1024;

/// The largest `args` or `result` of a tool notification sent as is; a larger one is
/// summarised by its size.
const MAX_TOOL_JSON_BYTES: usize = 16 * 1024;

fn error(code: i64, message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code, message)
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    error(code::INVALID_PARAMS, message)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A runtime error as the App Server's error.
fn runtime_error(failure: &RuntimeError) -> ErrorObject {
    match failure {
        RuntimeError::ThreadNotFound(_) | RuntimeError::TurnNotFound(_) => {
            error(code::NOT_FOUND, failure.to_string())
        }
        RuntimeError::ThreadExists(_)
        | RuntimeError::ThreadArchived(_)
        | RuntimeError::TurnAlreadyActive { .. }
        | RuntimeError::TurnAlreadyStarted { .. }
        | RuntimeError::TurnIdInUse { .. } => error(code::CONFLICT, failure.to_string()),
        RuntimeError::InvalidInput(_) => invalid(failure.to_string()),
        _ => {
            tracing::error!(error = %failure, "a runtime call failed");
            error(code::INTERNAL, "internal error")
        }
    }
}

/// What `initialize` settled.
#[derive(Debug, Clone)]
struct Negotiated {
    features: Vec<&'static str>,
}

/// A turn this connection follows.
#[derive(Debug)]
struct TurnView {
    thread_id: String,
    created_at_ms: u64,
    revision: u64,
    status: TurnStatus,
    completed_at_ms: Option<u64>,
    /// The turn's `turn/started` was written.
    started: bool,
    /// Items of the turn's message streams, by stream id.
    items: HashMap<String, ItemState>,
    assistant_items: usize,
}

impl TurnView {
    /// A running turn of `thread_id` whose last event is `seq`, created at `at`.
    fn new(thread_id: &str, seq: u64, at: u64) -> TurnView {
        TurnView {
            thread_id: thread_id.to_owned(),
            created_at_ms: at,
            revision: seq + 1,
            status: TurnStatus::Running,
            completed_at_ms: None,
            started: false,
            items: HashMap::new(),
            assistant_items: 0,
        }
    }

    fn value(&self, turn_id: &str) -> Value {
        wire::turn(
            &self.thread_id,
            turn_id,
            self.status,
            self.created_at_ms,
            self.completed_at_ms,
            self.revision,
        )
    }
}

#[derive(Debug)]
struct ItemState {
    id: String,
    created_at_ms: u64,
    streamed: bool,
    completed: bool,
}

pub(crate) struct Session {
    face: Arc<AppServerFace>,
    peer: OnceLock<Peer>,
    negotiated: Mutex<Option<Negotiated>>,
    /// Threads whose notifications this connection gets: those it started, resumed or read,
    /// or started a turn on.
    watched: Mutex<HashSet<String>>,
    turns: Mutex<HashMap<String, TurnView>>,
    /// Signalled whenever the pump wrote a turn's start or end.
    progress: Notify,
    /// The App Server name of each thread and turn whose name is not its runtime id (see
    /// [`wire::core_id`]), by runtime id: what this connection writes instead of the id. Only
    /// threads and turns that exist are in it: a thread's name comes from its alias, a turn's
    /// from the call that started or stopped it (and goes with the turn, see `ended`).
    names: Mutex<HashMap<String, String>>,
    /// The threads whose alias was looked up (an alias never changes), so the pump looks once.
    looked_up: Mutex<HashSet<String>>,
    /// The turns this connection saw end, oldest first: the newest [`KEPT_ENDED_TURNS`] are kept
    /// (for `alreadyTerminal`), older ones forgotten, so a long connection stays bounded.
    ended: Mutex<std::collections::VecDeque<String>>,
    /// The human-task cards sent on this connection (`human_tasks`).
    human_tasks: Mutex<human_tasks::Cards>,
}

/// Ended turns a connection remembers.
const KEPT_ENDED_TURNS: usize = 1024;

pub(crate) async fn run<R, W>(face: Arc<AppServerFace>, reader: R, writer: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let session = Arc::new(Session {
        face,
        peer: OnceLock::new(),
        negotiated: Mutex::new(None),
        watched: Mutex::new(HashSet::new()),
        turns: Mutex::new(HashMap::new()),
        progress: Notify::new(),
        names: Mutex::new(HashMap::new()),
        looked_up: Mutex::new(HashSet::new()),
        ended: Mutex::new(std::collections::VecDeque::new()),
        human_tasks: Mutex::new(human_tasks::Cards::default()),
    });
    // Subscribed before the first request is read, so nothing committed during the
    // connection is missed.
    let published = session.face.runtime.subscribe();
    let handlers = Handlers::new()
        .exclusive("initialize")
        .on_any_request({
            let session = Arc::clone(&session);
            move |ctx, params| {
                let session = Arc::clone(&session);
                async move { session.handle(&ctx, params.unwrap_or(Value::Null)).await }
            }
        })
        .on_any_notification(|ctx, _| async move {
            tracing::debug!(
                method = ctx.method(),
                "a client notification has no meaning here; dropped"
            );
        });
    let peer = Peer::spawn(reader, writer, session.face.profile(), handlers);
    let _ = session.peer.set(peer.clone());
    let pump = tokio::spawn(Arc::clone(&session).pump(published));
    // A response line that answers no pending request may be a human task's answer (a
    // duplicate, or a card of a runtime since restarted): it is reported refused.
    let strays = tokio::spawn({
        let (session, mut events) = (Arc::clone(&session), peer.subscribe());
        async move {
            loop {
                match events.recv().await {
                    Ok(agentwire_jsonrpc::Event::UnknownResponse { id }) => {
                        session.unmatched_response(&id).await;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    peer.closed().await;
    pump.abort();
    strays.abort();
}

impl Session {
    async fn handle(
        self: &Arc<Self>,
        ctx: &RequestContext,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        let method = ctx.method();
        if !schema::is_served(method) {
            return Err(error(
                code::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            ));
        }
        // Checked against our schema before anything is done with them.
        if let Err(problems) = schema::check_params(method, &params) {
            return Err(invalid(format!("invalid params: {problems}")));
        }
        if method == "initialize" {
            return self.initialize(&params);
        }
        if lock(&self.negotiated).is_none() {
            return Err(error(
                code::NOT_INITIALIZED,
                "initialize must be called first",
            ));
        }
        let params = match params {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            _ => return Err(invalid("params must be an object")),
        };
        let answer = match params.get("idempotencyKey") {
            None | Some(Value::Null) => self.dispatch(method, &params).await,
            Some(Value::String(key)) if !key.is_empty() && key.len() <= 256 => {
                self.idempotent(method, key, &params).await
            }
            Some(_) => Err(invalid("idempotencyKey must be a string of 1 to 256 bytes")),
        };
        answer.map(|mut result| {
            self.name_ids(&mut result);
            result
        })
    }

    /// What the method's first run did for its connection, done for this one, which is
    /// answered the kept answer (a retry, maybe on another connection): it learns the names
    /// the answer's ids stand for, and follows the thread as the method does.
    fn replayed(&self, method: &str, params: &serde_json::Map<String, Value>, result: &Value) {
        // The thread the answer holds (one the method made), and the one the params name.
        let made = result["thread"]["id"].as_str().map(str::to_owned);
        let named = params
            .get("threadId")
            .and_then(Value::as_str)
            .map(|name| self.thread_core(name));
        for thread in made.iter().chain(&named) {
            self.learn_thread(thread);
        }
        if let (Some(name), Some(turn)) = (
            params.get("turnId").and_then(Value::as_str),
            result["turn"]["id"].as_str(),
        ) {
            self.name_turn(turn, name);
        }
        let followed = match method {
            "thread/start" | "thread/fork" => made,
            "thread/resume" | "turn/start" | "turn/interrupt" => named,
            _ => None,
        };
        if let Some(followed) = followed {
            self.watch(&followed);
        }
    }

    /// The runtime id of the thread a host names `name` (its name is learned from its alias).
    fn thread_core(&self, name: &str) -> String {
        wire::core_id("thread", "", name)
    }

    /// The runtime id of the turn a host names `name` on the thread `thread_core`.
    fn turn_core(&self, thread_core: &str, name: &str) -> String {
        wire::core_id("turn", thread_core, name)
    }

    /// Keeps `name` as what this connection calls the turn `turn_core`, once the turn exists.
    fn name_turn(&self, turn_core: &str, name: &str) {
        if turn_core != name {
            lock(&self.names).insert(turn_core.to_owned(), name.to_owned());
        }
    }

    /// Learns the name of an existing thread from its alias, looking once per thread.
    fn learn_thread(&self, thread_core: &str) {
        if lock(&self.looked_up).contains(thread_core) {
            return;
        }
        let Ok(summary) = self.face.runtime.summary(thread_core) else {
            return;
        };
        lock(&self.looked_up).insert(thread_core.to_owned());
        if let Some(alias) = summary.alias {
            lock(&self.names).insert(thread_core.to_owned(), alias);
        }
    }

    /// What this connection calls the thread or turn of runtime id `core`.
    fn name_of(&self, core: &str) -> String {
        lock(&self.names)
            .get(core)
            .cloned()
            .unwrap_or_else(|| core.to_owned())
    }

    /// Writes the App Server names of threads and turns in place of their runtime ids, in the
    /// members that hold them (`threadId`, `turnId`, `parentThreadId`, `thread_id`, `turn_id`,
    /// and the `id` of a `thread` or `turn`), at any depth.
    fn name_ids(&self, value: &mut Value) {
        self.name_ids_in(value, false);
    }

    /// [`Session::name_ids`] of a thread or turn object itself (its `id` named too).
    fn name_object_ids(&self, value: &mut Value) {
        self.name_ids_in(value, true);
    }

    fn name_ids_in(&self, value: &mut Value, in_object: bool) {
        let names = lock(&self.names);
        if names.is_empty() {
            return;
        }
        rename(value, &names, in_object);
    }

    /// Runs a call once per method and `idempotencyKey` (the runtime's idempotency store,
    /// shared by every connection and face): a retry with the same params gets the first
    /// answer, even on another connection; the same key with other params is `-32009`.
    async fn idempotent(
        self: &Arc<Self>,
        method: &str,
        key: &str,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let scope = format!("app-server {method}");
        let print = fingerprint(&[
            method.as_bytes(),
            crate::kept::canonical(&Value::Object(params.clone())).as_bytes(),
        ]);
        let store = self.face.runtime.idempotency();
        // Only what was decided is kept: an internal failure or a timeout may go otherwise
        // when retried.
        let keep = |answer: &Result<Value, ErrorObject>| {
            let decided =
                !matches!(answer, Err(e) if e.code == code::INTERNAL || e.code == code::TIMEOUT);
            crate::kept::encode(answer).filter(|_| decided)
        };
        let work = self.dispatch(method, params);
        let interrupted =
            crate::kept::encode(&Err(error(code::INTERNAL, crate::kept::INTERRUPTED)))
                .unwrap_or_default();
        match crate::kept::once(store, &scope, key, &print, work, keep, interrupted).await {
            Once::Ran(answer) => answer,
            Once::Replayed(bytes) => {
                let answer = crate::kept::decode(&bytes);
                if let Ok(result) = &answer {
                    self.replayed(method, params, result);
                }
                answer
            }
            Once::Mismatch => Err(error(
                code::CONFLICT,
                format!("idempotencyKey {key} was used for other params"),
            )),
        }
    }

    async fn dispatch(
        self: &Arc<Self>,
        method: &str,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        match method {
            "thread/start" => self.thread_start(params).await,
            "thread/list" => self.thread_list(params).await,
            "thread/read" => self.thread_read(params, false).await,
            "thread/resume" => self.thread_read(params, true).await,
            "thread/fork" => self.thread_fork(params).await,
            "thread/archive" => self.thread_archive(params).await,
            "turn/start" => self.turn_start(params).await,
            "turn/interrupt" => self.turn_interrupt(params).await,
            other => Err(error(
                code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            )),
        }
    }

    /// The negotiation: the client's range of versions against ours ([1, 1]); the features
    /// ours in our order, kept where the client asked for them (all when it named none).
    fn initialize(&self, params: &Value) -> Result<Value, ErrorObject> {
        let mut negotiated = lock(&self.negotiated);
        if negotiated.is_some() {
            return Err(error(code::CONFLICT, "initialize was already called"));
        }
        let version = |name: &str| -> Result<i64, ErrorObject> {
            params
                .get(name)
                .and_then(Value::as_i64)
                .ok_or_else(|| invalid(format!("{name} must be an integer")))
        };
        let maximum = version("protocolVersion")?;
        let minimum = version("minimumProtocolVersion")?;
        if minimum > maximum {
            return Err(invalid("minimumProtocolVersion is above protocolVersion"));
        }
        let client = params.get("client");
        let named = |field: &str| {
            client
                .and_then(|c| c.get(field))
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if !named("name") || !named("version") {
            return Err(invalid("client needs a name and a version"));
        }
        if maximum < PROTOCOL_VERSION || minimum > PROTOCOL_VERSION {
            return Err(invalid("no protocol version in common").with_data(json!({
                "client": {"minimum": minimum, "maximum": maximum},
                "server": {"minimum": PROTOCOL_VERSION, "maximum": PROTOCOL_VERSION},
            })));
        }
        let features: Vec<&'static str> = match params.get("features") {
            None | Some(Value::Null) => FEATURES.to_vec(),
            Some(Value::Array(asked)) => FEATURES
                .iter()
                .copied()
                .filter(|ours| asked.iter().any(|a| a.as_str() == Some(ours)))
                .collect(),
            Some(_) => return Err(invalid("features must be an array of strings")),
        };
        let profile = self.face.profile();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let mut extra = serde_json::Map::new();
        extra.insert(
            "approvalTimeoutMs".to_owned(),
            json!(u64::try_from(self.face.config.approval_timeout.as_millis()).unwrap_or(u64::MAX)),
        );
        let result = protocol::InitializeResult {
            server: protocol::InitializeResultServer {
                name: self.face.config.server_name.clone(),
                version: self.face.config.server_version.clone(),
            },
            protocol_version: PROTOCOL_VERSION,
            minimum_protocol_version: PROTOCOL_VERSION,
            features: features.iter().map(|f| (*f).to_owned()).collect(),
            downgraded: features.len() < FEATURES.len(),
            transports: vec![protocol::InitializeResultTransportsItem::Stdio],
            limits: Some(protocol::ServerLimits {
                max_line_bytes: Some(count(profile.max_inbound_frame)),
                max_outbound_line_bytes: Some(count(wire::MAX_LINE_BYTES)),
                max_pending_requests: Some(count(self.face.config.queue_cap)),
                queue_bytes: Some(count(profile.write_queue_bytes)),
                extra,
            }),
            schema: protocol::InitializeResultSchema {
                id: protocol::SCHEMA_ID.to_owned(),
                version: None,
                digest: Some(protocol::SCHEMA_DIGEST.to_owned()),
            },
            peer_schema: Some(protocol::InitializeResultPeerSchema {
                id: super::PEER_SCHEMA_ID.to_owned(),
                digest: Some(super::PEER_SCHEMA_DIGEST.to_owned()),
            }),
        };
        let result = serde_json::to_value(&result).map_err(|e| {
            tracing::error!(error = %e, "the initialize result cannot be written");
            error(code::INTERNAL, "internal error")
        })?;
        *negotiated = Some(Negotiated { features });
        Ok(result)
    }

    /// Follows the thread; whether it was not followed before.
    fn watch(&self, thread_id: &str) -> bool {
        lock(&self.watched).insert(thread_id.to_owned())
    }

    /// A thread as written (its id and its parent's are named by [`Session::name_ids`] when
    /// the answer or notification is written).
    async fn thread_value(&self, thread_id: &str) -> Result<Value, ErrorObject> {
        self.learn_thread(thread_id);
        let (thread, parent) = self
            .face
            .runtime
            .inspect(thread_id, |state| {
                (
                    wire::thread_of_state(thread_id, state),
                    state.parent_thread_id.clone(),
                )
            })
            .await
            .map_err(|e| runtime_error(&e))?;
        if let Some(parent) = parent {
            self.learn_thread(&parent);
        }
        Ok(thread)
    }

    async fn thread_start(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let (thread_id, alias) = self
            .new_thread_name(params, "threadId")?
            .unwrap_or_else(|| (uuid::Uuid::new_v4().to_string(), None));
        // `metadata` and `agentOptions` (objects, the schema checked) are not kept.
        let title = optional_title(params)?;
        let new = NewThread {
            title,
            alias,
            ..NewThread::default()
        };
        self.face
            .runtime
            .create_thread_with(&thread_id, new)
            .await
            .map_err(|e| runtime_error(&e))?;
        self.watch(&thread_id);
        Ok(json!({"thread": self.announce(&thread_id).await?}))
    }

    /// The runtime id and alias of a new thread the host names in `param`, if it does.
    fn new_thread_name(
        &self,
        params: &serde_json::Map<String, Value>,
        param: &str,
    ) -> Result<Option<(String, Option<String>)>, ErrorObject> {
        match params.get(param) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(name)) if wire::is_identifier(name) => {
                let core = self.thread_core(name);
                let alias = (core != *name).then(|| name.clone());
                Ok(Some((core, alias)))
            }
            Some(_) => Err(invalid(format!("{param} must be an Identifier"))),
        }
    }

    /// Writes `thread/updated` for the thread; the thread as written.
    async fn announce(&self, thread_id: &str) -> Result<Value, ErrorObject> {
        let thread = self.thread_value(thread_id).await?;
        self.notify("thread/updated", json!({"thread": thread.clone()}))
            .await;
        Ok(thread)
    }

    /// A new thread that records `threadId` as its parent; it starts with no history of its
    /// own (`historyForked: false`).
    async fn thread_fork(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let source = self.thread_core(required_str(params, "threadId")?);
        let (new_id, alias) = match self.new_thread_name(params, "newThreadId")? {
            Some((core, alias)) => (Some(core), alias),
            None => (None, None),
        };
        let title = optional_title(params)?;
        let thread_id = self
            .face
            .runtime
            .fork_thread(&source, new_id.as_deref(), title, alias)
            .await
            .map_err(|e| runtime_error(&e))?;
        self.watch(&thread_id);
        let thread = self.announce(&thread_id).await?;
        Ok(json!({"thread": thread, "historyForked": false}))
    }

    async fn thread_archive(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let thread_id = self.thread_core(required_str(params, "threadId")?);
        self.face
            .runtime
            .archive_thread(&thread_id)
            .await
            .map_err(|e| runtime_error(&e))?;
        Ok(json!({"thread": self.announce(&thread_id).await?}))
    }

    async fn thread_list(
        &self,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let limit = optional_count(params, "limit", 100, 1000)?;
        let include_archived = params
            .get("includeArchived")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut summaries = self.face.runtime.summaries();
        summaries.retain(|s| include_archived || !s.archived);
        summaries.sort_by(|a, b| b.updated_at_ms.cmp(&a.updated_at_ms).then(a.id.cmp(&b.id)));
        let mut threads = Vec::new();
        let mut bytes = 0;
        let mut has_more = false;
        for summary in summaries.iter().take(limit) {
            let Ok(mut thread) = self.thread_value(&summary.id).await else {
                continue;
            };
            // Measured as written: with the host's names, which are longer than the ids.
            self.name_object_ids(&mut thread);
            let size = thread.to_string().len() + 1;
            if bytes + size > MAX_RESULT_BYTES {
                has_more = true;
                break;
            }
            bytes += size;
            threads.push(thread);
        }
        has_more |= summaries.len() > limit && threads.len() == limit;
        Ok(json!({"threads": threads, "hasMore": has_more}))
    }

    /// `thread/read` and `thread/resume`: the thread and a page of its events after
    /// `afterEventSeq`; a resume also follows the thread from then on.
    async fn thread_read(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
        resume: bool,
    ) -> Result<Value, ErrorObject> {
        let name = required_str(params, "threadId")?;
        let thread_id = self.thread_core(name);
        let thread_id = thread_id.as_str();
        let after = optional_count(params, "afterEventSeq", 0, usize::MAX)?;
        let limit = optional_count(params, "limit", 10_000, 10_000)?;
        if !self.face.runtime.contains_thread(thread_id) {
            return Err(error(code::NOT_FOUND, format!("thread {name} not found")));
        }
        if resume && self.watch(thread_id) {
            // A host that attaches late is sent the thread's open human tasks (a task
            // reissued at a restart reaches hosts this way).
            self.send_open_cards(thread_id).await;
        }
        let mut thread = self.thread_value(thread_id).await?;
        // Measured as written: with the host's names, which are longer than the ids.
        self.name_object_ids(&mut thread);
        let mut events = Vec::new();
        let mut bytes = thread.to_string().len();
        let mut from = after as u64;
        let mut has_more = false;
        let mut at_head = false;
        'pages: while events.len() < limit {
            let page = self
                .face
                .runtime
                .stored_events(thread_id, from, (limit - events.len()).min(1000))
                .await
                .map_err(|e| runtime_error(&e))?;
            at_head = page.at_head();
            for stored in page.events {
                from = stored.seq + 1;
                // Numbered from 1, as the App Server numbers a thread's events.
                let mut event = json!({
                    "event_seq": stored.seq + 1,
                    "event_type": stored.kind,
                    "thread_id": thread_id,
                    "timestamp": wire::timestamp(u64::try_from(stored.committed_at_ms).unwrap_or(0)),
                });
                let payload: Value = serde_json::from_slice(&stored.payload).unwrap_or(Value::Null);
                if let Some(turn_id) = payload["event"]["turnId"].as_str() {
                    event["turn_id"] = json!(turn_id);
                }
                let payload_size = stored.payload.len();
                if payload_size > MAX_RESULT_BYTES / 2 {
                    event["payload_bytes"] = json!(payload_size);
                } else {
                    event["payload"] = payload;
                }
                self.name_ids(&mut event);
                let size = event.to_string().len() + 1;
                if bytes + size > MAX_RESULT_BYTES {
                    has_more = true;
                    break 'pages;
                }
                bytes += size;
                events.push(event);
            }
            if at_head {
                break;
            }
        }
        // Stopped at `limit` before the thread's last event.
        has_more |= !at_head;
        Ok(json!({"thread": thread, "events": events, "hasMore": has_more}))
    }

    async fn turn_start(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let thread_id = self.thread_core(required_str(params, "threadId")?);
        let text = input_text(params.get("input"))?;
        let (turn_id, name) = match params.get("turnId") {
            None | Some(Value::Null) => (uuid::Uuid::new_v4().to_string(), None),
            Some(Value::String(name)) if wire::is_identifier(name) => {
                (self.turn_core(&thread_id, name), Some(name.as_str()))
            }
            Some(_) => return Err(invalid("turnId must be an Identifier")),
        };
        // Watched before the start is published, and named before it is written.
        let newly_watched = self.watch(&thread_id);
        if let Some(name) = name {
            self.name_turn(&turn_id, name);
        }
        let started = self
            .face
            .runtime
            .start_turn(
                &thread_id,
                &turn_id,
                TurnInput {
                    text,
                    attachments: Vec::new(),
                },
            )
            .await;
        if let Err(failure) = started {
            // Nothing of a turn that did not start is kept.
            if newly_watched {
                lock(&self.watched).remove(&thread_id);
            }
            if !lock(&self.turns).contains_key(&turn_id) {
                lock(&self.names).remove(&turn_id);
            }
            return Err(runtime_error(&failure));
        }
        // `turn/started` goes out before this answer, unless this connection is too far behind
        // (its host does not read): the turn started all the same, and the answer says so, so
        // a retry of its `idempotencyKey` is answered it instead of starting another turn.
        let turn = match self.wait_for(&turn_id, |view| view.started).await {
            Some(turn) => turn,
            None => self.started_turn(&thread_id, &turn_id).await,
        };
        Ok(json!({"turn": turn}))
    }

    /// When turn `turn_id` started, if it is the thread's active turn, and the position of the
    /// thread's next event, as the runtime holds them.
    async fn turn_in_runtime(&self, thread_id: &str, turn_id: &str) -> (Option<u64>, u64) {
        self.face
            .runtime
            .inspect(thread_id, |state| {
                let started = state
                    .active_turn
                    .as_ref()
                    .filter(|turn| turn.id == turn_id)
                    .map(|turn| turn.started_at_ms);
                (started, state.next_position)
            })
            .await
            .unwrap_or((None, 0))
    }

    /// A turn that started, as the runtime holds it: running while it is the thread's active
    /// turn, else as this connection last wrote it.
    async fn started_turn(&self, thread_id: &str, turn_id: &str) -> Value {
        if let (Some(started_at), next) = self.turn_in_runtime(thread_id, turn_id).await {
            return wire::turn(
                thread_id,
                turn_id,
                TurnStatus::Running,
                started_at,
                None,
                next,
            );
        }
        self.turn_if(turn_id, |_| true).unwrap_or_else(|| {
            let now = self.face.runtime.now_ms();
            wire::turn(thread_id, turn_id, TurnStatus::Running, now, None, 0)
        })
    }

    async fn turn_interrupt(
        self: &Arc<Self>,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, ErrorObject> {
        let thread_name = required_str(params, "threadId")?;
        let turn_name = required_str(params, "turnId")?;
        let thread_id = self.thread_core(thread_name);
        let turn_id = self.turn_core(&thread_id, turn_name);
        let (thread_id, turn_id) = (thread_id.as_str(), turn_id.as_str());
        if let Some(turn) = self.turn_if(turn_id, |view| view.status.is_terminal()) {
            return Ok(json!({"turn": turn, "alreadyTerminal": true}));
        }
        let newly_watched = self.watch(thread_id);
        let cancelled = self.face.runtime.cancel_turn(thread_id, turn_id).await;
        if cancelled.is_err() && newly_watched {
            lock(&self.watched).remove(thread_id);
        }
        match cancelled {
            // The turn exists: its end is written under the host's name for it.
            Ok(_) => self.name_turn(turn_id, turn_name),
            Err(RuntimeError::TurnNotFound(_)) => {
                // It may have ended between the two looks, or ended in the runtime before this
                // connection wrote its end: a turn this connection tracks is waited for.
                let tracked = lock(&self.turns).contains_key(turn_id);
                if tracked
                    && let Some(turn) = self
                        .wait_for(turn_id, |view| view.status.is_terminal())
                        .await
                {
                    return Ok(json!({"turn": turn, "alreadyTerminal": true}));
                }
                return Err(error(
                    code::NOT_FOUND,
                    format!("no active turn {turn_name} on thread {thread_name}"),
                ));
            }
            Err(other) => return Err(runtime_error(&other)),
        }
        match self
            .wait_for(turn_id, |view| view.status.is_terminal())
            .await
        {
            Some(turn) => Ok(json!({"turn": turn, "physicallySettled": true})),
            None => Err(error(code::TIMEOUT, "the turn has not stopped yet")
                .with_data(json!({"retry_after_ms": 100}))),
        }
    }

    fn turn_if(&self, turn_id: &str, done: impl Fn(&TurnView) -> bool) -> Option<Value> {
        let turns = lock(&self.turns);
        turns
            .get(turn_id)
            .filter(|view| done(view))
            .map(|view| view.value(turn_id))
    }

    /// Waits until the pump has written what `done` looks for of the turn (at most the
    /// configured settle limit); the turn as then.
    async fn wait_for(&self, turn_id: &str, done: impl Fn(&TurnView) -> bool) -> Option<Value> {
        let wait = async {
            loop {
                let progressed = self.progress.notified();
                if let Some(turn) = self.turn_if(turn_id, &done) {
                    return turn;
                }
                progressed.await;
            }
        };
        tokio::time::timeout(self.face.config.settle_limit, wait)
            .await
            .ok()
    }

    /// Writes a notification; a failure (the connection closed, a line over the limit) is
    /// logged.
    async fn notify(&self, method: &str, mut params: Value) {
        self.name_ids(&mut params);
        // The peer is set before the first line is read, so before anything is published here.
        let Some(peer) = self.peer.get() else {
            return;
        };
        if let Err(error) = peer.notify(method, &params).await {
            tracing::warn!(%method, %error, "a notification could not be written");
        }
    }

    /// Forwards what the runtime publishes on the watched threads, in order.
    async fn pump(self: Arc<Self>, mut published: Subscription) {
        loop {
            let Some(event) = published.recv_until_stopped().await else {
                return;
            };
            let thread_id = match &event {
                Published::Durable { thread_id, .. } | Published::Live { thread_id, .. } => {
                    thread_id
                }
            };
            if !lock(&self.watched).contains(thread_id.as_str()) {
                continue;
            }
            self.learn_thread(thread_id);
            match event {
                Published::Durable {
                    thread_id,
                    seq,
                    event,
                    ..
                } => self.durable(&thread_id, seq, &event).await,
                Published::Live {
                    thread_id,
                    turn_id,
                    event,
                } => self.live(&thread_id, &turn_id, event).await,
            }
        }
    }

    /// The view of turn `turn_id`, made when this connection did not see the turn start: it
    /// followed the thread after that (another connection, or another face of the runtime,
    /// started it). `seq` is the event heard (`None` for a live one: the thread's last), `at`
    /// when, should the runtime no longer say when the turn started. `true` when it was made
    /// now.
    async fn track_turn(&self, thread_id: &str, turn_id: &str, seq: Option<u64>, at: u64) -> bool {
        if lock(&self.turns).contains_key(turn_id) {
            return false;
        }
        let (started_at, next) = self.turn_in_runtime(thread_id, turn_id).await;
        let seq = seq.unwrap_or(next.saturating_sub(1));
        let mut turns = lock(&self.turns);
        if turns.contains_key(turn_id) {
            return false;
        }
        turns.insert(
            turn_id.to_owned(),
            TurnView::new(thread_id, seq, started_at.unwrap_or(at)),
        );
        true
    }

    /// Writes `turn/started` for a tracked turn and marks it started.
    async fn announce_turn(&self, turn_id: &str) {
        let Some(turn) = lock(&self.turns)
            .get(turn_id)
            .map(|view| view.value(turn_id))
        else {
            return;
        };
        self.notify("turn/started", json!({"turn": turn})).await;
        if let Some(view) = lock(&self.turns).get_mut(turn_id) {
            view.started = true;
        }
        self.progress.notify_waiters();
    }

    async fn durable(self: &Arc<Self>, thread_id: &str, seq: u64, stamped: &StampedEvent) {
        let at = stamped.at_ms;
        // A turn this connection did not see start is announced at its first event here, but
        // at its end, which `turn/completed` says whole.
        if let Some(turn_id) = stamped.event.turn_id()
            && !matches!(stamped.event, ThreadEvent::TurnStarted { .. })
            && self.track_turn(thread_id, turn_id, Some(seq), at).await
            && !matches!(
                stamped.event,
                ThreadEvent::TurnCompleted { .. }
                    | ThreadEvent::TurnFailed { .. }
                    | ThreadEvent::TurnCancelled { .. }
            )
        {
            self.announce_turn(turn_id).await;
        }
        match &stamped.event {
            ThreadEvent::TurnStarted { turn_id, .. } => {
                // Seen starting: nothing to ask the runtime.
                lock(&self.turns)
                    .entry(turn_id.clone())
                    .or_insert_with(|| TurnView::new(thread_id, seq, at));
                self.announce_turn(turn_id).await;
            }
            ThreadEvent::TurnStatusChanged { turn_id, status } => {
                if let Some(view) = lock(&self.turns).get_mut(turn_id) {
                    view.revision = seq + 1;
                    view.status = match status {
                        agentwire_runtime::TurnStatus::WaitingForUser => {
                            TurnStatus::WaitingApproval
                        }
                        _ => TurnStatus::Running,
                    };
                }
            }
            ThreadEvent::MessageCompleted {
                turn_id,
                stream_id,
                text,
            } => {
                self.complete_message(thread_id, turn_id, stream_id, text, at)
                    .await;
            }
            ThreadEvent::OperationCompleted { turn_id, operation } => {
                let failed = !matches!(
                    operation.outcome.kind,
                    agentwire_runtime::OutcomeKind::Success
                );
                self.notify(
                    "tool/result",
                    json!({
                        "threadId": thread_id,
                        "turnId": turn_id,
                        // The item `tool/requested` announced: a host matches the two by it.
                        "itemId": operation.tool_call_id,
                        "toolUseId": operation.tool_call_id,
                        "tool": wire::cut_text(&operation.tool_name, wire::MAX_NAME_JSON_BYTES),
                        "isError": failed,
                        "error": if failed {
                            operation.outcome.reason.as_deref().map_or_else(
                                || json!("the tool failed"),
                                |reason| json!(wire::cut_text(reason, wire::MAX_MESSAGE_JSON_BYTES)),
                            )
                        } else {
                            Value::Null
                        },
                        "result": bounded(&operation.display),
                        "permissionDecision": Value::Null,
                    }),
                )
                .await;
            }
            ThreadEvent::InteractionOpened { interaction } => {
                // A connection that did not negotiate structured approvals is not asked; the
                // approval waits for another host, or its deadline.
                let asks = lock(&self.negotiated)
                    .as_ref()
                    .is_some_and(|n| n.features.contains(&"structured_approval"));
                if asks && let InteractionKind::Approval { .. } = &interaction.ask {
                    self.ask_approval(thread_id, interaction).await;
                }
            }
            ThreadEvent::InteractionResolved {
                interaction_id,
                turn_id,
                approval_id: Some(_),
                resolution,
                via,
                ..
            } => {
                // What the core recorded as settling it; with none, the runtime ended it.
                let approved = matches!(resolution, Resolution::Approved);
                let via = match (via, resolution) {
                    (Some(via), _) => via.as_str(),
                    (None, Resolution::Expired) => "timeout",
                    (None, _) => "cancelled",
                };
                self.notify(
                    "approval/resolved",
                    json!({
                        "threadId": thread_id,
                        "turnId": turn_id,
                        "approvalId": interaction_id,
                        "approved": approved,
                        "via": via,
                    }),
                )
                .await;
            }
            ThreadEvent::HumanTaskOpened { .. }
            | ThreadEvent::HumanTaskDecided { .. }
            | ThreadEvent::HumanTaskCancelled { .. }
            | ThreadEvent::HumanTaskExpired { .. }
            | ThreadEvent::HumanTaskReissued { .. } => {
                self.human_task_event(thread_id, &stamped.event).await;
            }
            ThreadEvent::TurnCompleted { turn_id } => {
                self.end_turn(thread_id, turn_id, seq, at, TurnStatus::Completed, None)
                    .await;
            }
            ThreadEvent::TurnFailed {
                turn_id, message, ..
            } => {
                let message = wire::cut_text(message, wire::MAX_MESSAGE_JSON_BYTES);
                let error = json!({"code": "AGENT_TURN_FAILED", "message": message});
                self.end_turn(thread_id, turn_id, seq, at, TurnStatus::Failed, Some(error))
                    .await;
            }
            ThreadEvent::TurnCancelled { turn_id, .. } => {
                self.end_turn(thread_id, turn_id, seq, at, TurnStatus::Interrupted, None)
                    .await;
            }
            _ => {}
        }
    }

    async fn live(&self, thread_id: &str, turn_id: &str, event: LiveEvent) {
        if self
            .track_turn(thread_id, turn_id, None, self.face.runtime.now_ms())
            .await
        {
            self.announce_turn(turn_id).await;
        }
        match event {
            LiveEvent::MessageDelta { stream_id, delta } => {
                let Some(item_id) = self.start_item(thread_id, turn_id, &stream_id, true).await
                else {
                    return;
                };
                self.deltas(thread_id, turn_id, &item_id, &delta).await;
            }
            LiveEvent::ToolStarted {
                tool_call_id,
                tool_name,
                input,
                ..
            } => {
                self.notify(
                    "tool/requested",
                    json!({
                        "threadId": thread_id,
                        "turnId": turn_id,
                        "itemId": tool_call_id,
                        "toolUseId": tool_call_id,
                        "tool": wire::cut_text(&tool_name, wire::MAX_NAME_JSON_BYTES),
                        "args": bounded(&input),
                    }),
                )
                .await;
            }
            LiveEvent::MessageStarted { .. } | LiveEvent::ToolOutput { .. } => {}
        }
    }

    /// The item of a message stream, `item/started` written when it is new. `None` when the
    /// turn is not one this connection follows.
    async fn start_item(
        &self,
        thread_id: &str,
        turn_id: &str,
        stream_id: &str,
        streaming: bool,
    ) -> Option<String> {
        let (item, id) = {
            let mut turns = lock(&self.turns);
            let view = turns.get_mut(turn_id)?;
            if let Some(item) = view.items.get_mut(stream_id) {
                item.streamed |= streaming;
                return Some(item.id.clone());
            }
            let item_of = |turn: &str| match view.assistant_items {
                0 => format!("{turn}:assistant"),
                n => format!("{turn}:assistant:{n}"),
            };
            // Named after the host's name of the turn while that makes an Identifier (at most
            // 160 characters), else after the turn's own id.
            let id = Some(item_of(&self.name_of(turn_id)))
                .filter(|id| wire::is_identifier(id))
                .unwrap_or_else(|| item_of(turn_id));
            view.assistant_items += 1;
            let now = self.face.runtime.now_ms();
            view.items.insert(
                stream_id.to_owned(),
                ItemState {
                    id: id.clone(),
                    created_at_ms: now,
                    streamed: streaming,
                    completed: false,
                },
            );
            let item = wire::item(ItemView {
                id: &id,
                thread_id,
                turn_id,
                kind: "assistant_message",
                status: ItemStatus::Started,
                created_at_ms: now,
                completed_at_ms: None,
                content: None,
            });
            (item, id)
        };
        self.notify("item/started", json!({"item": item})).await;
        Some(id)
    }

    /// `text` as `item/delta`s, each small enough for one line.
    async fn deltas(&self, thread_id: &str, turn_id: &str, item_id: &str, text: &str) {
        for piece in wire::chunks(text, wire::MAX_DELTA_TEXT_BYTES) {
            self.notify(
                "item/delta",
                json!({
                    "threadId": thread_id,
                    "turnId": turn_id,
                    "itemId": item_id,
                    "delta": {"type": "text_delta", "text": piece},
                }),
            )
            .await;
        }
    }

    async fn complete_message(
        &self,
        thread_id: &str,
        turn_id: &str,
        stream_id: &str,
        text: &str,
        at: u64,
    ) {
        let Some(item_id) = self.start_item(thread_id, turn_id, stream_id, false).await else {
            return;
        };
        let (streamed, created_at_ms) = {
            let mut turns = lock(&self.turns);
            let Some(item) = turns
                .get_mut(turn_id)
                .and_then(|view| view.items.get_mut(stream_id))
            else {
                return;
            };
            item.completed = true;
            (item.streamed, item.created_at_ms)
        };
        // A message that was not streamed reaches the host as deltas first.
        if !streamed {
            self.deltas(thread_id, turn_id, &item_id, text).await;
        }
        let content = if text.len() <= wire::MAX_COMPLETED_TEXT_BYTES {
            json!({"text": text})
        } else {
            json!({"textBytes": text.len()})
        };
        let item = wire::item(ItemView {
            id: &item_id,
            thread_id,
            turn_id,
            kind: "assistant_message",
            status: ItemStatus::Completed,
            created_at_ms,
            completed_at_ms: Some(at),
            content: Some(content),
        });
        self.notify("item/completed", json!({"item": item})).await;
    }

    async fn end_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        seq: u64,
        at: u64,
        status: TurnStatus,
        failure: Option<Value>,
    ) {
        // Items of streams that never completed end with the turn.
        let open: Vec<Value> = {
            let mut turns = lock(&self.turns);
            let Some(view) = turns.get_mut(turn_id) else {
                return;
            };
            let item_status = match status {
                TurnStatus::Failed => ItemStatus::Failed,
                _ => ItemStatus::Cancelled,
            };
            view.items
                .values_mut()
                .filter(|item| !item.completed)
                .map(|item| {
                    item.completed = true;
                    wire::item(ItemView {
                        id: &item.id,
                        thread_id,
                        turn_id,
                        kind: "assistant_message",
                        status: item_status,
                        created_at_ms: item.created_at_ms,
                        completed_at_ms: Some(at),
                        content: None,
                    })
                })
                .collect()
        };
        for item in open {
            self.notify("item/completed", json!({"item": item})).await;
        }
        let turn = {
            let mut turns = lock(&self.turns);
            let Some(view) = turns.get_mut(turn_id) else {
                return;
            };
            view.status = status;
            view.revision = seq + 1;
            view.completed_at_ms = Some(at);
            view.items.clear();
            view.value(turn_id)
        };
        self.forget_old_turns(turn_id);
        self.notify(
            "turn/completed",
            json!({"turn": turn, "error": failure.unwrap_or(Value::Null)}),
        )
        .await;
        if let Ok(thread) = self.thread_value(thread_id).await {
            self.notify("thread/updated", json!({"thread": thread}))
                .await;
        }
        self.progress.notify_waiters();
    }

    /// Records that `turn_id` ended, and forgets the oldest ended turns beyond
    /// [`KEPT_ENDED_TURNS`] (their views and names).
    fn forget_old_turns(&self, turn_id: &str) {
        let mut ended = lock(&self.ended);
        ended.push_back(turn_id.to_owned());
        while ended.len() > KEPT_ENDED_TURNS {
            if let Some(old) = ended.pop_front() {
                lock(&self.turns).remove(&old);
                lock(&self.names).remove(&old);
            }
        }
    }

    /// An approval the agent asks for: `approval/requested` with the binding the core made,
    /// then, while it is pending, the `approval/decide` server request, answered in its own
    /// task. The answer goes to the core with the binding presented, which settles it failing
    /// closed (docs/runtime.md, "Decisions"). An approval a grant approved without asking is
    /// announced, and `approval/resolved` follows with how.
    async fn ask_approval(self: &Arc<Self>, thread_id: &str, interaction: &Interaction) {
        let InteractionKind::Approval {
            agent_name,
            tool_name,
            preview,
            reason,
            ..
        } = &interaction.ask
        else {
            return;
        };
        let Some(binding) = &interaction.binding else {
            return;
        };
        let runtime = &self.face.runtime;
        let pending = runtime.approval_binding(thread_id, &interaction.id).await;
        let operation = json!({
            "tool": wire::cut_text(tool_name, wire::MAX_NAME_JSON_BYTES),
            "agent": wire::cut_text(agent_name, wire::MAX_NAME_JSON_BYTES),
            "preview": bounded(preview),
        });
        let request = json!({
            "id": interaction.id,
            "binding": {
                "threadId": thread_id,
                "turnId": interaction.turn_id,
                "itemId": interaction.id,
                "attemptId": Value::Null,
                "operationDigest": binding.operation_digest,
                "policyDigest": binding.policy_digest,
                "workspaceDigest": Value::Null,
                "cwd": self.face.config.cwd,
                "nonce": binding.nonce,
                "expiresAt": wire::timestamp(interaction.expires_at_ms),
            },
            "operation": operation,
            "risk": "medium",
            "reason": wire::cut_text(
                &reason.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| format!("the agent asks to run {tool_name}")),
                wire::MAX_MESSAGE_JSON_BYTES,
            ),
            "requestedPermissions": binding.requested_permissions,
        });
        // The server request carries the same names as the notification.
        let mut request = request;
        self.name_ids(&mut request);
        self.notify("approval/requested", json!({"request": request}))
            .await;
        let Ok(presented) = pending else {
            // Settled already (a grant, another host, its deadline): nothing to ask.
            return;
        };
        let session = Arc::clone(self);
        tokio::spawn(async move {
            let Some(peer) = session.peer.get() else {
                return;
            };
            let timeout = session.face.config.approval_timeout;
            let answer = match peer
                .request_with::<Value, Value>(
                    "approval/decide",
                    &json!({"request": request}),
                    Some(timeout),
                )
                .await
            {
                Ok(decision) => Answer::Value(decision),
                Err(CallError::Remote(error)) => Answer::Error(error.message),
                Err(CallError::Timeout { .. }) => Answer::Timeout(timeout),
                // The connection went away: the approval stays pending for another host.
                Err(CallError::Closed) => return,
                Err(other) => Answer::Error(format!("the decision could not be read: {other}")),
            };
            if let Err(error) = session.face.runtime.decide(&presented, answer).await {
                tracing::info!(%error, "an approval decision was not taken");
            }
        });
    }
}

/// [`Session::name_ids`] over one value: `in_object` when `value` is a `thread` or `turn`.
fn rename(value: &mut Value, names: &HashMap<String, String>, in_object: bool) {
    match value {
        Value::Object(map) => {
            for (key, member) in map.iter_mut() {
                let holds_id = matches!(
                    key.as_str(),
                    "threadId" | "turnId" | "parentThreadId" | "thread_id" | "turn_id"
                ) || (in_object && key == "id");
                if holds_id
                    && let Value::String(id) = member
                    && let Some(name) = names.get(id.as_str())
                {
                    *id = name.clone();
                    continue;
                }
                let object = matches!(key.as_str(), "thread" | "turn" | "threads");
                rename(member, names, object);
            }
        }
        Value::Array(items) => {
            for item in items {
                rename(item, names, in_object);
            }
        }
        _ => {}
    }
}

/// `value`, or a summary of its size when it is too large for a notification.
fn bounded(value: &Value) -> Value {
    let size = value.to_string().len();
    if size <= MAX_TOOL_JSON_BYTES {
        value.clone()
    } else {
        json!({"omittedBytes": size})
    }
}

fn optional_title(params: &serde_json::Map<String, Value>) -> Result<Option<String>, ErrorObject> {
    match params.get("title") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(title)) if title.chars().count() <= 512 => Ok(Some(title.clone())),
        Some(_) => Err(invalid("title must be a string of at most 512 characters")),
    }
}

fn required_str<'a>(
    params: &'a serde_json::Map<String, Value>,
    name: &str,
) -> Result<&'a str, ErrorObject> {
    match params.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(invalid(format!("{name} is required (a non-empty string)"))),
    }
}

fn optional_count(
    params: &serde_json::Map<String, Value>,
    name: &str,
    default: usize,
    max: usize,
) -> Result<usize, ErrorObject> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n <= max)
            .ok_or_else(|| invalid(format!("{name} must be an integer from 0 to {max}"))),
    }
}

/// A turn's input: a non-empty string, or an array of `{type: "text", text}` parts joined.
fn input_text(input: Option<&Value>) -> Result<String, ErrorObject> {
    let text = match input {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(piece))) => text.push_str(piece),
                    _ => return Err(invalid("input parts must be {type: \"text\", text}")),
                }
            }
            text
        }
        None | Some(Value::Null) => return Err(invalid("input is required")),
        Some(_) => return Err(invalid("input must be a string or an array of text parts")),
    };
    if text.trim().is_empty() {
        return Err(invalid("input must not be empty"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_text_or_text_parts_and_never_empty() {
        assert_eq!(input_text(Some(&json!("hi"))).unwrap(), "hi");
        assert_eq!(
            input_text(Some(
                &json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
            ))
            .unwrap(),
            "ab"
        );
        for bad in [
            json!(""),
            json!("  "),
            json!([]),
            json!([{"type": "image"}]),
            json!(3),
        ] {
            assert!(input_text(Some(&bad)).is_err(), "{bad}");
        }
        assert!(input_text(None).is_err());
    }
}

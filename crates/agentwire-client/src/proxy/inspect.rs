//! What the proxy knows about a session and how it checks one frame: the version learned from
//! the `initialize` pair, the requests each side sent and not yet answered (so a response is
//! named by the method it answers), and the checks — the version's schema, the answered
//! method's result shape, who may send what, the runtime's frame limit.
//!
//! **Invariant:** the state is bounded: at most [`MAX_PENDING_REQUESTS`] unanswered requests per
//! direction are remembered (the oldest is forgotten first; ids and methods longer than
//! [`MAX_REMEMBERED_BYTES`] never), and at most [`MAX_ISSUES_PER_FRAME`] schema issues are kept
//! per frame, each message and pointer cut at 512 characters.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;

use agentwire_roll::parse::definition_stem;
use agentwire_roll::schema::{self, SchemaIssue};
use agentwire_roll::version::{NOTIFICATION_RUNTIME_EVENT, NOTIFICATION_SERVER_REQUEST_CANCEL};
use agentwire_roll::{LATEST_VERSION, Method, ProtocolVersion, ServerRequestMethod};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::lock;

/// Unanswered requests remembered per direction.
pub const MAX_PENDING_REQUESTS: usize = 4096;

/// Schema issues kept per frame; the rest are counted in one last violation.
pub const MAX_ISSUES_PER_FRAME: usize = 8;

/// A request is remembered only when its id (as JSON text) and method are at most this long.
pub const MAX_REMEMBERED_BYTES: usize = 256;

/// Longest message and JSON Pointer a violation keeps, in characters; longer ones are cut
/// with an ellipsis.
const MAX_VIOLATION_TEXT_CHARS: usize = 512;

fn bounded(text: String) -> String {
    if text.chars().count() <= MAX_VIOLATION_TEXT_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_VIOLATION_TEXT_CHARS).collect();
    out.push('…');
    out
}

/// Which way a frame travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// From the host (the proxy's standard input) to the runtime.
    #[serde(rename = "host->runtime")]
    HostToRuntime,
    /// From the runtime (the child's standard output) to the host.
    #[serde(rename = "runtime->host")]
    RuntimeToHost,
}

impl Direction {
    /// The wire name of the record: `host->runtime` or `runtime->host`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HostToRuntime => "host->runtime",
            Direction::RuntimeToHost => "runtime->host",
        }
    }

    /// The other way.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::HostToRuntime => Direction::RuntimeToHost,
            Direction::RuntimeToHost => Direction::HostToRuntime,
        }
    }

    fn index(self) -> usize {
        match self {
            Direction::HostToRuntime => 0,
            Direction::RuntimeToHost => 1,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of thing is wrong with a frame; each has a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViolationKind {
    /// The line is not JSON (`proxy.not-json`).
    NotJson,
    /// The line is longer than the proxy's line limit: forwarded, not checked
    /// (`proxy.line-too-long`).
    LineTooLong,
    /// A host frame longer than the runtime's `limits.maxFrameBytes` (`proxy.frame-over-limit`).
    FrameOverLimit,
    /// The frame breaks the version's schema (`proxy.schema`).
    Schema,
    /// A success result that is not a result of the method it answers (`proxy.result`).
    Result,
    /// A message its sender may not send: a host method from the runtime, a server request or a
    /// notification from the host (`proxy.direction`).
    Direction,
    /// A response to no request the other side sent (`proxy.unmatched-response`).
    UnmatchedResponse,
    /// `initialize` answered a version that was not offered, or no version of the protocol
    /// (`proxy.version`).
    Version,
}

impl ViolationKind {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            ViolationKind::NotJson => "proxy.not-json",
            ViolationKind::LineTooLong => "proxy.line-too-long",
            ViolationKind::FrameOverLimit => "proxy.frame-over-limit",
            ViolationKind::Schema => "proxy.schema",
            ViolationKind::Result => "proxy.result",
            ViolationKind::Direction => "proxy.direction",
            ViolationKind::UnmatchedResponse => "proxy.unmatched-response",
            ViolationKind::Version => "proxy.version",
        }
    }
}

/// One thing wrong with a frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// Stable code (`proxy.schema`, …; see [`ViolationKind::code`]).
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// JSON Pointer into the frame, for schema issues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_path: Option<String>,
    /// JSON Pointer into the version's export (the keyword that failed), for schema issues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_path: Option<String>,
}

impl Violation {
    /// A violation without a position.
    pub fn new(kind: ViolationKind, message: impl Into<String>) -> Violation {
        Violation {
            code: kind.code().to_owned(),
            message: bounded(message.into()),
            instance_path: None,
            schema_path: None,
        }
    }

    /// A schema issue of the part of the frame at `instance` (the issue's schema path is
    /// already a pointer into the whole export).
    fn issue(kind: ViolationKind, issue: SchemaIssue, instance: &str) -> Violation {
        Violation {
            code: kind.code().to_owned(),
            message: bounded(issue.message),
            instance_path: Some(bounded(format!("{instance}{}", issue.instance_path))),
            schema_path: Some(bounded(issue.schema_path)),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.code)?;
        if let Some(path) = self.instance_path.as_deref() {
            let path = if path.is_empty() { "(root)" } else { path };
            write!(f, "{path}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The JSON-RPC shape of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    /// `id` and `method`.
    Request,
    /// `method` without `id`.
    Notification,
    /// `id` and `result`.
    Result,
    /// `id` and `error`.
    Error,
    /// Anything else (not an object, or neither of the above).
    Other,
}

/// What a frame is, as far as the session knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInfo {
    /// Its shape.
    pub kind: FrameKind,
    /// Its JSON-RPC id.
    pub id: Option<Value>,
    /// A request's or notification's method, or the method of the request a response answers
    /// (when that request was seen).
    pub method: Option<String>,
}

impl FrameInfo {
    /// Reads the shape of `frame` without any session knowledge.
    pub fn of(frame: &Value) -> FrameInfo {
        let Some(object) = frame.as_object() else {
            return FrameInfo {
                kind: FrameKind::Other,
                id: None,
                method: None,
            };
        };
        let id = object.get("id").cloned();
        let method = object
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let kind = match (&id, &method) {
            (Some(_), Some(_)) => FrameKind::Request,
            (None, Some(_)) => FrameKind::Notification,
            (Some(_), None) if object.contains_key("result") => FrameKind::Result,
            (Some(_), None) if object.contains_key("error") => FrameKind::Error,
            _ => FrameKind::Other,
        };
        FrameInfo { kind, id, method }
    }
}

/// The requests one side sent and the other has not answered yet, by id.
#[derive(Debug, Default)]
struct Pending {
    methods: HashMap<String, String>,
    order: VecDeque<String>,
    /// Some request was forgotten to stay bounded: an unknown id may be its answer.
    forgot: bool,
}

impl Pending {
    fn insert(&mut self, key: String, method: String) {
        if key.len() > MAX_REMEMBERED_BYTES || method.len() > MAX_REMEMBERED_BYTES {
            self.forgot = true;
            return;
        }
        if self.methods.insert(key.clone(), method).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > MAX_PENDING_REQUESTS {
            if let Some(old) = self.order.pop_front() {
                self.methods.remove(&old);
                self.forgot = true;
            }
        }
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let method = self.methods.remove(key)?;
        if let Some(at) = self.order.iter().position(|k| k == key) {
            self.order.remove(at);
        }
        Some(method)
    }
}

#[derive(Debug, Default)]
struct State {
    version: Option<ProtocolVersion>,
    /// The id of the `initialize` request waiting for its answer, and what it offered.
    initialize: Option<(String, Vec<String>)>,
    /// The runtime's `limits.maxFrameBytes`.
    max_frame_bytes: Option<u64>,
    /// Indexed by the direction the request travelled.
    pending: [Pending; 2],
}

/// One session as the proxy sees it, shared by both directions.
#[derive(Debug, Default)]
pub struct Session {
    state: Mutex<State>,
}

/// What [`Session::inspect`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// The parsed frame (`None`: the line is not JSON).
    pub frame: Option<Value>,
    /// What it is.
    pub info: FrameInfo,
    /// The version it was checked against.
    pub version: ProtocolVersion,
    /// What is wrong with it.
    pub violations: Vec<Violation>,
}

fn id_key(id: &Value) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Session {
    /// A session before `initialize`.
    pub fn new() -> Session {
        Session::default()
    }

    /// The negotiated version, once an `initialize` result named one.
    pub fn version(&self) -> Option<ProtocolVersion> {
        lock(&self.state).version
    }

    /// Parses one line (without its line ending), updates the session and checks the frame.
    pub fn inspect(&self, direction: Direction, line: &[u8]) -> Inspection {
        let frame: Value = match serde_json::from_slice(line) {
            Ok(frame) => frame,
            Err(error) => {
                return Inspection {
                    frame: None,
                    info: FrameInfo {
                        kind: FrameKind::Other,
                        id: None,
                        method: None,
                    },
                    version: self.version().unwrap_or(LATEST_VERSION),
                    violations: vec![Violation::new(
                        ViolationKind::NotJson,
                        format!("not JSON: {error}"),
                    )],
                };
            }
        };
        let (info, version, mut violations) = self.observe(direction, &frame, line.len());
        violations.extend(check(version, direction, &frame, &info));
        Inspection {
            frame: Some(frame),
            info,
            version,
            violations,
        }
    }

    /// Updates the session with one parsed frame of `length` bytes: remembers requests, names
    /// responses by the method they answer, learns the version from the `initialize` pair.
    /// Returns the frame's description, the version to check it against, and what is wrong
    /// with its place in the session (direction, correlation, negotiation, frame limit).
    pub fn observe(
        &self,
        direction: Direction,
        frame: &Value,
        length: usize,
    ) -> (FrameInfo, ProtocolVersion, Vec<Violation>) {
        let mut info = FrameInfo::of(frame);
        let mut violations = Vec::new();
        let mut state = lock(&self.state);
        match info.kind {
            FrameKind::Request => {
                let method = info.method.clone().unwrap_or_default();
                if let Some(id) = &info.id {
                    state.pending[direction.index()].insert(id_key(id), method.clone());
                    if direction == Direction::HostToRuntime
                        && method == Method::Initialize.as_str()
                        && state.version.is_none()
                    {
                        let offered = frame
                            .pointer("/params/protocolVersions")
                            .and_then(Value::as_array)
                            .map(|versions| {
                                versions
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect()
                            })
                            .unwrap_or_default();
                        state.initialize = Some((id_key(id), offered));
                    }
                }
                violations.extend(request_direction(direction, &method));
            }
            FrameKind::Notification => {
                if direction == Direction::HostToRuntime {
                    violations.push(Violation::new(
                        ViolationKind::Direction,
                        format!(
                            "the host sent the notification {}; only the runtime sends notifications",
                            info.method.as_deref().unwrap_or_default()
                        ),
                    ));
                }
            }
            FrameKind::Result | FrameKind::Error => {
                let id = info.id.clone().unwrap_or(Value::Null);
                let key = id_key(&id);
                let pending = &mut state.pending[direction.reverse().index()];
                info.method = pending.take(&key);
                if info.method.is_none() && !id.is_null() && !pending.forgot {
                    violations.push(Violation::new(
                        ViolationKind::UnmatchedResponse,
                        format!(
                            "a response with id {key}, which no request of the {} had",
                            match direction {
                                Direction::HostToRuntime => "runtime",
                                Direction::RuntimeToHost => "host",
                            }
                        ),
                    ));
                }
                let answers_initialize = direction == Direction::RuntimeToHost
                    && state.initialize.as_ref().is_some_and(|(k, _)| *k == key);
                if answers_initialize
                    && let Some((_, offered)) = state.initialize.take()
                    && info.kind == FrameKind::Result
                {
                    violations.extend(learn(&mut state, frame, &offered));
                }
            }
            FrameKind::Other => {}
        }
        if direction == Direction::HostToRuntime
            && let Some(limit) = state.max_frame_bytes
            && length as u64 > limit
        {
            violations.push(Violation::new(
                ViolationKind::FrameOverLimit,
                format!(
                    "a frame of {length} bytes, over the runtime's limits.maxFrameBytes of {limit}"
                ),
            ));
        }
        let version = state.version.unwrap_or(LATEST_VERSION);
        (info, version, violations)
    }
}

/// A request its sender may not send.
fn request_direction(direction: Direction, method: &str) -> Option<Violation> {
    let (wrong, whose) = match direction {
        Direction::HostToRuntime => (ServerRequestMethod::from_wire(method).is_some(), "runtime"),
        Direction::RuntimeToHost => (Method::from_wire(method).is_some(), "host"),
    };
    wrong.then(|| {
        Violation::new(
            ViolationKind::Direction,
            format!(
                "{method} is a request of the {whose}, sent here by the {}",
                match direction {
                    Direction::HostToRuntime => "host",
                    Direction::RuntimeToHost => "runtime",
                }
            ),
        )
    })
}

/// Takes the version and frame limit from an `initialize` result.
fn learn(state: &mut State, frame: &Value, offered: &[String]) -> Option<Violation> {
    state.max_frame_bytes = frame
        .pointer("/result/limits/maxFrameBytes")
        .and_then(Value::as_u64);
    let answered = frame.pointer("/result/protocolVersion");
    let Some(version) = answered
        .and_then(Value::as_str)
        .and_then(ProtocolVersion::parse)
    else {
        return Some(Violation::new(
            ViolationKind::Version,
            format!(
                "initialize answered protocolVersion {}, which is no version of the protocol",
                answered.map_or_else(|| "(none)".to_owned(), Value::to_string)
            ),
        ));
    };
    state.version = Some(version);
    if !offered.is_empty() && !offered.iter().any(|o| o == version.as_str()) {
        return Some(Violation::new(
            ViolationKind::Version,
            format!(
                "initialize answered {version}, which the host did not offer ({})",
                offered.join(", ")
            ),
        ));
    }
    None
}

/// The first issue at each place of the frame (a value breaking two keywords, `format` and
/// `pattern`, is one mistake), at most [`MAX_ISSUES_PER_FRAME`] of them; the rest are counted
/// in one more violation.
fn capped(kind: ViolationKind, issues: Vec<SchemaIssue>, instance: &str) -> Vec<Violation> {
    let mut places = std::collections::HashSet::new();
    let issues: Vec<SchemaIssue> = issues
        .into_iter()
        .filter(|issue| places.insert(issue.instance_path.clone()))
        .collect();
    let total = issues.len();
    let mut out: Vec<Violation> = issues
        .into_iter()
        .take(MAX_ISSUES_PER_FRAME)
        .map(|issue| Violation::issue(kind, issue, instance))
        .collect();
    if total > MAX_ISSUES_PER_FRAME {
        out.push(Violation::new(
            kind,
            format!("and {} more issues", total - MAX_ISSUES_PER_FRAME),
        ));
    }
    out
}

/// The frame checked against `version`: the whole message against the export; when that
/// fails, the most specific definition that fails too, so the issue names the field rather
/// than "matches none of the alternatives"; a success result against the result of the method
/// it answers.
fn check(
    version: ProtocolVersion,
    direction: Direction,
    frame: &Value,
    info: &FrameInfo,
) -> Vec<Violation> {
    if let Err(root) = schema::validate_message(version, frame) {
        if let Some(unknown) = unknown_method(version, direction, info) {
            return vec![unknown];
        }
        for (definition, pointer) in narrowed(version, direction, frame, info) {
            let Some(part) = frame.pointer(pointer) else {
                continue;
            };
            if let Err(issues) = schema::validate_definition(version, &definition, part) {
                return capped(ViolationKind::Schema, issues, pointer);
            }
        }
        return capped(ViolationKind::Schema, root, "");
    }
    if info.kind == FrameKind::Result
        && let Some(method) = info.method.as_deref()
        && let Some(definition) = result_definition(version, direction, method)
        && let Some(result) = frame.get("result")
        && let Err(issues) = schema::validate_definition(version, &definition, result)
    {
        return capped(ViolationKind::Result, issues, "/result");
    }
    Vec::new()
}

/// A request or notification whose method the version does not have.
fn unknown_method(
    version: ProtocolVersion,
    direction: Direction,
    info: &FrameInfo,
) -> Option<Violation> {
    let method = info.method.as_deref()?;
    let known = match info.kind {
        FrameKind::Request => match direction {
            Direction::HostToRuntime => {
                Method::from_wire(method).is_some_and(|m| m.is_available(version))
            }
            Direction::RuntimeToHost => {
                ServerRequestMethod::from_wire(method).is_some_and(|m| m.is_available(version))
            }
        },
        FrameKind::Notification => {
            method == NOTIFICATION_RUNTIME_EVENT
                || method == NOTIFICATION_SERVER_REQUEST_CANCEL
                    && version.capabilities().server_requests
        }
        _ => return None,
    };
    (!known).then(|| {
        Violation::new(
            ViolationKind::Schema,
            format!("{method} is not a method of version {version}"),
        )
    })
}

/// Definitions to try, most specific first, with the pointer of the part each describes.
fn narrowed(
    version: ProtocolVersion,
    direction: Direction,
    frame: &Value,
    info: &FrameInfo,
) -> Vec<(String, &'static str)> {
    let method = info.method.as_deref().unwrap_or_default();
    let stem = definition_stem(method);
    match info.kind {
        FrameKind::Request => {
            let whole = match direction {
                Direction::HostToRuntime => format!("{stem}Request"),
                Direction::RuntimeToHost => format!("{stem}ServerRequest"),
            };
            vec![(format!("{stem}Params"), "/params"), (whole, "")]
        }
        FrameKind::Notification if method == NOTIFICATION_RUNTIME_EVENT => {
            let mut out = Vec::new();
            if let Some(kind) = frame.pointer("/params/event/type").and_then(Value::as_str) {
                let mut event = String::from("event");
                let stem = definition_stem(kind);
                let mut chars = stem.chars();
                if let Some(first) = chars.next() {
                    event.extend(first.to_uppercase());
                    event.push_str(chars.as_str());
                }
                out.push((event, "/params/event"));
            }
            let envelope = if version.capabilities().durable_events {
                match frame.pointer("/params/durability").and_then(Value::as_str) {
                    Some("ephemeral") => "runtimeEventEnvelopeEphemeral",
                    _ => "runtimeEventEnvelopeDurable",
                }
            } else {
                "runtimeEventEnvelopeLegacy"
            };
            out.push((envelope.to_owned(), "/params"));
            out.push(("runtimeEventNotification".to_owned(), ""));
            out
        }
        FrameKind::Notification => vec![
            ("serverRequestCancelParams".to_owned(), "/params"),
            ("serverRequestCancelNotification".to_owned(), ""),
        ],
        FrameKind::Result => vec![("successResponse".to_owned(), "")],
        FrameKind::Error => vec![("errorResponse".to_owned(), "")],
        FrameKind::Other => Vec::new(),
    }
}

/// The result definition of `method` answered in `direction`, when the version has it.
fn result_definition(
    version: ProtocolVersion,
    direction: Direction,
    method: &str,
) -> Option<String> {
    match direction {
        Direction::RuntimeToHost => Method::from_wire(method)
            .filter(|m| m.is_available(version))
            .map(Method::result_definition),
        Direction::HostToRuntime => ServerRequestMethod::from_wire(method)
            .filter(|m| m.is_available(version))
            .map(|_| format!("{}Result", definition_stem(method))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    const THREAD: &str = "6f1c2a9e-0d7b-4c1e-9a53-2b8e4f0c7d11";

    fn line(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    fn initialize(session: &Session, versions: &[&str], answered: &str) -> Vec<Violation> {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersions": versions, "client": {"name": "t", "version": "1"}}});
        let sent = session.inspect(Direction::HostToRuntime, &line(&request));
        assert_eq!(sent.violations, []);
        assert_eq!(sent.version, LATEST_VERSION);
        let result = json!({"protocolVersion": answered,
            "runtimeInstanceId": "00000000-0000-4000-8000-000000000001",
            "server": {"name": "s", "version": "1", "runtimeVersion": "1"},
            "limits": {"maxFrameBytes": 2048, "maxPageSize": 100,
                       "eventReplay": answered >= "1.3", "idempotencyCacheEntries": 100},
            "features": []});
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        let got = session.inspect(Direction::RuntimeToHost, &line(&answer));
        assert_eq!(got.info.method.as_deref(), Some("initialize"));
        got.violations
    }

    fn codes(violations: &[Violation]) -> Vec<&str> {
        violations.iter().map(|v| v.code.as_str()).collect()
    }

    #[test]
    fn the_version_is_learned_from_the_initialize_pair() {
        let session = Session::new();
        assert_eq!(session.version(), None);
        initialize(&session, &["1.3"], "1.3");
        assert_eq!(session.version(), Some(ProtocolVersion::V1_3));
        // resume exists in 1.3, so a resume request is valid; on 1.2 it would not be.
        let resume = json!({"jsonrpc": "2.0", "id": 2, "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&resume));
        assert_eq!(checked.violations, []);
        assert_eq!(checked.version, ProtocolVersion::V1_3);
    }

    #[test]
    fn a_method_the_version_lacks_is_named() {
        let session = Session::new();
        initialize(&session, &["1.2"], "1.2");
        let resume = json!({"jsonrpc": "2.0", "id": 2, "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&resume));
        assert_eq!(codes(&checked.violations), ["proxy.schema"]);
        assert_eq!(
            checked.violations[0].message,
            "runtime.events.resume is not a method of version 1.2"
        );
    }

    #[test]
    fn an_answer_with_a_version_not_offered_is_reported() {
        let session = Session::new();
        let violations = initialize(&session, &["1.3"], "1.2");
        assert_eq!(codes(&violations), ["proxy.version"]);
        assert_eq!(session.version(), Some(ProtocolVersion::V1_2));
    }

    #[test]
    fn a_bad_field_is_reported_where_it_is() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let start = json!({"jsonrpc": "2.0", "id": 7, "method": "turn.start", "params": {
            "requestId": THREAD, "threadId": THREAD, "turnId": "not-a-uuid",
            "input": {"text": "hi"}}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&start));
        assert_eq!(codes(&checked.violations), ["proxy.schema"]);
        for violation in &checked.violations {
            assert_eq!(violation.code, "proxy.schema");
            assert_eq!(violation.instance_path.as_deref(), Some("/params/turnId"));
            assert!(
                violation
                    .schema_path
                    .as_deref()
                    .unwrap()
                    .starts_with("/$defs/sharedUuid/"),
                "{violation:?}"
            );
        }
        assert_eq!(checked.info.id, Some(json!(7)));
        assert_eq!(checked.info.method.as_deref(), Some("turn.start"));
    }

    #[test]
    fn a_result_is_checked_against_the_method_it_answers() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let resume = json!({"jsonrpc": "2.0", "id": "r", "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        session.inspect(Direction::HostToRuntime, &line(&resume));
        // A valid result of another method.
        let answer =
            json!({"jsonrpc": "2.0", "id": "r", "result": {"accepted": true, "turnId": THREAD}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&answer));
        assert_eq!(
            checked.info.method.as_deref(),
            Some("runtime.events.resume")
        );
        assert!(
            codes(&checked.violations)
                .iter()
                .all(|c| *c == "proxy.result")
        );
        assert!(!checked.violations.is_empty());
    }

    #[test]
    fn direction_and_correlation_are_checked() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let stray = json!({"jsonrpc": "2.0", "id": 99, "result": {"resolved": true}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&stray));
        assert!(codes(&checked.violations).contains(&"proxy.unmatched-response"));
        let request = json!({"jsonrpc": "2.0", "id": 5, "method": "thread.list", "params": {}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&request));
        assert!(codes(&checked.violations).contains(&"proxy.direction"));
        let notification = json!({"jsonrpc": "2.0", "method": "runtime.event", "params": {}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&notification));
        assert!(codes(&checked.violations).contains(&"proxy.direction"));
    }

    #[test]
    fn a_host_frame_over_the_runtimes_limit_is_reported() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let create = json!({"jsonrpc": "2.0", "id": 3, "method": "thread.create",
            "params": {"requestId": THREAD, "title": "x".repeat(3000)}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&create));
        assert!(codes(&checked.violations).contains(&"proxy.frame-over-limit"));
    }

    #[test]
    fn a_line_that_is_not_json_is_reported() {
        let session = Session::new();
        let checked = session.inspect(Direction::HostToRuntime, b"{not json");
        assert_eq!(checked.frame, None);
        assert_eq!(codes(&checked.violations), ["proxy.not-json"]);
    }

    #[test]
    fn pending_requests_are_bounded() {
        let session = Session::new();
        for id in 0..(MAX_PENDING_REQUESTS + 10) {
            let request =
                json!({"jsonrpc": "2.0", "id": id, "method": "thread.list", "params": {}});
            session.observe(Direction::HostToRuntime, &request, 10);
        }
        let long = json!({"jsonrpc": "2.0", "id": "x".repeat(MAX_REMEMBERED_BYTES),
            "method": "thread.list", "params": {}});
        session.observe(Direction::RuntimeToHost, &long, 10);
        let state = lock(&session.state);
        assert_eq!(state.pending[0].methods.len(), MAX_PENDING_REQUESTS);
        assert!(state.pending[0].forgot);
        assert!(state.pending[1].methods.is_empty());
        assert!(state.pending[1].forgot);
    }
}

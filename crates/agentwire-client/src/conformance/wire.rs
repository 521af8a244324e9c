//! The raw wire driver: one runtime child process, JSON-RPC frames written as NDJSON to its
//! stdin and read from its stdout one by one, each validated against the negotiated version's
//! export and checked for correlation before a scenario sees it, with every wait bounded.
//!
//! **Invariant:** the driver reads at most [`INBOUND_FRAME_BUDGET`] bytes per line and holds
//! at most [`MAX_INBOX_FRAMES`] unread frames ([`MAX_INBOX_BYTES`] bytes); more fails the
//! scenario instead of growing.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::ChildProcess;
use agentwire_jsonrpc::{Frame as RawFrame, FrameReader};
use agentwire_roll::constants::MIN_CLIENT_INBOUND_FRAME_BYTES_V13;
use agentwire_roll::negotiation::check_advertisement;
use agentwire_roll::schema::SchemaIssue;
use agentwire_roll::{
    Feature, Method, ProtocolVersion, RollErrorCode, ServerRequestMethod, schema,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{ChildStdin, ChildStdout};

use super::script::CommandLine;

/// The suite's inbound frame budget: 17 MiB, the least a client advertising 1.3 or newer must
/// accept. Every offer of `initialize` is checked against it.
pub const INBOUND_FRAME_BUDGET: usize = MIN_CLIENT_INBOUND_FRAME_BYTES_V13 as usize;

/// Frames read and not yet taken by a scenario, at most.
pub(crate) const MAX_INBOX_FRAMES: usize = 200_000;
/// Bytes of frames read and not yet taken, at most.
pub(crate) const MAX_INBOX_BYTES: usize = 256 * 1024 * 1024;

/// The server requests the suite answers, so it may advertise every version (1.1 requires an
/// `approval.request` handler).
const HANDLED: [ServerRequestMethod; 2] = [
    ServerRequestMethod::ApprovalRequest,
    ServerRequestMethod::UserInputRequest,
];

/// How much of a frame a message quotes, in characters.
const EXCERPT_CHARS: usize = 400;
/// How much of the runtime's standard error a message quotes, in characters.
const STDERR_CHARS: usize = 600;
/// How long a runtime has to exit once its stdin is closed before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Issues of one invalid frame named in a message.
const REPORTED_ISSUES: usize = 3;

/// Why a scenario failed: a message for the report, or a runtime that cannot be started at
/// all, which stops the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    message: String,
    spawn: bool,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            spawn: false,
        }
    }

    pub(crate) fn spawn(message: String) -> Failure {
        Failure {
            message,
            spawn: true,
        }
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The operating system's error when the runtime could not be started.
    pub(crate) fn spawn_error(&self) -> Option<&str> {
        self.spawn.then_some(self.message.as_str())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Fails the scenario with a formatted message unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err($crate::conformance::wire::Failure::new(format!($($message)+)));
        }
    };
}
pub(crate) use ensure;

/// A value as compact JSON, cut at [`EXCERPT_CHARS`] characters.
pub(crate) fn excerpt(value: &Value) -> String {
    cut(&value.to_string(), EXCERPT_CHARS)
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A fresh protocol UUID (v4).
pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// One frame the runtime wrote, numbered from 1 in the order it was read.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) index: u64,
    pub(crate) value: Value,
    /// Its length on the wire, line ending excluded.
    pub(crate) bytes: usize,
}

impl Frame {
    pub(crate) fn method(&self) -> Option<&str> {
        self.value.get("method").and_then(Value::as_str)
    }

    fn is_response(&self) -> bool {
        self.value.get("method").is_none()
    }

    fn is_response_to(&self, id: u64) -> bool {
        self.is_response() && self.value.get("id").and_then(Value::as_u64) == Some(id)
    }

    pub(crate) fn is_server_request(&self, method: &str) -> bool {
        self.method() == Some(method) && self.value.get("id").is_some()
    }

    pub(crate) fn params(&self) -> &Value {
        self.value.get("params").unwrap_or(&Value::Null)
    }

    /// The envelope of a `runtime.event` notification.
    pub(crate) fn event(&self) -> Option<&Value> {
        (self.method() == Some("runtime.event")).then(|| self.params())
    }

    /// A `runtime.event` of `thread_id`.
    pub(crate) fn event_of(&self, thread_id: &str) -> Option<&Value> {
        self.event().filter(|e| e["threadId"] == thread_id)
    }

    pub(crate) fn id(&self) -> &Value {
        self.value.get("id").unwrap_or(&Value::Null)
    }
}

/// What an event envelope's `event.type` is.
pub(crate) fn event_type(envelope: &Value) -> &str {
    envelope["event"]["type"].as_str().unwrap_or_default()
}

/// Whether an event ends its turn.
pub(crate) fn is_terminal(envelope: &Value) -> bool {
    matches!(
        event_type(envelope),
        "turn.completed" | "turn.cancelled" | "turn.failed"
    )
}

/// An error response.
#[derive(Debug, Clone)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) roll_code: Option<String>,
    pub(crate) value: Value,
}

impl RpcError {
    fn from_value(value: Value) -> RpcError {
        RpcError {
            code: value.get("code").and_then(Value::as_i64).unwrap_or(0),
            roll_code: value
                .pointer("/data/rollCode")
                .and_then(Value::as_str)
                .map(str::to_owned),
            value,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.roll_code {
            Some(code) => write!(f, "{code} ({})", self.code)?,
            None => write!(f, "error {}", self.code)?,
        }
        if let Some(message) = self.value.get("message").and_then(Value::as_str) {
            write!(f, ": {}", cut(message, EXCERPT_CHARS))?;
        }
        Ok(())
    }
}

/// The answer to one request.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The frame's number.
    pub(crate) index: u64,
    /// Its length on the wire.
    pub(crate) bytes: usize,
    pub(crate) result: Result<Value, RpcError>,
}

/// One runtime process and the frames it wrote.
pub(crate) struct Wire {
    child: ChildProcess,
    stdin: Option<ChildStdin>,
    reader: FrameReader<ChildStdout>,
    /// The version frames are validated under: the one under test, then the negotiated one.
    version: ProtocolVersion,
    next_id: u64,
    /// Requests without an answer read yet, by id, with their method.
    pending: HashMap<u64, String>,
    /// Requests whose answer was read, with their method.
    answered: HashMap<u64, String>,
    inbox: VecDeque<Frame>,
    inbox_bytes: usize,
    frames_read: u64,
    timeout: Duration,
    deadline: Instant,
    /// The `features` of the `initialize` result.
    features: Vec<String>,
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wire")
            .field("pid", &self.child.id())
            .field("version", &self.version)
            .field("frames_read", &self.frames_read)
            .finish()
    }
}

/// What the suite says it is in `initialize`.
fn client_info() -> Value {
    json!({"name": "agentwire-conformance", "version": env!("CARGO_PKG_VERSION")})
}

impl Wire {
    /// Starts the runtime; frames are validated under `version` until `initialize` answers.
    pub(crate) fn spawn(
        command: &CommandLine,
        version: ProtocolVersion,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<Wire, Failure> {
        let (child, stdout, stdin) = ChildProcess::spawn(command.command())
            .map_err(|error| Failure::spawn(error.to_string()))?;
        Ok(Wire {
            child,
            stdin: Some(stdin),
            reader: FrameReader::new(stdout, INBOUND_FRAME_BUDGET),
            version,
            next_id: 0,
            pending: HashMap::new(),
            answered: HashMap::new(),
            inbox: VecDeque::new(),
            inbox_bytes: 0,
            frames_read: 0,
            timeout,
            deadline,
            features: Vec::new(),
        })
    }

    /// Whether `initialize` announced `feature`.
    pub(crate) fn has_feature(&self, feature: Feature) -> bool {
        self.features.iter().any(|f| f == feature.as_str())
    }

    /// Closes the runtime's stdin and waits briefly for it to exit, then kills it.
    pub(crate) async fn close(mut self) {
        drop(self.stdin.take());
        let _ = tokio::time::timeout(
            CLOSE_GRACE + Duration::from_secs(2),
            self.child.shutdown(CLOSE_GRACE),
        )
        .await;
    }

    fn stderr_note(&self) -> String {
        let tail = self.child.stderr_tail();
        let tail = tail.trim_end();
        if tail.is_empty() {
            return String::new();
        }
        let start = tail
            .char_indices()
            .rev()
            .nth(STDERR_CHARS)
            .map_or(0, |(at, _)| at);
        format!("; its standard error ends with: {}", &tail[start..])
    }

    /// Writes one frame.
    pub(crate) async fn send(&mut self, message: &Value) -> Result<(), Failure> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let what = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a response")
            .to_owned();
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Failure::new("the runtime's standard input is closed"));
        };
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Failure::new(format!(
                "writing {what} to the runtime failed ({error}): it closed its standard input{}",
                self.stderr_note()
            ))),
            Err(_) => Err(Failure::new(format!(
                "the runtime did not read {what} within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Sends a request; returns its id.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Result<u64, Failure> {
        self.next_id += 1;
        let id = self.next_id;
        self.pending.insert(id, method.to_owned());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Answers a server request.
    pub(crate) async fn respond(&mut self, id: &Value, result: Value) -> Result<(), Failure> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    /// What a frame is, for messages.
    fn describe(&self, value: &Value) -> String {
        let method = value.get("method").and_then(Value::as_str);
        let id = value.get("id");
        match (method, id) {
            (Some("runtime.event"), None) => format!(
                "the runtime.event notification ({})",
                value
                    .pointer("/params/event/type")
                    .and_then(Value::as_str)
                    .unwrap_or("no event type")
            ),
            (Some(method), None) => format!("the {method} notification"),
            (Some(method), Some(id)) => format!("the {method} server request (id {id})"),
            (None, Some(id)) => {
                let method = id
                    .as_u64()
                    .and_then(|id| self.pending.get(&id).or_else(|| self.answered.get(&id)));
                match method {
                    Some(method) => format!("the answer to {method} (id {id})"),
                    None => format!("a response with id {id}"),
                }
            }
            (None, None) => "a frame without method or id".to_owned(),
        }
    }

    /// The version a frame is validated under: the answered one for `initialize`'s answer.
    fn version_for(&self, value: &Value) -> ProtocolVersion {
        let is_initialize = value.get("method").is_none()
            && value
                .get("id")
                .and_then(Value::as_u64)
                .and_then(|id| self.pending.get(&id))
                .is_some_and(|m| m == "initialize");
        if is_initialize
            && let Some(version) = value
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse)
        {
            return version;
        }
        self.version
    }

    /// The issues of an invalid frame against the one definition its kind names (the answer's
    /// result against its method's result, an event against the envelope of its durability, a
    /// server request against its method's), which say more than "matches none of the
    /// alternatives" of the whole message; `None` when that definition holds or is unknown.
    fn precise_issues(&self, version: ProtocolVersion, value: &Value) -> Option<Vec<SchemaIssue>> {
        let method = value.get("method").and_then(Value::as_str);
        let (definition, part, prefix) = match method {
            None if value.get("error").is_some() => ("errorResponse".to_owned(), value, ""),
            None => {
                let method = value
                    .get("id")
                    .and_then(Value::as_u64)
                    .and_then(|id| self.pending.get(&id))
                    .and_then(|m| Method::from_wire(m))?;
                (method.result_definition(), value.get("result")?, "/result")
            }
            Some("runtime.event") => {
                let params = value.get("params")?;
                let definition = match params.get("durability").and_then(Value::as_str) {
                    Some("durable") => "runtimeEventEnvelopeDurable",
                    Some("ephemeral") => "runtimeEventEnvelopeEphemeral",
                    _ => "runtimeEventEnvelope",
                };
                (definition.to_owned(), params, "/params")
            }
            Some("runtime.serverRequest.cancel") => {
                ("serverRequestCancelNotification".to_owned(), value, "")
            }
            Some("approval.request") => ("approvalRequestServerRequest".to_owned(), value, ""),
            Some("userInput.request") => ("userInputRequestServerRequest".to_owned(), value, ""),
            Some(_) => return None,
        };
        let issues = schema::validate_definition(version, &definition, part).err()?;
        if issues
            .iter()
            .any(|i| i.schema_path == format!("/$defs/{definition}"))
        {
            // The version has no such definition.
            return None;
        }
        Some(
            issues
                .into_iter()
                .map(|mut i| {
                    i.instance_path = format!("{prefix}{}", i.instance_path);
                    i
                })
                .collect(),
        )
    }

    async fn ended(&mut self, what: &str) -> Failure {
        drop(self.stdin.take());
        let status = tokio::time::timeout(
            Duration::from_secs(2),
            self.child.shutdown(Duration::from_millis(500)),
        )
        .await;
        let exited = match status {
            Ok(Ok(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        Failure::new(format!(
            "the runtime closed its standard output{exited} while the suite waited for {what}{}",
            self.stderr_note()
        ))
    }

    /// Reads the next frame from the runtime, validated and correlated.
    async fn read(&mut self, what: &str) -> Result<Frame, Failure> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let out_of_time = || {
            Failure::new(format!(
                "the scenario ran out of time while the suite waited for {what}"
            ))
        };
        if left.is_zero() {
            return Err(out_of_time());
        }
        let limit = self.timeout.min(left);
        match self.read_within(limit, what).await? {
            Some(frame) => Ok(frame),
            None if limit < self.timeout => Err(out_of_time()),
            None => Err(Failure::new(format!(
                "timed out: the runtime wrote nothing for {} ms while the suite waited for {what}{}",
                self.timeout.as_millis(),
                self.stderr_note()
            ))),
        }
    }

    /// The next frame if one arrives within `limit`.
    async fn read_within(&mut self, limit: Duration, what: &str) -> Result<Option<Frame>, Failure> {
        let read = tokio::time::timeout(limit, self.reader.next_frame()).await;
        let line = match read {
            Err(_) => return Ok(None),
            Ok(Err(error)) => {
                return Err(Failure::new(format!(
                    "reading the runtime's output failed ({error}) while the suite waited for {what}"
                )));
            }
            Ok(Ok(None)) => return Err(self.ended(what).await),
            Ok(Ok(Some(RawFrame::Oversize { length }))) => {
                self.frames_read += 1;
                return Err(Failure::new(format!(
                    "frame {} is a line of {length} bytes, over the suite's inbound budget of {INBOUND_FRAME_BUDGET} bytes",
                    self.frames_read
                )));
            }
            Ok(Ok(Some(RawFrame::Line(bytes)))) => bytes.to_vec(),
        };
        self.frames_read += 1;
        let index = self.frames_read;
        let value: Value = serde_json::from_slice(&line).map_err(|error| {
            Failure::new(format!(
                "frame {index} is not JSON ({error}): {}",
                cut(&String::from_utf8_lossy(&line), EXCERPT_CHARS)
            ))
        })?;
        let version = self.version_for(&value);
        if let Err(issues) = schema::validate_message(version, &value) {
            let issues = self.precise_issues(version, &value).unwrap_or(issues);
            let listed: Vec<String> = issues
                .iter()
                .take(REPORTED_ISSUES)
                .map(|i| {
                    let at = if i.instance_path.is_empty() {
                        "/"
                    } else {
                        &i.instance_path
                    };
                    format!("at {at}: {}", i.message)
                })
                .collect();
            return Err(Failure::new(format!(
                "frame {index}, {}, is invalid under {version}: {}; the frame: {}",
                self.describe(&value),
                listed.join("; "),
                excerpt(&value)
            )));
        }
        if value.get("method").is_none() {
            let id = value.get("id").unwrap_or(&Value::Null);
            let Some(number) = id.as_u64().filter(|id| self.pending.contains_key(id)) else {
                let why = if id.is_null() {
                    "an error response with id null, which no request can be matched with"
                        .to_owned()
                } else if id
                    .as_u64()
                    .is_some_and(|id| self.answered.contains_key(&id))
                {
                    format!("a second answer to {}", self.describe(&value))
                } else {
                    format!("a response to id {id}, which the suite never sent")
                };
                return Err(Failure::new(format!(
                    "frame {index} is {why}: {}",
                    excerpt(&value)
                )));
            };
            if let Some(method) = self.pending.remove(&number) {
                self.answered.insert(number, method);
            }
        }
        Ok(Some(Frame {
            index,
            value,
            bytes: line.len(),
        }))
    }

    /// Keeps a frame a scenario did not wait for.
    fn stash(&mut self, frame: Frame) -> Result<(), Failure> {
        if self.inbox.len() >= MAX_INBOX_FRAMES
            || self.inbox_bytes.saturating_add(frame.bytes) > MAX_INBOX_BYTES
        {
            return Err(Failure::new(format!(
                "the runtime wrote more than {MAX_INBOX_FRAMES} frames ({MAX_INBOX_BYTES} bytes) the suite did not wait for"
            )));
        }
        self.inbox_bytes += frame.bytes;
        self.inbox.push_back(frame);
        Ok(())
    }

    fn take(&mut self, index: usize) -> Option<Frame> {
        let frame = self.inbox.remove(index)?;
        self.inbox_bytes = self.inbox_bytes.saturating_sub(frame.bytes);
        Some(frame)
    }

    /// The frames read and not yet taken.
    pub(crate) fn inbox(&self) -> impl Iterator<Item = &Frame> {
        self.inbox.iter()
    }

    /// Takes every unread frame matching `wanted`, in order.
    pub(crate) fn drain(&mut self, wanted: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.inbox.len());
        for frame in self.inbox.drain(..) {
            if wanted(&frame) {
                taken.push(frame);
            } else {
                kept.push_back(frame);
            }
        }
        self.inbox = kept;
        self.inbox_bytes = self.inbox.iter().map(|f| f.bytes).sum();
        taken
    }

    /// The first frame matching `wanted`, unread ones first; the others are kept in order.
    pub(crate) async fn wait_for(
        &mut self,
        what: &str,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Result<Frame, Failure> {
        if let Some(at) = self.inbox.iter().position(&wanted)
            && let Some(frame) = self.take(at)
        {
            return Ok(frame);
        }
        loop {
            let frame = self.read(what).await?;
            if wanted(&frame) {
                return Ok(frame);
            }
            self.stash(frame)?;
        }
    }

    /// Like [`Wire::wait_for`], but `None` when no matching frame arrives within `period`
    /// (everything read meanwhile stays unread).
    pub(crate) async fn wait_within(
        &mut self,
        period: Duration,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Result<Option<Frame>, Failure> {
        if let Some(at) = self.inbox.iter().position(&wanted) {
            return Ok(self.take(at));
        }
        let until = Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match self.read_within(left, "a frame").await? {
                Some(frame) if wanted(&frame) => return Ok(Some(frame)),
                Some(frame) => self.stash(frame)?,
                None => return Ok(None),
            }
        }
    }

    /// Reads whatever the runtime writes for `period`, keeping it unread.
    pub(crate) async fn settle(&mut self, period: Duration) -> Result<(), Failure> {
        let until = Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.read_within(left, "the runtime to go quiet").await? {
                Some(frame) => self.stash(frame)?,
                None => return Ok(()),
            }
        }
    }

    /// The answer to request `id`.
    pub(crate) async fn answer(&mut self, id: u64) -> Result<Answer, Failure> {
        let method = self
            .pending
            .get(&id)
            .or_else(|| self.answered.get(&id))
            .cloned()
            .unwrap_or_default();
        let what = format!("the answer to {method} (id {id})");
        let frame = self.wait_for(&what, |f| f.is_response_to(id)).await?;
        let Frame {
            index,
            mut value,
            bytes,
        } = frame;
        let result = match value.get_mut("error") {
            Some(error) => Err(RpcError::from_value(error.take())),
            None => Ok(value.get_mut("result").map(Value::take).unwrap_or_default()),
        };
        Ok(Answer {
            index,
            bytes,
            result,
        })
    }

    /// Sends a request and waits for its answer.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Answer, Failure> {
        let id = self.request(method, params).await?;
        self.answer(id).await
    }

    /// A call that must succeed.
    pub(crate) async fn ok(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let shown = excerpt(&params);
        match self.call(method, params).await?.result {
            Ok(result) => Ok(result),
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected a result"
            ))),
        }
    }

    /// A call that must fail with `expected` (its `rollCode` and the JSON-RPC code that goes
    /// with it).
    pub(crate) async fn refused(
        &mut self,
        method: &str,
        params: Value,
        expected: RollErrorCode,
    ) -> Result<RpcError, Failure> {
        let shown = excerpt(&params);
        let wanted = format!("{} ({})", expected.as_str(), expected.jsonrpc_code());
        match self.call(method, params).await?.result {
            Ok(result) => Err(Failure::new(format!(
                "{method} {shown} succeeded with {}; expected {wanted}",
                excerpt(&result)
            ))),
            Err(error)
                if error.roll_code.as_deref() == Some(expected.as_str())
                    && error.code == expected.jsonrpc_code() =>
            {
                Ok(error)
            }
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected {wanted}"
            ))),
        }
    }

    /// A call that must fail with JSON-RPC `code` (whatever its data).
    pub(crate) async fn refused_with_code(
        &mut self,
        method: &str,
        params: Value,
        code: i64,
    ) -> Result<RpcError, Failure> {
        let shown = excerpt(&params);
        match self.call(method, params).await?.result {
            Ok(result) => Err(Failure::new(format!(
                "{method} {shown} succeeded with {}; expected error {code}",
                excerpt(&result)
            ))),
            Err(error) if error.code == code => Ok(error),
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected error {code}"
            ))),
        }
    }

    /// `initialize` offering `offered` (checked against the 17 MiB rule first). On success the
    /// answered version becomes the one frames are validated under.
    pub(crate) async fn initialize(&mut self, offered: &[String]) -> Result<Answer, Failure> {
        let budget = u64::try_from(INBOUND_FRAME_BUDGET).unwrap_or(u64::MAX);
        check_advertisement(offered, budget, &HANDLED).map_err(|error| {
            Failure::new(format!(
                "the suite may not offer {offered:?} with its inbound budget of {INBOUND_FRAME_BUDGET} bytes: {error}"
            ))
        })?;
        let answer = self
            .call(
                "initialize",
                json!({"protocolVersions": offered, "client": client_info()}),
            )
            .await?;
        if let Ok(result) = &answer.result
            && let Some(version) = result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse)
        {
            self.version = version;
            self.features = result["features"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
        }
        Ok(answer)
    }

    /// `initialize` offering only the version under test, then on 1.2+ the capability
    /// handshake with `handlers` (revision 1). Returns the `initialize` result.
    pub(crate) async fn open(&mut self, handlers: &[&str]) -> Result<Value, Failure> {
        let version = self.version;
        let answer = self.initialize(&[version.as_str().to_owned()]).await?;
        let result = answer.result.map_err(|error| {
            Failure::new(format!(
                "initialize offering only {version} answered {error}"
            ))
        })?;
        ensure!(
            result["protocolVersion"] == version.as_str(),
            "initialize offering only {version} answered protocolVersion {}",
            result["protocolVersion"]
        );
        if version.capabilities().server_request_capability_negotiation {
            let ack = self
                .ok(
                    "client.capabilities.set",
                    json!({"revision": 1, "serverRequestMethods": handlers}),
                )
                .await?;
            ensure!(
                ack["revision"] == 1,
                "client.capabilities.set revision 1 was acknowledged as revision {}",
                ack["revision"]
            );
        }
        Ok(result)
    }

    /// `thread.create` with a fresh `requestId`; returns the thread id.
    pub(crate) async fn create_thread(&mut self, title: &str) -> Result<String, Failure> {
        let result = self
            .ok(
                "thread.create",
                json!({"requestId": uuid(), "title": title}),
            )
            .await?;
        result["thread"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Failure::new("thread.create answered a thread without an id"))
    }

    /// `turn.start` with fresh ids; returns the turn id.
    pub(crate) async fn start_turn(
        &mut self,
        thread_id: &str,
        text: &str,
    ) -> Result<String, Failure> {
        let turn_id = uuid();
        let result = self
            .ok(
                "turn.start",
                json!({"requestId": uuid(), "threadId": thread_id, "turnId": turn_id,
                       "input": {"text": text}}),
            )
            .await?;
        let expected = json!({"accepted": true, "turnId": turn_id});
        ensure!(
            result == expected,
            "turn.start answered {}; expected {expected}",
            excerpt(&result)
        );
        Ok(turn_id)
    }

    /// The `runtime.event` envelopes of a turn until its terminal event, in order (they are
    /// taken from the unread frames).
    pub(crate) async fn turn_events(
        &mut self,
        thread_id: &str,
        turn_id: &str,
    ) -> Result<Vec<Value>, Failure> {
        let what = format!("the end of turn {turn_id}");
        let mut events = Vec::new();
        loop {
            let frame = self
                .wait_for(&what, |f| {
                    f.event_of(thread_id)
                        .is_some_and(|e| e["turnId"] == turn_id)
                })
                .await?;
            let envelope = frame.params().clone();
            let done = is_terminal(&envelope);
            events.push(envelope);
            if done {
                return Ok(events);
            }
            ensure!(
                events.len() < MAX_INBOX_FRAMES,
                "turn {turn_id} wrote more than {MAX_INBOX_FRAMES} events without ending"
            );
        }
    }
}

/// The durable envelopes among `events` (1.3+).
pub(crate) fn durable(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["durability"] == "durable")
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_cut_on_character_boundaries() {
        assert_eq!(cut("ééé", 2), "éé…");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(excerpt(&json!({"a": 1})), r#"{"a":1}"#);
    }
}

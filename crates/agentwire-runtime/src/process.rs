//! The agent process adapter: an [`Agent`] that runs each turn in a child process speaking the
//! agent protocol (docs/agent.md, `protocols/agent/agent.schema.json`) — `turn.start`, decisions,
//! form answers and `turn.cancel` on its standard input; run events, message text, tool output,
//! requests and `turn.end` on its standard output, one JSON object per line.
//!
//! What the agent writes is untrusted: its own messages are validated against the schema, and
//! every other line is a TaskLens run event, ingested through the runlog crate's
//! [`LiveCoercer`] (repairs are reported in the runtime log, never guessed; a line that cannot be
//! repaired is garbage). The agent never decides an approval: whatever it writes that claims an
//! approval outcome is ignored and reported, and a tool call whose approval was not granted is
//! recorded `user_rejected` (or `cancelled`) whatever the agent says. Whatever goes wrong with
//! the process fails only its turn, with a stage and a message; every buffer is bounded.

/// The agent protocol's messages, generated from `protocols/agent/agent.schema.json`.
#[path = "../../../protocols/agent/generated/rust/agent.rs"]
#[rustfmt::skip]
pub mod wire;

use std::collections::{HashMap, HashSet};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire_jsonrpc::{Frame, FrameReader};
use agentwire_runlog::{EventKind, IssueLevel, LineItem, LiveCoercer, RunEvent};
use agentwire_schema::{SchemaDocument, Validator, ValidatorCompiler};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::core::{Agent, LiveEvent, RuntimeError, TurnContext, TurnEnd};
use crate::event::{FailStage, InteractionKind, Operation, OutcomeKind, Resolution, ToolOutcome};

/// The agent protocol's schema document (canonical text).
pub const AGENT_SCHEMA_TEXT: &str = include_str!("../../../protocols/agent/agent.schema.json");

/// How long an agent may work on a turn by default, not counting the time its requests wait
/// for the host (10 minutes).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The longest line an agent may write by default (4 MiB, the runtime faces' frame limit).
pub const DEFAULT_MAX_LINE_BYTES: usize = agentwire_jsonrpc::DEFAULT_MAX_INBOUND_FRAME;
/// How many lines that are not agent protocol messages a turn tolerates by default.
pub const DEFAULT_MAX_GARBAGE_LINES: usize = 16;
/// How many run events one turn may write by default (the live coercer remembers each id).
pub const DEFAULT_MAX_RUN_EVENTS: usize = 100_000;
/// How much of the agent's standard error a failure message quotes by default (its end).
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 2 * 1024;
/// How long a cancelled agent has by default to end its turn before it is killed.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How long an agent has by default to exit after `turn.end` (or after closing its output)
/// before it is killed.
pub const DEFAULT_EXIT_GRACE: Duration = Duration::from_secs(5);
/// The agent name of operations and approvals until a `run:start` names the agent.
pub const DEFAULT_AGENT_NAME: &str = "agent";
/// The message id of `message.delta` and `message.completed` that name none.
pub const DEFAULT_MESSAGE_ID: &str = "reply";

/// The longest line of standard error read whole; a longer one is logged by its length.
pub const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// Tool calls one turn may have open (called, no result yet).
pub const MAX_OPEN_TOOL_CALLS: usize = 1_024;
/// Messages one turn may have open (deltas written, not completed).
pub const MAX_OPEN_MESSAGES: usize = 256;
/// Requests (approvals and forms) one turn may have waiting for the host at once.
pub const MAX_PENDING_REQUESTS: usize = 64;
/// Approval decisions remembered for the tool calls they name, per turn.
pub const MAX_DECIDED_CALLS: usize = 1_024;
/// Messages queued for the agent's standard input; more means the agent does not read it.
pub const MAX_QUEUED_INPUT: usize = 64;
/// How long a cancelled turn waits for its requests to record their cancellation.
const REQUEST_SETTLE: Duration = Duration::from_secs(2);
/// How long the runtime waits for the rest of the agent's standard error once it exited.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// The longest explanation of one garbage line kept for the failure message, in characters.
const MAX_WHY_CHARS: usize = 300;

/// Keys of an `approval.request` that would claim the decision; they are ignored and reported.
const APPROVAL_CLAIM_KEYS: &[&str] = &["decision", "approved", "status", "resolution", "outcome"];

/// Why an agent command or its settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCommandError {
    /// The command line has no program.
    #[error("the agent command is empty")]
    Empty,
    /// The command line cannot be split into words (an unterminated quote, a trailing `\`).
    #[error("the agent command {command:?} cannot be split into words: {reason}")]
    Syntax {
        /// The command line.
        command: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting is out of its range.
    #[error("the agent setting {setting} {reason}")]
    Setting {
        /// The setting's name.
        setting: &'static str,
        /// What it must be.
        reason: &'static str,
    },
}

impl AgentCommandError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            AgentCommandError::Empty => "runtime.agent-command-empty",
            AgentCommandError::Syntax { .. } => "runtime.agent-command-syntax",
            AgentCommandError::Setting { .. } => "runtime.agent-setting",
        }
    }
}

/// How to run an agent process and the limits of each turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProcessConfig {
    /// The program and its arguments (no shell is involved).
    pub argv: Vec<String>,
    /// The agent name of operations and approvals until a `run:start` names the agent.
    pub name: String,
    /// How long the agent may work on a turn, not counting the time its requests wait for the
    /// host (they have their own deadline); then it is killed and the turn fails.
    pub turn_timeout: Duration,
    /// The longest line the agent may write; a longer one fails the turn.
    pub max_line_bytes: usize,
    /// How many lines that are not agent protocol messages a turn tolerates; one more fails it.
    pub max_garbage_lines: usize,
    /// How many run events one turn may write; one more fails it.
    pub max_run_events: usize,
    /// How much of the end of the agent's standard error a failure message quotes.
    pub stderr_tail_bytes: usize,
    /// How long a cancelled agent has to end its turn before it is killed.
    pub cancel_grace: Duration,
    /// How long the agent has to exit after `turn.end` (or after closing its output).
    pub exit_grace: Duration,
}

/// The stream id of an agent's message `message_id` in turn `turn_id`: a UUID (as the
/// protocols' `streamId` is) derived from both, the same for every line of that message.
pub fn message_stream_id(turn_id: &str, message_id: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::new()
        .chain_update(turn_id.as_bytes())
        .chain_update([0])
        .chain_update(message_id.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).to_string()
}

impl Default for AgentProcessConfig {
    fn default() -> Self {
        AgentProcessConfig {
            argv: Vec::new(),
            name: DEFAULT_AGENT_NAME.to_owned(),
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_garbage_lines: DEFAULT_MAX_GARBAGE_LINES,
            max_run_events: DEFAULT_MAX_RUN_EVENTS,
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            exit_grace: DEFAULT_EXIT_GRACE,
        }
    }
}

impl AgentProcessConfig {
    /// The default settings for a command line `'CMD ARGS'` (the `--agent-cmd` flag), split
    /// into words the way a POSIX shell splits them (quotes and backslashes), without running
    /// a shell: no variables, globs, pipes or redirections.
    pub fn from_command_line(line: &str) -> Result<AgentProcessConfig, AgentCommandError> {
        let argv = shell_words::split(line).map_err(|e| AgentCommandError::Syntax {
            command: line.to_owned(),
            reason: e.to_string(),
        })?;
        let config = AgentProcessConfig {
            argv,
            ..AgentProcessConfig::default()
        };
        config.check()?;
        Ok(config)
    }

    /// Checks the command and the settings.
    pub fn check(&self) -> Result<(), AgentCommandError> {
        if self.argv.first().is_none_or(String::is_empty) {
            return Err(AgentCommandError::Empty);
        }
        let positive = |setting, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(AgentCommandError::Setting {
                    setting,
                    reason: "must be more than zero",
                })
            }
        };
        positive("name", !self.name.is_empty())?;
        positive("turn_timeout", !self.turn_timeout.is_zero())?;
        positive("max_line_bytes", self.max_line_bytes > 0)?;
        positive("max_run_events", self.max_run_events > 0)
    }
}

/// The agent protocol validators of what an agent writes, compiled once.
struct Validators {
    by_type: Vec<(&'static str, Validator)>,
}

/// The agent's own messages, by wire type, and their definitions.
const AGENT_MESSAGE_TYPES: &[(&str, &str)] = &[
    ("message.delta", "MessageDelta"),
    ("message.completed", "MessageCompleted"),
    ("tool.output", "ToolOutput"),
    ("approval.request", "ApprovalRequest"),
    ("input.request", "InputRequest"),
    ("turn.end", "TurnEnd"),
];

/// The runtime's messages: an agent that writes one is ignored and reported.
const RUNTIME_MESSAGE_TYPES: &[&str] = &[
    "turn.start",
    "approval.decision",
    "input.result",
    "turn.cancel",
];

fn validators() -> Result<&'static Validators, String> {
    static VALIDATORS: OnceLock<Result<Validators, String>> = OnceLock::new();
    VALIDATORS
        .get_or_init(|| {
            let document = SchemaDocument::from_slice(AGENT_SCHEMA_TEXT.as_bytes())
                .map_err(|e| format!("the agent protocol schema does not load: {e}"))?;
            let compiler = ValidatorCompiler::new(&document)
                .map_err(|e| format!("the agent protocol schema does not compile: {e}"))?;
            let by_type = AGENT_MESSAGE_TYPES
                .iter()
                .map(|(wire, definition)| {
                    compiler
                        .definition(definition)
                        .map(|v| (*wire, v))
                        .map_err(|e| format!("the agent protocol definition {definition}: {e}"))
                })
                .collect::<Result<_, _>>()?;
            Ok(Validators { by_type })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// An [`Agent`] that runs each turn in a new process of the configured command.
#[derive(Debug, Clone)]
pub struct AgentProcess {
    config: Arc<AgentProcessConfig>,
}

impl AgentProcess {
    /// An agent running `config.argv` for each turn.
    pub fn new(config: AgentProcessConfig) -> Result<AgentProcess, AgentCommandError> {
        config.check()?;
        Ok(AgentProcess {
            config: Arc::new(config),
        })
    }

    /// The settings.
    pub fn config(&self) -> &AgentProcessConfig {
        &self.config
    }
}

#[async_trait]
impl Agent for AgentProcess {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        let span = tracing::info_span!("agent_process", thread = %turn.thread_id(), turn = %turn.turn_id());
        let end = run(&self.config, &turn).instrument(span.clone()).await;
        if let TurnEnd::Failed { stage, message } = &end {
            span.in_scope(|| {
                tracing::warn!(stage = stage.as_str(), "the agent's turn failed: {message}");
            });
        }
        end
    }
}

fn failed(stage: FailStage, message: String) -> TurnEnd {
    TurnEnd::Failed { stage, message }
}

async fn run(config: &AgentProcessConfig, turn: &TurnContext) -> TurnEnd {
    let validators = match validators() {
        Ok(v) => v,
        Err(message) => return failed(FailStage::Bootstrap, message),
    };
    let program = config.argv.first().map_or("", String::as_str);
    let mut child = match Command::new(program)
        .args(config.argv.iter().skip(1))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            return failed(
                FailStage::Bootstrap,
                format!("cannot start the agent command `{program}`: {e}"),
            );
        }
    };
    tracing::debug!(pid = child.id(), "agent process started");
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.start_kill();
        return failed(
            FailStage::Bootstrap,
            "the agent process has no standard streams".into(),
        );
    };
    let tail = Arc::new(Mutex::new(StderrTail::new(config.stderr_tail_bytes)));
    let stderr_task = tokio::spawn(read_stderr(stderr, Arc::clone(&tail)).in_current_span());
    let (input, input_rx) = mpsc::channel(MAX_QUEUED_INPUT);
    tokio::spawn(write_stdin(stdin, input_rx).in_current_span());

    let mut session = Session::new(config, turn, validators, input);
    let start = turn_start(turn);
    let ending = match session.send(&start) {
        Ok(()) => {
            session
                .run(FrameReader::new(stdout, config.max_line_bytes))
                .await
        }
        Err(message) => Ending::Failed(message),
    };
    session.finish(ending, child, stderr_task, tail).await
}

fn turn_start(turn: &TurnContext) -> Value {
    let input = turn.input();
    let message = wire::TurnStart {
        protocol_version: wire::PROTOCOL_VERSION.to_owned(),
        thread_id: turn.thread_id().to_owned(),
        turn_id: turn.turn_id().to_owned(),
        input: wire::TurnInput {
            text: input.text.clone(),
            attachments: input
                .attachments
                .iter()
                .map(|a| wire::AttachmentDescriptor {
                    attachment_id: a.attachment_id.clone(),
                    media_type: a.media_type.clone(),
                    bytes: i64::try_from(a.bytes).unwrap_or(i64::MAX),
                    display_name: a.display_name.clone(),
                    extra: Map::new(),
                })
                .collect(),
            extra: Map::new(),
        },
        extra: Map::new(),
    };
    serde_json::to_value(message).unwrap_or(Value::Null)
}

/// Writes the queued lines to the agent's standard input; closing the queue closes it.
async fn write_stdin(mut stdin: ChildStdin, mut lines: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = lines.recv().await {
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
        .await;
        if let Err(e) = written {
            // The agent closed its input or exited: what it missed is its own loss.
            tracing::debug!("cannot write to the agent's standard input: {e}");
            return;
        }
    }
}

/// The end of the agent's standard error, bounded.
#[derive(Debug)]
struct StderrTail {
    text: String,
    limit: usize,
}

impl StderrTail {
    fn new(limit: usize) -> StderrTail {
        StderrTail {
            text: String::new(),
            limit,
        }
    }

    fn push(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        if self.text.len() > self.limit {
            let mut cut = self.text.len() - self.limit;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
        }
    }
}

/// Logs every line of the agent's standard error and keeps its end.
async fn read_stderr(stderr: impl AsyncRead + Unpin, tail: Arc<Mutex<StderrTail>>) {
    let mut reader = FrameReader::new(stderr, MAX_STDERR_LINE_BYTES);
    loop {
        let line = match reader.next_frame().await {
            Ok(Some(Frame::Line(bytes))) => String::from_utf8_lossy(bytes).into_owned(),
            Ok(Some(Frame::Oversize { length })) => {
                format!("[a line of {length} bytes, not shown]")
            }
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("cannot read the agent's standard error: {e}");
                return;
            }
        };
        tracing::info!("agent stderr: {line}");
        tail.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(&line);
    }
}

/// How the reading of a turn stopped.
#[derive(Debug)]
enum Ending {
    /// The agent wrote `turn.end`.
    End(TurnEnd),
    /// Its standard output ended before `turn.end`.
    Eof,
    /// It worked longer than the turn timeout.
    Timeout,
    /// It did not stop within the grace period after `turn.cancel`.
    CancelIgnored,
    /// It broke a rule of the protocol or a limit (the message says which).
    Failed(String),
}

/// A tool call the agent began and has not reported a result for.
#[derive(Debug)]
struct OpenCall {
    tool_name: String,
    agent_name: String,
    input: Value,
}

/// A request waiting for the host.
#[derive(Debug)]
enum Pending {
    Approval { call_id: Option<String> },
    Input,
}

type Asked = (String, Result<Resolution, RuntimeError>);

/// The state of one turn of one agent process.
struct Session<'a> {
    config: &'a AgentProcessConfig,
    turn: &'a TurnContext,
    validators: &'static Validators,
    input: mpsc::Sender<Vec<u8>>,
    coercer: LiveCoercer,
    agent_name: String,
    calls: HashMap<String, OpenCall>,
    /// How the approvals that named a tool call ended, by call id.
    decided: HashMap<String, Resolution>,
    messages: HashSet<String>,
    pending: HashMap<String, Pending>,
    asks: JoinSet<Asked>,
    lines: usize,
    run_events: usize,
    garbage: usize,
    /// The work budget left, and since when it is being spent (`None` while requests wait).
    budget: Duration,
    working_since: Option<Instant>,
    cancel_deadline: Option<Instant>,
}

impl<'a> Session<'a> {
    fn new(
        config: &'a AgentProcessConfig,
        turn: &'a TurnContext,
        validators: &'static Validators,
        input: mpsc::Sender<Vec<u8>>,
    ) -> Session<'a> {
        let now = crate::core::SystemClock;
        let started_ms = crate::core::Clock::now_ms(&now);
        Session {
            config,
            turn,
            validators,
            input,
            coercer: LiveCoercer::new(turn.turn_id(), started_ms),
            agent_name: config.name.clone(),
            calls: HashMap::new(),
            decided: HashMap::new(),
            messages: HashSet::new(),
            pending: HashMap::new(),
            asks: JoinSet::new(),
            lines: 0,
            run_events: 0,
            garbage: 0,
            budget: config.turn_timeout,
            working_since: Some(Instant::now()),
            cancel_deadline: None,
        }
    }

    /// Queues one message for the agent's standard input.
    fn send(&self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| format!("cannot encode a message for the agent: {e}"))?;
        line.push(b'\n');
        match self.input.try_send(line) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(format!(
                "the agent does not read its standard input ({MAX_QUEUED_INPUT} messages wait)"
            )),
            // The writer stopped: the agent closed its input or exited; its output says more.
            Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
        }
    }

    /// When the work budget runs out, if it is being spent.
    fn deadline(&self) -> Option<Instant> {
        // A budget past the clock's range never runs out.
        self.working_since
            .and_then(|since| since.checked_add(self.budget))
    }

    /// Stops or restarts the work clock when requests start or stop waiting for the host.
    fn update_clock(&mut self) {
        let now = Instant::now();
        match (self.pending.is_empty(), self.working_since) {
            (false, Some(since)) => {
                self.budget = self.budget.saturating_sub(now - since);
                self.working_since = None;
            }
            (true, None) => self.working_since = Some(now),
            _ => {}
        }
    }

    async fn run<R: AsyncRead + Unpin>(&mut self, mut reader: FrameReader<R>) -> Ending {
        let turn = self.turn;
        loop {
            let deadline = self.deadline();
            let cancel_deadline = self.cancel_deadline;
            tokio::select! {
                frame = reader.next_frame() => {
                    let step = match frame {
                        Ok(Some(Frame::Line(bytes))) => self.line(bytes).await,
                        Ok(Some(Frame::Oversize { length })) => {
                            self.lines += 1;
                            Err(Ending::Failed(format!(
                                "the agent wrote a line of {length} bytes (line {}), over the {}-byte limit",
                                self.lines,
                                self.config.max_line_bytes
                            )))
                        }
                        Ok(None) => Err(Ending::Eof),
                        Err(e) => Err(Ending::Failed(format!("cannot read the agent's output: {e}"))),
                    };
                    if let Err(ending) = step {
                        return ending;
                    }
                }
                Some(joined) = self.asks.join_next(), if !self.asks.is_empty() => {
                    if let Err(message) = self.answered(joined) {
                        return Ending::Failed(message);
                    }
                }
                () = turn.cancelled(), if cancel_deadline.is_none() => {
                    tracing::info!("the turn was cancelled; telling the agent");
                    let now = Instant::now();
                    self.cancel_deadline = Some(now.checked_add(self.config.cancel_grace).unwrap_or(now));
                    let cancel = wire::TurnCancel {
                        reason: Some("the turn was cancelled".into()),
                        extra: Map::new(),
                    };
                    if let Err(message) = self.send(&json!(cancel)) {
                        return Ending::Failed(message);
                    }
                }
                () = sleep_until(cancel_deadline) => return Ending::CancelIgnored,
                () = sleep_until(deadline) => return Ending::Timeout,
            }
        }
    }

    /// One line of the agent's output; `Err` ends the reading.
    async fn line(&mut self, bytes: &[u8]) -> Result<(), Ending> {
        self.lines += 1;
        let line = self.lines;
        let value = match agentwire_schema::parse_json(bytes) {
            Ok(value) => value,
            Err(e) => return self.garbage(line, format!("not JSON: {e}")),
        };
        let kind = value.get("type").and_then(Value::as_str).map(str::to_owned);
        if let Some(kind) = kind.as_deref() {
            if let Some((_, validator)) = self.validators.by_type.iter().find(|(t, _)| *t == kind) {
                let issues = validator.validate(&value);
                if !issues.is_empty() {
                    let why = issues
                        .iter()
                        .take(3)
                        .map(|i| {
                            let at = if i.instance_pointer.is_empty() {
                                "(root)"
                            } else {
                                i.instance_pointer.as_str()
                            };
                            format!("{at}: {}", i.message)
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    return self.garbage(line, format!("an invalid {kind}: {why}"));
                }
                return self.own(line, kind, value).await;
            }
            if RUNTIME_MESSAGE_TYPES.contains(&kind) {
                tracing::warn!(
                    line,
                    "ignored: {kind} is the runtime's message to the agent; an agent never \
                     decides an approval or answers a form"
                );
                return Ok(());
            }
        }
        self.run_event(line, value).await
    }

    fn garbage(&mut self, line: usize, why: String) -> Result<(), Ending> {
        let why: String = if why.chars().count() > MAX_WHY_CHARS {
            why.chars().take(MAX_WHY_CHARS).chain("…".chars()).collect()
        } else {
            why
        };
        self.garbage += 1;
        tracing::warn!(
            line,
            "the agent wrote a line that is not a protocol message: {why}"
        );
        if self.garbage > self.config.max_garbage_lines {
            return Err(Ending::Failed(format!(
                "the agent wrote {} lines that are not agent protocol messages (more than the {} \
                 allowed); the last, line {line}: {why}",
                self.garbage, self.config.max_garbage_lines
            )));
        }
        Ok(())
    }

    fn record_failed(e: &RuntimeError) -> Ending {
        Ending::Failed(format!("could not record the agent's work: {e}"))
    }

    fn scoped(&self, id: &str) -> String {
        format!("{}:{id}", self.turn.turn_id())
    }

    fn stream_of(&self, id: &str) -> String {
        message_stream_id(self.turn.turn_id(), id)
    }

    /// One of the agent's own messages, valid against its definition.
    async fn own(&mut self, line: usize, kind: &str, value: Value) -> Result<(), Ending> {
        match kind {
            "message.delta" => {
                let m: wire::MessageDelta = decode(value)?;
                let id = m
                    .message_id
                    .unwrap_or_else(|| DEFAULT_MESSAGE_ID.to_owned());
                let stream_id = self.stream_of(&id);
                self.start_message(id, &stream_id)?;
                self.turn.live(LiveEvent::MessageDelta {
                    stream_id,
                    delta: m.delta,
                });
            }
            "message.completed" => {
                let m: wire::MessageCompleted = decode(value)?;
                let id = m
                    .message_id
                    .unwrap_or_else(|| DEFAULT_MESSAGE_ID.to_owned());
                let stream_id = self.stream_of(&id);
                if !self.messages.remove(&id) {
                    self.turn.live(LiveEvent::MessageStarted {
                        stream_id: stream_id.clone(),
                    });
                }
                self.turn
                    .message(&stream_id, m.text)
                    .await
                    .map_err(|e| Self::record_failed(&e))?;
            }
            "tool.output" => {
                let m: wire::ToolOutput = decode(value)?;
                match self.calls.get(&m.call_id) {
                    Some(call) => self.turn.live(LiveEvent::ToolOutput {
                        tool_call_id: self.scoped(&m.call_id),
                        agent_name: call.agent_name.clone(),
                        tool_name: call.tool_name.clone(),
                        stream: m
                            .stream
                            .map_or(wire::ToolOutputStream::Stdout, |s| s)
                            .as_str()
                            .to_owned(),
                        delta: m.delta,
                    }),
                    None => tracing::warn!(
                        line,
                        "ignored: tool.output for call {}, which is not open",
                        m.call_id
                    ),
                }
            }
            "approval.request" => {
                let m: wire::ApprovalRequest = decode(value)?;
                let claims: Vec<&str> = APPROVAL_CLAIM_KEYS
                    .iter()
                    .copied()
                    .filter(|k| m.extra.contains_key(*k))
                    .collect();
                if !claims.is_empty() {
                    tracing::warn!(
                        line,
                        "ignored: approval.request {} claims its outcome ({}); the host decides",
                        m.request_id,
                        claims.join(", ")
                    );
                }
                let ask = InteractionKind::Approval {
                    approval_id: uuid::Uuid::new_v4().to_string(),
                    agent_name: self.agent_name.clone(),
                    tool_name: m.tool_name,
                    preview: Value::Object(m.preview),
                    reason: m.reason,
                };
                self.ask(
                    line,
                    m.request_id,
                    ask,
                    Pending::Approval { call_id: m.call_id },
                )?;
            }
            "input.request" => {
                let m: wire::InputRequest = decode(value)?;
                let ask = InteractionKind::UserInput {
                    title: m.title,
                    description: m.description,
                    controls: serde_json::to_value(&m.controls).unwrap_or(Value::Null),
                };
                self.ask(line, m.request_id, ask, Pending::Input)?;
            }
            "turn.end" => {
                let m: wire::TurnEnd = decode(value)?;
                let end = match m.status {
                    wire::TurnEndStatus::Completed => TurnEnd::Completed,
                    wire::TurnEndStatus::Failed => TurnEnd::Failed {
                        stage: match m.stage {
                            Some(wire::FailStage::Bootstrap) => FailStage::Bootstrap,
                            Some(wire::FailStage::Plan) => FailStage::Plan,
                            Some(wire::FailStage::Execute) | None => FailStage::Execute,
                        },
                        message: m
                            .message
                            .unwrap_or_else(|| "the agent reported a failure".into()),
                    },
                };
                return Err(Ending::End(end));
            }
            _ => {}
        }
        Ok(())
    }

    fn start_message(&mut self, id: String, stream_id: &str) -> Result<(), Ending> {
        if self.messages.contains(&id) {
            return Ok(());
        }
        if self.messages.len() >= MAX_OPEN_MESSAGES {
            return Err(Ending::Failed(format!(
                "the agent has more than {MAX_OPEN_MESSAGES} messages open"
            )));
        }
        self.messages.insert(id);
        self.turn.live(LiveEvent::MessageStarted {
            stream_id: stream_id.to_owned(),
        });
        Ok(())
    }

    /// Asks the host in the background; the answer is written back when it comes.
    fn ask(
        &mut self,
        line: usize,
        request_id: String,
        ask: InteractionKind,
        pending: Pending,
    ) -> Result<(), Ending> {
        if self.pending.contains_key(&request_id) {
            tracing::warn!(
                line,
                "ignored: request {request_id} is already waiting for the host"
            );
            return Ok(());
        }
        if self.pending.len() >= MAX_PENDING_REQUESTS {
            return Err(Ending::Failed(format!(
                "the agent has more than {MAX_PENDING_REQUESTS} requests waiting for the host"
            )));
        }
        self.pending.insert(request_id.clone(), pending);
        self.update_clock();
        let turn = self.turn.clone();
        self.asks.spawn(async move {
            let resolution = turn.ask(ask).await;
            (request_id, resolution)
        });
        Ok(())
    }

    /// A request's answer came: written back to the agent.
    fn answered(&mut self, joined: Result<Asked, tokio::task::JoinError>) -> Result<(), String> {
        let (request_id, resolution) = joined.map_err(|e| format!("a request failed: {e}"))?;
        let resolution =
            resolution.map_err(|e| format!("could not record the agent's request: {e}"))?;
        let pending = self.pending.remove(&request_id);
        self.update_clock();
        let message = match pending {
            Some(Pending::Approval { call_id }) => {
                if let Some(call_id) = call_id {
                    if self.decided.len() >= MAX_DECIDED_CALLS {
                        return Err(format!(
                            "the agent named more than {MAX_DECIDED_CALLS} tool calls in approvals"
                        ));
                    }
                    self.decided.insert(call_id, resolution.clone());
                }
                approval_decision(request_id, &resolution)
            }
            Some(Pending::Input) => input_result(request_id, &resolution),
            None => return Ok(()),
        };
        self.send(&message)
    }

    /// A line that is not one of the agent's own messages: a run event, coerced leniently.
    async fn run_event(&mut self, line: usize, value: Value) -> Result<(), Ending> {
        self.run_events += 1;
        if self.run_events > self.config.max_run_events {
            return Err(Ending::Failed(format!(
                "the agent wrote more than {} run events in one turn",
                self.config.max_run_events
            )));
        }
        let (item, issues) = self.coercer.push_value(value);
        for issue in &issues {
            match issue.level {
                IssueLevel::Fixed | IssueLevel::Info => tracing::info!(
                    line,
                    code = issue.code,
                    "run event {}: {}",
                    issue.level.as_str(),
                    issue.message
                ),
                IssueLevel::Degraded | IssueLevel::Dropped => tracing::warn!(
                    line,
                    code = issue.code,
                    "run event {}: {}",
                    issue.level.as_str(),
                    issue.message
                ),
            }
        }
        let event = match item {
            LineItem::Event(event) | LineItem::Synthesized(event) => event,
            LineItem::Degraded { .. } | LineItem::Dropped { .. } => {
                let why = issues
                    .iter()
                    .filter(|i| matches!(i.level, IssueLevel::Degraded | IssueLevel::Dropped))
                    .map(|i| i.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ");
                return self.garbage(line, format!("a run event that cannot be repaired: {why}"));
            }
        };
        match event.kind() {
            Some(EventKind::RunStart) => {
                if let Some(agent) = event.str_field("agent").filter(|a| !a.is_empty()) {
                    self.agent_name = agent.to_owned();
                }
            }
            Some(EventKind::ToolCall) => self.tool_call(line, &event)?,
            Some(EventKind::ToolResult) => self.tool_result(line, &event).await?,
            Some(EventKind::ApprovalRequest | EventKind::ApprovalDecision) => tracing::warn!(
                line,
                "ignored: {} is the runtime's to record; an agent asks with approval.request \
                 and never decides an approval",
                event.event_type
            ),
            _ => tracing::debug!(line, "run event {}", event.event_type),
        }
        Ok(())
    }

    fn tool_call(&mut self, line: usize, event: &RunEvent) -> Result<(), Ending> {
        let call_id = event.str_field("callId").unwrap_or(&event.id).to_owned();
        if self.calls.contains_key(&call_id) {
            tracing::warn!(
                line,
                "ignored: a second tool:call for the open call {call_id}"
            );
            return Ok(());
        }
        if self.calls.len() >= MAX_OPEN_TOOL_CALLS {
            return Err(Ending::Failed(format!(
                "the agent has more than {MAX_OPEN_TOOL_CALLS} tool calls open"
            )));
        }
        let call = OpenCall {
            tool_name: event.str_field("name").unwrap_or_default().to_owned(),
            agent_name: self.agent_name.clone(),
            input: event.payload.get("args").cloned().unwrap_or(Value::Null),
        };
        self.turn.live(LiveEvent::ToolStarted {
            tool_call_id: self.scoped(&call_id),
            agent_name: call.agent_name.clone(),
            tool_name: call.tool_name.clone(),
            input: call.input.clone(),
        });
        self.calls.insert(call_id, call);
        Ok(())
    }

    async fn tool_result(&mut self, line: usize, event: &RunEvent) -> Result<(), Ending> {
        let call_id = event.str_field("callId").unwrap_or_default().to_owned();
        let Some(call) = self.calls.remove(&call_id) else {
            tracing::warn!(
                line,
                "ignored: tool:result for call {call_id}, which is not open"
            );
            return Ok(());
        };
        let approval = self.decided.remove(&call_id);
        let outcome = tool_outcome(line, &call, approval.as_ref(), &event.payload);
        let display = match event.payload.get("display") {
            Some(display) => display.clone(),
            None => json!({"text": default_display(&call.tool_name, &outcome)}),
        };
        let app_output = match event.payload.get("appOutput") {
            None => None,
            Some(Value::Object(map)) => Some(Value::Object(map.clone())),
            Some(_) => {
                tracing::warn!(
                    line,
                    "ignored: appOutput of call {call_id} is not an object"
                );
                None
            }
        };
        self.turn
            .operation(Operation {
                id: uuid::Uuid::new_v4().to_string(),
                tool_call_id: self.scoped(&call_id),
                agent_name: call.agent_name,
                tool_name: call.tool_name,
                input: call.input,
                outcome,
                display,
                app_output,
            })
            .await
            .map_err(|e| Self::record_failed(&e))
    }

    /// Ends the process and says how the turn ended.
    async fn finish(
        mut self,
        ending: Ending,
        mut child: Child,
        stderr_task: tokio::task::JoinHandle<()>,
        tail: Arc<Mutex<StderrTail>>,
    ) -> TurnEnd {
        self.settle_requests().await;
        let wrote_anything = self.lines > 0;
        let config = self.config;
        let what = match ending {
            Ending::End(end) => {
                self.close_input();
                if exit_within(&mut child, config.exit_grace).await.is_none() {
                    tracing::warn!(
                        "the agent did not exit within {:?} of turn.end; killed",
                        config.exit_grace
                    );
                    kill(&mut child).await;
                }
                self.record_open_calls().await;
                drain_stderr(stderr_task).await;
                return end;
            }
            Ending::Eof => {
                self.close_input();
                if let Some(status) = exit_within(&mut child, config.exit_grace).await {
                    let when = if wrote_anything {
                        "before turn.end"
                    } else {
                        "before writing anything"
                    };
                    format!("the agent {} {when}", describe(status))
                } else {
                    kill(&mut child).await;
                    format!(
                        "the agent closed its standard output before turn.end and did not exit \
                         within {:?}; it was killed",
                        config.exit_grace
                    )
                }
            }
            Ending::Timeout => {
                kill(&mut child).await;
                format!(
                    "the agent did not end the turn within {:?}; it was killed",
                    config.turn_timeout
                )
            }
            Ending::CancelIgnored => {
                kill(&mut child).await;
                format!(
                    "the agent did not end the cancelled turn within {:?}; it was killed",
                    config.cancel_grace
                )
            }
            Ending::Failed(message) => {
                kill(&mut child).await;
                message
            }
        };
        self.record_open_calls().await;
        drain_stderr(stderr_task).await;
        let tail = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .text
            .trim()
            .to_owned();
        let message = if tail.is_empty() {
            what
        } else {
            format!("{what}; its standard error ends with: {tail}")
        };
        // An agent that never wrote a line never started its work.
        let stage = if wrote_anything {
            FailStage::Execute
        } else {
            FailStage::Bootstrap
        };
        failed(stage, message)
    }

    /// Lets go of the requests still waiting without ever dropping one: a request may be in
    /// the middle of recording its interaction, which must run to its end. Those the turn's
    /// cancellation resolves are awaited (briefly); those that wait for the host are left
    /// running, and end when the core cancels their interactions at the end of the turn.
    async fn settle_requests(&mut self) {
        if self.turn.is_cancelled() {
            let asks = &mut self.asks;
            let settled = async { while asks.join_next().await.is_some() {} };
            if tokio::time::timeout(REQUEST_SETTLE, settled).await.is_err() {
                tracing::debug!("requests still recording their cancellation are left running");
            }
        }
        self.asks.detach_all();
    }

    fn close_input(&mut self) {
        // A closed channel ends the writer task, which closes the agent's standard input.
        let (closed, _) = mpsc::channel(1);
        self.input = closed;
    }

    /// Records the calls the agent began and never reported, so no host shows them running.
    async fn record_open_calls(&mut self) {
        let cancelled = self.turn.is_cancelled();
        let mut open: Vec<(String, OpenCall)> = self.calls.drain().collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        for (call_id, call) in open {
            let reason = "the turn ended before the agent reported the call's result".to_owned();
            let outcome = ToolOutcome {
                kind: if cancelled {
                    OutcomeKind::Cancelled
                } else {
                    OutcomeKind::ToolFailed
                },
                reason: Some(reason.clone()),
            };
            let recorded = self
                .turn
                .operation(Operation {
                    id: uuid::Uuid::new_v4().to_string(),
                    tool_call_id: self.scoped(&call_id),
                    agent_name: call.agent_name,
                    display: json!({"text": format!("{}: {reason}", call.tool_name)}),
                    tool_name: call.tool_name,
                    input: call.input,
                    outcome,
                    app_output: None,
                })
                .await;
            if let Err(e) = recorded {
                tracing::warn!("could not record the open call {call_id}: {e}");
            }
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Ending> {
    // The value passed its definition's validator, so decoding fails only on a bug.
    serde_json::from_value(value)
        .map_err(|e| Ending::Failed(format!("cannot decode a valid agent message: {e}")))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// How the process ended, if it does within `grace`.
async fn exit_within(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::debug!("cannot wait for the agent process: {e}");
            None
        }
        Err(_) => None,
    }
}

async fn kill(child: &mut Child) {
    if let Err(e) = child.kill().await {
        tracing::debug!("cannot kill the agent process: {e}");
    }
}

/// Waits a little for the rest of standard error (a process the agent started may still hold
/// it open), then stops reading.
async fn drain_stderr(task: tokio::task::JoinHandle<()>) {
    let abort = task.abort_handle();
    if tokio::time::timeout(STDERR_DRAIN, task).await.is_err() {
        abort.abort();
    }
}

/// How a process ended, in words.
fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    format!("ended ({status})")
}

/// The decision written back for an approval: anything but the host's approval is a refusal.
fn approval_decision(request_id: String, resolution: &Resolution) -> Value {
    use wire::ApprovalDecisionDecision as D;
    let (decision, reason) = match resolution {
        Resolution::Approved => (D::Approve, None),
        Resolution::Rejected { reason } => (D::Reject, reason.clone()),
        Resolution::Expired => (D::Expired, None),
        Resolution::Cancelled { reason } => (D::Cancelled, Some(reason.clone())),
        Resolution::Submitted { .. } => (
            D::Reject,
            Some("the answer was not an approval decision".into()),
        ),
    };
    json!(wire::ApprovalDecision {
        request_id,
        decision,
        reason,
        extra: Map::new(),
    })
}

/// The answer written back for a form.
fn input_result(request_id: String, resolution: &Resolution) -> Value {
    use wire::InputResultStatus as S;
    let cancelled = |reason: &str| (S::Cancelled, None, Some(reason.to_owned()));
    let (status, values, reason) = match resolution {
        Resolution::Submitted { values } => {
            match serde_json::from_value::<Vec<wire::InputValue>>(values.clone()) {
                Ok(values) => (S::Submitted, Some(values), None),
                Err(e) => {
                    tracing::warn!("a form answer cannot be passed on: {e}");
                    cancelled("the answer could not be passed on")
                }
            }
        }
        Resolution::Cancelled { reason } => cancelled(reason),
        Resolution::Expired => (S::Expired, None, None),
        Resolution::Approved | Resolution::Rejected { .. } => {
            cancelled("the answer was not a form submission")
        }
    };
    json!(wire::InputResult {
        request_id,
        status,
        values,
        reason,
        extra: Map::new(),
    })
}

/// The text of a TaskLens error (`"text"` or `{message}`).
fn error_text(error: Option<&Value>) -> Option<String> {
    match error? {
        Value::String(text) => Some(text.clone()),
        Value::Object(map) => map
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

/// How a tool call ended: the runtime's approval decision first, then the agent's result.
fn tool_outcome(
    line: usize,
    call: &OpenCall,
    approval: Option<&Resolution>,
    result: &Map<String, Value>,
) -> ToolOutcome {
    let ok = result.get("ok").and_then(Value::as_bool).unwrap_or(false);
    let claimed = result.get("outcome").and_then(Value::as_str);
    let refused = |kind, reason: String| {
        if ok {
            tracing::warn!(
                line,
                "ignored: the agent reports {} ran, but its approval was not granted",
                call.tool_name
            );
        }
        ToolOutcome {
            kind,
            reason: Some(reason),
        }
    };
    match approval {
        Some(Resolution::Rejected { reason }) => {
            return refused(
                OutcomeKind::UserRejected,
                reason
                    .clone()
                    .unwrap_or_else(|| "the user rejected it".into()),
            );
        }
        Some(Resolution::Expired) => {
            return refused(OutcomeKind::UserRejected, "the approval expired".into());
        }
        Some(Resolution::Cancelled { reason }) => {
            return refused(OutcomeKind::Cancelled, reason.clone());
        }
        Some(Resolution::Submitted { .. }) => {
            return refused(
                OutcomeKind::PolicyDenied,
                "the approval was not granted".into(),
            );
        }
        Some(Resolution::Approved) | None => {}
    }
    if ok {
        if let Some(claim) = claimed.filter(|c| *c != "success") {
            tracing::warn!(line, "ignored: outcome {claim:?} of a result that is ok");
        }
        return ToolOutcome {
            kind: OutcomeKind::Success,
            reason: None,
        };
    }
    let kind = match claimed {
        None | Some("tool_failed") => OutcomeKind::ToolFailed,
        Some("invalid_input") => OutcomeKind::InvalidInput,
        Some("policy_denied") => OutcomeKind::PolicyDenied,
        Some("cancelled") => OutcomeKind::Cancelled,
        Some("user_rejected") => {
            tracing::warn!(
                line,
                "ignored: the agent claims the user rejected {}; only the runtime says whether \
                 the user approved",
                call.tool_name
            );
            OutcomeKind::ToolFailed
        }
        Some(other) => {
            tracing::warn!(
                line,
                "ignored: outcome {other:?} of a failed result is not an agent's outcome"
            );
            OutcomeKind::ToolFailed
        }
    };
    ToolOutcome {
        kind,
        reason: error_text(result.get("error")),
    }
}

fn default_display(tool_name: &str, outcome: &ToolOutcome) -> String {
    let reason = outcome.reason.as_deref();
    match (outcome.kind, reason) {
        (OutcomeKind::Success, _) => format!("{tool_name} ran"),
        (
            OutcomeKind::UserRejected | OutcomeKind::PolicyDenied | OutcomeKind::Cancelled,
            Some(r),
        ) => {
            format!("{tool_name} did not run: {r}")
        }
        (OutcomeKind::UserRejected | OutcomeKind::PolicyDenied | OutcomeKind::Cancelled, None) => {
            format!("{tool_name} did not run")
        }
        (OutcomeKind::ToolFailed | OutcomeKind::InvalidInput, Some(r)) => {
            format!("{tool_name} failed: {r}")
        }
        (OutcomeKind::ToolFailed | OutcomeKind::InvalidInput, None) => {
            format!("{tool_name} failed")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_command_line_splits_like_a_shell_without_one() {
        let config =
            AgentProcessConfig::from_command_line(r#"python3 "my agent.py" --name 'a b' x\ y"#)
                .unwrap();
        assert_eq!(
            config.argv,
            ["python3", "my agent.py", "--name", "a b", "x y"]
        );
        assert_eq!(config.turn_timeout, DEFAULT_TURN_TIMEOUT);
        // Shell syntax is not interpreted: it is an argument like any other.
        let config = AgentProcessConfig::from_command_line("agent $HOME | tee log").unwrap();
        assert_eq!(config.argv, ["agent", "$HOME", "|", "tee", "log"]);
    }

    #[test]
    fn bad_command_lines_and_settings_are_refused_with_a_code() {
        for line in ["", "   ", "''"] {
            let e = AgentProcessConfig::from_command_line(line).unwrap_err();
            assert_eq!(e, AgentCommandError::Empty, "{line:?}");
            assert_eq!(e.code(), "runtime.agent-command-empty");
        }
        let e = AgentProcessConfig::from_command_line("python3 'agent.py").unwrap_err();
        assert_eq!(e.code(), "runtime.agent-command-syntax");
        assert_eq!(
            e.to_string(),
            "the agent command \"python3 'agent.py\" cannot be split into words: missing closing quote"
        );
        let e = AgentProcess::new(AgentProcessConfig {
            argv: vec!["agent".into()],
            max_line_bytes: 0,
            ..AgentProcessConfig::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the agent setting max_line_bytes must be more than zero"
        );
        assert_eq!(e.code(), "runtime.agent-setting");
    }

    #[test]
    fn the_embedded_schema_compiles_a_validator_per_agent_message() {
        let validators = validators().unwrap();
        assert_eq!(validators.by_type.len(), AGENT_MESSAGE_TYPES.len());
        let (_, delta) = &validators.by_type[0];
        assert!(delta.is_valid(&json!({"type": "message.delta", "delta": "hi"})));
        assert!(!delta.is_valid(&json!({"type": "message.delta"})));
    }

    #[test]
    fn the_stderr_tail_keeps_the_end_within_its_limit() {
        let mut tail = StderrTail::new(10);
        tail.push("first line");
        tail.push("ünïcode");
        assert!(tail.text.len() <= 10, "{:?}", tail.text);
        assert!(tail.text.ends_with("ünïcode\n"));
        let mut none = StderrTail::new(0);
        none.push("x");
        assert_eq!(none.text, "");
    }

    fn call() -> OpenCall {
        OpenCall {
            tool_name: "shell".into(),
            agent_name: "a".into(),
            input: Value::Null,
        }
    }

    fn result(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn the_runtime_decides_the_outcome_of_a_call_whose_approval_was_refused() {
        let ran = result(json!({"ok": true}));
        let rejected = Resolution::Rejected { reason: None };
        assert_eq!(
            tool_outcome(1, &call(), Some(&rejected), &ran),
            ToolOutcome {
                kind: OutcomeKind::UserRejected,
                reason: Some("the user rejected it".into())
            }
        );
        assert_eq!(
            tool_outcome(1, &call(), Some(&Resolution::Expired), &ran).kind,
            OutcomeKind::UserRejected
        );
        // An agent cannot claim a rejection the user did not make.
        let claim = result(json!({"ok": false, "outcome": "user_rejected", "error": "no"}));
        assert_eq!(
            tool_outcome(1, &call(), Some(&Resolution::Approved), &claim),
            ToolOutcome {
                kind: OutcomeKind::ToolFailed,
                reason: Some("no".into())
            }
        );
        let invalid = result(
            json!({"ok": false, "outcome": "invalid_input", "error": {"message": "bad path"}}),
        );
        assert_eq!(
            tool_outcome(1, &call(), None, &invalid),
            ToolOutcome {
                kind: OutcomeKind::InvalidInput,
                reason: Some("bad path".into())
            }
        );
    }

    #[test]
    fn decisions_fail_closed_when_written_back() {
        let submitted = Resolution::Submitted { values: json!([]) };
        assert_eq!(
            approval_decision("r".into(), &submitted),
            json!({"type": "approval.decision", "requestId": "r", "decision": "reject", "reason": "the answer was not an approval decision"})
        );
        assert_eq!(
            input_result("f".into(), &Resolution::Approved),
            json!({"type": "input.result", "requestId": "f", "status": "cancelled", "reason": "the answer was not a form submission"})
        );
        let odd = Resolution::Submitted {
            values: json!({"not": "a list"}),
        };
        assert_eq!(input_result("f".into(), &odd)["status"], "cancelled");
    }
}

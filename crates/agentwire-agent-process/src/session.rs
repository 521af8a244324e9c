//! One turn of one agent process, read line by line: the agent's own messages (validated, then
//! acted on), requests asked of the host in the background and answered back, run events
//! coerced leniently, the work budget that stops while requests wait, cancellation, and how the
//! turn ends once the reading stopped.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_jsonrpc::{Frame, FrameReader};
use agentwire_runlog::{EventKind, IssueLevel, LineItem, LiveCoercer, RunEvent};
use agentwire_runtime::{
    FailStage, InteractionKind, LiveEvent, Operation, OutcomeKind, Resolution, RuntimeError,
    ToolOutcome, TurnContext, TurnEnd,
};
use serde_json::{Map, Value, json};
use tokio::io::AsyncRead;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::child::{GroupGuard, StderrTail, describe, drain_stderr, exit_within, kill};
use crate::decisions::{approval_decision, default_display, input_result, tool_outcome};
use crate::protocol::{RUNTIME_MESSAGE_TYPES, Validators};
use crate::{
    AgentProcessConfig, DEFAULT_MESSAGE_ID, MAX_DECIDED_CALLS, MAX_OPEN_MESSAGES,
    MAX_OPEN_TOOL_CALL_BYTES, MAX_OPEN_TOOL_CALLS, MAX_PENDING_REQUESTS, MAX_QUEUED_INPUT,
    MAX_RUN_EVENT_ID_BYTES, failed, message_stream_id, wire,
};

/// How long a cancelled turn waits for its requests to record their cancellation.
const REQUEST_SETTLE: Duration = Duration::from_secs(2);
/// The longest explanation of one garbage line kept for the failure message, in characters.
const MAX_WHY_CHARS: usize = 300;

/// Keys of an `approval.request` that would claim the decision; they are ignored and reported.
const APPROVAL_CLAIM_KEYS: &[&str] = &["decision", "approved", "status", "resolution", "outcome"];

/// How the reading of a turn stopped.
#[derive(Debug)]
pub(crate) enum Ending {
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
pub(crate) struct OpenCall {
    pub(crate) tool_name: String,
    pub(crate) agent_name: String,
    pub(crate) input: Value,
    /// The input's bytes, as JSON.
    pub(crate) bytes: usize,
}

/// A request waiting for the host.
#[derive(Debug)]
enum Pending {
    /// An approval, of the tool call it names; `spent` once that call's result came before
    /// the decision (the decision then applies to no call).
    Approval {
        call_id: Option<String>,
        spent: bool,
    },
    Input,
}

type Asked = (String, Result<Resolution, RuntimeError>);

/// The state of one turn of one agent process.
pub(crate) struct Session<'a> {
    config: &'a AgentProcessConfig,
    turn: &'a TurnContext,
    validators: &'static Validators,
    input: mpsc::Sender<Vec<u8>>,
    coercer: LiveCoercer,
    agent_name: String,
    calls: HashMap<String, OpenCall>,
    /// Bytes of input the open calls hold.
    calls_bytes: usize,
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
    pub(crate) fn new(
        config: &'a AgentProcessConfig,
        turn: &'a TurnContext,
        validators: &'static Validators,
        input: mpsc::Sender<Vec<u8>>,
    ) -> Session<'a> {
        let now = agentwire_runtime::SystemClock;
        let started_ms = agentwire_runtime::Clock::now_ms(&now);
        Session {
            config,
            turn,
            validators,
            input,
            coercer: LiveCoercer::new(turn.turn_id(), started_ms),
            agent_name: config.name.clone(),
            calls: HashMap::new(),
            calls_bytes: 0,
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
    pub(crate) fn send(&self, message: &Value) -> Result<(), String> {
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

    /// Reads the agent's output until the turn ends. When the agent exits first, whatever it
    /// left running in its process group is killed (it would hold the output open), the lines
    /// already written are still read, and the output is given up `exit_grace` after the exit
    /// if something outside the group still holds it.
    pub(crate) async fn run<R: AsyncRead + Unpin>(
        &mut self,
        mut reader: FrameReader<R>,
        child: &mut Child,
        group: &GroupGuard,
    ) -> Ending {
        let turn = self.turn;
        let mut output_deadline = None;
        loop {
            let deadline = self.deadline();
            let cancel_deadline = self.cancel_deadline;
            tokio::select! {
                exited = child.wait(), if output_deadline.is_none() => {
                    if let Err(e) = exited {
                        tracing::debug!("cannot wait for the agent process: {e}");
                    }
                    group.kill();
                    let now = Instant::now();
                    output_deadline = Some(now.checked_add(self.config.exit_grace).unwrap_or(now));
                }
                () = sleep_until(output_deadline) => return Ending::Eof,
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
                    Pending::Approval {
                        call_id: m.call_id,
                        spent: false,
                    },
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
            Some(Pending::Approval { call_id, spent }) => {
                // Kept for the call it names, open or still to come (an agent may ask before
                // it announces the call), but not when that call's result came first: the
                // decision must not apply to a later call of the same id.
                if let Some(call_id) = call_id.filter(|_| !spent) {
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
    async fn run_event(&mut self, line: usize, mut value: Value) -> Result<(), Ending> {
        self.run_events += 1;
        if self.run_events > self.config.max_run_events {
            return Err(Ending::Failed(format!(
                "the agent wrote more than {} run events in one turn",
                self.config.max_run_events
            )));
        }
        if let Some(event) = value.as_object_mut()
            && event
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| id.len() > MAX_RUN_EVENT_ID_BYTES)
        {
            tracing::warn!(
                line,
                "run event id over {MAX_RUN_EVENT_ID_BYTES} bytes dropped; the event gets an id of its own"
            );
            event.remove("id");
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
        let input = event.payload.get("args").cloned().unwrap_or(Value::Null);
        let bytes = serde_json::to_vec(&input).map_or(0, |json| json.len());
        if self.calls_bytes + bytes > MAX_OPEN_TOOL_CALL_BYTES {
            return Err(Ending::Failed(format!(
                "the agent's open tool calls hold more than {MAX_OPEN_TOOL_CALL_BYTES} bytes of input"
            )));
        }
        self.calls_bytes += bytes;
        let call = OpenCall {
            tool_name: event.str_field("name").unwrap_or_default().to_owned(),
            agent_name: self.agent_name.clone(),
            input,
            bytes,
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
        self.calls_bytes -= call.bytes;
        let approval = self.decided.remove(&call_id);
        let mut undecided = false;
        for pending in self.pending.values_mut() {
            if let Pending::Approval {
                call_id: Some(id),
                spent,
            } = pending
                && *id == call_id
            {
                *spent = true;
                undecided = true;
            }
        }
        let outcome = if undecided {
            // Whatever the host decides next, the call cannot have run with its approval.
            tracing::warn!(
                line,
                "refused: the agent reports the result of call {call_id} before its approval was decided"
            );
            ToolOutcome {
                kind: OutcomeKind::PolicyDenied,
                reason: Some(
                    "the agent reported the result before its approval was decided".into(),
                ),
            }
        } else {
            tool_outcome(line, &call, approval.as_ref(), &event.payload)
        };
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
    pub(crate) async fn finish(
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

//! Run state derivation: everything a run panel shows, folded from the event stream, in full
//! ([`derive_run_state`]) or incrementally ([`Deriver`], constant work per event).

use ahash::{AHashMap as HashMap, AHashSet as HashSet};

use serde::Serialize;
use serde_json::{Number, Value};

use crate::coerce::{CoerceOptions, to_run_events};
use crate::event::{Decision, EventKind, PauseReason, Risk, RunEvent};

/// Lifecycle of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// No event of the run yet.
    #[default]
    Idle,
    /// Started, or something happens in it.
    Running,
    /// Waiting for an approval or for the user (`pausedReason`).
    Paused,
    /// Finished.
    Done,
    /// Failed and stopped.
    Error,
}

/// Status of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// Planned, or waiting to be retried.
    #[default]
    Pending,
    /// Started and not finished.
    Running,
    /// Finished.
    Done,
    /// Failed.
    Error,
}

/// Status of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallStatus {
    /// No result yet.
    #[default]
    Pending,
    /// The result says `ok: true`.
    Ok,
    /// The result says `ok: false`.
    Error,
}

/// Status of an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    #[default]
    Pending,
    /// Approved as proposed.
    Approved,
    /// Approved with edits.
    Edited,
    /// Rejected.
    Rejected,
}

/// A step of the plan as declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    /// Step id.
    pub id: String,
    /// Title shown to people.
    pub title: String,
}

/// A step: from the plan, or first seen in a step or tool event.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    /// Step id.
    pub id: String,
    /// Title from the plan or from `step:start`.
    pub title: Option<String>,
    /// Whether the plan declares the step.
    pub planned: bool,
    /// Where the step is.
    pub status: StepStatus,
    /// How many times it started.
    pub attempts: u32,
    /// `at` of the latest start.
    pub started_at: Option<u64>,
    /// `at` of the latest finish or failure.
    pub ended_at: Option<u64>,
    /// Latest progress fraction.
    pub progress: Option<f64>,
    /// Latest progress message.
    pub message: Option<String>,
    /// Output of `step:done`, opaque.
    pub output: Option<Value>,
    /// Error of the latest `step:error`.
    pub error: Option<Value>,
    /// Whether the latest failure may be retried.
    pub retryable: Option<bool>,
    /// Keys of the tool calls made in the step, in order.
    pub tool_calls: Vec<String>,
    /// Keys of the approvals requested in the step, in order.
    pub approvals: Vec<String>,
    /// How many retries were requested.
    pub retries: u32,
}

/// A tool call paired with its result.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallState {
    /// The call's key: its `callId`, or its event id when it has none.
    pub call_id: String,
    /// Id of the `tool:call` event (of the `tool:result` for a result without a call).
    pub event_id: String,
    /// Step of the call.
    pub step_id: Option<String>,
    /// Tool name (absent only for a result whose call was never seen).
    pub name: Option<String>,
    /// Arguments, opaque.
    pub args: Option<Value>,
    /// Where the call is.
    pub status: ToolCallStatus,
    /// Result, opaque.
    pub result: Option<Value>,
    /// Error of a failed call.
    pub error: Option<Value>,
    /// Duration in milliseconds, as written.
    pub ms: Option<Number>,
    /// Tokens spent.
    pub tokens: Option<u64>,
    /// Cost in US dollars, as written.
    pub cost: Option<Number>,
    /// `seq` of the call event.
    pub seq: u64,
    /// `at` of the call.
    pub called_at: Option<u64>,
    /// `at` of the result.
    pub finished_at: Option<u64>,
    /// Id of the `tool:result` event.
    pub result_event_id: Option<String>,
}

/// An approval request and its decision.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalState {
    /// The request's key: its `approvalId`, or its event id when it has none.
    pub approval_id: String,
    /// Id of the request event (of the decision for a decision without a request).
    pub event_id: String,
    /// Step that waits.
    pub step_id: Option<String>,
    /// What is to be approved.
    pub summary: Option<String>,
    /// Risk level.
    pub risk: Option<Risk>,
    /// Weight of the risk ([`crate::RISK_WEIGHT`]); 0 when unknown.
    pub risk_weight: u8,
    /// Structured preview, opaque.
    pub preview: Option<Value>,
    /// Tool call awaiting the approval.
    pub call_id: Option<String>,
    /// Where the approval is.
    pub status: ApprovalStatus,
    /// The decision, once made.
    pub decision: Option<Decision>,
    /// Who decided.
    pub by: Option<String>,
    /// Why.
    pub comment: Option<String>,
    /// The edited proposal of an `edit` decision.
    pub edited: Option<Value>,
    /// `at` of the request.
    pub requested_at: Option<u64>,
    /// `at` of the decision.
    pub decided_at: Option<u64>,
}

/// A retry, anchored to the event it restarts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryState {
    /// Id of the `retry:request` event.
    pub event_id: String,
    /// Step retried.
    pub step_id: String,
    /// The anchor.
    pub from_event_id: String,
    /// Why.
    pub reason: Option<String>,
    /// Attempt number, when given.
    pub attempt: Option<u64>,
    /// `seq` of the request.
    pub seq: u64,
}

/// Where an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorSource {
    /// `run:error`.
    Run,
    /// `step:error`.
    Step,
    /// A `tool:result` with `ok: false`.
    Tool,
}

/// An error of the run, a step or a tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEntry {
    /// Where it came from.
    pub source: ErrorSource,
    /// Id of the event that reported it.
    pub event_id: String,
    /// `seq` of that event.
    pub seq: u64,
    /// Step concerned.
    pub step_id: Option<String>,
    /// Tool call concerned.
    pub call_id: Option<String>,
    /// The message (the error text, or its `message`).
    pub message: String,
    /// The error's `code`, when it has one.
    pub code: Option<String>,
    /// Whether a retry may help (step errors).
    pub retryable: Option<bool>,
}

/// An event of an unknown type or of a newer major version, folded with its raw JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownEvent {
    /// Event id.
    pub event_id: String,
    /// Its `seq`.
    pub seq: u64,
    /// Its type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its `schemaVersion`.
    pub schema_version: u64,
    /// The whole event.
    pub raw: Value,
}

/// Sums over the tool results.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Tool calls seen.
    pub tool_calls: u64,
    /// Tool results with `ok: false`.
    pub failed_tool_calls: u64,
    /// Tokens.
    pub tokens: u64,
    /// Cost in US dollars.
    pub cost: f64,
    /// Milliseconds spent in tools.
    pub ms: f64,
}

/// Everything a run panel shows, derived from the run's events.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// The run (of the first event folded).
    pub run_id: Option<String>,
    /// The goal of `run:start`.
    pub goal: Option<String>,
    /// The agent of `run:start`.
    pub agent: Option<String>,
    /// Lifecycle.
    pub status: RunStatus,
    /// Why the run is paused, while it is.
    pub paused_reason: Option<PauseReason>,
    /// `at` of `run:start` (display only).
    pub started_at: Option<u64>,
    /// `at` of `run:done` or `run:error` (display only).
    pub ended_at: Option<u64>,
    /// `at` of the latest event (display only).
    pub updated_at: Option<u64>,
    /// Highest `seq` folded.
    pub last_seq: Option<u64>,
    /// Events folded (duplicates and other runs' events excluded).
    pub event_count: u64,
    /// The plan as declared by the latest `plan`.
    pub plan: Vec<PlanStep>,
    /// Steps: planned ones in plan order, then the others as they appear.
    pub steps: Vec<StepState>,
    /// Steps not done yet.
    pub steps_left: u64,
    /// Tool calls in call order.
    pub tool_calls: Vec<ToolCallState>,
    /// Approvals in request order.
    pub approvals: Vec<ApprovalState>,
    /// Approvals waiting for a decision.
    pub pending_approvals: u64,
    /// Retries in order.
    pub retries: Vec<RetryState>,
    /// Errors in order.
    pub errors: Vec<ErrorEntry>,
    /// Unknown events, folded.
    pub unknown: Vec<UnknownEvent>,
    /// Output of `run:done`.
    pub output: Option<Value>,
    /// Summary of `run:done`.
    pub summary: Option<String>,
    /// Sums over tool results.
    pub totals: Totals,
    /// Events of other runs that were skipped.
    pub other_run_events: u64,
    /// Events whose `seq` was below one already folded (folded on arrival; normalize first to
    /// fold them in order).
    pub late_events: u64,
}

impl RunState {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepState> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Whether an approval waits for a decision (in the step `step_id`, or anywhere with `None`).
    pub fn has_pending_approval(&self, step_id: Option<&str>) -> bool {
        has_pending_approval(self, step_id)
    }
}

/// Whether an approval waits for a decision, in step `step_id` or (with `None`) anywhere.
pub fn has_pending_approval(state: &RunState, step_id: Option<&str>) -> bool {
    state.approvals.iter().any(|a| {
        a.status == ApprovalStatus::Pending
            && step_id.is_none_or(|s| a.step_id.as_deref() == Some(s))
    })
}

/// What [`Deriver::push`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Folded into the state.
    Folded,
    /// Folded, but its `seq` was below the latest folded one.
    Late,
    /// An id already folded: skipped.
    Duplicate,
    /// An event of another run: skipped.
    OtherRun,
}

/// Incremental derivation: the state after each pushed event equals [`derive_run_state`] of the
/// events pushed so far. Each push costs the same whatever the stream length (maps from step,
/// call and approval keys to their places; no re-scan).
#[derive(Debug, Clone, Default)]
pub struct Deriver {
    state: RunState,
    seen: HashSet<String>,
    steps: HashMap<String, usize>,
    calls: HashMap<String, usize>,
    approvals: HashMap<String, usize>,
    /// Opaque payload values moved out of an owned event ([`Deriver::push_owned`]) so the state
    /// takes them without a copy; indexed like [`OPAQUE_FIELDS`].
    moved: [Option<Value>; OPAQUE_FIELDS.len()],
}

/// Payload fields the state keeps as opaque JSON, taken whole.
const OPAQUE_FIELDS: [&str; 5] = ["args", "result", "output", "preview", "edited"];

/// The index in [`OPAQUE_FIELDS`] of the one opaque field the fold of `kind` takes.
fn opaque_slot(kind: EventKind) -> Option<usize> {
    let name = match kind {
        EventKind::ToolCall => "args",
        EventKind::ToolResult => "result",
        EventKind::StepDone | EventKind::RunDone => "output",
        EventKind::ApprovalRequest => "preview",
        EventKind::ApprovalDecision => "edited",
        _ => return None,
    };
    OPAQUE_FIELDS.iter().position(|f| *f == name)
}

fn error_parts(error: Option<&Value>) -> (String, Option<String>) {
    match error {
        Some(Value::String(s)) => (s.clone(), None),
        Some(Value::Object(map)) => (
            map.get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            map.get("code").and_then(Value::as_str).map(str::to_owned),
        ),
        Some(other) => (other.to_string(), None),
        None => (String::new(), None),
    }
}

fn opt_string(event: &RunEvent, name: &str) -> Option<String> {
    event.str_field(name).map(str::to_owned)
}

impl Deriver {
    /// An empty deriver.
    pub fn new() -> Self {
        Deriver::default()
    }

    /// The state so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The state, consuming the deriver.
    pub fn into_state(self) -> RunState {
        self.state
    }

    /// Folds every event of `events`.
    pub fn push_all<'a>(&mut self, events: impl IntoIterator<Item = &'a RunEvent>) {
        for event in events {
            self.push(event);
        }
    }

    fn step_index(&mut self, id: &str) -> usize {
        if let Some(&i) = self.steps.get(id) {
            return i;
        }
        let i = self.state.steps.len();
        self.state.steps.push(StepState {
            id: id.to_owned(),
            ..StepState::default()
        });
        self.state.steps_left += 1;
        self.steps.insert(id.to_owned(), i);
        i
    }

    fn set_step_status(&mut self, i: usize, status: StepStatus) {
        let step = &mut self.state.steps[i];
        match (step.status == StepStatus::Done, status == StepStatus::Done) {
            (false, true) => self.state.steps_left -= 1,
            (true, false) => self.state.steps_left += 1,
            _ => {}
        }
        step.status = status;
    }

    fn wake(&mut self) {
        if matches!(self.state.status, RunStatus::Idle | RunStatus::Paused) {
            self.state.status = RunStatus::Running;
            self.state.paused_reason = None;
        }
    }

    /// An opaque payload value: moved out of an owned event, or cloned from a borrowed one.
    fn opaque(&mut self, p: &serde_json::Map<String, Value>, name: &str) -> Option<Value> {
        let moved = OPAQUE_FIELDS
            .iter()
            .position(|f| *f == name)
            .and_then(|i| self.moved[i].take());
        moved.or_else(|| p.get(name).cloned())
    }

    /// Folds one event it owns: like [`Deriver::push`], but opaque values (`args`, `result`,
    /// `output`, `preview`, `edited`) move into the state instead of being copied.
    pub fn push_owned(&mut self, mut event: RunEvent) -> Applied {
        // Only the field the event's fold reads is moved: each removal costs a lookup and a
        // shift of the payload map.
        let slot = event.kind().and_then(opaque_slot);
        if let Some(i) = slot {
            self.moved[i] = event.payload.shift_remove(OPAQUE_FIELDS[i]);
        }
        let applied = self.push(&event);
        if let Some(i) = slot {
            self.moved[i] = None;
        }
        applied
    }

    /// Folds one event.
    pub fn push(&mut self, event: &RunEvent) -> Applied {
        if let Some(run) = &self.state.run_id
            && *run != event.run_id
        {
            self.state.other_run_events += 1;
            return Applied::OtherRun;
        }
        if !self.seen.insert(event.id.clone()) {
            return Applied::Duplicate;
        }
        let state = &mut self.state;
        if state.run_id.is_none() {
            state.run_id = Some(event.run_id.clone());
        }
        let late = state.last_seq.is_some_and(|last| event.seq < last);
        if late {
            state.late_events += 1;
        }
        state.last_seq = Some(state.last_seq.map_or(event.seq, |s| s.max(event.seq)));
        state.event_count += 1;
        state.updated_at = Some(event.at);
        self.fold(event);
        if late { Applied::Late } else { Applied::Folded }
    }

    fn fold(&mut self, event: &RunEvent) {
        let Some(kind) = event.kind() else {
            self.state.unknown.push(UnknownEvent {
                event_id: event.id.clone(),
                seq: event.seq,
                event_type: event.event_type.clone(),
                schema_version: event.schema_version,
                raw: event.to_value(),
            });
            return;
        };
        let p = &event.payload;
        match kind {
            EventKind::RunStart => {
                let state = &mut self.state;
                state.goal = opt_string(event, "goal").or(state.goal.take());
                state.agent = opt_string(event, "agent").or(state.agent.take());
                state.started_at = Some(event.at);
                state.status = RunStatus::Running;
                state.paused_reason = None;
            }
            EventKind::RunDone => {
                let output = self.opaque(p, "output");
                let state = &mut self.state;
                state.status = RunStatus::Done;
                state.paused_reason = None;
                state.ended_at = Some(event.at);
                state.output = output;
                state.summary = opt_string(event, "summary");
            }
            EventKind::RunError => {
                let (message, code) = error_parts(p.get("error"));
                let state = &mut self.state;
                state.status = RunStatus::Error;
                state.paused_reason = None;
                state.ended_at = Some(event.at);
                state.errors.push(ErrorEntry {
                    source: ErrorSource::Run,
                    event_id: event.id.clone(),
                    seq: event.seq,
                    step_id: opt_string(event, "stepId"),
                    call_id: None,
                    message,
                    code,
                    retryable: None,
                });
            }
            EventKind::RunPaused => {
                let state = &mut self.state;
                state.status = RunStatus::Paused;
                state.paused_reason = event.str_field("reason").and_then(PauseReason::from_wire);
            }
            EventKind::Plan => {
                let mut plan = Vec::new();
                if let Some(Value::Array(steps)) = p.get("steps") {
                    for step in steps {
                        let id = step.get("id").and_then(Value::as_str).unwrap_or_default();
                        let title = step
                            .get("title")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        plan.push(PlanStep {
                            id: id.to_owned(),
                            title: title.to_owned(),
                        });
                    }
                }
                for step in &plan {
                    let i = self.step_index(&step.id);
                    let s = &mut self.state.steps[i];
                    s.planned = true;
                    s.title = Some(step.title.clone());
                }
                self.state.plan = plan;
            }
            EventKind::StepStart => {
                self.wake();
                let i = self.step_index(event.str_field("stepId").unwrap_or_default());
                self.set_step_status(i, StepStatus::Running);
                let s = &mut self.state.steps[i];
                if let Some(title) = opt_string(event, "title") {
                    s.title = Some(title);
                }
                s.attempts += 1;
                s.started_at = Some(event.at);
                s.ended_at = None;
                // A new attempt: the failure of the previous one stays in `errors`.
                s.error = None;
                s.retryable = None;
            }
            EventKind::StepProgress => {
                self.wake();
                let i = self.step_index(event.str_field("stepId").unwrap_or_default());
                let s = &mut self.state.steps[i];
                if let Some(progress) = p.get("progress").and_then(Value::as_f64) {
                    s.progress = Some(progress);
                }
                if let Some(message) = opt_string(event, "message") {
                    s.message = Some(message);
                }
            }
            EventKind::StepDone => {
                self.wake();
                let i = self.step_index(event.str_field("stepId").unwrap_or_default());
                self.set_step_status(i, StepStatus::Done);
                let output = self.opaque(p, "output");
                let s = &mut self.state.steps[i];
                s.ended_at = Some(event.at);
                s.output = output;
            }
            EventKind::StepError => {
                let step_id = event.str_field("stepId").unwrap_or_default();
                let i = self.step_index(step_id);
                self.set_step_status(i, StepStatus::Error);
                let retryable = p.get("retryable").and_then(Value::as_bool);
                let s = &mut self.state.steps[i];
                s.ended_at = Some(event.at);
                s.error = p.get("error").cloned();
                s.retryable = retryable;
                let (message, code) = error_parts(p.get("error"));
                self.state.errors.push(ErrorEntry {
                    source: ErrorSource::Step,
                    event_id: event.id.clone(),
                    seq: event.seq,
                    step_id: Some(step_id.to_owned()),
                    call_id: None,
                    message,
                    code,
                    retryable,
                });
            }
            EventKind::ToolCall => {
                self.wake();
                let key = event.str_field("callId").unwrap_or(&event.id).to_owned();
                let step_id = opt_string(event, "stepId");
                if let Some(step) = &step_id {
                    let i = self.step_index(step);
                    self.state.steps[i].tool_calls.push(key.clone());
                }
                self.state.totals.tool_calls += 1;
                self.calls.insert(key.clone(), self.state.tool_calls.len());
                let args = self.opaque(p, "args");
                self.state.tool_calls.push(ToolCallState {
                    call_id: key,
                    event_id: event.id.clone(),
                    step_id,
                    name: opt_string(event, "name"),
                    args,
                    seq: event.seq,
                    called_at: Some(event.at),
                    ..ToolCallState::default()
                });
            }
            EventKind::ToolResult => {
                let key = event.str_field("callId").unwrap_or_default();
                let i = match self.calls.get(key) {
                    Some(&i) => i,
                    None => {
                        let i = self.state.tool_calls.len();
                        self.calls.insert(key.to_owned(), i);
                        self.state.tool_calls.push(ToolCallState {
                            call_id: key.to_owned(),
                            event_id: event.id.clone(),
                            step_id: opt_string(event, "stepId"),
                            seq: event.seq,
                            ..ToolCallState::default()
                        });
                        i
                    }
                };
                let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
                let number = |name: &str| match p.get(name) {
                    Some(Value::Number(n)) => Some(n.clone()),
                    _ => None,
                };
                let ms = number("ms");
                let tokens = p.get("tokens").and_then(Value::as_u64);
                let cost = number("cost");
                let totals = &mut self.state.totals;
                totals.ms += ms.as_ref().and_then(Number::as_f64).unwrap_or(0.0);
                totals.tokens = totals.tokens.saturating_add(tokens.unwrap_or(0));
                totals.cost += cost.as_ref().and_then(Number::as_f64).unwrap_or(0.0);
                if !ok {
                    totals.failed_tool_calls += 1;
                }
                let result = self.opaque(p, "result");
                let call = &mut self.state.tool_calls[i];
                call.status = if ok {
                    ToolCallStatus::Ok
                } else {
                    ToolCallStatus::Error
                };
                call.result = result;
                call.error = p.get("error").cloned();
                call.ms = ms;
                call.tokens = tokens;
                call.cost = cost;
                call.finished_at = Some(event.at);
                call.result_event_id = Some(event.id.clone());
                if !ok {
                    let (message, code) = error_parts(p.get("error"));
                    let step_id = call.step_id.clone();
                    self.state.errors.push(ErrorEntry {
                        source: ErrorSource::Tool,
                        event_id: event.id.clone(),
                        seq: event.seq,
                        step_id,
                        call_id: Some(key.to_owned()),
                        message,
                        code,
                        retryable: None,
                    });
                }
            }
            EventKind::ApprovalRequest => {
                let key = event
                    .str_field("approvalId")
                    .unwrap_or(&event.id)
                    .to_owned();
                let step_id = opt_string(event, "stepId");
                let risk = event.str_field("risk").and_then(Risk::from_wire);
                let request = ApprovalState {
                    approval_id: key.clone(),
                    event_id: event.id.clone(),
                    step_id: step_id.clone(),
                    summary: opt_string(event, "summary"),
                    risk,
                    risk_weight: risk.map_or(0, Risk::weight),
                    preview: self.opaque(p, "preview"),
                    call_id: opt_string(event, "callId"),
                    requested_at: Some(event.at),
                    ..ApprovalState::default()
                };
                // A repeated request for an approval still pending updates it; after a decision
                // it opens a new round.
                if let Some(&i) = self.approvals.get(&key)
                    && self.state.approvals[i].status == ApprovalStatus::Pending
                {
                    self.state.approvals[i] = request;
                    return;
                }
                if let Some(step) = &step_id {
                    let i = self.step_index(step);
                    self.state.steps[i].approvals.push(key.clone());
                }
                self.approvals.insert(key, self.state.approvals.len());
                self.state.pending_approvals += 1;
                self.state.approvals.push(request);
            }
            EventKind::ApprovalDecision => {
                let key = event.str_field("approvalId").unwrap_or_default();
                let decision = event.str_field("decision").and_then(Decision::from_wire);
                let i = match self.approvals.get(key) {
                    Some(&i) => i,
                    None => {
                        let i = self.state.approvals.len();
                        self.approvals.insert(key.to_owned(), i);
                        self.state.approvals.push(ApprovalState {
                            approval_id: key.to_owned(),
                            event_id: event.id.clone(),
                            ..ApprovalState::default()
                        });
                        self.state.pending_approvals += 1;
                        i
                    }
                };
                let edited = self.opaque(p, "edited");
                let a = &mut self.state.approvals[i];
                if a.status == ApprovalStatus::Pending {
                    self.state.pending_approvals -= 1;
                }
                a.status = match decision {
                    Some(Decision::Approve) => ApprovalStatus::Approved,
                    Some(Decision::Edit) => ApprovalStatus::Edited,
                    Some(Decision::Reject) => ApprovalStatus::Rejected,
                    None => ApprovalStatus::Pending,
                };
                if a.status == ApprovalStatus::Pending {
                    self.state.pending_approvals += 1;
                }
                a.decision = decision;
                a.by = opt_string(event, "by");
                a.comment = opt_string(event, "comment");
                a.edited = edited;
                a.decided_at = Some(event.at);
                if self.state.status == RunStatus::Paused
                    && self.state.paused_reason == Some(PauseReason::Approval)
                    && self.state.pending_approvals == 0
                {
                    self.wake();
                }
            }
            EventKind::RetryRequest => {
                let step_id = event.str_field("stepId").unwrap_or_default().to_owned();
                let i = self.step_index(&step_id);
                self.set_step_status(i, StepStatus::Pending);
                self.state.steps[i].retries += 1;
                self.state.retries.push(RetryState {
                    event_id: event.id.clone(),
                    step_id,
                    from_event_id: opt_string(event, "fromEventId").unwrap_or_default(),
                    reason: opt_string(event, "reason"),
                    attempt: p.get("attempt").and_then(Value::as_u64),
                    seq: event.seq,
                });
            }
        }
    }
}

/// Derives the state of the run of the first event from `events` as given (normalize first
/// with [`crate::normalize`] when they may be out of order). Repeated ids are folded once.
pub fn derive_run_state<'a>(events: impl IntoIterator<Item = &'a RunEvent>) -> RunState {
    let mut deriver = Deriver::new();
    deriver.push_all(events);
    deriver.into_state()
}

/// [`derive_run_state`] of events the caller gives away: opaque values move into the state.
pub fn derive_run_state_owned(events: impl IntoIterator<Item = RunEvent>) -> RunState {
    let mut deriver = Deriver::new();
    for event in events {
        deriver.push_owned(event);
    }
    deriver.into_state()
}

/// Derives a state from any JSON without asking the caller to validate it: the input goes
/// through the lenient parser ([`to_run_events`]), then is normalized and derived. Never fails.
pub fn derive_run_state_from_unknown(input: Value) -> RunState {
    let coerced = to_run_events(input, &CoerceOptions::default());
    let mut events = coerced.into_events();
    crate::stream::normalize_in_place(&mut events);
    derive_run_state_owned(events)
}

//! Run state derivation: everything a run panel shows, folded from the event stream, in full
//! ([`derive_run_state`]) or incrementally ([`Deriver`], constant work per event).
//!
//! This module holds the [`RunState`] data types. `deriver` holds the fold (the [`Deriver`] and
//! its per-event rules), `event_view` what the fold reads of an event, and `symbols` the
//! interned id and key sets the fold looks strings up in.

use serde::Serialize;
use serde_json::{Number, Value};

use crate::event::{Decision, PauseReason, Risk};
use crate::opaque::Json;

mod deriver;
mod event_view;
mod symbols;

pub(crate) use deriver::IdCheck;
pub use deriver::{Applied, Deriver, derive_run_state, derive_run_state_owned};
pub(crate) use event_view::{EventView, Key};
pub(crate) use symbols::IdHasher;

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
    pub output: Option<Json>,
    /// Error of the latest `step:error`.
    pub error: Option<Json>,
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
    pub args: Option<Json>,
    /// Where the call is.
    pub status: ToolCallStatus,
    /// Result, opaque.
    pub result: Option<Json>,
    /// Error of a failed call.
    pub error: Option<Json>,
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
    pub preview: Option<Json>,
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
    pub edited: Option<Json>,
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
    pub output: Option<Json>,
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

//! Timeline views of a coerced run: text for a terminal and a self-contained HTML page (inline
//! CSS and script, no network). Both show the issues first, then the steps with their tool calls
//! and approvals, then the timeline with unknown events and bad lines folded.
//!
//! This module holds what both views share: the summary line, the names of statuses, the issue
//! levels' order and the index of a run's calls and approvals. `terminal` writes the terminal
//! timeline, `html` the page, and `issues` groups issues by code for the terminal's list.

use std::fmt::Write as _;

use crate::coerce::IssueLevel;
use crate::state::{ApprovalState, ApprovalStatus, RunState, RunStatus, StepStatus, ToolCallState};

mod html;
mod issues;
mod terminal;

pub use html::{WrittenPage, render_html, write_html, write_html_by_line};
pub use issues::{IssueGroup, IssueGroups, MAX_GROUP_RANGES, group_issues};
pub use terminal::{
    IssueList, MAX_INLINE_JSON_CHARS, TextOptions, render_text, terminal_safe, write_issue_summary,
    write_issues, write_text, write_text_by_line,
};

const LEVELS: [IssueLevel; 4] = [
    IssueLevel::Fixed,
    IssueLevel::Degraded,
    IssueLevel::Dropped,
    IssueLevel::Info,
];

fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Idle => "idle",
        RunStatus::Running => "running",
        RunStatus::Paused => "paused",
        RunStatus::Done => "done",
        RunStatus::Error => "error",
    }
}

fn step_status_name(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Pending => "pending",
        StepStatus::Running => "running",
        StepStatus::Done => "done",
        StepStatus::Error => "error",
    }
}

fn approval_status_name(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "pending",
        ApprovalStatus::Approved => "approved",
        ApprovalStatus::Edited => "edited",
        ApprovalStatus::Rejected => "rejected",
    }
}

/// One line summing up the run.
pub fn summary_line(state: &RunState) -> String {
    let done = state
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Done)
        .count();
    let mut out = format!(
        "status {}{} · {done}/{} steps done · {} left · {} tool calls",
        status_name(state.status),
        state
            .paused_reason
            .map(|r| format!(" ({})", r.as_str()))
            .unwrap_or_default(),
        state.steps.len(),
        state.steps_left,
        state.tool_calls.len(),
    );
    if state.totals.failed_tool_calls > 0 {
        let _ = write!(out, " ({} failed)", state.totals.failed_tool_calls);
    }
    let _ = write!(out, " · {} approvals", state.approvals.len());
    if state.pending_approvals > 0 {
        let _ = write!(out, " ({} pending)", state.pending_approvals);
    }
    if state.totals.tokens > 0 || state.totals.cost > 0.0 {
        let _ = write!(
            out,
            " · {} tokens · ${:.4}",
            state.totals.tokens, state.totals.cost
        );
    }
    out
}

/// The calls and approvals a step lists by key, indexed once per render (a scan per key would
/// make a long run's view quadratic).
struct Lookup<'s> {
    calls: ahash::AHashMap<&'s str, &'s ToolCallState>,
    approvals: ahash::AHashMap<&'s str, &'s ApprovalState>,
}

impl<'s> Lookup<'s> {
    fn new(state: &'s RunState) -> Self {
        let mut calls = ahash::AHashMap::with_capacity(state.tool_calls.len());
        for call in &state.tool_calls {
            // The first call of a key, as the step's list means.
            calls.entry(call.call_id.as_str()).or_insert(call);
        }
        // The latest round of an approval key.
        let approvals = state
            .approvals
            .iter()
            .map(|a| (a.approval_id.as_str(), a))
            .collect();
        Lookup { calls, approvals }
    }

    fn call(&self, key: &str) -> Option<&'s ToolCallState> {
        self.calls.get(key).copied()
    }

    fn approval(&self, key: &str) -> Option<&'s ApprovalState> {
        self.approvals.get(key).copied()
    }
}

fn level_index(level: IssueLevel) -> usize {
    match level {
        IssueLevel::Fixed => 0,
        IssueLevel::Degraded => 1,
        IssueLevel::Dropped => 2,
        IssueLevel::Info => 3,
    }
}

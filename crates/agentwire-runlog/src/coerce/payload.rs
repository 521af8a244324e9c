//! The payload pass of one event: the inferences of the protocol's table (each filling only an
//! absent field, each reported), what the coercer tracks per run to make the pairing ones, and
//! the validation that decides whether the line is kept or degraded.

use ahash::AHashSet as HashSet;
use serde_json::{Map, Value, json};

use super::{Issue, IssueLevel};
use crate::event::{EventKind, RunEvent, SCHEMA_VERSION};
use crate::state::{EventView, Key};
use crate::validate::{payload_fields_valid, validate_payload_fields};

/// Decision synonyms, compared after trimming and lower-casing.
pub(crate) const DECISION_SYNONYMS: &[(&str, &str)] = &[
    ("approve", "approve"),
    ("approved", "approve"),
    ("ok", "approve"),
    ("okay", "approve"),
    ("yes", "approve"),
    ("allow", "approve"),
    ("allowed", "approve"),
    ("accept", "approve"),
    ("accepted", "approve"),
    ("confirm", "approve"),
    ("confirmed", "approve"),
    ("grant", "approve"),
    ("granted", "approve"),
    ("edit", "edit"),
    ("edited", "edit"),
    ("modify", "edit"),
    ("modified", "edit"),
    ("amend", "edit"),
    ("amended", "edit"),
    ("revise", "edit"),
    ("revised", "edit"),
    ("reject", "reject"),
    ("rejected", "reject"),
    ("deny", "reject"),
    ("denied", "reject"),
    ("no", "reject"),
    ("decline", "reject"),
    ("declined", "reject"),
    ("refuse", "reject"),
    ("refused", "reject"),
];

/// Fields whose text may stand in for a missing approval `summary`, in order.
pub(crate) const SUMMARY_SYNONYMS: &[&str] = &["title", "message", "reason"];

/// What the coercer tracks per run to make the pairing inferences.
#[derive(Debug, Default)]
pub(crate) struct RunTrack {
    running_steps: HashSet<String>,
    /// Calls in call order; paired ones are skipped lazily.
    call_stack: Vec<String>,
    unpaired_calls: HashSet<String>,
    pending_approvals: HashSet<String>,
}

impl RunTrack {
    pub(crate) fn latest_unpaired_call(&mut self) -> Option<String> {
        while let Some(top) = self.call_stack.last() {
            if self.unpaired_calls.contains(top) {
                return Some(top.clone());
            }
            self.call_stack.pop();
        }
        None
    }

    pub(crate) fn record(&mut self, kind: EventKind, event: &impl EventView) {
        match kind {
            EventKind::StepStart => {
                if let Some(step) = event.str_field(Key::StepId)
                    && !self.running_steps.contains(step.as_ref())
                {
                    self.running_steps.insert(step.into_owned());
                }
            }
            EventKind::StepDone | EventKind::StepError => {
                if let Some(step) = event.str_field(Key::StepId) {
                    self.running_steps.remove(step.as_ref());
                }
            }
            EventKind::ToolCall => {
                let key = event
                    .string_field(Key::CallId)
                    .unwrap_or_else(|| event.id().to_owned());
                self.unpaired_calls.insert(key.clone());
                self.call_stack.push(key);
            }
            EventKind::ToolResult => {
                if let Some(call) = event.str_field(Key::CallId) {
                    self.unpaired_calls.remove(call.as_ref());
                    // Paired calls on top of the stack are never an answer again: drop them now
                    // so the stack holds only what may still be paired.
                    while let Some(top) = self.call_stack.last() {
                        if self.unpaired_calls.contains(top) {
                            break;
                        }
                        self.call_stack.pop();
                    }
                }
            }
            EventKind::ApprovalRequest => {
                let key = event
                    .string_field(Key::ApprovalId)
                    .unwrap_or_else(|| event.id().to_owned());
                self.pending_approvals.insert(key);
            }
            EventKind::ApprovalDecision => {
                if let Some(a) = event.str_field(Key::ApprovalId) {
                    self.pending_approvals.remove(a.as_ref());
                }
            }
            _ => {}
        }
    }
}

/// Why a line is degraded: each code with its sentence.
pub(crate) type Degrade = Vec<(&'static str, String)>;

/// The payload pass of one event: the inferences of the table, then validation. Returns the
/// known kind (for tracking) or why the line is degraded.
pub(crate) fn payload(
    event: &mut RunEvent,
    track: &mut RunTrack,
    line: usize,
    fixes: &mut Vec<Issue>,
) -> Result<Option<EventKind>, Degrade> {
    let Some(kind) = event.kind() else {
        fixes.push(unknown_issue(event, line));
        return Ok(None);
    };
    // A valid payload needs no inference.
    if payload_fields_valid(kind, &event.payload) {
        return Ok(Some(kind));
    }
    let mut infer = Inference { line, fixes };
    let p = &mut event.payload;
    match kind {
        EventKind::Plan => infer.plan_steps(p),
        EventKind::ToolResult => infer.tool_result(p, track)?,
        EventKind::ToolCall => {
            infer.step_id(p, track)?;
            if !p.contains_key("name") {
                return Err(degrade(
                    "tool-name-missing",
                    "tool name missing: not guessing".into(),
                ));
            }
        }
        EventKind::ApprovalRequest => {
            infer.step_id(p, track)?;
            infer.approval_request(p)?;
        }
        EventKind::ApprovalDecision => infer.approval_decision(p, track)?,
        EventKind::StepError if !p.contains_key("retryable") => {
            infer.fix(
                "retryable-defaulted",
                "retryable missing; set to false (no automatic retry is the safe side)".into(),
            );
            p.insert("retryable".into(), Value::Bool(false));
        }
        EventKind::RunPaused if !p.contains_key("reason") => infer.paused_reason(p, track),
        _ => {}
    }
    validated(kind, &event.payload)
}

/// The info issue of an event whose type is not known: folded, never executed.
fn unknown_issue(event: &RunEvent, line: usize) -> Issue {
    let (code, message) = if event.schema_version > SCHEMA_VERSION {
        (
            "newer-major-version",
            format!(
                "schemaVersion {} is newer than {SCHEMA_VERSION}: folded as an unknown event",
                event.schema_version
            ),
        )
    } else {
        (
            "unknown-type",
            format!("unknown type {:?}: folded, not executed", event.event_type),
        )
    };
    Issue {
        level: IssueLevel::Info,
        line,
        code,
        message,
    }
}

fn degrade(code: &'static str, message: String) -> Degrade {
    vec![(code, message)]
}

/// The kind of a payload that is valid after the inferences, or every validation message.
fn validated(kind: EventKind, payload: &Map<String, Value>) -> Result<Option<EventKind>, Degrade> {
    let problems = validate_payload_fields(kind, payload);
    if problems.is_empty() {
        return Ok(Some(kind));
    }
    let message = problems
        .iter()
        .map(|i| {
            let at = if i.pointer.is_empty() {
                "payload".to_owned()
            } else {
                i.pointer.clone()
            };
            format!("{at}: {}", i.message)
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(degrade(
        "invalid-payload",
        format!("{} payload is invalid: {message}", kind.wire_name()),
    ))
}

/// The inferences of one line's payload: each fills an absent field and reports it.
struct Inference<'f> {
    line: usize,
    fixes: &'f mut Vec<Issue>,
}

impl Inference<'_> {
    fn fix(&mut self, code: &'static str, message: String) {
        self.fixes.push(Issue {
            level: IssueLevel::Fixed,
            line: self.line,
            code,
            message,
        });
    }

    /// `plan.steps` given as strings become `{id: step_N, title}`.
    fn plan_steps(&mut self, p: &mut Map<String, Value>) {
        let Some(Value::Array(steps)) = p.get_mut("steps") else {
            return;
        };
        let mut converted = 0;
        for (i, step) in steps.iter_mut().enumerate() {
            if let Value::String(title) = step {
                let title = std::mem::take(title);
                *step = json!({"id": format!("step_{}", i + 1), "title": title});
                converted += 1;
            }
        }
        if converted > 0 {
            self.fix(
                "plan-steps-from-strings",
                format!("{converted} plan step(s) given as text became {{id: step_N, title}}"),
            );
        }
    }

    /// A `tool:result` without `callId` pairs with the latest unpaired call; without `ok` it is
    /// `false` exactly when it has an error.
    fn tool_result(
        &mut self,
        p: &mut Map<String, Value>,
        track: &mut RunTrack,
    ) -> Result<(), Degrade> {
        if !p.contains_key("callId") {
            let Some(call) = track.latest_unpaired_call() else {
                return Err(degrade(
                    "call-id-unpaired",
                    "callId missing and no tool:call is waiting for a result: not guessing".into(),
                ));
            };
            self.fix(
                "call-id-paired",
                format!("callId missing; paired with the latest unpaired tool:call {call}"),
            );
            p.insert("callId".into(), Value::String(call));
        }
        if !p.contains_key("ok") {
            let failed = p.get("error").is_some_and(|e| !e.is_null());
            self.fix(
                "ok-inferred",
                if failed {
                    "ok missing; false because the result has an error".into()
                } else {
                    "ok missing; true because the result has no error".into()
                },
            );
            p.insert("ok".into(), Value::Bool(!failed));
        }
        Ok(())
    }

    /// A missing `stepId` is the only running step's.
    fn step_id(&mut self, p: &mut Map<String, Value>, track: &RunTrack) -> Result<(), Degrade> {
        if p.contains_key("stepId") {
            return Ok(());
        }
        if track.running_steps.len() != 1 {
            let n = track.running_steps.len();
            return Err(degrade(
                "step-id-ambiguous",
                format!("stepId missing and {n} steps are running: not guessing"),
            ));
        }
        let step = track
            .running_steps
            .iter()
            .next()
            .cloned()
            .unwrap_or_default();
        self.fix(
            "step-id-inferred",
            format!("stepId missing; {step} is the only step running"),
        );
        p.insert("stepId".into(), Value::String(step));
        Ok(())
    }

    /// An `approval:request` without `risk` is the neutral `medium`; without `summary` it takes
    /// the first synonym that is a string.
    fn approval_request(&mut self, p: &mut Map<String, Value>) -> Result<(), Degrade> {
        if !p.contains_key("risk") {
            self.fix(
                "risk-defaulted",
                "risk missing; set to the neutral medium".into(),
            );
            p.insert("risk".into(), Value::String("medium".into()));
        }
        if p.contains_key("summary") {
            return Ok(());
        }
        let found = SUMMARY_SYNONYMS.iter().find_map(|k| {
            p.get(*k)
                .and_then(Value::as_str)
                .map(|s| (*k, s.to_owned()))
        });
        let Some((field, text)) = found else {
            return Err(degrade(
                "summary-missing",
                "summary missing and no title, message or reason to take it from".into(),
            ));
        };
        self.fix(
            "summary-from-synonym",
            format!("summary missing; taken from {field}"),
        );
        p.insert("summary".into(), Value::String(text));
        Ok(())
    }

    /// An `approval:decision` without `approvalId` pairs with the only pending approval; a
    /// decision synonym is read as the decision.
    fn approval_decision(
        &mut self,
        p: &mut Map<String, Value>,
        track: &RunTrack,
    ) -> Result<(), Degrade> {
        if !p.contains_key("approvalId") {
            if track.pending_approvals.len() != 1 {
                let n = track.pending_approvals.len();
                return Err(degrade(
                    "approval-id-ambiguous",
                    format!("approvalId missing and {n} approvals are pending: not guessing"),
                ));
            }
            let a = track
                .pending_approvals
                .iter()
                .next()
                .cloned()
                .unwrap_or_default();
            self.fix(
                "approval-id-paired",
                format!("approvalId missing; {a} is the only approval pending"),
            );
            p.insert("approvalId".into(), Value::String(a));
        }
        match p.get("decision") {
            Some(Value::String(d)) if crate::Decision::from_wire(d).is_none() => {
                let norm = d.trim().to_lowercase();
                let Some(&(_, to)) = DECISION_SYNONYMS.iter().find(|(s, _)| *s == norm) else {
                    return Err(degrade(
                        "decision-unknown",
                        format!("decision {d:?} is not approve, edit or reject: not guessing"),
                    ));
                };
                self.fix("decision-synonym", format!("decision {d:?} read as {to:?}"));
                p.insert("decision".into(), Value::String(to.into()));
            }
            None => {
                return Err(degrade(
                    "decision-unknown",
                    "decision missing: not guessing".into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// A `run:paused` without `reason` is `approval` when an approval is pending, else `user`.
    fn paused_reason(&mut self, p: &mut Map<String, Value>, track: &RunTrack) {
        let reason = if track.pending_approvals.is_empty() {
            "user"
        } else {
            "approval"
        };
        self.fix(
            "paused-reason-inferred",
            format!(
                "reason missing; {reason} because {} approval is pending",
                if reason == "user" { "no" } else { "an" }
            ),
        );
        p.insert("reason".into(), Value::String(reason.into()));
    }
}

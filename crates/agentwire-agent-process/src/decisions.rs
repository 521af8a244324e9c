//! The runtime's word on what the host decided: the `approval.decision` and `input.result`
//! written back to the agent (anything but an approval is a refusal), and how a tool call ended,
//! the runtime's approval decision first and the agent's result only after it.

use agentwire_runtime::{OutcomeKind, Resolution, ToolOutcome};
use serde_json::{Map, Value, json};

use crate::session::OpenCall;
use crate::wire;

/// The decision written back for an approval: anything but the host's approval is a refusal.
pub(crate) fn approval_decision(request_id: String, resolution: &Resolution) -> Value {
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
pub(crate) fn input_result(request_id: String, resolution: &Resolution) -> Value {
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
pub(crate) fn tool_outcome(
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

pub(crate) fn default_display(tool_name: &str, outcome: &ToolOutcome) -> String {
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

    use serde_json::json;

    use super::*;

    fn call() -> OpenCall {
        OpenCall {
            tool_name: "shell".into(),
            agent_name: "a".into(),
            input: Value::Null,
            bytes: 4,
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

//! The Roll event of a `runtime.event` envelope, typed, and the face's one set of version rules
//! for it ([`RuntimeEvent::project`]). An event holds its fields either borrowed from the core's
//! decoded event (`&str`, `&Value`, written as `serde_json` writes them) or as the JSON text a
//! stored event's view reads ([`Raw`], copied as stored): the same type, the same rules and the
//! same writer for a live event, a committed one and a replayed one.

use agentwire_roll::ProtocolVersion;
use agentwire_runtime::event::view::{EventView, Raw};
use agentwire_runtime::{LiveEvent, OutcomeKind, ThreadEvent};
use serde_json::Value;

use super::{approval_resolution, pending_approval};

/// A field's value as an event holds it, written as JSON text.
pub trait JsonText: Copy {
    /// Appends the value's JSON text.
    fn write(self, out: &mut Vec<u8>);
}

impl JsonText for &str {
    #[inline]
    fn write(self, out: &mut Vec<u8>) {
        // Writing a string into a vector cannot fail.
        let _ = serde_json::to_writer(out, self);
    }
}

impl JsonText for &Value {
    #[inline]
    fn write(self, out: &mut Vec<u8>) {
        // Writing a value into a vector cannot fail: its keys are strings.
        let _ = serde_json::to_writer(out, self);
    }
}

impl JsonText for Raw<'_> {
    #[inline]
    fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.get().as_bytes());
    }
}

/// An event borrowed from the core's decoded event.
pub type DecodedEvent<'a> = RuntimeEvent<&'a str, &'a Value>;

/// An event read from a stored event's view, its fields the stored JSON text.
pub type StoredEvent<'a> = RuntimeEvent<Raw<'a>, Raw<'a>>;

/// A Roll event in its 1.5 form: string fields held as `S`, other JSON values as `V`.
/// [`RuntimeEvent::project`] brings it to an older version by the rules of
/// `agentwire_roll::project::project_event_envelope` (which the tests hold it to). The approval
/// shapes are built as values (`pending_approval`, `approval_resolution`): those events are
/// rare and never read through a stored view.
#[derive(Debug)]
pub enum RuntimeEvent<S, V> {
    /// `turn.started`.
    TurnStarted,
    /// `message.completed`.
    MessageCompleted { stream_id: S, text: S },
    /// `tool.completed`.
    ToolCompleted(ToolCompleted<S, V>),
    /// `approval.required`.
    ApprovalRequired { approval: Value },
    /// `approval.resolved` (1.1+).
    ApprovalResolved { approval_id: S, resolution: Value },
    /// `turn.completed`.
    TurnCompleted,
    /// `turn.cancelled`.
    TurnCancelled { reason: S, message: S },
    /// `turn.failed`.
    TurnFailed { stage: S, message: S },
    /// `capabilities.changed`.
    CapabilitiesChanged,
    /// `message.started` (ephemeral).
    MessageStarted { stream_id: S },
    /// `message.delta` (ephemeral).
    MessageDelta { stream_id: S, delta: S },
    /// `tool.started` (ephemeral).
    ToolStarted {
        tool_call_id: S,
        agent_name: S,
        tool_name: S,
        input: V,
    },
    /// `tool.output` (ephemeral).
    ToolOutput {
        tool_call_id: S,
        agent_name: S,
        tool_name: S,
        stream: S,
        delta: S,
    },
}

/// The fields of a `tool.completed` event.
#[derive(Debug)]
pub struct ToolCompleted<S, V> {
    tool_call_id: S,
    agent_name: S,
    tool_name: S,
    operation_id: S,
    outcome_kind: S,
    outcome_reason: Option<S>,
    display: V,
    app_output: Option<AppOutput<V>>,
}

/// An app-output descriptor: the tool's, or `{"status":"not_provided"}`.
#[derive(Debug)]
enum AppOutput<V> {
    Declared(V),
    NotProvided,
}

/// The Roll event of a durable core event, borrowed from it; `None` when the event has none
/// (bookkeeping and user-input forms).
pub fn durable_event(event: &ThreadEvent) -> Option<DecodedEvent<'_>> {
    Some(match event {
        ThreadEvent::TurnStarted { .. } => RuntimeEvent::TurnStarted,
        ThreadEvent::MessageCompleted {
            stream_id, text, ..
        } => RuntimeEvent::MessageCompleted { stream_id, text },
        ThreadEvent::OperationCompleted { operation, .. } => {
            RuntimeEvent::ToolCompleted(ToolCompleted {
                tool_call_id: &operation.tool_call_id,
                agent_name: &operation.agent_name,
                tool_name: &operation.tool_name,
                operation_id: &operation.id,
                outcome_kind: outcome_kind(operation.outcome.kind),
                outcome_reason: operation.outcome.reason.as_deref(),
                display: &operation.display,
                app_output: operation
                    .app_output
                    .as_ref()
                    .and_then(|a| a.get("descriptor"))
                    .map(AppOutput::Declared),
            })
        }
        ThreadEvent::InteractionOpened { interaction } => RuntimeEvent::ApprovalRequired {
            approval: pending_approval(interaction)?,
        },
        ThreadEvent::InteractionResolved {
            approval_id: Some(approval_id),
            resolution,
            ..
        } => RuntimeEvent::ApprovalResolved {
            approval_id,
            resolution: approval_resolution(resolution),
        },
        ThreadEvent::TurnCompleted { .. } => RuntimeEvent::TurnCompleted,
        ThreadEvent::TurnCancelled {
            reason, message, ..
        } => RuntimeEvent::TurnCancelled { reason, message },
        ThreadEvent::TurnFailed { stage, message, .. } => RuntimeEvent::TurnFailed {
            stage: stage.as_str(),
            message,
        },
        ThreadEvent::CapabilitiesChanged => RuntimeEvent::CapabilitiesChanged,
        ThreadEvent::ThreadCreated { .. }
        | ThreadEvent::ThreadRenamed { .. }
        | ThreadEvent::ThreadDeleted
        | ThreadEvent::ThreadArchived
        | ThreadEvent::TurnStatusChanged { .. }
        | ThreadEvent::InteractionResolved {
            approval_id: None, ..
        }
        // Roll has no human tasks.
        | ThreadEvent::HumanTaskOpened { .. }
        | ThreadEvent::HumanTaskDecided { .. }
        | ThreadEvent::HumanTaskCancelled { .. }
        | ThreadEvent::HumanTaskExpired { .. }
        | ThreadEvent::HumanTaskReissued { .. } => return None,
    })
}

/// The Roll event of an ephemeral core event, borrowed from it.
pub fn live_event(event: &LiveEvent) -> DecodedEvent<'_> {
    match event {
        LiveEvent::MessageStarted { stream_id } => RuntimeEvent::MessageStarted { stream_id },
        LiveEvent::MessageDelta { stream_id, delta } => {
            RuntimeEvent::MessageDelta { stream_id, delta }
        }
        LiveEvent::ToolStarted {
            tool_call_id,
            agent_name,
            tool_name,
            input,
        } => RuntimeEvent::ToolStarted {
            tool_call_id,
            agent_name,
            tool_name,
            input,
        },
        LiveEvent::ToolOutput {
            tool_call_id,
            agent_name,
            tool_name,
            stream,
            delta,
        } => RuntimeEvent::ToolOutput {
            tool_call_id,
            agent_name,
            tool_name,
            stream,
            delta,
        },
    }
}

/// The Roll event of a stored event read through its view: every viewed kind has one.
#[inline]
pub fn stored_event<'a>(event: &EventView<'a>) -> StoredEvent<'a> {
    match event {
        EventView::TurnStarted { .. } => RuntimeEvent::TurnStarted,
        EventView::MessageCompleted {
            stream_id, text, ..
        } => RuntimeEvent::MessageCompleted {
            stream_id: *stream_id,
            text: *text,
        },
        EventView::OperationCompleted { operation, .. } => {
            RuntimeEvent::ToolCompleted(ToolCompleted {
                tool_call_id: operation.tool_call_id,
                agent_name: operation.agent_name,
                tool_name: operation.tool_name,
                operation_id: operation.id,
                outcome_kind: operation.outcome.kind,
                outcome_reason: operation.outcome.reason,
                display: operation.display,
                app_output: operation.app_output_descriptor().map(AppOutput::Declared),
            })
        }
        EventView::TurnCompleted { .. } => RuntimeEvent::TurnCompleted,
        EventView::TurnCancelled {
            reason, message, ..
        } => RuntimeEvent::TurnCancelled {
            reason: *reason,
            message: *message,
        },
        EventView::TurnFailed { stage, message, .. } => RuntimeEvent::TurnFailed {
            stage: *stage,
            message: *message,
        },
        EventView::CapabilitiesChanged => RuntimeEvent::CapabilitiesChanged,
    }
}

/// An outcome kind's wire name.
fn outcome_kind(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Success => "success",
        OutcomeKind::UserRejected => "user_rejected",
        OutcomeKind::PolicyDenied => "policy_denied",
        OutcomeKind::InvalidInput => "invalid_input",
        OutcomeKind::Cancelled => "cancelled",
        OutcomeKind::ToolFailed => "tool_failed",
    }
}

impl<S: JsonText, V: JsonText> RuntimeEvent<S, V> {
    /// The event as `to` carries it, or `None` when `to` cannot carry it (`approval.resolved`
    /// before 1.1). `tool.completed` has `appOutput` on 1.5 (`not_provided` when the tool
    /// declared none) and none before. Every other kind, the ephemeral ones included, is the
    /// same on every version.
    #[inline]
    pub fn project(mut self, to: ProtocolVersion) -> Option<Self> {
        match &mut self {
            RuntimeEvent::ToolCompleted(tool) => {
                tool.app_output = if to >= ProtocolVersion::V1_5 {
                    Some(tool.app_output.take().unwrap_or(AppOutput::NotProvided))
                } else {
                    None
                };
            }
            RuntimeEvent::ApprovalResolved { .. }
                if !to.capabilities().approval_resolved_events =>
            {
                return None;
            }
            _ => {}
        }
        Some(self)
    }

    /// Appends the event's JSON text, its members in the order of the Roll schema's examples.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            RuntimeEvent::TurnStarted => out.extend_from_slice(br#"{"type":"turn.started""#),
            RuntimeEvent::MessageCompleted { stream_id, text } => {
                out.extend_from_slice(br#"{"type":"message.completed""#);
                member(out, br#","streamId":"#, *stream_id);
                member(out, br#","text":"#, *text);
            }
            RuntimeEvent::ToolCompleted(tool) => tool.write(out),
            RuntimeEvent::ApprovalRequired { approval } => {
                out.extend_from_slice(br#"{"type":"approval.required""#);
                member(out, br#","approval":"#, approval);
            }
            RuntimeEvent::ApprovalResolved {
                approval_id,
                resolution,
            } => {
                out.extend_from_slice(br#"{"type":"approval.resolved""#);
                member(out, br#","approvalId":"#, *approval_id);
                member(out, br#","resolution":"#, resolution);
            }
            RuntimeEvent::TurnCompleted => out.extend_from_slice(br#"{"type":"turn.completed""#),
            RuntimeEvent::TurnCancelled { reason, message } => {
                out.extend_from_slice(br#"{"type":"turn.cancelled""#);
                member(out, br#","reason":"#, *reason);
                member(out, br#","message":"#, *message);
            }
            RuntimeEvent::TurnFailed { stage, message } => {
                out.extend_from_slice(br#"{"type":"turn.failed""#);
                member(out, br#","stage":"#, *stage);
                member(out, br#","message":"#, *message);
            }
            RuntimeEvent::CapabilitiesChanged => {
                out.extend_from_slice(br#"{"type":"capabilities.changed""#);
            }
            RuntimeEvent::MessageStarted { stream_id } => {
                out.extend_from_slice(br#"{"type":"message.started""#);
                member(out, br#","streamId":"#, *stream_id);
            }
            RuntimeEvent::MessageDelta { stream_id, delta } => {
                out.extend_from_slice(br#"{"type":"message.delta""#);
                member(out, br#","streamId":"#, *stream_id);
                member(out, br#","delta":"#, *delta);
            }
            RuntimeEvent::ToolStarted {
                tool_call_id,
                agent_name,
                tool_name,
                input,
            } => {
                out.extend_from_slice(br#"{"type":"tool.started""#);
                member(out, br#","toolCallId":"#, *tool_call_id);
                member(out, br#","agentName":"#, *agent_name);
                member(out, br#","toolName":"#, *tool_name);
                member(out, br#","input":"#, *input);
            }
            RuntimeEvent::ToolOutput {
                tool_call_id,
                agent_name,
                tool_name,
                stream,
                delta,
            } => {
                out.extend_from_slice(br#"{"type":"tool.output""#);
                member(out, br#","toolCallId":"#, *tool_call_id);
                member(out, br#","agentName":"#, *agent_name);
                member(out, br#","toolName":"#, *tool_name);
                member(out, br#","stream":"#, *stream);
                member(out, br#","delta":"#, *delta);
            }
        }
        out.push(b'}');
    }
}

impl<S: JsonText, V: JsonText> ToolCompleted<S, V> {
    /// Everything but the closing brace.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"type":"tool.completed""#);
        member(out, br#","toolCallId":"#, self.tool_call_id);
        member(out, br#","agentName":"#, self.agent_name);
        member(out, br#","toolName":"#, self.tool_name);
        member(out, br#","operationId":"#, self.operation_id);
        member(out, br#","outcome":{"kind":"#, self.outcome_kind);
        if let Some(reason) = self.outcome_reason {
            member(out, br#","reason":"#, reason);
        }
        out.push(b'}');
        member(out, br#","display":"#, self.display);
        match &self.app_output {
            Some(AppOutput::Declared(descriptor)) => {
                member(out, br#","appOutput":"#, *descriptor);
            }
            Some(AppOutput::NotProvided) => {
                out.extend_from_slice(br#","appOutput":{"status":"not_provided"}"#);
            }
            None => {}
        }
    }
}

/// Appends `key` (the member's separator, name and colon) and the value's JSON text.
#[inline]
fn member(out: &mut Vec<u8>, key: &[u8], value: impl JsonText) {
    out.extend_from_slice(key);
    value.write(out);
}

#[cfg(test)]
pub(super) mod tests {
    use agentwire_runtime::{LiveEvent, OutcomeKind, ThreadEvent};
    use serde_json::{Value, json};

    use super::outcome_kind;

    /// Every durable event kind as the core stores it, with its Roll event in the 1.5 form,
    /// written out by hand.
    pub(in crate::roll::wire) fn stored_events() -> Vec<(ThreadEvent, Value)> {
        let operation = |app_output: Value, reason: Value| {
            let mut operation = json!({
                "id": "op-1", "toolCallId": "call-1", "agentName": "demo", "toolName": "shell",
                "input": {"command": "ls"}, "outcome": {"kind": "success"},
                "display": {"text": "done", "diff": "+a"},
            });
            if !app_output.is_null() {
                operation["appOutput"] = app_output;
            }
            if !reason.is_null() {
                operation["outcome"] = json!({"kind": "tool_failed", "reason": reason});
            }
            json!({"type": "operation.completed", "turnId": "t1", "operation": operation})
        };
        let tool = |outcome: Value, app_output: Value| {
            json!({
                "type": "tool.completed", "toolCallId": "call-1", "agentName": "demo",
                "toolName": "shell", "operationId": "op-1", "outcome": outcome,
                "display": {"text": "done", "diff": "+a"}, "appOutput": app_output,
            })
        };
        let not_provided = json!({"status": "not_provided"});
        [
            (
                json!({"type": "turn.started", "turnId": "t1", "input": {"text": "hi"}}),
                json!({"type": "turn.started"}),
            ),
            (
                json!({"type": "message.completed", "turnId": "t1", "streamId": "s1",
                       "text": "echo"}),
                json!({"type": "message.completed", "streamId": "s1", "text": "echo"}),
            ),
            (
                operation(Value::Null, Value::Null),
                tool(json!({"kind": "success"}), not_provided.clone()),
            ),
            (
                operation(Value::Null, json!("exit 1")),
                tool(
                    json!({"kind": "tool_failed", "reason": "exit 1"}),
                    not_provided,
                ),
            ),
            (
                operation(
                    json!({"descriptor": {"status": "available", "kind": "table"},
                           "result": [1]}),
                    Value::Null,
                ),
                tool(
                    json!({"kind": "success"}),
                    json!({"status": "available", "kind": "table"}),
                ),
            ),
            (
                json!({"type": "interaction.opened", "interaction": {
                    "id": "i1", "turnId": "t1", "expiresAtMs": 5,
                    "ask": {"kind": "approval", "approvalId": "a1", "agentName": "demo",
                            "toolName": "shell", "preview": {"command": "ls"}}}}),
                json!({"type": "approval.required", "approval": {
                    "id": "a1", "turnId": "t1", "agentName": "demo", "toolName": "shell",
                    "preview": {"command": "ls"}}}),
            ),
            (
                json!({"type": "interaction.resolved", "interactionId": "i1", "turnId": "t1",
                       "approvalId": "a1", "resolution": {"status": "rejected", "reason": "no"}}),
                json!({"type": "approval.resolved", "approvalId": "a1", "resolution": {
                    "status": "resolved", "decision": "reject", "reason": "no"}}),
            ),
            (
                json!({"type": "turn.completed", "turnId": "t1"}),
                json!({"type": "turn.completed"}),
            ),
            (
                json!({"type": "turn.cancelled", "turnId": "t1", "reason": "user",
                       "message": "stop"}),
                json!({"type": "turn.cancelled", "reason": "user", "message": "stop"}),
            ),
            (
                json!({"type": "turn.failed", "turnId": "t1", "stage": "plan",
                       "message": "boom"}),
                json!({"type": "turn.failed", "stage": "plan", "message": "boom"}),
            ),
            (
                json!({"type": "capabilities.changed"}),
                json!({"type": "capabilities.changed"}),
            ),
            (
                json!({"type": "message.completed", "turnId": "t \"2\"", "streamId": "s\u{1}",
                       "text": "line\nbreak é 😀 \\ </script>"}),
                json!({"type": "message.completed", "streamId": "s\u{1}",
                       "text": "line\nbreak é 😀 \\ </script>"}),
            ),
        ]
        .into_iter()
        .map(|(event, roll)| (serde_json::from_value(event).unwrap(), roll))
        .collect()
    }

    /// Every ephemeral event kind, with its Roll event written out by hand.
    pub(in crate::roll::wire) fn live_events() -> Vec<(LiveEvent, Value)> {
        vec![
            (
                LiveEvent::MessageStarted {
                    stream_id: "s1".into(),
                },
                json!({"type": "message.started", "streamId": "s1"}),
            ),
            (
                LiveEvent::MessageDelta {
                    stream_id: "s1".into(),
                    delta: "a \"quoted\"\n\u{7f} 😀".into(),
                },
                json!({"type": "message.delta", "streamId": "s1",
                       "delta": "a \"quoted\"\n\u{7f} 😀"}),
            ),
            (
                LiveEvent::ToolStarted {
                    tool_call_id: "call-1".into(),
                    agent_name: "demo".into(),
                    tool_name: "shell".into(),
                    input: json!({"command": "ls", "args": [1, null, {"z": true, "a": 1.5}]}),
                },
                json!({"type": "tool.started", "toolCallId": "call-1", "agentName": "demo",
                       "toolName": "shell",
                       "input": {"command": "ls", "args": [1, null, {"z": true, "a": 1.5}]}}),
            ),
            (
                LiveEvent::ToolOutput {
                    tool_call_id: "call-1".into(),
                    agent_name: "demo".into(),
                    tool_name: "shell".into(),
                    stream: "stdout".into(),
                    delta: "line\r\n".into(),
                },
                json!({"type": "tool.output", "toolCallId": "call-1", "agentName": "demo",
                       "toolName": "shell", "stream": "stdout", "delta": "line\r\n"}),
            ),
        ]
    }

    #[test]
    fn outcome_kinds_have_their_serialized_names() {
        for kind in [
            OutcomeKind::Success,
            OutcomeKind::UserRejected,
            OutcomeKind::PolicyDenied,
            OutcomeKind::InvalidInput,
            OutcomeKind::Cancelled,
            OutcomeKind::ToolFailed,
        ] {
            assert_eq!(json!(outcome_kind(kind)), json!(kind));
        }
    }
}

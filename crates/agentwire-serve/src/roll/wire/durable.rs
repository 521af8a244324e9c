//! The `runtime.event` envelope of a durable event and the event in it, borrowed from the core's
//! event (decoded from the log or just committed) and serialized straight into the frame. The
//! resume replay writes the same bytes from stored views (`replay`).

use agentwire_roll::{EventCursor, ProtocolVersion};
use agentwire_runtime::ThreadEvent;
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;

use super::{Timestamp, approval_resolution, pending_approval};

/// The Roll event of a durable core event (1.5 form), borrowed from it and serialized
/// directly; `None` when the event has none (bookkeeping and user-input forms).
pub fn durable_event(event: &ThreadEvent) -> Option<DurableEvent<'_>> {
    Some(match event {
        ThreadEvent::TurnStarted { .. } => DurableEvent::TurnStarted,
        ThreadEvent::MessageCompleted {
            stream_id, text, ..
        } => DurableEvent::MessageCompleted { stream_id, text },
        ThreadEvent::OperationCompleted { operation, .. } => {
            DurableEvent::ToolCompleted(ToolCompleted {
                tool_call_id: &operation.tool_call_id,
                agent_name: &operation.agent_name,
                tool_name: &operation.tool_name,
                operation_id: &operation.id,
                outcome: WireOutcome {
                    kind: &operation.outcome.kind,
                    reason: operation.outcome.reason.as_deref(),
                },
                display: &operation.display,
                app_output: operation
                    .app_output
                    .as_ref()
                    .and_then(|a| a.get("descriptor"))
                    .map(AppOutput::Declared),
            })
        }
        ThreadEvent::InteractionOpened { interaction } => DurableEvent::ApprovalRequired {
            approval: pending_approval(interaction)?,
        },
        ThreadEvent::InteractionResolved {
            approval_id: Some(approval_id),
            resolution,
            ..
        } => DurableEvent::ApprovalResolved {
            approval_id,
            resolution: approval_resolution(resolution),
        },
        ThreadEvent::TurnCompleted { .. } => DurableEvent::TurnCompleted,
        ThreadEvent::TurnCancelled {
            reason, message, ..
        } => DurableEvent::TurnCancelled { reason, message },
        ThreadEvent::TurnFailed { stage, message, .. } => DurableEvent::TurnFailed {
            stage: stage.as_str(),
            message,
        },
        ThreadEvent::CapabilitiesChanged => DurableEvent::CapabilitiesChanged,
        ThreadEvent::ThreadCreated { .. }
        | ThreadEvent::ThreadRenamed { .. }
        | ThreadEvent::ThreadDeleted
        | ThreadEvent::TurnStatusChanged { .. }
        | ThreadEvent::InteractionResolved {
            approval_id: None, ..
        } => return None,
    })
}

/// A durable Roll event in its 1.5 form. [`DurableEvent::project`] brings it to an older
/// version by the rules of `agentwire_roll::project::project_event_envelope` (which the tests
/// hold it to).
#[derive(Debug, Serialize)]
#[serde(tag = "type")]
pub enum DurableEvent<'a> {
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "message.completed", rename_all = "camelCase")]
    MessageCompleted { stream_id: &'a str, text: &'a str },
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted<'a>),
    #[serde(rename = "approval.required")]
    ApprovalRequired { approval: Value },
    #[serde(rename = "approval.resolved", rename_all = "camelCase")]
    ApprovalResolved {
        approval_id: &'a str,
        resolution: Value,
    },
    #[serde(rename = "turn.completed")]
    TurnCompleted,
    #[serde(rename = "turn.cancelled")]
    TurnCancelled { reason: &'a str, message: &'a str },
    #[serde(rename = "turn.failed")]
    TurnFailed { stage: &'a str, message: &'a str },
    #[serde(rename = "capabilities.changed")]
    CapabilitiesChanged,
}

impl DurableEvent<'_> {
    /// The event as `to` carries it, or `None` when `to` cannot carry it (`approval.resolved`
    /// before 1.1). `tool.completed` has `appOutput` on 1.5 (`not_provided` when the tool
    /// declared none) and none before.
    pub fn project(mut self, to: ProtocolVersion) -> Option<Self> {
        match &mut self {
            DurableEvent::ToolCompleted(tool) => {
                tool.app_output = if to >= ProtocolVersion::V1_5 {
                    Some(tool.app_output.take().unwrap_or(AppOutput::NotProvided))
                } else {
                    None
                };
            }
            DurableEvent::ApprovalResolved { .. }
                if !to.capabilities().approval_resolved_events =>
            {
                return None;
            }
            _ => {}
        }
        Some(self)
    }
}

/// The fields of a `tool.completed` event.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCompleted<'a> {
    tool_call_id: &'a str,
    agent_name: &'a str,
    tool_name: &'a str,
    operation_id: &'a str,
    outcome: WireOutcome<'a>,
    display: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_output: Option<AppOutput<'a>>,
}

/// An operation's outcome on the wire.
#[derive(Debug, Serialize)]
struct WireOutcome<'a> {
    kind: &'a agentwire_runtime::OutcomeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

/// An app-output descriptor: the tool's, or `{"status":"not_provided"}`.
#[derive(Debug)]
enum AppOutput<'a> {
    Declared(&'a Value),
    NotProvided,
}

impl Serialize for AppOutput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AppOutput::Declared(descriptor) => descriptor.serialize(serializer),
            AppOutput::NotProvided => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("status", "not_provided")?;
                map.end()
            }
        }
    }
}

/// A `runtime.event` envelope of a durable event, as `version` carries it: the cursor fields
/// (`durability`, `eventId`, `cursor`) on 1.3+ only, when `cursor` is set.
#[derive(Debug)]
pub struct DurableEnvelope<'a> {
    pub protocol_version: &'static str,
    pub runtime_instance_id: &'a str,
    pub sequence: u64,
    pub timestamp: Timestamp,
    pub thread_id: &'a str,
    pub turn_id: Option<&'a str>,
    pub event: DurableEvent<'a>,
    pub cursor: Option<EventCursor>,
}

impl Serialize for DurableEnvelope<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields =
            6 + usize::from(self.turn_id.is_some()) + 3 * usize::from(self.cursor.is_some());
        let mut map = serializer.serialize_map(Some(fields))?;
        map.serialize_entry("protocolVersion", self.protocol_version)?;
        map.serialize_entry("runtimeInstanceId", self.runtime_instance_id)?;
        map.serialize_entry("sequence", &self.sequence)?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        map.serialize_entry("threadId", self.thread_id)?;
        if let Some(turn_id) = &self.turn_id {
            map.serialize_entry("turnId", turn_id)?;
        }
        map.serialize_entry("event", &self.event)?;
        if let Some(cursor) = &self.cursor {
            map.serialize_entry("durability", "durable")?;
            map.serialize_entry("eventId", &EventIdText(cursor))?;
            map.serialize_entry("cursor", cursor.as_str())?;
        }
        map.end()
    }
}

/// A cursor's event id in wire form, serialized without building the string first.
struct EventIdText<'a>(&'a EventCursor);

impl Serialize for EventIdText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.event_id_display())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    /// Every durable event kind, as the core stores it.
    pub(in crate::roll::wire) fn stored_events() -> Vec<ThreadEvent> {
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
        [
            json!({"type": "turn.started", "turnId": "t1", "input": {"text": "hi"}}),
            json!({"type": "message.completed", "turnId": "t1", "streamId": "s1", "text": "echo"}),
            operation(Value::Null, Value::Null),
            operation(Value::Null, json!("exit 1")),
            operation(
                json!({"descriptor": {"status": "available", "kind": "table"}, "result": [1]}),
                Value::Null,
            ),
            json!({"type": "interaction.opened", "interaction": {
                "id": "i1", "turnId": "t1", "expiresAtMs": 5,
                "ask": {"kind": "approval", "approvalId": "a1", "agentName": "demo",
                        "toolName": "shell", "preview": {"command": "ls"}}}}),
            json!({"type": "interaction.resolved", "interactionId": "i1", "turnId": "t1",
                   "approvalId": "a1", "resolution": {"status": "rejected", "reason": "no"}}),
            json!({"type": "turn.completed", "turnId": "t1"}),
            json!({"type": "turn.cancelled", "turnId": "t1", "reason": "user", "message": "stop"}),
            json!({"type": "turn.failed", "turnId": "t1", "stage": "plan", "message": "boom"}),
            json!({"type": "capabilities.changed"}),
        ]
        .into_iter()
        .map(|event| serde_json::from_value(event).unwrap())
        .collect()
    }

    fn cursor() -> EventCursor {
        EventCursor::new([1; 16], 3, [0xab; 16])
    }

    fn stamped<'a>(
        event: DurableEvent<'a>,
        turn_id: Option<&'a str>,
        version: ProtocolVersion,
    ) -> DurableEnvelope<'a> {
        DurableEnvelope {
            protocol_version: version.as_str(),
            runtime_instance_id: "r1",
            sequence: 7,
            timestamp: Timestamp(0),
            thread_id: "th1",
            turn_id,
            event,
            cursor: version.capabilities().durable_events.then(cursor),
        }
    }

    fn envelope(event: &ThreadEvent, version: ProtocolVersion) -> Option<Value> {
        let wire = durable_event(event)?.project(version)?;
        let envelope = stamped(wire, event.turn_id(), version);
        Some(serde_json::to_value(envelope).unwrap())
    }

    /// The typed envelopes follow the rules of the generic projection, version by version.
    #[test]
    fn durable_envelopes_project_as_the_roll_projection_does() {
        for event in stored_events() {
            let newest = envelope(&event, ProtocolVersion::V1_5).unwrap();
            for version in agentwire_roll::SUPPORTED_VERSIONS {
                let projected =
                    agentwire_roll::project::project_event_envelope(&newest, version).ok();
                assert_eq!(
                    envelope(&event, version),
                    projected,
                    "{} on {version}",
                    event.kind()
                );
            }
        }
    }

    #[test]
    fn a_tool_completed_event_has_the_roll_shape() {
        let events = stored_events();
        assert_eq!(
            envelope(&events[4], ProtocolVersion::V1_5).unwrap(),
            json!({
                "protocolVersion": "1.5", "runtimeInstanceId": "r1", "sequence": 7,
                "timestamp": "1970-01-01T00:00:00.000Z", "threadId": "th1", "turnId": "t1",
                "event": {
                    "type": "tool.completed", "toolCallId": "call-1", "agentName": "demo",
                    "toolName": "shell", "operationId": "op-1", "outcome": {"kind": "success"},
                    "display": {"text": "done", "diff": "+a"},
                    "appOutput": {"status": "available", "kind": "table"},
                },
                "durability": "durable", "eventId": "abababab-abab-abab-abab-abababababab",
                "cursor": "rte1:01010101-0101-0101-0101-010101010101:3:abababab-abab-abab-abab-abababababab",
            })
        );
        assert_eq!(
            envelope(&events[3], ProtocolVersion::V1_2).unwrap()["event"],
            json!({
                "type": "tool.completed", "toolCallId": "call-1", "agentName": "demo",
                "toolName": "shell", "operationId": "op-1",
                "outcome": {"kind": "tool_failed", "reason": "exit 1"},
                "display": {"text": "done", "diff": "+a"},
            })
        );
    }
}

//! The Roll wire shapes of the core's records, built in the newest version's form (1.5) and
//! projected down per connection by `agentwire_roll::project`. Pure functions: no I/O, no state.

use std::time::{Duration, UNIX_EPOCH};

use agentwire_roll::constants::{MAX_RECOVERY_METADATA_CHARS, js_length};
use agentwire_roll::{EventCursor, ProtocolVersion};
use agentwire_runtime::event::view::EventView;
use agentwire_runtime::{
    AttachmentDescriptor, Interaction, InteractionKind, LiveEvent, Message, MessagePart, Operation,
    Resolution, Role, ThreadEvent, ThreadState, ThreadSummary,
};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// An RFC 3339 timestamp (UTC, milliseconds) of a time in milliseconds since the Unix epoch.
pub fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// At most `limit` UTF-16 code units of `text`, cut at a character boundary.
pub fn truncate_js(text: &str, limit: usize) -> String {
    if js_length(text) <= limit {
        return text.to_owned();
    }
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        used += c.len_utf16();
        if used > limit {
            break;
        }
        out.push(c);
    }
    out
}

/// An `AttachmentDescriptor`: never a path or content.
pub fn attachment_descriptor(descriptor: &AttachmentDescriptor) -> Value {
    json!({
        "attachmentId": descriptor.attachment_id,
        "fileName": descriptor.file_name,
        "displayName": descriptor.display_name,
        "mediaType": descriptor.media_type.as_str(),
        "bytes": descriptor.bytes,
        "sha256": descriptor.sha256,
        "source": descriptor.source.as_str(),
        "createdAt": timestamp(descriptor.created_at_ms),
    })
}

/// A `ThreadSummary` of a served thread.
pub fn thread_summary(summary: &ThreadSummary) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), Value::String(summary.id.clone()));
    if let Some(title) = &summary.title {
        out.insert("title".into(), Value::String(title.clone()));
    }
    if let Some(model) = &summary.model {
        out.insert("model".into(), Value::String(model.clone()));
    }
    out.insert(
        "createdAt".into(),
        Value::String(timestamp(summary.created_at_ms)),
    );
    out.insert(
        "updatedAt".into(),
        Value::String(timestamp(summary.updated_at_ms)),
    );
    out.insert("messageCount".into(), json!(summary.message_count));
    Value::Object(out)
}

/// The summary of a thread from its state.
pub fn summary_of(thread_id: &str, state: &ThreadState) -> ThreadSummary {
    ThreadSummary {
        id: thread_id.to_owned(),
        title: state.title.clone(),
        model: state.model.clone(),
        created_at_ms: state.created_at_ms,
        updated_at_ms: state.updated_at_ms,
        message_count: state.messages.len() as u64,
    }
}

/// A `UiMessage` (1.4+ parts; 1.3 and older drop non-text parts by projection).
pub fn ui_message(message: &Message) -> Value {
    let parts: Vec<Value> = message
        .parts
        .iter()
        .map(|part| match part {
            MessagePart::Text { text } => json!({"type": "text", "text": text}),
            MessagePart::Attachment(attachment) => json!({
                "type": "attachment",
                "mediaType": attachment.media_type,
                "bytes": attachment.bytes,
                "displayName": attachment.display_name,
            }),
        })
        .collect();
    json!({
        "sequence": message.sequence,
        "role": match message.role { Role::User => "user", Role::Assistant => "assistant" },
        "createdAt": timestamp(message.created_at_ms),
        "parts": parts,
    })
}

fn outcome(operation: &Operation) -> Value {
    let mut out = Map::new();
    out.insert(
        "kind".into(),
        serde_json::to_value(operation.outcome.kind).unwrap_or(Value::Null),
    );
    if let Some(reason) = &operation.outcome.reason {
        out.insert("reason".into(), Value::String(reason.clone()));
    }
    Value::Object(out)
}

/// The app-output descriptor of an operation: what the tool declared, or `not_provided`.
pub fn app_output_descriptor(operation: &Operation) -> Value {
    operation
        .app_output
        .as_ref()
        .and_then(|a| a.get("descriptor"))
        .cloned()
        .unwrap_or_else(|| json!({"status": "not_provided"}))
}

/// An `OperationView` (1.5 form, with `appOutput`); `display` is the ledger envelope.
pub fn operation_view(sequence: usize, operation: &Operation, created_at_ms: u64) -> Value {
    json!({
        "id": operation.id,
        "sequence": sequence,
        "toolCallId": operation.tool_call_id,
        "agentName": operation.agent_name,
        "toolName": operation.tool_name,
        "createdAt": timestamp(created_at_ms),
        "outcome": outcome(operation),
        "display": {"version": 1, "encoding": "json", "value": operation.display},
        "appOutput": app_output_descriptor(operation),
    })
}

/// An `OperationResultView`: the stored app-output result, or the descriptor's status when
/// there is no available result.
pub fn operation_result_view(thread_id: &str, operation: &Operation, created_at_ms: u64) -> Value {
    let output = operation
        .app_output
        .as_ref()
        .and_then(|a| a.get("result"))
        .cloned()
        .unwrap_or_else(|| app_output_descriptor(operation));
    json!({
        "threadId": thread_id,
        "operationId": operation.id,
        "agentName": operation.agent_name,
        "toolName": operation.tool_name,
        "createdAt": timestamp(created_at_ms),
        "output": output,
    })
}

/// A `PendingApproval` of an approval interaction.
pub fn pending_approval(interaction: &Interaction) -> Option<Value> {
    let InteractionKind::Approval {
        approval_id,
        agent_name,
        tool_name,
        preview,
        reason,
    } = &interaction.ask
    else {
        return None;
    };
    let mut out = Map::new();
    out.insert("id".into(), Value::String(approval_id.clone()));
    out.insert("turnId".into(), Value::String(interaction.turn_id.clone()));
    out.insert("agentName".into(), Value::String(agent_name.clone()));
    out.insert("toolName".into(), Value::String(tool_name.clone()));
    out.insert("preview".into(), preview.clone());
    if let Some(reason) = reason {
        out.insert("reason".into(), Value::String(reason.clone()));
    }
    Some(Value::Object(out))
}

/// The server-request method an interaction is delivered with.
pub fn interaction_method(interaction: &Interaction) -> &'static str {
    match interaction.ask {
        InteractionKind::Approval { .. } => "approval.request",
        InteractionKind::UserInput { .. } => "userInput.request",
    }
}

fn interaction_metadata(thread_id: &str, interaction: &Interaction) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "interactionId".into(),
        Value::String(interaction.id.clone()),
    );
    out.insert("threadId".into(), Value::String(thread_id.to_owned()));
    out.insert("turnId".into(), Value::String(interaction.turn_id.clone()));
    out.insert(
        "expiresAt".into(),
        Value::String(timestamp(interaction.expires_at_ms)),
    );
    out.insert("sensitivity".into(), Value::String("normal".into()));
    out
}

fn form_fields(out: &mut Map<String, Value>, interaction: &Interaction) {
    if let InteractionKind::UserInput {
        title,
        description,
        controls,
    } = &interaction.ask
    {
        if let Some(title) = title {
            out.insert("title".into(), Value::String(title.clone()));
        }
        if let Some(description) = description {
            out.insert("description".into(), Value::String(description.clone()));
        }
        out.insert("controls".into(), controls.clone());
    }
}

/// The server-request params of an interaction, in the 1.2+ interaction shape.
pub fn server_request_params(thread_id: &str, interaction: &Interaction) -> Value {
    let mut out = interaction_metadata(thread_id, interaction);
    match pending_approval(interaction) {
        Some(approval) => {
            out.insert("approval".into(), approval);
        }
        None => form_fields(&mut out, interaction),
    }
    Value::Object(out)
}

/// A `pendingInteractions` item: metadata only, never a preview or submitted values.
pub fn pending_interaction(thread_id: &str, interaction: &Interaction) -> Value {
    let mut out = Map::new();
    out.insert(
        "method".into(),
        Value::String(interaction_method(interaction).into()),
    );
    out.extend(interaction_metadata(thread_id, interaction));
    match &interaction.ask {
        InteractionKind::Approval { approval_id, .. } => {
            out.insert("approvalId".into(), Value::String(approval_id.clone()));
        }
        InteractionKind::UserInput { .. } => form_fields(&mut out, interaction),
    }
    Value::Object(out)
}

/// The `resolution` of an `approval.resolved` event.
pub fn approval_resolution(resolution: &Resolution) -> Value {
    match resolution {
        Resolution::Approved => json!({"status": "resolved", "decision": "approve"}),
        Resolution::Rejected { reason } => {
            let mut out = json!({"status": "resolved", "decision": "reject"});
            if let Some(reason) = reason.as_ref().filter(|r| !r.is_empty()) {
                out["reason"] = Value::String(reason.clone());
            }
            out
        }
        Resolution::Cancelled { reason } => {
            let reason = if reason.is_empty() {
                "cancelled"
            } else {
                reason
            };
            json!({"status": "cancelled", "reason": reason})
        }
        Resolution::Expired => json!({"status": "expired", "reason": "the deadline passed"}),
        // A form's result is never an approval's; reported as a cancel if it ever were.
        Resolution::Submitted { .. } => {
            json!({"status": "cancelled", "reason": "not an approval decision"})
        }
    }
}

/// A wire value of a durable event: typed, and serialized, when the event was decoded; the JSON
/// text it is stored as, and copied, when the event is read through its stored view (replay).
#[derive(Debug, Clone, Copy)]
pub enum Field<'a, T: ?Sized> {
    Typed(&'a T),
    Stored(&'a RawValue),
}

impl<T: Serialize + ?Sized> Serialize for Field<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Typed(value) => value.serialize(serializer),
            Field::Stored(text) => text.serialize(serializer),
        }
    }
}

/// A string field.
pub type Text<'a> = Field<'a, str>;

/// The Roll event of a durable core event (1.5 form), borrowed from it and serialized
/// directly; `None` when the event has none (bookkeeping and user-input forms).
pub fn durable_event(event: &ThreadEvent) -> Option<DurableEvent<'_>> {
    Some(match event {
        ThreadEvent::TurnStarted { .. } => DurableEvent::TurnStarted,
        ThreadEvent::MessageCompleted {
            stream_id, text, ..
        } => DurableEvent::MessageCompleted {
            stream_id: Field::Typed(stream_id),
            text: Field::Typed(text),
        },
        ThreadEvent::OperationCompleted { operation, .. } => {
            DurableEvent::ToolCompleted(ToolCompleted {
                tool_call_id: Field::Typed(&operation.tool_call_id),
                agent_name: Field::Typed(&operation.agent_name),
                tool_name: Field::Typed(&operation.tool_name),
                operation_id: Field::Typed(&operation.id),
                outcome: WireOutcome {
                    kind: Field::Typed(&operation.outcome.kind),
                    reason: operation.outcome.reason.as_deref().map(Field::Typed),
                },
                display: Field::Typed(&operation.display),
                app_output: operation
                    .app_output
                    .as_ref()
                    .and_then(|a| a.get("descriptor"))
                    .map(|descriptor| AppOutput::Declared(Field::Typed(descriptor))),
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
        } => DurableEvent::TurnCancelled {
            reason: Field::Typed(reason),
            message: Field::Typed(message),
        },
        ThreadEvent::TurnFailed { stage, message, .. } => DurableEvent::TurnFailed {
            stage: Field::Typed(stage.as_str()),
            message: Field::Typed(message),
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

/// The Roll event of a stored event read through its view: the same event as
/// [`durable_event`] of its decode, its fields copied as stored.
pub fn viewed_event<'a>(event: &EventView<'a>) -> DurableEvent<'a> {
    match event {
        EventView::TurnStarted { .. } => DurableEvent::TurnStarted,
        EventView::MessageCompleted {
            stream_id, text, ..
        } => DurableEvent::MessageCompleted {
            stream_id: Field::Stored(stream_id),
            text: Field::Stored(text),
        },
        EventView::OperationCompleted { operation, .. } => {
            DurableEvent::ToolCompleted(ToolCompleted {
                tool_call_id: Field::Stored(operation.tool_call_id),
                agent_name: Field::Stored(operation.agent_name),
                tool_name: Field::Stored(operation.tool_name),
                operation_id: Field::Stored(operation.id),
                outcome: WireOutcome {
                    kind: Field::Stored(operation.outcome.kind),
                    reason: operation.outcome.reason.map(Field::Stored),
                },
                display: Field::Stored(operation.display),
                app_output: operation
                    .app_output_descriptor()
                    .map(|descriptor| AppOutput::Declared(Field::Stored(descriptor))),
            })
        }
        EventView::TurnCompleted { .. } => DurableEvent::TurnCompleted,
        EventView::TurnCancelled {
            reason, message, ..
        } => DurableEvent::TurnCancelled {
            reason: Field::Stored(reason),
            message: Field::Stored(message),
        },
        EventView::TurnFailed { stage, message, .. } => DurableEvent::TurnFailed {
            stage: Field::Stored(stage),
            message: Field::Stored(message),
        },
        EventView::CapabilitiesChanged => DurableEvent::CapabilitiesChanged,
    }
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
    MessageCompleted { stream_id: Text<'a>, text: Text<'a> },
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
    TurnCancelled { reason: Text<'a>, message: Text<'a> },
    #[serde(rename = "turn.failed")]
    TurnFailed { stage: Text<'a>, message: Text<'a> },
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
    tool_call_id: Text<'a>,
    agent_name: Text<'a>,
    tool_name: Text<'a>,
    operation_id: Text<'a>,
    outcome: WireOutcome<'a>,
    display: Field<'a, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_output: Option<AppOutput<'a>>,
}

/// An operation's outcome on the wire.
#[derive(Debug, Serialize)]
struct WireOutcome<'a> {
    kind: Field<'a, agentwire_runtime::OutcomeKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Text<'a>>,
}

/// An app-output descriptor: the tool's, or `{"status":"not_provided"}`.
#[derive(Debug)]
enum AppOutput<'a> {
    Declared(Field<'a, Value>),
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

/// A time in milliseconds since the Unix epoch, serialized as its RFC 3339 [`timestamp`]
/// without building the string first.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp(pub u64);

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_rfc3339_millis(
            UNIX_EPOCH + Duration::from_millis(self.0),
        ))
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
    pub turn_id: Option<Text<'a>>,
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

/// The Roll event of an ephemeral core event.
pub fn live_event(event: &LiveEvent) -> Value {
    match event {
        LiveEvent::MessageStarted { stream_id } => {
            json!({"type": "message.started", "streamId": stream_id})
        }
        LiveEvent::MessageDelta { stream_id, delta } => {
            json!({"type": "message.delta", "streamId": stream_id, "delta": delta})
        }
        LiveEvent::ToolStarted {
            tool_call_id,
            agent_name,
            tool_name,
            input,
        } => json!({
            "type": "tool.started",
            "toolCallId": tool_call_id,
            "agentName": agent_name,
            "toolName": tool_name,
            "input": input,
        }),
        LiveEvent::ToolOutput {
            tool_call_id,
            agent_name,
            tool_name,
            stream,
            delta,
        } => json!({
            "type": "tool.output",
            "toolCallId": tool_call_id,
            "agentName": agent_name,
            "toolName": tool_name,
            "stream": stream,
            "delta": delta,
        }),
    }
}

/// The `activeTurn` of a snapshot.
pub fn active_turn(state: &ThreadState) -> Option<Value> {
    state.active_turn.as_ref().map(|turn| {
        json!({
            "id": turn.id,
            "status": serde_json::to_value(turn.status).unwrap_or(Value::Null),
            "startedAt": timestamp(turn.started_at_ms),
        })
    })
}

/// Paging of a snapshot.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotPaging {
    /// Messages before this sequence (the newest when `None`).
    pub message_before: Option<u64>,
    /// Operations before this sequence.
    pub operation_before: Option<u64>,
    /// Items per page.
    pub limit: usize,
}

/// A full snapshot in the 1.5 form.
pub fn full_snapshot(
    thread_id: &str,
    state: &ThreadState,
    paging: SnapshotPaging,
    event_cursor: Option<String>,
) -> Value {
    let messages = state.messages_page(paging.message_before, paging.limit);
    let operations = state.operations_page(paging.operation_before, paging.limit);
    let first_operation = operations
        .next_before
        .map_or(0, |b| usize::try_from(b).unwrap_or(0));
    let operation_items: Vec<Value> = operations
        .items
        .iter()
        .enumerate()
        .map(|(offset, op)| {
            let sequence = first_operation + offset;
            let at = state
                .operation_times_ms
                .get(sequence)
                .copied()
                .unwrap_or(state.updated_at_ms);
            operation_view(sequence, op, at)
        })
        .collect();
    let mut out = Map::new();
    out.insert(
        "thread".into(),
        thread_summary(&summary_of(thread_id, state)),
    );
    out.insert(
        "messages".into(),
        json!({
            "items": messages.items.iter().map(|m| ui_message(m)).collect::<Vec<_>>(),
            "nextBeforeSequence": messages.next_before,
        }),
    );
    out.insert(
        "operations".into(),
        json!({"items": operation_items, "nextBeforeSequence": operations.next_before}),
    );
    if let Some(turn) = active_turn(state) {
        out.insert("activeTurn".into(), turn);
    }
    out.insert(
        "pendingApprovals".into(),
        Value::Array(
            state
                .pending
                .values()
                .filter_map(pending_approval)
                .collect(),
        ),
    );
    out.insert(
        "pendingInteractions".into(),
        Value::Array(
            state
                .pending
                .values()
                .map(|i| pending_interaction(thread_id, i))
                .collect(),
        ),
    );
    out.insert("transcriptCompleteness".into(), json!("complete"));
    out.insert("eventCursor".into(), json!(event_cursor));
    Value::Object(out)
}

/// The recovery projection (1.3+): thread metadata, the checkpoint and the active turn only, so
/// it always fits one frame whatever the thread's size.
pub fn recovery_snapshot(
    thread_id: &str,
    state: &ThreadState,
    event_cursor: Option<String>,
) -> Value {
    let mut summary = summary_of(thread_id, state);
    summary.title = summary
        .title
        .map(|t| truncate_js(&t, MAX_RECOVERY_METADATA_CHARS));
    summary.model = summary
        .model
        .map(|m| truncate_js(&m, MAX_RECOVERY_METADATA_CHARS));
    let mut out = Map::new();
    out.insert("thread".into(), thread_summary(&summary));
    out.insert(
        "messages".into(),
        json!({"items": [], "nextBeforeSequence": null}),
    );
    out.insert(
        "operations".into(),
        json!({"items": [], "nextBeforeSequence": null}),
    );
    if let Some(turn) = active_turn(state) {
        out.insert("activeTurn".into(), turn);
    }
    out.insert("pendingApprovals".into(), json!([]));
    out.insert("pendingInteractions".into(), json!([]));
    out.insert("transcriptCompleteness".into(), json!("complete"));
    out.insert("eventCursor".into(), json!(event_cursor));
    out.insert("recoveryProjection".into(), json!(true));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_764_590_400_123), "2025-12-01T12:00:00.123Z");
    }

    #[test]
    fn truncation_counts_utf16_units_and_keeps_whole_characters() {
        assert_eq!(truncate_js("abc", 5), "abc");
        assert_eq!(truncate_js("a😀b", 2), "a");
        assert_eq!(truncate_js("a😀b", 3), "a😀");
    }

    /// Every durable event kind, as the core stores it.
    fn stored_events() -> Vec<ThreadEvent> {
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
        turn_id: Option<Text<'a>>,
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
        let envelope = stamped(wire, event.turn_id().map(Field::Typed), version);
        Some(serde_json::to_value(envelope).unwrap())
    }

    /// A stored event read through its view is sent as the same bytes as its decode, on every
    /// version; the kinds the view does not read are the ones replay decodes.
    #[test]
    fn viewed_events_are_sent_as_their_decode_is() {
        let mut events = stored_events();
        events.push(ThreadEvent::MessageCompleted {
            turn_id: "t \"2\"".into(),
            stream_id: "s\u{1}".into(),
            text: "line\nbreak é 😀 \\ </script>".into(),
        });
        for event in events {
            let payload = serde_json::to_vec(&agentwire_runtime::StampedEvent {
                at_ms: 1_764_590_400_123,
                event: event.clone(),
            })
            .unwrap();
            let Some(view) = agentwire_runtime::event::view::StoredView::parse(&payload) else {
                assert!(
                    matches!(
                        event,
                        ThreadEvent::InteractionOpened { .. }
                            | ThreadEvent::InteractionResolved { .. }
                    ),
                    "{} is not viewed",
                    event.kind()
                );
                continue;
            };
            for version in agentwire_roll::SUPPORTED_VERSIONS {
                let decoded = durable_event(&event)
                    .and_then(|wire| wire.project(version))
                    .map(|wire| {
                        let mut envelope =
                            stamped(wire, event.turn_id().map(Field::Typed), version);
                        envelope.timestamp = Timestamp(1_764_590_400_123);
                        serde_json::to_string(&envelope).unwrap()
                    });
                let viewed = viewed_event(&view.event).project(version).map(|wire| {
                    let mut envelope =
                        stamped(wire, view.event.turn_id().map(Field::Stored), version);
                    envelope.timestamp = Timestamp(view.at_ms);
                    serde_json::to_string(&envelope).unwrap()
                });
                assert_eq!(viewed, decoded, "{} on {version}", event.kind());
            }
        }
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

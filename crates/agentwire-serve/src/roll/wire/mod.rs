//! The Roll wire shapes of the core's records, built in the newest version's form (1.5) and
//! projected down per connection by `agentwire_roll::project`, and the `runtime.event`
//! envelopes, written as bytes by one writer (`envelope`) from one typed event whose
//! `project` holds the face's version rules for events (`event`). Pure functions and
//! per-connection writers: no I/O.

use std::time::{Duration, UNIX_EPOCH};

use agentwire_roll::constants::{MAX_RECOVERY_METADATA_CHARS, js_length};
use agentwire_runtime::{
    AttachmentDescriptor, Interaction, InteractionKind, Message, MessagePart, Operation,
    Resolution, Role, ThreadState, ThreadSummary,
};
use serde_json::{Map, Value, json};

mod envelope;
mod event;

pub use envelope::{Durability, EnvelopeWriter};
pub use event::{
    DecodedEvent, JsonText, RuntimeEvent, StoredEvent, ToolCompleted, durable_event, live_event,
    stored_event,
};

/// An RFC 3339 timestamp (UTC, milliseconds) of a time in milliseconds since the Unix epoch.
pub fn timestamp(ms: u64) -> String {
    Timestamp(ms).to_string()
}

/// A time in milliseconds since the Unix epoch as its RFC 3339 [`timestamp`], displayed
/// without building the string first.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp(pub u64);

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.0)).fmt(f)
    }
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
    out.insert("thread".into(), thread_summary(&state.summary(thread_id)));
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
    let mut summary = state.summary(thread_id);
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
}

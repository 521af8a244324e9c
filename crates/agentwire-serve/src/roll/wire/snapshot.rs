//! The typed results of the method table built from the core's records, in the 1.5 form:
//! thread summaries, snapshots (full and recovery), operation views, attachment descriptors.
//! `agentwire_roll::project` brings them to the connection's version.

use agentwire_roll::constants::MAX_RECOVERY_METADATA_CHARS;
use agentwire_roll::generated::{
    SharedAppOutputDescriptorInvalid, SharedAppOutputDescriptorNotProvided,
};
use agentwire_roll::ids::{ApprovalId, AttachmentId, InteractionId, OperationId, ThreadId, TurnId};
use agentwire_roll::types as roll;
use agentwire_roll::user_input::Control;
use agentwire_roll::{EventCursor, approval::PendingApproval};
use agentwire_runtime::{
    AttachmentDescriptor, Interaction, InteractionKind, Message, MessagePart, Operation, Role,
    ThreadState, ThreadSummary,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{timestamp, truncate_js};

/// A core record that has no form in the protocol's types (an id that is not a protocol id, a
/// stored form that no longer reads): a defect of the record, answered as an internal error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} has no Roll form: {reason}")]
pub struct WireError {
    what: &'static str,
    reason: String,
}

fn typed<T: DeserializeOwned>(what: &'static str, value: &Value) -> Result<T, WireError> {
    T::deserialize(value).map_err(|e| WireError {
        what,
        reason: e.to_string(),
    })
}

/// A core value (an enum of the core, a wire name) read as the protocol's type.
pub fn wire_value<T: DeserializeOwned>(
    what: &'static str,
    value: impl Serialize,
) -> Result<T, WireError> {
    let value = serde_json::to_value(value).map_err(|e| WireError {
        what,
        reason: e.to_string(),
    })?;
    typed(what, &value)
}

fn id<T: DeserializeOwned>(what: &'static str, text: &str) -> Result<T, WireError> {
    typed(what, &Value::String(text.to_owned()))
}

/// Whether `id` is a Roll thread id (a UUID): a thread of another id, which a host of another
/// face may choose, is not served over Roll.
pub fn is_thread_id(id: &str) -> bool {
    self::id::<ThreadId>("a thread id", id).is_ok()
}

/// A `ThreadSummary` of a served thread.
pub fn thread_summary(summary: &ThreadSummary) -> Result<roll::ThreadSummary, WireError> {
    Ok(roll::ThreadSummary {
        id: id::<ThreadId>("a thread id", &summary.id)?,
        title: summary.title.clone(),
        model: summary.model.clone(),
        created_at: timestamp(summary.created_at_ms),
        updated_at: timestamp(summary.updated_at_ms),
        message_count: summary.message_count,
    })
}

/// An `AttachmentDescriptor`: never a path or content.
pub fn attachment_descriptor(
    descriptor: &AttachmentDescriptor,
) -> Result<roll::AttachmentDescriptor, WireError> {
    Ok(roll::AttachmentDescriptor {
        attachment_id: id::<AttachmentId>("an attachment id", &descriptor.attachment_id)?,
        file_name: descriptor.file_name.clone(),
        display_name: descriptor.display_name.clone(),
        media_type: wire_value("a media type", descriptor.media_type.as_str())?,
        bytes: descriptor.bytes,
        sha_256: descriptor.sha256.clone(),
        source: wire_value("an attachment source", descriptor.source.as_str())?,
        created_at: timestamp(descriptor.created_at_ms),
    })
}

/// A `UiMessage` (1.4+ parts; 1.3 and older keep the text parts by projection).
fn ui_message(message: &Message) -> Result<roll::UiMessage, WireError> {
    let parts = message
        .parts
        .iter()
        .map(|part| {
            Ok(match part {
                MessagePart::Text { text } => roll::MessagePart::Text { text: text.clone() },
                MessagePart::Attachment(attachment) => roll::MessagePart::Attachment {
                    media_type: wire_value("a media type", &attachment.media_type)?,
                    bytes: attachment.bytes,
                    display_name: Some(attachment.display_name.clone()),
                },
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    Ok(roll::UiMessage {
        sequence: message.sequence,
        role: match message.role {
            Role::User => roll::Role::User,
            Role::Assistant => roll::Role::Assistant,
        },
        created_at: timestamp(message.created_at_ms),
        parts,
    })
}

/// The app-output descriptor of an operation: what the tool declared, `not_provided` when it
/// declared none, `invalid` when what it declared is not a descriptor.
fn app_output_descriptor(operation: &Operation) -> roll::AppOutputDescriptor {
    match operation
        .app_output
        .as_ref()
        .and_then(|a| a.get("descriptor"))
    {
        None => roll::AppOutputDescriptor::NotProvided(SharedAppOutputDescriptorNotProvided {}),
        Some(declared) => typed("an app-output descriptor", declared).unwrap_or(
            roll::AppOutputDescriptor::Invalid(SharedAppOutputDescriptorInvalid {}),
        ),
    }
}

/// An `OperationView` (1.5 form, with `appOutput`); `display` is the ledger envelope.
pub fn operation_view(
    sequence: usize,
    operation: &Operation,
    created_at_ms: u64,
) -> Result<roll::OperationView, WireError> {
    Ok(roll::OperationView {
        id: id::<OperationId>("an operation id", &operation.id)?,
        sequence: sequence as u64,
        tool_call_id: operation.tool_call_id.clone(),
        agent_name: operation.agent_name.clone(),
        tool_name: operation.tool_name.clone(),
        created_at: timestamp(created_at_ms),
        outcome: roll::ToolOutcome {
            kind: wire_value("an outcome kind", operation.outcome.kind)?,
            reason: operation.outcome.reason.clone(),
        },
        display: serde_json::json!({"version": 1, "encoding": "json", "value": operation.display}),
        app_output: Some(app_output_descriptor(operation)),
    })
}

/// An `OperationResultView`: the stored app-output result, or the descriptor's status when
/// there is no available result.
pub fn operation_result_view(
    thread_id: &ThreadId,
    operation: &Operation,
    created_at_ms: u64,
) -> Result<roll::OperationResultView, WireError> {
    let output = match operation.app_output.as_ref().and_then(|a| a.get("result")) {
        Some(result) => typed("an app-output result", result)?,
        None => typed(
            "an app-output descriptor",
            &serde_json::to_value(app_output_descriptor(operation)).unwrap_or(Value::Null),
        )?,
    };
    Ok(roll::OperationResultView {
        thread_id: thread_id.clone(),
        operation_id: id::<OperationId>("an operation id", &operation.id)?,
        agent_name: operation.agent_name.clone(),
        tool_name: operation.tool_name.clone(),
        created_at: timestamp(created_at_ms),
        output,
    })
}

/// The `PendingApproval`s of a thread's pending interactions.
fn pending_approvals(state: &ThreadState) -> Result<Vec<PendingApproval>, WireError> {
    state
        .pending
        .values()
        .filter_map(super::pending_approval)
        .map(|approval| typed("a pending approval", &approval))
        .collect()
}

/// A `pendingInteractions` item: metadata only, never a preview or submitted values.
fn pending_interaction(
    thread_id: &ThreadId,
    interaction: &Interaction,
) -> Result<roll::PendingInteraction, WireError> {
    let interaction_id = id::<InteractionId>("an interaction id", &interaction.id)?;
    let turn_id = id::<TurnId>("a turn id", &interaction.turn_id)?;
    let expires_at = timestamp(interaction.expires_at_ms);
    Ok(match &interaction.ask {
        InteractionKind::Approval { approval_id, .. } => roll::PendingInteraction::Approval {
            interaction_id,
            thread_id: thread_id.clone(),
            turn_id,
            expires_at,
            sensitivity: Default::default(),
            approval_id: id::<ApprovalId>("an approval id", approval_id)?,
        },
        InteractionKind::UserInput {
            title,
            description,
            controls,
        } => roll::PendingInteraction::UserInput {
            interaction_id,
            thread_id: thread_id.clone(),
            turn_id,
            expires_at,
            sensitivity: Default::default(),
            title: title.clone(),
            description: description.clone(),
            controls: typed::<Vec<Control>>("a form", controls)?,
        },
    })
}

/// The `activeTurn` of a snapshot.
fn active_turn(state: &ThreadState) -> Result<Option<roll::ActiveTurn>, WireError> {
    state
        .active_turn
        .as_ref()
        .map(|turn| {
            Ok(roll::ActiveTurn {
                id: id::<TurnId>("a turn id", &turn.id)?,
                status: wire_value("a turn status", turn.status)?,
                started_at: timestamp(turn.started_at_ms),
            })
        })
        .transpose()
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
    thread_id: &ThreadId,
    state: &ThreadState,
    paging: SnapshotPaging,
    event_cursor: Option<EventCursor>,
) -> Result<roll::ThreadSnapshot, WireError> {
    let messages = state.messages_page(paging.message_before, paging.limit);
    let operations = state.operations_page(paging.operation_before, paging.limit);
    let first_operation = operations
        .next_before
        .map_or(0, |b| usize::try_from(b).unwrap_or(0));
    let operation_items = operations
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
        .collect::<Result<Vec<_>, WireError>>()?;
    Ok(roll::ThreadSnapshot {
        thread: thread_summary(&state.summary(thread_id.as_str()))?,
        messages: roll::MessagePage {
            items: messages
                .items
                .iter()
                .map(|m| ui_message(m))
                .collect::<Result<_, _>>()?,
            next_before_sequence: messages.next_before,
        },
        operations: roll::OperationPage {
            items: operation_items,
            next_before_sequence: operations.next_before,
        },
        active_turn: active_turn(state)?,
        pending_approvals: pending_approvals(state)?,
        pending_interactions: Some(
            state
                .pending
                .values()
                .map(|i| pending_interaction(thread_id, i))
                .collect::<Result<_, _>>()?,
        ),
        transcript_completeness: roll::TranscriptCompleteness::Complete,
        event_cursor: Some(event_cursor),
        recovery_projection: None,
    })
}

/// The recovery projection (1.3+): thread metadata, the checkpoint and the active turn only, so
/// it always fits one frame whatever the thread's size.
pub fn recovery_snapshot(
    thread_id: &ThreadId,
    state: &ThreadState,
    event_cursor: Option<EventCursor>,
) -> Result<roll::ThreadSnapshot, WireError> {
    let mut summary = state.summary(thread_id.as_str());
    summary.title = summary
        .title
        .map(|t| truncate_js(&t, MAX_RECOVERY_METADATA_CHARS));
    summary.model = summary
        .model
        .map(|m| truncate_js(&m, MAX_RECOVERY_METADATA_CHARS));
    Ok(roll::ThreadSnapshot {
        thread: thread_summary(&summary)?,
        messages: roll::MessagePage {
            items: Vec::new(),
            next_before_sequence: None,
        },
        operations: roll::OperationPage {
            items: Vec::new(),
            next_before_sequence: None,
        },
        active_turn: active_turn(state)?,
        pending_approvals: Vec::new(),
        pending_interactions: Some(Vec::new()),
        transcript_completeness: roll::TranscriptCompleteness::Complete,
        event_cursor: Some(event_cursor),
        recovery_projection: Some(true),
    })
}

#[cfg(test)]
mod tests {
    use agentwire_roll::project::project_snapshot;
    use agentwire_roll::{SUPPORTED_VERSIONS, schema};
    use agentwire_runtime::{StampedEvent, ThreadEvent};
    use serde_json::json;

    use super::*;

    const THREAD: &str = "0a78539a-1f2b-4c3d-8e9f-0123456789ab";
    const TURN: &str = "1b78539a-1f2b-4c3d-8e9f-0123456789ab";

    /// A thread with a message, three operations (a declared descriptor, none, one that is not
    /// a descriptor), a pending approval and a pending form, folded as the core folds it.
    fn state() -> ThreadState {
        let operation = |n: u8, app_output: Value| {
            let mut operation = json!({
                "id": format!("2c78539a-1f2b-4c3d-8e9f-01234567890{n}"), "toolCallId": "c",
                "agentName": "demo", "toolName": "shell", "input": {},
                "outcome": {"kind": "success"}, "display": {"text": "done"},
            });
            if !app_output.is_null() {
                operation["appOutput"] = app_output;
            }
            json!({"type": "operation.completed", "turnId": TURN, "operation": operation})
        };
        let interaction = |id: &str, ask: Value| {
            json!({"type": "interaction.opened", "interaction": {
                "id": id, "turnId": TURN, "expiresAtMs": 9_000_000_000_000u64, "ask": ask}})
        };
        let events = [
            json!({"type": "thread.created", "title": "t"}),
            json!({"type": "turn.started", "turnId": TURN, "input": {"text": "hi"}}),
            json!({"type": "message.completed", "turnId": TURN, "streamId": "s", "text": "echo"}),
            operation(
                1,
                json!({"descriptor": {"status": "available", "schemaId": "s", "schemaVersion": 1}}),
            ),
            operation(2, Value::Null),
            operation(3, json!({"descriptor": {"status": "weird"}})),
            interaction(
                "3d78539a-1f2b-4c3d-8e9f-0123456789ab",
                json!({"kind": "approval", "approvalId": "4e78539a-1f2b-4c3d-8e9f-0123456789ab",
                       "agentName": "demo", "toolName": "shell", "preview": {"command": "ls"}}),
            ),
            interaction(
                "5f78539a-1f2b-4c3d-8e9f-0123456789ab",
                json!({"kind": "userInput", "title": "Name?", "controls": [
                    {"type": "text", "id": "name", "label": "Name", "required": true}]}),
            ),
        ];
        let stamped: Vec<StampedEvent> = events
            .into_iter()
            .map(|event| StampedEvent {
                at_ms: 1_764_590_400_000,
                event: serde_json::from_value::<ThreadEvent>(event).unwrap(),
            })
            .collect();
        ThreadState::replay(&stamped).unwrap()
    }

    #[test]
    fn snapshots_are_valid_on_every_version() {
        let state = state();
        let thread = ThreadId::new(THREAD).unwrap();
        let paging = SnapshotPaging {
            message_before: None,
            operation_before: None,
            limit: 10,
        };
        let full = full_snapshot(&thread, &state, paging, None).unwrap();
        let descriptors: Vec<Value> = full
            .operations
            .items
            .iter()
            .map(|op| serde_json::to_value(&op.app_output).unwrap())
            .collect();
        assert_eq!(
            descriptors,
            [
                json!({"status": "available", "schemaId": "s", "schemaVersion": 1}),
                json!({"status": "not_provided"}),
                json!({"status": "invalid"}),
            ]
        );
        assert_eq!(full.pending_approvals.len(), 1);
        assert_eq!(full.pending_interactions.as_ref().map(Vec::len), Some(2));
        let recovery = recovery_snapshot(&thread, &state, None).unwrap();
        for version in SUPPORTED_VERSIONS {
            for snapshot in [&full, &recovery] {
                let projected =
                    serde_json::to_value(project_snapshot(snapshot.clone(), version)).unwrap();
                assert_eq!(
                    schema::validate_definition(version, "sharedThreadSnapshot", &projected),
                    Ok(()),
                    "{version}: {projected}"
                );
            }
        }
    }
}

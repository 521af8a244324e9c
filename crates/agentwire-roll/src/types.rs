//! Wire types of every method, server request, notification and event, as plain serde structs.
//! They are written by hand and held to the schema by tests that round-trip every fixture
//! through them; typed parsing validates against the version's export first, so these types
//! only need to carry what the schema already guarantees.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::{PendingApproval, Sensitivity};
use crate::cursor::EventCursor;
use crate::ids::{
    ApprovalId, AttachmentId, EventId, InteractionId, JsonRpcId, OperationId, RequestId,
    RuntimeInstanceId, StreamId, ThreadId, TurnId,
};
use crate::user_input::Control;

macro_rules! wire_struct {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }
    };
}

wire_struct!(/// Name and version of a client or server.
    PeerInfo { name: String, version: String });
wire_struct!(/// `initialize` params (strict legacy shape; never grew capability fields).
    InitializeParams { protocol_versions: Vec<String>, client: PeerInfo });
wire_struct!(/// Runtime identity in the `initialize` result.
    ServerInfo { name: String, version: String, runtime_version: String });
wire_struct!(/// `initialize` result `limits`.
Limits {
    max_frame_bytes: u64,
    max_page_size: u64,
    event_replay: bool,
    idempotency_cache_entries: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")] max_attachment_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] max_attachment_chunk_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] max_turn_attachments: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] max_staged_attachments: Option<u64>,
});
wire_struct!(/// `initialize` result.
InitializeResult {
    protocol_version: String,
    runtime_instance_id: RuntimeInstanceId,
    server: ServerInfo,
    features: Vec<String>,
    limits: Limits,
});
wire_struct!(/// `client.capabilities.set` params (1.2+).
    ClientCapabilitiesSetParams { revision: u64, server_request_methods: Vec<String> });
wire_struct!(/// `client.capabilities.set` result: the ACK.
    ClientCapabilitiesSetResult { revision: u64, accepted_server_request_methods: Vec<String> });
wire_struct!(/// `thread.list` params.
ThreadListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")] cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")] limit: Option<u64>,
});
wire_struct!(/// A thread in lists and snapshots.
ThreadSummary {
    id: ThreadId,
    #[serde(default, skip_serializing_if = "Option::is_none")] title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")] model: Option<String>,
    created_at: String,
    updated_at: String,
    message_count: u64,
});
wire_struct!(/// `thread.list` result.
    ThreadListResult { items: Vec<ThreadSummary>, next_cursor: Option<String> });
wire_struct!(/// `thread.create` params.
ThreadCreateParams {
    request_id: RequestId,
    #[serde(default, skip_serializing_if = "Option::is_none")] title: Option<String>,
});
wire_struct!(/// `thread.create` and `thread.rename` result.
    ThreadResult { thread: ThreadSummary });
wire_struct!(/// `thread.rename` params.
    ThreadRenameParams { request_id: RequestId, thread_id: ThreadId, title: String });
wire_struct!(/// `thread.delete` and `thread.detach` params.
    ThreadMutationParams { request_id: RequestId, thread_id: ThreadId });
wire_struct!(/// `thread.delete` result.
    ThreadDeleteResult { deleted: bool });
wire_struct!(/// `thread.detach` result.
    ThreadDetachResult { detached: bool });
wire_struct!(/// `thread.open` and `thread.capabilities` params.
    ThreadIdParams { thread_id: ThreadId });
wire_struct!(/// `thread.capabilities` result.
    ThreadCapabilitiesResult { manifest: Value });
wire_struct!(/// `thread.snapshot` params (`recovery` from 1.3).
ThreadSnapshotParams {
    thread_id: ThreadId,
    #[serde(default, skip_serializing_if = "Option::is_none")] message_before_sequence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] operation_before_sequence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")] recovery: Option<bool>,
});

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum MessagePart {
    /// Text.
    Text { text: String },
    /// An attachment reference (1.4+); never content.
    #[serde(rename_all = "camelCase")]
    Attachment {
        media_type: String,
        bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display_name: Option<String>,
    },
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    User,
    Assistant,
}

wire_struct!(/// A transcript message.
    UiMessage { sequence: u64, role: Role, created_at: String, parts: Vec<MessagePart> });
wire_struct!(/// A page of messages, oldest first.
    MessagePage { items: Vec<UiMessage>, next_before_sequence: Option<u64> });
wire_struct!(/// How a tool call ended.
ToolOutcome {
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")] reason: Option<String>,
});
wire_struct!(/// A tool operation view (`appOutput` required from 1.5).
OperationView {
    id: OperationId,
    sequence: u64,
    tool_call_id: String,
    agent_name: String,
    tool_name: String,
    created_at: String,
    outcome: ToolOutcome,
    display: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")] app_output: Option<Value>,
});
wire_struct!(/// A page of operations, oldest first.
    OperationPage { items: Vec<OperationView>, next_before_sequence: Option<u64> });

/// Status of the active turn (`waiting-for-user` from 1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActiveTurnStatus {
    Running,
    Cancelling,
    WaitingForUser,
}

wire_struct!(/// The active turn of a thread.
    ActiveTurn { id: TurnId, status: ActiveTurnStatus, started_at: String });

/// The safe projection of a pending interaction in a snapshot (1.2+).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", deny_unknown_fields)]
pub enum PendingInteraction {
    /// A pending approval: metadata only.
    #[serde(rename = "approval.request", rename_all = "camelCase")]
    Approval {
        interaction_id: InteractionId,
        thread_id: ThreadId,
        turn_id: TurnId,
        expires_at: String,
        sensitivity: Sensitivity,
        approval_id: ApprovalId,
    },
    /// A pending form: metadata and the controls, never submitted values.
    #[serde(rename = "userInput.request", rename_all = "camelCase")]
    UserInput {
        interaction_id: InteractionId,
        thread_id: ThreadId,
        turn_id: TurnId,
        expires_at: String,
        sensitivity: Sensitivity,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        controls: Vec<Control>,
    },
}

/// Whether a transcript is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptCompleteness {
    Complete,
    LegacySnapshot,
}

wire_struct!(/// A thread snapshot (`thread.open`, `thread.snapshot`): full, or from 1.3 a bounded
/// recovery projection (`recovery_projection == Some(true)`, empty pages and lists).
ThreadSnapshot {
    thread: ThreadSummary,
    messages: MessagePage,
    operations: OperationPage,
    #[serde(default, skip_serializing_if = "Option::is_none")] active_turn: Option<ActiveTurn>,
    pending_approvals: Vec<PendingApproval>,
    #[serde(default, skip_serializing_if = "Option::is_none")] pending_interactions: Option<Vec<PendingInteraction>>,
    transcript_completeness: TranscriptCompleteness,
    /// 1.3+: `Some(None)` is "no durable events yet".
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")] event_cursor: Option<Option<EventCursor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")] recovery_projection: Option<bool>,
});

impl ThreadSnapshot {
    /// Whether this is a recovery snapshot.
    pub fn is_recovery(&self) -> bool {
        self.recovery_projection == Some(true)
    }
}

mod nullable {
    //! A present-but-null key as `Some(None)`, an absent key as `None`.
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

wire_struct!(/// `runtime.events.resume` params (1.3+); `after_cursor: None` is the log start.
    RuntimeEventsResumeParams { thread_id: ThreadId, after_cursor: Option<EventCursor> });
wire_struct!(/// `runtime.events.resume` result: the replay-to-live barrier.
    RuntimeEventsResumeResult { through_cursor: Option<EventCursor>, replayed_count: u64 });
wire_struct!(/// `turn.start` input (attachments from 1.4).
TurnInput {
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")] attachments: Option<Vec<AttachmentId>>,
});
wire_struct!(/// `turn.start` params.
    TurnStartParams { request_id: RequestId, thread_id: ThreadId, turn_id: TurnId, input: TurnInput });
wire_struct!(/// `turn.start` result: receipt only; completion arrives as events.
    TurnStartResult { accepted: bool, turn_id: TurnId });
wire_struct!(/// `turn.cancel` params.
    TurnCancelParams { request_id: RequestId, thread_id: ThreadId, turn_id: TurnId });
wire_struct!(/// `turn.cancel` result.
    TurnCancelResult { cancelling: bool });
wire_struct!(/// `approval.respond` result (1.0).
    ApprovalRespondResult { resolved: bool });
wire_struct!(/// `operation.get` and `operation.result.get` params.
    OperationParams { thread_id: ThreadId, operation_id: OperationId });
wire_struct!(/// `operation.get` result.
    OperationGetResult { operation: Option<OperationView> });
wire_struct!(/// A stored app-output result (1.5).
OperationResultView {
    thread_id: ThreadId,
    operation_id: OperationId,
    agent_name: String,
    tool_name: String,
    created_at: String,
    output: Value,
});
wire_struct!(/// `operation.result.get` result (1.5).
    OperationResultGetResult { result: Option<OperationResultView> });
wire_struct!(/// `attachment.stage` params (1.4+).
AttachmentStageParams {
    request_id: RequestId,
    thread_id: ThreadId,
    file_name: String,
    media_type: String,
    bytes: u64,
    sha256: String,
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")] source_path: Option<String>,
});
wire_struct!(/// A staged or committed attachment; never a path or content.
AttachmentDescriptor {
    attachment_id: AttachmentId,
    file_name: String,
    display_name: String,
    media_type: String,
    bytes: u64,
    sha256: String,
    source: String,
    created_at: String,
});
wire_struct!(/// `attachment.stage` result.
AttachmentStageResult {
    attachment_id: AttachmentId,
    state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")] descriptor: Option<AttachmentDescriptor>,
});
wire_struct!(/// `attachment.chunk` params.
AttachmentChunkParams {
    request_id: RequestId,
    thread_id: ThreadId,
    attachment_id: AttachmentId,
    sequence: u64,
    data_base64: String,
});
wire_struct!(/// `attachment.chunk` result.
    AttachmentChunkResult { received_bytes: u64, next_sequence: u64 });
wire_struct!(/// `attachment.commit` and `attachment.release` params.
    AttachmentParams { request_id: RequestId, thread_id: ThreadId, attachment_id: AttachmentId });
wire_struct!(/// `attachment.commit` result.
    AttachmentCommitResult { descriptor: AttachmentDescriptor });
wire_struct!(/// `attachment.release` result.
    AttachmentReleaseResult { released: bool });

wire_struct!(/// `userInput.request` params (1.2+).
UserInputRequestParams {
    interaction_id: InteractionId,
    thread_id: ThreadId,
    turn_id: TurnId,
    expires_at: String,
    sensitivity: Sensitivity,
    #[serde(default, skip_serializing_if = "Option::is_none")] title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")] description: Option<String>,
    controls: Vec<Control>,
});

/// `runtime.serverRequest.cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ServerRequestCancelParams {
    /// 1.2+: names the interaction.
    #[serde(rename_all = "camelCase")]
    Interaction {
        interaction_id: InteractionId,
        reason: String,
    },
    /// 1.1: names the JSON-RPC id of the request.
    #[serde(rename_all = "camelCase")]
    Legacy {
        server_request_id: JsonRpcId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval_id: Option<ApprovalId>,
        reason: String,
    },
}

/// How an approval ended, in `approval.resolved`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ApprovalResolution {
    /// Decided by the user.
    Resolved {
        status: String,
        decision: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Cancelled or expired.
    Ended {
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// A runtime event payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum RuntimeEvent {
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "message.started", rename_all = "camelCase")]
    MessageStarted { stream_id: StreamId },
    #[serde(rename = "message.delta", rename_all = "camelCase")]
    MessageDelta { stream_id: StreamId, delta: String },
    #[serde(rename = "message.completed", rename_all = "camelCase")]
    MessageCompleted { stream_id: StreamId, text: String },
    #[serde(rename = "reasoning.summary.delta", rename_all = "camelCase")]
    ReasoningSummaryDelta { reasoning_id: String, delta: String },
    #[serde(rename = "tool.started", rename_all = "camelCase")]
    ToolStarted {
        tool_call_id: String,
        agent_name: String,
        tool_name: String,
        input: Value,
    },
    #[serde(rename = "tool.output", rename_all = "camelCase")]
    ToolOutput {
        tool_call_id: String,
        agent_name: String,
        tool_name: String,
        stream: String,
        delta: String,
    },
    #[serde(rename = "tool.completed", rename_all = "camelCase")]
    ToolCompleted {
        tool_call_id: String,
        agent_name: String,
        tool_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operation_id: Option<OperationId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<ToolOutcome>,
        display: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app_output: Option<Value>,
    },
    #[serde(rename = "approval.required")]
    ApprovalRequired { approval: PendingApproval },
    #[serde(rename = "approval.resolved", rename_all = "camelCase")]
    ApprovalResolved {
        approval_id: ApprovalId,
        resolution: ApprovalResolution,
    },
    #[serde(rename = "turn.completed")]
    TurnCompleted,
    #[serde(rename = "turn.cancelled")]
    TurnCancelled { reason: String, message: String },
    #[serde(rename = "turn.failed")]
    TurnFailed { stage: String, message: String },
    #[serde(rename = "capabilities.changed")]
    CapabilitiesChanged,
}

impl RuntimeEvent {
    /// Whether 1.3+ stores and replays the event (the rest is live-only).
    pub fn is_durable(&self) -> bool {
        !matches!(
            self,
            RuntimeEvent::MessageStarted { .. }
                | RuntimeEvent::MessageDelta { .. }
                | RuntimeEvent::ReasoningSummaryDelta { .. }
                | RuntimeEvent::ToolStarted { .. }
                | RuntimeEvent::ToolOutput { .. }
        )
    }
}

/// Durability class of a 1.3+ event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Durability {
    Durable,
    Ephemeral,
}

wire_struct!(/// `runtime.event` params: the envelope (durability, event id and cursor from 1.3).
RuntimeEventEnvelope {
    protocol_version: String,
    runtime_instance_id: RuntimeInstanceId,
    sequence: u64,
    timestamp: String,
    thread_id: ThreadId,
    #[serde(default, skip_serializing_if = "Option::is_none")] turn_id: Option<TurnId>,
    #[serde(default, skip_serializing_if = "Option::is_none")] durability: Option<Durability>,
    #[serde(default, skip_serializing_if = "Option::is_none")] event_id: Option<EventId>,
    #[serde(default, skip_serializing_if = "Option::is_none")] cursor: Option<EventCursor>,
    event: RuntimeEvent,
});

wire_struct!(/// `error.data` of a Roll error.
ErrorData {
    roll_code: String,
    retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")] details: Option<Value>,
});

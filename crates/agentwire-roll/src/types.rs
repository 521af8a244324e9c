//! Wire types of every method, server request, notification and event, for every version 1.0
//! to 1.5 at once.
//!
//! Most are the generated ones ([`crate::generated`], from the canonical document
//! `protocols/roll-runtime/roll-runtime.schema.json` with `agentwire gen --all-versions`), named
//! here as users know them. Typed parsing validates against the negotiated version's export
//! first, so one set of types only has to accept every version's messages: a property that not
//! every version has is an `Option`, an enum has the values of every version, and a shape that
//! changed is a union of the shapes. Ids are the newtypes of [`crate::ids`], cursors
//! [`EventCursor`], counts `u64` (`src/generated/rust-types.json` maps them).
//!
//! The types below the aliases are written by hand; each says why.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::{PendingApproval, Sensitivity};
use crate::cursor::EventCursor;
use crate::generated as g;
use crate::ids::{
    ApprovalId, EventId, InteractionId, JsonRpcId, OperationId, RequestId, RuntimeInstanceId,
    StreamId, ThreadId, TurnId,
};
use crate::user_input::Control;

/// Name and version of a client (`initialize` params `client`).
pub type PeerInfo = g::InitializeParamsClient;
/// `initialize` params (strict legacy shape; never grew capability fields).
pub use g::InitializeParams;
/// Runtime identity in the `initialize` result.
pub type ServerInfo = g::InitializeResultServer;
/// `initialize` result `limits` (the attachment limits from 1.4).
pub type Limits = g::InitializeResultLimits;
/// `initialize` result.
pub use g::InitializeResult;
/// A feature a runtime announces in the `initialize` result.
pub type FeatureName = g::SharedFeature;
/// `client.capabilities.set` params (1.2+).
pub use g::ClientCapabilitiesSetParams;
/// `client.capabilities.set` result: the ACK.
pub use g::ClientCapabilitiesSetResult;
/// A server request method a client may accept in `client.capabilities.set`.
pub type ServerRequestMethodName = g::ClientCapabilitiesSetResultAcceptedServerRequestMethodsItem;
/// `thread.list` params.
pub use g::ThreadListParams;
/// A thread in lists and snapshots.
pub type ThreadSummary = g::SharedThreadSummary;
/// `thread.create` params.
pub use g::ThreadCreateParams;
/// `thread.list` result.
pub use g::ThreadListResult;
/// `thread.create` and `thread.rename` result.
pub type ThreadResult = g::ThreadCreateResult;
/// `thread.rename` params.
pub use g::ThreadRenameParams;
/// `thread.delete` and `thread.detach` params.
pub type ThreadMutationParams = g::ThreadDeleteParams;
/// `thread.delete` result.
pub use g::ThreadDeleteResult;
/// `thread.detach` result.
pub use g::ThreadDetachResult;
/// `thread.open` and `thread.capabilities` params.
pub type ThreadIdParams = g::ThreadOpenParams;
/// `thread.capabilities` result.
pub use g::ThreadCapabilitiesResult;
/// `thread.snapshot` params (`recovery` from 1.3).
pub use g::ThreadSnapshotParams;
/// Who wrote a message.
pub type Role = g::SharedUiMessageRole;
/// A transcript message.
pub type UiMessage = g::SharedUiMessage;
/// A page of messages, oldest first.
pub type MessagePage = g::SharedMessagePage;
/// How a tool call ended.
pub type ToolOutcome = g::SharedToolOutcome;
/// The kind of a [`ToolOutcome`].
pub type ToolOutcomeKind = g::SharedToolOutcomeKind;
/// What became of a tool's structured app output (1.5); never the data.
pub type AppOutputDescriptor = g::SharedAppOutputDescriptor;
/// A tool operation view (`appOutput` from 1.5).
pub type OperationView = g::SharedOperationView;
/// A page of operations, oldest first.
pub type OperationPage = g::SharedOperationPage;
/// Status of the active turn (`waiting-for-user` from 1.2).
pub type ActiveTurnStatus = g::SharedActiveTurnStatus;
/// The active turn of a thread.
pub type ActiveTurn = g::SharedActiveTurn;
/// Whether a transcript is complete.
pub type TranscriptCompleteness = g::SharedThreadSnapshotFullTranscriptCompleteness;
/// `runtime.events.resume` params (1.3+); `after_cursor: None` is the log start.
pub use g::RuntimeEventsResumeParams;
/// `runtime.events.resume` result: the replay-to-live barrier.
pub use g::RuntimeEventsResumeResult;
/// `turn.start` input (attachments from 1.4).
pub type TurnInput = g::TurnStartInput;
/// `approval.respond` result (1.0).
pub use g::ApprovalRespondResult;
/// `turn.cancel` params.
pub use g::TurnCancelParams;
/// `turn.cancel` result.
pub use g::TurnCancelResult;
/// `turn.start` params.
pub use g::TurnStartParams;
/// `turn.start` result: receipt only; completion arrives as events.
pub use g::TurnStartResult;
/// `operation.get` and `operation.result.get` params.
pub type OperationParams = g::OperationGetParams;
/// `operation.get` result.
pub use g::OperationGetResult;
/// A stored app-output result (1.5).
pub type OperationResultView = g::SharedOperationResultView;
/// A stored app output (1.5).
pub type AppOutput = g::SharedAppOutput;
/// `operation.result.get` result (1.5).
pub use g::OperationResultGetResult;
/// A staged or committed attachment; never a path or content.
pub type AttachmentDescriptor = g::SharedAttachmentDescriptor;
/// The media type of an attachment.
pub type AttachmentMediaType = g::SharedAttachmentMediaType;
/// Where an attachment's bytes come from.
pub type AttachmentSource = g::SharedAttachmentSource;
/// `attachment.stage` result.
pub use g::AttachmentStageResult;
/// The state in an [`AttachmentStageResult`].
pub type AttachmentState = g::AttachmentStageResultState;
/// `attachment.chunk` params.
pub use g::AttachmentChunkParams;
/// `attachment.chunk` result.
pub use g::AttachmentChunkResult;
/// `attachment.commit` and `attachment.release` params.
pub type AttachmentParams = g::AttachmentCommitParams;
/// `attachment.commit` result.
pub use g::AttachmentCommitResult;
/// `attachment.release` result.
pub use g::AttachmentReleaseResult;
/// `userInput.request` params (1.2+).
pub use g::UserInputRequestParams;
/// `error.data` of a Roll error.
pub type ErrorData = g::ErrorResponseErrorData;
/// A Roll error code as it appears in `error.data.rollCode`.
pub type RollCodeName = g::SharedRollErrorCode;

/// One part of a message.
///
/// Written by hand: a tagged union whose variants are struct variants matched by field
/// (`MessagePart::Text { text }`); the generator makes each variant a newtype of a separate
/// struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum MessagePart {
    /// Text.
    Text { text: String },
    /// An attachment reference (1.4+); never content.
    #[serde(rename_all = "camelCase")]
    Attachment {
        media_type: AttachmentMediaType,
        bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display_name: Option<String>,
    },
}

/// The safe projection of a pending interaction in a snapshot (1.2+).
///
/// Written by hand for the same reason as [`MessagePart`] (tagged by `method`).
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

/// A thread snapshot (`thread.open`, `thread.snapshot`): full, or from 1.3 a bounded recovery
/// projection (`recovery_projection == Some(true)`, empty pages and lists).
///
/// Written by hand: the schema's union of a full and a recovery snapshot is one struct here, so
/// that a client reads `thread`, `active_turn` and `event_cursor` the same way from either; the
/// recovery shape's inline thread and page types are the full ones with fewer keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadSnapshot {
    /// The thread.
    pub thread: ThreadSummary,
    /// The newest page of messages (empty in a recovery snapshot).
    pub messages: MessagePage,
    /// The newest page of operations (empty in a recovery snapshot).
    pub operations: OperationPage,
    /// The active turn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_turn: Option<ActiveTurn>,
    /// Approvals waiting for a decision.
    pub pending_approvals: Vec<PendingApproval>,
    /// 1.2+: interactions waiting for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_interactions: Option<Vec<PendingInteraction>>,
    /// Whether the transcript is complete.
    pub transcript_completeness: TranscriptCompleteness,
    /// 1.3+: `Some(None)` is "no durable events yet".
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub event_cursor: Option<Option<EventCursor>>,
    /// 1.3+: `Some(true)` in a recovery snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_projection: Option<bool>,
}

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

/// `attachment.stage` params (1.4+).
///
/// Written by hand: the schema's `oneOf` ties `sourcePath` to `source` (required for
/// `local-path`, absent for `chunks`) by refining declared properties, which the generator lowers
/// as a union of fragments rather than leaving it to the validator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachmentStageParams {
    /// Idempotency key.
    pub request_id: RequestId,
    /// The thread the attachment is for.
    pub thread_id: ThreadId,
    /// The file name shown to the agent.
    pub file_name: String,
    /// The media type.
    pub media_type: AttachmentMediaType,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, lower-case hex (named as the generated types name `sha256`).
    #[serde(rename = "sha256")]
    pub sha_256: String,
    /// Where the bytes come from.
    pub source: AttachmentSource,
    /// The local path, for `source: local-path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_path: Option<String>,
}

/// `runtime.serverRequest.cancel` params.
///
/// Written by hand: the generated union names its shapes by version (`Since12`, `Since11`);
/// these names say what each shape identifies.
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
///
/// Written by hand: the schema's four branches share the tag value `resolved` (so the generated
/// union is untagged, `Variant1` to `Variant4`) and differ in the `status` and `decision` values
/// they allow and in whether `reason` is required (rules the validator checks); two shapes carry
/// what a host reads.
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
///
/// Written by hand for the same reason as [`MessagePart`] (tagged by `type`, matched by field:
/// `RuntimeEvent::MessageDelta { delta, .. }`).
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
        app_output: Option<AppOutputDescriptor>,
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
///
/// Written by hand: the schema spells it as one constant per envelope shape, so the generated
/// types have one single-value enum per shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Durability {
    Durable,
    Ephemeral,
}

/// `runtime.event` params: the envelope (durability, event id and cursor from 1.3).
///
/// Written by hand: the schema's three envelope shapes (1.0-1.2, durable, ephemeral) are one
/// struct here, so that a client reads `sequence`, `thread_id` and `event` the same way from each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeEventEnvelope {
    /// The version the runtime speaks.
    pub protocol_version: String,
    /// The runtime process; `sequence` is comparable only within one.
    pub runtime_instance_id: RuntimeInstanceId,
    /// Process-local sequence.
    pub sequence: u64,
    /// When the event happened.
    pub timestamp: String,
    /// The thread.
    pub thread_id: ThreadId,
    /// The turn, for turn events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<TurnId>,
    /// 1.3+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
    /// 1.3+, durable events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
    /// 1.3+, durable events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<EventCursor>,
    /// The payload.
    pub event: RuntimeEvent,
}

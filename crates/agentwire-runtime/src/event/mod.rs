//! The durable events of a thread, as the runtime stores them (one JSON object per event, the
//! `type` tag naming it) and the records they carry. Ephemeral happenings (message deltas, tool
//! output, reasoning summaries) are not here: they are never stored.

mod decode;
pub mod view;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decision::{Binding, Decision, Via};

/// One durable event and the time the runtime stamped it (milliseconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StampedEvent {
    /// When the runtime produced the event.
    pub at_ms: u64,
    /// The event.
    pub event: ThreadEvent,
}

/// What happened to a thread. Each variant is one durable record of its log. Decoded by
/// `decode` (the tag first, without buffering), by the same field rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum ThreadEvent {
    /// The thread exists; always its first event.
    #[serde(rename = "thread.created")]
    ThreadCreated {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The thread it was forked from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_thread_id: Option<String>,
        /// The name the host that created it gave it, when that is not its id (a face whose
        /// protocol names threads otherwise than by UUID shows it instead of the id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alias: Option<String>,
    },
    /// The thread's title changed.
    #[serde(rename = "thread.renamed")]
    ThreadRenamed { title: String },
    /// The thread was deleted; nothing may follow.
    #[serde(rename = "thread.deleted")]
    ThreadDeleted,
    /// The thread was archived: it is kept and read, and takes no new turn.
    #[serde(rename = "thread.archived")]
    ThreadArchived,
    /// A turn began with the user's input (which becomes the thread's next user message).
    #[serde(rename = "turn.started")]
    TurnStarted { turn_id: String, input: TurnInput },
    /// The active turn's status changed (waiting for the user, running again, cancelling).
    #[serde(rename = "turn.status")]
    TurnStatusChanged { turn_id: String, status: TurnStatus },
    /// The agent finished a message.
    #[serde(rename = "message.completed")]
    MessageCompleted {
        turn_id: String,
        stream_id: String,
        text: String,
    },
    /// A tool operation ended.
    #[serde(rename = "operation.completed")]
    OperationCompleted {
        turn_id: String,
        operation: Operation,
    },
    /// An approval or a user-input form awaits the host.
    #[serde(rename = "interaction.opened")]
    InteractionOpened { interaction: Interaction },
    /// A pending interaction ended: decided, submitted, cancelled or expired.
    #[serde(rename = "interaction.resolved")]
    InteractionResolved {
        interaction_id: String,
        /// The turn the interaction belonged to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        /// The approval's domain id when the interaction was an approval (so the event says
        /// what it resolved without the event that opened it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval_id: Option<String>,
        resolution: Resolution,
        /// What settled an approval: the kind of the host's decision, an earlier grant, or why
        /// there was no decision to take ([`Via`]). Absent for user input, and for an approval
        /// the runtime ended (expired, cancelled with its turn).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<Via>,
        /// The host's decision on an approval, as taken (with the grants it gives).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<Decision>,
    },
    /// The turn ended normally.
    #[serde(rename = "turn.completed")]
    TurnCompleted { turn_id: String },
    /// The turn was cancelled.
    #[serde(rename = "turn.cancelled")]
    TurnCancelled {
        turn_id: String,
        reason: String,
        message: String,
    },
    /// The turn failed at a stage.
    #[serde(rename = "turn.failed")]
    TurnFailed {
        turn_id: String,
        stage: FailStage,
        message: String,
    },
    /// What the thread's agent offers changed.
    #[serde(rename = "capabilities.changed")]
    CapabilitiesChanged,
    /// A turn opened a durable human task: a decision people must take before the turn's
    /// gated step (its node) may run.
    #[serde(rename = "human_task.opened")]
    HumanTaskOpened { task: HumanTask },
    /// One actor's decision on an open human task, checked against its binding and rules; the
    /// fold settles the task when it reaches the quorum or refuses (see `ThreadState`).
    #[serde(rename = "human_task.decided")]
    HumanTaskDecided {
        task_id: String,
        turn_id: String,
        actor_id: String,
        decision: Decision,
    },
    /// An open human task was cancelled (by a host, or because its turn stopped or ended).
    #[serde(rename = "human_task.cancelled")]
    HumanTaskCancelled {
        task_id: String,
        turn_id: String,
        reason: String,
    },
    /// An open human task reached its deadline undecided.
    #[serde(rename = "human_task.expired")]
    HumanTaskExpired { task_id: String, turn_id: String },
    /// An open human task got a new nonce (the runtime restarted): answers carrying the old
    /// one, from cards issued before, are refused.
    #[serde(rename = "human_task.reissued")]
    HumanTaskReissued {
        task_id: String,
        turn_id: String,
        nonce: String,
    },
}

impl ThreadEvent {
    /// The turn the event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            ThreadEvent::TurnStarted { turn_id, .. }
            | ThreadEvent::TurnStatusChanged { turn_id, .. }
            | ThreadEvent::MessageCompleted { turn_id, .. }
            | ThreadEvent::OperationCompleted { turn_id, .. }
            | ThreadEvent::TurnCompleted { turn_id }
            | ThreadEvent::TurnCancelled { turn_id, .. }
            | ThreadEvent::TurnFailed { turn_id, .. } => Some(turn_id),
            ThreadEvent::InteractionOpened { interaction } => Some(&interaction.turn_id),
            ThreadEvent::InteractionResolved { turn_id, .. } => turn_id.as_deref(),
            ThreadEvent::HumanTaskOpened { task } => Some(&task.turn_id),
            ThreadEvent::HumanTaskDecided { turn_id, .. }
            | ThreadEvent::HumanTaskCancelled { turn_id, .. }
            | ThreadEvent::HumanTaskExpired { turn_id, .. }
            | ThreadEvent::HumanTaskReissued { turn_id, .. } => Some(turn_id),
            ThreadEvent::ThreadCreated { .. }
            | ThreadEvent::ThreadRenamed { .. }
            | ThreadEvent::ThreadDeleted
            | ThreadEvent::ThreadArchived
            | ThreadEvent::CapabilitiesChanged => None,
        }
    }

    /// Whether the event is part of the thread's public timeline: what every observer of the
    /// thread sees happen (turns, messages, operations, approvals and their outcomes, capability
    /// changes). Bookkeeping (thread lifecycle, turn status, user-input forms) is not. Faces
    /// number timeline events gap-free ([`ThreadState::timeline`](crate::ThreadState)).
    pub fn is_timeline(&self) -> bool {
        match self {
            ThreadEvent::TurnStarted { .. }
            | ThreadEvent::MessageCompleted { .. }
            | ThreadEvent::OperationCompleted { .. }
            | ThreadEvent::TurnCompleted { .. }
            | ThreadEvent::TurnCancelled { .. }
            | ThreadEvent::TurnFailed { .. }
            | ThreadEvent::CapabilitiesChanged => true,
            ThreadEvent::InteractionOpened { interaction } => {
                matches!(interaction.ask, InteractionKind::Approval { .. })
            }
            ThreadEvent::InteractionResolved { approval_id, .. } => approval_id.is_some(),
            ThreadEvent::ThreadCreated { .. }
            | ThreadEvent::ThreadRenamed { .. }
            | ThreadEvent::ThreadDeleted
            | ThreadEvent::ThreadArchived
            | ThreadEvent::TurnStatusChanged { .. }
            // Human tasks are read through the state (`ThreadState::human_tasks`) and the
            // faces that serve them; they are not numbered in the timeline (yet).
            | ThreadEvent::HumanTaskOpened { .. }
            | ThreadEvent::HumanTaskDecided { .. }
            | ThreadEvent::HumanTaskCancelled { .. }
            | ThreadEvent::HumanTaskExpired { .. }
            | ThreadEvent::HumanTaskReissued { .. } => false,
        }
    }

    /// The `type` tag, as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            ThreadEvent::ThreadCreated { .. } => "thread.created",
            ThreadEvent::ThreadRenamed { .. } => "thread.renamed",
            ThreadEvent::ThreadDeleted => "thread.deleted",
            ThreadEvent::ThreadArchived => "thread.archived",
            ThreadEvent::TurnStarted { .. } => "turn.started",
            ThreadEvent::TurnStatusChanged { .. } => "turn.status",
            ThreadEvent::MessageCompleted { .. } => "message.completed",
            ThreadEvent::OperationCompleted { .. } => "operation.completed",
            ThreadEvent::InteractionOpened { .. } => "interaction.opened",
            ThreadEvent::InteractionResolved { .. } => "interaction.resolved",
            ThreadEvent::TurnCompleted { .. } => "turn.completed",
            ThreadEvent::TurnCancelled { .. } => "turn.cancelled",
            ThreadEvent::TurnFailed { .. } => "turn.failed",
            ThreadEvent::CapabilitiesChanged => "capabilities.changed",
            ThreadEvent::HumanTaskOpened { .. } => "human_task.opened",
            ThreadEvent::HumanTaskDecided { .. } => "human_task.decided",
            ThreadEvent::HumanTaskCancelled { .. } => "human_task.cancelled",
            ThreadEvent::HumanTaskExpired { .. } => "human_task.expired",
            ThreadEvent::HumanTaskReissued { .. } => "human_task.reissued",
        }
    }
}

/// What the user sent to start a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnInput {
    /// The text (may be empty when attachments are present).
    pub text: String,
    /// Committed attachments, as message parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentPart>,
}

/// An attachment as it appears in a message: never a path or the content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachmentPart {
    /// The attachment's id.
    pub attachment_id: String,
    /// Its media type.
    pub media_type: String,
    /// Its size.
    pub bytes: u64,
    /// The sanitised name shown to people.
    pub display_name: String,
}

/// Status of the active turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnStatus {
    /// The agent is working.
    Running,
    /// An interaction awaits the user.
    WaitingForUser,
    /// A cancel was asked for and is in progress.
    Cancelling,
}

/// The stage a turn failed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailStage {
    /// Before the agent started.
    Bootstrap,
    /// While planning.
    Plan,
    /// While executing (also: the runtime stopped during the turn).
    Execute,
}

impl FailStage {
    /// Parses the wire name.
    pub fn parse(text: &str) -> Option<FailStage> {
        match text {
            "bootstrap" => Some(FailStage::Bootstrap),
            "plan" => Some(FailStage::Plan),
            "execute" => Some(FailStage::Execute),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailStage::Bootstrap => "bootstrap",
            FailStage::Plan => "plan",
            FailStage::Execute => "execute",
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The host's user (turn input).
    User,
    /// The agent.
    Assistant,
}

/// A part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum MessagePart {
    /// Text.
    Text { text: String },
    /// An attachment.
    Attachment(AttachmentPart),
}

/// A message of the transcript, in the order the fold saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Position among the thread's messages, from 0.
    pub sequence: u64,
    /// Who wrote it.
    pub role: Role,
    /// The turn it belongs to.
    pub turn_id: String,
    /// When it was recorded.
    pub created_at_ms: u64,
    /// Its parts.
    pub parts: Vec<MessagePart>,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// It ran and succeeded.
    Success,
    /// The user rejected its approval (or let it expire).
    UserRejected,
    /// A policy refused it.
    PolicyDenied,
    /// Its input was invalid.
    InvalidInput,
    /// The turn was cancelled while it ran.
    Cancelled,
    /// It ran and failed.
    ToolFailed,
}

/// A tool call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolOutcome {
    /// The kind.
    pub kind: OutcomeKind,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A completed tool operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operation {
    /// The operation's id.
    pub id: String,
    /// The agent's id of the tool call.
    pub tool_call_id: String,
    /// The agent that called it.
    pub agent_name: String,
    /// The tool.
    pub tool_name: String,
    /// The input the tool got.
    pub input: Value,
    /// How it ended.
    pub outcome: ToolOutcome,
    /// What to show (text, or the file-change `{text, diff}` shape).
    pub display: Value,
    /// An app-output descriptor and its stored result, when the tool produced one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_output: Option<Value>,
}

/// What a pending interaction asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum InteractionKind {
    /// Approve or reject a tool call.
    Approval {
        /// The domain id of the approval.
        approval_id: String,
        /// The agent asking.
        agent_name: String,
        /// The tool it wants to run.
        tool_name: String,
        /// What the user decides on (command, explanation, diff preview).
        preview: Value,
        /// Why approval is needed, when a classifier said so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Fill in a form.
    UserInput {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The controls, as the form rules define them.
        controls: Value,
    },
}

impl InteractionKind {
    /// The approval's domain id, for an approval.
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            InteractionKind::Approval { approval_id, .. } => Some(approval_id),
            InteractionKind::UserInput { .. } => None,
        }
    }
}

/// An approval or user-input request with its absolute deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Interaction {
    /// The interaction's id (stable across re-deliveries).
    pub id: String,
    /// The turn it belongs to.
    pub turn_id: String,
    /// When it expires.
    pub expires_at_ms: u64,
    /// What it asks.
    pub ask: InteractionKind,
    /// What an approval's decision is bound to ([`Binding`]); absent for user input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
}

/// How an interaction ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "status",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Resolution {
    /// The user approved.
    Approved,
    /// The user rejected.
    Rejected {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The user submitted the form (values normalised against it).
    Submitted { values: Value },
    /// It was cancelled (by the user, the turn, a revoked handler, or a restart).
    Cancelled { reason: String },
    /// Its deadline passed.
    Expired,
}

/// Most actors a human task's quorum may require (the protocol's bound).
pub const MAX_HUMAN_TASK_QUORUM: u8 = 64;

/// A durable human task as it was opened: a decision people take on an operation before the
/// turn's gated step (`node_id`) runs, bound to the run (`turn_id`), its revision, the
/// operation and a nonce, with a quorum of accepting actors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanTask {
    /// The task's id.
    pub id: String,
    /// The turn (the run) it gates.
    pub turn_id: String,
    /// The gated step of the run.
    pub node_id: String,
    /// The attempt of that step.
    pub attempt_id: String,
    /// `sha256:` of the run's revision when the task was opened.
    pub revision_digest: String,
    /// `sha256:` of the operation's canonical JSON text.
    pub operation_digest: String,
    /// What the actors decide on.
    pub operation: Value,
    /// The nonce an answer must carry (a restart issues a new one: `human_task.reissued`).
    pub nonce: String,
    /// When it expires undecided.
    pub expires_at_ms: u64,
    /// Accepting decisions of (with separation of duties, distinct) actors that decide it,
    /// 1..=64.
    pub quorum: u8,
    /// Whether one actor may decide only once.
    pub separation_of_duties: bool,
}

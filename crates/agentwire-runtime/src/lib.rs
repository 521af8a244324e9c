//! The reference runtime core, without wire encoding: what a thread is (its messages,
//! operations, active turn and pending interactions) as a fold of its durable events
//! ([`state`]), the events themselves ([`event`]), the running core that serves threads from the
//! event log and drives turns on an agent ([`core`]), the bounded idempotency cache of mutations
//! ([`idempotency`]), a host's decision on an approval ([`decision`]), the attachments hosts stage for turns ([`attachments`]), and the scripted
//! demo agent ([`demo`] its commands, [`agent`] the agent). Other agents implement [`Agent`] on
//! this crate's public API (the agent process adapter is `agentwire-agent-process`).
//! Faces translate this into their wire protocols; the event log stores the events as opaque
//! payloads.

pub mod agent;
pub mod attachments;
pub mod core;
pub mod decision;
pub mod demo;
pub mod event;
pub mod human_task;
pub mod idempotency;
pub mod state;

pub use agent::DemoAgent;
pub use attachments::{
    AttachmentDescriptor, AttachmentError, AttachmentLimits, AttachmentSource, AttachmentState,
    AttachmentStore, ChunkProgress, MediaType, StageRequest, StageSource, Staged,
};
pub use core::{
    Agent, Answer, CHECKPOINT_AT_TURN_END_FRACTION, CHECKPOINT_EVERY_EVENTS, Clock,
    DEFAULT_SUBSCRIBER_QUEUE_BYTES, HumanTaskAnswer, HumanTaskOutcome, HumanTaskSpec, LiveEvent,
    MAX_FAILURE_MESSAGE_BYTES, ManualClock, NewThread, Published, Runtime, RuntimeConfig,
    RuntimeError, Scope, Sleep, Subscription, SystemClock, ThreadSummary, TurnContext, TurnEnd,
};
pub use decision::{ApprovalBinding, Binding, Decision, DecisionKind, PermissionGrant, Via};
pub use demo::DemoCommand;
pub use event::{
    AttachmentPart, FailStage, HumanTask, Interaction, InteractionKind, Message, MessagePart,
    Operation, OutcomeKind, Resolution, Role, StampedEvent, ThreadEvent, ToolOutcome, TurnInput,
    TurnStatus,
};
pub use human_task::{HumanTaskDecision, HumanTaskState, HumanTaskStatus};
pub use idempotency::{Admission, Fingerprint, IdempotencyLimits, IdempotencyStore, fingerprint};
pub use state::{ActiveTurn, FoldError, Page, ThreadState};

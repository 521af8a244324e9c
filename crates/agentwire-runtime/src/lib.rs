//! The reference runtime core, without wire encoding and without I/O: what a thread is (its
//! messages, operations, active turn and pending interactions) as a fold of its durable events
//! ([`state`]), the events themselves ([`event`]), the bounded idempotency cache of mutations
//! ([`idempotency`]), and the commands of the scripted demo agent ([`demo`]). Faces translate
//! this into their wire protocols; the event log stores the events as opaque payloads.

pub mod demo;
pub mod event;
pub mod idempotency;
pub mod state;

pub use demo::DemoCommand;
pub use event::{
    AttachmentPart, FailStage, Interaction, InteractionKind, Message, MessagePart, Operation,
    OutcomeKind, Resolution, Role, StampedEvent, ThreadEvent, ToolOutcome, TurnInput, TurnStatus,
};
pub use idempotency::{Admission, IdempotencyCache};
pub use state::{ActiveTurn, FoldError, Page, ThreadState};

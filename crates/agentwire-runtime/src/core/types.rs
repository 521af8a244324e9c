//! The core's public vocabulary: where the time comes from, a runtime's settings, what
//! subscribers receive (durable and live events), a thread's summary, why a call was refused,
//! how a turn ended, and the [`Agent`] trait a turn runs on.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::Value;

use super::TurnContext;
use crate::event::{FailStage, StampedEvent};
use crate::state::FoldError;

/// Where the time comes from (milliseconds since the Unix epoch).
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// Settings of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// How long an interaction waits for the host before it expires.
    pub interaction_ttl: Duration,
    /// How many published events a slow subscriber may lag before it misses some (it is told).
    pub subscriber_capacity: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            // The protocol's runtime deadline for approvals and user input.
            interaction_ttl: Duration::from_secs(5 * 60),
            subscriber_capacity: 4_096,
        }
    }
}

/// An ephemeral happening of a turn: published, never stored, never replayed.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveEvent {
    /// The agent began a message.
    MessageStarted { stream_id: String },
    /// A piece of the message.
    MessageDelta { stream_id: String, delta: String },
    /// A tool call began.
    ToolStarted {
        tool_call_id: String,
        agent_name: String,
        tool_name: String,
        input: Value,
    },
    /// A line of a tool's output.
    ToolOutput {
        tool_call_id: String,
        agent_name: String,
        tool_name: String,
        stream: String,
        delta: String,
    },
}

/// What subscribers receive, in the order the runtime produced it.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    /// A durable event, after its append committed.
    Durable {
        /// The thread.
        thread_id: String,
        /// The event's sequence in the thread's log.
        seq: u64,
        /// The id the log gave it.
        event_id: uuid::Uuid,
        /// Its timeline ordinal, when it is a timeline event ([`ThreadEvent::is_timeline`]).
        ///
        /// [`ThreadEvent::is_timeline`]: crate::event::ThreadEvent::is_timeline
        ordinal: Option<u64>,
        /// The event (boxed: it is copied to every subscriber's queue).
        event: Box<StampedEvent>,
    },
    /// An ephemeral event.
    Live {
        /// The thread.
        thread_id: String,
        /// The turn.
        turn_id: String,
        /// The event.
        event: LiveEvent,
    },
}

/// What a list of threads shows of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSummary {
    /// The thread's id.
    pub id: String,
    /// Its title.
    pub title: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// When it was created.
    pub created_at_ms: u64,
    /// When its last event was stamped.
    pub updated_at_ms: u64,
    /// Messages in its transcript.
    pub message_count: u64,
}

/// Why a runtime call was refused.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No such thread (or it was deleted).
    #[error("thread {0} not found")]
    ThreadNotFound(String),
    /// The thread already has an active turn.
    #[error("thread {thread_id} already has the active turn {active}")]
    TurnAlreadyActive { thread_id: String, active: String },
    /// No such active turn.
    #[error("turn {0} is not active")]
    TurnNotFound(String),
    /// No such pending interaction.
    #[error("interaction {0} is not pending")]
    InteractionNotFound(String),
    /// The input breaks a rule of the core.
    #[error("{0}")]
    InvalidInput(String),
    /// The runtime stopped (its tasks are shutting down) before the call finished.
    #[error("the runtime stopped: {0}")]
    Stopped(String),
    /// The log refused or failed.
    #[error("event log: {0}")]
    Log(#[from] agentwire_events::Error),
    /// A thread's log does not fold (it was not written by this runtime, or was edited).
    #[error("thread {thread_id}: {error}")]
    Fold { thread_id: String, error: FoldError },
    /// A stored event is not one of the core's events.
    #[error("thread {thread_id}: event {seq} cannot be read: {reason}")]
    Undecodable {
        thread_id: String,
        seq: u64,
        reason: String,
    },
}

impl RuntimeError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            RuntimeError::ThreadNotFound(_) => "runtime.thread-not-found",
            RuntimeError::TurnAlreadyActive { .. } => "runtime.turn-already-active",
            RuntimeError::TurnNotFound(_) => "runtime.turn-not-found",
            RuntimeError::InteractionNotFound(_) => "runtime.interaction-not-found",
            RuntimeError::InvalidInput(_) => "runtime.invalid-input",
            RuntimeError::Log(_) => "runtime.log",
            RuntimeError::Fold { .. } => "runtime.fold",
            RuntimeError::Undecodable { .. } => "runtime.undecodable",
            RuntimeError::Stopped(_) => "runtime.stopped",
        }
    }
}

/// How a turn ended, as the agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// Normally.
    Completed,
    /// It failed at a stage.
    Failed { stage: FailStage, message: String },
}

/// An agent: runs one turn at a time per thread, through the context's calls.
#[async_trait]
pub trait Agent: Send + Sync + fmt::Debug {
    /// Runs the turn to its end. A cancelled turn should return soon; whatever it returns, a
    /// cancelled turn ends `turn.cancelled`.
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd;
}

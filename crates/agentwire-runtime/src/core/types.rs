//! The core's public vocabulary: where the time comes from, a runtime's settings, what
//! subscribers receive (durable and live events), a thread's summary, why a call was refused,
//! how a turn ended, and the [`Agent`] trait a turn runs on.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::TurnContext;
use crate::event::{FailStage, StampedEvent};
use crate::state::FoldError;

/// A future that resolves at a time of a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where the time comes from (milliseconds since the Unix epoch), and how to wait for a time of
/// it: every deadline of the core (interaction expiry, turn time limits) is awaited through its
/// clock, so a test clock drives them without sleeping.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now_ms(&self) -> u64;

    /// Resolves once [`now_ms`](Self::now_ms) has reached `at_ms`. The default waits on tokio's
    /// timer for the difference, read now.
    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let wait = at_ms.saturating_sub(self.now_ms());
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
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

/// A clock that moves only when told ([`advance`](Self::advance), [`set`](Self::set)): for
/// tests of deadlines, which then need no sleeping.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
    moved: tokio::sync::watch::Sender<u64>,
}

impl ManualClock {
    /// A clock standing at `now_ms`.
    pub fn new(now_ms: u64) -> ManualClock {
        ManualClock {
            now: AtomicU64::new(now_ms),
            moved: tokio::sync::watch::Sender::new(now_ms),
        }
    }

    /// Moves the clock forward by `ms`, waking what waits for a time it reaches.
    pub fn advance(&self, ms: u64) {
        let now = self.now.fetch_add(ms, Ordering::SeqCst).saturating_add(ms);
        self.moved.send_replace(now);
    }

    /// Sets the clock to `now_ms`, waking what waits for a time it reaches.
    pub fn set(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
        self.moved.send_replace(now_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            // An error means the clock is gone: nothing will move it again.
            if moved.wait_for(|now| *now >= at_ms).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Settings of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// How long an interaction waits for the host before it expires (at most: an interaction
    /// of a turn with a time limit expires when the turn's time runs out, if that is sooner).
    pub interaction_ttl: Duration,
    /// How long a turn may run before it is stopped and ends `failed` (no limit when `None`).
    pub turn_timeout: Option<Duration>,
    /// The bytes of events a subscriber's queue holds. A subscriber that falls further behind
    /// stops receiving copies and catches up from the log when it reads again
    /// ([`Subscription`](super::Subscription)).
    pub subscriber_queue_bytes: usize,
    /// Completed mutations whose answers the idempotency store keeps, per runtime.
    pub idempotency_entries: usize,
    /// Bytes of kept answers (and their keys) the idempotency store holds at most.
    pub idempotency_bytes: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            // The protocol's runtime deadline for approvals and user input.
            interaction_ttl: Duration::from_secs(5 * 60),
            turn_timeout: None,
            subscriber_queue_bytes: DEFAULT_SUBSCRIBER_QUEUE_BYTES,
            idempotency_entries: crate::idempotency::DEFAULT_IDEMPOTENCY_ENTRIES,
            idempotency_bytes: crate::idempotency::DEFAULT_IDEMPOTENCY_BYTES,
        }
    }
}

/// The default bytes of a subscriber's queue.
pub const DEFAULT_SUBSCRIBER_QUEUE_BYTES: usize = 8 * 1024 * 1024;

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
        /// The event, shared by every subscriber's queue.
        event: Arc<StampedEvent>,
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

impl Published {
    /// The turn the event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            Published::Durable { event, .. } => event.event.turn_id(),
            Published::Live { turn_id, .. } => Some(turn_id),
        }
    }
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
    /// Whether it was archived.
    pub archived: bool,
    /// The thread it was forked from.
    pub parent_thread_id: Option<String>,
    /// The name its creator gave it, when that is not its id.
    pub alias: Option<String>,
}

/// What a thread is created with besides its id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewThread {
    /// Its title.
    pub title: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// The thread it is forked from (which must exist).
    pub parent_thread_id: Option<String>,
    /// The name its creator gave it, when that is not its id (see `ThreadEvent::ThreadCreated`).
    pub alias: Option<String>,
}

/// Why a runtime call was refused.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No such thread (or it was deleted).
    #[error("thread {0} not found")]
    ThreadNotFound(String),
    /// A thread of that id exists, or existed and was deleted (ids are never reused).
    #[error("thread {0} already exists")]
    ThreadExists(String),
    /// The thread was archived: it takes no new turn.
    #[error("thread {0} is archived")]
    ThreadArchived(String),
    /// The thread already has an active turn.
    #[error("thread {thread_id} already has the active turn {active}")]
    TurnAlreadyActive { thread_id: String, active: String },
    /// No such active turn.
    #[error("turn {0} is not active")]
    TurnNotFound(String),
    /// The turn id was already used on this thread: the turn exists (a retry of its start
    /// finds this).
    #[error("turn {turn_id} was already started on thread {thread_id}")]
    TurnAlreadyStarted { thread_id: String, turn_id: String },
    /// The turn id is taken by a turn of another thread (turn ids are unique per store).
    #[error("turn id {turn_id} belongs to thread {thread_id}")]
    TurnIdInUse { turn_id: String, thread_id: String },
    /// No such pending interaction (unknown, already resolved, or of another thread or turn).
    #[error("interaction {0} is not pending")]
    InteractionNotFound(String),
    /// The answer does not fit the interaction (another kind of answer): refused, and the
    /// interaction failed closed.
    #[error("interaction {interaction_id}: {reason}")]
    AnswerRefused {
        interaction_id: String,
        reason: String,
    },
    /// The input breaks a rule of the core.
    #[error("{0}")]
    InvalidInput(String),
    /// The runtime stopped (its tasks are shutting down) before the call finished.
    #[error("the runtime stopped: {0}")]
    Stopped(String),
    /// The log refused or failed.
    #[error("event log: {0}")]
    Log(#[from] agentwire_events::Error),
    /// The commit of a batch of admitted events failed: every event admitted with it or after
    /// it was dropped (nothing of it is published), and the thread's running turn fails.
    #[error("event log: the commit failed: {0}")]
    CommitFailed(Arc<agentwire_events::Error>),
    /// A thread's log does not fold (it was not written by this runtime, or was edited).
    #[error("thread {thread_id}: {error}")]
    Fold { thread_id: String, error: FoldError },
    /// No such human task on the thread (unknown, or forgotten long after it settled).
    #[error("human task {0} not found")]
    HumanTaskNotFound(String),
    /// The human task is settled (decided, cancelled or expired): the first settlement stands
    /// and nothing more is recorded on it.
    #[error("human task {task_id} is {status} already")]
    HumanTaskSettled {
        task_id: String,
        status: &'static str,
    },
    /// An answer's binding names another task than this one: `field` is the first that is not
    /// the task's (`runId`, `revisionDigest`, `operationDigest`, `nonce`).
    #[error("human task {task_id}: the answer's {field} is not the task's")]
    HumanTaskBinding {
        task_id: String,
        field: &'static str,
    },
    /// The human task's deadline passed (it is recorded `expired`).
    #[error("human task {0} expired")]
    HumanTaskExpired(String),
    /// Separation of duties: the actor already decided on the task.
    #[error("human task {task_id}: {actor_id} already decided (separation of duties)")]
    HumanTaskRepeatActor { task_id: String, actor_id: String },
    /// The task's rules refuse the decision otherwise.
    #[error("human task {task_id}: {reason}")]
    HumanTaskRefused { task_id: String, reason: String },
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
            RuntimeError::ThreadExists(_) => "runtime.thread-exists",
            RuntimeError::ThreadArchived(_) => "runtime.thread-archived",
            RuntimeError::TurnAlreadyActive { .. } => "runtime.turn-already-active",
            RuntimeError::TurnNotFound(_) => "runtime.turn-not-found",
            RuntimeError::TurnAlreadyStarted { .. } => "runtime.turn-already-started",
            RuntimeError::TurnIdInUse { .. } => "runtime.turn-id-in-use",
            RuntimeError::InteractionNotFound(_) => "runtime.interaction-not-found",
            RuntimeError::AnswerRefused { .. } => "runtime.answer-refused",
            RuntimeError::InvalidInput(_) => "runtime.invalid-input",
            RuntimeError::Log(_) | RuntimeError::CommitFailed(_) => "runtime.log",
            RuntimeError::Fold { .. } => "runtime.fold",
            RuntimeError::Undecodable { .. } => "runtime.undecodable",
            RuntimeError::Stopped(_) => "runtime.stopped",
            RuntimeError::HumanTaskNotFound(_) => "runtime.human-task-not-found",
            RuntimeError::HumanTaskSettled { .. } => "runtime.human-task-settled",
            RuntimeError::HumanTaskBinding { .. } => "runtime.human-task-binding",
            RuntimeError::HumanTaskExpired(_) => "runtime.human-task-expired",
            RuntimeError::HumanTaskRepeatActor { .. } => "runtime.human-task-repeat-actor",
            RuntimeError::HumanTaskRefused { .. } => "runtime.human-task-refused",
        }
    }

    /// The log's error behind this one, if the log refused or failed.
    pub fn log_error(&self) -> Option<&agentwire_events::Error> {
        match self {
            RuntimeError::Log(error) => Some(error),
            RuntimeError::CommitFailed(error) => Some(error),
            _ => None,
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

    /// Whether a turn the runtime was stopped in the middle of may be run again from its start
    /// when the runtime starts again, instead of failing: the runtime does so for a turn gated
    /// by a durable human task ([`TurnContext::human_task`]). An agent that says yes must come
    /// back to the same task (it asks for the same node) and must not redo what it recorded
    /// before it (the demo agent's `/review` records nothing before its task). No by default.
    fn resumes_turns(&self) -> bool {
        false
    }
}

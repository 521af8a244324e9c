//! The running core: threads served from the durable event log, turns driven by an [`Agent`],
//! interactions awaited with their deadlines, and every event published to subscribers — a
//! durable one only after its append committed. A thread's state changes only by folding an
//! event that the log acknowledged, so what subscribers see, what a snapshot says and what a
//! restart rebuilds are the same thing.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire_events::{After, EventLog, Expected, NewEvent, Position, ThreadId};
use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{Mutex, broadcast, oneshot, watch};

use crate::event::{
    FailStage, Interaction, InteractionKind, Operation, Resolution, StampedEvent, ThreadEvent,
    TurnInput, TurnStatus,
};
use crate::state::{FoldError, ThreadState};

/// Events read per page when a thread is replayed.
const REPLAY_PAGE: usize = 1_000;

/// A thread's state is checkpointed when this many events (or a twentieth of the thread, if
/// that is more) were appended since its last checkpoint.
pub const CHECKPOINT_EVERY_EVENTS: u64 = 1_000;

/// The checkpoint format this build writes and reads.
const CHECKPOINT_FORMAT: u32 = 1;

/// The events after which a thread of `next_position` events is checkpointed again.
fn checkpoint_interval(next_position: u64) -> u64 {
    CHECKPOINT_EVERY_EVENTS.max(next_position / 20)
}

/// A checkpoint's payload.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CheckpointPayload<S> {
    format: u32,
    state: S,
}

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

#[derive(Debug)]
struct ThreadSlot {
    state: Mutex<ThreadState>,
    log_thread: ThreadId,
    /// The events the last checkpoint written (or being written) covers.
    checkpointed: std::sync::atomic::AtomicU64,
}

/// A folded thread and the events its checkpoint covers.
struct Replayed {
    state: ThreadState,
    checkpointed: u64,
}

#[derive(Debug)]
struct Inner {
    log: Arc<dyn EventLog>,
    agent: Arc<dyn Agent>,
    clock: Arc<dyn Clock>,
    config: RuntimeConfig,
    instance_id: String,
    threads: std::sync::Mutex<HashMap<String, Arc<ThreadSlot>>>,
    waiters: std::sync::Mutex<HashMap<String, oneshot::Sender<Resolution>>>,
    cancels: std::sync::Mutex<HashMap<String, watch::Sender<bool>>>,
    /// Turns to end `failed` (with this message) whatever the agent returns.
    failures: std::sync::Mutex<HashMap<String, String>>,
    /// Threads found at start whose log cannot be replayed (trimmed from its start).
    unavailable: std::sync::Mutex<Vec<String>>,
    published: broadcast::Sender<Published>,
}

/// The runtime core. Cheap to clone; every clone is the same runtime.
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Runtime {
    /// Starts a runtime over `log`: replays every thread, and ends what a stop interrupted
    /// (pending interactions `cancelled`, a running turn `failed` at `execute`).
    pub async fn start(
        log: Arc<dyn EventLog>,
        agent: Arc<dyn Agent>,
        clock: Arc<dyn Clock>,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        let (published, _) = broadcast::channel(config.subscriber_capacity.max(1));
        let runtime = Runtime {
            inner: Arc::new(Inner {
                log,
                agent,
                clock,
                config,
                instance_id: uuid::Uuid::new_v4().to_string(),
                threads: Default::default(),
                waiters: Default::default(),
                cancels: Default::default(),
                failures: Default::default(),
                unavailable: Default::default(),
                published,
            }),
        };
        runtime.replay_all().await?;
        Ok(runtime)
    }

    /// This process's identity (a new one at every start).
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    /// Now, by the runtime's clock (milliseconds since the Unix epoch).
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// The log the runtime writes.
    pub fn log(&self) -> &Arc<dyn EventLog> {
        &self.inner.log
    }

    /// Everything published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.inner.published.subscribe()
    }

    async fn replay_all(&self) -> Result<(), RuntimeError> {
        let mut after: Option<agentwire_events::ThreadId> = None;
        loop {
            let page = self.inner.log.threads(after.as_ref(), REPLAY_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.thread.clone());
            for info in page.iter().filter(|info| !info.deleted) {
                let id = info.thread.as_str().to_owned();
                let state = match self.replay_thread(&info.thread).await {
                    Ok(state) => state,
                    // A log trimmed from its start cannot be folded (there is no checkpoint
                    // to start from). The runtime serves the other threads; this one stays in
                    // the log untouched and is reported.
                    Err(RuntimeError::Log(agentwire_events::Error::Expired {
                        low_watermark,
                        ..
                    })) => {
                        tracing::error!(
                            thread = %id,
                            low_watermark,
                            "the thread's log was trimmed from its start and cannot be replayed; it is not served"
                        );
                        self.inner
                            .unavailable
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(id);
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                let checkpointed = state.checkpointed;
                let slot = Arc::new(ThreadSlot {
                    state: Mutex::new(state.state),
                    log_thread: info.thread.clone(),
                    checkpointed: checkpointed.into(),
                });
                let repairs = slot.state.lock().await.repairs_after_restart();
                if !repairs.is_empty() {
                    tracing::info!(thread = %id, repairs = repairs.len(), "ending what the stop interrupted");
                    self.append(&id, &slot, repairs).await?;
                }
                let deleted = slot.state.lock().await.deleted;
                if deleted {
                    // Deleted, but the stop came before its events were removed.
                    self.inner.log.delete_thread(&info.thread).await?;
                } else {
                    self.lock_threads().insert(id, slot);
                }
            }
        }
        Ok(())
    }

    /// Folds a thread's log, from its checkpoint when it has a usable one: one this build
    /// reads, which covers the events up to the first one the log still holds.
    async fn replay_thread(&self, thread: &ThreadId) -> Result<Replayed, RuntimeError> {
        let id = thread.as_str();
        let mut state = ThreadState::default();
        let mut after = After::Start;
        let mut checkpointed = 0;
        if let Some(checkpoint) = self.inner.log.checkpoint(thread).await? {
            match serde_json::from_slice::<CheckpointPayload<ThreadState>>(&checkpoint.payload) {
                Ok(payload)
                    if payload.format == CHECKPOINT_FORMAT
                        && payload.state.next_position == checkpoint.through + 1 =>
                {
                    state = payload.state;
                    checkpointed = state.next_position;
                    after = After::Position(Position {
                        log_id: self.inner.log.log_id(),
                        seq: checkpoint.through,
                    });
                }
                Ok(_) => tracing::warn!(
                    thread = %id,
                    "the thread's checkpoint is of another format; the log is folded from its start"
                ),
                Err(error) => tracing::warn!(
                    thread = %id,
                    %error,
                    "the thread's checkpoint does not decode; the log is folded from its start"
                ),
            }
        }
        loop {
            let page = self.inner.log.read(thread, after, REPLAY_PAGE).await?;
            for stored in &page.events {
                let event: StampedEvent = serde_json::from_slice(&stored.payload).map_err(|e| {
                    RuntimeError::Undecodable {
                        thread_id: id.to_owned(),
                        seq: stored.seq,
                        reason: e.to_string(),
                    }
                })?;
                state
                    .apply(stored.seq, &event)
                    .map_err(|error| RuntimeError::Fold {
                        thread_id: id.to_owned(),
                        error,
                    })?;
            }
            match page.events.last() {
                Some(last) if !page.at_head() => {
                    after = After::Position(last.position(self.inner.log.log_id()));
                }
                _ => break,
            }
        }
        Ok(Replayed {
            state,
            checkpointed,
        })
    }

    /// Writes the thread's checkpoint in the background when enough events were appended since
    /// the last one. Called under the thread's lock with its state.
    fn checkpoint_if_due(&self, thread_id: &str, slot: &ThreadSlot, state: &ThreadState) {
        use std::sync::atomic::Ordering;
        let covered = slot.checkpointed.load(Ordering::Relaxed);
        let next = state.next_position;
        if next == 0 || next.saturating_sub(covered) < checkpoint_interval(next) {
            return;
        }
        slot.checkpointed.store(next, Ordering::Relaxed);
        let state = state.clone();
        let log = Arc::clone(&self.inner.log);
        let thread = slot.log_thread.clone();
        let thread_id = thread_id.to_owned();
        tokio::spawn(async move {
            let encoded = tokio::task::spawn_blocking(move || {
                serde_json::to_vec(&CheckpointPayload {
                    format: CHECKPOINT_FORMAT,
                    state: &state,
                })
            })
            .await;
            let result = match encoded {
                Ok(Ok(payload)) => log
                    .put_checkpoint(
                        &thread,
                        agentwire_events::Checkpoint {
                            through: next - 1,
                            payload,
                        },
                    )
                    .await
                    .map_err(|e| e.to_string()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match result {
                Ok(()) => {
                    tracing::debug!(thread = %thread_id, through = next - 1, "checkpoint written")
                }
                // The next due checkpoint tries again; until then a restart folds more events.
                Err(error) => {
                    tracing::warn!(thread = %thread_id, %error, "the thread's checkpoint was not written")
                }
            }
        });
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ThreadSlot>>> {
        self.inner
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn slot(&self, thread_id: &str) -> Result<Arc<ThreadSlot>, RuntimeError> {
        self.lock_threads()
            .get(thread_id)
            .cloned()
            .ok_or_else(|| RuntimeError::ThreadNotFound(thread_id.to_owned()))
    }

    /// Appends `events` to the thread in one commit, folds them, then publishes them. See
    /// [`append_with`](Self::append_with).
    async fn append(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        events: Vec<ThreadEvent>,
    ) -> Result<(), RuntimeError> {
        self.append_with(thread_id, slot, move |_| events).await
    }

    /// Appends the events `make` builds from the thread's current state (under the thread's
    /// lock, so nothing changes between reading the state and writing), folds them, then
    /// publishes them. The fold is checked first, so nothing that would not fold is ever
    /// written. The work runs in its own task: a caller that stops waiting cannot leave a
    /// committed append unfolded.
    async fn append_with<F>(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        make: F,
    ) -> Result<(), RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Vec<ThreadEvent> + Send + 'static,
    {
        let runtime = self.clone();
        let slot = Arc::clone(slot);
        let thread = thread_id.to_owned();
        tokio::spawn(async move { runtime.append_now(&thread, &slot, make).await })
            .await
            .unwrap_or_else(|e| Err(RuntimeError::Stopped(e.to_string())))
    }

    async fn append_now<F>(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        make: F,
    ) -> Result<(), RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Vec<ThreadEvent>,
    {
        let mut state = slot.state.lock().await;
        let events = make(&state);
        if events.is_empty() {
            return Ok(());
        }
        let at_ms = self.inner.clock.now_ms();
        let stamped: Vec<StampedEvent> = events
            .into_iter()
            .map(|event| StampedEvent { at_ms, event })
            .collect();
        state
            .check_batch(&stamped)
            .map_err(|error| RuntimeError::Fold {
                thread_id: thread_id.to_owned(),
                error,
            })?;
        let records = stamped
            .iter()
            .map(|e| {
                serde_json::to_vec(e)
                    .map(|payload| NewEvent::new(e.event.kind(), payload))
                    .map_err(|error| {
                        RuntimeError::InvalidInput(format!(
                            "cannot encode {}: {error}",
                            e.event.kind()
                        ))
                    })
            })
            .collect::<Result<Vec<NewEvent>, RuntimeError>>()?;
        let appended = self
            .inner
            .log
            .append(
                &slot.log_thread,
                Expected::Next(state.next_position),
                records,
            )
            .await?;
        let mut ordinals = Vec::with_capacity(stamped.len());
        for event in &stamped {
            // Checked above: the fold cannot refuse what it accepted on the probe.
            let position = state.next_position;
            if let Err(error) = state.apply(position, event) {
                tracing::error!(thread = %thread_id, %error, "a checked event did not fold");
            }
            ordinals.push(
                event
                    .event
                    .is_timeline()
                    .then(|| state.timeline.len() as u64 - 1),
            );
        }
        if !state.deleted {
            self.checkpoint_if_due(thread_id, slot, &state);
        }
        drop(state);
        for (offset, ((event, event_id), ordinal)) in stamped
            .into_iter()
            .zip(appended.event_ids)
            .zip(ordinals)
            .enumerate()
        {
            // No subscriber is not an error: publication is for whoever listens.
            let _ = self.inner.published.send(Published::Durable {
                thread_id: thread_id.to_owned(),
                seq: appended.first_seq + offset as u64,
                event_id,
                ordinal,
                event: Box::new(event),
            });
        }
        Ok(())
    }

    fn publish_live(&self, thread_id: &str, turn_id: &str, event: LiveEvent) {
        let _ = self.inner.published.send(Published::Live {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            event,
        });
    }

    /// Creates a thread; returns its id.
    pub async fn create_thread(
        &self,
        title: Option<String>,
        model: Option<String>,
    ) -> Result<String, RuntimeError> {
        let id = uuid::Uuid::new_v4().to_string();
        let slot = Arc::new(ThreadSlot {
            state: Mutex::new(ThreadState::default()),
            log_thread: ThreadId::new(id.clone())?,
            checkpointed: 0.into(),
        });
        self.append(
            &id,
            &slot,
            vec![ThreadEvent::ThreadCreated { title, model }],
        )
        .await?;
        self.lock_threads().insert(id.clone(), slot);
        Ok(id)
    }

    /// Renames a thread.
    pub async fn rename_thread(&self, thread_id: &str, title: String) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        self.append(thread_id, &slot, vec![ThreadEvent::ThreadRenamed { title }])
            .await
    }

    /// Deletes a thread: a running turn is cancelled first, then the deletion is recorded.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let active = slot
            .state
            .lock()
            .await
            .active_turn
            .as_ref()
            .map(|t| t.id.clone());
        if let Some(turn_id) = active {
            self.signal_cancel(&turn_id);
        }
        let pending: Vec<String> = slot.state.lock().await.pending.keys().cloned().collect();
        for id in pending {
            self.wake(
                &id,
                Resolution::Cancelled {
                    reason: "the thread was deleted".into(),
                },
            );
        }
        self.append(thread_id, &slot, vec![ThreadEvent::ThreadDeleted])
            .await?;
        self.lock_threads().remove(thread_id);
        // Published and committed first, so observers see the deletion; then the events go
        // (the log keeps the thread's tombstone). A stop in between is finished at start.
        self.inner.log.delete_thread(&slot.log_thread).await?;
        Ok(())
    }

    /// Threads the log holds but the runtime does not serve, because their log was trimmed
    /// from its start before this runtime started (a fold needs the thread's first event).
    pub fn unavailable_threads(&self) -> Vec<String> {
        self.inner
            .unavailable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether the runtime serves the thread.
    pub fn contains_thread(&self, thread_id: &str) -> bool {
        self.lock_threads().contains_key(thread_id)
    }

    /// The ids of the threads served, sorted.
    pub fn thread_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock_threads().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Every served thread's summary, oldest first (by creation time, then id), so a list
    /// paged by index stays stable while threads are added.
    pub async fn summaries(&self) -> Vec<ThreadSummary> {
        let slots: Vec<(String, Arc<ThreadSlot>)> = self
            .lock_threads()
            .iter()
            .map(|(id, slot)| (id.clone(), Arc::clone(slot)))
            .collect();
        let mut out = Vec::with_capacity(slots.len());
        for (id, slot) in slots {
            let state = slot.state.lock().await;
            out.push(ThreadSummary {
                id,
                title: state.title.clone(),
                model: state.model.clone(),
                created_at_ms: state.created_at_ms,
                updated_at_ms: state.updated_at_ms,
                message_count: state.messages.len() as u64,
            });
        }
        out.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        out
    }

    /// A copy of a thread's state. [`Runtime::inspect`] reads part of it without the copy.
    pub async fn snapshot(&self, thread_id: &str) -> Result<ThreadState, RuntimeError> {
        self.inspect(thread_id, ThreadState::clone).await
    }

    /// What `read` takes from a thread's state, read under the thread's lock (no copy of the
    /// state; keep `read` short, turns of the thread wait for it).
    pub async fn inspect<R>(
        &self,
        thread_id: &str,
        read: impl FnOnce(&ThreadState) -> R,
    ) -> Result<R, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let state = slot.state.lock().await;
        Ok(read(&state))
    }

    /// Starts a turn and runs it on the agent in the background; returns once `turn.started`
    /// committed.
    pub async fn start_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        input: TurnInput,
    ) -> Result<(), RuntimeError> {
        if turn_id.is_empty() {
            return Err(RuntimeError::InvalidInput("a turn needs an id".into()));
        }
        let slot = self.slot(thread_id)?;
        if let Some(active) = &slot.state.lock().await.active_turn {
            return Err(RuntimeError::TurnAlreadyActive {
                thread_id: thread_id.to_owned(),
                active: active.id.clone(),
            });
        }
        self.append(
            thread_id,
            &slot,
            vec![ThreadEvent::TurnStarted {
                turn_id: turn_id.to_owned(),
                input: input.clone(),
            }],
        )
        .await?;
        let (cancel_tx, cancel_rx) = watch::channel(false);
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(turn_id.to_owned(), cancel_tx);
        let context = TurnContext {
            runtime: self.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            input,
            cancel: cancel_rx.clone(),
        };
        let runtime = self.clone();
        let agent = Arc::clone(&self.inner.agent);
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        tokio::spawn(async move {
            let end = tokio::spawn(async move { agent.run_turn(context).await }).await;
            let cancelled = *cancel_rx.borrow();
            runtime
                .finish_turn(&thread_id, &turn_id, end, cancelled)
                .await;
        });
        Ok(())
    }

    async fn finish_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        end: Result<TurnEnd, tokio::task::JoinError>,
        cancelled: bool,
    ) {
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(turn_id);
        let Ok(slot) = self.slot(thread_id) else {
            // Deleted while the turn ran: nothing more to record.
            return;
        };
        let failure = self
            .inner
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(turn_id);
        let turn_id = turn_id.to_owned();
        let terminal = match (failure, cancelled, end) {
            (Some(message), _, _) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage: FailStage::Execute,
                message,
            },
            (None, true, _) => ThreadEvent::TurnCancelled {
                turn_id: turn_id.clone(),
                reason: "cancelled".into(),
                message: "the turn was cancelled".into(),
            },
            (None, false, Ok(TurnEnd::Completed)) => ThreadEvent::TurnCompleted {
                turn_id: turn_id.clone(),
            },
            (None, false, Ok(TurnEnd::Failed { stage, message })) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage,
                message,
            },
            (None, false, Err(_)) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage: FailStage::Execute,
                message: "the agent stopped unexpectedly".into(),
            },
        };
        let runtime = self.clone();
        // The interactions still pending are read under the thread's lock, with the append: an
        // answer landing meanwhile cannot make the end of the turn unrecordable.
        let make = move |state: &ThreadState| {
            let mut events: Vec<ThreadEvent> = state
                .pending
                .iter()
                .map(|(id, interaction)| {
                    runtime.forget_waiter(id);
                    ThreadEvent::InteractionResolved {
                        interaction_id: id.clone(),
                        turn_id: Some(turn_id.clone()),
                        approval_id: interaction.ask.approval_id().map(str::to_owned),
                        resolution: Resolution::Cancelled {
                            reason: "the turn ended".into(),
                        },
                    }
                })
                .collect();
            events.push(terminal);
            events
        };
        if let Err(error) = self.append_with(thread_id, &slot, make).await {
            tracing::error!(thread = %thread_id, %error, "could not record the end of a turn");
        }
    }

    /// Asks the active turn to stop; true if it was running (its end is recorded when the agent
    /// returns).
    pub async fn cancel_turn(&self, thread_id: &str, turn_id: &str) -> Result<bool, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let status = match &slot.state.lock().await.active_turn {
            Some(active) if active.id == turn_id => active.status,
            _ => return Err(RuntimeError::TurnNotFound(turn_id.to_owned())),
        };
        if status == TurnStatus::Cancelling {
            return Ok(false);
        }
        self.append(
            thread_id,
            &slot,
            vec![ThreadEvent::TurnStatusChanged {
                turn_id: turn_id.to_owned(),
                status: TurnStatus::Cancelling,
            }],
        )
        .await?;
        self.signal_cancel(turn_id);
        Ok(true)
    }

    fn signal_cancel(&self, turn_id: &str) {
        if let Some(cancel) = self
            .inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(turn_id)
        {
            let _ = cancel.send(true);
        }
    }

    /// Resolves a pending interaction (the host's decision, submitted form or cancel). The
    /// caller has already validated the resolution against the interaction: a runtime never
    /// takes an unchecked decision.
    pub async fn resolve(
        &self,
        thread_id: &str,
        interaction_id: &str,
        resolution: Resolution,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        if !slot.state.lock().await.pending.contains_key(interaction_id) {
            return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()));
        }
        if self.wake(interaction_id, resolution) {
            Ok(())
        } else {
            Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()))
        }
    }

    /// Fails closed on a host's answer that cannot be taken (invalid, mismatched, or an error
    /// in place of an answer): the interaction ends `cancelled` with `reason`, and its turn is
    /// stopped and ends `failed` at `execute` with `reason` as its message.
    pub async fn fail_interaction(
        &self,
        thread_id: &str,
        interaction_id: &str,
        reason: &str,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let turn_id = match slot.state.lock().await.pending.get(interaction_id) {
            Some(interaction) => interaction.turn_id.clone(),
            None => return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned())),
        };
        self.inner
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(turn_id.clone(), reason.to_owned());
        self.wake(
            interaction_id,
            Resolution::Cancelled {
                reason: reason.to_owned(),
            },
        );
        self.signal_cancel(&turn_id);
        Ok(())
    }

    /// Hands a resolution to the turn awaiting it; the turn records it. False if none waits.
    fn wake(&self, interaction_id: &str, resolution: Resolution) -> bool {
        let waiter = self
            .inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(interaction_id);
        waiter.is_some_and(|tx| tx.send(resolution).is_ok())
    }

    fn forget_waiter(&self, interaction_id: &str) {
        self.inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(interaction_id);
    }
}

/// What an agent's turn can do: publish live events, record messages and operations, and ask
/// the host.
#[derive(Debug, Clone)]
pub struct TurnContext {
    runtime: Runtime,
    thread_id: String,
    turn_id: String,
    input: TurnInput,
    cancel: watch::Receiver<bool>,
}

impl TurnContext {
    /// The thread.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// What the user sent.
    pub fn input(&self) -> &TurnInput {
        &self.input
    }

    /// Whether the turn was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Resolves when the turn is asked to stop.
    pub async fn cancelled(&self) {
        let mut cancel = self.cancel.clone();
        // An error means the runtime dropped the turn: that is a stop too.
        let _ = cancel.wait_for(|c| *c).await;
    }

    /// Publishes an ephemeral event.
    pub fn live(&self, event: LiveEvent) {
        self.runtime
            .publish_live(&self.thread_id, &self.turn_id, event);
    }

    async fn record(&self, event: ThreadEvent) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(&self.thread_id)?;
        self.runtime
            .append(&self.thread_id, &slot, vec![event])
            .await
    }

    /// Records a completed message.
    pub async fn message(&self, stream_id: &str, text: String) -> Result<(), RuntimeError> {
        self.record(ThreadEvent::MessageCompleted {
            turn_id: self.turn_id.clone(),
            stream_id: stream_id.to_owned(),
            text,
        })
        .await
    }

    /// Records a completed operation.
    pub async fn operation(&self, operation: Operation) -> Result<(), RuntimeError> {
        self.record(ThreadEvent::OperationCompleted {
            turn_id: self.turn_id.clone(),
            operation,
        })
        .await
    }

    /// Asks the host and waits for the resolution: the host's answer, `expired` at the
    /// deadline, or `cancelled` when the turn is stopped. The interaction is recorded (and
    /// published) before it can be answered, and its resolution after.
    pub async fn ask(&self, ask: InteractionKind) -> Result<Resolution, RuntimeError> {
        let runtime = &self.runtime;
        let ttl = runtime.inner.config.interaction_ttl;
        let now = runtime.inner.clock.now_ms();
        let interaction = Interaction {
            id: uuid::Uuid::new_v4().to_string(),
            turn_id: self.turn_id.clone(),
            expires_at_ms: now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            ask,
        };
        let id = interaction.id.clone();
        let approval_id = interaction.ask.approval_id().map(str::to_owned);
        let (tx, rx) = oneshot::channel();
        runtime
            .inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), tx);
        let slot = runtime.slot(&self.thread_id)?;
        let opened = vec![
            ThreadEvent::InteractionOpened { interaction },
            ThreadEvent::TurnStatusChanged {
                turn_id: self.turn_id.clone(),
                status: TurnStatus::WaitingForUser,
            },
        ];
        if let Err(error) = runtime.append(&self.thread_id, &slot, opened).await {
            runtime.forget_waiter(&id);
            return Err(error);
        }
        let resolution = tokio::select! {
            answer = rx => answer.unwrap_or(Resolution::Cancelled { reason: "the runtime dropped the interaction".into() }),
            () = tokio::time::sleep(ttl) => Resolution::Expired,
            () = self.cancelled() => Resolution::Cancelled { reason: "the turn was cancelled".into() },
        };
        runtime.forget_waiter(&id);
        let status = if self.is_cancelled() {
            TurnStatus::Cancelling
        } else {
            TurnStatus::Running
        };
        runtime
            .append(
                &self.thread_id,
                &slot,
                vec![
                    ThreadEvent::InteractionResolved {
                        interaction_id: id,
                        turn_id: Some(self.turn_id.clone()),
                        approval_id,
                        resolution: resolution.clone(),
                    },
                    ThreadEvent::TurnStatusChanged {
                        turn_id: self.turn_id.clone(),
                        status,
                    },
                ],
            )
            .await?;
        Ok(resolution)
    }
}

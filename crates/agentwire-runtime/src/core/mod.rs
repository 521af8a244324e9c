//! The running core: threads served from the durable event log, turns driven by an [`Agent`],
//! interactions awaited with their deadlines, and every event published to subscribers — a
//! durable one only after its append committed. A thread's state changes only by folding an
//! event that the log acknowledged, so what subscribers see, what a snapshot says and what a
//! restart rebuilds are the same thing.
//!
//! This module holds the [`Runtime`], its threads' slots and the append that commits, folds and
//! publishes their events; `types` the core's public vocabulary (clock, settings, published
//! events, errors, the [`Agent`] trait), `replay` rebuilding the threads at start and their
//! checkpoints, `threads` the thread operations, `turns` the turn operations and the
//! [`TurnContext`] an agent runs a turn with, and `interactions` the host's answers handed to
//! the turns that wait for them.

mod interactions;
mod replay;
mod threads;
mod turns;
mod types;

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_events::{EventLog, Expected, NewEvent, ThreadId};
use tokio::sync::{Mutex, broadcast, oneshot, watch};

use crate::event::{Resolution, StampedEvent, ThreadEvent};
use crate::state::ThreadState;

pub use self::replay::CHECKPOINT_EVERY_EVENTS;
pub use self::turns::TurnContext;
pub use self::types::{
    Agent, Clock, LiveEvent, Published, RuntimeConfig, RuntimeError, SystemClock, ThreadSummary,
    TurnEnd,
};

#[derive(Debug)]
struct ThreadSlot {
    state: Mutex<ThreadState>,
    log_thread: ThreadId,
    /// The events the last checkpoint written (or being written) covers.
    checkpointed: std::sync::atomic::AtomicU64,
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
}

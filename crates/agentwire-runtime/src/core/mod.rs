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
mod subscribe;
mod threads;
mod turns;
mod types;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, MutexGuard, PoisonError};

use agentwire_events::{After, EventLog, Expected, NewEvent, Position, ThreadId};
use tokio::sync::{Mutex, oneshot, watch};

use crate::event::{Resolution, StampedEvent, ThreadEvent};
use crate::idempotency::{IdempotencyLimits, IdempotencyStore};
use crate::state::ThreadState;

pub use self::replay::{CHECKPOINT_AT_TURN_END_FRACTION, CHECKPOINT_EVERY_EVENTS};
use self::subscribe::{CommittedPage, Subscriber};
pub use self::subscribe::{Scope, Subscription};
pub use self::turns::TurnContext;
pub use self::types::{
    Agent, Clock, DEFAULT_SUBSCRIBER_QUEUE_BYTES, LiveEvent, ManualClock, Published, RuntimeConfig,
    RuntimeError, Sleep, SystemClock, ThreadSummary, TurnEnd,
};

/// A std mutex's guard, whether or not a holder panicked (the data stays consistent: every
/// critical section here is a plain map or list update).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The controls of a thread's running turn.
#[derive(Debug)]
struct RunningTurn {
    turn_id: String,
    cancel: watch::Sender<bool>,
    /// Set when the turn must end `failed` (with this message) whatever the agent returns.
    failure: Option<String>,
}

#[derive(Debug)]
struct ThreadSlot {
    state: Mutex<ThreadState>,
    log_thread: ThreadId,
    /// The events the last checkpoint written (or being written) covers.
    checkpointed: AtomicU64,
    /// The thread's own subscribers.
    subscribers: std::sync::Mutex<Vec<Arc<Subscriber>>>,
    /// The running turn, while its agent runs.
    running: std::sync::Mutex<Option<RunningTurn>>,
    /// The turn waiting for each pending interaction's resolution, by interaction id.
    waiters: std::sync::Mutex<HashMap<String, oneshot::Sender<Resolution>>>,
    /// The thread's summary as of its last fold, read without waiting for its state's lock.
    summary: std::sync::Mutex<ThreadSummary>,
}

impl ThreadSlot {
    fn new(
        thread_id: &str,
        state: ThreadState,
        checkpointed: u64,
    ) -> Result<ThreadSlot, RuntimeError> {
        Ok(ThreadSlot {
            summary: std::sync::Mutex::new(state.summary(thread_id)),
            state: Mutex::new(state),
            log_thread: ThreadId::new(thread_id)?,
            checkpointed: checkpointed.into(),
            subscribers: Default::default(),
            running: Default::default(),
            waiters: Default::default(),
        })
    }
}

#[derive(Debug)]
struct Inner {
    log: Arc<dyn EventLog>,
    agent: Arc<dyn Agent>,
    clock: Arc<dyn Clock>,
    config: RuntimeConfig,
    instance_id: String,
    threads: std::sync::Mutex<HashMap<String, Arc<ThreadSlot>>>,
    /// Every turn id of the store, with its thread: turn ids are unique per store.
    turn_ids: std::sync::Mutex<HashMap<String, String>>,
    /// Threads found at start whose log cannot be replayed (trimmed from its start).
    unavailable: std::sync::Mutex<Vec<String>>,
    /// Subscribers of every thread.
    subscribers: std::sync::Mutex<Vec<Arc<Subscriber>>>,
    idempotency: IdempotencyStore,
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
        let idempotency = IdempotencyStore::new(
            IdempotencyLimits {
                entries: config.idempotency_entries,
                bytes: config.idempotency_bytes,
                ttl: None,
            },
            Arc::clone(&clock),
        );
        let runtime = Runtime {
            inner: Arc::new(Inner {
                idempotency,
                log,
                agent,
                clock,
                config,
                instance_id: uuid::Uuid::new_v4().to_string(),
                threads: Default::default(),
                turn_ids: Default::default(),
                unavailable: Default::default(),
                subscribers: Default::default(),
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

    /// The runtime's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The runtime's settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// The answers of completed mutations, by (caller scope, key): one store for every face.
    pub fn idempotency(&self) -> &IdempotencyStore {
        &self.inner.idempotency
    }

    /// The log the runtime writes.
    pub fn log(&self) -> &Arc<dyn EventLog> {
        &self.inner.log
    }

    /// Everything published from now on, for every thread (a [`Scope::All`] subscription).
    pub fn subscribe(&self) -> Subscription {
        let subscriber = Arc::new(Subscriber::new(
            Scope::All,
            self.inner.config.subscriber_queue_bytes,
        ));
        lock(&self.inner.subscribers).push(Arc::clone(&subscriber));
        Subscription::new(self.clone(), subscriber, HashMap::new())
    }

    /// One thread's events from now on: every durable event after those its state holds now,
    /// and its ephemeral events.
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`].
    pub async fn subscribe_thread(&self, thread_id: &str) -> Result<Subscription, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let subscriber = Arc::new(Subscriber::new(
            Scope::Thread(thread_id.to_owned()),
            self.inner.config.subscriber_queue_bytes,
        ));
        // Under the state's lock, which every publication of the thread holds: the subscription
        // starts exactly after the events folded so far.
        let state = slot.state.lock().await;
        lock(&slot.subscribers).push(Arc::clone(&subscriber));
        let next = HashMap::from([(thread_id.to_owned(), state.next_position)]);
        drop(state);
        Ok(Subscription::new(self.clone(), subscriber, next))
    }

    fn unsubscribe(&self, subscriber: &Arc<Subscriber>) {
        match &subscriber.scope {
            Scope::All => lock(&self.inner.subscribers).retain(|s| !Arc::ptr_eq(s, subscriber)),
            Scope::Thread(thread_id) => {
                if let Ok(slot) = self.slot(thread_id) {
                    lock(&slot.subscribers).retain(|s| !Arc::ptr_eq(s, subscriber));
                }
            }
        }
    }

    fn lock_threads(&self) -> MutexGuard<'_, HashMap<String, Arc<ThreadSlot>>> {
        lock(&self.inner.threads)
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
        self.append_with(thread_id, slot, move |_| Ok((events, ())))
            .await
    }

    /// One check-and-append: `decide` reads the thread's current state and either refuses (its
    /// error is returned, nothing is written) or gives the events to append and what to return;
    /// under the thread's lock, so nothing changes between the check and the write. The events
    /// are checked against the fold before they are written (nothing that would not fold is
    /// ever written), appended in one commit, folded, then published. The work runs in its own
    /// task: a caller that stops waiting cannot leave a committed append unfolded.
    async fn append_with<T, F>(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        decide: F,
    ) -> Result<T, RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Result<(Vec<ThreadEvent>, T), RuntimeError> + Send + 'static,
        T: Send + 'static,
    {
        let runtime = self.clone();
        let slot = Arc::clone(slot);
        let thread = thread_id.to_owned();
        tokio::spawn(async move { runtime.append_now(&thread, &slot, decide).await })
            .await
            .unwrap_or_else(|e| Err(RuntimeError::Stopped(e.to_string())))
    }

    async fn append_now<T, F>(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        decide: F,
    ) -> Result<T, RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Result<(Vec<ThreadEvent>, T), RuntimeError>,
    {
        let mut state = slot.state.lock().await;
        let (events, out) = decide(&state)?;
        if events.is_empty() {
            return Ok(out);
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
        let weights: Vec<usize> = records.iter().map(NewEvent::record_size).collect();
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
        *lock(&slot.summary) = state.summary(thread_id);
        if !state.deleted {
            let boundary = stamped.iter().any(|e| {
                matches!(
                    e.event,
                    ThreadEvent::ThreadCreated { .. }
                        | ThreadEvent::TurnCompleted { .. }
                        | ThreadEvent::TurnFailed { .. }
                        | ThreadEvent::TurnCancelled { .. }
                )
            });
            self.checkpoint_if_due(thread_id, slot, &state, boundary);
        }
        // Published under the thread's lock, so subscribers see the thread's events in the
        // order of its log.
        for (offset, (((event, event_id), ordinal), weight)) in stamped
            .into_iter()
            .zip(appended.event_ids)
            .zip(ordinals)
            .zip(weights)
            .enumerate()
        {
            let published = Published::Durable {
                thread_id: thread_id.to_owned(),
                seq: appended.first_seq + offset as u64,
                event_id,
                ordinal,
                event: Arc::new(event),
            };
            self.publish(slot, &published, weight);
        }
        drop(state);
        Ok(out)
    }

    /// Offers `published` to the thread's subscribers and to those of every thread.
    fn publish(&self, slot: &ThreadSlot, published: &Published, weight: usize) {
        for subscriber in lock(&slot.subscribers).iter() {
            subscriber.offer(published, weight);
        }
        for subscriber in lock(&self.inner.subscribers).iter() {
            subscriber.offer(published, weight);
        }
    }

    fn publish_live(&self, thread_id: &str, turn_id: &str, event: LiveEvent) {
        let Ok(slot) = self.slot(thread_id) else {
            return;
        };
        let weight = subscribe::live_weight(&event);
        let published = Published::Live {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            event,
        };
        self.publish(&slot, &published, weight);
    }

    /// A page of a thread's committed events from position `from` (at most `limit`), as they
    /// were published: what a subscriber that fell behind reads back.
    async fn committed_events(
        &self,
        thread_id: &str,
        from: u64,
        limit: usize,
    ) -> Result<CommittedPage, RuntimeError> {
        let page = self.stored_events(thread_id, from, limit).await?;
        let mut events = Vec::with_capacity(page.events.len());
        for stored in &page.events {
            let event: StampedEvent =
                serde_json::from_slice(&stored.payload).map_err(|e| RuntimeError::Undecodable {
                    thread_id: thread_id.to_owned(),
                    seq: stored.seq,
                    reason: e.to_string(),
                })?;
            events.push((stored.seq, stored.event_id, event));
        }
        let ordinals: Vec<Option<u64>> = match self.slot(thread_id) {
            Ok(slot) => {
                let state = slot.state.lock().await;
                events
                    .iter()
                    .map(|(seq, _, _)| state.timeline.binary_search(seq).ok().map(|i| i as u64))
                    .collect()
            }
            Err(_) => vec![None; events.len()],
        };
        Ok(CommittedPage {
            at_head: page.at_head(),
            events: events
                .into_iter()
                .zip(ordinals)
                .map(|((seq, event_id, event), ordinal)| Published::Durable {
                    thread_id: thread_id.to_owned(),
                    seq,
                    event_id,
                    ordinal,
                    event: Arc::new(event),
                })
                .collect(),
        })
    }

    /// The identity of the store the runtime runs on (the same across restarts on it).
    pub fn store_id(&self) -> uuid::Uuid {
        self.inner.log.log_id().0
    }

    /// The position of the oldest event the log still holds of a thread (0 when none was
    /// trimmed).
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`] for an id no thread can have; the log's errors.
    pub async fn low_watermark(&self, thread_id: &str) -> Result<u64, RuntimeError> {
        let log_thread = ThreadId::new(thread_id)
            .map_err(|_| RuntimeError::ThreadNotFound(thread_id.to_owned()))?;
        Ok(self
            .inner
            .log
            .thread(&log_thread)
            .await?
            .map_or(0, |info| info.low_watermark))
    }

    /// A page of a thread's stored events from position `from` (at most `limit`), their
    /// payloads as stored: what a face replays without decoding.
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`] for an id no thread can have; the log's errors
    /// (`events.expired` when `from` was trimmed).
    pub async fn stored_events(
        &self,
        thread_id: &str,
        from: u64,
        limit: usize,
    ) -> Result<agentwire_events::Page, RuntimeError> {
        let log_thread = ThreadId::new(thread_id)
            .map_err(|_| RuntimeError::ThreadNotFound(thread_id.to_owned()))?;
        let after = match from {
            0 => After::Start,
            _ => After::Position(Position {
                log_id: self.inner.log.log_id(),
                seq: from - 1,
            }),
        };
        Ok(self.inner.log.read(&log_thread, after, limit).await?)
    }
}

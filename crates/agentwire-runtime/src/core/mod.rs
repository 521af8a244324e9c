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

mod human_tasks;
mod interactions;
mod replay;
mod subscribe;
mod threads;
mod turns;
mod types;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, MutexGuard, PoisonError};

use agentwire_events::{After, EventLog, Expected, NewEvent, Position, ThreadId};
use tokio::sync::{Mutex, oneshot, watch};

use crate::event::{Resolution, StampedEvent, ThreadEvent};
use crate::idempotency::{IdempotencyLimits, IdempotencyStore};
use crate::state::ThreadState;

pub use self::human_tasks::{HumanTaskAnswer, HumanTaskOutcome, HumanTaskSpec};
pub use self::interactions::Answer;
pub use self::replay::{CHECKPOINT_AT_TURN_END_FRACTION, CHECKPOINT_EVERY_EVENTS};
use self::subscribe::{CommittedPage, Subscriber};
pub use self::subscribe::{Scope, Subscription};
pub use self::turns::{MAX_FAILURE_MESSAGE_BYTES, TurnContext};
pub use self::types::{
    Agent, Clock, DEFAULT_SUBSCRIBER_QUEUE_BYTES, LiveEvent, ManualClock, NewThread, Published,
    RuntimeConfig, RuntimeError, Sleep, SystemClock, ThreadSummary, TurnEnd,
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
    /// Events admitted and not yet committed, and the state the checks see.
    outbox: std::sync::Mutex<Outbox>,
    /// Signalled when the outbox has room again or a flush ended.
    room: tokio::sync::Notify,
    /// Signalled after a human-task event of the thread is folded (the turns waiting for a
    /// task read it again).
    tasks_changed: tokio::sync::Notify,
    /// Signalled when admitted events were dropped after a failed commit (the outbox's state is
    /// the committed state again): a turn waiting for another party's resolution of its
    /// interaction records its own if that party's was dropped.
    dropped: tokio::sync::Notify,
}

/// The events of a thread admitted (checked, positioned and encoded) and not yet committed.
#[derive(Debug)]
struct Outbox {
    /// The committed state with every admitted event folded in, without the transcript
    /// ([`ThreadState::probe`]): what the next admission is checked against.
    probe: ThreadState,
    queued: VecDeque<Queued>,
    /// Bytes of the queued records.
    bytes: usize,
    /// Whether a flush task runs.
    flushing: bool,
}

/// One admitted event: a durable one to commit, or an ephemeral one published in its place
/// once everything admitted before it is, so a subscriber sees a turn's events in the order
/// the turn produced them.
#[derive(Debug)]
enum Queued {
    Durable {
        position: u64,
        /// Shared with every subscriber once published.
        stamped: Arc<StampedEvent>,
        /// Taken by the commit.
        record: NewEvent,
        /// The record's size.
        size: usize,
        /// Told when this event, the last of its admission, is committed, folded and published.
        ticket: Option<oneshot::Sender<Result<(), RuntimeError>>>,
    },
    Live {
        published: Published,
        weight: usize,
    },
}

impl Queued {
    fn size(&self) -> usize {
        match self {
            Queued::Durable { size, .. } => *size,
            Queued::Live { weight, .. } => *weight,
        }
    }

    fn turn_id(&self) -> Option<&str> {
        match self {
            Queued::Durable { stamped, .. } => stamped.event.turn_id(),
            Queued::Live { published, .. } => published.turn_id(),
        }
    }

    fn into_ticket(self) -> Option<oneshot::Sender<Result<(), RuntimeError>>> {
        match self {
            Queued::Durable { ticket, .. } => ticket,
            Queued::Live { .. } => None,
        }
    }
}

/// Bytes of admitted records a thread's outbox holds before an admission waits for the
/// flusher: the most one commit takes, so a full outbox is one commit's work.
pub const OUTBOX_BYTES: usize = agentwire_events::DEFAULT_MAX_BATCH_BYTES;

/// Events one commit takes from a thread's outbox at most.
pub const FLUSH_EVENTS: usize = agentwire_events::MAX_PAGE_EVENTS;

impl ThreadSlot {
    fn new(
        thread_id: &str,
        state: ThreadState,
        checkpointed: u64,
    ) -> Result<ThreadSlot, RuntimeError> {
        Ok(ThreadSlot {
            summary: std::sync::Mutex::new(state.summary(thread_id)),
            outbox: std::sync::Mutex::new(Outbox {
                probe: state.probe(),
                queued: VecDeque::new(),
                bytes: 0,
                flushing: false,
            }),
            room: tokio::sync::Notify::new(),
            tasks_changed: tokio::sync::Notify::new(),
            dropped: tokio::sync::Notify::new(),
            state: Mutex::new(state),
            log_thread: ThreadId::new(thread_id)?,
            checkpointed: checkpointed.into(),
            subscribers: Default::default(),
            running: Default::default(),
            waiters: Default::default(),
        })
    }
}

impl ThreadSlot {
    /// Tells the running turn `turn_id` to stop; with a `failure`, it ends `failed` with that
    /// message whatever the agent returns (the first failure stands).
    fn signal_cancel(&self, turn_id: &str, failure: Option<&str>) {
        let mut running = lock(&self.running);
        if let Some(running) = running.as_mut().filter(|r| r.turn_id == turn_id) {
            if let Some(message) = failure {
                running.failure.get_or_insert_with(|| message.to_owned());
            }
            running.cancel.send_replace(true);
        }
    }

    /// Whether turn `turn_id` is stopping, by `state` (its status `cancelling`) or by the
    /// signal its agent was sent: such a turn's status stays `cancelling` whatever it asks.
    fn stopping(&self, state: &ThreadState, turn_id: &str) -> bool {
        state
            .active_turn
            .as_ref()
            .is_some_and(|t| t.id == turn_id && t.status == crate::TurnStatus::Cancelling)
            || lock(&self.running)
                .as_ref()
                .is_some_and(|r| r.turn_id == turn_id && *r.cancel.borrow())
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

    /// Appends `events` to the thread, waiting until they are committed, folded and published.
    /// See [`append_with`](Self::append_with).
    async fn append(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        events: Vec<ThreadEvent>,
    ) -> Result<(), RuntimeError> {
        self.append_with(thread_id, slot, move |_| Ok((events, ())))
            .await
    }

    /// One check-and-append: `decide` reads the thread's state — as it will be once every
    /// event admitted before is committed — and either refuses (its error is returned, nothing
    /// is written) or gives the events to append and what to return. Admitted under the
    /// outbox's lock, so nothing changes between the check and the admission; then waits until
    /// the events are committed in one append, folded and published.
    async fn append_with<T, F>(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        decide: F,
    ) -> Result<T, RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Result<(Vec<ThreadEvent>, T), RuntimeError>,
    {
        let (out, ticket, drive) = self.admit(thread_id, slot, Flusher::Caller, decide).await?;
        if let Some(mut ticket) = ticket {
            let answered = if drive {
                self.drive_flush(thread_id, slot, &mut ticket).await
            } else {
                None
            };
            let answer = match answered {
                Some(answer) => answer,
                None => (&mut ticket).await,
            };
            answer.unwrap_or_else(|_| Err(RuntimeError::Stopped("the flusher ended".into())))?;
        }
        Ok(out)
    }

    /// Admits `events` without waiting for their commit: what a turn records along the way
    /// (messages, operations). They are committed in order with everything else of the thread;
    /// a failed commit fails the running turn.
    async fn append_admitted(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        events: Vec<ThreadEvent>,
    ) -> Result<(), RuntimeError> {
        self.admit(thread_id, slot, Flusher::Task, move |_| Ok((events, ())))
            .await
            .map(|_| ())
    }

    /// The admission: once the outbox has room, `decide` on the outbox's state; its events are
    /// checked against the fold (nothing that would not fold is ever admitted), stamped,
    /// positioned and encoded, and queued for the flusher. When no flusher runs, one is started
    /// ([`Flusher::Task`]), or the caller is told to run it (with [`Flusher::Caller`], the
    /// answer's `true`). Nothing here waits while holding a lock, so a caller that stops
    /// waiting leaves either nothing or a whole admission behind.
    async fn admit<T, F>(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        flusher: Flusher,
        decide: F,
    ) -> Result<(T, Option<oneshot::Receiver<Result<(), RuntimeError>>>, bool), RuntimeError>
    where
        F: FnOnce(&ThreadState) -> Result<(Vec<ThreadEvent>, T), RuntimeError>,
    {
        loop {
            let room = slot.room.notified();
            {
                let outbox = lock(&slot.outbox);
                if outbox.queued.is_empty() || outbox.bytes < OUTBOX_BYTES {
                    break;
                }
            }
            room.await;
        }
        let mut outbox = lock(&slot.outbox);
        let (events, out) = decide(&outbox.probe)?;
        if events.is_empty() {
            return Ok((out, None, false));
        }
        let at_ms = self.inner.clock.now_ms();
        let stamped: Vec<StampedEvent> = events
            .into_iter()
            .map(|event| StampedEvent { at_ms, event })
            .collect();
        // Folded on a copy of the probe, which replaces it once the whole batch is admitted.
        let mut probe = outbox.probe.probe();
        for event in &stamped {
            probe
                .apply_to_probe(event)
                .map_err(|error| RuntimeError::Fold {
                    thread_id: thread_id.to_owned(),
                    error,
                })?;
        }
        let limit = self.inner.log.max_record_bytes();
        let mut records = Vec::with_capacity(stamped.len());
        for event in &stamped {
            let payload = serde_json::to_vec(event).map_err(|error| {
                RuntimeError::InvalidInput(format!("cannot encode {}: {error}", event.event.kind()))
            })?;
            let record = NewEvent::new(event.event.kind(), payload);
            let size = record.record_size();
            if size > limit {
                return Err(agentwire_events::Error::RecordTooLarge { size, limit }.into());
            }
            records.push((record, size));
        }
        let first = outbox.probe.next_position;
        outbox.probe = probe;
        let (tx, rx) = oneshot::channel();
        let mut ticket = Some(tx);
        let last = stamped.len() - 1;
        for (index, (event, (record, size))) in stamped.into_iter().zip(records).enumerate() {
            outbox.bytes += size;
            outbox.queued.push_back(Queued::Durable {
                position: first + index as u64,
                stamped: Arc::new(event),
                size,
                record,
                ticket: if index == last { ticket.take() } else { None },
            });
        }
        let drive = match flusher {
            Flusher::Caller if !outbox.flushing => {
                outbox.flushing = true;
                true
            }
            _ => {
                self.start_flush(thread_id, slot, &mut outbox);
                false
            }
        };
        Ok((out, Some(rx), drive))
    }

    fn start_flush(&self, thread_id: &str, slot: &Arc<ThreadSlot>, outbox: &mut Outbox) {
        if !outbox.flushing {
            outbox.flushing = true;
            self.spawn_flush(thread_id, slot, None);
        }
    }

    /// Starts a flusher task, from `next` (a batch sent already) or from the outbox.
    fn spawn_flush(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        next: Option<(Vec<Queued>, Sent)>,
    ) {
        let (runtime, slot, thread) = (self.clone(), Arc::clone(slot), thread_id.to_owned());
        tokio::spawn(async move { runtime.flush(&thread, &slot, next).await });
    }

    /// The flusher run by the caller that admitted events with none running and waits for
    /// their `ticket`: a batch taken, its append sent, and, when the append was committed within
    /// the send (a log that commits on its caller's thread, finding its writer free) and the
    /// state's lock is free, folded, published and its tickets answered, all without waiting,
    /// until `ticket` is answered. From a commit in flight (or failed) the caller runs the
    /// flusher on its own task until `ticket` is answered
    /// ([`Runtime::flush_until_answered`]), and a batch whose state's lock is held goes to a
    /// flusher task; what is left once `ticket` is answered goes on as a flusher task, so a
    /// caller that stops waiting never leaves a flush half done. For one awaited append on an
    /// idle thread this saves the flusher task's start and the wake-ups between the tasks.
    /// Returns the ticket's answer when it took it.
    async fn drive_flush(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        ticket: &mut Ticket,
    ) -> Option<Result<Result<(), RuntimeError>, oneshot::error::RecvError>> {
        loop {
            let batch = self.take_batch(slot, true)?;
            // Polled once; completes at once when the log committed within the call.
            let (batch, sent) = self.send_batch(slot, batch).await;
            let appended = match sent {
                Sent::Done(Ok(appended)) => appended,
                pending_or_failed => {
                    return self
                        .flush_until_answered(thread_id, slot, (batch, pending_or_failed), ticket)
                        .await;
                }
            };
            let Ok(mut state) = slot.state.try_lock() else {
                self.spawn_flush(thread_id, slot, Some((batch, Sent::Done(Ok(appended)))));
                return None;
            };
            let (tickets, tasks_changed) =
                self.fold_and_publish_locked(thread_id, slot, &mut state, batch, appended);
            drop(state);
            if tasks_changed {
                slot.tasks_changed.notify_waiters();
            }
            for answered in tickets {
                let _ = answered.send(Ok(()));
            }
            if !ticket.is_empty() {
                let outbox = lock(&slot.outbox);
                if outbox.queued.is_empty() {
                    end_flush(slot, outbox);
                } else {
                    drop(outbox);
                    self.spawn_flush(thread_id, slot, None);
                }
                return None;
            }
        }
    }

    /// The thread's flusher, from `next` (a batch whose append is in flight, or failed), run on
    /// the caller's task until `ticket` is answered, whose answer is returned; what is left of
    /// it then, or when the caller stops waiting, goes on as a task
    /// ([`agentwire_events::FinishOnDrop`]). The append's answer wakes the caller itself, not a
    /// flusher task that would then wake it.
    async fn flush_until_answered(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        next: (Vec<Queued>, Sent),
        ticket: &mut Ticket,
    ) -> Option<Result<Result<(), RuntimeError>, oneshot::error::RecvError>> {
        let (runtime, slot, thread) = (self.clone(), Arc::clone(slot), thread_id.to_owned());
        let mut flusher = agentwire_events::FinishOnDrop::new(async move {
            runtime.flush(&thread, &slot, Some(next)).await;
        });
        std::future::poll_fn(|cx| {
            // Only the flusher answers the ticket; once it has, the flusher's rest is a task's.
            let flushed = std::pin::Pin::new(&mut flusher).poll(cx).is_ready();
            match std::pin::Pin::new(&mut *ticket).poll(cx) {
                std::task::Poll::Ready(answer) => std::task::Poll::Ready(Some(answer)),
                std::task::Poll::Pending if flushed => std::task::Poll::Ready(None),
                std::task::Poll::Pending => std::task::Poll::Pending,
            }
        })
        .await
    }

    /// The thread's flusher: commits whatever was admitted while the previous commit ran as
    /// one append (up to [`FLUSH_EVENTS`] events and [`OUTBOX_BYTES`]), then folds, publishes
    /// and answers the tickets of what it committed, until the outbox is empty. Once a commit
    /// is answered, the next batch's append is sent before the answered one is folded, so the
    /// log commits the next batch while this one is folded and published (its positions were
    /// given at admission; a batch is still published only after its own commit, and one
    /// append at most is in flight).
    async fn flush(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        mut next: Option<(Vec<Queued>, Sent)>,
    ) {
        if next.is_none() {
            match self.take_batch(slot, true) {
                Some(batch) => next = Some(self.send_batch(slot, batch).await),
                None => return,
            }
        }
        while let Some((batch, append)) = next.take() {
            match append.outcome().await {
                Ok(appended) => {
                    if let Some(following) = self.take_batch(slot, false) {
                        next = Some(self.send_batch(slot, following).await);
                    }
                    // The append just sent is kept moving while the answered batch is folded: a
                    // log may be committing it on this task, for other callers too.
                    let fold = self.fold_and_publish(thread_id, slot, batch, appended);
                    let tickets = match next.as_mut() {
                        Some((_, sent)) => sent.progress_while(fold).await,
                        None => fold.await,
                    };
                    for ticket in tickets {
                        let _ = ticket.send(Ok(()));
                    }
                }
                Err(error) => {
                    // Nothing is sent behind a batch before its commit is answered.
                    let error = Arc::new(error);
                    self.fail_commit(thread_id, slot, batch, &error).await;
                }
            }
            if next.is_none()
                && let Some(batch) = self.take_batch(slot, true)
            {
                next = Some(self.send_batch(slot, batch).await);
            }
        }
    }

    /// Takes the next batch to commit from the outbox: whole admissions, up to [`FLUSH_EVENTS`]
    /// durable events and [`OUTBOX_BYTES`] (or one admission larger than that), with the
    /// ephemeral events among them. Ephemeral events queued
    /// alone are published on the way when `last` (nothing is in flight before them) and left
    /// queued otherwise. With `last`, an empty outbox ends the flusher.
    fn take_batch(&self, slot: &Arc<ThreadSlot>, last: bool) -> Option<Vec<Queued>> {
        loop {
            let (batch, durable): (Vec<Queued>, usize) = {
                let mut outbox = lock(&slot.outbox);
                let has_durable = outbox
                    .queued
                    .iter()
                    .any(|q| matches!(q, Queued::Durable { .. }));
                if outbox.queued.is_empty() || (!last && !has_durable) {
                    if last {
                        end_flush(slot, outbox);
                    }
                    return None;
                }
                let mut bytes = 0;
                let mut durable = 0;
                let mut count = 0;
                // A batch ends where an admission ends (its last event holds the ticket), so
                // that an admission is committed whole or not at all: `whole` is the batch so
                // far up to the last admission it holds whole, and `open` says that the events
                // taken end inside an admission. An admission larger than the limits alone is
                // taken whole.
                let mut whole = (0, 0, 0);
                let mut open = false;
                for queued in &outbox.queued {
                    let size = queued.size();
                    let is_durable = matches!(queued, Queued::Durable { .. });
                    if durable > 0
                        && is_durable
                        && (durable >= FLUSH_EVENTS || bytes + size > OUTBOX_BYTES)
                    {
                        if !open {
                            break;
                        }
                        if whole.2 > 0 {
                            (count, bytes, durable) = whole;
                            break;
                        }
                    }
                    bytes += size;
                    durable += usize::from(is_durable);
                    count += 1;
                    if let Queued::Durable { ticket, .. } = queued {
                        open = ticket.is_none();
                    }
                    if !open {
                        whole = (count, bytes, durable);
                    }
                }
                outbox.bytes -= bytes;
                (outbox.queued.drain(..count).collect(), durable)
            };
            slot.room.notify_waiters();
            if durable > 0 {
                return Some(batch);
            }
            // Only ephemeral events: nothing to commit before they are published.
            for queued in batch {
                if let Queued::Live { published, weight } = queued {
                    self.publish(slot, &published, weight);
                }
            }
        }
    }

    /// Sends a batch's append to the log: its records are moved out of it, and the append is
    /// polled once, which queues it with the log's writer.
    async fn send_batch(
        &self,
        slot: &Arc<ThreadSlot>,
        mut batch: Vec<Queued>,
    ) -> (Vec<Queued>, Sent) {
        let first = batch
            .iter()
            .find_map(|q| match q {
                Queued::Durable { position, .. } => Some(*position),
                Queued::Live { .. } => None,
            })
            .unwrap_or_default();
        let records: Vec<NewEvent> = batch
            .iter_mut()
            .filter_map(|q| match q {
                Queued::Durable { record, .. } => Some(NewEvent {
                    event_id: record.event_id,
                    kind: std::mem::take(&mut record.kind),
                    payload: std::mem::take(&mut record.payload),
                }),
                Queued::Live { .. } => None,
            })
            .collect();
        let log = Arc::clone(&self.inner.log);
        let thread = slot.log_thread.clone();
        let append = Sent::start(Box::pin(async move {
            log.append(&thread, Expected::Next(first), records).await
        }))
        .await;
        (batch, append)
    }

    /// A failed commit: the thread's state catches up with what its log holds, the batch and
    /// everything admitted after it are dropped, the running turn they belong to is cancelled
    /// with the log's error, and their tickets fail. A batch the log turns out to hold (its
    /// commit's outcome was unknown, and it had committed) is answered committed instead: the
    /// catch-up folded and published it.
    async fn fail_commit(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        batch: Vec<Queued>,
        error: &Arc<agentwire_events::Error>,
    ) {
        let Some(dropped) = self.drop_admitted(thread_id, slot, &batch).await else {
            // Committed after all: what was admitted behind it was positioned after it, and
            // is committed next.
            for ticket in batch.into_iter().filter_map(Queued::into_ticket) {
                let _ = ticket.send(Ok(()));
            }
            return;
        };
        tracing::error!(thread = %thread_id, %error, dropped = batch.len() + dropped.len(),
            "a commit failed; the events admitted with it and after it are dropped");
        let turns: Vec<String> = batch
            .iter()
            .chain(&dropped)
            .filter_map(|q| q.turn_id().map(str::to_owned))
            .collect();
        let running = lock(&slot.running).as_ref().map(|r| r.turn_id.clone());
        if let Some(turn_id) = running.filter(|t| turns.contains(t)) {
            slot.signal_cancel(&turn_id, Some(&format!("the event log failed: {error}")));
        }
        for ticket in batch
            .into_iter()
            .chain(dropped)
            .filter_map(Queued::into_ticket)
        {
            let _ = ticket.send(Err(RuntimeError::CommitFailed(Arc::clone(error))));
        }
    }

    /// After a failed commit of `batch`: the state folds (and publishes) what the log holds
    /// past it ([`Runtime::catch_up`]). When the log holds `batch` as it was sent, that is all,
    /// and `None` is returned. Otherwise everything still admitted is dropped (its positions
    /// followed what was not committed) and returned, and the outbox's state is the state's
    /// again.
    async fn drop_admitted(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        batch: &[Queued],
    ) -> Option<Vec<Queued>> {
        // The state's lock first, then the outbox's: an admission never waits for the state
        // while it holds the outbox.
        let mut state = slot.state.lock().await;
        let committed = match self.catch_up(thread_id, slot, &mut state).await {
            Ok(caught) => {
                let sent = batch.iter().filter_map(|q| match q {
                    Queued::Durable {
                        position, stamped, ..
                    } => Some((*position, stamped)),
                    Queued::Live { .. } => None,
                });
                let mut any = false;
                let mut all = true;
                for (position, stamped) in sent {
                    any = true;
                    all &= caught
                        .iter()
                        .any(|(seq, event)| *seq == position && event == stamped);
                }
                any && all
            }
            Err(error) => {
                tracing::error!(thread = %thread_id, %error,
                    "the thread's log could not be read after a failed commit; the next failure reads it again");
                false
            }
        };
        if committed {
            return None;
        }
        let mut outbox = lock(&slot.outbox);
        outbox.probe = state.probe();
        outbox.bytes = 0;
        let dropped = outbox.queued.drain(..).collect();
        drop(outbox);
        slot.dropped.notify_waiters();
        Some(dropped)
    }

    /// Folds into `state` and publishes the events the thread's log holds past it: the events
    /// of a commit whose outcome was unknown that did commit, or another writer's. Returns
    /// them, with their positions.
    async fn catch_up(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        state: &mut ThreadState,
    ) -> Result<Vec<(u64, Arc<StampedEvent>)>, RuntimeError> {
        let mut caught = Vec::new();
        loop {
            let page = self
                .stored_events(thread_id, state.next_position, FLUSH_EVENTS)
                .await?;
            let at_head = page.at_head() || page.events.is_empty();
            for stored in page.events {
                let event = Arc::new(replay::fold_stored(state, thread_id, &stored)?);
                let published = Published::Durable {
                    thread_id: thread_id.to_owned(),
                    seq: stored.seq,
                    event_id: stored.event_id,
                    ordinal: event
                        .event
                        .is_timeline()
                        .then(|| state.timeline.len() as u64 - 1),
                    event: Arc::clone(&event),
                };
                self.publish(slot, &published, stored.record_size());
                caught.push((stored.seq, event));
            }
            if at_head {
                break;
            }
        }
        if !caught.is_empty() {
            tracing::warn!(thread = %thread_id, events = caught.len(),
                "the thread's log held events its state did not; folded and published");
            *lock(&slot.summary) = state.summary(thread_id);
            slot.tasks_changed.notify_waiters();
        }
        Ok(caught)
    }

    /// Folds a committed batch into the thread's state and publishes its events (the ephemeral
    /// ones in their places), under the state's lock, so subscribers see the thread's events in
    /// the order of its log; returns the batch's tickets.
    async fn fold_and_publish(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        batch: Vec<Queued>,
        appended: agentwire_events::Appended,
    ) -> Vec<oneshot::Sender<Result<(), RuntimeError>>> {
        let mut state = slot.state.lock().await;
        let (tickets, tasks_changed) =
            self.fold_and_publish_locked(thread_id, slot, &mut state, batch, appended);
        drop(state);
        if tasks_changed {
            slot.tasks_changed.notify_waiters();
        }
        tickets
    }

    /// [`Runtime::fold_and_publish`] with the state's lock held: the batch's tickets, and
    /// whether the thread's human tasks may have changed (to be told once the lock is let go).
    fn fold_and_publish_locked(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        state: &mut ThreadState,
        batch: Vec<Queued>,
        appended: agentwire_events::Appended,
    ) -> (Vec<oneshot::Sender<Result<(), RuntimeError>>>, bool) {
        let mut boundary = false;
        let mut tasks_changed = false;
        let mut tickets = Vec::new();
        let mut event_ids = appended.event_ids.into_iter();
        let mut seq = appended.first_seq;
        let mut published = Vec::with_capacity(batch.len());
        for queued in batch {
            match queued {
                Queued::Durable {
                    stamped,
                    size,
                    ticket,
                    ..
                } => {
                    // Checked at admission: the fold cannot refuse what the probe accepted.
                    let position = state.next_position;
                    if let Err(error) = state.apply(position, &stamped) {
                        tracing::error!(thread = %thread_id, %error, "a checked event did not fold");
                    }
                    tasks_changed |= stamped.event.kind().starts_with("human_task.")
                        || matches!(
                            stamped.event,
                            ThreadEvent::TurnCompleted { .. }
                                | ThreadEvent::TurnFailed { .. }
                                | ThreadEvent::TurnCancelled { .. }
                        );
                    boundary |= matches!(
                        stamped.event,
                        ThreadEvent::ThreadCreated { .. }
                            | ThreadEvent::TurnCompleted { .. }
                            | ThreadEvent::TurnFailed { .. }
                            | ThreadEvent::TurnCancelled { .. }
                    );
                    let ordinal = stamped
                        .event
                        .is_timeline()
                        .then(|| state.timeline.len() as u64 - 1);
                    let event = Published::Durable {
                        thread_id: thread_id.to_owned(),
                        seq,
                        event_id: event_ids.next().unwrap_or_default(),
                        ordinal,
                        event: stamped,
                    };
                    seq += 1;
                    published.push((event, size));
                    tickets.extend(ticket);
                }
                Queued::Live {
                    published: event,
                    weight,
                } => published.push((event, weight)),
            }
        }
        *lock(&slot.summary) = state.summary(thread_id);
        if !state.deleted {
            self.checkpoint_if_due(thread_id, slot, state, boundary);
        }
        for (event, weight) in &published {
            self.publish(slot, event, *weight);
        }
        (tickets, tasks_changed)
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

    /// Publishes an ephemeral event at once when nothing of the thread waits for its commit,
    /// and otherwise queues it behind what does, so it is not seen before events produced
    /// before it (dropped when the outbox holds twice [`OUTBOX_BYTES`]).
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
        let mut outbox = lock(&slot.outbox);
        if outbox.queued.is_empty() && !outbox.flushing {
            drop(outbox);
            self.publish(&slot, &published, weight);
            return;
        }
        if outbox.bytes + weight > 2 * OUTBOX_BYTES {
            // Ephemeral: dropped when it does not fit, as a subscriber's full queue drops it.
            return;
        }
        outbox.bytes += weight;
        outbox.queued.push_back(Queued::Live { published, weight });
        self.start_flush(thread_id, &slot, &mut outbox);
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
            let event = replay::decode_stored(thread_id, stored)?;
            events.push((stored.seq, stored.event_id, event));
        }
        let mut at_head = page.at_head();
        let ordinals: Vec<Option<u64>> = match self.slot(thread_id) {
            Ok(slot) => {
                // Only what was folded, and so published, is read back: an event committed and
                // not folded yet (the flusher folds a batch while the next one commits) is
                // published after this, with its ordinal, and reaches the subscriber then.
                let state = slot.state.lock().await;
                let folded = state.next_position;
                if events.last().is_some_and(|(seq, _, _)| seq + 1 >= folded) {
                    events.retain(|(seq, _, _)| *seq < folded);
                    at_head = true;
                }
                events
                    .iter()
                    .map(|(seq, _, _)| state.timeline.binary_search(seq).ok().map(|i| i as u64))
                    .collect()
            }
            Err(_) => vec![None; events.len()],
        };
        Ok(CommittedPage {
            at_head,
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

/// Ends the thread's flush (its outbox found empty under `outbox`) and wakes the admissions
/// waiting for room.
fn end_flush(slot: &ThreadSlot, mut outbox: MutexGuard<'_, Outbox>) {
    outbox.flushing = false;
    drop(outbox);
    slot.room.notify_waiters();
}

/// Where a caller waiting for its events' commit is answered.
type Ticket = oneshot::Receiver<Result<(), RuntimeError>>;

/// Who runs a thread's flusher when an admission finds none running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flusher {
    /// A task started for it.
    Task,
    /// The admitting caller, which waits for its ticket anyway ([`Runtime::drive_flush`]).
    Caller,
}

/// An append on its way to the log.
type Append = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = agentwire_events::Result<agentwire_events::Appended>>
            + Send,
    >,
>;

/// An append sent to the log: polled once, so that it is queued with the log's writer (or, on a
/// log that commits on its caller's thread, committed), and its outcome awaited later.
enum Sent {
    Pending(Append),
    Done(agentwire_events::Result<agentwire_events::Appended>),
}

impl Sent {
    async fn start(mut append: Append) -> Sent {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match append.as_mut().poll(cx) {
                std::task::Poll::Ready(outcome) => Some(outcome),
                std::task::Poll::Pending => None,
            })
        })
        .await
        .map_or(Sent::Pending(append), Sent::Done)
    }

    async fn outcome(self) -> agentwire_events::Result<agentwire_events::Appended> {
        match self {
            Sent::Pending(append) => append.await,
            Sent::Done(outcome) => outcome,
        }
    }

    /// Runs `work`, polling the pending append beside it (its outcome kept once it has one), so
    /// that an append the log commits on its caller's task goes on while the caller works.
    async fn progress_while<F: Future>(&mut self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let Sent::Pending(append) = self
                && let std::task::Poll::Ready(outcome) = append.as_mut().poll(cx)
            {
                *self = Sent::Done(outcome);
            }
            work.as_mut().poll(cx)
        })
        .await
    }
}

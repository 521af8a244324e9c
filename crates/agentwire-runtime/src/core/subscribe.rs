//! Subscriptions: what the runtime publishes, delivered to each subscriber through a queue of
//! its own, bounded in bytes. A subscriber is one thread's observer ([`Scope::Thread`]) or every
//! thread's ([`Scope::All`]); any number of each may exist.
//!
//! A subscriber that falls behind is never waited for and never silently short: once its queue
//! is full, the durable events of a thread it cannot take are not copied to it, and the queue
//! records from which position that thread was missed. When the subscriber reads again, its
//! [`Subscription`] reads the missed events back from the log through the runtime, then goes on
//! with the queue — in order, with nothing missing or repeated (durable events are numbered per
//! thread, so an event already delivered is skipped and a gap is read back from the log).
//! Ephemeral events are not stored: those that do not fit are dropped.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::{LiveEvent, Published, Runtime, RuntimeError};

/// What a subscriber observes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One thread: its durable events from the position at which the subscription began, and
    /// its ephemeral events.
    Thread(String),
    /// Every thread: each thread's durable events from the first one published after the
    /// subscription began, and every ephemeral event.
    All,
}

/// The queue of one subscriber, filled by the runtime as it publishes.
#[derive(Debug)]
pub(super) struct Subscriber {
    pub(super) scope: Scope,
    capacity_bytes: usize,
    queue: Mutex<Queue>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<(Published, usize)>,
    bytes: usize,
    /// Threads whose durable events were not copied since the subscriber last looked, with the
    /// first position missed.
    missed: BTreeMap<String, u64>,
    closed: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Subscriber {
    pub(super) fn new(scope: Scope, capacity_bytes: usize) -> Subscriber {
        Subscriber {
            scope,
            capacity_bytes: capacity_bytes.max(1),
            queue: Mutex::new(Queue::default()),
            ready: Notify::new(),
        }
    }

    /// Queues `published` (of `weight` bytes) if it fits; a durable event that does not is
    /// recorded as missed instead. Never waits. An event always fits an empty queue, so one
    /// larger than the whole queue still gets through.
    pub(super) fn offer(&self, published: &Published, weight: usize) {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return;
        }
        let full = !queue.items.is_empty() && queue.bytes + weight > self.capacity_bytes;
        match published {
            Published::Durable { thread_id, seq, .. } => {
                // Once a thread is missed, its later events are missed too, so that what the
                // queue holds of it stays a prefix of what was published.
                if full || queue.missed.contains_key(thread_id) {
                    queue.missed.entry(thread_id.clone()).or_insert(*seq);
                    drop(queue);
                    self.ready.notify_one();
                    return;
                }
            }
            Published::Live { .. } => {
                if full {
                    return;
                }
            }
        }
        queue.bytes += weight;
        queue.items.push_back((published.clone(), weight));
        drop(queue);
        self.ready.notify_one();
    }

    fn close(&self) {
        lock(&self.queue).closed = true;
        self.ready.notify_one();
    }

    /// Queued bytes (for tests and reports).
    fn queued_bytes(&self) -> usize {
        lock(&self.queue).bytes
    }
}

/// The bytes an ephemeral event counts for in a queue.
pub(super) fn live_weight(event: &LiveEvent) -> usize {
    const OVERHEAD: usize = 64;
    OVERHEAD
        + match event {
            LiveEvent::MessageStarted { stream_id } => stream_id.len(),
            LiveEvent::MessageDelta { stream_id, delta } => stream_id.len() + delta.len(),
            LiveEvent::ToolStarted {
                tool_call_id,
                agent_name,
                tool_name,
                input,
            } => tool_call_id.len() + agent_name.len() + tool_name.len() + json_len(input),
            LiveEvent::ToolOutput {
                tool_call_id,
                agent_name,
                tool_name,
                stream,
                delta,
            } => {
                tool_call_id.len() + agent_name.len() + tool_name.len() + stream.len() + delta.len()
            }
        }
}

/// The length of a value's compact JSON text, counted without writing it anywhere.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

enum Next {
    Event(Published),
    Missed(BTreeMap<String, u64>),
    Closed,
}

/// One subscriber's side: [`recv`](Self::recv) returns what was published in its scope, in
/// order, reading back from the log what its queue could not hold. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    runtime: Runtime,
    subscriber: Arc<Subscriber>,
    /// Per thread, the position of the next durable event to deliver.
    next: HashMap<String, u64>,
    /// Threads being read back from the log, with the next position to read.
    catching_up: BTreeMap<String, u64>,
    /// Events read back, delivered before anything queued.
    replayed: VecDeque<Published>,
}

/// Events read back from the log per page.
const CATCH_UP_PAGE: usize = 256;

impl Subscription {
    pub(super) fn new(
        runtime: Runtime,
        subscriber: Arc<Subscriber>,
        next: HashMap<String, u64>,
    ) -> Subscription {
        Subscription {
            runtime,
            subscriber,
            next,
            catching_up: BTreeMap::new(),
            replayed: VecDeque::new(),
        }
    }

    /// What this subscription observes.
    pub fn scope(&self) -> &Scope {
        &self.subscriber.scope
    }

    /// The bytes its queue holds now.
    pub fn queued_bytes(&self) -> usize {
        self.subscriber.queued_bytes()
    }

    /// The next published event in the scope.
    ///
    /// # Errors
    /// [`RuntimeError::Stopped`] once the runtime stopped publishing to it; a log error while
    /// missed events were read back: `events.expired` when they were trimmed first (the
    /// thread then goes on from the oldest event the log holds); a read that failed (the log
    /// unreachable for a while), read again at the next call, so nothing missed is skipped; an
    /// event that cannot be read back (stored undecodable or corrupt), once, and that thread's
    /// later events are then delivered as they come.
    pub async fn recv(&mut self) -> Result<Published, RuntimeError> {
        loop {
            if let Some(published) = self.replayed.pop_front() {
                return Ok(published);
            }
            if let Some((thread_id, from)) = self.catching_up.pop_first() {
                if let Err(error) = self.read_back(thread_id.clone(), from).await {
                    // `events.expired` put the thread back from the oldest event held.
                    if read_again(&error) {
                        self.catching_up.entry(thread_id).or_insert(from);
                    }
                    return Err(error);
                }
                continue;
            }
            match self.take() {
                Some(Next::Event(published)) => {
                    if let Some(published) = self.admit(published) {
                        return Ok(published);
                    }
                }
                Some(Next::Missed(missed)) => {
                    for (thread_id, first) in missed {
                        let from = self.next.get(&thread_id).copied().unwrap_or(first);
                        self.catching_up.insert(thread_id, from);
                    }
                }
                Some(Next::Closed) => {
                    return Err(RuntimeError::Stopped("the subscription was closed".into()));
                }
                // A permit stored by an earlier notification makes this return at once; the
                // queue is looked at again either way.
                None => self.subscriber.ready.notified().await,
            }
        }
    }

    /// The next published event in the scope, going on past a log error while missed events
    /// were read back (logged; what is delivered then is as [`recv`](Self::recv) says); `None`
    /// once the runtime stopped publishing to it. For a pump that forwards what is published
    /// for as long as the runtime runs: one failed read must not stop it.
    pub async fn recv_until_stopped(&mut self) -> Option<Published> {
        let mut pause = std::time::Duration::from_millis(10);
        loop {
            match self.recv().await {
                Ok(published) => return Some(published),
                Err(RuntimeError::Stopped(_)) => return None,
                Err(error) => {
                    tracing::warn!(%error, "events a subscription fell behind on could not be read back; trying again");
                    // A log that keeps failing is read again at most once a second.
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(1));
                }
            }
        }
    }

    /// The next event if one is ready now: `None` when the queue is empty, closed, or the
    /// next step reads missed events back from the log (which [`recv`](Self::recv) does). A
    /// reader drains what is ready with it after a `recv`, to handle it as one batch.
    pub fn try_recv(&mut self) -> Option<Published> {
        loop {
            if let Some(published) = self.replayed.pop_front() {
                return Some(published);
            }
            if !self.catching_up.is_empty() {
                return None;
            }
            let mut queue = lock(&self.subscriber.queue);
            let (published, weight) = queue.items.pop_front()?;
            queue.bytes -= weight;
            drop(queue);
            if let Some(published) = self.admit(published) {
                return Some(published);
            }
        }
    }

    fn take(&self) -> Option<Next> {
        let mut queue = lock(&self.subscriber.queue);
        if let Some((published, weight)) = queue.items.pop_front() {
            queue.bytes -= weight;
            return Some(Next::Event(published));
        }
        if !queue.missed.is_empty() {
            return Some(Next::Missed(std::mem::take(&mut queue.missed)));
        }
        queue.closed.then_some(Next::Closed)
    }

    /// The queued event if it is the next one of its thread; an event delivered already is
    /// skipped, and one past a gap starts reading the gap back from the log.
    fn admit(&mut self, published: Published) -> Option<Published> {
        let Published::Durable { thread_id, seq, .. } = &published else {
            if let Published::Live { thread_id, .. } = &published
                && self.catching_up.contains_key(thread_id)
            {
                // Its thread's durable events are behind: the ephemeral ones are lost to lag.
                return None;
            }
            return Some(published);
        };
        if self.catching_up.contains_key(thread_id) {
            // Committed before it was published, so the read back reaches it.
            return None;
        }
        match self.next.get(thread_id).copied() {
            Some(next) if *seq < next => None,
            Some(next) if *seq > next => {
                self.catching_up.insert(thread_id.clone(), next);
                None
            }
            _ => {
                self.next.insert(thread_id.clone(), seq + 1);
                Some(published)
            }
        }
    }

    /// Reads one page of `thread_id`'s events from position `from` into `replayed`; the thread
    /// stays in `catching_up` until a page reaches the log's head.
    async fn read_back(&mut self, thread_id: String, from: u64) -> Result<(), RuntimeError> {
        let page = match self
            .runtime
            .committed_events(&thread_id, from, CATCH_UP_PAGE)
            .await
        {
            Ok(page) => page,
            // Deleted meanwhile: nothing more of it will come.
            Err(RuntimeError::ThreadNotFound(_))
            | Err(RuntimeError::Log(agentwire_events::Error::ThreadDeleted { .. })) => {
                return Ok(());
            }
            // Trimmed before it could be read back: the caller is told, and the thread goes on
            // from the oldest event the log still holds.
            Err(RuntimeError::Log(agentwire_events::Error::Expired { low_watermark, .. })) => {
                self.catching_up.insert(thread_id.clone(), low_watermark);
                return Err(RuntimeError::Log(agentwire_events::Error::Expired {
                    thread: thread_id,
                    low_watermark,
                }));
            }
            Err(error) => return Err(error),
        };
        let mut next = from;
        for published in page.events {
            if let Published::Durable { seq, .. } = &published {
                next = seq + 1;
            }
            self.replayed.push_back(published);
        }
        self.next.insert(thread_id.clone(), next);
        if !page.at_head {
            self.catching_up.insert(thread_id, next);
        }
        Ok(())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.subscriber.close();
        self.runtime.unsubscribe(&self.subscriber);
    }
}

/// Committed events of a thread read back from the log, as published.
#[derive(Debug)]
pub(super) struct CommittedPage {
    pub(super) events: Vec<Published>,
    /// Whether the page reached the last event committed when it was read.
    pub(super) at_head: bool,
}

/// Whether a read-back that failed with `error` is worth reading again: the log could not be
/// reached or answer for a while, not an event it holds that cannot be read back (undecodable,
/// corrupt), which would fail again every time and hold up every other thread of the
/// subscription.
fn read_again(error: &RuntimeError) -> bool {
    !matches!(
        error,
        RuntimeError::Undecodable { .. }
            | RuntimeError::Fold { .. }
            | RuntimeError::Log(agentwire_events::Error::Corrupt { .. })
    )
}

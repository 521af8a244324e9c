//! The queue between a log and its one writer, the same for both engines: the commands, the
//! callers' side (queue a command and await its answer; closed when the log closes) and the
//! group commit's gather (the appends waiting in the queue, up to the batch budgets).

use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits::MAX_CHECKPOINT_BYTES;
use crate::settings::Settings;
use crate::types::{
    Appended, Checkpoint, Expected, NewEvent, Retention, ThreadId, Trimmed, check_append,
    check_checkpoint,
};

/// What the writer does, one at a time.
#[derive(Debug)]
pub(crate) enum Command {
    Append(AppendRequest),
    Trim {
        thread: ThreadId,
        retention: Retention,
        now: SystemTime,
        reply: oneshot::Sender<Result<Trimmed>>,
    },
    Delete {
        thread: ThreadId,
        reply: oneshot::Sender<Result<bool>>,
    },
    Checkpoint {
        thread: ThreadId,
        checkpoint: Checkpoint,
        reply: oneshot::Sender<Result<()>>,
        #[expect(dead_code, reason = "held for its drop: the budget is given back then")]
        budget: Budget,
    },
}

/// The share of the queue's byte budget a queued command holds, given back when the command
/// is dropped: once the writer has run it and answered its caller.
pub(crate) type Budget = Option<OwnedSemaphorePermit>;

impl Command {
    /// Answers the command's caller with [`Error::WriteFailed`] for `err`, without running it.
    pub(crate) fn fail(self, err: &Error) {
        let reason = err.to_string();
        match self {
            Command::Append(request) => {
                let _ = request.reply.send(Err(Error::WriteFailed { reason }));
            }
            Command::Trim { reply, .. } => {
                let _ = reply.send(Err(Error::WriteFailed { reason }));
            }
            Command::Checkpoint { reply, .. } => {
                let _ = reply.send(Err(Error::WriteFailed { reason }));
            }
            Command::Delete { reply, .. } => {
                let _ = reply.send(Err(Error::WriteFailed { reason }));
            }
        }
    }
}

/// One caller's append: its events, their ids (the caller's or fresh ones) and payload bytes.
#[derive(Debug)]
pub(crate) struct AppendRequest {
    pub(crate) thread: ThreadId,
    pub(crate) expected: Expected,
    pub(crate) events: Vec<NewEvent>,
    pub(crate) ids: Vec<Uuid>,
    pub(crate) bytes: usize,
    pub(crate) reply: oneshot::Sender<Result<Appended>>,
    pub(crate) budget: Budget,
}

/// Where an append's or a command's answer arrives.
pub(crate) type Answer<T> = oneshot::Receiver<Result<T>>;

/// An append checked against the record limit and given its ids (the caller's or fresh ones),
/// with the receiver of its answer; not queued yet.
pub(crate) fn new_append(
    thread: &ThreadId,
    expected: Expected,
    events: Vec<NewEvent>,
    max_record_bytes: usize,
) -> Result<(AppendRequest, Answer<Appended>)> {
    let bytes = check_append(&events, max_record_bytes)?;
    let ids = events
        .iter()
        .map(|e| e.event_id.unwrap_or_else(Uuid::new_v4))
        .collect();
    let (reply, answer) = oneshot::channel();
    let request = AppendRequest {
        thread: thread.clone(),
        expected,
        events,
        ids,
        bytes,
        reply,
        budget: None,
    };
    Ok((request, answer))
}

/// The callers' end of the queue: bounded in commands and in bytes (a full queue makes callers
/// wait), and closed once the log is closed ([`Error::Closed`]).
#[derive(Debug)]
pub(crate) struct WriterQueue {
    sender: RwLock<Option<mpsc::Sender<Command>>>,
    doorbell: Arc<Doorbell>,
    /// The bytes queued commands may hold (appends' payloads and kinds, checkpoints' states),
    /// until the writer has run them.
    budget: Arc<Semaphore>,
    budget_bytes: usize,
}

/// How a writer that sleeps between commands learns that commands wait for it (a writer whose
/// queue is also drained by appenders that find it idle): the count of commands queued and not
/// yet taken, and the writer to wake: a thread (SQLite's, parked) or a task (PostgreSQL's,
/// awaiting [`Doorbell::rung`]).
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    /// Commands sent and not yet taken; for a moment below zero when a command is taken before
    /// its sender counted it.
    queued: AtomicIsize,
    thread: OnceLock<std::thread::Thread>,
    task: tokio::sync::Notify,
}

impl Doorbell {
    /// Sets the thread [`Doorbell::ring`] wakes, and rings it for what was queued before.
    pub(crate) fn answer_at(&self, thread: std::thread::Thread) {
        let _ = self.thread.set(thread);
        if self.waiting() {
            self.ring();
        }
    }

    /// Whether commands wait in the queue.
    pub(crate) fn waiting(&self) -> bool {
        self.queued.load(Ordering::SeqCst) > 0
    }

    /// `n` commands were taken from the queue.
    pub(crate) fn took(&self, n: usize) {
        if n > 0 {
            self.queued.fetch_sub(n as isize, Ordering::SeqCst);
        }
    }

    fn sent(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes the writer, or keeps it from sleeping at its next wait.
    pub(crate) fn ring(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        self.task.notify_one();
    }

    /// Once the doorbell rings (at once when it rang since the last wait).
    pub(crate) async fn rung(&self) {
        self.task.notified().await;
    }
}

/// What a writer found next: the command it held back, else the queue's next.
pub(crate) enum Next {
    Command(Command),
    Empty,
    Closed,
}

/// The command `held` back from the last batch, else the next one of `queue`, counted as
/// taken on `doorbell`.
pub(crate) fn next_command(
    held: &mut Option<Command>,
    queue: &mut mpsc::Receiver<Command>,
    doorbell: &Doorbell,
) -> Next {
    if let Some(command) = held.take() {
        return Next::Command(command);
    }
    match queue.try_recv() {
        Ok(command) => {
            doorbell.took(1);
            Next::Command(command)
        }
        Err(mpsc::error::TryRecvError::Empty) => Next::Empty,
        Err(mpsc::error::TryRecvError::Disconnected) => Next::Closed,
    }
}

impl WriterQueue {
    /// A queue of `capacity` commands holding at most `bytes` bytes, and the writer's end of
    /// it, whose writer waits on `doorbell`: every command sent is counted there, and rung for,
    /// except an append queued by [`WriterQueue::push_append`] (its caller tries to run the
    /// writer itself, and whoever holds the writer rings for what is left).
    pub(crate) fn new(
        capacity: usize,
        bytes: usize,
        doorbell: Arc<Doorbell>,
    ) -> (WriterQueue, mpsc::Receiver<Command>) {
        let (sender, receiver) = mpsc::channel(capacity);
        let queue = WriterQueue {
            sender: RwLock::new(Some(sender)),
            doorbell,
            budget: Arc::new(Semaphore::new(bytes)),
            budget_bytes: bytes,
        };
        (queue, receiver)
    }

    /// A share of the byte budget for a command of `bytes` bytes, once the queue has room for
    /// it. A command larger than the whole budget waits for all of it: it is queued alone.
    async fn reserve(&self, bytes: usize) -> Result<Budget> {
        if bytes == 0 {
            return Ok(None);
        }
        // The budget is at most `MAX_QUEUE_BYTES`, which a `u32` holds.
        let share = u32::try_from(bytes.min(self.budget_bytes)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.budget)
            .acquire_many_owned(share)
            .await
            .map_err(|_| Error::Closed)?;
        Ok(Some(permit))
    }

    /// Closes the queue: the writer ends once it has run what was queued before.
    pub(crate) fn close(&self) -> Result<()> {
        let sender = self.sender.write().map_err(|_| Error::Closed)?.take();
        drop(sender);
        self.ring();
        Ok(())
    }

    fn ring(&self) {
        self.doorbell.ring();
    }

    /// Sends `command`, counting it on the doorbell.
    async fn send(&self, command: Command) -> Result<()> {
        let sender = self
            .sender
            .read()
            .map_err(|_| Error::Closed)?
            .clone()
            .ok_or(Error::Closed)?;
        sender.send(command).await.map_err(|_| Error::Closed)?;
        drop(sender);
        self.doorbell.sent();
        // The queue closed while this command was sent: the writer may have found the queue
        // open and empty and gone to sleep; it must see it closed.
        if self.sender.read().map_or(true, |sender| sender.is_none()) {
            self.doorbell.ring();
        }
        Ok(())
    }

    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply)).await?;
        self.ring();
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Queues an append made by [`new_append`] without ringing the doorbell: the caller runs
    /// the writer next, or leaves the append to whoever holds it.
    pub(crate) async fn push_append(&self, mut request: AppendRequest) -> Result<()> {
        request.budget = self.reserve(request.bytes).await?;
        self.send(Command::Append(request)).await
    }

    pub(crate) async fn trim(
        &self,
        thread: &ThreadId,
        retention: &Retention,
        now: SystemTime,
    ) -> Result<Trimmed> {
        let thread = thread.clone();
        let retention = *retention;
        self.call(|reply| Command::Trim {
            thread,
            retention,
            now,
            reply,
        })
        .await
    }

    pub(crate) async fn put_checkpoint(
        &self,
        thread: &ThreadId,
        checkpoint: Checkpoint,
    ) -> Result<()> {
        check_checkpoint(&checkpoint, MAX_CHECKPOINT_BYTES)?;
        let thread = thread.clone();
        let budget = self.reserve(checkpoint.payload.len()).await?;
        self.call(|reply| Command::Checkpoint {
            thread,
            checkpoint,
            reply,
            budget,
        })
        .await
    }

    pub(crate) async fn delete_thread(&self, thread: &ThreadId) -> Result<bool> {
        let thread = thread.clone();
        self.call(|reply| Command::Delete { thread, reply }).await
    }
}

impl Drop for WriterQueue {
    /// Closes the queue and wakes its writer thread, which ends once the queue is drained.
    fn drop(&mut self) {
        if let Ok(mut sender) = self.sender.write() {
            sender.take();
        }
        self.ring();
    }
}

/// The appends one group commit takes: `first`, then those already waiting in `queue` while
/// the batch is under `max_batch_appends` and `max_batch_bytes`. The first other command found
/// ends the batch and is handed back, to run after the commit (the queue's order is kept).
pub(crate) fn gather(
    first: AppendRequest,
    queue: &mut mpsc::Receiver<Command>,
    settings: &Settings,
) -> (Vec<AppendRequest>, Option<Command>) {
    let mut batch_bytes = first.bytes;
    let mut batch = vec![first];
    while batch.len() < settings.max_batch_appends && batch_bytes < settings.max_batch_bytes {
        match queue.try_recv() {
            Ok(Command::Append(next)) => {
                batch_bytes += next.bytes;
                batch.push(next);
            }
            Ok(other) => return (batch, Some(other)),
            Err(_) => break,
        }
    }
    (batch, None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use super::{Command, Doorbell, WriterQueue, new_append};
    use crate::types::{Expected, NewEvent, ThreadId};

    fn append_of(bytes: usize) -> super::AppendRequest {
        let thread = ThreadId::new("t").unwrap();
        let event = NewEvent::new("k", "x".repeat(bytes - 1));
        new_append(&thread, Expected::Any, vec![event], usize::MAX)
            .unwrap()
            .0
    }

    /// Queued commands hold the queue's bytes until the writer has run them: an append that
    /// does not fit waits, and one larger than the whole budget is queued alone.
    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes() {
        let (queue, mut receiver) = WriterQueue::new(1024, 1000, Arc::new(Doorbell::default()));
        queue.push_append(append_of(600)).await.unwrap();
        let waiting = tokio::time::timeout(
            Duration::from_millis(200),
            queue.push_append(append_of(600)),
        )
        .await;
        assert!(waiting.is_err(), "a second 600-byte append was queued");
        // The writer runs the first: its bytes are given back once it is dropped.
        let Ok(Command::Append(first)) = receiver.try_recv() else {
            panic!("nothing queued")
        };
        let second = queue.push_append(append_of(600));
        tokio::pin!(second);
        assert!(
            tokio::time::timeout(Duration::from_millis(100), &mut second)
                .await
                .is_err(),
            "queued while the first is still being run"
        );
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .unwrap()
            .unwrap();
        let Ok(Command::Append(second)) = receiver.try_recv() else {
            panic!("the second was not queued")
        };
        drop(second);
        // Larger than the whole budget: queued once the queue is empty.
        tokio::time::timeout(Duration::from_secs(5), queue.push_append(append_of(5000)))
            .await
            .unwrap()
            .unwrap();
    }
}

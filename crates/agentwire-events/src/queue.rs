//! The queue between a log and its one writer, the same for both engines: the commands, the
//! callers' side (queue a command and await its answer; closed when the log closes) and the
//! group commit's gather (the appends waiting in the queue, up to the batch budgets).

use std::sync::RwLock;
use std::time::SystemTime;

use tokio::sync::{mpsc, oneshot};
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
    },
}

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
}

/// The callers' end of the queue: bounded (a full queue makes callers wait), and closed once
/// the log is closed ([`Error::Closed`]).
#[derive(Debug)]
pub(crate) struct WriterQueue {
    sender: RwLock<Option<mpsc::Sender<Command>>>,
}

impl WriterQueue {
    /// A queue of `capacity` commands and the writer's end of it.
    pub(crate) fn new(capacity: usize) -> (WriterQueue, mpsc::Receiver<Command>) {
        let (sender, receiver) = mpsc::channel(capacity);
        let queue = WriterQueue {
            sender: RwLock::new(Some(sender)),
        };
        (queue, receiver)
    }

    /// Closes the queue: the writer ends once it has run what was queued before.
    pub(crate) fn close(&self) -> Result<()> {
        let sender = self.sender.write().map_err(|_| Error::Closed)?.take();
        drop(sender);
        Ok(())
    }

    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command) -> Result<T> {
        let sender = self
            .sender
            .read()
            .map_err(|_| Error::Closed)?
            .clone()
            .ok_or(Error::Closed)?;
        let (reply, answer) = oneshot::channel();
        sender.send(make(reply)).await.map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    /// Checks an append against the record limit and queues it; answers once it committed.
    pub(crate) async fn append(
        &self,
        thread: &ThreadId,
        expected: Expected,
        events: Vec<NewEvent>,
        max_record_bytes: usize,
    ) -> Result<Appended> {
        let bytes = check_append(&events, max_record_bytes)?;
        let ids = events
            .iter()
            .map(|e| e.event_id.unwrap_or_else(Uuid::new_v4))
            .collect();
        let thread = thread.clone();
        self.call(|reply| {
            Command::Append(AppendRequest {
                thread,
                expected,
                events,
                ids,
                bytes,
                reply,
            })
        })
        .await
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
        self.call(|reply| Command::Checkpoint {
            thread,
            checkpoint,
            reply,
        })
        .await
    }

    pub(crate) async fn delete_thread(&self, thread: &ThreadId) -> Result<bool> {
        let thread = thread.clone();
        self.call(|reply| Command::Delete { thread, reply }).await
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

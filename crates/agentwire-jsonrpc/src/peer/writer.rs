//! The connection's output: a buffer of queued lines bounded in bytes ([`WriteQueue`]) and the
//! writer task, the only owner of the output, which writes whatever accumulated as one write.
//!
//! Lines are appended in the order they are queued, so the buffer is the order on the wire. A
//! line queued by a task wakes the writer at once; the answers the reader produces itself
//! (handlers that completed inline, errors) wait until no complete line is left to read, so a
//! burst of requests is answered with one write instead of one per answer.

use std::sync::{Arc, Mutex, Weak};

use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, TryAcquireError, oneshot};

use crate::error::CallError;
use crate::observe::bump;

use super::{Inner, lock};

/// Size of the chunks queued lines are gathered into; a buffer at least this large is queued
/// as a chunk of its own, without a copy.
const CHUNK: usize = 64 * 1024;

#[derive(Default)]
struct Outbox {
    /// Queued bytes in order.
    chunks: Vec<Vec<u8>>,
    /// An empty chunk the writer gave back, for the next lines.
    spare: Option<Vec<u8>>,
    lines: u64,
    /// Bytes queued with permits of the budget, given back once written.
    budgeted: usize,
    /// Whether bytes wait whose wake-up the reader deferred.
    deferred: bool,
    /// Closes asked for: the writer writes what was queued before them, then shuts down.
    close: Vec<oneshot::Sender<()>>,
    /// Every handle of the connection is gone: the writer writes what is queued and ends.
    ended: bool,
    /// The writer stopped (closed or failed): nothing more is accepted.
    stopped: bool,
}

/// What the writer takes from the outbox at once.
struct Taken {
    chunks: Vec<Vec<u8>>,
    lines: u64,
    budgeted: usize,
    close: Vec<oneshot::Sender<()>>,
    ended: bool,
}

pub(super) struct WriteQueue {
    outbox: Mutex<Outbox>,
    wake: Notify,
    pub(super) bytes: Arc<Semaphore>,
    pub(super) capacity: usize,
}

impl WriteQueue {
    pub(super) fn new(capacity: usize) -> WriteQueue {
        WriteQueue {
            outbox: Mutex::default(),
            wake: Notify::new(),
            bytes: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    /// Room for `len` bytes in the budget (a line larger than the whole budget waits for the
    /// queue to be empty). Waiting first wakes the writer for any deferred answers, which
    /// would otherwise hold the room.
    pub(super) async fn reserve(&self, len: usize) -> Result<OwnedSemaphorePermit, CallError> {
        let wanted = u32::try_from(len.min(self.capacity)).unwrap_or(u32::MAX);
        match Arc::clone(&self.bytes).try_acquire_many_owned(wanted) {
            Ok(permit) => Ok(permit),
            Err(TryAcquireError::Closed) => Err(CallError::Closed),
            Err(TryAcquireError::NoPermits) => {
                self.wake();
                Arc::clone(&self.bytes)
                    .acquire_many_owned(wanted)
                    .await
                    .map_err(|_| CallError::Closed)
            }
        }
    }

    /// Room for `len` bytes if the budget has it now; `None` when it is full (the caller must
    /// not wait for it where waiting would stop reading), `Some(Err)` once closed.
    pub(super) fn try_reserve(
        &self,
        len: usize,
    ) -> Option<Result<OwnedSemaphorePermit, CallError>> {
        let wanted = u32::try_from(len.min(self.capacity)).unwrap_or(u32::MAX);
        match Arc::clone(&self.bytes).try_acquire_many_owned(wanted) {
            Ok(permit) => Some(Ok(permit)),
            Err(TryAcquireError::Closed) => Some(Err(CallError::Closed)),
            Err(TryAcquireError::NoPermits) => None,
        }
    }

    /// Queues a line once the byte budget has room for it, and wakes the writer.
    pub(super) async fn send(&self, line: Vec<u8>) -> Result<(), CallError> {
        let permit = self.reserve(line.len()).await?;
        self.push_reserved(line, 1, permit, true)
    }

    /// Queues a buffer of `count` encoded lines as one write.
    pub(super) async fn send_buffer(&self, buffer: Vec<u8>, count: u64) -> Result<(), CallError> {
        let permit = self.reserve(buffer.len()).await?;
        self.push_reserved(buffer, count, permit, true)
    }

    /// Queues a line outside the byte budget: only for small replies whose number is bounded
    /// by the in-flight limits (answers of dropped handlers, cancel notifications).
    pub(super) fn send_now(&self, line: Vec<u8>) {
        let _ = self.push(line, 1, 0, true);
    }

    /// Queues `count` lines whose room `permit` holds; `wake: false` leaves the writer asleep
    /// until [`WriteQueue::wake`] (the reader's own answers).
    pub(super) fn push_reserved(
        &self,
        bytes: Vec<u8>,
        count: u64,
        permit: OwnedSemaphorePermit,
        wake: bool,
    ) -> Result<(), CallError> {
        let budgeted = permit.num_permits();
        permit.forget();
        self.push(bytes, count, budgeted, wake)
    }

    fn push(
        &self,
        bytes: Vec<u8>,
        count: u64,
        budgeted: usize,
        wake: bool,
    ) -> Result<(), CallError> {
        {
            let mut outbox = lock(&self.outbox);
            if outbox.stopped {
                drop(outbox);
                // The writer is gone; keep the budget whole for nobody's sake but the count's.
                self.bytes.add_permits(budgeted);
                return Err(CallError::Closed);
            }
            let outbox = &mut *outbox;
            match outbox.chunks.last_mut() {
                Some(last)
                    if bytes.len() < CHUNK && last.capacity() - last.len() >= bytes.len() =>
                {
                    last.extend_from_slice(&bytes);
                }
                _ if bytes.len() >= CHUNK => outbox.chunks.push(bytes),
                _ => {
                    let mut chunk = outbox
                        .spare
                        .take()
                        .unwrap_or_else(|| Vec::with_capacity(CHUNK));
                    chunk.extend_from_slice(&bytes);
                    outbox.chunks.push(chunk);
                }
            }
            outbox.lines += count;
            outbox.budgeted += budgeted;
            if !wake {
                outbox.deferred = true;
                return Ok(());
            }
            outbox.deferred = false;
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Wakes the writer for the answers the reader deferred; whether there were any.
    pub(super) fn wake(&self) -> bool {
        let deferred = std::mem::take(&mut lock(&self.outbox).deferred);
        if deferred {
            self.wake.notify_one();
        }
        deferred
    }

    /// Asks the writer to write what is queued and shut the output down; `false` when it has
    /// already stopped.
    pub(super) fn close(&self, ack: oneshot::Sender<()>) -> bool {
        {
            let mut outbox = lock(&self.outbox);
            if outbox.stopped {
                return false;
            }
            outbox.close.push(ack);
        }
        self.wake.notify_one();
        true
    }

    /// Every handle of the connection is gone: the writer writes what is queued and ends.
    pub(super) fn end(&self) {
        lock(&self.outbox).ended = true;
        self.wake.notify_one();
    }

    fn take(&self, recycled: &mut Option<Vec<u8>>, chunks: Vec<Vec<u8>>) -> Taken {
        let mut outbox = lock(&self.outbox);
        if outbox.spare.is_none() {
            outbox.spare = recycled.take();
        }
        let taken = Taken {
            chunks: std::mem::replace(&mut outbox.chunks, chunks),
            lines: std::mem::take(&mut outbox.lines),
            budgeted: std::mem::take(&mut outbox.budgeted),
            close: std::mem::take(&mut outbox.close),
            ended: outbox.ended,
        };
        outbox.deferred = false;
        taken
    }

    fn stop(&self) {
        lock(&self.outbox).stopped = true;
        // Unblock every sender still waiting for room.
        self.bytes.close();
    }
}

pub(super) async fn run_writer<W: AsyncWrite + Unpin>(
    mut writer: W,
    queue: Arc<WriteQueue>,
    inner: Weak<Inner>,
) {
    let mut empty = Vec::new();
    let mut recycled = None;
    let result: std::io::Result<Vec<oneshot::Sender<()>>> = async {
        loop {
            let Taken {
                mut chunks,
                lines,
                budgeted,
                close,
                ended,
            } = queue.take(&mut recycled, std::mem::take(&mut empty));
            if chunks.is_empty() && close.is_empty() && !ended {
                empty = chunks;
                queue.wake.notified().await;
                continue;
            }
            let mut bytes = 0u64;
            for chunk in &chunks {
                writer.write_all(chunk).await?;
                bytes += chunk.len() as u64;
            }
            writer.flush().await?;
            queue.bytes.add_permits(budgeted);
            if let Some(inner) = inner.upgrade() {
                bump(&inner.counters.lines_written, lines);
                bump(&inner.counters.bytes_written, bytes);
            }
            if let Some(mut chunk) = chunks.pop()
                && chunk.capacity() == CHUNK
            {
                chunk.clear();
                recycled = Some(chunk);
            }
            chunks.clear();
            empty = chunks;
            if !close.is_empty() {
                let _ = writer.shutdown().await;
                return Ok(close);
            }
            if ended {
                return Ok(Vec::new());
            }
        }
    }
    .await;
    queue.stop();
    if let Err(error) = &result {
        tracing::warn!(%error, "write failed; closing the connection");
        if let Some(inner) = inner.upgrade() {
            inner.begin_close(&format!("write error: {error}"));
            inner.closed_tx.send_replace(true);
        }
    }
    for ack in result.unwrap_or_default() {
        let _ = ack.send(());
    }
}

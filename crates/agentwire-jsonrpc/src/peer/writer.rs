//! The writer task, the only owner of the output: it writes the lines of a queue bounded in
//! bytes ([`WriteQueue`]), flushes whenever the queue runs empty, and shuts the output down on
//! close.

use std::sync::{Arc, Weak};

use tokio::io::{AsyncWrite, AsyncWriteExt as _, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::error::CallError;
use crate::observe::bump;

use super::Inner;

/// Size of the writer's output buffer; it is flushed whenever the queue runs empty.
const WRITE_BUFFER: usize = 64 * 1024;

pub(super) enum WriteCmd {
    Line(Vec<u8>, Option<OwnedSemaphorePermit>),
    /// Several whole lines in one buffer, and how many.
    Lines(Vec<u8>, u64, OwnedSemaphorePermit),
    Close(oneshot::Sender<()>),
}

pub(super) struct WriteQueue {
    pub(super) tx: mpsc::UnboundedSender<WriteCmd>,
    pub(super) bytes: Arc<Semaphore>,
    pub(super) capacity: usize,
}

impl WriteQueue {
    /// Queues a line once the byte budget has room for it (a line larger than the whole
    /// budget waits for the queue to be empty).
    pub(super) async fn send(&self, line: Vec<u8>) -> Result<(), CallError> {
        let wanted = u32::try_from(line.len().min(self.capacity)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.bytes)
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| CallError::Closed)?;
        self.tx
            .send(WriteCmd::Line(line, Some(permit)))
            .map_err(|_| CallError::Closed)
    }

    /// Queues a buffer of `count` encoded lines as one write.
    pub(super) async fn send_buffer(&self, buffer: Vec<u8>, count: u64) -> Result<(), CallError> {
        let wanted = u32::try_from(buffer.len().min(self.capacity)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.bytes)
            .acquire_many_owned(wanted)
            .await
            .map_err(|_| CallError::Closed)?;
        self.tx
            .send(WriteCmd::Lines(buffer, count, permit))
            .map_err(|_| CallError::Closed)
    }

    /// Queues a line outside the byte budget: only for small replies whose number is bounded
    /// by the in-flight limits (answers of dropped handlers, cancel notifications).
    pub(super) fn send_now(&self, line: Vec<u8>) {
        let _ = self.tx.send(WriteCmd::Line(line, None));
    }
}

pub(super) async fn run_writer<W: AsyncWrite + Unpin>(
    writer: W,
    mut rx: mpsc::UnboundedReceiver<WriteCmd>,
    inner: Weak<Inner>,
) {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER, writer);
    let (mut lines, mut bytes) = (0u64, 0u64);
    let result: std::io::Result<Option<oneshot::Sender<()>>> = async {
        while let Some(cmd) = rx.recv().await {
            match cmd {
                WriteCmd::Line(line, permit) => {
                    out.write_all(&line).await?;
                    lines += 1;
                    bytes += line.len() as u64;
                    drop(permit);
                }
                WriteCmd::Lines(buffer, count, permit) => {
                    out.write_all(&buffer).await?;
                    lines += count;
                    bytes += buffer.len() as u64;
                    drop(permit);
                }
                WriteCmd::Close(ack) => {
                    out.flush().await?;
                    let _ = out.shutdown().await;
                    return Ok(Some(ack));
                }
            }
            if rx.is_empty() {
                out.flush().await?;
                if let Some(inner) = inner.upgrade() {
                    bump(&inner.counters.lines_written, lines);
                    bump(&inner.counters.bytes_written, bytes);
                }
                (lines, bytes) = (0, 0);
            }
        }
        out.flush().await?;
        Ok(None)
    }
    .await;
    if let Some(inner) = inner.upgrade() {
        bump(&inner.counters.lines_written, lines);
        bump(&inner.counters.bytes_written, bytes);
        match &result {
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "write failed; closing the connection");
                inner.begin_close(&format!("write error: {error}"));
            }
        }
    }
    // Unblock every sender still waiting for queue room.
    rx.close();
    if let Ok(Some(ack)) = result {
        let _ = ack.send(());
    }
}

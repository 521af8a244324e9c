//! A batch of notifications of one method, encoded into write buffers before any of them is
//! queued: a stream of them (a replay) costs one queue operation per buffer, and a caller that
//! writes params as JSON text of its own (copying stored fields) skips serialization.

use serde::Serialize;

use super::Peer;
use crate::error::{CallError, FrameError};
use crate::message::VERSION;

/// Notifications of one method, in order, queued together by [`Peer::send_batch`].
///
/// Each is checked against the connection's outbound limits as it is added; one that is over
/// them is refused and leaves the batch as it was.
#[derive(Debug)]
pub struct NotificationBatch {
    /// `{"jsonrpc":"2.0","method":<method>,"params":`.
    head: Vec<u8>,
    buffers: Vec<(Vec<u8>, u64)>,
    buffer: Vec<u8>,
    count: u64,
    expected: usize,
    capacity: usize,
    max_frame: usize,
    max_line: Option<usize>,
}

impl NotificationBatch {
    fn new(peer: &Peer, method: &str, expected: usize) -> NotificationBatch {
        let mut head = Vec::with_capacity(48 + method.len());
        head.extend_from_slice(b"{\"jsonrpc\":");
        push_json_str(&mut head, VERSION);
        head.extend_from_slice(b",\"method\":");
        push_json_str(&mut head, method);
        head.extend_from_slice(b",\"params\":");
        NotificationBatch {
            head,
            buffers: Vec::new(),
            buffer: Vec::new(),
            count: 0,
            expected: expected.max(1),
            capacity: peer.inner.writes.capacity,
            max_frame: peer.inner.profile.max_outbound_frame,
            max_line: peer.inner.profile.max_outbound_line,
        }
    }

    /// Adds a notification with `params`.
    ///
    /// # Errors
    /// [`FrameError::OutboundTooLarge`], [`FrameError::LineTooLong`] or [`FrameError::Encode`];
    /// the batch is then as it was.
    pub fn push<P: Serialize + ?Sized>(&mut self, params: &P) -> Result<(), FrameError> {
        self.push_with(|buffer| {
            serde_json::to_writer(buffer, params).map_err(|e| FrameError::Encode(e.to_string()))
        })
    }

    /// Adds a notification whose params `write` appends as JSON text: one value, compact (no
    /// line feed). The text is the caller's to get right (debug builds check that it parses).
    ///
    /// # Errors
    /// What `write` fails with, [`FrameError::OutboundTooLarge`] or
    /// [`FrameError::LineTooLong`]; the batch is then as it was.
    pub fn push_with(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), FrameError>,
    ) -> Result<(), FrameError> {
        let start = self.buffer.len();
        self.buffer.extend_from_slice(&self.head);
        let written = write(&mut self.buffer).and_then(|()| {
            self.buffer.push(b'}');
            crate::framer::check_line(&self.buffer[start..], self.max_frame, self.max_line)
        });
        if let Err(error) = written {
            self.buffer.truncate(start);
            return Err(error);
        }
        debug_assert!(
            serde_json::from_slice::<serde::de::IgnoredAny>(&self.buffer[start..]).is_ok(),
            "a notification that is not JSON: {}",
            String::from_utf8_lossy(&self.buffer[start..])
        );
        self.buffer.push(b'\n');
        self.count += 1;
        if self.buffer.len() >= self.capacity {
            self.buffers
                .push((std::mem::take(&mut self.buffer), self.count));
            self.count = 0;
        } else if self.count == 1 {
            // Room for the rest at the first one's size, up to a buffer's worth: the buffer is
            // not regrown (and copied) message by message.
            let left = self.expected.saturating_sub(self.count_queued() as usize);
            let wanted = self
                .buffer
                .len()
                .saturating_mul(left)
                .min(self.capacity + self.buffer.len());
            self.buffer
                .reserve(wanted.saturating_sub(self.buffer.len()));
        }
        Ok(())
    }

    /// Notifications in the batch.
    pub fn len(&self) -> usize {
        (self.count_queued() + self.count) as usize
    }

    /// Whether the batch holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn count_queued(&self) -> u64 {
        self.buffers.iter().map(|(_, count)| count).sum()
    }
}

fn push_json_str(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a vector cannot fail.
    let _ = serde_json::to_writer(out, text);
}

impl Peer {
    /// An empty batch of notifications of `method`; `expected` is how many it will likely
    /// hold (it sizes the buffers, nothing more).
    pub fn notification_batch(&self, method: &str, expected: usize) -> NotificationBatch {
        NotificationBatch::new(self, method, expected)
    }

    /// Queues every notification of `batch`, in order, as few writes. It waits only for room in
    /// the write queue.
    ///
    /// # Errors
    /// [`CallError::Closed`].
    pub async fn send_batch(&self, batch: NotificationBatch) -> Result<(), CallError> {
        if self.inner.is_closed() {
            return Err(CallError::Closed);
        }
        let NotificationBatch {
            mut buffers,
            buffer,
            count,
            ..
        } = batch;
        if !buffer.is_empty() {
            buffers.push((buffer, count));
        }
        for (buffer, count) in buffers {
            self.inner.writes.send_buffer(buffer, count).await?;
        }
        Ok(())
    }

    /// Sends several notifications of one method, in order, as few writes (a
    /// [`NotificationBatch`] of `params`). Each is checked against the outbound limit; one that
    /// is over it fails the call before anything is queued.
    ///
    /// # Errors
    /// [`CallError::Closed`] or [`CallError::Frame`].
    pub async fn notify_batch<P: Serialize>(
        &self,
        method: &str,
        params: &[P],
    ) -> Result<(), CallError> {
        if self.inner.is_closed() {
            return Err(CallError::Closed);
        }
        let mut batch = self.notification_batch(method, params.len());
        for p in params {
            batch.push(p)?;
        }
        self.send_batch(batch).await
    }
}

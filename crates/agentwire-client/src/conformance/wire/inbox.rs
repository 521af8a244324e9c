//! The frames read and not yet taken by a scenario, bounded by [`MAX_INBOX_FRAMES`] and
//! [`MAX_INBOX_BYTES`], and the waits over them: the first matching frame (unread ones first),
//! the same within a period, everything written for a period, every matching frame taken.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Failure, Frame, MAX_INBOX_BYTES, MAX_INBOX_FRAMES, Wire};
impl Wire {
    /// Keeps a frame a scenario did not wait for.
    fn stash(&mut self, frame: Frame) -> Result<(), Failure> {
        if self.inbox.len() >= MAX_INBOX_FRAMES
            || self.inbox_bytes.saturating_add(frame.bytes) > MAX_INBOX_BYTES
        {
            return Err(Failure::new(format!(
                "the runtime wrote more than {MAX_INBOX_FRAMES} frames ({MAX_INBOX_BYTES} bytes) the suite did not wait for"
            )));
        }
        self.inbox_bytes += frame.bytes;
        self.inbox.push_back(frame);
        Ok(())
    }

    fn take(&mut self, index: usize) -> Option<Frame> {
        let frame = self.inbox.remove(index)?;
        self.inbox_bytes = self.inbox_bytes.saturating_sub(frame.bytes);
        Some(frame)
    }

    /// The frames read and not yet taken.
    pub(crate) fn inbox(&self) -> impl Iterator<Item = &Frame> {
        self.inbox.iter()
    }

    /// Takes every unread frame matching `wanted`, in order.
    pub(crate) fn drain(&mut self, wanted: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.inbox.len());
        for frame in self.inbox.drain(..) {
            if wanted(&frame) {
                taken.push(frame);
            } else {
                kept.push_back(frame);
            }
        }
        self.inbox = kept;
        self.inbox_bytes = self.inbox.iter().map(|f| f.bytes).sum();
        taken
    }

    /// The first frame matching `wanted`, unread ones first; the others are kept in order.
    pub(crate) async fn wait_for(
        &mut self,
        what: &str,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Result<Frame, Failure> {
        if let Some(at) = self.inbox.iter().position(&wanted)
            && let Some(frame) = self.take(at)
        {
            return Ok(frame);
        }
        loop {
            let frame = self.read(what).await?;
            if wanted(&frame) {
                return Ok(frame);
            }
            self.stash(frame)?;
        }
    }

    /// Like [`Wire::wait_for`], but `None` when no matching frame arrives within `period`
    /// (everything read meanwhile stays unread).
    pub(crate) async fn wait_within(
        &mut self,
        period: Duration,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Result<Option<Frame>, Failure> {
        if let Some(at) = self.inbox.iter().position(&wanted) {
            return Ok(self.take(at));
        }
        let until = Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match self.read_within(left, "a frame").await? {
                Some(frame) if wanted(&frame) => return Ok(Some(frame)),
                Some(frame) => self.stash(frame)?,
                None => return Ok(None),
            }
        }
    }

    /// Reads whatever the runtime writes for `period`, keeping it unread.
    pub(crate) async fn settle(&mut self, period: Duration) -> Result<(), Failure> {
        let until = Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.read_within(left, "the runtime to go quiet").await? {
                Some(frame) => self.stash(frame)?,
                None => return Ok(()),
            }
        }
    }
}

//! Live tail: a reader that has caught up waits for the next commit instead of polling.

use std::sync::Arc;

use tokio::sync::watch;

use crate::EventLog;
use crate::error::{Error, Result};
use crate::types::{After, Page, ThreadId};

/// Follows one thread from a position: each [`Tail::next_page`] returns the next events after
/// the last one returned, waiting for a commit when there are none yet.
///
/// It marks the commit signal as seen *before* each read, so a commit that lands between the
/// read and the wait still wakes it: no event is missed and no loop spins.
#[derive(Debug)]
pub struct Tail {
    log: Arc<dyn EventLog>,
    thread: ThreadId,
    after: After,
    limit: usize,
    commits: watch::Receiver<u64>,
}

impl Tail {
    /// A tail of `thread` strictly after `after`, returning pages of at most `limit` events.
    pub fn new(log: Arc<dyn EventLog>, thread: ThreadId, after: After, limit: usize) -> Self {
        let commits = log.commits();
        Self {
            log,
            thread,
            after,
            limit,
            commits,
        }
    }

    /// Where the tail stands: after the last event it returned.
    pub fn position(&self) -> After {
        self.after
    }

    /// The next non-empty page, waiting for commits as long as it takes. Errors are the
    /// read's (an expired start, a deleted thread) or [`Error::Closed`] when the log closes.
    pub async fn next_page(&mut self) -> Result<Page> {
        loop {
            self.commits.borrow_and_update();
            let page = self.log.read(&self.thread, self.after, self.limit).await?;
            if let Some(last) = page.events.last() {
                self.after = After::Position(last.position(self.log.log_id()));
                return Ok(page);
            }
            self.commits.changed().await.map_err(|_| Error::Closed)?;
        }
    }
}

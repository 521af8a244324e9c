//! The thread operations of the [`Runtime`]: creating, renaming and deleting a thread, and
//! reading what it serves (the threads, their summaries, a thread's state).

use std::sync::Arc;

use super::{NewThread, Runtime, RuntimeError, ThreadSlot, ThreadSummary, lock};
use crate::event::{Resolution, ThreadEvent};
use crate::state::ThreadState;

impl Runtime {
    /// Creates a thread; returns its id.
    pub async fn create_thread(
        &self,
        title: Option<String>,
        model: Option<String>,
    ) -> Result<String, RuntimeError> {
        let id = uuid::Uuid::new_v4().to_string();
        self.create_thread_as(&id, title, model).await?;
        Ok(id)
    }

    /// Creates a thread of the caller's id (a face whose protocol lets the host choose it). An
    /// id the store holds or held (a deleted thread's) is [`RuntimeError::ThreadExists`]; one
    /// the log cannot take (empty, over its length limit, with a control character) is
    /// [`RuntimeError::InvalidInput`].
    pub async fn create_thread_as(
        &self,
        id: &str,
        title: Option<String>,
        model: Option<String>,
    ) -> Result<(), RuntimeError> {
        self.create_thread_with(
            id,
            NewThread {
                title,
                model,
                ..NewThread::default()
            },
        )
        .await
    }

    /// Forks `source` into a new thread of id `id` (the caller's, or a new one): it records
    /// its parent and starts with no history of its own. Returns its id.
    pub async fn fork_thread(
        &self,
        source: &str,
        id: Option<&str>,
        title: Option<String>,
        alias: Option<String>,
    ) -> Result<String, RuntimeError> {
        let model = self.summary(source)?.model;
        let id = id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let new = NewThread {
            title,
            model,
            parent_thread_id: Some(source.to_owned()),
            alias,
        };
        self.create_thread_with(&id, new).await?;
        Ok(id)
    }

    /// Archives a thread: it is kept and read, and takes no new turn. Archiving an archived
    /// thread changes nothing; a thread with an active turn is refused.
    pub async fn archive_thread(&self, thread_id: &str) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let decide = |state: &ThreadState| {
            if let Some(active) = &state.active_turn {
                return Err(RuntimeError::TurnAlreadyActive {
                    thread_id: thread_id.to_owned(),
                    active: active.id.clone(),
                });
            }
            let events = if state.archived {
                Vec::new()
            } else {
                vec![ThreadEvent::ThreadArchived]
            };
            Ok((events, ()))
        };
        self.append_with(thread_id, &slot, decide).await
    }

    /// [`create_thread_as`](Self::create_thread_as) with everything a thread may be created
    /// with.
    pub async fn create_thread_with(&self, id: &str, new: NewThread) -> Result<(), RuntimeError> {
        let NewThread {
            title,
            model,
            parent_thread_id,
            alias,
        } = new;
        if self.lock_threads().contains_key(id) {
            return Err(RuntimeError::ThreadExists(id.to_owned()));
        }
        let slot = match ThreadSlot::new(id, ThreadState::default(), 0) {
            Ok(slot) => Arc::new(slot),
            Err(RuntimeError::Log(error)) => {
                return Err(RuntimeError::InvalidInput(format!("thread id: {error}")));
            }
            Err(error) => return Err(error),
        };
        // The log's position check settles a race between two creations of one id, and refuses
        // the id of a thread the store deleted (its tombstone stays).
        match self
            .append(
                id,
                &slot,
                vec![ThreadEvent::ThreadCreated {
                    title,
                    model,
                    parent_thread_id,
                    alias,
                }],
            )
            .await
        {
            Ok(()) => {}
            Err(error)
                if matches!(
                    error.log_error(),
                    Some(
                        agentwire_events::Error::Conflict { .. }
                            | agentwire_events::Error::ThreadDeleted { .. }
                    )
                ) =>
            {
                return Err(RuntimeError::ThreadExists(id.to_owned()));
            }
            Err(error) => return Err(error),
        }
        self.lock_threads().insert(id.to_owned(), slot);
        Ok(())
    }

    /// Renames a thread.
    pub async fn rename_thread(&self, thread_id: &str, title: String) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        self.append(thread_id, &slot, vec![ThreadEvent::ThreadRenamed { title }])
            .await
    }

    /// Deletes a thread, in one check-and-append: its pending interactions resolved
    /// `cancelled`, then the deletion. Its running turn is then stopped (nothing more of it is
    /// recorded), and its events are removed from the log (which keeps the thread's
    /// tombstone).
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        // Run in place and, if the caller stops waiting, to its end as a task: once the
        // deletion is admitted, its commit is followed by the rest of it, whoever waits.
        let (runtime, thread_id) = (self.clone(), thread_id.to_owned());
        agentwire_events::FinishOnDrop::new(async move {
            runtime.delete_admitted(&thread_id, slot).await
        })
        .await
    }

    /// [`Runtime::delete_thread`] of a served thread: the deletion appended, then the running
    /// turn stopped, the waiters answered and the thread's events deleted from the log.
    async fn delete_admitted(
        &self,
        thread_id: &str,
        slot: Arc<ThreadSlot>,
    ) -> Result<(), RuntimeError> {
        let decide = |state: &ThreadState| {
            let mut events = state.cancel_pending("the thread was deleted");
            events.push(ThreadEvent::ThreadDeleted);
            Ok((events, ()))
        };
        self.append_with(thread_id, &slot, decide).await?;
        self.lock_threads().remove(thread_id);
        if let Some(running) = lock(&slot.running).take() {
            running.cancel.send_replace(true);
        }
        for (_, waiter) in lock(&slot.waiters).drain() {
            let _ = waiter.send(Resolution::Cancelled {
                reason: "the thread was deleted".into(),
            });
        }
        // Published and committed first, so observers see the deletion; then the events go
        // (the log keeps the thread's tombstone). A stop in between is finished at start.
        self.inner.log.delete_thread(&slot.log_thread).await?;
        Ok(())
    }

    /// Threads the log holds but the runtime does not serve, because their log was trimmed
    /// from its start before this runtime started (a fold needs the thread's first event).
    pub fn unavailable_threads(&self) -> Vec<String> {
        lock(&self.inner.unavailable).clone()
    }

    /// A served thread's summary, read without waiting for its state's lock.
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`].
    pub fn summary(&self, thread_id: &str) -> Result<ThreadSummary, RuntimeError> {
        Ok(lock(&self.slot(thread_id)?.summary).clone())
    }

    /// Whether the runtime serves the thread.
    pub fn contains_thread(&self, thread_id: &str) -> bool {
        self.lock_threads().contains_key(thread_id)
    }

    /// The ids of the threads served, sorted.
    pub fn thread_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock_threads().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Every served thread's summary, oldest first (by creation time, then id), so a list
    /// paged by that key stays stable while threads are added and deleted. Read without
    /// waiting for any thread's lock (a summary is kept beside each thread's state).
    pub fn summaries(&self) -> Vec<ThreadSummary> {
        let slots: Vec<Arc<ThreadSlot>> = self.lock_threads().values().cloned().collect();
        let mut out: Vec<ThreadSummary> = slots
            .iter()
            .map(|slot| lock(&slot.summary).clone())
            .collect();
        out.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        out
    }

    /// At most `limit` summaries in [`summaries`](Self::summaries)' order, of the threads
    /// `keep` takes (a face leaves out those it cannot show), strictly after the thread
    /// `after` (its creation time and id; `None` for the first page), and whether more follow.
    /// A key is a position in the order, whether or not its thread still exists, so a thread
    /// deleted between two pages hides no other.
    pub fn summaries_after(
        &self,
        after: Option<(u64, &str)>,
        limit: usize,
        keep: impl Fn(&ThreadSummary) -> bool,
    ) -> (Vec<ThreadSummary>, bool) {
        let mut all = self.summaries();
        all.retain(|summary| keep(summary));
        let start = match after {
            None => 0,
            Some((created_at_ms, id)) => {
                all.partition_point(|s| (s.created_at_ms, s.id.as_str()) <= (created_at_ms, id))
            }
        };
        let end = start.saturating_add(limit).min(all.len());
        let more = end < all.len();
        (all[start..end].to_vec(), more)
    }

    /// A copy of a thread's state. [`Runtime::inspect`] reads part of it without the copy.
    pub async fn snapshot(&self, thread_id: &str) -> Result<ThreadState, RuntimeError> {
        self.inspect(thread_id, ThreadState::clone).await
    }

    /// What `read` takes from a thread's state, read under the thread's lock (no copy of the
    /// state; keep `read` short, turns of the thread wait for it).
    pub async fn inspect<R>(
        &self,
        thread_id: &str,
        read: impl FnOnce(&ThreadState) -> R,
    ) -> Result<R, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let state = slot.state.lock().await;
        Ok(read(&state))
    }
}

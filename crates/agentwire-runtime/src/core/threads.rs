//! The thread operations of the [`Runtime`]: creating, renaming and deleting a thread, and
//! reading what it serves (the threads, their summaries, a thread's state).

use std::sync::Arc;

use agentwire_events::ThreadId;
use tokio::sync::Mutex;

use super::{Runtime, RuntimeError, ThreadSlot, ThreadSummary};
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
        let slot = Arc::new(ThreadSlot {
            state: Mutex::new(ThreadState::default()),
            log_thread: ThreadId::new(id.clone())?,
            checkpointed: 0.into(),
        });
        self.append(
            &id,
            &slot,
            vec![ThreadEvent::ThreadCreated { title, model }],
        )
        .await?;
        self.lock_threads().insert(id.clone(), slot);
        Ok(id)
    }

    /// Renames a thread.
    pub async fn rename_thread(&self, thread_id: &str, title: String) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        self.append(thread_id, &slot, vec![ThreadEvent::ThreadRenamed { title }])
            .await
    }

    /// Deletes a thread: a running turn is cancelled first, then the deletion is recorded.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let active = slot
            .state
            .lock()
            .await
            .active_turn
            .as_ref()
            .map(|t| t.id.clone());
        if let Some(turn_id) = active {
            self.signal_cancel(&turn_id);
        }
        let pending: Vec<String> = slot.state.lock().await.pending.keys().cloned().collect();
        for id in pending {
            self.wake(
                &id,
                Resolution::Cancelled {
                    reason: "the thread was deleted".into(),
                },
            );
        }
        self.append(thread_id, &slot, vec![ThreadEvent::ThreadDeleted])
            .await?;
        self.lock_threads().remove(thread_id);
        // Published and committed first, so observers see the deletion; then the events go
        // (the log keeps the thread's tombstone). A stop in between is finished at start.
        self.inner.log.delete_thread(&slot.log_thread).await?;
        Ok(())
    }

    /// Threads the log holds but the runtime does not serve, because their log was trimmed
    /// from its start before this runtime started (a fold needs the thread's first event).
    pub fn unavailable_threads(&self) -> Vec<String> {
        self.inner
            .unavailable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
    /// paged by index stays stable while threads are added.
    pub async fn summaries(&self) -> Vec<ThreadSummary> {
        let slots: Vec<(String, Arc<ThreadSlot>)> = self
            .lock_threads()
            .iter()
            .map(|(id, slot)| (id.clone(), Arc::clone(slot)))
            .collect();
        let mut out = Vec::with_capacity(slots.len());
        for (id, slot) in slots {
            let state = slot.state.lock().await;
            out.push(ThreadSummary {
                id,
                title: state.title.clone(),
                model: state.model.clone(),
                created_at_ms: state.created_at_ms,
                updated_at_ms: state.updated_at_ms,
                message_count: state.messages.len() as u64,
            });
        }
        out.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        out
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

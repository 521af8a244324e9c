//! Rebuilding the threads at start and keeping that cheap: every thread's log folded (from its
//! checkpoint when it has a usable one), what a stop interrupted ended, and a thread's state
//! checkpointed in the background once enough events were appended since the last one.

use std::sync::Arc;

use super::{RunningTurn, Runtime, RuntimeError, ThreadSlot, lock};
use crate::event::{StampedEvent, ThreadEvent, TurnStatus};
use crate::state::ThreadState;
use agentwire_events::{After, Position, ThreadId};

/// Events read per page when a thread is replayed.
const REPLAY_PAGE: usize = 1_000;

/// A thread's state is checkpointed when this many events (or half the thread, if that is
/// more) were appended since its last checkpoint. Each checkpoint costs the size of the state;
/// with the interval growing with the thread, the checkpoints of a thread that grows to `n`
/// events cost about three states of `n` in all, so writing them stays proportional to the
/// events appended, and a restart folds at most a third of a thread after its checkpoint.
pub const CHECKPOINT_EVERY_EVENTS: u64 = 1_000;

/// The checkpoint format this build writes and reads.
const CHECKPOINT_FORMAT: u32 = 1;

/// The events after which a thread of `next_position` events is checkpointed again.
fn checkpoint_interval(next_position: u64) -> u64 {
    CHECKPOINT_EVERY_EVENTS.max(next_position / 2)
}

/// At a thread's creation and at the end of a turn, a checkpoint is written once a twentieth of
/// the thread's events (at least one) were appended since the last one: trimming never passes
/// a thread's checkpoint, so this keeps the log trimmable up to a recent turn's end, while the
/// cost of writing checkpoints (each the size of the state) stays proportional to the events.
pub const CHECKPOINT_AT_TURN_END_FRACTION: u64 = 20;

/// A checkpoint's payload.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CheckpointPayload<S> {
    format: u32,
    state: S,
}

/// A folded thread and the events its checkpoint covers.
struct Replayed {
    state: ThreadState,
    checkpointed: u64,
}

impl Runtime {
    pub(super) async fn replay_all(&self) -> Result<(), RuntimeError> {
        let mut after: Option<agentwire_events::ThreadId> = None;
        let mut resumed = Vec::new();
        loop {
            let page = self.inner.log.threads(after.as_ref(), REPLAY_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.thread.clone());
            for info in page.iter().filter(|info| !info.deleted) {
                let id = info.thread.as_str().to_owned();
                let state = match self.replay_thread(&info.thread).await {
                    Ok(state) => state,
                    // A log trimmed from its start cannot be folded (there is no checkpoint
                    // to start from). The runtime serves the other threads; this one stays in
                    // the log untouched and is reported.
                    Err(RuntimeError::Log(agentwire_events::Error::Expired {
                        low_watermark,
                        ..
                    })) => {
                        tracing::error!(
                            thread = %id,
                            low_watermark,
                            "the thread's log was trimmed from its start and cannot be replayed; it is not served"
                        );
                        lock(&self.inner.unavailable).push(id);
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                let checkpointed = state.checkpointed;
                self.claim_turn_ids(&id, &state.state);
                let slot = Arc::new(ThreadSlot::new(&id, state.state, checkpointed)?);
                let (repairs, resume) = {
                    let state = slot.state.lock().await;
                    match self.resumable_turn(&state) {
                        Some(turn_id) => (resume_repairs(&state, &turn_id), Some(turn_id)),
                        None => (state.repairs_after_restart(), None),
                    }
                };
                if !repairs.is_empty() {
                    tracing::info!(thread = %id, repairs = repairs.len(), "ending what the stop interrupted");
                    self.append(&id, &slot, repairs).await?;
                }
                let deleted = slot.state.lock().await.deleted;
                if deleted {
                    // Deleted, but the stop came before its events were removed.
                    self.inner.log.delete_thread(&info.thread).await?;
                } else {
                    if let Some(turn_id) = resume {
                        resumed.push((id.clone(), turn_id));
                    }
                    self.lock_threads().insert(id, slot);
                }
            }
        }
        for (thread_id, turn_id) in resumed {
            self.resume_turn(&thread_id, &turn_id).await?;
        }
        Ok(())
    }

    /// The active turn of `state` the runtime runs again rather than fails: one gated by a
    /// durable human task, not being stopped, on an agent that resumes turns.
    fn resumable_turn(&self, state: &ThreadState) -> Option<String> {
        let turn = state.active_turn.as_ref()?;
        let gated = state
            .human_tasks
            .values()
            .any(|t| t.task.turn_id == turn.id);
        (gated && turn.status != TurnStatus::Cancelling && self.inner.agent.resumes_turns())
            .then(|| turn.id.clone())
    }

    /// Runs the agent again on a turn a stop interrupted while a human task gated it.
    async fn resume_turn(&self, thread_id: &str, turn_id: &str) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let (input, started_at, declined) = {
            let state = slot.state.lock().await;
            let started_at = state.active_turn.as_ref().map_or(0, |t| t.started_at_ms);
            // A task of the turn declined before the stop fails the turn as it would have.
            let declined = state
                .human_tasks
                .values()
                .filter(|t| t.task.turn_id == turn_id)
                .find_map(|t| t.declined());
            (
                state.turn_input(turn_id).unwrap_or_default(),
                started_at,
                declined,
            )
        };
        let (cancel, cancel_rx) = tokio::sync::watch::channel(declined.is_some());
        *lock(&slot.running) = Some(RunningTurn {
            turn_id: turn_id.to_owned(),
            cancel,
            failure: declined,
        });
        tracing::info!(thread = %thread_id, turn = %turn_id, "running a turn gated by a human task again");
        self.run_agent(thread_id, turn_id, input, started_at, cancel_rx);
        Ok(())
    }

    /// Records the ids of the thread's turns (each turn's input is one user message), so that
    /// no other thread can start a turn with one of them.
    fn claim_turn_ids(&self, thread_id: &str, state: &ThreadState) {
        let mut turn_ids = lock(&self.inner.turn_ids);
        for message in &state.messages {
            if message.role == crate::event::Role::User {
                turn_ids
                    .entry(message.turn_id.clone())
                    .or_insert_with(|| thread_id.to_owned());
            }
        }
        if let Some(turn) = &state.active_turn {
            turn_ids
                .entry(turn.id.clone())
                .or_insert_with(|| thread_id.to_owned());
        }
    }

    /// Folds a thread's log, from its checkpoint when it has a usable one: one this build
    /// reads, which covers the events up to the first one the log still holds.
    async fn replay_thread(&self, thread: &ThreadId) -> Result<Replayed, RuntimeError> {
        let id = thread.as_str();
        let mut state = ThreadState::default();
        let mut after = After::Start;
        let mut checkpointed = 0;
        if let Some(checkpoint) = self.inner.log.checkpoint(thread).await? {
            match serde_json::from_slice::<CheckpointPayload<ThreadState>>(&checkpoint.payload) {
                Ok(payload)
                    if payload.format == CHECKPOINT_FORMAT
                        && payload.state.next_position == checkpoint.through + 1 =>
                {
                    state = payload.state;
                    checkpointed = state.next_position;
                    after = After::Position(Position {
                        log_id: self.inner.log.log_id(),
                        seq: checkpoint.through,
                    });
                }
                Ok(_) => tracing::warn!(
                    thread = %id,
                    "the thread's checkpoint is of another format; the log is folded from its start"
                ),
                Err(error) => tracing::warn!(
                    thread = %id,
                    %error,
                    "the thread's checkpoint does not decode; the log is folded from its start"
                ),
            }
        }
        loop {
            let page = self.inner.log.read(thread, after, REPLAY_PAGE).await?;
            for stored in &page.events {
                fold_stored(&mut state, id, stored)?;
            }
            match page.events.last() {
                Some(last) if !page.at_head() => {
                    after = After::Position(last.position(self.inner.log.log_id()));
                }
                _ => break,
            }
        }
        Ok(Replayed {
            state,
            checkpointed,
        })
    }

    /// Writes the thread's checkpoint in the background when enough events were appended since
    /// the last one: [`CHECKPOINT_EVERY_EVENTS`] (or half the thread), or at a
    /// `boundary` (the thread's creation, a turn's end) a
    /// [`CHECKPOINT_AT_TURN_END_FRACTION`]th of the thread. Called under the thread's lock with
    /// its state.
    pub(super) fn checkpoint_if_due(
        &self,
        thread_id: &str,
        slot: &ThreadSlot,
        state: &ThreadState,
        boundary: bool,
    ) {
        use std::sync::atomic::Ordering;
        let covered = slot.checkpointed.load(Ordering::Relaxed);
        let next = state.next_position;
        let since = next.saturating_sub(covered);
        let due = since >= checkpoint_interval(next)
            || (boundary && since >= (next / CHECKPOINT_AT_TURN_END_FRACTION).max(1));
        if next == 0 || since == 0 || !due {
            return;
        }
        slot.checkpointed.store(next, Ordering::Relaxed);
        let state = state.clone();
        let log = Arc::clone(&self.inner.log);
        let thread = slot.log_thread.clone();
        let thread_id = thread_id.to_owned();
        tokio::spawn(async move {
            let encoded = tokio::task::spawn_blocking(move || {
                serde_json::to_vec(&CheckpointPayload {
                    format: CHECKPOINT_FORMAT,
                    state: &state,
                })
            })
            .await;
            let result = match encoded {
                Ok(Ok(payload)) => log
                    .put_checkpoint(
                        &thread,
                        agentwire_events::Checkpoint {
                            through: next - 1,
                            payload,
                        },
                    )
                    .await
                    .map_err(|e| e.to_string()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match result {
                Ok(()) => {
                    tracing::debug!(thread = %thread_id, through = next - 1, "checkpoint written")
                }
                // The next due checkpoint tries again; until then a restart folds more events.
                Err(error) => {
                    tracing::warn!(thread = %thread_id, %error, "the thread's checkpoint was not written")
                }
            }
        });
    }
}

/// What a start appends for a turn it runs again: pending interactions cancelled (their cards
/// died with the process), a new nonce for every open human task of the turn (answers from
/// cards issued before are refused), and the turn waiting again if a task is open.
fn resume_repairs(state: &ThreadState, turn_id: &str) -> Vec<ThreadEvent> {
    let mut events = state.cancel_pending("the runtime stopped while the interaction was pending");
    let mut open = false;
    for task in state.open_human_tasks(turn_id) {
        open = true;
        events.push(ThreadEvent::HumanTaskReissued {
            task_id: task.task.id.clone(),
            turn_id: turn_id.to_owned(),
            nonce: uuid::Uuid::new_v4().to_string(),
        });
    }
    let status = if open {
        TurnStatus::WaitingForUser
    } else {
        TurnStatus::Running
    };
    if state
        .active_turn
        .as_ref()
        .is_some_and(|t| t.status != status)
    {
        events.push(ThreadEvent::TurnStatusChanged {
            turn_id: turn_id.to_owned(),
            status,
        });
    }
    events
}

/// Decodes a stored event of thread `thread_id`.
pub(super) fn decode_stored(
    thread_id: &str,
    stored: &agentwire_events::StoredEvent,
) -> Result<StampedEvent, RuntimeError> {
    serde_json::from_slice(&stored.payload).map_err(|e| RuntimeError::Undecodable {
        thread_id: thread_id.to_owned(),
        seq: stored.seq,
        reason: e.to_string(),
    })
}

/// Decodes a stored event of thread `thread_id` and folds it into `state`: the event folded.
pub(super) fn fold_stored(
    state: &mut ThreadState,
    thread_id: &str,
    stored: &agentwire_events::StoredEvent,
) -> Result<StampedEvent, RuntimeError> {
    let event = decode_stored(thread_id, stored)?;
    state
        .apply(stored.seq, &event)
        .map_err(|error| RuntimeError::Fold {
            thread_id: thread_id.to_owned(),
            error,
        })?;
    Ok(event)
}

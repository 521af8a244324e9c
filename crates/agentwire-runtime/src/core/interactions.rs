//! Interactions owned by the core: a pending interaction is resolved once, by whoever comes
//! first — a host's answer, its deadline, the turn's cancel or end, the thread's deletion. The
//! resolution is one check-and-append (the interaction must still be pending), recorded before
//! the turn that waits learns it. A host's answer is checked against the interaction by the
//! core and fails closed: an answer of another kind cancels the interaction and fails its turn;
//! an answer to an interaction that is not pending (unknown, resolved, of another thread) or
//! past its deadline changes nothing else.

use std::sync::Arc;

use super::{Runtime, RuntimeError, ThreadSlot, lock};
use crate::event::{InteractionKind, Resolution, ThreadEvent, TurnStatus};
use crate::state::ThreadState;

/// Whether a host may resolve an interaction of `ask` with `resolution`.
fn fits(ask: &InteractionKind, resolution: &Resolution) -> bool {
    match resolution {
        Resolution::Approved | Resolution::Rejected { .. } => {
            matches!(ask, InteractionKind::Approval { .. })
        }
        Resolution::Submitted { .. } => matches!(ask, InteractionKind::UserInput { .. }),
        // A host may decline either kind.
        Resolution::Cancelled { .. } => true,
        // Only the deadline expires an interaction.
        Resolution::Expired => false,
    }
}

impl Runtime {
    /// A host's answer to a pending interaction (a decision, a submitted form, a dismissal).
    ///
    /// # Errors
    /// [`RuntimeError::InteractionNotFound`] when the thread has no such pending interaction,
    /// or its deadline has passed (it is then recorded `expired`): nothing else changes.
    /// [`RuntimeError::AnswerRefused`] when the answer is not one the interaction takes (an
    /// approval's decision for a form, or the reverse): the interaction is failed closed, as by
    /// [`fail_interaction`](Self::fail_interaction).
    pub async fn resolve(
        &self,
        thread_id: &str,
        interaction_id: &str,
        resolution: Resolution,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let (fit, expired) = {
            let state = slot.state.lock().await;
            let Some(pending) = state.pending.get(interaction_id) else {
                return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()));
            };
            (
                fits(&pending.ask, &resolution),
                pending.expires_at_ms <= self.inner.clock.now_ms(),
            )
        };
        if expired {
            // Its waiter may not have woken yet; the deadline stands either way.
            let _ = self
                .settle(thread_id, &slot, interaction_id, Resolution::Expired, None)
                .await;
            return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()));
        }
        if !fit {
            let reason = "the answer does not match the interaction".to_owned();
            self.fail_interaction(thread_id, interaction_id, &reason)
                .await?;
            return Err(RuntimeError::AnswerRefused {
                interaction_id: interaction_id.to_owned(),
                reason,
            });
        }
        self.settle(thread_id, &slot, interaction_id, resolution, None)
            .await
    }

    /// Fails closed on a host's answer that cannot be taken (invalid, mismatched, or an error
    /// in place of an answer): the interaction ends `cancelled` with `reason`, and its turn is
    /// stopped and ends `failed` at `execute` with `reason` as its message.
    ///
    /// # Errors
    /// [`RuntimeError::InteractionNotFound`] when it is no longer pending (another answer came
    /// first): nothing changes.
    pub async fn fail_interaction(
        &self,
        thread_id: &str,
        interaction_id: &str,
        reason: &str,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let resolution = Resolution::Cancelled {
            reason: reason.to_owned(),
        };
        self.settle(
            thread_id,
            &slot,
            interaction_id,
            resolution,
            Some(reason.to_owned()),
        )
        .await
    }

    /// Resolves a pending interaction, if it still is: one check-and-append of its resolution
    /// and its turn's status (running again, or still stopping), then the waiting turn is
    /// handed the resolution. With `fail_turn`, the turn is told to stop and to end `failed`
    /// with that message in the same check, before it can learn the resolution.
    ///
    /// # Errors
    /// [`RuntimeError::InteractionNotFound`] when it is not pending: another resolution came
    /// first (nothing changes, and the turn is not stopped).
    pub(super) async fn settle(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        interaction_id: &str,
        resolution: Resolution,
        fail_turn: Option<String>,
    ) -> Result<(), RuntimeError> {
        let decide = {
            let (slot, interaction_id, resolution) = (
                Arc::clone(slot),
                interaction_id.to_owned(),
                resolution.clone(),
            );
            move |state: &ThreadState| {
                let Some(pending) = state.pending.get(&interaction_id) else {
                    return Err(RuntimeError::InteractionNotFound(interaction_id));
                };
                if let Some(message) = &fail_turn {
                    slot.signal_cancel(&pending.turn_id, Some(message));
                }
                let stopping = state
                    .active_turn
                    .as_ref()
                    .is_some_and(|t| t.status == TurnStatus::Cancelling)
                    || lock(&slot.running)
                        .as_ref()
                        .is_some_and(|r| r.turn_id == pending.turn_id && *r.cancel.borrow());
                let status = if stopping {
                    TurnStatus::Cancelling
                } else {
                    TurnStatus::Running
                };
                let events = vec![
                    ThreadEvent::InteractionResolved {
                        interaction_id: interaction_id.clone(),
                        turn_id: Some(pending.turn_id.clone()),
                        approval_id: pending.ask.approval_id().map(str::to_owned),
                        resolution,
                    },
                    ThreadEvent::TurnStatusChanged {
                        turn_id: pending.turn_id.clone(),
                        status,
                    },
                ];
                Ok((events, ()))
            }
        };
        // The hand-over runs in the append's task too, so a caller that stops waiting cannot
        // leave the turn without the resolution that was recorded.
        let runtime = self.clone();
        let (slot, thread_id, interaction_id) = (
            Arc::clone(slot),
            thread_id.to_owned(),
            interaction_id.to_owned(),
        );
        tokio::spawn(async move {
            runtime.append_with(&thread_id, &slot, decide).await?;
            if let Some(waiter) = lock(&slot.waiters).remove(&interaction_id) {
                let _ = waiter.send(resolution);
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| Err(RuntimeError::Stopped(e.to_string())))
    }
}

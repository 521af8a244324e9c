//! The host's answers to interactions: a resolution handed to the turn that waits for it, and an
//! answer that cannot be taken failed closed (the interaction cancelled, its turn failed).

use super::{Runtime, RuntimeError};
use crate::event::Resolution;

impl Runtime {
    /// Resolves a pending interaction (the host's decision, submitted form or cancel). The
    /// caller has already validated the resolution against the interaction: a runtime never
    /// takes an unchecked decision.
    pub async fn resolve(
        &self,
        thread_id: &str,
        interaction_id: &str,
        resolution: Resolution,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        if !slot.state.lock().await.pending.contains_key(interaction_id) {
            return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()));
        }
        if self.wake(interaction_id, resolution) {
            Ok(())
        } else {
            Err(RuntimeError::InteractionNotFound(interaction_id.to_owned()))
        }
    }

    /// Fails closed on a host's answer that cannot be taken (invalid, mismatched, or an error
    /// in place of an answer): the interaction ends `cancelled` with `reason`, and its turn is
    /// stopped and ends `failed` at `execute` with `reason` as its message.
    pub async fn fail_interaction(
        &self,
        thread_id: &str,
        interaction_id: &str,
        reason: &str,
    ) -> Result<(), RuntimeError> {
        let slot = self.slot(thread_id)?;
        let turn_id = match slot.state.lock().await.pending.get(interaction_id) {
            Some(interaction) => interaction.turn_id.clone(),
            None => return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned())),
        };
        self.inner
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(turn_id.clone(), reason.to_owned());
        self.wake(
            interaction_id,
            Resolution::Cancelled {
                reason: reason.to_owned(),
            },
        );
        self.signal_cancel(&turn_id);
        Ok(())
    }

    /// Hands a resolution to the turn awaiting it; the turn records it. False if none waits.
    pub(super) fn wake(&self, interaction_id: &str, resolution: Resolution) -> bool {
        let waiter = self
            .inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(interaction_id);
        waiter.is_some_and(|tx| tx.send(resolution).is_ok())
    }

    pub(super) fn forget_waiter(&self, interaction_id: &str) {
        self.inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(interaction_id);
    }
}

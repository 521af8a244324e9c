//! Interactions owned by the core: a pending interaction is resolved once, by whoever comes
//! first — a host's answer, its deadline, the turn's cancel or end, the thread's deletion. The
//! resolution is one check-and-append (the interaction must still be pending), recorded before
//! the turn that waits learns it. A host's answer is checked against the interaction by the
//! core and fails closed: an answer of another kind cancels the interaction and fails its turn;
//! an answer to an interaction that is not pending (unknown, resolved, of another thread) or
//! past its deadline changes nothing else.
//!
//! An approval is settled by a [`Decision`] ([`Runtime::decide`]): only an accepting decision
//! bound to the pending request approves; an invalid answer, an error, no answer in time, a
//! mismatched binding, or a grant beyond what was asked is a decline whose reason says why, and
//! the turn goes on with the tool refused. What settled it is recorded ([`Via`]), with the
//! decision; an `acceptForTurn` or `acceptForSession` becomes a grant of the thread's state,
//! which approves identical requests later without asking ([`TurnContext::ask`]).
//!
//! [`TurnContext::ask`]: super::TurnContext::ask

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Runtime, RuntimeError, ThreadSlot, lock};
use crate::decision::{self, ApprovalBinding, Decision, DecisionKind, Via};
use crate::event::{Interaction, InteractionKind, Resolution, ThreadEvent, TurnStatus};
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

/// How an interaction is settled: the resolution its turn learns and, for an approval, what
/// settled it and the decision taken.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settlement {
    pub resolution: Resolution,
    pub via: Option<Via>,
    pub decision: Option<Decision>,
}

impl From<Resolution> for Settlement {
    fn from(resolution: Resolution) -> Settlement {
        Settlement {
            resolution,
            via: None,
            decision: None,
        }
    }
}

/// A host's answer to an approval, as a face received it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The decision's JSON form (`ApprovalDecision`), read by [`Decision::parse`].
    Value(Value),
    /// A decision already read.
    Decision(Decision),
    /// The host answered with an error instead of a decision.
    Error(String),
    /// The host did not answer within the face's time.
    Timeout(Duration),
}

/// An approval's whole binding as it stands, or `None` for user input or an approval opened
/// without one.
pub(super) fn binding_of(thread_id: &str, interaction: &Interaction) -> Option<ApprovalBinding> {
    let binding = interaction.binding.as_ref()?;
    Some(ApprovalBinding {
        thread_id: thread_id.to_owned(),
        turn_id: interaction.turn_id.clone(),
        item_id: interaction.id.clone(),
        attempt_id: None,
        operation_digest: binding.operation_digest.clone(),
        policy_digest: binding.policy_digest.clone(),
        workspace_digest: None,
        nonce: binding.nonce.clone(),
        expires_at_ms: interaction.expires_at_ms,
        requested_permissions: binding.requested_permissions.clone(),
    })
}

/// What `answer` settles an approval bound to `pending` as (given the binding the face
/// presented, if it presented one): the resolution the turn learns, what settled it and the
/// decision taken.
fn judge(
    presented: &ApprovalBinding,
    pending: Option<&ApprovalBinding>,
    answer: Answer,
) -> (Resolution, Via, Option<Decision>) {
    let refuse = |reason: String, via: Via| {
        (
            Resolution::Rejected {
                reason: Some(reason),
            },
            via,
            None,
        )
    };
    let decision = match answer {
        Answer::Decision(decision) => decision,
        Answer::Value(value) => match Decision::parse(&value) {
            Ok(decision) => decision,
            Err(why) => {
                return refuse(
                    format!("the decision is not a valid ApprovalDecision: {why}"),
                    Via::Invalid,
                );
            }
        },
        Answer::Error(message) => {
            return refuse(
                format!("the host answered with an error: {message}"),
                Via::Error,
            );
        }
        Answer::Timeout(after) => {
            return refuse(
                format!("no decision within {} ms", after.as_millis()),
                Via::Timeout,
            );
        }
    };
    if let Some(pending) = pending
        && let Some(why) = presented.mismatch(pending)
    {
        return refuse(why, Via::Binding);
    }
    let requested = pending.map_or(&[][..], |p| p.requested_permissions.as_slice());
    if let Err(why) = decision::within(&decision, requested) {
        return refuse(why, Via::Binding);
    }
    let resolution = if decision.kind.accepts() {
        Resolution::Approved
    } else {
        Resolution::Rejected {
            reason: Some(
                decision
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("the host chose {}", decision.kind.as_str())),
            ),
        }
    };
    (resolution, Via::of(decision.kind), Some(decision))
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
            return Err(self.expire(thread_id, &slot, interaction_id).await);
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
        // An approve or reject is the decision acceptOnce or decline.
        let (via, decision) = match &resolution {
            Resolution::Approved => (
                Some(Via::AcceptOnce),
                Some(Decision::of(DecisionKind::AcceptOnce)),
            ),
            Resolution::Rejected { reason } => (
                Some(Via::Decline),
                Some(Decision {
                    reason: reason.clone(),
                    ..Decision::of(DecisionKind::Decline)
                }),
            ),
            _ => (None, None),
        };
        let settlement = Settlement {
            resolution,
            via,
            decision,
        };
        self.settle(thread_id, &slot, interaction_id, settlement, None)
            .await
    }

    /// A host's answer to a pending approval, bound to `binding` (the request as the face
    /// presented it): settles it at once, failing closed. An accepting decision whose binding
    /// equals the pending request's, and which grants nothing the request does not ask for,
    /// approves; anything else declines with the reason (an invalid decision, an error, a
    /// timeout, another binding, a grant beyond the request). Returns what settled it.
    ///
    /// # Errors
    /// [`RuntimeError::InteractionNotFound`] when the thread has no such pending approval (it
    /// was settled first, or never was), or its deadline has passed (it is then recorded
    /// `expired`): nothing else changes.
    pub async fn decide(
        &self,
        binding: &ApprovalBinding,
        answer: Answer,
    ) -> Result<Via, RuntimeError> {
        let (thread_id, interaction_id) = (binding.thread_id.as_str(), binding.item_id.as_str());
        let slot = self.slot(thread_id)?;
        let (pending, expired) = {
            let state = slot.state.lock().await;
            match state.pending.get(interaction_id) {
                Some(p) if matches!(p.ask, InteractionKind::Approval { .. }) => (
                    binding_of(thread_id, p),
                    p.expires_at_ms <= self.inner.clock.now_ms(),
                ),
                _ => return Err(RuntimeError::InteractionNotFound(interaction_id.to_owned())),
            }
        };
        if expired {
            return Err(self.expire(thread_id, &slot, interaction_id).await);
        }
        let (resolution, via, decision) = judge(binding, pending.as_ref(), answer);
        let settlement = Settlement {
            resolution,
            via: Some(via),
            decision,
        };
        self.settle(thread_id, &slot, interaction_id, settlement, None)
            .await?;
        Ok(via)
    }

    /// An answer came after the interaction's deadline: it is recorded `expired` (its waiter
    /// may not have woken yet; the deadline stands either way), and the answer finds nothing
    /// pending.
    async fn expire(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        interaction_id: &str,
    ) -> RuntimeError {
        let _ = self
            .settle(thread_id, slot, interaction_id, Resolution::Expired, None)
            .await;
        RuntimeError::InteractionNotFound(interaction_id.to_owned())
    }

    /// The binding of `thread_id`'s pending approval `interaction_id`, as a face presents it.
    ///
    /// # Errors
    /// [`RuntimeError::InteractionNotFound`] when no such approval is pending.
    pub async fn approval_binding(
        &self,
        thread_id: &str,
        interaction_id: &str,
    ) -> Result<ApprovalBinding, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let state = slot.state.lock().await;
        state
            .pending
            .get(interaction_id)
            .and_then(|p| binding_of(thread_id, p))
            .ok_or_else(|| RuntimeError::InteractionNotFound(interaction_id.to_owned()))
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
        settlement: impl Into<Settlement>,
        fail_turn: Option<String>,
    ) -> Result<(), RuntimeError> {
        let Settlement {
            resolution,
            via,
            decision,
        } = settlement.into();
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
                let status = if slot.stopping(state, &pending.turn_id) {
                    TurnStatus::Cancelling
                } else {
                    TurnStatus::Running
                };
                let mut events = vec![ThreadEvent::InteractionResolved {
                    interaction_id: interaction_id.clone(),
                    turn_id: Some(pending.turn_id.clone()),
                    approval_id: pending.ask.approval_id().map(str::to_owned),
                    resolution,
                    via,
                    decision,
                }];
                // The status changes when it does (a turn asked while stopping is `cancelling`
                // already).
                let current = state
                    .active_turn
                    .as_ref()
                    .filter(|t| t.id == pending.turn_id)
                    .map(|t| t.status);
                if current != Some(status) {
                    events.push(ThreadEvent::TurnStatusChanged {
                        turn_id: pending.turn_id.clone(),
                        status,
                    });
                }
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

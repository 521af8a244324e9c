//! The turn operations of the [`Runtime`]: starting a turn on the agent, recording how it ended
//! (with the interactions it left pending), and cancelling it; and the [`TurnContext`] through
//! which the agent publishes, records and asks the host during its turn.

use std::sync::Arc;

use tokio::sync::{oneshot, watch};

use super::{LiveEvent, Runtime, RuntimeError, TurnEnd};
use crate::event::{
    FailStage, Interaction, InteractionKind, Operation, Resolution, ThreadEvent, TurnInput,
    TurnStatus,
};
use crate::state::ThreadState;

impl Runtime {
    /// Starts a turn and runs it on the agent in the background; returns once `turn.started`
    /// committed.
    pub async fn start_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        input: TurnInput,
    ) -> Result<(), RuntimeError> {
        if turn_id.is_empty() {
            return Err(RuntimeError::InvalidInput("a turn needs an id".into()));
        }
        let slot = self.slot(thread_id)?;
        if let Some(active) = &slot.state.lock().await.active_turn {
            return Err(RuntimeError::TurnAlreadyActive {
                thread_id: thread_id.to_owned(),
                active: active.id.clone(),
            });
        }
        self.append(
            thread_id,
            &slot,
            vec![ThreadEvent::TurnStarted {
                turn_id: turn_id.to_owned(),
                input: input.clone(),
            }],
        )
        .await?;
        let (cancel_tx, cancel_rx) = watch::channel(false);
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(turn_id.to_owned(), cancel_tx);
        let context = TurnContext {
            runtime: self.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            input,
            cancel: cancel_rx.clone(),
        };
        let runtime = self.clone();
        let agent = Arc::clone(&self.inner.agent);
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        tokio::spawn(async move {
            let end = tokio::spawn(async move { agent.run_turn(context).await }).await;
            let cancelled = *cancel_rx.borrow();
            runtime
                .finish_turn(&thread_id, &turn_id, end, cancelled)
                .await;
        });
        Ok(())
    }

    async fn finish_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        end: Result<TurnEnd, tokio::task::JoinError>,
        cancelled: bool,
    ) {
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(turn_id);
        let Ok(slot) = self.slot(thread_id) else {
            // Deleted while the turn ran: nothing more to record.
            return;
        };
        let failure = self
            .inner
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(turn_id);
        let turn_id = turn_id.to_owned();
        let terminal = match (failure, cancelled, end) {
            (Some(message), _, _) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage: FailStage::Execute,
                message,
            },
            (None, true, _) => ThreadEvent::TurnCancelled {
                turn_id: turn_id.clone(),
                reason: "cancelled".into(),
                message: "the turn was cancelled".into(),
            },
            (None, false, Ok(TurnEnd::Completed)) => ThreadEvent::TurnCompleted {
                turn_id: turn_id.clone(),
            },
            (None, false, Ok(TurnEnd::Failed { stage, message })) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage,
                message,
            },
            (None, false, Err(_)) => ThreadEvent::TurnFailed {
                turn_id: turn_id.clone(),
                stage: FailStage::Execute,
                message: "the agent stopped unexpectedly".into(),
            },
        };
        let runtime = self.clone();
        // The interactions still pending are read under the thread's lock, with the append: an
        // answer landing meanwhile cannot make the end of the turn unrecordable.
        let make = move |state: &ThreadState| {
            let mut events: Vec<ThreadEvent> = state
                .pending
                .iter()
                .map(|(id, interaction)| {
                    runtime.forget_waiter(id);
                    ThreadEvent::InteractionResolved {
                        interaction_id: id.clone(),
                        turn_id: Some(turn_id.clone()),
                        approval_id: interaction.ask.approval_id().map(str::to_owned),
                        resolution: Resolution::Cancelled {
                            reason: "the turn ended".into(),
                        },
                    }
                })
                .collect();
            events.push(terminal);
            events
        };
        if let Err(error) = self.append_with(thread_id, &slot, make).await {
            tracing::error!(thread = %thread_id, %error, "could not record the end of a turn");
        }
    }

    /// Asks the active turn to stop; true if it was running (its end is recorded when the agent
    /// returns).
    pub async fn cancel_turn(&self, thread_id: &str, turn_id: &str) -> Result<bool, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let status = match &slot.state.lock().await.active_turn {
            Some(active) if active.id == turn_id => active.status,
            _ => return Err(RuntimeError::TurnNotFound(turn_id.to_owned())),
        };
        if status == TurnStatus::Cancelling {
            return Ok(false);
        }
        self.append(
            thread_id,
            &slot,
            vec![ThreadEvent::TurnStatusChanged {
                turn_id: turn_id.to_owned(),
                status: TurnStatus::Cancelling,
            }],
        )
        .await?;
        self.signal_cancel(turn_id);
        Ok(true)
    }

    pub(super) fn signal_cancel(&self, turn_id: &str) {
        if let Some(cancel) = self
            .inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(turn_id)
        {
            let _ = cancel.send(true);
        }
    }
}

/// What an agent's turn can do: publish live events, record messages and operations, and ask
/// the host.
#[derive(Debug, Clone)]
pub struct TurnContext {
    runtime: Runtime,
    thread_id: String,
    turn_id: String,
    input: TurnInput,
    cancel: watch::Receiver<bool>,
}

impl TurnContext {
    /// The thread.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// What the user sent.
    pub fn input(&self) -> &TurnInput {
        &self.input
    }

    /// Whether the turn was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Resolves when the turn is asked to stop.
    pub async fn cancelled(&self) {
        let mut cancel = self.cancel.clone();
        // An error means the runtime dropped the turn: that is a stop too.
        let _ = cancel.wait_for(|c| *c).await;
    }

    /// Publishes an ephemeral event.
    pub fn live(&self, event: LiveEvent) {
        self.runtime
            .publish_live(&self.thread_id, &self.turn_id, event);
    }

    async fn record(&self, event: ThreadEvent) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(&self.thread_id)?;
        self.runtime
            .append(&self.thread_id, &slot, vec![event])
            .await
    }

    /// Records a completed message.
    pub async fn message(&self, stream_id: &str, text: String) -> Result<(), RuntimeError> {
        self.record(ThreadEvent::MessageCompleted {
            turn_id: self.turn_id.clone(),
            stream_id: stream_id.to_owned(),
            text,
        })
        .await
    }

    /// Records a completed operation.
    pub async fn operation(&self, operation: Operation) -> Result<(), RuntimeError> {
        self.record(ThreadEvent::OperationCompleted {
            turn_id: self.turn_id.clone(),
            operation,
        })
        .await
    }

    /// Asks the host and waits for the resolution: the host's answer, `expired` at the
    /// deadline, or `cancelled` when the turn is stopped. The interaction is recorded (and
    /// published) before it can be answered, and its resolution after.
    pub async fn ask(&self, ask: InteractionKind) -> Result<Resolution, RuntimeError> {
        let runtime = &self.runtime;
        let ttl = runtime.inner.config.interaction_ttl;
        let now = runtime.inner.clock.now_ms();
        let interaction = Interaction {
            id: uuid::Uuid::new_v4().to_string(),
            turn_id: self.turn_id.clone(),
            expires_at_ms: now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            ask,
        };
        let id = interaction.id.clone();
        let approval_id = interaction.ask.approval_id().map(str::to_owned);
        let (tx, rx) = oneshot::channel();
        runtime
            .inner
            .waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), tx);
        let slot = runtime.slot(&self.thread_id)?;
        let opened = vec![
            ThreadEvent::InteractionOpened { interaction },
            ThreadEvent::TurnStatusChanged {
                turn_id: self.turn_id.clone(),
                status: TurnStatus::WaitingForUser,
            },
        ];
        if let Err(error) = runtime.append(&self.thread_id, &slot, opened).await {
            runtime.forget_waiter(&id);
            return Err(error);
        }
        let resolution = tokio::select! {
            answer = rx => answer.unwrap_or(Resolution::Cancelled { reason: "the runtime dropped the interaction".into() }),
            () = tokio::time::sleep(ttl) => Resolution::Expired,
            () = self.cancelled() => Resolution::Cancelled { reason: "the turn was cancelled".into() },
        };
        runtime.forget_waiter(&id);
        let status = if self.is_cancelled() {
            TurnStatus::Cancelling
        } else {
            TurnStatus::Running
        };
        runtime
            .append(
                &self.thread_id,
                &slot,
                vec![
                    ThreadEvent::InteractionResolved {
                        interaction_id: id,
                        turn_id: Some(self.turn_id.clone()),
                        approval_id,
                        resolution: resolution.clone(),
                    },
                    ThreadEvent::TurnStatusChanged {
                        turn_id: self.turn_id.clone(),
                        status,
                    },
                ],
            )
            .await?;
        Ok(resolution)
    }
}

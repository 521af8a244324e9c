//! The turn operations of the [`Runtime`]: starting a turn on the agent, recording how it ended
//! (with the interactions it left pending), and cancelling it; and the [`TurnContext`] through
//! which the agent publishes, records and asks the host during its turn.

use std::sync::Arc;

use tokio::sync::{oneshot, watch};

use super::{LiveEvent, RunningTurn, Runtime, RuntimeError, TurnEnd, lock};
use crate::decision::{self, Binding, PermissionGrant, Via};
use crate::event::{
    FailStage, Interaction, InteractionKind, Operation, Resolution, ThreadEvent, TurnInput,
    TurnStatus,
};
use crate::state::ThreadState;

impl Runtime {
    /// Starts a turn and runs it on the agent in the background; returns once `turn.started`
    /// committed. Turn ids are unique per store: an id this thread already used is
    /// [`RuntimeError::TurnAlreadyStarted`] (a retry finds its turn), one of another thread
    /// [`RuntimeError::TurnIdInUse`].
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
        {
            let mut turn_ids = lock(&self.inner.turn_ids);
            match turn_ids.get(turn_id) {
                Some(owner) if owner == thread_id => {
                    return Err(RuntimeError::TurnAlreadyStarted {
                        thread_id: thread_id.to_owned(),
                        turn_id: turn_id.to_owned(),
                    });
                }
                Some(owner) => {
                    return Err(RuntimeError::TurnIdInUse {
                        turn_id: turn_id.to_owned(),
                        thread_id: owner.clone(),
                    });
                }
                None => {
                    turn_ids.insert(turn_id.to_owned(), thread_id.to_owned());
                }
            }
        }
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let started_at = self.inner.clock.now_ms();
        // Run in place and, if the caller stops waiting, to its end as a task: once the turn's
        // start is admitted, its commit is followed by the agent's run (or, failed, by the
        // turn's release), whoever waits.
        let runtime = self.clone();
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        agentwire_events::FinishOnDrop::new(async move {
            runtime
                .start_recorded_turn(
                    &thread_id, &turn_id, &slot, input, started_at, cancel_tx, cancel_rx,
                )
                .await
        })
        .await
    }

    /// [`Runtime::start_turn`] once the turn's id is claimed: `turn.started` appended, then the
    /// agent run, or the turn released when the append failed.
    #[allow(clippy::too_many_arguments)]
    async fn start_recorded_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        slot: &Arc<super::ThreadSlot>,
        input: TurnInput,
        started_at: u64,
        cancel_tx: watch::Sender<bool>,
        cancel_rx: watch::Receiver<bool>,
    ) -> Result<(), RuntimeError> {
        let started = self
            .append_with(thread_id, slot, {
                let (slot, thread_id, turn_id) =
                    (Arc::clone(slot), thread_id.to_owned(), turn_id.to_owned());
                let input = input.clone();
                move |state: &ThreadState| {
                    if state.archived {
                        return Err(RuntimeError::ThreadArchived(thread_id));
                    }
                    if let Some(active) = &state.active_turn {
                        return Err(RuntimeError::TurnAlreadyActive {
                            thread_id,
                            active: active.id.clone(),
                        });
                    }
                    // Installed under the thread's lock, so a cancel that follows the commit
                    // always finds the turn.
                    *lock(&slot.running) = Some(RunningTurn {
                        turn_id: turn_id.clone(),
                        cancel: cancel_tx,
                        failure: None,
                    });
                    Ok((vec![ThreadEvent::TurnStarted { turn_id, input }], ()))
                }
            })
            .await;
        if let Err(error) = started {
            let mut running = lock(&slot.running);
            if running.as_ref().is_some_and(|r| r.turn_id == turn_id) {
                *running = None;
            }
            drop(running);
            let mut turn_ids = lock(&self.inner.turn_ids);
            if turn_ids
                .get(turn_id)
                .is_some_and(|owner| owner == thread_id)
            {
                turn_ids.remove(turn_id);
            }
            return Err(error);
        }
        self.run_agent(thread_id, turn_id, input, started_at, cancel_rx);
        Ok(())
    }

    /// Runs the agent on a recorded turn in the background (its `RunningTurn` installed), with
    /// the turn's time limit counted from `started_at`, and records how it ended.
    pub(super) fn run_agent(
        &self,
        thread_id: &str,
        turn_id: &str,
        input: TurnInput,
        started_at: u64,
        cancel_rx: watch::Receiver<bool>,
    ) {
        let deadline_ms = self
            .inner
            .config
            .turn_timeout
            .map(|limit| started_at.saturating_add(millis(limit)));
        let context = TurnContext {
            runtime: self.clone(),
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            input,
            cancel: cancel_rx,
            deadline_ms,
        };
        let runtime = self.clone();
        let agent = Arc::clone(&self.inner.agent);
        let (thread_id, turn_id) = (thread_id.to_owned(), turn_id.to_owned());
        tokio::spawn(async move {
            let mut run = tokio::spawn(async move { agent.run_turn(context).await });
            let end = match deadline_ms {
                None => run.await,
                Some(at) => {
                    tokio::select! {
                        end = &mut run => end,
                        () = runtime.inner.clock.sleep_until(at) => {
                            runtime.stop_turn(&thread_id, &turn_id, "the turn ran out of time");
                            run.await
                        }
                    }
                }
            };
            runtime.finish_turn(&thread_id, &turn_id, end).await;
        });
    }

    /// Records how the turn ended, with the interactions it left pending resolved `cancelled`
    /// first; in one check-and-append, so an answer landing meanwhile cannot make the end of
    /// the turn unrecordable. When the commit of the end fails (and with it whatever the turn
    /// recorded since the last commit), the turn is recorded `failed` with the log's error,
    /// again, a few times.
    async fn finish_turn(
        &self,
        thread_id: &str,
        turn_id: &str,
        end: Result<TurnEnd, tokio::task::JoinError>,
    ) {
        let Ok(slot) = self.slot(thread_id) else {
            // Deleted while the turn ran: nothing more to record.
            return;
        };
        let mut end = Some(end);
        for _ in 0..FINISH_ATTEMPTS {
            let decide = {
                let (slot, turn_id, end) = (Arc::clone(&slot), turn_id.to_owned(), end.take());
                move |state: &ThreadState| {
                    let running = lock(&slot.running).take_if(|r| r.turn_id == turn_id);
                    let (failure, cancelled) = running.map_or((None, false), |r| {
                        let cancelled = *r.cancel.borrow();
                        (r.failure, cancelled)
                    });
                    let terminal = match end {
                        Some(end) => terminal_event(turn_id.clone(), failure, cancelled, end),
                        // A retry: the first attempt's commit failed.
                        None => terminal_event(
                            turn_id.clone(),
                            Some(failure.unwrap_or_else(|| "the event log failed".into())),
                            cancelled,
                            Ok(TurnEnd::Completed),
                        ),
                    };
                    let mut waiters = lock(&slot.waiters);
                    for id in state.pending.keys() {
                        waiters.remove(id);
                    }
                    let mut events = state.cancel_pending("the turn ended");
                    events.extend(state.cancel_human_tasks(&turn_id, "the turn ended"));
                    events.push(terminal);
                    Ok((events, ()))
                }
            };
            match self.append_with(thread_id, &slot, decide).await {
                Ok(()) => return,
                Err(RuntimeError::CommitFailed(error)) => {
                    // Read by the next attempt's decision, as a failure the runtime decided.
                    *lock(&slot.running) = Some(RunningTurn {
                        turn_id: turn_id.to_owned(),
                        cancel: watch::channel(true).0,
                        failure: Some(format!("the event log failed: {error}")),
                    });
                }
                Err(error @ RuntimeError::ThreadNotFound(_)) => {
                    tracing::debug!(thread = %thread_id, %error, "the thread went while its turn ended");
                    return;
                }
                Err(error) => {
                    // The end as decided cannot be recorded: the turn is recorded failed with
                    // why, by the next attempt, so that the thread takes turns again; unless
                    // another turn runs by now (this one ended otherwise), which is left alone.
                    tracing::error!(thread = %thread_id, %error, "could not record the end of a turn as decided");
                    let mut running = lock(&slot.running);
                    if running.as_ref().is_some_and(|r| r.turn_id != turn_id) {
                        return;
                    }
                    *running = Some(RunningTurn {
                        turn_id: turn_id.to_owned(),
                        cancel: watch::channel(true).0,
                        failure: Some(format!(
                            "the end of the turn could not be recorded: {error}"
                        )),
                    });
                }
            }
        }
        tracing::error!(thread = %thread_id, "could not record the end of a turn: the log keeps failing");
    }

    /// Asks the active turn to stop; true if it was running (its end is recorded when the agent
    /// returns), false if it was already stopping.
    pub async fn cancel_turn(&self, thread_id: &str, turn_id: &str) -> Result<bool, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let decide = {
            let turn_id = turn_id.to_owned();
            move |state: &ThreadState| match &state.active_turn {
                Some(active) if active.id == turn_id => {
                    if active.status == TurnStatus::Cancelling {
                        return Ok((Vec::new(), false));
                    }
                    let event = ThreadEvent::TurnStatusChanged {
                        turn_id,
                        status: TurnStatus::Cancelling,
                    };
                    Ok((vec![event], true))
                }
                _ => Err(RuntimeError::TurnNotFound(turn_id)),
            }
        };
        let cancelling = self.append_with(thread_id, &slot, decide).await?;
        if cancelling {
            slot.signal_cancel(turn_id, None);
        }
        Ok(cancelling)
    }

    /// Stops a turn from the runtime's side: it ends `failed` at `execute` with `message`.
    fn stop_turn(&self, thread_id: &str, turn_id: &str, message: &str) {
        if let Ok(slot) = self.slot(thread_id) {
            slot.signal_cancel(turn_id, Some(message));
        }
    }
}

/// Commits of a turn's end tried before the runtime gives up on recording it.
const FINISH_ATTEMPTS: usize = 3;

pub(super) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The event that ends a turn: a failure the runtime decided stands first, then a cancel, then
/// what the agent reported.
/// The most of an agent's failure message a turn's end records (the rest is cut at a
/// character's boundary and marked), so that an end is never over the log's record limit.
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 64 * 1024;

/// `message`, cut to [`MAX_FAILURE_MESSAGE_BYTES`] when longer.
fn bounded_message(mut message: String) -> String {
    const CUT: &str = " … (cut)";
    if message.len() > MAX_FAILURE_MESSAGE_BYTES {
        let mut end = MAX_FAILURE_MESSAGE_BYTES - CUT.len();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(CUT);
    }
    message
}

fn terminal_event(
    turn_id: String,
    failure: Option<String>,
    cancelled: bool,
    end: Result<TurnEnd, tokio::task::JoinError>,
) -> ThreadEvent {
    match (failure, cancelled, end) {
        (Some(message), _, _) => ThreadEvent::TurnFailed {
            turn_id,
            stage: FailStage::Execute,
            message,
        },
        (None, true, _) => ThreadEvent::TurnCancelled {
            turn_id,
            reason: "cancelled".into(),
            message: "the turn was cancelled".into(),
        },
        (None, false, Ok(TurnEnd::Completed)) => ThreadEvent::TurnCompleted { turn_id },
        (None, false, Ok(TurnEnd::Failed { stage, message })) => ThreadEvent::TurnFailed {
            turn_id,
            stage,
            message: bounded_message(message),
        },
        (None, false, Err(_)) => ThreadEvent::TurnFailed {
            turn_id,
            stage: FailStage::Execute,
            message: "the agent stopped unexpectedly".into(),
        },
    }
}

/// What an agent's turn can do: publish live events, record messages and operations, and ask
/// the host.
#[derive(Debug, Clone)]
pub struct TurnContext {
    pub(super) runtime: Runtime,
    pub(super) thread_id: String,
    pub(super) turn_id: String,
    input: TurnInput,
    cancel: watch::Receiver<bool>,
    /// When the turn's time runs out, if it has a limit.
    pub(super) deadline_ms: Option<u64>,
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

    /// Admits `event` to the thread's log: it is committed in order with the turn's other
    /// events, and published once committed; the call does not wait for the commit (what must
    /// follow durability — an interaction, the end of the turn — does). A failed commit fails
    /// the turn.
    async fn record(&self, event: ThreadEvent) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(&self.thread_id)?;
        self.runtime
            .append_admitted(&self.thread_id, &slot, vec![event])
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
    /// deadline (the runtime's interaction time, or the turn's remaining time if that is
    /// sooner, by the runtime's clock), or `cancelled` when the turn is stopped. The
    /// interaction is recorded (and published) before it can be answered; its resolution is
    /// recorded by whoever resolves it first, before the turn learns it.
    pub async fn ask(&self, ask: InteractionKind) -> Result<Resolution, RuntimeError> {
        let runtime = &self.runtime;
        let now = runtime.inner.clock.now_ms();
        let mut expires_at_ms = now.saturating_add(millis(runtime.inner.config.interaction_ttl));
        if let Some(deadline) = self.deadline_ms {
            expires_at_ms = expires_at_ms.min(deadline);
        }
        let binding = match &ask {
            InteractionKind::Approval {
                agent_name,
                tool_name,
                preview,
                ..
            } => {
                let operation_digest = decision::operation_digest(agent_name, tool_name, preview);
                // The least it needs: its tool, on exactly this operation.
                let requested = PermissionGrant {
                    capability: tool_name.clone(),
                    scope: format!("operation:{operation_digest}"),
                    expires_at: None,
                };
                Some(Binding {
                    nonce: uuid::Uuid::new_v4().to_string(),
                    operation_digest,
                    policy_digest: decision::policy_digest().to_owned(),
                    requested_permissions: vec![requested],
                })
            }
            InteractionKind::UserInput { .. } => None,
        };
        let interaction = Interaction {
            id: uuid::Uuid::new_v4().to_string(),
            turn_id: self.turn_id.clone(),
            expires_at_ms,
            ask,
            binding,
        };
        let id = interaction.id.clone();
        let (tx, mut rx) = oneshot::channel();
        let slot = runtime.slot(&self.thread_id)?;
        lock(&slot.waiters).insert(id.clone(), tx);
        // An identical request a grant of the turn or the thread covers is approved without
        // asking: opened and resolved in one append, so no host is asked.
        let turn_id = self.turn_id.clone();
        let asking = Arc::clone(&slot);
        let open = move |state: &ThreadState| {
            let digest = interaction
                .binding
                .as_ref()
                .map(|b| b.operation_digest.as_str());
            let granted = digest.and_then(|digest| {
                if state.turn_grants.iter().any(|g| g == digest) {
                    Some(Via::TurnGrant)
                } else if state.session_grants.iter().any(|g| g == digest) {
                    Some(Via::SessionGrant)
                } else {
                    None
                }
            });
            // A stopping turn stays `cancelling`: its ask is settled `cancelled` at once.
            let second = match granted {
                Some(via) => Some(ThreadEvent::InteractionResolved {
                    interaction_id: interaction.id.clone(),
                    turn_id: Some(turn_id.clone()),
                    approval_id: interaction.ask.approval_id().map(str::to_owned),
                    resolution: Resolution::Approved,
                    via: Some(via),
                    decision: None,
                }),
                None => {
                    (!asking.stopping(state, &turn_id)).then(|| ThreadEvent::TurnStatusChanged {
                        turn_id: turn_id.clone(),
                        status: TurnStatus::WaitingForUser,
                    })
                }
            };
            let mut events = vec![ThreadEvent::InteractionOpened { interaction }];
            events.extend(second);
            Ok((events, granted.is_some()))
        };
        match runtime.append_with(&self.thread_id, &slot, open).await {
            Ok(false) => {}
            Ok(true) => {
                lock(&slot.waiters).remove(&id);
                return Ok(Resolution::Approved);
            }
            Err(error) => {
                lock(&slot.waiters).remove(&id);
                return Err(error);
            }
        }
        // In this order when several are ready: a recorded resolution stands, and a deadline
        // reached is `expired` even if the turn is stopped at the same moment.
        let ours = tokio::select! {
            biased;
            answer = &mut rx => return Ok(answer.unwrap_or_else(|_| dropped())),
            () = runtime.inner.clock.sleep_until(expires_at_ms) => Resolution::Expired,
            () = self.cancelled() => {
                if runtime.inner.clock.now_ms() >= expires_at_ms {
                    Resolution::Expired
                } else {
                    Resolution::Cancelled { reason: "the turn was cancelled".into() }
                }
            }
        };
        loop {
            // Listening before the check, so a drop between the two is not missed.
            let mut redo = std::pin::pin!(slot.dropped.notified());
            redo.as_mut().enable();
            match runtime
                .settle(&self.thread_id, &slot, &id, ours.clone(), None)
                .await
            {
                // Settled by us: the waiter was handed the resolution.
                Ok(()) => return Ok(rx.await.unwrap_or_else(|_| dropped())),
                // Another party's resolution is being committed, which answers the waiter; if
                // its commit fails, the interaction is pending again, and ours is recorded.
                Err(RuntimeError::InteractionNotFound(_)) => {
                    tokio::select! {
                        biased;
                        answer = &mut rx => return Ok(answer.unwrap_or_else(|_| dropped())),
                        () = redo => {}
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// The resolution of an interaction whose waiter went away unanswered (the thread was deleted
/// or the turn ended around it).
fn dropped() -> Resolution {
    Resolution::Cancelled {
        reason: "the runtime dropped the interaction".into(),
    }
}

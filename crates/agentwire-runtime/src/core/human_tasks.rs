//! Durable human tasks owned by the core: a turn opens one ([`TurnContext::human_task`]) and
//! waits for it to settle; hosts decide on it ([`Runtime::decide_human_task`], every face's
//! path, the answer's binding checked here) or cancel it ([`Runtime::cancel_human_task`]).
//! Each decision, cancel and expiry is one check-and-append on the task as the thread's state
//! holds it, so the first settlement wins and anything after it is refused; the fold's rules
//! (`crate::human_task`) decide when the task settles. A decline fails the turn and a cancel
//! cancels it, whatever the agent does next; an approval lets the agent go on.
//!
//! Tasks outlive a restart: a turn gated by one is run again on an agent that
//! [resumes turns](super::Agent::resumes_turns) (its `human_task` call finds the same task by
//! node), and every open task gets a new nonce (`human_task.reissued`), so answers from cards
//! issued before the restart are refused while a decision through the core still settles it.

use std::sync::Arc;

use serde_json::Value;

use super::{Runtime, RuntimeError, ThreadSlot, TurnContext, lock, turns::millis};
use crate::decision::Decision;
use crate::event::{HumanTask, MAX_HUMAN_TASK_QUORUM, ThreadEvent, TurnStatus};
use crate::human_task::{
    DecisionRefusal, HumanTaskDecision, HumanTaskState, HumanTaskStatus, digest,
};
use crate::state::ThreadState;

/// What a turn asks people to decide.
#[derive(Debug, Clone, PartialEq)]
pub struct HumanTaskSpec {
    /// The gated step of the turn: a turn has one task per node (asking again for the same
    /// node, as a turn run again after a restart does, finds the same task).
    pub node_id: String,
    /// What the actors decide on (shown to them; its digest binds their answers).
    pub operation: Value,
    /// Accepting decisions that decide it, 1..=64.
    pub quorum: u8,
    /// Whether one actor may decide only once.
    pub separation_of_duties: bool,
}

/// How a human task ended, as the turn that waits for it learns it.
#[derive(Debug, Clone, PartialEq)]
pub enum HumanTaskOutcome {
    /// The quorum of accepting decisions was reached: the gated step may run.
    Approved {
        /// The decisions, in order.
        decisions: Vec<HumanTaskDecision>,
    },
    /// An actor declined: the turn fails (the core stops it).
    Declined {
        /// Who.
        actor_id: String,
        /// Why, when they said.
        reason: Option<String>,
    },
    /// It was cancelled: the turn is cancelled.
    Cancelled {
        /// Why.
        reason: String,
    },
    /// Its deadline passed undecided.
    Expired,
}

/// A host's answer to a human task: the task's binding as the host was given it, the deciding
/// actor and the decision (ChainlessChain's `HumanTaskDecideResult`, read by a face).
#[derive(Debug, Clone, PartialEq)]
pub struct HumanTaskAnswer {
    /// The task.
    pub task_id: String,
    /// Its run (the turn).
    pub run_id: String,
    /// Its revision digest.
    pub revision_digest: String,
    /// Its operation digest.
    pub operation_digest: String,
    /// Its current nonce.
    pub nonce: String,
    /// Who decides.
    pub actor_id: String,
    /// The decision.
    pub decision: Decision,
}

/// What a decision or a cancel made of the task.
enum Taken {
    /// Recorded; the task as it is after it.
    Recorded(Box<HumanTaskState>),
    /// The deadline had passed: the task was recorded `expired` instead.
    Expired,
}

fn outcome(task: &HumanTaskState) -> Option<HumanTaskOutcome> {
    Some(match task.status {
        HumanTaskStatus::Open => return None,
        HumanTaskStatus::Expired => HumanTaskOutcome::Expired,
        HumanTaskStatus::Cancelled => HumanTaskOutcome::Cancelled {
            reason: task.reason.clone().unwrap_or_default(),
        },
        HumanTaskStatus::Decided => match task.settling_decision() {
            Some(last) if !last.decision.kind.accepts() => HumanTaskOutcome::Declined {
                actor_id: last.actor_id.clone(),
                reason: last.decision.reason.clone(),
            },
            _ => HumanTaskOutcome::Approved {
                decisions: task.decisions.clone(),
            },
        },
    })
}

/// The turn's status once a task of it settles: running again (or still stopping) when it
/// waited for the task, nothing when it did not.
fn status_after(state: &ThreadState, turn_id: &str, stopping: bool) -> Option<ThreadEvent> {
    let turn = state.active_turn.as_ref().filter(|t| t.id == turn_id)?;
    let status = if stopping || turn.status == TurnStatus::Cancelling {
        TurnStatus::Cancelling
    } else {
        TurnStatus::Running
    };
    (turn.status != status).then(|| ThreadEvent::TurnStatusChanged {
        turn_id: turn_id.to_owned(),
        status,
    })
}

impl Runtime {
    /// A human task of a thread, as its state holds it now.
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`], [`RuntimeError::HumanTaskNotFound`].
    pub async fn human_task(
        &self,
        thread_id: &str,
        task_id: &str,
    ) -> Result<HumanTaskState, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let state = slot.state.lock().await;
        state
            .human_tasks
            .get(task_id)
            .map(|t| t.as_ref().clone())
            .ok_or_else(|| RuntimeError::HumanTaskNotFound(task_id.to_owned()))
    }

    /// The human tasks a thread keeps (open ones and the newest settled ones), in id order.
    ///
    /// # Errors
    /// [`RuntimeError::ThreadNotFound`].
    pub async fn human_tasks(&self, thread_id: &str) -> Result<Vec<HumanTaskState>, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let state = slot.state.lock().await;
        Ok(state
            .human_tasks
            .values()
            .map(|t| t.as_ref().clone())
            .collect())
    }

    /// A host's decision on a human task, checked against the task as the thread holds it and
    /// recorded once (`human_task.decided`), in one check-and-append. Returns the task as the
    /// decision left it. A decline that settles it fails its turn; a `cancel` decision cancels
    /// the task and the turn.
    ///
    /// # Errors
    /// Nothing is recorded on any of these (except an expiry):
    /// [`RuntimeError::HumanTaskNotFound`] (unknown here);
    /// [`RuntimeError::HumanTaskSettled`] (decided, cancelled or expired already: the first
    /// settlement stands); [`RuntimeError::HumanTaskBinding`] naming the first field of the
    /// answer's binding that is not the task's (`runId`, `revisionDigest`, `operationDigest`,
    /// `nonce`: a card issued before a restart carries an old nonce);
    /// [`RuntimeError::HumanTaskExpired`] (its deadline passed: it is recorded `expired`);
    /// [`RuntimeError::HumanTaskRepeatActor`] (separation of duties);
    /// [`RuntimeError::HumanTaskRefused`] (it holds the most decisions it can).
    pub async fn decide_human_task(
        &self,
        thread_id: &str,
        answer: HumanTaskAnswer,
    ) -> Result<HumanTaskState, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let now = self.inner.clock.now_ms();
        let asked = answer.task_id.clone();
        let decide = {
            let slot = Arc::clone(&slot);
            move |state: &ThreadState| {
                let task_id = answer.task_id.clone();
                let Some(task) = state.human_tasks.get(&task_id) else {
                    return Err(RuntimeError::HumanTaskNotFound(task_id));
                };
                if !task.is_open() {
                    return Err(RuntimeError::HumanTaskSettled {
                        task_id,
                        status: task.status.as_str(),
                    });
                }
                let t = &task.task;
                let field = [
                    ("runId", &answer.run_id, &t.turn_id),
                    (
                        "revisionDigest",
                        &answer.revision_digest,
                        &t.revision_digest,
                    ),
                    (
                        "operationDigest",
                        &answer.operation_digest,
                        &t.operation_digest,
                    ),
                    ("nonce", &answer.nonce, &t.nonce),
                ]
                .into_iter()
                .find(|(_, given, ours)| given != ours)
                .map(|(name, _, _)| name);
                if let Some(field) = field {
                    return Err(RuntimeError::HumanTaskBinding { task_id, field });
                }
                let turn_id = t.turn_id.clone();
                if t.expires_at_ms <= now {
                    let mut events = vec![ThreadEvent::HumanTaskExpired {
                        task_id,
                        turn_id: turn_id.clone(),
                    }];
                    events.extend(status_after(state, &turn_id, false));
                    return Ok((events, Taken::Expired));
                }
                match task.refuses(&answer.actor_id) {
                    Some(DecisionRefusal::Settled(status)) => {
                        return Err(RuntimeError::HumanTaskSettled {
                            task_id,
                            status: status.as_str(),
                        });
                    }
                    Some(DecisionRefusal::RepeatActor) => {
                        return Err(RuntimeError::HumanTaskRepeatActor {
                            task_id,
                            actor_id: answer.actor_id,
                        });
                    }
                    Some(DecisionRefusal::TooManyDecisions) => {
                        return Err(RuntimeError::HumanTaskRefused {
                            task_id,
                            reason: "it holds the most decisions a task takes".into(),
                        });
                    }
                    None => {}
                }
                let mut after = task.as_ref().clone();
                after.record(&answer.actor_id, &answer.decision, now);
                let mut events = vec![ThreadEvent::HumanTaskDecided {
                    task_id,
                    turn_id: turn_id.clone(),
                    actor_id: answer.actor_id.clone(),
                    decision: answer.decision.clone(),
                }];
                // What the turn must do: fail at a decline, stop at a cancel. Told under the
                // check, before the commit wakes the turn's wait, so the turn's end is
                // decided by it whatever the agent returns (as `settle` does for
                // interactions; a failed commit fails the turn anyway).
                let mut stop = None;
                if !after.is_open() {
                    let cancelling = after.status == HumanTaskStatus::Cancelled;
                    let running = lock(&slot.running)
                        .as_ref()
                        .is_some_and(|r| r.turn_id == turn_id);
                    if running && after.status == HumanTaskStatus::Decided {
                        if let Some(declined) = after.declined() {
                            stop = Some(Some(declined));
                        }
                    } else if running && cancelling {
                        stop = Some(None);
                    }
                    events.extend(status_after(state, &turn_id, cancelling));
                }
                if let Some(failure) = &stop {
                    slot.signal_cancel(&turn_id, failure.as_deref());
                }
                Ok((events, Taken::Recorded(Box::new(after))))
            }
        };
        match self.append_with(thread_id, &slot, decide).await? {
            Taken::Recorded(task) => Ok(*task),
            Taken::Expired => Err(RuntimeError::HumanTaskExpired(asked)),
        }
    }

    /// Cancels an open human task (`human_task.cancelled`) and the turn it gates, which ends
    /// `turn.cancelled`; returns the task as cancelled.
    ///
    /// # Errors
    /// [`RuntimeError::HumanTaskNotFound`]; [`RuntimeError::HumanTaskSettled`] when it was
    /// settled already (nothing changes).
    pub async fn cancel_human_task(
        &self,
        thread_id: &str,
        task_id: &str,
        reason: &str,
    ) -> Result<HumanTaskState, RuntimeError> {
        let slot = self.slot(thread_id)?;
        let now = self.inner.clock.now_ms();
        let (task_id, reason) = (task_id.to_owned(), reason.to_owned());
        let signal = Arc::clone(&slot);
        let decide = move |state: &ThreadState| {
            let Some(task) = state.human_tasks.get(&task_id) else {
                return Err(RuntimeError::HumanTaskNotFound(task_id));
            };
            if !task.is_open() {
                return Err(RuntimeError::HumanTaskSettled {
                    task_id,
                    status: task.status.as_str(),
                });
            }
            let turn_id = task.task.turn_id.clone();
            let mut after = task.as_ref().clone();
            after.status = HumanTaskStatus::Cancelled;
            after.reason = Some(reason.clone());
            after.updated_at_ms = now;
            let mut events = vec![ThreadEvent::HumanTaskCancelled {
                task_id,
                turn_id: turn_id.clone(),
                reason,
            }];
            events.extend(status_after(state, &turn_id, true));
            // Before the commit wakes the turn's wait (see `decide_human_task`).
            signal.signal_cancel(&turn_id, None);
            Ok((events, after))
        };
        self.append_with(thread_id, &slot, decide).await
    }

    /// Records that an open task is settled by its deadline or its turn's stop, if it still is
    /// open (whoever comes first wins; nothing is recorded otherwise).
    async fn end_open_task(
        &self,
        thread_id: &str,
        slot: &Arc<ThreadSlot>,
        task_id: &str,
        event: ThreadEvent,
        stopping: bool,
    ) -> Result<(), RuntimeError> {
        let task_id = task_id.to_owned();
        self.append_with(thread_id, slot, move |state: &ThreadState| {
            let Some(task) = state.human_tasks.get(&task_id).filter(|t| t.is_open()) else {
                return Ok((Vec::new(), ()));
            };
            let turn_id = task.task.turn_id.clone();
            let mut events = vec![event];
            events.extend(status_after(state, &turn_id, stopping));
            Ok((events, ()))
        })
        .await
    }
}

impl TurnContext {
    /// Opens a durable human task for the turn's step `spec.node_id` (or finds the one the
    /// turn already has for it: a turn run again after a restart comes back to its task) and
    /// waits until it settles: approved by its quorum, declined (the core fails the turn),
    /// cancelled (by a host, or because the turn is stopped: the task is then recorded
    /// cancelled), or expired at its deadline (the runtime's interaction time, or the turn's
    /// remaining time if sooner, by the runtime's clock). The task is recorded (and published)
    /// before anyone can decide it.
    ///
    /// # Errors
    /// [`RuntimeError::InvalidInput`] for a quorum out of 1..=64 or an empty node id; the
    /// log's errors.
    pub async fn human_task(&self, spec: HumanTaskSpec) -> Result<HumanTaskOutcome, RuntimeError> {
        if spec.quorum == 0 || spec.quorum > MAX_HUMAN_TASK_QUORUM {
            return Err(RuntimeError::InvalidInput(format!(
                "a human task's quorum is 1 to {MAX_HUMAN_TASK_QUORUM}, not {}",
                spec.quorum
            )));
        }
        if spec.node_id.is_empty() {
            return Err(RuntimeError::InvalidInput(
                "a human task needs a node id".into(),
            ));
        }
        let runtime = &self.runtime;
        let slot = runtime.slot(&self.thread_id)?;
        let existing = {
            let state = slot.state.lock().await;
            state
                .human_tasks
                .values()
                .find(|t| t.task.turn_id == self.turn_id && t.task.node_id == spec.node_id)
                .map(|t| t.task.id.clone())
        };
        let task_id = match existing {
            Some(id) => id,
            None => self.open_human_task(&slot, spec).await?,
        };
        loop {
            let changed = slot.tasks_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let task = {
                let state = slot.state.lock().await;
                state.human_tasks.get(&task_id).cloned()
            };
            let Some(task) = task else {
                return Err(RuntimeError::HumanTaskNotFound(task_id));
            };
            if let Some(outcome) = outcome(&task) {
                return Ok(outcome);
            }
            let expires = task.task.expires_at_ms;
            let turn_id = self.turn_id.clone();
            tokio::select! {
                biased;
                () = &mut changed => {}
                () = runtime.inner.clock.sleep_until(expires) => {
                    let event = ThreadEvent::HumanTaskExpired {
                        task_id: task_id.clone(),
                        turn_id,
                    };
                    runtime.end_open_task(&self.thread_id, &slot, &task_id, event, false).await?;
                }
                () = self.cancelled() => {
                    let event = ThreadEvent::HumanTaskCancelled {
                        task_id: task_id.clone(),
                        turn_id,
                        reason: "the turn was stopped".into(),
                    };
                    runtime.end_open_task(&self.thread_id, &slot, &task_id, event, true).await?;
                }
            }
        }
    }

    async fn open_human_task(
        &self,
        slot: &Arc<ThreadSlot>,
        spec: HumanTaskSpec,
    ) -> Result<String, RuntimeError> {
        let runtime = &self.runtime;
        let now = runtime.inner.clock.now_ms();
        let mut expires_at_ms = now.saturating_add(millis(runtime.inner.config.interaction_ttl));
        if let Some(deadline) = self.deadline_ms {
            expires_at_ms = expires_at_ms.min(deadline);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let operation_text = spec.operation.to_string();
        let (thread_id, turn_id) = (self.thread_id.clone(), self.turn_id.clone());
        let task_id = id.clone();
        let asking = Arc::clone(slot);
        runtime
            .append_with(&self.thread_id, slot, move |state: &ThreadState| {
                if state.human_tasks.values().filter(|t| t.is_open()).count()
                    >= crate::human_task::MAX_HUMAN_TASKS
                {
                    return Err(RuntimeError::InvalidInput(format!(
                        "a thread has at most {} open human tasks",
                        crate::human_task::MAX_HUMAN_TASKS
                    )));
                }
                let revision = format!("{thread_id}\n{turn_id}\n{}", state.next_position);
                let task = HumanTask {
                    id: task_id,
                    turn_id: turn_id.clone(),
                    attempt_id: format!("{turn_id}:{}:1", spec.node_id),
                    node_id: spec.node_id,
                    revision_digest: digest(revision.as_bytes()),
                    operation_digest: digest(operation_text.as_bytes()),
                    operation: spec.operation,
                    nonce: uuid::Uuid::new_v4().to_string(),
                    expires_at_ms,
                    quorum: spec.quorum,
                    separation_of_duties: spec.separation_of_duties,
                };
                // A stopping turn stays `cancelling`: its task is cancelled at once.
                let mut events = vec![ThreadEvent::HumanTaskOpened { task }];
                if !asking.stopping(state, &turn_id) {
                    events.push(ThreadEvent::TurnStatusChanged {
                        turn_id,
                        status: TurnStatus::WaitingForUser,
                    });
                }
                Ok((events, ()))
            })
            .await?;
        Ok(id)
    }
}

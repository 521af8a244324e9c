//! A thread's state as a fold of its durable events: the thread's metadata, the transcript, the
//! completed operations, the active turn and the pending interactions. The same fold serves a
//! live runtime (apply each event after it commits) and a restart (replay the log), so a
//! snapshot after a restart equals the one before it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::decision::Via;
use crate::event::{
    FailStage, Interaction, MAX_HUMAN_TASK_QUORUM, Message, MessagePart, Operation, Resolution,
    Role, StampedEvent, ThreadEvent, TurnStatus,
};
use crate::human_task::{HumanTaskState, HumanTaskStatus, MAX_HUMAN_TASKS};

/// Why an event does not fit the state its log built so far: the log is not one this runtime
/// wrote (or was edited), and the thread is not served rather than guessed at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    /// The first event is not `thread.created`, or a second one came.
    #[error("event {position}: {kind} where thread.created must come first and only once")]
    Creation {
        /// The event's position in the log.
        position: u64,
        /// Its type.
        kind: &'static str,
    },
    /// An event after `thread.deleted`.
    #[error("event {position}: {kind} after thread.deleted")]
    AfterDeletion {
        /// The event's position in the log.
        position: u64,
        /// Its type.
        kind: &'static str,
    },
    /// `turn.started` while another turn was active.
    #[error("event {position}: turn {turn_id} started while turn {active} was active")]
    TurnAlreadyActive {
        /// The event's position in the log.
        position: u64,
        /// The new turn.
        turn_id: String,
        /// The turn that was active.
        active: String,
    },
    /// An event of a turn that is not the active one.
    #[error("event {position}: {kind} for turn {turn_id}, which is not active")]
    TurnNotActive {
        /// The event's position in the log.
        position: u64,
        /// Its type.
        kind: &'static str,
        /// The turn it names.
        turn_id: String,
    },
    /// An interaction opened twice, or resolved while not pending.
    #[error("event {position}: {kind} for interaction {interaction_id}, which is {state}")]
    Interaction {
        /// The event's position in the log.
        position: u64,
        /// Its type.
        kind: &'static str,
        /// The interaction.
        interaction_id: String,
        /// `"pending"` or `"not pending"`.
        state: &'static str,
    },
    /// A human-task event that does not fit the task: opened twice or with a quorum out of
    /// 1..=64, or decided, cancelled, expired or reissued when it is unknown or settled, or a
    /// decision its rules refuse.
    #[error("event {position}: {kind} for human task {task_id}: {problem}")]
    HumanTask {
        /// The event's position in the log.
        position: u64,
        /// Its type.
        kind: &'static str,
        /// The task.
        task_id: String,
        /// What does not fit.
        problem: &'static str,
    },
    /// Events must be applied at consecutive positions.
    #[error("event at position {position} where {expected} was next")]
    Position {
        /// The position given.
        position: u64,
        /// The position expected.
        expected: u64,
    },
}

impl FoldError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            FoldError::Creation { .. } => "runtime.fold.creation",
            FoldError::AfterDeletion { .. } => "runtime.fold.after-deletion",
            FoldError::TurnAlreadyActive { .. } => "runtime.fold.turn-already-active",
            FoldError::TurnNotActive { .. } => "runtime.fold.turn-not-active",
            FoldError::Interaction { .. } => "runtime.fold.interaction",
            FoldError::Position { .. } => "runtime.fold.position",
            FoldError::HumanTask { .. } => "runtime.fold.human-task",
        }
    }
}

/// The active turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveTurn {
    /// Its id.
    pub id: String,
    /// Its status.
    pub status: TurnStatus,
    /// When it started.
    pub started_at_ms: u64,
}

/// One page of a list, oldest first, and where the page before it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<'a, T> {
    /// The items, oldest first.
    pub items: Vec<&'a T>,
    /// Pass back as `before` for the previous page; `None` when this page reaches the start.
    pub next_before: Option<u64>,
}

/// The fold of one thread's durable events. Serialized as the thread's checkpoint (see
/// `docs/runtime.md`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadState {
    /// Whether `thread.created` was applied.
    pub created: bool,
    /// Whether the thread was deleted.
    pub deleted: bool,
    /// Whether the thread was archived (it takes no new turn).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// The thread it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<String>,
    /// The name its creator gave it, when that is not its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// When it was created.
    pub created_at_ms: u64,
    /// When its last event was stamped.
    pub updated_at_ms: u64,
    /// The transcript: user inputs and completed agent messages.
    pub messages: Vec<Message>,
    /// Completed tool operations, with their sequence as the index; shared, so a copy of the
    /// state (a checkpoint's) does not copy them.
    pub operations: Vec<Arc<Operation>>,
    /// When each operation completed (same index as `operations`).
    pub operation_times_ms: Vec<u64>,
    /// The turn in progress.
    pub active_turn: Option<ActiveTurn>,
    /// Interactions awaiting the host, by id (ordered for deterministic snapshots).
    pub pending: BTreeMap<String, Interaction>,
    /// Position of the next event (the count applied so far).
    pub next_position: u64,
    /// The log position of each timeline event ([`ThreadEvent::is_timeline`]), in order: the
    /// index is the event's gap-free timeline ordinal.
    pub timeline: Vec<u64>,
    /// The operation digests an `acceptForTurn` of the active turn approved: identical
    /// requests later in the turn are approved without asking. Emptied when a turn starts or
    /// ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_grants: Vec<String>,
    /// The operation digests an `acceptForSession` approved: identical requests later in the
    /// thread are approved without asking. The newest [`MAX_SESSION_GRANTS`] are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_grants: Vec<String>,
    /// Durable human tasks by id: every open one and the newest settled ones, at most
    /// [`MAX_HUMAN_TASKS`] in all; shared, so a probe's copy does not copy them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub human_tasks: BTreeMap<String, Arc<HumanTaskState>>,
}

/// Most grants of each kind a thread holds; a newer one pushes out the oldest.
pub const MAX_SESSION_GRANTS: usize = 64;

/// Adds `digest` to `grants` unless it is there, keeping the newest [`MAX_SESSION_GRANTS`].
fn grant(grants: &mut Vec<String>, digest: &str) {
    if grants.iter().any(|g| g == digest) {
        return;
    }
    if grants.len() >= MAX_SESSION_GRANTS {
        grants.remove(0);
    }
    grants.push(digest.to_owned());
}

impl ThreadState {
    /// Folds a whole log from position 0.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a StampedEvent>,
    ) -> Result<ThreadState, FoldError> {
        let mut state = ThreadState::default();
        for event in events {
            state.apply(state.next_position, event)?;
        }
        Ok(state)
    }

    /// What the checks of [`apply`](Self::apply) read of this state, without the transcript
    /// (messages, operations, timeline): a copy the size of the pending interactions, on which
    /// events are checked and folded ahead of the state itself.
    pub fn probe(&self) -> ThreadState {
        ThreadState {
            created: self.created,
            deleted: self.deleted,
            archived: self.archived,
            parent_thread_id: None,
            alias: None,
            title: None,
            model: None,
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            messages: Vec::new(),
            operations: Vec::new(),
            operation_times_ms: Vec::new(),
            active_turn: self.active_turn.clone(),
            pending: self.pending.clone(),
            next_position: self.next_position,
            timeline: Vec::new(),
            turn_grants: self.turn_grants.clone(),
            session_grants: self.session_grants.clone(),
            human_tasks: self.human_tasks.clone(),
        }
    }

    /// Applies the next event to a [`probe`](Self::probe), which keeps no transcript; on an
    /// error it is unchanged.
    pub fn apply_to_probe(&mut self, stamped: &StampedEvent) -> Result<(), FoldError> {
        self.apply_with(self.next_position, stamped, false)
    }

    /// Applies the event at `position` of the log; on an error the state is unchanged.
    pub fn apply(&mut self, position: u64, stamped: &StampedEvent) -> Result<(), FoldError> {
        self.apply_with(position, stamped, true)
    }

    fn apply_with(
        &mut self,
        position: u64,
        stamped: &StampedEvent,
        transcript: bool,
    ) -> Result<(), FoldError> {
        if position != self.next_position {
            return Err(FoldError::Position {
                position,
                expected: self.next_position,
            });
        }
        let event = &stamped.event;
        let kind = event.kind();
        if self.deleted {
            return Err(FoldError::AfterDeletion { position, kind });
        }
        let is_creation = matches!(event, ThreadEvent::ThreadCreated { .. });
        if is_creation == self.created {
            return Err(FoldError::Creation { position, kind });
        }
        self.check(position, event)?;
        if transcript && event.is_timeline() {
            self.timeline.push(position);
        }
        self.fold(stamped, transcript);
        self.updated_at_ms = stamped.at_ms;
        self.next_position += 1;
        Ok(())
    }

    /// The checks of [`apply`](Self::apply), before anything changes.
    fn check(&self, position: u64, event: &ThreadEvent) -> Result<(), FoldError> {
        let kind = event.kind();
        match event {
            ThreadEvent::TurnStarted { turn_id, .. } => {
                if let Some(active) = &self.active_turn {
                    return Err(FoldError::TurnAlreadyActive {
                        position,
                        turn_id: turn_id.clone(),
                        active: active.id.clone(),
                    });
                }
            }
            ThreadEvent::InteractionOpened { interaction } => {
                self.check_active(position, kind, &interaction.turn_id)?;
                if self.pending.contains_key(&interaction.id) {
                    return Err(FoldError::Interaction {
                        position,
                        kind,
                        interaction_id: interaction.id.clone(),
                        state: "pending",
                    });
                }
            }
            ThreadEvent::InteractionResolved {
                interaction_id,
                turn_id,
                approval_id,
                ..
            } => {
                let Some(pending) = self.pending.get(interaction_id) else {
                    return Err(FoldError::Interaction {
                        position,
                        kind,
                        interaction_id: interaction_id.clone(),
                        state: "not pending",
                    });
                };
                if approval_id.as_deref() != pending.ask.approval_id()
                    || turn_id.as_ref().is_some_and(|t| *t != pending.turn_id)
                {
                    return Err(FoldError::Interaction {
                        position,
                        kind,
                        interaction_id: interaction_id.clone(),
                        state: "resolved with another approval id",
                    });
                }
            }
            ThreadEvent::HumanTaskOpened { task } => {
                self.check_active(position, kind, &task.turn_id)?;
                let problem = if self.human_tasks.contains_key(&task.id) {
                    Some("it was already opened")
                } else if task.quorum == 0 || task.quorum > MAX_HUMAN_TASK_QUORUM {
                    Some("its quorum is not 1 to 64")
                } else {
                    None
                };
                if let Some(problem) = problem {
                    return Err(FoldError::HumanTask {
                        position,
                        kind,
                        task_id: task.id.clone(),
                        problem,
                    });
                }
            }
            ThreadEvent::HumanTaskDecided {
                task_id,
                turn_id,
                actor_id,
                ..
            } => {
                self.check_active(position, kind, turn_id)?;
                let task = self.open_human_task(position, kind, task_id, turn_id)?;
                if task.refuses(actor_id).is_some() {
                    return Err(FoldError::HumanTask {
                        position,
                        kind,
                        task_id: task_id.clone(),
                        problem: "its rules refuse the decision",
                    });
                }
            }
            ThreadEvent::HumanTaskCancelled {
                task_id, turn_id, ..
            }
            | ThreadEvent::HumanTaskExpired { task_id, turn_id }
            | ThreadEvent::HumanTaskReissued {
                task_id, turn_id, ..
            } => {
                self.check_active(position, kind, turn_id)?;
                self.open_human_task(position, kind, task_id, turn_id)?;
            }
            other => {
                if let Some(turn_id) = other.turn_id() {
                    self.check_active(position, kind, turn_id)?;
                }
            }
        }
        Ok(())
    }

    /// The open task `task_id` of `turn_id`, or why the event cannot apply to it.
    fn open_human_task(
        &self,
        position: u64,
        kind: &'static str,
        task_id: &str,
        turn_id: &str,
    ) -> Result<&HumanTaskState, FoldError> {
        let problem = match self.human_tasks.get(task_id) {
            None => "it is not known",
            Some(task) if task.task.turn_id != turn_id => "it belongs to another turn",
            Some(task) if !task.is_open() => "it is settled",
            Some(task) => return Ok(task),
        };
        Err(FoldError::HumanTask {
            position,
            kind,
            task_id: task_id.to_owned(),
            problem,
        })
    }

    fn check_active(
        &self,
        position: u64,
        kind: &'static str,
        turn_id: &str,
    ) -> Result<(), FoldError> {
        match &self.active_turn {
            Some(active) if active.id == turn_id => Ok(()),
            _ => Err(FoldError::TurnNotActive {
                position,
                kind,
                turn_id: turn_id.to_owned(),
            }),
        }
    }

    /// Folds the event; the transcript (messages, operations) only with `transcript`.
    fn fold(&mut self, stamped: &StampedEvent, transcript: bool) {
        let at = stamped.at_ms;
        match &stamped.event {
            ThreadEvent::ThreadCreated {
                title,
                model,
                parent_thread_id,
                alias,
            } => {
                self.alias = alias.clone();
                self.created = true;
                self.title = title.clone();
                self.model = model.clone();
                self.parent_thread_id = parent_thread_id.clone();
                self.created_at_ms = at;
            }
            ThreadEvent::ThreadRenamed { title } => self.title = Some(title.clone()),
            ThreadEvent::ThreadArchived => self.archived = true,
            ThreadEvent::ThreadDeleted => {
                self.deleted = true;
                self.pending.clear();
                self.active_turn = None;
            }
            ThreadEvent::TurnStarted { turn_id, input } => {
                self.turn_grants.clear();
                self.active_turn = Some(ActiveTurn {
                    id: turn_id.clone(),
                    status: TurnStatus::Running,
                    started_at_ms: at,
                });
                let mut parts = Vec::new();
                if !input.text.is_empty() {
                    parts.push(MessagePart::Text {
                        text: input.text.clone(),
                    });
                }
                parts.extend(
                    input
                        .attachments
                        .iter()
                        .cloned()
                        .map(MessagePart::Attachment),
                );
                if transcript {
                    self.push_message(Role::User, turn_id, at, parts);
                }
            }
            ThreadEvent::TurnStatusChanged { status, .. } => {
                if let Some(turn) = &mut self.active_turn {
                    turn.status = *status;
                }
            }
            ThreadEvent::MessageCompleted { turn_id, text, .. } => {
                if transcript {
                    let parts = vec![MessagePart::Text { text: text.clone() }];
                    self.push_message(Role::Assistant, turn_id, at, parts);
                }
            }
            ThreadEvent::OperationCompleted { operation, .. } => {
                if transcript {
                    self.operations.push(Arc::new(operation.clone()));
                    self.operation_times_ms.push(at);
                }
            }
            ThreadEvent::InteractionOpened { interaction } => {
                self.pending
                    .insert(interaction.id.clone(), interaction.clone());
            }
            ThreadEvent::InteractionResolved {
                interaction_id,
                via,
                decision,
                ..
            } => {
                let taken = self.pending.remove(interaction_id);
                // A grant whose permissions end (`expiresAt`) is not remembered: identical
                // requests are asked again rather than approved past the end.
                let lasting = decision
                    .as_ref()
                    .is_none_or(|d| d.permissions.iter().all(|p| p.expires_at.is_none()));
                let digest = taken
                    .as_ref()
                    .and_then(|i| i.binding.as_ref())
                    .map(|b| b.operation_digest.as_str())
                    .filter(|_| lasting);
                match (via, digest) {
                    (Some(Via::AcceptForTurn), Some(digest)) => {
                        grant(&mut self.turn_grants, digest)
                    }
                    (Some(Via::AcceptForSession), Some(digest)) => {
                        grant(&mut self.session_grants, digest);
                    }
                    _ => {}
                }
            }
            ThreadEvent::TurnCompleted { turn_id }
            | ThreadEvent::TurnCancelled { turn_id, .. }
            | ThreadEvent::TurnFailed { turn_id, .. } => {
                self.active_turn = None;
                self.turn_grants.clear();
                // A turn's interactions end with it; the runtime resolves them before the
                // terminal event, and the fold holds no orphan if a log lacks that.
                self.pending.clear();
                for task in self.human_tasks.values_mut() {
                    if task.is_open() && task.task.turn_id == *turn_id {
                        let task = Arc::make_mut(task);
                        task.status = HumanTaskStatus::Cancelled;
                        task.reason = Some("the turn ended".into());
                        task.updated_at_ms = at;
                    }
                }
            }
            ThreadEvent::CapabilitiesChanged => {}
            ThreadEvent::HumanTaskOpened { task } => {
                self.human_tasks.insert(
                    task.id.clone(),
                    Arc::new(HumanTaskState {
                        task: task.clone(),
                        status: HumanTaskStatus::Open,
                        decisions: Vec::new(),
                        reason: None,
                        opened_at_ms: at,
                        updated_at_ms: at,
                        opened_position: self.next_position,
                    }),
                );
                self.forget_old_human_tasks();
            }
            ThreadEvent::HumanTaskDecided {
                task_id,
                actor_id,
                decision,
                ..
            } => {
                if let Some(task) = self.human_tasks.get_mut(task_id) {
                    Arc::make_mut(task).record(actor_id, decision, at);
                }
                self.forget_old_human_tasks();
            }
            ThreadEvent::HumanTaskCancelled {
                task_id, reason, ..
            } => {
                if let Some(task) = self.human_tasks.get_mut(task_id) {
                    let task = Arc::make_mut(task);
                    task.status = HumanTaskStatus::Cancelled;
                    task.reason = Some(reason.clone());
                    task.updated_at_ms = at;
                }
                self.forget_old_human_tasks();
            }
            ThreadEvent::HumanTaskExpired { task_id, .. } => {
                if let Some(task) = self.human_tasks.get_mut(task_id) {
                    let task = Arc::make_mut(task);
                    task.status = HumanTaskStatus::Expired;
                    task.updated_at_ms = at;
                }
                self.forget_old_human_tasks();
            }
            ThreadEvent::HumanTaskReissued { task_id, nonce, .. } => {
                if let Some(task) = self.human_tasks.get_mut(task_id) {
                    let task = Arc::make_mut(task);
                    task.task.nonce = nonce.clone();
                    task.updated_at_ms = at;
                }
            }
        }
    }

    /// Keeps at most [`MAX_HUMAN_TASKS`] tasks: the oldest settled ones go first (open ones
    /// always stay; the runtime opens no more than that many at once).
    fn forget_old_human_tasks(&mut self) {
        while self.human_tasks.len() > MAX_HUMAN_TASKS {
            let oldest = self
                .human_tasks
                .values()
                .filter(|t| !t.is_open())
                .min_by_key(|t| t.opened_position)
                .map(|t| t.task.id.clone());
            match oldest {
                Some(id) => {
                    self.human_tasks.remove(&id);
                }
                None => break,
            }
        }
    }

    /// The open human tasks of `turn_id`, in id order.
    pub fn open_human_tasks(&self, turn_id: &str) -> impl Iterator<Item = &HumanTaskState> {
        self.human_tasks
            .values()
            .map(Arc::as_ref)
            .filter(move |t| t.is_open() && t.task.turn_id == turn_id)
    }

    /// The events that cancel every open human task of `turn_id` with `reason`, in id order.
    pub fn cancel_human_tasks(&self, turn_id: &str, reason: &str) -> Vec<ThreadEvent> {
        self.open_human_tasks(turn_id)
            .map(|t| ThreadEvent::HumanTaskCancelled {
                task_id: t.task.id.clone(),
                turn_id: turn_id.to_owned(),
                reason: reason.to_owned(),
            })
            .collect()
    }

    /// The user's input of `turn_id` as the transcript holds it (text parts joined, then the
    /// attachments): what a turn resumed after a restart runs on again.
    pub fn turn_input(&self, turn_id: &str) -> Option<crate::event::TurnInput> {
        let message = self
            .messages
            .iter()
            .find(|m| m.role == Role::User && m.turn_id == turn_id)?;
        let mut input = crate::event::TurnInput {
            text: String::new(),
            attachments: Vec::new(),
        };
        for part in &message.parts {
            match part {
                MessagePart::Text { text } => input.text.push_str(text),
                MessagePart::Attachment(a) => input.attachments.push(a.clone()),
            }
        }
        Some(input)
    }

    fn push_message(&mut self, role: Role, turn_id: &str, at: u64, parts: Vec<MessagePart>) {
        self.messages.push(Message {
            sequence: self.messages.len() as u64,
            role,
            turn_id: turn_id.to_owned(),
            created_at_ms: at,
            parts,
        });
    }

    /// The events that resolve every pending interaction `cancelled` with `reason`, in id order.
    pub fn cancel_pending(&self, reason: &str) -> Vec<ThreadEvent> {
        self.pending
            .iter()
            .map(|(id, interaction)| ThreadEvent::InteractionResolved {
                interaction_id: id.clone(),
                turn_id: Some(interaction.turn_id.clone()),
                approval_id: interaction.ask.approval_id().map(str::to_owned),
                resolution: Resolution::Cancelled {
                    reason: reason.to_owned(),
                },
                via: None,
                decision: None,
            })
            .collect()
    }

    /// What a list of threads shows of this one, whose id is `thread_id`.
    pub fn summary(&self, thread_id: &str) -> crate::core::ThreadSummary {
        crate::core::ThreadSummary {
            id: thread_id.to_owned(),
            title: self.title.clone(),
            model: self.model.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            message_count: self.messages.len() as u64,
            archived: self.archived,
            parent_thread_id: self.parent_thread_id.clone(),
            alias: self.alias.clone(),
        }
    }

    /// The events a runtime appends for this thread when it starts again after a stop: every
    /// pending interaction cancelled, then the active turn failed at `execute`.
    pub fn repairs_after_restart(&self) -> Vec<ThreadEvent> {
        let mut out = self.cancel_pending("the runtime stopped while the interaction was pending");
        if let Some(turn) = &self.active_turn {
            out.extend(
                self.cancel_human_tasks(&turn.id, "the runtime stopped while the turn was running"),
            );
            out.push(ThreadEvent::TurnFailed {
                turn_id: turn.id.clone(),
                stage: FailStage::Execute,
                message: "the runtime stopped while the turn was running".into(),
            });
        }
        out
    }

    /// Pending interactions whose deadline is at or before `now_ms`, oldest deadline first.
    pub fn expired_interactions(&self, now_ms: u64) -> Vec<&Interaction> {
        let mut expired: Vec<&Interaction> = self
            .pending
            .values()
            .filter(|i| i.expires_at_ms <= now_ms)
            .collect();
        expired.sort_by(|a, b| a.expires_at_ms.cmp(&b.expires_at_ms).then(a.id.cmp(&b.id)));
        expired
    }

    /// A page of the transcript: the `limit` messages before sequence `before` (the newest when
    /// `None`), oldest first.
    pub fn messages_page(&self, before: Option<u64>, limit: usize) -> Page<'_, Message> {
        page(&self.messages, before, limit)
    }

    /// A page of the completed operations, like [`messages_page`](Self::messages_page); an
    /// operation's sequence is its index.
    pub fn operations_page(&self, before: Option<u64>, limit: usize) -> Page<'_, Operation> {
        page(&self.operations, before, limit)
    }
}

fn page<T, I: std::borrow::Borrow<T>>(
    items: &[I],
    before: Option<u64>,
    limit: usize,
) -> Page<'_, T> {
    let end = before.map_or(items.len(), |b| {
        usize::try_from(b).unwrap_or(usize::MAX).min(items.len())
    });
    let start = end.saturating_sub(limit);
    Page {
        items: items[start..end]
            .iter()
            .map(std::borrow::Borrow::borrow)
            .collect(),
        next_before: (start > 0).then_some(start as u64),
    }
}

//! Following one thread's durable events over the connection (1.3+): the recovery manager of
//! [`crate::recovery`] driven by the live `runtime.event` notifications and a task that sends
//! what it asks for (`runtime.events.resume`, the recovery snapshot), handing the host one
//! gap-free, duplicate-free sequence ([`Followed`]) through a bounded window.
//!
//! **Invariant:** a resume or snapshot answer is fed to the manager only after every
//! notification read before it was handled, so the replay it ends is staged before its barrier.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agentwire_roll::cursor::EventCursor;
use agentwire_roll::ids::ThreadId;
use agentwire_roll::request;
use agentwire_roll::types::{
    RuntimeEventEnvelope, RuntimeEventsResumeParams, ThreadSnapshot, ThreadSnapshotParams,
};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::error::ClientError;
use super::{ClientCore, lock};
use crate::recovery::{
    Action, Delivery, FallbackReason, RecoveryConfig, StagedEvent, ThreadRecovery,
};

/// Where to start following a thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FollowOptions {
    /// The last event the host has (`None`: the start of the thread's log). After `thread.open`
    /// this is the snapshot's `eventCursor`; after a host restart, the persisted
    /// [`ThreadFollower::checkpoint`].
    pub after: Option<EventCursor>,
    /// The `runtimeInstanceId` the checkpoint was taken on (`None`: this connection's). When it
    /// differs, the follower starts from a recovery snapshot.
    pub runtime_instance: Option<String>,
    /// The staging window, also the bound of events waiting for [`ThreadFollower::next`]: when
    /// that many wait, the follower stops listening until the host took them, then resumes
    /// after the last one.
    pub recovery: RecoveryConfig,
}

impl FollowOptions {
    /// Follow from after `cursor` on this connection's runtime.
    pub fn after(cursor: Option<EventCursor>) -> FollowOptions {
        FollowOptions {
            after: cursor,
            ..FollowOptions::default()
        }
    }
}

/// What a follower hands out, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Followed {
    /// The next durable event: its cursor's sequence is one more than the previous one's (or
    /// than the checkpoint of the `Reset` before it, or than [`FollowOptions::after`]).
    Event(Box<RuntimeEventEnvelope>),
    /// The follower could not prove continuity and read a recovery snapshot: replace the view
    /// of the thread with it; events after `checkpoint` follow.
    Reset {
        /// Why it fell back.
        reason: FallbackReason,
        /// The snapshot's `eventCursor`.
        checkpoint: Option<EventCursor>,
        /// The recovery snapshot (`thread.snapshot` with `{limit: 1, recovery: true}`).
        snapshot: Box<ThreadSnapshot>,
    },
}

struct FollowState {
    /// Bumped when the manager is rebuilt; answers to an older generation's requests are
    /// dropped.
    generation: u64,
    recovery: ThreadRecovery<Box<RuntimeEventEnvelope>>,
    actions: VecDeque<(u64, Action)>,
    ready: VecDeque<(Followed, usize)>,
    ready_bytes: usize,
    /// The cursor of the last item [`ThreadFollower::next`] handed out.
    consumed: Option<EventCursor>,
    instance: String,
    /// The window overflowed: events are ignored until the host took what is waiting.
    paused: bool,
    failed: Option<ClientError>,
}

pub(super) struct FollowShared {
    thread_id: ThreadId,
    config: RecoveryConfig,
    state: Mutex<FollowState>,
    /// Wakes the consumer.
    ready: Notify,
    /// Wakes the driver.
    work: Notify,
}

impl FollowShared {
    /// A durable event of this thread arrived (from the notification handler).
    pub(super) fn event(&self, envelope: Box<RuntimeEventEnvelope>, bytes: usize) {
        let Some(cursor) = envelope.cursor.clone() else {
            return;
        };
        let mut state = lock(&self.state);
        let action = state.recovery.event(StagedEvent {
            cursor,
            bytes,
            event: envelope,
        });
        self.push_action(&mut state, action);
        self.deliver(&mut state, None);
    }

    fn push_action(&self, state: &mut FollowState, action: Option<Action>) {
        if let Some(action) = action {
            let generation = state.generation;
            state.actions.push_back((generation, action));
            self.work.notify_one();
        }
    }

    /// Moves the manager's deliveries to the window; `snapshot` is the one just read.
    fn deliver(&self, state: &mut FollowState, mut snapshot: Option<Box<ThreadSnapshot>>) {
        let deliveries: Vec<Delivery<Box<RuntimeEventEnvelope>>> =
            state.recovery.take_deliveries().collect();
        if deliveries.is_empty() {
            return;
        }
        for delivery in deliveries {
            let (item, bytes) = match delivery {
                Delivery::Event(staged) => (Followed::Event(staged.event), staged.bytes),
                Delivery::Reset { reason, checkpoint } => match snapshot.take() {
                    Some(snapshot) => (
                        Followed::Reset {
                            reason,
                            checkpoint,
                            snapshot,
                        },
                        0,
                    ),
                    None => {
                        // The manager resets only when handed a snapshot.
                        tracing::error!("a reset without its snapshot; skipped");
                        continue;
                    }
                },
            };
            // The window always takes one item, however large, so that the host can take it.
            if !state.ready.is_empty()
                && (state.ready.len() >= self.config.max_staged_events
                    || state.ready_bytes + bytes > self.config.max_staged_bytes)
            {
                self.pause(state);
                // What was pushed before the pause is the host's to take.
                self.ready.notify_one();
                return;
            }
            state.ready_bytes += bytes;
            state.ready.push_back((item, bytes));
        }
        self.ready.notify_one();
    }

    /// The host is not keeping up: keep what is waiting, stop listening (the manager is
    /// replaced by one that ignores events), and resume after the last item once the host has
    /// taken everything ([`ThreadFollower::next`]). What was dropped meanwhile is replayed.
    fn pause(&self, state: &mut FollowState) {
        tracing::warn!(
            thread = %self.thread_id,
            waiting = state.ready.len(),
            "follower window full; pausing until the host catches up"
        );
        state.generation += 1;
        state.actions.clear();
        state.recovery = ThreadRecovery::new(self.config, None, Some(state.instance.clone()));
        state.paused = true;
    }

    /// The host took everything after a pause: resume after the last item it took.
    fn unpause(&self, state: &mut FollowState) {
        state.paused = false;
        let instance = state.instance.clone();
        state.recovery =
            ThreadRecovery::new(self.config, state.consumed.clone(), Some(instance.clone()));
        let action = state.recovery.connected(&instance);
        self.push_action(state, Some(action));
    }

    fn fail(&self, state: &mut FollowState, error: ClientError) {
        tracing::warn!(thread = %self.thread_id, code = error.code(), %error, "following the thread failed");
        state.failed = Some(error);
        self.ready.notify_one();
    }
}

/// Follows one thread; dropping it stops following. See [`crate::roll::RollClient::follow`].
pub struct ThreadFollower {
    follow: Arc<FollowShared>,
    core: ClientCore,
    driver: AbortHandle,
}

impl std::fmt::Debug for ThreadFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadFollower")
            .field("thread_id", &self.follow.thread_id)
            .field("checkpoint", &self.checkpoint())
            .finish()
    }
}

impl ThreadFollower {
    pub(super) fn start(
        core: &ClientCore,
        thread_id: ThreadId,
        options: FollowOptions,
        instance: String,
    ) -> Result<ThreadFollower, ClientError> {
        let known_instance = options
            .runtime_instance
            .clone()
            .unwrap_or_else(|| instance.clone());
        let mut recovery = ThreadRecovery::new(
            options.recovery,
            options.after.clone(),
            Some(known_instance),
        );
        let action = recovery.connected(&instance);
        let follow = Arc::new(FollowShared {
            thread_id: thread_id.clone(),
            config: options.recovery,
            state: Mutex::new(FollowState {
                generation: 0,
                recovery,
                actions: VecDeque::from([(0, action)]),
                ready: VecDeque::new(),
                ready_bytes: 0,
                consumed: options.after,
                instance,
                paused: false,
                failed: None,
            }),
            ready: Notify::new(),
            work: Notify::new(),
        });
        {
            // Registered before the first request is sent, so live events are staged.
            let mut followers = lock(&core.shared.followers);
            if followers.contains_key(&thread_id) {
                return Err(ClientError::AlreadyFollowing {
                    thread_id: thread_id.to_string(),
                });
            }
            followers.insert(thread_id, Arc::clone(&follow));
        }
        let driver = tokio::spawn(drive(core.clone(), Arc::clone(&follow))).abort_handle();
        Ok(ThreadFollower {
            follow,
            core: core.clone(),
            driver,
        })
    }

    /// The thread.
    pub fn thread_id(&self) -> &ThreadId {
        &self.follow.thread_id
    }

    /// The cursor of the last item handed out: persist it (with [`Self::runtime_instance`]) to
    /// continue after a host restart.
    pub fn checkpoint(&self) -> Option<EventCursor> {
        lock(&self.follow.state).consumed.clone()
    }

    /// The `runtimeInstanceId` of the connection.
    pub fn runtime_instance(&self) -> String {
        lock(&self.follow.state).instance.clone()
    }

    /// The next item. Items already waiting are handed out after the connection closed too.
    ///
    /// # Errors
    /// [`ClientError::Closed`] once the connection closed; a resume the runtime refused with a
    /// code no snapshot repairs ([`ClientError::Recovery`]), or a failed resume or snapshot
    /// call (its error). The follower stops at its first error.
    pub async fn next(&mut self) -> Result<Followed, ClientError> {
        loop {
            {
                let mut state = lock(&self.follow.state);
                if let Some((item, bytes)) = state.ready.pop_front() {
                    state.ready_bytes -= bytes;
                    state.consumed = match &item {
                        Followed::Event(envelope) => envelope.cursor.clone(),
                        Followed::Reset { checkpoint, .. } => checkpoint.clone(),
                    };
                    return Ok(item);
                }
                if let Some(error) = &state.failed {
                    return Err(error.clone());
                }
                if state.paused && !self.core.peer.is_closed() {
                    self.follow.unpause(&mut state);
                }
            }
            if self.core.peer.is_closed() {
                return Err(self.core.closed_error());
            }
            tokio::select! {
                _ = self.follow.ready.notified() => {}
                _ = self.core.peer.closed() => {}
            }
        }
    }
}

impl Drop for ThreadFollower {
    fn drop(&mut self) {
        self.driver.abort();
        let mut followers = lock(&self.core.shared.followers);
        if followers
            .get(&self.follow.thread_id)
            .is_some_and(|f| Arc::ptr_eq(f, &self.follow))
        {
            followers.remove(&self.follow.thread_id);
        }
    }
}

/// Sends what the manager asks for, one request at a time, and feeds it the answers.
async fn drive(core: ClientCore, follow: Arc<FollowShared>) {
    loop {
        let next = lock(&follow.state).actions.pop_front();
        let Some((generation, action)) = next else {
            tokio::select! {
                _ = follow.work.notified() => continue,
                _ = core.peer.closed() => return,
            }
        };
        match action {
            Action::Resume { after_cursor } => {
                let params = RuntimeEventsResumeParams {
                    thread_id: follow.thread_id.clone(),
                    after_cursor,
                };
                let outcome = core.call::<request::RuntimeEventsResume>(params).await;
                core.settle_notifications().await;
                let mut state = lock(&follow.state);
                if state.generation != generation {
                    continue;
                }
                let step = match outcome {
                    Ok(barrier) => state
                        .recovery
                        .resumed(barrier.through_cursor.as_ref(), barrier.replayed_count),
                    Err(error) => match error.roll_code() {
                        Some(code) => state.recovery.resume_failed(code.as_str()),
                        None => {
                            follow.fail(&mut state, error);
                            return;
                        }
                    },
                };
                match step {
                    Ok(action) => follow.push_action(&mut state, action),
                    Err(error) => {
                        follow.fail(&mut state, ClientError::Recovery(error));
                        return;
                    }
                }
                follow.deliver(&mut state, None);
            }
            Action::ReadRecoverySnapshot => {
                let params = ThreadSnapshotParams {
                    thread_id: follow.thread_id.clone(),
                    message_before_sequence: None,
                    operation_before_sequence: None,
                    limit: Some(1),
                    recovery: Some(true),
                };
                let outcome = core.call::<request::ThreadSnapshot>(params).await;
                core.settle_notifications().await;
                let mut state = lock(&follow.state);
                if state.generation != generation {
                    continue;
                }
                let snapshot = match outcome {
                    Ok(snapshot) => Box::new(snapshot),
                    Err(error) => {
                        follow.fail(&mut state, error);
                        return;
                    }
                };
                let checkpoint = snapshot.event_cursor.clone().flatten();
                match state.recovery.snapshot(checkpoint) {
                    Ok(action) => follow.push_action(&mut state, action),
                    Err(error) => {
                        follow.fail(&mut state, ClientError::Recovery(error));
                        return;
                    }
                }
                follow.deliver(&mut state, Some(snapshot));
            }
        }
    }
}

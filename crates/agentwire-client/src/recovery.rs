//! The Roll recovery manager of one thread, without I/O: the host feeds it what the runtime
//! sends (durable events, the resume barrier, resume errors, snapshots) and what happens to the
//! connection; it answers with what to send next ([`Action`]) and hands out one gap-free,
//! duplicate-free stream of durable events ([`Delivery`]), with a [`Delivery::Reset`] wherever it
//! had to fall back to a snapshot.
//!
//! The rules are the protocol's (Roll 1.3+): on (re)connect, resume strictly after the last
//! delivered cursor; stage every durable event that arrives until the `{throughCursor,
//! replayedCount}` barrier, bounded by a count and byte window; at the barrier release the staged
//! events sorted by cursor and de-duplicated by event id, and check that the replay was exactly
//! `replayedCount` contiguous events. Fall back to a recovery snapshot on `EVENT_CURSOR_EXPIRED`,
//! `EVENT_CURSOR_GAP`, a new `runtimeInstanceId`, a cursor conflict or one of another log, a
//! staging overflow, and a replay or live gap; continue from the snapshot's `eventCursor`.

use std::collections::{BTreeMap, VecDeque};

use agentwire_roll::constants::{DEFAULT_REPLAY_BUFFER_BYTES, DEFAULT_REPLAY_BUFFER_RECORDS};
use agentwire_roll::cursor::{CursorError, EventCursor, event_cursor_distance};

/// The staging window and the restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// Most durable events staged while a replay or a snapshot is outstanding (10,000).
    pub max_staged_events: usize,
    /// Most bytes of staged events, as the host measures them (their frame length; 32 MiB).
    pub max_staged_bytes: usize,
    /// Fall back to a snapshot when the runtime's `runtimeInstanceId` changed (the official
    /// client does); when false, a restarted runtime is asked to resume like a reconnected one.
    pub snapshot_on_new_instance: bool,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            max_staged_events: DEFAULT_REPLAY_BUFFER_RECORDS as usize,
            max_staged_bytes: DEFAULT_REPLAY_BUFFER_BYTES as usize,
            snapshot_on_new_instance: true,
        }
    }
}

/// One durable event of the thread, as the host received it: its cursor (which names its event
/// id), its size for the staging window, and whatever the host keeps of it.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedEvent<E> {
    /// The envelope's `cursor`.
    pub cursor: EventCursor,
    /// Bytes counted against [`RecoveryConfig::max_staged_bytes`].
    pub bytes: usize,
    /// The event itself.
    pub event: E,
}

/// What the host must send next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `runtime.events.resume({threadId, afterCursor})`.
    Resume {
        /// The last delivered cursor; `None` is the start of the log.
        after_cursor: Option<EventCursor>,
    },
    /// `thread.snapshot({threadId, limit: 1, recovery: true})`, then [`ThreadRecovery::snapshot`].
    ReadRecoverySnapshot,
}

/// What the host sees, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery<E> {
    /// The next durable event: its sequence is one more than the previous delivery's (or the
    /// reset's checkpoint).
    Event(StagedEvent<E>),
    /// The manager fell back: the host replaces its view of the thread with the snapshot it
    /// read; events from `checkpoint` on follow.
    Reset {
        /// Why it fell back.
        reason: FallbackReason,
        /// The snapshot's `eventCursor`.
        checkpoint: Option<EventCursor>,
    },
}

/// Why the manager fell back to a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FallbackReason {
    /// The runtime answered `EVENT_CURSOR_EXPIRED`: the checkpoint (or the log start) was trimmed.
    CursorExpired,
    /// The runtime answered `EVENT_CURSOR_GAP`: the checkpoint is not part of the thread's log.
    CursorGap,
    /// The runtime restarted (a new `runtimeInstanceId`).
    NewRuntimeInstance,
    /// Two different events claim one position of the log.
    CursorConflict {
        /// The position.
        sequence: u64,
    },
    /// A cursor of another log arrived (the log was re-created, or another thread's).
    OtherLog,
    /// More events or bytes arrived during a replay than the staging window holds.
    StagingOverflow {
        /// Events staged when it overflowed.
        events: usize,
        /// Bytes staged when it overflowed.
        bytes: usize,
    },
    /// The barrier does not match the replay: `replayedCount` is not the distance from the
    /// checkpoint to `throughCursor`.
    BarrierMismatch {
        /// The distance from the checkpoint to `throughCursor`.
        distance: i128,
        /// The `replayedCount` the runtime sent.
        replayed_count: u64,
    },
    /// A replayed position never arrived before the barrier.
    ReplayGap {
        /// The position that was missing.
        expected: u64,
    },
    /// A live event skipped a position.
    LiveGap {
        /// The position that was missing.
        expected: u64,
        /// The position that arrived instead.
        found: u64,
    },
}

impl FallbackReason {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            FallbackReason::CursorExpired => "client.recovery.cursor-expired",
            FallbackReason::CursorGap => "client.recovery.cursor-gap",
            FallbackReason::NewRuntimeInstance => "client.recovery.new-runtime-instance",
            FallbackReason::CursorConflict { .. } => "client.recovery.cursor-conflict",
            FallbackReason::OtherLog => "client.recovery.other-log",
            FallbackReason::StagingOverflow { .. } => "client.recovery.staging-overflow",
            FallbackReason::BarrierMismatch { .. } => "client.recovery.barrier-mismatch",
            FallbackReason::ReplayGap { .. } => "client.recovery.replay-gap",
            FallbackReason::LiveGap { .. } => "client.recovery.live-gap",
        }
    }
}

/// A call that does not fit the manager's state, or a resume error it cannot recover from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// A resume result arrived while no resume was outstanding.
    #[error("a resume result arrived while no resume was outstanding")]
    NotResuming,
    /// A snapshot arrived while none was asked for.
    #[error("a snapshot arrived while none was asked for")]
    UnexpectedSnapshot,
    /// The runtime refused the resume with a code no snapshot repairs (`THREAD_NOT_FOUND`, …).
    #[error("the runtime refused to resume: {roll_code}")]
    ResumeRefused {
        /// The error's `data.rollCode`.
        roll_code: String,
    },
}

impl RecoveryError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            RecoveryError::NotResuming => "client.recovery.not-resuming",
            RecoveryError::UnexpectedSnapshot => "client.recovery.unexpected-snapshot",
            RecoveryError::ResumeRefused { .. } => "client.recovery.resume-refused",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// No connection, or no thread opened yet.
    Detached,
    /// A resume is outstanding: events are staged until its barrier.
    Resuming,
    /// A snapshot is outstanding: events are staged until it arrives.
    AwaitingSnapshot(FallbackReason),
    /// Caught up: events are delivered as they come.
    Live,
}

/// The recovery manager of one thread. Persist [`checkpoint`](Self::checkpoint) and
/// [`runtime_instance`](Self::runtime_instance) to resume after the host restarts.
#[derive(Debug)]
pub struct ThreadRecovery<E> {
    config: RecoveryConfig,
    checkpoint: Option<EventCursor>,
    instance: Option<String>,
    phase: Phase,
    /// A resume was sent and its answer has not arrived; it may arrive after a fallback
    /// overtook it, and is then ignored.
    resume_outstanding: bool,
    staged: BTreeMap<u64, StagedEvent<E>>,
    staged_bytes: usize,
    out: VecDeque<Delivery<E>>,
}

impl<E> ThreadRecovery<E> {
    /// A manager that resumes after `checkpoint` (`None`: from the start of the log), last seen
    /// on runtime `instance`.
    pub fn new(
        config: RecoveryConfig,
        checkpoint: Option<EventCursor>,
        instance: Option<String>,
    ) -> Self {
        ThreadRecovery {
            config,
            checkpoint,
            instance,
            phase: Phase::Detached,
            resume_outstanding: false,
            staged: BTreeMap::new(),
            staged_bytes: 0,
            out: VecDeque::new(),
        }
    }

    /// The cursor of the last durable event delivered (or of the last snapshot).
    pub fn checkpoint(&self) -> Option<&EventCursor> {
        self.checkpoint.as_ref()
    }

    /// The `runtimeInstanceId` of the runtime last connected to.
    pub fn runtime_instance(&self) -> Option<&str> {
        self.instance.as_deref()
    }

    /// Whether the manager is caught up and delivering events as they arrive.
    pub fn is_live(&self) -> bool {
        self.phase == Phase::Live
    }

    /// Takes the deliveries made so far, in order.
    pub fn take_deliveries(&mut self) -> impl Iterator<Item = Delivery<E>> + '_ {
        self.out.drain(..)
    }

    /// The connection is up and `initialize` named `runtime_instance_id`: resume, or fall back
    /// when the runtime restarted and the policy says so.
    pub fn connected(&mut self, runtime_instance_id: &str) -> Action {
        self.clear_staged();
        let restarted = self
            .instance
            .as_deref()
            .is_some_and(|known| known != runtime_instance_id);
        self.instance = Some(runtime_instance_id.to_owned());
        if restarted && self.config.snapshot_on_new_instance {
            self.phase = Phase::AwaitingSnapshot(FallbackReason::NewRuntimeInstance);
            self.resume_outstanding = false;
            return Action::ReadRecoverySnapshot;
        }
        self.phase = Phase::Resuming;
        self.resume_outstanding = true;
        Action::Resume {
            after_cursor: self.checkpoint.clone(),
        }
    }

    /// The connection closed: whatever was staged is dropped (the next resume replays it).
    pub fn disconnected(&mut self) {
        self.clear_staged();
        self.phase = Phase::Detached;
        self.resume_outstanding = false;
    }

    /// A durable event of this thread arrived (replayed or live: the wire does not say).
    pub fn event(&mut self, event: StagedEvent<E>) -> Option<Action> {
        match self.phase {
            Phase::Live => self.live_event(event),
            Phase::Resuming | Phase::AwaitingSnapshot(_) => self.stage(event),
            // Nothing was asked for: the host is not attached to the thread's stream.
            Phase::Detached => None,
        }
    }

    /// The resume answered with its barrier.
    pub fn resumed(
        &mut self,
        through_cursor: Option<&EventCursor>,
        replayed_count: u64,
    ) -> Result<Option<Action>, RecoveryError> {
        if !std::mem::take(&mut self.resume_outstanding) {
            return Err(RecoveryError::NotResuming);
        }
        if self.phase != Phase::Resuming {
            // A fallback overtook the resume; its snapshot decided.
            return Ok(None);
        }
        let distance = match event_cursor_distance(self.checkpoint.as_ref(), through_cursor) {
            Ok(distance) => distance,
            Err(error) => return Ok(self.fall_back(cursor_reason(&error, through_cursor))),
        };
        if distance != i128::from(replayed_count) {
            return Ok(self.fall_back(FallbackReason::BarrierMismatch {
                distance,
                replayed_count,
            }));
        }
        let through = through_cursor.map(EventCursor::sequence);
        self.phase = Phase::Live;
        if let Some(through) = through {
            let expected = self.next_sequence();
            if expected <= through {
                let reached = self.release_contiguous(Some(through));
                if reached <= through {
                    return Ok(self.fall_back(FallbackReason::ReplayGap { expected: reached }));
                }
            }
        }
        Ok(self.release_staged())
    }

    /// The resume failed with `roll_code` (`error.data.rollCode`).
    pub fn resume_failed(&mut self, roll_code: &str) -> Result<Option<Action>, RecoveryError> {
        if !std::mem::take(&mut self.resume_outstanding) {
            return Err(RecoveryError::NotResuming);
        }
        if self.phase != Phase::Resuming {
            return Ok(None);
        }
        let reason = match roll_code {
            "EVENT_CURSOR_EXPIRED" => FallbackReason::CursorExpired,
            "EVENT_CURSOR_GAP" => FallbackReason::CursorGap,
            other => {
                self.phase = Phase::Detached;
                self.clear_staged();
                return Err(RecoveryError::ResumeRefused {
                    roll_code: other.to_owned(),
                });
            }
        };
        Ok(self.fall_back(reason))
    }

    /// A (recovery) snapshot arrived with `eventCursor`. After a fallback the host sees a
    /// [`Delivery::Reset`]; on a first attach (no resume was tried) it simply starts there.
    pub fn snapshot(
        &mut self,
        event_cursor: Option<EventCursor>,
    ) -> Result<Option<Action>, RecoveryError> {
        let reason = match &self.phase {
            Phase::AwaitingSnapshot(reason) => Some(reason.clone()),
            Phase::Detached => None,
            Phase::Resuming | Phase::Live => return Err(RecoveryError::UnexpectedSnapshot),
        };
        self.checkpoint = event_cursor;
        self.phase = Phase::Live;
        if let Some(reason) = reason {
            self.out.push_back(Delivery::Reset {
                reason,
                checkpoint: self.checkpoint.clone(),
            });
        }
        // Staged events up to the snapshot are in it; one at its position must be its event.
        let at_or_before: Vec<u64> = match &self.checkpoint {
            Some(c) => self
                .staged
                .range(..=c.sequence())
                .map(|(s, _)| *s)
                .collect(),
            None => Vec::new(),
        };
        for sequence in at_or_before {
            if let Some(staged) = self.staged.remove(&sequence) {
                self.staged_bytes -= staged.bytes;
                if let Err(error) =
                    event_cursor_distance(self.checkpoint.as_ref(), Some(&staged.cursor))
                {
                    return Ok(self.fall_back(cursor_reason(&error, Some(&staged.cursor))));
                }
            }
        }
        // Those after it were staged against the checkpoint before this one: those of another
        // log (the thread's log was re-created) are not the thread's any more.
        if let Some(checkpoint) = &self.checkpoint {
            let foreign: Vec<u64> = self
                .staged
                .iter()
                .filter(|(_, staged)| {
                    event_cursor_distance(Some(checkpoint), Some(&staged.cursor)).is_err()
                })
                .map(|(sequence, _)| *sequence)
                .collect();
            for sequence in foreign {
                if let Some(staged) = self.staged.remove(&sequence) {
                    self.staged_bytes -= staged.bytes;
                }
            }
        }
        Ok(self.release_staged())
    }

    fn next_sequence(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, |c| c.sequence() + 1)
    }

    fn live_event(&mut self, event: StagedEvent<E>) -> Option<Action> {
        match event_cursor_distance(self.checkpoint.as_ref(), Some(&event.cursor)) {
            Err(error) => self.fall_back(cursor_reason(&error, Some(&event.cursor))),
            // Already delivered (a duplicate, or a replayed copy of what was live).
            Ok(distance) if distance <= 0 => None,
            Ok(1) => {
                self.checkpoint = Some(event.cursor.clone());
                self.out.push_back(Delivery::Event(event));
                None
            }
            Ok(_) => {
                let (expected, found) = (self.next_sequence(), event.cursor.sequence());
                let action = self.fall_back(FallbackReason::LiveGap { expected, found });
                self.stage(event);
                action
            }
        }
    }

    fn stage(&mut self, event: StagedEvent<E>) -> Option<Action> {
        let sequence = event.cursor.sequence();
        if let Err(error) = event_cursor_distance(self.checkpoint.as_ref(), Some(&event.cursor)) {
            return self.fall_back(cursor_reason(&error, Some(&event.cursor)));
        }
        if let Some((_, other)) = self.staged.iter().next()
            && other.cursor.log_id() != event.cursor.log_id()
        {
            return self.fall_back(FallbackReason::OtherLog);
        }
        if let Some(existing) = self.staged.get(&sequence) {
            if existing.cursor.event_id() == event.cursor.event_id() {
                return None;
            }
            return self.fall_back(FallbackReason::CursorConflict { sequence });
        }
        if self
            .checkpoint
            .as_ref()
            .is_some_and(|c| sequence <= c.sequence())
        {
            return None;
        }
        if self.staged.len() + 1 > self.config.max_staged_events
            || self.staged_bytes + event.bytes > self.config.max_staged_bytes
        {
            let reason = FallbackReason::StagingOverflow {
                events: self.staged.len(),
                bytes: self.staged_bytes,
            };
            // The window is the memory bound: what it held is dropped, and the snapshot decides
            // where the stream continues (another fallback if the live edge moved past it).
            self.clear_staged();
            return self.fall_back(reason);
        }
        self.staged_bytes += event.bytes;
        self.staged.insert(sequence, event);
        None
    }

    /// Delivers staged events while they continue the checkpoint, up to `limit` (inclusive);
    /// returns the next sequence not delivered.
    fn release_contiguous(&mut self, limit: Option<u64>) -> u64 {
        let mut expected = self.next_sequence();
        while limit.is_none_or(|l| expected <= l) {
            let Some(event) = self.staged.remove(&expected) else {
                break;
            };
            self.staged_bytes -= event.bytes;
            self.checkpoint = Some(event.cursor.clone());
            self.out.push_back(Delivery::Event(event));
            expected += 1;
        }
        expected
    }

    /// Delivers every contiguous staged event; a hole before the rest is a live gap.
    fn release_staged(&mut self) -> Option<Action> {
        let expected = self.release_contiguous(None);
        match self.staged.keys().next().copied() {
            Some(found) => self.fall_back(FallbackReason::LiveGap { expected, found }),
            None => None,
        }
    }

    /// Falls back to a snapshot; asks for one unless one is already outstanding.
    fn fall_back(&mut self, reason: FallbackReason) -> Option<Action> {
        if let Phase::AwaitingSnapshot(_) = self.phase {
            return None;
        }
        self.phase = Phase::AwaitingSnapshot(reason);
        Some(Action::ReadRecoverySnapshot)
    }

    fn clear_staged(&mut self) {
        self.staged.clear();
        self.staged_bytes = 0;
    }
}

fn cursor_reason(error: &CursorError, cursor: Option<&EventCursor>) -> FallbackReason {
    match error {
        CursorError::Conflict => FallbackReason::CursorConflict {
            sequence: cursor.map_or(0, EventCursor::sequence),
        },
        _ => FallbackReason::OtherLog,
    }
}

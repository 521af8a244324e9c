//! The recovery manager against the protocol's resume rules: the named scenarios one by one, and
//! a simulated runtime that interleaves replay and live events, duplicates, drops, trims and
//! restarts, with the stream the host sees checked to be gap-free and duplicate-free always, and
//! complete without a fallback whenever nothing was lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_client::{
    Action, Delivery, FallbackReason, RecoveryConfig, RecoveryError, StagedEvent, ThreadRecovery,
};
use agentwire_roll::cursor::EventCursor;
use proptest::prelude::*;

const LOG: [u8; 16] = [7; 16];

fn cursor(sequence: u64) -> EventCursor {
    cursor_in(LOG, sequence)
}

fn cursor_in(log: [u8; 16], sequence: u64) -> EventCursor {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&sequence.to_be_bytes());
    id[15] = 1;
    EventCursor::new(log, sequence, id)
}

fn event(sequence: u64) -> StagedEvent<u64> {
    StagedEvent {
        cursor: cursor(sequence),
        bytes: 100,
        event: sequence,
    }
}

fn manager(checkpoint: Option<u64>) -> ThreadRecovery<u64> {
    ThreadRecovery::new(
        RecoveryConfig::default(),
        checkpoint.map(cursor),
        Some("instance-a".into()),
    )
}

/// The host's view: event sequences, and `None` for each reset.
fn seen(manager: &mut ThreadRecovery<u64>) -> Vec<Option<u64>> {
    manager
        .take_deliveries()
        .map(|d| match d {
            Delivery::Event(e) => Some(e.event),
            Delivery::Reset { .. } => None,
        })
        .collect()
}

#[test]
fn resume_releases_staged_events_sorted_and_deduplicated_at_the_barrier() {
    let mut m = manager(Some(2));
    assert_eq!(
        m.connected("instance-a"),
        Action::Resume {
            after_cursor: Some(cursor(2))
        }
    );
    // Live 6 and 5 arrive during the replay of 3 and 4; 4 comes twice, 2 (delivered) again.
    for s in [3, 6, 2, 4, 5, 4] {
        assert_eq!(m.event(event(s)), None);
    }
    assert!(seen(&mut m).is_empty(), "nothing before the barrier");
    assert_eq!(m.resumed(Some(&cursor(4)), 2), Ok(None));
    assert_eq!(seen(&mut m), [Some(3), Some(4), Some(5), Some(6)]);
    assert!(m.is_live());
    assert_eq!(m.checkpoint(), Some(&cursor(6)));
    assert_eq!(m.event(event(7)), None);
    assert_eq!(m.event(event(7)), None);
    assert_eq!(seen(&mut m), [Some(7)]);
}

#[test]
fn resume_from_the_start_and_an_empty_log() {
    let mut m = manager(None);
    m.connected("instance-a");
    assert_eq!(m.resumed(None, 0), Ok(None));
    assert_eq!(m.event(event(0)), None);
    assert_eq!(seen(&mut m), [Some(0)]);
}

/// A fallback trigger applied to a manager that is resuming after 2.
type Trigger = Box<dyn Fn(&mut ThreadRecovery<u64>) -> Option<Action>>;

#[test]
fn each_fallback_condition_asks_for_a_recovery_snapshot_and_resets_the_stream() {
    let cases: Vec<(&str, Trigger, &str)> = vec![
        (
            "expired",
            Box::new(|m| m.resume_failed("EVENT_CURSOR_EXPIRED").unwrap()),
            "client.recovery.cursor-expired",
        ),
        (
            "gap",
            Box::new(|m| m.resume_failed("EVENT_CURSOR_GAP").unwrap()),
            "client.recovery.cursor-gap",
        ),
        (
            "barrier count",
            Box::new(|m| {
                m.event(event(3));
                m.resumed(Some(&cursor(3)), 2).unwrap()
            }),
            "client.recovery.barrier-mismatch",
        ),
        (
            "replay hole",
            Box::new(|m| {
                m.event(event(4));
                m.resumed(Some(&cursor(4)), 2).unwrap()
            }),
            "client.recovery.replay-gap",
        ),
        (
            "live hole after the barrier",
            Box::new(|m| {
                m.event(event(3));
                m.event(event(5));
                m.resumed(Some(&cursor(3)), 1).unwrap()
            }),
            "client.recovery.live-gap",
        ),
        (
            "conflict",
            Box::new(|m| {
                m.event(event(3));
                let mut other = event(3);
                other.cursor = EventCursor::new(LOG, 3, [9; 16]);
                m.event(other)
            }),
            "client.recovery.cursor-conflict",
        ),
        (
            "other log",
            Box::new(|m| {
                m.event(StagedEvent {
                    cursor: cursor_in([8; 16], 3),
                    bytes: 1,
                    event: 3,
                })
            }),
            "client.recovery.other-log",
        ),
        (
            "overflow",
            Box::new(|m| {
                m.event(event(3));
                m.event(StagedEvent {
                    cursor: cursor(4),
                    bytes: 32 * 1024 * 1024,
                    event: 4,
                })
            }),
            "client.recovery.staging-overflow",
        ),
    ];
    for (name, trigger, code) in cases {
        let mut m = manager(Some(2));
        m.connected("instance-a");
        assert_eq!(
            trigger(&mut m),
            Some(Action::ReadRecoverySnapshot),
            "{name}"
        );
        // Events keep arriving while the snapshot is read; the snapshot covers up to 5.
        m.event(event(6));
        m.event(event(5));
        assert_eq!(m.snapshot(Some(cursor(5))), Ok(None), "{name}");
        let deliveries: Vec<Delivery<u64>> = m.take_deliveries().collect();
        // What continued the checkpoint before the hole was delivered first (3, for the live
        // hole); then the reset and what follows the snapshot.
        let before_reset = deliveries.len().saturating_sub(2);
        assert!(
            deliveries[..before_reset]
                .iter()
                .enumerate()
                .all(|(i, d)| matches!(d, Delivery::Event(e) if e.event == 3 + i as u64)),
            "{name}: {deliveries:?}"
        );
        match &deliveries[before_reset..] {
            [Delivery::Reset { reason, checkpoint }, Delivery::Event(six)] => {
                assert_eq!(reason.code(), code, "{name}");
                assert_eq!(checkpoint.as_ref(), Some(&cursor(5)), "{name}");
                assert_eq!(six.event, 6, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn a_new_runtime_instance_falls_back_unless_the_policy_resumes() {
    let mut m = manager(Some(2));
    assert_eq!(m.connected("instance-b"), Action::ReadRecoverySnapshot);
    m.snapshot(Some(cursor(9))).unwrap();
    assert!(matches!(
        m.take_deliveries().next(),
        Some(Delivery::Reset {
            reason: FallbackReason::NewRuntimeInstance,
            ..
        })
    ));
    let config = RecoveryConfig {
        snapshot_on_new_instance: false,
        ..RecoveryConfig::default()
    };
    let mut m = ThreadRecovery::<u64>::new(config, Some(cursor(2)), Some("instance-a".into()));
    assert_eq!(
        m.connected("instance-b"),
        Action::Resume {
            after_cursor: Some(cursor(2))
        }
    );
    assert_eq!(m.runtime_instance(), Some("instance-b"));
}

#[test]
fn a_live_gap_falls_back_and_keeps_what_follows_the_snapshot() {
    let mut m = manager(Some(2));
    m.connected("instance-a");
    m.resumed(Some(&cursor(2)), 0).unwrap();
    assert_eq!(m.event(event(3)), None);
    assert_eq!(m.event(event(5)), Some(Action::ReadRecoverySnapshot));
    assert_eq!(
        m.event(event(6)),
        None,
        "one snapshot outstanding at a time"
    );
    m.snapshot(Some(cursor(4))).unwrap();
    assert_eq!(seen(&mut m), [Some(3), None, Some(5), Some(6)]);
}

#[test]
fn misplaced_answers_are_errors_and_unrepairable_refusals_are_reported() {
    let mut m = manager(Some(2));
    assert_eq!(m.resumed(None, 0), Err(RecoveryError::NotResuming));
    m.connected("instance-a");
    assert_eq!(
        m.snapshot(None).unwrap_err().code(),
        "client.recovery.unexpected-snapshot"
    );
    assert_eq!(
        m.resume_failed("THREAD_NOT_FOUND"),
        Err(RecoveryError::ResumeRefused {
            roll_code: "THREAD_NOT_FOUND".into()
        })
    );
}

#[test]
fn the_staging_window_bounds_memory_by_count() {
    let config = RecoveryConfig {
        max_staged_events: 3,
        ..RecoveryConfig::default()
    };
    let mut m = ThreadRecovery::<u64>::new(config, None, None);
    m.connected("instance-a");
    for s in 0..3 {
        assert_eq!(m.event(event(s)), None);
    }
    assert_eq!(m.event(event(3)), Some(Action::ReadRecoverySnapshot));
    m.snapshot(Some(cursor(3))).unwrap();
    let deliveries: Vec<Delivery<u64>> = m.take_deliveries().collect();
    assert!(matches!(
        &deliveries[..],
        [Delivery::Reset {
            reason: FallbackReason::StagingOverflow {
                events: 3,
                bytes: 300
            },
            ..
        }]
    ));
}

/// What the simulated runtime sends.
#[derive(Debug, Clone)]
enum Wire {
    Event(u64),
    Barrier { through: Option<u64>, count: u64 },
    ResumeError(&'static str),
}

#[derive(Debug, Clone)]
struct Scenario {
    /// Events in the log before the host reconnects.
    committed: u64,
    /// The host's checkpoint (`None`: nothing seen yet).
    checkpoint: Option<u64>,
    /// Events committed while the replay runs, and after it.
    live_during: u64,
    live_after: u64,
    /// Positions below this were trimmed.
    trimmed_below: u64,
    /// The runtime restarted since the host last saw it.
    restarted: bool,
    /// Extra copies of events, at these positions of the message list.
    duplicates: Vec<(usize, usize)>,
    /// One event is lost (an index into the events sent).
    dropped: Option<usize>,
    /// Seed of the replay/live interleaving.
    seed: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        0u64..30,
        any::<Option<u8>>(),
        0u64..10,
        0u64..10,
        prop_oneof![3 => Just(0u64), 1 => 0u64..30],
        prop_oneof![4 => Just(false), 1 => Just(true)],
        prop::collection::vec((any::<usize>(), any::<usize>()), 0..4),
        prop_oneof![4 => Just(None), 1 => any::<usize>().prop_map(Some)],
        any::<u64>(),
    )
        .prop_map(
            |(
                committed,
                checkpoint,
                live_during,
                live_after,
                trim,
                restarted,
                dups,
                drop,
                seed,
            )| {
                let checkpoint = checkpoint
                    .filter(|_| committed > 0)
                    .map(|c| u64::from(c) % committed);
                Scenario {
                    committed,
                    checkpoint,
                    live_during,
                    live_after,
                    trimmed_below: trim.min(committed),
                    restarted,
                    duplicates: dups,
                    dropped: drop,
                    seed,
                }
            },
        )
}

fn next_random(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

impl Scenario {
    fn expired(&self, after: Option<u64>) -> bool {
        let first_needed = after.map_or(0, |a| a + 1);
        first_needed < self.trimmed_below
    }

    /// The runtime's answer to a resume after `after`: replay, live events merged into it, the
    /// barrier, then the rest of the live events; with the scenario's faults applied.
    fn resume_messages(&self, after: Option<u64>) -> Vec<Wire> {
        if self.expired(after) {
            return vec![Wire::ResumeError("EVENT_CURSOR_EXPIRED")];
        }
        let from = after.map_or(0, |a| a + 1);
        let replay: Vec<u64> = (from..self.committed).collect();
        let during: Vec<u64> = (self.committed..self.committed + self.live_during).collect();
        let mut state = self.seed;
        let (mut r, mut d) = (0, 0);
        let mut out = Vec::new();
        while r < replay.len() || d < during.len() {
            let take_replay = d == during.len()
                || (r < replay.len() && next_random(&mut state).is_multiple_of(2));
            if take_replay {
                out.push(Wire::Event(replay[r]));
                r += 1;
            } else {
                out.push(Wire::Event(during[d]));
                d += 1;
            }
        }
        let through = self
            .committed
            .checked_sub(1)
            .filter(|t| after.is_none_or(|a| *t >= a));
        let through = through.or(after);
        out.push(Wire::Barrier {
            through,
            count: replay.len() as u64,
        });
        let start = self.committed + self.live_during;
        out.extend((start..start + self.live_after).map(Wire::Event));
        self.with_faults(out)
    }

    fn with_faults(&self, mut out: Vec<Wire>) -> Vec<Wire> {
        let events = |out: &[Wire]| -> Vec<usize> {
            (0..out.len())
                .filter(|i| matches!(out[*i], Wire::Event(_)))
                .collect()
        };
        for (from, to) in &self.duplicates {
            let at = events(&out);
            if at.is_empty() {
                break;
            }
            let copy = out[at[from % at.len()]].clone();
            out.insert(to % (out.len() + 1), copy);
        }
        if let Some(drop) = self.dropped {
            let at = events(&out);
            if !at.is_empty() {
                out.remove(at[drop % at.len()]);
            }
        }
        out
    }

    fn has_faults(&self) -> bool {
        !self.duplicates.is_empty() || self.dropped.is_some()
    }

    fn last(&self) -> u64 {
        self.committed + self.live_during + self.live_after
    }
}

/// Runs the host against the simulated runtime; returns what the host saw, as `(checkpoint at
/// the reset, reason)` for resets and sequences for events.
fn drive(s: &Scenario) -> Vec<Delivery<u64>> {
    let mut m = manager(s.checkpoint);
    let instance = if s.restarted {
        "instance-b"
    } else {
        "instance-a"
    };
    let mut queue: std::collections::VecDeque<Wire> = Default::default();
    let mut sent_max: Option<u64> = s.committed.checked_sub(1);
    let mut pending = Some(m.connected(instance));
    let mut deliveries = Vec::new();
    for _round in 0..1000 {
        match pending.take() {
            Some(Action::Resume { after_cursor }) => {
                queue.extend(s.resume_messages(after_cursor.map(|c| c.sequence())));
            }
            Some(Action::ReadRecoverySnapshot) => {
                // The runtime snapshots its log as it stands: everything sent so far.
                let head = sent_max;
                pending = m.snapshot(head.map(cursor)).unwrap();
                deliveries.extend(m.take_deliveries());
                continue;
            }
            None => {}
        }
        let Some(wire) = queue.pop_front() else { break };
        pending = match wire {
            Wire::Event(seq) => {
                sent_max = sent_max.max(Some(seq));
                m.event(event(seq))
            }
            Wire::Barrier { through, count } => {
                m.resumed(through.map(cursor).as_ref(), count).unwrap()
            }
            Wire::ResumeError(code) => m.resume_failed(code).unwrap(),
        };
        deliveries.extend(m.take_deliveries());
    }
    assert!(queue.is_empty() && pending.is_none(), "the run ends");
    deliveries
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_host_sees_a_gap_free_duplicate_free_stream(s in scenario()) {
        let deliveries = drive(&s);
        let mut next = s.checkpoint.map_or(0, |c| c + 1);
        let mut resets = Vec::new();
        for delivery in &deliveries {
            match delivery {
                Delivery::Event(e) => {
                    prop_assert_eq!(e.event, next, "gap or duplicate in {:?}", deliveries);
                    next += 1;
                }
                Delivery::Reset { reason, checkpoint } => {
                    next = checkpoint.as_ref().map_or(0, |c| c.sequence() + 1);
                    resets.push(reason.clone());
                }
            }
        }
        let expired = s.expired(s.checkpoint);
        if s.restarted {
            prop_assert_eq!(resets.first(), Some(&FallbackReason::NewRuntimeInstance));
            prop_assert_eq!(next, s.committed, "the snapshot of the restarted runtime");
        } else if expired {
            prop_assert_eq!(resets.first(), Some(&FallbackReason::CursorExpired));
            prop_assert_eq!(next, s.committed, "the snapshot after the trimmed prefix");
        } else if !s.has_faults() {
            // Nothing lost or repeated: every event after the checkpoint, once, no fallback.
            prop_assert!(resets.is_empty(), "{:?}", resets);
            prop_assert_eq!(next, s.last());
        } else if s.dropped.is_none() {
            // Duplicates may cost a fallback (a copy overtaking its predecessor), never an event.
            prop_assert_eq!(next, s.last());
        }
    }
}

/// A cursor of log `log` at `sequence`.
fn cursor_in_log(log: [u8; 16], sequence: u64) -> EventCursor {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&sequence.to_be_bytes());
    id[0] = log[0];
    id[15] = 1;
    EventCursor::new(log, sequence, id)
}

/// A snapshot into a new log (the thread's log was re-created) delivers no event of the old log
/// staged before it: only the reset.
#[test]
fn a_staged_event_of_the_old_log_is_not_delivered_after_a_reset_into_a_new_log() {
    let old = [1u8; 16];
    let new = [2u8; 16];
    let mut m: ThreadRecovery<u64> = ThreadRecovery::new(
        RecoveryConfig::default(),
        Some(cursor_in_log(old, 5)),
        Some("a".into()),
    );
    assert!(matches!(m.connected("a"), Action::Resume { .. }));
    // An event of the old log arrives while the resume is outstanding.
    assert_eq!(
        m.event(StagedEvent {
            cursor: cursor_in_log(old, 7),
            bytes: 10,
            event: 7,
        }),
        None
    );
    // The log was re-created: the runtime refuses the cursor, the snapshot is in the new log.
    assert_eq!(
        m.resume_failed("EVENT_CURSOR_GAP").unwrap(),
        Some(Action::ReadRecoverySnapshot)
    );
    let _ = m.snapshot(Some(cursor_in_log(new, 6))).unwrap();
    let delivered: Vec<(bool, [u8; 16])> = m
        .take_deliveries()
        .map(|d| match d {
            Delivery::Event(e) => (false, e.cursor.log_id()),
            Delivery::Reset { checkpoint, .. } => (true, checkpoint.unwrap().log_id()),
        })
        .collect();
    // Expected: only the reset into the new log; an old-log event must not follow it.
    assert_eq!(
        delivered,
        vec![(true, new)],
        "an event of another log was delivered after the reset"
    );
}

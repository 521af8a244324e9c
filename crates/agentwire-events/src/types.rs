//! The values the contract speaks in: thread ids, log ids, positions, events to append and
//! events read back, pages, thread summaries and retention policies.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits::{MAX_KIND_BYTES, MAX_RECORD_BYTES, MAX_THREAD_ID_BYTES};

/// The identity of one log: created with the store, never changed, so a position kept from a
/// log that was since recreated (a new file, a new database) is recognised as foreign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct LogId(pub Uuid);

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// A thread's id: 1 to [`MAX_THREAD_ID_BYTES`] bytes of UTF-8 without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ThreadId(String);

impl ThreadId {
    /// Checks and wraps a thread id.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        if id.is_empty() {
            return Err(Error::InvalidThreadId {
                reason: "empty".into(),
            });
        }
        if id.len() > MAX_THREAD_ID_BYTES {
            return Err(Error::InvalidThreadId {
                reason: format!("{} bytes, the limit is {MAX_THREAD_ID_BYTES}", id.len()),
            });
        }
        if id.chars().any(char::is_control) {
            return Err(Error::InvalidThreadId {
                reason: "holds a control character".into(),
            });
        }
        Ok(Self(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where one event stands: in which log, and its sequence within its thread (the thread is the
/// caller's context: a position is only ever used with the thread it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Position {
    pub log_id: LogId,
    pub seq: u64,
}

/// Where a read starts: strictly after this point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum After {
    /// The very start of the thread, before sequence 0. If any prefix was trimmed, reading from
    /// here is [`Error::Expired`].
    Start,
    /// Strictly after the event at this position.
    Position(Position),
}

/// What an append expects the thread's next sequence to be (optimistic concurrency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expected {
    /// Append at the end, whatever it is.
    Any,
    /// The thread's next sequence must be exactly this (0: the thread has no events yet);
    /// otherwise the append fails with [`Error::Conflict`] and writes nothing.
    Next(u64),
}

/// One event to append: an optional caller-chosen id, a kind and opaque payload bytes.
///
/// Only durable events are appended: ephemeral ones are the caller's to publish and never reach
/// the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// The event's id; the log assigns a random (v4) UUID when `None`.
    pub event_id: Option<Uuid>,
    /// The event's kind (for example `turn.started`); 1 to [`MAX_KIND_BYTES`] bytes.
    pub kind: String,
    /// The payload, stored and returned byte for byte.
    pub payload: Vec<u8>,
}

impl NewEvent {
    /// An event with a log-assigned id.
    pub fn new(kind: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            event_id: None,
            kind: kind.into(),
            payload: payload.into(),
        }
    }

    /// An event whose payload is a JSON value's compact text.
    pub fn json(kind: impl Into<String>, value: &serde_json::Value) -> Self {
        Self::new(kind, value.to_string())
    }

    /// The same event with this id.
    pub fn with_id(mut self, id: Uuid) -> Self {
        self.event_id = Some(id);
        self
    }

    /// The bytes this event counts for against the record limit and the retention byte budget:
    /// its payload plus its kind.
    pub fn record_size(&self) -> usize {
        self.payload.len() + self.kind.len()
    }

    pub(crate) fn check(&self, max_record_bytes: usize) -> Result<()> {
        check_kind(&self.kind)?;
        let size = self.record_size();
        if size > max_record_bytes {
            return Err(Error::RecordTooLarge {
                size,
                limit: max_record_bytes,
            });
        }
        Ok(())
    }
}

fn check_kind(kind: &str) -> Result<()> {
    if kind.is_empty() {
        return Err(Error::InvalidKind {
            reason: "empty".into(),
        });
    }
    if kind.len() > MAX_KIND_BYTES {
        return Err(Error::InvalidKind {
            reason: format!("{} bytes, the limit is {MAX_KIND_BYTES}", kind.len()),
        });
    }
    if kind.chars().any(char::is_control) {
        return Err(Error::InvalidKind {
            reason: "holds a control character".into(),
        });
    }
    Ok(())
}

/// One event as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredEvent {
    /// Its sequence in its thread: gap-free, from 0.
    pub seq: u64,
    pub event_id: Uuid,
    pub kind: String,
    /// When its transaction committed, in milliseconds since the Unix epoch (the writer's
    /// clock).
    pub committed_at_ms: i64,
    #[serde(skip)]
    pub payload: Vec<u8>,
}

impl StoredEvent {
    /// This event's position in the log it was read from.
    pub fn position(&self, log_id: LogId) -> Position {
        Position {
            log_id,
            seq: self.seq,
        }
    }

    /// The bytes it counts for (payload plus kind), as [`NewEvent::record_size`].
    pub fn record_size(&self) -> usize {
        self.payload.len() + self.kind.len()
    }
}

/// The acknowledgement of a committed append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Appended {
    pub log_id: LogId,
    /// Sequence of the first appended event; the others follow without a gap.
    pub first_seq: u64,
    /// The id of each appended event, in order.
    pub event_ids: Vec<Uuid>,
    pub committed_at_ms: i64,
}

impl Appended {
    /// The thread's next sequence after this append.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.event_ids.len() as u64
    }

    /// Position of the last appended event.
    pub fn last_position(&self) -> Position {
        Position {
            log_id: self.log_id,
            seq: self.next_seq().saturating_sub(1),
        }
    }
}

/// One page of a read: the events strictly after the requested point, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub events: Vec<StoredEvent>,
    /// The thread's next sequence when the page was read; the page reaches the head when its
    /// last event is `next_seq - 1` (or it is empty).
    pub next_seq: u64,
    /// The first sequence still kept.
    pub low_watermark: u64,
}

impl Page {
    /// Whether the page reaches the thread's head as it was when read.
    pub fn at_head(&self) -> bool {
        self.events
            .last()
            .is_none_or(|e| e.seq + 1 == self.next_seq)
    }
}

/// A thread's checkpoint: opaque state bytes that stand for every event up to and including
/// `through`, so a reader of the state can start after it (even when that prefix was trimmed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last position the checkpoint covers.
    pub through: u64,
    /// The state, as its writer encoded it.
    pub payload: Vec<u8>,
}

/// Where a thread's checkpoint stands, without its state: what operators and tools list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CheckpointInfo {
    /// The last position the checkpoint covers.
    pub through: u64,
    /// The size of its state in bytes.
    pub bytes: u64,
}

/// A thread as the log knows it, for operators and for the runtime's restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadInfo {
    pub thread: ThreadId,
    /// The first sequence still kept: everything below was trimmed.
    pub low_watermark: u64,
    /// The sequence the next append gets.
    pub next_seq: u64,
    /// Kept events (`next_seq - low_watermark`).
    pub records: u64,
    /// Bytes of the kept events (payloads plus kinds).
    pub bytes: u64,
    pub deleted: bool,
}

/// What retention keeps of a thread; the oldest contiguous prefix beyond any bound is trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retention {
    pub max_records: u64,
    pub max_bytes: u64,
    #[serde(serialize_with = "serialize_duration_ms")]
    pub max_age: Duration,
}

/// Milliseconds, at most `u64::MAX` (JSON readers take no larger integer).
fn serialize_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Default for Retention {
    /// The Roll runtime's per-thread retention: 10,000 records, 16 MiB, 30 days.
    fn default() -> Self {
        Self {
            max_records: crate::limits::DEFAULT_RETAINED_RECORDS,
            max_bytes: crate::limits::DEFAULT_RETAINED_BYTES,
            max_age: crate::limits::DEFAULT_RETAINED_AGE,
        }
    }
}

/// What one trim did to one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trimmed {
    pub thread: ThreadId,
    /// Events removed by this trim.
    pub removed: u64,
    /// The low-watermark after the trim.
    pub low_watermark: u64,
    pub next_seq: u64,
}

/// Which engine holds a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Milliseconds since the Unix epoch of a time (0 before the epoch).
pub(crate) fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Checks one append's events against the per-record and per-append limits.
/// Checks that a thread at `next_seq` (deleted or not) may take a checkpoint through `through`,
/// and returns `through` as the engines store it.
pub(crate) fn check_checkpoint_position(
    thread: &ThreadId,
    through: u64,
    next_seq: u64,
    deleted: bool,
) -> Result<i64> {
    if deleted {
        return Err(Error::ThreadDeleted {
            thread: thread.to_string(),
        });
    }
    if through >= next_seq {
        return Err(Error::PositionAhead {
            thread: thread.to_string(),
            seq: through,
            next_seq,
        });
    }
    Ok(i64::try_from(through).unwrap_or(i64::MAX))
}

/// Checks a checkpoint against its size limit.
pub(crate) fn check_checkpoint(checkpoint: &Checkpoint, limit: usize) -> Result<()> {
    if checkpoint.payload.len() > limit {
        return Err(Error::CheckpointTooLarge {
            size: checkpoint.payload.len(),
            limit,
        });
    }
    Ok(())
}

pub(crate) fn check_append(events: &[NewEvent], max_record_bytes: usize) -> Result<usize> {
    use crate::limits::{MAX_APPEND_BYTES, MAX_APPEND_EVENTS};
    if events.is_empty() {
        return Err(Error::InvalidAppend {
            reason: "no events".into(),
        });
    }
    if events.len() > MAX_APPEND_EVENTS {
        return Err(Error::InvalidAppend {
            reason: format!("{} events, the limit is {MAX_APPEND_EVENTS}", events.len()),
        });
    }
    let mut total = 0usize;
    for event in events {
        event.check(max_record_bytes.min(MAX_RECORD_BYTES))?;
        total += event.record_size();
    }
    if total > MAX_APPEND_BYTES {
        return Err(Error::InvalidAppend {
            reason: format!("{total} bytes, the limit is {MAX_APPEND_BYTES}"),
        });
    }
    Ok(total)
}

/// The first sequence a read after `after` wants, once the position's log was checked.
pub(crate) fn first_wanted(log_id: LogId, after: After) -> Result<u64> {
    match after {
        After::Start => Ok(0),
        After::Position(p) if p.log_id != log_id => Err(Error::ForeignLog {
            expected: log_id,
            found: p.log_id,
        }),
        After::Position(p) => Ok(p.seq.saturating_add(1)),
    }
}

/// Decides whether a read of `first` on a thread with these bounds is answerable.
pub(crate) fn check_read_bounds(
    thread: &ThreadId,
    first: u64,
    low_watermark: u64,
    next_seq: u64,
) -> Result<()> {
    if first < low_watermark {
        return Err(Error::Expired {
            thread: thread.to_string(),
            low_watermark,
        });
    }
    if first > next_seq {
        return Err(Error::PositionAhead {
            thread: thread.to_string(),
            seq: first - 1,
            next_seq,
        });
    }
    Ok(())
}

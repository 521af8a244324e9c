//! The log's error type: one variant per failure a caller can act on, each with a stable code.

use thiserror::Error;

use crate::types::LogId;

/// Everything an [`EventLog`](crate::EventLog) operation can fail with.
///
/// [`Error::code`] is stable and documented in `docs/events.md`; match on it (or the variant),
/// never on the message.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The store URL names no backend this crate has, or cannot be parsed.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// A thread id is empty, longer than [`MAX_THREAD_ID_BYTES`](crate::MAX_THREAD_ID_BYTES) or
    /// holds a control character.
    #[error("invalid thread id: {reason}")]
    InvalidThreadId { reason: String },
    /// An event kind is empty, longer than [`MAX_KIND_BYTES`](crate::MAX_KIND_BYTES) or holds a
    /// control character.
    #[error("invalid event kind: {reason}")]
    InvalidKind { reason: String },
    /// One event's record (payload plus kind) is over the record limit.
    #[error("event record of {size} bytes is over the limit of {limit} bytes")]
    RecordTooLarge { size: usize, limit: usize },
    /// One append holds no events, more than [`MAX_APPEND_EVENTS`](crate::MAX_APPEND_EVENTS), or
    /// more than [`MAX_APPEND_BYTES`](crate::MAX_APPEND_BYTES) in all.
    /// A checkpoint over [`crate::MAX_CHECKPOINT_BYTES`].
    #[error("checkpoint of {size} bytes is over the limit of {limit} bytes")]
    CheckpointTooLarge { size: usize, limit: usize },
    #[error("append rejected: {reason}")]
    InvalidAppend { reason: String },
    /// The thread's next sequence is not the one the append expected; nothing was written.
    #[error(
        "append conflict on thread {thread:?}: expected next sequence {expected}, the log is at {actual}"
    )]
    Conflict {
        thread: String,
        expected: u64,
        actual: u64,
    },
    /// A read starts before the thread's low-watermark: that prefix was trimmed.
    #[error(
        "position expired on thread {thread:?}: events before sequence {low_watermark} were trimmed"
    )]
    Expired { thread: String, low_watermark: u64 },
    /// A read starts after the thread's head: the position was never written by this log.
    #[error("unknown position on thread {thread:?}: sequence {seq} is beyond the head {next_seq}")]
    PositionAhead {
        thread: String,
        seq: u64,
        next_seq: u64,
    },
    /// A position comes from another log (another file or database, or a recreated one).
    #[error("position belongs to log {found}, this log is {expected}")]
    ForeignLog { expected: LogId, found: LogId },
    /// The thread was deleted; it takes no appends and has no events to read.
    #[error("thread {thread:?} was deleted")]
    ThreadDeleted { thread: String },
    /// A page size of zero or over [`MAX_PAGE_EVENTS`](crate::MAX_PAGE_EVENTS).
    #[error("page limit {limit} is outside 1..={max}")]
    InvalidLimit { limit: usize, max: usize },
    /// A setting is out of its documented range.
    #[error("invalid setting {name}: {reason}")]
    InvalidSetting { name: &'static str, reason: String },
    /// The store's schema is newer than this build knows.
    #[error("store schema version {found} is newer than the newest this build knows ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
    /// The store holds data this crate did not write the way it writes it.
    #[error("store is corrupt: {reason}")]
    Corrupt { reason: String },
    /// The log was closed (or its writer stopped) before the operation finished.
    #[error("the event log is closed")]
    Closed,
    /// The connection was lost while a commit was in flight: the append may or may not be in
    /// the log. Read the thread to learn which.
    #[error("commit outcome unknown: {reason}")]
    CommitOutcomeUnknown { reason: String },
    /// The writer could not carry out this write (its group commit failed, or its connection
    /// could not be made); nothing of it was written.
    #[error("write failed: {reason}")]
    WriteFailed { reason: String },
    /// SQLite reported an error.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL reported an error (or the connection failed).
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// No PostgreSQL connection could be taken from a pool (the read pool, or the checkpoint
    /// writer's connection).
    #[error("postgres pool: {reason}")]
    Pool { reason: String },
    /// A file-system error outside the engines (creating the store's folder).
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The stable code of this error (`events.…`), as listed in `docs/events.md`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidUrl { .. } => "events.invalid-url",
            Error::InvalidThreadId { .. } => "events.invalid-thread-id",
            Error::InvalidKind { .. } => "events.invalid-kind",
            Error::RecordTooLarge { .. } => "events.record-too-large",
            Error::CheckpointTooLarge { .. } => "events.checkpoint-too-large",
            Error::InvalidAppend { .. } => "events.invalid-append",
            Error::Conflict { .. } => "events.conflict",
            Error::Expired { .. } => "events.expired",
            Error::PositionAhead { .. } => "events.position-ahead",
            Error::ForeignLog { .. } => "events.foreign-log",
            Error::ThreadDeleted { .. } => "events.thread-deleted",
            Error::InvalidLimit { .. } => "events.invalid-limit",
            Error::InvalidSetting { .. } => "events.invalid-setting",
            Error::SchemaTooNew { .. } => "events.schema-too-new",
            Error::Corrupt { .. } => "events.corrupt",
            Error::Closed => "events.closed",
            Error::CommitOutcomeUnknown { .. } => "events.commit-outcome-unknown",
            Error::WriteFailed { .. } => "events.write-failed",
            Error::Sqlite(_) => "events.sqlite",
            Error::Postgres(_) => "events.postgres",
            Error::Pool { .. } => "events.pool",
            Error::Io(_) => "events.io",
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

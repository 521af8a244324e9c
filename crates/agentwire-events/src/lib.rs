//! The durable event log: per-thread ordered appends acknowledged only after commit, reads
//! strictly after a position, live tail, retention with an exact low-watermark, thread deletion.
//!
//! One contract, [`EventLog`], and two engines behind it: SQLite, the embedded default
//! (`sqlite:PATH`), and PostgreSQL for several runtime instances on several machines
//! (`postgres://…`). [`open`] picks the engine from a store URL and returns an
//! `Arc<dyn EventLog>`. The log is protocol-agnostic: an event is a kind, an id and opaque payload
//! bytes; faces encode their cursors from [`Position`]s. Ephemeral events never reach it.
//!
//! The contract, its error codes and the storage layout are documented in `docs/events.md`.

mod error;
mod finish;
mod limits;
mod postgres;
mod queue;
mod retention;
mod settings;
mod sqlite;
mod tail;
mod types;

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;

pub use error::{Error, Result};
pub use finish::FinishOnDrop;
pub use limits::{
    DEFAULT_FOREIGN_COMMIT_POLL, DEFAULT_JOURNAL_SIZE_LIMIT, DEFAULT_MAX_BATCH_APPENDS,
    DEFAULT_MAX_BATCH_BYTES, DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_CAPACITY, DEFAULT_READERS,
    DEFAULT_RETAINED_AGE, DEFAULT_RETAINED_BYTES, DEFAULT_RETAINED_RECORDS,
    DEFAULT_WAL_AUTOCHECKPOINT_PAGES, MAX_APPEND_BYTES, MAX_APPEND_EVENTS, MAX_BATCH_BYTES,
    MAX_CHECKPOINT_BYTES, MAX_KIND_BYTES, MAX_PAGE_BYTES, MAX_PAGE_EVENTS, MAX_QUEUE_BYTES,
    MAX_QUEUE_CAPACITY, MAX_READERS, MAX_RECORD_BYTES, MAX_THREAD_ID_BYTES, SQLITE_BUSY_TIMEOUT,
};
/// The statement the PostgreSQL writer commits a batch of one one-event append with (for the
/// `pg_append_pieces` example, which times it against a plain insert); not a stable interface.
#[doc(hidden)]
pub use postgres::one_event_sql as postgres_one_event_sql;
pub use postgres::{POSTGRES_SCHEMA_VERSION, PostgresLog};
pub use settings::{Settings, StoreUrl, Synchronous, redact_store_url};
pub use sqlite::{SQLITE_SCHEMA_VERSION, SqliteLog};
pub use tail::Tail;
pub use types::{
    After, Appended, Backend, Checkpoint, CheckpointInfo, Expected, LogId, NewEvent, Page,
    Position, Retention, StoredEvent, ThreadId, ThreadInfo, Trimmed,
};

/// A durable, per-thread ordered event log.
///
/// Every method is safe to call from many tasks at once; implementations are `Send + Sync` and
/// meant to be shared as `Arc<dyn EventLog>`.
#[async_trait]
pub trait EventLog: Send + Sync + std::fmt::Debug {
    /// The log's identity; it changes only when the store is recreated.
    fn log_id(&self) -> LogId;

    /// Which engine holds the log.
    fn backend(&self) -> Backend;

    /// The largest record (payload plus kind) an append takes; a larger one is
    /// [`Error::RecordTooLarge`]. At most [`MAX_RECORD_BYTES`].
    fn max_record_bytes(&self) -> usize {
        MAX_RECORD_BYTES
    }

    /// Appends `events` to `thread` in one commit, after checking `expected`. Returns only after
    /// the commit is durable; on any error nothing of this append was written (except
    /// [`Error::CommitOutcomeUnknown`], which says so).
    ///
    /// An append is queued at its first poll and committed even if its caller stops waiting
    /// (drops the future). An append may commit other callers' queued appends with its own, on
    /// its caller's thread or task (SQLite within the poll; PostgreSQL on the task, for small
    /// batches). So a caller that keeps a pending append must poll it on, as awaiting it does,
    /// or drop it: on PostgreSQL a pending append held unpolled may hold the log's queue, and
    /// with it every thread's appends, trims and deletions, until it is polled again (a task
    /// that holds one so and awaits another call of the same log waits for itself).
    async fn append(
        &self,
        thread: &ThreadId,
        expected: Expected,
        events: Vec<NewEvent>,
    ) -> Result<Appended>;

    /// Reads up to `limit` (1..=[`MAX_PAGE_EVENTS`]) events of `thread` strictly after `after`,
    /// in sequence order. A start before the low-watermark is [`Error::Expired`]; a start
    /// beyond the head is [`Error::PositionAhead`]; a thread never written reads as empty.
    async fn read(&self, thread: &ThreadId, after: After, limit: usize) -> Result<Page>;

    /// A receiver whose value changes after every commit that may have added events (of this
    /// process, and of other processes or machines sharing the store). A tail waits on it
    /// instead of polling; see [`Tail`].
    fn commits(&self) -> tokio::sync::watch::Receiver<u64>;

    /// One thread's bounds and size, or `None` if it was never written.
    async fn thread(&self, thread: &ThreadId) -> Result<Option<ThreadInfo>>;

    /// Threads in id order, strictly after `after`, at most `limit` (1..=[`MAX_PAGE_EVENTS`]).
    async fn threads(&self, after: Option<&ThreadId>, limit: usize) -> Result<Vec<ThreadInfo>>;

    /// Trims the oldest contiguous prefix of `thread` beyond any bound of `retention` (ages
    /// measured from `now`) and moves its low-watermark exactly past the last removed event.
    async fn trim(
        &self,
        thread: &ThreadId,
        retention: &Retention,
        now: SystemTime,
    ) -> Result<Trimmed>;

    /// Stores `checkpoint` as `thread`'s, replacing an older one (one covering fewer events); an
    /// older or equal one than the stored is ignored. `through` must be a position the thread
    /// has reached ([`Error::PositionAhead`] otherwise). Checkpoints are never trimmed, and go
    /// with the thread when it is deleted. Over [`MAX_CHECKPOINT_BYTES`] is
    /// [`Error::CheckpointTooLarge`].
    async fn put_checkpoint(&self, thread: &ThreadId, checkpoint: Checkpoint) -> Result<()>;

    /// The thread's checkpoint, or `None` when it has none.
    async fn checkpoint(&self, thread: &ThreadId) -> Result<Option<Checkpoint>>;

    /// The position and size of the thread's checkpoint, or `None` when it has none, without
    /// reading its state.
    async fn checkpoint_info(&self, thread: &ThreadId) -> Result<Option<CheckpointInfo>>;

    /// Deletes a thread's events and checkpoint. The thread stays known as deleted: appends and
    /// reads of it fail with [`Error::ThreadDeleted`]. Returns false if it was never written.
    async fn delete_thread(&self, thread: &ThreadId) -> Result<bool>;

    /// Finishes the appends already queued and stops the writer; later calls fail with
    /// [`Error::Closed`].
    async fn close(&self) -> Result<()>;
}

/// Opens the log a store URL names, with default [`Settings`]: `sqlite:PATH` (created when
/// missing) or `postgres://…` (its tables are created when missing).
pub async fn open(url: &str) -> Result<Arc<dyn EventLog>> {
    open_with(url, Settings::default()).await
}

/// Opens the log a store URL names with these settings.
pub async fn open_with(url: &str, settings: Settings) -> Result<Arc<dyn EventLog>> {
    settings.check()?;
    match StoreUrl::parse(url)? {
        StoreUrl::Sqlite(path) => Ok(Arc::new(SqliteLog::open(&path, settings).await?)),
        StoreUrl::Postgres(url) => Ok(Arc::new(PostgresLog::connect(&url, settings).await?)),
    }
}

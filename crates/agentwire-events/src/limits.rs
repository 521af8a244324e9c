//! Every limit of the log and every default setting, as named constants.

use std::time::Duration;

/// The largest durable record: payload plus kind, 16 MiB (the Roll runtime's limit).
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// The largest checkpoint a thread may store (256 MiB): a checkpoint holds a thread's whole
/// state, which grows with the thread, so it has its own bound.
pub const MAX_CHECKPOINT_BYTES: usize = 256 * 1024 * 1024;
/// The most events one append may carry.
pub const MAX_APPEND_EVENTS: usize = 10_000;
/// The most bytes (payloads plus kinds) one append may carry.
pub const MAX_APPEND_BYTES: usize = 64 * 1024 * 1024;
/// The most bytes `Settings::max_batch_bytes` may allow one group commit (256 MiB; a batch
/// goes over it by at most its last append). PostgreSQL takes a whole group commit as one
/// statement, whose parameters must stay well under its 1 GiB message bound.
pub const MAX_BATCH_BYTES: usize = 256 * 1024 * 1024;
/// The longest thread id, in bytes.
pub const MAX_THREAD_ID_BYTES: usize = 256;
/// The longest event kind, in bytes.
pub const MAX_KIND_BYTES: usize = 128;
/// The most events one read returns.
pub const MAX_PAGE_EVENTS: usize = 1_000;
/// A page stops growing once it holds this many bytes (it always holds at least one event).
pub const MAX_PAGE_BYTES: usize = 32 * 1024 * 1024;

/// Default retention: records kept per thread.
pub const DEFAULT_RETAINED_RECORDS: u64 = 10_000;
/// Default retention: bytes kept per thread (16 MiB).
pub const DEFAULT_RETAINED_BYTES: u64 = 16 * 1024 * 1024;
/// Default retention: age of the oldest kept event (30 days).
pub const DEFAULT_RETAINED_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The most commands `Settings::queue_capacity` may let the append queue hold.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// The most bytes `Settings::queue_bytes` may let the append queue hold (4 GiB less a byte).
pub const MAX_QUEUE_BYTES: usize = u32::MAX as usize;
/// The most read connections `Settings::readers` may allow.
pub const MAX_READERS: usize = 1_024;

/// Default capacity of the append queue; a full queue makes `append` wait (backpressure).
pub const DEFAULT_QUEUE_CAPACITY: usize = 1_024;
/// Default bytes the append queue may hold (256 MiB, a group commit's most): a full queue
/// makes `append` and `put_checkpoint` wait.
pub const DEFAULT_QUEUE_BYTES: usize = 256 * 1024 * 1024;
/// Default most appends committed in one group commit.
pub const DEFAULT_MAX_BATCH_APPENDS: usize = 512;
/// Default most bytes committed in one group commit (the first append is always taken whole).
pub const DEFAULT_MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// Default number of reader connections (SQLite read-only connections, PostgreSQL read pool).
pub const DEFAULT_READERS: usize = 4;
/// Default WAL pages after which SQLite checkpoints (passively, at commit).
pub const DEFAULT_WAL_AUTOCHECKPOINT_PAGES: u32 = 1_000;
/// Default size the SQLite WAL file is truncated to after a checkpoint.
pub const DEFAULT_JOURNAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;
/// Default interval at which a SQLite log notices commits made by another process.
pub const DEFAULT_FOREIGN_COMMIT_POLL: Duration = Duration::from_millis(200);
/// How long SQLite waits for a lock held by another connection before failing.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

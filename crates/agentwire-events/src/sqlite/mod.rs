//! The SQLite engine, the embedded default: one writer that group-commits appends from a bounded
//! queue (on the appender's thread when it finds the writer free, on the writer thread
//! otherwise), read-only connections for readers, WAL with bounded checkpoints.

mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{Semaphore, watch};
use uuid::Uuid;

use crate::EventLog;
use crate::error::{Error, Result};
use crate::limits::{MAX_PAGE_BYTES, MAX_PAGE_EVENTS};
use crate::queue::{Doorbell, WriterQueue, new_append};
use crate::settings::Settings;
use crate::types::{
    After, Appended, Backend, Checkpoint, CheckpointInfo, Expected, LogId, NewEvent, Page,
    Retention, StoredEvent, ThreadId, ThreadInfo, Trimmed, check_read_bounds, first_wanted,
};

pub use schema::SQLITE_SCHEMA_VERSION;
use schema::{BYTES, NEXT_SEQ};

/// A log in one SQLite file.
#[derive(Debug)]
pub struct SqliteLog {
    log_id: LogId,
    settings: Settings,
    queue: WriterQueue,
    writer: writer::Shared,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Arc<Readers>,
    commits: watch::Sender<u64>,
    // Dropping it stops the foreign-commit watcher.
    _watcher_stop: Option<std::sync::mpsc::Sender<()>>,
}

impl SqliteLog {
    /// Opens (creating when missing) the log in the file at `path`, migrating its schema, and
    /// starts its writer thread. Opening recovers a WAL left by a crashed process.
    pub async fn open(path: &Path, settings: Settings) -> Result<Self> {
        settings.check()?;
        let path = path.to_path_buf();
        let opened = {
            let settings = settings.clone();
            let path = path.clone();
            tokio::task::spawn_blocking(move || -> Result<(Connection, LogId)> {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                let mut conn = Connection::open(&path)?;
                schema::configure_writer(&conn, &settings)?;
                let log_id = schema::migrate(&mut conn)?;
                Ok((conn, log_id))
            })
            .await
            .map_err(|_| Error::Closed)??
        };
        let (conn, log_id) = opened;
        let (commits, _) = watch::channel(0u64);
        let doorbell = Arc::new(Doorbell::default());
        let (queue, rx) = WriterQueue::new(
            settings.queue_capacity,
            settings.queue_bytes,
            doorbell.clone(),
        );
        let (writer, writer_thread) = writer::spawn(
            conn,
            rx,
            doorbell,
            log_id,
            settings.clone(),
            commits.clone(),
        )?;
        let readers = Arc::new(Readers {
            path: path.clone(),
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(settings.readers)),
        });
        let watcher_stop = match settings.foreign_commit_poll {
            Some(interval) => Some(spawn_watcher(path, interval, commits.clone())?),
            None => None,
        };
        tracing::debug!(%log_id, "sqlite event log open");
        Ok(Self {
            log_id,
            settings,
            queue,
            writer,
            writer_thread: Mutex::new(Some(writer_thread)),
            readers,
            commits,
            _watcher_stop: watcher_stop,
        })
    }
}

#[async_trait]
impl EventLog for SqliteLog {
    fn log_id(&self) -> LogId {
        self.log_id
    }

    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn max_record_bytes(&self) -> usize {
        self.settings.max_record_bytes
    }

    async fn append(
        &self,
        thread: &ThreadId,
        expected: Expected,
        events: Vec<NewEvent>,
    ) -> Result<Appended> {
        let (request, answer) =
            new_append(thread, expected, events, self.settings.max_record_bytes)?;
        self.queue.push_append(request).await?;
        self.writer.append(answer).await
    }

    async fn read(&self, thread: &ThreadId, after: After, limit: usize) -> Result<Page> {
        check_limit(limit)?;
        let first = first_wanted(self.log_id, after)?;
        let thread = thread.clone();
        self.readers
            .with(move |conn| read_page(conn, &thread, first, limit))
            .await
    }

    fn commits(&self) -> watch::Receiver<u64> {
        self.commits.subscribe()
    }

    async fn thread(&self, thread: &ThreadId) -> Result<Option<ThreadInfo>> {
        let thread = thread.clone();
        self.readers
            .with(move |conn| {
                conn.query_row(
                    &format!(
                        "SELECT {} FROM aw_threads t WHERE t.thread = ?1",
                        *THREAD_INFO
                    ),
                    [thread.as_str()],
                    thread_info_row,
                )
                .optional()?
                .transpose()
            })
            .await
    }

    async fn threads(&self, after: Option<&ThreadId>, limit: usize) -> Result<Vec<ThreadInfo>> {
        check_limit(limit)?;
        let after = after.map(|t| t.as_str().to_string());
        self.readers
            .with(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {} FROM aw_threads t
                     WHERE ?1 IS NULL OR t.thread > ?1 ORDER BY t.thread LIMIT ?2",
                    *THREAD_INFO
                ))?;
                let rows = stmt.query_map(params![after, limit as i64], thread_info_row)?;
                let mut out = Vec::new();
                for row in rows {
                    out.push(row??);
                }
                Ok(out)
            })
            .await
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        retention: &Retention,
        now: SystemTime,
    ) -> Result<Trimmed> {
        self.queue.trim(thread, retention, now).await
    }

    async fn put_checkpoint(&self, thread: &ThreadId, checkpoint: Checkpoint) -> Result<()> {
        self.queue.put_checkpoint(thread, checkpoint).await
    }

    async fn checkpoint(&self, thread: &ThreadId) -> Result<Option<Checkpoint>> {
        let thread = thread.clone();
        self.readers
            .with(move |conn| {
                conn.query_row(
                    "SELECT through, payload FROM aw_checkpoints WHERE thread = ?1",
                    [thread.as_str()],
                    |r| {
                        Ok(Checkpoint {
                            through: r.get::<_, i64>(0)? as u64,
                            payload: r.get(1)?,
                        })
                    },
                )
                .optional()
                .map_err(Error::from)
            })
            .await
    }

    async fn checkpoint_info(&self, thread: &ThreadId) -> Result<Option<CheckpointInfo>> {
        let thread = thread.clone();
        self.readers
            .with(move |conn| {
                conn.query_row(
                    "SELECT through, length(payload) FROM aw_checkpoints WHERE thread = ?1",
                    [thread.as_str()],
                    |r| {
                        Ok(CheckpointInfo {
                            through: r.get::<_, i64>(0)? as u64,
                            bytes: r.get::<_, i64>(1)? as u64,
                        })
                    },
                )
                .optional()
                .map_err(Error::from)
            })
            .await
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<bool> {
        self.queue.delete_thread(thread).await
    }

    async fn close(&self) -> Result<()> {
        self.queue.close()?;
        let handle = self.writer_thread.lock().map_err(|_| Error::Closed)?.take();
        if let Some(handle) = handle {
            tokio::task::spawn_blocking(move || handle.join())
                .await
                .map_err(|_| Error::Closed)?
                .map_err(|_| Error::Closed)?;
        }
        Ok(())
    }
}

pub(crate) fn check_limit(limit: usize) -> Result<()> {
    if limit == 0 || limit > MAX_PAGE_EVENTS {
        return Err(Error::InvalidLimit {
            limit,
            max: MAX_PAGE_EVENTS,
        });
    }
    Ok(())
}

/// A thread's bounds and size as [`thread_info_row`] reads them, its row's tail included.
static THREAD_INFO: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("t.thread, t.low_seq, {NEXT_SEQ}, {BYTES}, t.deleted"));

fn thread_info_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<ThreadInfo>> {
    let thread: String = row.get(0)?;
    let low: i64 = row.get(1)?;
    let next: i64 = row.get(2)?;
    let bytes: i64 = row.get(3)?;
    let deleted: i64 = row.get(4)?;
    Ok(ThreadId::new(thread).map(|thread| ThreadInfo {
        thread,
        low_watermark: low as u64,
        next_seq: next as u64,
        records: (next - low).max(0) as u64,
        bytes: bytes.max(0) as u64,
        deleted: deleted != 0,
    }))
}

/// One page in one short read transaction, so the bounds and the events agree.
fn read_page(conn: &Connection, thread: &ThreadId, first: u64, limit: usize) -> Result<Page> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    let result = read_page_in_tx(conn, thread, first, limit);
    // A read transaction has nothing to keep; ending it lets checkpoints move past it.
    conn.prepare_cached("COMMIT")?.execute([])?;
    result
}

fn read_page_in_tx(conn: &Connection, thread: &ThreadId, first: u64, limit: usize) -> Result<Page> {
    let bounds: Option<(i64, i64, i64)> = conn
        .prepare_cached(&format!(
            "SELECT t.low_seq, {NEXT_SEQ}, t.deleted FROM aw_threads t WHERE t.thread = ?1"
        ))?
        .query_row([thread.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (low, next) = match bounds {
        None => (0, 0),
        Some((_, _, deleted)) if deleted != 0 => {
            return Err(Error::ThreadDeleted {
                thread: thread.to_string(),
            });
        }
        Some((low, next, _)) => (low as u64, next as u64),
    };
    check_read_bounds(thread, first, low, next)?;
    let mut events = Vec::with_capacity(limit.min(next.saturating_sub(first) as usize));
    if first < next {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, event_id, kind, committed_at, payload FROM aw_events
             WHERE thread = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
        )?;
        let mut rows = stmt.query(params![thread.as_str(), first as i64, limit as i64])?;
        let mut bytes = 0usize;
        let mut expect = first;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            // Read in place: the id is copied into the `Uuid`, never into a buffer of its own.
            let corrupt = |e: &dyn std::fmt::Display| Error::Corrupt {
                reason: format!("event id of {thread}/{seq}: {e}"),
            };
            let id = row.get_ref(1)?.as_blob().map_err(|e| corrupt(&e))?;
            let event = StoredEvent {
                seq: seq as u64,
                event_id: Uuid::from_slice(id).map_err(|e| corrupt(&e))?,
                kind: row.get(2)?,
                committed_at_ms: row.get(3)?,
                payload: row.get(4)?,
            };
            if event.seq != expect {
                return Err(Error::Corrupt {
                    reason: format!("thread {thread} has a gap at sequence {expect}"),
                });
            }
            expect += 1;
            bytes += event.record_size();
            events.push(event);
            if bytes >= MAX_PAGE_BYTES {
                break;
            }
        }
    }
    Ok(Page {
        events,
        next_seq: next,
        low_watermark: low,
    })
}

/// Read-only connections, opened on demand up to the `readers` setting and kept for reuse.
#[derive(Debug)]
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// One per connection in use: held by the blocking task that uses it, not by the caller's
    /// future, so a caller that stops waiting does not let another connection open while its
    /// read still runs.
    permits: Arc<Semaphore>,
}

impl Readers {
    async fn with<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| Error::Closed)?;
        let pool = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = pool.idle.lock().ok().and_then(|mut idle| idle.pop());
            let conn = match conn {
                Some(conn) => conn,
                None => open_reader(&pool.path)?,
            };
            let result = f(&conn);
            // A connection left inside a transaction by a failed statement is not reused.
            if conn.is_autocommit()
                && let Ok(mut idle) = pool.idle.lock()
            {
                idle.push(conn);
            }
            result
        })
        .await;
        result.map_err(|_| Error::Closed)?
    }
}

fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    schema::configure_reader(&conn)?;
    Ok(conn)
}

/// Wakes tails when another process commits to the same file: SQLite's `data_version` changes
/// on every commit made through another connection.
fn spawn_watcher(
    path: PathBuf,
    interval: std::time::Duration,
    commits: watch::Sender<u64>,
) -> Result<std::sync::mpsc::Sender<()>> {
    let conn = open_reader(&path)?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("agentwire-events-sqlite-watch".into())
        .spawn(move || {
            let version = |conn: &Connection| -> Option<i64> {
                conn.query_row("PRAGMA data_version", [], |r| r.get(0)).ok()
            };
            let mut last = version(&conn);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(interval)
            {
                if commits.receiver_count() == 0 {
                    continue;
                }
                let now = version(&conn);
                if now != last {
                    last = now;
                    commits.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
        })?;
    Ok(stop)
}

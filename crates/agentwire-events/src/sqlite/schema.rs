//! The SQLite schema and its versioned migrations (`PRAGMA user_version`), and the connection
//! settings of the writer and the readers.

use rusqlite::{Connection, OptionalExtension};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::limits::SQLITE_BUSY_TIMEOUT;
use crate::settings::{Settings, Synchronous};
use crate::types::LogId;

/// Migrations in order; the schema version of a store is the number of them applied.
const MIGRATIONS: &[&str] = &[
    // 1: the meta table (the log id), threads with their bounds, events keyed by (thread, seq).
    "CREATE TABLE aw_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE aw_threads (
        thread TEXT PRIMARY KEY,
        next_seq INTEGER NOT NULL,
        low_seq INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE aw_events (
        thread TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_id BLOB NOT NULL,
        kind TEXT NOT NULL,
        committed_at INTEGER NOT NULL,
        size INTEGER NOT NULL,
        payload BLOB NOT NULL,
        PRIMARY KEY (thread, seq)
    );",
    // 2: one checkpoint per thread (the state through a position), outside retention.
    "CREATE TABLE aw_checkpoints (
        thread TEXT PRIMARY KEY,
        through INTEGER NOT NULL,
        payload BLOB NOT NULL
    );",
    // 3: thread rows settled lazily: a row's `next_seq` and `bytes` leave out the thread's
    // tail, its events at or after `next_seq` (see `NEXT_SEQ` and `BYTES`). Rows written before
    // have no tail, so nothing moves; the version keeps older builds, which read rows as exact,
    // away from the file.
    "INSERT OR REPLACE INTO aw_meta (key, value) VALUES ('thread_rows', 'settled lazily');",
];

/// A thread row's next sequence (the row is `t`): past the last event of its tail, or its
/// `next_seq` when the tail is empty. One step down the primary key's index.
pub(crate) const NEXT_SEQ: &str = "COALESCE((SELECT e.seq + 1 FROM aw_events e
    WHERE e.thread = t.thread AND e.seq >= t.next_seq ORDER BY e.seq DESC LIMIT 1), t.next_seq)";

/// A thread row's bytes (the row is `t`), its tail's included.
pub(crate) const BYTES: &str = "t.bytes + COALESCE((SELECT SUM(e.size) FROM aw_events e
    WHERE e.thread = t.thread AND e.seq >= t.next_seq), 0)";

/// How many events a thread row's tail holds (the row is `t`).
pub(crate) const TAIL_EVENTS: &str =
    "(SELECT COUNT(*) FROM aw_events e WHERE e.thread = t.thread AND e.seq >= t.next_seq)";

/// The schema version this build writes.
pub const SQLITE_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Sets the writer's pragmas: WAL, the chosen `synchronous`, bounded checkpoints.
pub(crate) fn configure_writer(conn: &Connection, settings: &Settings) -> Result<()> {
    conn.busy_timeout(SQLITE_BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Corrupt {
            reason: format!("journal_mode WAL was refused (the store is in {mode} mode)"),
        });
    }
    let sync = match settings.synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync};
         PRAGMA wal_autocheckpoint = {};
         PRAGMA journal_size_limit = {};
         PRAGMA foreign_keys = OFF;",
        settings.wal_autocheckpoint_pages, settings.journal_size_limit
    ))?;
    Ok(())
}

/// Sets a reader's pragmas.
pub(crate) fn configure_reader(conn: &Connection) -> Result<()> {
    conn.busy_timeout(SQLITE_BUSY_TIMEOUT)?;
    Ok(())
}

/// Brings the store to [`SQLITE_SCHEMA_VERSION`], creating the log id on first creation, and
/// returns the log id. Each migration runs in its own immediate transaction, so two processes
/// opening a new file at once do not both apply it.
pub(crate) fn migrate(conn: &mut Connection) -> Result<LogId> {
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SQLITE_SCHEMA_VERSION {
            return Err(Error::SchemaTooNew {
                found: version,
                supported: SQLITE_SCHEMA_VERSION,
            });
        }
        if version == SQLITE_SCHEMA_VERSION {
            tx.commit()?;
            break;
        }
        let Some(step) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Err(Error::Corrupt {
                reason: format!("negative schema version {version}"),
            });
        };
        tx.execute_batch(step)?;
        if version == 0 {
            tx.execute(
                "INSERT INTO aw_meta (key, value) VALUES ('log_id', ?1)",
                [Uuid::new_v4().hyphenated().to_string()],
            )?;
        }
        tx.execute_batch(&format!("PRAGMA user_version = {}", version + 1))?;
        tx.commit()?;
    }
    read_log_id(conn)
}

/// Reads the log id of a migrated store.
pub(crate) fn read_log_id(conn: &Connection) -> Result<LogId> {
    let text: Option<String> = conn
        .query_row("SELECT value FROM aw_meta WHERE key = 'log_id'", [], |r| {
            r.get(0)
        })
        .optional()?;
    let text = text.ok_or_else(|| Error::Corrupt {
        reason: "aw_meta has no log_id".into(),
    })?;
    Uuid::parse_str(&text)
        .map(LogId)
        .map_err(|e| Error::Corrupt {
            reason: format!("log_id {text:?} is not a UUID: {e}"),
        })
}

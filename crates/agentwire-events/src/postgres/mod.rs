//! The PostgreSQL engine, for several runtime instances on several machines: a writer's queue
//! whose appends are group-committed (one statement for the whole batch, with the notification;
//! `aw_append` calls for the appends it leaves) by an appender that finds the queue free, on its
//! own task and the appenders' connection, or else by the writer's thread on a connection of its
//! own; a read pool, a connection that writes checkpoints beside the writer, and, while anything
//! follows the log's commits, a listener connection that wakes tails.
//!
//! This module holds the `PostgresLog` (opening, the reads; the queue to the writer is the
//! crate's `queue.rs`); `writer.rs` is the writer and its group commit, `transactions.rs` the
//! other transactions (retention trims and deletions, run by the writer; checkpoints, run on
//! their own connection), `listen.rs` the listener, `schema.rs` the migrations.

mod listen;
mod schema;
mod transactions;
mod writer;

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{Notify, oneshot, watch};
use tokio_postgres::{Client, NoTls};

use crate::error::{Error, Result};
use crate::limits::{MAX_CHECKPOINT_BYTES, MAX_PAGE_BYTES};
use crate::queue::{Doorbell, WriterQueue, new_append};
use crate::settings::Settings;
use crate::sqlite::check_limit;
use crate::types::{
    After, Appended, Backend, Checkpoint, CheckpointInfo, Expected, LogId, NewEvent, Page,
    Retention, StoredEvent, ThreadId, ThreadInfo, Trimmed, check_checkpoint, check_read_bounds,
    first_wanted,
};
use crate::{EventLog, FinishOnDrop};
use listen::listen;

pub use schema::POSTGRES_SCHEMA_VERSION;
pub use writer::one_event_sql;

/// The channel every commit notifies once; listeners re-read from their own positions.
const CHANNEL: &str = "agentwire_events";

/// A log in one PostgreSQL database.
#[derive(Debug)]
pub struct PostgresLog {
    log_id: LogId,
    settings: Settings,
    pool: Pool,
    /// One connection that writes checkpoints, beside the writer's appends.
    checkpoints: Pool,
    queue: WriterQueue,
    /// The writer's queue, taken by appenders that find it free.
    shared: Arc<writer::Shared>,
    writer: Mutex<Option<writer::Stopped>>,
    commits: watch::Sender<u64>,
    /// Told when something subscribes to `commits`, so the listener starts listening.
    followed: Arc<Notify>,
    // Dropping it stops the listener task.
    _listener_stop: oneshot::Sender<()>,
}

/// How long connecting to the server may take, unless the store URL says (`connect_timeout`).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long what a connection sent may go unacknowledged by the server's machine before the
/// connection is given up, unless the store URL says (`tcp_user_timeout`): a server gone
/// without closing its connections (its machine down, the network cut) fails the statement in
/// flight (a commit's outcome is then unknown) instead of holding the writer for the kernel's
/// retransmissions, about a quarter of an hour. A statement that runs long is not affected.
const TCP_USER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `config` for the connections of `role`: named `agentwire {role}` in `pg_stat_activity` (the
/// log's writer, appenders, readers, checkpoints, listener, migration), connected within
/// [`CONNECT_TIMEOUT`] and given up after [`TCP_USER_TIMEOUT`] without acknowledgement, each
/// unless the store URL sets it.
fn for_role(config: &tokio_postgres::Config, role: &str) -> tokio_postgres::Config {
    let mut config = config.clone();
    if config.get_application_name().is_none() {
        config.application_name(format!("agentwire {role}"));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    config
}

async fn connect(config: &tokio_postgres::Config) -> Result<Client> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::warn!(error = %err, "postgres connection ended");
        }
    });
    client.batch_execute("SET synchronous_commit = on").await?;
    Ok(client)
}

impl PostgresLog {
    /// Connects to the database `url` names, creating or migrating the log's tables.
    pub async fn connect(url: &str, settings: Settings) -> Result<Self> {
        settings.check()?;
        let config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| Error::InvalidUrl {
                    url: url.to_string(),
                    reason: e.to_string(),
                })?;
        let mut client = connect(&for_role(&config, "migration")).await?;
        let log_id = schema::migrate(&mut client).await?;
        drop(client);
        let pool = new_pool(&for_role(&config, "reader"), settings.readers)?;
        // Checkpoints queue on a connection of their own, so a page read never waits for one.
        let checkpoints = new_pool(&for_role(&config, "checkpoints"), 1)?;
        let (commits, _) = watch::channel(0u64);
        let doorbell = Arc::new(Doorbell::default());
        let (queue, rx) = WriterQueue::new(
            settings.queue_capacity,
            settings.queue_bytes,
            doorbell.clone(),
        );
        let (shared, writer) = writer::spawn(
            config.clone(),
            rx,
            doorbell,
            log_id,
            settings.clone(),
            commits.clone(),
        )
        .await?;
        let (stop, stopped) = oneshot::channel();
        let followed = Arc::new(Notify::new());
        tokio::spawn(listen(
            for_role(&config, "listener"),
            commits.clone(),
            Arc::clone(&followed),
            stopped,
        ));
        tracing::debug!(%log_id, "postgres event log open");
        Ok(Self {
            log_id,
            settings,
            pool,
            checkpoints,
            queue,
            shared,
            writer: Mutex::new(Some(writer)),
            commits,
            followed,
            _listener_stop: stop,
        })
    }

    async fn reader(&self) -> Result<deadpool_postgres::Object> {
        connection(&self.pool).await
    }
}

/// A pool of at most `size` connections to `config`.
fn new_pool(config: &tokio_postgres::Config, size: usize) -> Result<Pool> {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .build()
        .map_err(|e| Error::Pool {
            reason: e.to_string(),
        })
}

/// A connection of `pool`, once one is free.
async fn connection(pool: &Pool) -> Result<deadpool_postgres::Object> {
    pool.get().await.map_err(|e| match e {
        deadpool_postgres::PoolError::Backend(e) => Error::Postgres(e),
        deadpool_postgres::PoolError::Closed => Error::Closed,
        other => Error::Pool {
            reason: other.to_string(),
        },
    })
}

#[async_trait]
impl EventLog for PostgresLog {
    fn log_id(&self) -> LogId {
        self.log_id
    }

    fn backend(&self) -> Backend {
        Backend::Postgres
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
        FinishOnDrop::new(Arc::clone(&self.shared).append(answer)).await
    }

    async fn read(&self, thread: &ThreadId, after: After, limit: usize) -> Result<Page> {
        check_limit(limit)?;
        let first = first_wanted(self.log_id, after)?;
        let client = self.reader().await?;
        // One statement, so the bounds and the events come from one snapshot; the running byte
        // sum keeps a page of large records bounded.
        let stmt = client
            .prepare_cached(
                "SELECT t.low_seq, t.next_seq, t.deleted, e.seq, e.event_id, e.kind, e.committed_at, e.payload
                 FROM aw_threads t LEFT JOIN LATERAL (
                     SELECT * FROM (
                         SELECT seq, event_id, kind, committed_at, payload,
                                (SUM(size) OVER (ORDER BY seq) - size)::bigint AS before
                         FROM aw_events WHERE thread = t.thread AND seq >= $2
                         ORDER BY seq LIMIT $3
                     ) w WHERE w.before < $4
                 ) e ON true
                 WHERE t.thread = $1
                 ORDER BY e.seq",
            )
            .await?;
        let rows = client
            .query(
                &stmt,
                &[
                    &thread.as_str(),
                    &(first as i64),
                    &(limit as i64),
                    &(MAX_PAGE_BYTES as i64),
                ],
            )
            .await?;
        let Some(head) = rows.first() else {
            check_read_bounds(thread, first, 0, 0)?;
            return Ok(Page {
                events: Vec::new(),
                next_seq: 0,
                low_watermark: 0,
            });
        };
        let low = head.get::<_, i64>(0) as u64;
        let next = head.get::<_, i64>(1) as u64;
        if head.get::<_, bool>(2) {
            return Err(Error::ThreadDeleted {
                thread: thread.to_string(),
            });
        }
        check_read_bounds(thread, first, low, next)?;
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(seq) = row.get::<_, Option<i64>>(3) else {
                continue;
            };
            let seq = seq as u64;
            if seq != first + events.len() as u64 {
                return Err(Error::Corrupt {
                    reason: format!(
                        "thread {thread} has a gap at sequence {}",
                        first + events.len() as u64
                    ),
                });
            }
            events.push(StoredEvent {
                seq,
                event_id: row.get(4),
                kind: row.get(5),
                committed_at_ms: row.get(6),
                payload: row.get(7),
            });
        }
        Ok(Page {
            events,
            next_seq: next,
            low_watermark: low,
        })
    }

    /// Subscribing starts the listener: an instance listens for other instances' commits only
    /// while something follows them.
    fn commits(&self) -> watch::Receiver<u64> {
        let commits = self.commits.subscribe();
        self.followed.notify_one();
        commits
    }

    async fn thread(&self, thread: &ThreadId) -> Result<Option<ThreadInfo>> {
        let client = self.reader().await?;
        let row = client
            .query_opt(
                "SELECT thread, low_seq, next_seq, bytes, deleted FROM aw_threads WHERE thread = $1",
                &[&thread.as_str()],
            )
            .await?;
        row.map(|r| thread_info_row(&r)).transpose()
    }

    async fn threads(&self, after: Option<&ThreadId>, limit: usize) -> Result<Vec<ThreadInfo>> {
        check_limit(limit)?;
        let client = self.reader().await?;
        let after = after.map(ThreadId::as_str);
        let rows = client
            .query(
                "SELECT thread, low_seq, next_seq, bytes, deleted FROM aw_threads
                 WHERE $1::text IS NULL OR thread > $1 ORDER BY thread LIMIT $2",
                &[&after, &(limit as i64)],
            )
            .await?;
        rows.iter().map(thread_info_row).collect()
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        retention: &Retention,
        now: SystemTime,
    ) -> Result<Trimmed> {
        self.queue.trim(thread, retention, now).await
    }

    /// Written on a connection of its own, beside the writer's appends: a checkpoint is a
    /// thread's whole state, and the group commit would otherwise wait for it.
    async fn put_checkpoint(&self, thread: &ThreadId, checkpoint: Checkpoint) -> Result<()> {
        check_checkpoint(&checkpoint, MAX_CHECKPOINT_BYTES)?;
        let mut client = connection(&self.checkpoints).await?;
        transactions::put_checkpoint(&mut client, thread, &checkpoint).await
    }

    async fn checkpoint(&self, thread: &ThreadId) -> Result<Option<Checkpoint>> {
        let client = self.reader().await?;
        let row = client
            .query_opt(
                "SELECT through, payload FROM aw_checkpoints WHERE thread = $1",
                &[&thread.as_str()],
            )
            .await?;
        Ok(row.map(|r| Checkpoint {
            through: r.get::<_, i64>(0) as u64,
            payload: r.get(1),
        }))
    }

    async fn checkpoint_info(&self, thread: &ThreadId) -> Result<Option<CheckpointInfo>> {
        let client = self.reader().await?;
        let row = client
            .query_opt(
                "SELECT through, octet_length(payload)::int8 FROM aw_checkpoints WHERE thread = $1",
                &[&thread.as_str()],
            )
            .await?;
        Ok(row.map(|r| CheckpointInfo {
            through: r.get::<_, i64>(0) as u64,
            bytes: r.get::<_, i64>(1) as u64,
        }))
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<bool> {
        self.queue.delete_thread(thread).await
    }

    async fn close(&self) -> Result<()> {
        self.queue.close()?;
        let handle = self.writer.lock().map_err(|_| Error::Closed)?.take();
        if let Some(handle) = handle {
            handle.await.map_err(|_| Error::Closed)?;
        }
        self.pool.close();
        self.checkpoints.close();
        Ok(())
    }
}

fn thread_info_row(row: &tokio_postgres::Row) -> Result<ThreadInfo> {
    let low: i64 = row.get(1);
    let next: i64 = row.get(2);
    let bytes: i64 = row.get(3);
    Ok(ThreadInfo {
        thread: ThreadId::new(row.get::<_, String>(0))?,
        low_watermark: low as u64,
        next_seq: next as u64,
        records: (next - low).max(0) as u64,
        bytes: bytes.max(0) as u64,
        deleted: row.get(4),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{CONNECT_TIMEOUT, TCP_USER_TIMEOUT, for_role};

    /// Every connection is named by its role and bounded in how long connecting and an
    /// unacknowledged send may take, each unless the store URL says otherwise.
    #[test]
    fn connections_are_named_and_bounded_unless_the_url_says_otherwise() {
        let plain: tokio_postgres::Config = "postgres://u@localhost/db".parse().unwrap();
        let writer = for_role(&plain, "writer");
        assert_eq!(writer.get_application_name(), Some("agentwire writer"));
        assert_eq!(writer.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(writer.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
        let set: tokio_postgres::Config =
            "postgres://u@localhost/db?application_name=mine&connect_timeout=3&tcp_user_timeout=5"
                .parse()
                .unwrap();
        let writer = for_role(&set, "writer");
        assert_eq!(writer.get_application_name(), Some("mine"));
        assert_eq!(writer.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(writer.get_tcp_user_timeout(), Some(&Duration::from_secs(5)));
    }
}

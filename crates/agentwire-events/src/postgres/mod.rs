//! The PostgreSQL engine, for several runtime instances on several machines: a writer task that
//! group-commits appends (BEGIN, the `aw_append` calls, one coalesced NOTIFY and COMMIT
//! pipelined in one round trip), a read pool, and a listener connection that wakes tails.

mod schema;

use std::sync::{Mutex, RwLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::{AsyncMessage, Client, NoTls};
use uuid::Uuid;

use crate::EventLog;
use crate::error::{Error, Result};
use crate::limits::{MAX_CHECKPOINT_BYTES, MAX_PAGE_BYTES};
use crate::retention::{age_cutoff_ms, new_low_watermark};
use crate::settings::Settings;
use crate::sqlite::check_limit;
use crate::types::{
    After, Appended, Backend, Checkpoint, CheckpointInfo, Expected, LogId, NewEvent, Page,
    Retention, StoredEvent, ThreadId, ThreadInfo, Trimmed, check_append, check_checkpoint,
    check_checkpoint_position, check_read_bounds, first_wanted,
};

pub use schema::POSTGRES_SCHEMA_VERSION;

/// The channel every commit notifies once; listeners re-read from their own positions.
const CHANNEL: &str = "agentwire_events";
/// How long the listener waits before reconnecting after its connection dropped.
const LISTEN_RECONNECT_DELAY: Duration = Duration::from_millis(500);

const APPEND_SQL: &str =
    "SELECT status, first_seq, actual, at FROM aw_append($1, $2, $3, $4, $5, $6)";

/// A log in one PostgreSQL database.
#[derive(Debug)]
pub struct PostgresLog {
    log_id: LogId,
    settings: Settings,
    pool: Pool,
    queue: RwLock<Option<mpsc::Sender<Command>>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    commits: watch::Sender<u64>,
    // Dropping it stops the listener task.
    _listener_stop: oneshot::Sender<()>,
}

#[derive(Debug)]
enum Command {
    Append(AppendRequest),
    Trim {
        thread: ThreadId,
        retention: Retention,
        now: SystemTime,
        reply: oneshot::Sender<Result<Trimmed>>,
    },
    Delete {
        thread: ThreadId,
        reply: oneshot::Sender<Result<bool>>,
    },
    Checkpoint {
        thread: ThreadId,
        checkpoint: Checkpoint,
        reply: oneshot::Sender<Result<()>>,
    },
}

#[derive(Debug)]
struct AppendRequest {
    thread: ThreadId,
    expected: Expected,
    events: Vec<NewEvent>,
    ids: Vec<Uuid>,
    bytes: usize,
    reply: oneshot::Sender<Result<Appended>>,
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
        let mut client = connect(&config).await?;
        let log_id = schema::migrate(&mut client).await?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.readers)
            .build()
            .map_err(|e| Error::Pool {
                reason: e.to_string(),
            })?;
        let (commits, _) = watch::channel(0u64);
        let (tx, rx) = mpsc::channel(settings.queue_capacity);
        let writer = Writer {
            client,
            append: None,
            config: config.clone(),
            log_id,
            settings: settings.clone(),
            commits: commits.clone(),
        };
        let writer = tokio::spawn(writer.run(rx));
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(listen(config, commits.clone(), stopped));
        tracing::debug!(%log_id, "postgres event log open");
        Ok(Self {
            log_id,
            settings,
            pool,
            queue: RwLock::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            commits,
            _listener_stop: stop,
        })
    }

    fn sender(&self) -> Result<mpsc::Sender<Command>> {
        self.queue
            .read()
            .map_err(|_| Error::Closed)?
            .clone()
            .ok_or(Error::Closed)
    }

    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        self.sender()?
            .send(make(reply))
            .await
            .map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    async fn reader(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => Error::Postgres(e),
            other => Error::Pool {
                reason: other.to_string(),
            },
        })
    }
}

#[async_trait]
impl EventLog for PostgresLog {
    fn log_id(&self) -> LogId {
        self.log_id
    }

    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn append(
        &self,
        thread: &ThreadId,
        expected: Expected,
        events: Vec<NewEvent>,
    ) -> Result<Appended> {
        let bytes = check_append(&events, self.settings.max_record_bytes)?;
        let ids = events
            .iter()
            .map(|e| e.event_id.unwrap_or_else(Uuid::new_v4))
            .collect();
        let thread = thread.clone();
        self.call(|reply| {
            Command::Append(AppendRequest {
                thread,
                expected,
                events,
                ids,
                bytes,
                reply,
            })
        })
        .await
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

    fn commits(&self) -> watch::Receiver<u64> {
        self.commits.subscribe()
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
        let thread = thread.clone();
        let retention = *retention;
        self.call(|reply| Command::Trim {
            thread,
            retention,
            now,
            reply,
        })
        .await
    }

    async fn put_checkpoint(&self, thread: &ThreadId, checkpoint: Checkpoint) -> Result<()> {
        check_checkpoint(&checkpoint, MAX_CHECKPOINT_BYTES)?;
        let thread = thread.clone();
        self.call(|reply| Command::Checkpoint {
            thread,
            checkpoint,
            reply,
        })
        .await
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
        let thread = thread.clone();
        self.call(|reply| Command::Delete { thread, reply }).await
    }

    async fn close(&self) -> Result<()> {
        let sender = self.queue.write().map_err(|_| Error::Closed)?.take();
        drop(sender);
        let handle = self.writer.lock().map_err(|_| Error::Closed)?.take();
        if let Some(handle) = handle {
            handle.await.map_err(|_| Error::Closed)?;
        }
        self.pool.close();
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

struct Writer {
    client: Client,
    // The prepared append statement of the current connection.
    append: Option<tokio_postgres::Statement>,
    config: tokio_postgres::Config,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        let mut held: Option<Command> = None;
        loop {
            let command = match held.take() {
                Some(command) => command,
                None => match queue.recv().await {
                    Some(command) => command,
                    None => break,
                },
            };
            if self.client.is_closed() {
                match connect(&self.config).await {
                    Ok(client) => {
                        self.client = client;
                        self.append = None;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "postgres writer cannot reconnect");
                        fail(command, &err);
                        continue;
                    }
                }
            }
            match command {
                Command::Append(first) => {
                    let mut batch_bytes = first.bytes;
                    let mut batch = vec![first];
                    while batch.len() < self.settings.max_batch_appends
                        && batch_bytes < self.settings.max_batch_bytes
                    {
                        match queue.try_recv() {
                            Ok(Command::Append(next)) => {
                                batch_bytes += next.bytes;
                                batch.push(next);
                            }
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.commit_batch(batch).await;
                }
                Command::Trim {
                    thread,
                    retention,
                    now,
                    reply,
                } => {
                    let result = trim(&mut self.client, &thread, &retention, now).await;
                    let _ = reply.send(result);
                }
                Command::Checkpoint {
                    thread,
                    checkpoint,
                    reply,
                } => {
                    let result = put_checkpoint(&mut self.client, &thread, &checkpoint).await;
                    let _ = reply.send(result);
                }
                Command::Delete { thread, reply } => {
                    let result = delete(&mut self.client, &thread).await;
                    if matches!(result, Ok(true)) {
                        self.commits.send_modify(|n| *n = n.wrapping_add(1));
                    }
                    let _ = reply.send(result);
                }
            }
        }
        tracing::debug!(log_id = %self.log_id, "postgres writer stopped");
    }

    /// One group commit: the batch's `aw_append` calls pipelined in one transaction (in thread
    /// order, so instances lock thread rows in the same order and never deadlock), one NOTIFY
    /// and `COMMIT`, all in one flight, then the acknowledgements.
    async fn commit_batch(&mut self, batch: Vec<AppendRequest>) {
        let result = self.run_batch(&batch).await;
        match result {
            Ok(results) => {
                if results.iter().any(Result::is_ok) {
                    self.commits.send_modify(|n| *n = n.wrapping_add(1));
                }
                for (request, result) in batch.into_iter().zip(results) {
                    let _ = request.reply.send(result);
                }
            }
            Err(BatchError::Failed(err)) => {
                tracing::warn!(error = %err, "postgres group commit failed");
                for request in batch {
                    let _ = request.reply.send(Err(copy_error(&err)));
                }
            }
            Err(BatchError::Unknown(reason)) => {
                tracing::warn!(%reason, "postgres group commit outcome unknown");
                for request in batch {
                    let _ = request.reply.send(Err(Error::CommitOutcomeUnknown {
                        reason: reason.clone(),
                    }));
                }
            }
        }
    }

    async fn run_batch(
        &mut self,
        batch: &[AppendRequest],
    ) -> Result<Vec<Result<Appended>>, BatchError> {
        let stmt = match &self.append {
            Some(stmt) => stmt.clone(),
            None => {
                let stmt = self
                    .client
                    .prepare(APPEND_SQL)
                    .await
                    .map_err(BatchError::Failed)?;
                self.append = Some(stmt.clone());
                stmt
            }
        };
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by(|&a, &b| batch[a].thread.cmp(&batch[b].thread));
        let client = &self.client;
        // BEGIN, the appends, the NOTIFY and COMMIT go out in one flight: requests are sent in
        // the order the futures are first polled, and each append decides its own conflict, so
        // none of them aborts the transaction on purpose.
        let begin = client.batch_execute("BEGIN");
        let calls = order.iter().map(|&i| {
            let request = &batch[i];
            let stmt = &stmt;
            async move {
                let expected: i64 = match request.expected {
                    Expected::Any => -1,
                    Expected::Next(n) => n as i64,
                };
                let kinds: Vec<&str> = request.events.iter().map(|e| e.kind.as_str()).collect();
                let sizes: Vec<i64> = request
                    .events
                    .iter()
                    .map(|e| e.record_size() as i64)
                    .collect();
                let payloads: Vec<&[u8]> = request
                    .events
                    .iter()
                    .map(|e| e.payload.as_slice())
                    .collect();
                client
                    .query_one(
                        stmt,
                        &[
                            &request.thread.as_str(),
                            &expected,
                            &request.ids,
                            &kinds,
                            &sizes,
                            &payloads,
                        ],
                    )
                    .await
            }
        });
        let notify_sql = format!("SELECT pg_notify('{CHANNEL}', '')");
        let notify = client.batch_execute(&notify_sql);
        let commit = client.batch_execute("COMMIT");
        let (begun, rows, notified, committed) = futures_util::future::join4(
            begin,
            futures_util::future::join_all(calls),
            notify,
            commit,
        )
        .await;
        match committed {
            // The connection broke with COMMIT sent or about to be: it may have committed.
            Err(err) if err.as_db_error().is_none() => {
                return Err(BatchError::Unknown(err.to_string()));
            }
            // The server answered COMMIT with an error: nothing was committed.
            Err(err) => return Err(BatchError::Failed(err)),
            // COMMIT of a transaction a failed statement aborted answers ROLLBACK without an
            // error: only every statement's own success means the batch committed.
            Ok(()) => {}
        }
        begun.map_err(BatchError::Failed)?;
        notified.map_err(BatchError::Failed)?;
        let mut results: Vec<Option<Result<Appended>>> = (0..batch.len()).map(|_| None).collect();
        for (&i, row) in order.iter().zip(rows) {
            let row = row.map_err(BatchError::Failed)?;
            let request = &batch[i];
            let status: i16 = row.get(0);
            let first_seq: i64 = row.get(1);
            let actual: i64 = row.get(2);
            let at: i64 = row.get(3);
            results[i] = Some(match status {
                0 => Ok(Appended {
                    log_id: self.log_id,
                    first_seq: first_seq as u64,
                    event_ids: request.ids.clone(),
                    committed_at_ms: at,
                }),
                1 => Err(Error::Conflict {
                    thread: request.thread.to_string(),
                    expected: match request.expected {
                        Expected::Next(n) => n,
                        Expected::Any => first_seq as u64,
                    },
                    actual: actual as u64,
                }),
                _ => Err(Error::ThreadDeleted {
                    thread: request.thread.to_string(),
                }),
            });
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or(Err(Error::Closed)))
            .collect())
    }
}

enum BatchError {
    Failed(tokio_postgres::Error),
    Unknown(String),
}

/// PostgreSQL errors are not `Clone`: every append of a failed batch gets the same reason.
fn copy_error(err: &tokio_postgres::Error) -> Error {
    if err.is_closed() {
        return Error::Closed;
    }
    Error::WriteFailed {
        reason: format!("group commit failed: {err}"),
    }
}

fn fail(command: Command, err: &Error) {
    let reason = err.to_string();
    match command {
        Command::Append(request) => {
            let _ = request.reply.send(Err(Error::WriteFailed { reason }));
        }
        Command::Trim { reply, .. } => {
            let _ = reply.send(Err(Error::WriteFailed { reason }));
        }
        Command::Checkpoint { reply, .. } => {
            let _ = reply.send(Err(Error::WriteFailed { reason }));
        }
        Command::Delete { reply, .. } => {
            let _ = reply.send(Err(Error::WriteFailed { reason }));
        }
    }
}

async fn trim(
    client: &mut Client,
    thread: &ThreadId,
    retention: &Retention,
    now: SystemTime,
) -> Result<Trimmed> {
    let tx = client.transaction().await?;
    let Some(row) = tx
        .query_opt(
            "SELECT low_seq, next_seq, deleted FROM aw_threads WHERE thread = $1 FOR UPDATE",
            &[&thread.as_str()],
        )
        .await?
    else {
        tx.commit().await?;
        return Ok(Trimmed {
            thread: thread.clone(),
            removed: 0,
            low_watermark: 0,
            next_seq: 0,
        });
    };
    let low: i64 = row.get(0);
    let next: i64 = row.get(1);
    if row.get::<_, bool>(2) {
        return Err(Error::ThreadDeleted {
            thread: thread.to_string(),
        });
    }
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let bytes_cut: Option<i64> = tx
        .query_opt(
            "SELECT seq FROM (
                 SELECT seq, (SUM(size) OVER (ORDER BY seq DESC))::bigint AS suffix
                 FROM aw_events WHERE thread = $1
             ) s WHERE suffix > $2 ORDER BY seq DESC LIMIT 1",
            &[&thread.as_str(), &max_bytes],
        )
        .await?
        .map(|r| r.get(0));
    let first_young: Option<i64> = tx
        .query_one(
            "SELECT MIN(seq) FROM aw_events WHERE thread = $1 AND committed_at >= $2",
            &[&thread.as_str(), &age_cutoff_ms(retention, now)],
        )
        .await?
        .get(0);
    let cut = new_low_watermark(
        retention,
        low as u64,
        next as u64,
        bytes_cut.map(|s| s as u64 + 1),
        first_young.map(|s| s as u64),
    );
    let removed = tx
        .query_one(
            "WITH gone AS (DELETE FROM aw_events WHERE thread = $1 AND seq < $2 RETURNING size)
             SELECT COUNT(*), COALESCE(SUM(size), 0)::bigint FROM gone",
            &[&thread.as_str(), &(cut as i64)],
        )
        .await?;
    let count: i64 = removed.get(0);
    let freed: i64 = removed.get(1);
    tx.execute(
        "UPDATE aw_threads SET low_seq = $2, bytes = bytes - $3 WHERE thread = $1",
        &[&thread.as_str(), &(cut as i64), &freed],
    )
    .await?;
    tx.commit().await?;
    Ok(Trimmed {
        thread: thread.clone(),
        removed: count as u64,
        low_watermark: cut,
        next_seq: next as u64,
    })
}

async fn delete(client: &mut Client, thread: &ThreadId) -> Result<bool> {
    let tx = client.transaction().await?;
    let changed = tx
        .execute(
            "UPDATE aw_threads SET deleted = true, low_seq = next_seq, bytes = 0 WHERE thread = $1",
            &[&thread.as_str()],
        )
        .await?;
    tx.execute(
        "DELETE FROM aw_events WHERE thread = $1",
        &[&thread.as_str()],
    )
    .await?;
    tx.execute(
        "DELETE FROM aw_checkpoints WHERE thread = $1",
        &[&thread.as_str()],
    )
    .await?;
    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await?;
    tx.commit().await?;
    Ok(changed > 0)
}

async fn put_checkpoint(
    client: &mut Client,
    thread: &ThreadId,
    checkpoint: &Checkpoint,
) -> Result<()> {
    let tx = client.transaction().await?;
    // The thread's row is locked so a deletion cannot slip in between the check and the write.
    let row = tx
        .query_opt(
            "SELECT next_seq, deleted FROM aw_threads WHERE thread = $1 FOR UPDATE",
            &[&thread.as_str()],
        )
        .await?;
    let (next, deleted): (i64, bool) = row.map_or((0, false), |r| (r.get(0), r.get(1)));
    let through = check_checkpoint_position(thread, checkpoint.through, next as u64, deleted)?;
    tx.execute(
        "INSERT INTO aw_checkpoints (thread, through, payload) VALUES ($1, $2, $3)
         ON CONFLICT (thread) DO UPDATE SET through = excluded.through, payload = excluded.payload
         WHERE excluded.through > aw_checkpoints.through",
        &[&thread.as_str(), &through, &checkpoint.payload],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Keeps one connection listening on [`CHANNEL`] and bumps `commits` on every notification,
/// and once after each (re)connect, since commits may have landed while it was away.
async fn listen(
    config: tokio_postgres::Config,
    commits: watch::Sender<u64>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        let session = async {
            let (client, mut connection) = config.connect(NoTls).await?;
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            let sql = format!("LISTEN {CHANNEL}");
            let listen = client.batch_execute(&sql);
            tokio::pin!(listen);
            // The LISTEN's answer arrives through the connection, so drive both until it has.
            loop {
                tokio::select! {
                    done = &mut listen => { done?; break; }
                    message = messages.next() => match message {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(e),
                        None => return Ok(()),
                    },
                }
            }
            commits.send_modify(|n| *n = n.wrapping_add(1));
            while let Some(message) = messages.next().await {
                if let AsyncMessage::Notification(_) = message? {
                    commits.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            Ok::<(), tokio_postgres::Error>(())
        };
        tokio::select! {
            _ = &mut stop => return,
            ended = session => {
                if let Err(err) = ended {
                    tracing::debug!(error = %err, "postgres listener disconnected");
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(LISTEN_RECONNECT_DELAY) => {}
        }
    }
}

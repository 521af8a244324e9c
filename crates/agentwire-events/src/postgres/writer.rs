//! The writer: one connection that takes the queue's commands in order, reconnecting when it
//! dropped, and group-commits runs of appends (BEGIN, the `aw_append` calls in thread order, one
//! NOTIFY and COMMIT pipelined in one round trip), acknowledging each append only after the
//! outcome of its COMMIT is known.
//!
//! The writer and its connection run on a thread of their own (a one-thread tokio runtime), as
//! the SQLite writer does: the group commit is the log's one serial path, and on the host's
//! runtime, busy with the agents whose events it commits, the writer and its connection would
//! wait behind their tasks between one commit and the next.

use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::Client;

use super::transactions::{delete, put_checkpoint, trim};
use super::{CHANNEL, connect};
use crate::error::{Error, Result};
use crate::queue::{AppendRequest, Command, gather};
use crate::settings::Settings;
use crate::types::{Appended, Expected, LogId};
const APPEND_SQL: &str =
    "SELECT status, first_seq, actual, at FROM aw_append($1, $2, $3, $4, $5, $6)";

struct Writer {
    client: Client,
    // The prepared append statement of the current connection.
    append: Option<tokio_postgres::Statement>,
    config: tokio_postgres::Config,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
}

/// The writer's thread, answered once the thread stopped (its connection closed).
pub(super) type Stopped = oneshot::Receiver<()>;

/// Starts the writer's thread over `queue`: it connects to `config` and runs the queue's
/// commands until the queue closes. Answers once the writer is connected, or why it could not
/// connect.
pub(super) async fn spawn(
    config: tokio_postgres::Config,
    queue: mpsc::Receiver<Command>,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
) -> Result<Stopped> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (connected, connection) = oneshot::channel();
    let (stopped, stopped_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("agentwire-events-postgres-writer".into())
        .spawn(move || {
            runtime.block_on(async move {
                let client = match connect(&config).await {
                    Ok(client) => client,
                    Err(err) => {
                        let _ = connected.send(Err(err));
                        return;
                    }
                };
                let _ = connected.send(Ok(()));
                let writer = Writer {
                    client,
                    append: None,
                    config,
                    log_id,
                    settings,
                    commits,
                };
                writer.run(queue).await;
            });
            // The connection's task ends with the runtime.
            drop(runtime);
            let _ = stopped.send(());
        })?;
    connection.await.map_err(|_| Error::Closed)??;
    Ok(stopped_rx)
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
                        command.fail(&err);
                        continue;
                    }
                }
            }
            match command {
                Command::Append(first) => {
                    let batch;
                    (batch, held) = gather(first, &mut queue, &self.settings);
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
                // `PostgresLog` writes checkpoints on a connection of their own, beside this
                // writer; one queued here (the queue is the engines' shared one) is written the
                // same way.
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

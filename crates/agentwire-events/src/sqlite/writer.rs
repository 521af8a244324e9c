//! The SQLite writer thread: blocks for the first queued command, drains more appends up to the
//! batch budget, commits them in one `BEGIN IMMEDIATE` transaction with a savepoint per append,
//! and only then acknowledges each.

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{mpsc, watch};

use crate::error::{Error, Result};
use crate::queue::{AppendRequest, Command, gather};
use crate::retention::{age_cutoff_ms, new_low_watermark};
use crate::settings::Settings;
use crate::types::{
    Appended, Checkpoint, Expected, LogId, Retention, ThreadId, Trimmed, check_checkpoint_position,
    unix_ms,
};

pub(crate) fn spawn(
    conn: Connection,
    queue: mpsc::Receiver<Command>,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
) -> Result<std::thread::JoinHandle<()>> {
    let writer = Writer {
        conn,
        log_id,
        settings,
        commits,
    };
    Ok(std::thread::Builder::new()
        .name("agentwire-events-sqlite-writer".into())
        .spawn(move || writer.run(queue))?)
}

struct Writer {
    conn: Connection,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
}

impl Writer {
    fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        let mut held: Option<Command> = None;
        loop {
            let command = match held.take() {
                Some(command) => command,
                None => match queue.blocking_recv() {
                    Some(command) => command,
                    None => break,
                },
            };
            match command {
                Command::Append(first) => {
                    let batch;
                    (batch, held) = gather(first, &mut queue, &self.settings);
                    self.commit_batch(batch);
                }
                Command::Trim {
                    thread,
                    retention,
                    now,
                    reply,
                } => {
                    let result = self.in_transaction(|conn| trim(conn, &thread, &retention, now));
                    let _ = reply.send(result);
                }
                Command::Checkpoint {
                    thread,
                    checkpoint,
                    reply,
                } => {
                    let result =
                        self.in_transaction(|conn| put_checkpoint(conn, &thread, &checkpoint));
                    let _ = reply.send(result);
                }
                Command::Delete { thread, reply } => {
                    let result = self.in_transaction(|conn| delete(conn, &thread));
                    if matches!(result, Ok(true)) {
                        self.signal();
                    }
                    let _ = reply.send(result);
                }
            }
        }
        tracing::debug!(log_id = %self.log_id, "sqlite writer stopped");
    }

    fn signal(&self) {
        self.commits.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn in_transaction<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// One group commit. Each append runs inside its own savepoint, so a conflicting append is
    /// rolled back alone; acknowledgements go out only after `COMMIT` returned.
    fn commit_batch(&mut self, batch: Vec<AppendRequest>) {
        let now_ms = unix_ms(SystemTime::now());
        if let Err(err) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            let reason = err.to_string();
            for request in batch {
                let _ = request.reply.send(Err(Error::WriteFailed {
                    reason: reason.clone(),
                }));
            }
            return;
        }
        let mut results = Vec::with_capacity(batch.len());
        for request in &batch {
            results.push(self.append_in_savepoint(request, now_ms));
        }
        let any_written = results.iter().any(Result::is_ok);
        let commit = self.conn.execute_batch("COMMIT");
        if let Err(err) = commit {
            let _ = self.conn.execute_batch("ROLLBACK");
            tracing::warn!(error = %err, "sqlite group commit failed");
            let reason = err.to_string();
            for (request, result) in batch.into_iter().zip(results) {
                let answer = match result {
                    Ok(_) => Err(Error::WriteFailed {
                        reason: reason.clone(),
                    }),
                    Err(e) => Err(e),
                };
                let _ = request.reply.send(answer);
            }
            return;
        }
        if any_written {
            self.signal();
        }
        for (request, result) in batch.into_iter().zip(results) {
            let _ = request.reply.send(result);
        }
    }

    fn append_in_savepoint(&self, request: &AppendRequest, now_ms: i64) -> Result<Appended> {
        self.conn.prepare_cached("SAVEPOINT append")?.execute([])?;
        match append(&self.conn, self.log_id, request, now_ms) {
            Ok(appended) => {
                self.conn.prepare_cached("RELEASE append")?.execute([])?;
                Ok(appended)
            }
            Err(err) => {
                self.conn
                    .execute_batch("ROLLBACK TO append; RELEASE append")?;
                Err(err)
            }
        }
    }
}

fn append(
    conn: &Connection,
    log_id: LogId,
    request: &AppendRequest,
    now_ms: i64,
) -> Result<Appended> {
    let thread = request.thread.as_str();
    let row: Option<(i64, i64)> = conn
        .prepare_cached("SELECT next_seq, deleted FROM aw_threads WHERE thread = ?1")?
        .query_row([thread], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let next = match row {
        Some((_, deleted)) if deleted != 0 => {
            return Err(Error::ThreadDeleted {
                thread: thread.to_string(),
            });
        }
        Some((next, _)) => next as u64,
        None => {
            conn.prepare_cached(
                "INSERT INTO aw_threads (thread, next_seq, low_seq, bytes, deleted, created_at)
                 VALUES (?1, 0, 0, 0, 0, ?2)",
            )?
            .execute(params![thread, now_ms])?;
            0
        }
    };
    if let Expected::Next(expected) = request.expected
        && expected != next
    {
        return Err(Error::Conflict {
            thread: thread.to_string(),
            expected,
            actual: next,
        });
    }
    {
        let mut insert = conn.prepare_cached(
            "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for (i, (event, id)) in request.events.iter().zip(&request.ids).enumerate() {
            insert.execute(params![
                thread,
                (next + i as u64) as i64,
                id.as_bytes().as_slice(),
                event.kind,
                now_ms,
                event.record_size() as i64,
                event.payload,
            ])?;
        }
    }
    let count = request.events.len() as u64;
    conn.prepare_cached(
        "UPDATE aw_threads SET next_seq = ?2, bytes = bytes + ?3 WHERE thread = ?1",
    )?
    .execute(params![thread, (next + count) as i64, request.bytes as i64])?;
    Ok(Appended {
        log_id,
        first_seq: next,
        event_ids: request.ids.clone(),
        committed_at_ms: now_ms,
    })
}

fn trim(
    conn: &Connection,
    thread: &ThreadId,
    retention: &Retention,
    now: SystemTime,
) -> Result<Trimmed> {
    let row: Option<(i64, i64, i64)> = conn
        .query_row(
            "SELECT low_seq, next_seq, deleted FROM aw_threads WHERE thread = ?1",
            [thread.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((low, next, deleted)) = row else {
        return Ok(Trimmed {
            thread: thread.clone(),
            removed: 0,
            low_watermark: 0,
            next_seq: 0,
        });
    };
    if deleted != 0 {
        return Err(Error::ThreadDeleted {
            thread: thread.to_string(),
        });
    }
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let bytes_cut: Option<i64> = conn
        .query_row(
            "SELECT seq FROM (
             SELECT seq, SUM(size) OVER (ORDER BY seq DESC) AS suffix
             FROM aw_events WHERE thread = ?1
         ) WHERE suffix > ?2 ORDER BY seq DESC LIMIT 1",
            params![thread.as_str(), max_bytes],
            |r| r.get(0),
        )
        .optional()?;
    let first_young: Option<i64> = conn.query_row(
        "SELECT MIN(seq) FROM aw_events WHERE thread = ?1 AND committed_at >= ?2",
        params![thread.as_str(), age_cutoff_ms(retention, now)],
        |r| r.get(0),
    )?;
    let checkpoint: Option<i64> = conn
        .query_row(
            "SELECT through FROM aw_checkpoints WHERE thread = ?1",
            [thread.as_str()],
            |r| r.get(0),
        )
        .optional()?;
    let cut = new_low_watermark(
        retention,
        low as u64,
        next as u64,
        bytes_cut.map(|s| s as u64 + 1),
        first_young.map(|s| s as u64),
        checkpoint.map(|s| s as u64),
    );
    let (removed, freed): (i64, Option<i64>) = conn.query_row(
        "SELECT COUNT(*), SUM(size) FROM aw_events WHERE thread = ?1 AND seq < ?2",
        params![thread.as_str(), cut as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if removed > 0 || cut as i64 != low {
        conn.execute(
            "DELETE FROM aw_events WHERE thread = ?1 AND seq < ?2",
            params![thread.as_str(), cut as i64],
        )?;
        conn.execute(
            "UPDATE aw_threads SET low_seq = ?2, bytes = bytes - ?3 WHERE thread = ?1",
            params![thread.as_str(), cut as i64, freed.unwrap_or(0)],
        )?;
    }
    Ok(Trimmed {
        thread: thread.clone(),
        removed: removed as u64,
        low_watermark: cut,
        next_seq: next as u64,
    })
}

fn delete(conn: &Connection, thread: &ThreadId) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE aw_threads SET deleted = 1, low_seq = next_seq, bytes = 0 WHERE thread = ?1",
        [thread.as_str()],
    )?;
    conn.execute("DELETE FROM aw_events WHERE thread = ?1", [thread.as_str()])?;
    conn.execute(
        "DELETE FROM aw_checkpoints WHERE thread = ?1",
        [thread.as_str()],
    )?;
    Ok(changed > 0)
}

fn put_checkpoint(conn: &Connection, thread: &ThreadId, checkpoint: &Checkpoint) -> Result<()> {
    let bounds: Option<(i64, i64)> = conn
        .query_row(
            "SELECT next_seq, deleted FROM aw_threads WHERE thread = ?1",
            [thread.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (next, deleted): (i64, i64) = bounds.unwrap_or((0, 0));
    let through = check_checkpoint_position(thread, checkpoint.through, next as u64, deleted != 0)?;
    conn.execute(
        "INSERT INTO aw_checkpoints (thread, through, payload) VALUES (?1, ?2, ?3)
         ON CONFLICT (thread) DO UPDATE SET through = excluded.through, payload = excluded.payload
         WHERE excluded.through > aw_checkpoints.through",
        params![thread.as_str(), through, checkpoint.payload],
    )?;
    Ok(())
}

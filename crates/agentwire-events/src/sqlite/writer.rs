//! The SQLite writer: one connection and the queue of commands it runs, held by one party at a
//! time. An appender that finds it free takes it and commits on its own thread (the queued
//! appends with its own); otherwise the writer thread, woken through the queue's doorbell,
//! runs what is queued. Either way a group commit drains appends up to the batch budget,
//! commits them in one `BEGIN IMMEDIATE` transaction, and only then acknowledges each.

use std::sync::{Arc, LazyLock, Mutex, MutexGuard, TryLockError};
use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot, watch};

use super::schema::{BYTES, NEXT_SEQ, TAIL_EVENTS};
use crate::error::{Error, Result};
use crate::queue::{Answer, AppendRequest, Command, Doorbell, Next, gather, next_command};
use crate::retention::{age_cutoff_ms, stored_low_watermark};
use crate::settings::Settings;
use crate::types::{
    Appended, Checkpoint, Expected, LogId, Retention, ThreadId, Trimmed, check_checkpoint_position,
    unix_ms,
};

/// The writer and its queue, shared by the writer thread and the appenders that find it free
/// (see [`Shared::append`]); `None` once the thread stopped, which closes the connection.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    core: Arc<Mutex<Option<Core>>>,
    doorbell: Arc<Doorbell>,
}

/// What runs commands: the writer, its queue, and a command taken from the queue that is still
/// to run before the rest.
#[derive(Debug)]
struct Core {
    writer: Writer,
    queue: mpsc::Receiver<Command>,
    held: Option<Command>,
}

impl Core {
    fn next(&mut self, doorbell: &Doorbell) -> Next {
        next_command(&mut self.held, &mut self.queue, doorbell)
    }

    /// Commits `first` with the appends queued behind it (the first other command found among
    /// them is held to run next), and answers each.
    fn commit_from(&mut self, first: AppendRequest, doorbell: &Doorbell) {
        let (batch, held) = gather(first, &mut self.queue, &self.writer.settings);
        doorbell.took(batch.len() - 1 + usize::from(held.is_some()));
        self.held = held;
        self.writer.commit_batch(batch);
    }

    /// Runs `command`: an append as [`Core::commit_from`]; any other command in a transaction
    /// of its own, whose answer is returned for the writer thread to send, once the writer is
    /// let go when nothing else is pending (so that its caller, woken by it, finds the writer
    /// free for what it does next).
    fn run(&mut self, command: Command, doorbell: &Doorbell) -> Option<Reply> {
        let writer = &mut self.writer;
        match command {
            Command::Append(first) => {
                self.commit_from(first, doorbell);
                None
            }
            Command::Trim {
                thread,
                retention,
                now,
                reply,
            } => {
                let result =
                    writer.in_transaction(&thread, |conn| trim(conn, &thread, &retention, now));
                Some(self::reply(reply, result))
            }
            Command::Checkpoint {
                thread,
                checkpoint,
                reply,
                budget: _,
            } => {
                let result = writer
                    .in_transaction(&thread, |conn| put_checkpoint(conn, &thread, &checkpoint));
                Some(self::reply(reply, result))
            }
            Command::Delete { thread, reply } => {
                let result = writer.in_transaction(&thread, |conn| delete(conn, &thread));
                if matches!(result, Ok(true)) {
                    writer.signal();
                }
                Some(self::reply(reply, result))
            }
        }
    }
}

/// The answer to a trim, a checkpoint or a deletion, not sent yet (see [`Core::run`]).
type Reply = Box<dyn FnOnce() + Send>;

/// The answer `result` to the caller at `reply`, to be sent later.
fn reply<T: Send + 'static>(reply: oneshot::Sender<Result<T>>, result: Result<T>) -> Reply {
    Box::new(move || {
        let _ = reply.send(result);
    })
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Option<Core>> {
        // A panic while committing leaves the transaction's fate unknown: the next transaction
        // starts from what the file holds, with no tips remembered.
        self.core.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            if let Some(core) = guard.as_mut() {
                core.writer.tips.forget_all();
                let _ = core.writer.conn.execute_batch("ROLLBACK");
            }
            self.core.clear_poison();
            guard
        })
    }

    /// The answer to an append the caller queued, committed on the caller's thread when the
    /// writer is free: the caller takes the writer and runs what is queued, group commits of
    /// every append waiting with its own, until its own is answered. A one-event append with
    /// nothing else waiting is then one transaction on the caller's thread, as a plain SQLite
    /// connection's would be, with no hand-off to the writer thread and back (two wake-ups).
    /// When the writer is busy (its thread or another appender commits), the caller waits for
    /// its answer: whoever holds the writer rings the writer thread, after letting it go, if
    /// commands are still queued, and the thread commits them together. A command other than
    /// an append is left to the writer thread.
    pub(crate) async fn append(&self, mut answer: Answer<Appended>) -> Result<Appended> {
        match self.lead(&mut answer) {
            Some(result) => result,
            None => answer.await.map_err(|_| Error::Closed)?,
        }
    }

    /// [`Shared::append`]'s part on the caller's thread: the append's result when the caller
    /// took the writer and committed it, `None` when it is left to whoever holds the writer.
    fn lead(&self, answer: &mut Answer<Appended>) -> Option<Result<Appended>> {
        let mut guard = match self.core.try_lock() {
            Ok(guard) => guard,
            // Whoever holds the writer rings the thread once it lets go.
            Err(TryLockError::WouldBlock) => return None,
            // The thread's lock clears the poison (see `Shared::lock`).
            Err(TryLockError::Poisoned(_)) => {
                self.doorbell.ring();
                return None;
            }
        };
        let core = guard.as_mut()?;
        // A panic while this caller holds the writer leaves the lock poisoned and the queue
        // unattended: the writer thread is rung, clears the poison and runs what is queued.
        let unwinding = RingOnUnwind(&self.doorbell);
        let mut mine = None;
        loop {
            match core.next(&self.doorbell) {
                Next::Command(Command::Append(first)) => core.commit_from(first, &self.doorbell),
                Next::Command(other) => {
                    core.held = Some(other);
                    break;
                }
                Next::Empty | Next::Closed => break,
            }
            match answer.try_recv() {
                Ok(result) => {
                    mine = Some(result);
                    break;
                }
                // Dropped unanswered (a batch lost to a panic): the receiver is spent, and
                // awaiting it would panic.
                Err(oneshot::error::TryRecvError::Closed) => {
                    mine = Some(Err(Error::Closed));
                    break;
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        let held = core.held.is_some();
        drop(guard);
        drop(unwinding);
        if held || self.doorbell.waiting() {
            self.doorbell.ring();
        }
        mine
    }
}

/// Starts the writer thread over `queue`, whose commands are counted on `doorbell`.
pub(crate) fn spawn(
    conn: Connection,
    queue: mpsc::Receiver<Command>,
    doorbell: Arc<Doorbell>,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
) -> Result<(Shared, std::thread::JoinHandle<()>)> {
    let writer = Writer {
        conn,
        log_id,
        settings,
        commits,
        tips: Tips::default(),
    };
    let shared = Shared {
        core: Arc::new(Mutex::new(Some(Core {
            writer,
            queue,
            held: None,
        }))),
        doorbell,
    };
    let thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("agentwire-events-sqlite-writer".into())
            .spawn(move || run(&shared))?
    };
    shared.doorbell.answer_at(thread.thread().clone());
    Ok((shared, thread))
}

/// Rings the doorbell if dropped while its thread unwinds.
struct RingOnUnwind<'a>(&'a Doorbell);

impl Drop for RingOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.ring();
        }
    }
}

/// Stops the writer if the writer thread unwinds (a bug): the writer is dropped, which closes
/// its queue, so every caller waiting on a queued command is answered `events.closed` and every
/// later write is refused so, instead of waiting for a thread that is gone.
struct StopOnUnwind<'a>(&'a Shared);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut guard = self
                .0
                .core
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(core) = guard.take() {
                tracing::error!(log_id = %core.writer.log_id, "the sqlite writer thread panicked; the log takes no more writes");
            }
        }
    }
}

/// The writer thread: sleeps until rung, then takes the writer and runs every queued command.
/// Once the queue is closed and drained, drops the writer and so the connection.
fn run(shared: &Shared) {
    let _stop = StopOnUnwind(shared);
    loop {
        // A caller that queued a command while the writer was held counted it before it tried
        // the writer: the count is seen here, or the caller found the writer free and took it.
        // A ring after this check (for a held command, or the queue's closing) keeps `park`
        // from sleeping.
        if !shared.doorbell.waiting() {
            std::thread::park();
        }
        let reply = {
            let mut guard = shared.lock();
            let Some(core) = guard.as_mut() else {
                return;
            };
            loop {
                match core.next(&shared.doorbell) {
                    Next::Command(command) => {
                        let Some(reply) = core.run(command, &shared.doorbell) else {
                            continue;
                        };
                        // With nothing else to run, answered once the writer is let go (the
                        // caller, woken by it, finds the writer free). Otherwise answered now,
                        // and the drain goes on: it ends at an empty queue, or at a closed one,
                        // whose ring this thread may have taken already.
                        if core.held.is_none()
                            && !shared.doorbell.waiting()
                            && !core.queue.is_closed()
                        {
                            break Some(reply);
                        }
                        reply();
                    }
                    Next::Empty => break None,
                    Next::Closed => {
                        if let Some(core) = guard.take() {
                            tracing::debug!(log_id = %core.writer.log_id, "sqlite writer stopped");
                        }
                        return;
                    }
                }
            }
        };
        if let Some(reply) = reply {
            reply();
        }
    }
}

#[derive(Debug)]
struct Writer {
    conn: Connection,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
    tips: Tips,
}

/// The events a thread row leaves unsettled at most: once a thread's tail (its events at or
/// after the row's `next_seq`) holds this many, the append that reached it settles the row.
/// So an append is its events' inserts alone, and the row moves once every this many events.
pub(crate) const SETTLE_EVENTS: u64 = 256;

/// Threads whose tip the writer remembers; each key is at most [`crate::MAX_THREAD_ID_BYTES`],
/// so the memo holds at most 1 MiB of keys. Past it the memo starts again empty.
const MAX_TIPS: usize = 4096;

/// Where the threads the writer appended to stand: their next sequence and how many events their
/// rows leave unsettled. Valid while no other connection committed to the file, which SQLite's
/// `data_version` tells at the start of each transaction (with the write lock held); emptied then,
/// and after any rollback. A thread missing from it is read from the store.
#[derive(Debug, Default)]
struct Tips {
    tips: std::collections::HashMap<String, Tip>,
    data_version: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
struct Tip {
    next: u64,
    tail: u64,
}

impl Tips {
    /// At the start of a transaction: forgets every tip if another connection committed since.
    fn check(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let version: i64 = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        if self.data_version != Some(version) {
            self.tips.clear();
            self.data_version = Some(version);
        }
        Ok(())
    }

    fn forget_all(&mut self) {
        self.tips.clear();
    }

    fn set(&mut self, thread: &str, tip: Tip) {
        if let Some(known) = self.tips.get_mut(thread) {
            *known = tip;
            return;
        }
        if self.tips.len() >= MAX_TIPS {
            self.tips.clear();
        }
        self.tips.insert(thread.to_owned(), tip);
    }
}

impl Writer {
    fn signal(&self) {
        self.commits.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Runs `f` on `thread` in one transaction, its row settled first. The thread's tip is
    /// forgotten (it is read again at its next append), and every tip after a failure.
    fn in_transaction<T>(
        &mut self,
        thread: &ThreadId,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        self.tips.tips.remove(thread.as_str());
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            self.tips.check(&tx)?;
            settle(&tx, thread.as_str())?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })();
        if result.is_err() {
            self.tips.forget_all();
        }
        result
    }

    /// One group commit, acknowledged only after `COMMIT` returned. An append that is refused
    /// (a conflict, a deleted thread) is refused before it writes anything, so the appends run
    /// one after the other in one transaction without savepoints; only if a statement fails
    /// after an append began to write (which the engine's own checks make unexpected) is the
    /// transaction rolled back and the batch run again with a savepoint per append, so that
    /// the failing append is rolled back alone.
    fn commit_batch(&mut self, batch: Vec<AppendRequest>) {
        let now_ms = unix_ms(SystemTime::now());
        let results = match self.run_batch(&batch, now_ms, false) {
            Err(Isolate) => match self.run_batch(&batch, now_ms, true) {
                Ok(results) => results,
                Err(Isolate) => unreachable!("a batch with savepoints does not ask for them"),
            },
            Ok(results) => results,
        };
        let results = match results {
            Ok(results) => results,
            Err(reason) => {
                for request in batch {
                    let _ = request.reply.send(Err(Error::WriteFailed {
                        reason: reason.clone(),
                    }));
                }
                return;
            }
        };
        if results.iter().any(Result::is_ok) {
            self.signal();
        }
        for (request, result) in batch.into_iter().zip(results) {
            let _ = request.reply.send(result);
        }
    }

    /// Runs the batch in one transaction and commits it: each append's result, or why the
    /// transaction failed as a whole. Without `savepoints`, an append that fails after it
    /// wrote rolls the transaction back and asks for [`Isolate`].
    fn run_batch(
        &mut self,
        batch: &[AppendRequest],
        now_ms: i64,
        savepoints: bool,
    ) -> Result<std::result::Result<Vec<Result<Appended>>, String>, Isolate> {
        if let Err(err) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            return Ok(Err(err.to_string()));
        }
        if let Err(err) = self.tips.check(&self.conn) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Ok(Err(err.to_string()));
        }
        let mut results = Vec::with_capacity(batch.len());
        for request in batch {
            let result = if savepoints {
                self.append_in_savepoint(request, now_ms)
            } else {
                match append(&self.conn, self.log_id, &mut self.tips, request, now_ms) {
                    Err(AppendFailure::Wrote(_)) if !self.conn.is_autocommit() => {
                        let _ = self.conn.execute_batch("ROLLBACK");
                        self.tips.forget_all();
                        return Err(Isolate);
                    }
                    other => other.map_err(AppendFailure::into_error),
                }
            };
            // Some errors (a full disk, an I/O error, out of memory) make SQLite roll the
            // whole transaction back: what the batch wrote is gone, and a statement run now
            // would commit on its own. The batch fails as a whole.
            if let Err(err) = &result
                && self.conn.is_autocommit()
            {
                self.tips.forget_all();
                return Ok(Err(format!(
                    "the group commit's transaction was rolled back: {err}"
                )));
            }
            results.push(result);
        }
        if let Err(err) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.tips.forget_all();
            tracing::warn!(error = %err, "sqlite group commit failed");
            let reason = err.to_string();
            return Ok(Ok(results
                .into_iter()
                .map(|result| {
                    result.and(Err(Error::WriteFailed {
                        reason: reason.clone(),
                    }))
                })
                .collect()));
        }
        Ok(Ok(results))
    }

    fn append_in_savepoint(&mut self, request: &AppendRequest, now_ms: i64) -> Result<Appended> {
        self.conn.prepare_cached("SAVEPOINT append")?.execute([])?;
        // A failed append leaves its thread's tip as it was: the tip moves only on success.
        match append(&self.conn, self.log_id, &mut self.tips, request, now_ms) {
            Ok(appended) => {
                if let Err(err) = self
                    .conn
                    .prepare_cached("RELEASE append")
                    .and_then(|mut release| release.execute([]))
                {
                    // The append's tip moved, but what becomes of its writes is unknown here.
                    self.tips.forget_all();
                    return Err(err.into());
                }
                Ok(appended)
            }
            Err(failure) => {
                self.conn
                    .execute_batch("ROLLBACK TO append; RELEASE append")?;
                Err(failure.into_error())
            }
        }
    }
}

/// A batch run without savepoints met an append that failed after it wrote.
struct Isolate;

/// Why an append failed: before it wrote anything (a refusal, or a failed read), or after.
enum AppendFailure {
    Clean(Error),
    Wrote(Error),
}

impl AppendFailure {
    fn into_error(self) -> Error {
        match self {
            AppendFailure::Clean(err) | AppendFailure::Wrote(err) => err,
        }
    }
}

/// One append: its events inserted after its thread's tip. The thread's row is not moved on
/// (see [`SETTLE_EVENTS`]); a new thread's row is created settled. A refusal writes nothing.
fn append(
    conn: &Connection,
    log_id: LogId,
    tips: &mut Tips,
    request: &AppendRequest,
    now_ms: i64,
) -> std::result::Result<Appended, AppendFailure> {
    let thread = request.thread.as_str();
    let count = request.events.len() as u64;
    let clean = |err: rusqlite::Error| AppendFailure::Clean(err.into());
    let tip = match tips.tips.get(thread) {
        Some(tip) => *tip,
        None => match read_tip(conn, thread).map_err(clean)? {
            Some(Stored::Tip(tip)) => tip,
            Some(Stored::Deleted) => {
                return Err(AppendFailure::Clean(Error::ThreadDeleted {
                    thread: thread.to_string(),
                }));
            }
            None => {
                if let Expected::Next(n) = request.expected
                    && n != 0
                {
                    return Err(AppendFailure::Clean(Error::Conflict {
                        thread: thread.to_string(),
                        expected: n,
                        actual: 0,
                    }));
                }
                conn.prepare_cached(
                    "INSERT INTO aw_threads (thread, next_seq, low_seq, bytes, deleted, created_at)
                     VALUES (?1, ?2, 0, ?3, 0, ?4)",
                )
                .map_err(clean)?
                .execute(params![thread, count as i64, request.bytes as i64, now_ms])
                .map_err(|err| AppendFailure::Wrote(err.into()))?;
                let appended = insert_events(conn, log_id, request, 0, now_ms)?;
                tips.set(
                    thread,
                    Tip {
                        next: count,
                        tail: 0,
                    },
                );
                return Ok(appended);
            }
        },
    };
    if let Expected::Next(n) = request.expected
        && n != tip.next
    {
        tips.set(thread, tip);
        return Err(AppendFailure::Clean(Error::Conflict {
            thread: thread.to_string(),
            expected: n,
            actual: tip.next,
        }));
    }
    let appended = insert_events(conn, log_id, request, tip.next, now_ms)?;
    let mut tip = Tip {
        next: tip.next + count,
        tail: tip.tail + count,
    };
    if tip.tail >= SETTLE_EVENTS {
        settle(conn, thread).map_err(|err| AppendFailure::Wrote(err.into()))?;
        tip.tail = 0;
    }
    tips.set(thread, tip);
    Ok(appended)
}

/// A thread as the store holds it, for an append.
enum Stored {
    Tip(Tip),
    Deleted,
}

/// Reads a thread's tip from its row and its tail; `None` for a thread never written.
fn read_tip(conn: &Connection, thread: &str) -> rusqlite::Result<Option<Stored>> {
    static READ_TIP: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {NEXT_SEQ}, t.deleted, {TAIL_EVENTS} FROM aw_threads t WHERE t.thread = ?1")
    });
    conn.prepare_cached(&READ_TIP)?
        .query_row([thread], |r| {
            let deleted: i64 = r.get(1)?;
            Ok(if deleted != 0 {
                Stored::Deleted
            } else {
                Stored::Tip(Tip {
                    next: r.get::<_, i64>(0)? as u64,
                    tail: r.get::<_, i64>(2)? as u64,
                })
            })
        })
        .optional()
}

/// Moves a thread's row past its tail, so that its `next_seq` and `bytes` are exact.
fn settle(conn: &Connection, thread: &str) -> rusqlite::Result<()> {
    static SETTLE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE aw_threads AS t SET next_seq = {NEXT_SEQ}, bytes = {BYTES} WHERE t.thread = ?1"
        )
    });
    conn.prepare_cached(&SETTLE)?.execute([thread])?;
    Ok(())
}

/// Inserts the append's events from position `next`, after its thread's row was moved on.
fn insert_events(
    conn: &Connection,
    log_id: LogId,
    request: &AppendRequest,
    next: u64,
    now_ms: i64,
) -> std::result::Result<Appended, AppendFailure> {
    let wrote = |err: rusqlite::Error| AppendFailure::Wrote(err.into());
    let thread = request.thread.as_str();
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(wrote)?;
    for (i, (event, id)) in request.events.iter().zip(&request.ids).enumerate() {
        insert
            .execute(params![
                thread,
                (next + i as u64) as i64,
                id.as_bytes().as_slice(),
                event.kind,
                now_ms,
                event.record_size() as i64,
                event.payload,
            ])
            .map_err(wrote)?;
    }
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
    let cut = stored_low_watermark(
        thread,
        retention,
        low,
        next,
        bytes_cut,
        first_young,
        checkpoint,
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::WriterQueue;

    /// A writer thread that unwinds (a bug) drops the writer: the command it left queued is
    /// answered `events.closed`, and so is every later write, instead of waiting for a thread
    /// that is gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_thread_that_unwinds_closes_the_log_for_writes() {
        let doorbell = Arc::new(Doorbell::default());
        let (queue, rx) = WriterQueue::new(8, crate::DEFAULT_QUEUE_BYTES, Arc::clone(&doorbell));
        let queue = Arc::new(queue);
        let (commits, _) = watch::channel(0);
        let writer = Writer {
            conn: Connection::open_in_memory().unwrap(),
            log_id: LogId(uuid::Uuid::from_bytes([1; 16])),
            settings: Settings::default(),
            commits,
            tips: Tips::default(),
        };
        let shared = Shared {
            core: Arc::new(Mutex::new(Some(Core {
                writer,
                queue: rx,
                held: None,
            }))),
            doorbell: Arc::clone(&doorbell),
        };
        let thread = ThreadId::new("t").unwrap();
        let queued = {
            let thread = thread.clone();
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.delete_thread(&thread).await })
        };
        while !doorbell.waiting() {
            tokio::task::yield_now().await;
        }
        let unwinding = shared.clone();
        let joined = std::thread::spawn(move || {
            let _stop = StopOnUnwind(&unwinding);
            let _held = unwinding.core.lock().unwrap();
            panic!("a bug on the writer thread");
        })
        .join();
        assert!(joined.is_err());
        assert!(shared.lock().is_none(), "the writer outlived its thread");
        let err = tokio::time::timeout(std::time::Duration::from_secs(10), queued)
            .await
            .expect("the queued command was never answered")
            .unwrap()
            .unwrap_err();
        assert_eq!(err.code(), "events.closed", "{err}");
        let err = queue.delete_thread(&thread).await.unwrap_err();
        assert_eq!(err.code(), "events.closed", "{err}");
    }
}

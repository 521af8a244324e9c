//! The writer: the queue of commands, held by one party at a time, which takes them in order
//! and group-commits runs of appends on its connection, acknowledging each append only after the
//! outcome of its commit is known. An appender that finds the queue free commits small batches
//! on its own task (see [`Shared::append`]); otherwise the writer's thread, woken through the
//! queue's doorbell, runs what is queued, reconnecting its connection when it dropped.
//!
//! A group commit is first one statement, committed on its own: for every thread of the batch,
//! its appends' events inserted after the thread's row is advanced past them, if the row shows
//! the position the appends expect (one `UPDATE` of the threads' rows, one `INSERT` of all the
//! events, and the notification), in the form that costs least for the batch's shape: one event,
//! one thread, or several threads. The appends of a thread that statement did not advance (a
//! new thread, a deleted one, a conflict), and a whole batch the statement failed for with an
//! error that committed nothing and that the appends decide one by one (a duplicate position, a
//! deadlock between instances), then go through `aw_append`, one call each, in one transaction
//! (BEGIN, the calls in thread order, one NOTIFY and COMMIT pipelined in one round trip), which
//! decides each append's conflict on its own.
//!
//! The writer's thread and its connection run on a thread of their own (a one-thread tokio
//! runtime), as the SQLite writer does: the group commit is the log's one serial path, and on
//! the host's runtime, busy with the agents whose events it commits, a connection committing
//! large batches would wait behind their tasks between one commit and the next.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::transactions::{delete, put_checkpoint, trim};
use super::{CHANNEL, connect, for_role};
use crate::error::{Error, Result};
use crate::queue::{Answer, AppendRequest, Command, Doorbell, Next, gather, next_command};
use crate::settings::Settings;
use crate::types::{Appended, Expected, LogId};
const APPEND_SQL: &str =
    "SELECT status, first_seq, actual, at FROM aw_append($1, $2, $3, $4, $5, $6)";

/// The group statement of a batch of one one-event append: the same work with the thread's and
/// the event's values as parameters of their own, which commits in 196 µs where the arrays'
/// form takes 222–233 µs (one-event commits alternating; the one-append latency is mostly this
/// statement's).
pub fn one_event_sql() -> String {
    format!(
        "WITH u AS (
             UPDATE aw_threads t SET next_seq = t.next_seq + 1, bytes = t.bytes + $5::int8
             WHERE t.thread = $1 AND NOT t.deleted AND ($2::int8 < 0 OR t.next_seq = $2::int8)
             RETURNING t.next_seq - 1 AS first
         ), e AS (
             INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             SELECT $1, u.first, $3, $4, (extract(epoch FROM now()) * 1000)::int8, $5, $6
             FROM u
         )
         SELECT 1::int8, u.first, (extract(epoch FROM now()) * 1000)::int8, pg_notify('{CHANNEL}', '')
         FROM u"
    )
}

/// The group statement of a batch whose appends are all to one thread: the thread's values as
/// parameters of their own and its events' as arrays, the events numbered as they are unnested,
/// without the join of the arrays' form (a 1,000-event append commits in about three quarters
/// of its time).
fn one_thread_sql() -> String {
    format!(
        "WITH u AS (
             UPDATE aw_threads t SET next_seq = t.next_seq + $3::int8, bytes = t.bytes + $4::int8
             WHERE t.thread = $1 AND NOT t.deleted AND ($2::int8 < 0 OR t.next_seq = $2::int8)
             RETURNING t.next_seq - $3::int8 AS first
         ), e AS (
             INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             SELECT $1, u.first + e.ord - 1, e.id, e.kind, (extract(epoch FROM now()) * 1000)::int8,
                    e.size, e.payload
             FROM u, unnest($5::uuid[], $6::text[], $7::int8[], $8::bytea[]) WITH ORDINALITY
                 AS e(id, kind, size, payload, ord)
         )
         SELECT 1::int8, u.first, (extract(epoch FROM now()) * 1000)::int8, pg_notify('{CHANNEL}', '')
         FROM u"
    )
}

/// The group commit's one statement. `$1`…`$4` hold a row for each thread (its name, the
/// position its first append expects or -1 for any, its events and their bytes), `$5`…`$10` a
/// row for each event (its thread's row, 1-based, and its offset among that thread's events,
/// then its id, kind, size and payload). Answers a row for each thread it advanced: the row's
/// number, the thread's first new position and the commit's time. The threads' rows are locked
/// in the byte order of their ids before any is moved on (`l`), the order `aw_append` calls are
/// sent in, so two instances' transactions never wait for each other in a cycle.
fn group_append_sql() -> String {
    format!(
        "WITH r AS (
             SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) WITH ORDINALITY
                 AS r(thread, start, n, bytes, k)
         ), l AS (
             SELECT t.thread FROM aw_threads t WHERE t.thread IN (SELECT r.thread FROM r)
             ORDER BY t.thread COLLATE \"C\" FOR NO KEY UPDATE
         ), u AS (
             UPDATE aw_threads t SET next_seq = t.next_seq + r.n, bytes = t.bytes + r.bytes
             FROM r JOIN l ON l.thread = r.thread
             WHERE t.thread = r.thread AND NOT t.deleted AND (r.start < 0 OR t.next_seq = r.start)
             RETURNING r.k, t.next_seq - r.n AS first
         ), e AS (
             INSERT INTO aw_events (thread, seq, event_id, kind, committed_at, size, payload)
             SELECT ($1::text[])[e.k], u.first + e.off, e.id, e.kind,
                    (extract(epoch FROM now()) * 1000)::int8, e.size, e.payload
             FROM unnest($5::int8[], $6::int8[], $7::uuid[], $8::text[], $9::int8[], $10::bytea[])
                 AS e(k, off, id, kind, size, payload)
             JOIN u ON u.k = e.k
         )
         SELECT u.k, u.first, (extract(epoch FROM now()) * 1000)::int8, pg_notify('{CHANNEL}', '')
         FROM u"
    )
}

#[derive(Clone)]
struct Statements {
    group: tokio_postgres::Statement,
    one_event: tokio_postgres::Statement,
    one_thread: tokio_postgres::Statement,
    append: tokio_postgres::Statement,
}

/// The events a batch committed by an appender on its own task holds at most (see
/// [`Shared::append`]); a larger append goes to the writer's thread.
const LEAD_BATCH_EVENTS: usize = 64;

/// The bytes a batch committed by an appender on its own task holds at most.
const LEAD_BATCH_BYTES: usize = 64 * 1024;

/// How long after a failed attempt the appenders' connection may be tried again.
const LEAD_RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// One connection's committer: the connection, its prepared statements, and what a commit
/// answers with.
struct Writer {
    client: Client,
    statements: Option<Statements>,
    config: tokio_postgres::Config,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
}

/// The writer's thread, answered once the thread stopped (its connection closed).
pub(super) type Stopped = oneshot::Receiver<()>;

/// The queue and the appenders' connection, held by one party at a time: the writer's thread,
/// or an appender that found them free (see [`Shared::append`]).
pub(super) struct Shared {
    core: tokio::sync::Mutex<Core>,
    doorbell: Arc<Doorbell>,
    /// What a new appenders' connection is made of.
    make: (tokio_postgres::Config, LogId, Settings, watch::Sender<u64>),
    /// An attempt to connect the appenders' connection runs.
    connecting: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

struct Core {
    queue: mpsc::Receiver<Command>,
    /// A command taken from the queue that is still to run before the rest.
    held: Option<Command>,
    /// The appenders' connection, driven by the runtime of the appender that found it missing:
    /// `None` until then, and after it broke, until it is connected again.
    lead: Option<Writer>,
    /// After a failed attempt to connect the appenders' connection: when the next may start.
    reconnect_at: Option<Instant>,
    /// The queue closed and the writer's thread ended.
    closed: bool,
}

impl Writer {
    async fn connect(
        config: tokio_postgres::Config,
        log_id: LogId,
        settings: Settings,
        commits: watch::Sender<u64>,
    ) -> Result<Writer> {
        Ok(Writer {
            client: connect(&config).await?,
            statements: None,
            config,
            log_id,
            settings,
            commits,
        })
    }
}

/// Starts the writer's thread over `queue`, whose commands are counted on `doorbell`: it
/// connects to `config` and runs the queue's commands until the queue closes. Answers once it
/// is connected, or why it could not connect. The appenders' connection is connected by the
/// first appender that finds the queue free (see [`Shared::append`]).
pub(super) async fn spawn(
    config: tokio_postgres::Config,
    queue: mpsc::Receiver<Command>,
    doorbell: Arc<Doorbell>,
    log_id: LogId,
    settings: Settings,
    commits: watch::Sender<u64>,
) -> Result<(Arc<Shared>, Stopped)> {
    let shared = Arc::new(Shared {
        core: tokio::sync::Mutex::new(Core {
            queue,
            held: None,
            lead: None,
            reconnect_at: None,
            closed: false,
        }),
        doorbell,
        make: (
            for_role(&config, "appenders"),
            log_id,
            settings.clone(),
            commits.clone(),
        ),
        connecting: AtomicBool::new(false),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (connected, connection) = oneshot::channel();
    let (stopped, stopped_rx) = oneshot::channel();
    let thread_shared = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("agentwire-events-postgres-writer".into())
        .spawn(move || {
            let _stop = StopOnUnwind(&thread_shared);
            runtime.block_on(async {
                let config = for_role(&config, "writer");
                let writer = match Writer::connect(config, log_id, settings, commits).await {
                    Ok(writer) => writer,
                    Err(err) => {
                        let _ = connected.send(Err(err));
                        return;
                    }
                };
                let _ = connected.send(Ok(()));
                run(&thread_shared, writer).await;
            });
            // The connection's task ends with the runtime.
            drop(runtime);
            let _ = stopped.send(());
        })?;
    connection.await.map_err(|_| Error::Closed)??;
    Ok((shared, stopped_rx))
}

/// Stops the writer if the writer's thread unwinds (a bug): the queue is closed and what it
/// holds dropped, so every caller waiting on a queued command is answered (an append
/// `events.commit-outcome-unknown`, anything else `events.closed`) and every later write is
/// refused, instead of waiting for a thread that is gone.
struct StopOnUnwind<'a>(&'a Shared);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        tracing::error!("the postgres writer's thread panicked; the log takes no more writes");
        // The queue's lock was let go as the panic unwound the task that held it; an appender
        // holding it now lets it go at once, finding the queue closed.
        let Ok(mut core) = self.0.core.try_lock() else {
            self.0.doorbell.ring();
            return;
        };
        core.closed = true;
        core.lead = None;
        core.held = None;
        core.queue.close();
        while core.queue.try_recv().is_ok() {}
    }
}

/// The writer's thread: waits for the doorbell, then takes the queue and runs every queued
/// command. Once the queue is closed and drained, closes the appenders' connection and ends.
async fn run(shared: &Shared, mut writer: Writer) {
    loop {
        // A caller that queued a command while the queue was held counted it before it tried
        // to take the queue: the count is seen here, or the caller took the queue.
        if !shared.doorbell.waiting() {
            shared.doorbell.rung().await;
        }
        let mut guard = shared.core.lock().await;
        let core = &mut *guard;
        loop {
            let command = match next_command(&mut core.held, &mut core.queue, &shared.doorbell) {
                Next::Command(command) => command,
                Next::Empty => break,
                Next::Closed => {
                    core.lead = None;
                    core.closed = true;
                    tracing::debug!(log_id = %writer.log_id, "postgres writer stopped");
                    return;
                }
            };
            if writer.client.is_closed() {
                match connect(&writer.config).await {
                    Ok(client) => {
                        writer.client = client;
                        writer.statements = None;
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
                    let (batch, held) = gather(first, &mut core.queue, &writer.settings);
                    shared
                        .doorbell
                        .took(batch.len() - 1 + usize::from(held.is_some()));
                    core.held = held;
                    writer.commit_batch(batch).await;
                }
                Command::Trim {
                    thread,
                    retention,
                    now,
                    reply,
                } => {
                    let result = trim(&mut writer.client, &thread, &retention, now).await;
                    let _ = reply.send(result);
                }
                // `PostgresLog` writes checkpoints on a connection of their own, beside this
                // writer; one queued here (the queue is the engines' shared one) is written the
                // same way.
                Command::Checkpoint {
                    thread,
                    checkpoint,
                    reply,
                    budget: _,
                } => {
                    let result = put_checkpoint(&mut writer.client, &thread, &checkpoint).await;
                    let _ = reply.send(result);
                }
                Command::Delete { thread, reply } => {
                    let result = delete(&mut writer.client, &thread).await;
                    if matches!(result, Ok(true)) {
                        writer.commits.send_modify(|n| *n = n.wrapping_add(1));
                    }
                    let _ = reply.send(result);
                }
            }
        }
    }
}

/// The answer to an append that the party holding it dropped unanswered (its runtime shut down
/// with the commit in flight): it may have committed.
fn unfinished() -> Error {
    Error::CommitOutcomeUnknown {
        reason: "the group commit holding this append ended before it was answered".into(),
    }
}

impl Shared {
    /// The answer to an append the caller queued. When nothing holds the queue, the caller takes
    /// it and commits on its own task, on the appenders' connection: group commits of the
    /// appends queued with its own, until its own is answered, as the writer's thread would
    /// commit them. A one-event append on an idle log is then one statement sent from the
    /// caller's task, with no hand-off to the writer's thread and back (two wake-ups across
    /// threads, about a fifth of the commit). Only small batches are committed so
    /// ([`LEAD_BATCH_EVENTS`], [`LEAD_BATCH_BYTES`]): the appenders' connection runs on the
    /// host's runtime, where agents' work delays it, and a large batch is left to the writer's
    /// thread, as is any other command. Whoever holds the queue rings the writer's thread, after
    /// letting it go, if commands are still queued.
    ///
    /// Run inside [`crate::FinishOnDrop`]: a caller that stops waiting leaves the group commit
    /// it leads to finish as a task, so the other appends of the batch are answered.
    pub(super) async fn append(self: Arc<Self>, mut answer: Answer<Appended>) -> Result<Appended> {
        if let Some(result) = self.lead(&mut answer).await {
            return result;
        }
        // Left unanswered, the append was taken by a party that ended without finishing (its
        // runtime shut down with the commit in flight): it may have committed.
        answer.await.map_err(|_| unfinished())?
    }

    async fn lead(self: &Arc<Self>, answer: &mut Answer<Appended>) -> Option<Result<Appended>> {
        // Whoever holds the queue rings the thread once it lets go.
        let Ok(core) = self.core.try_lock() else {
            return None;
        };
        // Lets the queue go and rings, however this ends (also when the caller's runtime drops
        // it unfinished).
        let mut core = Taken::new(core, &self.doorbell);
        let mut mine = None;
        loop {
            match answer.try_recv() {
                Ok(result) => {
                    mine = Some(result);
                    break;
                }
                // Dropped unanswered by a group commit that ended unfinished: the receiver is
                // spent, and awaiting it would panic.
                Err(oneshot::error::TryRecvError::Closed) => {
                    mine = Some(Err(unfinished()));
                    break;
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let Some(core) = core.core() else {
                break;
            };
            let Some(lead) = core.lead.as_mut().filter(|lead| !lead.client.is_closed()) else {
                self.reconnect(core);
                break;
            };
            let first = match next_command(&mut core.held, &mut core.queue, &self.doorbell) {
                Next::Command(Command::Append(first)) => first,
                Next::Command(other) => {
                    core.held = Some(other);
                    break;
                }
                Next::Empty | Next::Closed => break,
            };
            let (batch, held) =
                gather_small(first, &mut core.queue, &lead.settings, &self.doorbell);
            core.held = held;
            if batch.is_empty() {
                break;
            }
            lead.commit_batch(batch).await;
        }
        drop(core);
        mine
    }

    /// The appenders' connection is missing (not connected yet, or broken): it is connected by
    /// a task of the current runtime, which then drives it, one attempt at a time; after a
    /// failed attempt the next starts no sooner than [`LEAD_RECONNECT_DELAY`] later. The
    /// writer's thread commits meanwhile.
    fn reconnect(self: &Arc<Self>, core: &mut Core) {
        core.lead = None;
        if core.closed
            || self.connecting.load(Ordering::SeqCst)
            || core.reconnect_at.is_some_and(|at| Instant::now() < at)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.connecting.store(true, Ordering::SeqCst);
        let shared = Arc::clone(self);
        runtime.spawn(async move {
            // However the task ends (also dropped while it waits for the queue): no attempt runs
            // any more, and appends queued meanwhile are rung for.
            let _done = Connecting(&shared);
            let (config, log_id, settings, commits) = shared.make.clone();
            let connected = Writer::connect(config, log_id, settings, commits).await;
            let mut taken = Taken::new(shared.core.lock().await, &shared.doorbell);
            let Some(core) = taken.core() else {
                return;
            };
            match connected {
                Ok(writer) => {
                    if !core.closed {
                        core.lead = Some(writer);
                    }
                }
                Err(err) => {
                    core.reconnect_at = Some(Instant::now() + LEAD_RECONNECT_DELAY);
                    tracing::warn!(error = %err, "postgres appenders' connection cannot connect; the writer's thread commits meanwhile");
                }
            }
        });
    }
}

/// An attempt to connect the appenders' connection, ended when dropped: the next may start,
/// and the writer's thread is rung if commands wait.
struct Connecting<'a>(&'a Shared);

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        self.0.connecting.store(false, Ordering::SeqCst);
        if self.0.doorbell.waiting() {
            self.0.doorbell.ring();
        }
    }
}

/// The queue held by a party other than the writer's thread. Dropped, it lets the queue go,
/// then rings the writer's thread if a command was held back or commands wait: an appender that
/// queued while the queue was held, and found it held, relies on that ring.
struct Taken<'a> {
    core: Option<tokio::sync::MutexGuard<'a, Core>>,
    doorbell: &'a Doorbell,
}

impl<'a> Taken<'a> {
    fn new(core: tokio::sync::MutexGuard<'a, Core>, doorbell: &'a Doorbell) -> Self {
        Taken {
            core: Some(core),
            doorbell,
        }
    }

    /// The queue (always held until dropped).
    fn core(&mut self) -> Option<&mut Core> {
        self.core.as_deref_mut()
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let held = self.core.take().is_some_and(|core| core.held.is_some());
        if held || self.doorbell.waiting() {
            self.doorbell.ring();
        }
    }
}

/// `first` and the appends queued behind it while the batch stays within what an appender
/// commits on its own task ([`LEAD_BATCH_EVENTS`], [`LEAD_BATCH_BYTES`], and the settings'
/// batch budget): the first command that does not fit (an append that would take the batch
/// over, or another command) is handed back, to run before the rest. The batch is empty when
/// `first` itself does not fit.
fn gather_small(
    first: AppendRequest,
    queue: &mut mpsc::Receiver<Command>,
    settings: &Settings,
    doorbell: &Doorbell,
) -> (Vec<AppendRequest>, Option<Command>) {
    let max_events = LEAD_BATCH_EVENTS;
    let max_bytes = LEAD_BATCH_BYTES.min(settings.max_batch_bytes);
    let (mut batch, mut events, mut bytes) = (Vec::new(), 0, 0);
    let mut next = Command::Append(first);
    loop {
        match next {
            Command::Append(request)
                if (batch.is_empty() || batch.len() < settings.max_batch_appends)
                    && events + request.events.len() <= max_events
                    && bytes + request.bytes <= max_bytes =>
            {
                events += request.events.len();
                bytes += request.bytes;
                batch.push(request);
            }
            other => return (batch, Some(other)),
        }
        match queue.try_recv() {
            Ok(command) => {
                doorbell.took(1);
                next = command;
            }
            Err(_) => return (batch, None),
        }
    }
}

impl Writer {
    /// The connection's prepared statements, prepared on first use. The group statement runs
    /// on its generic plan: a custom plan would be planned again at every commit, which costs
    /// as much as running it.
    async fn statements(&mut self) -> Result<Statements, tokio_postgres::Error> {
        if let Some(statements) = &self.statements {
            return Ok(statements.clone());
        }
        self.client
            .batch_execute("SET plan_cache_mode = force_generic_plan")
            .await?;
        let statements = Statements {
            group: self.client.prepare(&group_append_sql()).await?,
            one_event: self.client.prepare(&one_event_sql()).await?,
            one_thread: self.client.prepare(&one_thread_sql()).await?,
            append: self.client.prepare(APPEND_SQL).await?,
        };
        self.statements = Some(statements.clone());
        Ok(statements)
    }

    /// One group commit: the group statement, then `aw_append` for the appends it left (see
    /// the module's doc), each append answered as soon as its outcome is known.
    async fn commit_batch(&mut self, batch: Vec<AppendRequest>) {
        let decided = match self.group_append(&batch).await {
            Ok(decided) => decided,
            // Nothing was committed, and `aw_append` decides each append on its own.
            Err(BatchError::Failed(err)) if decided_one_by_one(&err) => {
                tracing::debug!(error = %err, "postgres group statement failed; appending one by one");
                (0..batch.len()).map(|_| None).collect()
            }
            Err(err) => return fail_all(batch, &err),
        };
        let mut left = Vec::new();
        for (request, outcome) in batch.into_iter().zip(decided) {
            match outcome {
                Some(appended) => {
                    let _ = request.reply.send(Ok(appended));
                }
                None => left.push(request),
            }
        }
        if !left.is_empty() {
            self.append_each(left).await;
        }
    }

    /// The group statement over `batch`: the outcome of each append it committed, `None` for
    /// those it left to [`Writer::append_each`].
    async fn group_append(
        &mut self,
        batch: &[AppendRequest],
    ) -> Result<Vec<Option<Appended>>, BatchError> {
        let statements = self.statements().await.map_err(BatchError::Failed)?;
        let groups = ThreadGroups::new(batch);
        let mut decided: Vec<Option<Appended>> = (0..batch.len()).map(|_| None).collect();
        if groups.threads.is_empty() {
            return Ok(decided);
        }
        let rows = if groups.ids.len() == 1 {
            self.client
                .query(
                    &statements.one_event,
                    &[
                        &groups.threads[0],
                        &groups.starts[0],
                        &groups.ids[0],
                        &groups.kinds[0],
                        &groups.sizes[0],
                        &groups.payloads[0],
                    ],
                )
                .await
        } else if groups.threads.len() == 1 {
            self.client
                .query(
                    &statements.one_thread,
                    &[
                        &groups.threads[0],
                        &groups.starts[0],
                        &groups.counts[0],
                        &groups.bytes[0],
                        &groups.ids,
                        &groups.kinds,
                        &groups.sizes,
                        &groups.payloads,
                    ],
                )
                .await
        } else {
            self.client
                .query(
                    &statements.group,
                    &[
                        &groups.threads,
                        &groups.starts,
                        &groups.counts,
                        &groups.bytes,
                        &groups.event_group,
                        &groups.event_offset,
                        &groups.ids,
                        &groups.kinds,
                        &groups.sizes,
                        &groups.payloads,
                    ],
                )
                .await
        }
        .map_err(|err| match err.as_db_error() {
            Some(_) => BatchError::Failed(err),
            // The connection broke with the statement sent: it may have committed.
            None => BatchError::Unknown(err.to_string()),
        })?;
        if !rows.is_empty() {
            self.commits.send_modify(|n| *n = n.wrapping_add(1));
        }
        for row in rows {
            let k: i64 = row.get(0);
            let first: i64 = row.get(1);
            let at: i64 = row.get(2);
            let members = usize::try_from(k - 1)
                .ok()
                .and_then(|g| groups.members.get(g))
                .ok_or_else(|| BatchError::Unknown(format!("group statement answered row {k}")))?;
            let mut next = first as u64;
            for &i in members {
                let request = &batch[i];
                decided[i] = Some(Appended {
                    log_id: self.log_id,
                    first_seq: next,
                    event_ids: request.ids.clone(),
                    committed_at_ms: at,
                });
                next += request.events.len() as u64;
            }
        }
        Ok(decided)
    }

    /// `aw_append` for each of `batch`, pipelined in one transaction (in thread order, so
    /// instances lock thread rows in the same order and never deadlock), with one NOTIFY and
    /// `COMMIT`, all in one flight, then the acknowledgements.
    async fn append_each(&mut self, batch: Vec<AppendRequest>) {
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
            Err(err) => fail_all(batch, &err),
        }
    }

    async fn run_batch(
        &mut self,
        batch: &[AppendRequest],
    ) -> Result<Vec<Result<Appended>>, BatchError> {
        let stmt = self.statements().await.map_err(BatchError::Failed)?.append;
        let order = thread_order(batch);
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
                    // No position is past `i64::MAX`: such an expectation is a conflict.
                    Expected::Next(n) => i64::try_from(n).unwrap_or(i64::MAX),
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
        match begun {
            Ok(()) => notified.map_err(BatchError::Failed)?,
            // Without its transaction each call ran (and, answered a row, committed) alone, and
            // so did the notification: each call's own result stands.
            Err(err) => tracing::warn!(
                error = %err,
                "BEGIN of a batch of aw_append calls failed; each call stood alone"
            ),
        }
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

/// A batch's appends grouped by thread for the group statement: the threads in byte order, each
/// with the appends of the batch in their order, and the rows of the statement's parameters.
/// A thread whose appends cannot all be appended at one position of the thread (two that
/// expect positions its earlier appends do not lead to) is left out, for `aw_append`.
#[derive(Default)]
struct ThreadGroups<'a> {
    threads: Vec<&'a str>,
    starts: Vec<i64>,
    counts: Vec<i64>,
    bytes: Vec<i64>,
    members: Vec<Vec<usize>>,
    event_group: Vec<i64>,
    event_offset: Vec<i64>,
    ids: Vec<uuid::Uuid>,
    kinds: Vec<&'a str>,
    sizes: Vec<i64>,
    payloads: Vec<&'a [u8]>,
}

impl<'a> ThreadGroups<'a> {
    fn new(batch: &'a [AppendRequest]) -> Self {
        let order = thread_order(batch);
        let mut groups = ThreadGroups::default();
        for run in order.chunk_by(|&a, &b| batch[a].thread == batch[b].thread) {
            let Some(start) = common_start(run.iter().map(|&i| &batch[i])) else {
                continue;
            };
            let group = groups.threads.len() as i64 + 1;
            let mut offset = 0i64;
            let mut bytes = 0i64;
            for &i in run {
                let request = &batch[i];
                for (event, id) in request.events.iter().zip(&request.ids) {
                    groups.event_group.push(group);
                    groups.event_offset.push(offset);
                    groups.ids.push(*id);
                    groups.kinds.push(event.kind.as_str());
                    let size = event.record_size() as i64;
                    groups.sizes.push(size);
                    groups.payloads.push(event.payload.as_slice());
                    offset += 1;
                    bytes += size;
                }
            }
            groups.threads.push(batch[run[0]].thread.as_str());
            groups.starts.push(start);
            groups.counts.push(offset);
            groups.bytes.push(bytes);
            groups.members.push(run.to_vec());
        }
        groups
    }
}

/// The indexes of `batch` in the byte order of their threads, a thread's appends in batch order:
/// the order both paths lock thread rows in.
fn thread_order(batch: &[AppendRequest]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by(|&a, &b| batch[a].thread.cmp(&batch[b].thread));
    order
}

/// The position a thread's appends, in their order, all hold at (-1 when none expects one), or
/// `None` when no position does: one of them would conflict whatever the thread holds.
fn common_start<'a>(appends: impl Iterator<Item = &'a AppendRequest>) -> Option<i64> {
    let mut start: Option<u64> = None;
    let mut before = 0u64;
    for request in appends {
        if let Expected::Next(n) = request.expected {
            let at = n.checked_sub(before)?;
            if start.is_some_and(|s| s != at) {
                return None;
            }
            start = Some(at);
        }
        before += request.events.len() as u64;
    }
    match start {
        Some(s) => i64::try_from(s).ok(),
        None => Some(-1),
    }
}

/// Whether a failed group statement is left to `aw_append`, which decides each append of it on
/// its own: a position already taken (a thread's row behind its events), or a deadlock or
/// serialization failure with another instance's writer.
fn decided_one_by_one(err: &tokio_postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(&SqlState::UNIQUE_VIOLATION)
            | Some(&SqlState::T_R_DEADLOCK_DETECTED)
            | Some(&SqlState::T_R_SERIALIZATION_FAILURE)
    )
}

/// Answers every append of `batch` with the reason its commit failed or may have failed.
fn fail_all(batch: Vec<AppendRequest>, err: &BatchError) {
    match err {
        BatchError::Failed(err) => {
            tracing::warn!(error = %err, "postgres group commit failed");
            for request in batch {
                let _ = request.reply.send(Err(copy_error(err)));
            }
        }
        BatchError::Unknown(reason) => {
            tracing::warn!(%reason, "postgres group commit outcome unknown");
            for request in batch {
                let _ = request.reply.send(Err(Error::CommitOutcomeUnknown {
                    reason: reason.clone(),
                }));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::WriterQueue;
    use crate::types::ThreadId;

    /// A writer's thread that unwinds (a bug) closes the queue: the command it left queued is
    /// answered `events.closed`, and so is every later write, instead of waiting for a thread
    /// that is gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_thread_that_unwinds_closes_the_log_for_writes() {
        let doorbell = Arc::new(Doorbell::default());
        let (queue, rx) = WriterQueue::new(8, crate::DEFAULT_QUEUE_BYTES, Arc::clone(&doorbell));
        let queue = Arc::new(queue);
        let (commits, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            core: tokio::sync::Mutex::new(Core {
                queue: rx,
                held: None,
                lead: None,
                reconnect_at: None,
                closed: false,
            }),
            doorbell: Arc::clone(&doorbell),
            make: (
                tokio_postgres::Config::new(),
                LogId(uuid::Uuid::from_bytes([1; 16])),
                Settings::default(),
                commits,
            ),
            connecting: AtomicBool::new(false),
        });
        let thread = ThreadId::new("t").unwrap();
        let queued = {
            let (queue, thread) = (Arc::clone(&queue), thread.clone());
            tokio::spawn(async move { queue.delete_thread(&thread).await })
        };
        while !doorbell.waiting() {
            tokio::task::yield_now().await;
        }
        let unwinding = Arc::clone(&shared);
        let joined = std::thread::spawn(move || {
            let _stop = StopOnUnwind(&unwinding);
            panic!("a bug on the writer's thread");
        })
        .join();
        assert!(joined.is_err());
        assert!(shared.core.try_lock().unwrap().closed);
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

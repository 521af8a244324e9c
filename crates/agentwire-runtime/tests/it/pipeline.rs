//! Pipelined durable appends: a burst reaches subscribers in log order with its end last, a
//! commit that fails mid-burst fails the turn, publishes nothing it did not commit, and leaves
//! the thread serving, and a caller that stops waiting mid-commit leaves its flush whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use agentwire_events::{
    After, Appended, Backend, Checkpoint, CheckpointInfo, EventLog, Expected, LogId, NewEvent,
    Page, Position, Retention, ThreadId, ThreadInfo, Trimmed,
};
use agentwire_runtime::*;
use async_trait::async_trait;

use agentwire_testkit::runtime::{input, is_turn_end, until};

const WAIT: Duration = Duration::from_secs(60);

/// A log that fails one append (the `fail_at`-th, counting from 1) without committing it,
/// commits one (the `unknown_at`-th) and answers it `events.commit-outcome-unknown`, holds
/// appends while `gate` is locked for writing and their answers (once committed) while
/// `hold_after` is, and forwards everything else.
#[derive(Debug)]
struct FailingLog {
    inner: Arc<dyn EventLog>,
    /// Appends that reached the log, held or not.
    arrived: AtomicUsize,
    appends: AtomicUsize,
    /// Appends committed by the log underneath.
    committed: AtomicUsize,
    fail_at: AtomicUsize,
    unknown_at: AtomicUsize,
    gate: tokio::sync::RwLock<()>,
    hold_after: tokio::sync::RwLock<()>,
    /// Reads still to fail.
    fail_reads: AtomicUsize,
    /// A thread whose every read fails as corrupt.
    corrupt: std::sync::Mutex<Option<String>>,
}

#[async_trait]
impl EventLog for FailingLog {
    fn log_id(&self) -> LogId {
        self.inner.log_id()
    }
    fn backend(&self) -> Backend {
        self.inner.backend()
    }
    async fn append(
        &self,
        thread: &ThreadId,
        expected: Expected,
        events: Vec<NewEvent>,
    ) -> agentwire_events::Result<Appended> {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        drop(self.gate.read().await);
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at.load(Ordering::SeqCst) {
            return Err(agentwire_events::Error::WriteFailed {
                reason: "injected".into(),
            });
        }
        let appended = self.inner.append(thread, expected, events).await;
        self.committed.fetch_add(1, Ordering::SeqCst);
        drop(self.hold_after.read().await);
        if n == self.unknown_at.load(Ordering::SeqCst) {
            appended?;
            return Err(agentwire_events::Error::CommitOutcomeUnknown {
                reason: "injected: the connection broke with the commit sent".into(),
            });
        }
        appended
    }
    async fn read(
        &self,
        thread: &ThreadId,
        after: After,
        limit: usize,
    ) -> agentwire_events::Result<Page> {
        let failing = self
            .fail_reads
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(agentwire_events::Error::Pool {
                reason: "injected".into(),
            });
        }
        if self.corrupt.lock().unwrap().as_deref() == Some(thread.as_str()) {
            return Err(agentwire_events::Error::Corrupt {
                reason: "injected".into(),
            });
        }
        self.inner.read(thread, after, limit).await
    }
    fn commits(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.commits()
    }
    async fn thread(&self, thread: &ThreadId) -> agentwire_events::Result<Option<ThreadInfo>> {
        self.inner.thread(thread).await
    }
    async fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> agentwire_events::Result<Vec<ThreadInfo>> {
        self.inner.threads(after, limit).await
    }
    async fn trim(
        &self,
        thread: &ThreadId,
        retention: &Retention,
        now: SystemTime,
    ) -> agentwire_events::Result<Trimmed> {
        self.inner.trim(thread, retention, now).await
    }
    async fn put_checkpoint(
        &self,
        thread: &ThreadId,
        checkpoint: Checkpoint,
    ) -> agentwire_events::Result<()> {
        self.inner.put_checkpoint(thread, checkpoint).await
    }
    async fn checkpoint(&self, thread: &ThreadId) -> agentwire_events::Result<Option<Checkpoint>> {
        self.inner.checkpoint(thread).await
    }
    async fn checkpoint_info(
        &self,
        thread: &ThreadId,
    ) -> agentwire_events::Result<Option<CheckpointInfo>> {
        self.inner.checkpoint_info(thread).await
    }
    async fn delete_thread(&self, thread: &ThreadId) -> agentwire_events::Result<bool> {
        self.inner.delete_thread(thread).await
    }
    async fn close(&self) -> agentwire_events::Result<()> {
        self.inner.close().await
    }
}

/// The demo agent, its slow steps 1 ms apart.
fn quick_demo() -> Arc<DemoAgent> {
    Arc::new(DemoAgent {
        slow_interval: Duration::from_millis(1),
    })
}

/// Starts turn `t1` of `thread` asking an approval (`/approve ls`); the interaction's id once
/// `rx` sees it opened.
async fn approval_asked(runtime: &Runtime, thread: &str, rx: &mut Subscription) -> String {
    runtime
        .start_turn(thread, "t1", input("/approve ls"))
        .await
        .unwrap();
    let seen = until(rx, |e| matches!(e, ThreadEvent::InteractionOpened { .. })).await;
    let Some(Published::Durable { event, .. }) = seen.last() else {
        unreachable!()
    };
    let ThreadEvent::InteractionOpened { interaction } = &event.event else {
        unreachable!()
    };
    interaction.id.clone()
}

async fn failing_runtime(dir: &tempfile::TempDir) -> (Runtime, Arc<FailingLog>) {
    let agent = quick_demo();
    failing_runtime_with(dir, agent, RuntimeConfig::default()).await
}

async fn failing_runtime_with(
    dir: &tempfile::TempDir,
    agent: Arc<dyn Agent>,
    config: RuntimeConfig,
) -> (Runtime, Arc<FailingLog>) {
    let path = dir.path().join("events.db");
    let inner = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let log = Arc::new(FailingLog {
        inner,
        arrived: AtomicUsize::new(0),
        appends: AtomicUsize::new(0),
        committed: AtomicUsize::new(0),
        fail_at: AtomicUsize::new(0),
        unknown_at: AtomicUsize::new(0),
        gate: tokio::sync::RwLock::new(()),
        hold_after: tokio::sync::RwLock::new(()),
        fail_reads: AtomicUsize::new(0),
        corrupt: std::sync::Mutex::new(None),
    });
    let runtime = Runtime::start(
        Arc::clone(&log) as Arc<dyn EventLog>,
        agent,
        Arc::new(SystemClock),
        config,
    )
    .await
    .unwrap();
    (runtime, log)
}

/// The durable events of a subscription until the turn ends, as (seq, kind).
async fn durable_until_end(sub: &mut Subscription) -> Vec<(u64, &'static str)> {
    let events = tokio::time::timeout(WAIT, until(sub, is_turn_end))
        .await
        .expect("the turn ends");
    events
        .iter()
        .filter_map(|p| match p {
            Published::Durable { seq, event, .. } => Some((*seq, event.event.kind())),
            Published::Live { .. } => None,
        })
        .collect()
}

/// Every event the log holds of `thread`, as (seq, kind).
async fn stored(log: &dyn EventLog, thread: &str) -> Vec<(u64, String)> {
    let thread = ThreadId::new(thread).unwrap();
    let mut out = Vec::new();
    let mut after = After::Start;
    loop {
        let page = log.read(&thread, after, 1_000).await.unwrap();
        let Some(last) = page.events.last() else {
            return out;
        };
        after = After::Position(Position {
            log_id: log.log_id(),
            seq: last.seq,
        });
        let at_head = page.at_head();
        out.extend(page.events.into_iter().map(|e| (e.seq, e.kind)));
        if at_head {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_reaches_a_subscriber_in_log_order_with_its_end_last() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "burst", input("/burst 3000"))
        .await
        .unwrap();
    let seen = durable_until_end(&mut sub).await;
    // turn.started, 3,000 operations, the closing message, turn.completed.
    assert_eq!(seen.len(), 3_003);
    assert_eq!(seen.first().map(|e| e.1), Some("turn.started"));
    assert_eq!(seen.last().map(|e| e.1), Some("turn.completed"));
    for pair in seen.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "{pair:?}");
    }
    // Committed in far fewer appends than events (the creation, then the burst).
    let appends = log.appends.load(Ordering::SeqCst);
    assert!(appends < 1_000, "{appends} appends for 3,003 events");
    let stored = stored(log.as_ref(), &thread).await;
    let published: Vec<(u64, String)> = seen.iter().map(|(s, k)| (*s, k.to_string())).collect();
    assert_eq!(stored[1..], published[..]);
}

/// A caller that stops waiting while its append's commit is in flight (the caller runs the
/// thread's flusher from there) leaves the flush to finish as a task: the append is committed,
/// folded and published, and the thread's next append is answered after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_stops_waiting_mid_commit_leaves_its_append_published_and_the_thread_serving()
{
    use std::future::Future;
    use std::task::{Context, Waker};
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    for round in 0..10 {
        let held = log.gate.write().await;
        let first = format!("dropped {round}");
        let mut rename = Box::pin(runtime.rename_thread(&thread, first.clone()));
        let polled = rename
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "the rename waits for its commit");
        drop(rename);
        drop(held);
        let second = format!("awaited {round}");
        tokio::time::timeout(WAIT, runtime.rename_thread(&thread, second.clone()))
            .await
            .expect("the next rename is answered")
            .unwrap();
        let mut titles = Vec::new();
        while titles.len() < 2 {
            match tokio::time::timeout(WAIT, sub.recv())
                .await
                .unwrap()
                .unwrap()
            {
                Published::Durable { event, .. } => match &event.event {
                    ThreadEvent::ThreadRenamed { title } => titles.push(title.clone()),
                    other => panic!("{other:?}"),
                },
                Published::Live { .. } => {}
            }
        }
        assert_eq!(titles, [first, second.clone()]);
        assert_eq!(
            runtime.snapshot(&thread).await.unwrap().title.as_deref(),
            Some(second.as_str())
        );
    }
    let stored = stored(log.as_ref(), &thread).await;
    assert_eq!(
        stored.len(),
        21,
        "the creation and twenty renames: {stored:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_fails_the_turn_publishes_nothing_uncommitted_and_the_thread_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    // The creation was append 1; the turn's start is 2; a commit of the burst fails.
    log.fail_at.store(4, Ordering::SeqCst);
    runtime
        .start_turn(&thread, "burst", input("/burst 20000"))
        .await
        .unwrap();
    let events = tokio::time::timeout(WAIT, until(&mut sub, is_turn_end))
        .await
        .expect("the turn ends");
    let Some(Published::Durable { event, .. }) = events.last() else {
        panic!("no end");
    };
    let ThreadEvent::TurnFailed { message, .. } = &event.event else {
        panic!("{:?}", event.event);
    };
    assert!(message.contains("the event log failed"), "{message}");
    assert!(message.contains("injected"), "{message}");
    let seen: Vec<(u64, &'static str)> = events
        .iter()
        .filter_map(|p| match p {
            Published::Durable { seq, event, .. } => Some((*seq, event.event.kind())),
            Published::Live { .. } => None,
        })
        .collect();
    let failed = runtime
        .inspect(&thread, |state| state.active_turn.is_none())
        .await
        .unwrap();
    assert!(failed);
    // What was published is exactly what the log holds, in its order.
    let stored = stored(log.as_ref(), &thread).await;
    let published: Vec<(u64, String)> = seen.iter().map(|(s, k)| (*s, k.to_string())).collect();
    assert_eq!(stored[1..], published[..]);
    for pair in seen.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "{pair:?}");
    }
    // The thread takes a new turn.
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "after", input("hello"))
        .await
        .unwrap();
    let seen = durable_until_end(&mut sub).await;
    assert_eq!(seen.last().map(|e| e.1), Some("turn.completed"));
}

/// Records `operations` operations without waiting for their commits, then asks for an
/// approval, then records one more operation.
#[derive(Debug)]
struct BurstThenAsk {
    operations: usize,
}

fn operation(index: usize) -> Operation {
    Operation {
        id: format!("op-{index}"),
        tool_call_id: format!("call-{index}"),
        agent_name: "test".into(),
        tool_name: "burst".into(),
        input: serde_json::json!({"n": index}),
        outcome: ToolOutcome {
            kind: OutcomeKind::Success,
            reason: None,
        },
        display: serde_json::json!({"text": format!("burst {index}")}),
        app_output: None,
    }
}

#[async_trait]
impl Agent for BurstThenAsk {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        for index in 0..self.operations {
            turn.operation(operation(index)).await.unwrap();
        }
        let asked = turn.ask(crate::shell_approval()).await.unwrap();
        assert_eq!(asked, Resolution::Approved);
        turn.operation(operation(self.operations)).await.unwrap();
        TurnEnd::Completed
    }
}

/// A runtime of `agent` on a SQLite log in `dir`, and the log.
async fn sqlite_runtime(
    dir: &tempfile::TempDir,
    agent: Arc<dyn Agent>,
) -> (Runtime, Arc<dyn EventLog>) {
    let log = agentwire_events::open(&format!(
        "sqlite:{}",
        dir.path().join("events.db").display()
    ))
    .await
    .unwrap();
    let runtime = Runtime::start(
        Arc::clone(&log),
        agent,
        Arc::new(SystemClock),
        RuntimeConfig::default(),
    )
    .await
    .unwrap();
    (runtime, log)
}

/// What must follow durability does: an approval is published only once every event admitted
/// before it is committed (the log holds them all when a subscriber sees it), a subscriber sees
/// everything in log order, and the turn's end comes last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_after_a_burst_is_published_after_every_event_before_it_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = sqlite_runtime(&dir, Arc::new(BurstThenAsk { operations: 2_000 })).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    runtime
        .start_turn(&thread, "turn-1", input("go"))
        .await
        .unwrap();
    let mut seen: Vec<(u64, &'static str)> = Vec::new();
    let interaction = loop {
        let published = tokio::time::timeout(WAIT, sub.recv())
            .await
            .expect("the approval comes")
            .expect("the subscription stays open");
        let Published::Durable { seq, event, .. } = &published else {
            continue;
        };
        seen.push((*seq, event.event.kind()));
        if let ThreadEvent::InteractionOpened { interaction } = &event.event {
            break interaction.id.clone();
        }
    };
    // Everything up to the approval is in the log, exactly as seen; after it only the turn's
    // status, committed with it (the turn waits for the answer).
    let stored_now = stored(log.as_ref(), &thread).await;
    let published: Vec<(u64, String)> = seen.iter().map(|(s, k)| (*s, k.to_string())).collect();
    assert!(
        stored_now[1..=published.len()] == published[..],
        "the log differs from what was published before the approval"
    );
    let after: Vec<&str> = stored_now[published.len() + 1..]
        .iter()
        .map(|(_, kind)| kind.as_str())
        .collect();
    assert_eq!(after, ["turn.status"]);
    let operations = seen
        .iter()
        .filter(|(_, kind)| *kind == "operation.completed")
        .count();
    assert_eq!(operations, 2_000);
    runtime
        .resolve(&thread, &interaction, Resolution::Approved)
        .await
        .unwrap();
    let rest = durable_until_end(&mut sub).await;
    seen.extend(rest);
    assert_eq!(seen.last().map(|e| e.1), Some("turn.completed"));
    for pair in seen.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "{pair:?}");
    }
    let stored_all = stored(log.as_ref(), &thread).await;
    let published: Vec<(u64, String)> = seen.iter().map(|(s, k)| (*s, k.to_string())).collect();
    assert!(
        stored_all[1..] == published[..],
        "the log differs from what was published"
    );
}

/// An awaited append on a thread with nothing in flight, on a log that commits within the call
/// (SQLite, its writer free), is committed, folded, published and answered within the caller's
/// own call: its future is ready at its first poll, on a runtime of one thread where no
/// flusher task could have run. Subscribers get each event, in order, before the call returns.
#[tokio::test(flavor = "current_thread")]
async fn an_awaited_append_on_an_idle_thread_completes_within_the_call() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _log) = sqlite_runtime(&dir, Arc::new(DemoAgent::default())).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe_thread(&thread).await.unwrap();
    for i in 0..5 {
        let title = format!("title {i}");
        let mut rename = std::pin::pin!(runtime.rename_thread(&thread, title.clone()));
        match rename
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(result) => result.unwrap(),
            Poll::Pending => panic!("rename {i} waited for another task"),
        }
        match rx.try_recv() {
            Some(Published::Durable { event, .. }) => assert!(
                matches!(&event.event, ThreadEvent::ThreadRenamed { title: t } if *t == title),
                "{event:?}"
            ),
            other => panic!("rename {i} was not published before its call returned: {other:?}"),
        }
    }
    assert_eq!(
        runtime.snapshot(&thread).await.unwrap().title.as_deref(),
        Some("title 4")
    );
}

/// Polls `done` every 10 ms until it holds (at most `WAIT`).
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The durable events a subscription receives next, `n` of them, as (seq, kind, ordinal).
async fn next_durable(sub: &mut Subscription, n: usize) -> Vec<(u64, &'static str, Option<u64>)> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let published = tokio::time::timeout(WAIT, sub.recv())
            .await
            .expect("the next event comes")
            .expect("the subscription stays open");
        if let Published::Durable {
            seq,
            ordinal,
            event,
            ..
        } = &published
        {
            seen.push((*seq, event.event.kind(), *ordinal));
        }
    }
    seen
}

/// A commit answered `events.commit-outcome-unknown` that did commit: the thread's state
/// catches up with its log, so the append is answered committed and published once, and the
/// thread's later appends are positioned after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_unknown_outcome_that_committed_is_answered_committed_and_the_thread_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    // The creation was append 1.
    log.unknown_at.store(2, Ordering::SeqCst);
    runtime.rename_thread(&thread, "a".into()).await.unwrap();
    for title in ["b", "c", "d"] {
        runtime.rename_thread(&thread, title.into()).await.unwrap();
    }
    let kinds: Vec<String> = stored(log.as_ref(), &thread)
        .await
        .into_iter()
        .map(|(_, kind)| kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "thread.created",
            "thread.renamed",
            "thread.renamed",
            "thread.renamed",
            "thread.renamed"
        ]
    );
    let seen = next_durable(&mut sub, 4).await;
    let seqs: Vec<u64> = seen.iter().map(|(seq, _, _)| *seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(
        runtime.snapshot(&thread).await.unwrap().title.as_deref(),
        Some("d")
    );
}

/// A turn start whose caller stops waiting while `turn.started` commits still runs the turn
/// and records its end: the thread takes the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_start_whose_caller_stops_waiting_mid_commit_runs_and_ends_the_turn() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    let held = log.gate.write().await;
    let mut start = Box::pin(runtime.start_turn(&thread, "t1", input("hello")));
    assert!(
        start
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    drop(start);
    drop(held);
    let seen = durable_until_end(&mut sub).await;
    assert_eq!(seen.first().map(|e| e.1), Some("turn.started"));
    assert_eq!(seen.last().map(|e| e.1), Some("turn.completed"));
    runtime
        .start_turn(&thread, "t2", input("hello"))
        .await
        .unwrap();
    let seen = durable_until_end(&mut sub).await;
    assert_eq!(seen.last().map(|e| e.1), Some("turn.completed"));
}

/// A subscriber that fell behind reads back only what was folded: an event committed while the
/// batch before it is folded reaches it once published, with its timeline ordinal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_reading_back_gets_each_timeline_event_with_its_ordinal() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 1,
        ..RuntimeConfig::default()
    };
    let agent = quick_demo();
    let (runtime, log) = failing_runtime_with(&dir, agent, config).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    runtime.rename_thread(&thread, "a".into()).await.unwrap();
    runtime.rename_thread(&thread, "b".into()).await.unwrap();
    // turn.started commits (append 4) and its answer is held: it is committed, not folded.
    let held = log.hold_after.write().await;
    let starter = {
        let (runtime, thread) = (runtime.clone(), thread.clone());
        tokio::spawn(async move { runtime.start_turn(&thread, "t1", input("hello")).await })
    };
    wait_for("turn.started committed", || {
        log.committed.load(Ordering::SeqCst) >= 4
    })
    .await;
    // The renames are read back (the one-byte queue dropped the second); turn.started, not
    // folded yet, is not.
    let seen = next_durable(&mut sub, 2).await;
    assert_eq!(
        seen,
        [(1, "thread.renamed", None), (2, "thread.renamed", None)]
    );
    drop(held);
    starter.await.unwrap().unwrap();
    let seen = next_durable(&mut sub, 1).await;
    assert_eq!(seen, [(3, "turn.started", Some(0))]);
}

/// Records `operations` operations once `go` has a permit, without waiting for their commits,
/// then asks for an approval and keeps its answer.
#[derive(Debug)]
struct GoThenBurstThenAsk {
    go: Arc<tokio::sync::Semaphore>,
    operations: usize,
    asked: Arc<std::sync::Mutex<Option<Result<Resolution, RuntimeError>>>>,
}

#[async_trait]
impl Agent for GoThenBurstThenAsk {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        let _go = self.go.acquire().await.unwrap();
        for index in 0..self.operations {
            if turn.operation(operation(index)).await.is_err() {
                break;
            }
        }
        let asked = turn.ask(crate::shell_approval()).await;
        *self.asked.lock().unwrap() = Some(asked);
        TurnEnd::Completed
    }
}

/// An admission is committed whole or not at all: an approval's request and the turn's status
/// that come with it are never split across two commits, so when their commit fails the log
/// holds neither and the agent is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_is_committed_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let go = Arc::new(tokio::sync::Semaphore::new(0));
    let asked = Arc::new(std::sync::Mutex::new(None));
    // 999 operations and the approval's two events: a commit of at most 1,000 events would
    // cut between the two.
    let agent = Arc::new(GoThenBurstThenAsk {
        go: Arc::clone(&go),
        operations: 999,
        asked: Arc::clone(&asked),
    });
    let (runtime, log) = failing_runtime_with(&dir, agent, RuntimeConfig::default()).await;
    let thread = runtime.create_thread(None, None).await.unwrap(); // append 1
    runtime
        .start_turn(&thread, "t1", input("go"))
        .await
        .unwrap(); // append 2
    let held = log.gate.write().await;
    let renamer = {
        let (runtime, thread) = (runtime.clone(), thread.clone());
        tokio::spawn(async move { runtime.rename_thread(&thread, "r".into()).await }) // append 3
    };
    wait_for("the rename held", || {
        log.arrived.load(Ordering::SeqCst) >= 3
    })
    .await;
    go.add_permits(1);
    // Everything the agent does is admitted behind the held rename, none of it waiting for a
    // commit but the approval: the 999 operations and the approval's interaction.opened and
    // turn.status (admitted within milliseconds; nothing public shows an admission).
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Append 4 commits the operations; append 5, the approval's admission, fails.
    log.fail_at.store(5, Ordering::SeqCst);
    drop(held);
    renamer.await.unwrap().unwrap();
    wait_for("the agent told", || asked.lock().unwrap().is_some()).await;
    let answer = asked.lock().unwrap().take().unwrap();
    assert!(
        matches!(answer, Err(RuntimeError::CommitFailed(_))),
        "{answer:?}"
    );
    let kinds: Vec<String> = stored(log.as_ref(), &thread)
        .await
        .into_iter()
        .map(|(_, kind)| kind)
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "interaction.opened"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "operation.completed").count(),
        999
    );
}

/// Fails every turn with a message over the log's record limit.
#[derive(Debug)]
struct HugeFailure;

#[async_trait]
impl Agent for HugeFailure {
    async fn run_turn(&self, _turn: TurnContext) -> TurnEnd {
        TurnEnd::Failed {
            stage: FailStage::Execute,
            message: "é".repeat(9 * 1024 * 1024),
        }
    }
}

/// A turn that fails with a message over the record limit is recorded failed with the message
/// cut at `MAX_FAILURE_MESSAGE_BYTES`, and the thread takes the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_failing_with_an_oversized_message_is_recorded_failed_with_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, _log) =
        failing_runtime_with(&dir, Arc::new(HugeFailure), RuntimeConfig::default()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe_thread(&thread).await.unwrap();
    for turn in ["t1", "t2"] {
        runtime
            .start_turn(&thread, turn, input("go"))
            .await
            .unwrap();
        let events = tokio::time::timeout(WAIT, until(&mut sub, is_turn_end))
            .await
            .expect("the turn ends");
        let Some(Published::Durable { event, .. }) = events.last() else {
            panic!("no end");
        };
        let ThreadEvent::TurnFailed { message, .. } = &event.event else {
            panic!("{:?}", event.event);
        };
        assert!(
            message.len() <= MAX_FAILURE_MESSAGE_BYTES,
            "{}",
            message.len()
        );
        assert!(
            message.len() > MAX_FAILURE_MESSAGE_BYTES - 16,
            "{}",
            message.len()
        );
        assert!(message.starts_with("éé"));
        assert!(
            message.ends_with(" … (cut)"),
            "{}",
            &message[message.len() - 20..]
        );
    }
}

/// A deletion whose caller stops waiting while `thread.deleted` commits is finished: the
/// thread is no longer served and its events leave the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_whose_caller_stops_waiting_mid_commit_is_finished() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let dir = tempfile::tempdir().unwrap();
    let (runtime, log) = failing_runtime(&dir).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    runtime.rename_thread(&thread, "a".into()).await.unwrap();
    let held = log.gate.write().await;
    let mut delete = Box::pin(runtime.delete_thread(&thread));
    assert!(
        delete
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    drop(delete);
    drop(held);
    let id = ThreadId::new(thread.clone()).unwrap();
    let started = std::time::Instant::now();
    loop {
        let info = log.thread(&id).await.unwrap().unwrap();
        if info.deleted && !runtime.contains_thread(&thread) {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the deletion was never finished: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A subscription read with `recv_until_stopped` goes on past a failed read-back, and reads the
/// missed events again, so each arrives (an approval opened meanwhile too): what a face's pump
/// uses, as one failed read must stop no event reaching its hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_goes_on_past_a_failed_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 1,
        ..RuntimeConfig::default()
    };
    let agent = quick_demo();
    let (runtime, log) = failing_runtime_with(&dir, agent, config).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe();
    // The one-byte queue misses everything after the first event; its read-back fails once.
    log.fail_reads.store(1, Ordering::SeqCst);
    runtime.rename_thread(&thread, "a".into()).await.unwrap();
    runtime.rename_thread(&thread, "b".into()).await.unwrap();
    runtime.rename_thread(&thread, "c".into()).await.unwrap();
    let mut titles = Vec::new();
    while titles.last().map(String::as_str) != Some("c") {
        let published = tokio::time::timeout(WAIT, sub.recv_until_stopped())
            .await
            .expect("an event comes")
            .expect("the runtime runs");
        if let Published::Durable { event, .. } = published
            && let ThreadEvent::ThreadRenamed { title } = &event.event
        {
            titles.push(title.clone());
        }
    }
    assert_eq!(log.fail_reads.load(Ordering::SeqCst), 0, "no read failed");
}

/// A host's resolution is admitted (the interaction is no longer pending) and its commit held;
/// meanwhile the deadline passes, so the turn's own `expired` finds nothing pending and waits;
/// then the host's commit fails. The turn records `expired` itself and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resolution_commit_racing_the_deadline_leaves_no_turn_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let agent = quick_demo();
    let config = RuntimeConfig {
        interaction_ttl: Duration::from_millis(400),
        ..RuntimeConfig::default()
    };
    let (runtime, log) = failing_runtime_with(&dir, agent, config).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe_thread(&thread).await.unwrap();
    let id = approval_asked(&runtime, &thread, &mut rx).await;
    let gate = log.gate.write().await;
    let arrived = log.arrived.load(Ordering::SeqCst);
    log.fail_at
        .store(log.appends.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
    let (r, t, i) = (runtime.clone(), thread.clone(), id.clone());
    let resolving = tokio::spawn(async move { r.resolve(&t, &i, Resolution::Approved).await });
    wait_for("the resolution's append at the log", || {
        log.arrived.load(Ordering::SeqCst) > arrived
    })
    .await;
    // The deadline passes while the resolution's commit is held.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    drop(gate);
    let resolved = resolving.await.unwrap();
    assert!(
        matches!(resolved, Err(RuntimeError::CommitFailed(_))),
        "{resolved:?}"
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), until(&mut rx, is_turn_end)).await;
    assert!(
        ended.is_ok(),
        "the turn never ended; pending now: {:?}",
        runtime.snapshot(&thread).await.unwrap().pending.len()
    );
}

/// A commit answered `commit-outcome-unknown` that did commit keeps what was admitted behind it
/// (positioned after it): a host's approval queued meanwhile is committed, and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_waits_behind_an_unknown_outcome_that_committed_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let agent = quick_demo();
    let (runtime, log) = failing_runtime_with(&dir, agent, RuntimeConfig::default()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe_thread(&thread).await.unwrap();
    let id = approval_asked(&runtime, &thread, &mut rx).await;
    let hold = log.hold_after.write().await;
    let committed = log.committed.load(Ordering::SeqCst);
    log.unknown_at
        .store(log.appends.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
    let (r, t) = (runtime.clone(), thread.clone());
    let renaming = tokio::spawn(async move { r.rename_thread(&t, "renamed".into()).await });
    wait_for("the rename committed", || {
        log.committed.load(Ordering::SeqCst) > committed
    })
    .await;
    let (r, t, i) = (runtime.clone(), thread.clone(), id.clone());
    let resolving = tokio::spawn(async move { r.resolve(&t, &i, Resolution::Approved).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(hold);
    assert!(renaming.await.unwrap().is_ok());
    let resolved = resolving.await.unwrap();
    let end = until(&mut rx, is_turn_end).await;
    let Some(Published::Durable { event, .. }) = end.last() else {
        unreachable!()
    };
    assert!(
        resolved.is_ok(),
        "the approval was dropped: {resolved:?}; the turn ended {:?}",
        event.event
    );
}

/// A thread whose missed events cannot be read back (its store is corrupt) is reported once and
/// does not hold up the subscription: another thread's events still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_that_cannot_be_read_back_holds_up_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        subscriber_queue_bytes: 1,
        ..RuntimeConfig::default()
    };
    let agent = quick_demo();
    let (runtime, log) = failing_runtime_with(&dir, agent, config).await;
    let broken = runtime.create_thread(None, None).await.unwrap();
    let fine = runtime.create_thread(None, None).await.unwrap();
    let mut sub = runtime.subscribe();
    *log.corrupt.lock().unwrap() = Some(broken.clone());
    // The one-byte queue takes the first and misses the rest, which are read back.
    runtime.rename_thread(&broken, "a".into()).await.unwrap();
    runtime.rename_thread(&broken, "b".into()).await.unwrap();
    runtime.rename_thread(&fine, "c".into()).await.unwrap();
    runtime.rename_thread(&fine, "d".into()).await.unwrap();
    let mut titles = Vec::new();
    while titles.last().map(String::as_str) != Some("d") {
        let published = tokio::time::timeout(WAIT, sub.recv_until_stopped())
            .await
            .expect("the other thread's events come")
            .expect("the runtime runs");
        if let Published::Durable { event, .. } = published
            && let ThreadEvent::ThreadRenamed { title } = &event.event
        {
            titles.push(title.clone());
        }
    }
    assert_eq!(titles.first().map(String::as_str), Some("a"));
}

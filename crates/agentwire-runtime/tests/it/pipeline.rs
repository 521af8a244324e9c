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

/// A log that fails one append (the `fail_at`-th, counting from 1), holds appends while `gate`
/// is locked for writing, and forwards everything else.
#[derive(Debug)]
struct FailingLog {
    inner: Arc<dyn EventLog>,
    appends: AtomicUsize,
    fail_at: AtomicUsize,
    gate: tokio::sync::RwLock<()>,
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
        drop(self.gate.read().await);
        let n = self.appends.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at.load(Ordering::SeqCst) {
            return Err(agentwire_events::Error::WriteFailed {
                reason: "injected".into(),
            });
        }
        self.inner.append(thread, expected, events).await
    }
    async fn read(
        &self,
        thread: &ThreadId,
        after: After,
        limit: usize,
    ) -> agentwire_events::Result<Page> {
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

async fn failing_runtime(dir: &tempfile::TempDir) -> (Runtime, Arc<FailingLog>) {
    let path = dir.path().join("events.db");
    let inner = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let log = Arc::new(FailingLog {
        inner,
        appends: AtomicUsize::new(0),
        fail_at: AtomicUsize::new(0),
        gate: tokio::sync::RwLock::new(()),
    });
    let agent = Arc::new(DemoAgent {
        slow_interval: Duration::from_millis(1),
    });
    let runtime = Runtime::start(
        Arc::clone(&log) as Arc<dyn EventLog>,
        agent,
        Arc::new(SystemClock),
        RuntimeConfig::default(),
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
        let asked = turn
            .ask(InteractionKind::Approval {
                approval_id: "approval-1".into(),
                agent_name: "test".into(),
                tool_name: "shell".into(),
                preview: serde_json::json!({"command": "ls"}),
                reason: None,
            })
            .await
            .unwrap();
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

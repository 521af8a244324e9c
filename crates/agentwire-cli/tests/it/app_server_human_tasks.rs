//! ChainlessChain's human-task settlement script (`human-task-settlement-conformance.json`),
//! run step by step on the runtime: the `graph` surface is the core's API on the durable task;
//! `desktop` and `vscode` are two App Server connections to the same runtime that negotiated
//! `durable_human_task` and hold its cards (`humanTask/decide`), driven by raw JSON-RPC lines
//! (the script's duplicate and stale answers are response lines the SDK's API cannot send).
//! `restart` stops the runtime and its connections and starts a new runtime on the same store;
//! `advance` moves the runtime's clock.
//!
//! How a step runs (docs/app-server.md, "Human tasks"): a decision is made once, through the
//! deciding surface — `vscode` when it holds a live card (a host whose counters are the
//! decisions it sends), else `graph`; `desktop` (a host whose counters are the grants and
//! interruptions it is told of) holding a live card observes; every surface without a live
//! card tries the decision itself (a duplicate answer, a late answer to a withdrawn card, a
//! card from before a restart, or a core decision on a settled task). Each step's
//! `settled`/`rejected` is what the surface got back, and each end state is computed from the
//! log and from the notifications each host received.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentwire_runtime::{
    Clock, Decision, DecisionKind, DemoAgent, HumanTaskAnswer, HumanTaskState, ManualClock,
    Runtime, RuntimeConfig, StampedEvent, ThreadEvent, TurnInput,
};
use agentwire_serve::app_server::{AppServerConfig, AppServerFace, FEATURES, schema};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;

const NOW: u64 = 1_790_000_000_000;
const WAIT: Duration = Duration::from_secs(10);

/// A card as a host holds it.
#[derive(Debug, Clone)]
struct Card {
    request_id: Value,
    task: Value,
    state: CardState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CardState {
    /// Sent on the live connection, not answered, not withdrawn.
    Live,
    /// Answered by this host.
    Answered,
    /// Withdrawn: the task settled.
    Withdrawn,
    /// Its connection died with the runtime it came from.
    Stale,
}

/// An App Server host on a raw connection, with the bookkeeping a desktop app or an IDE
/// extension keeps from what it is sent.
struct Host {
    name: &'static str,
    writer: WriteHalf<DuplexStream>,
    lines: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
    cards: Vec<Card>,
    /// Every message received, each checked against our schema.
    seen: Vec<Value>,
    responses: HashMap<String, Value>,
    granted_events: u64,
    interrupted_events: u64,
    rejected_responses: u64,
    sent_decisions: u64,
}

impl Host {
    async fn connect(name: &'static str, face: &Arc<AppServerFace>) -> Host {
        let (writer, lines) =
            crate::support::app_server_host::connect(face, Arc::new(false.into()));
        let mut host = Host {
            name,
            writer,
            lines,
            next_id: 0,
            cards: Vec::new(),
            seen: Vec::new(),
            responses: HashMap::new(),
            granted_events: 0,
            interrupted_events: 0,
            rejected_responses: 0,
            sent_decisions: 0,
        };
        let init = host
            .call(
                "initialize",
                json!({"protocolVersion": 1, "minimumProtocolVersion": 1,
                       "client": {"name": name, "version": "1"}, "features": FEATURES}),
            )
            .await;
        assert!(
            init["result"]["features"]
                .as_array()
                .unwrap()
                .contains(&json!("durable_human_task")),
            "{init}"
        );
        host
    }

    async fn send(&mut self, line: &Value) {
        let mut text = line.to_string();
        text.push('\n');
        self.writer.write_all(text.as_bytes()).await.unwrap();
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = format!("{}-{}", self.name, self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.wait(|h| h.responses.contains_key(&id)).await;
        self.responses.remove(&id).unwrap()
    }

    /// Reads what arrived until `done` holds (or `WAIT` passes); whether it holds.
    async fn wait(&mut self, done: impl Fn(&Host) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !done(self) {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(message)) => self.take(message),
                _ => return false,
            }
        }
        true
    }

    /// The host's bookkeeping of one message.
    fn take(&mut self, message: Value) {
        schema::check_message(&message)
            .unwrap_or_else(|e| panic!("{}: not a valid message: {e}: {message}", self.name));
        match message["method"].as_str() {
            Some("humanTask/decide") => self.cards.push(Card {
                request_id: message["id"].clone(),
                task: message["params"]["task"].clone(),
                state: CardState::Live,
            }),
            Some("graph/event") => {
                let params = &message["params"];
                match params["type"].as_str() {
                    Some("humanTask/settled") => {
                        let task = params["humanTaskId"].clone();
                        let mut held = false;
                        for card in &mut self.cards {
                            if card.task["id"] == task && card.state == CardState::Live {
                                card.state = CardState::Withdrawn;
                                held = true;
                            }
                        }
                        if held {
                            match params["status"].as_str() {
                                Some("decided")
                                    if params["decision"]["kind"]
                                        .as_str()
                                        .and_then(DecisionKind::parse)
                                        .is_some_and(DecisionKind::accepts) =>
                                {
                                    self.granted_events += 1;
                                }
                                Some("cancelled") => self.interrupted_events += 1,
                                _ => {}
                            }
                        }
                    }
                    Some("humanTask/decided") => self.sent_decisions += 1,
                    Some("humanTask/refused") => self.rejected_responses += 1,
                    _ => {}
                }
            }
            None => {
                if let Some(id) = message["id"].as_str() {
                    self.responses.insert(id.to_owned(), message.clone());
                }
            }
            Some(_) => {}
        }
        self.seen.push(message);
    }

    fn live_card(&self) -> Option<usize> {
        self.cards.iter().rposition(|c| c.state == CardState::Live)
    }

    fn outcomes(&self, id: &Value) -> usize {
        self.seen
            .iter()
            .filter(|m| {
                m["method"] == "graph/event"
                    && matches!(
                        m["params"]["type"].as_str(),
                        Some("humanTask/decided" | "humanTask/refused")
                    )
                    && m["params"]["requestId"] == *id
            })
            .count()
    }

    /// Answers the card at `index` (a raw response line with its id), with the card's binding
    /// and the actor's decision; what the runtime said of it.
    async fn answer(&mut self, index: usize, actor: &str, decision: &Decision) -> &'static str {
        let card = self.cards[index].clone();
        let before = self.outcomes(&card.request_id);
        let task = &card.task;
        let result = json!({
            "humanTaskId": task["id"], "runId": task["runId"],
            "revisionDigest": task["revisionDigest"], "operationDigest": task["operationDigest"],
            "nonce": task["nonce"], "actorId": actor, "decision": decision.to_value(),
        });
        if card.state == CardState::Live {
            self.cards[index].state = CardState::Answered;
        }
        self.send(&json!({"jsonrpc": "2.0", "id": card.request_id, "result": result}))
            .await;
        let id = card.request_id.clone();
        assert!(
            self.wait(|h| h.outcomes(&id) > before).await,
            "{}: no outcome for {id}",
            self.name
        );
        let last = self
            .seen
            .iter()
            .rev()
            .find(|m| m["method"] == "graph/event" && m["params"]["requestId"] == id)
            .unwrap();
        match last["params"]["type"].as_str() {
            Some("humanTask/decided") => "settled",
            _ => "rejected",
        }
    }

    async fn close(mut self) -> Host {
        self.writer.shutdown().await.unwrap();
        self
    }
}

/// One run of a scenario: the store, the runtime and its face, and the hosts.
struct Run {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    runtime: Runtime,
    face: Arc<AppServerFace>,
    thread: String,
    task_id: String,
    hosts: HashMap<&'static str, Host>,
}

async fn start_runtime(dir: &tempfile::TempDir, clock: Arc<ManualClock>) -> Runtime {
    let path = dir.path().join("runtime.sqlite");
    let log = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    Runtime::start(
        log,
        Arc::new(DemoAgent::default()),
        clock,
        RuntimeConfig::default(),
    )
    .await
    .unwrap()
}

impl Run {
    async fn task(&self) -> HumanTaskState {
        self.runtime
            .human_task(&self.thread, &self.task_id)
            .await
            .unwrap()
    }

    /// The turn's end as the log holds it: `running` while it has none.
    async fn run_status(&self) -> &'static str {
        let page = self
            .runtime
            .stored_events(&self.thread, 0, 1_000)
            .await
            .unwrap();
        for stored in page.events.iter().rev() {
            let event: StampedEvent = serde_json::from_slice(&stored.payload).unwrap();
            match event.event {
                ThreadEvent::TurnCompleted { .. } => return "completed",
                ThreadEvent::TurnFailed { .. } => return "failed",
                ThreadEvent::TurnCancelled { .. } => return "cancelled",
                _ => {}
            }
        }
        "running"
    }

    async fn graph_decides(&self, actor: &str, decision: &Decision) -> &'static str {
        let task = self.task().await;
        let answer = HumanTaskAnswer {
            task_id: task.task.id.clone(),
            run_id: task.task.turn_id.clone(),
            revision_digest: task.task.revision_digest.clone(),
            operation_digest: task.task.operation_digest.clone(),
            nonce: task.task.nonce.clone(),
            actor_id: actor.to_owned(),
            decision: decision.clone(),
        };
        match self.runtime.decide_human_task(&self.thread, answer).await {
            Ok(_) => "settled",
            Err(_) => "rejected",
        }
    }

    /// Whether the durable task holds this actor's decision as its last.
    async fn holds(&self, actor: &str, decision: &Decision) -> bool {
        self.task()
            .await
            .decisions
            .last()
            .is_some_and(|d| d.actor_id == actor && d.decision.kind == decision.kind)
    }

    async fn restart(&mut self) -> HashMap<&'static str, &'static str> {
        let before = self.task().await;
        let names: Vec<&'static str> = self.hosts.keys().copied().collect();
        let mut old = HashMap::new();
        for name in names {
            let host = self.hosts.remove(name).unwrap().close().await;
            old.insert(name, host);
        }
        // The stopped runtime is dropped here; a new one starts on the same store.
        self.clock = Arc::new(ManualClock::new(self.clock.now_ms()));
        self.runtime = start_runtime(&self.dir, Arc::clone(&self.clock)).await;
        self.face = AppServerFace::new(self.runtime.clone(), AppServerConfig::default());
        let after = self.task().await;
        let kept = after.task.id == before.task.id
            && after.status == before.status
            && after.decisions == before.decisions
            && (!after.is_open() || after.task.nonce != before.task.nonce);
        let mut seen = HashMap::from([("graph", if kept { "settled" } else { "rejected" })]);
        for (name, mut host) in old {
            // The host reconnects; the cards it holds came from the stopped runtime.
            let fresh = Host::connect(name, &self.face).await;
            for card in &mut host.cards {
                if card.state == CardState::Live {
                    card.state = CardState::Stale;
                }
            }
            host.writer = fresh.writer;
            host.lines = fresh.lines;
            host.responses.clear();
            seen.insert(name, "settled");
            self.hosts.insert(name, host);
        }
        seen
    }
}

fn decision_of(action: &str) -> Decision {
    match action {
        "approve" => Decision::of(DecisionKind::AcceptOnce),
        "decline" => Decision::decline("declined in the conformance script"),
        other => panic!("not a decision: {other}"),
    }
}

async fn run_scenario(scenario: &Value) {
    let name = scenario["name"].as_str().unwrap();
    let surfaces: Vec<&str> = scenario["surfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let quorum = scenario["quorum"].as_u64().unwrap();
    let sod = scenario["separation_of_duties"].as_bool().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let runtime = start_runtime(&dir, Arc::clone(&clock)).await;
    let face = AppServerFace::new(runtime.clone(), AppServerConfig::default());
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut hosts = HashMap::new();
    for surface in ["desktop", "vscode"] {
        if surfaces.contains(&surface) {
            let mut host = Host::connect(surface, &face).await;
            let resumed = host
                .call("thread/resume", json!({"threadId": thread}))
                .await;
            assert!(resumed.get("result").is_some(), "{resumed}");
            hosts.insert(surface, host);
        }
    }
    let command = format!(
        "/review quorum={quorum}{} hold",
        if sod { " sod" } else { "" }
    );
    runtime
        .start_turn(
            &thread,
            "turn-1",
            TurnInput {
                text: command,
                attachments: Vec::new(),
            },
        )
        .await
        .unwrap();
    let mut opened = None;
    for _ in 0..500 {
        if let Some(task) = runtime.human_tasks(&thread).await.unwrap().pop() {
            opened = Some(task);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let task_id = opened.expect("the task opens").task.id;
    for host in hosts.values_mut() {
        assert!(
            host.wait(|h| h.live_card().is_some()).await,
            "{}: a card",
            host.name
        );
    }
    let mut run = Run {
        dir,
        clock,
        runtime,
        face,
        thread,
        task_id,
        hosts,
    };

    for (n, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
        let action = step["action"].as_str().unwrap();
        let mut seen: HashMap<&str, &str> = HashMap::new();
        match action {
            "approve" | "decline" => {
                let actor = step["actor_id"].as_str().unwrap();
                let decision = decision_of(action);
                let vscode_live = run.hosts.get("vscode").and_then(Host::live_card);
                // The decision, made once.
                if let Some(index) = vscode_live {
                    let host = run.hosts.get_mut("vscode").unwrap();
                    seen.insert("vscode", host.answer(index, actor, &decision).await);
                } else {
                    seen.insert("graph", run.graph_decides(actor, &decision).await);
                }
                let settled = !run.task().await.is_open();
                // Every other surface observes it, or tries it when it holds no live card.
                for surface in &surfaces {
                    if seen.contains_key(surface) {
                        continue;
                    }
                    let outcome = match *surface {
                        "graph" if run.holds(actor, &decision).await => "settled",
                        "graph" => run.graph_decides(actor, &decision).await,
                        host_name => {
                            let host = run.hosts.get_mut(host_name).unwrap();
                            let task = run.task_id.clone();
                            match host.live_card() {
                                Some(_) if settled => {
                                    let got = host
                                        .wait(|h| {
                                            h.seen.iter().any(|m| {
                                                m["params"]["type"] == "humanTask/settled"
                                                    && m["params"]["humanTaskId"] == task.as_str()
                                            })
                                        })
                                        .await;
                                    if got { "settled" } else { "pending" }
                                }
                                Some(_) => "pending",
                                None => {
                                    let index = host.cards.len() - 1;
                                    host.answer(index, actor, &decision).await
                                }
                            }
                        }
                    };
                    seen.insert(surface, outcome);
                }
            }
            "cancel" => {
                let cancelled = run
                    .runtime
                    .cancel_human_task(&run.thread, &run.task_id, "cancelled by the script")
                    .await;
                seen.insert(
                    "graph",
                    if cancelled.is_ok() {
                        "settled"
                    } else {
                        "rejected"
                    },
                );
                let task = run.task_id.clone();
                for (name, host) in &mut run.hosts {
                    let got = host
                        .wait(|h| {
                            h.seen.iter().any(|m| {
                                m["params"]["type"] == "humanTask/settled"
                                    && m["params"]["status"] == "cancelled"
                                    && m["params"]["humanTaskId"] == task.as_str()
                            })
                        })
                        .await;
                    seen.insert(name, if got { "settled" } else { "pending" });
                }
            }
            "restart" => seen = run.restart().await,
            "advance" => {
                let before = run.task().await;
                run.clock.advance(step["milliseconds"].as_u64().unwrap());
                tokio::time::sleep(Duration::from_millis(50)).await;
                let after = run.task().await;
                seen.insert(
                    "graph",
                    if after == before {
                        "settled"
                    } else {
                        "rejected"
                    },
                );
            }
            other => panic!("{name}: unknown action {other}"),
        }
        for (surface, expected) in step["expect"].as_object().unwrap() {
            assert_eq!(
                seen.get(surface.as_str()).copied(),
                expected.as_str(),
                "{name}, step {n} ({action}), surface {surface}"
            );
        }
    }

    // The end state, from the log and from what each host was sent.
    let task = run.task().await;
    if !task.is_open() && task.node_status() != "pending" {
        // A declined or cancelled task stops the turn: wait for its end to be recorded.
        for _ in 0..500 {
            if run.run_status().await != "running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let expected = &scenario["expected"];
    let graph = json!({
        "task_status": task.status.as_str(),
        "node_status": task.node_status(),
        "run_status": run.run_status().await,
        "decision_count": task.decisions.len(),
        "decision_kind": task.settling_decision().map(|d| d.decision.kind.as_str()),
    });
    assert_eq!(graph, expected["graph"], "{name}: graph");
    let winner = match task.settling_decision() {
        Some(d) if d.decision.kind.accepts() => "approve",
        Some(_) => "decline",
        None => task.status.as_str(),
    };
    let winner = if winner == "cancelled" {
        "cancel"
    } else {
        winner
    };
    assert_eq!(json!(winner), expected["winner"], "{name}: winner");
    for (name_of, host) in &run.hosts {
        let pending = host
            .cards
            .iter()
            .filter(|c| c.state == CardState::Live)
            .count();
        let got = if *name_of == "desktop" {
            json!({
                "pending_approvals": pending,
                "granted_events": host.granted_events,
                "interrupted_events": host.interrupted_events,
                "rejected_responses": host.rejected_responses,
            })
        } else {
            json!({
                "pending_approvals": pending,
                "sent_decisions": host.sent_decisions,
                "interrupts": host.interrupted_events,
                "rejected_responses": host.rejected_responses,
            })
        };
        assert_eq!(got, expected[*name_of], "{name}: {name_of}");
    }
}

fn script() -> Value {
    let path = agentwire_testkit::peer_fixture(
        "chainlesschain/fixtures/test/fixtures/human-task-settlement-conformance.json",
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn scenario(name: &str) -> Value {
    let script = script();
    assert_eq!(script["schema_version"], 1);
    script["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
        .clone()
}

#[test]
fn the_script_has_the_seven_scenarios_tested_here() {
    let names: Vec<String> = script()["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "decision-wins-duplicate-response",
            "cancel-wins-late-decision",
            "restart-recovers-durable-task-but-invalidates-transport-card",
            "decision-persists-across-restart",
            "quorum-requires-all-accepted-decisions",
            "separation-of-duties-rejects-repeat-actor",
            "decline-short-circuits-quorum",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_wins_duplicate_response() {
    run_scenario(&scenario("decision-wins-duplicate-response")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_wins_late_decision() {
    run_scenario(&scenario("cancel-wins-late-decision")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_recovers_durable_task_but_invalidates_transport_card() {
    run_scenario(&scenario(
        "restart-recovers-durable-task-but-invalidates-transport-card",
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_persists_across_restart() {
    run_scenario(&scenario("decision-persists-across-restart")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_requires_all_accepted_decisions() {
    run_scenario(&scenario("quorum-requires-all-accepted-decisions")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separation_of_duties_rejects_repeat_actor() {
    run_scenario(&scenario("separation-of-duties-rejects-repeat-actor")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_short_circuits_quorum() {
    run_scenario(&scenario("decline-short-circuits-quorum")).await;
}

/// After a restart a host that resumes the thread is sent the task again with its new nonce:
/// an answer carrying the nonce of the card it held before is refused naming the nonce, and
/// one carrying the new nonce settles the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_resuming_after_a_restart_gets_the_reissued_card_and_the_old_nonce_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let runtime = start_runtime(&dir, Arc::clone(&clock)).await;
    let face = AppServerFace::new(runtime.clone(), AppServerConfig::default());
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut host = Host::connect("desktop", &face).await;
    host.call("thread/resume", json!({"threadId": thread}))
        .await;
    runtime
        .start_turn(
            &thread,
            "turn-1",
            TurnInput {
                text: "/review hold".into(),
                attachments: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert!(host.wait(|h| h.live_card().is_some()).await);
    let old = host.cards[0].task.clone();
    let host = host.close().await;
    drop(host);

    let runtime = start_runtime(&dir, Arc::new(ManualClock::new(NOW + 1))).await;
    let face = AppServerFace::new(runtime.clone(), AppServerConfig::default());
    let mut host = Host::connect("desktop", &face).await;
    let resumed = host
        .call("thread/resume", json!({"threadId": thread}))
        .await;
    assert!(resumed.get("result").is_some(), "{resumed}");
    assert!(
        host.wait(|h| h.live_card().is_some()).await,
        "the reissued card"
    );
    let index = host.live_card().unwrap();
    let fresh = host.cards[index].task.clone();
    assert_eq!(fresh["id"], old["id"]);
    assert_ne!(fresh["nonce"], old["nonce"]);
    // The host answers with the card it held before the restart.
    host.cards[index].task = old;
    let approve = Decision::of(DecisionKind::AcceptOnce);
    assert_eq!(host.answer(index, "reviewer-1", &approve).await, "rejected");
    let refused = host
        .seen
        .iter()
        .rev()
        .find(|m| m["params"]["type"] == "humanTask/refused")
        .unwrap();
    assert_eq!(refused["params"]["code"], "humanTask.binding", "{refused}");
    assert!(
        refused["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("nonce")
    );
    assert!(
        runtime
            .human_task(&thread, fresh["id"].as_str().unwrap())
            .await
            .unwrap()
            .is_open()
    );
    // A new card is sent once the host attaches again; this one answers with the new nonce.
    let again = Host::connect("vscode", &face).await;
    let mut again = again;
    again
        .call("thread/resume", json!({"threadId": thread}))
        .await;
    assert!(again.wait(|h| h.live_card().is_some()).await);
    let index = again.live_card().unwrap();
    assert_eq!(again.answer(index, "reviewer-1", &approve).await, "settled");
    let task = runtime
        .human_task(&thread, fresh["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(task.node_status(), "pending");
}

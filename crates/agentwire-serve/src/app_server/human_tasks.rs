//! Durable human tasks on an App Server connection (feature `durable_human_task`): each open
//! task of a followed thread is sent as a card, the `humanTask/decide {task}` server request;
//! the host's reply is checked exactly (our schema's `HumanTaskDecideResult`: the task's binding
//! repeated, the actor and an `ApprovalDecision`, no other key; then `Decision::parse`) and
//! handed to the core, which checks the binding against the task and records the decision
//! once. A JSON-RPC response gets no answer, so the outcome of each reply is reported to the
//! connection that sent it as a `graph/event`, and a task's settlement to every connection
//! that follows its thread (docs/app-server.md, "Human tasks"):
//!
//! - `{type: "humanTask/decided", …}`: this connection's reply was recorded;
//! - `{type: "humanTask/refused", code, reason, …}`: this connection's reply was not (invalid,
//!   an error reply, a binding that is not the task's, a settled task, a repeat actor, or a
//!   response line that answers no pending card: a duplicate, a late answer to a withdrawn card,
//!   or a card of a runtime that has since restarted);
//! - `{type: "humanTask/settled", status, …}`: the task settled; its cards are withdrawn.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use agentwire_jsonrpc::{CallError, Id};
use agentwire_runtime::{Decision, HumanTaskAnswer, HumanTaskState, RuntimeError, ThreadEvent};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Session, lock, wire};
use crate::app_server::schema;

/// The feature a connection negotiates to be sent human tasks.
pub(super) const FEATURE: &str = "durable_human_task";

/// Card ids a connection remembers after they were answered or withdrawn (to tell a duplicate
/// or late reply from a stray line), and tasks whose settlement it announced.
const KEPT: usize = 1024;

/// The cards of one connection.
#[derive(Debug, Default)]
pub(super) struct Cards {
    /// Cards sent and not yet answered, by task: the thread and the hand to withdraw each.
    live: HashMap<String, Vec<(String, oneshot::Sender<()>)>>,
    /// Ids of cards answered or withdrawn, newest last.
    spent: VecDeque<String>,
    /// Tasks whose settlement this connection was told, newest last.
    announced: VecDeque<String>,
    announced_set: HashSet<String>,
}

/// Why a reply was not taken: a stable code and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) code: &'static str,
    pub(super) reason: String,
}

fn refusal(code: &'static str, reason: impl Into<String>) -> Refusal {
    Refusal {
        code,
        reason: reason.into(),
    }
}

/// Reads a host's reply to `humanTask/decide` exactly: our schema's `HumanTaskDecideResult`
/// (every key of the binding, `actorId`, `decision`, and nothing else), then the decision by
/// the core's rules. The binding's values are the core's to check against the task.
pub(super) fn read_reply(reply: &Value) -> Result<HumanTaskAnswer, Refusal> {
    schema::check("HumanTaskDecideResult", reply).map_err(|problems| {
        refusal(
            "humanTask.invalid-reply",
            format!(
                "the reply is not a HumanTaskDecideResult: {}",
                problems.replace("params", "result")
            ),
        )
    })?;
    let text = |name: &str| {
        reply
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let decision = Decision::parse(reply.get("decision").unwrap_or(&Value::Null))
        .map_err(|why| refusal("humanTask.invalid-reply", format!("the decision: {why}")))?;
    Ok(HumanTaskAnswer {
        task_id: text("humanTaskId"),
        run_id: text("runId"),
        revision_digest: text("revisionDigest"),
        operation_digest: text("operationDigest"),
        nonce: text("nonce"),
        actor_id: text("actorId"),
        decision,
    })
}

/// A core refusal as reported to the host.
fn core_refusal(error: &RuntimeError) -> Refusal {
    let code = match error {
        RuntimeError::HumanTaskNotFound(_) => "humanTask.not-found",
        RuntimeError::HumanTaskSettled { .. } => "humanTask.settled",
        RuntimeError::HumanTaskBinding { .. } => "humanTask.binding",
        RuntimeError::HumanTaskExpired(_) => "humanTask.expired",
        RuntimeError::HumanTaskRepeatActor { .. } => "humanTask.repeat-actor",
        RuntimeError::HumanTaskRefused { .. } => "humanTask.refused",
        RuntimeError::ThreadNotFound(_) => "humanTask.not-found",
        _ => "humanTask.internal",
    };
    refusal(code, error.to_string())
}

/// The task as the protocol's `HumanTask`.
pub(super) fn task_value(task: &HumanTaskState) -> Value {
    let t = &task.task;
    let decisions: Vec<Value> = task
        .decisions
        .iter()
        .map(|d| {
            json!({
                "actorId": d.actor_id,
                "decision": d.decision.to_value(),
                "decidedAt": wire::timestamp(d.decided_at_ms),
            })
        })
        .collect();
    let mut value = json!({
        "id": t.id,
        "runId": t.turn_id,
        "revisionDigest": t.revision_digest,
        "nodeId": t.node_id,
        "attemptId": t.attempt_id,
        "operationDigest": t.operation_digest,
        "operation": t.operation,
        "status": task.status.as_str(),
        "quorum": t.quorum,
        "separationOfDuties": t.separation_of_duties,
        "decisions": decisions,
        "nonce": t.nonce,
        "expiresAt": wire::timestamp(t.expires_at_ms),
        "createdAt": wire::timestamp(task.opened_at_ms),
        "updatedAt": wire::timestamp(task.updated_at_ms),
    });
    if let Some(reason) = &task.reason {
        value["reason"] = json!(reason.chars().take(1024).collect::<String>());
    }
    if let Some(last) = task.settling_decision() {
        value["decision"] = last.decision.to_value();
    }
    value
}

/// What a settlement or a recorded decision reports of the task.
fn summary(thread_id: &str, task: &HumanTaskState) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    out.insert("threadId".into(), json!(thread_id));
    out.insert("humanTaskId".into(), json!(task.task.id));
    out.insert("runId".into(), json!(task.task.turn_id));
    out.insert("nodeId".into(), json!(task.task.node_id));
    out.insert("status".into(), json!(task.status.as_str()));
    out.insert("nodeStatus".into(), json!(task.node_status()));
    out.insert("decisionCount".into(), json!(task.decisions.len()));
    out.insert("quorum".into(), json!(task.task.quorum));
    out.insert(
        "decision".into(),
        task.settling_decision()
            .map_or(Value::Null, |d| d.decision.to_value()),
    );
    out
}

/// A card's id as the JSON value the host saw, from its kept text.
fn request_id(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

fn remember(list: &mut VecDeque<String>, item: String) {
    list.push_back(item);
    while list.len() > KEPT {
        list.pop_front();
    }
}

impl Session {
    /// Whether this connection negotiated human tasks.
    fn takes_human_tasks(&self) -> bool {
        lock(&self.negotiated)
            .as_ref()
            .is_some_and(|n| n.features.contains(&FEATURE))
    }

    /// A human-task event of a followed thread: a task opened or reissued is sent as a card
    /// (when it is still open); a settled task is announced once and its cards withdrawn.
    pub(super) async fn human_task_event(self: &Arc<Self>, thread_id: &str, event: &ThreadEvent) {
        if !self.takes_human_tasks() {
            return;
        }
        let task_id = match event {
            ThreadEvent::HumanTaskOpened { task } => &task.id,
            ThreadEvent::HumanTaskDecided { task_id, .. }
            | ThreadEvent::HumanTaskCancelled { task_id, .. }
            | ThreadEvent::HumanTaskExpired { task_id, .. }
            | ThreadEvent::HumanTaskReissued { task_id, .. } => task_id,
            _ => return,
        };
        // The task as it is now: the event may be old news (a later one settled it).
        let Ok(task) = self.face.runtime.human_task(thread_id, task_id).await else {
            return;
        };
        if task.is_open() {
            if matches!(
                event,
                ThreadEvent::HumanTaskOpened { .. } | ThreadEvent::HumanTaskReissued { .. }
            ) {
                self.send_card(thread_id, &task).await;
            }
            return;
        }
        self.announce_settled(thread_id, &task).await;
    }

    /// Sends a card for each open task of a thread this connection just began to follow.
    pub(super) async fn send_open_cards(self: &Arc<Self>, thread_id: &str) {
        if !self.takes_human_tasks() {
            return;
        }
        let Ok(tasks) = self.face.runtime.human_tasks(thread_id).await else {
            return;
        };
        for task in tasks.iter().filter(|t| t.is_open()) {
            self.send_card(thread_id, task).await;
        }
    }

    /// `humanTask/settled` once per task, and its cards withdrawn.
    async fn announce_settled(&self, thread_id: &str, task: &HumanTaskState) {
        {
            let mut cards = lock(&self.human_tasks);
            if !cards.announced_set.insert(task.task.id.clone()) {
                return;
            }
            remember(&mut cards.announced, task.task.id.clone());
            if cards.announced.len() >= KEPT
                && let Some(oldest) = cards.announced.front().cloned()
            {
                cards.announced_set.remove(&oldest);
            }
            for (_, withdraw) in cards.live.remove(&task.task.id).unwrap_or_default() {
                let _ = withdraw.send(());
            }
        }
        let mut params = summary(thread_id, task);
        params.insert("type".into(), json!("humanTask/settled"));
        if let Some(reason) = &task.reason {
            params.insert("reason".into(), json!(reason));
        }
        self.notify("graph/event", Value::Object(params)).await;
    }

    /// Sends the card and waits, in its own task, for the reply, the task's settlement (the
    /// card is withdrawn) or the connection's end.
    async fn send_card(self: &Arc<Self>, thread_id: &str, task: &HumanTaskState) {
        let Some(peer) = self.peer.get() else {
            return;
        };
        {
            // One live card per task and connection (a task opened while the host attaches
            // is seen both ways).
            let mut cards = lock(&self.human_tasks);
            if cards.live.contains_key(&task.task.id) {
                return;
            }
            cards.live.insert(task.task.id.clone(), Vec::new());
        }
        let params = json!({"task": task_value(task)});
        let call = match peer.start_request("humanTask/decide", &params, None).await {
            Ok(call) => call,
            Err(error) => {
                tracing::warn!(%error, "a humanTask/decide request could not be written");
                lock(&self.human_tasks).live.remove(&task.task.id);
                return;
            }
        };
        // Kept by its text (a string id quoted, so `"7"` and `7` stay apart); reported as the
        // JSON id the host saw.
        let id = call.id().to_string();
        let (withdraw, withdrawn) = oneshot::channel();
        {
            let mut cards = lock(&self.human_tasks);
            if cards.announced_set.contains(&task.task.id) {
                // Settled while the card was written: withdrawn at once.
                remember(&mut cards.spent, id);
                return;
            }
            cards
                .live
                .entry(task.task.id.clone())
                .or_default()
                .push((id.clone(), withdraw));
        }
        let session = Arc::clone(self);
        let (thread_id, task_id) = (thread_id.to_owned(), task.task.id.clone());
        tokio::spawn(async move {
            let answer = tokio::select! {
                answer = call.answer() => answer,
                // Settled: the card is withdrawn; a later reply is an unknown response.
                _ = withdrawn => {
                    remember(&mut lock(&session.human_tasks).spent, id);
                    return;
                }
            };
            {
                let mut cards = lock(&session.human_tasks);
                if let Some(live) = cards.live.get_mut(&task_id) {
                    live.retain(|(card, _)| *card != id);
                    if live.is_empty() {
                        cards.live.remove(&task_id);
                    }
                }
                remember(&mut cards.spent, id.clone());
            }
            let reply = match answer {
                Ok(reply) => reply,
                Err(CallError::Closed) => return,
                Err(CallError::Remote(error)) => {
                    let why = refusal(
                        "humanTask.error-reply",
                        format!("the host answered with an error: {}", error.message),
                    );
                    session
                        .refused(&id, Some((&thread_id, &task_id)), &why)
                        .await;
                    return;
                }
                Err(other) => {
                    let why = refusal(
                        "humanTask.invalid-reply",
                        format!("the reply could not be read: {other}"),
                    );
                    session
                        .refused(&id, Some((&thread_id, &task_id)), &why)
                        .await;
                    return;
                }
            };
            session.take_reply(&id, &thread_id, &task_id, &reply).await;
        });
    }

    /// A reply to a card: read exactly, handed to the core, and its outcome reported.
    async fn take_reply(&self, id: &str, thread_id: &str, task_id: &str, reply: &Value) {
        let answer = match read_reply(reply) {
            Ok(answer) => answer,
            Err(why) => return self.refused(id, Some((thread_id, task_id)), &why).await,
        };
        // The card names the task it was sent for; an answer naming another is not its.
        if answer.task_id != task_id {
            let why = refusal(
                "humanTask.binding",
                format!(
                    "human task {task_id}: the answer's humanTaskId is {}",
                    answer.task_id
                ),
            );
            return self.refused(id, Some((thread_id, task_id)), &why).await;
        }
        let (actor_id, decision) = (answer.actor_id.clone(), answer.decision.to_value());
        match self.face.runtime.decide_human_task(thread_id, answer).await {
            Ok(task) => {
                let mut params = summary(thread_id, &task);
                params.insert("type".into(), json!("humanTask/decided"));
                params.insert("requestId".into(), request_id(id));
                params.insert("actorId".into(), json!(actor_id));
                params.insert("decision".into(), decision);
                self.notify("graph/event", Value::Object(params)).await;
            }
            Err(error) => {
                self.refused(id, Some((thread_id, task_id)), &core_refusal(&error))
                    .await;
            }
        }
    }

    /// `humanTask/refused` to this connection.
    async fn refused(&self, id: &str, task: Option<(&str, &str)>, why: &Refusal) {
        let mut params = json!({
            "type": "humanTask/refused",
            "requestId": request_id(id),
            "code": why.code,
            "reason": why.reason,
        });
        if let Some((thread_id, task_id)) = task {
            params["threadId"] = json!(thread_id);
            params["humanTaskId"] = json!(task_id);
        }
        self.notify("graph/event", params).await;
    }

    /// A response line whose id answers no pending request of this connection. On a
    /// connection that takes human tasks it is refused and reported: a duplicate of a
    /// card's answer, a late answer to a withdrawn card, or an answer to a card of a runtime
    /// that has since restarted (its ids are not this connection's). The face cannot tell what
    /// such a line meant to answer, so any stray response is reported this way.
    pub(super) async fn unmatched_response(&self, id: &Id) {
        if !self.takes_human_tasks() {
            return;
        }
        let id = id.to_string();
        let spent = lock(&self.human_tasks).spent.contains(&id);
        let reason = if spent {
            "the humanTask/decide request it answers was already answered, or withdrawn when its task settled"
        } else {
            "no humanTask/decide request of this id was sent on this connection (a card issued before the runtime restarted is not valid after it)"
        };
        self.refused(&id, None, &refusal("humanTask.not-pending", reason))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact() -> Value {
        json!({
            "humanTaskId": "task-1",
            "runId": "run-1",
            "revisionDigest": format!("sha256:{}", "a".repeat(64)),
            "operationDigest": format!("sha256:{}", "b".repeat(64)),
            "nonce": "nonce-1",
            "actorId": "reviewer-1",
            "decision": {"kind": "acceptOnce"},
        })
    }

    #[test]
    fn the_exact_reply_is_read_with_its_binding_and_decision() {
        let answer = read_reply(&exact()).unwrap();
        assert_eq!(answer.task_id, "task-1");
        assert_eq!(answer.nonce, "nonce-1");
        assert_eq!(answer.actor_id, "reviewer-1");
        assert!(answer.decision.kind.accepts());
    }

    #[test]
    fn a_card_is_a_valid_human_task_and_its_request_a_valid_message() {
        use agentwire_runtime::{DecisionKind, HumanTask, HumanTaskDecision, HumanTaskStatus};
        let digest = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let mut task = HumanTaskState {
            task: HumanTask {
                id: "task-1".into(),
                turn_id: "run-1".into(),
                node_id: "review".into(),
                attempt_id: "run-1:review:1".into(),
                revision_digest: digest('a'),
                operation_digest: digest('b'),
                operation: json!({"tool": "deploy"}),
                nonce: "nonce-1".into(),
                expires_at_ms: 1_700_000_000_000,
                quorum: 2,
                separation_of_duties: true,
            },
            status: HumanTaskStatus::Open,
            decisions: Vec::new(),
            reason: None,
            opened_at_ms: 1_700_000_000_000,
            updated_at_ms: 1_700_000_000_000,
            opened_position: 3,
        };
        schema::check("HumanTask", &task_value(&task)).unwrap();
        task.decisions.push(HumanTaskDecision {
            actor_id: "reviewer-1".into(),
            decision: Decision::of(DecisionKind::AcceptOnce),
            decided_at_ms: 1_700_000_000_001,
        });
        task.status = HumanTaskStatus::Cancelled;
        task.reason = Some("withdrawn".into());
        schema::check("HumanTask", &task_value(&task)).unwrap();
        let request = json!({"jsonrpc": "2.0", "id": "server:1", "method": "humanTask/decide",
            "params": {"task": task_value(&task)}});
        schema::check_message(&request).unwrap();
    }

    #[test]
    fn an_extra_key_is_refused() {
        let mut reply = exact();
        reply["comment"] = json!("lgtm");
        let why = read_reply(&reply).unwrap_err();
        assert_eq!(why.code, "humanTask.invalid-reply");
    }

    #[test]
    fn a_missing_binding_field_or_a_bad_decision_is_refused() {
        for field in [
            "humanTaskId",
            "runId",
            "revisionDigest",
            "operationDigest",
            "nonce",
            "actorId",
            "decision",
        ] {
            let mut reply = exact();
            reply.as_object_mut().unwrap().remove(field);
            assert_eq!(
                read_reply(&reply).unwrap_err().code,
                "humanTask.invalid-reply",
                "{field}"
            );
        }
        let mut reply = exact();
        reply["decision"] = json!({"kind": "acceptOnce", "permissions": []});
        assert!(read_reply(&reply).is_err());
        reply["decision"] = json!({"kind": "approve"});
        assert!(read_reply(&reply).is_err());
    }

    #[test]
    fn the_sdks_default_decline_is_refused_failing_closed() {
        let reply =
            json!({"kind": "decline", "reason": "No App Server request handler is configured"});
        let why = read_reply(&reply).unwrap_err();
        assert_eq!(why.code, "humanTask.invalid-reply");
        assert!(
            why.reason.contains("HumanTaskDecideResult"),
            "{}",
            why.reason
        );
    }

    #[test]
    fn a_wrong_nonce_reads_and_is_the_cores_to_refuse() {
        // The shape is right; the core compares the nonce with the task's and names it.
        let mut reply = exact();
        reply["nonce"] = json!("stale");
        assert_eq!(read_reply(&reply).unwrap().nonce, "stale");
        let error = RuntimeError::HumanTaskBinding {
            task_id: "task-1".into(),
            field: "nonce",
        };
        let why = core_refusal(&error);
        assert_eq!(why.code, "humanTask.binding");
        assert!(why.reason.contains("nonce"), "{}", why.reason);
    }
}

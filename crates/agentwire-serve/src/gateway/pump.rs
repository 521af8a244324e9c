//! What the runtime publishes, as gateway events: a run's text as `chat` deltas and its end as
//! `chat` final, error or aborted; its lifecycle, text and tools as `agent` events (each run
//! numbers its `chat` and its `agent` events from 1); approvals as `exec.approval.requested` and
//! `exec.approval.resolved`. One pump serves every connection: each event is encoded once and
//! numbered per connection as it is queued.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_runtime::{
    Interaction, InteractionKind, LiveEvent, Published, Resolution, ThreadEvent, Via,
};
use serde_json::{Value, json};

use super::GatewayFace;
use super::methods::AGENT_ID;

/// Runs followed at once; the oldest is forgotten past it (a run's numbering then restarts).
const MAX_RUNS: usize = 4096;

/// A run as the pump follows it.
#[derive(Debug, Default)]
struct Run {
    session_key: String,
    chat_seq: u64,
    agent_seq: u64,
    /// The text of its last completed message, sent with `chat` final.
    last_text: Option<String>,
}

/// The runs the pump follows, by turn id, the oldest forgotten first.
#[derive(Debug, Default)]
pub(super) struct Runs {
    runs: HashMap<String, Run>,
    order: std::collections::VecDeque<String>,
}

impl Runs {
    fn run(&mut self, face: &GatewayFace, thread_id: &str, turn_id: &str) -> &mut Run {
        if !self.runs.contains_key(turn_id) {
            if self.order.len() >= MAX_RUNS
                && let Some(old) = self.order.pop_front()
            {
                self.runs.remove(&old);
            }
            self.order.push_back(turn_id.to_owned());
        }
        self.runs
            .entry(turn_id.to_owned())
            .or_insert_with(|| new_run(face, thread_id))
    }

    /// The run of `turn_id`, no longer followed (a fresh one if it was not).
    fn end(&mut self, face: &GatewayFace, thread_id: &str, turn_id: &str) -> Run {
        self.order.retain(|t| t != turn_id);
        self.runs
            .remove(turn_id)
            .unwrap_or_else(|| new_run(face, thread_id))
    }
}

fn new_run(face: &GatewayFace, thread_id: &str) -> Run {
    Run {
        session_key: face.session_key(thread_id),
        ..Run::default()
    }
}

/// Forwards what the runtime publishes until the runtime stops.
pub(super) async fn run(face: Arc<GatewayFace>) {
    let mut subscription = face.runtime.subscribe();
    let mut runs = Runs::default();
    loop {
        let Some(published) = subscription.recv_until_stopped().await else {
            tracing::debug!("the gateway's event pump stopped");
            return;
        };
        // A run's events follow the answer that names it.
        let turn_id = match &published {
            Published::Live { turn_id, .. } => Some(turn_id.as_str()),
            Published::Durable { event, .. } => event.event.turn_id(),
        };
        if let Some(turn_id) = turn_id {
            face.until_announced(turn_id).await;
        }
        match published {
            Published::Live {
                thread_id,
                turn_id,
                event,
            } => live(&face, &mut runs, &thread_id, &turn_id, &event),
            Published::Durable {
                thread_id, event, ..
            } => durable(&face, &mut runs, &thread_id, &event.event, event.at_ms),
        }
    }
}

fn chat(face: &GatewayFace, turn_id: &str, run: &mut Run, fields: Value) {
    run.chat_seq += 1;
    let mut payload = json!({"runId": turn_id, "sessionKey": run.session_key, "agentId": AGENT_ID, "seq": run.chat_seq});
    merge(&mut payload, fields);
    let droppable = payload["state"] == "delta";
    face.broadcast("chat", &payload, droppable);
}

fn agent(face: &GatewayFace, turn_id: &str, run: &mut Run, stream: &str, data: Value) {
    run.agent_seq += 1;
    let payload = json!({"runId": turn_id, "seq": run.agent_seq, "stream": stream, "ts": face.now_ms(), "data": data});
    face.broadcast("agent", &payload, stream == "assistant");
}

fn merge(into: &mut Value, fields: Value) {
    if let (Value::Object(into), Value::Object(fields)) = (into, fields) {
        into.extend(fields);
    }
}

fn live(face: &GatewayFace, runs: &mut Runs, thread_id: &str, turn_id: &str, event: &LiveEvent) {
    if let LiveEvent::MessageDelta { delta, .. } = event {
        let run = runs.run(face, thread_id, turn_id);
        chat(
            face,
            turn_id,
            run,
            json!({"state": "delta", "deltaText": delta}),
        );
        agent(face, turn_id, run, "assistant", json!({"delta": delta}));
    }
}

fn durable(face: &GatewayFace, runs: &mut Runs, thread_id: &str, event: &ThreadEvent, at: u64) {
    match event {
        ThreadEvent::TurnStarted { turn_id, .. } => {
            let run = runs.run(face, thread_id, turn_id);
            agent(
                face,
                turn_id,
                run,
                "lifecycle",
                json!({"phase": "start", "startedAt": at}),
            );
        }
        ThreadEvent::MessageCompleted { turn_id, text, .. } => {
            runs.run(face, thread_id, turn_id).last_text = Some(text.clone());
        }
        ThreadEvent::OperationCompleted { turn_id, operation } => {
            let run = runs.run(face, thread_id, turn_id);
            let data = json!({
                "phase": "result",
                "name": operation.tool_name,
                "toolCallId": operation.tool_call_id,
                "isError": !matches!(operation.outcome.kind, agentwire_runtime::OutcomeKind::Success),
            });
            agent(face, turn_id, run, "tool", data);
        }
        ThreadEvent::TurnCompleted { turn_id } => {
            let mut run = runs.end(face, thread_id, turn_id);
            let text = run.last_text.take().unwrap_or_default();
            let message = json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": at});
            let chat_end = json!({"state": "final", "message": message, "stopReason": "end_turn"});
            let lifecycle = json!({"phase": "end", "endedAt": at});
            end_run(face, turn_id, run, chat_end, lifecycle);
        }
        ThreadEvent::TurnFailed {
            turn_id, message, ..
        } => {
            let run = runs.end(face, thread_id, turn_id);
            let chat_end = json!({"state": "error", "errorMessage": message});
            let lifecycle = json!({"phase": "error", "error": message, "endedAt": at});
            end_run(face, turn_id, run, chat_end, lifecycle);
        }
        ThreadEvent::TurnCancelled {
            turn_id, message, ..
        } => {
            let run = runs.end(face, thread_id, turn_id);
            let chat_end =
                json!({"state": "aborted", "errorMessage": message, "stopReason": "aborted"});
            let lifecycle = json!({"phase": "end", "aborted": true, "endedAt": at});
            end_run(face, turn_id, run, chat_end, lifecycle);
        }
        ThreadEvent::InteractionOpened { interaction }
            if matches!(interaction.ask, InteractionKind::Approval { .. }) =>
        {
            face.approval_opened(&interaction.id, thread_id, at);
            let key = face.session_key(thread_id);
            let payload = requested(interaction, &key, at);
            face.broadcast("exec.approval.requested", &payload, false);
        }
        ThreadEvent::InteractionResolved {
            interaction_id,
            approval_id: Some(_),
            resolution,
            via,
            ..
        } => {
            face.approval_closed(interaction_id);
            let (decision, by) = outcome(resolution, *via);
            let payload =
                json!({"id": interaction_id, "decision": decision, "resolvedBy": by, "ts": at});
            face.broadcast("exec.approval.resolved", &payload, false);
        }
        _ => {}
    }
}

/// A run's last `chat` event and its `agent` lifecycle end.
fn end_run(face: &GatewayFace, turn_id: &str, mut run: Run, chat_end: Value, lifecycle: Value) {
    chat(face, turn_id, &mut run, chat_end);
    agent(face, turn_id, &mut run, "lifecycle", lifecycle);
}

/// The `exec.approval.requested` payload of an approval of session `key`, opened at
/// `created_at_ms`.
pub(super) fn requested(interaction: &Interaction, key: &str, created_at_ms: u64) -> Value {
    let InteractionKind::Approval {
        tool_name,
        preview,
        agent_name,
        ..
    } = &interaction.ask
    else {
        return Value::Null;
    };
    let command = preview
        .get("command")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{tool_name} {preview}"), str::to_owned);
    json!({
        "id": interaction.id,
        "request": {
            "command": command,
            "agentId": agent_name,
            "sessionKey": key,
            "runId": interaction.turn_id,
            "host": "gateway",
        },
        "createdAtMs": created_at_ms,
        "expiresAtMs": interaction.expires_at_ms,
    })
}

/// The gateway decision an approval's settling stands for, and who or what settled it.
fn outcome(resolution: &Resolution, via: Option<Via>) -> (&'static str, &'static str) {
    let decision = match (resolution, via) {
        (Resolution::Approved, Some(Via::AcceptForSession | Via::SessionGrant)) => "allow-always",
        (Resolution::Approved, _) => "allow-once",
        _ => "deny",
    };
    let by = match (resolution, via) {
        (_, Some(via)) => via.as_str(),
        (Resolution::Expired, None) => "timeout",
        (_, None) => "cancelled",
    };
    (decision, by)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settlings_map_onto_the_three_decisions() {
        assert_eq!(
            outcome(&Resolution::Approved, Some(Via::AcceptOnce)),
            ("allow-once", "acceptOnce")
        );
        assert_eq!(
            outcome(&Resolution::Approved, Some(Via::SessionGrant)),
            ("allow-always", "sessionGrant")
        );
        assert_eq!(outcome(&Resolution::Expired, None), ("deny", "timeout"));
        assert_eq!(
            outcome(&Resolution::Rejected { reason: None }, Some(Via::Binding)),
            ("deny", "binding")
        );
    }
}

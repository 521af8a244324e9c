//! The built-in scripted demo agent: does what the turn's input command says (docs/agent.md),
//! through the same [`TurnContext`] calls any agent uses, and says the same thing every run.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::core::{
    Agent, HumanTaskOutcome, HumanTaskSpec, LiveEvent, RuntimeError, TurnContext, TurnEnd,
};
use crate::demo::DemoCommand;
use crate::event::{FailStage, InteractionKind, Operation, OutcomeKind, Resolution, ToolOutcome};

/// The name the demo agent reports for itself in tool calls and approvals.
pub const DEMO_AGENT_NAME: &str = "demo";

/// The demo agent.
#[derive(Debug, Clone)]
pub struct DemoAgent {
    /// The pause between the deltas of `/slow` (50 ms).
    pub slow_interval: Duration,
}

impl Default for DemoAgent {
    fn default() -> Self {
        DemoAgent {
            slow_interval: Duration::from_millis(50),
        }
    }
}

#[async_trait]
impl Agent for DemoAgent {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        match self.run(&turn).await {
            Ok(end) => end,
            Err(error) => TurnEnd::Failed {
                stage: FailStage::Execute,
                message: format!("the demo agent could not record its work: {error}"),
            },
        }
    }

    /// Its only turn that can be interrupted by a stop and run again is `/review`, which
    /// records nothing before its human task and finds the same task when run again.
    fn resumes_turns(&self) -> bool {
        true
    }
}

/// One tool call of a turn: its ids and what it shows.
struct ToolCall<'a> {
    index: u64,
    tool_name: &'a str,
    input: Value,
}

impl DemoAgent {
    async fn run(&self, turn: &TurnContext) -> Result<TurnEnd, RuntimeError> {
        match DemoCommand::parse(&turn.input().text) {
            DemoCommand::Echo { text } => reply(turn, &DemoCommand::echo_reply(&text)).await?,
            DemoCommand::Tool { name, input } => {
                let call = ToolCall {
                    index: 0,
                    tool_name: &name,
                    input,
                };
                let display = json!({"text": format!("{name} ran")});
                run_tool(turn, &call, success(), display, None, true).await?;
                reply(turn, &format!("The tool {name} ran.")).await?;
            }
            DemoCommand::Approve { command } => approve(turn, &command, 0).await?,
            DemoCommand::Repeat { times, command } => {
                for index in 0..times {
                    approve(turn, &command, index).await?;
                    if turn.is_cancelled() {
                        break;
                    }
                }
            }
            DemoCommand::Edit { path } => edit(turn, &path).await?,
            DemoCommand::Ask { question } => ask(turn, &question).await?,
            DemoCommand::Fail { stage } => {
                return Ok(TurnEnd::Failed {
                    stage,
                    message: format!("the turn failed at {} as asked", stage.as_str()),
                });
            }
            DemoCommand::Slow { deltas } => {
                let stream = stream_id(turn);
                turn.live(LiveEvent::MessageStarted {
                    stream_id: stream.clone(),
                });
                let mut text = String::new();
                for n in 1..=deltas {
                    if turn.is_cancelled() {
                        break;
                    }
                    tokio::time::sleep(self.slow_interval).await;
                    let delta = format!("{n} ");
                    text.push_str(&delta);
                    turn.live(LiveEvent::MessageDelta {
                        stream_id: stream.clone(),
                        delta,
                    });
                }
                turn.message(&stream, text).await?;
            }
            DemoCommand::Burst { operations } => {
                for index in 0..operations {
                    if turn.is_cancelled() {
                        break;
                    }
                    let call = ToolCall {
                        index,
                        tool_name: "burst",
                        input: json!({"n": index}),
                    };
                    let display = json!({"text": format!("burst {index}")});
                    run_tool(turn, &call, success(), display, None, false).await?;
                }
                reply(turn, &format!("Ran {operations} operations.")).await?;
            }
            DemoCommand::Big { bytes } => {
                let size = usize::try_from(bytes).unwrap_or(usize::MAX);
                turn.message(&stream_id(turn), "x".repeat(size)).await?;
            }
            DemoCommand::App => {
                let call = ToolCall {
                    index: 0,
                    tool_name: "weather",
                    input: json!({"city": "Lisbon"}),
                };
                let app_output = json!({
                    "descriptor": {"status": "available", "schemaId": "demo.weather", "schemaVersion": 1},
                    "result": {
                        "status": "available",
                        "schemaId": "demo.weather",
                        "schemaVersion": 1,
                        "remoteReadable": true,
                        "data": {"city": "Lisbon", "forecast": "sunny", "highC": 24},
                        "fallbackText": "Lisbon: sunny, 24 °C"
                    }
                });
                let display = json!({"text": "Lisbon: sunny, 24 °C"});
                run_tool(turn, &call, success(), display, Some(app_output), true).await?;
                reply(turn, "The weather app has a result.").await?;
            }
            DemoCommand::Review {
                quorum,
                separation_of_duties,
                hold,
            } => return review(turn, quorum, separation_of_duties, hold).await,
            DemoCommand::Usage { problem } => {
                reply(
                    turn,
                    &format!(
                        "{problem}. Commands: /tool NAME JSON, /approve COMMAND, /edit PATH, /ask QUESTION, /fail STAGE, /slow N, /burst N, /big BYTES, /app, /review [quorum=N] [sod] [hold]."
                    ),
                )
                .await?;
            }
        }
        Ok(TurnEnd::Completed)
    }
}

/// `/review`: a durable human task on a deployment, and what its outcome makes of the turn.
async fn review(
    turn: &TurnContext,
    quorum: u8,
    separation_of_duties: bool,
    hold: bool,
) -> Result<TurnEnd, RuntimeError> {
    let spec = HumanTaskSpec {
        node_id: "review".into(),
        operation: json!({"tool": "deploy", "target": "production", "agent": DEMO_AGENT_NAME}),
        quorum,
        separation_of_duties,
    };
    match turn.human_task(spec).await? {
        HumanTaskOutcome::Approved { decisions } => {
            if hold {
                // The gated step stays pending while the turn runs, until it is interrupted.
                turn.cancelled().await;
                return Ok(TurnEnd::Completed);
            }
            let actors: Vec<&str> = decisions.iter().map(|d| d.actor_id.as_str()).collect();
            reply(
                turn,
                &format!("Approved by {}; deploying.", actors.join(", ")),
            )
            .await?;
            Ok(TurnEnd::Completed)
        }
        HumanTaskOutcome::Declined { actor_id, reason } => Ok(TurnEnd::Failed {
            stage: FailStage::Execute,
            message: format!(
                "the review was declined by {actor_id}{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
        }),
        // The core cancels the turn with the task; it ends `turn.cancelled`.
        HumanTaskOutcome::Cancelled { .. } => Ok(TurnEnd::Completed),
        HumanTaskOutcome::Expired => Ok(TurnEnd::Failed {
            stage: FailStage::Execute,
            message: "the review expired undecided".into(),
        }),
    }
}

/// A new message stream's id (a UUID, as the protocols' `streamId` is).
fn stream_id(_turn: &TurnContext) -> String {
    uuid::Uuid::new_v4().to_string()
}

fn success() -> ToolOutcome {
    ToolOutcome {
        kind: OutcomeKind::Success,
        reason: None,
    }
}

/// Streams `text` word by word, then records it.
async fn reply(turn: &TurnContext, text: &str) -> Result<(), RuntimeError> {
    let stream = stream_id(turn);
    turn.live(LiveEvent::MessageStarted {
        stream_id: stream.clone(),
    });
    for delta in DemoCommand::deltas(text) {
        turn.live(LiveEvent::MessageDelta {
            stream_id: stream.clone(),
            delta: delta.to_owned(),
        });
    }
    turn.message(&stream, text.to_owned()).await
}

/// Runs one tool call: started, two stdout lines when `chatty`, then the recorded operation.
async fn run_tool(
    turn: &TurnContext,
    call: &ToolCall<'_>,
    outcome: ToolOutcome,
    display: Value,
    app_output: Option<Value>,
    chatty: bool,
) -> Result<(), RuntimeError> {
    let tool_call_id = format!("{}:call-{}", turn.turn_id(), call.index);
    if chatty {
        turn.live(LiveEvent::ToolStarted {
            tool_call_id: tool_call_id.clone(),
            agent_name: DEMO_AGENT_NAME.into(),
            tool_name: call.tool_name.into(),
            input: call.input.clone(),
        });
        if outcome.kind == OutcomeKind::Success {
            for line in [
                format!("{} starting\n", call.tool_name),
                format!("{} done\n", call.tool_name),
            ] {
                turn.live(LiveEvent::ToolOutput {
                    tool_call_id: tool_call_id.clone(),
                    agent_name: DEMO_AGENT_NAME.into(),
                    tool_name: call.tool_name.into(),
                    stream: "stdout".into(),
                    delta: line,
                });
            }
        }
    }
    turn.operation(Operation {
        id: uuid::Uuid::new_v4().to_string(),
        tool_call_id,
        agent_name: DEMO_AGENT_NAME.into(),
        tool_name: call.tool_name.into(),
        input: call.input.clone(),
        outcome,
        display,
        app_output,
    })
    .await
}

/// The outcome of a tool whose approval ended without `approved`.
fn refused(resolution: &Resolution) -> ToolOutcome {
    let (kind, reason) = match resolution {
        Resolution::Rejected { reason } => (
            OutcomeKind::UserRejected,
            reason
                .clone()
                .or_else(|| Some("the user rejected it".into())),
        ),
        Resolution::Expired => (
            OutcomeKind::UserRejected,
            Some("the approval expired".into()),
        ),
        Resolution::Cancelled { reason } => (OutcomeKind::Cancelled, Some(reason.clone())),
        // A form answer is not an approval: fail closed.
        Resolution::Submitted { .. } | Resolution::Approved => (
            OutcomeKind::PolicyDenied,
            Some("the approval was not granted".into()),
        ),
    };
    ToolOutcome { kind, reason }
}

fn approval(tool_name: &str, preview: Value) -> InteractionKind {
    InteractionKind::Approval {
        approval_id: uuid::Uuid::new_v4().to_string(),
        agent_name: DEMO_AGENT_NAME.into(),
        tool_name: tool_name.into(),
        preview,
        reason: None,
    }
}

/// Asks approval to run `command`, then runs it (as the turn's tool call `index`) or not.
async fn approve(turn: &TurnContext, command: &str, index: u64) -> Result<(), RuntimeError> {
    let preview = json!({"command": command, "explanation": DemoCommand::explanation(command)});
    let resolution = turn.ask(approval("shell", preview)).await?;
    let call = ToolCall {
        index,
        tool_name: "shell",
        input: json!({"command": command}),
    };
    if resolution == Resolution::Approved {
        let display = json!({"text": format!("$ {command}\n(ran in the demo sandbox)")});
        run_tool(turn, &call, success(), display, None, true).await?;
        reply(turn, &format!("Ran `{command}`.")).await
    } else {
        let outcome = refused(&resolution);
        let text = format!("Did not run `{command}`.");
        run_tool(turn, &call, outcome, json!({"text": text}), None, false).await?;
        if turn.is_cancelled() {
            return Ok(());
        }
        reply(turn, &text).await
    }
}

async fn edit(turn: &TurnContext, path: &str) -> Result<(), RuntimeError> {
    let diff = json!({
        "path": path,
        "change": "modify",
        "added": 1,
        "removed": 1,
        "hunks": 1,
        "unified": format!("--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old line\n+new line\n"),
        "truncated": false
    });
    let resolution = turn
        .ask(approval("edit_file", json!({"diff": diff.clone()})))
        .await?;
    let call = ToolCall {
        index: 0,
        tool_name: "edit_file",
        input: json!({"path": path}),
    };
    if resolution == Resolution::Approved {
        let display = json!({"text": format!("Edited {path}"), "diff": diff});
        run_tool(turn, &call, success(), display, None, true).await?;
        reply(turn, &format!("Edited {path}.")).await
    } else {
        let text = format!("Did not edit {path}.");
        run_tool(
            turn,
            &call,
            refused(&resolution),
            json!({"text": text}),
            None,
            false,
        )
        .await?;
        if turn.is_cancelled() {
            return Ok(());
        }
        reply(turn, &text).await
    }
}

/// The form of `/ask`: a required text answer and an optional single choice.
pub fn ask_controls(question: &str) -> Value {
    let label: String = question.chars().take(200).collect();
    json!([
        {"type": "text", "id": "answer", "label": label, "required": true},
        {"type": "choice", "id": "confidence", "label": "How sure are you?", "required": false,
         "multiple": false,
         "options": [{"id": "sure", "label": "Sure"}, {"id": "unsure", "label": "Not sure"}]}
    ])
}

async fn ask(turn: &TurnContext, question: &str) -> Result<(), RuntimeError> {
    let form = InteractionKind::UserInput {
        title: Some("A question from the demo agent".into()),
        description: None,
        controls: ask_controls(question),
    };
    let text = match turn.ask(form).await? {
        Resolution::Submitted { values } => {
            let answer = values
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| format!("{}={}", v["id"].as_str().unwrap_or_default(), v["value"]))
                .collect::<Vec<_>>()
                .join(", ");
            format!("You answered: {answer}")
        }
        Resolution::Expired => "The question expired unanswered.".to_owned(),
        Resolution::Cancelled { reason } => format!("The question was cancelled: {reason}"),
        Resolution::Approved | Resolution::Rejected { .. } => {
            "The question got no answer.".to_owned()
        }
    };
    if turn.is_cancelled() {
        return Ok(());
    }
    reply(turn, &text).await
}

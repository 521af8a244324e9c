//! Agent processes through the real runtime over a SQLite log: the example agent (written with
//! the generated Python bindings) runs a tool after an approval approved or rejected and answers
//! a form; an agent that crashes, exits early, hangs, writes garbage, writes an oversize line or
//! ignores a cancel fails only its turn; a missing command fails at `bootstrap`; an agent cannot
//! decide an approval; hand-written run events are repaired.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentwire_agent_process::{AgentProcess, AgentProcessConfig};
use agentwire_events::EventLog;
use agentwire_runtime::*;
use serde_json::{Value, json};

use agentwire_testkit::runtime::{input, is_turn_end, until};

/// `python3` from `PATH`, which every agent script of these tests runs on.
fn python3() -> String {
    match std::process::Command::new("python3")
        .arg("--version")
        .output()
    {
        Ok(out) if out.status.success() => "python3".to_owned(),
        Ok(out) => panic!(
            "python3 --version failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            panic!("python3 is not on PATH ({e}); the agent process tests run their agents on it")
        }
    }
}

fn example_agent() -> PathBuf {
    agentwire_testkit::repo_root().join("examples/agents/echo_agent.py")
}

fn moody_agent() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/moody_agent.py")
}

async fn runtime(dir: &tempfile::TempDir, agent: AgentProcess) -> Runtime {
    // The runtime log of a failing test is in its output (RUST_LOG=agentwire_agent_process=debug).
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let path = dir.path().join("events.db");
    let log: Arc<dyn EventLog> = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    Runtime::start(
        log,
        Arc::new(agent),
        Arc::new(SystemClock),
        RuntimeConfig::default(),
    )
    .await
    .unwrap()
}

/// The example agent, started from a command line as `--agent-cmd` gives it.
fn example() -> AgentProcess {
    let line = format!("{} '{}'", python3(), example_agent().display());
    AgentProcess::new(AgentProcessConfig::from_command_line(&line).unwrap()).unwrap()
}

/// The misbehaving agent, with small limits so that each failure comes quickly.
fn moody() -> AgentProcess {
    AgentProcess::new(AgentProcessConfig {
        argv: vec![python3(), moody_agent().display().to_string()],
        turn_timeout: Duration::from_secs(3),
        max_line_bytes: 1024,
        max_garbage_lines: 3,
        cancel_grace: Duration::from_millis(500),
        exit_grace: Duration::from_secs(2),
        ..AgentProcessConfig::default()
    })
    .unwrap()
}

fn is_waiting(event: &ThreadEvent) -> bool {
    matches!(
        event,
        ThreadEvent::TurnStatusChanged {
            status: TurnStatus::WaitingForUser,
            ..
        }
    )
}

fn durable(seen: &[Published]) -> Vec<ThreadEvent> {
    seen.iter()
        .filter_map(|p| match p {
            Published::Durable { event, .. } => Some(event.event.clone()),
            Published::Live { .. } => None,
        })
        .collect()
}

fn live(seen: &[Published]) -> Vec<LiveEvent> {
    seen.iter()
        .filter_map(|p| match p {
            Published::Live { event, .. } => Some(event.clone()),
            Published::Durable { .. } => None,
        })
        .collect()
}

/// Runs one turn to its end and returns what was published.
async fn turn(runtime: &Runtime, thread: &str, turn_id: &str, text: &str) -> Vec<Published> {
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(thread, turn_id, input(text))
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await
}

fn failure(seen: &[Published]) -> (FailStage, String) {
    match durable(seen).last() {
        Some(ThreadEvent::TurnFailed { stage, message, .. }) => (*stage, message.clone()),
        other => panic!("the turn did not fail: {other:?}"),
    }
}

/// The operations with their random ids blanked.
fn operations(state: &ThreadState) -> Vec<Operation> {
    state
        .operations
        .iter()
        .map(|o| Operation {
            id: String::new(),
            ..Operation::clone(o)
        })
        .collect()
}

fn texts(state: &ThreadState) -> Vec<String> {
    state
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| match p {
            MessagePart::Text { text } => text.clone(),
            MessagePart::Attachment(a) => format!("[{}]", a.display_name),
        })
        .collect()
}

/// Starts `/shell ls -la` on the example agent and answers its approval with `resolution`.
async fn shell_turn(resolution: Resolution) -> (Vec<Published>, Interaction, ThreadState) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, example()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/shell ls -la"))
        .await
        .unwrap();
    let mut seen = until(&mut rx, is_waiting).await;
    let interaction = durable(&seen)
        .into_iter()
        .find_map(|e| match e {
            ThreadEvent::InteractionOpened { interaction } => Some(interaction),
            _ => None,
        })
        .expect("an approval was opened");
    runtime
        .resolve(&thread, &interaction.id, resolution)
        .await
        .unwrap();
    seen.extend(until(&mut rx, is_turn_end).await);
    let state = runtime.snapshot(&thread).await.unwrap();
    (seen, interaction, state)
}

fn kinds(events: &[ThreadEvent]) -> Vec<&'static str> {
    events.iter().map(ThreadEvent::kind).collect()
}

#[tokio::test]
async fn the_example_agent_runs_its_tool_after_the_approval_is_approved() {
    let (seen, interaction, state) = shell_turn(Resolution::Approved).await;
    let events = durable(&seen);
    assert_eq!(
        kinds(&events),
        [
            "turn.started",
            "interaction.opened",
            "turn.status",
            "interaction.resolved",
            "turn.status",
            "operation.completed",
            "message.completed",
            "turn.completed"
        ]
    );
    match &interaction.ask {
        InteractionKind::Approval {
            agent_name,
            tool_name,
            preview,
            reason,
            ..
        } => {
            assert_eq!(agent_name, "echo");
            assert_eq!(tool_name, "shell");
            assert_eq!(
                preview,
                &json!({"command": "ls -la", "explanation": "Echoes the command; the example agent runs nothing."})
            );
            assert_eq!(
                reason.as_deref(),
                Some("shell commands need the user's approval")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(interaction.turn_id, "t1");
    let InteractionKind::Approval { approval_id, .. } = &interaction.ask else {
        unreachable!("matched above")
    };
    assert_eq!(
        events[3],
        ThreadEvent::InteractionResolved {
            interaction_id: interaction.id.clone(),
            turn_id: Some("t1".into()),
            approval_id: Some(approval_id.clone()),
            resolution: Resolution::Approved,
            via: Some(Via::AcceptOnce),
            decision: Some(Decision::of(DecisionKind::AcceptOnce)),
        }
    );
    assert_eq!(
        operations(&state),
        [Operation {
            id: String::new(),
            tool_call_id: "t1:call-1".into(),
            agent_name: "echo".into(),
            tool_name: "shell".into(),
            input: json!({"command": "ls -la"}),
            outcome: ToolOutcome {
                kind: OutcomeKind::Success,
                reason: None
            },
            display: json!({"text": "$ ls -la"}),
            app_output: None,
        }]
    );
    assert_eq!(texts(&state), ["/shell ls -la", "Echoed `ls -la`."]);
    assert_eq!(state.messages[1].turn_id, "t1");
    assert!(state.active_turn.is_none() && state.pending.is_empty());
    // Live: the tool started, its output, then the reply streamed word by word.
    assert_eq!(
        live(&seen),
        [
            LiveEvent::ToolStarted {
                tool_call_id: "t1:call-1".into(),
                agent_name: "echo".into(),
                tool_name: "shell".into(),
                input: json!({"command": "ls -la"}),
            },
            LiveEvent::ToolOutput {
                tool_call_id: "t1:call-1".into(),
                agent_name: "echo".into(),
                tool_name: "shell".into(),
                stream: "stdout".into(),
                delta: "$ ls -la\n".into(),
            },
            LiveEvent::MessageStarted {
                stream_id: agentwire_agent_process::message_stream_id("t1", "reply")
            },
            LiveEvent::MessageDelta {
                stream_id: agentwire_agent_process::message_stream_id("t1", "reply"),
                delta: "Echoed ".into()
            },
            LiveEvent::MessageDelta {
                stream_id: agentwire_agent_process::message_stream_id("t1", "reply"),
                delta: "`ls ".into()
            },
            LiveEvent::MessageDelta {
                stream_id: agentwire_agent_process::message_stream_id("t1", "reply"),
                delta: "-la`.".into()
            },
        ]
    );
}

#[tokio::test]
async fn a_rejected_approval_records_the_tool_user_rejected() {
    let (seen, _, state) = shell_turn(Resolution::Rejected {
        reason: Some("not on my machine".into()),
    })
    .await;
    assert_eq!(
        kinds(&durable(&seen)),
        [
            "turn.started",
            "interaction.opened",
            "turn.status",
            "interaction.resolved",
            "turn.status",
            "operation.completed",
            "message.completed",
            "turn.completed"
        ]
    );
    assert_eq!(
        operations(&state),
        [Operation {
            id: String::new(),
            tool_call_id: "t1:call-1".into(),
            agent_name: "echo".into(),
            tool_name: "shell".into(),
            input: json!({"command": "ls -la"}),
            outcome: ToolOutcome {
                kind: OutcomeKind::UserRejected,
                reason: Some("not on my machine".into())
            },
            display: json!({"text": "shell did not run: not on my machine"}),
            app_output: None,
        }]
    );
    assert_eq!(texts(&state), ["/shell ls -la", "Did not run `ls -la`."]);
    // No output of a tool that did not run.
    assert!(
        !live(&seen)
            .iter()
            .any(|e| matches!(e, LiveEvent::ToolOutput { .. }))
    );
}

#[tokio::test]
async fn a_form_answer_reaches_the_agent_and_a_plain_turn_echoes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, example()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "hello there").await;
    assert_eq!(
        kinds(&durable(&seen)),
        ["turn.started", "message.completed", "turn.completed"]
    );
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t2", input("/ask Which color?"))
        .await
        .unwrap();
    let opened = until(&mut rx, is_waiting).await;
    let form = durable(&opened)
        .into_iter()
        .find_map(|e| match e {
            ThreadEvent::InteractionOpened { interaction } => Some(interaction),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        form.ask,
        InteractionKind::UserInput {
            title: Some("A question from the example agent".into()),
            description: None,
            controls: json!([{"type": "text", "id": "answer", "label": "Which color?", "required": true}]),
        }
    );
    runtime
        .resolve(
            &thread,
            &form.id,
            Resolution::Submitted {
                values: json!([{"id": "answer", "value": "blue"}]),
            },
        )
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
    let state = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(
        texts(&state),
        [
            "hello there",
            "echo: hello there",
            "/ask Which color?",
            "You answered: blue"
        ]
    );
}

#[tokio::test]
async fn a_crashing_agent_fails_only_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "crash").await;
    assert_eq!(
        failure(&seen),
        (
            FailStage::Execute,
            "the agent exited with code 3 before turn.end; its standard error ends with: boom"
                .into()
        )
    );
    let seen = turn(&runtime, &thread, "t2", "quiet").await;
    assert_eq!(
        failure(&seen),
        (
            FailStage::Bootstrap,
            "the agent exited with code 0 before writing anything".into()
        )
    );
    // The runtime goes on: the next turn runs fine.
    let seen = turn(&runtime, &thread, "t3", "again").await;
    assert_eq!(
        kinds(&durable(&seen)),
        ["turn.started", "message.completed", "turn.completed"]
    );
    let state = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(
        texts(&state).last().map(String::as_str),
        Some("fine: again")
    );
}

#[tokio::test]
async fn a_hanging_agent_is_killed_at_the_turn_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let started = std::time::Instant::now();
    let seen = turn(&runtime, &thread, "t1", "hang").await;
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        failure(&seen),
        (
            FailStage::Execute,
            "the agent did not end the turn within 3s; it was killed".into()
        )
    );
    let seen = turn(&runtime, &thread, "t2", "after").await;
    assert!(matches!(
        durable(&seen).last(),
        Some(ThreadEvent::TurnCompleted { .. })
    ));
}

#[tokio::test]
async fn an_agent_writing_garbage_or_an_oversize_line_fails_only_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "garbage").await;
    assert_eq!(
        failure(&seen),
        (
            FailStage::Execute,
            "the agent wrote 4 lines that are not agent protocol messages (more than the 3 \
             allowed); the last, line 4: a run event that cannot be repaired: type missing: not \
             guessing what the line is"
                .into()
        )
    );
    let seen = turn(&runtime, &thread, "t2", "huge").await;
    let line = json!({"type": "message.delta", "delta": "x".repeat(2000)});
    // Python's json.dumps writes a space after each `:` and `,`.
    let length = serde_json::to_string(&line).unwrap().len() + 3;
    assert_eq!(
        failure(&seen),
        (
            FailStage::Execute,
            format!("the agent wrote a line of {length} bytes (line 1), over the 1024-byte limit")
        )
    );
    let seen = turn(&runtime, &thread, "t3", "after").await;
    assert!(matches!(
        durable(&seen).last(),
        Some(ThreadEvent::TurnCompleted { .. })
    ));
}

#[tokio::test]
async fn a_missing_command_fails_at_bootstrap() {
    let dir = tempfile::tempdir().unwrap();
    let agent = AgentProcess::new(
        AgentProcessConfig::from_command_line("agentwire-no-such-agent --flag").unwrap(),
    )
    .unwrap();
    let runtime = runtime(&dir, agent).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "hi").await;
    assert_eq!(kinds(&durable(&seen)), ["turn.started", "turn.failed"]);
    assert_eq!(
        failure(&seen),
        (
            FailStage::Bootstrap,
            "cannot start the agent command `agentwire-no-such-agent`: No such file or directory \
             (os error 2)"
                .into()
        )
    );
}

#[tokio::test]
async fn an_agent_never_decides_an_approval_itself() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("claims"))
        .await
        .unwrap();
    let opened = until(&mut rx, is_waiting).await;
    // The agent claimed approval three ways; the interaction still waits for the host.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = runtime.snapshot(&thread).await.unwrap();
    assert_eq!(waiting.pending.len(), 1);
    assert_eq!(
        kinds(&durable(&opened)),
        ["turn.started", "interaction.opened", "turn.status"]
    );
    let id = waiting.pending.keys().next().unwrap().clone();
    runtime
        .resolve(&thread, &id, Resolution::Approved)
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
    let state = runtime.snapshot(&thread).await.unwrap();
    // The host approved: the agent's claim of a user rejection is ignored.
    assert_eq!(
        operations(&state),
        [Operation {
            id: String::new(),
            tool_call_id: "t1:c1".into(),
            agent_name: "agent".into(),
            tool_name: "deploy".into(),
            input: json!({"to": "prod"}),
            outcome: ToolOutcome {
                kind: OutcomeKind::ToolFailed,
                reason: Some("the user said no".into())
            },
            display: json!({"text": "deploy failed: the user said no"}),
            app_output: None,
        }]
    );
    assert_eq!(
        texts(&state).last().map(String::as_str),
        Some("decision: approve")
    );
}

#[tokio::test]
async fn hand_written_run_events_are_repaired_and_unknown_ones_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "messy").await;
    assert_eq!(
        kinds(&durable(&seen)),
        [
            "turn.started",
            "operation.completed",
            "message.completed",
            "turn.completed"
        ]
    );
    let state = runtime.snapshot(&thread).await.unwrap();
    // The call had no callId: it is identified by the id the coercer gave its event.
    assert_eq!(
        operations(&state),
        [Operation {
            id: String::new(),
            tool_call_id: "t1:e_2".into(),
            agent_name: "agent".into(),
            tool_name: "grep".into(),
            input: json!({"q": "x"}),
            outcome: ToolOutcome {
                kind: OutcomeKind::Success,
                reason: None
            },
            display: json!({"text": "grep ran"}),
            app_output: None,
        }]
    );
    assert!(durable(&seen).iter().any(|e| matches!(
        e,
        ThreadEvent::MessageCompleted { stream_id, text, .. }
            if *stream_id == agentwire_agent_process::message_stream_id("t1", "summary") && text == "messy done"
    )));
}

#[tokio::test]
async fn a_cancelled_turn_tells_the_agent_then_kills_one_that_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, moody()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("stubborn"))
        .await
        .unwrap();
    // Give the agent time to start before cancelling.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(runtime.cancel_turn(&thread, "t1").await.unwrap());
    let seen = until(&mut rx, is_turn_end).await;
    assert!(matches!(
        durable(&seen).last(),
        Some(ThreadEvent::TurnCancelled { .. })
    ));
    // The example agent stops when told.
    let dir = tempfile::tempdir().unwrap();
    let runtime = self::runtime(&dir, example()).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("/shell make"))
        .await
        .unwrap();
    until(&mut rx, is_waiting).await;
    assert!(runtime.cancel_turn(&thread, "t1").await.unwrap());
    let seen = until(&mut rx, is_turn_end).await;
    let events = durable(&seen);
    assert!(matches!(
        events.last(),
        Some(ThreadEvent::TurnCancelled { .. })
    ));
    let state = runtime.snapshot(&thread).await.unwrap();
    // The call it began is recorded cancelled, never left running.
    assert_eq!(state.operations.len(), 1);
    assert_eq!(state.operations[0].outcome.kind, OutcomeKind::Cancelled);
    assert!(state.pending.is_empty() && state.active_turn.is_none());
}

#[test]
fn the_example_agent_passes_mypy_strict_against_the_bindings() {
    let bindings = agentwire_testkit::repo_root().join("protocols/agent/generated/py");
    let output = agentwire_testkit::require_mypy()
        .env("MYPYPATH", &bindings)
        .arg("--strict")
        .arg(example_agent())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "mypy --strict {}:\n{}",
        example_agent().display(),
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn the_agent_protocol_fixtures_have_the_verdicts_their_names_say() {
    let document = agentwire_schema::SchemaDocument::from_slice(
        agentwire_agent_process::AGENT_SCHEMA_TEXT.as_bytes(),
    )
    .unwrap();
    assert!(
        document.canonical_text(true) == agentwire_agent_process::AGENT_SCHEMA_TEXT,
        "the schema is not in canonical text: run `agentwire fmt --newline protocols/agent/agent.schema.json`"
    );
    let lint = agentwire_schema::lint(&document);
    assert!(
        lint.iter()
            .all(|f| f.severity != agentwire_schema::Severity::Error),
        "{lint:?}"
    );
    let validator = document.validator().unwrap();
    let fixtures = agentwire_testkit::files_with_extension(
        agentwire_testkit::repo_root().join("protocols/agent/fixtures"),
        "json",
    );
    assert!(fixtures.len() >= 20);
    for path in fixtures {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let value: Value = agentwire_testkit::read_json(&path);
        let issues = validator.validate(&value);
        if name.starts_with("valid-") {
            assert!(issues.is_empty(), "{name}: {issues:?}");
        } else {
            assert!(name.starts_with("invalid-"), "{name}");
            assert!(!issues.is_empty(), "{name} is valid");
        }
    }
}

/// The run events of the agent protocol are TaskLens's: every payload property and required
/// field of each TaskLens definition is in the agent protocol's definition of the same name.
#[test]
fn the_run_events_agents_write_are_the_tasklens_events() {
    let agent: Value = serde_json::from_str(agentwire_agent_process::AGENT_SCHEMA_TEXT).unwrap();
    let tasklens: Value = serde_json::from_str(agentwire_runlog::SCHEMA_TEXT).unwrap();
    let names = [
        "RunStart",
        "RunDone",
        "RunError",
        "RunPaused",
        "Plan",
        "StepStart",
        "StepProgress",
        "StepDone",
        "StepError",
        "ToolCall",
        "ToolResult",
        "RetryRequest",
    ];
    for name in names {
        let theirs = &tasklens["$defs"][name];
        let ours = &agent["$defs"][name]["allOf"][1];
        for (property, schema) in theirs["properties"].as_object().unwrap() {
            assert_eq!(&ours["properties"][property], schema, "{name}.{property}");
        }
        let mut required: Vec<&Value> = ours["required"].as_array().unwrap().iter().collect();
        required.retain(|r| *r != "type");
        let theirs_required: Vec<&Value> = theirs["required"]
            .as_array()
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        assert_eq!(required, theirs_required, "{name}");
    }
    for shared in ["ErrorInfo", "PlanStep", "NonEmptyString"] {
        assert_eq!(
            agent["$defs"][shared], tasklens["$defs"][shared],
            "{shared}"
        );
    }
}

/// The fenced blocks of one language in docs/agent.md, in order.
fn doc_blocks(language: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(agentwire_testkit::repo_root().join("docs/agent.md")).unwrap();
    let fence = format!("```{language}\n");
    let mut blocks = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```\n").expect("a closed block");
        blocks.push(body[..end].to_owned());
        rest = &body[end..];
    }
    blocks
}

#[test]
fn the_documented_example_agent_is_the_committed_one() {
    let committed = std::fs::read_to_string(example_agent()).unwrap();
    assert_eq!(
        doc_blocks("python"),
        [committed],
        "docs/agent.md must quote examples/agents/echo_agent.py whole"
    );
}

#[test]
fn every_documented_message_is_valid() {
    let document = agentwire_schema::SchemaDocument::from_slice(
        agentwire_agent_process::AGENT_SCHEMA_TEXT.as_bytes(),
    )
    .unwrap();
    let validator = document.validator().unwrap();
    let lines: Vec<String> = doc_blocks("json")
        .iter()
        .flat_map(|b| b.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert!(lines.len() >= 15, "{lines:?}");
    for line in lines {
        let value = agentwire_schema::parse_json(line.as_bytes()).unwrap();
        let issues = validator.validate(&value);
        assert!(issues.is_empty(), "{line}: {issues:?}");
    }
}

/// An agent with `script` (Python) as its program, with `timeout` to end a turn.
fn scripted(script: &str, timeout: Duration) -> AgentProcess {
    AgentProcess::new(AgentProcessConfig {
        argv: vec![python3(), "-c".into(), script.into()],
        turn_timeout: timeout,
        exit_grace: Duration::from_secs(1),
        ..AgentProcessConfig::default()
    })
    .unwrap()
}

/// Whether process `pid` runs (present and not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// An agent (Python) that starts `sleep 300`, writes its pid to `pidfile`, then waits.
fn spawning_sleep(pidfile: &std::path::Path) -> String {
    format!(
        "import subprocess, sys, time\n\
         child = subprocess.Popen(['sleep', '300'])\n\
         open({:?}, 'w').write(str(child.pid))\n\
         sys.stdin.readline()\n\
         time.sleep(300)\n",
        pidfile.display().to_string()
    )
}

/// Fails (killing it) unless the agent's child `pid` is gone within 5 s of `what` ending.
fn assert_gone(pid: i32, what: &str) {
    let started = std::time::Instant::now();
    while running(pid) {
        if started.elapsed() > Duration::from_secs(5) {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            panic!("the agent's child {pid} outlived {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An agent killed at the turn timeout takes what it started with it: its process group is
/// killed, so no child outlives the turn holding its pipes.
#[tokio::test]
async fn what_an_agent_started_is_killed_with_it_at_the_turn_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = spawning_sleep(&pidfile);
    let runtime = runtime(&dir, scripted(&script, Duration::from_secs(1))).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let seen = turn(&runtime, &thread, "t1", "hang").await;
    assert_eq!(
        failure(&seen),
        (
            FailStage::Bootstrap,
            "the agent did not end the turn within 1s; it was killed".into()
        )
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(pid, "the turn");
}

/// Runs one turn of the agent `script`, rejects ("no") the approval it asks `after` it was
/// asked, and returns the outcomes of the turn's operations once the turn ended.
async fn rejected_outcomes(script: &str, after: Duration) -> Vec<ToolOutcome> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, scripted(script, Duration::from_secs(30))).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let mut rx = runtime.subscribe();
    runtime
        .start_turn(&thread, "t1", input("go"))
        .await
        .unwrap();
    let seen = until(&mut rx, |e| {
        matches!(e, ThreadEvent::InteractionOpened { .. })
    })
    .await;
    let Some(ThreadEvent::InteractionOpened { interaction }) = durable(&seen).last().cloned()
    else {
        panic!("no approval asked")
    };
    tokio::time::sleep(after).await;
    runtime
        .resolve(
            &thread,
            &interaction.id,
            Resolution::Rejected {
                reason: Some("no".into()),
            },
        )
        .await
        .unwrap();
    until(&mut rx, is_turn_end).await;
    let state = runtime.snapshot(&thread).await.unwrap();
    operations(&state).into_iter().map(|o| o.outcome).collect()
}

/// A tool result the agent reports before the host decided the call's approval cannot be a
/// success, whatever the host decides next (here a rejection): the call did not run with it.
#[tokio::test]
async fn a_result_reported_before_the_approval_is_decided_is_not_a_success() {
    const SCRIPT: &str = r#"
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
json.loads(sys.stdin.readline())
send({"type": "tool:call", "stepId": "s", "callId": "c1", "name": "shell", "args": {"command": "ls"}})
send({"type": "approval.request", "requestId": "r1", "callId": "c1", "toolName": "shell", "preview": {"command": "ls"}})
send({"type": "tool:result", "callId": "c1", "ok": True})
while json.loads(sys.stdin.readline()).get("type") != "approval.decision":
    pass
send({"type": "turn.end", "status": "completed"})
"#;
    // The result line is read before the decision is taken.
    let outcomes = rejected_outcomes(SCRIPT, Duration::from_millis(300)).await;
    assert_eq!(
        outcomes,
        [ToolOutcome {
            kind: OutcomeKind::PolicyDenied,
            reason: Some("the agent reported the result before its approval was decided".into()),
        }]
    );
}

/// What a turn keeps of its run events is bounded in bytes: 200 events with 1 MiB ids leave
/// the process's memory where it was (an id over 256 bytes is replaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_event_ids_are_bounded_in_bytes() {
    const SCRIPT: &str = r#"
import sys, time
sys.stdin.readline()
pad = "x" * (1024 * 1024)
for i in range(200):
    sys.stdout.write('{"type":"note","id":"%d%s"}\n' % (i, pad))
sys.stdout.write('{"type":"turn.end","status":"completed"}\n')
sys.stdout.flush()
"#;
    fn rss_mib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            / 1024
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir, scripted(SCRIPT, Duration::from_secs(120))).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let before = rss_mib();
    let seen = turn(&runtime, &thread, "t1", "go").await;
    assert!(matches!(
        durable(&seen).last(),
        Some(ThreadEvent::TurnCompleted { .. })
    ));
    let after = rss_mib();
    assert!(
        after.saturating_sub(before) < 128,
        "one turn of 200 events holds {} MiB",
        after - before
    );
}

/// A runtime that stops while an agent works (its tasks dropped, as on Ctrl-C) takes the agent
/// and what it started with it: the agent's process group is killed when its turn is dropped.
#[test]
fn what_an_agent_started_goes_when_the_runtime_stops_mid_turn() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = spawning_sleep(&pidfile);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let runtime = runtime(&dir, scripted(&script, Duration::from_secs(300))).await;
        let thread = runtime.create_thread(None, None).await.unwrap();
        runtime
            .start_turn(&thread, "t1", input("go"))
            .await
            .unwrap();
        let started = std::time::Instant::now();
        while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the agent never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(running(pid));
    drop(tokio);
    assert_gone(pid, "the runtime");
}

/// An agent that exits without `turn.end` while a process it started still holds its standard
/// output fails its turn when it exits, not at the turn timeout: what it left running is killed
/// with it, and the lines it wrote before exiting are still read.
#[tokio::test]
async fn an_agent_that_exits_while_its_child_holds_its_output_ends_the_turn_at_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!(
        "import json, subprocess, sys\n\
         child = subprocess.Popen(['sleep', '300'])\n\
         open({:?}, 'w').write(str(child.pid))\n\
         sys.stdin.readline()\n\
         sys.stdout.write(json.dumps({{'type': 'message.delta', 'delta': 'partial'}}) + '\\n')\n\
         sys.stdout.flush()\n\
         sys.exit(3)\n",
        pidfile.display().to_string()
    );
    let runtime = runtime(&dir, scripted(&script, Duration::from_secs(120))).await;
    let thread = runtime.create_thread(None, None).await.unwrap();
    let started = std::time::Instant::now();
    let seen = turn(&runtime, &thread, "t1", "go").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the turn ended after {:?}",
        started.elapsed()
    );
    assert_eq!(
        failure(&seen),
        (
            FailStage::Execute,
            "the agent exited with code 3 before turn.end".into()
        )
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(pid, "the agent");
}

/// A decision on an approval the agent asked before it announced the call applies to that
/// call: a rejected call whose result the agent reports as a success is recorded rejected.
#[tokio::test]
async fn an_approval_asked_before_its_call_still_decides_the_call() {
    const SCRIPT: &str = r#"
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
json.loads(sys.stdin.readline())
send({"type": "approval.request", "requestId": "r1", "callId": "c1", "toolName": "shell", "preview": {"command": "rm -rf /tmp/x"}})
while json.loads(sys.stdin.readline()).get("type") != "approval.decision":
    pass
send({"type": "tool:call", "stepId": "s", "callId": "c1", "name": "shell", "args": {"command": "rm -rf /tmp/x"}})
send({"type": "tool:result", "callId": "c1", "ok": True})
send({"type": "turn.end", "status": "completed"})
"#;
    let outcomes = rejected_outcomes(SCRIPT, Duration::ZERO).await;
    assert_eq!(
        outcomes,
        [ToolOutcome {
            kind: OutcomeKind::UserRejected,
            reason: Some("no".into()),
        }]
    );
}

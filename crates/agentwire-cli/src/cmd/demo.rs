//! `agentwire demo`: the whole system end to end on one machine with nothing to install. It
//! starts the reference runtime on the embedded SQLite store, connects a Roll host to its Roll
//! face (the same face `agentwire serve --stdio` runs, here over an in-process pipe), drives
//! turns through it — an approval included, answered by the host — and prints what happened as
//! a timeline.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire_client::roll::{
    ClientEvent, ClientOptions, InitializeOptions, Interactions, RollClient,
};
use agentwire_roll::approval::ApprovalDecision;
use agentwire_roll::types::TurnInput;
use agentwire_roll::user_input::{SubmittedValue, UserInputResult};
use agentwire_runlog::terminal_safe;
use anyhow::Context;
use serde_json::{Value, json};

use crate::cmd::serve::{RuntimeArgs, init_logging, store_url};
use crate::output::Format;

/// The turns run when none are given: a greeting, then a shell command the host approves.
const DEFAULT_INPUTS: [&str; 2] = ["Hello, agentwire", "/approve ls -la"];
/// How long one turn may take before the demo gives up on it.
const TURN_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The event log: `sqlite:PATH` or `postgres://…` (default: the embedded SQLite file in the
    /// state directory, as `serve` uses).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// A turn input to run (repeat for several; default: a greeting and `/approve ls -la`).
    #[arg(long = "input", value_name = "TEXT")]
    inputs: Vec<String>,
    /// The host rejects approvals instead of approving them.
    #[arg(long)]
    reject: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// One line of the timeline.
#[derive(Debug, Clone)]
struct Entry {
    at: Duration,
    turn: usize,
    what: String,
    detail: String,
    envelope: Option<Value>,
}

#[derive(Debug, Default)]
struct Timeline {
    started: Option<Instant>,
    turn: usize,
    entries: Vec<Entry>,
    /// The turns whose `turn.started` the timeline shows.
    turns_shown: std::collections::HashSet<String>,
    /// Signalled when a turn's `turn.started` is shown.
    shown: Arc<tokio::sync::Notify>,
}

impl Timeline {
    fn push(&mut self, what: &str, detail: String, envelope: Option<Value>) {
        let at = self.started.map_or(Duration::ZERO, |s| s.elapsed());
        self.entries.push(Entry {
            at,
            turn: self.turn,
            what: what.to_owned(),
            detail,
            envelope,
        });
    }
}

fn lock(timeline: &Mutex<Timeline>) -> std::sync::MutexGuard<'_, Timeline> {
    timeline
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The host's answers: approve (or reject) every approval, fill every form with its first
/// choices.
fn interactions(timeline: &Arc<Mutex<Timeline>>, reject: bool) -> Interactions {
    let approvals = Arc::clone(timeline);
    let forms = Arc::clone(timeline);
    Interactions::new()
        .on_approval(move |request| {
            let timeline = Arc::clone(&approvals);
            async move {
                let approval = request.approval();
                // The host's lines follow the turn's start: the server request arrives after
                // it on the wire, but is handled apart from the event stream.
                shown_started(&timeline, approval.turn_id.as_str()).await;
                let preview = serde_json::to_value(&approval.preview).unwrap_or(Value::Null);
                let command = text(&preview, "command");
                let explanation = text(&preview, "explanation");
                let mut timeline = lock(&timeline);
                timeline.push(
                    "approval asked",
                    format!(
                        "{} wants {}: {} ({})",
                        approval.agent_name, approval.tool_name, command, explanation
                    ),
                    None,
                );
                if reject {
                    timeline.push("host rejects", String::new(), None);
                    Ok(ApprovalDecision::Reject {
                        reason: Some("the demo host rejects".into()),
                    })
                } else {
                    timeline.push("host approves", String::new(), None);
                    Ok(ApprovalDecision::Approve {})
                }
            }
        })
        .on_user_input(move |form| {
            let timeline = Arc::clone(&forms);
            async move {
                shown_started(&timeline, form.params.turn_id.as_str()).await;
                let controls = serde_json::to_value(&form.params.controls).unwrap_or(Value::Null);
                let values: Vec<SubmittedValue> = controls
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|control| {
                        let id = text(control, "id");
                        let value = match control.get("type").and_then(Value::as_str)? {
                            "text" | "multiline" => json!("demo answer"),
                            "number" => json!(control.get("min").cloned().unwrap_or(json!(1))),
                            "boolean" => json!(true),
                            "choice" => {
                                let first = control.pointer("/options/0/id")?.clone();
                                if control.get("multiple") == Some(&Value::Bool(true)) {
                                    json!([first])
                                } else {
                                    first
                                }
                            }
                            _ => return None,
                        };
                        Some(SubmittedValue { id, value })
                    })
                    .collect();
                lock(&timeline).push(
                    "host answers form",
                    format!("{} value(s)", values.len()),
                    None,
                );
                Ok(UserInputResult::Submitted { values })
            }
        })
}

/// Waits until the timeline shows the start of `turn_id`.
async fn shown_started(timeline: &Arc<Mutex<Timeline>>, turn_id: &str) {
    loop {
        let shown = Arc::clone(&lock(timeline).shown);
        let notified = shown.notified();
        if lock(timeline).turns_shown.contains(turn_id) {
            return;
        }
        notified.await;
    }
}

/// What the timeline says of one event (`None`: not shown on its own line).
fn describe(event: &Value, deltas: &mut usize) -> Option<(String, String)> {
    let kind = text(event, "type");
    let detail = match kind.as_str() {
        "message.delta" => {
            *deltas += 1;
            return None;
        }
        "message.started" => {
            *deltas = 0;
            return None;
        }
        "message.completed" => {
            let shown = format!("{} ({} deltas streamed)", text(event, "text"), deltas);
            *deltas = 0;
            shown
        }
        "tool.started" => format!("{} {}", text(event, "toolName"), event["input"]),
        "tool.output" => format!(
            "{} {}: {}",
            text(event, "toolName"),
            text(event, "stream"),
            text(event, "delta").trim_end()
        ),
        "tool.completed" => {
            let display = event.get("display");
            let shown = display
                .and_then(|d| d.get("text"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_default();
            format!(
                "{} {} — {}",
                text(event, "toolName"),
                event
                    .pointer("/outcome/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("done"),
                shown
            )
        }
        // The host's own lines say it (the server request comes before this view-only event).
        "approval.required" => return None,
        "approval.resolved" => {
            let resolution = &event["resolution"];
            let status = text(resolution, "status");
            match resolution.get("decision").and_then(Value::as_str) {
                Some(decision) => format!("{status}: {decision}"),
                None => status,
            }
        }
        "turn.failed" => format!("at {}: {}", text(event, "stage"), text(event, "message")),
        "turn.cancelled" => text(event, "message"),
        _ => String::new(),
    };
    Some((kind, detail))
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    init_logging("warn");
    let url = store_url(args.store.clone())?;
    let inputs: Vec<String> = if args.inputs.is_empty() {
        DEFAULT_INPUTS.iter().map(|s| (*s).to_owned()).collect()
    } else {
        args.inputs.clone()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(drive(&args, &url, &inputs))?;
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &report.json)?;
            writeln!(out)?;
        }
        Format::Human => out.write_all(report.human.as_bytes())?,
    }
    Ok(if report.all_completed { 0 } else { 1 })
}

struct Report {
    human: String,
    json: Value,
    all_completed: bool,
}

async fn drive(args: &Args, url: &str, inputs: &[String]) -> anyhow::Result<Report> {
    let (log, face) = args.runtime.start(url).await?;
    // The host and the runtime on the two ends of one in-process pipe.
    let (host_end, runtime_end) = tokio::io::duplex(1 << 20);
    let (runtime_read, runtime_write) = tokio::io::split(runtime_end);
    let served = tokio::spawn({
        let face = Arc::clone(&face);
        async move { face.serve(runtime_read, runtime_write).await }
    });
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let (host_read, host_write) = tokio::io::split(host_end);
    let client = RollClient::connect(
        host_read,
        host_write,
        ClientOptions::default().interactions(interactions(&timeline, args.reject)),
    );
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .context("the host could not initialize")?;
    let mut events = client.events().context("the event queue was taken")?;
    let thread = client
        .create_thread(Some("agentwire demo".into()))
        .await
        .context("thread.create failed")?
        .thread;
    let thread_id = thread.id.to_string();
    let mut ends = Vec::new();
    let mut durable = 0usize;
    for (index, input) in inputs.iter().enumerate() {
        {
            let mut timeline = lock(&timeline);
            timeline.turn = index + 1;
            timeline.started = Some(Instant::now());
        }
        let turn = client
            .start_turn(
                thread.id.clone(),
                TurnInput {
                    text: input.clone(),
                    attachments: None,
                },
            )
            .await
            .with_context(|| format!("turn.start of {input:?} failed"))?;
        let turn_id = turn.turn_id.to_string();
        let mut deltas = 0usize;
        let end = loop {
            let next = tokio::time::timeout(TURN_LIMIT, events.recv())
                .await
                .with_context(|| format!("the turn {input:?} did not end within {TURN_LIMIT:?}"))?;
            let Some(ClientEvent::Runtime(envelope)) = next else {
                if next.is_none() {
                    anyhow::bail!("the connection closed during the turn {input:?}");
                }
                continue;
            };
            let envelope = serde_json::to_value(&envelope)?;
            if envelope.get("turnId").and_then(Value::as_str) != Some(turn_id.as_str()) {
                continue;
            }
            if envelope.get("durability").and_then(Value::as_str) == Some("durable") {
                durable += 1;
            }
            let event = envelope["event"].clone();
            let kind = text(&event, "type");
            if let Some((what, detail)) = describe(&event, &mut deltas) {
                let mut timeline = lock(&timeline);
                timeline.push(&what, detail, Some(envelope));
                if kind == "turn.started" {
                    timeline.turns_shown.insert(turn_id.clone());
                    timeline.shown.notify_waiters();
                }
            }
            if matches!(
                kind.as_str(),
                "turn.completed" | "turn.failed" | "turn.cancelled"
            ) {
                break kind;
            }
        };
        ends.push(end);
    }
    let _ = client.shutdown().await;
    drop(client);
    let _ = served.await;
    log.close().await.context("cannot close the event log")?;

    let timeline = lock(&timeline);
    let all_completed = ends.iter().all(|e| e == "turn.completed");
    let mut human = String::new();
    human.push_str(&format!(
        "agentwire demo: the reference runtime on {}, driven by a Roll {} host\n\nthread {} \"agentwire demo\"\n",
        terminal_safe(&agentwire_events::redact_store_url(url)),
        session.version,
        thread_id
    ));
    for (index, input) in inputs.iter().enumerate() {
        human.push_str(&format!("\nturn {}: {}\n", index + 1, terminal_safe(input)));
        for entry in timeline.entries.iter().filter(|e| e.turn == index + 1) {
            let at = format!("+{:.3}s", entry.at.as_secs_f64());
            let line = format!("  {at:>8}  {:<18} {}", entry.what, entry.detail);
            human.push_str(terminal_safe(line.trim_end()).as_ref());
            human.push('\n');
        }
    }
    human.push_str(&format!(
        "\n{} turn(s), {} durable events, every frame checked against Roll {}. Serve it to your own host: agentwire serve --stdio\n",
        inputs.len(),
        durable,
        session.version
    ));
    let json = json!({
        "store": agentwire_events::redact_store_url(url),
        "protocolVersion": session.version.as_str(),
        "threadId": thread_id,
        "turns": inputs.iter().enumerate().map(|(index, input)| json!({
            "input": input,
            "end": ends.get(index),
            "timeline": timeline.entries.iter().filter(|e| e.turn == index + 1).map(|e| json!({
                "atMs": u64::try_from(e.at.as_millis()).unwrap_or(u64::MAX),
                "what": e.what,
                "detail": e.detail,
                "envelope": e.envelope,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "durableEvents": durable,
    });
    Ok(Report {
        human,
        json,
        all_completed,
    })
}

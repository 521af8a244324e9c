//! `agentwire runlog coerce|state|view|mock`: TaskLens run logs — lenient coercion with an
//! issues report, the derived run state, a terminal or HTML timeline, and mock runs.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use agentwire_runlog::{
    ApprovalOutcome, CoerceOptions, CoerceResult, IssueLevel, MockRunOptions, RunEvent, RunState,
    create_mock_run, derive_run_state, derive_run_state_from_slice, derive_run_state_owned,
    normalize_in_place, render_html, render_text, scenarios, summary_line,
    to_run_events_from_slice,
};
use anyhow::{Context, bail};
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Coerce a log (JSON array, {events: [...]}, one object, or NDJSON) into valid events and
    /// report every change. Exit 1 when anything had to be fixed, degraded or dropped.
    Coerce(CoerceArgs),
    /// Derive the run state (goal, status, steps, tool calls, approvals, retries, errors).
    State(InputArgs),
    /// Show the run as a timeline in the terminal, or write a self-contained HTML page.
    View(ViewArgs),
    /// Print a valid mock run as NDJSON.
    Mock(MockArgs),
}

#[derive(Debug, clap::Args)]
struct InputArgs {
    /// The log (`-` for standard input).
    file: PathBuf,
    /// Do not insert a `run:start` for a run that has none.
    #[arg(long)]
    no_synthesize_run_start: bool,
}

#[derive(Debug, clap::Args)]
struct CoerceArgs {
    #[command(flatten)]
    input: InputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ColorChoice {
    /// Colors when standard output is a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

#[derive(Debug, clap::Args)]
struct ViewArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Write a self-contained HTML page (inline CSS and script, no network) to this file.
    #[arg(long, value_name = "OUT.html")]
    html: Option<PathBuf>,
    /// Terminal colors.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Outcome {
    Approve,
    Edit,
    Reject,
    Pending,
}

#[derive(Debug, clap::Args)]
struct MockArgs {
    /// A named scenario (see --list-scenarios); the other options are ignored.
    #[arg(long)]
    scenario: Option<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list_scenarios: bool,
    /// Goal of the run.
    #[arg(long)]
    goal: Option<String>,
    /// Run id.
    #[arg(long)]
    run_id: Option<String>,
    /// Number of steps.
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// The last step asks for an approval that ends this way.
    #[arg(long, value_enum)]
    approval: Option<Outcome>,
    /// The first step fails once with a retryable error, then succeeds on retry.
    #[arg(long)]
    failure: bool,
    /// Include an event of an unknown type.
    #[arg(long)]
    unknown_event: bool,
}

pub(crate) fn run(args: Args, format: Format) -> anyhow::Result<u8> {
    match args.command {
        Command::Coerce(a) => coerce(a, format),
        Command::State(a) => state(a, format),
        Command::View(a) => view(a, format),
        Command::Mock(a) => mock(a, format),
    }
}

fn coerce_options(input: &InputArgs) -> CoerceOptions {
    CoerceOptions {
        synthesize_run_start: !input.no_synthesize_run_start,
        ..CoerceOptions::default()
    }
}

fn load(input: &InputArgs) -> anyhow::Result<CoerceResult> {
    let bytes = output::read_input(&input.file)?;
    Ok(to_run_events_from_slice(&bytes, &coerce_options(input)))
}

/// The state of the normalized events. Events already in `seq` order with unique ids are what
/// `normalize` returns unchanged, so they are derived where they are instead of copied.
fn derive(result: &CoerceResult) -> RunState {
    let mut ids = std::collections::HashSet::with_capacity(result.meta.events);
    let mut last_seq = 0;
    let normalized = result.events().all(|e| {
        let in_order = e.seq >= last_seq;
        last_seq = e.seq;
        in_order && ids.insert(e.id.as_str())
    });
    drop(ids);
    if normalized {
        return derive_run_state(result.events());
    }
    let mut events: Vec<RunEvent> = result.events().cloned().collect();
    normalize_in_place(&mut events);
    derive_run_state_owned(events)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    // Standard output is line-buffered: a large state would cost a write per line.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value).context("cannot write the output")?;
    writeln!(out).context("cannot write the output")?;
    out.flush().context("cannot write the output")?;
    Ok(())
}

fn coerce(args: CoerceArgs, format: Format) -> anyhow::Result<u8> {
    let result = load(&args.input)?;
    match format {
        Format::Json => print_json(&result)?,
        Format::Human => {
            let m = &result.meta;
            println!(
                "{} lines: {} events, {} degraded, {} dropped; {} lines fixed{}",
                m.lines,
                m.events,
                m.degraded,
                m.dropped,
                m.fixed,
                if m.synthesized > 0 {
                    format!(", {} run:start synthesized", m.synthesized)
                } else {
                    String::new()
                }
            );
            if let Some(goal) = &m.goal {
                println!("goal: {goal}");
            }
            for issue in &result.issues {
                println!(
                    "{:<8} line {:<4} {:<24} {}",
                    issue.level.as_str(),
                    issue.line,
                    issue.code,
                    issue.message
                );
            }
        }
    }
    let changed = result.issues.iter().any(|i| i.level != IssueLevel::Info);
    Ok(if changed {
        output::EXIT_FOUND
    } else {
        output::EXIT_OK
    })
}

fn state(args: InputArgs, format: Format) -> anyhow::Result<u8> {
    let bytes = output::read_input(&args.file)?;
    let state = derive_run_state_from_slice(&bytes, &coerce_options(&args));
    match format {
        Format::Json => print_json(&state)?,
        Format::Human => {
            println!("run {}", state.run_id.as_deref().unwrap_or("(none)"));
            if let Some(goal) = &state.goal {
                println!("goal {goal}");
            }
            println!("{}", summary_line(&state));
            for step in &state.steps {
                println!(
                    "step {} {:?} {}",
                    step.id,
                    step.status,
                    step.title.as_deref().unwrap_or("")
                );
            }
            for a in state.approvals.iter().filter(|a| a.decision.is_none()) {
                println!(
                    "pending approval {} [{}] {}",
                    a.approval_id,
                    a.risk.map_or("?", |r| r.as_str()),
                    a.summary.as_deref().unwrap_or("")
                );
            }
            for e in &state.errors {
                println!("error ({:?}) at seq {}: {}", e.source, e.seq, e.message);
            }
        }
    }
    Ok(output::EXIT_OK)
}

fn view(args: ViewArgs, format: Format) -> anyhow::Result<u8> {
    let result = load(&args.input)?;
    let state = derive(&result);
    if let Some(path) = &args.html {
        let page = render_html(&result, &state);
        std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
        match format {
            Format::Json => println!(
                "{}",
                json!({"html": path.display().to_string(), "events": result.meta.events,
                       "issues": result.issues.len()})
            ),
            Format::Human => println!(
                "wrote {} ({} events, {} issues)",
                path.display(),
                result.meta.events,
                result.issues.len()
            ),
        }
        return Ok(output::EXIT_OK);
    }
    match format {
        Format::Json => print_json(&json!({"coerce": result, "state": state}))?,
        Format::Human => {
            let color = match args.color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => std::io::stdout().is_terminal(),
            };
            print!("{}", render_text(&result, &state, color));
        }
    }
    Ok(output::EXIT_OK)
}

fn mock(args: MockArgs, format: Format) -> anyhow::Result<u8> {
    if args.list_scenarios {
        let all = scenarios();
        match format {
            Format::Json => print_json(
                &all.iter()
                    .map(|s| json!({"name": s.name, "description": s.description}))
                    .collect::<Vec<_>>(),
            )?,
            Format::Human => {
                for s in all {
                    println!("{:<20} {}", s.name, s.description);
                }
            }
        }
        return Ok(output::EXIT_OK);
    }
    let options = match &args.scenario {
        Some(name) => match scenarios().into_iter().find(|s| s.name == name) {
            Some(s) => s.options,
            None => bail!("unknown scenario {name:?} (see --list-scenarios)"),
        },
        None => {
            let defaults = MockRunOptions::default();
            MockRunOptions {
                run_id: args.run_id.clone().unwrap_or(defaults.run_id),
                goal: args.goal.clone().unwrap_or(defaults.goal),
                step_count: args.steps,
                with_approval: args.approval.is_some(),
                approval_outcome: match args.approval {
                    Some(Outcome::Edit) => ApprovalOutcome::Edit,
                    Some(Outcome::Reject) => ApprovalOutcome::Reject,
                    Some(Outcome::Pending) => ApprovalOutcome::Pending,
                    Some(Outcome::Approve) | None => ApprovalOutcome::Approve,
                },
                with_failure: args.failure,
                with_unknown_event: args.unknown_event,
                start_at: defaults.start_at,
            }
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for event in create_mock_run(&options) {
        serde_json::to_writer(&mut out, &event).context("cannot write the output")?;
        writeln!(out).context("cannot write the output")?;
    }
    out.flush().context("cannot write the output")?;
    Ok(output::EXIT_OK)
}

//! `agentwire runlog coerce|state|view|mock`: TaskLens run logs — lenient coercion with an
//! issues report, the derived run state, a terminal or HTML timeline, and mock runs.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use agentwire_runlog::mock::MAX_MOCK_STEPS;
use agentwire_runlog::{
    ApprovalOutcome, CoerceMeta, CoerceOptions, Issue, IssueGroups, IssueLevel, IssueList,
    LinePlan, MetaCount, MockRunOptions, RunState, STREAM_PIECE_BYTES, StreamedState, TextOptions,
    create_mock_run, derive_run_state_from_slice, plan_by_line, plan_by_line_from, scenarios,
    summary_line, terminal_safe, to_run_events_from_slice, write_html, write_html_by_line,
    write_issue_summary, write_text, write_text_by_line,
};
use anyhow::Context;
use serde_json::json;

use crate::input;
use crate::output::{self, Format};
use crate::passes::Passes;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum IssuesChoice {
    /// One line per code: level, count and the lines it touched.
    Grouped,
    /// Every issue on its own line.
    All,
}

impl IssuesChoice {
    fn list(self) -> IssueList {
        match self {
            IssuesChoice::Grouped => IssueList::Grouped,
            IssuesChoice::All => IssueList::All,
        }
    }
}

#[derive(Debug, clap::Args)]
struct CoerceArgs {
    #[command(flatten)]
    input: InputArgs,
    /// How human output lists the issues (`--format json` always has every issue).
    #[arg(long, value_enum, default_value_t = IssuesChoice::Grouped)]
    issues: IssuesChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
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
    /// Write a self-contained HTML page (inline CSS and script, no network) to this file (`-`
    /// for standard output).
    #[arg(long, value_name = "OUT.html")]
    html: Option<PathBuf>,
    /// Terminal colors.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// How the terminal view lists the issues (`--format json` always has every issue).
    #[arg(long, value_enum, default_value_t = IssuesChoice::Grouped)]
    issues: IssuesChoice,
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
    /// A named scenario (see --list-scenarios); it cannot be combined with the options that
    /// build a run.
    #[arg(long, conflicts_with_all = ["goal", "run_id", "steps", "approval", "failure", "unknown_event"])]
    scenario: Option<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list_scenarios: bool,
    /// Goal of the run.
    #[arg(long)]
    goal: Option<String>,
    /// Run id (a non-empty string).
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    run_id: Option<String>,
    /// Number of steps, from 1 to 100000.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=MAX_MOCK_STEPS as u64))]
    steps: u64,
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

/// Runs a run-log command writing to `out` (the caller flushes it); a write error (a closed
/// pipe included) ends the command as an error, never a panic.
pub(crate) fn run_to(args: Args, format: Format, mut out: &mut dyn Write) -> anyhow::Result<u8> {
    match args.command {
        Command::Coerce(a) => coerce(a, format, &mut out),
        Command::State(a) => state(a, format, &mut out),
        Command::View(a) => view(a, format, &mut out),
        Command::Mock(a) => mock(a, format, &mut out),
    }
}

const WRITE_ERROR: &str = "cannot write the output";

fn coerce_options(input: &InputArgs) -> CoerceOptions {
    CoerceOptions {
        synthesize_run_start: !input.no_synthesize_run_start,
        ..CoerceOptions::default()
    }
}

fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

fn coerce(args: CoerceArgs, format: Format, out: &mut impl Write) -> anyhow::Result<u8> {
    let passes = Passes::open(&args.input.file)?;
    let options = coerce_options(&args.input);
    // NDJSON the line-by-line coercer takes is written from passes over it, never held whole.
    let (plan, whole) = plan_or_whole(&passes, &options)?;
    let plan = plan.or_else(|| whole.as_deref().and_then(|b| plan_by_line(b, &options)));
    let changed = if let Some(plan) = plan {
        let mut meta = MetaCount::new(&plan);
        let mut groups = IssueGroups::default();
        for (item, issues) in plan.items() {
            meta.count(item.as_ref(), &issues);
            issues.iter().for_each(|i| groups.push(i));
        }
        match format {
            Format::Json => write_json(out, &plan),
            Format::Human => {
                write_coerce_human(out, &meta.finish(), &groups, args.issues.list(), || {
                    plan.items().flat_map(|(_, issues)| issues)
                })
            }
        }
        .context(WRITE_ERROR)?;
        passes.check()?;
        [IssueLevel::Fixed, IssueLevel::Degraded, IssueLevel::Dropped]
            .iter()
            .any(|l| groups.count(*l) > 0)
    } else {
        let bytes = match whole {
            Some(bytes) => bytes,
            None => passes.read_whole()?,
        };
        let result = to_run_events_from_slice(&bytes, &options);
        drop(bytes);
        match format {
            Format::Json => write_json(out, &result),
            Format::Human => {
                let mut groups = IssueGroups::default();
                result.issues.iter().for_each(|i| groups.push(i));
                write_coerce_human(out, &result.meta, &groups, args.issues.list(), || {
                    result.issues.iter().cloned()
                })
            }
        }
        .context(WRITE_ERROR)?;
        result.issues.iter().any(|i| i.level != IssueLevel::Info)
    };
    Ok(if changed {
        output::EXIT_FOUND
    } else {
        output::EXIT_OK
    })
}

/// The line-by-line plan of a log read in passes, or, when the source alone cannot tell, its
/// whole text for the caller to plan (or coerce) as a whole.
fn plan_or_whole<'a>(
    passes: &'a Passes,
    options: &'a CoerceOptions,
) -> anyhow::Result<(Option<LinePlan<'a>>, Option<Vec<u8>>)> {
    match plan_by_line_from(passes, options) {
        Some(plan) => Ok((Some(plan), None)),
        None => Ok((None, Some(passes.read_whole()?))),
    }
}

fn write_coerce_human<I: IntoIterator<Item = Issue>>(
    out: &mut impl Write,
    m: &CoerceMeta,
    groups: &IssueGroups,
    list: IssueList,
    all: impl FnOnce() -> I,
) -> std::io::Result<()> {
    write!(
        out,
        "{} lines: {} events, {} degraded, {} dropped; {} lines fixed",
        m.lines, m.events, m.degraded, m.dropped, m.fixed
    )?;
    if m.synthesized > 0 {
        write!(out, ", {} run:start synthesized", m.synthesized)?;
    }
    writeln!(out)?;
    if let Some(goal) = &m.goal {
        writeln!(out, "goal: {}", terminal_safe(goal))?;
    }
    write_issue_summary(out, groups, list, false, all)
}

fn state(args: InputArgs, format: Format, out: &mut impl Write) -> anyhow::Result<u8> {
    let options = coerce_options(&args);
    // A log the streamed fold takes is read a piece at a time and never held; any other is read
    // again: line by line when the line-by-line coercer takes it, whole otherwise.
    let mut stream = StreamedState::new(&options);
    let passes = Passes::stream(&args.file, STREAM_PIECE_BYTES, |piece| stream.push(piece))?;
    let state = match stream.finish() {
        Some(state) => state,
        None => match plan_by_line_from(&passes, &options).filter(|p| p.run_ids().len() <= 1) {
            Some(plan) => {
                let state = plan.derive();
                passes.check()?;
                state
            }
            None => derive_run_state_from_slice(&passes.read_whole()?, &options),
        },
    };
    match format {
        Format::Json => write_json(out, &state),
        Format::Human => write_state_human(out, &state),
    }
    .context(WRITE_ERROR)?;
    Ok(output::EXIT_OK)
}

fn write_state_human(out: &mut impl Write, state: &RunState) -> std::io::Result<()> {
    let run = state.run_id.as_deref().unwrap_or("(none)");
    writeln!(out, "run {}", terminal_safe(run))?;
    if let Some(goal) = &state.goal {
        writeln!(out, "goal {}", terminal_safe(goal))?;
    }
    writeln!(out, "{}", terminal_safe(&summary_line(state)))?;
    for step in &state.steps {
        writeln!(
            out,
            "step {} {:?} {}",
            terminal_safe(&step.id),
            step.status,
            terminal_safe(step.title.as_deref().unwrap_or(""))
        )?;
    }
    for a in state.approvals.iter().filter(|a| a.decision.is_none()) {
        writeln!(
            out,
            "pending approval {} [{}] {}",
            terminal_safe(&a.approval_id),
            a.risk.map_or("?", |r| r.as_str()),
            terminal_safe(a.summary.as_deref().unwrap_or(""))
        )?;
    }
    for e in &state.errors {
        writeln!(
            out,
            "error ({:?}) at seq {}: {}",
            e.source,
            e.seq,
            terminal_safe(&e.message)
        )?;
    }
    Ok(())
}

/// `runlog view --format json`: the coerce result and the state, serialized where they are.
#[derive(serde::Serialize)]
struct ViewJson<'a, C> {
    coerce: &'a C,
    state: &'a RunState,
}

fn view(args: ViewArgs, format: Format, out: &mut impl Write) -> anyhow::Result<u8> {
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::io::stdout().is_terminal(),
    };
    let options = TextOptions {
        color,
        issues: args.issues.list(),
    };
    let passes = Passes::open(&args.input.file)?;
    let coerce_options = coerce_options(&args.input);
    if let Some(target) = &args.html {
        return html(target, &passes, &coerce_options, format, out);
    }
    // A log of one run taken line by line is already normalized: written from passes over it,
    // holding only the state.
    let (plan, whole) = plan_or_whole(&passes, &coerce_options)?;
    let plan = plan.or_else(|| {
        whole
            .as_deref()
            .and_then(|b| plan_by_line(b, &coerce_options))
    });
    if let Some(plan) = plan
        && plan.run_ids().len() <= 1
    {
        match format {
            Format::Json => {
                let state = plan.derive();
                write_json(
                    out,
                    &ViewJson {
                        coerce: &plan,
                        state: &state,
                    },
                )
            }
            Format::Human => write_text_by_line(out, &plan, &options).map(drop),
        }
        .context(WRITE_ERROR)?;
        passes.check()?;
        return Ok(output::EXIT_OK);
    }
    let bytes = match whole {
        Some(bytes) => bytes,
        None => passes.read_whole()?,
    };
    let result = to_run_events_from_slice(&bytes, &coerce_options);
    drop(bytes);
    drop(passes);
    let state = result.state();
    match format {
        Format::Json => write_json(
            out,
            &ViewJson {
                coerce: &result,
                state: &state,
            },
        ),
        Format::Human => write_text(out, &result, &state, &options),
    }
    .context(WRITE_ERROR)?;
    Ok(output::EXIT_OK)
}

/// `runlog view --html TARGET`: the page written as it is made, to standard output for `-`,
/// else to the file (then a line says what was written). A log of one run that the line-by-line
/// coercer takes is written from passes over it, holding only the run state; any other is
/// coerced whole before anything is written.
fn html(
    target: &Path,
    passes: &Passes,
    options: &CoerceOptions,
    format: Format,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let by_line = |plan: &LinePlan<'_>, page: &mut dyn Write, failed: &str| {
        let written = write_html_by_line(&mut &mut *page, plan).context(failed.to_owned())?;
        passes.check()?;
        Ok((written.events, written.issues))
    };
    let (plan, whole) = plan_or_whole(passes, options)?;
    let plan = plan.or_else(|| whole.as_deref().and_then(|b| plan_by_line(b, options)));
    if let Some(plan) = plan.filter(|p| p.run_ids().len() <= 1) {
        return write_page(target, format, out, |page, failed| {
            by_line(&plan, page, failed)
        });
    }
    let bytes = match whole {
        Some(bytes) => bytes,
        None => passes.read_whole()?,
    };
    let result = to_run_events_from_slice(&bytes, options);
    drop(bytes);
    write_page(target, format, out, |page, failed| {
        write_html(&mut &mut *page, &result, &result.state()).context(failed.to_owned())?;
        Ok((result.meta.events, result.issues.len()))
    })
}

/// Writes a page with `write` (which answers its events and issues and names a failed write
/// with the message it is given) to standard output for `-`, else to the file `target`, and
/// then says what was written. A file whose page could not be completed is removed.
fn write_page(
    target: &Path,
    format: Format,
    out: &mut impl Write,
    write: impl FnOnce(&mut dyn Write, &str) -> anyhow::Result<(usize, usize)>,
) -> anyhow::Result<u8> {
    if input::is_stdin(target) {
        write(out, WRITE_ERROR)?;
        return Ok(output::EXIT_OK);
    }
    let name = target.display().to_string();
    let failed = format!("cannot write {name}");
    let file = std::fs::File::create(target).context(failed.clone())?;
    let mut file = std::io::BufWriter::new(file);
    let written =
        write(&mut file, &failed).and_then(|counts| file.flush().context(failed).map(|()| counts));
    let (events, issues) = match written {
        Ok(counts) => counts,
        Err(err) => {
            drop(file);
            let _ = std::fs::remove_file(target);
            return Err(err);
        }
    };
    match format {
        Format::Json => writeln!(
            out,
            "{}",
            json!({"html": name, "events": events, "issues": issues})
        ),
        Format::Human => writeln!(
            out,
            "wrote {} ({events} events, {issues} issues)",
            terminal_safe(&name)
        ),
    }
    .context(WRITE_ERROR)?;
    Ok(output::EXIT_OK)
}

fn mock(args: MockArgs, format: Format, out: &mut impl Write) -> anyhow::Result<u8> {
    if args.list_scenarios {
        let all = scenarios();
        match format {
            Format::Json => write_json(
                out,
                &all.iter()
                    .map(|s| json!({"name": s.name, "description": s.description}))
                    .collect::<Vec<_>>(),
            ),
            Format::Human => all
                .iter()
                .try_for_each(|s| writeln!(out, "{:<20} {}", s.name, s.description)),
        }
        .context(WRITE_ERROR)?;
        return Ok(output::EXIT_OK);
    }
    let options = match &args.scenario {
        Some(name) => match scenarios().into_iter().find(|s| s.name == name) {
            Some(s) => s.options,
            None => {
                return Err(crate::cmd::Usage::new(
                    "usage.unknown-scenario",
                    format!("unknown scenario {name:?} (see --list-scenarios)"),
                )
                .into());
            }
        },
        None => {
            let defaults = MockRunOptions::default();
            MockRunOptions {
                run_id: args.run_id.clone().unwrap_or(defaults.run_id),
                goal: args.goal.clone().unwrap_or(defaults.goal),
                // The parser bounds it to 1..=MAX_MOCK_STEPS.
                step_count: usize::try_from(args.steps).unwrap_or(MAX_MOCK_STEPS),
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
    let events = create_mock_run(&options);
    events
        .iter()
        .try_for_each(|event| {
            serde_json::to_writer(&mut *out, event)?;
            writeln!(out)
        })
        .context(WRITE_ERROR)?;
    Ok(output::EXIT_OK)
}

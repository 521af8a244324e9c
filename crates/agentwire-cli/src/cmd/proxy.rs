//! `agentwire proxy --stdio 'CMD ARGS' [--record FILE]`: a checking tap between a Roll host (this
//! process's standard input and output) and a runtime run as a child — every frame forwarded
//! unchanged, each checked against the negotiated version, violations on standard error, the
//! session optionally recorded. `agentwire proxy replay FILE`: a recording as a timeline for
//! people, or NDJSON for programs. See docs/proxy.md.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::SystemTime;

use agentwire_client::proxy::{
    DEFAULT_MAX_LINE_BYTES, Direction, FrameInfo, FrameKind, FrameReport, Observer, Proxy,
    ProxyOptions, Record, Session, Violation, parse_timestamp,
};
use agentwire_roll::{EventCursor, ProtocolVersion};
use agentwire_runlog::terminal_safe;
use anyhow::Context;
use serde_json::{Value, json};

use crate::cmd::Usage;
use crate::cmd::runlog::ColorChoice;
use crate::input::{self, Line};
use crate::output::{self, Format};

/// The longest record `proxy replay` reads (a frame at the largest line limit, with room for
/// the escapes of a line that is not JSON); a longer one is reported and skipped.
const MAX_RECORD_BYTES: usize = 128 << 20;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Run this runtime command and proxy standard input and output to it; split like a shell
    /// would (quotes, backslashes), but run without one.
    #[arg(long, value_name = "'CMD ARGS'")]
    stdio: Option<String>,
    /// Record the session to this file as NDJSON, one record per frame.
    #[arg(long, value_name = "FILE", requires = "stdio")]
    record: Option<PathBuf>,
    /// The longest line checked and recorded, without its line ending; a longer one is
    /// forwarded as it arrives and reported, not checked.
    #[arg(long, value_name = "BYTES", requires = "stdio",
          default_value_t = DEFAULT_MAX_LINE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=256 * 1024 * 1024))]
    max_line_bytes: u64,
}

impl Args {
    /// Whether the command proxies a protocol on standard output (`--stdio`).
    pub(crate) fn speaks_on_stdout(&self) -> bool {
        self.stdio.is_some()
    }
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Show a recorded session as a timeline (exit 1 when it holds violations).
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The recording (`-` for standard input).
    file: PathBuf,
    /// Terminal colors.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    if let Some(Command::Replay(replay_args)) = args.command {
        return replay(&replay_args, format, out);
    }
    let Some(command_line) = args.stdio else {
        return Err(Usage::new(
            "usage.proxy-transport",
            "choose --stdio 'CMD ARGS' (proxy a runtime on standard input and output) or replay FILE",
        )
        .into());
    };
    let max_line_bytes = usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX);
    stdio(
        &command_line,
        args.record.as_deref(),
        max_line_bytes,
        format,
    )
}

/// Prints each violation on standard error as it is found.
struct StderrReport {
    format: Format,
}

/// `id 4 turn.start result`: what a report line names a frame by.
fn frame_name(info: &FrameInfo) -> String {
    let mut parts = Vec::new();
    if let Some(id) = &info.id {
        parts.push(format!("id {id}"));
    }
    if let Some(method) = &info.method {
        parts.push(method.clone());
    }
    match info.kind {
        FrameKind::Result => parts.push("result".to_owned()),
        FrameKind::Error => parts.push("error".to_owned()),
        FrameKind::Other if parts.is_empty() => parts.push("line".to_owned()),
        _ => {}
    }
    parts.join(" ")
}

impl Observer for StderrReport {
    fn frame(&self, report: &FrameReport<'_>) {
        if report.violations.is_empty() {
            return;
        }
        let mut stderr = io::stderr().lock();
        for violation in report.violations {
            let _ = match self.format {
                Format::Human => writeln!(
                    stderr,
                    "{}",
                    terminal_safe(&format!(
                        "proxy: {} {}: {violation}",
                        report.direction,
                        frame_name(report.info)
                    ))
                ),
                Format::Json => writeln!(
                    stderr,
                    "{}",
                    json!({"dir": report.direction, "id": report.info.id,
                           "method": report.info.method, "violation": violation})
                ),
            };
        }
    }

    fn record_failed(&self, error: &io::Error) {
        let message =
            format!("cannot write the recording: {error}; recording stopped, the session goes on");
        let _ = match self.format {
            Format::Human => writeln!(io::stderr(), "proxy: {}", terminal_safe(&message)),
            Format::Json => writeln!(
                io::stderr(),
                "{}",
                json!({"error": {"code": "proxy.record", "message": message}})
            ),
        };
    }
}

/// The exit code that reports `status`: its code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(output::EXIT_ERROR);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(output::EXIT_ERROR);
        }
    }
    output::EXIT_ERROR
}

fn stdio(
    command_line: &str,
    record: Option<&Path>,
    max_line_bytes: usize,
    format: Format,
) -> anyhow::Result<u8> {
    let argv = shell_words::split(command_line).map_err(|e| {
        Usage::new(
            "usage.proxy-command",
            format!("cannot split the runtime command {command_line:?}: {e}"),
        )
    })?;
    let Some((program, arguments)) = argv.split_first() else {
        return Err(Usage::new("usage.proxy-command", "the runtime command is empty").into());
    };
    let recording = match record {
        Some(path) => {
            let file = File::create(path)
                .with_context(|| format!("cannot create the recording {}", path.display()))?;
            Some(Box::new(BufWriter::new(file)) as Box<dyn Write + Send>)
        }
        None => None,
    };
    let proxy = Proxy::new(ProxyOptions {
        max_line_bytes,
        record: recording,
        observer: Some(Arc::new(StderrReport { format })),
    });
    let mut command = tokio::process::Command::new(program);
    command.args(arguments);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(async {
        let (stdin, stdout) = agentwire_jsonrpc::transport::stdio();
        proxy.run_child(command, stdin, stdout).await
    });
    // Standard input that is not a pipe may still be read by a blocking thread that never
    // returns.
    runtime.shutdown_background();
    let outcome = outcome?;
    let stats = outcome.stats;
    let code = exit_code(outcome.status);
    let incomplete = outcome.record_error.is_some();
    if format == Format::Human && (stats.violations > 0 || incomplete) {
        let frames = stats.host_to_runtime + stats.runtime_to_host;
        let mut line = format!(
            "proxy: {} in {} of {} ({} host->runtime, {} runtime->host)",
            plural(stats.violations, "violation"),
            stats.frames_with_violations,
            plural(frames, "frame"),
            stats.host_to_runtime,
            stats.runtime_to_host
        );
        if let (Some(path), true) = (record, incomplete) {
            line.push_str(&format!("; the recording {} is incomplete", path.display()));
        }
        let _ = writeln!(io::stderr(), "{}", terminal_safe(&line));
    }
    if format == Format::Json {
        let _ = writeln!(
            io::stderr(),
            "{}",
            json!({"summary": {
                "hostToRuntime": stats.host_to_runtime,
                "runtimeToHost": stats.runtime_to_host,
                "framesWithViolations": stats.frames_with_violations,
                "violations": stats.violations,
                "version": proxy.session().version().map(ProtocolVersion::as_str),
                "recordComplete": !incomplete,
                "runtimeExit": code,
            }})
        );
    }
    Ok(if incomplete { output::EXIT_ERROR } else { code })
}

/// One line of the timeline.
struct Entry {
    line: u64,
    offset_ms: Option<i128>,
    at: String,
    dir: Direction,
    kind: &'static str,
    id: Option<Value>,
    method: Option<String>,
    summary: String,
    violations: Vec<Violation>,
}

#[derive(Default)]
struct Totals {
    records: u64,
    host_to_runtime: u64,
    runtime_to_host: u64,
    violations: u64,
    records_with_violations: u64,
    unreadable: u64,
}

/// `1 frame`, `2 frames`.
fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

fn quoted(text: &str, max: usize) -> String {
    format!("{:?}", cut(text, max))
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// `#12` for a cursor, `start` for none.
fn position(cursor: Option<&Value>) -> String {
    match cursor.and_then(Value::as_str) {
        None => "start".to_owned(),
        Some(text) => match EventCursor::parse(text) {
            Ok(cursor) => format!("#{}", cursor.sequence()),
            Err(_) => quoted(text, 24),
        },
    }
}

fn names(list: Option<&Value>) -> String {
    let names: Vec<&str> = list
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn request_summary(method: &str, params: &Value) -> String {
    match method {
        "initialize" => format!("offers {}", names(params.get("protocolVersions"))),
        "client.capabilities.set" => format!(
            "revision {}: {}",
            params.get("revision").unwrap_or(&Value::Null),
            names(params.get("serverRequestMethods"))
        ),
        "thread.create" => str_at(params, "/title").map_or_else(String::new, |t| quoted(t, 60)),
        "turn.start" => {
            let mut out = str_at(params, "/input/text").map_or_else(String::new, |t| quoted(t, 60));
            if let Some(n) = params
                .pointer("/input/attachments")
                .and_then(Value::as_array)
                .map(Vec::len)
            {
                out.push_str(&format!(" + {n} attachments"));
            }
            out
        }
        "runtime.events.resume" => format!("after {}", position(params.get("afterCursor"))),
        "approval.request" => {
            let tool = str_at(params, "/approval/toolName").unwrap_or("?");
            match str_at(params, "/approval/preview/command") {
                Some(command) => format!("{tool} {}", quoted(command, 60)),
                None => tool.to_owned(),
            }
        }
        "userInput.request" => match str_at(params, "/title") {
            Some(title) => quoted(title, 60),
            None => format!(
                "{} controls",
                params
                    .get("controls")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ),
        },
        _ => {
            let mut out = str_at(params, "/threadId")
                .map(|t| format!("thread {}", short_id(t)))
                .unwrap_or_default();
            if params.get("recovery") == Some(&Value::Bool(true)) {
                out.push_str(" (recovery)");
            }
            out
        }
    }
}

fn result_summary(method: Option<&str>, result: &Value) -> String {
    match method {
        Some("initialize") => format!(
            "version {}",
            str_at(result, "/protocolVersion").unwrap_or("?")
        ),
        Some("client.capabilities.set") => format!(
            "revision {}: accepted {}",
            result.get("revision").unwrap_or(&Value::Null),
            names(result.get("acceptedServerRequestMethods"))
        ),
        Some("thread.create") => str_at(result, "/thread/id")
            .map_or_else(|| "ok".to_owned(), |id| format!("thread {}", short_id(id))),
        Some("thread.list") => format!(
            "{} threads",
            result
                .get("items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        ),
        Some("thread.open" | "thread.snapshot") => {
            let messages = result
                .pointer("/messages/items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let mut out = format!("{messages} messages");
            if result.get("recoveryProjection") == Some(&Value::Bool(true)) {
                out.push_str(" (recovery)");
            }
            if let Some(cursor) = result.get("eventCursor") {
                out.push_str(&format!(" at {}", position(Some(cursor))));
            }
            out
        }
        Some("runtime.events.resume") => format!(
            "replayed {} through {}",
            result.get("replayedCount").unwrap_or(&Value::Null),
            position(result.get("throughCursor"))
        ),
        Some("approval.request") => {
            let decision = str_at(result, "/decision").unwrap_or("?");
            match str_at(result, "/reason") {
                Some(reason) => format!("{decision} {}", quoted(reason, 60)),
                None => decision.to_owned(),
            }
        }
        Some("userInput.request") => str_at(result, "/status").unwrap_or("?").to_owned(),
        _ => "ok".to_owned(),
    }
}

fn event_summary(params: &Value) -> String {
    let kind = str_at(params, "/event/type").unwrap_or("?");
    let mut out = kind.to_owned();
    if params.get("durability").and_then(Value::as_str) == Some("durable") {
        out.push_str(&format!(" {}", position(params.get("cursor"))));
    }
    let event = params.get("event").unwrap_or(&Value::Null);
    let detail = match kind {
        "message.delta" => str_at(event, "/delta").map(|t| quoted(t, 40)),
        "message.completed" => str_at(event, "/text").map(|t| quoted(t, 40)),
        "tool.started" | "tool.output" => str_at(event, "/toolName").map(str::to_owned),
        "tool.completed" => {
            str_at(event, "/toolName").map(|tool| match str_at(event, "/outcome/kind") {
                Some(outcome) => format!("{tool} {outcome}"),
                None => tool.to_owned(),
            })
        }
        "turn.failed" => Some(format!(
            "{}: {}",
            str_at(event, "/stage").unwrap_or("?"),
            quoted(str_at(event, "/message").unwrap_or(""), 60)
        )),
        "turn.cancelled" => str_at(event, "/reason").map(|t| quoted(t, 60)),
        "approval.required" => str_at(event, "/approval/toolName").map(str::to_owned),
        "approval.resolved" => {
            let status = str_at(event, "/resolution/status").unwrap_or("?");
            Some(match str_at(event, "/resolution/decision") {
                Some(decision) => format!("{status} {decision}"),
                None => status.to_owned(),
            })
        }
        _ => None,
    };
    if let Some(detail) = detail {
        out.push(' ');
        out.push_str(&detail);
    }
    out
}

/// The kind, summary and correlation of a record's frame.
fn describe_frame(
    session: &Session,
    dir: Direction,
    frame: &Value,
) -> (&'static str, FrameInfo, String) {
    let (info, _, _) = session.observe(dir, frame, 0);
    let params = frame.get("params").unwrap_or(&Value::Null);
    let (kind, summary) = match info.kind {
        FrameKind::Request => (
            "request",
            request_summary(info.method.as_deref().unwrap_or_default(), params),
        ),
        FrameKind::Notification => {
            let summary = match info.method.as_deref() {
                Some("runtime.event") => event_summary(params),
                _ => str_at(params, "/reason").map_or_else(String::new, |r| quoted(r, 60)),
            };
            ("notify", summary)
        }
        FrameKind::Result => (
            "result",
            result_summary(
                info.method.as_deref(),
                frame.get("result").unwrap_or(&Value::Null),
            ),
        ),
        FrameKind::Error => {
            let error = frame.get("error").unwrap_or(&Value::Null);
            let code = str_at(error, "/data/rollCode").map_or_else(
                || error.get("code").unwrap_or(&Value::Null).to_string(),
                str::to_owned,
            );
            let message = str_at(error, "/message").unwrap_or("");
            ("error", format!("{code} {}", quoted(message, 60)))
        }
        FrameKind::Other => ("other", cut(&frame.to_string(), 60)),
    };
    (kind, info, summary)
}

fn entry(session: &Session, start: &mut Option<SystemTime>, line: u64, record: Record) -> Entry {
    let offset_ms = parse_timestamp(&record.at).ok().map(|at| {
        let first = *start.get_or_insert(at);
        match at.duration_since(first) {
            Ok(ahead) => ahead.as_millis() as i128,
            Err(behind) => -(behind.duration().as_millis() as i128),
        }
    });
    let (kind, info, summary) = match (&record.frame, &record.raw, record.bytes) {
        (Some(frame), _, _) => describe_frame(session, record.dir, frame),
        (None, Some(raw), _) => (
            "raw",
            FrameInfo::of(&Value::Null),
            format!("not JSON: {}", quoted(raw, 60)),
        ),
        (None, None, Some(bytes)) => (
            "oversize",
            FrameInfo::of(&Value::Null),
            format!("a line of {bytes} bytes, not checked"),
        ),
        (None, None, None) => ("empty", FrameInfo::of(&Value::Null), String::new()),
    };
    Entry {
        line,
        offset_ms,
        at: record.at,
        dir: record.dir,
        kind,
        id: info.id,
        method: info.method,
        summary,
        violations: record.violations,
    }
}

fn offset_text(offset_ms: Option<i128>) -> String {
    match offset_ms {
        None => "?".to_owned(),
        Some(ms) => {
            let sign = if ms < 0 { '-' } else { '+' };
            let ms = ms.unsigned_abs();
            format!("{sign}{}.{:03}s", ms / 1000, ms % 1000)
        }
    }
}

fn red(color: bool, text: &str) -> String {
    if color {
        format!("\x1b[31m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

fn write_entry_human(out: &mut dyn Write, entry: &Entry, color: bool) -> io::Result<()> {
    let arrow = match entry.dir {
        Direction::HostToRuntime => "→",
        Direction::RuntimeToHost => "←",
    };
    let id = entry
        .id
        .as_ref()
        .map_or_else(String::new, |id| cut(&id.to_string(), 10));
    let method = entry.method.as_deref().unwrap_or("");
    let line = format!(
        "{:>10}  {arrow} {:<8} {:<10} {:<24} {}",
        offset_text(entry.offset_ms),
        entry.kind,
        terminal_safe(&id),
        terminal_safe(method),
        terminal_safe(&entry.summary)
    );
    writeln!(out, "{}", line.trim_end())?;
    for violation in &entry.violations {
        let text = format!("!! {}", terminal_safe(&violation.to_string()));
        writeln!(out, "{:>10}  {}", "", red(color, &text))?;
    }
    Ok(())
}

fn write_entry_json(out: &mut dyn Write, entry: &Entry) -> io::Result<()> {
    let value = json!({
        "line": entry.line,
        "offsetMs": entry.offset_ms.map(|ms| ms as i64),
        "at": entry.at,
        "dir": entry.dir,
        "kind": entry.kind,
        "id": entry.id,
        "method": entry.method,
        "summary": entry.summary,
        "violations": entry.violations,
    });
    writeln!(out, "{value}")
}

fn replay(args: &ReplayArgs, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    const WRITE_ERROR: &str = "cannot write the output";
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => io::stdout().is_terminal(),
    };
    let (mut lines, _) = input::ndjson(&args.file, MAX_RECORD_BYTES)?;
    let session = Session::new();
    let mut start = None;
    let mut totals = Totals::default();
    let mut first = true;
    while let Some(numbered) = lines.next_line()? {
        let number = numbered.number;
        let record = match numbered.line {
            Line::Text(bytes) => serde_json::from_slice::<Record>(bytes)
                .map_err(|e| format!("not a record of a proxied session: {e}")),
            Line::TooLong(length) => Err(format!(
                "a line of {length} bytes, longer than the {MAX_RECORD_BYTES} bytes a record may have"
            )),
        };
        let record = match record {
            Ok(record) => record,
            Err(message) => {
                totals.unreadable += 1;
                match format {
                    Format::Human => writeln!(
                        out,
                        "{:>10}  {}",
                        "",
                        red(color, &format!("!! line {number}: {}", terminal_safe(&message)))
                    ),
                    Format::Json => writeln!(
                        out,
                        "{}",
                        json!({"line": number, "error": {"code": "proxy.replay.unreadable", "message": message}})
                    ),
                }
                .context(WRITE_ERROR)?;
                continue;
            }
        };
        if first && format == Format::Human {
            writeln!(
                out,
                "session recorded from {} (→ host to runtime, ← runtime to host)",
                terminal_safe(&record.at)
            )
            .context(WRITE_ERROR)?;
        }
        first = false;
        let entry = entry(&session, &mut start, number, record);
        totals.records += 1;
        match entry.dir {
            Direction::HostToRuntime => totals.host_to_runtime += 1,
            Direction::RuntimeToHost => totals.runtime_to_host += 1,
        }
        if !entry.violations.is_empty() {
            totals.records_with_violations += 1;
            totals.violations += entry.violations.len() as u64;
        }
        match format {
            Format::Human => write_entry_human(out, &entry, color),
            Format::Json => write_entry_json(out, &entry),
        }
        .context(WRITE_ERROR)?;
    }
    let version = session.version().map(ProtocolVersion::as_str);
    match format {
        Format::Human => {
            let mut line = format!(
                "{} ({} →, {} ←), version {}; ",
                plural(totals.records, "frame"),
                totals.host_to_runtime,
                totals.runtime_to_host,
                version.unwrap_or("not negotiated")
            );
            if totals.violations == 0 {
                line.push_str("no violations");
            } else {
                line.push_str(&format!(
                    "{} in {}",
                    plural(totals.violations, "violation"),
                    plural(totals.records_with_violations, "frame")
                ));
            }
            if totals.unreadable > 0 {
                line.push_str(&format!(
                    "; {} not a record",
                    plural(totals.unreadable, "line")
                ));
            }
            writeln!(out, "{line}")
        }
        Format::Json => writeln!(
            out,
            "{}",
            json!({"summary": {
                "records": totals.records,
                "hostToRuntime": totals.host_to_runtime,
                "runtimeToHost": totals.runtime_to_host,
                "version": version,
                "violations": totals.violations,
                "recordsWithViolations": totals.records_with_violations,
                "unreadable": totals.unreadable,
            }})
        ),
    }
    .context(WRITE_ERROR)?;
    Ok(if totals.violations > 0 || totals.unreadable > 0 {
        output::EXIT_FOUND
    } else {
        output::EXIT_OK
    })
}

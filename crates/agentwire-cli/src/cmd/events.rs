//! `agentwire events inspect|tail|trim --store URL`: the durable event log for people operating
//! a runtime — threads with their positions, low-watermarks and sizes; the events of a thread,
//! followed live; retention applied by hand.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentwire_events::{
    After, CheckpointInfo, EventLog, MAX_PAGE_EVENTS, Position, Retention, StoredEvent, Tail,
    ThreadId, ThreadInfo,
};
use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The log's id and engine, and every thread (or one) with its low-watermark, next
    /// sequence, kept records and bytes.
    Inspect(InspectArgs),
    /// Print a thread's events: the last ones, or those after a sequence; `--follow` waits
    /// for new commits.
    Tail(TailArgs),
    /// Trim the oldest events of every thread (or one) beyond the retention bounds.
    Trim(TrimArgs),
}

#[derive(Debug, clap::Args)]
struct StoreArgs {
    /// The log: `sqlite:PATH` or `postgres://…`.
    #[arg(long, value_name = "URL")]
    store: String,
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Only this thread.
    #[arg(long)]
    thread: Option<String>,
}

#[derive(Debug, clap::Args)]
struct TailArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The thread to print.
    #[arg(long)]
    thread: String,
    /// Start strictly after this sequence (default: the last `--last` events).
    #[arg(long, value_name = "SEQ", conflicts_with_all = ["from_start", "last"])]
    after: Option<u64>,
    /// Start at the very beginning of the thread (fails if a prefix was trimmed).
    #[arg(long, conflicts_with = "last")]
    from_start: bool,
    /// How many of the newest events to start with.
    #[arg(long, value_name = "N", default_value_t = 10)]
    last: u64,
    /// Keep waiting for new events.
    #[arg(long)]
    follow: bool,
    /// Stop after printing this many events.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

#[derive(Debug, clap::Args)]
struct TrimArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Only this thread.
    #[arg(long)]
    thread: Option<String>,
    /// Records kept per thread.
    #[arg(long, value_name = "N", default_value_t = agentwire_events::DEFAULT_RETAINED_RECORDS)]
    max_records: u64,
    /// Bytes (payloads plus kinds) kept per thread.
    #[arg(long, value_name = "BYTES", default_value_t = agentwire_events::DEFAULT_RETAINED_BYTES)]
    max_bytes: u64,
    /// Age, in seconds, of the oldest event kept.
    #[arg(long, value_name = "SECONDS", default_value_t = agentwire_events::DEFAULT_RETAINED_AGE.as_secs())]
    max_age_secs: u64,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match args.command {
            Command::Inspect(args) => inspect(args, format, out).await,
            Command::Tail(args) => tail(args, format, out).await,
            Command::Trim(args) => trim(args, format, out).await,
        }
    })
}

async fn open(store: &StoreArgs) -> anyhow::Result<Arc<dyn EventLog>> {
    // An operator naming a file that is not there made a typo: never create an empty log.
    if let agentwire_events::StoreUrl::Sqlite(path) =
        agentwire_events::StoreUrl::parse(&store.store)?
        && !path.exists()
    {
        return Err(crate::cmd::Usage::new(
            "usage.no-event-log",
            format!("no event log at {}", path.display()),
        )
        .into());
    }
    agentwire_events::open(&store.store).await.with_context(|| {
        format!(
            "cannot open the event log {}",
            agentwire_events::redact_store_url(&store.store)
        )
    })
}

fn thread_id(name: &str) -> anyhow::Result<ThreadId> {
    ThreadId::new(name).with_context(|| format!("bad --thread {name:?}"))
}

/// Every thread (or the one named), paging through the store.
async fn threads(log: &dyn EventLog, only: Option<&str>) -> anyhow::Result<Vec<ThreadInfo>> {
    if let Some(name) = only {
        let thread = thread_id(name)?;
        return Ok(log.thread(&thread).await?.into_iter().collect());
    }
    let mut all = Vec::new();
    let mut cursor: Option<ThreadId> = None;
    loop {
        let page = log.threads(cursor.as_ref(), MAX_PAGE_EVENTS).await?;
        let Some(last) = page.last() else { break };
        cursor = Some(last.thread.clone());
        all.extend(page);
    }
    Ok(all)
}

/// Each thread's checkpoint position and size (`None` when it has none), without its state.
async fn checkpoints(
    log: &dyn EventLog,
    threads: &[ThreadInfo],
) -> anyhow::Result<Vec<Option<CheckpointInfo>>> {
    let mut out = Vec::with_capacity(threads.len());
    for t in threads {
        out.push(if t.deleted {
            None
        } else {
            log.checkpoint_info(&t.thread).await?
        });
    }
    Ok(out)
}

async fn inspect(args: InspectArgs, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let log = open(&args.store).await?;
    let threads = threads(&*log, args.thread.as_deref()).await?;
    if let (Some(name), true) = (&args.thread, threads.is_empty()) {
        return Err(crate::cmd::Usage::new(
            "usage.unknown-thread",
            format!("thread {name:?} is not in the log"),
        )
        .into());
    }
    let checkpoints = checkpoints(&*log, &threads).await?;
    match format {
        Format::Json => {
            let mut rows = Vec::with_capacity(threads.len());
            for (t, checkpoint) in threads.iter().zip(&checkpoints) {
                let mut row = serde_json::to_value(t)?;
                if let Some(fields) = row.as_object_mut() {
                    fields.insert("checkpoint".to_owned(), serde_json::to_value(checkpoint)?);
                }
                rows.push(row);
            }
            writeln!(
                out,
                "{}",
                json!({
                    "log_id": log.log_id(),
                    "backend": log.backend(),
                    "threads": rows,
                })
            )?
        }
        Format::Human => {
            let backend = serde_json::to_value(log.backend())?;
            writeln!(
                out,
                "log {} ({}), {} thread{}",
                log.log_id(),
                backend.as_str().unwrap_or("?"),
                threads.len(),
                if threads.len() == 1 { "" } else { "s" }
            )?;
            if !threads.is_empty() {
                let width = threads
                    .iter()
                    .map(|t| t.thread.as_str().chars().count())
                    .max()
                    .unwrap_or(0)
                    .max("thread".len());
                writeln!(
                    out,
                    "{:<width$}  {:>10}  {:>10}  {:>8}  {:>12}  {:>10}  state",
                    "thread", "low", "next", "records", "bytes", "checkpoint"
                )?;
                for (t, checkpoint) in threads.iter().zip(&checkpoints) {
                    let through = match checkpoint {
                        Some(c) => c.through.to_string(),
                        None => "-".to_owned(),
                    };
                    writeln!(
                        out,
                        "{:<width$}  {:>10}  {:>10}  {:>8}  {:>12}  {:>10}  {}",
                        t.thread.as_str(),
                        t.low_watermark,
                        t.next_seq,
                        t.records,
                        t.bytes,
                        through,
                        if t.deleted { "deleted" } else { "live" }
                    )?;
                }
            }
        }
    }
    log.close().await?;
    Ok(output::EXIT_OK)
}

async fn tail(args: TailArgs, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let log = open(&args.store).await?;
    let thread = thread_id(&args.thread)?;
    let position = |seq: u64| {
        After::Position(Position {
            log_id: log.log_id(),
            seq,
        })
    };
    let start = if args.from_start {
        After::Start
    } else if let Some(seq) = args.after {
        position(seq)
    } else {
        let info = log.thread(&thread).await?;
        let next = info.as_ref().map_or(0, |t| t.next_seq);
        let low = info.as_ref().map_or(0, |t| t.low_watermark);
        let first = next.saturating_sub(args.last).max(low);
        if first == 0 {
            After::Start
        } else {
            position(first - 1)
        }
    };
    let mut printed = 0u64;
    let limit = |printed: u64| -> usize {
        match args.count {
            Some(count) => usize::try_from(count - printed)
                .unwrap_or(MAX_PAGE_EVENTS)
                .clamp(1, MAX_PAGE_EVENTS),
            None => MAX_PAGE_EVENTS,
        }
    };
    let done = |printed: u64| args.count.is_some_and(|c| printed >= c);
    let mut tail = Tail::new(Arc::clone(&log), thread.clone(), start, MAX_PAGE_EVENTS);
    let mut from = start;
    while !done(printed) {
        let page = if args.follow {
            tail.next_page().await?
        } else {
            let page = log.read(&thread, from, limit(printed)).await?;
            if page.events.is_empty() {
                break;
            }
            page
        };
        for event in &page.events {
            if done(printed) {
                break;
            }
            print_event(out, event, format)?;
            printed += 1;
            from = position(event.seq);
        }
        out.flush()?;
    }
    log.close().await?;
    Ok(output::EXIT_OK)
}

fn print_event(out: &mut dyn Write, event: &StoredEvent, format: Format) -> anyhow::Result<()> {
    let text = std::str::from_utf8(&event.payload).ok();
    match format {
        Format::Json => {
            let mut value = json!({
                "seq": event.seq,
                "event_id": event.event_id,
                "kind": event.kind,
                "committed_at_ms": event.committed_at_ms,
                "size": event.record_size(),
            });
            match text {
                Some(text) => value["payload"] = json!(text),
                None => value["payload_hex"] = json!(hex(&event.payload)),
            }
            writeln!(out, "{value}")?;
        }
        Format::Human => {
            let preview = match text {
                Some(text) => preview(text),
                None => format!("<{} bytes, not UTF-8>", event.payload.len()),
            };
            writeln!(
                out,
                "{:>8}  {}  {}  {}  {}",
                event.seq,
                utc_time(event.committed_at_ms),
                event.kind,
                event.event_id,
                preview
            )?;
        }
    }
    Ok(())
}

/// The longest payload preview a human line shows, in characters.
const PREVIEW_CHARS: usize = 100;

fn preview(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == PREVIEW_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of milliseconds since the Unix epoch.
fn utc_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

async fn trim(args: TrimArgs, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let log = open(&args.store).await?;
    let retention = Retention {
        max_records: args.max_records,
        max_bytes: args.max_bytes,
        max_age: Duration::from_secs(args.max_age_secs),
    };
    let threads = threads(&*log, args.thread.as_deref()).await?;
    if let (Some(name), true) = (&args.thread, threads.is_empty()) {
        return Err(crate::cmd::Usage::new(
            "usage.unknown-thread",
            format!("thread {name:?} is not in the log"),
        )
        .into());
    }
    let now = SystemTime::now();
    let mut trimmed = Vec::new();
    for info in threads.iter().filter(|t| !t.deleted) {
        trimmed.push(log.trim(&info.thread, &retention, now).await?);
    }
    let removed: u64 = trimmed.iter().map(|t| t.removed).sum();
    match format {
        Format::Json => writeln!(
            out,
            "{}",
            json!({
                "log_id": log.log_id(),
                "retention": retention,
                "removed": removed,
                "threads": trimmed,
            })
        )?,
        Format::Human => {
            for t in &trimmed {
                writeln!(
                    out,
                    "{}: removed {}, low-watermark {}, next {}",
                    t.thread, t.removed, t.low_watermark, t.next_seq
                )?;
            }
            writeln!(
                out,
                "removed {removed} event{} from {} thread{}",
                if removed == 1 { "" } else { "s" },
                trimmed.len(),
                if trimmed.len() == 1 { "" } else { "s" }
            )?;
        }
    }
    log.close().await?;
    Ok(output::EXIT_OK)
}

//! Lenient coercion of hand-written or messy logs into a valid event stream
//! ([`to_run_events`]): unpack, fill the envelope, apply only the unambiguous inferences of the
//! protocol's table, report every change, and keep what cannot be repaired.
//!
//! It never guesses: no tool name, no step when more or fewer than one step is running, no
//! approval when more or fewer than one is pending, no decision it does not recognise. A line it
//! cannot repair is kept raw in `malformed` and, wrapped in a valid envelope of type
//! [`MALFORMED_EVENT_TYPE`], in `renderable` — shown folded, never executed.
//!
//! The rules live by concern: `text` reads text and values into lines, `envelope` repairs a
//! line's envelope, `payload` applies the payload inferences, `log` runs the passes over a
//! whole log, `by_line` and `live` run the same rules a line at a time. This module holds the
//! result types and the entry points.

use std::sync::Arc;

use ahash::AHashSet as HashSet;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::event::RunEvent;
use crate::validate::is_events_wrapper;

mod by_line;
mod envelope;
mod live;
mod log;
mod payload;
mod text;

pub use by_line::{
    ByLine, LineItem, LinePlan, LineSource, MetaCount, plan_by_line, plan_by_line_from,
};
pub(crate) use envelope::{Candidate, IdAction, envelope};
pub use live::LiveCoercer;
pub(crate) use payload::{RunTrack, payload};
pub(crate) use text::{Body, body_kind, has_second_line, line_ranges};
pub use text::{MAX_PARSE_THREADS, PARALLEL_PARSE_MIN_BYTES};

use log::coerce_rows;
use text::{Container, UTF8_BOM, ndjson_rows, rows_of};

/// Type of the envelope that wraps a line the coercer could not repair. Not a protocol type:
/// derivation folds it as an unknown event.
pub const MALFORMED_EVENT_TYPE: &str = "malformed";

/// Run id given to events when the whole log names no run.
pub const DEFAULT_RUN_ID: &str = "run_1";

/// How far the lenient parser may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoerceOptions {
    /// Insert a `run:start` for a run that has none, so a panel has a run header.
    pub synthesize_run_start: bool,
    /// `at` for events when no line of the log has one.
    pub default_at: u64,
}

impl Default for CoerceOptions {
    fn default() -> Self {
        CoerceOptions {
            synthesize_run_start: true,
            default_at: 0,
        }
    }
}

/// How serious an issue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueLevel {
    /// Repaired automatically; the event is valid now.
    Fixed,
    /// Could not be repaired; kept raw and wrapped, never executed.
    Degraded,
    /// The line could not be parsed at all; its text is kept in `malformed`.
    Dropped,
    /// For information only (an unknown type folds, a duplicate delivery is left to dedupe).
    Info,
}

impl IssueLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueLevel::Fixed => "fixed",
            IssueLevel::Degraded => "degraded",
            IssueLevel::Dropped => "dropped",
            IssueLevel::Info => "info",
        }
    }
}

/// One change or finding: which line, what, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// Severity.
    pub level: IssueLevel,
    /// 1-based line: the array index + 1, or the NDJSON text line.
    pub line: usize,
    /// Stable code (see docs/runlog.md).
    pub code: &'static str,
    /// What changed and why, for people.
    pub message: String,
}

/// A line that could not be repaired, kept as it came.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MalformedLine {
    /// 1-based line.
    pub line: usize,
    /// The parsed value, when the line was JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
    /// The text, when the line could not be parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// What the input looked like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputShape {
    /// A JSON array of events.
    Array,
    /// An object `{events: [...]}`.
    Events,
    /// A single event object (or any other single value).
    Object,
    /// Newline-delimited JSON.
    Ndjson,
    /// Nothing but whitespace.
    Empty,
}

/// Counts and findings about the input.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CoerceMeta {
    /// Shape of the input.
    pub input: InputShape,
    /// Lines (array items, non-blank NDJSON lines) read.
    pub lines: usize,
    /// Valid events.
    pub events: usize,
    /// Entries of `renderable`.
    pub renderable: usize,
    /// Entries of `malformed`.
    pub malformed: usize,
    /// Lines that needed at least one fix.
    pub fixed: usize,
    /// Lines degraded.
    pub degraded: usize,
    /// Lines dropped.
    pub dropped: usize,
    /// Events synthesized (a missing `run:start`).
    pub synthesized: usize,
    /// Runs named by the log, in order of appearance.
    pub run_ids: Vec<String>,
    /// The goal of the first `run:start` that has one.
    pub goal: Option<String>,
}

/// The result of [`to_run_events`].
#[derive(Debug, Clone, PartialEq)]
pub struct CoerceResult {
    /// Valid events and wrapped bad lines, in input order (a synthesized `run:start` first).
    pub renderable: Vec<RunEvent>,
    /// Which entries of `renderable` are valid events (the others are wrappers).
    valid: Vec<bool>,
    /// Lines that could not be repaired, as they came.
    pub malformed: Vec<MalformedLine>,
    /// Every change and finding, by line.
    pub issues: Vec<Issue>,
    /// Counts, run ids, goal.
    pub meta: CoerceMeta,
}

impl CoerceResult {
    /// The valid events, in input order: ready for derivation.
    pub fn events(&self) -> impl Iterator<Item = &RunEvent> {
        self.renderable
            .iter()
            .zip(&self.valid)
            .filter(|(_, ok)| **ok)
            .map(|(e, _)| e)
    }

    /// Whether the entry `i` of `renderable` is a valid event (not a wrapper).
    pub fn is_valid_entry(&self, i: usize) -> bool {
        self.valid.get(i).copied().unwrap_or(false)
    }

    /// The valid events, moved out.
    pub fn into_events(self) -> Vec<RunEvent> {
        self.renderable
            .into_iter()
            .zip(self.valid)
            .filter(|(_, ok)| *ok)
            .map(|(e, _)| e)
            .collect()
    }

    /// The issues of one level.
    pub fn issues_at(&self, level: IssueLevel) -> impl Iterator<Item = &Issue> {
        self.issues.iter().filter(move |i| i.level == level)
    }
}

impl Serialize for CoerceResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Events<'a>(&'a CoerceResult);
        impl Serialize for Events<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.events())
            }
        }
        let mut s = serializer.serialize_struct("CoerceResult", 5)?;
        s.serialize_field("events", &Events(self))?;
        s.serialize_field("renderable", &self.renderable)?;
        s.serialize_field("malformed", &self.malformed)?;
        s.serialize_field("issues", &self.issues)?;
        s.serialize_field("meta", &self.meta)?;
        s.end()
    }
}

/// Whether a value has the shape of a serialized [`CoerceResult`] (so a caller holding one does
/// not coerce it again).
pub fn is_coerce_result(value: &Value) -> bool {
    let Value::Object(map) = value else {
        return false;
    };
    ["events", "renderable", "malformed", "issues"]
        .iter()
        .all(|k| map.get(*k).is_some_and(Value::is_array))
        && map.get("meta").is_some_and(Value::is_object)
}

/// Coerces any JSON value: an array of events, `{events: [...]}`, or a single event.
///
/// A container `{events: [...]}` may name its run (`runId`, for events that have none) and its
/// goal (`goal`, for the run's `run:start` when that has none, or the one synthesized); every
/// other key, and a `runId` or `goal` that could not be used, is kept in `malformed` (line 0)
/// with a `container-keys-kept` issue.
pub fn to_run_events(input: Value, options: &CoerceOptions) -> CoerceResult {
    let (rows, shape, container) = match input {
        Value::Array(items) => (rows_of(items), InputShape::Array, Container::default()),
        Value::Object(mut map) if is_events_wrapper(&map) => {
            let rows = match map.shift_remove("events") {
                Some(Value::Array(items)) => rows_of(items),
                _ => Vec::new(),
            };
            (rows, InputShape::Events, Container::of(map))
        }
        other => (
            rows_of(vec![other]),
            InputShape::Object,
            Container::default(),
        ),
    };
    coerce_rows(rows, shape, options, container)
}

/// Coerces text: one JSON document (array, `{events: [...]}`, single object) or NDJSON lines.
/// A line that cannot be parsed is dropped from the stream with a `dropped` issue, its text kept
/// in `malformed`.
///
/// A UTF-8 byte order mark at the start is removed and reported (`bom-stripped`, line 1).
pub fn to_run_events_from_slice(bytes: &[u8], options: &CoerceOptions) -> CoerceResult {
    match bytes.strip_prefix(UTF8_BOM) {
        Some(rest) => {
            let mut result = coerce_text(rest, options);
            result.issues.insert(
                0,
                Issue {
                    level: IssueLevel::Fixed,
                    line: 1,
                    code: "bom-stripped",
                    message: "the text starts with a UTF-8 byte order mark (EF BB BF); removed"
                        .into(),
                },
            );
            result.issues.sort_by_key(|i| i.line);
            result.meta.fixed = fixed_lines(&result.issues);
            result
        }
        None => coerce_text(bytes, options),
    }
}

/// Lines with at least one `fixed` issue (issues sorted by line).
fn fixed_lines(issues: &[Issue]) -> usize {
    let mut last = None;
    let mut n = 0;
    for issue in issues.iter().filter(|i| i.level == IssueLevel::Fixed) {
        if last != Some(issue.line) {
            n += 1;
            last = Some(issue.line);
        }
    }
    n
}

fn coerce_text(bytes: &[u8], options: &CoerceOptions) -> CoerceResult {
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() {
        let mut result = coerce_rows(Vec::new(), InputShape::Empty, options, Container::default());
        result.issues.push(Issue {
            level: IssueLevel::Info,
            line: 0,
            code: "empty-input",
            message: "the input holds no events".into(),
        });
        return result;
    }
    // One document when it parses as one (NDJSON fails fast: at the end of its first line).
    if (trimmed.starts_with(b"[") || trimmed.starts_with(b"{") || !has_second_line(trimmed))
        && let Ok(value) = agentwire_schema::parse_json(trimmed)
    {
        return to_run_events(value, options);
    }
    let rows = ndjson_rows(bytes);
    coerce_rows(rows, InputShape::Ndjson, options, Container::default())
}

/// The state the envelope and payload passes share: the issues so far and the generated ids.
pub(crate) struct Coercer {
    pub(crate) issues: Vec<Issue>,
    /// Ids present in the input, built (before any line changes) only when some id may have to
    /// be generated.
    pub(crate) used_ids: Arc<HashSet<String>>,
    pub(crate) next_fresh: u64,
    /// Whether any line has a valid `at`.
    pub(crate) any_at: bool,
    /// Whether a missing `runId` is filled from the container's.
    pub(crate) run_from_container: bool,
}

impl Coercer {
    pub(crate) fn issue(
        &mut self,
        level: IssueLevel,
        line: usize,
        code: &'static str,
        message: String,
    ) {
        self.issues.push(Issue {
            level,
            line,
            code,
            message,
        });
    }

    /// The next `e_N` that no input line uses. Generated ids count up, so they never meet
    /// each other and need not be remembered.
    pub(crate) fn fresh_id(&mut self) -> String {
        loop {
            self.next_fresh += 1;
            let id = format!("e_{}", self.next_fresh);
            if !self.used_ids.contains(&id) {
                return id;
            }
        }
    }
}

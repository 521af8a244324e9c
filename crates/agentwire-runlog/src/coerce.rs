//! Lenient coercion of hand-written or messy logs into a valid event stream
//! ([`to_run_events`]): unpack, fill the envelope, apply only the unambiguous inferences of the
//! protocol's table, report every change, and keep what cannot be repaired.
//!
//! It never guesses: no tool name, no step when more or fewer than one step is running, no
//! approval when more or fewer than one is pending, no decision it does not recognise. A line it
//! cannot repair is kept raw in `malformed` and, wrapped in a valid envelope of type
//! [`MALFORMED_EVENT_TYPE`], in `renderable` — shown folded, never executed.

use std::sync::Arc;

use ahash::{AHashMap as HashMap, AHashSet as HashSet};

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::event::{
    EventKind, MAX_SAFE_INTEGER, RunEvent, SCHEMA_VERSION, json_u64, parse_event_fast,
};
use crate::line::{Field, LineEvent, LineReader, Scan, scan_line};
use crate::opaque::Json;
use crate::state::{
    Applied, Deriver, EventView, IdCheck, IdHasher, Key, RunState, derive_run_state_owned,
};
use crate::validate::{is_events_wrapper, payload_fields_valid, validate_payload_fields};

#[path = "by_line.rs"]
mod by_line;
pub use by_line::{
    ByLine, LineItem, LinePlan, LineSource, MetaCount, plan_by_line, plan_by_line_from,
};
#[path = "live.rs"]
mod live;
pub use live::LiveCoercer;

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

/// One input line.
#[derive(Debug)]
enum Body {
    /// Parsed on the fast path: a complete, well-typed envelope.
    Event(RunEvent),
    /// A JSON object that needs a closer look.
    Object(Map<String, Value>),
    /// Any other JSON value.
    Other(Value),
    /// Text that is not JSON.
    Unparsable(String, String),
}

#[derive(Debug)]
struct Row {
    line: usize,
    body: Body,
}

/// A line after the envelope pass.
#[derive(Debug)]
enum Candidate {
    /// Envelope complete; payload still to check. `raw` is the input value when the envelope
    /// pass changed it, as compact text: most lines become valid events, and their raw value is
    /// needed only by a line that is degraded (the text is a fraction of the tree's memory).
    Ready {
        event: RunEvent,
        raw: Option<Json>,
        fixes: Vec<Issue>,
    },
    /// Cannot become an event.
    Degraded { wrapper: RunEvent, raw: Value },
    /// Could not be parsed.
    Dropped(String),
    /// Decided: valid event.
    Valid(RunEvent),
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

/// What an `{events: [...]}` container says besides its events.
#[derive(Debug, Default)]
struct Container {
    /// Its `runId`, when a non-empty string.
    run_id: Option<String>,
    /// Its `goal`, when a string.
    goal: Option<String>,
    /// Every other key (and `runId`/`goal` when unusable), in input order.
    rest: Map<String, Value>,
}

impl Container {
    fn of(mut map: Map<String, Value>) -> Container {
        let run_id = match map.shift_remove("runId") {
            Some(Value::String(r)) if !r.is_empty() => Some(r),
            Some(other) => {
                map.insert("runId".into(), other);
                None
            }
            None => None,
        };
        let goal = match map.shift_remove("goal") {
            Some(Value::String(g)) => Some(g),
            Some(other) => {
                map.insert("goal".into(), other);
                None
            }
            None => None,
        };
        Container {
            run_id,
            goal,
            rest: map,
        }
    }
}

/// The byte order mark some editors put at the start of UTF-8 text.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

fn rows_of(items: Vec<Value>) -> Vec<Row> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| Row {
            line: i + 1,
            body: match v {
                Value::Object(map) => Body::Object(map),
                other => Body::Other(other),
            },
        })
        .collect()
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

fn has_second_line(bytes: &[u8]) -> bool {
    let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
        return false;
    };
    !bytes[nl..].trim_ascii().is_empty()
}

/// Most threads that parse NDJSON lines at once.
pub const MAX_PARSE_THREADS: usize = 8;

/// Inputs smaller than this are parsed on the calling thread only.
pub const PARALLEL_PARSE_MIN_BYTES: usize = 4 << 20;

/// Parses NDJSON lines; large inputs are cut at line boundaries into one chunk per available
/// core (at most [`MAX_PARSE_THREADS`]) and parsed in parallel. Rows keep input order.
fn ndjson_rows(bytes: &[u8]) -> Vec<Row> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_PARSE_THREADS);
    if threads < 2 || bytes.len() < PARALLEL_PARSE_MIN_BYTES {
        return ndjson_rows_from(bytes, 0);
    }
    let mut chunks: Vec<(&[u8], usize)> = Vec::with_capacity(threads);
    let mut rest = bytes;
    let mut first_line = 0;
    for k in (1..=threads).rev() {
        if k == 1 || rest.is_empty() {
            chunks.push((rest, first_line));
            break;
        }
        let target = rest.len() / k;
        let cut = rest[target..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| target + p + 1);
        let (chunk, tail) = rest.split_at(cut);
        chunks.push((chunk, first_line));
        first_line += chunk.iter().filter(|&&b| b == b'\n').count();
        rest = tail;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .skip(1)
            .map(|&(chunk, first)| scope.spawn(move || ndjson_rows_from(chunk, first)))
            .collect();
        let mut rows = chunks
            .first()
            .map_or_else(Vec::new, |&(c, f)| ndjson_rows_from(c, f));
        for (handle, &(chunk, first)) in handles.into_iter().zip(chunks.iter().skip(1)) {
            // A parsing thread cannot panic on input; if it did, parse its chunk again here.
            match handle.join() {
                Ok(more) => rows.extend(more),
                Err(_) => rows.extend(ndjson_rows_from(chunk, first)),
            }
        }
        rows
    })
}

fn ndjson_rows_from(bytes: &[u8], first_line: usize) -> Vec<Row> {
    let mut rows = Vec::with_capacity(bytes.len() / 256 + 1);
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_bytes = line.trim_ascii();
        if line_bytes.is_empty() {
            continue;
        }
        rows.push(Row {
            line: first_line + i + 1,
            body: parse_body(line_bytes),
        });
    }
    rows
}

/// One trimmed, non-blank NDJSON line, parsed.
fn parse_body(line_bytes: &[u8]) -> Body {
    match parse_event_fast(line_bytes) {
        Some(event) => Body::Event(event),
        None => match agentwire_schema::parse_json(line_bytes) {
            Ok(Value::Object(map)) => Body::Object(map),
            Ok(other) => Body::Other(other),
            Err(err) => Body::Unparsable(
                String::from_utf8_lossy(line_bytes).into_owned(),
                format!("{} ({})", err, err.kind.code()),
            ),
        },
    }
}

/// Splits a type name into lower-case words at separators and at lower-to-upper case changes.
fn type_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if matches!(c, '_' | '-' | ':' | '.' | ' ' | '/') {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The fixed aliases of the protocol's table (after name-style normalisation).
const TYPE_ALIASES: &[(&str, EventKind)] = &[
    ("step:end", EventKind::StepDone),
    ("step:finish", EventKind::StepDone),
];

/// How a type name maps to a known type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeFix {
    /// Already the wire name.
    Exact(EventKind),
    /// A different naming style of a known type (`tool_call`, `ToolCall`).
    Style(EventKind),
    /// One of the fixed aliases (`step_end`, `step_finish`).
    Alias(EventKind),
    /// Not a known type in any style: an unknown type, folded.
    Unknown,
}

fn classify_type(name: &str) -> TypeFix {
    if let Some(kind) = EventKind::from_wire(name) {
        return TypeFix::Exact(kind);
    }
    let joined = type_words(name).join(":");
    if let Some(kind) = EventKind::from_wire(&joined) {
        return TypeFix::Style(kind);
    }
    match TYPE_ALIASES.iter().find(|(alias, _)| *alias == joined) {
        Some(&(_, kind)) => TypeFix::Alias(kind),
        None => TypeFix::Unknown,
    }
}

/// Decision synonyms, compared after trimming and lower-casing.
const DECISION_SYNONYMS: &[(&str, &str)] = &[
    ("approve", "approve"),
    ("approved", "approve"),
    ("ok", "approve"),
    ("okay", "approve"),
    ("yes", "approve"),
    ("allow", "approve"),
    ("allowed", "approve"),
    ("accept", "approve"),
    ("accepted", "approve"),
    ("confirm", "approve"),
    ("confirmed", "approve"),
    ("grant", "approve"),
    ("granted", "approve"),
    ("edit", "edit"),
    ("edited", "edit"),
    ("modify", "edit"),
    ("modified", "edit"),
    ("amend", "edit"),
    ("amended", "edit"),
    ("revise", "edit"),
    ("revised", "edit"),
    ("reject", "reject"),
    ("rejected", "reject"),
    ("deny", "reject"),
    ("denied", "reject"),
    ("no", "reject"),
    ("decline", "reject"),
    ("declined", "reject"),
    ("refuse", "reject"),
    ("refused", "reject"),
];

/// Fields whose text may stand in for a missing approval `summary`, in order.
const SUMMARY_SYNONYMS: &[&str] = &["title", "message", "reason"];

/// What the coercer tracks per run to make the pairing inferences.
#[derive(Debug, Default)]
struct RunTrack {
    running_steps: HashSet<String>,
    /// Calls in call order; paired ones are skipped lazily.
    call_stack: Vec<String>,
    unpaired_calls: HashSet<String>,
    pending_approvals: HashSet<String>,
}

impl RunTrack {
    fn latest_unpaired_call(&mut self) -> Option<String> {
        while let Some(top) = self.call_stack.last() {
            if self.unpaired_calls.contains(top) {
                return Some(top.clone());
            }
            self.call_stack.pop();
        }
        None
    }

    fn record(&mut self, kind: EventKind, event: &impl EventView) {
        match kind {
            EventKind::StepStart => {
                if let Some(step) = event.str_field(Key::StepId)
                    && !self.running_steps.contains(step.as_ref())
                {
                    self.running_steps.insert(step.into_owned());
                }
            }
            EventKind::StepDone | EventKind::StepError => {
                if let Some(step) = event.str_field(Key::StepId) {
                    self.running_steps.remove(step.as_ref());
                }
            }
            EventKind::ToolCall => {
                let key = event
                    .string_field(Key::CallId)
                    .unwrap_or_else(|| event.id().to_owned());
                self.unpaired_calls.insert(key.clone());
                self.call_stack.push(key);
            }
            EventKind::ToolResult => {
                if let Some(call) = event.str_field(Key::CallId) {
                    self.unpaired_calls.remove(call.as_ref());
                    // Paired calls on top of the stack are never an answer again: drop them now
                    // so the stack holds only what may still be paired.
                    while let Some(top) = self.call_stack.last() {
                        if self.unpaired_calls.contains(top) {
                            break;
                        }
                        self.call_stack.pop();
                    }
                }
            }
            EventKind::ApprovalRequest => {
                let key = event
                    .string_field(Key::ApprovalId)
                    .unwrap_or_else(|| event.id().to_owned());
                self.pending_approvals.insert(key);
            }
            EventKind::ApprovalDecision => {
                if let Some(a) = event.str_field(Key::ApprovalId) {
                    self.pending_approvals.remove(a.as_ref());
                }
            }
            _ => {}
        }
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct Coercer {
    issues: Vec<Issue>,
    /// Ids present in the input, built (before any line changes) only when some id may have to
    /// be generated.
    used_ids: Arc<HashSet<String>>,
    next_fresh: u64,
    /// Whether any line has a valid `at`.
    any_at: bool,
    /// Whether a missing `runId` is filled from the container's.
    run_from_container: bool,
}

impl Coercer {
    fn issue(&mut self, level: IssueLevel, line: usize, code: &'static str, message: String) {
        self.issues.push(Issue {
            level,
            line,
            code,
            message,
        });
    }

    /// The next `e_N` that no input line uses. Generated ids count up, so they never meet
    /// each other and need not be remembered.
    fn fresh_id(&mut self) -> String {
        loop {
            self.next_fresh += 1;
            let id = format!("e_{}", self.next_fresh);
            if !self.used_ids.contains(&id) {
                return id;
            }
        }
    }
}

fn body_value(body: &Body) -> Value {
    match body {
        Body::Event(e) => e.to_value(),
        Body::Object(map) => Value::Object(map.clone()),
        Body::Other(v) => v.clone(),
        Body::Unparsable(text, _) => Value::String(text.clone()),
    }
}

fn bodies_equal(a: &Body, b: &Body) -> bool {
    match (a, b) {
        (Body::Event(x), Body::Event(y)) => x == y,
        (Body::Object(x), Body::Object(y)) => x == y,
        _ => body_value(a) == body_value(b),
    }
}

/// What to do with a line's id after comparing it with earlier lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdAction {
    Keep,
    /// Same id and same content as line `usize`: a duplicate delivery, kept for dedupe.
    Duplicate(usize),
    /// Same id as line `usize` but different content: re-assigned.
    Reassign(usize),
}

fn body_id(body: &Body) -> Option<&str> {
    match body {
        Body::Event(e) => Some(&e.id),
        Body::Object(map) => map
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

fn body_run_id(body: &Body) -> Option<&str> {
    match body {
        Body::Event(e) => Some(&e.run_id),
        Body::Object(map) => map
            .get("runId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

fn valid_u64(value: Option<&Value>) -> Option<u64> {
    value.and_then(json_u64).filter(|v| *v <= MAX_SAFE_INTEGER)
}

fn body_seq(body: &Body) -> Option<u64> {
    match body {
        Body::Event(e) => Some(e.seq),
        Body::Object(map) => valid_u64(map.get("seq")),
        _ => None,
    }
}

fn body_at(body: &Body) -> Option<u64> {
    match body {
        Body::Event(e) => Some(e.at),
        Body::Object(map) => valid_u64(map.get("at")),
        _ => None,
    }
}

/// The known type a line will have, when its version allows reading it.
fn body_kind(body: &Body) -> Option<EventKind> {
    let (name, version) = match body {
        Body::Event(e) => (e.event_type.as_str(), Some(e.schema_version)),
        Body::Object(map) => (
            map.get("type").and_then(Value::as_str)?,
            map.get("schemaVersion").map(|v| json_u64(v).unwrap_or(0)),
        ),
        _ => return None,
    };
    if version.is_some_and(|v| v != SCHEMA_VERSION) {
        return None;
    }
    match classify_type(name) {
        TypeFix::Exact(k) | TypeFix::Style(k) | TypeFix::Alias(k) => Some(k),
        TypeFix::Unknown => None,
    }
}

fn coerce_rows(
    mut rows: Vec<Row>,
    shape: InputShape,
    options: &CoerceOptions,
    mut container: Container,
) -> CoerceResult {
    let mut co = Coercer {
        issues: Vec::new(),
        used_ids: Arc::default(),
        next_fresh: 0,
        any_at: false,
        run_from_container: container.run_id.is_some(),
    };

    // Pass 1: facts about the whole log, before anything changes.
    let mut run_ids: Vec<String> = Vec::new();
    let mut all_have_seq = true;
    let mut first_at = None;
    let mut id_actions = vec![IdAction::Keep; rows.len()];
    let mut runs_with_start: HashSet<String> = HashSet::new();
    let mut any_start_without_run = false;
    if let Some(run) = &container.run_id {
        run_ids.push(run.clone());
    }
    {
        let mut first_by_id: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
        let mut last_run: Option<&str> = container.run_id.as_deref();
        for (i, row) in rows.iter().enumerate() {
            if matches!(row.body, Body::Event(_) | Body::Object(_)) {
                all_have_seq &= body_seq(&row.body).is_some();
                if first_at.is_none() {
                    first_at = body_at(&row.body);
                }
            }
            if let Some(run) = body_run_id(&row.body) {
                if last_run != Some(run) && !run_ids.iter().any(|r| r == run) {
                    run_ids.push(run.to_owned());
                }
                last_run = Some(run);
            }
            if body_kind(&row.body) == Some(EventKind::RunStart) {
                match body_run_id(&row.body) {
                    Some(run) => {
                        runs_with_start.insert(run.to_owned());
                    }
                    None => any_start_without_run = true,
                }
            }
            if let Some(id) = body_id(&row.body) {
                match first_by_id.get(id) {
                    None => {
                        first_by_id.insert(id, i);
                    }
                    Some(&first) => {
                        id_actions[i] = if bodies_equal(&rows[first].body, &row.body) {
                            IdAction::Duplicate(rows[first].line)
                        } else {
                            IdAction::Reassign(rows[first].line)
                        };
                    }
                }
            }
        }
    }
    co.any_at = first_at.is_some();
    let may_generate = id_actions
        .iter()
        .any(|a| matches!(a, IdAction::Reassign(_)))
        || rows.iter().any(|r| body_id(&r.body).is_none())
        || run_ids.iter().any(|r| !runs_with_start.contains(r))
        || run_ids.is_empty();
    if may_generate {
        co.used_ids = Arc::new(
            rows.iter()
                .filter_map(|r| body_id(&r.body))
                .map(str::to_owned)
                .collect(),
        );
    }
    // The container names the run of its events that name none.
    let lone_run = match (&container.run_id, run_ids.as_slice()) {
        (Some(run), _) => Some(run.clone()),
        (None, []) => Some(DEFAULT_RUN_ID.to_owned()),
        (None, [one]) => Some(one.clone()),
        (None, _) => None,
    };
    if run_ids.is_empty() && rows.iter().any(|r| matches!(r.body, Body::Object(_))) {
        run_ids.push(DEFAULT_RUN_ID.to_owned());
    }

    // Pass 2: the envelope, line by line in input order.
    let mut candidates: Vec<Candidate> = Vec::with_capacity(rows.len());
    let mut lines: Vec<usize> = Vec::with_capacity(rows.len());
    let mut last_at = first_at.unwrap_or(options.default_at);
    let mut prev_seq = 0u64;
    for i in 0..rows.len() {
        let line = rows[i].line;
        lines.push(line);
        let body = std::mem::replace(&mut rows[i].body, Body::Other(Value::Null));
        let candidate = envelope(
            &mut co,
            line,
            body,
            id_actions[i],
            lone_run.as_deref(),
            &mut last_at,
            prev_seq,
        );
        if let Candidate::Ready { event, .. } | Candidate::Degraded { wrapper: event, .. } =
            &candidate
        {
            prev_seq = event.seq;
        }
        candidates.push(candidate);
    }
    // Every body has moved into its candidate.
    drop(rows);

    // Pass 3: a run:start for each run that has none.
    let mut synthesized: Vec<(usize, RunEvent)> = Vec::new();
    if options.synthesize_run_start && !(any_start_without_run && lone_run.is_some()) {
        let mut min_seq: HashMap<&str, u64> = HashMap::new();
        for c in &candidates {
            if let Candidate::Ready { event, .. } = c {
                let m = min_seq.entry(event.run_id.as_str()).or_insert(event.seq);
                *m = (*m).min(event.seq);
            }
        }
        let mut done: HashSet<String> = runs_with_start;
        for (pos, c) in candidates.iter().enumerate() {
            let Candidate::Ready { event, .. } = c else {
                continue;
            };
            if done.contains(&event.run_id) {
                continue;
            }
            done.insert(event.run_id.clone());
            let mut payload = Map::new();
            if container.run_id.as_deref() == Some(event.run_id.as_str())
                && let Some(goal) = container.goal.take()
            {
                payload.insert("goal".into(), Value::String(goal));
            }
            synthesized.push((
                pos,
                RunEvent {
                    id: String::new(),
                    run_id: event.run_id.clone(),
                    seq: min_seq
                        .get(event.run_id.as_str())
                        .map_or(0, |s| s.saturating_sub(1)),
                    at: event.at,
                    schema_version: SCHEMA_VERSION,
                    event_type: EventKind::RunStart.wire_name().to_owned(),
                    payload,
                },
            ));
        }
        for (pos, event) in &mut synthesized {
            event.id = co.fresh_id();
            let line = lines[*pos];
            let goal = if event.payload.contains_key("goal") {
                "with the container's goal"
            } else {
                "no goal: none was given"
            };
            co.issue(
                IssueLevel::Fixed,
                line,
                "run-start-synthesized",
                format!(
                    "run {} has no run:start; inserted {} before line {line} so the run has a header \
                     ({goal})",
                    event.run_id, event.id
                ),
            );
        }
    }
    // For a run whose first event has seq 0 the synthesized start shares seq 0; equal seqs keep
    // list order, and the start comes first.

    // Pass 4: renumber seq in list order when some line lacks one.
    if !all_have_seq {
        let mut seq = 0u64;
        let mut synth = synthesized.iter_mut().peekable();
        for (pos, c) in candidates.iter_mut().enumerate() {
            while let Some((_, event)) = synth.next_if(|(p, _)| *p == pos) {
                seq += 1;
                event.seq = seq;
            }
            let line = lines[pos];
            let (event, fixes) = match c {
                Candidate::Ready { event, fixes, .. } => (event, fixes),
                Candidate::Degraded { wrapper, .. } => {
                    // A wrapper's seq only places it in the timeline.
                    seq += 1;
                    wrapper.seq = seq;
                    continue;
                }
                _ => continue,
            };
            seq += 1;
            let old = std::mem::replace(&mut event.seq, seq);
            let had = old != u64::MAX;
            if !had || old != seq {
                let message = if had {
                    format!(
                        "seq {old} replaced by {seq}: some lines lack seq, so the whole log is \
                         renumbered in input order"
                    )
                } else {
                    format!("seq missing; renumbered in input order to {seq}")
                };
                fixes.push(Issue {
                    level: IssueLevel::Fixed,
                    line,
                    code: "seq-renumbered",
                    message,
                });
            }
        }
    }

    // Pass 5: payloads, in seq order (the order the events happened in).
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by_key(|&i| match &candidates[i] {
        Candidate::Ready { event, .. } | Candidate::Degraded { wrapper: event, .. } => event.seq,
        _ => 0,
    });
    let mut tracks: Vec<(String, RunTrack)> = Vec::new();
    let mut last_track = usize::MAX;
    for i in order {
        let Candidate::Ready { .. } = &candidates[i] else {
            continue;
        };
        let line = lines[i];
        let placeholder = Candidate::Dropped(String::new());
        let Candidate::Ready {
            mut event,
            raw,
            fixes,
        } = std::mem::replace(&mut candidates[i], placeholder)
        else {
            continue;
        };
        let t = if last_track < tracks.len() && tracks[last_track].0 == event.run_id {
            last_track
        } else {
            match tracks.iter().position(|(r, _)| *r == event.run_id) {
                Some(t) => t,
                None => {
                    tracks.push((event.run_id.clone(), RunTrack::default()));
                    tracks.len() - 1
                }
            }
        };
        last_track = t;
        let track = &mut tracks[t].1;
        let mut fixes = fixes;
        let outcome = payload(&mut event, track, line, &mut fixes);
        match outcome {
            Ok(kind) => {
                if let Some(kind) = kind {
                    track.record(kind, &event);
                }
                co.issues.extend(fixes);
                candidates[i] = Candidate::Valid(event);
            }
            Err(degrade) => {
                let raw = raw.map_or_else(|| event.to_value(), |raw| raw.to_value());
                for fix in fixes {
                    // Envelope fixes are visible in the wrapper; payload fixes did not happen.
                    if !is_envelope_code(fix.code) {
                        continue;
                    }
                    co.issues.push(fix);
                }
                let codes: Vec<&str> = degrade.iter().map(|(c, _)| *c).collect();
                for (code, message) in &degrade {
                    co.issue(IssueLevel::Degraded, line, code, message.clone());
                }
                let wrapper = wrap(&event, line, &codes, raw.clone());
                candidates[i] = Candidate::Degraded { wrapper, raw };
            }
        }
    }

    // The container's goal goes to its run's first run:start when that has none.
    if let (Some(run), Some(goal)) = (&container.run_id, container.goal.take()) {
        let start = candidates
            .iter_mut()
            .enumerate()
            .find_map(|(pos, c)| match c {
                Candidate::Valid(e)
                    if e.run_id == *run && e.kind() == Some(EventKind::RunStart) =>
                {
                    Some((pos, e))
                }
                _ => None,
            });
        match start {
            Some((pos, e)) if !e.payload.contains_key("goal") => {
                e.payload.insert("goal".into(), Value::String(goal));
                co.issue(
                    IssueLevel::Fixed,
                    lines[pos],
                    "goal-from-container",
                    format!("run:start of run {run} has no goal; took the container's goal"),
                );
            }
            Some((_, e)) if e.str_field("goal") == Some(goal.as_str()) => {}
            _ => {
                container.rest.insert("goal".into(), Value::String(goal));
            }
        }
    } else if let Some(goal) = container.goal.take() {
        container.rest.insert("goal".into(), Value::String(goal));
    }

    // Output, in input order.
    let mut renderable = Vec::with_capacity(candidates.len() + synthesized.len());
    let mut valid = Vec::with_capacity(candidates.len() + synthesized.len());
    let mut malformed = Vec::new();
    let mut meta = CoerceMeta {
        input: shape,
        lines: candidates.len(),
        events: 0,
        renderable: 0,
        malformed: 0,
        fixed: 0,
        degraded: 0,
        dropped: 0,
        synthesized: synthesized.len(),
        run_ids,
        goal: None,
    };
    let mut synth = synthesized.into_iter().peekable();
    for (pos, c) in candidates.into_iter().enumerate() {
        while let Some((_, event)) = synth.next_if(|(p, _)| *p == pos) {
            if meta.goal.is_none() {
                meta.goal = event.str_field("goal").map(str::to_owned);
            }
            renderable.push(event);
            valid.push(true);
        }
        match c {
            Candidate::Valid(event) => {
                if meta.goal.is_none() && event.kind() == Some(EventKind::RunStart) {
                    meta.goal = event.str_field("goal").map(str::to_owned);
                }
                renderable.push(event);
                valid.push(true);
            }
            Candidate::Degraded { wrapper, raw } => {
                meta.degraded += 1;
                malformed.push(MalformedLine {
                    line: lines[pos],
                    raw: Some(raw),
                    text: None,
                });
                renderable.push(wrapper);
                valid.push(false);
            }
            Candidate::Dropped(text) => {
                meta.dropped += 1;
                malformed.push(MalformedLine {
                    line: lines[pos],
                    raw: None,
                    text: Some(text),
                });
            }
            Candidate::Ready { .. } => {}
        }
    }
    if !container.rest.is_empty() {
        let keys: Vec<&str> = container.rest.keys().map(String::as_str).collect();
        co.issue(
            IssueLevel::Degraded,
            0,
            "container-keys-kept",
            format!(
                "the container's {} {} {} not read as events or run facts: kept in malformed (line 0)",
                if keys.len() == 1 { "key" } else { "keys" },
                keys.join(", "),
                if keys.len() == 1 { "is" } else { "are" }
            ),
        );
        malformed.insert(
            0,
            MalformedLine {
                line: 0,
                raw: Some(Value::Object(container.rest)),
                text: None,
            },
        );
    }
    meta.events = valid.iter().filter(|v| **v).count();
    meta.renderable = renderable.len();
    meta.malformed = malformed.len();
    let mut issues = co.issues;
    issues.sort_by_key(|i| i.line);
    meta.fixed = fixed_lines(&issues);
    CoerceResult {
        renderable,
        valid,
        malformed,
        issues,
        meta,
    }
}

fn is_envelope_code(code: &str) -> bool {
    matches!(
        code,
        "id-filled"
            | "id-reassigned"
            | "run-id-filled"
            | "at-filled"
            | "schema-version-filled"
            | "seq-renumbered"
            | "seq-filled"
            | "seq-invalid"
            | "type-normalized"
            | "type-alias"
            | "duplicate-delivery"
    )
}

fn wrap(event: &RunEvent, line: usize, codes: &[&str], raw: Value) -> RunEvent {
    let mut payload = Map::new();
    payload.insert("line".into(), json!(line));
    payload.insert("codes".into(), json!(codes));
    payload.insert("raw".into(), raw);
    RunEvent {
        id: event.id.clone(),
        run_id: event.run_id.clone(),
        seq: event.seq,
        at: event.at,
        schema_version: SCHEMA_VERSION,
        event_type: MALFORMED_EVENT_TYPE.to_owned(),
        payload,
    }
}

/// The envelope pass of one line.
#[allow(clippy::too_many_arguments)]
fn envelope(
    co: &mut Coercer,
    line: usize,
    body: Body,
    id_action: IdAction,
    lone_run: Option<&str>,
    last_at: &mut u64,
    prev_seq: u64,
) -> Candidate {
    let mut fixes = Vec::new();
    let fallback_run = lone_run.unwrap_or("unknown").to_owned();
    let mut map = match body {
        Body::Event(mut event) => {
            *last_at = event.at;
            let mut raw = None;
            if event.schema_version == SCHEMA_VERSION
                && let Some(fix) = normalize_type(&mut event.event_type, line)
            {
                let mut value = event.to_value();
                // The value as it came: with the original type.
                if let Value::Object(m) = &mut value {
                    m.insert("type".into(), Value::String(fix.1.clone()));
                }
                raw = Some(Json::from_value(&value));
                fixes.push(fix.0);
            }
            match id_action {
                IdAction::Keep => {}
                IdAction::Duplicate(first) => fixes.push(duplicate_issue(line, &event.id, first)),
                IdAction::Reassign(first) => {
                    if raw.is_none() {
                        raw = Some(Json::from_value(&event.to_value()));
                    }
                    let new = co.fresh_id();
                    fixes.push(reassign_issue(line, &event.id, &new, first));
                    event.id = new;
                }
            }
            return Candidate::Ready { event, raw, fixes };
        }
        Body::Object(map) => map,
        Body::Other(value) => {
            let id = co.fresh_id();
            let event = RunEvent {
                id,
                run_id: fallback_run,
                seq: prev_seq,
                at: *last_at,
                schema_version: SCHEMA_VERSION,
                event_type: String::new(),
                payload: Map::new(),
            };
            let message = format!("a line must be a JSON object, not {}", type_of(&value));
            co.issue(IssueLevel::Degraded, line, "not-an-object", message);
            let wrapper = wrap(&event, line, &["not-an-object"], value.clone());
            return Candidate::Degraded {
                wrapper,
                raw: value,
            };
        }
        Body::Unparsable(text, error) => {
            co.issue(
                IssueLevel::Dropped,
                line,
                "unparsable-line",
                format!("not JSON: {error}; the text is kept in malformed"),
            );
            return Candidate::Dropped(text);
        }
    };
    let raw = Json::from_map(&map);
    let mut degrade: Vec<(&'static str, String)> = Vec::new();

    // id: a mechanical key; a missing or unusable one is replaced.
    let id = match (map.shift_remove("id"), id_action) {
        (Some(Value::String(id)), IdAction::Keep) if !id.is_empty() => id,
        (Some(Value::String(id)), IdAction::Duplicate(first)) if !id.is_empty() => {
            fixes.push(duplicate_issue(line, &id, first));
            id
        }
        (Some(Value::String(id)), IdAction::Reassign(first)) if !id.is_empty() => {
            let new = co.fresh_id();
            fixes.push(reassign_issue(line, &id, &new, first));
            new
        }
        (old, _) => {
            let new = co.fresh_id();
            let message = match old {
                None => format!("id missing; assigned {new}"),
                Some(v) => format!("id {v} is not a non-empty string; assigned {new}"),
            };
            fixes.push(Issue {
                level: IssueLevel::Fixed,
                line,
                code: "id-filled",
                message,
            });
            new
        }
    };

    // runId carries meaning: filled only when the log names at most one run.
    let run_id = match map.shift_remove("runId") {
        Some(Value::String(r)) if !r.is_empty() => r,
        None => match lone_run {
            Some(run) => {
                fixes.push(Issue {
                    level: IssueLevel::Fixed,
                    line,
                    code: "run-id-filled",
                    message: if co.run_from_container {
                        format!("runId missing; the container names the run: {run}")
                    } else {
                        format!("runId missing; the log has one run: {run}")
                    },
                });
                run.to_owned()
            }
            None => {
                degrade.push((
                    "run-id-ambiguous",
                    "runId missing and the log names several runs: not guessing which".into(),
                ));
                fallback_run.clone()
            }
        },
        Some(other) => {
            degrade.push((
                "invalid-envelope",
                format!("runId must be a non-empty string, not {}", type_of(&other)),
            ));
            fallback_run.clone()
        }
    };

    // seq: kept when every line has one; otherwise pass 4 renumbers (u64::MAX marks missing).
    let seq = match map.shift_remove("seq") {
        Some(v) => match valid_u64(Some(&v)) {
            Some(seq) => seq,
            None => {
                fixes.push(Issue {
                    level: IssueLevel::Info,
                    line,
                    code: "seq-invalid",
                    message: format!("seq {v} is not an integer from 0 to 2^53-1; renumbered"),
                });
                u64::MAX
            }
        },
        None => u64::MAX,
    };

    // at: display only; a missing one takes the previous line's.
    let at = match valid_u64(map.shift_remove("at").as_ref()) {
        Some(at) => {
            *last_at = at;
            at
        }
        None => {
            let at = *last_at;
            let message = if co.any_at {
                format!(
                    "at missing or not a timestamp; took {at} from the nearest line that has one"
                )
            } else {
                format!("at missing or not a timestamp and no line has one; set to {at}")
            };
            fixes.push(Issue {
                level: IssueLevel::Fixed,
                line,
                code: "at-filled",
                message,
            });
            at
        }
    };

    let schema_version = match map.shift_remove("schemaVersion") {
        None => {
            fixes.push(Issue {
                level: IssueLevel::Fixed,
                line,
                code: "schema-version-filled",
                message: format!("schemaVersion missing; set to {SCHEMA_VERSION}"),
            });
            SCHEMA_VERSION
        }
        Some(v) => match valid_u64(Some(&v)).filter(|v| *v >= 1) {
            Some(version) => version,
            None => {
                degrade.push((
                    "invalid-envelope",
                    format!("schemaVersion must be an integer of at least 1, not {v}"),
                ));
                SCHEMA_VERSION
            }
        },
    };

    let mut event_type = match map.shift_remove("type") {
        Some(Value::String(t)) if !t.is_empty() => t,
        None => {
            degrade.push((
                "type-missing",
                "type missing: not guessing what the line is".into(),
            ));
            String::new()
        }
        Some(other) => {
            degrade.push((
                "type-missing",
                format!("type must be a non-empty string, not {}", type_of(&other)),
            ));
            String::new()
        }
    };
    if degrade.is_empty()
        && schema_version == SCHEMA_VERSION
        && let Some((fix, _)) = normalize_type(&mut event_type, line)
    {
        fixes.push(fix);
    }

    let event = RunEvent {
        id,
        run_id,
        seq,
        at,
        schema_version,
        event_type,
        payload: map,
    };
    if degrade.is_empty() {
        return Candidate::Ready {
            event,
            raw: Some(raw),
            fixes,
        };
    }
    let codes: Vec<&str> = degrade.iter().map(|(c, _)| *c).collect();
    co.issues.extend(fixes);
    for (code, message) in &degrade {
        co.issue(IssueLevel::Degraded, line, code, message.clone());
    }
    let mut event = event;
    if event.seq == u64::MAX {
        event.seq = prev_seq;
    }
    let raw = raw.to_value();
    let wrapper = wrap(&event, line, &codes, raw.clone());
    Candidate::Degraded { wrapper, raw }
}

fn duplicate_issue(line: usize, id: &str, first: usize) -> Issue {
    Issue {
        level: IssueLevel::Info,
        line,
        code: "duplicate-delivery",
        message: format!("same id {id} and same content as line {first}: kept for deduplication"),
    }
}

fn reassign_issue(line: usize, old: &str, new: &str, first: usize) -> Issue {
    Issue {
        level: IssueLevel::Fixed,
        line,
        code: "id-reassigned",
        message: format!(
            "id {old} is already used by line {first} with different content; assigned {new}"
        ),
    }
}

/// Normalises a type name of another naming style or a fixed alias; returns the issue and the
/// original name.
fn normalize_type(event_type: &mut String, line: usize) -> Option<(Issue, String)> {
    let (kind, code, why) = match classify_type(event_type) {
        TypeFix::Exact(_) | TypeFix::Unknown => return None,
        TypeFix::Style(kind) => (kind, "type-normalized", "naming style"),
        TypeFix::Alias(kind) => (kind, "type-alias", "fixed alias"),
    };
    let old = std::mem::replace(event_type, kind.wire_name().to_owned());
    let message = format!("type {old:?} read as {:?} ({why})", kind.wire_name());
    Some((
        Issue {
            level: IssueLevel::Fixed,
            line,
            code,
            message,
        },
        old,
    ))
}

type Degrade = Vec<(&'static str, String)>;

/// The payload pass of one event: the inferences of the table, then validation. Returns the
/// known kind (for tracking) or why the line is degraded.
fn payload(
    event: &mut RunEvent,
    track: &mut RunTrack,
    line: usize,
    fixes: &mut Vec<Issue>,
) -> Result<Option<EventKind>, Degrade> {
    let Some(kind) = event.kind() else {
        if event.schema_version > SCHEMA_VERSION {
            fixes.push(Issue {
                level: IssueLevel::Info,
                line,
                code: "newer-major-version",
                message: format!(
                    "schemaVersion {} is newer than {SCHEMA_VERSION}: folded as an unknown event",
                    event.schema_version
                ),
            });
        } else {
            fixes.push(Issue {
                level: IssueLevel::Info,
                line,
                code: "unknown-type",
                message: format!("unknown type {:?}: folded, not executed", event.event_type),
            });
        }
        return Ok(None);
    };
    // A valid payload needs no inference.
    if payload_fields_valid(kind, &event.payload) {
        return Ok(Some(kind));
    }
    let mut fix = |code: &'static str, message: String| {
        fixes.push(Issue {
            level: IssueLevel::Fixed,
            line,
            code,
            message,
        });
    };
    let p = &mut event.payload;
    match kind {
        EventKind::Plan => {
            if let Some(Value::Array(steps)) = p.get_mut("steps") {
                let mut converted = 0;
                for (i, step) in steps.iter_mut().enumerate() {
                    if let Value::String(title) = step {
                        let title = std::mem::take(title);
                        *step = json!({"id": format!("step_{}", i + 1), "title": title});
                        converted += 1;
                    }
                }
                if converted > 0 {
                    fix(
                        "plan-steps-from-strings",
                        format!(
                            "{converted} plan step(s) given as text became {{id: step_N, title}}"
                        ),
                    );
                }
            }
        }
        EventKind::ToolResult => {
            if !p.contains_key("callId") {
                match track.latest_unpaired_call() {
                    Some(call) => {
                        fix(
                            "call-id-paired",
                            format!(
                                "callId missing; paired with the latest unpaired tool:call {call}"
                            ),
                        );
                        p.insert("callId".into(), Value::String(call));
                    }
                    None => {
                        return Err(vec![(
                            "call-id-unpaired",
                            "callId missing and no tool:call is waiting for a result: not guessing"
                                .into(),
                        )]);
                    }
                }
            }
            if !p.contains_key("ok") {
                let failed = p.get("error").is_some_and(|e| !e.is_null());
                fix(
                    "ok-inferred",
                    if failed {
                        "ok missing; false because the result has an error".into()
                    } else {
                        "ok missing; true because the result has no error".into()
                    },
                );
                p.insert("ok".into(), Value::Bool(!failed));
            }
        }
        EventKind::ToolCall | EventKind::ApprovalRequest => {
            if !p.contains_key("stepId") {
                if track.running_steps.len() == 1 {
                    let step = track
                        .running_steps
                        .iter()
                        .next()
                        .cloned()
                        .unwrap_or_default();
                    fix(
                        "step-id-inferred",
                        format!("stepId missing; {step} is the only step running"),
                    );
                    p.insert("stepId".into(), Value::String(step));
                } else {
                    let n = track.running_steps.len();
                    return Err(vec![(
                        "step-id-ambiguous",
                        format!("stepId missing and {n} steps are running: not guessing"),
                    )]);
                }
            }
            if kind == EventKind::ApprovalRequest {
                if !p.contains_key("risk") {
                    fix(
                        "risk-defaulted",
                        "risk missing; set to the neutral medium".into(),
                    );
                    p.insert("risk".into(), Value::String("medium".into()));
                }
                if !p.contains_key("summary") {
                    let found = SUMMARY_SYNONYMS.iter().find_map(|k| {
                        p.get(*k)
                            .and_then(Value::as_str)
                            .map(|s| (*k, s.to_owned()))
                    });
                    match found {
                        Some((field, text)) => {
                            fix(
                                "summary-from-synonym",
                                format!("summary missing; taken from {field}"),
                            );
                            p.insert("summary".into(), Value::String(text));
                        }
                        None => {
                            return Err(vec![(
                                "summary-missing",
                                "summary missing and no title, message or reason to take it from"
                                    .into(),
                            )]);
                        }
                    }
                }
            } else if !p.contains_key("name") {
                return Err(vec![(
                    "tool-name-missing",
                    "tool name missing: not guessing".into(),
                )]);
            }
        }
        EventKind::ApprovalDecision => {
            if !p.contains_key("approvalId") {
                if track.pending_approvals.len() == 1 {
                    let a = track
                        .pending_approvals
                        .iter()
                        .next()
                        .cloned()
                        .unwrap_or_default();
                    fix(
                        "approval-id-paired",
                        format!("approvalId missing; {a} is the only approval pending"),
                    );
                    p.insert("approvalId".into(), Value::String(a));
                } else {
                    let n = track.pending_approvals.len();
                    return Err(vec![(
                        "approval-id-ambiguous",
                        format!("approvalId missing and {n} approvals are pending: not guessing"),
                    )]);
                }
            }
            match p.get("decision") {
                Some(Value::String(d)) if crate::Decision::from_wire(d).is_none() => {
                    let norm = d.trim().to_lowercase();
                    match DECISION_SYNONYMS.iter().find(|(s, _)| *s == norm) {
                        Some(&(_, to)) => {
                            fix("decision-synonym", format!("decision {d:?} read as {to:?}"));
                            p.insert("decision".into(), Value::String(to.into()));
                        }
                        None => {
                            return Err(vec![(
                                "decision-unknown",
                                format!(
                                    "decision {d:?} is not approve, edit or reject: not guessing"
                                ),
                            )]);
                        }
                    }
                }
                None => {
                    return Err(vec![(
                        "decision-unknown",
                        "decision missing: not guessing".into(),
                    )]);
                }
                _ => {}
            }
        }
        EventKind::StepError if !p.contains_key("retryable") => {
            fix(
                "retryable-defaulted",
                "retryable missing; set to false (no automatic retry is the safe side)".into(),
            );
            p.insert("retryable".into(), Value::Bool(false));
        }
        EventKind::RunPaused if !p.contains_key("reason") => {
            let reason = if track.pending_approvals.is_empty() {
                "user"
            } else {
                "approval"
            };
            fix(
                "paused-reason-inferred",
                format!(
                    "reason missing; {reason} because {} approval is pending",
                    if reason == "user" { "no" } else { "an" }
                ),
            );
            p.insert("reason".into(), Value::String(reason.into()));
        }
        _ => {}
    }
    let problems = validate_payload_fields(kind, &event.payload);
    if problems.is_empty() {
        return Ok(Some(kind));
    }
    let message = problems
        .iter()
        .map(|i| {
            let at = if i.pointer.is_empty() {
                "payload".to_owned()
            } else {
                i.pointer.clone()
            };
            format!("{at}: {}", i.message)
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(vec![(
        "invalid-payload",
        format!("{} payload is invalid: {message}", kind.wire_name()),
    )])
}

/// The line-by-line path of [`coerce_and_derive_ndjson`] alone: the run state when the log can
/// be coerced and folded line by line (then it equals the full path's), `None` when it needs the
/// full coercer (a missing or out-of-order `seq`, a repeated id, a second run, a line that is
/// not a complete envelope, a degraded payload, no `run:start`, or not NDJSON at all). For a
/// host that wants to know whether a log streams, or to choose what to do when it does not.
pub fn stream_coerce_and_derive(bytes: &[u8], options: &CoerceOptions) -> Option<RunState> {
    streamed_state(bytes, options)
}

/// Coerces text like [`to_run_events_from_slice`] and derives the run state of its valid events,
/// without holding the events: the result always equals
/// `derive_run_state_owned(to_run_events_from_slice(bytes, options).into_events())`.
///
/// NDJSON of one run whose lines all parse as complete envelopes, with unique ids and `seq`
/// never decreasing, is coerced and folded line by line, so memory follows the run state rather
/// than the input. Any line that needs a whole-log rule (a missing or out-of-order `seq`, an id
/// collision, a second run, an object that is not a complete envelope, a degraded payload) or a
/// run without `run:start` sends the input through the full coercer instead.
pub fn coerce_and_derive_ndjson(bytes: &[u8], options: &CoerceOptions) -> RunState {
    if let Some(state) = streamed_state(bytes, options) {
        return state;
    }
    match plan_by_line(bytes, options) {
        Some(plan) => plan.derive(),
        None => derive_run_state_owned(to_run_events_from_slice(bytes, options).into_events()),
    }
}

/// The run state of any input text, coerced and normalized: what `agentwire runlog state`
/// prints. Equals `derive_run_state_owned` of the normalized events of
/// [`to_run_events_from_slice`]; NDJSON that the streamed path takes (one run, `seq` never
/// going back, unique ids) needs no normalizing, so it is coerced and folded line by line like
/// [`coerce_and_derive_ndjson`], in memory that follows the run state.
///
/// Other NDJSON of one run that the line-by-line coercer takes ([`plan_by_line`]: `seq` never
/// going back, or missing somewhere so the log is renumbered; no id used twice) is coerced a
/// line at a time and folded as it goes, in memory that follows the run state too.
pub fn derive_run_state_from_slice(bytes: &[u8], options: &CoerceOptions) -> RunState {
    if let Some(state) = streamed_state(bytes, options) {
        return state;
    }
    // One run's events come out of the line-by-line coercer in seq order with unique ids:
    // normalized already.
    if let Some(plan) = plan_by_line(bytes, options)
        && plan.run_ids().len() <= 1
    {
        return plan.derive();
    }
    let mut events = to_run_events_from_slice(bytes, options).into_events();
    crate::stream::normalize_in_place(&mut events);
    derive_run_state_owned(events)
}

/// Inputs at least this large are streamed with their lines scanned on all cores (rayon's pool),
/// when it has two threads or more.
pub const PIPELINE_MIN_BYTES: usize = 1 << 20;

/// How the streamed path splits its work.
#[derive(Debug, Clone, Copy)]
struct Split {
    /// Inputs at least this large are scanned in parallel.
    parallel_from: usize,
    /// Bytes of input per piece scanned as one task (pieces end at a line's end).
    piece_bytes: usize,
    /// Pieces per round: the fold of one round runs while the next round is scanned.
    round_pieces: usize,
}

const SPLIT: Split = Split {
    parallel_from: PIPELINE_MIN_BYTES,
    piece_bytes: 512 << 10,
    round_pieces: 16,
};

/// Non-empty lines of NDJSON: `(line number from 1, byte range of the trimmed line)`.
fn line_ranges(bytes: &[u8]) -> LineRanges<'_> {
    LineRanges {
        bytes,
        breaks: memchr::memchr_iter(b'\n', bytes),
        start: 0,
        number: 0,
    }
}

/// The iterator of [`line_ranges`].
struct LineRanges<'a> {
    bytes: &'a [u8],
    breaks: memchr::Memchr<'a>,
    /// Where the next line starts (past the end when every line was read).
    start: usize,
    /// Lines read so far, blank ones included.
    number: usize,
}

impl LineRanges<'_> {
    /// Line breaks passed so far (once the iterator is done: all of the input's).
    fn breaks_passed(&self) -> usize {
        self.number.saturating_sub(1)
    }
}

impl Iterator for LineRanges<'_> {
    type Item = (usize, usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        while self.start <= self.bytes.len() {
            let end = self.breaks.next().unwrap_or(self.bytes.len());
            let start = std::mem::replace(&mut self.start, end + 1);
            self.number += 1;
            let line = &self.bytes[start..end];
            let trimmed = line.trim_ascii_start();
            let lead = line.len() - trimmed.len();
            let trimmed = trimmed.trim_ascii_end();
            if !trimmed.is_empty() {
                let s = start + lead;
                return Some((self.number, s, s + trimmed.len()));
            }
        }
        None
    }
}

/// The line-by-line path of [`coerce_and_derive_ndjson`]; `None` when the input needs the full
/// coercer. Lines are read by the fast reader ([`crate::line`]) and folded straight into the
/// deriver; a line the reader declines goes through the coercer's own passes. On an input of at
/// least [`PIPELINE_MIN_BYTES`], pieces of it are scanned in parallel while one thread folds
/// (see [`pipelined`]).
fn streamed_state(bytes: &[u8], options: &CoerceOptions) -> Option<RunState> {
    streamed_split(bytes, options, SPLIT)
}

/// [`streamed_state`] with the work split as `split` says.
fn streamed_split(bytes: &[u8], options: &CoerceOptions, split: Split) -> Option<RunState> {
    let trimmed = bytes.trim_ascii();
    // What the full coercer would read as one document (or as nothing) is not streamed.
    if trimmed.is_empty() || !has_second_line(trimmed) || !trimmed.starts_with(b"{") {
        return None;
    }
    let mut fold = StreamFold::new(options);
    // One event per line: the id set is sized once (ids of about 16 bytes; longer ones grow it).
    let lines_hint = memchr::memchr_iter(b'\n', bytes).count() + 1;
    fold.deriver.reserve(lines_hint, lines_hint * 16);
    let parallel = bytes.len() >= split.parallel_from && rayon::current_num_threads() >= 2;
    if parallel {
        fold_pipelined(&mut fold, bytes, 0, Some(lines_hint), split)?;
    } else {
        fold_sequential(&mut fold, &mut LineReader::default(), bytes, 0)?;
    }
    fold.finish()
}

/// Folds the lines of `bytes`, the first of them line `base + 1`, on the calling thread; the
/// line breaks passed, `None` when the log needs the full coercer.
fn fold_sequential(
    fold: &mut StreamFold<'_>,
    reader: &mut LineReader,
    bytes: &[u8],
    base: usize,
) -> Option<usize> {
    let mut ranges = line_ranges(bytes);
    for (line, start, end) in ranges.by_ref() {
        let text = &bytes[start..end];
        match reader.read(text) {
            Some(event) => fold.fast_line(&event, IdCheck::Check(None))?,
            None => fold.line(base + line, parse_event_fast(text)?)?,
        }
    }
    Some(ranges.breaks_passed())
}

/// Bytes of text a caller of [`StreamedState`] reads before each [`StreamedState::push`]: large
/// enough for the parallel scan to overlap the fold for most of a piece, small against a log.
pub const STREAM_PIECE_BYTES: usize = 16 << 20;

/// How a pushed piece is split: rounds of 2 MiB, so that the fold of one overlaps the scan of
/// the next for all but the first round of a piece.
const STREAM_SPLIT: Split = Split {
    parallel_from: PIPELINE_MIN_BYTES,
    piece_bytes: 512 << 10,
    round_pieces: 4,
};

/// The streamed path of [`derive_run_state_from_slice`] for text that arrives in pieces (a file
/// or a pipe read a piece at a time): memory follows the run state, never the text, since a
/// piece is not kept past its [`push`](StreamedState::push).
///
/// [`finish`](StreamedState::finish) gives the state exactly when
/// [`stream_coerce_and_derive`] of the whole text would (and the same state); `None` means the
/// log needs a coercer that sees the whole text: the caller reads it again (or keeps a copy)
/// and asks [`derive_run_state_from_slice`].
pub struct StreamedState<'o> {
    fold: StreamFold<'o>,
    reader: LineReader,
    /// Line breaks in the pieces folded so far.
    base: usize,
    /// Non-blank lines seen, counted up to two.
    lines: u8,
    declined: bool,
}

impl std::fmt::Debug for StreamedState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedState")
            .field("line_breaks", &self.base)
            .field("declined", &self.declined)
            .finish_non_exhaustive()
    }
}

impl<'o> StreamedState<'o> {
    /// A fold of a log coerced with `options`.
    pub fn new(options: &'o CoerceOptions) -> Self {
        StreamedState {
            fold: StreamFold::new(options),
            reader: LineReader::default(),
            base: 0,
            lines: 0,
            declined: false,
        }
    }

    /// Folds the next piece of the text. Every piece but the last ends with a line feed (whole
    /// lines only). `false` once the log needs the full coercer; later pieces are then ignored.
    pub fn push(&mut self, piece: &[u8]) -> bool {
        if self.declined {
            return false;
        }
        if self.lines < 2 {
            for (_, start, _) in line_ranges(piece).take(usize::from(2 - self.lines)) {
                // What the full coercer would read as one document is not streamed.
                if self.lines == 0 && piece[start] != b'{' {
                    self.declined = true;
                    return false;
                }
                self.lines += 1;
            }
        }
        let parallel =
            piece.len() >= STREAM_SPLIT.parallel_from && rayon::current_num_threads() >= 2;
        let folded = if parallel {
            fold_pipelined(&mut self.fold, piece, self.base, None, STREAM_SPLIT)
        } else {
            fold_sequential(&mut self.fold, &mut self.reader, piece, self.base)
        };
        match folded {
            Some(breaks) => self.base += breaks,
            None => self.declined = true,
        }
        !self.declined
    }

    /// The run state; `None` when the log needs the full coercer.
    pub fn finish(self) -> Option<RunState> {
        if self.declined || self.lines < 2 {
            return None;
        }
        self.fold.finish()
    }
}

/// The scanned lines of one piece of the input, in order.
#[derive(Debug, Default)]
struct Batch<'a> {
    lines: Vec<ScannedLine<'a>>,
    fields: Vec<Field>,
    /// Line breaks in the piece (the next piece's first line number is this many further on).
    breaks: usize,
}

/// One line as a scanning task hands it over.
#[derive(Debug)]
struct ScannedLine<'a> {
    /// Line number within its piece, from 1.
    line: usize,
    /// The trimmed line.
    raw: &'a [u8],
    /// For the fast path: its text, scan and id hash.
    fast: Option<(&'a str, Scan, u64)>,
    /// The opaque value the fold keeps, made by the scanner.
    prepared: Option<Json>,
}

impl<'a> Batch<'a> {
    /// Scans `piece` into this batch (reusing its allocations).
    fn scan(&mut self, piece: &'a [u8], hasher: &IdHasher) {
        self.lines.clear();
        self.fields.clear();
        let mut ranges = line_ranges(piece);
        for (line, start, end) in ranges.by_ref() {
            let raw = &piece[start..end];
            let mut prepared = None;
            let fast = std::str::from_utf8(raw).ok().and_then(|text| {
                let scan = scan_line(text, &mut self.fields)?;
                let hash = hasher.hash(scan.id(text));
                prepared = LineEvent::new(text, &scan, &self.fields).prepare();
                Some((text, scan, hash))
            });
            self.lines.push(ScannedLine {
                line,
                raw,
                fast,
                prepared,
            });
        }
        self.breaks = ranges.breaks_passed();
    }
}

/// `bytes` cut into pieces of about `size` bytes, each ending just after a line break (or at the
/// end of the input).
fn pieces(bytes: &[u8], size: usize) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = match rest.get(size..) {
            None => rest.len(),
            Some(after) => memchr::memchr(b'\n', after).map_or(rest.len(), |i| size + i + 1),
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// [`streamed_state`] on all cores: the input is cut into pieces at line breaks, and pieces are
/// scanned (UTF-8 check, fast read, id hash, opaque values) as parallel tasks, a round of them
/// at a time, while the previous round is folded in order on one thread; a core that is done
/// folding helps scanning. What the fold receives is line slices and their scans, in reused
/// batches, never a parsed value.
///
/// The lines of `bytes` are folded into `fold`, the first of them as line `base + 1`; the answer
/// is the line breaks passed, `None` when the log needs the full coercer. With `lines_hint`
/// (the log's lines) the call list is sized from the first piece.
fn fold_pipelined(
    fold: &mut StreamFold<'_>,
    bytes: &[u8],
    mut base: usize,
    lines_hint: Option<usize>,
    split: Split,
) -> Option<usize> {
    let first_line = base;
    let hasher = fold.deriver.id_hasher();
    let mut pieces = pieces(bytes, split.piece_bytes);
    let mut take_round = || pieces.by_ref().take(split.round_pieces).collect::<Vec<_>>();
    let new_round = || {
        (0..split.round_pieces)
            .map(|_| Batch::default())
            .collect::<Vec<_>>()
    };
    let (mut ready, mut next) = (new_round(), new_round());
    let mut round = take_round();
    scan_round(&mut ready, &round, &hasher);
    let mut sized = lines_hint.is_none();
    while !round.is_empty() {
        let upcoming = take_round();
        let (folded, ()) = rayon::join(
            || {
                for batch in &mut ready[..round.len()] {
                    if !sized {
                        sized = true;
                        size_call_list(fold, batch, lines_hint.unwrap_or(0));
                    }
                    fold_batch(fold, batch, base)?;
                    base += batch.breaks;
                }
                Some(())
            },
            || scan_round(&mut next, &upcoming, &hasher),
        );
        folded?;
        std::mem::swap(&mut ready, &mut next);
        round = upcoming;
    }
    Some(base - first_line)
}

/// Scans the pieces of `round` into the first batches of `batches`, a task per piece.
fn scan_round<'a>(batches: &mut [Batch<'a>], round: &[&'a [u8]], hasher: &IdHasher) {
    use rayon::prelude::*;
    batches[..round.len()]
        .par_iter_mut()
        .zip(round.par_iter())
        .with_max_len(1)
        .for_each(|(batch, piece)| batch.scan(piece, hasher));
}

/// The first batch is a sample of the log: sizes the call list from its share of tool calls (a
/// long run's list would otherwise be copied at every doubling).
fn size_call_list(fold: &mut StreamFold<'_>, batch: &Batch<'_>, lines_hint: usize) {
    let calls = batch
        .lines
        .iter()
        .filter(|l| {
            l.fast
                .is_some_and(|(_, scan, _)| scan.kind() == EventKind::ToolCall)
        })
        .count();
    let estimate = lines_hint.saturating_mul(calls) / batch.lines.len().max(1);
    fold.deriver.reserve_tool_calls(estimate + estimate / 16);
}

/// Folds one scanned batch whose first line is line `base + 1` of the input.
fn fold_batch(fold: &mut StreamFold<'_>, batch: &mut Batch<'_>, base: usize) -> Option<()> {
    // The batch's ids first, in a loop of their own: the id set is large and each lookup a
    // cache miss, and a tight loop keeps many in flight. Any repeated id sends the log to the
    // full coercer, so recording a batch ahead changes no outcome.
    for l in &batch.lines {
        if let Some((text, scan, hash)) = l.fast
            && !fold.deriver.record_id(scan.id(text), hash)
        {
            return None;
        }
    }
    for l in &mut batch.lines {
        match l.fast {
            Some((text, scan, _)) => {
                let event =
                    LineEvent::new(text, &scan, &batch.fields).with_prepared(l.prepared.take());
                fold.fast_line(&event, IdCheck::Recorded)?;
            }
            None => fold.line(base + l.line, parse_event_fast(l.raw)?)?,
        }
    }
    Some(())
}

/// `Some` when the deriver folded the event; a repeated id or another run's event needs the full
/// coercer.
fn folded(applied: Applied) -> Option<()> {
    matches!(applied, Applied::Folded | Applied::Late).then_some(())
}

/// The state of the line-by-line path: the coercer's per-line passes and the deriver.
struct StreamFold<'o> {
    options: &'o CoerceOptions,
    co: Coercer,
    deriver: Deriver,
    track: RunTrack,
    run_id: Option<String>,
    has_start: bool,
    prev_seq: u64,
    last_at: u64,
    fixes: Vec<Issue>,
}

impl<'o> StreamFold<'o> {
    fn new(options: &'o CoerceOptions) -> Self {
        StreamFold {
            options,
            co: Coercer {
                issues: Vec::new(),
                used_ids: Arc::default(),
                next_fresh: 0,
                any_at: true,
                run_from_container: false,
            },
            deriver: Deriver::new(),
            track: RunTrack::default(),
            run_id: None,
            has_start: false,
            prev_seq: 0,
            last_at: options.default_at,
            fixes: Vec::new(),
        }
    }

    /// Folds one line read by the fast reader (a valid event of a known type, so the coercer's
    /// passes have nothing to change); `None` when the log needs the full coercer.
    fn fast_line(&mut self, event: &LineEvent<'_>, id: IdCheck) -> Option<()> {
        self.admit(event.run_id, event.seq)?;
        self.has_start |= event.kind == EventKind::RunStart;
        self.last_at = event.at;
        self.prev_seq = event.seq;
        self.track.record(event.kind, event);
        folded(self.deriver.push_view(event, Some(event.kind), id))
    }

    /// Whether a line of run `run_id` at `seq` may be streamed: the log's one run, `seq` not
    /// going back (the coercer orders payload inference by `seq`).
    fn admit(&mut self, run_id: &str, seq: u64) -> Option<()> {
        match &self.run_id {
            None => self.run_id = Some(run_id.to_owned()),
            Some(run) if run != run_id => return None,
            Some(_) => {}
        }
        (seq >= self.prev_seq).then_some(())
    }

    /// Folds one parsed line; `None` when the log needs the full coercer.
    fn line(&mut self, line: usize, event: RunEvent) -> Option<()> {
        self.admit(&event.run_id, event.seq)?;
        let body = Body::Event(event);
        self.has_start |= body_kind(&body) == Some(EventKind::RunStart);
        let Candidate::Ready { mut event, .. } = envelope(
            &mut self.co,
            line,
            body,
            IdAction::Keep,
            self.run_id.as_deref(),
            &mut self.last_at,
            self.prev_seq,
        ) else {
            return None;
        };
        self.prev_seq = event.seq;
        self.fixes.clear();
        let kind = payload(&mut event, &mut self.track, line, &mut self.fixes).ok()?;
        if let Some(kind) = kind {
            self.track.record(kind, &event);
        }
        folded(self.deriver.push_owned(event))
    }

    fn finish(self) -> Option<RunState> {
        if self.options.synthesize_run_start && !self.has_start {
            return None;
        }
        Some(self.deriver.into_state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of a few lines, rounds of three: a small log crosses many rounds.
    const TINY: Split = Split {
        parallel_from: 0,
        piece_bytes: 600,
        round_pieces: 3,
    };
    const SEQUENTIAL: Split = Split {
        parallel_from: usize::MAX,
        ..SPLIT
    };

    fn line(seq: u64, id: &str, body: &str) -> String {
        format!(r#"{{"id":"{id}","runId":"r","seq":{seq},"at":{seq},"schemaVersion":1,{body}}}"#)
    }

    /// A run of `calls` tool calls and results over five steps; every seventh call's step title
    /// has an escape, so the fast reader declines it and the strict path folds it.
    fn run_log(calls: u64) -> Vec<String> {
        let mut lines = vec![line(1, "e1", r#""type":"run:start","goal":"g""#)];
        let mut seq = 1;
        for i in 0..calls {
            let step = format!("s{}", i % 5);
            let title = if i % 7 == 0 { "caf\\u00e9" } else { "plain" };
            for body in [
                format!(r#""type":"step:start","stepId":"{step}","title":"{title}""#),
                format!(
                    r#""type":"tool:call","stepId":"{step}","callId":"c{i}","name":"db.query","args":{{"n":{i}}}"#
                ),
                format!(r#""type":"tool:result","callId":"c{i}","ok":true,"result":[{i}],"ms":3"#),
            ] {
                seq += 1;
                lines.push(line(seq, &format!("e{seq}"), &body));
            }
        }
        lines
    }

    fn ndjson(lines: &[String]) -> Vec<u8> {
        (lines.join("\n") + "\n").into_bytes()
    }

    fn full(bytes: &[u8]) -> RunState {
        derive_run_state_owned(
            to_run_events_from_slice(bytes, &CoerceOptions::default()).into_events(),
        )
    }

    /// Lines are numbered from 1 counting blank ones; once read, the breaks passed are the
    /// input's, so a piece's count carries the next piece's numbering on.
    #[test]
    fn line_ranges_number_lines_and_count_breaks() {
        for (text, lines) in [
            ("", vec![]),
            ("a", vec![(1, "a")]),
            ("a\n", vec![(1, "a")]),
            ("\n\n  b \r\n\nc", vec![(3, "b"), (5, "c")]),
            ("x\n\n", vec![(1, "x")]),
        ] {
            let mut ranges = line_ranges(text.as_bytes());
            let read: Vec<(usize, &str)> =
                ranges.by_ref().map(|(n, s, e)| (n, &text[s..e])).collect();
            assert_eq!(read, lines, "{text:?}");
            assert_eq!(
                ranges.breaks_passed(),
                text.matches('\n').count(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn pieces_cover_the_input_and_end_at_line_breaks() {
        let bytes = ndjson(&run_log(40));
        let cut: Vec<&[u8]> = pieces(&bytes, 600).collect();
        assert!(cut.len() > 10, "{} pieces", cut.len());
        assert_eq!(cut.concat(), bytes);
        for (i, piece) in cut.iter().enumerate() {
            assert_eq!(piece.last(), Some(&b'\n'));
            if i + 1 < cut.len() {
                // Cut at the first line break after 600 bytes.
                assert_eq!(
                    memchr::memchr(b'\n', &piece[600..]),
                    Some(piece.len() - 601)
                );
            }
        }
        // No final line break: the last piece ends with the input.
        let cut = &bytes[..bytes.len() - 1];
        assert_eq!(pieces(cut, 600).collect::<Vec<_>>().concat(), cut);
        assert_eq!(pieces(b"", 600).count(), 0);
    }

    #[test]
    fn parallel_rounds_fold_what_one_thread_folds() {
        let options = CoerceOptions::default();
        let bytes = ndjson(&run_log(120));
        let parallel = streamed_split(&bytes, &options, TINY);
        assert!(parallel.is_some());
        assert_eq!(parallel, streamed_split(&bytes, &options, SEQUENTIAL));
        assert_eq!(parallel, Some(full(&bytes)));
    }

    #[test]
    fn a_repetition_in_a_later_round_needs_the_full_coercer() {
        let options = CoerceOptions::default();
        let clean = run_log(120);
        let last = clean.len() as u64;
        // `e9` is an early fast line, `e2` an early declined one (call 0's step title).
        for (id, body) in [
            (
                "e9",
                r#""type":"step:progress","stepId":"s0","progress":0.5"#,
            ),
            (
                "e2",
                r#""type":"step:progress","stepId":"s0","progress":0.5"#,
            ),
            (
                "e9",
                r#""type":"step:start","stepId":"s0","title":"caf\u00e9""#,
            ),
        ] {
            let mut lines = clean.clone();
            lines.push(line(last + 1, id, body));
            let bytes = ndjson(&lines);
            assert_eq!(streamed_split(&bytes, &options, TINY), None, "{id} {body}");
            assert_eq!(
                streamed_split(&bytes, &options, SEQUENTIAL),
                None,
                "{id} {body}"
            );
        }
        // The same lines with a fresh id stream.
        let mut lines = clean;
        lines.push(line(
            last + 1,
            "fresh",
            r#""type":"step:progress","stepId":"s0""#,
        ));
        let bytes = ndjson(&lines);
        assert_eq!(streamed_split(&bytes, &options, TINY), Some(full(&bytes)));
    }
}

//! The envelope pass of one line: `id`, `runId`, `seq`, `at`, `schemaVersion` and `type`
//! filled or checked, type names of another naming style read as the known type, and the
//! wrapper that carries a line that cannot be repaired.

use serde_json::{Map, Value, json};

use super::text::{Body, valid_u64};
use super::{Coercer, Issue, IssueLevel, MALFORMED_EVENT_TYPE};
use crate::event::{EventKind, RunEvent, SCHEMA_VERSION};
use crate::opaque::Json;

/// A line after the envelope pass.
#[derive(Debug)]
pub(crate) enum Candidate {
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

/// Splits a type name into lower-case words at separators and at lower-to-upper case changes.
pub(crate) fn type_words(name: &str) -> Vec<String> {
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
pub(crate) const TYPE_ALIASES: &[(&str, EventKind)] = &[
    ("step:end", EventKind::StepDone),
    ("step:finish", EventKind::StepDone),
];

/// How a type name maps to a known type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypeFix {
    /// Already the wire name.
    Exact(EventKind),
    /// A different naming style of a known type (`tool_call`, `ToolCall`).
    Style(EventKind),
    /// One of the fixed aliases (`step_end`, `step_finish`).
    Alias(EventKind),
    /// Not a known type in any style: an unknown type, folded.
    Unknown,
}

pub(crate) fn classify_type(name: &str) -> TypeFix {
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

pub(crate) fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What to do with a line's id after comparing it with earlier lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdAction {
    Keep,
    /// Same id and same content as line `usize`: a duplicate delivery, kept for dedupe.
    Duplicate(usize),
    /// Same id as line `usize` but different content: re-assigned.
    Reassign(usize),
}

pub(crate) fn is_envelope_code(code: &str) -> bool {
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

pub(crate) fn wrap(event: &RunEvent, line: usize, codes: &[&str], raw: Value) -> RunEvent {
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
pub(crate) fn envelope(
    co: &mut Coercer,
    line: usize,
    body: Body,
    id_action: IdAction,
    lone_run: Option<&str>,
    last_at: &mut u64,
    prev_seq: u64,
) -> Candidate {
    let map = match body {
        Body::Event(event) => return complete_envelope(co, line, event, id_action, last_at),
        Body::Object(map) => map,
        Body::Other(value) => {
            let fallback_run = lone_run.unwrap_or("unknown").to_owned();
            return not_an_object(co, line, value, fallback_run, *last_at, prev_seq);
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
    let mut pass = ObjectPass {
        co,
        line,
        fixes: Vec::new(),
        degrade: Vec::new(),
    };
    pass.object(map, id_action, lone_run, last_at, prev_seq)
}

/// The envelope pass of a line the fast path parsed as a complete envelope: only its type name
/// and its id may change.
fn complete_envelope(
    co: &mut Coercer,
    line: usize,
    mut event: RunEvent,
    id_action: IdAction,
    last_at: &mut u64,
) -> Candidate {
    let mut fixes = Vec::new();
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
    Candidate::Ready { event, raw, fixes }
}

/// A line that is JSON but not an object: degraded, wrapped where the line stands.
fn not_an_object(
    co: &mut Coercer,
    line: usize,
    value: Value,
    run_id: String,
    at: u64,
    prev_seq: u64,
) -> Candidate {
    let event = RunEvent {
        id: co.fresh_id(),
        run_id,
        seq: prev_seq,
        at,
        schema_version: SCHEMA_VERSION,
        event_type: String::new(),
        payload: Map::new(),
    };
    let message = format!("a line must be a JSON object, not {}", type_of(&value));
    co.issue(IssueLevel::Degraded, line, "not-an-object", message);
    let wrapper = wrap(&event, line, &["not-an-object"], value.clone());
    Candidate::Degraded {
        wrapper,
        raw: value,
    }
}

/// The envelope pass of a JSON object, field by field: the fixes made and the reasons the line
/// is degraded.
struct ObjectPass<'c> {
    co: &'c mut Coercer,
    line: usize,
    fixes: Vec<Issue>,
    degrade: Vec<(&'static str, String)>,
}

impl ObjectPass<'_> {
    fn object(
        &mut self,
        mut map: Map<String, Value>,
        id_action: IdAction,
        lone_run: Option<&str>,
        last_at: &mut u64,
        prev_seq: u64,
    ) -> Candidate {
        let raw = Json::from_map(&map);
        let fallback_run = lone_run.unwrap_or("unknown");
        let id = self.id(map.shift_remove("id"), id_action);
        let run_id = self.run_id(map.shift_remove("runId"), lone_run, fallback_run);
        let seq = self.seq(map.shift_remove("seq"));
        let at = self.at(map.shift_remove("at"), last_at);
        let schema_version = self.schema_version(map.shift_remove("schemaVersion"));
        let event_type = self.event_type(map.shift_remove("type"), schema_version);
        let mut event = RunEvent {
            id,
            run_id,
            seq,
            at,
            schema_version,
            event_type,
            payload: map,
        };
        let line = self.line;
        let fixes = std::mem::take(&mut self.fixes);
        if self.degrade.is_empty() {
            return Candidate::Ready {
                event,
                raw: Some(raw),
                fixes,
            };
        }
        let codes: Vec<&str> = self.degrade.iter().map(|(c, _)| *c).collect();
        self.co.issues.extend(fixes);
        for (code, message) in &self.degrade {
            self.co
                .issue(IssueLevel::Degraded, line, code, message.clone());
        }
        if event.seq == u64::MAX {
            event.seq = prev_seq;
        }
        let raw = raw.to_value();
        let wrapper = wrap(&event, line, &codes, raw.clone());
        Candidate::Degraded { wrapper, raw }
    }

    fn fix(&mut self, code: &'static str, message: String) {
        self.fixes.push(Issue {
            level: IssueLevel::Fixed,
            line: self.line,
            code,
            message,
        });
    }

    /// `id`: a mechanical key; a missing or unusable one is replaced.
    fn id(&mut self, value: Option<Value>, id_action: IdAction) -> String {
        let line = self.line;
        match (value, id_action) {
            (Some(Value::String(id)), IdAction::Keep) if !id.is_empty() => id,
            (Some(Value::String(id)), IdAction::Duplicate(first)) if !id.is_empty() => {
                self.fixes.push(duplicate_issue(line, &id, first));
                id
            }
            (Some(Value::String(id)), IdAction::Reassign(first)) if !id.is_empty() => {
                let new = self.co.fresh_id();
                self.fixes.push(reassign_issue(line, &id, &new, first));
                new
            }
            (old, _) => {
                let new = self.co.fresh_id();
                let message = match old {
                    None => format!("id missing; assigned {new}"),
                    Some(v) => format!("id {v} is not a non-empty string; assigned {new}"),
                };
                self.fix("id-filled", message);
                new
            }
        }
    }

    /// `runId` carries meaning: filled only when the log names at most one run.
    fn run_id(
        &mut self,
        value: Option<Value>,
        lone_run: Option<&str>,
        fallback_run: &str,
    ) -> String {
        match value {
            Some(Value::String(r)) if !r.is_empty() => r,
            None => match lone_run {
                Some(run) => {
                    let message = if self.co.run_from_container {
                        format!("runId missing; the container names the run: {run}")
                    } else {
                        format!("runId missing; the log has one run: {run}")
                    };
                    self.fix("run-id-filled", message);
                    run.to_owned()
                }
                None => {
                    self.degrade.push((
                        "run-id-ambiguous",
                        "runId missing and the log names several runs: not guessing which".into(),
                    ));
                    fallback_run.to_owned()
                }
            },
            Some(other) => {
                self.degrade.push((
                    "invalid-envelope",
                    format!("runId must be a non-empty string, not {}", type_of(&other)),
                ));
                fallback_run.to_owned()
            }
        }
    }

    /// `seq`: kept when every line has one; otherwise the renumbering pass numbers the log
    /// (`u64::MAX` marks a missing one).
    fn seq(&mut self, value: Option<Value>) -> u64 {
        let Some(v) = value else {
            return u64::MAX;
        };
        match valid_u64(Some(&v)) {
            Some(seq) => seq,
            None => {
                self.fixes.push(Issue {
                    level: IssueLevel::Info,
                    line: self.line,
                    code: "seq-invalid",
                    message: format!("seq {v} is not an integer from 0 to 2^53-1; renumbered"),
                });
                u64::MAX
            }
        }
    }

    /// `at`: display only; a missing one takes the previous line's.
    fn at(&mut self, value: Option<Value>, last_at: &mut u64) -> u64 {
        if let Some(at) = valid_u64(value.as_ref()) {
            *last_at = at;
            return at;
        }
        let at = *last_at;
        let message = if self.co.any_at {
            format!("at missing or not a timestamp; took {at} from the nearest line that has one")
        } else {
            format!("at missing or not a timestamp and no line has one; set to {at}")
        };
        self.fix("at-filled", message);
        at
    }

    fn schema_version(&mut self, value: Option<Value>) -> u64 {
        let Some(v) = value else {
            self.fix(
                "schema-version-filled",
                format!("schemaVersion missing; set to {SCHEMA_VERSION}"),
            );
            return SCHEMA_VERSION;
        };
        match valid_u64(Some(&v)).filter(|v| *v >= 1) {
            Some(version) => version,
            None => {
                self.degrade.push((
                    "invalid-envelope",
                    format!("schemaVersion must be an integer of at least 1, not {v}"),
                ));
                SCHEMA_VERSION
            }
        }
    }

    /// `type` carries meaning: never guessed; another naming style of a known type is read as
    /// it once the rest of the envelope is sound.
    fn event_type(&mut self, value: Option<Value>, schema_version: u64) -> String {
        let mut event_type = match value {
            Some(Value::String(t)) if !t.is_empty() => t,
            None => {
                self.degrade.push((
                    "type-missing",
                    "type missing: not guessing what the line is".into(),
                ));
                String::new()
            }
            Some(other) => {
                self.degrade.push((
                    "type-missing",
                    format!("type must be a non-empty string, not {}", type_of(&other)),
                ));
                String::new()
            }
        };
        if self.degrade.is_empty()
            && schema_version == SCHEMA_VERSION
            && let Some((fix, _)) = normalize_type(&mut event_type, self.line)
        {
            self.fixes.push(fix);
        }
        event_type
    }
}

pub(crate) fn duplicate_issue(line: usize, id: &str, first: usize) -> Issue {
    Issue {
        level: IssueLevel::Info,
        line,
        code: "duplicate-delivery",
        message: format!("same id {id} and same content as line {first}: kept for deduplication"),
    }
}

pub(crate) fn reassign_issue(line: usize, old: &str, new: &str, first: usize) -> Issue {
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
pub(crate) fn normalize_type(event_type: &mut String, line: usize) -> Option<(Issue, String)> {
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

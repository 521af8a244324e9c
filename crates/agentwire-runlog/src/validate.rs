//! Strict validation of run events: the envelope, each known type's payload, and splitting any
//! JSON input into valid events and malformed values. Never panics, never drops input.
//!
//! The checks are hand-written from the schema document `protocols/tasklens/run-events.schema.json`
//! (a test holds their verdicts equal to the schema validator's on every fixture and mock run).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::event::{
    EventKind, MAX_SAFE_INTEGER, RunEvent, SCHEMA_VERSION, event_from_object, json_u64,
};

/// One reason an event is not valid, located by a JSON Pointer into the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidationIssue {
    /// Where (`""` for the event itself, `/stepId`, `/steps/0/title`).
    pub pointer: String,
    /// Stable code: `not-object`, `required`, `type`, `min-length`, `minimum`, `maximum`, `enum`.
    pub code: &'static str,
    /// A sentence a person understands.
    pub message: String,
}

impl ValidationIssue {
    fn new(pointer: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        ValidationIssue {
            pointer: pointer.into(),
            code,
            message: message.into(),
        }
    }
}

/// What a field must be, mirroring the schema document's property schemas.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rule {
    NonEmptyString,
    String,
    Bool,
    /// A number with an inclusive minimum and optional inclusive maximum.
    Number(f64, Option<f64>),
    /// An integer with an inclusive minimum and optional inclusive maximum.
    Integer(u64, Option<u64>),
    Enum(&'static [&'static str]),
    ErrorInfo,
    PlanSteps,
    Object,
    /// Opaque: any JSON value.
    Any,
}

/// `(field, rule, required)` for each payload field of a known type.
pub(crate) fn payload_rules(kind: EventKind) -> &'static [(&'static str, Rule, bool)] {
    use Rule::*;
    const RISKS: &[&str] = &["low", "medium", "high", "critical"];
    match kind {
        EventKind::RunStart => &[
            ("goal", String, false),
            ("agent", String, false),
            ("input", Any, false),
        ],
        EventKind::RunDone => &[("output", Any, false), ("summary", String, false)],
        EventKind::RunError => &[
            ("error", ErrorInfo, true),
            ("stepId", NonEmptyString, false),
        ],
        EventKind::RunPaused => &[
            ("reason", Enum(&["approval", "user"]), true),
            ("message", String, false),
        ],
        EventKind::Plan => &[("steps", PlanSteps, true)],
        EventKind::StepStart => &[("stepId", NonEmptyString, true), ("title", String, false)],
        EventKind::StepProgress => &[
            ("stepId", NonEmptyString, true),
            ("progress", Number(0.0, Some(1.0)), false),
            ("message", String, false),
        ],
        EventKind::StepDone => &[("stepId", NonEmptyString, true), ("output", Any, false)],
        EventKind::StepError => &[
            ("stepId", NonEmptyString, true),
            ("error", ErrorInfo, true),
            ("retryable", Bool, true),
        ],
        EventKind::ToolCall => &[
            ("stepId", NonEmptyString, true),
            ("callId", NonEmptyString, false),
            ("name", NonEmptyString, true),
            ("args", Any, false),
        ],
        EventKind::ToolResult => &[
            ("callId", NonEmptyString, true),
            ("stepId", NonEmptyString, false),
            ("ok", Bool, true),
            ("result", Any, false),
            ("error", ErrorInfo, false),
            ("ms", Number(0.0, None), false),
            ("tokens", Integer(0, None), false),
            ("cost", Number(0.0, None), false),
        ],
        EventKind::ApprovalRequest => &[
            ("stepId", NonEmptyString, true),
            ("approvalId", NonEmptyString, false),
            ("summary", String, true),
            ("risk", Enum(RISKS), true),
            ("preview", Object, false),
            ("callId", NonEmptyString, false),
        ],
        EventKind::ApprovalDecision => &[
            ("approvalId", NonEmptyString, true),
            ("decision", Enum(&["approve", "edit", "reject"]), true),
            ("by", String, false),
            ("comment", String, false),
            ("edited", Any, false),
        ],
        EventKind::RetryRequest => &[
            ("stepId", NonEmptyString, true),
            ("fromEventId", NonEmptyString, true),
            ("reason", String, false),
            ("attempt", Integer(1, None), false),
        ],
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn pointer_of(parent: &str, token: &str) -> String {
    let mut out = String::with_capacity(parent.len() + token.len() + 1);
    out.push_str(parent);
    out.push('/');
    out.push_str(&token.replace('~', "~0").replace('/', "~1"));
    out
}

fn check(rule: Rule, value: &Value, at: &str, issues: &mut Vec<ValidationIssue>) {
    let mistyped = |issues: &mut Vec<ValidationIssue>, want: &str| {
        issues.push(ValidationIssue::new(
            at,
            "type",
            format!("must be {want}, not {}", type_name(value)),
        ));
    };
    match rule {
        Rule::NonEmptyString | Rule::String => match value {
            Value::String(s) if s.is_empty() && matches!(rule, Rule::NonEmptyString) => {
                issues.push(ValidationIssue::new(at, "min-length", "must not be empty"));
            }
            Value::String(_) => {}
            _ => mistyped(issues, "a string"),
        },
        Rule::Bool => {
            if !value.is_boolean() {
                mistyped(issues, "a boolean");
            }
        }
        Rule::Number(min, max) => match value.as_f64() {
            None => mistyped(issues, "a number"),
            Some(n) if n < min => {
                issues.push(ValidationIssue::new(
                    at,
                    "minimum",
                    format!("must be at least {min}"),
                ));
            }
            Some(n) if max.is_some_and(|m| n > m) => issues.push(ValidationIssue::new(
                at,
                "maximum",
                format!("must be at most {}", max.unwrap_or_default()),
            )),
            Some(_) => {}
        },
        Rule::Integer(min, max) => match value {
            Value::Number(n) if n.as_i64().is_some_and(|i| i < 0) => {
                issues.push(ValidationIssue::new(
                    at,
                    "minimum",
                    format!("must be at least {min}"),
                ));
            }
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f < 0.0) => {
                issues.push(ValidationIssue::new(
                    at,
                    "minimum",
                    format!("must be at least {min}"),
                ));
            }
            Value::Number(_) => match json_u64(value) {
                Some(v) if v < min => issues.push(ValidationIssue::new(
                    at,
                    "minimum",
                    format!("must be at least {min}"),
                )),
                Some(v) if max.is_some_and(|m| v > m) => issues.push(ValidationIssue::new(
                    at,
                    "maximum",
                    format!("must be at most {}", max.unwrap_or_default()),
                )),
                Some(_) => {}
                // Whole numbers beyond u64 are still integers to JSON Schema.
                None if value.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                    if let Some(m) = max {
                        issues.push(ValidationIssue::new(
                            at,
                            "maximum",
                            format!("must be at most {m}"),
                        ));
                    }
                }
                None => mistyped(issues, "an integer"),
            },
            _ => mistyped(issues, "an integer"),
        },
        Rule::Enum(values) => match value {
            Value::String(s) if values.contains(&s.as_str()) => {}
            _ => issues.push(ValidationIssue::new(
                at,
                "enum",
                format!("must be one of {}", values.join(", ")),
            )),
        },
        Rule::ErrorInfo => match value {
            Value::String(_) => {}
            Value::Object(map) => match map.get("message") {
                None => issues.push(ValidationIssue::new(
                    at,
                    "type",
                    "must be a string or an object with a string `message`",
                )),
                Some(m) => {
                    check(Rule::String, m, &pointer_of(at, "message"), issues);
                    if let Some(code) = map.get("code") {
                        check(Rule::String, code, &pointer_of(at, "code"), issues);
                    }
                }
            },
            _ => mistyped(issues, "a string or an object with a string `message`"),
        },
        Rule::PlanSteps => match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let at = pointer_of(at, &i.to_string());
                    match item {
                        Value::Object(step) => {
                            check_fields(
                                step,
                                &[
                                    ("id", Rule::NonEmptyString, true),
                                    ("title", Rule::String, true),
                                ],
                                &at,
                                issues,
                            );
                        }
                        other => issues.push(ValidationIssue::new(
                            at,
                            "type",
                            format!("a plan step must be an object, not {}", type_name(other)),
                        )),
                    }
                }
            }
            _ => mistyped(issues, "an array"),
        },
        Rule::Object => {
            if !value.is_object() {
                mistyped(issues, "an object");
            }
        }
        Rule::Any => {}
    }
}

fn check_fields(
    map: &Map<String, Value>,
    rules: &[(&str, Rule, bool)],
    at: &str,
    issues: &mut Vec<ValidationIssue>,
) {
    for &(name, rule, required) in rules {
        match map.get(name) {
            Some(value) => check(rule, value, &pointer_of(at, name), issues),
            None if required => issues.push(ValidationIssue::new(
                at,
                "required",
                format!("missing required field `{name}`"),
            )),
            None => {}
        }
    }
}

/// The verdict of [`check`] without building issues (the hot path of coercion and derivation).
/// `check` reports no issue exactly when this returns `true`.
pub(crate) fn rule_ok(rule: Rule, value: &Value) -> bool {
    match rule {
        Rule::NonEmptyString => matches!(value, Value::String(s) if !s.is_empty()),
        Rule::String => value.is_string(),
        Rule::Bool => value.is_boolean(),
        Rule::Number(min, max) => value
            .as_f64()
            .is_some_and(|n| n >= min && max.is_none_or(|m| n <= m)),
        Rule::Integer(min, max) => match value {
            Value::Number(n) if n.as_i64().is_some_and(|i| i < 0) => false,
            Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f < 0.0) => false,
            Value::Number(_) => match json_u64(value) {
                Some(v) => v >= min && max.is_none_or(|m| v <= m),
                None => value.as_f64().is_some_and(|f| f.fract() == 0.0) && max.is_none(),
            },
            _ => false,
        },
        Rule::Enum(values) => matches!(value, Value::String(s) if values.contains(&s.as_str())),
        Rule::ErrorInfo => match value {
            Value::String(_) => true,
            Value::Object(map) => {
                map.get("message").is_some_and(Value::is_string)
                    && map.get("code").is_none_or(Value::is_string)
            }
            _ => false,
        },
        Rule::PlanSteps => match value {
            Value::Array(items) => items.iter().all(|item| match item {
                Value::Object(step) => {
                    step.get("id")
                        .is_some_and(|v| rule_ok(Rule::NonEmptyString, v))
                        && step.get("title").is_some_and(Value::is_string)
                }
                _ => false,
            }),
            _ => false,
        },
        Rule::Object => value.is_object(),
        Rule::Any => true,
    }
}

fn fields_ok(map: &Map<String, Value>, rules: &[(&str, Rule, bool)]) -> bool {
    rules
        .iter()
        .all(|&(name, rule, required)| match map.get(name) {
            Some(value) => rule_ok(rule, value),
            None => !required,
        })
}

/// Whether the payload fields of a known type are valid: the verdict of
/// [`validate_payload_fields`] without building issues.
pub(crate) fn payload_fields_valid(kind: EventKind, map: &Map<String, Value>) -> bool {
    fields_ok(map, payload_rules(kind))
}

const ENVELOPE_RULES: &[(&str, Rule, bool)] = &[
    ("id", Rule::NonEmptyString, true),
    ("runId", Rule::NonEmptyString, true),
    ("seq", Rule::Integer(0, Some(MAX_SAFE_INTEGER)), true),
    ("at", Rule::Integer(0, Some(MAX_SAFE_INTEGER)), true),
    (
        "schemaVersion",
        Rule::Integer(1, Some(MAX_SAFE_INTEGER)),
        true,
    ),
    ("type", Rule::NonEmptyString, true),
];

/// Checks the six envelope fields of a value.
fn validate_envelope(value: &Value) -> Vec<ValidationIssue> {
    let mut issues = Vec::new();
    match value {
        Value::Object(map) => check_fields(map, ENVELOPE_RULES, "", &mut issues),
        other => issues.push(ValidationIssue::new(
            "",
            "not-object",
            format!("an event must be an object, not {}", type_name(other)),
        )),
    }
    issues
}

/// Checks the payload of a value for its declared type. Unknown types, and versions above
/// [`SCHEMA_VERSION`], have no payload rules.
fn validate_payload(value: &Value) -> Vec<ValidationIssue> {
    let mut issues = Vec::new();
    if let Value::Object(map) = value {
        let version = map.get("schemaVersion").and_then(json_u64);
        if let (Some(SCHEMA_VERSION), Some(kind)) = (
            version,
            map.get("type")
                .and_then(Value::as_str)
                .and_then(EventKind::from_wire),
        ) {
            check_fields(map, payload_rules(kind), "", &mut issues);
        }
    }
    issues
}

/// Checks the payload fields of a known type (`map` holds the payload, with or without the
/// envelope).
pub(crate) fn validate_payload_fields(
    kind: EventKind,
    map: &Map<String, Value>,
) -> Vec<ValidationIssue> {
    let mut issues = Vec::new();
    check_fields(map, payload_rules(kind), "", &mut issues);
    issues
}

/// Checks a whole event: its envelope, then its payload. Empty means valid.
pub fn validate_event(value: &Value) -> Vec<ValidationIssue> {
    let mut issues = validate_envelope(value);
    issues.extend(validate_payload(value));
    issues
}

/// Whether a value is a valid event (the verdict of [`validate_event`], without building issues).
pub fn is_valid_event(value: &Value) -> bool {
    let Value::Object(map) = value else {
        return false;
    };
    if !fields_ok(map, ENVELOPE_RULES) {
        return false;
    }
    let version = map.get("schemaVersion").and_then(json_u64);
    match (
        version,
        map.get("type")
            .and_then(Value::as_str)
            .and_then(EventKind::from_wire),
    ) {
        (Some(SCHEMA_VERSION), Some(kind)) => fields_ok(map, payload_rules(kind)),
        _ => true,
    }
}

/// Whether a typed event is valid (its envelope is valid by construction except for empty
/// strings and a zero version, which are checked too).
pub fn is_valid_run_event(event: &RunEvent) -> bool {
    !event.id.is_empty()
        && !event.run_id.is_empty()
        && !event.event_type.is_empty()
        && event.schema_version >= 1
        && event
            .kind()
            .is_none_or(|kind| payload_fields_valid(kind, &event.payload))
}

/// Why a value is not a run event: every reason ([`RunEvent::try_from`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid run event: {}", .issues.iter().map(|i| format!("{} {}", if i.pointer.is_empty() { "(event)" } else { &i.pointer }, i.message)).collect::<Vec<_>>().join("; "))]
pub struct InvalidEvent {
    /// Every reason.
    pub issues: Vec<ValidationIssue>,
}

impl InvalidEvent {
    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        "runlog.invalid-event"
    }
}

/// A value read as a typed event when it is a valid one; otherwise every reason it is not
/// ([`validate_event`]'s issues).
impl TryFrom<Value> for RunEvent {
    type Error = InvalidEvent;

    fn try_from(value: Value) -> Result<RunEvent, InvalidEvent> {
        let issues = validate_event(&value);
        if !issues.is_empty() {
            return Err(InvalidEvent { issues });
        }
        match value {
            Value::Object(map) => event_from_object(map).map_err(|_| InvalidEvent {
                issues: vec![ValidationIssue::new(
                    "",
                    "type",
                    "the envelope does not fit 64-bit integers",
                )],
            }),
            _ => Err(InvalidEvent {
                issues: vec![ValidationIssue::new("", "not-object", "not an object")],
            }),
        }
    }
}

/// The result of [`split_events`]: every input value lands in exactly one list, in input order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Split {
    /// Values that are valid events (unknown types included: they are forward compatible).
    pub events: Vec<RunEvent>,
    /// Values that are not, kept as they came.
    pub malformed: Vec<Value>,
    /// Whether every value was a valid event.
    pub ok: bool,
}

/// Splits any JSON input into valid events and malformed values. An array is a list of
/// candidates, an object with an `events` array is unwrapped, and any other value is one
/// candidate.
pub fn split_events(input: Value) -> Split {
    let items = match input {
        Value::Array(items) => items,
        Value::Object(mut map) if is_events_wrapper(&map) => match map.shift_remove("events") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        other => vec![other],
    };
    let mut events = Vec::with_capacity(items.len());
    let mut malformed = Vec::new();
    for item in items {
        if !is_valid_event(&item) {
            malformed.push(item);
            continue;
        }
        match item {
            Value::Object(map) => match event_from_object(map) {
                Ok(event) => events.push(event),
                Err(map) => malformed.push(Value::Object(map)),
            },
            other => malformed.push(other),
        }
    }
    let ok = malformed.is_empty();
    Split {
        events,
        malformed,
        ok,
    }
}

/// Whether an object is a `{events: [...]}` wrapper rather than an event: it has an `events`
/// array and no `type`.
pub(crate) fn is_events_wrapper(map: &Map<String, Value>) -> bool {
    map.get("events").is_some_and(Value::is_array) && !map.contains_key("type")
}

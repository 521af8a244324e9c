//! The run event: its envelope, its payload, the known event types and their wire names.

use std::fmt;

use agentwire_schema::StrictValue;
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// The major schema version this crate speaks. Events with a higher `schemaVersion` are valid
/// envelopes but are treated as unknown events.
pub const SCHEMA_VERSION: u64 = 1;

/// Largest integer a JavaScript number holds exactly; the bound of `seq`, `at` and
/// `schemaVersion`, so every host reads them the same.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// Names of the six envelope fields, in wire order.
pub const ENVELOPE_FIELDS: [&str; 6] = ["id", "runId", "seq", "at", "schemaVersion", "type"];

/// One event of a run: the envelope plus the type's payload (every other field, in input order).
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    /// Globally unique; the deduplication key.
    pub id: String,
    /// The run the event belongs to.
    pub run_id: String,
    /// Order key inside the run.
    pub seq: u64,
    /// Unix time in milliseconds, for display only.
    pub at: u64,
    /// Major version of the event protocol.
    pub schema_version: u64,
    /// Event type as on the wire (`tool:call`); may be a type this crate does not know.
    pub event_type: String,
    /// Every field but the envelope's.
    pub payload: Map<String, Value>,
}

impl RunEvent {
    /// The known type of the event, or `None` for an unknown type or a newer major version
    /// (both are folded, never executed).
    pub fn kind(&self) -> Option<EventKind> {
        if self.schema_version != SCHEMA_VERSION {
            return None;
        }
        EventKind::from_wire(&self.event_type)
    }

    /// A payload field as a string.
    pub fn str_field(&self, name: &str) -> Option<&str> {
        self.payload.get(name).and_then(Value::as_str)
    }

    /// The event as one JSON value (envelope first, then the payload).
    pub fn to_value(&self) -> Value {
        let mut map = Map::with_capacity(self.payload.len() + ENVELOPE_FIELDS.len());
        map.insert("id".into(), Value::String(self.id.clone()));
        map.insert("runId".into(), Value::String(self.run_id.clone()));
        map.insert("seq".into(), Value::Number(self.seq.into()));
        map.insert("at".into(), Value::Number(self.at.into()));
        map.insert(
            "schemaVersion".into(),
            Value::Number(self.schema_version.into()),
        );
        map.insert("type".into(), Value::String(self.event_type.clone()));
        for (k, v) in &self.payload {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

macro_rules! event_kinds {
    ($($variant:ident => $wire:literal, $doc:literal;)*) => {
        /// An event type this crate knows (schema version 1).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventKind {
            $(#[doc = $doc] $variant,)*
        }

        impl EventKind {
            /// Every known type, in the order of the protocol's table.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The wire name (`tool:call`).
            pub fn wire_name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $wire,)*
                }
            }

            /// The known type of a wire name.
            pub fn from_wire(name: &str) -> Option<EventKind> {
                match name {
                    $($wire => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }

        /// Wire names of every known event type.
        pub const RUN_EVENT_TYPES: &[&str] = &[$($wire,)*];
    };
}

event_kinds! {
    RunStart => "run:start", "A run begins.";
    RunDone => "run:done", "The run finished.";
    RunError => "run:error", "The run failed and stopped.";
    RunPaused => "run:paused", "The run waits for an approval or for the user.";
    Plan => "plan", "The step plan.";
    StepStart => "step:start", "A step starts.";
    StepProgress => "step:progress", "Progress inside a step.";
    StepDone => "step:done", "A step finished.";
    StepError => "step:error", "A step failed (`retryable` says whether a retry may help).";
    ToolCall => "tool:call", "A tool is called.";
    ToolResult => "tool:result", "The result of a tool call.";
    ApprovalRequest => "approval:request", "A person must decide before the step goes on.";
    ApprovalDecision => "approval:decision", "The decision on an approval request.";
    RetryRequest => "retry:request", "A step is retried from an anchor event.";
}

/// Wire names of the approval event types (approvals are first-class, not a kind of tool call).
pub const APPROVAL_EVENT_TYPES: &[&str] = &["approval:request", "approval:decision"];

/// Whether `name` is a known event type.
pub fn is_known_event_type(name: &str) -> bool {
    EventKind::from_wire(name).is_some()
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

/// Risk of an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Weight 1.
    Low,
    /// Weight 2; the neutral default the lenient parser fills in.
    Medium,
    /// Weight 3.
    High,
    /// Weight 4.
    Critical,
}

/// Weight of each risk level, for sorting and highlighting approvals.
pub const RISK_WEIGHT: [(Risk, u8); 4] = [
    (Risk::Low, 1),
    (Risk::Medium, 2),
    (Risk::High, 3),
    (Risk::Critical, 4),
];

impl Risk {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }

    /// Parses a wire name.
    pub fn from_wire(name: &str) -> Option<Risk> {
        match name {
            "low" => Some(Risk::Low),
            "medium" => Some(Risk::Medium),
            "high" => Some(Risk::High),
            "critical" => Some(Risk::Critical),
            _ => None,
        }
    }

    /// The weight of [`RISK_WEIGHT`].
    pub fn weight(self) -> u8 {
        match self {
            Risk::Low => 1,
            Risk::Medium => 2,
            Risk::High => 3,
            Risk::Critical => 4,
        }
    }
}

/// A decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Go ahead as proposed.
    Approve,
    /// Go ahead with the edited proposal.
    Edit,
    /// Do not go ahead.
    Reject,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Edit => "edit",
            Decision::Reject => "reject",
        }
    }

    /// Parses a wire name (exactly; synonyms are the lenient parser's business).
    pub fn from_wire(name: &str) -> Option<Decision> {
        match name {
            "approve" => Some(Decision::Approve),
            "edit" => Some(Decision::Edit),
            "reject" => Some(Decision::Reject),
            _ => None,
        }
    }
}

/// Why a run is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PauseReason {
    /// Waiting for an approval decision.
    Approval,
    /// Waiting for the user.
    User,
}

impl PauseReason {
    /// Parses a wire name.
    pub fn from_wire(name: &str) -> Option<PauseReason> {
        match name {
            "approval" => Some(PauseReason::Approval),
            "user" => Some(PauseReason::User),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseReason::Approval => "approval",
            PauseReason::User => "user",
        }
    }
}

/// The integer value of a JSON number that JSON Schema calls an integer (`7` and `7.0`), when it
/// fits a `u64`.
pub fn json_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => number_u64(n),
        _ => None,
    }
}

fn number_u64(n: &Number) -> Option<u64> {
    if let Some(v) = n.as_u64() {
        return Some(v);
    }
    let f = n.as_f64()?;
    // 2^64 as f64; every whole f64 below it converts exactly.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    (f.fract() == 0.0 && (0.0..LIMIT).contains(&f)).then_some(f as u64)
}

impl Serialize for RunEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.payload.len() + ENVELOPE_FIELDS.len()))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("runId", &self.run_id)?;
        map.serialize_entry("seq", &self.seq)?;
        map.serialize_entry("at", &self.at)?;
        map.serialize_entry("schemaVersion", &self.schema_version)?;
        map.serialize_entry("type", &self.event_type)?;
        for (k, v) in &self.payload {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Deserializes only complete, well-typed envelopes; anything else (a missing or mistyped
/// envelope field, a duplicate key anywhere) is an error, so callers fall back to the
/// field-by-field path that explains what is wrong. Payload values are read with the strict rules
/// of [`agentwire_schema::parse_json`] (no duplicate keys).
impl<'de> Deserialize<'de> for RunEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EventVisitor)
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = RunEvent;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a run event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<RunEvent, A::Error> {
        let mut id = None;
        let mut run_id = None;
        let mut seq = None;
        let mut at = None;
        let mut schema_version = None;
        let mut event_type = None;
        let mut payload = Map::new();
        while let Some(key) = access.next_key::<std::borrow::Cow<'de, str>>()? {
            fn set<T, E: de::Error>(slot: &mut Option<T>, v: T, key: &str) -> Result<(), E> {
                if slot.replace(v).is_some() {
                    return Err(E::custom(format_args!("duplicate key {key:?}")));
                }
                Ok(())
            }
            match key.as_ref() {
                "id" => set(&mut id, access.next_value::<String>()?, &key)?,
                "runId" => set(&mut run_id, access.next_value::<String>()?, &key)?,
                "seq" => set(&mut seq, access.next_value::<u64>()?, &key)?,
                "at" => set(&mut at, access.next_value::<u64>()?, &key)?,
                "schemaVersion" => set(&mut schema_version, access.next_value::<u64>()?, &key)?,
                "type" => set(&mut event_type, access.next_value::<String>()?, &key)?,
                other => {
                    if payload.contains_key(other) {
                        return Err(de::Error::custom(format_args!("duplicate key {other:?}")));
                    }
                    let value = access.next_value_seed(StrictValue)?;
                    payload.insert(key.into_owned(), value);
                }
            }
        }
        let (Some(id), Some(run_id), Some(seq), Some(at), Some(schema_version), Some(event_type)) =
            (id, run_id, seq, at, schema_version, event_type)
        else {
            return Err(de::Error::custom("incomplete envelope"));
        };
        if id.is_empty()
            || run_id.is_empty()
            || event_type.is_empty()
            || schema_version == 0
            || seq.max(at).max(schema_version) > MAX_SAFE_INTEGER
        {
            return Err(de::Error::custom("invalid envelope"));
        }
        Ok(RunEvent {
            id,
            run_id,
            seq,
            at,
            schema_version,
            event_type,
            payload,
        })
    }
}

/// Reads one event from JSON text on the fast path: `None` when the text is not a complete,
/// well-typed envelope (the caller then parses it with [`agentwire_schema::parse_json`]).
pub fn parse_event_fast(bytes: &[u8]) -> Option<RunEvent> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let event = RunEvent::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(event)
}

/// Turns a JSON object into an event when its envelope is complete and well typed (integers may
/// be written `7.0`); the payload fields are moved, not cloned. Returns the object back otherwise.
pub fn event_from_object(mut map: Map<String, Value>) -> Result<RunEvent, Map<String, Value>> {
    let ok = matches!(map.get("id"), Some(Value::String(s)) if !s.is_empty())
        && matches!(map.get("runId"), Some(Value::String(s)) if !s.is_empty())
        && map
            .get("seq")
            .and_then(json_u64)
            .is_some_and(|v| v <= MAX_SAFE_INTEGER)
        && map
            .get("at")
            .and_then(json_u64)
            .is_some_and(|v| v <= MAX_SAFE_INTEGER)
        && map
            .get("schemaVersion")
            .and_then(json_u64)
            .is_some_and(|v| (1..=MAX_SAFE_INTEGER).contains(&v))
        && matches!(map.get("type"), Some(Value::String(s)) if !s.is_empty());
    if !ok {
        return Err(map);
    }
    let take_str = |map: &mut Map<String, Value>, k: &str| match map.shift_remove(k) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    let take_u64 = |map: &mut Map<String, Value>, k: &str| {
        map.shift_remove(k).as_ref().and_then(json_u64).unwrap_or(0)
    };
    let id = take_str(&mut map, "id");
    let run_id = take_str(&mut map, "runId");
    let seq = take_u64(&mut map, "seq");
    let at = take_u64(&mut map, "at");
    let schema_version = take_u64(&mut map, "schemaVersion");
    let event_type = take_str(&mut map, "type");
    Ok(RunEvent {
        id,
        run_id,
        seq,
        at,
        schema_version,
        event_type,
        payload: map,
    })
}

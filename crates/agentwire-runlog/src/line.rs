//! The fast reader of one NDJSON line: a complete, valid event of a known type read straight
//! from its bytes, strings borrowed, opaque values kept as their text. Anything it is not sure
//! the strict path would read the same way (escaped keys, a non-canonical opaque value, an
//! invalid payload, an unknown type, a newer major version, ...) is declined (`None`), and the
//! caller parses the line the strict way. So the reader decides only how fast a line is read,
//! never what it means.

use std::borrow::Cow;
use std::cell::Cell;

use serde_json::{Number, Value};

use crate::event::{EventKind, MAX_SAFE_INTEGER, SCHEMA_VERSION};
use crate::opaque::{Json, canonical_end};
use crate::state::{EventView, Key};
use crate::validate::{Rule, payload_rules, rule_ok};
use agentwire_jsonscan::{canonical_string_end, skip_ws};

/// Lines with more top-level members than this are declined (duplicate keys are checked
/// pairwise).
const MAX_FIELDS: usize = 24;

/// What a payload value is, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Num,
    Bool(bool),
    Null,
    Arr,
    Obj,
}

/// One payload member: key and value as byte ranges of the line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    key: (u32, u32),
    kind: Kind,
    /// The value's text (a string's with its quotes).
    val: (u32, u32),
    /// A string holding escapes.
    escaped: bool,
}

/// A reusable reader (its field buffer is kept between lines).
#[derive(Debug, Default)]
pub(crate) struct LineReader {
    fields: Vec<Field>,
}

/// What [`scan_line`] found in a line: spans relative to the line; the payload members are
/// `fields.0 .. fields.0 + fields.1` of the field buffer it was given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scan {
    id: (u32, u32),
    run_id: (u32, u32),
    seq: u64,
    at: u64,
    kind: EventKind,
    fields: (u32, u32),
    /// Where each payload name the fold reads is among the line's fields ([`NO_SLOT`]: absent).
    slots: [u8; Key::COUNT],
}

impl Scan {
    /// The event's type.
    pub(crate) fn kind(&self) -> EventKind {
        self.kind
    }

    /// The event id, in the line `text` that was scanned.
    pub(crate) fn id<'a>(&self, text: &'a str) -> &'a str {
        &text[self.id.0 as usize..self.id.1 as usize]
    }
}

/// A payload name the line does not have.
const NO_SLOT: u8 = u8::MAX;

/// A line read by [`LineReader::read`] or viewed with [`LineEvent::new`]: a valid event of a
/// known type, schema version 1.
pub(crate) struct LineEvent<'a> {
    text: &'a str,
    pub id: &'a str,
    pub run_id: &'a str,
    pub seq: u64,
    pub at: u64,
    pub kind: EventKind,
    fields: &'a [Field],
    slots: [u8; Key::COUNT],
    /// The opaque value the fold takes, made ahead (by a scanning task).
    prepared: Cell<Option<Json>>,
}

/// The one opaque payload field the fold of `kind` keeps in the state.
pub(crate) fn opaque_name(kind: EventKind) -> Option<Key> {
    match kind {
        EventKind::ToolCall => Some(Key::Args),
        EventKind::ToolResult => Some(Key::Result),
        EventKind::StepDone | EventKind::RunDone => Some(Key::Output),
        EventKind::ApprovalRequest => Some(Key::Preview),
        EventKind::ApprovalDecision => Some(Key::Edited),
        _ => None,
    }
}

/// A plain non-negative integer (digits only, no leading zero) of at most `MAX_SAFE_INTEGER`.
fn safe_u64(t: &[u8]) -> Option<u64> {
    if t.is_empty() || t.len() > 16 || (t.len() > 1 && t[0] == b'0') {
        return None;
    }
    let mut v = 0u64;
    for &c in t {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    (v <= MAX_SAFE_INTEGER).then_some(v)
}

impl LineReader {
    /// Reads one line; `None` when the line is not for the fast path.
    pub(crate) fn read<'a>(&'a mut self, bytes: &'a [u8]) -> Option<LineEvent<'a>> {
        let text = std::str::from_utf8(bytes).ok()?;
        self.fields.clear();
        let scan = scan_line(text, &mut self.fields)?;
        Some(LineEvent::new(text, &scan, &self.fields))
    }
}

/// Scans one line (trimmed, UTF-8 already), appending its payload members to `fields`; `None`
/// (with `fields` as it was) when the line is not for the fast path.
pub(crate) fn scan_line(text: &str, fields: &mut Vec<Field>) -> Option<Scan> {
    let first = fields.len();
    let scan = scan_into(text, fields);
    if scan.is_none() {
        fields.truncate(first);
    }
    scan
}

fn scan_into(text: &str, fields: &mut Vec<Field>) -> Option<Scan> {
    let b = text.as_bytes();
    if b.len() > u32::MAX as usize {
        return None;
    }
    let first = fields.len();
    let mut keys: [(u32, u32); MAX_FIELDS] = [(0, 0); MAX_FIELDS];
    let mut nkeys = 0;
    let (mut id, mut run_id, mut event_type) = (None, None, None);
    let (mut seq, mut at, mut version) = (None, None, None);
    let mut slots = [NO_SLOT; Key::COUNT];
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        let key_end = canonical_string_end(b, i)?;
        let key = &b[i + 1..key_end - 1];
        if key.contains(&b'\\')
            || nkeys == MAX_FIELDS
            || keys[..nkeys]
                .iter()
                .any(|&(s, e)| &b[s as usize..e as usize] == key)
        {
            return None;
        }
        let key_span = ((i + 1) as u32, (key_end - 1) as u32);
        keys[nkeys] = key_span;
        nkeys += 1;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let start = i;
        let (kind, end, escaped) = match *b.get(i)? {
            b'"' => {
                let end = canonical_string_end(b, i)?;
                (Kind::Str, end, b[i + 1..end - 1].contains(&b'\\'))
            }
            b'{' => (Kind::Obj, canonical_end(b, i, 2)?, false),
            b'[' => (Kind::Arr, canonical_end(b, i, 2)?, false),
            b't' if b[i..].starts_with(b"true") => (Kind::Bool(true), i + 4, false),
            b'f' if b[i..].starts_with(b"false") => (Kind::Bool(false), i + 5, false),
            b'n' if b[i..].starts_with(b"null") => (Kind::Null, i + 4, false),
            b'-' | b'0'..=b'9' => {
                let number = agentwire_jsonscan::number(b, i)?;
                let end = number.end;
                // A number the strict parser rejects (out of range) is declined; short plain
                // integers are in range without asking the float parser.
                let short_int = end - i <= 15 && number.integer && b[i] != b'-';
                let finite = short_int || text[i..end].parse::<f64>().is_ok_and(f64::is_finite);
                if !finite {
                    return None;
                }
                (Kind::Num, end, false)
            }
            _ => return None,
        };
        let val = &b[start..end];
        let span = (start as u32, end as u32);
        let plain_str = || (kind == Kind::Str && !escaped).then_some((span.0 + 1, span.1 - 1));
        match key {
            b"id" => id = Some(plain_str()?),
            b"runId" => run_id = Some(plain_str()?),
            b"type" => event_type = Some(plain_str()?),
            b"seq" => seq = Some(safe_u64(val)?),
            b"at" => at = Some(safe_u64(val)?),
            b"schemaVersion" => version = Some(safe_u64(val)?),
            _ => {
                if let Some(name) = Key::from_wire(&text[key_span.0 as usize..key_span.1 as usize])
                {
                    slots[name as usize] = (fields.len() - first) as u8;
                }
                fields.push(Field {
                    key: key_span,
                    kind,
                    val: span,
                    escaped,
                });
            }
        }
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => {
                i += 1;
                break;
            }
            _ => return None,
        }
    }
    if skip_ws(b, i) != b.len() {
        return None;
    }
    let (id, run_id, event_type) = (id?, run_id?, event_type?);
    if id.1 == id.0 || run_id.1 == run_id.0 || version? != SCHEMA_VERSION {
        return None;
    }
    let kind = EventKind::from_wire(&text[event_type.0 as usize..event_type.1 as usize])?;
    let scan = Scan {
        id,
        run_id,
        seq: seq?,
        at: at?,
        kind,
        fields: (first as u32, (fields.len() - first) as u32),
        slots,
    };
    LineEvent::new(text, &scan, fields)
        .payload_valid()
        .then_some(scan)
}

impl<'a> LineEvent<'a> {
    /// The event of a line scanned by [`scan_line`] into `fields`.
    pub(crate) fn new(text: &'a str, scan: &Scan, fields: &'a [Field]) -> LineEvent<'a> {
        let (s, n) = (scan.fields.0 as usize, scan.fields.1 as usize);
        let span = |(a, b): (u32, u32)| &text[a as usize..b as usize];
        LineEvent {
            text,
            id: span(scan.id),
            run_id: span(scan.run_id),
            seq: scan.seq,
            at: scan.at,
            kind: scan.kind,
            fields: fields.get(s..s + n).unwrap_or_default(),
            slots: scan.slots,
            prepared: Cell::new(None),
        }
    }

    /// The event with its opaque value already made by [`LineEvent::prepare`].
    pub(crate) fn with_prepared(mut self, value: Option<Json>) -> Self {
        self.prepared = Cell::new(value);
        self
    }

    /// The opaque value the fold of this event keeps, made now: a thread that reads ahead of
    /// the folding one makes it there, so its allocation and copy are off the folding thread.
    pub(crate) fn prepare(&self) -> Option<Json> {
        opaque_name(self.kind).and_then(|name| self.make_json(name))
    }

    fn make_json(&self, name: Key) -> Option<Json> {
        let f = self.named(name)?;
        let t = self.slice(f.val);
        Some(match f.kind {
            // Containers and strings were checked canonical when read.
            Kind::Obj | Kind::Arr | Kind::Str | Kind::Bool(_) | Kind::Null => {
                Json::from_canonical(t)
            }
            Kind::Num => {
                if canonical_end(t.as_bytes(), 0, 1) == Some(t.len()) {
                    Json::from_canonical(t)
                } else {
                    Json::from_value(&self.value(f))
                }
            }
        })
    }

    fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| self.slice(f.key) == name)
    }

    /// A payload field the fold reads, found by its slot.
    fn named(&self, name: Key) -> Option<&Field> {
        self.fields.get(usize::from(self.slots[name as usize]))
    }

    fn slice(&self, (s, e): (u32, u32)) -> &'a str {
        &self.text[s as usize..e as usize]
    }

    /// The text of a string field's content (without quotes, escapes undone).
    fn string(&self, f: &Field) -> Cow<'a, str> {
        let (s, e) = f.val;
        if f.escaped {
            Cow::Owned(serde_json::from_str(self.slice(f.val)).unwrap_or_default())
        } else {
            Cow::Borrowed(self.slice((s + 1, e - 1)))
        }
    }

    fn value(&self, f: &Field) -> Value {
        serde_json::from_str(self.slice(f.val)).unwrap_or(Value::Null)
    }

    /// The payload rules of the kind, checked on the text: the verdict of
    /// [`crate::payload_fields_valid`] on the parsed payload.
    fn payload_valid(&self) -> bool {
        payload_rules(self.kind)
            .iter()
            .all(|&(name, rule, required)| match self.field(name) {
                Some(f) => self.rule_ok(rule, f),
                None => !required,
            })
    }

    fn rule_ok(&self, rule: Rule, f: &Field) -> bool {
        match (rule, f.kind) {
            (Rule::Any, _) => true,
            (Rule::NonEmptyString, Kind::Str) => f.val.1 - f.val.0 > 2,
            (Rule::String, Kind::Str) | (Rule::Bool, Kind::Bool(_)) => true,
            (Rule::Object, Kind::Obj) => true,
            (Rule::Enum(values), Kind::Str) => values.contains(&self.string(f).as_ref()),
            (Rule::ErrorInfo, Kind::Str) => true,
            (Rule::Integer(min, max), Kind::Num) => {
                // Only plain integers; other spellings take the strict path.
                safe_u64(self.slice(f.val).as_bytes())
                    .is_some_and(|v| v >= min && max.is_none_or(|m| v <= m))
            }
            (Rule::Number(min, max), Kind::Num) => self
                .slice(f.val)
                .parse::<f64>()
                .is_ok_and(|n| n >= min && max.is_none_or(|m| n <= m)),
            (Rule::ErrorInfo | Rule::PlanSteps, _) => rule_ok(rule, &self.value(f)),
            _ => false,
        }
    }
}

impl EventView for LineEvent<'_> {
    fn id(&self) -> &str {
        self.id
    }

    fn run_id(&self) -> &str {
        self.run_id
    }

    fn seq(&self) -> u64 {
        self.seq
    }

    fn at(&self) -> u64 {
        self.at
    }

    fn str_field(&self, name: Key) -> Option<Cow<'_, str>> {
        let f = self.named(name)?;
        (f.kind == Kind::Str).then(|| self.string(f))
    }

    fn bool_field(&self, name: Key) -> Option<bool> {
        match self.named(name)?.kind {
            Kind::Bool(v) => Some(v),
            _ => None,
        }
    }

    fn number_field(&self, name: Key) -> Option<Number> {
        let f = self.named(name)?;
        if f.kind != Kind::Num {
            return None;
        }
        let t = self.slice(f.val);
        // The grammar was checked when read. Plain digits are an integer when they fit; a
        // fraction or exponent is a float, read as serde_json reads it (correctly rounded).
        // Negative numbers (`-0` reads as a float) are left to serde_json.
        if t.starts_with('-') {
            return serde_json::from_str(t).ok();
        }
        if t.bytes().all(|c| c.is_ascii_digit())
            && let Ok(v) = t.parse::<u64>()
        {
            return Some(Number::from(v));
        }
        t.parse::<f64>().ok().and_then(Number::from_f64)
    }

    fn json_field(&self, name: Key) -> Option<Json> {
        if opaque_name(self.kind) == Some(name)
            && let Some(json) = self.prepared.take()
        {
            return Some(json);
        }
        self.make_json(name)
    }

    fn with_value<R>(&self, name: Key, f: impl FnOnce(Option<&Value>) -> R) -> R {
        match self.named(name) {
            Some(field) => f(Some(&self.value(field))),
            None => f(None),
        }
    }

    fn raw(&self) -> Value {
        serde_json::from_str(self.text).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(line: &str) -> bool {
        LineReader::default().read(line.as_bytes()).is_some()
    }

    const HEAD: &str = r#""id":"e1","runId":"r","seq":1,"at":5,"schemaVersion":1"#;

    #[test]
    fn valid_lines_are_read_fast() {
        for payload in [
            r#""type":"tool:call","stepId":"s","callId":"c","name":"db.query","args":{"limit":20,"where":"x < 3"}"#,
            r#""type":"tool:result","callId":"c","ok":true,"result":[1,2],"ms":41,"tokens":120,"cost":0.0012"#,
            r#""type":"step:progress","stepId":"s","progress":0.5,"message":"say \"hi\"\nthen go""#,
            r#""type":"step:done","stepId":"s","output":"text","extra":{"free":true}"#,
            r#""type":"plan","steps":[{"id":"a","title":"A"}]"#,
            r#""type":"approval:decision","approvalId":"a","decision":"reject""#,
        ] {
            let line = format!("{{{HEAD},{payload}}}");
            assert!(accepted(&line), "{line}");
            let spaced = format!(" {{ {} , {} }} ", HEAD.replace(',', " , "), payload);
            assert!(accepted(&spaced), "{spaced}");
        }
    }

    #[test]
    fn lines_the_strict_path_must_see_are_declined() {
        for payload in [
            // Needs an inference or is invalid: the coercer's passes decide.
            r#""type":"tool:call","stepId":"s","callId":"c""#,
            r#""type":"tool:result","callId":"c","ok":true,"tokens":7.0"#,
            r#""type":"tool:result","callId":"c","ok":true,"ms":-1"#,
            r#""type":"step:error","stepId":"s","error":"x""#,
            r#""type":"approval:decision","approvalId":"a","decision":"yes""#,
            r#""type":"ToolCall","stepId":"s","name":"n""#,
            r#""type":"custom:thing""#,
            // Spelled in a way the reader does not keep as is.
            r#""type":"step:start","stepId":"caf\u00e9""#,
            r#""type":"step:done","stepId":"s","output":{"a": 1}"#,
            r#""type":"step:done","stepId":"s","output":{"a":1,"a":2}"#,
            r#""type":"step:done","stepId":"s","output":[1.50]"#,
            r#""type":"step:done","stepId":"s","stepId":"t""#,
            r#""type":"step:done","stepId":"s","output":1e400"#,
            r#""type":"step:done","st\u0065pId":"s""#,
        ] {
            let line = format!("{{{HEAD},{payload}}}");
            assert!(!accepted(&line), "{line}");
        }
        for line in [
            r#"{"id":"e1","runId":"r","seq":1.0,"at":5,"schemaVersion":1,"type":"run:start"}"#,
            r#"{"id":"e1","runId":"r","seq":1,"at":5,"schemaVersion":2,"type":"run:start"}"#,
            r#"{"id":"","runId":"r","seq":1,"at":5,"schemaVersion":1,"type":"run:start"}"#,
            r#"{"runId":"r","seq":1,"at":5,"schemaVersion":1,"type":"run:start"}"#,
            r#"{"id":"e1","runId":"r","seq":1,"at":5,"schemaVersion":1,"type":"run:start"} x"#,
            r#"{"id":"e1","runId":"r","seq":9007199254740992,"at":5,"schemaVersion":1,"type":"run:start"}"#,
            "[1]",
            "{}",
        ] {
            assert!(!accepted(line), "{line}");
        }
        assert!(
            LineReader::default()
                .read(b"{\"id\":\"e\xff\",\"runId\":\"r\",\"seq\":1,\"at\":5,\"schemaVersion\":1,\"type\":\"run:start\"}")
                .is_none()
        );
    }
}

//! Reading the input into lines: what a line holds once parsed ([`Body`]), the container of an
//! `{events: [...]}` document, NDJSON split at line breaks (parsed on several threads when
//! large), and the envelope facts the whole-log rules read from a line before it changes.

use serde_json::{Map, Value};

use super::envelope::{TypeFix, classify_type};
use crate::event::{
    EventKind, MAX_SAFE_INTEGER, RunEvent, SCHEMA_VERSION, json_u64, parse_event_fast,
};

/// One input line.
#[derive(Debug)]
pub(crate) enum Body {
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
pub(crate) struct Row {
    pub(crate) line: usize,
    pub(crate) body: Body,
}

/// What an `{events: [...]}` container says besides its events.
#[derive(Debug, Default)]
pub(crate) struct Container {
    /// Its `runId`, when a non-empty string.
    pub(crate) run_id: Option<String>,
    /// Its `goal`, when a string.
    pub(crate) goal: Option<String>,
    /// Every other key (and `runId`/`goal` when unusable), in input order.
    pub(crate) rest: Map<String, Value>,
}

impl Container {
    pub(crate) fn of(mut map: Map<String, Value>) -> Container {
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
pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

pub(crate) fn rows_of(items: Vec<Value>) -> Vec<Row> {
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

pub(crate) fn has_second_line(bytes: &[u8]) -> bool {
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
pub(crate) fn ndjson_rows(bytes: &[u8]) -> Vec<Row> {
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

pub(crate) fn ndjson_rows_from(bytes: &[u8], first_line: usize) -> Vec<Row> {
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
pub(crate) fn parse_body(line_bytes: &[u8]) -> Body {
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

pub(crate) fn body_value(body: &Body) -> Value {
    match body {
        Body::Event(e) => e.to_value(),
        Body::Object(map) => Value::Object(map.clone()),
        Body::Other(v) => v.clone(),
        Body::Unparsable(text, _) => Value::String(text.clone()),
    }
}

pub(crate) fn bodies_equal(a: &Body, b: &Body) -> bool {
    match (a, b) {
        (Body::Event(x), Body::Event(y)) => x == y,
        (Body::Object(x), Body::Object(y)) => x == y,
        _ => body_value(a) == body_value(b),
    }
}

pub(crate) fn body_id(body: &Body) -> Option<&str> {
    match body {
        Body::Event(e) => Some(&e.id),
        Body::Object(map) => map
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

pub(crate) fn body_run_id(body: &Body) -> Option<&str> {
    match body {
        Body::Event(e) => Some(&e.run_id),
        Body::Object(map) => map
            .get("runId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

pub(crate) fn valid_u64(value: Option<&Value>) -> Option<u64> {
    value.and_then(json_u64).filter(|v| *v <= MAX_SAFE_INTEGER)
}

pub(crate) fn body_seq(body: &Body) -> Option<u64> {
    match body {
        Body::Event(e) => Some(e.seq),
        Body::Object(map) => valid_u64(map.get("seq")),
        _ => None,
    }
}

pub(crate) fn body_at(body: &Body) -> Option<u64> {
    match body {
        Body::Event(e) => Some(e.at),
        Body::Object(map) => valid_u64(map.get("at")),
        _ => None,
    }
}

/// The known type a line will have, when its version allows reading it.
pub(crate) fn body_kind(body: &Body) -> Option<EventKind> {
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

/// Non-empty lines of NDJSON: `(line number from 1, byte range of the trimmed line)`.
pub(crate) fn line_ranges(bytes: &[u8]) -> LineRanges<'_> {
    LineRanges {
        bytes,
        breaks: memchr::memchr_iter(b'\n', bytes),
        start: 0,
        number: 0,
    }
}

/// The iterator of [`line_ranges`].
pub(crate) struct LineRanges<'a> {
    bytes: &'a [u8],
    breaks: memchr::Memchr<'a>,
    /// Where the next line starts (past the end when every line was read).
    start: usize,
    /// Lines read so far, blank ones included.
    number: usize,
}

impl LineRanges<'_> {
    /// Line breaks passed so far (once the iterator is done: all of the input's).
    pub(crate) fn breaks_passed(&self) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! The session recording: one NDJSON record per frame, `{"at", "dir", "frame" | "raw" |
//! "bytes", "violations"}`, written as the proxy forwards (a [`Recorder`]) and read back for a
//! replay ([`Record`]).
//!
//! **Invariant:** a record's `frame` is the frame's own text, byte for byte as it crossed the
//! proxy (less its line ending), so the recording says exactly what was on the wire.

use std::io::{self, Write};
use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::inspect::{Direction, Violation};

/// The RFC 3339 UTC timestamp with milliseconds of a record (`2025-01-02T03:04:05.678Z`).
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Reads a record's timestamp back.
///
/// # Errors
/// The text is not an RFC 3339 UTC timestamp.
pub fn parse_timestamp(text: &str) -> Result<SystemTime, humantime::TimestampError> {
    humantime::parse_rfc3339(text)
}

/// Writes records to a sink, one line each, flushed after each so a recording cut short ends
/// at a whole record.
pub struct Recorder {
    out: Box<dyn Write + Send>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// What a record holds of the line.
#[derive(Debug, Clone, Copy)]
pub enum Content<'a> {
    /// A JSON frame: its text.
    Frame(&'a [u8]),
    /// A line that is not JSON.
    Raw(&'a [u8]),
    /// A line over the line limit: only its length was kept.
    Oversize(u64),
}

impl Recorder {
    /// Records into `out`.
    pub fn new(out: Box<dyn Write + Send>) -> Recorder {
        Recorder { out }
    }

    /// Writes one record.
    ///
    /// # Errors
    /// The sink's write errors.
    pub fn write(
        &mut self,
        at: SystemTime,
        direction: Direction,
        content: Content<'_>,
        violations: &[Violation],
    ) -> io::Result<()> {
        let mut line = Vec::with_capacity(128);
        line.extend_from_slice(b"{\"at\":");
        serde_json::to_writer(&mut line, &timestamp(at))?;
        line.extend_from_slice(b",\"dir\":");
        serde_json::to_writer(&mut line, direction.as_str())?;
        match content {
            Content::Frame(text) => {
                line.extend_from_slice(b",\"frame\":");
                line.extend_from_slice(text.trim_ascii());
            }
            Content::Raw(text) => {
                line.extend_from_slice(b",\"raw\":");
                serde_json::to_writer(&mut line, &String::from_utf8_lossy(text))?;
            }
            Content::Oversize(bytes) => {
                line.extend_from_slice(b",\"bytes\":");
                line.extend_from_slice(bytes.to_string().as_bytes());
            }
        }
        line.extend_from_slice(b",\"violations\":");
        serde_json::to_writer(&mut line, violations)?;
        line.extend_from_slice(b"}\n");
        self.out.write_all(&line)?;
        self.out.flush()
    }
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When the proxy had checked the line and was about to forward it (RFC 3339, UTC,
    /// milliseconds); records are in forwarding order and their times never go back.
    pub at: String,
    /// Which way it went.
    pub dir: Direction,
    /// The JSON frame (`Some(Value::Null)` for a line `null`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub frame: Option<Value>,
    /// A line that is not JSON, as text (invalid UTF-8 replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The length of a line over the limit, whose content was not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What the proxy found wrong with it.
    #[serde(default)]
    pub violations: Vec<Violation>,
}

/// A key that is present is `Some`, even when its value is `null`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn records_keep_the_frame_text_and_read_back() {
        let sink = Shared::default();
        let mut recorder = Recorder::new(Box::new(sink.clone()));
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let frame = br#"{"jsonrpc":"2.0","id":1.0,"method":"x","params":{"a":"\u00e9"}}"#;
        recorder
            .write(at, Direction::HostToRuntime, Content::Frame(frame), &[])
            .unwrap();
        recorder
            .write(
                at,
                Direction::RuntimeToHost,
                Content::Raw(b"oops\x1b[2J\xff"),
                &[Violation::new(
                    super::super::ViolationKind::NotJson,
                    "not JSON",
                )],
            )
            .unwrap();
        recorder
            .write(at, Direction::RuntimeToHost, Content::Oversize(99), &[])
            .unwrap();
        recorder
            .write(at, Direction::HostToRuntime, Content::Frame(b"null"), &[])
            .unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        // The frame's own text, not a re-encoding (`1.0` and the escape stay).
        assert!(
            lines[0].contains(r#""frame":{"jsonrpc":"2.0","id":1.0,"#),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains(r#""\u00e9""#));
        let records: Vec<Record> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records[0].at, "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_timestamp(&records[0].at).unwrap(), at);
        assert_eq!(records[0].dir, Direction::HostToRuntime);
        assert_eq!(records[1].raw.as_deref(), Some("oops\u{1b}[2J\u{fffd}"));
        assert_eq!(records[1].violations[0].code, "proxy.not-json");
        assert_eq!(records[2].bytes, Some(99));
        assert_eq!(records[2].frame, None);
        assert_eq!(records[3].frame, Some(Value::Null));
    }
}

//! `agentwire validate --ndjson -` streams: a 1 GiB input generated on the fly into the child's
//! standard input is validated line by line while the child's peak resident memory
//! (`VmHWM` from `/proc/<pid>/status`) stays far below the input size; an over-long line is one
//! issue and is skipped; the line numbers of the invalid messages come out right.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::support::BIN;
use serde_json::{Value, json};

/// Bytes streamed through the validator.
const INPUT_BYTES: u64 = 1 << 30;
/// Size of the valid lines (a frame carrying a blob): large lines keep the debug build's
/// per-message cost low while every byte is still read, parsed and validated.
const LINE_BYTES: usize = 256 << 10;
/// Every this many lines, one invalid message.
const INVALID_EVERY: u64 = 500;
/// The line that exceeds the command's 16 MiB line limit.
const OVERLONG_LINE: u64 = 1001;
const OVERLONG_BYTES: usize = 17 << 20;
/// Peak resident memory allowed for the child: the line limit plus the parsed line and the
/// program itself; reading the input whole would take more than 1 GiB.
const MAX_PEAK_RSS_KIB: u64 = 96 << 10;

const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "type": {"const": "event"},
    "event": {"type": "string", "minLength": 1},
    "seq": {"type": "integer", "minimum": 0},
    "payload": {"type": "object", "properties": {"blob": {"type": "string", "minLength": 1}}}
  },
  "required": ["type", "event", "seq"],
  "additionalProperties": false
}"#;

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes the stream and hands the pipe back unclosed, so that the child is still alive (waiting
/// for more) when its peak memory is read. Returns the number of lines written.
fn write_stream(mut stdin: ChildStdin) -> (ChildStdin, u64) {
    let blob = "x".repeat(LINE_BYTES - 80);
    let mut written: u64 = 0;
    let mut line_no: u64 = 0;
    let mut line = Vec::with_capacity(LINE_BYTES + 128);
    while written < INPUT_BYTES {
        line_no += 1;
        line.clear();
        if line_no == OVERLONG_LINE {
            line.extend_from_slice(
                b"{\"type\":\"event\",\"event\":\"big\",\"seq\":1,\"payload\":{\"blob\":\"",
            );
            line.resize(OVERLONG_BYTES, b'x');
            line.extend_from_slice(b"\"}}");
        } else if line_no.is_multiple_of(INVALID_EVERY) {
            line.extend_from_slice(
                format!("{{\"type\":\"event\",\"event\":\"tick\",\"seq\":-{line_no}}}").as_bytes(),
            );
        } else {
            write!(line, "{{\"type\":\"event\",\"event\":\"tick\",\"seq\":{line_no},\"payload\":{{\"blob\":\"{blob}\"}}}}").unwrap();
        }
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        written += line.len() as u64;
    }
    stdin.flush().unwrap();
    (stdin, line_no)
}

#[test]
fn one_gibibyte_of_ndjson_streams_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("schema.json"), SCHEMA).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "--format",
            "json",
            "validate",
            "--schema",
            "schema.json",
            "--ndjson",
            "-",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        out
    });
    let writer = thread::spawn(move || write_stream(stdin));
    // Sample while the stream flows, so that a peak is seen even if the last sample is missed.
    let mut peak = 0;
    while !writer.is_finished() {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        thread::sleep(Duration::from_millis(100));
    }
    let (stdin, lines) = writer.join().unwrap();
    peak = peak.max(peak_rss_kib(pid).expect("the child is alive until its input closes"));
    drop(stdin);
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(1), "{stderr}");

    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, reports) = records.split_last().unwrap();
    let invalid_lines: Vec<u64> = reports
        .iter()
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    let mut expected: Vec<u64> = (1..=lines)
        .filter(|n| n.is_multiple_of(INVALID_EVERY))
        .collect();
    expected.push(OVERLONG_LINE);
    expected.sort_unstable();
    assert_eq!(invalid_lines, expected);
    let overlong = reports.iter().find(|r| r["line"] == OVERLONG_LINE).unwrap();
    assert_eq!(overlong["issues"][0]["code"], "input.line-too-long");
    assert_eq!(
        *summary,
        json!({"summary": {"messages": lines, "valid": lines - expected.len() as u64, "invalid": expected.len(), "undecided": 0, "errors": 0}})
    );
    eprintln!("streamed {lines} lines ({INPUT_BYTES} bytes); peak RSS {peak} KiB");
    assert!(peak > 0, "could not read VmHWM of the child");
    assert!(
        peak < MAX_PEAK_RSS_KIB,
        "peak RSS {peak} KiB, limit {MAX_PEAK_RSS_KIB} KiB"
    );
}

//! `agentwire runlog state|view|view --html` on large logs read from a file and from a pipe written as the
//! command runs: the output is the documented one and the peak memory (GNU time's maximum
//! resident set) stays far below the log's size, because the log is read in pieces or passes
//! and never held whole.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use crate::support::BIN;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const TIME: &str = "/usr/bin/time";

/// Runs `agentwire ARGS` under GNU time, feeding `stdin` (if any) from a thread that writes it a
/// megabyte at a time; its standard output and its peak resident set in KiB.
fn measured(args: &[&str], stdin: Option<Vec<u8>>) -> (String, u64) {
    assert!(
        Path::new(TIME).exists(),
        "{TIME} (GNU time) is needed to measure peak memory: apt-get install time"
    );
    let mut cmd = Command::new(TIME);
    cmd.args(["-f", "peak-kib %M", BIN])
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn agentwire under time");
    let writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().expect("stdin");
        std::thread::spawn(move || {
            for chunk in bytes.chunks(1 << 20) {
                pipe.write_all(chunk).expect("write stdin");
            }
        })
    });
    let out = child.wait_with_output().expect("wait");
    if let Some(w) = writer {
        w.join().expect("writer");
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    let peak = stderr
        .lines()
        .find_map(|l| l.strip_prefix("peak-kib "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr:?}"));
    (String::from_utf8(out.stdout).expect("utf-8"), peak)
}

/// A clean run (complete envelopes, `seq` in order, unique ids) whose state stays small: one
/// step with `n` progress events of a 1.4 KB message, the last one kept.
fn clean_log(n: usize) -> Vec<u8> {
    let envelope = |seq: usize, id: &str, body: &str| {
        format!(r#"{{"id":"{id}","runId":"big","seq":{seq},"at":{seq},"schemaVersion":1,{body}}}"#)
    };
    let message = "x".repeat(1400);
    let mut out = envelope(1, "e_start", r#""type":"run:start","goal":"stream""#) + "\n";
    out += &(envelope(
        2,
        "e_step",
        r#""type":"step:start","stepId":"s1","title":"t""#,
    ) + "\n");
    for i in 0..n {
        let body = format!(
            r#""type":"step:progress","stepId":"s1","progress":0.5,"message":"{message}{i}""#
        );
        out += &(envelope(3 + i, &format!("e{i}"), &body) + "\n");
    }
    out.into_bytes()
}

/// The same shape without envelopes (no id, run, seq or time): the line-by-line coercer's case.
fn envelope_less_log(n: usize) -> Vec<u8> {
    let message = "x".repeat(1400);
    let mut out = String::from(
        "{\"type\":\"run:start\",\"goal\":\"stream\"}\n{\"type\":\"step:start\",\"stepId\":\"s1\",\"title\":\"t\"}\n",
    );
    for i in 0..n {
        out += &format!(
            "{{\"type\":\"step:progress\",\"stepId\":\"s1\",\"progress\":0.5,\"message\":\"{message}{i}\"}}\n"
        );
    }
    out.into_bytes()
}

/// Peak memory of the command on a two-line log: what the process costs before any log.
fn baseline_kib(dir: &Path) -> u64 {
    let tiny = dir.join("tiny.ndjson");
    std::fs::write(&tiny, clean_log(0)).expect("write");
    measured(&["runlog", "state", tiny.to_str().expect("path")], None).1
}

#[test]
fn state_of_a_large_clean_log_from_a_pipe_is_folded_piece_by_piece() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = baseline_kib(dir.path());
    let log = clean_log(70_000);
    let size_kib = log.len() as u64 / 1024;
    assert!(size_kib > 100 << 10, "{size_kib} KiB");
    let (out, peak) = measured(&["runlog", "state", "-"], Some(log));
    assert_eq!(
        out,
        "run big\ngoal stream\nstatus running · 0/1 steps done · 1 left · 0 tool calls · 0 approvals\nstep s1 Running t\n"
    );
    // Holding the text would take at least its size (before: 1.3 times it).
    assert!(
        peak - base < size_kib / 4,
        "peak {peak} KiB, {base} KiB without a log, for a {size_kib} KiB log"
    );
}

#[test]
fn state_and_view_of_a_large_envelope_less_log_read_it_in_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = baseline_kib(dir.path());
    let log = envelope_less_log(25_000);
    let size_kib = log.len() as u64 / 1024;
    let path = dir.path().join("big.ndjson");
    std::fs::write(&path, &log).expect("write");
    drop(log);
    let path = path.to_str().expect("path");
    let (out, peak) = measured(&["runlog", "state", path], None);
    assert_eq!(
        out,
        "run run_1\ngoal stream\nstatus running · 0/1 steps done · 1 left · 0 tool calls · 0 approvals\nstep s1 Running t\n"
    );
    assert!(
        peak - base < size_kib / 4,
        "state: peak {peak} KiB, {base} KiB without a log, for a {size_kib} KiB log"
    );
    let (out, peak) = measured(&["runlog", "view", "--color", "never", path], None);
    let head: Vec<&str> = out.lines().take(11).collect();
    assert_eq!(
        head,
        [
            "Run run_1",
            "goal    stream",
            "status running · 0/1 steps done · 1 left · 0 tool calls · 0 approvals",
            "",
            "Issues (125010 fixed, 0 degraded, 0 dropped, 0 info)",
            "  fixed    id-filled                 25002×  lines 1-25002",
            "  fixed    run-id-filled             25002×  lines 1-25002",
            "  fixed    at-filled                 25002×  lines 1-25002",
            "  fixed    schema-version-filled     25002×  lines 1-25002",
            "  fixed    seq-renumbered            25002×  lines 1-25002",
            "  (one line per code; --issues all lists every issue)",
        ]
    );
    assert_eq!(
        out.lines().filter(|l| l.contains("step:progress")).count(),
        25_000
    );
    assert!(
        peak - base < size_kib / 4,
        "view: peak {peak} KiB, {base} KiB without a log, for a {size_kib} KiB log"
    );
    // The page is written as the log is read: neither the log nor the page is held (before:
    // ten times the log).
    let page = dir.path().join("big.html");
    let (out, peak) = measured(
        &[
            "runlog",
            "view",
            "--html",
            page.to_str().expect("path"),
            path,
        ],
        None,
    );
    assert_eq!(
        out,
        format!("wrote {} (25002 events, 125010 issues)\n", page.display())
    );
    let page_kib = std::fs::metadata(&page).expect("page").len() / 1024;
    assert!(page_kib > size_kib, "{page_kib} KiB page");
    assert!(
        peak - base < size_kib / 4,
        "view --html: peak {peak} KiB, {base} KiB without a log, for a {size_kib} KiB log"
    );
}

//! `agentwire runlog …`: output shapes, exit codes and the documented example.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn agentwire(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentwire"));
    cmd.args(args);
    match stdin {
        Some(bytes) => {
            use std::io::Write;
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped());
            let mut child = cmd.spawn().expect("spawn");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(bytes)
                .expect("write stdin");
            child.wait_with_output().expect("wait")
        }
        None => cmd.output().expect("run agentwire"),
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8")
}

const HANDWRITTEN: &str = r#"[
  { "type": "run:start", "goal": "给 20 位未激活用户发激活邮件" },
  { "type": "plan", "steps": ["查询未激活用户", "生成邮件草稿", "发送"] },
  { "type": "step:start", "stepId": "step_1" },
  { "type": "tool:call", "stepId": "step_1", "name": "db.query", "args": { "table": "users" } },
  { "type": "tool:result", "ok": true, "result": { "rows": 20 }, "ms": 41 },
  { "type": "step:done", "stepId": "step_1" }
]"#;

#[test]
fn coerce_json_is_the_library_result_and_exits_1_when_something_was_fixed() {
    let o = agentwire(
        &["--format", "json", "runlog", "coerce", "-"],
        Some(HANDWRITTEN.as_bytes()),
    );
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let lib = agentwire_runlog_result(HANDWRITTEN);
    assert_eq!(v, lib);
    insta::assert_json_snapshot!("runlog_coerce_seed_example_meta", v["meta"]);
}

fn agentwire_runlog_result(text: &str) -> Value {
    // The same computation through the library: the command adds nothing.
    let result = agentwire_runlog::to_run_events_from_slice(
        text.as_bytes(),
        &agentwire_runlog::CoerceOptions::default(),
    );
    serde_json::to_value(&result).expect("json")
}

#[test]
fn coerce_of_a_valid_mock_run_exits_0() {
    let mock = agentwire(&["runlog", "mock", "--scenario", "approval-approved"], None);
    assert_eq!(mock.status.code(), Some(0));
    let o = agentwire(&["runlog", "coerce", "-"], Some(&mock.stdout));
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).starts_with("20 lines: 20 events, 0 degraded, 0 dropped; 0 lines fixed"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn coerce_human_lists_every_issue() {
    let o = agentwire(&["runlog", "coerce", "-"], Some(HANDWRITTEN.as_bytes()));
    insta::assert_snapshot!("runlog_coerce_seed_example_human", stdout(&o));
}

#[test]
fn mock_prints_valid_ndjson_for_every_option() {
    let o = agentwire(
        &[
            "runlog",
            "mock",
            "--steps",
            "4",
            "--approval",
            "pending",
            "--failure",
            "--unknown-event",
            "--goal",
            "g",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines[0]["goal"], "g");
    assert_eq!(
        lines.last().map(|l| l["type"].clone()),
        Some(json!("run:paused"))
    );
    assert!(lines.iter().all(agentwire_runlog::is_valid_event));
}

#[test]
fn mock_lists_scenarios_and_rejects_an_unknown_one() {
    let o = agentwire(&["runlog", "mock", "--list-scenarios"], None);
    assert!(stdout(&o).contains("approval-pending"));
    let o = agentwire(&["runlog", "mock", "--scenario", "nope"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn state_json_of_a_pending_approval() {
    let mock = agentwire(&["runlog", "mock", "--scenario", "approval-pending"], None);
    let o = agentwire(
        &["--format", "json", "runlog", "state", "-"],
        Some(&mock.stdout),
    );
    assert_eq!(o.status.code(), Some(0));
    let state: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(state["status"], "paused");
    assert_eq!(state["pausedReason"], "approval");
    assert_eq!(state["pendingApprovals"], 1);
    assert_eq!(state["stepsLeft"], 1);
    insta::assert_json_snapshot!("runlog_state_approval_pending", state);
}

#[test]
fn view_text_shows_issues_steps_and_folded_lines() {
    let mut log = agentwire(&["runlog", "mock", "--scenario", "everything"], None).stdout;
    log.extend_from_slice(b"{\"type\": \"tool:call\", \"stepId\": \"step_4\"}\nnot json at all\n");
    let o = agentwire(&["runlog", "view", "--color", "never", "-"], Some(&log));
    assert_eq!(o.status.code(), Some(0));
    insta::assert_snapshot!("runlog_view_everything", stdout(&o));
}

#[test]
fn view_html_writes_a_self_contained_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("run.html");
    let mock = agentwire(&["runlog", "mock", "--scenario", "approval-pending"], None);
    let o = agentwire(
        &[
            "runlog",
            "view",
            "--html",
            page.to_str().expect("path"),
            "-",
        ],
        Some(&mock.stdout),
    );
    assert_eq!(o.status.code(), Some(0));
    let html = std::fs::read_to_string(Path::new(&page)).expect("page");
    assert!(html.starts_with("<!DOCTYPE html>"));
    for external in ["http://", "https://", "<link", "src=\""] {
        assert!(
            !html.contains(external),
            "the page must not load {external}"
        );
    }
    assert!(html.contains("waiting for approval"));
}

#[test]
fn digest_of_the_schema_document_is_the_recorded_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../protocols/tasklens/run-events.schema.json");
    let o = agentwire(&["digest", root.to_str().expect("path")], None);
    assert_eq!(
        stdout(&o).trim(),
        "sha256:158047cb8d56ef722e4213dff9b8e8336f2640692548db5b95f931096bf74386"
    );
}

/// `state` and `view --format json` print the state of the normalized events whether the log is
/// in order (streamed or derived in place) or shuffled with a repeated delivery (normalized).
#[test]
fn state_is_the_normalized_derivation_in_order_or_not() {
    let mock = agentwire(&["runlog", "mock", "--scenario", "everything"], None).stdout;
    let lines: Vec<&[u8]> = mock
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut shuffled: Vec<&[u8]> = lines.iter().rev().copied().collect();
    shuffled.push(lines[2]);
    let join = |ls: &[&[u8]]| ls.join(&b'\n');
    let in_order = join(&lines);
    let shuffled = join(&shuffled);
    let expected = |bytes: &[u8]| {
        let options = agentwire_runlog::CoerceOptions::default();
        let mut events = agentwire_runlog::to_run_events_from_slice(bytes, &options).into_events();
        agentwire_runlog::normalize_in_place(&mut events);
        serde_json::to_value(agentwire_runlog::derive_run_state_owned(events)).expect("state")
    };
    for log in [&in_order, &shuffled] {
        let want = expected(log);
        let state = agentwire(&["--format", "json", "runlog", "state", "-"], Some(log));
        let state: Value = serde_json::from_slice(&state.stdout).expect("state json");
        assert_eq!(state, want);
        let view = agentwire(&["--format", "json", "runlog", "view", "-"], Some(log));
        let view: Value = serde_json::from_slice(&view.stdout).expect("view json");
        assert_eq!(view["state"], want);
    }
    // The shuffled log really needed normalizing.
    let plain = agentwire_runlog::derive_run_state_owned(
        agentwire_runlog::to_run_events_from_slice(&shuffled, &Default::default()).into_events(),
    );
    assert_ne!(
        serde_json::to_value(plain).expect("state"),
        expected(&shuffled)
    );
}

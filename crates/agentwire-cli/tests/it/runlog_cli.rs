//! `agentwire runlog …`: output shapes, exit codes and the documented example.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{self, BIN, stdout};
use serde_json::{Value, json};

fn agentwire(args: &[&str], stdin: Option<&[u8]>) -> Output {
    support::agentwire().args(args).stdin_opt(stdin).output()
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
fn coerce_human_lists_every_issue_with_issues_all() {
    let o = agentwire(
        &["runlog", "coerce", "--issues", "all", "-"],
        Some(HANDWRITTEN.as_bytes()),
    );
    insta::assert_snapshot!("runlog_coerce_seed_example_human", stdout(&o));
}

#[test]
fn coerce_human_groups_issues_by_code() {
    let o = agentwire(&["runlog", "coerce", "-"], Some(HANDWRITTEN.as_bytes()));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "6 lines: 6 events, 0 degraded, 0 dropped; 6 lines fixed
goal: 给 20 位未激活用户发激活邮件
Issues (32 fixed, 0 degraded, 0 dropped, 0 info)
  fixed    id-filled                     6×  lines 1-6
  fixed    run-id-filled                 6×  lines 1-6
  fixed    at-filled                     6×  lines 1-6
  fixed    schema-version-filled         6×  lines 1-6
  fixed    seq-renumbered                6×  lines 1-6
  fixed    plan-steps-from-strings       1×  line 2
  fixed    call-id-paired                1×  line 5
  (one line per code; --issues all lists every issue)
"
    );
}

/// The example log of the repository: 16 lines, 88 fixed issues, shown as one line per code
/// before the steps; `--format json` still has all 90 issues.
#[test]
fn view_of_the_example_groups_its_issues_and_json_keeps_them_all() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/deploy-run.ndjson");
    let example = example.to_str().expect("path");
    let o = agentwire(&["runlog", "view", "--color", "never", example], None);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    let issues: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Issues ("))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(issues.len(), 17, "{text}");
    assert!(issues[0].starts_with("  fixed    id-filled                    15×  lines 1-15"));
    assert!(issues.iter().all(|l| l.len() < 200), "{issues:?}");
    let all = agentwire(
        &[
            "runlog", "view", "--color", "never", "--issues", "all", example,
        ],
        None,
    );
    let listed = stdout(&all)
        .lines()
        .filter(|l| l.starts_with("  fixed    line "))
        .count();
    assert_eq!(listed, 88);
    let json = agentwire(&["--format", "json", "runlog", "view", example], None);
    let v: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["coerce"]["issues"].as_array().map(Vec::len), Some(90));
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

/// Text from the log never reaches the terminal raw: ESC sequences, line breaks, C1 controls
/// and bidi overrides in goals, titles, ids, types and unparsable text are escaped, so a log
/// can neither clear the screen nor forge an issue line. JSON output is unchanged.
#[test]
fn human_output_escapes_control_characters() {
    let log = concat!(
        r#"{"type":"run:start","goal":"G\u001b[2J\r\nfixed    line 9 forged","runId":"r\u001b]0;x\u0007"}"#,
        "\n",
        r#"{"type":"step:start","stepId":"s\u009b1m","title":"t\u202egnp.exe"}"#,
        "\n",
        r#"{"type":"odd\u001b[31m","stepId":"s"}"#,
        "\n",
        "not json \u{1b}[2J\r here\n",
    );
    for args in [
        &["runlog", "view", "--color", "never", "-"][..],
        &["runlog", "view", "--color", "never", "--issues", "all", "-"],
        &["runlog", "coerce", "-"],
        &["runlog", "coerce", "--issues", "all", "-"],
        &["runlog", "state", "-"],
    ] {
        let o = agentwire(args, Some(log.as_bytes()));
        let text = stdout(&o);
        for c in text.chars() {
            assert!(
                c == '\n' || !(c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
                "{args:?} printed {c:?}: {text}"
            );
        }
        assert!(
            !text.lines().any(|l| l.starts_with("fixed    line 9")),
            "{args:?}: {text}"
        );
    }
    let view = stdout(&agentwire(
        &["runlog", "view", "--color", "never", "-"],
        Some(log.as_bytes()),
    ));
    assert!(
        view.contains(r"goal    G\u{1b}[2J\r\nfixed    line 9 forged"),
        "{view}"
    );
    assert!(view.contains(r"s\u{9b}1m t\u{202e}gnp.exe"), "{view}");
    assert!(view.contains(r"not json \u{1b}[2J\r here"), "{view}");
    // JSON keeps the text as it is.
    let json = agentwire(
        &["--format", "json", "runlog", "state", "-"],
        Some(log.as_bytes()),
    );
    let state: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(state["goal"], "G\u{1b}[2J\r\nfixed    line 9 forged");
}

/// A log large enough that its output overflows a pipe's buffer.
fn big_log() -> Vec<u8> {
    let mut log = String::from("{\"type\":\"run:start\",\"goal\":\"g\"}\n");
    for i in 0..20_000 {
        log.push_str(&format!(
            "{{\"type\":\"step:start\",\"stepId\":\"s{i}\",\"title\":\"step {i}\"}}\n"
        ));
    }
    log.into_bytes()
}

/// Reads one byte of the command's output, closes the pipe and waits.
fn read_one_byte_then_close(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::{Read, Write};
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // The command may stop reading early; a failed write is not the test's concern.
        let _ = input.write_all(&bytes);
    });
    let mut stdout = child.stdout.take().expect("stdout");
    let mut one = [0u8; 1];
    stdout.read_exact(&mut one).expect("first byte");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    out
}

#[test]
fn a_closed_pipe_ends_every_runlog_command_without_a_panic() {
    let log = big_log();
    for args in [
        &["runlog", "view", "--color", "never", "-"][..],
        &["runlog", "view", "--issues", "all", "-"],
        &["--format", "json", "runlog", "view", "-"],
        &["runlog", "state", "-"],
        &["--format", "json", "runlog", "state", "-"],
        &["runlog", "coerce", "--issues", "all", "-"],
        &["--format", "json", "runlog", "coerce", "-"],
        &["runlog", "mock", "--steps", "100000"],
    ] {
        let o = read_one_byte_then_close(args, &log);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // Ended by its own exit (with a code), not by a signal or an abort.
        assert!(o.status.code().is_some(), "{args:?}: {:?}", o.status);
        assert_ne!(
            o.status.code(),
            Some(0),
            "{args:?}: the lost output went unnoticed"
        );
    }
}

#[test]
fn mock_flags_out_of_range_are_usage_errors() {
    for (args, says) in [
        (&["runlog", "mock", "--run-id", ""][..], "--run-id"),
        (&["runlog", "mock", "--steps", "0"], "1..=100000"),
        (&["runlog", "mock", "--steps", "100001"], "1..=100000"),
        (
            &["runlog", "mock", "--steps", "99999999999999999999"],
            "--steps",
        ),
        (
            &["runlog", "mock", "--scenario", "happy-path", "--steps", "2"],
            "cannot be used",
        ),
    ] {
        let o = agentwire(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let o = agentwire(&["runlog", "mock", "--steps", "100000"], None);
    assert_eq!(o.status.code(), Some(0));
    let last = stdout(&o)
        .lines()
        .last()
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(last.contains(r#""summary":"100000 steps done""#), "{last}");
}

/// A byte order mark on line 1 is reported and removed; the line's goal is kept, and the count
/// of fixed lines agrees with the listed fixes.
#[test]
fn a_bom_on_line_1_is_stripped_and_reported() {
    let log = b"\xEF\xBB\xBF{\"type\":\"run:start\",\"goal\":\"G\"}\n{\"type\":\"step:start\",\"stepId\":\"s\"}\n";
    let o = agentwire(&["--format", "json", "runlog", "coerce", "-"], Some(log));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["meta"]["goal"], "G");
    assert_eq!(v["meta"]["synthesized"], 0);
    assert_eq!(v["meta"]["fixed"], 2);
    assert_eq!(v["issues"][0]["code"], "bom-stripped");
    assert_eq!(v["issues"][0]["line"], 1);
    let o = agentwire(&["--format", "json", "runlog", "state", "-"], Some(log));
    let state: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(state["goal"], "G");
    let o = agentwire(&["runlog", "coerce", "-"], Some(log));
    assert!(
        stdout(&o).starts_with("2 lines: 2 events, 0 degraded, 0 dropped; 2 lines fixed\n"),
        "{}",
        stdout(&o)
    );
}

/// Degraded lines whose envelope was filled count as lines with a fix.
#[test]
fn lines_fixed_counts_every_line_with_a_fixed_issue() {
    let log = b"{\"type\":\"tool:call\",\"stepId\":\"s\"}\n{\"type\":\"step:done\"}\n";
    let o = agentwire(&["--format", "json", "runlog", "coerce", "-"], Some(log));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let mut fixed_lines: Vec<u64> = v["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .filter(|i| i["level"] == "fixed")
        .filter_map(|i| i["line"].as_u64())
        .collect();
    fixed_lines.dedup();
    assert_eq!(fixed_lines, [1, 2]);
    assert_eq!(v["meta"]["fixed"], 2);
}

/// A container's run id and goal reach the run; any other key is kept with an issue.
#[test]
fn container_keys_are_used_or_reported() {
    let doc = br#"{"runId":"R9","goal":"G","events":[{"type":"step:start","stepId":"s"}],"events2":[{"type":"step:done","stepId":"s"}]}"#;
    let o = agentwire(&["--format", "json", "runlog", "coerce", "-"], Some(doc));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["meta"]["runIds"], json!(["R9"]));
    assert_eq!(v["meta"]["goal"], "G");
    assert!(
        v["events"]
            .as_array()
            .expect("events")
            .iter()
            .all(|e| e["runId"] == "R9")
    );
    assert_eq!(
        v["malformed"],
        json!([{"line": 0, "raw": {"events2": [{"type": "step:done", "stepId": "s"}]}}])
    );
    let kept: Vec<&Value> = v["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .filter(|i| i["code"] == "container-keys-kept")
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["level"], "degraded");
    assert!(
        kept[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("events2"))
    );
    let state = agentwire(&["--format", "json", "runlog", "state", "-"], Some(doc));
    let state: Value = serde_json::from_slice(&state.stdout).expect("json");
    assert_eq!(state["runId"], "R9");
    assert_eq!(state["goal"], "G");
}

/// NDJSON written pass by pass (`coerce`, `view --format json`) is exactly the library's
/// result of the whole text.
#[test]
fn ndjson_output_is_the_library_result() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/deploy-run.ndjson");
    let bytes = std::fs::read(&example).expect("example");
    let text = std::str::from_utf8(&bytes).expect("utf-8");
    let lib = agentwire_runlog_result(text);
    let o = agentwire(&["--format", "json", "runlog", "coerce", "-"], Some(&bytes));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v, lib);
    let o = agentwire(&["--format", "json", "runlog", "view", "-"], Some(&bytes));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["coerce"], lib);
}

/// The page the library writes from passes over `bytes` (a log of one run the line-by-line
/// coercer takes).
fn library_page(bytes: &[u8]) -> Vec<u8> {
    let options = agentwire_runlog::CoerceOptions::default();
    let plan = agentwire_runlog::plan_by_line(bytes, &options).expect("taken line by line");
    let mut page = Vec::new();
    agentwire_runlog::write_html_by_line(&mut page, &plan).expect("write");
    page
}

#[test]
fn view_html_to_standard_output_is_the_page_it_writes_to_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("run.html");
    let page_arg = page.to_str().expect("path");
    let mut log = agentwire(&["runlog", "mock", "--scenario", "everything"], None).stdout;
    log.extend_from_slice(b"{\"type\": \"tool:call\", \"stepId\": \"step_4\"}\nnot json at all\n");
    let to_file = agentwire(&["runlog", "view", "--html", page_arg, "-"], Some(&log));
    assert_eq!(to_file.status.code(), Some(0));
    assert!(stdout(&to_file).starts_with(&format!("wrote {page_arg} (")));
    let to_stdout = agentwire(&["runlog", "view", "--html", "-", "-"], Some(&log));
    assert_eq!(to_stdout.status.code(), Some(0));
    // Only the page: no line saying where it went.
    assert_eq!(to_stdout.stdout, std::fs::read(&page).expect("page"));
    assert_eq!(to_stdout.stdout, library_page(&log));
}

#[test]
fn view_html_of_a_log_read_whole_is_the_whole_results_page() {
    // Two runs: not taken line by line.
    let log = b"{\"type\":\"run:start\",\"runId\":\"a\"}\n{\"type\":\"run:start\",\"runId\":\"b\"}\nnope\n";
    let o = agentwire(&["runlog", "view", "--html", "-", "-"], Some(log));
    assert_eq!(o.status.code(), Some(0));
    let options = agentwire_runlog::CoerceOptions::default();
    let result = agentwire_runlog::to_run_events_from_slice(log, &options);
    let page = agentwire_runlog::render_html(&result, &result.state());
    assert_eq!(stdout(&o), page);
}

/// 80,000 lines of one run, mostly complete envelopes, with lines that are not JSON, lines to
/// degrade and lines without envelopes among them: every section of the page, and a page of
/// about 50 MB, written as the log is read.
fn large_log() -> Vec<u8> {
    let mut log = String::from(
        "{\"id\":\"e1\",\"runId\":\"big\",\"seq\":1,\"at\":1,\"schemaVersion\":1,\"type\":\"run:start\",\"goal\":\"a <large> run\"}\n",
    );
    for i in 2..80_000 {
        let step = i / 100;
        let line = match i % 1000 {
            0 => "{\"type\":\"approval:decision\",\"decision\":\"maybe\"}".to_owned(),
            1 => "not json & <b>".to_owned(),
            2 => format!("{{\"type\":\"step:progress\",\"stepId\":\"s{step}\"}}"),
            n => {
                let body = if n % 100 == 3 {
                    format!("\"type\":\"step:start\",\"stepId\":\"s{step}\"")
                } else {
                    format!("\"type\":\"step:progress\",\"stepId\":\"s{step}\",\"progress\":0.5")
                };
                format!(
                    "{{\"id\":\"e{i}\",\"runId\":\"big\",\"seq\":{i},\"at\":{i},\"schemaVersion\":1,{body}}}"
                )
            }
        };
        log.push_str(&line);
        log.push('\n');
    }
    log.into_bytes()
}

#[test]
fn view_html_of_a_large_log_is_the_librarys_streamed_page() {
    let log = std::sync::Arc::new(large_log());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.ndjson");
    std::fs::write(&path, &*log).expect("write");
    // The library's page is made while the command runs.
    let page = {
        let log = std::sync::Arc::clone(&log);
        std::thread::spawn(move || library_page(&log))
    };
    let o = agentwire(
        &[
            "runlog",
            "view",
            "--html",
            "-",
            path.to_str().expect("path"),
        ],
        None,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = page.join().expect("library page");
    assert!(
        o.stdout == page,
        "the command's page ({} bytes) is not the library's ({} bytes)",
        o.stdout.len(),
        page.len()
    );
    let text = stdout(&o);
    for section in [
        "id=\"issues\"",
        "id=\"steps\"",
        "id=\"timeline\"",
        "id=\"malformed\"",
    ] {
        assert!(text.contains(section), "{section}");
    }
}

#[test]
fn view_html_to_a_file_that_cannot_be_written_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("missing-folder/run.html");
    let log = b"{\"type\":\"run:start\"}\n{\"type\":\"step:start\",\"stepId\":\"s\"}\n";
    let o = agentwire(
        &[
            "runlog",
            "view",
            "--html",
            page.to_str().expect("path"),
            "-",
        ],
        Some(log),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(o.stdout, b"");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.starts_with(&format!("error: cannot write {}", page.display())),
        "{stderr}"
    );
}

/// A log named by a path that cannot be read twice — a pipe from `<(…)`, a FIFO — is read
/// once and kept, so every pass sees it whole: `coerce`, `state` and `view` print what they
/// print for the same log in a file.
#[test]
fn a_log_from_a_pipe_path_or_a_fifo_reads_as_the_same_log_in_a_file() {
    let dir = tempfile::tempdir().expect("dir");
    let mock = agentwire(&["runlog", "mock", "--scenario", "approval-approved"], None);
    let file = dir.path().join("run.ndjson");
    std::fs::write(&file, &mock.stdout).expect("write");
    let file = file.to_str().expect("utf-8");
    for command in ["coerce", "state", "view"] {
        let expected = agentwire(&["--format", "json", "runlog", command, file], None);
        assert_eq!(
            expected.status.code(),
            Some(0),
            "{command}: {}",
            stdout(&expected)
        );
        let piped = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "{BIN} --format json runlog {command} <(cat '{file}')"
            ))
            .output()
            .expect("bash");
        assert_eq!(stdout(&piped), stdout(&expected), "{command} of <(…)");
        assert_eq!(piped.status.code(), Some(0));

        let fifo = dir.path().join(format!("{command}.fifo"));
        let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        let (writer_path, bytes) = (fifo.clone(), mock.stdout.clone());
        let writer = std::thread::spawn(move || std::fs::write(writer_path, bytes));
        let mut child = Command::new(BIN)
            .args(["--format", "json", "runlog", command])
            .arg(&fifo)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let started = std::time::Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if started.elapsed() > std::time::Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{command} of a FIFO hangs");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        writer.join().expect("writer").expect("write the FIFO");
        let out = child.wait_with_output().expect("output");
        assert_eq!(stdout(&out), stdout(&expected), "{command} of a FIFO");
    }
}

//! The HTML timeline in headless Chromium: a mock run with a pending approval and a bad line
//! renders with no console or page errors, no network requests, and the expected text.
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use std::process::Command;

use crate::support::BIN;
use serde_json::Value;

#[test]
fn html_view_renders_in_chromium_without_errors() {
    agentwire_testkit::require_chromium();
    // In the build's own scratch folder: kept for a look at the page and its screenshot, gone
    // with the build folder (never in the clone itself).
    let out_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("runlog-html");
    std::fs::create_dir_all(&out_dir).expect("output folder");
    let page = out_dir.join("approval-pending.html");
    let screenshot = out_dir.join("approval-pending.png");

    let mock = Command::new(BIN)
        .args(["runlog", "mock", "--scenario", "everything"])
        .output()
        .expect("mock");
    let mut log = mock.stdout;
    log.extend_from_slice(b"{\"type\": \"approval:decision\", \"decision\": \"maybe\"}\n{broken\n");
    let log_path = out_dir.join("approval-pending.ndjson");
    std::fs::write(&log_path, &log).expect("log");
    let view = Command::new(BIN)
        .args(["runlog", "view", "--html"])
        .arg(&page)
        .arg(&log_path)
        .output()
        .expect("view");
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );

    let mut check = agentwire_testkit::node_script("check-html.mjs");
    check.arg(&page).arg(&screenshot);
    let output = agentwire_testkit::run_ok(&mut check);
    let report: Value = serde_json::from_slice(&output.stdout).expect("report");
    assert_eq!(report["consoleErrors"], serde_json::json!([]), "{report}");
    assert_eq!(report["pageErrors"], serde_json::json!([]), "{report}");
    assert_eq!(report["requests"], serde_json::json!([]), "{report}");
    let text = report["text"].as_str().expect("text");
    for expected in [
        "Run run_mock",
        "Send an activation email to 20 inactive users",
        "waiting for approval",
        "risk high",
        "decision-unknown",
        "unparsable-line",
        "unknown event (folded)",
        "line could not be repaired",
        "Malformed lines",
        "retried 1×",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let details = report["detailsCount"].as_u64().expect("count");
    assert!(details > 20, "{details}");
    assert_eq!(report["expandedAfterClick"].as_u64(), Some(details));
    assert!(screenshot.is_file());
}

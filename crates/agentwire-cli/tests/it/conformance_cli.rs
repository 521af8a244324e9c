//! `agentwire conformance`: the suite passes against `agentwire serve --stdio` on every version,
//! and fails exactly the scenario a deliberately broken runtime breaks (the Python runtimes of
//! `tests/data/broken_runtimes/`, each breaking one promise of a small correct one), with a
//! message saying what was wrong. A runtime that hangs fails with a timeout; usage and spawn
//! errors exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::BIN;
use serde_json::Value;

fn broken(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/broken_runtimes")
        .join(format!("{name}.py"))
}

/// `python3` on the PATH, which runs the broken runtimes.
fn python() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("python3"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("python3 is missing: the broken runtimes of tests/data/broken_runtimes are Python scripts; install python3")
        })
}

/// A shell-quoted word.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

fn conformance(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("conformance")
        .args(args)
        .output()
        .expect("agentwire runs")
}

/// The JSON report of a run (`--format json`) and its exit code.
fn report(args: &[&str]) -> (Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let output = conformance(&all);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (report, output.status.code().unwrap_or(-1))
}

/// `(scenario, version) -> result` of a report.
fn outcome<'a>(report: &'a Value, scenario: &str, version: &str) -> &'a Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == scenario && r["version"] == version)
        .unwrap_or_else(|| panic!("no result for {scenario} on {version}: {report}"))
}

/// The oldest and newest version each scenario applies to, as the suite documents them.
const APPLIES: [(&str, &str, &str); 14] = [
    ("negotiation", "1.0", "1.5"),
    ("capabilities", "1.2", "1.5"),
    ("no-interaction-before-ack", "1.2", "1.5"),
    ("methods", "1.0", "1.5"),
    ("bad-params", "1.0", "1.5"),
    ("newer-version", "1.0", "1.4"),
    ("idempotency", "1.0", "1.5"),
    ("snapshot-paging", "1.0", "1.5"),
    ("resume", "1.3", "1.5"),
    ("resume-expired", "1.3", "1.5"),
    ("recovery-snapshot", "1.3", "1.5"),
    ("approval", "1.0", "1.5"),
    ("user-input", "1.2", "1.5"),
    ("client-follow", "1.3", "1.5"),
];
const VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

#[test]
fn the_suite_passes_against_agentwire_serve_on_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite");
    let script = dir.path().join("script.json");
    // A smaller burst than the default keeps a debug build quick; it is still one turn of
    // hundreds of durable events.
    std::fs::write(&script, r#"{"burst": "/burst 300"}"#).unwrap();
    let command = format!(
        "{} serve --stdio --store sqlite:{}",
        quoted(Path::new(BIN)),
        quoted(&store)
    );
    let (report, code) = report(&["--stdio", &command, "--script", script.to_str().unwrap()]);
    assert_eq!(report["versions"], serde_json::json!(VERSIONS));
    for (scenario, since, until) in APPLIES {
        for version in VERSIONS {
            let result = outcome(&report, scenario, version);
            let applies = version >= since && version <= until && scenario != "resume-expired";
            if applies {
                assert_eq!(
                    result["outcome"], "pass",
                    "{scenario} on {version}: {}",
                    result["message"]
                );
            } else {
                assert_eq!(
                    result["outcome"], "n/a",
                    "{scenario} on {version}: {result}"
                );
                assert!(result["reason"].as_str().unwrap().len() > 10, "{result}");
            }
        }
    }
    // Without a trim hook the expiry checks say why they did not run.
    let expired = outcome(&report, "resume-expired", "1.3");
    assert!(
        expired["reason"].as_str().unwrap().contains("--trim-hook"),
        "{expired}"
    );
    assert_eq!(report["summary"]["fail"], 0);
    assert_eq!(report["passed"], true);
    assert_eq!(code, 0);
}

#[test]
fn expired_cursors_pass_against_agentwire_serve_with_the_trim_hook() {
    for version in ["1.3", "1.4", "1.5"] {
        // A store per version: the hook trims a thread's start for good, and `agentwire serve`
        // rebuilds every live thread from the start of its log when it starts.
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite:{}", quoted(&dir.path().join("r.sqlite")));
        let bin = quoted(Path::new(BIN));
        let command = format!("{bin} serve --stdio --store {store}");
        let hook = format!("{bin} events trim --store {store} --thread {{thread}} --max-records 1");
        let (report, code) = report(&[
            "--stdio",
            &command,
            "--trim-hook",
            &hook,
            "--versions",
            version,
            "--scenario",
            "resume-expired",
        ]);
        let result = outcome(&report, "resume-expired", version);
        assert_eq!(
            result["outcome"], "pass",
            "{version}: {}",
            result["message"]
        );
        assert_eq!(code, 0);
    }
}

/// Runs `scenarios` on 1.3 against a broken runtime; the trim hook marks a thread trimmed in
/// the runtime's directory.
fn against(runtime: &str, scenarios: &str) -> (Value, i32) {
    let dir = tempfile::tempdir().unwrap();
    let trimmed = dir.path().join("trimmed");
    std::fs::create_dir(&trimmed).unwrap();
    let command = format!(
        "{} {} --trim-dir {}",
        quoted(&python()),
        quoted(&broken(runtime)),
        quoted(&trimmed)
    );
    let hook = format!(
        "{} -c 'import sys; open(sys.argv[1], \"w\").close()' {}/{{thread}}",
        quoted(&python()),
        quoted(&trimmed)
    );
    report(&[
        "--stdio",
        &command,
        "--trim-hook",
        &hook,
        "--versions",
        "1.3",
        "--scenario",
        scenarios,
        "--timeout",
        "10",
    ])
}

fn message(report: &Value, scenario: &str) -> String {
    let result = outcome(report, scenario, "1.3");
    assert_eq!(result["outcome"], "fail", "{scenario}: {result}");
    result["message"].as_str().unwrap().to_owned()
}

fn passes(report: &Value, scenario: &str) {
    let result = outcome(report, scenario, "1.3");
    assert_eq!(
        result["outcome"], "pass",
        "{scenario}: {}",
        result["message"]
    );
}

#[test]
fn the_small_correct_runtime_passes_what_it_serves() {
    let scenarios = "negotiation,capabilities,no-interaction-before-ack,methods,resume,resume-expired,recovery-snapshot,approval,client-follow";
    let (report, code) = against("roll_runtime", scenarios);
    for scenario in scenarios.split(',') {
        passes(&report, scenario);
    }
    assert_eq!(code, 0);
}

#[test]
fn replayed_events_after_the_resume_answer_fail_resume() {
    let (report, code) = against("late_replay", "resume,negotiation");
    let message = message(&report, "resume");
    assert!(
        message.contains("replayedCount")
            && message.contains("0 replayed events came before the answer (the barrier)"),
        "{message}"
    );
    passes(&report, "negotiation");
    assert_eq!(report["summary"]["fail"], 1);
    assert_eq!(code, 1);
}

#[test]
fn a_shorter_replay_after_trimming_fails_resume_expired() {
    let (report, code) = against("short_suffix", "resume-expired,resume");
    let message = message(&report, "resume-expired");
    assert!(
        message.contains("instead of EVENT_CURSOR_EXPIRED") && message.contains("shorter replay"),
        "{message}"
    );
    passes(&report, "resume");
    assert_eq!(code, 1);
}

#[test]
fn an_approval_request_before_the_ack_fails_no_interaction_before_ack() {
    let (report, code) = against("early_approval", "no-interaction-before-ack,approval");
    let message = message(&report, "no-interaction-before-ack");
    assert!(
        message.contains("an approval.request, was written before client.capabilities.set"),
        "{message}"
    );
    passes(&report, "approval");
    assert_eq!(code, 1);
}

#[test]
fn an_invalid_frame_fails_the_scenario_that_read_it_naming_frame_and_issue() {
    let (report, code) = against("invalid_frame", "methods,negotiation");
    let message = message(&report, "methods");
    assert!(
        message.contains("the answer to thread.capabilities")
            && message.contains("is invalid under 1.3")
            && message.contains("/result/tools"),
        "{message}"
    );
    passes(&report, "negotiation");
    assert_eq!(code, 1);
}

#[test]
fn a_runtime_that_hangs_fails_with_a_timeout_and_the_table_says_so() {
    let command = format!("{} {}", quoted(&python()), quoted(&broken("silent")));
    let output = conformance(&[
        "--stdio",
        &command,
        "--versions",
        "1.0,1.3",
        "--scenario",
        "negotiation",
        "--scenario",
        "resume",
        "--timeout",
        "1",
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"scenario     1.0   1.3   "), "{text}");
    assert!(lines.contains(&"negotiation  FAIL  FAIL  "), "{text}");
    assert!(lines.contains(&"resume       n/a   FAIL  "), "{text}");
    assert!(
        text.contains("negotiation on 1.0: timed out: the runtime wrote nothing for 1000 ms"),
        "{text}"
    );
    assert!(
        text.contains("resume on 1.0: runtime.events.resume exists from 1.3"),
        "{text}"
    );
    assert!(
        text.contains("0 passed, 3 failed, 1 not applicable"),
        "{text}"
    );
}

#[test]
fn usage_and_spawn_errors_exit_2() {
    let missing = conformance(&["--stdio", "agentwire-no-such-runtime --stdio"]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("cannot start the runtime agentwire-no-such-runtime"),
        "{stderr}"
    );
    let (json, code) = report(&["--stdio", "agentwire-no-such-runtime"]);
    assert_eq!(code, 2);
    assert_eq!(json["error"]["code"], "conformance.spawn");
    for (args, code) in [
        (
            vec!["--stdio", "x", "--scenario", "no-such-scenario"],
            "conformance.unknown-scenario",
        ),
        (
            vec!["--stdio", "x", "--versions", "1.9"],
            "usage.conformance-version",
        ),
        (vec!["--stdio", "'unterminated"], "conformance.command"),
        (
            vec!["--stdio", "x", "--trim-hook", ""],
            "conformance.trim-hook",
        ),
    ] {
        let (json, exit) = report(&args);
        assert_eq!(exit, 2, "{args:?}");
        assert_eq!(json["error"]["code"], code, "{args:?}: {json}");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"aproval": "/approve ls"}"#).unwrap();
    let (json, exit) = report(&["--stdio", "x", "--script", script.to_str().unwrap()]);
    assert_eq!(exit, 2);
    assert_eq!(
        json["error"]["code"], "conformance.script.unknown-hook",
        "{json}"
    );
}

#[test]
fn control_characters_of_a_runtime_are_escaped_in_messages() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("noisy.py");
    std::fs::write(
        &runtime,
        "import sys\nsys.stdin.readline()\nsys.stdout.write('\\x1b[31mred\\x07\\n')\nsys.stdout.flush()\n",
    )
    .unwrap();
    let command = format!("{} {}", quoted(&python()), quoted(&runtime));
    let output = conformance(&[
        "--stdio",
        &command,
        "--versions",
        "1.3",
        "--scenario",
        "negotiation",
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(
        text.contains("frame 1 is not JSON") && text.contains("\\u{1b}[31mred\\u{7}"),
        "{text}"
    );
    assert_eq!(output.status.code(), Some(1));
}

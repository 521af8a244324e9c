//! `agentwire demo`, the README's first command: the runtime on the embedded SQLite store, a
//! Roll host driving it through an approval, the timeline printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use crate::support::BIN;
use serde_json::Value;

fn demo(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("demo")
        .args(args)
        .env("AGENTWIRE_STATE_DIR", state)
        .env_remove("AGENTWIRE_LOG")
        .output()
        .expect("agentwire demo runs")
}

/// The timeline without its time offsets and ids, which differ between runs.
fn normalised(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            match trimmed
                .strip_prefix('+')
                .and_then(|rest| rest.split_once("s  "))
            {
                Some((_, rest)) => format!("  {}", rest.trim_end()),
                None if line.starts_with("thread ") => "thread <id> \"agentwire demo\"".to_owned(),
                None if line.starts_with("agentwire demo: ") => {
                    "agentwire demo: <store>".to_owned()
                }
                None => line.to_owned(),
            }
        })
        .collect()
}

#[test]
fn the_demo_runs_a_greeting_and_an_approved_command_on_the_default_store() {
    let state = tempfile::tempdir().unwrap();
    let out = demo(state.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        normalised(&stdout),
        [
            "agentwire demo: <store>",
            "",
            "thread <id> \"agentwire demo\"",
            "",
            "turn 1: Hello, agentwire",
            "  turn.started",
            "  message.completed  echo: Hello, agentwire (3 deltas streamed)",
            "  turn.completed",
            "",
            "turn 2: /approve ls -la",
            "  turn.started",
            "  approval asked     demo wants shell: ls -la (Runs `ls -la` in the workspace shell.)",
            "  host approves",
            "  approval.resolved  resolved: approve",
            "  tool.started       shell {\"command\":\"ls -la\"}",
            "  tool.output        shell stdout: shell starting",
            "  tool.output        shell stdout: shell done",
            "  tool.completed     shell success — $ ls -la\\n(ran in the demo sandbox)",
            "  message.completed  Ran `ls -la`. (3 deltas streamed)",
            "  turn.completed",
            "",
            "2 turn(s), 9 durable events, every frame checked against Roll 1.5. Serve it to your own host: agentwire serve --stdio",
        ]
        .map(str::to_owned)
    );
    // The default store is the state directory's SQLite file, and it keeps what happened.
    assert!(state.path().join("runtime.sqlite").exists());
    let second = demo(
        state.path(),
        &[
            "--format",
            "json",
            "--reject",
            "--input",
            "/approve rm -rf /",
        ],
    );
    assert!(second.status.success());
    let report: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(report["protocolVersion"], "1.5");
    assert_eq!(report["turns"][0]["end"], "turn.completed");
    let timeline = report["turns"][0]["timeline"].as_array().unwrap();
    assert!(timeline.iter().any(|e| e["what"] == "host rejects"));
    let tool = timeline
        .iter()
        .find(|e| e["what"] == "tool.completed")
        .unwrap();
    assert_eq!(
        tool["envelope"]["event"]["outcome"]["kind"],
        "user_rejected"
    );
    assert_eq!(tool["envelope"]["durability"], "durable");
}

#[test]
fn a_failing_turn_makes_the_demo_exit_1() {
    let state = tempfile::tempdir().unwrap();
    let out = demo(state.path(), &["--input", "/fail execute"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("turn.failed        at execute:"),
        "{stdout}"
    );
}

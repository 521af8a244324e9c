//! `agentwire events inspect|tail|trim`: against SQLite logs seeded through the library, a live
//! `tail --follow` woken by another process's commits, and one PostgreSQL store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::SystemTime;

use crate::support::{self, BIN, utf8 as text};
use agentwire_events::{Checkpoint, EventLog, Expected, NewEvent, Retention, ThreadId};
use serde_json::{Value, json};

fn agentwire(args: &[&str]) -> Output {
    support::agentwire().args(args).output()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tid(name: &str) -> ThreadId {
    ThreadId::new(name).unwrap()
}

/// A log with thread `alpha` (3 events and a checkpoint through position 2), `beta` (4 events,
/// the first 2 trimmed, one not UTF-8) and `gone` (deleted).
async fn seed(url: &str) -> Arc<dyn EventLog> {
    let log = agentwire_events::open(url).await.unwrap();
    log.append(
        &tid("alpha"),
        Expected::Next(0),
        vec![
            NewEvent::new("turn.started", "{}"),
            NewEvent::new("message.completed", r#"{"text":"hi"}"#),
            NewEvent::new("turn.completed", "{}"),
        ],
    )
    .await
    .unwrap();
    log.put_checkpoint(
        &tid("alpha"),
        Checkpoint {
            through: 2,
            payload: b"{\"state\":1}".to_vec(),
        },
    )
    .await
    .unwrap();
    log.append(
        &tid("beta"),
        Expected::Next(0),
        vec![
            NewEvent::new("b", "one"),
            NewEvent::new("b", "two"),
            NewEvent::new("b", "three"),
            NewEvent::new("b", vec![0xff, 0x00]),
        ],
    )
    .await
    .unwrap();
    let keep_two = Retention {
        max_records: 2,
        ..Retention::default()
    };
    log.trim(&tid("beta"), &keep_two, SystemTime::now())
        .await
        .unwrap();
    log.append(&tid("gone"), Expected::Any, vec![NewEvent::new("g", "x")])
        .await
        .unwrap();
    log.delete_thread(&tid("gone")).await.unwrap();
    log
}

fn sqlite_store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("events.db").display());
    (dir, url)
}

#[test]
fn inspect_lists_threads_with_positions_watermarks_and_sizes() {
    let (_dir, url) = sqlite_store();
    let rt = runtime();
    let log_id = rt.block_on(async {
        let log = seed(&url).await;
        let id = log.log_id();
        log.close().await.unwrap();
        id
    });
    let out = agentwire(&["--format", "json", "events", "inspect", "--store", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report,
        json!({
            "log_id": log_id.to_string(),
            "backend": "sqlite",
            "threads": [
                {"thread": "alpha", "low_watermark": 0, "next_seq": 3, "records": 3,
                 "bytes": 12 + 2 + 17 + 13 + 14 + 2, "deleted": false,
                 "checkpoint": {"through": 2, "bytes": 11}},
                {"thread": "beta", "low_watermark": 2, "next_seq": 4, "records": 2,
                 "bytes": 1 + 5 + 1 + 2, "deleted": false, "checkpoint": null},
                {"thread": "gone", "low_watermark": 1, "next_seq": 1, "records": 0,
                 "bytes": 0, "deleted": true, "checkpoint": null},
            ]
        })
    );
    let out = agentwire(&["events", "inspect", "--store", &url]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        format!(
            "log {log_id} (sqlite), 3 threads\n\
             thread         low        next   records         bytes  checkpoint  state\n\
             alpha            0           3         3            60           2  live\n\
             beta             2           4         2             9           -  live\n\
             gone             1           1         0             0           -  deleted\n"
        )
    );
    let out = agentwire(&[
        "--format", "json", "events", "inspect", "--store", &url, "--thread", "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn tail_prints_events_after_a_position_and_refuses_an_expired_start() {
    let (_dir, url) = sqlite_store();
    runtime().block_on(async { seed(&url).await.close().await.unwrap() });
    let out = agentwire(&[
        "--format", "json", "events", "tail", "--store", &url, "--thread", "alpha", "--after", "0",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[0]["kind"], "message.completed");
    assert_eq!(lines[0]["payload"], r#"{"text":"hi"}"#);
    assert_eq!(lines[0]["size"], 17 + 13);
    assert_eq!(lines[1]["seq"], 2);
    // The default start is the newest --last events, never before the low-watermark.
    let out = agentwire(&[
        "--format", "json", "events", "tail", "--store", &url, "--thread", "beta",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.iter().map(|l| l["seq"].clone()).collect::<Vec<_>>(),
        [json!(2), json!(3)]
    );
    assert_eq!(lines[0]["payload"], "three");
    assert_eq!(lines[1]["payload_hex"], "ff00");
    let out = agentwire(&[
        "events", "tail", "--store", &url, "--thread", "beta", "--last", "1",
    ]);
    let line = text(&out.stdout);
    assert!(line.starts_with("       3  "), "{line:?}");
    assert!(
        line.contains("  b  ") && line.ends_with("<2 bytes, not UTF-8>\n"),
        "{line:?}"
    );
    // A start inside the trimmed prefix is an error, never a shorter answer.
    let out = agentwire(&[
        "--format",
        "json",
        "events",
        "tail",
        "--store",
        &url,
        "--thread",
        "beta",
        "--from-start",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["code"], "events.expired");
    let out = agentwire(&[
        "--format", "json", "events", "tail", "--store", &url, "--thread", "gone",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["code"], "events.thread-deleted");
}

#[test]
fn tail_follow_is_woken_by_another_process_commits() {
    let (_dir, url) = sqlite_store();
    let rt = runtime();
    let log = rt.block_on(seed(&url));
    let child = Command::new(BIN)
        .args([
            "--format", "json", "events", "tail", "--store", &url, "--thread", "alpha",
        ])
        .args(["--after", "2", "--follow", "--count", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rt.block_on(async {
        log.append(
            &tid("alpha"),
            Expected::Next(3),
            vec![NewEvent::new("later", "4th")],
        )
        .await
        .unwrap();
        log.append(
            &tid("alpha"),
            Expected::Next(4),
            vec![NewEvent::new("later", "5th")],
        )
        .await
        .unwrap();
    });
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let payloads: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["payload"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(payloads, ["4th", "5th"]);
}

#[test]
fn trim_applies_retention_to_every_live_thread() {
    let (_dir, url) = sqlite_store();
    runtime().block_on(async { seed(&url).await.close().await.unwrap() });
    let out = agentwire(&[
        "--format",
        "json",
        "events",
        "trim",
        "--store",
        &url,
        "--max-records",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["removed"], 3);
    assert_eq!(
        report["threads"],
        json!([
            {"thread": "alpha", "removed": 2, "low_watermark": 2, "next_seq": 3},
            {"thread": "beta", "removed": 1, "low_watermark": 3, "next_seq": 4},
        ])
    );
    assert_eq!(report["retention"]["max_records"], 1);
    let out = agentwire(&["events", "trim", "--store", &url, "--max-records", "1"]);
    assert_eq!(
        text(&out.stdout),
        "alpha: removed 0, low-watermark 2, next 3\nbeta: removed 0, low-watermark 3, next 4\nremoved 0 events from 2 threads\n"
    );
    // An age past what milliseconds in a u64 hold is reported at that most.
    let out = agentwire(&[
        "--format",
        "json",
        "events",
        "trim",
        "--store",
        &url,
        "--max-age-secs",
        "18446744073709552",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["retention"]["max_age"], json!(u64::MAX));
}

#[test]
fn a_missing_sqlite_file_or_unknown_url_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.db");
    let url = format!("sqlite:{}", path.display());
    let out = agentwire(&["events", "inspect", "--store", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no event log at"),
        "{}",
        text(&out.stderr)
    );
    assert!(!path.exists(), "inspect must not create a log");
    let out = agentwire(&[
        "--format",
        "json",
        "events",
        "inspect",
        "--store",
        "mysql://x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["code"], "events.invalid-url");
}

#[test]
fn inspect_reads_a_postgres_store() {
    let url = agentwire_testkit::postgres_server().fresh_database("cli");
    let rt = runtime();
    let log_id = rt.block_on(async {
        let log = seed(&url).await;
        let id = log.log_id();
        log.close().await.unwrap();
        id
    });
    let out = agentwire(&[
        "--format", "json", "events", "inspect", "--store", &url, "--thread", "beta",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report,
        json!({
            "log_id": log_id.to_string(),
            "backend": "postgres",
            "threads": [{"thread": "beta", "low_watermark": 2, "next_seq": 4, "records": 2,
                         "bytes": 9, "deleted": false, "checkpoint": null}]
        })
    );
}

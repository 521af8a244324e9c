//! `agentwire project`: NDJSON in, NDJSON out, one error line per message that cannot be
//! projected, exit 1 if any.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::BIN;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn staged() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-schema/tests/data/versions/staged-runtime.json")
}

/// `agentwire` with `args`, its standard streams piped.
fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn project(args: &[&str], input: &str) -> Output {
    let mut child = spawn(args);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const INPUT: &str = r#"{"jsonrpc":"2.0","method":"runtime.event","params":{"protocolVersion":"1.5","runtimeInstanceId":"rt","sequence":3,"threadId":"t1","durability":"durable","eventId":"e1","event":{"type":"turn.status","status":"waiting-for-user"}}}

{"jsonrpc":"2.0","id":4,"method":"userInput.request","params":{"approvalId":"a1","interactionId":"i1"}}
{"jsonrpc":"2.0","id":5,"method":"thread.open","params":{"threadId":"t1","recovery":true}}
not json
"#;

#[test]
fn projects_a_stream_for_programs() {
    let schema = staged();
    let out = project(
        &[
            "--format",
            "json",
            "project",
            "--schema",
            schema.to_str().unwrap(),
            "--to",
            "1.1",
            "-",
        ],
        INPUT,
    );
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap(), @r#"
    {"jsonrpc":"2.0","method":"runtime.event","params":{"protocolVersion":"1.1","runtimeInstanceId":"rt","sequence":3,"threadId":"t1","event":{"type":"turn.status","status":"running"}}}
    {"error":{"line":3,"code":"project.value-unavailable","pointer":"/method","message":"value \"userInput.request\" does not exist in version 1.1 and /$defs/ServerRequest/properties/method/x-agentwire-map-down does not map it"}}
    {"jsonrpc":"2.0","id":5,"method":"thread.open","params":{"threadId":"t1"}}
    {"error":{"line":5,"code":"json.syntax","pointer":"","message":"expected ident at line 1 column 2"}}
    "#);
}

#[test]
fn people_get_errors_on_stderr() {
    let schema = staged();
    let out = project(
        &[
            "project",
            "--schema",
            schema.to_str().unwrap(),
            "--from",
            "1.5",
            "--to",
            "1.2",
        ],
        INPUT,
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("line 5: json.syntax"), "{stderr}");
}

#[test]
fn definitions_and_clean_streams_exit_0() {
    let schema = staged();
    let input = r#"{"protocolVersion":"1.4","runtimeInstanceId":"rt","sequence":1,"threadId":"t1","durability":"ephemeral","event":{"type":"turn.started","turnId":"u1"}}
"#;
    let out = project(
        &[
            "project",
            "--schema",
            schema.to_str().unwrap(),
            "--from",
            "1.4",
            "--to",
            "1.2",
            "--def",
            "EventEnvelope",
        ],
        input,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"protocolVersion\":\"1.2\",\"runtimeInstanceId\":\"rt\",\"sequence\":1,\"threadId\":\"t1\",\"event\":{\"type\":\"turn.started\",\"turnId\":\"u1\"}}\n"
    );
}

#[test]
fn bad_setups_exit_2() {
    let schema = staged();
    let s = schema.to_str().unwrap();
    assert_eq!(
        project(&["project", "--schema", s, "--to", "9.9"], "")
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        project(
            &["project", "--schema", s, "--from", "1.1", "--to", "1.2"],
            ""
        )
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        project(
            &["project", "--schema", s, "--to", "1.2", "--def", "Nope"],
            ""
        )
        .status
        .code(),
        Some(2)
    );
}

/// A live stream: each projection is written as soon as its line is read, while the input is
/// still open (the output is buffered, but flushed whenever the input has nothing buffered).
#[test]
fn a_live_stream_gets_each_projection_before_its_input_ends() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::Duration;

    let schema = staged();
    let schema = schema.to_str().unwrap();
    let mut child = spawn(&["project", "--schema", schema, "--to", "1.1", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let line = r#"{"jsonrpc":"2.0","id":5,"method":"thread.open","params":{"threadId":"t1","recovery":true}}"#;
    for _ in 0..2 {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let projected = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("no projection while the input is open");
        assert_eq!(
            projected,
            r#"{"jsonrpc":"2.0","id":5,"method":"thread.open","params":{"threadId":"t1"}}"#
        );
    }
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// `project --protocol roll-runtime` with `args`, one input, JSON output; the exit code and the
/// output lines.
fn roll_project(args: &[&str], input: &str) -> (Option<i32>, Vec<serde_json::Value>) {
    let mut all = vec!["--format", "json", "project", "--protocol", "roll-runtime"];
    all.extend_from_slice(args);
    let out = project(&all, input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let values = if stdout.trim_start().starts_with('{') && !stdout.contains("\n{") {
        vec![serde_json::from_str(&stdout).unwrap()]
    } else {
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    (out.status.code(), values)
}

/// A Roll event says its version in its envelope: it is read at that version without `--from`
/// (at the default 1.5 it is not valid at all), and projects exactly as with `--from`.
#[test]
fn a_message_that_says_its_version_is_read_at_it() {
    let path = agentwire_testkit::peer_fixture(
        "roll-agent/fixtures/v1.3/valid-runtime-durable-event-notification.json",
    );
    let message = agentwire_testkit::read_json(&path);
    assert_eq!(message["params"]["protocolVersion"], "1.3");
    let line = serde_json::to_string(&message).unwrap() + "\n";
    let (code, stated) = roll_project(&["--to", "1.2"], &line);
    assert_eq!(code, Some(0), "{stated:?}");
    let (code, explicit) = roll_project(&["--from", "1.3", "--to", "1.2"], &line);
    assert_eq!(code, Some(0));
    assert_eq!(stated, explicit);
    assert_eq!(stated[0]["params"]["protocolVersion"], "1.2");
    // The message's own word wins over --from.
    let (code, overridden) = roll_project(&["--from", "1.5", "--to", "1.2"], &line);
    assert_eq!(code, Some(0));
    assert_eq!(overridden, explicit);

    // A stated version that is older than the target cannot go up: that message is refused.
    let (code, out) = roll_project(&["--to", "1.4"], &line);
    assert_eq!(code, Some(1));
    assert_eq!(out[0]["error"]["code"], "roll.project.upward");

    // An initialize request naming the one version it speaks.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersions":["9.9"],"client":{"name":"c","version":"1"}}}"#;
    let (code, out) = roll_project(&["--to", "1.0"], &format!("{init}\n"));
    assert_eq!(code, Some(1));
    assert_eq!(out[0]["error"]["code"], "roll.project.unknown-version");
    assert_eq!(out[0]["error"]["pointer"], "/params/protocolVersions/0");
}

/// A pretty-printed document is one message, projected and written in canonical text; the same
/// message on one line is projected to the same value.
#[test]
fn a_json_document_is_projected_like_a_line() {
    let path = agentwire_testkit::peer_fixture(
        "roll-agent/fixtures/v1.3/valid-runtime-durable-event-notification.json",
    );
    let pretty = std::fs::read_to_string(&path).unwrap();
    assert!(pretty.lines().count() > 3, "the fixture is pretty-printed");
    let (code, document) = roll_project(&["--to", "1.2"], &format!("\n\n{pretty}"));
    assert_eq!(code, Some(0));
    let message = agentwire_testkit::read_json(&path);
    let (_, line) = roll_project(
        &["--to", "1.2"],
        &(serde_json::to_string(&message).unwrap()),
    );
    assert_eq!(document, line);

    let out = project(
        &["project", "--protocol", "roll-runtime", "--to", "1.2", "-"],
        &pretty,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        agentwire_schema::canonical_text(&line[0], true),
        "canonical text"
    );

    // A broken document is one error, with the line of the document where it breaks.
    let broken = pretty.replacen("\"params\"", "\"params\" \"x\"", 1);
    let (code, out) = roll_project(&["--to", "1.2"], &broken);
    assert_eq!(code, Some(1));
    assert_eq!(out[0]["error"]["line"], serde_json::Value::Null);
    assert_eq!(out[0]["error"]["code"], "json.syntax");
}

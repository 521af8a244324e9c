//! Inputs and arguments that must not crash a command, lose output or be silently ignored: a
//! reader that closes the pipe early (an HTML page of a run log included), a standard output
//! on `/dev/null` however it was opened (the verdict's exit code stands) or one that refuses
//! writes, a 16 MiB line ending in CRLF, standard input named twice, `gen --name` outside a plain
//! file stem, `--version` beside `--schema`, an upward projection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{self, BIN};
use serde_json::{Value, json};

/// What `agentwire` exits with when its reader closes standard output early (docs/cli.md).
const EXIT_BROKEN_PIPE: i32 = 141;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `agentwire args` in the repository with `stdin`.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    support::agentwire()
        .args(args)
        .current_dir(repo())
        .stdin(stdin)
        .output()
}

/// Runs `agentwire args` and reads one byte of its output before closing the pipe, as
/// `| head -c1` does; returns the exit code and standard error.
fn read_one_byte(args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&bytes);
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    writer.join().unwrap();
    (status.code(), stderr)
}

/// A JSON document of about `bytes` bytes whose canonical text is several times larger than a
/// pipe's buffer.
fn big_document(bytes: usize) -> Vec<u8> {
    let items: Vec<Value> = (0..bytes / 40)
        .map(|i| json!({"index": i, "name": format!("item {i}")}))
        .collect();
    serde_json::to_vec(&json!({ "items": items })).unwrap()
}

fn ndjson(lines: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..lines {
        writeln!(out, r#"{{"type":"event","event":"tick","seq":{i}}}"#).unwrap();
    }
    out
}

/// A run log whose HTML page is many times larger than a pipe's buffer.
fn run_log(steps: usize) -> Vec<u8> {
    let mut out = b"{\"type\":\"run:start\",\"goal\":\"g\"}\n".to_vec();
    for i in 0..steps {
        writeln!(
            out,
            r#"{{"type":"step:start","stepId":"s{i}","title":"step {i}"}}"#
        )
        .unwrap();
    }
    out
}

const FRAMES: &str = r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
  "properties": {"type": {"type": "string"}, "seq": {"type": "integer", "minimum": 0}},
  "required": ["type"]}"#;

fn frames_schema(dir: &Path) -> PathBuf {
    let path = dir.join("frames.json");
    std::fs::write(&path, FRAMES).unwrap();
    path
}

#[test]
fn a_reader_that_goes_away_ends_each_command_quietly_with_the_documented_code() {
    let dir = tempfile::tempdir().unwrap();
    let schema = frames_schema(dir.path());
    let schema = schema.to_str().unwrap();
    let doc = big_document(4 << 20);
    let roll = "protocols/roll-runtime/roll-runtime.schema.json";
    let cases: Vec<(Vec<&str>, Vec<u8>)> = vec![
        (vec!["fmt", "-"], doc.clone()),
        (vec!["--format", "json", "fmt", "-"], doc.clone()),
        (
            vec!["validate", "--verbose", "--schema", schema, "--ndjson"],
            ndjson(200_000),
        ),
        (
            vec![
                "--format",
                "json",
                "validate",
                "--verbose",
                "--schema",
                schema,
                "--ndjson",
            ],
            ndjson(200_000),
        ),
        (vec!["schema", "export", "--draft", "07", roll], Vec::new()),
        (vec!["runlog", "view", "--html", "-", "-"], run_log(20_000)),
    ];
    for (args, stdin) in cases {
        let (code, stderr) = read_one_byte(&args, &stdin);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(code, Some(EXIT_BROKEN_PIPE), "{args:?}: {stderr}");
        // Quiet: the reader left on purpose; nothing is wrong to report.
        assert_eq!(stderr, "", "{args:?}");
    }
}

/// A stream of three valid messages and one invalid one, and the schema they go with.
fn mixed_stream(dir: &Path) -> (PathBuf, PathBuf) {
    let schema = frames_schema(dir);
    let stream = dir.join("mixed.ndjson");
    std::fs::write(
        &stream,
        "{\"type\":\"req\"}\n{\"type\":\"event\",\"seq\":1}\n{\"seq\":-1}\n{\"type\":\"res\"}\n",
    )
    .unwrap();
    (schema, stream)
}

/// The arguments of `agentwire validate --schema S --ndjson STREAM`, with `--format json` first
/// when `json`.
fn validate_args(schema: &Path, stream: &Path, json: bool) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if json {
        args.extend(["--format".into(), "json".into()]);
    }
    args.extend([
        "validate".into(),
        "--schema".into(),
        schema.to_str().unwrap().into(),
        "--ndjson".into(),
        stream.to_str().unwrap().into(),
    ]);
    args
}

/// `/dev/null` opened for reading and writing, as Python's `subprocess.DEVNULL`, Node's
/// `stdio: 'ignore'` and systemd's `StandardOutput=null` hand it to a child.
fn dev_null_read_write() -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap()
}

#[test]
fn a_standard_output_on_read_write_dev_null_keeps_the_verdicts_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, mixed) = mixed_stream(dir.path());
    let valid = dir.path().join("valid.ndjson");
    std::fs::write(&valid, "{\"type\":\"req\"}\n").unwrap();
    for json in [false, true] {
        for (stream, verdict) in [(&mixed, 1), (&valid, 0)] {
            let out = Command::new(BIN)
                .args(validate_args(&schema, stream, json))
                .stdin(Stdio::null())
                .stdout(dev_null_read_write())
                .stderr(Stdio::piped())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(verdict), "json {json}: {stderr}");
            assert_eq!(stderr, "", "json {json}");
        }
    }
}

#[test]
fn a_python_caller_that_discards_the_output_gets_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, mixed) = mixed_stream(dir.path());
    // As a CI script or a test harness calls a validator for its exit code.
    let script = r#"
import json, subprocess, sys
run = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE)
print(json.dumps({"code": run.returncode, "stderr": run.stderr.decode("utf-8", "replace")}))
"#;
    let out = agentwire_testkit::require_python()
        .arg("-c")
        .arg(script)
        .arg(BIN)
        .args(validate_args(&schema, &mixed, false))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result, json!({"code": 1, "stderr": ""}));
}

#[test]
fn a_node_caller_that_ignores_the_output_gets_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, mixed) = mixed_stream(dir.path());
    let script = r#"
const { spawnSync } = require("node:child_process");
const [bin, ...args] = process.argv.slice(1);
const run = spawnSync(bin, args, { stdio: "ignore" });
console.log(JSON.stringify({ code: run.status, signal: run.signal }));
"#;
    let out = agentwire_testkit::require_node()
        .arg("-e")
        .arg(script)
        .arg(BIN)
        .args(validate_args(&schema, &mixed, true))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result, json!({"code": 1, "signal": null}));
}

/// `>/dev/null`, `1<>/dev/null` and a standard output closed at start (`>&-`, which the runtime
/// replaces with `/dev/null` opened read-write) all discard the output and keep the verdict.
#[test]
fn every_shell_redirection_to_dev_null_keeps_the_verdicts_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, mixed) = mixed_stream(dir.path());
    for redirection in [">/dev/null", "1<>/dev/null", ">&-"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("exec \"$0\" \"$@\" {redirection}"))
            .arg(BIN)
            .args(validate_args(&schema, &mixed, false))
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{redirection}: {stderr}");
        assert_eq!(stderr, "", "{redirection}");
    }
}

/// A standard output that refuses writes (`/dev/full`: ENOSPC) is an error, never a silent
/// success with the output lost.
#[test]
fn a_standard_output_that_cannot_be_written_is_an_error_not_a_silent_success() {
    let doc = br#"{"b": 1, "a": [1, 2]}"#;
    for args in [&["fmt", "-"][..], &["--format", "json", "fmt", "-"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(doc).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: cannot write standard output"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_line_of_the_limit_reads_the_same_with_lf_and_crlf() {
    const LIMIT: usize = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let schema = frames_schema(dir.path());
    let head = r#"{"type":"event","pad":""#;
    let tail = r#""}"#;
    let line = |len: usize| {
        let mut text = head.as_bytes().to_vec();
        text.resize(len - tail.len(), b'x');
        text.extend_from_slice(tail.as_bytes());
        text
    };
    for (len, valid) in [(LIMIT, true), (LIMIT + 1, false)] {
        let mut reports = Vec::new();
        for ending in [&b"\n"[..], b"\r\n"] {
            let mut input = line(len);
            input.extend_from_slice(ending);
            input.extend_from_slice(b"{\"type\":\"req\"}");
            input.extend_from_slice(ending);
            let out = run(
                &[
                    "--format",
                    "json",
                    "validate",
                    "--verbose",
                    "--schema",
                    schema.to_str().unwrap(),
                    "--ndjson",
                ],
                &input,
            );
            assert_eq!(out.status.code(), Some(if valid { 0 } else { 1 }));
            reports.push(String::from_utf8(out.stdout).unwrap());
        }
        assert_eq!(reports[0], reports[1], "line of {len} bytes");
        let first: Value = serde_json::from_str(reports[0].lines().next().unwrap()).unwrap();
        assert_eq!(first["valid"], valid, "{first}");
        if !valid {
            assert_eq!(first["issues"][0]["code"], "input.line-too-long");
        }
    }
}

fn fatal_code(out: &Output) -> String {
    let value: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    value["error"]["code"].as_str().unwrap().to_owned()
}

#[test]
fn standard_input_is_read_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema = frames_schema(dir.path());
    let out = run(&["--format", "json", "compat", "-", "-"], FRAMES.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fatal_code(&out), "input.stdin-twice");
    let out = run(&["compat", "-", "-"], FRAMES.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("it can be read only once, so at most one input may be `-`"),
        "{stderr}"
    );
    let out = run(
        &[
            "--format",
            "json",
            "validate",
            "--schema",
            schema.to_str().unwrap(),
            "-",
            "-",
        ],
        b"{}",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fatal_code(&out), "input.stdin-twice");
    // The schema from standard input, and the messages from it too (named, or by default).
    for args in [
        &["--format", "json", "validate", "--schema", "-", "-"][..],
        &["--format", "json", "validate", "--schema", "-"],
        &[
            "--format", "json", "project", "--schema", "-", "--to", "1.0",
        ],
    ] {
        let out = run(args, FRAMES.as_bytes());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(fatal_code(&out), "input.stdin-twice", "{args:?}");
    }
}

#[test]
fn gen_names_are_plain_file_stems() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("a/b/gen");
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-codegen/tests/data/tagged_union.schema.json");
    let absolute = dir.path().join("abs/x");
    for (name, why) in [
        ("../../escaped", "must start with a letter"),
        ("a/../../escaped", "'/' is not allowed"),
        (absolute.to_str().unwrap(), "must start with a letter"),
        ("", "a file stem cannot be empty"),
        (".hidden", "must start with a letter"),
        ("a\\b", "'\\\\' is not allowed"),
    ] {
        let out = Command::new(BIN)
            .args(["gen", "--lang", "py,rust", "--name", name, "--out"])
            .arg(&out_dir)
            .arg(&schema)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name:?}: {stderr}");
        assert!(stderr.contains(why), "{name:?}: {stderr}");
    }
    // Nothing was written anywhere.
    let written: Vec<_> = walk(dir.path());
    assert!(written.is_empty(), "{written:?}");
    // A plain stem still works.
    let out = Command::new(BIN)
        .args(["gen", "--lang", "py", "--name", "wire_types-2.x", "--out"])
        .arg(&out_dir)
        .arg(&schema)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(walk(dir.path()), vec![out_dir.join("py/wire_types-2.x.py")]);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_protocol_version_beside_a_schema_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let schema = frames_schema(dir.path());
    let out = run(
        &[
            "validate",
            "--schema",
            schema.to_str().unwrap(),
            "--version",
            "1.2",
            "-",
        ],
        b"{\"type\": \"x\"}",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("'--schema <FILE>' cannot be used with '--version <V>'"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn an_upward_projection_is_a_usage_error() {
    let message = br#"{"jsonrpc":"2.0","id":1,"method":"thread.list","params":{}}"#;
    let out = run(
        &[
            "--format",
            "json",
            "project",
            "--protocol",
            "roll-runtime",
            "--from",
            "1.0",
            "--to",
            "1.2",
        ],
        message,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fatal_code(&out), "usage.upward-projection");
    let staged = "crates/agentwire-schema/tests/data/versions/staged-runtime.json";
    let out = run(
        &[
            "--format", "json", "project", "--schema", staged, "--from", "1.1", "--to", "1.2",
        ],
        message,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(fatal_code(&out), "usage.upward-projection");
}

#[test]
fn a_document_over_the_limit_is_refused_with_its_code() {
    const LIMIT: usize = 256 << 20;
    let mut input = vec![b' '; LIMIT];
    input.extend_from_slice(b"{}");
    for command in ["digest", "fmt"] {
        let out = run(&["--format", "json", command, "-"], &input);
        assert_eq!(out.status.code(), Some(2), "{command}");
        assert_eq!(fatal_code(&out), "input.too-large", "{command}");
    }
}

/// What a human report quotes of its input (a key, a pointer, a file name) reaches the
/// terminal with its control and bidirectional characters escaped: no escape sequence, no
/// forged line.
#[test]
fn human_reports_escape_what_they_quote() {
    let dir = tempfile::tempdir().unwrap();
    let closed = dir.path().join("closed.json");
    std::fs::write(
        &closed,
        br#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "additionalProperties": {"type": "string"}}"#,
    )
    .unwrap();
    let hostile = "{\"\\u001b[31mRED\\u202e\": 1}\n";
    let out = run(
        &["validate", "--schema", closed.to_str().unwrap(), "-"],
        hostile.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(
        !report.contains('\u{1b}') && !report.contains('\u{202e}'),
        "{report:?}"
    );
    assert!(report.contains("\\u{1b}[31mRED\\u{202e}"), "{report}");

    let old = dir.path().join("old.json");
    let new = dir.path().join("new.json");
    std::fs::write(
        &old,
        "{\"properties\": {\"\\u001bx\": {\"type\": \"string\"}}}",
    )
    .unwrap();
    std::fs::write(
        &new,
        "{\"properties\": {\"\\u001bx\": {\"type\": \"integer\"}}}",
    )
    .unwrap();
    let out = run(
        &["compat", old.to_str().unwrap(), new.to_str().unwrap()],
        b"",
    );
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("/properties/\\u{1b}x/type"), "{report}");
    assert!(!report.contains('\u{1b}'), "{report:?}");

    let out = run(&["digest", "nope\nerror: forged"], b"");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nope\\nerror: forged"), "{stderr}");
}

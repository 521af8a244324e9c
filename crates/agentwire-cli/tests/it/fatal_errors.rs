//! Errors that stop a command: exit code 2 and, with `--format json`, the stable code of the
//! library error that caused them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

fn agentwire(args: &[&str]) -> (i32, serde_json::Value) {
    let out = support::agentwire()
        .args(args)
        .current_dir(agentwire_testkit::repo_root())
        .output();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (out.status.code().unwrap(), value)
}

fn code(value: &serde_json::Value) -> &str {
    value["error"]["code"].as_str().unwrap()
}

#[test]
fn each_library_error_keeps_its_code() {
    let roll = "protocols/roll-runtime/roll-runtime.schema.json";
    let (status, v) = agentwire(&[
        "--format",
        "json",
        "schema",
        "export",
        "--version",
        "9.9",
        roll,
    ]);
    assert_eq!((status, code(&v)), (2, "version.unknown"));

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, b"{\"a\": 1,").unwrap();
    let (status, v) = agentwire(&["--format", "json", "digest", broken.to_str().unwrap()]);
    assert_eq!((status, code(&v)), (2, "schema.json"));

    let cyclic = dir.path().join("cyclic.json");
    std::fs::write(&cyclic, br##"{"$defs": {"A": {"$ref": "#/$defs/A"}}}"##).unwrap();
    let (status, v) = agentwire(&["--format", "json", "digest", cyclic.to_str().unwrap()]);
    assert_eq!((status, code(&v)), (2, "schema.ref-cycle"));

    let out = dir.path().join("out");
    let tasklens = "protocols/tasklens/run-events.schema.json";
    let args = [
        "--format",
        "json",
        "gen",
        "--lang",
        "cobol",
        "--out",
        out.to_str().unwrap(),
        tasklens,
    ];
    let (status, v) = agentwire(&args);
    assert_eq!((status, code(&v)), (2, "codegen.unknown-language"));

    let missing = dir.path().join("missing.json");
    let (status, v) = agentwire(&["--format", "json", "digest", missing.to_str().unwrap()]);
    assert_eq!((status, code(&v)), (2, "io"));
}

/// A command that speaks a protocol on standard output (`serve`, `proxy --stdio`) writes its
/// fatal error, JSON too, to standard error: standard output carries the protocol only.
#[test]
fn a_server_writes_its_fatal_error_to_standard_error_only() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("file");
    std::fs::write(&blocked, b"").unwrap();
    let store = format!("sqlite:{}/x.db", blocked.display());
    for args in [
        vec!["--format", "json", "serve", "--stdio", "--store", &store],
        vec![
            "--format",
            "json",
            "proxy",
            "--stdio",
            "agentwire-no-such-command-xyz",
        ],
    ] {
        let out = support::agentwire()
            .args(&args)
            .current_dir(agentwire_testkit::repo_root())
            .output();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let stderr = String::from_utf8(out.stderr).unwrap();
        let last = stderr.lines().last().unwrap_or_default();
        let value: serde_json::Value =
            serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        assert!(value["error"]["code"].is_string(), "{value}");
    }
}

/// A fatal error says each cause once: an error whose text quotes its source is not followed
/// by that source again.
#[test]
fn a_fatal_error_says_each_cause_once() {
    let out = support::agentwire()
        .args(["digest", "/agentwire-no-such-file"])
        .output();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        "error: cannot read /agentwire-no-such-file: No such file or directory (os error 2)"
    );
}

/// A store URL's password is never shown: the error of a store that cannot be opened names the
/// URL with `***` in its place.
#[test]
fn a_store_password_is_not_shown() {
    for args in [
        &[
            "serve",
            "--stdio",
            "--store",
            "postgres://u:S3cretPW@127.0.0.1:1/db",
        ][..],
        &[
            "events",
            "inspect",
            "--store",
            "postgres://u:S3cretPW@127.0.0.1:1/db",
        ],
        &[
            "events",
            "inspect",
            "--store",
            "postgres://u:S3cretPW@h:notaport/db",
        ],
    ] {
        let out = support::agentwire().args(args).output();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!said.contains("S3cretPW"), "{args:?}: {said}");
        assert!(said.contains("u:***@"), "{args:?}: {said}");
    }
}

/// Usage errors the parser cannot see carry their documented `usage.*` code.
#[test]
fn usage_errors_have_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let absent = format!("sqlite:{}", dir.path().join("absent.db").display());
    for (args, expected) in [
        (
            &[
                "--format",
                "json",
                "validate",
                "--protocol",
                "roll-runtime",
                "--version",
                "9",
            ][..],
            "usage.unknown-version",
        ),
        (
            &[
                "--format",
                "json",
                "project",
                "--protocol",
                "nope",
                "--to",
                "1.0",
            ],
            "usage.unknown-protocol",
        ),
        (
            &["--format", "json", "events", "inspect", "--store", &absent],
            "usage.no-event-log",
        ),
        (
            &["--format", "json", "runlog", "mock", "--scenario", "nope"],
            "usage.unknown-scenario",
        ),
    ] {
        let (status, value) = agentwire(args);
        assert_eq!((status, code(&value)), (2, expected), "{args:?}");
    }
}

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

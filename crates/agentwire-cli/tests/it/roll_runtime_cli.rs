//! The built-in protocol `roll-runtime` through the command line: every upstream fixture gets its
//! verdict from `agentwire validate --protocol roll-runtime --version V`, and the built-in
//! protocol is refused with a clear message when the name or version is unknown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use crate::support::BIN;
use agentwire_testkit::{peer_fixture, read_json};
use serde_json::Value;

fn agentwire() -> Command {
    Command::new(BIN)
}

/// Every upstream fixture with the version it is read at (the test kit's walk) and its verdict.
fn fixtures() -> Vec<(PathBuf, String, bool)> {
    agentwire_testkit::roll_upstream_fixtures()
        .into_iter()
        .map(|f| {
            let version = f.version().to_owned();
            (f.path, version, f.valid)
        })
        .collect()
}

#[test]
fn every_upstream_fixture_gets_its_verdict() {
    let all = fixtures();
    assert_eq!(all.len(), 52);
    for version in ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"] {
        let mine: Vec<&(PathBuf, String, bool)> = all.iter().filter(|f| f.1 == version).collect();
        if mine.is_empty() {
            continue;
        }
        let output = agentwire()
            .args([
                "--format",
                "json",
                "validate",
                "--protocol",
                "roll-runtime",
                "--version",
                version,
            ])
            .args(mine.iter().map(|f| &f.0))
            .output()
            .unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), mine.len() + 1, "{text}");
        for ((path, _, valid), line) in mine.iter().zip(&lines) {
            assert_eq!(
                line["valid"],
                Value::Bool(*valid),
                "{} under {version}: {line}",
                path.display()
            );
        }
        let invalid = mine.iter().filter(|f| !f.2).count();
        assert_eq!(lines.last().unwrap()["summary"]["invalid"], invalid as u64);
        assert_eq!(
            output.status.code(),
            Some(if invalid > 0 { 1 } else { 0 }),
            "{version}"
        );
    }
}

#[test]
fn the_version_defaults_to_the_newest() {
    let path = peer_fixture("roll-agent/fixtures/v1.5/valid-operation-result-get-request.json");
    let status = agentwire()
        .args(["validate", "--protocol", "roll-runtime"])
        .arg(&path)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let status = agentwire()
        .args(["validate", "--protocol", "roll-runtime", "--version", "1.4"])
        .arg(&path)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn unknown_protocols_and_versions_are_usage_errors() {
    let path = peer_fixture("roll-agent/fixtures/v1.2/valid-approval-request.json");
    let output = agentwire()
        .args(["validate", "--protocol", "roll-runtime", "--version", "1.6"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: protocol roll-runtime: unsupported protocol version \"1.6\" (supported: 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)\n"
    );
    let output = agentwire()
        .args(["validate", "--protocol", "nope"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: unknown protocol \"nope\"; built-in protocols: roll-runtime\n"
    );
    let output = agentwire()
        .args([
            "validate",
            "--protocol",
            "roll-runtime",
            "--schema",
            "x.json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn schema_export_of_the_built_in_protocol_is_the_checked_in_export() {
    for version in ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"] {
        let output = agentwire()
            .args([
                "schema",
                "export",
                "--protocol",
                "roll-runtime",
                "--version",
                version,
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{version}");
        let expected = std::fs::read(agentwire_testkit::repo_root().join(format!(
            "protocols/roll-runtime/exports/roll-runtime-{version}.schema.json"
        )))
        .unwrap();
        assert_eq!(output.stdout, expected, "{version}");
    }
    let output = agentwire()
        .args([
            "schema",
            "export",
            "--protocol",
            "roll-runtime",
            "--version",
            "0.9",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// Projections that succeed and that are refused over all (fixture, older version) pairs.
const PROJECTED: usize = 34;
const REFUSED: usize = 56;

/// Every valid upstream fixture projected from its version to every older one is valid there,
/// or refused with the documented reason (a server request or `approval.resolved` has no 1.0
/// form; a 1.2+ cancel cannot name the 1.1 JSON-RPC id; `userInput.request` has no 1.1 form).
#[test]
fn project_takes_every_valid_fixture_to_every_older_version() {
    use agentwire_roll::ProtocolVersion;
    use std::io::Write;
    use std::process::Stdio;
    let all = fixtures();
    let (mut projected, mut refused) = (0, 0);
    for from in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        let lines: Vec<String> = all
            .iter()
            .filter(|f| f.1 == from && f.2)
            .map(|f| serde_json::to_string(&read_json(&f.0)).unwrap())
            .collect();
        if lines.is_empty() {
            continue;
        }
        let from_version = ProtocolVersion::parse(from).unwrap();
        for to in from_version.older() {
            let mut child = agentwire()
                .args([
                    "--format",
                    "json",
                    "project",
                    "--protocol",
                    "roll-runtime",
                    "--from",
                    from,
                    "--to",
                    to.as_str(),
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all((lines.join("\n") + "\n").as_bytes())
                .unwrap();
            let output = child.wait_with_output().unwrap();
            let out = String::from_utf8(output.stdout).unwrap();
            let results: Vec<Value> = out
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(results.len(), lines.len(), "{from} -> {to}");
            for (input, result) in lines.iter().zip(&results) {
                if let Some(error) = result.get("error") {
                    // Refused only because the target lacks the message's kind, never because a
                    // rule produced something invalid.
                    let code = error["code"].as_str().unwrap();
                    assert!(
                        [
                            "roll.project.unsupported",
                            "roll.project.missing-server-request-id"
                        ]
                        .contains(&code),
                        "{from} -> {to}: {input} {error}"
                    );
                    refused += 1;
                } else {
                    assert!(
                        agentwire_roll::schema::is_valid(to, result),
                        "{from} -> {to}: {result}"
                    );
                    projected += 1;
                }
            }
        }
    }
    assert_eq!((projected, refused), (PROJECTED, REFUSED));
}

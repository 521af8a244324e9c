//! The 52 upstream fixtures get the verdict their names say, under the version of their folder
//! (or of their own `params.protocolVersion`), from our validator and from Ajv on our exports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use agentwire_roll::ProtocolVersion;
use agentwire_roll::schema;
use agentwire_testkit::{
    ajv_verdicts, files_with_extension, peer_fixture, py_jsonschema_verdicts, read_json, repo_root,
    roll_upstream_fixtures,
};
use serde_json::Value;

struct Case {
    path: PathBuf,
    message: Value,
    version: ProtocolVersion,
    valid: bool,
}

/// The folder's default version, overridden by a supported `params.protocolVersion`.
fn cases() -> Vec<Case> {
    roll_upstream_fixtures()
        .into_iter()
        .map(|fixture| Case {
            version: ProtocolVersion::parse(fixture.version()).expect("a Roll version"),
            path: fixture.path,
            message: fixture.message,
            valid: fixture.valid,
        })
        .collect()
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap()
}

#[test]
fn there_are_52_fixtures() {
    assert_eq!(cases().len(), 52);
}

#[test]
fn our_validator_gives_every_fixture_its_verdict() {
    let mut wrong = Vec::new();
    for case in cases() {
        let result = schema::validate_message(case.version, &case.message);
        if result.is_ok() != case.valid {
            wrong.push(format!(
                "{} under {}: {:?}",
                case.path.display(),
                case.version,
                result.err()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The frozen `v1` folder also speaks for 1.0: what 1.0 has must keep its verdict, and what only
/// 1.1 has (server requests, their results, `approval.resolved`) must be rejected.
#[test]
fn v1_fixtures_under_1_0() {
    let expected = [
        ("invalid-approval-request-response.json", false),
        ("invalid-operation-raw-response.json", false),
        ("invalid-runtime-event-notification.json", false),
        ("invalid-turn-start-request.json", false),
        (
            "invalid-v1-approval-resolved-event-notification.json",
            false,
        ),
        ("valid-approval-request-response.json", false),
        ("valid-approval-request.json", false),
        ("valid-approval-resolved-event-notification.json", false),
        ("valid-initialize-request.json", true),
        ("valid-runtime-event-notification.json", true),
        ("valid-thread-snapshot-response.json", true),
    ];
    let dir = peer_fixture("roll-agent/fixtures/v1");
    let files = files_with_extension(&dir, "json");
    assert_eq!(files.len(), expected.len());
    for (path, (name, valid)) in files.iter().zip(expected) {
        assert_eq!(file_name(path), name);
        let message = read_json(path);
        assert_eq!(
            schema::is_valid(ProtocolVersion::V1_0, &message),
            valid,
            "{name} under 1.0"
        );
    }
}

#[test]
fn ajv_and_python_jsonschema_give_every_fixture_its_verdict_on_our_exports() {
    let cases = cases();
    let mut wrong = Vec::new();
    for version in agentwire_roll::SUPPORTED_VERSIONS {
        let mine: Vec<&Case> = cases.iter().filter(|c| c.version == version).collect();
        if mine.is_empty() {
            continue;
        }
        let export = repo_root().join(format!(
            "protocols/roll-runtime/exports/roll-runtime-{version}.schema.json"
        ));
        let messages: Vec<Value> = mine.iter().map(|c| c.message.clone()).collect();
        let verdicts = ajv_verdicts(&export, None, &messages);
        let python = py_jsonschema_verdicts(&export, None, &messages);
        for ((case, verdict), py) in mine.iter().zip(verdicts).zip(python) {
            if verdict.valid != case.valid {
                wrong.push(format!(
                    "ajv: {} under {version}: {:?}",
                    case.path.display(),
                    verdict.errors
                ));
            }
            if py.valid != case.valid {
                wrong.push(format!(
                    "python: {} under {version}: {:?}",
                    case.path.display(),
                    py.errors
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Which method a response fixture answers, from its name.
fn response_method(name: &str) -> Option<(&'static str, bool)> {
    let table: [(&str, &str, bool); 12] = [
        ("approval-request-response", "approval.request", true),
        ("user-input-request-response", "userInput.request", true),
        ("operation-raw-response", "operation.get", false),
        (
            "thread-snapshot-interaction-payload",
            "thread.snapshot",
            false,
        ),
        (
            "client-capabilities-set-response",
            "client.capabilities.set",
            false,
        ),
        (
            "thread-recovery-snapshot-response",
            "thread.snapshot",
            false,
        ),
        (
            "thread-recovery-snapshot-timestamp-response",
            "thread.snapshot",
            false,
        ),
        (
            "thread-snapshot-attachment-part-response",
            "thread.snapshot",
            false,
        ),
        ("thread-snapshot-response", "thread.snapshot", false),
        (
            "runtime-events-resume-response",
            "runtime.events.resume",
            false,
        ),
        ("attachment-stage-response", "attachment.stage", false),
        ("attachment-commit-response", "attachment.commit", false),
    ];
    let stem = name
        .trim_start_matches("valid-")
        .trim_start_matches("invalid-")
        .trim_end_matches(".json");
    if stem == "initialize-response" {
        return Some(("initialize", false));
    }
    table
        .iter()
        .find(|(s, _, _)| *s == stem)
        .map(|(_, m, server)| (*m, *server))
}

#[test]
fn typed_api_gives_every_fixture_its_verdict() {
    use agentwire_roll::parse::{
        Message, parse_message, parse_method_result, parse_server_request_result,
    };
    let mut wrong = Vec::new();
    for case in cases() {
        let name = file_name(&case.path).to_owned();
        let mut outcome = parse_message(case.version, &case.message).map(|_| ());
        if let (Ok(()), Some(result)) = (&outcome, case.message.get("result")) {
            let (method, server) =
                response_method(&name).unwrap_or_else(|| panic!("no method for {name}"));
            outcome = if server {
                parse_server_request_result(case.version, method, result).map(|_| ())
            } else {
                parse_method_result(case.version, method, result).map(|_| ())
            };
        }
        // Invalid response fixtures must also fail the typed parse of their own method.
        if let (false, Some(result), Some((method, server))) = (
            case.valid,
            case.message.get("result"),
            response_method(&name),
        ) {
            let typed = if server {
                parse_server_request_result(case.version, method, result).is_ok()
            } else {
                parse_method_result(case.version, method, result).is_ok()
            };
            if typed {
                wrong.push(format!("{name}: typed result parse accepted it"));
            }
        }
        if outcome.is_ok() != case.valid {
            wrong.push(format!("{name} under {}: {outcome:?}", case.version));
        }
        // Typed values serialize back to the same params.
        let round_trip = match parse_message(case.version, &case.message) {
            Ok(Message::Event(envelope)) if case.valid => {
                Some(serde_json::to_value(&*envelope).unwrap())
            }
            Ok(Message::Cancel(cancel)) if case.valid => {
                Some(serde_json::to_value(&cancel).unwrap())
            }
            _ => None,
        };
        if let Some(params) = round_trip {
            assert_eq!(params, case.message["params"], "{name} round trip");
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The schema crate's validator (the one `agentwire validate` uses) agrees on every fixture.
#[test]
fn schema_crate_validator_gives_every_fixture_its_verdict() {
    let mut validators = std::collections::HashMap::new();
    let mut wrong = Vec::new();
    for case in cases() {
        let validator = validators.entry(case.version).or_insert_with(|| {
            let document = agentwire_schema::SchemaDocument::from_slice(
                schema::export_text(case.version).as_bytes(),
            )
            .unwrap();
            document.validator().unwrap()
        });
        let issues = validator.validate(&case.message);
        if issues.is_empty() != case.valid {
            wrong.push(format!(
                "{} under {}: {issues:?}",
                case.path.display(),
                case.version
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

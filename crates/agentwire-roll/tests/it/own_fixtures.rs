//! Our fixtures (`protocols/roll-runtime/fixtures/v<version>/`) cover each limit at and past its
//! boundary, each projection and each negotiation error: `valid-*` must validate under the
//! folder's version and everything else must fail, for our validator and for Ajv.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::{ProtocolVersion, SUPPORTED_VERSIONS, schema};
use agentwire_testkit::{ajv_verdicts, py_jsonschema_verdicts, repo_root, roll_own_fixtures};
use serde_json::Value;

/// `(file name, message, valid)` of each fixture of `version`'s folder.
fn fixtures(version: ProtocolVersion) -> Vec<(String, Value, bool)> {
    roll_own_fixtures()
        .into_iter()
        .filter(|f| f.folder_version == version.as_str())
        .map(|f| (f.file_name, f.message, f.valid))
        .collect()
}

#[test]
fn every_version_has_fixtures_of_both_kinds() {
    for version in SUPPORTED_VERSIONS {
        let all = fixtures(version);
        assert!(all.iter().any(|f| f.2), "{version} has no valid fixture");
        assert!(all.iter().any(|f| !f.2), "{version} has no invalid fixture");
    }
}

#[test]
fn our_validators_ajv_and_python_jsonschema_give_every_fixture_its_verdict() {
    let mut wrong = Vec::new();
    for version in SUPPORTED_VERSIONS {
        let all = fixtures(version);
        let export = repo_root().join(format!(
            "protocols/roll-runtime/exports/roll-runtime-{version}.schema.json"
        ));
        let messages: Vec<Value> = all.iter().map(|f| f.1.clone()).collect();
        let ajv = ajv_verdicts(&export, None, &messages);
        let python = py_jsonschema_verdicts(&export, None, &messages);
        let document =
            agentwire_schema::SchemaDocument::from_slice(schema::export_text(version).as_bytes())
                .unwrap();
        let validator = document.validator().unwrap();
        for (((name, message, valid), verdict), py) in all.iter().zip(ajv).zip(python) {
            if py.valid != *valid {
                wrong.push(format!(
                    "python jsonschema: v{version}/{name}: {:?}",
                    py.errors
                ));
            }
            if schema::is_valid(version, message) != *valid {
                wrong.push(format!("ours: v{version}/{name}"));
            }
            if validator.is_valid(message) != *valid {
                wrong.push(format!(
                    "agentwire-schema: v{version}/{name}: {:?}",
                    validator.validate(message)
                ));
            }
            if verdict.valid != *valid {
                wrong.push(format!("ajv: v{version}/{name}: {:?}", verdict.errors));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

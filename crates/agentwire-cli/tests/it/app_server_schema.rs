//! Our schema of the ChainlessChain App Server (`protocols/chainlesschain-app-server/`): it is in
//! canonical text and lints clean, its fixtures have the verdicts their names say, its valid
//! messages round-trip through the generated Rust types, and it is held to the SDK's own schema —
//! `agentwire compat --definitions` finds no difference on the definitions both share, its
//! envelopes carry only methods the SDK knows, and the SDK's validator accepts every valid fixture.

use std::collections::BTreeSet;
use std::path::PathBuf;

use agentwire_schema::SchemaDocument;
use agentwire_testkit::{chainlesschain_schema_path, repo_root};
use serde_json::Value;

/// The generated types, as the App Server face includes them.
#[path = "../../../../protocols/chainlesschain-app-server/generated/rust/app_server.rs"]
#[rustfmt::skip]
#[allow(unreachable_pub)] // the face re-exports them; here they are only used
mod generated;

const SCHEMA: &str = "protocols/chainlesschain-app-server/app-server.schema.json";

/// The definitions our schema shares with the SDK's, by name, and compares with it. The
/// envelopes (`ClientRequest`, `ClientResponse`, `ServerRequest`, `ServerNotification`) share
/// names but not shape — ours has one definition per method, the SDK's one per kind — so
/// `the_envelopes_carry_only_methods_the_sdk_knows` and the SDK validator hold them instead.
const SHARED: &[&str] = &[
    "Identifier",
    "Digest",
    "Timestamp",
    "JsonValue",
    "DataPolicy",
    "Thread",
    "Turn",
    "Item",
    "TerminalEvidence",
    "PermissionGrant",
    "ApprovalBinding",
    "ApprovalRequest",
    "ApprovalDecision",
    "HumanTaskDecision",
    "HumanTask",
    "InitializeParams",
];
const ENVELOPES: &[&str] = &[
    "ClientRequest",
    "ClientResponse",
    "ServerRequest",
    "ServerNotification",
];

/// Invalid fixtures the SDK's validator accepts: its envelopes leave `params` and `result` as any
/// JSON, ours type them. Each is something our runtime never sends or refuses to act on.
const STRICTER_THAN_THE_SDK: &[&str] = &[
    "invalid-approval-decision-accept-once-with-permissions.json",
    "invalid-approval-decision-unknown-kind.json",
    "invalid-approval-request-without-binding.json",
    "invalid-thread-with-head-hash.json",
    "invalid-turn-start-empty-input.json",
];

fn schema_path() -> PathBuf {
    repo_root().join(SCHEMA)
}

fn read(path: impl AsRef<std::path::Path>) -> Value {
    agentwire_testkit::read_json(path)
}

/// Every fixture: (file name, message).
fn fixtures() -> Vec<(String, Value)> {
    let dir = repo_root().join("protocols/chainlesschain-app-server/fixtures");
    agentwire_testkit::files_with_extension(dir, "json")
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, read(&path))
        })
        .collect()
}

fn valid_fixtures() -> Vec<(String, Value)> {
    fixtures()
        .into_iter()
        .filter(|(name, _)| name.starts_with("valid-"))
        .collect()
}

#[test]
fn the_app_server_schema_is_canonical_and_lints_clean() {
    let text = std::fs::read_to_string(schema_path()).unwrap();
    let document = SchemaDocument::from_slice(text.as_bytes()).unwrap();
    assert!(
        document.canonical_text(true) == text,
        "the schema is not in canonical text: run `agentwire fmt --newline {SCHEMA}`"
    );
    let lint = agentwire_schema::lint(&document);
    assert!(lint.is_empty(), "{lint:?}");
}

#[test]
fn the_app_server_fixtures_have_the_verdicts_their_names_say() {
    let document = SchemaDocument::open(schema_path()).unwrap();
    let validator = document.validator().unwrap();
    let fixtures = fixtures();
    assert!(fixtures.len() >= 30, "{}", fixtures.len());
    for (name, value) in fixtures {
        let issues = validator.validate(&value);
        if name.starts_with("valid-") {
            assert!(issues.is_empty(), "{name}: {issues:?}");
        } else {
            assert!(name.starts_with("invalid-"), "{name}");
            assert!(!issues.is_empty(), "{name} is valid");
        }
    }
}

#[test]
fn valid_app_server_messages_round_trip_through_the_generated_types() {
    for (name, value) in valid_fixtures() {
        let typed: generated::ChainlesschainAppServerMessage =
            serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serde_json::to_value(&typed).unwrap(), value, "{name}");
    }
}

#[test]
fn the_shared_definitions_have_no_difference_from_the_sdk_schema() {
    let ours = read(schema_path());
    let sdk_path = chainlesschain_schema_path();
    let sdk = read(&sdk_path);
    // Every definition both documents name is either compared or an envelope: a new shared name
    // must be added to one of the lists.
    let names = |doc: &Value| -> BTreeSet<String> {
        doc["$defs"].as_object().unwrap().keys().cloned().collect()
    };
    let both: BTreeSet<String> = names(&ours).intersection(&names(&sdk)).cloned().collect();
    let listed: BTreeSet<String> = SHARED
        .iter()
        .chain(ENVELOPES)
        .map(|n| (*n).to_owned())
        .collect();
    assert_eq!(both, listed);
    let (code, report) =
        crate::support::compat_definitions(SHARED, sdk_path.as_ref(), &schema_path());
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["changes"], serde_json::json!([]), "{report:#}");
}

/// The `method` values of the branches of one of our envelope unions.
fn our_methods(ours: &Value, envelope: &str) -> BTreeSet<String> {
    ours["$defs"][envelope]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|branch| {
            let name = branch["$ref"]
                .as_str()
                .unwrap()
                .trim_start_matches("#/$defs/");
            let method = &ours["$defs"][name]["properties"]["method"]["const"];
            method.as_str().unwrap().to_owned()
        })
        .collect()
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_envelopes_carry_only_methods_the_sdk_knows() {
    let ours = read(schema_path());
    let sdk = read(chainlesschain_schema_path());
    // Every notification the SDK accepts, and no other.
    assert_eq!(
        our_methods(&ours, "ServerNotification"),
        strings(&sdk["$defs"]["ServerNotification"]["properties"]["method"]["enum"])
    );
    let sdk_server_requests =
        strings(&sdk["$defs"]["ServerRequest"]["properties"]["method"]["enum"]);
    assert!(our_methods(&ours, "ServerRequest").is_subset(&sdk_server_requests));
    let mut sdk_client_requests = BTreeSet::new();
    for branch in sdk["$defs"]["ClientRequest"]["allOf"][1]["oneOf"]
        .as_array()
        .unwrap()
    {
        let method = &branch["properties"]["method"];
        match method.get("const") {
            Some(one) => {
                sdk_client_requests.insert(one.as_str().unwrap().to_owned());
            }
            None => sdk_client_requests.extend(strings(&method["enum"])),
        }
    }
    let served = our_methods(&ours, "ClientRequest");
    assert!(served.is_subset(&sdk_client_requests), "{served:?}");
    assert_eq!(served.len(), 9);
    // Our envelopes are closed like the SDK's, and always carry `params` where the SDK needs it.
    for name in ours["$defs"]["ServerNotification"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .chain(ours["$defs"]["ServerRequest"]["oneOf"].as_array().unwrap())
        .map(|b| b["$ref"].as_str().unwrap().trim_start_matches("#/$defs/"))
    {
        let def = &ours["$defs"][name];
        assert_eq!(def["additionalProperties"], Value::Bool(false), "{name}");
        assert!(strings(&def["required"]).contains("params"), "{name}");
    }
}

#[test]
fn the_sdk_validator_accepts_every_valid_app_server_fixture() {
    let fixtures = fixtures();
    let values: Vec<Value> = fixtures.iter().map(|(_, v)| v.clone()).collect();
    let verdicts = agentwire_testkit::cc_sdk_verdicts(&values, None);
    let mut accepted_invalid = Vec::new();
    for ((name, _), verdict) in fixtures.iter().zip(&verdicts) {
        if name.starts_with("valid-") {
            assert!(
                verdict.valid,
                "the SDK rejects {name}: {:?}",
                verdict.errors
            );
        } else if verdict.valid {
            accepted_invalid.push(name.as_str());
        }
    }
    assert_eq!(accepted_invalid, STRICTER_THAN_THE_SDK);
}

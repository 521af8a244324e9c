//! The method table against the exports and the docs: every entry's definitions exist exactly
//! in the versions that have the method, the marker types agree with the registry, and the docs
//! table is the one the code renders.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::methods::MethodKind;
use agentwire_roll::parse::definition_stem;
use agentwire_roll::{Method, RollMethod, SUPPORTED_VERSIONS, request, schema};

fn has_definition(version: agentwire_roll::ProtocolVersion, name: &str) -> bool {
    schema::export(version)
        .get("$defs")
        .and_then(|defs| defs.get(name))
        .is_some()
}

#[test]
fn every_entry_names_definitions_present_exactly_from_its_version() {
    for method in Method::ALL {
        for version in SUPPORTED_VERSIONS {
            for definition in [method.params_definition(), method.result_definition()] {
                assert_eq!(
                    has_definition(version, &definition),
                    method.is_available(version),
                    "{method} ({definition}) in the {version} export"
                );
            }
        }
    }
}

#[test]
fn the_table_and_the_server_requests_are_every_params_result_pair_of_each_export() {
    for version in SUPPORTED_VERSIONS {
        let defs = schema::export(version)["$defs"].as_object().unwrap();
        let mut exported: Vec<String> = defs
            .keys()
            .filter_map(|key| key.strip_suffix("Params"))
            .filter(|stem| defs.contains_key(&format!("{stem}Result")))
            .map(str::to_owned)
            .collect();
        let mut listed: Vec<String> = version
            .methods()
            .map(|m| m.as_str())
            .chain(version.server_request_methods().map(|m| m.as_str()))
            .map(definition_stem)
            .collect();
        exported.sort();
        listed.sort();
        assert_eq!(listed, exported, "{version}");
    }
}

#[test]
fn marker_types_carry_their_registry_entry() {
    fn method_of<M: RollMethod>(_: M) -> Method {
        M::METHOD
    }
    assert_eq!(method_of(request::Initialize), Method::Initialize);
    assert_eq!(method_of(request::ThreadSnapshot), Method::ThreadSnapshot);
    assert_eq!(
        method_of(request::AttachmentRelease),
        Method::AttachmentRelease
    );
    assert_eq!(
        method_of(request::OperationResultGet),
        Method::OperationResultGet
    );
    let params: <request::ThreadRename as RollMethod>::Params =
        serde_json::from_value(serde_json::json!({
            "requestId": "00000000-0000-4000-8000-00000000000a",
            "threadId": "00000000-0000-4000-8000-000000000002",
            "title": "t"
        }))
        .unwrap();
    assert_eq!(params.title, "t");
}

#[test]
fn parsed_params_and_results_know_their_method() {
    let version = agentwire_roll::LATEST_VERSION;
    let params = Method::ThreadList
        .parse_params(version, &serde_json::json!({"limit": 5}))
        .unwrap();
    assert_eq!(params.method(), Method::ThreadList);
    let result = Method::ThreadList
        .parse_result(
            version,
            &serde_json::json!({"items": [], "nextCursor": null}),
        )
        .unwrap();
    assert_eq!(result.method(), Method::ThreadList);
    let err = Method::AttachmentStage
        .parse_params(
            agentwire_roll::ProtocolVersion::V1_3,
            &serde_json::json!({}),
        )
        .unwrap_err();
    assert_eq!(err.code(), "roll.parse.unknown-method");
}

#[test]
fn kinds_match_the_protocol_lists() {
    let mutations: Vec<&str> = Method::ALL
        .into_iter()
        .filter(|m| m.kind() == MethodKind::Mutation)
        .map(Method::as_str)
        .collect();
    assert_eq!(
        mutations,
        [
            "thread.create",
            "thread.rename",
            "thread.delete",
            "thread.detach",
            "turn.start",
            "turn.cancel",
            "approval.respond",
            "attachment.stage",
            "attachment.chunk",
            "attachment.commit",
            "attachment.release"
        ]
    );
    let reads: Vec<&str> = Method::ALL
        .into_iter()
        .filter(|m| m.is_retryable_read())
        .map(Method::as_str)
        .collect();
    assert_eq!(
        reads,
        [
            "thread.list",
            "thread.snapshot",
            "thread.capabilities",
            "operation.get"
        ]
    );
}

fn rendered_table() -> String {
    let mut out = String::from(
        "| method | since | params | result | kind | needs feature |\n|---|---|---|---|---|---|\n",
    );
    for method in Method::ALL {
        out.push_str(&format!(
            "| `{}` | {} | `{}` | `{}` | {} | {} |\n",
            method.as_str(),
            method.since(),
            method.params_type_name(),
            method.result_type_name(),
            method.kind().as_str(),
            method
                .required_feature()
                .map(|f| format!("`{f}`"))
                .unwrap_or_default(),
        ));
    }
    out
}

#[test]
fn the_docs_table_is_rendered_from_the_method_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/roll-runtime.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let start = "<!-- method-table:start -->\n";
    let end = "<!-- method-table:end -->";
    let from = docs.find(start).expect("start marker") + start.len();
    let to = docs.find(end).expect("end marker");
    let expected = rendered_table();
    assert!(
        docs[from..to] == expected,
        "docs/roll-runtime.md's method table is stale; replace the lines between the markers with:\n{expected}"
    );
}

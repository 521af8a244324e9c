//! Our schema of the OpenClaw Gateway (`protocols/openclaw-gateway/`): it is in canonical text
//! and lints clean, its fixtures have the verdicts their names say (each invalid one for the
//! reason it was written for), its valid frames round-trip through the generated Rust types, and
//! it is held to OpenClaw's published `protocol.schema.json` — `agentwire compat --definitions`
//! finds no difference on the definitions both name alike, our methods carry OpenClaw's scopes,
//! and OpenClaw's schema, loaded by our validator, accepts every valid fixture.

use std::collections::BTreeSet;
use std::path::PathBuf;

use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use agentwire_testkit::{openclaw_schema_path, repo_root};
use serde_json::{Value, json};

/// The generated types, as the gateway face will include them.
#[path = "../../../../protocols/openclaw-gateway/generated/rust/gateway.rs"]
#[rustfmt::skip]
#[allow(unreachable_pub)] // the face will re-export them; here they are only used
mod generated;

const SCHEMA: &str = "protocols/openclaw-gateway/gateway.schema.json";
const FIXTURES: &str = "protocols/openclaw-gateway/fixtures";

/// The definitions our schema shares with OpenClaw's, by name. Each is compared with
/// `agentwire compat --definitions`; a name both documents use must be listed here.
const SHARED: &[&str] = &[
    "GatewayFrame",
    "RequestFrame",
    "ResponseFrame",
    "EventFrame",
    "StateVersion",
    "ErrorShape",
    "ConnectParams",
    "PresenceEntry",
    "SessionsListParams",
    "SessionsCreateParams",
    "SessionsCreateResult",
    "ChatHistoryParams",
    "ChatSendParams",
    "ChatEvent",
    "AgentParams",
    "AgentEvent",
    "ExecApprovalResolveParams",
    "TickEvent",
    "ShutdownEvent",
];

/// Our definitions that describe the part agentwire sends of something OpenClaw's schema
/// describes under another name or inline, and where in OpenClaw's schema that is: every
/// instance of ours must be valid there. (`hello-ok` is ours `ConnectResult`, theirs `HelloOk`:
/// theirs has members agentwire never sends, and a shared name would make compat require them.)
const CORRESPONDING: &[(&str, &str)] = &[
    ("ConnectResult", "/definitions/HelloOk"),
    ("GatewaySnapshot", "/definitions/Snapshot"),
    ("HealthResult", "/definitions/Snapshot/properties/health"),
    ("SessionSummary", "/definitions/SessionRow"),
];

/// Each invalid fixture and the one problem our validator reports for it: the keyword and the
/// place in the frame. Frame problems come from the frame union; the others from the method's
/// params or result, or the event's payload.
const INVALID: &[(&str, &str, &str)] = &[
    (
        "invalid-event-agent--without-run-id.json",
        "required",
        "/payload",
    ),
    (
        "invalid-event-chat--delta-without-text.json",
        "required",
        "/payload",
    ),
    (
        "invalid-event-chat--unknown-state.json",
        "anyOf",
        "/payload/state",
    ),
    (
        "invalid-event-exec.approval.resolved--decision-approve.json",
        "enum",
        "/payload/decision",
    ),
    ("invalid-event-tick--negative-seq.json", "minimum", "/seq"),
    (
        "invalid-event-tick--negative-ts.json",
        "minimum",
        "/payload/ts",
    ),
    ("invalid-frame--event-without-name.json", "required", ""),
    ("invalid-frame--numeric-id.json", "type", "/id"),
    (
        "invalid-frame--req-extra-member.json",
        "additionalProperties",
        "/jsonrpc",
    ),
    (
        "invalid-frame--res-error-without-message.json",
        "required",
        "/error",
    ),
    ("invalid-frame--unknown-type.json", "discriminator", "/type"),
    (
        "invalid-req-agent--unknown-member.json",
        "additionalProperties",
        "/params/priority",
    ),
    (
        "invalid-req-chat.history--limit-over-1000.json",
        "maximum",
        "/params/limit",
    ),
    (
        "invalid-req-chat.send--without-idempotency-key.json",
        "required",
        "/params",
    ),
    (
        "invalid-req-connect--client-id-ios-node.json",
        "enum",
        "/params/client/id",
    ),
    (
        "invalid-req-connect--device-without-nonce.json",
        "required",
        "/params/device",
    ),
    (
        "invalid-req-connect--mode-operator.json",
        "enum",
        "/params/client/mode",
    ),
    (
        "invalid-req-connect--protocol-zero.json",
        "minimum",
        "/params/minProtocol",
    ),
    (
        "invalid-req-exec.approval.resolve--empty-decision.json",
        "minLength",
        "/params/decision",
    ),
    (
        "invalid-req-sessions.list--limit-zero.json",
        "minimum",
        "/params/limit",
    ),
    (
        "invalid-res-connect--hello-ok-auth-method.json",
        "additionalProperties",
        "/payload/auth/method",
    ),
    (
        "invalid-res-connect--hello-ok-link-readers.json",
        "additionalProperties",
        "/payload/controlUiLinkReaders",
    ),
    (
        "invalid-res-connect--hello-ok-without-policy.json",
        "required",
        "/payload",
    ),
    ("invalid-res-health--not-ok.json", "const", "/payload/ok"),
];

/// Invalid fixtures OpenClaw's schema accepts: the frame is fine, and ours is stricter on a
/// payload OpenClaw's schema does not describe by name (the exec approval events).
const STRICTER_THAN_OPENCLAW: &[&str] =
    &["invalid-event-exec.approval.resolved--decision-approve.json"];

pub(crate) fn schema_path() -> PathBuf {
    repo_root().join(SCHEMA)
}

pub(crate) fn read(path: impl AsRef<std::path::Path>) -> Value {
    agentwire_testkit::read_json(path)
}

/// A fixture: its file name, the frame, and what its name says it is.
pub(crate) struct Fixture {
    pub(crate) name: String,
    pub(crate) frame: Value,
    /// `req`, `res`, `event` or `frame` (a frame checked as a frame only).
    pub(crate) kind: String,
    /// The method (for `req` and `res`) or the event named after the kind.
    pub(crate) subject: String,
}

fn fixtures() -> Vec<Fixture> {
    agentwire_testkit::files_with_extension(repo_root().join(FIXTURES), "json")
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let stem = name.trim_end_matches(".json");
            let rest = stem
                .strip_prefix("valid-")
                .or_else(|| stem.strip_prefix("invalid-"))
                .unwrap_or_else(|| panic!("{name}: neither valid- nor invalid-"));
            let (kind, rest) = rest.split_once('-').unwrap_or((rest, ""));
            let subject = rest.split("--").next().unwrap_or("").to_owned();
            Fixture {
                frame: read(&path),
                kind: kind.to_owned(),
                subject,
                name,
            }
        })
        .collect()
}

/// Where a fixture's typed part is in the frame, and the definition of ours that describes it.
fn typed_part(ours: &Value, f: &Fixture) -> Option<(&'static str, String, Value)> {
    let name_of = |value: &Value| value.as_str().unwrap().to_owned();
    match f.kind.as_str() {
        "req" => {
            let params = f.frame.get("params").cloned().unwrap_or_else(|| json!({}));
            let def = name_of(&ours["methods"][&f.subject]["params"]);
            Some(("/params", def, params))
        }
        "res" if f.frame["ok"] == true => {
            let def = name_of(&ours["methods"][&f.subject]["result"]);
            Some(("/payload", def, f.frame["payload"].clone()))
        }
        "event" => {
            let def = name_of(&ours["x-agentwire-events"][&f.subject]);
            Some(("/payload", def, f.frame["payload"].clone()))
        }
        "res" | "frame" => None,
        other => panic!("{}: unknown kind {other}", f.name),
    }
}

/// Every problem our schema finds in a fixture: the frame's, then its typed part's, each as
/// (keyword, place in the frame).
pub(crate) fn problems(
    compiler: &ValidatorCompiler,
    ours: &Value,
    f: &Fixture,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = compiler
        .root()
        .unwrap()
        .validate(&f.frame)
        .into_iter()
        .map(|i| (i.keyword.to_owned(), i.instance_pointer))
        .collect();
    if let Some((at, def, value)) = typed_part(ours, f) {
        assert!(
            ours["$defs"].get(&def).is_some(),
            "{}: no definition {def}",
            f.name
        );
        let issues = compiler.definition(&def).unwrap().validate(&value);
        out.extend(
            issues
                .into_iter()
                .map(|i| (i.keyword.to_owned(), format!("{at}{}", i.instance_pointer))),
        );
    }
    out
}

#[test]
fn the_gateway_schema_is_canonical_and_lints_clean() {
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
fn the_gateway_fixtures_have_the_verdicts_their_names_say() {
    let document = SchemaDocument::open(schema_path()).unwrap();
    let ours = document.value().clone();
    let compiler = ValidatorCompiler::new(&document).unwrap();
    let fixtures = fixtures();
    assert!(fixtures.len() >= 60, "{}", fixtures.len());
    let mut invalid = Vec::new();
    for f in &fixtures {
        let found = problems(&compiler, &ours, f);
        if f.name.starts_with("valid-") {
            assert!(found.is_empty(), "{}: {found:?}", f.name);
        } else {
            assert_eq!(found.len(), 1, "{}: {found:?}", f.name);
            let (keyword, at) = &found[0];
            invalid.push((f.name.clone(), keyword.clone(), at.clone()));
        }
    }
    let expected: Vec<(String, String, String)> = INVALID
        .iter()
        .map(|(n, k, p)| ((*n).to_owned(), (*k).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(invalid, expected);
}

#[test]
fn every_method_and_event_names_definitions_that_exist() {
    let ours = read(schema_path());
    let defs = ours["$defs"].as_object().unwrap();
    for (method, entry) in ours["methods"].as_object().unwrap() {
        for key in ["params", "result"] {
            let def = entry[key].as_str().unwrap();
            assert!(defs.contains_key(def), "{method}: {key} {def}");
        }
    }
    for (event, def) in ours["x-agentwire-events"].as_object().unwrap() {
        assert!(defs.contains_key(def.as_str().unwrap()), "{event}");
    }
    // Every method and event has a valid fixture.
    let covered: BTreeSet<(String, String)> = fixtures()
        .into_iter()
        .filter(|f| f.name.starts_with("valid-"))
        .map(|f| (f.kind, f.subject))
        .collect();
    for method in ours["methods"].as_object().unwrap().keys() {
        assert!(
            covered.contains(&("req".into(), method.clone())),
            "{method}"
        );
        assert!(
            covered.contains(&("res".into(), method.clone())),
            "{method}"
        );
    }
    for event in ours["x-agentwire-events"].as_object().unwrap().keys() {
        assert!(
            covered.contains(&("event".into(), event.clone())),
            "{event}"
        );
    }
}

#[test]
fn valid_gateway_frames_round_trip_through_the_generated_types() {
    for f in fixtures()
        .into_iter()
        .filter(|f| f.name.starts_with("valid-"))
    {
        let typed: generated::GatewayFrame =
            serde_json::from_value(f.frame.clone()).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(serde_json::to_value(&typed).unwrap(), f.frame, "{}", f.name);
    }
    // A frame type this version does not know is kept, not refused.
    let future = json!({"type": "stream", "id": "s1"});
    let typed: generated::GatewayFrame = serde_json::from_value(future.clone()).unwrap();
    assert!(matches!(typed, generated::GatewayFrame::Unknown(_)));
    assert_eq!(serde_json::to_value(&typed).unwrap(), future);
}

#[test]
fn the_typed_parts_decode_into_the_generated_types() {
    use generated::*;
    let frame = |name: &str| read(repo_root().join(FIXTURES).join(name));
    let hello: ConnectResult =
        serde_json::from_value(frame("valid-res-connect--hello-ok.json")["payload"].clone())
            .unwrap();
    assert_eq!(hello.policy.tick_interval_ms, 30000);
    let connect: ConnectParams =
        serde_json::from_value(frame("valid-req-connect--cli.json")["params"].clone()).unwrap();
    assert_eq!(connect.auth.unwrap().token.as_deref(), Some("T0ken-abc"));
    let chat: ChatEvent =
        serde_json::from_value(frame("valid-event-chat--delta.json")["payload"].clone()).unwrap();
    assert!(matches!(chat, ChatEvent::Delta(_)), "{chat:?}");
    let info = MethodInfo::find("exec.approval.resolve", MethodDirection::ClientRequest).unwrap();
    assert_eq!(
        (info.params, info.result, info.scope),
        (
            Some("ExecApprovalResolveParams"),
            Some("ExecApprovalResolveResult"),
            Some("operator.approvals")
        )
    );
}

#[test]
fn the_shared_definitions_have_no_difference_from_the_openclaw_schema() {
    let ours = read(schema_path());
    let theirs_path = openclaw_schema_path();
    let theirs = read(&theirs_path);
    let names = |doc: &Value, keyword: &str| -> BTreeSet<String> {
        doc[keyword].as_object().unwrap().keys().cloned().collect()
    };
    let both: BTreeSet<String> = names(&ours, "$defs")
        .intersection(&names(&theirs, "definitions"))
        .cloned()
        .collect();
    let listed: BTreeSet<String> = SHARED.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(both, listed);
    let (code, report) =
        crate::support::compat_definitions(SHARED, theirs_path.as_ref(), &schema_path());
    assert_eq!(
        report,
        json!({"compatible": true, "breaking": 0, "additive": 0, "changes": []})
    );
    assert_eq!(code, Some(0));
}

#[test]
fn our_methods_need_the_scopes_openclaw_gives_them() {
    let ours = read(schema_path());
    let theirs = read(openclaw_schema_path());
    for (method, entry) in ours["methods"].as_object().unwrap() {
        let their_scope = &theirs["methods"][method]["scope"];
        assert!(
            their_scope.is_string(),
            "{method} is not an OpenClaw method"
        );
        match method.as_str() {
            // OpenClaw lists `connect` as admin-only; it is the handshake, allowed only first.
            "connect" => assert!(entry.get("scope").is_none()),
            _ => assert_eq!(&entry["scope"], their_scope, "{method}"),
        }
    }
}

/// OpenClaw's verdict on a fixture: its frame union, then the definition it has for the typed
/// part (the same name, or the corresponding one).
pub(crate) fn openclaw_problems(
    compiler: &ValidatorCompiler,
    ours: &Value,
    theirs: &Value,
    f: &Fixture,
) -> Vec<String> {
    let mut out: Vec<String> = compiler
        .root()
        .unwrap()
        .validate(&f.frame)
        .into_iter()
        .map(|i| format!("frame {} {}", i.instance_pointer, i.message))
        .collect();
    let Some((at, def, value)) = typed_part(ours, f) else {
        return out;
    };
    let mut checks: Vec<(String, Value)> = Vec::new();
    if theirs["definitions"].get(&def).is_some() {
        checks.push((format!("/definitions/{def}"), value.clone()));
    }
    for (our_def, their_pointer) in CORRESPONDING {
        if *our_def == def {
            checks.push(((*their_pointer).to_owned(), value.clone()));
        }
    }
    // Nested definitions of ours with a corresponding one: the snapshot of hello-ok, the
    // sessions of a page.
    if def == "ConnectResult" {
        checks.push((
            "/definitions/Snapshot".to_owned(),
            value["snapshot"].clone(),
        ));
    }
    if def == "SessionsListResult" {
        for row in value["sessions"].as_array().unwrap() {
            checks.push(("/definitions/SessionRow".to_owned(), row.clone()));
        }
    }
    if def == "SystemPresenceResult" {
        for entry in value.as_array().unwrap() {
            checks.push(("/definitions/PresenceEntry".to_owned(), entry.clone()));
        }
    }
    for (pointer, value) in checks {
        let validator = compiler.at_pointer(&pointer).unwrap();
        out.extend(
            validator
                .validate(&value)
                .into_iter()
                .map(|i| format!("{pointer} {at}{} {}", i.instance_pointer, i.message)),
        );
    }
    out
}

#[test]
fn openclaw_accepts_every_valid_gateway_fixture() {
    let ours = read(schema_path());
    let theirs_doc = SchemaDocument::open(openclaw_schema_path()).unwrap();
    let theirs = theirs_doc.value().clone();
    let compiler = ValidatorCompiler::new(&theirs_doc).unwrap();
    let mut accepted_invalid = Vec::new();
    let mut checked = 0;
    for f in fixtures() {
        let found = openclaw_problems(&compiler, &ours, &theirs, &f);
        if f.name.starts_with("valid-") {
            assert!(found.is_empty(), "OpenClaw rejects {}: {found:?}", f.name);
            checked += 1;
        } else if found.is_empty() {
            accepted_invalid.push(f.name);
        }
    }
    assert!(checked >= 40, "{checked}");
    assert_eq!(accepted_invalid, STRICTER_THAN_OPENCLAW);
}

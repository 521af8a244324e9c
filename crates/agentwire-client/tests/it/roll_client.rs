//! The Roll client against a scripted runtime on an in-memory pair (version negotiation and the
//! 17 MiB rule, the capability handshake, typed calls, the read retry, server requests and their
//! cancellation, the uncorrelated error, events, following a thread through replay and snapshot
//! fallback), and against real child processes (the shutdown order).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire_client::FallbackReason;
use agentwire_client::roll::{
    ApprovalRequest, ClientError, ClientEvent, ClientOptions, CloseReason, FollowOptions, Followed,
    HandlerError, InitializeOptions, Interactions, ProtocolViolation, RollClient, ShutdownStage,
    ShutdownTimeouts, UserInputRequest,
};
use agentwire_jsonrpc::{CallError, ErrorObject, Handlers, Peer, Profile, transport};
use agentwire_roll::approval::{
    ApprovalDecision, ApprovalRequestParams, LegacyApprovalRequestParams,
};
use agentwire_roll::cursor::EventCursor;
use agentwire_roll::ids::{InteractionId, ThreadId};
use agentwire_roll::negotiation::NegotiationError;
use agentwire_roll::types::{
    ThreadIdParams, ThreadListParams, ThreadSnapshot, ThreadSnapshotParams, TurnInput,
};
use agentwire_roll::user_input::{SubmittedValue, UserInputResult};
use agentwire_roll::{
    JsonRpcId, Method, ProtocolVersion, RollErrorCode, ServerRequestMethod, request,
};
use agentwire_testkit::{peer_fixture, read_json};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

const INSTANCE: &str = "00000000-0000-4000-8000-000000000001";
const THREAD: &str = "00000000-0000-4000-8000-000000000002";
const TURN: &str = "00000000-0000-4000-8000-000000000003";
const LOG: &str = "00000000-0000-4000-8000-000000000008";
const INTERACTION: &str = "00000000-0000-4000-8000-000000000006";

fn fixture(path: &str) -> Value {
    read_json(peer_fixture(format!("roll-agent/fixtures/{path}")))
}

fn thread_id() -> ThreadId {
    ThreadId::new(THREAD).unwrap()
}

/// What the runtime answers `initialize` with: the upstream fixtures for 1.4 and 1.5, the same
/// shape with that version's `limits` otherwise.
fn initialize_result(version: &str) -> Value {
    match version {
        "1.4" => fixture("v1.4/valid-initialize-response.json")["result"].clone(),
        "1.5" => fixture("v1.5/valid-initialize-response.json")["result"].clone(),
        _ => json!({
            "protocolVersion": version,
            "runtimeInstanceId": INSTANCE,
            "server": { "name": "roll-runtime", "version": "0.18.0", "runtimeVersion": "0.18.0" },
            "features": [
                "thread-management", "snapshots", "turns", "approvals", "tool-streaming",
                "reasoning-summary", "operation-projection", "process-local-sequence"
            ],
            "limits": {
                "maxFrameBytes": 4194304,
                "maxPageSize": 500,
                "eventReplay": version == "1.3",
                "idempotencyCacheEntries": 10000
            }
        }),
    }
}

/// The runtime's ACK: the revision echoed, the requested methods it knows in registry order.
fn ack(params: &Value) -> Value {
    let requested: Vec<&str> = params["serverRequestMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let accepted: Vec<&str> = ["approval.request", "userInput.request"]
        .into_iter()
        .filter(|m| requested.contains(m))
        .collect();
    json!({ "revision": params["revision"], "acceptedServerRequestMethods": accepted })
}

fn roll_error(roll_code: &str, retryable: bool) -> ErrorObject {
    ErrorObject::new(-32000, roll_code.to_lowercase())
        .with_data(json!({ "rollCode": roll_code, "retryable": retryable }))
}

/// A request the client sent, as the runtime saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    params: Value,
    at: Instant,
}

/// One call to the scripted runtime.
struct Call {
    method: String,
    params: Value,
    peer: Peer,
}

type Reply = Result<Value, ErrorObject>;

/// The runtime side of the pair: a `Peer` with the Roll runtime profile.
struct Runtime {
    peer: Peer,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Runtime {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn methods(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.method).collect()
    }

    fn params_of(&self, method: &str) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method)
            .map(|s| s.params)
            .collect()
    }

    async fn event(&self, params: Value) {
        self.peer.notify("runtime.event", &params).await.unwrap();
    }

    async fn server_request(&self, method: &str, params: &Value) -> Result<Value, CallError> {
        self.peer
            .request_with(method, params, Some(Duration::from_secs(5)))
            .await
    }
}

/// A client connected to a runtime that answers `initialize` with `version` and the capability
/// handshake with the intersection, and everything else with `script` (which may fall back to
/// `standard`).
fn start<F, Fut>(version: &'static str, options: ClientOptions, script: F) -> (RollClient, Runtime)
where
    F: Fn(Call) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    let ((client_read, client_write), (runtime_read, runtime_write)) = transport::memory_pair();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = Arc::clone(&seen);
    let script = Arc::new(script);
    let handlers = Handlers::new().on_any_request(move |ctx, params| {
        let params = params.unwrap_or(Value::Null);
        log.lock().unwrap().push(Seen {
            method: ctx.method().to_owned(),
            params: params.clone(),
            at: Instant::now(),
        });
        let call = Call {
            method: ctx.method().to_owned(),
            params,
            peer: ctx.peer().clone(),
        };
        let script = Arc::clone(&script);
        async move {
            match call.method.as_str() {
                "initialize" => Ok(initialize_result(version)),
                _ => script(call).await,
            }
        }
    });
    let peer = Peer::spawn(runtime_read, runtime_write, Profile::roll(), handlers);
    let client = RollClient::connect(client_read, client_write, options);
    (client, Runtime { peer, seen })
}

/// The runtime's default answers.
fn standard(call: &Call) -> Reply {
    match call.method.as_str() {
        "client.capabilities.set" => Ok(ack(&call.params)),
        "thread.list" => Ok(json!({ "items": [], "nextCursor": null })),
        other => Err(ErrorObject::method_not_found(other)),
    }
}

fn standard_runtime(version: &'static str, options: ClientOptions) -> (RollClient, Runtime) {
    start(version, options, |call| async move { standard(&call) })
}

fn approving() -> Interactions {
    Interactions::new().on_approval(|_| async { Ok(ApprovalDecision::Approve {}) })
}

async fn init(client: &RollClient) {
    client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// initialize

#[tokio::test]
async fn the_default_offer_is_every_version_newest_first_and_1_1_only_with_an_approval_handler() {
    let (client, runtime) = standard_runtime("1.5", ClientOptions::default());
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    let offered = &runtime.params_of("initialize")[0];
    assert_eq!(
        offered,
        &json!({
            "protocolVersions": ["1.5", "1.4", "1.3", "1.2", "1.0"],
            "client": { "name": "agentwire", "version": env!("CARGO_PKG_VERSION") }
        })
    );
    assert_eq!(session.version, ProtocolVersion::V1_5);
    assert_eq!(
        serde_json::to_value(&session.result).unwrap(),
        fixture("v1.5/valid-initialize-response.json")["result"]
    );
    assert_eq!(session.offered, ["1.5", "1.4", "1.3", "1.2", "1.0"]);
    assert_eq!(session.outbound_frame_limit, 4_194_304);
    assert_eq!(client.outbound_frame_limit(), 4_194_304);
    assert_eq!(client.version(), Some(ProtocolVersion::V1_5));

    let (client, runtime) =
        standard_runtime("1.5", ClientOptions::default().interactions(approving()));
    init(&client).await;
    assert_eq!(
        runtime.params_of("initialize")[0]["protocolVersions"],
        json!(["1.5", "1.4", "1.3", "1.2", "1.1", "1.0"])
    );
}

#[tokio::test]
async fn an_inbound_budget_below_17_mib_leaves_1_3_and_newer_out_of_the_offer() {
    let budget = 17 * 1024 * 1024 - 1;
    let options = || ClientOptions::default().max_frame_bytes(budget);
    let (client, runtime) = standard_runtime("1.2", options());
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        runtime.params_of("initialize")[0]["protocolVersions"],
        json!(["1.2", "1.0"])
    );
    assert_eq!(session.version, ProtocolVersion::V1_2);

    let (client, runtime) = standard_runtime("1.2", options());
    let error = client
        .initialize(InitializeOptions::default().versions(["1.3", "1.2"]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "client.roll.advertisement");
    assert_eq!(
        error,
        ClientError::Advertisement(NegotiationError::InboundBudgetTooSmall {
            version: ProtocolVersion::V1_3,
            budget: budget as u64,
            required: 17 * 1024 * 1024,
        })
    );
    assert!(runtime.methods().is_empty(), "nothing is sent");
    // The refusal left initialize open.
    let session = client
        .initialize(InitializeOptions::default().versions(["1.2"]))
        .await
        .unwrap();
    assert_eq!(session.version, ProtocolVersion::V1_2);
}

#[tokio::test]
async fn offering_1_1_without_an_approval_handler_is_refused_before_sending() {
    let (client, runtime) = standard_runtime("1.1", ClientOptions::default());
    let error = client
        .initialize(InitializeOptions::default().versions(["1.1"]))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ClientError::Advertisement(NegotiationError::MissingRequiredHandler {
            version: ProtocolVersion::V1_1,
            method: ServerRequestMethod::ApprovalRequest,
        })
    );
    assert!(runtime.methods().is_empty());
}

#[tokio::test]
async fn a_version_that_was_not_offered_closes_the_connection() {
    let (client, runtime) = standard_runtime("1.4", ClientOptions::default());
    let error = client
        .initialize(InitializeOptions::default().versions(["1.3", "1.2"]))
        .await
        .unwrap_err();
    let violation = ProtocolViolation::VersionNotOffered {
        answered: Some("1.4".into()),
    };
    assert_eq!(error, ClientError::ProtocolViolation(violation.clone()));
    assert!(client.is_closed());
    assert_eq!(
        client.close_reason(),
        Some(CloseReason::Violation(violation))
    );
    let later = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(10),
        })
        .await
        .unwrap_err();
    assert_eq!(later.code(), "client.roll.closed");
    assert_eq!(runtime.methods(), ["initialize"]);
}

#[tokio::test]
async fn initialize_happens_once_and_calls_wait_for_it() {
    let (client, runtime) = standard_runtime("1.2", ClientOptions::default());
    let early = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(10),
        })
        .await
        .unwrap_err();
    assert_eq!(early, ClientError::NotInitialized);
    init(&client).await;
    let again = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap_err();
    assert_eq!(again, ClientError::AlreadyInitialized);
    assert_eq!(again.code(), "client.roll.already-initialized");
    assert_eq!(runtime.methods(), ["initialize", "client.capabilities.set"]);
}

#[tokio::test]
async fn the_outbound_limit_is_the_smaller_of_the_budget_and_max_frame_bytes() {
    let ((client_read, client_write), (runtime_read, runtime_write)) = transport::memory_pair();
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = Arc::clone(&seen);
    let handlers = Handlers::new().on_any_request(move |ctx, params| {
        let params = params.unwrap_or(Value::Null);
        log.lock()
            .unwrap()
            .push(json!({ "method": ctx.method(), "params": params }));
        async move {
            let mut result = initialize_result("1.5");
            result["limits"]["maxFrameBytes"] = json!(2048);
            Ok(match params.get("turnId") {
                Some(turn_id) => json!({ "accepted": true, "turnId": turn_id }),
                None if params.get("protocolVersions").is_some() => result,
                None if params.get("revision").is_some() => ack(&params),
                None => json!({ "thread": {
                    "id": THREAD, "createdAt": "2026-07-30T12:00:00.000Z",
                    "updatedAt": "2026-07-30T12:00:00.000Z", "messageCount": 0
                } }),
            })
        }
    });
    let _runtime = Peer::spawn(runtime_read, runtime_write, Profile::roll(), handlers);
    let client = RollClient::connect(client_read, client_write, ClientOptions::default());
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert_eq!(session.outbound_frame_limit, 2048);

    let long = TurnInput {
        text: "x".repeat(3000),
        attachments: None,
    };
    let error = client.start_turn(thread_id(), long).await.unwrap_err();
    assert!(
        matches!(error, ClientError::OutboundTooLarge { method: Method::TurnStart, limit: 2048, length } if length > 3000),
        "{error:?}"
    );
    assert_eq!(error.code(), "client.roll.outbound-too-large");

    let short = TurnInput {
        text: "hello".into(),
        attachments: None,
    };
    let started = client.start_turn(thread_id(), short).await.unwrap();
    assert!(started.accepted);
    let created = client
        .call_value(Method::ThreadCreate, json!({}))
        .await
        .unwrap();
    assert_eq!(created["thread"]["id"], THREAD);

    let seen = seen.lock().unwrap().clone();
    let methods: Vec<&str> = seen.iter().map(|s| s["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "client.capabilities.set",
            "turn.start",
            "thread.create"
        ]
    );
    let turn = &seen[2]["params"];
    let is_uuid = |v: &Value| agentwire_roll::ids::is_protocol_uuid(v.as_str().unwrap());
    assert!(is_uuid(&turn["requestId"]) && is_uuid(&turn["turnId"]));
    assert_ne!(turn["requestId"], turn["turnId"]);
    assert_eq!(started.turn_id.as_str(), turn["turnId"].as_str().unwrap());
    assert!(
        is_uuid(&seen[3]["params"]["requestId"]),
        "call_value fills requestId"
    );
}

// ---------------------------------------------------------------------------------------------
// capabilities

fn both_handlers() -> Interactions {
    approving().on_user_input(|_| async { Ok(UserInputResult::Cancelled { reason: None }) })
}

#[tokio::test]
async fn the_ack_is_an_intersection_and_set_handlers_bumps_the_revision() {
    let (client, runtime) = start(
        "1.2",
        ClientOptions::default().interactions(both_handlers()),
        |call| async move {
            match call.method.as_str() {
                // This runtime serves only approvals at first.
                "client.capabilities.set" if call.params["revision"] == 1 => Ok(json!({
                    "revision": 1, "acceptedServerRequestMethods": ["approval.request"]
                })),
                _ => standard(&call),
            }
        },
    );
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        runtime.params_of("client.capabilities.set"),
        [
            json!({ "revision": 1, "serverRequestMethods": ["approval.request", "userInput.request"] })
        ]
    );
    assert_eq!(
        session.accepted,
        BTreeSet::from([ServerRequestMethod::ApprovalRequest])
    );
    let form = fixture("v1.2/valid-user-input-request.json")["params"].clone();
    let approval = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let refused = runtime
        .server_request("userInput.request", &form)
        .await
        .unwrap_err();
    assert_eq!(refused.remote().map(|e| e.code), Some(-32601));
    let answered = runtime
        .server_request("approval.request", &approval)
        .await
        .unwrap();
    assert_eq!(answered, json!({ "decision": "approve" }));

    let only_user_input = Interactions::new().on_user_input(|_| async {
        Ok(UserInputResult::Cancelled {
            reason: Some("closed".into()),
        })
    });
    let accepted = client.set_handlers(only_user_input).await.unwrap();
    assert_eq!(
        accepted,
        BTreeSet::from([ServerRequestMethod::UserInputRequest])
    );
    assert_eq!(client.capability_revision(), 2);
    assert_eq!(
        runtime.params_of("client.capabilities.set")[1],
        json!({ "revision": 2, "serverRequestMethods": ["userInput.request"] })
    );
    let answered = runtime
        .server_request("userInput.request", &form)
        .await
        .unwrap();
    assert_eq!(
        answered,
        json!({ "status": "cancelled", "reason": "closed" })
    );
    let refused = runtime
        .server_request("approval.request", &approval)
        .await
        .unwrap_err();
    assert_eq!(refused.remote().map(|e| e.code), Some(-32601));
}

#[tokio::test]
async fn an_ack_accepting_a_method_that_was_not_requested_closes_the_connection() {
    let (client, _runtime) = start(
        "1.3",
        ClientOptions::default().interactions(approving()),
        |call| async move {
            match call.method.as_str() {
                "client.capabilities.set" => Ok(json!({
                    "revision": 1,
                    "acceptedServerRequestMethods": ["approval.request", "userInput.request"]
                })),
                _ => standard(&call),
            }
        },
    );
    let error = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap_err();
    let violation = ProtocolViolation::CapabilityAck(NegotiationError::AckUnrequestedMethod(
        "userInput.request".into(),
    ));
    assert_eq!(error, ClientError::ProtocolViolation(violation.clone()));
    assert_eq!(error.code(), "client.roll.protocol-violation");
    assert!(client.is_closed());
    let later = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&later, ClientError::Closed { reason: CloseReason::Violation(v), .. } if *v == violation),
        "{later:?}"
    );
}

#[tokio::test]
async fn an_ack_with_another_revision_closes_the_connection() {
    let (client, _runtime) = start("1.2", ClientOptions::default(), |call| async move {
        match call.method.as_str() {
            "client.capabilities.set" => {
                Ok(json!({ "revision": 2, "acceptedServerRequestMethods": [] }))
            }
            _ => standard(&call),
        }
    });
    let error = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ClientError::ProtocolViolation(ProtocolViolation::CapabilityAck(
            NegotiationError::AckRevisionMismatch {
                requested: 1,
                got: 2
            }
        ))
    );
    assert!(client.is_closed());
}

// ---------------------------------------------------------------------------------------------
// typed calls

#[tokio::test]
async fn typed_calls_are_checked_against_the_negotiated_version() {
    let summary = json!({
        "id": THREAD, "title": "One", "createdAt": "2026-07-30T12:00:00.000Z",
        "updatedAt": "2026-07-30T12:00:01.000Z", "messageCount": 3
    });
    let listed = json!({ "items": [summary], "nextCursor": "100" });
    let answer = listed.clone();
    let (client, runtime) = start("1.4", ClientOptions::default(), move |call| {
        let answer = answer.clone();
        async move {
            match call.method.as_str() {
                "thread.list" => Ok(answer),
                _ => standard(&call),
            }
        }
    });
    init(&client).await;
    let threads = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(50),
        })
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&threads).unwrap(), listed);

    let operation =
        json!({ "threadId": THREAD, "operationId": "00000000-0000-4000-8000-000000000009" });
    let unavailable = client
        .call_value(Method::OperationResultGet, operation)
        .await
        .unwrap_err();
    assert_eq!(
        unavailable,
        ClientError::MethodUnavailable {
            method: Method::OperationResultGet,
            version: ProtocolVersion::V1_4
        }
    );
    assert_eq!(unavailable.code(), "client.roll.method-unavailable");
    let respond = json!({
        "threadId": THREAD, "turnId": TURN, "approvalId": "00000000-0000-4000-8000-000000000005",
        "decision": "approve"
    });
    let refused = client
        .call_value(Method::ApprovalRespond, respond)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "client.roll.method-unavailable");
    let reserved = client
        .call::<request::Initialize>(agentwire_roll::types::InitializeParams {
            protocol_versions: vec!["1.4".into()],
            client: agentwire_roll::types::PeerInfo {
                name: "x".into(),
                version: "1".into(),
            },
        })
        .await
        .unwrap_err();
    assert_eq!(reserved.code(), "client.roll.reserved-method");
    let invalid = client
        .call::<request::ThreadSnapshot>(ThreadSnapshotParams {
            thread_id: thread_id(),
            message_before_sequence: None,
            operation_before_sequence: None,
            limit: Some(0),
            recovery: None,
        })
        .await
        .unwrap_err();
    assert_eq!(invalid.code(), "client.roll.invalid-params");
    assert_eq!(
        runtime.methods(),
        ["initialize", "client.capabilities.set", "thread.list"],
        "refused calls are never sent"
    );
}

#[tokio::test]
async fn a_method_needing_an_unannounced_feature_is_refused() {
    let ((client_read, client_write), (runtime_read, runtime_write)) = transport::memory_pair();
    let handlers = Handlers::new().on_any_request(|ctx, params| {
        let method = ctx.method().to_owned();
        async move {
            let mut result = initialize_result("1.4");
            let features = result["features"].as_array_mut().unwrap();
            features.retain(|f| f != "attachments");
            match method.as_str() {
                "initialize" => Ok(result),
                _ => Ok(ack(&params.unwrap_or_default())),
            }
        }
    });
    let _runtime = Peer::spawn(runtime_read, runtime_write, Profile::roll(), handlers);
    let client = RollClient::connect(client_read, client_write, ClientOptions::default());
    init(&client).await;
    let params = json!({
        "threadId": THREAD, "attachmentId": "00000000-0000-4000-8000-00000000000a"
    });
    let error = client
        .call_value(Method::AttachmentCommit, params)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ClientError::FeatureUnavailable {
            method: Method::AttachmentCommit,
            feature: agentwire_roll::Feature::Attachments
        }
    );
}

#[tokio::test]
async fn a_result_that_breaks_the_schema_is_an_invalid_result() {
    let (client, _runtime) = start("1.3", ClientOptions::default(), |call| async move {
        match call.method.as_str() {
            "thread.list" => Ok(json!({ "items": [], "nextCursor": 5 })),
            _ => standard(&call),
        }
    });
    init(&client).await;
    let error = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(10),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            ClientError::InvalidResult {
                method: Method::ThreadList,
                error: agentwire_roll::parse::ParseError::Schema {
                    version: ProtocolVersion::V1_3,
                    ..
                }
            }
        ),
        "{error:?}"
    );
    assert_eq!(error.code(), "client.roll.invalid-result");
}

#[tokio::test]
async fn retryable_reads_are_retried_once_after_100_ms_and_nothing_else_is() {
    let snapshots = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&snapshots);
    let (client, runtime) = start("1.3", ClientOptions::default(), move |call| {
        let counter = Arc::clone(&counter);
        async move {
            match call.method.as_str() {
                "thread.snapshot" if counter.fetch_add(1, Ordering::SeqCst) == 0 => {
                    Err(roll_error("THREAD_BUSY", true))
                }
                "thread.snapshot" => {
                    Ok(fixture("v1.3/valid-thread-snapshot-response.json")["result"].clone())
                }
                "thread.list" | "thread.create" => Err(roll_error("THREAD_BUSY", true)),
                "thread.capabilities" => {
                    Err(ErrorObject::new(-32000, "no such thread").with_data(json!({
                        "rollCode": "THREAD_NOT_FOUND", "retryable": false,
                        "details": { "threadId": THREAD }
                    })))
                }
                _ => standard(&call),
            }
        }
    });
    init(&client).await;
    let snapshot = client
        .call::<request::ThreadSnapshot>(ThreadSnapshotParams {
            thread_id: thread_id(),
            message_before_sequence: None,
            operation_before_sequence: None,
            limit: Some(100),
            recovery: None,
        })
        .await
        .unwrap();
    assert_eq!(snapshot.thread.title.as_deref(), Some("Empty durable log"));
    let tries: Vec<Seen> = runtime
        .seen()
        .into_iter()
        .filter(|s| s.method == "thread.snapshot")
        .collect();
    assert_eq!(tries.len(), 2);
    assert!(tries[1].at - tries[0].at >= Duration::from_millis(100));

    let list = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(10),
        })
        .await
        .unwrap_err();
    assert_eq!(list.roll_code(), Some(RollErrorCode::THREAD_BUSY));
    assert!(list.is_retryable());
    assert_eq!(runtime.params_of("thread.list").len(), 2, "one retry only");

    let created = client.create_thread(None).await.unwrap_err();
    assert_eq!(created.roll_code(), Some(RollErrorCode::THREAD_BUSY));
    assert_eq!(
        runtime.params_of("thread.create").len(),
        1,
        "mutations are not retried"
    );

    let missing = client
        .call::<request::ThreadCapabilities>(ThreadIdParams {
            thread_id: thread_id(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), "client.roll.remote");
    assert_eq!(missing.remote_code(), Some(-32000));
    assert_eq!(missing.roll_code(), Some(RollErrorCode::THREAD_NOT_FOUND));
    assert!(!missing.is_retryable());
    assert_eq!(
        missing.remote().unwrap().details,
        Some(json!({ "threadId": THREAD }))
    );
    assert_eq!(runtime.params_of("thread.capabilities").len(), 1);
}

#[tokio::test]
async fn calls_time_out_but_human_interactions_do_not() {
    let interactions = Interactions::new().on_approval(|_| async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok(ApprovalDecision::Approve {})
    });
    let options = ClientOptions::default()
        .request_timeout(Some(Duration::from_millis(150)))
        .interactions(interactions);
    let (client, runtime) = start("1.2", options, |call| async move {
        match call.method.as_str() {
            "thread.list" => std::future::pending().await,
            _ => standard(&call),
        }
    });
    init(&client).await;
    let error = client
        .call::<request::ThreadList>(ThreadListParams {
            cursor: None,
            limit: Some(10),
        })
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ClientError::Timeout {
            method: Method::ThreadList,
            timeout_ms: 150
        }
    );
    let approval = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let started = Instant::now();
    let answer = runtime
        .server_request("approval.request", &approval)
        .await
        .unwrap();
    assert_eq!(answer, json!({ "decision": "approve" }));
    assert!(started.elapsed() >= Duration::from_millis(400));
}

// ---------------------------------------------------------------------------------------------
// server requests

#[tokio::test]
async fn a_1_1_approval_request_reaches_the_handler_in_the_legacy_shape() {
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let interactions = Interactions::new().on_approval(move |request| {
        let _ = seen_tx.send(request);
        async {
            Ok(ApprovalDecision::Reject {
                reason: Some("not now".into()),
            })
        }
    });
    let (client, runtime) =
        standard_runtime("1.1", ClientOptions::default().interactions(interactions));
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert_eq!(session.version, ProtocolVersion::V1_1);
    assert_eq!(
        session.accepted,
        BTreeSet::from([ServerRequestMethod::ApprovalRequest])
    );
    assert_eq!(
        runtime.methods(),
        ["initialize"],
        "1.1 has no capability handshake"
    );
    let params = fixture("v1/valid-approval-request.json")["params"].clone();
    let answer = runtime
        .server_request("approval.request", &params)
        .await
        .unwrap();
    assert_eq!(answer, json!({ "decision": "reject", "reason": "not now" }));
    let request = seen_rx.recv().await.unwrap();
    let expected: LegacyApprovalRequestParams = serde_json::from_value(params).unwrap();
    assert_eq!(
        request,
        ApprovalRequest::Legacy {
            id: JsonRpcId::String("runtime:1".into()),
            params: expected
        }
    );
    assert_eq!(request.interaction_id(), None);
    assert_eq!(request.expires_at(), Some("2026-07-29T12:10:00.000Z"));
}

#[tokio::test]
async fn a_1_2_approval_request_reaches_the_handler_in_the_interaction_shape() {
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let interactions = Interactions::new().on_approval(move |request| {
        let _ = seen_tx.send(request);
        async { Ok(ApprovalDecision::Approve {}) }
    });
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(interactions));
    init(&client).await;
    let params = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let answer = runtime
        .server_request("approval.request", &params)
        .await
        .unwrap();
    assert_eq!(answer, json!({ "decision": "approve" }));
    let request = seen_rx.recv().await.unwrap();
    let expected: ApprovalRequestParams = serde_json::from_value(params).unwrap();
    assert_eq!(
        request,
        ApprovalRequest::Interaction {
            id: JsonRpcId::String("runtime:1".into()),
            params: expected
        }
    );
    assert_eq!(
        request.interaction_id(),
        Some(&InteractionId::new(INTERACTION).unwrap())
    );
}

#[tokio::test]
async fn an_invalid_approval_answer_is_answered_32603_and_reported() {
    let interactions = Interactions::new().on_approval(|_| async {
        Ok(ApprovalDecision::Reject {
            reason: Some(String::new()),
        })
    });
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(interactions));
    let mut events = client.events().unwrap();
    init(&client).await;
    let params = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let error = runtime
        .server_request("approval.request", &params)
        .await
        .unwrap_err();
    assert_eq!(error.remote().map(|e| e.code), Some(-32603));
    assert!(
        matches!(events.recv().await, Some(ClientEvent::Rejected { ref method, code: "roll.parse.schema", .. }) if method == "approval.request")
    );
}

fn form_request() -> Value {
    fixture("v1.2/valid-user-input-request.json")["params"].clone()
}

fn submitted(values: &[(&str, &str)]) -> UserInputResult {
    UserInputResult::Submitted {
        values: values
            .iter()
            .map(|(id, value)| SubmittedValue {
                id: (*id).into(),
                value: json!(value),
            })
            .collect(),
    }
}

#[tokio::test]
async fn a_user_input_answer_is_normalized_against_the_form() {
    let interactions = Interactions::new().on_user_input(|request: UserInputRequest| async move {
        assert_eq!(request.params.controls.len(), 2);
        // Submitted in the opposite order of the form.
        Ok(submitted(&[
            ("target-workspace", "workspace-a"),
            ("deployment-region", "华东"),
        ]))
    });
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(interactions));
    init(&client).await;
    let answer = runtime
        .server_request("userInput.request", &form_request())
        .await
        .unwrap();
    assert_eq!(
        answer,
        fixture("v1.2/valid-user-input-request-response.json")["result"]
    );
}

#[tokio::test]
async fn a_user_input_answer_the_form_does_not_allow_is_answered_32603() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let interactions = Interactions::new().on_user_input(move |_| {
        let call = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match call {
                // Shorter than the control's minLength of 2.
                0 => Ok(submitted(&[
                    ("deployment-region", "x"),
                    ("target-workspace", "workspace-a"),
                ])),
                _ => Err(HandlerError::new("the window was destroyed")),
            }
        }
    });
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(interactions));
    let mut events = client.events().unwrap();
    init(&client).await;
    for expected_code in [
        "roll.user-input.out-of-bounds",
        "client.roll.handler-failed",
    ] {
        let error = runtime
            .server_request("userInput.request", &form_request())
            .await
            .unwrap_err();
        assert_eq!(error.remote().map(|e| e.code), Some(-32603));
        match events.recv().await {
            Some(ClientEvent::Rejected { method, code, .. }) => {
                assert_eq!(
                    (method.as_str(), code),
                    ("userInput.request", expected_code)
                );
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
    assert_eq!(client.stats().rejected, 2);
}

#[tokio::test]
async fn server_request_params_of_another_version_are_answered_32602() {
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(approving()));
    init(&client).await;
    let legacy = fixture("v1.2/invalid-legacy-approval-request.json")["params"].clone();
    let error = runtime
        .server_request("approval.request", &legacy)
        .await
        .unwrap_err();
    assert_eq!(error.remote().map(|e| e.code), Some(-32602));
}

#[tokio::test]
async fn a_server_request_without_a_handler_is_answered_32601() {
    let (client, runtime) = standard_runtime("1.2", ClientOptions::default());
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert!(session.accepted.is_empty());
    let params = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let error = runtime
        .server_request("approval.request", &params)
        .await
        .unwrap_err();
    assert_eq!(error.remote().map(|e| e.code), Some(-32601));
}

/// A handler that reports when it starts and when its future is dropped, and never answers.
fn hanging_approval() -> (
    Interactions,
    mpsc::UnboundedReceiver<JsonRpcId>,
    mpsc::UnboundedReceiver<()>,
) {
    struct OnDrop(mpsc::UnboundedSender<()>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (started_tx, started_rx) = mpsc::unbounded_channel();
    let (dropped_tx, dropped_rx) = mpsc::unbounded_channel();
    let interactions = Interactions::new().on_approval(move |request| {
        let _ = started_tx.send(request.id().clone());
        let guard = OnDrop(dropped_tx.clone());
        async move {
            let _guard = guard;
            std::future::pending::<Result<ApprovalDecision, HandlerError>>().await
        }
    });
    (interactions, started_rx, dropped_rx)
}

#[tokio::test]
async fn a_cancelled_interaction_aborts_its_handler_and_is_never_answered() {
    let (interactions, mut started, mut dropped) = hanging_approval();
    let (client, runtime) =
        standard_runtime("1.2", ClientOptions::default().interactions(interactions));
    let mut events = client.events().unwrap();
    init(&client).await;
    let params = fixture("v1.2/valid-approval-request.json")["params"].clone();
    let peer = runtime.peer.clone();
    let pending = tokio::spawn(async move {
        peer.request_with::<_, Value>(
            "approval.request",
            &params,
            Some(Duration::from_millis(600)),
        )
        .await
    });
    let id = started.recv().await.unwrap();
    runtime
        .peer
        .notify(
            "runtime.serverRequest.cancel",
            &fixture("v1.2/valid-server-request-cancel-notification.json")["params"],
        )
        .await
        .unwrap();
    dropped.recv().await.unwrap();
    assert_eq!(
        events.recv().await,
        Some(ClientEvent::InteractionCancelled {
            method: ServerRequestMethod::ApprovalRequest,
            id,
            interaction_id: Some(InteractionId::new(INTERACTION).unwrap()),
            reason: "turn-cancelled".into(),
        })
    );
    let outcome = pending.await.unwrap();
    assert_eq!(outcome, Err(CallError::Timeout { timeout_ms: 600 }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runtime.peer.stats().unknown_responses, 0, "no late answer");
    assert_eq!(runtime.peer.stats().responses_received, 0, "never answered");
}

#[tokio::test]
async fn a_1_1_cancel_names_the_json_rpc_id() {
    let (interactions, mut started, mut dropped) = hanging_approval();
    let (client, runtime) =
        standard_runtime("1.1", ClientOptions::default().interactions(interactions));
    init(&client).await;
    let params = fixture("v1/valid-approval-request.json")["params"].clone();
    let peer = runtime.peer.clone();
    let pending = tokio::spawn(async move {
        peer.request_with::<_, Value>(
            "approval.request",
            &params,
            Some(Duration::from_millis(600)),
        )
        .await
    });
    let id = started.recv().await.unwrap();
    assert_eq!(id, JsonRpcId::String("runtime:1".into()));
    let cancel = json!({
        "serverRequestId": "runtime:1",
        "approvalId": "00000000-0000-4000-8000-000000000005",
        "reason": "turn-cancelled"
    });
    runtime
        .peer
        .notify("runtime.serverRequest.cancel", &cancel)
        .await
        .unwrap();
    dropped.recv().await.unwrap();
    assert_eq!(
        pending.await.unwrap(),
        Err(CallError::Timeout { timeout_ms: 600 })
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runtime.peer.stats().responses_received, 0, "never answered");
}

// ---------------------------------------------------------------------------------------------
// the uncorrelated error

#[tokio::test]
async fn an_error_with_id_null_rejects_pending_calls_and_closes() {
    let ((client_read, client_write), (runtime_read, mut runtime_write)) = transport::memory_pair();
    let client = Arc::new(RollClient::connect(
        client_read,
        client_write,
        ClientOptions::default(),
    ));
    let mut lines = BufReader::new(runtime_read).lines();
    let initializing = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            client
                .initialize(InitializeOptions::default().versions(["1.0"]))
                .await
        })
    };
    let request: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(request["method"], "initialize");
    let answer =
        json!({ "jsonrpc": "2.0", "id": request["id"], "result": initialize_result("1.0") });
    runtime_write
        .write_all(format!("{answer}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(
        initializing.await.unwrap().unwrap().version,
        ProtocolVersion::V1_0
    );

    let listing = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            client
                .call::<request::ThreadList>(ThreadListParams {
                    cursor: None,
                    limit: Some(10),
                })
                .await
        })
    };
    let request: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(request["method"], "thread.list");
    runtime_write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"bad frame\"}}\n")
        .await
        .unwrap();
    let error = listing.await.unwrap().unwrap_err();
    let violation = ProtocolViolation::UncorrelatedError {
        code: -32600,
        message: "bad frame".into(),
    };
    assert_eq!(
        error,
        ClientError::Closed {
            reason: CloseReason::Violation(violation),
            stderr_tail: None
        }
    );
    assert!(client.is_closed());
    assert_eq!(
        lines.next_line().await.unwrap(),
        None,
        "the client closed its output"
    );
}

// ---------------------------------------------------------------------------------------------
// events and following threads

fn event_id(sequence: u64) -> String {
    format!("00000000-0000-4000-8000-{:012x}", 0x100 + sequence)
}

fn cursor(sequence: u64) -> String {
    format!("rte1:{LOG}:{sequence}:{}", event_id(sequence))
}

fn durable(sequence: u64) -> Value {
    json!({
        "protocolVersion": "1.3",
        "runtimeInstanceId": INSTANCE,
        "sequence": 1000 + sequence,
        "timestamp": "2026-07-30T12:00:00.000Z",
        "threadId": THREAD,
        "turnId": TURN,
        "durability": "durable",
        "eventId": event_id(sequence),
        "cursor": cursor(sequence),
        "event": {
            "type": "message.completed",
            "streamId": "00000000-0000-4000-8000-000000000004",
            "text": format!("m{sequence}")
        }
    })
}

/// The text of a followed event, or `reset` with the checkpoint's sequence.
fn shown(item: &Followed) -> String {
    match item {
        Followed::Event(envelope) => match &envelope.event {
            agentwire_roll::types::RuntimeEvent::MessageCompleted { text, .. } => text.clone(),
            other => format!("{other:?}"),
        },
        Followed::Reset { checkpoint, .. } => format!(
            "reset@{}",
            checkpoint.as_ref().map_or(-1, |c| c.sequence() as i64)
        ),
    }
}

#[tokio::test]
async fn invalid_events_are_reported_and_dropped() {
    let (client, runtime) = standard_runtime("1.3", ClientOptions::default());
    let mut events = client.events().unwrap();
    assert!(client.events().is_none(), "the queue is taken once");
    init(&client).await;
    runtime
        .event(fixture("v1.3/invalid-durable-delta-event-notification.json")["params"].clone())
        .await;
    runtime
        .event(fixture("v1.3/valid-runtime-durable-event-notification.json")["params"].clone())
        .await;
    match events.recv().await {
        Some(ClientEvent::Rejected { method, code, .. }) => {
            assert_eq!(
                (method.as_str(), code),
                ("runtime.event", "roll.parse.schema")
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    match events.recv().await {
        Some(ClientEvent::Runtime(envelope)) => assert_eq!(envelope.sequence, 8),
        other => panic!("expected the valid event, got {other:?}"),
    }
    assert_eq!(client.stats().events_received, 1);
}

#[tokio::test]
async fn a_full_event_queue_drops_and_reports_the_gap() {
    let options = ClientOptions {
        event_queue: 2,
        ..ClientOptions::default()
    };
    let (client, runtime) = standard_runtime("1.3", options);
    let mut events = client.events().unwrap();
    init(&client).await;
    for sequence in 0..5 {
        runtime.event(durable(sequence)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.stats().events_dropped < 3 {
        assert!(Instant::now() < deadline, "{:?}", client.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut seen = Vec::new();
    let mut take = async |events: &mut mpsc::Receiver<ClientEvent>| {
        seen.push(match events.recv().await.unwrap() {
            ClientEvent::Runtime(envelope) => format!("e{}", envelope.sequence - 1000),
            ClientEvent::Lagged { missed } => format!("lagged {missed}"),
            other => format!("{other:?}"),
        });
    };
    take(&mut events).await;
    take(&mut events).await;
    // Room again: the gap is reported before the next event.
    runtime.event(durable(5)).await;
    take(&mut events).await;
    take(&mut events).await;
    assert_eq!(seen, ["e0", "e1", "lagged 3", "e5"]);
}

#[tokio::test]
async fn following_stages_live_events_during_the_replay_and_delivers_each_once_in_order() {
    let (client, runtime) = start("1.3", ClientOptions::default(), |call| async move {
        match call.method.as_str() {
            "runtime.events.resume" => {
                // A live event committed meanwhile, the replay, a duplicate, then the barrier.
                for sequence in [5, 3, 4, 4] {
                    call.peer
                        .notify("runtime.event", &durable(sequence))
                        .await
                        .unwrap();
                }
                Ok(json!({ "throughCursor": cursor(4), "replayedCount": 2 }))
            }
            _ => standard(&call),
        }
    });
    init(&client).await;
    let after = EventCursor::parse(&cursor(2)).unwrap();
    let mut follower = client
        .follow(thread_id(), FollowOptions::after(Some(after)))
        .unwrap();
    let again = client
        .follow(thread_id(), FollowOptions::default())
        .unwrap_err();
    assert_eq!(again.code(), "client.roll.already-following");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(shown(&follower.next().await.unwrap()));
    }
    assert_eq!(seen, ["m3", "m4", "m5"]);
    assert_eq!(
        runtime.params_of("runtime.events.resume"),
        [json!({ "threadId": THREAD, "afterCursor": cursor(2) })]
    );
    // Live again: a duplicate of 5, then 6.
    runtime.event(durable(5)).await;
    runtime.event(durable(6)).await;
    assert_eq!(shown(&follower.next().await.unwrap()), "m6");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), follower.next())
            .await
            .is_err(),
        "nothing more"
    );
    assert_eq!(follower.checkpoint().unwrap().as_str(), cursor(6));
    assert_eq!(follower.runtime_instance(), INSTANCE);
}

#[tokio::test]
async fn following_falls_back_to_a_recovery_snapshot_when_the_cursor_expired() {
    let mut recovery =
        fixture("v1.3/valid-thread-recovery-snapshot-response.json")["result"].clone();
    recovery["eventCursor"] = json!(cursor(7));
    let snapshot = recovery.clone();
    let (client, runtime) = start("1.3", ClientOptions::default(), move |call| {
        let snapshot = snapshot.clone();
        async move {
            match call.method.as_str() {
                "runtime.events.resume" => Err(ErrorObject::new(-32000, "cursor expired")
                    .with_data(json!({ "rollCode": "EVENT_CURSOR_EXPIRED", "retryable": false }))),
                "thread.snapshot" => {
                    // Committed after the snapshot was taken, sent before it.
                    call.peer
                        .notify("runtime.event", &durable(8))
                        .await
                        .unwrap();
                    Ok(snapshot)
                }
                _ => standard(&call),
            }
        }
    });
    init(&client).await;
    let mut follower = client
        .follow(
            thread_id(),
            FollowOptions::after(Some(EventCursor::parse(&cursor(2)).unwrap())),
        )
        .unwrap();
    match follower.next().await.unwrap() {
        Followed::Reset {
            reason,
            checkpoint,
            snapshot,
        } => {
            assert_eq!(reason, FallbackReason::CursorExpired);
            assert_eq!(checkpoint.unwrap().as_str(), cursor(7));
            let expected: ThreadSnapshot = serde_json::from_value(recovery).unwrap();
            assert_eq!(*snapshot, expected);
            assert!(snapshot.is_recovery());
        }
        other => panic!("expected a reset, got {other:?}"),
    }
    assert_eq!(shown(&follower.next().await.unwrap()), "m8");
    runtime.event(durable(7)).await;
    runtime.event(durable(9)).await;
    assert_eq!(shown(&follower.next().await.unwrap()), "m9");
    assert_eq!(
        runtime.methods(),
        [
            "initialize",
            "client.capabilities.set",
            "runtime.events.resume",
            "thread.snapshot"
        ]
    );
    assert_eq!(
        runtime.params_of("thread.snapshot"),
        [json!({ "threadId": THREAD, "limit": 1, "recovery": true })]
    );
}

#[tokio::test]
async fn following_needs_1_3() {
    let (client, _runtime) = standard_runtime("1.2", ClientOptions::default());
    init(&client).await;
    let error = client
        .follow(thread_id(), FollowOptions::default())
        .unwrap_err();
    assert_eq!(
        error,
        ClientError::MethodUnavailable {
            method: Method::RuntimeEventsResume,
            version: ProtocolVersion::V1_2
        }
    );
}

// ---------------------------------------------------------------------------------------------
// child processes and shutdown

fn shell(script: &str, timeouts: ShutdownTimeouts) -> RollClient {
    RollClient::spawn(
        ClientOptions::new("sh")
            .args(["-c", script])
            .shutdown(timeouts),
    )
    .unwrap()
}

#[cfg(unix)]
fn signal(status: Option<std::process::ExitStatus>) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt as _;
    status.and_then(|s| s.signal())
}

#[tokio::test]
async fn shutdown_closes_stdin_first() {
    let client = shell(
        "cat >/dev/null; echo 'bye from the runtime' >&2; exit 3",
        ShutdownTimeouts {
            stdin: Duration::from_secs(10),
            terminate: Duration::from_secs(10),
            kill: Duration::from_secs(5),
        },
    );
    assert!(client.pid().is_some());
    let report = client.shutdown().await.unwrap();
    assert_eq!(report.stage, ShutdownStage::StdinClosed);
    assert_eq!(report.status.and_then(|s| s.code()), Some(3));
    assert!(
        report.stderr_tail.contains("bye from the runtime"),
        "{report:?}"
    );
    assert!(client.is_closed());
    assert_eq!(client.pid(), None);
}

#[cfg(unix)]
#[tokio::test]
async fn shutdown_sends_sigterm_to_a_runtime_that_ignores_stdin_close() {
    let timeouts = ShutdownTimeouts {
        stdin: Duration::from_millis(300),
        terminate: Duration::from_secs(10),
        kill: Duration::from_secs(5),
    };
    let client = shell("exec sleep 30", timeouts);
    let started = Instant::now();
    let report = client.shutdown().await.unwrap();
    assert_eq!(report.stage, ShutdownStage::Terminated);
    assert_eq!(signal(report.status), Some(15));
    assert!(started.elapsed() >= timeouts.stdin);
}

#[cfg(unix)]
#[tokio::test]
async fn shutdown_sends_sigkill_to_a_runtime_that_ignores_sigterm() {
    let timeouts = ShutdownTimeouts {
        stdin: Duration::from_millis(500),
        terminate: Duration::from_millis(300),
        kill: Duration::from_secs(5),
    };
    let client = shell("trap '' TERM; exec sleep 30", timeouts);
    let started = Instant::now();
    let report = client.shutdown().await.unwrap();
    assert_eq!(report.stage, ShutdownStage::Killed);
    assert_eq!(signal(report.status), Some(9));
    assert!(started.elapsed() >= timeouts.stdin + timeouts.terminate);
}

#[tokio::test]
async fn a_runtime_that_exits_fails_calls_as_closed_and_leaves_its_stderr() {
    let client = shell(
        "echo 'runtime: cannot open the event log' >&2; exit 2",
        ShutdownTimeouts::default(),
    );
    let error = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "client.roll.closed");
    let report = client.shutdown().await.unwrap();
    assert_eq!(report.stage, ShutdownStage::StdinClosed);
    assert_eq!(report.status.and_then(|s| s.code()), Some(2));
    assert!(
        report
            .stderr_tail
            .contains("runtime: cannot open the event log")
    );
}

#[tokio::test]
async fn a_program_that_cannot_start_is_a_spawn_error() {
    let error =
        RollClient::spawn(ClientOptions::new("/nonexistent/agentwire-runtime")).unwrap_err();
    assert_eq!(error.code(), "client.roll.spawn");
}

#[tokio::test]
async fn shutting_down_a_connected_client_closes_the_connection() {
    let (client, runtime) = standard_runtime("1.2", ClientOptions::default());
    init(&client).await;
    let report = client.shutdown().await.unwrap();
    assert_eq!(report.stage, ShutdownStage::NoChild);
    assert_eq!(report.status, None);
    runtime.peer.closed().await;
    assert_eq!(client.close_reason(), Some(CloseReason::Shutdown));
    let error = client.create_thread(None).await.unwrap_err();
    assert_eq!(
        error,
        ClientError::Closed {
            reason: CloseReason::Shutdown,
            stderr_tail: None
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_replay_is_staged_before_its_barrier_is_applied() {
    const REPLAYED: u64 = 300;
    let (client, _runtime) = start("1.3", ClientOptions::default(), |call| async move {
        match call.method.as_str() {
            "runtime.events.resume" => {
                for sequence in 1..=REPLAYED {
                    call.peer
                        .notify("runtime.event", &durable(sequence))
                        .await
                        .unwrap();
                }
                Ok(json!({ "throughCursor": cursor(REPLAYED), "replayedCount": REPLAYED }))
            }
            _ => standard(&call),
        }
    });
    init(&client).await;
    let after = EventCursor::parse(&cursor(0)).unwrap();
    let mut follower = client
        .follow(thread_id(), FollowOptions::after(Some(after)))
        .unwrap();
    for sequence in 1..=REPLAYED {
        assert_eq!(
            shown(&follower.next().await.unwrap()),
            format!("m{sequence}")
        );
    }
}

#[tokio::test]
async fn a_follower_that_is_not_read_pauses_and_resumes_after_what_it_took() {
    // The last committed sequence of the thread's log.
    let committed = Arc::new(AtomicUsize::new(3));
    let log = Arc::clone(&committed);
    let (client, runtime) = start("1.3", ClientOptions::default(), move |call| {
        let log = Arc::clone(&log);
        async move {
            match call.method.as_str() {
                "runtime.events.resume" => {
                    let after = EventCursor::parse(call.params["afterCursor"].as_str().unwrap())
                        .unwrap()
                        .sequence();
                    let last = log.load(Ordering::SeqCst) as u64;
                    for sequence in after + 1..=last {
                        call.peer
                            .notify("runtime.event", &durable(sequence))
                            .await
                            .unwrap();
                    }
                    Ok(json!({ "throughCursor": cursor(last), "replayedCount": last - after }))
                }
                _ => standard(&call),
            }
        }
    });
    init(&client).await;
    let options = FollowOptions {
        after: Some(EventCursor::parse(&cursor(0)).unwrap()),
        recovery: agentwire_client::RecoveryConfig {
            max_staged_events: 4,
            ..agentwire_client::RecoveryConfig::default()
        },
        ..FollowOptions::default()
    };
    let mut follower = client.follow(thread_id(), options).unwrap();
    assert_eq!(shown(&follower.next().await.unwrap()), "m1");
    // 2 and 3 wait; 4 and 5 fill the window, 6 finds it full.
    for sequence in 4..=6 {
        committed.store(sequence, Ordering::SeqCst);
        runtime.event(durable(sequence as u64)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.stats().events_received < 6 {
        assert!(Instant::now() < deadline, "{:?}", client.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut seen = Vec::new();
    for _ in 2..=6 {
        seen.push(shown(&follower.next().await.unwrap()));
    }
    assert_eq!(seen, ["m2", "m3", "m4", "m5", "m6"]);
    assert_eq!(
        runtime.params_of("runtime.events.resume"),
        [
            json!({ "threadId": THREAD, "afterCursor": cursor(0) }),
            json!({ "threadId": THREAD, "afterCursor": cursor(5) }),
        ]
    );
}

/// An event larger than the follower's whole window, arriving while the host waits, is taken
/// alone rather than pausing the follower for good.
#[tokio::test]
async fn an_event_over_the_window_while_the_host_waits_is_taken_alone() {
    let (client, runtime) = start("1.3", ClientOptions::default(), |call| async move {
        match call.method.as_str() {
            "runtime.events.resume" => {
                Ok(json!({ "throughCursor": cursor(0), "replayedCount": 0 }))
            }
            "thread.snapshot" => {
                let mut recovery =
                    fixture("v1.3/valid-thread-recovery-snapshot-response.json")["result"].clone();
                recovery["eventCursor"] = json!(cursor(1));
                Ok(recovery)
            }
            _ => standard(&call),
        }
    });
    init(&client).await;
    let options = FollowOptions {
        after: Some(EventCursor::parse(&cursor(0)).unwrap()),
        recovery: agentwire_client::RecoveryConfig {
            max_staged_bytes: 100,
            ..agentwire_client::RecoveryConfig::default()
        },
        ..FollowOptions::default()
    };
    let mut follower = client.follow(thread_id(), options).unwrap();
    // Let the resume settle so the follower is live.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting =
        tokio::spawn(
            async move { tokio::time::timeout(Duration::from_secs(5), follower.next()).await },
        );
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A live event whose frame is over max_staged_bytes, while the host waits in next().
    runtime.event(durable(1)).await;
    let outcome = waiting.await.unwrap();
    assert!(
        outcome.is_ok(),
        "next() never returned: the follower paused without waking the host"
    );
}

/// A batch that fills the follower's window (a reset, then events) wakes the host waiting for
/// what is ready before the follower pauses.
#[tokio::test]
async fn a_reset_batch_that_fills_the_window_wakes_the_waiting_host() {
    let mut recovery =
        fixture("v1.3/valid-thread-recovery-snapshot-response.json")["result"].clone();
    recovery["eventCursor"] = json!(cursor(7));
    let snapshot = recovery.clone();
    let (client, _runtime) = start("1.3", ClientOptions::default(), move |call| {
        let snapshot = snapshot.clone();
        async move {
            match call.method.as_str() {
                "runtime.events.resume" => Err(ErrorObject::new(-32000, "cursor expired")
                    .with_data(json!({ "rollCode": "EVENT_CURSOR_EXPIRED", "retryable": false }))),
                "thread.snapshot" => {
                    for sequence in [8, 9] {
                        call.peer
                            .notify("runtime.event", &durable(sequence))
                            .await
                            .unwrap();
                    }
                    Ok(snapshot)
                }
                _ => standard(&call),
            }
        }
    });
    init(&client).await;
    let options = FollowOptions {
        after: Some(EventCursor::parse(&cursor(2)).unwrap()),
        recovery: agentwire_client::RecoveryConfig {
            max_staged_events: 2,
            ..agentwire_client::RecoveryConfig::default()
        },
        ..FollowOptions::default()
    };
    let mut follower = client.follow(thread_id(), options).unwrap();
    // The host waits before anything is ready.
    let first = tokio::time::timeout(Duration::from_secs(5), follower.next()).await;
    assert!(
        first.is_ok(),
        "next() never returned although the reset was ready"
    );
}

/// On 1.1 the runtime sends a pending approval right behind its `initialize` answer. The
/// client routes it once that answer is stored: its handler answers it (a `-32601` would make
/// the runtime deny the approval).
#[tokio::test]
async fn a_1_1_approval_right_behind_the_initialize_answer_reaches_the_handler() {
    let ((client_read, client_write), (runtime_read, mut runtime_write)) = transport::memory_pair();
    let client = RollClient::connect(
        client_read,
        client_write,
        ClientOptions::default().interactions(approving()),
    );
    let mut lines = BufReader::new(runtime_read).lines();
    let init = tokio::spawn(async move {
        client
            .initialize(InitializeOptions::default())
            .await
            .map(|_| client)
    });
    let request: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": initialize_result("1.1")});
    let approval = json!({"jsonrpc": "2.0", "id": "runtime:1", "method": "approval.request",
        "params": fixture("v1/valid-approval-request.json")["params"]});
    let mut bytes = serde_json::to_vec(&answer).unwrap();
    bytes.push(b'\n');
    bytes.extend(serde_json::to_vec(&approval).unwrap());
    bytes.push(b'\n');
    runtime_write.write_all(&bytes).await.unwrap();
    let _client = init.await.unwrap().unwrap();
    let reply: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(reply["id"], "runtime:1");
    assert_eq!(
        reply["result"],
        json!({"decision": "approve"}),
        "answered {reply}"
    );
}

//! The Roll client (`agentwire_client::roll`) against the real runtime: `agentwire serve --stdio`
//! started by `RollClient::spawn`. Every version's methods through typed calls; approvals and
//! user input answered by the client's handlers on each version's write path; a thread followed
//! across a runtime killed mid-stream and started again on the same store, gap-free and
//! duplicate-free; and the snapshot fallback when the checkpoint was trimmed away.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::BIN;
use agentwire_client::roll::{
    ApprovalRequest, ClientError, ClientEvent, ClientOptions, FollowOptions, Followed,
    InitializeOptions, Interactions, RollClient, ShutdownStage, fresh_request_id, fresh_turn_id,
};
use agentwire_client::{FallbackReason, RecoveryConfig};
use agentwire_roll::approval::{ApprovalDecision, ApprovalRespondParams, ApprovalVerdict};
use agentwire_roll::cursor::EventCursor;
use agentwire_roll::ids::{OperationId, ThreadId, TurnId};
use agentwire_roll::types::{
    AttachmentChunkParams, AttachmentMediaType, AttachmentParams, AttachmentSource,
    AttachmentStageParams, OperationParams, RuntimeEvent, RuntimeEventEnvelope,
    RuntimeEventsResumeParams, ThreadIdParams, ThreadListParams, ThreadMutationParams,
    ThreadRenameParams, ThreadSnapshotParams, TurnCancelParams, TurnInput,
};
use agentwire_roll::user_input::{Control, SubmittedValue, UserInputResult};
use agentwire_roll::{Method, ProtocolVersion, ServerRequestMethod, request};
use tokio::sync::mpsc;

/// A guard against a hung test, not a timing assertion.
const STUCK: Duration = Duration::from_secs(60);

const VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.sqlite");
    (dir, path)
}

fn spawn(store: &Path, interactions: Interactions) -> RollClient {
    RollClient::spawn(options(store, interactions)).unwrap()
}

fn options(store: &Path, interactions: Interactions) -> ClientOptions {
    ClientOptions::new(BIN)
        .args(["serve", "--stdio", "--store"])
        .arg(format!("sqlite:{}", store.display()))
        .env("AGENTWIRE_LOG", "warn")
        .interactions(interactions)
}

/// Approves `/approve ls`, rejects anything else; submits `eu-west` and the first option to a
/// form. Every request is kept.
#[derive(Clone, Default)]
struct Host {
    approvals: Arc<Mutex<Vec<ApprovalRequest>>>,
    forms: Arc<Mutex<Vec<String>>>,
}

impl Host {
    fn interactions(&self) -> Interactions {
        let approvals = Arc::clone(&self.approvals);
        let forms = Arc::clone(&self.forms);
        Interactions::new()
            .on_approval(move |request| {
                let approvals = Arc::clone(&approvals);
                async move {
                    let command = request.approval().preview["command"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    approvals.lock().unwrap().push(request);
                    Ok(if command == "ls" {
                        ApprovalDecision::Approve {}
                    } else {
                        ApprovalDecision::Reject {
                            reason: Some("not that".into()),
                        }
                    })
                }
            })
            .on_user_input(move |form| {
                let forms = Arc::clone(&forms);
                async move {
                    forms
                        .lock()
                        .unwrap()
                        .push(form.params.title.clone().unwrap_or_default());
                    let values = form
                        .params
                        .controls
                        .iter()
                        .filter_map(|control| match control {
                            Control::Text(text) => Some(SubmittedValue {
                                id: text.id.clone(),
                                value: "eu-west".into(),
                            }),
                            Control::Choice(choice) => Some(SubmittedValue {
                                id: choice.id.clone(),
                                value: choice.options[0].id.clone().into(),
                            }),
                            _ => None,
                        })
                        .collect();
                    Ok(UserInputResult::Submitted { values })
                }
            })
    }
}

fn is_terminal(event: &RuntimeEvent) -> bool {
    matches!(
        event,
        RuntimeEvent::TurnCompleted
            | RuntimeEvent::TurnCancelled { .. }
            | RuntimeEvent::TurnFailed { .. }
    )
}

/// The events of `turn` from the event queue until its terminal event.
async fn turn_events(
    events: &mut mpsc::Receiver<ClientEvent>,
    turn: &TurnId,
) -> Vec<RuntimeEventEnvelope> {
    let mut seen = Vec::new();
    loop {
        let item = tokio::time::timeout(STUCK, events.recv())
            .await
            .expect("the turn did not end")
            .expect("the event queue closed");
        match item {
            ClientEvent::Runtime(envelope) if envelope.turn_id.as_ref() == Some(turn) => {
                let end = is_terminal(&envelope.event);
                seen.push(*envelope);
                if end {
                    return seen;
                }
            }
            ClientEvent::Runtime(_) | ClientEvent::InteractionCancelled { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn run_turn(
    client: &RollClient,
    events: &mut mpsc::Receiver<ClientEvent>,
    thread: &ThreadId,
    text: &str,
) -> Vec<RuntimeEventEnvelope> {
    let started = client
        .start_turn(
            thread.clone(),
            TurnInput {
                text: text.into(),
                attachments: None,
            },
        )
        .await
        .unwrap();
    assert!(started.accepted);
    turn_events(events, &started.turn_id).await
}

fn unavailable(outcome: Result<impl std::fmt::Debug, ClientError>, method: Method) {
    match outcome {
        Err(ClientError::MethodUnavailable { method: m, .. }) if m == method => {}
        Err(ClientError::FeatureUnavailable { method: m, .. }) if m == method => {}
        other => panic!("{method} should be refused before sending: {other:?}"),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every method the version serves, through typed calls; those it does not serve are refused
/// before anything is sent.
async fn exercise_methods(
    client: &RollClient,
    events: &mut mpsc::Receiver<ClientEvent>,
    v: ProtocolVersion,
) {
    let version = v.as_str();

    let list = ThreadListParams {
        cursor: None,
        limit: Some(10),
    };
    let empty = client
        .call::<request::ThreadList>(list.clone())
        .await
        .unwrap();
    assert!(empty.items.is_empty());
    let thread = client
        .create_thread(Some("e2e".into()))
        .await
        .unwrap()
        .thread
        .id;
    let renamed = client
        .call::<request::ThreadRename>(ThreadRenameParams {
            request_id: fresh_request_id(),
            thread_id: thread.clone(),
            title: "renamed".into(),
        })
        .await
        .unwrap();
    assert_eq!(renamed.thread.title.as_deref(), Some("renamed"));
    let listed = client
        .call::<request::ThreadList>(list.clone())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let opened = client
        .call::<request::ThreadOpen>(ThreadIdParams {
            thread_id: thread.clone(),
        })
        .await
        .unwrap();
    assert_eq!(opened.thread.id, thread);
    assert_eq!(opened.event_cursor.is_some(), v >= ProtocolVersion::V1_3);
    let capabilities = client
        .call::<request::ThreadCapabilities>(ThreadIdParams {
            thread_id: thread.clone(),
        })
        .await
        .unwrap();
    assert_eq!(capabilities.manifest["agent"], "demo");

    // A tool, read back with operation.get.
    let tool = run_turn(client, events, &thread, "/tool search {\"q\":\"rust\"}").await;
    let operation_id = tool
        .iter()
        .find_map(|e| match &e.event {
            RuntimeEvent::ToolCompleted { operation_id, .. } => operation_id.clone(),
            _ => None,
        })
        .expect("the tool's operation id");
    let operation = client
        .call::<request::OperationGet>(OperationParams {
            thread_id: thread.clone(),
            operation_id: operation_id.clone(),
        })
        .await
        .unwrap()
        .operation
        .unwrap();
    assert_eq!(operation.tool_name, "search");
    assert_eq!(operation.outcome.kind.as_str(), "success");
    let snapshot = client
        .call::<request::ThreadSnapshot>(ThreadSnapshotParams {
            thread_id: thread.clone(),
            message_before_sequence: None,
            operation_before_sequence: None,
            limit: Some(10),
            recovery: None,
        })
        .await
        .unwrap();
    assert_eq!(snapshot.operations.items.len(), 1);

    // A slow turn, cancelled.
    let slow = client
        .start_turn(
            thread.clone(),
            TurnInput {
                text: "/slow 200".into(),
                attachments: None,
            },
        )
        .await
        .unwrap();
    let cancel = client
        .call::<request::TurnCancel>(TurnCancelParams {
            request_id: fresh_request_id(),
            thread_id: thread.clone(),
            turn_id: slow.turn_id.clone(),
        })
        .await
        .unwrap();
    assert!(cancel.cancelling);
    let ended = turn_events(events, &slow.turn_id).await;
    assert!(
        matches!(
            ended.last().unwrap().event,
            RuntimeEvent::TurnCancelled { .. }
        ),
        "{ended:?}"
    );

    // approval.respond is the write path of 1.0 only (the approvals test uses it).
    if v > ProtocolVersion::V1_0 {
        unavailable(
            client
                .call::<request::ApprovalRespond>(ApprovalRespondParams {
                    request_id: fresh_request_id(),
                    thread_id: thread.clone(),
                    turn_id: slow.turn_id.clone(),
                    approval_id: agentwire_roll::ids::ApprovalId::new(
                        uuid::Uuid::new_v4().to_string(),
                    )
                    .unwrap(),
                    decision: ApprovalVerdict::Approve,
                    reason: None,
                })
                .await,
            Method::ApprovalRespond,
        );
    }

    // runtime.events.resume from the start: every durable event, then the barrier.
    let resume = client
        .call::<request::RuntimeEventsResume>(RuntimeEventsResumeParams {
            thread_id: thread.clone(),
            after_cursor: None,
        })
        .await;
    if v >= ProtocolVersion::V1_3 {
        let barrier = resume.unwrap();
        let durable = tool
            .iter()
            .chain(&ended)
            .filter(|e| e.cursor.is_some())
            .count();
        assert_eq!(barrier.replayed_count, durable as u64);
        assert_eq!(
            barrier.through_cursor.as_ref(),
            ended.last().unwrap().cursor.as_ref()
        );
    } else {
        unavailable(resume, Method::RuntimeEventsResume);
    }

    // Attachments: staged in chunks, committed, sent with a turn; another released.
    let content: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let stage = |name: &str| AttachmentStageParams {
        request_id: fresh_request_id(),
        thread_id: thread.clone(),
        file_name: name.into(),
        media_type: AttachmentMediaType::ImagePng,
        bytes: content.len() as u64,
        sha_256: sha256_hex(&content),
        source: AttachmentSource::Chunks,
        source_path: None,
    };
    let staged = client
        .call::<request::AttachmentStage>(stage("plot.png"))
        .await;
    if v >= ProtocolVersion::V1_4 {
        use base64::Engine as _;
        let staged = staged.unwrap();
        assert_eq!(staged.state.as_str(), "staged");
        for (sequence, part) in content.chunks(2000).enumerate() {
            let progress = client
                .call::<request::AttachmentChunk>(AttachmentChunkParams {
                    request_id: fresh_request_id(),
                    thread_id: thread.clone(),
                    attachment_id: staged.attachment_id.clone(),
                    sequence: sequence as u64,
                    data_base_64: base64::engine::general_purpose::STANDARD.encode(part),
                })
                .await
                .unwrap();
            assert_eq!(progress.next_sequence, sequence as u64 + 1);
        }
        let committed = client
            .call::<request::AttachmentCommit>(AttachmentParams {
                request_id: fresh_request_id(),
                thread_id: thread.clone(),
                attachment_id: staged.attachment_id.clone(),
            })
            .await
            .unwrap();
        assert_eq!(committed.descriptor.bytes, content.len() as u64);
        let started = client
            .start_turn(
                thread.clone(),
                TurnInput {
                    text: "with a file".into(),
                    attachments: Some(vec![staged.attachment_id.clone()]),
                },
            )
            .await
            .unwrap();
        let with_file = turn_events(events, &started.turn_id).await;
        assert!(matches!(
            with_file.last().unwrap().event,
            RuntimeEvent::TurnCompleted
        ));
        let other = client
            .call::<request::AttachmentStage>(stage("other.png"))
            .await
            .unwrap();
        let released = client
            .call::<request::AttachmentRelease>(AttachmentParams {
                request_id: fresh_request_id(),
                thread_id: thread.clone(),
                attachment_id: other.attachment_id,
            })
            .await
            .unwrap();
        assert!(released.released);
    } else {
        unavailable(staged, Method::AttachmentStage);
    }

    // App output, read back with operation.result.get.
    if v >= ProtocolVersion::V1_5 {
        let app = run_turn(client, events, &thread, "/app").await;
        let operation_id: OperationId = app
            .iter()
            .find_map(|e| match &e.event {
                RuntimeEvent::ToolCompleted { operation_id, .. } => operation_id.clone(),
                _ => None,
            })
            .unwrap();
        let result = client
            .call::<request::OperationResultGet>(OperationParams {
                thread_id: thread.clone(),
                operation_id,
            })
            .await
            .unwrap()
            .result
            .unwrap();
        assert_eq!(
            serde_json::to_value(&result.output).unwrap()["data"]["city"],
            "Lisbon"
        );
    } else {
        unavailable(
            client
                .call::<request::OperationResultGet>(OperationParams {
                    thread_id: thread.clone(),
                    operation_id,
                })
                .await,
            Method::OperationResultGet,
        );
    }

    let detached = client
        .call::<request::ThreadDetach>(ThreadMutationParams {
            request_id: fresh_request_id(),
            thread_id: thread.clone(),
        })
        .await
        .unwrap();
    assert!(detached.detached);
    let deleted = client
        .call::<request::ThreadDelete>(ThreadMutationParams {
            request_id: fresh_request_id(),
            thread_id: thread.clone(),
        })
        .await
        .unwrap();
    assert!(deleted.deleted);
    let after = client.call::<request::ThreadList>(list).await.unwrap();
    assert!(after.items.is_empty(), "{version}: {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_serves_its_methods_through_typed_calls() {
    for version in VERSIONS {
        let v = ProtocolVersion::parse(version).unwrap();
        let (_dir, path) = store();
        let client = spawn(&path, Host::default().interactions());
        let session = client
            .initialize(InitializeOptions::default().versions([version]))
            .await
            .unwrap();
        assert_eq!(session.version, v);
        let expected: Vec<ServerRequestMethod> = v.server_request_methods().collect();
        assert_eq!(
            session.accepted.iter().copied().collect::<Vec<_>>(),
            expected,
            "{version}"
        );
        let mut events = client.events().unwrap();
        exercise_methods(&client, &mut events, v).await;
        let report = client.shutdown().await.unwrap();
        assert_eq!(report.stage, ShutdownStage::StdinClosed, "{version}");
        assert!(report.status.unwrap().success(), "{}", report.stderr_tail);
    }
}

/// Two approvals (approved, rejected) on the version's write path and, on 1.2+, a form, on a
/// new thread (returned).
async fn exercise_interactions(
    client: &RollClient,
    events: &mut mpsc::Receiver<ClientEvent>,
    host: &Host,
    v: ProtocolVersion,
) -> ThreadId {
    let version = v.as_str();
    let thread = client.create_thread(None).await.unwrap().thread.id;
    for (command, approve) in [("ls", true), ("rm -rf /tmp/x", false)] {
        let started = client
            .start_turn(
                thread.clone(),
                TurnInput {
                    text: format!("/approve {command}"),
                    attachments: None,
                },
            )
            .await
            .unwrap();
        let turn = started.turn_id;
        if v == ProtocolVersion::V1_0 {
            // 1.0: no server requests; the host answers the approval.required event.
            let required = loop {
                let item = tokio::time::timeout(STUCK, events.recv())
                    .await
                    .unwrap()
                    .unwrap();
                if let ClientEvent::Runtime(envelope) = item
                    && let RuntimeEvent::ApprovalRequired { approval } = envelope.event
                {
                    break approval;
                }
            };
            assert_eq!(required.preview["command"], command);
            let answer = client
                .call::<request::ApprovalRespond>(ApprovalRespondParams {
                    request_id: fresh_request_id(),
                    thread_id: thread.clone(),
                    turn_id: turn.clone(),
                    approval_id: required.id,
                    decision: if approve {
                        ApprovalVerdict::Approve
                    } else {
                        ApprovalVerdict::Reject
                    },
                    reason: None,
                })
                .await
                .unwrap();
            assert!(answer.resolved);
        }
        let events_of_turn = turn_events(events, &turn).await;
        let outcome = events_of_turn
            .iter()
            .find_map(|e| match &e.event {
                RuntimeEvent::ToolCompleted { outcome, .. } => outcome.clone(),
                _ => None,
            })
            .expect("the tool completed");
        assert_eq!(
            outcome.kind.as_str(),
            if approve { "success" } else { "user_rejected" },
            "{version} {command}"
        );
        if v >= ProtocolVersion::V1_1 {
            let resolution = events_of_turn
                .iter()
                .find_map(|e| match &e.event {
                    RuntimeEvent::ApprovalResolved { resolution, .. } => Some(resolution.clone()),
                    _ => None,
                })
                .expect("approval.resolved");
            let text = format!("{resolution:?}");
            assert!(
                text.contains(if approve { "approve" } else { "reject" }),
                "{text}"
            );
        }
        assert!(matches!(
            events_of_turn.last().unwrap().event,
            RuntimeEvent::TurnCompleted
        ));
    }
    let approvals = host.approvals.lock().unwrap().clone();
    if v == ProtocolVersion::V1_0 {
        assert!(approvals.is_empty(), "no server requests on 1.0");
    } else {
        assert_eq!(approvals.len(), 2, "{version}");
        for request in &approvals {
            assert_eq!(request.thread_id(), &thread);
            match (v, request) {
                (ProtocolVersion::V1_1, ApprovalRequest::Legacy { .. }) => {}
                (_, ApprovalRequest::Interaction { params, .. }) if v >= ProtocolVersion::V1_2 => {
                    assert!(params.turn_matches());
                }
                other => panic!("{version}: wrong shape {other:?}"),
            }
        }
    }

    if v >= ProtocolVersion::V1_2 {
        let asked = run_turn(client, events, &thread, "/ask Which region?").await;
        let reply = asked
            .iter()
            .find_map(|e| match &e.event {
                RuntimeEvent::MessageCompleted { text, .. } => Some(text.clone()),
                _ => None,
            })
            .unwrap();
        assert!(reply.contains("eu-west"), "{reply}");
        assert!(matches!(
            asked.last().unwrap().event,
            RuntimeEvent::TurnCompleted
        ));
        assert_eq!(host.forms.lock().unwrap().len(), 1);
    }
    thread
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_user_input_are_answered_by_the_clients_handlers() {
    for version in VERSIONS {
        let v = ProtocolVersion::parse(version).unwrap();
        let (_dir, path) = store();
        let host = Host::default();
        let client = spawn(&path, host.interactions());
        client
            .initialize(InitializeOptions::default().versions([version]))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        exercise_interactions(&client, &mut events, &host, v).await;
        let report = client.shutdown().await.unwrap();
        assert!(report.status.unwrap().success(), "{}", report.stderr_tail);
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_finds_nothing_wrong_in_the_clients_sessions() {
    let bin = BIN;
    for version in VERSIONS {
        let v = ProtocolVersion::parse(version).unwrap();
        let (dir, path) = store();
        let record = dir.path().join("session.ndjson");
        let runtime = format!(
            "{} serve --stdio --store {}",
            shell_quote(bin),
            shell_quote(&format!("sqlite:{}", path.display()))
        );
        let host = Host::default();
        let options = ClientOptions::new(bin)
            .args(["proxy", "--stdio", &runtime, "--record"])
            .arg(&record)
            .env("AGENTWIRE_LOG", "warn")
            .interactions(host.interactions());
        let client = RollClient::spawn(options).unwrap();
        client
            .initialize(InitializeOptions::default().versions([version]))
            .await
            .unwrap();
        let mut events = client.events().unwrap();
        exercise_methods(&client, &mut events, v).await;
        let thread = exercise_interactions(&client, &mut events, &host, v).await;
        if v >= ProtocolVersion::V1_3 {
            let last = last_sequence(&client, &thread).await;
            let mut follower = client
                .follow(thread.clone(), FollowOptions::after(None))
                .unwrap();
            let (all, error) = take_events(&mut follower, |taken| {
                taken.last().map(sequence) == Some(last)
            })
            .await;
            assert!(error.is_none(), "{error:?}");
            assert_eq!(all.len() as u64, last + 1);
        }
        let report = client.shutdown().await.unwrap();
        assert_eq!(report.stage, ShutdownStage::StdinClosed);
        assert!(report.status.unwrap().success(), "{}", report.stderr_tail);

        let text = std::fs::read_to_string(&record).unwrap();
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(records.len() > 20, "{version}: {} records", records.len());
        for direction in ["host->runtime", "runtime->host"] {
            assert!(records.iter().any(|r| r["dir"] == direction));
        }
        let flagged: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["violations"] != serde_json::json!([]))
            .collect();
        assert!(flagged.is_empty(), "{version}: {flagged:#?}");
    }
}

/// Takes items from a follower until `enough` says stop or it ends; returns what it took and
/// the error that ended it, if one did.
async fn take_events(
    follower: &mut agentwire_client::roll::ThreadFollower,
    mut enough: impl FnMut(&[RuntimeEventEnvelope]) -> bool,
) -> (Vec<RuntimeEventEnvelope>, Option<ClientError>) {
    let mut taken = Vec::new();
    loop {
        if enough(&taken) {
            return (taken, None);
        }
        match tokio::time::timeout(STUCK, follower.next()).await {
            Err(_) => panic!("the follower stalled after {} events", taken.len()),
            Ok(Ok(Followed::Event(envelope))) => taken.push(*envelope),
            Ok(Ok(reset @ Followed::Reset { .. })) => panic!("unexpected {reset:?}"),
            Ok(Err(error)) => return (taken, Some(error)),
        }
    }
}

fn sequence(envelope: &RuntimeEventEnvelope) -> u64 {
    envelope.cursor.as_ref().unwrap().sequence()
}

/// The sequence of the thread's last durable event, from a recovery snapshot.
async fn last_sequence(client: &RollClient, thread: &ThreadId) -> u64 {
    let snapshot = client
        .call::<request::ThreadSnapshot>(ThreadSnapshotParams {
            thread_id: thread.clone(),
            message_before_sequence: None,
            operation_before_sequence: None,
            limit: Some(1),
            recovery: Some(true),
        })
        .await
        .unwrap();
    snapshot.event_cursor.flatten().unwrap().sequence()
}

/// Killed early in the burst, in its middle, and well into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_followed_across_a_killed_runtime_without_gap_or_repeat() {
    let _heavy = crate::support::HEAVY.lock().await;
    for kill_at in [10, 30_000, 60_000] {
        follow_across_a_kill(kill_at).await;
    }
}

/// Starts `/burst 100000`, kills the runtime with SIGKILL once its log holds `kill_at` events
/// of the thread (read from the store beside it: the follower lags the commits by an amount
/// that depends on the two processes' speeds, so its count cannot say the burst still runs),
/// starts it again on the same store, and follows on from the persisted checkpoint.
async fn follow_across_a_kill(kill_at: u64) {
    let (_dir, path) = store();
    let client = spawn(&path, Interactions::new());
    client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    let thread = client.create_thread(None).await.unwrap().thread.id;
    let opened = client
        .call::<request::ThreadOpen>(ThreadIdParams {
            thread_id: thread.clone(),
        })
        .await
        .unwrap();
    let mut follower = client
        .follow(
            thread.clone(),
            FollowOptions::after(opened.event_cursor.flatten()),
        )
        .unwrap();
    client
        .start_turn(
            thread.clone(),
            TurnInput {
                // Long enough that the kill comes while it runs, at any append rate.
                text: "/burst 100000".into(),
                attachments: None,
            },
        )
        .await
        .unwrap();
    // Once the log holds `kill_at` events of the thread, the runtime is killed.
    let log = agentwire_events::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let log_thread = agentwire_events::ThreadId::new(thread.as_str()).unwrap();
    let mut before = Vec::new();
    loop {
        let head = log
            .thread(&log_thread)
            .await
            .unwrap()
            .map_or(0, |t| t.next_seq);
        if head >= kill_at {
            break;
        }
        // The follower goes on taking what arrives meanwhile.
        match tokio::time::timeout(Duration::from_millis(2), follower.next()).await {
            Err(_) => {}
            Ok(Ok(Followed::Event(envelope))) => before.push(*envelope),
            Ok(other) => panic!("unexpected {other:?} before the kill"),
        }
    }
    log.close().await.unwrap();
    let pid = client.pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // What was already taken from the connection is still handed out, then the close.
    let (rest, error) = take_events(&mut follower, |_| false).await;
    before.extend(rest);
    assert!(
        matches!(error, Some(ClientError::Closed { .. })),
        "{error:?}"
    );
    assert!(
        !before.iter().any(|e| is_terminal(&e.event)),
        "the burst ended before the runtime was killed"
    );
    let checkpoint = follower.checkpoint();
    let instance = follower.runtime_instance();
    assert_eq!(
        checkpoint.as_ref().map(EventCursor::sequence),
        before.last().map(sequence)
    );
    drop(follower);
    drop(client);

    // Started again on the same store, followed from the persisted checkpoint. The resume
    // answers once up to the whole burst (100,000 events) is replayed, which on a loaded
    // machine takes longer than the default request timeout.
    let client = RollClient::spawn(
        options(&path, Interactions::new()).request_timeout(Some(Duration::from_secs(300))),
    )
    .unwrap();
    let session = client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    assert_ne!(session.result.runtime_instance_id.as_str(), instance);
    let last = last_sequence(&client, &thread).await;
    let mut follower = client
        .follow(
            thread.clone(),
            FollowOptions {
                after: checkpoint,
                runtime_instance: Some(instance),
                // The runtime's cursors survive its restarts, so a resume is enough; the
                // replay is staged whole however far the burst got before the kill.
                recovery: RecoveryConfig {
                    snapshot_on_new_instance: false,
                    max_staged_events: 200_000,
                    max_staged_bytes: 512 * 1024 * 1024,
                },
            },
        )
        .unwrap();
    let (after, error) = take_events(&mut follower, |taken| {
        taken.last().map(sequence) == Some(last)
    })
    .await;
    assert!(error.is_none(), "{error:?}");
    // The restart ended the interrupted turn.
    assert!(
        matches!(after.last().unwrap().event, RuntimeEvent::TurnFailed { .. }),
        "{:?}",
        after.last()
    );

    let seen: Vec<&RuntimeEventEnvelope> = before.iter().chain(&after).collect();
    let sequences: Vec<u64> = seen.iter().map(|e| sequence(e)).collect();
    let expected: Vec<u64> = (0..=last).collect();
    assert_eq!(sequences, expected, "every durable event once, in order");

    // The same events, by id, as a replay of the whole log, staged whole however far the burst
    // got before the kill (the default window of 10,000 events would fall back to a snapshot).
    drop(follower);
    let mut everything = client
        .follow(
            thread.clone(),
            FollowOptions {
                recovery: RecoveryConfig {
                    max_staged_events: 200_000,
                    max_staged_bytes: 512 * 1024 * 1024,
                    ..RecoveryConfig::default()
                },
                ..FollowOptions::after(None)
            },
        )
        .unwrap();
    let (all, error) = take_events(&mut everything, |taken| {
        taken.last().map(sequence) == Some(last)
    })
    .await;
    assert!(error.is_none(), "{error:?}");
    let ids = |events: &[&RuntimeEventEnvelope]| -> Vec<String> {
        events
            .iter()
            .map(|e| e.event_id.as_ref().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&seen), ids(&all.iter().collect::<Vec<_>>()));
    let report = client.shutdown().await.unwrap();
    assert!(report.status.unwrap().success(), "{}", report.stderr_tail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trimmed_checkpoint_falls_back_to_a_snapshot_and_events_continue() {
    let (_dir, path) = store();
    let client = spawn(&path, Interactions::new());
    client
        .initialize(InitializeOptions::default())
        .await
        .unwrap();
    let mut events = client.events().unwrap();
    let thread = client.create_thread(None).await.unwrap().thread.id;
    let first = run_turn(&client, &mut events, &thread, "one").await;
    let old = first.iter().find_map(|e| e.cursor.clone()).unwrap();
    for text in ["two", "three"] {
        run_turn(&client, &mut events, &thread, text).await;
    }
    let trimmed = std::process::Command::new(BIN)
        .args(["events", "trim", "--store"])
        .arg(format!("sqlite:{}", path.display()))
        .args(["--thread", thread.as_str(), "--max-records", "3"])
        .output()
        .unwrap();
    assert!(
        trimmed.status.success(),
        "{}",
        String::from_utf8_lossy(&trimmed.stderr)
    );
    let last = last_sequence(&client, &thread).await;

    let mut follower = client
        .follow(thread.clone(), FollowOptions::after(Some(old)))
        .unwrap();
    let item = tokio::time::timeout(STUCK, follower.next())
        .await
        .unwrap()
        .unwrap();
    let Followed::Reset {
        reason,
        checkpoint,
        snapshot,
    } = item
    else {
        panic!("expected a reset, got {item:?}");
    };
    assert_eq!(reason, FallbackReason::CursorExpired);
    assert!(snapshot.is_recovery());
    assert_eq!(checkpoint.as_ref().map(EventCursor::sequence), Some(last));
    assert_eq!(snapshot.event_cursor.flatten(), checkpoint);

    // Events go on from the snapshot's cursor.
    let turn = fresh_turn_id();
    client
        .call::<request::TurnStart>(agentwire_roll::types::TurnStartParams {
            request_id: fresh_request_id(),
            thread_id: thread.clone(),
            turn_id: turn.clone(),
            input: TurnInput {
                text: "four".into(),
                attachments: None,
            },
        })
        .await
        .unwrap();
    let (next, error) = take_events(&mut follower, |taken| {
        taken.last().is_some_and(|e| is_terminal(&e.event))
    })
    .await;
    assert!(error.is_none(), "{error:?}");
    let sequences: Vec<u64> = next.iter().map(sequence).collect();
    let expected: Vec<u64> = (last + 1..=last + next.len() as u64).collect();
    assert_eq!(sequences, expected);
    assert!(next.iter().all(|e| e.turn_id.as_ref() == Some(&turn)));
    let report = client.shutdown().await.unwrap();
    assert!(report.status.unwrap().success(), "{}", report.stderr_tail);
}

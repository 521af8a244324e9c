//! Every legal and illegal sequence of the negotiation state machine, and the client helpers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::constants::{MIB, MIN_CLIENT_INBOUND_FRAME_BYTES_V13};
use agentwire_roll::negotiation::{
    CapabilityAck, Connection, ConnectionState, NegotiationError, advertisable_versions,
    capability_ack, check_advertisement, check_capability_ack, negotiate_version,
    outbound_frame_limit,
};
use agentwire_roll::{Method, ProtocolVersion, RollErrorCode, ServerRequestMethod};

use ProtocolVersion::*;
use ServerRequestMethod::*;

fn initialized(version: &str) -> Connection {
    let mut connection = Connection::new();
    connection.initialize(&[version]).unwrap();
    connection
}

#[test]
fn version_is_the_first_supported_in_client_order() {
    assert_eq!(
        negotiate_version(&["2.0", "1.3", "1.5"], &agentwire_roll::SUPPORTED_VERSIONS),
        Ok(V1_3)
    );
    assert_eq!(negotiate_version(&["1.5", "1.4"], &[V1_4, V1_3]), Ok(V1_4));
    assert_eq!(
        negotiate_version(&["1.0"], &agentwire_roll::SUPPORTED_VERSIONS),
        Ok(V1_0)
    );
    let err = negotiate_version(&["2.0", "1.30"], &agentwire_roll::SUPPORTED_VERSIONS).unwrap_err();
    assert_eq!(
        err,
        NegotiationError::VersionUnsupported {
            offered: vec!["2.0".into(), "1.30".into()]
        }
    );
    assert_eq!(
        err.roll_code(),
        Some(RollErrorCode::PROTOCOL_VERSION_UNSUPPORTED)
    );
    assert_eq!(err.jsonrpc_code(), -32000);
}

#[test]
fn calls_before_initialize_fail_and_initialize_happens_once() {
    let mut connection = Connection::new();
    assert_eq!(connection.state(), ConnectionState::AwaitingInitialize);
    let err = connection.check_call("thread.list").unwrap_err();
    assert_eq!(err, NegotiationError::InitializeRequired);
    assert_eq!(err.roll_code(), Some(RollErrorCode::INITIALIZE_REQUIRED));
    assert_eq!(connection.check_call("initialize"), Ok(Method::Initialize));
    assert_eq!(
        connection
            .set_capabilities(1, &["approval.request"])
            .unwrap_err(),
        NegotiationError::InitializeRequired
    );
    assert!(connection.check_server_request(ApprovalRequest).is_err());
    // A failed initialize leaves the connection waiting for another.
    assert!(connection.initialize(&["9.9"]).is_err());
    assert_eq!(connection.state(), ConnectionState::AwaitingInitialize);
    assert_eq!(connection.initialize(&["1.2"]), Ok(V1_2));
    let err = connection.initialize(&["1.5"]).unwrap_err();
    assert_eq!(err, NegotiationError::AlreadyInitialized);
    assert_eq!(err.roll_code(), Some(RollErrorCode::CAPABILITY_UNAVAILABLE));
    assert_eq!(
        connection.check_call("initialize").unwrap_err(),
        NegotiationError::AlreadyInitialized
    );
    assert_eq!(connection.version(), Some(V1_2));
}

#[test]
fn v1_0_has_no_server_requests_and_keeps_approval_respond() {
    let mut connection = initialized("1.0");
    assert_eq!(connection.state(), ConnectionState::InteractionReady);
    assert_eq!(
        connection.check_call("approval.respond"),
        Ok(Method::ApprovalRespond)
    );
    assert!(matches!(
        connection.check_server_request(ApprovalRequest),
        Err(NegotiationError::ServerRequestNotAllowed { .. })
    ));
    let err = connection
        .set_capabilities(1, &["approval.request"])
        .unwrap_err();
    assert!(matches!(err, NegotiationError::MethodNotFound { .. }));
    assert_eq!(err.jsonrpc_code(), -32601);
    assert!(matches!(
        connection.check_call("client.capabilities.set"),
        Err(NegotiationError::MethodNotFound { .. })
    ));
}

#[test]
fn v1_1_is_ready_at_once_with_the_mandatory_approval_handler() {
    let connection = initialized("1.1");
    assert_eq!(connection.state(), ConnectionState::InteractionReady);
    assert_eq!(connection.accepted(), &[ApprovalRequest]);
    assert_eq!(connection.check_server_request(ApprovalRequest), Ok(()));
    assert!(connection.check_server_request(UserInputRequest).is_err());
    let err = connection.check_call("approval.respond").unwrap_err();
    assert!(matches!(
        err,
        NegotiationError::CapabilityUnavailable { .. }
    ));
    assert_eq!(err.roll_code(), Some(RollErrorCode::CAPABILITY_UNAVAILABLE));
}

#[test]
fn v1_2_plus_waits_for_the_ack_before_interactions() {
    for version in ["1.2", "1.3", "1.4", "1.5"] {
        let mut connection = initialized(version);
        assert_eq!(connection.state(), ConnectionState::AwaitingCapabilities);
        assert!(
            connection.check_server_request(ApprovalRequest).is_err(),
            "{version}"
        );
        assert_eq!(connection.check_call("thread.list"), Ok(Method::ThreadList));
        let update = connection
            .set_capabilities(
                1,
                &["future.request", "userInput.request", "approval.request"],
            )
            .unwrap();
        assert_eq!(
            update.ack,
            CapabilityAck {
                revision: 1,
                accepted: vec![ApprovalRequest, UserInputRequest]
            }
        );
        assert!(update.revoked.is_empty());
        assert!(!update.retry);
        assert_eq!(connection.state(), ConnectionState::InteractionReady);
        assert_eq!(connection.check_server_request(UserInputRequest), Ok(()));
    }
}

#[test]
fn empty_ack_is_legal_and_still_ready() {
    let mut connection = initialized("1.2");
    let update = connection.set_capabilities(1, &[] as &[&str]).unwrap();
    assert_eq!(update.ack.accepted, vec![]);
    assert_eq!(connection.state(), ConnectionState::InteractionReady);
    assert!(connection.check_server_request(ApprovalRequest).is_err());
}

#[test]
fn revisions_are_monotonic_with_idempotent_retry() {
    let mut connection = initialized("1.3");
    connection
        .set_capabilities(2, &["approval.request", "userInput.request"])
        .unwrap();
    // Same revision, same set (any order): a retry.
    let retry = connection
        .set_capabilities(2, &["userInput.request", "approval.request"])
        .unwrap();
    assert!(retry.retry);
    assert_eq!(retry.ack.accepted, vec![ApprovalRequest, UserInputRequest]);
    // Same revision, different set: conflict.
    let err = connection
        .set_capabilities(2, &["approval.request"])
        .unwrap_err();
    assert_eq!(
        err,
        NegotiationError::RevisionConflict {
            revision: 2,
            current: 2
        }
    );
    assert_eq!(
        err.roll_code(),
        Some(RollErrorCode::CAPABILITY_REVISION_CONFLICT)
    );
    assert_eq!(err.jsonrpc_code(), -32000);
    // Lower revision: conflict.
    assert_eq!(
        connection
            .set_capabilities(1, &["approval.request", "userInput.request"])
            .unwrap_err(),
        NegotiationError::RevisionConflict {
            revision: 1,
            current: 2
        }
    );
    // Higher revision revokes userInput.request.
    let update = connection
        .set_capabilities(5, &["approval.request"])
        .unwrap();
    assert_eq!(update.revoked, vec![UserInputRequest]);
    assert_eq!(connection.revision(), 5);
    assert!(connection.check_server_request(UserInputRequest).is_err());
    assert_eq!(connection.check_server_request(ApprovalRequest), Ok(()));
}

#[test]
fn invalid_capability_params_are_rejected_without_changing_state() {
    let mut connection = initialized("1.2");
    let cases: Vec<(u64, Vec<String>)> = vec![
        (0, vec![]),
        (
            1,
            vec!["approval.request".into(), "approval.request".into()],
        ),
        (1, vec![String::new()]),
        (1, vec!["x".repeat(101)]),
        (1, (0..65).map(|i| format!("m{i}")).collect()),
    ];
    for (revision, methods) in cases {
        let err = connection.set_capabilities(revision, &methods).unwrap_err();
        assert!(
            matches!(err, NegotiationError::InvalidCapabilities(_)),
            "{methods:?}"
        );
        assert_eq!(err.roll_code(), Some(RollErrorCode::INVALID_PARAMS));
        assert_eq!(connection.state(), ConnectionState::AwaitingCapabilities);
    }
    // The boundaries themselves are fine.
    let names: Vec<String> = (0..64).map(|i| format!("{i}{}", "x".repeat(98))).collect();
    assert!(connection.set_capabilities(1, &names).is_ok());
}

#[test]
fn ack_is_the_intersection_in_registry_order() {
    assert_eq!(
        capability_ack(V1_5, 3, &["userInput.request", "x", "approval.request"]),
        CapabilityAck {
            revision: 3,
            accepted: vec![ApprovalRequest, UserInputRequest]
        }
    );
    assert_eq!(
        capability_ack(V1_2, 1, &["future.request"]).accepted,
        vec![]
    );
}

#[test]
fn client_checks_the_ack() {
    let requested = ["future.request", "approval.request", "userInput.request"];
    let accepted = check_capability_ack(1, &requested, 1, &["userInput.request"]).unwrap();
    assert_eq!(
        accepted.into_iter().collect::<Vec<_>>(),
        vec![UserInputRequest]
    );
    assert_eq!(
        check_capability_ack(1, &requested, 2, &[] as &[&str]).unwrap_err(),
        NegotiationError::AckRevisionMismatch {
            requested: 1,
            got: 2
        }
    );
    assert_eq!(
        check_capability_ack(1, &["approval.request"], 1, &["userInput.request"]).unwrap_err(),
        NegotiationError::AckUnrequestedMethod("userInput.request".into())
    );
    assert_eq!(
        check_capability_ack(1, &["future.request"], 1, &["future.request"]).unwrap_err(),
        NegotiationError::AckUnrequestedMethod("future.request".into())
    );
}

#[test]
fn the_17_mib_rule() {
    assert_eq!(MIN_CLIENT_INBOUND_FRAME_BYTES_V13, 17 * MIB);
    let all = [ApprovalRequest, UserInputRequest];
    assert_eq!(
        advertisable_versions(17 * MIB, &all),
        vec![V1_5, V1_4, V1_3, V1_2, V1_1, V1_0]
    );
    assert_eq!(
        advertisable_versions(17 * MIB - 1, &all),
        vec![V1_2, V1_1, V1_0]
    );
    // Without an approval handler 1.1 may not be advertised (1.2+ negotiate handlers).
    assert_eq!(
        advertisable_versions(17 * MIB, &[]),
        vec![V1_5, V1_4, V1_3, V1_2, V1_0]
    );
    let err = check_advertisement(&["1.3", "1.2"], 4 * MIB, &all).unwrap_err();
    assert_eq!(
        err,
        NegotiationError::InboundBudgetTooSmall {
            version: V1_3,
            budget: 4 * MIB,
            required: 17 * MIB
        }
    );
    assert_eq!(err.roll_code(), Some(RollErrorCode::INVALID_PARAMS));
    assert!(check_advertisement(&["1.2", "2.0"], 4 * MIB, &all).is_ok());
    assert_eq!(
        check_advertisement(&["1.1"], 4 * MIB, &[]).unwrap_err(),
        NegotiationError::MissingRequiredHandler {
            version: V1_1,
            method: ApprovalRequest
        }
    );
}

#[test]
fn outbound_limit_is_the_smaller_budget() {
    assert_eq!(outbound_frame_limit(17 * MIB, 4 * MIB), 4 * MIB);
    assert_eq!(outbound_frame_limit(MIB, 4 * MIB), MIB);
}

#[test]
fn a_runtime_supporting_fewer_versions() {
    let mut connection = Connection::with_supported(&[V1_4, V1_3]);
    assert_eq!(connection.initialize(&["1.5", "1.4"]), Ok(V1_4));
    assert!(matches!(
        connection.check_call("operation.result.get"),
        Err(NegotiationError::MethodNotFound { .. })
    ));
    assert_eq!(
        connection.check_call("attachment.stage"),
        Ok(Method::AttachmentStage)
    );
}

#[test]
fn error_codes_are_stable() {
    let errors = [
        (
            NegotiationError::AlreadyInitialized,
            "roll.negotiation.already-initialized",
        ),
        (
            NegotiationError::InitializeRequired,
            "roll.negotiation.initialize-required",
        ),
        (
            NegotiationError::RevisionConflict {
                revision: 1,
                current: 2,
            },
            "roll.negotiation.revision-conflict",
        ),
    ];
    for (error, code) in errors {
        assert_eq!(error.code(), code);
    }
}

//! Scenarios of the handshake: version negotiation, capability revisions and the ACK barrier
//! before interactions.

use std::time::Duration;

use agentwire_roll::{ProtocolVersion, RollErrorCode, SUPPORTED_VERSIONS};
use serde_json::{Value, json};

use super::{Context, HANDLERS, QUIET_PERIOD};
use crate::conformance::wire::{Failure, Frame, ensure, event_type, excerpt};

/// How long the suite gives a turn to ask for approval before it sends the capabilities.
const ASK_WINDOW: Duration = Duration::from_secs(2);

fn before_set(frame: &Frame) -> Failure {
    Failure::new(format!(
        "frame {}, an approval.request, was written before client.capabilities.set was sent: {}",
        frame.index,
        excerpt(&frame.value)
    ))
}

/// The versions `initialize` offers in the first-pick check: an unknown one, the version
/// under test, then up to two other tested versions.
fn offer(context: &Context) -> Vec<String> {
    let mut offered = vec!["2.0".to_owned(), context.version.as_str().to_owned()];
    offered.extend(
        context
            .tested
            .iter()
            .rev()
            .filter(|v| **v != context.version)
            .take(2)
            .map(|v| v.as_str().to_owned()),
    );
    offered
}

pub(super) async fn negotiation(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.spawn()?;
    wire.refused(
        "thread.list",
        json!({"limit": 1}),
        RollErrorCode::INITIALIZE_REQUIRED,
    )
    .await?;
    let none = ["2.0".to_owned(), "0.9".to_owned()];
    let refused = wire.initialize(&none).await?;
    match refused.result {
        Ok(result) => {
            return Err(Failure::new(format!(
                "initialize offering {none:?} succeeded with {}; expected PROTOCOL_VERSION_UNSUPPORTED",
                excerpt(&result)
            )));
        }
        Err(error) => ensure!(
            error.roll_code.as_deref() == Some("PROTOCOL_VERSION_UNSUPPORTED")
                && error.code == RollErrorCode::PROTOCOL_VERSION_UNSUPPORTED.jsonrpc_code(),
            "initialize offering {none:?} answered {error}; expected PROTOCOL_VERSION_UNSUPPORTED (-32000)"
        ),
    }
    // A refused initialize leaves the connection uninitialized: the client may try again.
    let offered = offer(context);
    let answer = wire.initialize(&offered).await?;
    let result = answer.result.map_err(|error| {
        Failure::new(format!(
            "initialize offering {offered:?} answered {error} (after a refused initialize the connection is still uninitialized)"
        ))
    })?;
    ensure!(
        result["protocolVersion"] == version.as_str(),
        "initialize offering {offered:?} answered protocolVersion {}; the first offered version the runtime supports is {version}",
        result["protocolVersion"]
    );
    let keys: Vec<&str> = result["limits"]
        .as_object()
        .map(|l| l.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for key in version.limits_keys() {
        ensure!(
            keys.contains(key),
            "the initialize result of {version} has no limits.{key}"
        );
    }
    let instance = result["runtimeInstanceId"].clone();
    wire.refused(
        "initialize",
        json!({"protocolVersions": [latest_other(version)], "client": {"name": "agentwire-conformance", "version": "1"}}),
        RollErrorCode::CAPABILITY_UNAVAILABLE,
    )
    .await?;
    // Nothing changed: still the version negotiated first, still working.
    if version.capabilities().server_request_capability_negotiation {
        let ack = wire
            .ok(
                "client.capabilities.set",
                json!({"revision": 1, "serverRequestMethods": HANDLERS}),
            )
            .await?;
        ensure!(
            ack["revision"] == 1,
            "client.capabilities.set revision 1 was acknowledged as revision {}",
            ack["revision"]
        );
    }
    let thread = wire.create_thread("negotiation").await?;
    let turn = wire.start_turn(&thread, &context.script.text).await?;
    let events = wire.turn_events(&thread, &turn).await?;
    for envelope in &events {
        if let Some(answered) = envelope.get("protocolVersion") {
            ensure!(
                answered == version.as_str() || version < ProtocolVersion::V1_2,
                "after a second initialize an event names protocolVersion {answered}, not {version}"
            );
        }
        ensure!(
            envelope["runtimeInstanceId"] == instance,
            "an event names runtimeInstanceId {}, initialize answered {instance}",
            envelope["runtimeInstanceId"]
        );
    }
    wire.close().await;
    Ok(())
}

/// Another supported version to offer in a second `initialize`.
fn latest_other(version: ProtocolVersion) -> &'static str {
    SUPPORTED_VERSIONS
        .into_iter()
        .find(|v| *v != version)
        .map_or("1.0", ProtocolVersion::as_str)
}

pub(super) async fn capabilities(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.spawn()?;
    let answer = wire.initialize(&[version.as_str().to_owned()]).await?;
    answer.result.map_err(|error| {
        Failure::new(format!(
            "initialize offering only {version} answered {error}"
        ))
    })?;
    let set = |revision: u64, methods: &[&str]| json!({"revision": revision, "serverRequestMethods": methods});
    let expect_ack = |ack: &Value, revision: u64, accepted: &[&str], request: &Value| {
        let expected = json!({"revision": revision, "acceptedServerRequestMethods": accepted});
        if *ack == expected {
            Ok(())
        } else {
            Err(Failure::new(format!(
                "client.capabilities.set {} answered {}; expected {expected} (the intersection with the registry, in registry order)",
                excerpt(request),
                excerpt(ack)
            )))
        }
    };
    let first = set(
        1,
        &["future.request", "userInput.request", "approval.request"],
    );
    let ack = wire.ok("client.capabilities.set", first.clone()).await?;
    expect_ack(&ack, 1, &HANDLERS, &first)?;
    let retry = wire.ok("client.capabilities.set", first.clone()).await?;
    ensure!(
        retry == ack,
        "retrying client.capabilities.set with the same revision and set answered {}, the first time {}",
        excerpt(&retry),
        excerpt(&ack)
    );
    let reordered = set(
        1,
        &["approval.request", "future.request", "userInput.request"],
    );
    let again = wire
        .ok("client.capabilities.set", reordered.clone())
        .await?;
    expect_ack(&again, 1, &HANDLERS, &reordered)?;
    wire.refused(
        "client.capabilities.set",
        set(1, &["approval.request"]),
        RollErrorCode::CAPABILITY_REVISION_CONFLICT,
    )
    .await?;
    let second = set(2, &["userInput.request"]);
    let ack = wire.ok("client.capabilities.set", second.clone()).await?;
    expect_ack(&ack, 2, &["userInput.request"], &second)?;
    wire.refused(
        "client.capabilities.set",
        set(1, &["userInput.request"]),
        RollErrorCode::CAPABILITY_REVISION_CONFLICT,
    )
    .await?;
    let third = set(3, &[]);
    let ack = wire.ok("client.capabilities.set", third.clone()).await?;
    expect_ack(&ack, 3, &[], &third)?;
    wire.refused(
        "client.capabilities.set",
        set(0, &[]),
        RollErrorCode::INVALID_PARAMS,
    )
    .await?;
    wire.refused(
        "client.capabilities.set",
        set(4, &["approval.request", "approval.request"]),
        RollErrorCode::INVALID_PARAMS,
    )
    .await?;
    let fourth = set(4, &["future.request"]);
    let ack = wire.ok("client.capabilities.set", fourth.clone()).await?;
    expect_ack(&ack, 4, &[], &fourth)?;
    wire.close().await;
    Ok(())
}

pub(super) async fn no_interaction_before_ack(context: &Context) -> Result<(), Failure> {
    let version = context.version;
    let mut wire = context.spawn()?;
    let answer = wire.initialize(&[version.as_str().to_owned()]).await?;
    answer.result.map_err(|error| {
        Failure::new(format!(
            "initialize offering only {version} answered {error}"
        ))
    })?;
    let thread = wire.create_thread("before the ACK").await?;
    let turn = wire.start_turn(&thread, &context.script.approval).await?;
    // The runtime may record the approval (approval.required is durable and view-only) but may
    // not ask for it yet.
    let asked = |f: &Frame| f.is_server_request("approval.request");
    let early = wire
        .wait_within(ASK_WINDOW, |f| {
            asked(f)
                || f.event_of(&thread)
                    .is_some_and(|e| e["turnId"] == turn && event_type(e) == "approval.required")
        })
        .await?;
    if let Some(frame) = early.filter(|f| asked(f)) {
        return Err(before_set(&frame));
    }
    wire.settle(QUIET_PERIOD).await?;
    if let Some(frame) = wire.inbox().find(|f| asked(f)) {
        return Err(before_set(frame));
    }
    let id = wire
        .request(
            "client.capabilities.set",
            json!({"revision": 1, "serverRequestMethods": ["approval.request"]}),
        )
        .await?;
    let ack = wire.answer(id).await?;
    let ack_result = ack
        .result
        .map_err(|error| Failure::new(format!("client.capabilities.set answered {error}")))?;
    ensure!(
        ack_result["acceptedServerRequestMethods"] == json!(["approval.request"]),
        "client.capabilities.set [approval.request] answered {}",
        excerpt(&ack_result)
    );
    // Only frames read before the ACK count: the inbox may already hold frames that followed
    // it in the same read.
    if let Some(early) = wire.inbox().find(|f| f.index < ack.index && asked(f)) {
        return Err(Failure::new(format!(
            "frame {}, an approval.request, was written before the capability ACK (frame {})",
            early.index, ack.index
        )));
    }
    let request = wire
        .wait_for(
            &format!("the approval.request of turn {turn} after the capability ACK"),
            asked,
        )
        .await?;
    ensure!(
        request.index > ack.index,
        "frame {}, the approval.request, came before the capability ACK (frame {})",
        request.index,
        ack.index
    );
    ensure!(
        request.params()["turnId"] == turn && request.params()["threadId"] == thread,
        "the approval.request names thread {} turn {}, not the turn that asked ({thread}, {turn})",
        request.params()["threadId"],
        request.params()["turnId"]
    );
    let id = request.id().clone();
    wire.respond(&id, json!({"decision": "approve"})).await?;
    let events = wire.turn_events(&thread, &turn).await?;
    let last = events.last().map(event_type).unwrap_or_default();
    ensure!(
        last == "turn.completed",
        "the approved turn ended with {last}, not turn.completed"
    );
    wire.close().await;
    Ok(())
}

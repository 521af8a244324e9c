//! Down-projection to older wire versions: snapshots, event envelopes, operation views,
//! `initialize` results, server-request params, cancel notifications, and whole messages. Every
//! projected message is checked against the target version's export.

use serde_json::{Map, Value, json};

use crate::schema::{self, SchemaIssue};
use crate::version::{Feature, Method, ProtocolVersion, ServerRequestMethod};

/// Why a value could not be projected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectionError {
    /// The target version cannot carry this value at all (e.g. `userInput.request` to 1.1,
    /// anything server-initiated to 1.0, `approval.resolved` to 1.0).
    #[error("{what} cannot be projected to {to}")]
    Unsupported { what: String, to: ProtocolVersion },
    /// The target is newer than the source; projection only goes down.
    #[error("cannot project up from {from} to {to}")]
    Upward {
        from: ProtocolVersion,
        to: ProtocolVersion,
    },
    /// The input is not a valid message of its source version.
    #[error("the input is not valid under {version}")]
    InvalidInput {
        version: ProtocolVersion,
        issues: Vec<SchemaIssue>,
    },
    /// The projected message does not validate under the target (a defect of the rules).
    #[error("the projection is not valid under {version}")]
    InvalidOutput {
        version: ProtocolVersion,
        issues: Vec<SchemaIssue>,
    },
    /// A 1.2+ cancel cannot become a 1.1 cancel without the JSON-RPC id of the request.
    #[error("a 1.1 cancel needs the serverRequestId of the cancelled request")]
    MissingServerRequestId,
}

impl ProjectionError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            ProjectionError::Unsupported { .. } => "roll.project.unsupported",
            ProjectionError::Upward { .. } => "roll.project.upward",
            ProjectionError::InvalidInput { .. } => "roll.project.invalid_input",
            ProjectionError::InvalidOutput { .. } => "roll.project.invalid_output",
            ProjectionError::MissingServerRequestId => "roll.project.missing_server_request_id",
        }
    }
}

fn unsupported(what: impl Into<String>, to: ProtocolVersion) -> ProjectionError {
    ProjectionError::Unsupported {
        what: what.into(),
        to,
    }
}

fn not_provided() -> Value {
    json!({"status": "not_provided"})
}

/// An operation view for `to`: 1.5 requires `appOutput` (added as `not_provided` when
/// missing); older versions do not have it.
pub fn project_operation_view(view: &Value, to: ProtocolVersion) -> Value {
    let mut view = view.clone();
    if let Value::Object(map) = &mut view {
        if to >= ProtocolVersion::V1_5 {
            map.entry("appOutput").or_insert_with(not_provided);
        } else {
            map.remove("appOutput");
        }
    }
    view
}

/// A thread snapshot (full or recovery) for `to`.
pub fn project_thread_snapshot(snapshot: &Value, to: ProtocolVersion) -> Value {
    let Value::Object(source) = snapshot else {
        return snapshot.clone();
    };
    let mut out = source.clone();
    if let Some(Value::Array(items)) = out.get_mut("operations").and_then(|o| o.get_mut("items")) {
        for item in items.iter_mut() {
            *item = project_operation_view(item, to);
        }
    }
    if to < ProtocolVersion::V1_4
        && let Some(Value::Array(messages)) =
            out.get_mut("messages").and_then(|m| m.get_mut("items"))
    {
        for message in messages.iter_mut() {
            if let Some(Value::Array(parts)) = message.get_mut("parts") {
                parts.retain(|part| part.get("type") == Some(&Value::String("text".into())));
            }
        }
    }
    if to < ProtocolVersion::V1_3 {
        // Rebuilt from the keys 1.2 has, so a recovery snapshot becomes an ordinary one.
        const KEEP: [&str; 7] = [
            "thread",
            "messages",
            "operations",
            "activeTurn",
            "pendingApprovals",
            "pendingInteractions",
            "transcriptCompleteness",
        ];
        out.retain(|key, _| KEEP.contains(&key.as_str()));
    }
    if to < ProtocolVersion::V1_2 {
        out.remove("pendingInteractions");
        if let Some(status) = out.get_mut("activeTurn").and_then(|t| t.get_mut("status"))
            && status == "waiting-for-user"
        {
            *status = Value::String("running".into());
        }
    }
    Value::Object(out)
}

/// A `runtime.event` envelope for `to`.
pub fn project_event_envelope(
    envelope: &Value,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    let Value::Object(source) = envelope else {
        return Ok(envelope.clone());
    };
    let mut out = source.clone();
    out.insert("protocolVersion".into(), Value::String(to.as_str().into()));
    if to < ProtocolVersion::V1_3 {
        const KEEP: [&str; 7] = [
            "protocolVersion",
            "runtimeInstanceId",
            "sequence",
            "timestamp",
            "threadId",
            "turnId",
            "event",
        ];
        out.retain(|key, _| KEEP.contains(&key.as_str()));
    }
    if let Some(Value::Object(event)) = out.get_mut("event") {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if kind == "tool.completed" {
            if to >= ProtocolVersion::V1_5 {
                event.entry("appOutput").or_insert_with(not_provided);
            } else {
                event.remove("appOutput");
            }
        }
        if kind == "approval.resolved" && !to.capabilities().approval_resolved_events {
            return Err(unsupported("an approval.resolved event", to));
        }
    }
    Ok(Value::Object(out))
}

/// Server-request params (always given in the 1.2+ interaction shape) for `to`.
pub fn project_server_request_params(
    method: &str,
    params: &Value,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    if !to.capabilities().server_requests {
        return Err(unsupported(format!("server request {method}"), to));
    }
    if to.capabilities().server_request_capability_negotiation {
        return Ok(params.clone());
    }
    match method {
        "approval.request" => {
            let mut out = Map::new();
            for key in ["threadId", "approval", "expiresAt"] {
                if let Some(value) = params.get(key) {
                    out.insert(key.into(), value.clone());
                }
            }
            Ok(Value::Object(out))
        }
        other => Err(unsupported(format!("server request {other}"), to)),
    }
}

/// `runtime.serverRequest.cancel` params for `to`, from the full internal form
/// `{interactionId, serverRequestId, approvalId?, reason}`.
pub fn project_server_request_cancel_params(
    params: &Value,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    if !to.capabilities().server_requests {
        return Err(unsupported("runtime.serverRequest.cancel", to));
    }
    let keys: &[&str] = if to.capabilities().server_request_capability_negotiation {
        &["interactionId", "reason"]
    } else {
        if params.get("serverRequestId").is_none() {
            return Err(ProjectionError::MissingServerRequestId);
        }
        &["serverRequestId", "approvalId", "reason"]
    };
    let mut out = Map::new();
    for key in keys {
        if let Some(value) = params.get(*key) {
            out.insert((*key).into(), value.clone());
        }
    }
    Ok(Value::Object(out))
}

/// An `initialize` result for `to`: version relabelled, features and `limits` keys of `to` only,
/// `eventReplay` as `to` defines it.
pub fn project_initialize_result(result: &Value, to: ProtocolVersion) -> Value {
    let mut out = result.clone();
    if let Value::Object(map) = &mut out {
        map.insert("protocolVersion".into(), Value::String(to.as_str().into()));
        if let Some(Value::Array(features)) = map.get_mut("features") {
            features.retain(|f| {
                f.as_str()
                    .and_then(Feature::from_wire)
                    .is_some_and(|f| f.is_available(to))
            });
        }
        if let Some(Value::Object(limits)) = map.get_mut("limits") {
            limits.retain(|key, _| to.limits_keys().contains(&key.as_str()));
            limits.insert(
                "eventReplay".into(),
                Value::Bool(to.capabilities().durable_events),
            );
        }
    }
    out
}

fn project_request(message: &Value, to: ProtocolVersion) -> Result<Value, ProjectionError> {
    let name = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let method =
        Method::from_wire(name).ok_or_else(|| unsupported(format!("method {name}"), to))?;
    if !method.is_available(to) {
        return Err(unsupported(format!("method {name}"), to));
    }
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    match method {
        Method::ThreadSnapshot
            if params.get("recovery").is_some() && to < ProtocolVersion::V1_3 =>
        {
            Err(unsupported("a recovery snapshot request", to))
        }
        Method::TurnStart
            if params.pointer("/input/attachments").is_some() && to < ProtocolVersion::V1_4 =>
        {
            Err(unsupported("a turn with attachments", to))
        }
        _ => Ok(message.clone()),
    }
}

fn project_result(
    result: &Value,
    from: ProtocolVersion,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    let is = |definition: &str| schema::validate_definition(from, definition, result).is_ok();
    if is("sharedThreadSnapshot") {
        return Ok(project_thread_snapshot(result, to));
    }
    if is("operationGetResult") {
        let mut out = result.clone();
        if let Some(view) = out.get_mut("operation").filter(|v| v.is_object()) {
            *view = project_operation_view(view, to);
        }
        return Ok(out);
    }
    if is("initializeResult") {
        return Ok(project_initialize_result(result, to));
    }
    // A result only the target's missing methods produce cannot be sent there (a JSON-RPC
    // response does not name its method, so the shape decides).
    let methods = Method::ALL
        .into_iter()
        .map(|m| (m.as_str(), m.is_available(to)));
    let server = ServerRequestMethod::ALL
        .into_iter()
        .map(|m| (m.as_str(), m.is_available(to)));
    let mut producers = methods
        .chain(server)
        .filter(|(name, _)| is(&format!("{}Result", crate::parse::definition_stem(name))))
        .peekable();
    if let Some((first, _)) = producers.peek().copied()
        && producers.all(|(_, available)| !available)
    {
        return Err(unsupported(format!("a result of {first}"), to));
    }
    Ok(result.clone())
}

/// Projects one whole message valid under `from` down to `to`, and checks the result there.
pub fn project_message(
    message: &Value,
    from: ProtocolVersion,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    if to > from {
        return Err(ProjectionError::Upward { from, to });
    }
    schema::validate_message(from, message).map_err(|issues| ProjectionError::InvalidInput {
        version: from,
        issues,
    })?;
    let method = message.get("method").and_then(Value::as_str);
    let has_id = message.get("id").is_some();
    let mut out = message.clone();
    match (method, has_id) {
        (Some("runtime.event"), false) => {
            let params = project_event_envelope(&message["params"], to)?;
            out["params"] = params;
        }
        (Some("runtime.serverRequest.cancel"), false) => {
            let params = project_server_request_cancel_params(&message["params"], to)?;
            out["params"] = params;
        }
        (Some(name @ ("approval.request" | "userInput.request")), true) => {
            let params = project_server_request_params(name, &message["params"], to)?;
            out["params"] = params;
        }
        (Some(_), true) => out = project_request(message, to)?,
        (None, _) => {
            if let Some(result) = message.get("result") {
                out["result"] = project_result(result, from, to)?;
            }
            if let Some(code) = message
                .pointer("/error/data/rollCode")
                .and_then(Value::as_str)
            {
                let known = crate::errors::RollErrorCode::from_wire(code);
                if known.is_none_or(|c| !c.is_available(to)) {
                    return Err(unsupported(format!("error code {code}"), to));
                }
            }
        }
        (Some(_), false) => {}
    }
    schema::validate_message(to, &out).map_err(|issues| ProjectionError::InvalidOutput {
        version: to,
        issues,
    })?;
    Ok(out)
}

//! Down-projection to older wire versions. Whole messages go through [`RollProjector`]: the
//! generic schema-driven [`Projector`] over the canonical document plus the hooks for what its
//! annotations cannot express; every projected message is checked against the target version's
//! export. The runtime's own values (snapshots, event envelopes, operation views, `initialize`
//! results, server-request params and the internal cancel form, which carry what the runtime
//! knows beyond any one wire message) are brought to a version by the functions beside it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use agentwire_schema::{ProjectError, ProjectErrorKind, ProjectTarget, Projector};
use serde_json::{Map, Value, json};

use crate::generated::SharedAppOutputDescriptorNotProvided as AppOutputNotProvided;
use crate::schema::{self, SchemaIssue};
use crate::types::{
    ActiveTurnStatus, AppOutputDescriptor, InitializeResult, MessagePart, OperationView,
    ThreadSnapshot,
};
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
    /// The generic engine refused the message for a reason no Roll rule names (a variant or
    /// value the annotations do not map, or nesting beyond its depth limit).
    #[error("{0}")]
    Engine(ProjectError),
}

impl ProjectionError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            ProjectionError::Unsupported { .. } => "roll.project.unsupported",
            ProjectionError::Upward { .. } => "roll.project.upward",
            ProjectionError::InvalidInput { .. } => "roll.project.invalid-input",
            ProjectionError::InvalidOutput { .. } => "roll.project.invalid-output",
            ProjectionError::MissingServerRequestId => "roll.project.missing-server-request-id",
            ProjectionError::Engine(e) => e.code(),
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

/// An operation view for `to`: 1.5 requires `appOutput` (`not_provided` when the tool
/// declared none); older versions do not have it.
pub fn project_operation(mut view: OperationView, to: ProtocolVersion) -> OperationView {
    view.app_output = (to >= ProtocolVersion::V1_5).then(|| {
        view.app_output
            .take()
            .unwrap_or(AppOutputDescriptor::NotProvided(AppOutputNotProvided {}))
    });
    view
}

/// [`project_operation`] of an operation view given as a value; a value that is not an
/// operation view is returned as it is.
pub fn project_operation_view(view: &Value, to: ProtocolVersion) -> Value {
    through_typed(view, |typed| project_operation(typed, to))
}

/// A thread snapshot (full or recovery) for `to`: the operation views of `to`
/// ([`project_operation`]); text parts only before 1.4; before 1.3 no cursor and no recovery
/// marker (a recovery snapshot becomes an ordinary one); before 1.2 no `pendingInteractions`,
/// and an active turn waiting for the user is `running`.
pub fn project_snapshot(mut snapshot: ThreadSnapshot, to: ProtocolVersion) -> ThreadSnapshot {
    let operations = std::mem::take(&mut snapshot.operations.items);
    snapshot.operations.items = operations
        .into_iter()
        .map(|view| project_operation(view, to))
        .collect();
    keep_parts_of(&mut snapshot, to);
    if to < ProtocolVersion::V1_3 {
        snapshot.event_cursor = None;
        snapshot.recovery_projection = None;
    }
    if to < ProtocolVersion::V1_2 {
        snapshot.pending_interactions = None;
        if let Some(turn) = &mut snapshot.active_turn
            && turn.status == ActiveTurnStatus::WaitingForUser
        {
            turn.status = ActiveTurnStatus::Running;
        }
    }
    snapshot
}

/// Drops the message parts `to` does not have (before 1.4, every part but text).
fn keep_parts_of(snapshot: &mut ThreadSnapshot, to: ProtocolVersion) {
    if to < ProtocolVersion::V1_4 {
        for message in &mut snapshot.messages.items {
            message
                .parts
                .retain(|part| matches!(part, MessagePart::Text { .. }));
        }
    }
}

/// [`project_snapshot`] of a snapshot given as a value; a value that is not a snapshot is
/// returned as it is.
pub fn project_thread_snapshot(snapshot: &Value, to: ProtocolVersion) -> Value {
    through_typed(snapshot, |typed| project_snapshot(typed, to))
}

/// `rule` applied to `value` read as a `T` and written back; `value` itself when it is not one.
fn through_typed<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: &Value,
    rule: impl FnOnce(T) -> T,
) -> Value {
    match T::deserialize(value) {
        Ok(typed) => serde_json::to_value(rule(typed)).unwrap_or_else(|_| value.clone()),
        Err(_) => value.clone(),
    }
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

/// An `initialize` result for `to`: version relabelled, the features `to` has (a feature is a
/// claim, so one `to` does not know is left out rather than refused), the `limits` keys of `to`
/// only, and `eventReplay` as `to` defines it.
pub fn project_initialize(mut result: InitializeResult, to: ProtocolVersion) -> InitializeResult {
    result.protocol_version = to.as_str().to_owned();
    result
        .features
        .retain(|f| Feature::from_wire(f.as_str()).is_some_and(|f| f.is_available(to)));
    let keys = to.limits_keys();
    let limits = &mut result.limits;
    limits.event_replay = to.capabilities().durable_events;
    for (key, value) in [
        ("maxAttachmentBytes", &mut limits.max_attachment_bytes),
        (
            "maxAttachmentChunkBytes",
            &mut limits.max_attachment_chunk_bytes,
        ),
        ("maxTurnAttachments", &mut limits.max_turn_attachments),
        ("maxStagedAttachments", &mut limits.max_staged_attachments),
    ] {
        if !keys.contains(&key) {
            *value = None;
        }
    }
    result
}

/// [`project_initialize`] of a result given as a value; a value that is not one is returned as
/// it is.
pub fn project_initialize_result(result: &Value, to: ProtocolVersion) -> Value {
    through_typed(result, |typed| project_initialize(typed, to))
}

/// Projects whole Roll messages of one version down to another: the generic schema-driven
/// [`Projector`] over the canonical document, plus the hooks for what its annotations cannot
/// express. Build once, project many.
pub struct RollProjector {
    from: ProtocolVersion,
    to: ProtocolVersion,
    generic: Projector,
}

impl fmt::Debug for RollProjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RollProjector")
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl RollProjector {
    /// Prepares the projection of messages of `from` down to `to`.
    pub fn new(
        from: ProtocolVersion,
        to: ProtocolVersion,
    ) -> Result<RollProjector, ProjectionError> {
        if to > from {
            return Err(ProjectionError::Upward { from, to });
        }
        let document = schema::canonical_document().map_err(|message| {
            ProjectionError::Engine(ProjectError {
                kind: ProjectErrorKind::Version,
                pointer: String::new(),
                message: format!("the built-in roll-runtime schema: {message}"),
            })
        })?;
        let generic = Projector::new(document, from.as_str(), to.as_str(), ProjectTarget::Root)
            .map_err(ProjectionError::Engine)?;
        Ok(RollProjector { from, to, generic })
    }

    /// The version messages are projected from.
    pub fn from_version(&self) -> ProtocolVersion {
        self.from
    }

    /// The version messages are projected to.
    pub fn to_version(&self) -> ProtocolVersion {
        self.to
    }

    /// Projects one message valid under `from` down to `to`: the hooks refuse what `to` has no
    /// form for and reshape what the annotations cannot, then the generic engine strips and maps
    /// by the annotations and checks the result under `to`.
    pub fn project(&self, message: &Value) -> Result<Value, ProjectionError> {
        let (from, to) = (self.from, self.to);
        schema::validate_message(from, message).map_err(|issues| {
            ProjectionError::InvalidInput {
                version: from,
                issues,
            }
        })?;
        match hooks::before(message, from, to)? {
            Prepared::Walk(prepared) => self.generic.project(&prepared).map_err(|e| match e.kind {
                ProjectErrorKind::NotValidInTarget => ProjectionError::InvalidOutput {
                    version: to,
                    issues: target_issues(to, &prepared, &e),
                },
                _ => ProjectionError::Engine(e),
            }),
            Prepared::Projected(projected) => {
                schema::validate_message(to, &projected).map_err(|issues| {
                    ProjectionError::InvalidOutput {
                        version: to,
                        issues,
                    }
                })?;
                Ok(projected)
            }
        }
    }
}

/// What the hooks hand on.
enum Prepared {
    /// A message still valid under `from`, for the generic engine to walk down to `to`.
    Walk(Value),
    /// A message the hooks brought to `to` themselves, because no message of `from` leads there
    /// by the annotations (a value that is a constant of each version, a variant that becomes
    /// another); the engine only checks it under `to`.
    Projected(Value),
}

/// The issues of a message the engine found invalid under `to`, as the export reports them.
fn target_issues(to: ProtocolVersion, message: &Value, error: &ProjectError) -> Vec<SchemaIssue> {
    vec![SchemaIssue {
        instance_path: error.pointer.clone(),
        schema_path: String::new(),
        message: match schema::validate_message(to, message) {
            Err(issues) if !issues.is_empty() => issues[0].message.clone(),
            _ => error.message.clone(),
        },
    }]
}

/// Projects one whole message valid under `from` down to `to`, and checks the result there
/// (a [`RollProjector`] per version pair, kept per thread).
pub fn project_message(
    message: &Value,
    from: ProtocolVersion,
    to: ProtocolVersion,
) -> Result<Value, ProjectionError> {
    thread_local! {
        static PROJECTORS: RefCell<HashMap<(ProtocolVersion, ProtocolVersion), Rc<RollProjector>>> =
            RefCell::new(HashMap::new());
    }
    if to > from {
        return Err(ProjectionError::Upward { from, to });
    }
    let projector = PROJECTORS.with(|cache| -> Result<Rc<RollProjector>, ProjectionError> {
        if let Some(found) = cache.borrow().get(&(from, to)) {
            return Ok(found.clone());
        }
        let built = Rc::new(RollProjector::new(from, to)?);
        cache.borrow_mut().insert((from, to), built.clone());
        Ok(built)
    })?;
    projector.project(message)
}

/// The rules of whole-message projection the schema annotations cannot express. Each runs on a
/// message already valid under `from` and leaves it valid there, so the generic engine walks it
/// next.
mod hooks {
    use super::*;

    /// Refuses what `to` cannot carry, with the protocol's own reasons, and reshapes what the
    /// annotations cannot.
    pub(super) fn before(
        message: &Value,
        from: ProtocolVersion,
        to: ProtocolVersion,
    ) -> Result<Prepared, ProjectionError> {
        let method = message.get("method").and_then(Value::as_str);
        let has_id = message.get("id").is_some();
        match (method, has_id) {
            // An event kind missing in `to` is the protocol's refusal, not a schema mismatch.
            (Some(crate::version::NOTIFICATION_RUNTIME_EVENT), false) => {
                if message.pointer("/params/event/type")
                    == Some(&Value::String("approval.resolved".into()))
                    && !to.capabilities().approval_resolved_events
                {
                    return Err(unsupported("an approval.resolved event", to));
                }
                Ok(Prepared::Walk(message.clone()))
            }
            // The 1.1 cancel names the request by its JSON-RPC id, which a 1.2+ cancel does not
            // carry: it cannot be derived from the message.
            (Some(crate::version::NOTIFICATION_SERVER_REQUEST_CANCEL), false) => {
                if !to.capabilities().server_requests {
                    return Err(unsupported("runtime.serverRequest.cancel", to));
                }
                if !to.capabilities().server_request_capability_negotiation
                    && message.pointer("/params/serverRequestId").is_none()
                {
                    return Err(ProjectionError::MissingServerRequestId);
                }
                Ok(Prepared::Walk(message.clone()))
            }
            (Some(name @ ("approval.request" | "userInput.request")), true) => {
                let legacy_approval = name == "approval.request"
                    && !to.capabilities().server_request_capability_negotiation;
                if !to.capabilities().server_requests
                    || !(to.capabilities().server_request_capability_negotiation || legacy_approval)
                {
                    return Err(unsupported(format!("server request {name}"), to));
                }
                Ok(Prepared::Walk(message.clone()))
            }
            (Some(name), true) => {
                request(message, name, to)?;
                Ok(Prepared::Walk(message.clone()))
            }
            (None, _) => response(message, from, to),
            (Some(_), false) => Ok(Prepared::Walk(message.clone())),
        }
    }

    /// A request whose method, or a form of it, `to` does not have.
    fn request(message: &Value, name: &str, to: ProtocolVersion) -> Result<(), ProjectionError> {
        let method =
            Method::from_wire(name).ok_or_else(|| unsupported(format!("method {name}"), to))?;
        if !method.is_available(to) {
            return Err(unsupported(format!("method {name}"), to));
        }
        let params = message.get("params");
        match method {
            Method::ThreadSnapshot
                if params.and_then(|p| p.get("recovery")).is_some()
                    && to < ProtocolVersion::V1_3 =>
            {
                Err(unsupported("a recovery snapshot request", to))
            }
            Method::TurnStart
                if params
                    .and_then(|p| p.pointer("/input/attachments"))
                    .is_some()
                    && to < ProtocolVersion::V1_4 =>
            {
                Err(unsupported("a turn with attachments", to))
            }
            _ => Ok(()),
        }
    }

    /// A response: results are recognised by their shape (a JSON-RPC response does not name its
    /// method), errors by their Roll code.
    fn response(
        message: &Value,
        from: ProtocolVersion,
        to: ProtocolVersion,
    ) -> Result<Prepared, ProjectionError> {
        if let Some(code) = message
            .pointer("/error/data/rollCode")
            .and_then(Value::as_str)
        {
            let known = crate::errors::RollErrorCode::from_wire(code);
            if known.is_none_or(|c| !c.is_available(to)) {
                return Err(unsupported(format!("error code {code}"), to));
            }
        }
        let Some(result) = message.get("result") else {
            return Ok(Prepared::Walk(message.clone()));
        };
        let mut out = message.clone();
        Ok(match result_of(result, from, to)? {
            Prepared::Walk(result) => {
                out["result"] = result;
                Prepared::Walk(out)
            }
            Prepared::Projected(result) => {
                out["result"] = result;
                Prepared::Projected(out)
            }
        })
    }

    fn result_of(
        result: &Value,
        from: ProtocolVersion,
        to: ProtocolVersion,
    ) -> Result<Prepared, ProjectionError> {
        let is = |definition: &str| schema::validate_definition(from, definition, result).is_ok();
        if is("sharedThreadSnapshot") {
            // A recovery snapshot has no form below 1.3: it becomes an ordinary one there.
            if to < ProtocolVersion::V1_3 && result.get("recoveryProjection").is_some() {
                return Ok(Prepared::Projected(project_thread_snapshot(result, to)));
            }
            let out = through_typed(result, |mut snapshot: ThreadSnapshot| {
                keep_parts_of(&mut snapshot, to);
                snapshot
            });
            return Ok(Prepared::Walk(out));
        }
        if is("initializeResult") {
            // `limits.eventReplay` is a constant of each version, so no 1.3+ value is valid
            // below 1.3: the result is restated at `to`.
            return Ok(Prepared::Projected(project_initialize_result(result, to)));
        }
        // A result only the target's missing methods produce cannot be sent there.
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
        Ok(Prepared::Walk(result.clone()))
    }
}

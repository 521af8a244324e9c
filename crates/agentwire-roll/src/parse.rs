//! Typed parsing for a negotiated version: validate against that version's export (so fields
//! of newer versions are rejected), check the rules the schema cannot express, then
//! deserialize. The version-less [`facade`] is frozen at 1.1 for hosts written against it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::approval::{ApprovalDecision, ApprovalRequestParams, LegacyApprovalRequestParams};
pub use crate::methods::{MethodParams, MethodResult};
use crate::schema::{self, SchemaIssue};
use crate::types::*;
use crate::user_input::{
    UserInputError, UserInputResult, normalize_user_input_result, validate_form,
};
use crate::version::{Method, ProtocolVersion, ServerRequestMethod};

/// Why a value was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The method does not exist in the version.
    #[error("method {method} does not exist in protocol {version}")]
    UnknownMethod {
        method: String,
        version: ProtocolVersion,
    },
    /// The value breaks the version's schema.
    #[error("invalid under protocol {version}: {}", summary(.issues))]
    Schema {
        version: ProtocolVersion,
        issues: Vec<SchemaIssue>,
    },
    /// A rule the schema cannot express (turn ids, cursor/event id, form rules).
    #[error("{0}")]
    Rule(String),
    /// The form or the submitted values break the user-input rules.
    #[error(transparent)]
    UserInput(#[from] UserInputError),
    /// The value validated but does not fit the typed model (a defect of the types).
    #[error("cannot decode: {0}")]
    Decode(String),
}

impl ParseError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            ParseError::UnknownMethod { .. } => "roll.parse.unknown-method",
            ParseError::Schema { .. } => "roll.parse.schema",
            ParseError::Rule(_) => "roll.parse.rule",
            ParseError::UserInput(error) => error.code(),
            ParseError::Decode(_) => "roll.parse.decode",
        }
    }
}

fn summary(issues: &[SchemaIssue]) -> String {
    issues
        .first()
        .map(|i| format!("{} at {:?}", i.message, i.instance_path))
        .unwrap_or_default()
}

/// The schema definition stem of a wire method: dots removed, later segments capitalised
/// (`client.capabilities.set` → `clientCapabilitiesSet`).
pub fn definition_stem(method: &str) -> String {
    let mut out = String::with_capacity(method.len());
    for (index, part) in method.split('.').enumerate() {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if index == 0 {
                out.push(first);
            } else {
                out.extend(first.to_uppercase());
            }
            out.push_str(chars.as_str());
        }
    }
    out
}

pub(crate) fn checked<T: DeserializeOwned>(
    version: ProtocolVersion,
    definition: &str,
    value: &Value,
) -> Result<T, ParseError> {
    schema::validate_definition(version, definition, value)
        .map_err(|issues| ParseError::Schema { version, issues })?;
    T::deserialize(value).map_err(|e| ParseError::Decode(e.to_string()))
}

/// Parses the params of client request `method` under `version`.
pub fn parse_method_params(
    version: ProtocolVersion,
    method: &str,
    params: &Value,
) -> Result<MethodParams, ParseError> {
    method_in(version, method)?.parse_params(version, params)
}

/// Parses the result of client request `method` under `version`.
pub fn parse_method_result(
    version: ProtocolVersion,
    method: &str,
    result: &Value,
) -> Result<MethodResult, ParseError> {
    method_in(version, method)?.parse_result(version, result)
}

fn method_in(version: ProtocolVersion, method: &str) -> Result<Method, ParseError> {
    Method::from_wire(method)
        .filter(|m| m.is_available(version))
        .ok_or_else(|| ParseError::UnknownMethod {
            method: method.to_owned(),
            version,
        })
}

/// Typed params of a server request; serializes as the params.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ServerRequestParams {
    /// 1.1 `approval.request`.
    LegacyApproval(LegacyApprovalRequestParams),
    /// 1.2+ `approval.request`.
    Approval(ApprovalRequestParams),
    /// 1.2+ `userInput.request`.
    UserInput(UserInputRequestParams),
}

/// Typed result of a server request.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequestResult {
    /// Approve or reject.
    Approval(ApprovalDecision),
    /// Submitted values or a normal cancel.
    UserInput(UserInputResult),
}

fn server_method_in(
    version: ProtocolVersion,
    method: &str,
) -> Result<ServerRequestMethod, ParseError> {
    ServerRequestMethod::from_wire(method)
        .filter(|m| m.is_available(version))
        .ok_or_else(|| ParseError::UnknownMethod {
            method: method.to_owned(),
            version,
        })
}

/// Parses server-request params under `version` (legacy shape on 1.1, interaction shape on 1.2+).
pub fn parse_server_request_params(
    version: ProtocolVersion,
    method: &str,
    params: &Value,
) -> Result<ServerRequestParams, ParseError> {
    let found = server_method_in(version, method)?;
    let definition = format!("{}Params", definition_stem(method));
    match found {
        ServerRequestMethod::ApprovalRequest
            if !version.capabilities().server_request_capability_negotiation =>
        {
            Ok(ServerRequestParams::LegacyApproval(checked(
                version,
                &definition,
                params,
            )?))
        }
        ServerRequestMethod::ApprovalRequest => {
            let parsed: ApprovalRequestParams = checked(version, &definition, params)?;
            if !parsed.turn_matches() {
                return Err(ParseError::Rule(
                    "turnId differs from approval.turnId".into(),
                ));
            }
            Ok(ServerRequestParams::Approval(parsed))
        }
        ServerRequestMethod::UserInputRequest => {
            let parsed: UserInputRequestParams = checked(version, &definition, params)?;
            validate_form(&parsed.controls)?;
            Ok(ServerRequestParams::UserInput(parsed))
        }
    }
}

/// Parses a server-request result under `version`.
pub fn parse_server_request_result(
    version: ProtocolVersion,
    method: &str,
    result: &Value,
) -> Result<ServerRequestResult, ParseError> {
    let found = server_method_in(version, method)?;
    let definition = format!("{}Result", definition_stem(method));
    match found {
        ServerRequestMethod::ApprovalRequest => Ok(ServerRequestResult::Approval(checked(
            version,
            &definition,
            result,
        )?)),
        ServerRequestMethod::UserInputRequest => {
            let parsed: UserInputResult = checked(version, &definition, result)?;
            Ok(ServerRequestResult::UserInput(normalize_user_input_result(
                parsed,
            )?))
        }
    }
}

/// Parses `runtime.serverRequest.cancel` params under `version` (1.1+).
pub fn parse_server_request_cancel_params(
    version: ProtocolVersion,
    params: &Value,
) -> Result<ServerRequestCancelParams, ParseError> {
    if !version.capabilities().server_requests {
        return Err(ParseError::UnknownMethod {
            method: crate::version::NOTIFICATION_SERVER_REQUEST_CANCEL.to_owned(),
            version,
        });
    }
    checked(version, "serverRequestCancelParams", params)
}

/// Parses a `runtime.event` envelope under `version`; a durable event's cursor must name its
/// `eventId`.
pub fn parse_event_envelope(
    version: ProtocolVersion,
    params: &Value,
) -> Result<RuntimeEventEnvelope, ParseError> {
    let envelope: RuntimeEventEnvelope = checked(version, "runtimeEventEnvelope", params)?;
    if let (Some(cursor), Some(event_id)) = (&envelope.cursor, &envelope.event_id)
        && !cursor.names_event(event_id.as_str())
    {
        return Err(ParseError::Rule(
            "the cursor does not name the envelope's eventId".into(),
        ));
    }
    Ok(envelope)
}

/// The version-less parsers, frozen at 1.1 so hosts written for 1.1 keep their behaviour; new
/// code passes the negotiated version instead.
pub mod facade {
    use super::*;
    use crate::version::COMPATIBILITY_FACADE_VERSION as V;

    /// [`super::parse_method_params`] at 1.1.
    pub fn parse_method_params(method: &str, params: &Value) -> Result<MethodParams, ParseError> {
        super::parse_method_params(V, method, params)
    }

    /// [`super::parse_method_result`] at 1.1.
    pub fn parse_method_result(method: &str, result: &Value) -> Result<MethodResult, ParseError> {
        super::parse_method_result(V, method, result)
    }

    /// [`super::parse_server_request_params`] at 1.1.
    pub fn parse_server_request_params(
        method: &str,
        params: &Value,
    ) -> Result<ServerRequestParams, ParseError> {
        super::parse_server_request_params(V, method, params)
    }

    /// [`super::parse_server_request_result`] at 1.1.
    pub fn parse_server_request_result(
        method: &str,
        result: &Value,
    ) -> Result<ServerRequestResult, ParseError> {
        super::parse_server_request_result(V, method, result)
    }

    /// [`super::parse_server_request_cancel_params`] at 1.1.
    pub fn parse_server_request_cancel_params(
        params: &Value,
    ) -> Result<ServerRequestCancelParams, ParseError> {
        super::parse_server_request_cancel_params(V, params)
    }
}

/// One whole message, classified and typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Host → runtime request.
    Request {
        id: crate::ids::JsonRpcId,
        params: Box<MethodParams>,
    },
    /// Runtime → host request.
    ServerRequest {
        id: crate::ids::JsonRpcId,
        params: Box<ServerRequestParams>,
    },
    /// `runtime.event`.
    Event(Box<RuntimeEventEnvelope>),
    /// `runtime.serverRequest.cancel`.
    Cancel(ServerRequestCancelParams),
    /// A success response; its result is typed only once the caller knows the method.
    Response {
        id: crate::ids::JsonRpcId,
        result: Value,
    },
    /// An error response.
    Error {
        id: Option<crate::ids::JsonRpcId>,
        code: i64,
        message: String,
        data: Option<ErrorData>,
    },
}

/// Validates a whole message under `version` and types it.
pub fn parse_message(version: ProtocolVersion, message: &Value) -> Result<Message, ParseError> {
    schema::validate_message(version, message)
        .map_err(|issues| ParseError::Schema { version, issues })?;
    let id = message
        .get("id")
        .and_then(crate::ids::JsonRpcId::from_value);
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let decode = |e: serde_json::Error| ParseError::Decode(e.to_string());
    match (message.get("method").and_then(Value::as_str), id) {
        (Some("runtime.event"), _) => Ok(Message::Event(Box::new(parse_event_envelope(
            version, &params,
        )?))),
        (Some("runtime.serverRequest.cancel"), _) => Ok(Message::Cancel(
            parse_server_request_cancel_params(version, &params)?,
        )),
        (Some(method), Some(id)) if ServerRequestMethod::from_wire(method).is_some() => {
            Ok(Message::ServerRequest {
                id,
                params: Box::new(parse_server_request_params(version, method, &params)?),
            })
        }
        (Some(method), Some(id)) => Ok(Message::Request {
            id,
            params: Box::new(parse_method_params(version, method, &params)?),
        }),
        (_, id) => {
            if let Some(result) = message.get("result") {
                let id = id.ok_or_else(|| ParseError::Rule("a response needs an id".into()))?;
                return Ok(Message::Response {
                    id,
                    result: result.clone(),
                });
            }
            let error = &message["error"];
            Ok(Message::Error {
                id,
                code: error["code"].as_i64().unwrap_or_default(),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                data: error
                    .get("data")
                    .map(|d| serde_json::from_value(d.clone()))
                    .transpose()
                    .map_err(decode)?,
            })
        }
    }
}

//! The checks of one frame against the version's schema: the whole message, then the most
//! specific definition that fails too so that an issue names the field, a method the version
//! lacks named as such, a success result against the result of the method it answers; at most
//! [`MAX_ISSUES_PER_FRAME`] issues each.

use agentwire_roll::parse::definition_stem;
use agentwire_roll::schema::{self, SchemaIssue};
use agentwire_roll::version::{NOTIFICATION_RUNTIME_EVENT, NOTIFICATION_SERVER_REQUEST_CANCEL};
use agentwire_roll::{Method, ProtocolVersion, ServerRequestMethod};
use serde_json::Value;

use super::{Direction, FrameInfo, FrameKind, MAX_ISSUES_PER_FRAME, Violation, ViolationKind};
/// The first issue at each place of the frame (a value breaking two keywords, `format` and
/// `pattern`, is one mistake), at most [`MAX_ISSUES_PER_FRAME`] of them; the rest are counted
/// in one more violation.
fn capped(kind: ViolationKind, issues: Vec<SchemaIssue>, instance: &str) -> Vec<Violation> {
    let mut places = std::collections::HashSet::new();
    let issues: Vec<SchemaIssue> = issues
        .into_iter()
        .filter(|issue| places.insert(issue.instance_path.clone()))
        .collect();
    let total = issues.len();
    let mut out: Vec<Violation> = issues
        .into_iter()
        .take(MAX_ISSUES_PER_FRAME)
        .map(|issue| Violation::issue(kind, issue, instance))
        .collect();
    if total > MAX_ISSUES_PER_FRAME {
        out.push(Violation::new(
            kind,
            format!("and {} more issues", total - MAX_ISSUES_PER_FRAME),
        ));
    }
    out
}

/// The frame checked against `version`: the whole message against the export; when that
/// fails, the most specific definition that fails too, so the issue names the field rather
/// than "matches none of the alternatives"; a success result against the result of the method
/// it answers.
pub(super) fn check(
    version: ProtocolVersion,
    direction: Direction,
    frame: &Value,
    info: &FrameInfo,
) -> Vec<Violation> {
    if let Err(root) = schema::validate_message(version, frame) {
        if let Some(unknown) = unknown_method(version, direction, info) {
            return vec![unknown];
        }
        for (definition, pointer) in narrowed(version, direction, frame, info) {
            let Some(part) = frame.pointer(pointer) else {
                continue;
            };
            if let Err(issues) = schema::validate_definition(version, &definition, part) {
                return capped(ViolationKind::Schema, issues, pointer);
            }
        }
        return capped(ViolationKind::Schema, root, "");
    }
    if info.kind == FrameKind::Result
        && let Some(method) = info.method.as_deref()
        && let Some(definition) = result_definition(version, direction, method)
        && let Some(result) = frame.get("result")
        && let Err(issues) = schema::validate_definition(version, &definition, result)
    {
        return capped(ViolationKind::Result, issues, "/result");
    }
    Vec::new()
}

/// A request or notification whose method the version does not have.
fn unknown_method(
    version: ProtocolVersion,
    direction: Direction,
    info: &FrameInfo,
) -> Option<Violation> {
    let method = info.method.as_deref()?;
    let known = match info.kind {
        FrameKind::Request => match direction {
            Direction::HostToRuntime => {
                Method::from_wire(method).is_some_and(|m| m.is_available(version))
            }
            Direction::RuntimeToHost => {
                ServerRequestMethod::from_wire(method).is_some_and(|m| m.is_available(version))
            }
        },
        FrameKind::Notification => {
            method == NOTIFICATION_RUNTIME_EVENT
                || method == NOTIFICATION_SERVER_REQUEST_CANCEL
                    && version.capabilities().server_requests
        }
        _ => return None,
    };
    (!known).then(|| {
        Violation::new(
            ViolationKind::Schema,
            format!("{method} is not a method of version {version}"),
        )
    })
}

/// Definitions to try, most specific first, with the pointer of the part each describes.
fn narrowed(
    version: ProtocolVersion,
    direction: Direction,
    frame: &Value,
    info: &FrameInfo,
) -> Vec<(String, &'static str)> {
    let method = info.method.as_deref().unwrap_or_default();
    let stem = definition_stem(method);
    match info.kind {
        FrameKind::Request => {
            let whole = match direction {
                Direction::HostToRuntime => format!("{stem}Request"),
                Direction::RuntimeToHost => format!("{stem}ServerRequest"),
            };
            vec![(format!("{stem}Params"), "/params"), (whole, "")]
        }
        FrameKind::Notification if method == NOTIFICATION_RUNTIME_EVENT => {
            let mut out = Vec::new();
            if let Some(kind) = frame.pointer("/params/event/type").and_then(Value::as_str) {
                let mut event = String::from("event");
                let stem = definition_stem(kind);
                let mut chars = stem.chars();
                if let Some(first) = chars.next() {
                    event.extend(first.to_uppercase());
                    event.push_str(chars.as_str());
                }
                out.push((event, "/params/event"));
            }
            let envelope = if version.capabilities().durable_events {
                match frame.pointer("/params/durability").and_then(Value::as_str) {
                    Some("ephemeral") => "runtimeEventEnvelopeEphemeral",
                    _ => "runtimeEventEnvelopeDurable",
                }
            } else {
                "runtimeEventEnvelopeLegacy"
            };
            out.push((envelope.to_owned(), "/params"));
            out.push(("runtimeEventNotification".to_owned(), ""));
            out
        }
        FrameKind::Notification => vec![
            ("serverRequestCancelParams".to_owned(), "/params"),
            ("serverRequestCancelNotification".to_owned(), ""),
        ],
        FrameKind::Result => vec![("successResponse".to_owned(), "")],
        FrameKind::Error => vec![("errorResponse".to_owned(), "")],
        FrameKind::Other => Vec::new(),
    }
}

/// The result definition of `method` answered in `direction`, when the version has it.
fn result_definition(
    version: ProtocolVersion,
    direction: Direction,
    method: &str,
) -> Option<String> {
    match direction {
        Direction::RuntimeToHost => Method::from_wire(method)
            .filter(|m| m.is_available(version))
            .map(Method::result_definition),
        Direction::HostToRuntime => ServerRequestMethod::from_wire(method)
            .filter(|m| m.is_available(version))
            .map(|_| format!("{}Result", definition_stem(method))),
    }
}

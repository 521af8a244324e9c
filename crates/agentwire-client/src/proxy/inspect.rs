//! What the proxy knows about a session and how it checks one frame: the version learned from
//! the `initialize` pair, the requests each side sent and not yet answered (so a response is
//! named by the method it answers), and the checks — the version's schema, the answered
//! method's result shape, who may send what, the runtime's frame limit.
//!
//! **Invariant:** the state is bounded: at most [`MAX_PENDING_REQUESTS`] unanswered requests per
//! direction are remembered (the oldest is forgotten first; ids and methods longer than
//! [`MAX_REMEMBERED_BYTES`] never), and at most [`MAX_ISSUES_PER_FRAME`] schema issues are kept
//! per frame, each message and pointer cut at 512 characters.
//!
//! This module holds the vocabulary (directions, frame shapes, what an inspection found) and
//! [`Session::inspect`], which parses a line and runs both halves: `inspect/session.rs` the
//! session state and what a frame's place in it says (correlation, direction, negotiation, the
//! frame limit), `inspect/check.rs` the schema checks of the frame itself, `inspect/violation.rs`
//! the violations both report.

mod check;
mod session;
mod violation;

use std::fmt;

use agentwire_roll::{LATEST_VERSION, ProtocolVersion};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use check::check;
pub use session::Session;
pub use violation::{Violation, ViolationKind};

/// Unanswered requests remembered per direction.
pub const MAX_PENDING_REQUESTS: usize = 4096;

/// Schema issues kept per frame; the rest are counted in one last violation.
pub const MAX_ISSUES_PER_FRAME: usize = 8;

/// A request is remembered only when its id (as JSON text) and method are at most this long.
pub const MAX_REMEMBERED_BYTES: usize = 256;

/// Which way a frame travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// From the host (the proxy's standard input) to the runtime.
    #[serde(rename = "host->runtime")]
    HostToRuntime,
    /// From the runtime (the child's standard output) to the host.
    #[serde(rename = "runtime->host")]
    RuntimeToHost,
}

impl Direction {
    /// The wire name of the record: `host->runtime` or `runtime->host`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HostToRuntime => "host->runtime",
            Direction::RuntimeToHost => "runtime->host",
        }
    }

    /// The other way.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::HostToRuntime => Direction::RuntimeToHost,
            Direction::RuntimeToHost => Direction::HostToRuntime,
        }
    }

    fn index(self) -> usize {
        match self {
            Direction::HostToRuntime => 0,
            Direction::RuntimeToHost => 1,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON-RPC shape of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    /// `id` and `method`.
    Request,
    /// `method` without `id`.
    Notification,
    /// `id` and `result`.
    Result,
    /// `id` and `error`.
    Error,
    /// Anything else (not an object, or neither of the above).
    Other,
}

/// What a frame is, as far as the session knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInfo {
    /// Its shape.
    pub kind: FrameKind,
    /// Its JSON-RPC id.
    pub id: Option<Value>,
    /// A request's or notification's method, or the method of the request a response answers
    /// (when that request was seen).
    pub method: Option<String>,
}

impl FrameInfo {
    /// Reads the shape of `frame` without any session knowledge.
    pub fn of(frame: &Value) -> FrameInfo {
        let Some(object) = frame.as_object() else {
            return FrameInfo {
                kind: FrameKind::Other,
                id: None,
                method: None,
            };
        };
        let id = object.get("id").cloned();
        let method = object
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let kind = match (&id, &method) {
            (Some(_), Some(_)) => FrameKind::Request,
            (None, Some(_)) => FrameKind::Notification,
            (Some(_), None) if object.contains_key("result") => FrameKind::Result,
            (Some(_), None) if object.contains_key("error") => FrameKind::Error,
            _ => FrameKind::Other,
        };
        FrameInfo { kind, id, method }
    }
}

/// What [`Session::inspect`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// The parsed frame (`None`: the line is not JSON).
    pub frame: Option<Value>,
    /// What it is.
    pub info: FrameInfo,
    /// The version it was checked against.
    pub version: ProtocolVersion,
    /// What is wrong with it.
    pub violations: Vec<Violation>,
}

impl Session {
    /// Parses one line (without its line ending), updates the session and checks the frame.
    pub fn inspect(&self, direction: Direction, line: &[u8]) -> Inspection {
        let frame: Value = match serde_json::from_slice(line) {
            Ok(frame) => frame,
            Err(error) => {
                return Inspection {
                    frame: None,
                    info: FrameInfo {
                        kind: FrameKind::Other,
                        id: None,
                        method: None,
                    },
                    version: self.version().unwrap_or(LATEST_VERSION),
                    violations: vec![Violation::new(
                        ViolationKind::NotJson,
                        format!("not JSON: {error}"),
                    )],
                };
            }
        };
        let (info, version, mut violations) = self.observe(direction, &frame, line.len());
        violations.extend(check(version, direction, &frame, &info));
        Inspection {
            frame: Some(frame),
            info,
            version,
            violations,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    const THREAD: &str = "6f1c2a9e-0d7b-4c1e-9a53-2b8e4f0c7d11";

    fn line(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    fn initialize(session: &Session, versions: &[&str], answered: &str) -> Vec<Violation> {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersions": versions, "client": {"name": "t", "version": "1"}}});
        let sent = session.inspect(Direction::HostToRuntime, &line(&request));
        assert_eq!(sent.violations, []);
        assert_eq!(sent.version, LATEST_VERSION);
        let result = json!({"protocolVersion": answered,
            "runtimeInstanceId": "00000000-0000-4000-8000-000000000001",
            "server": {"name": "s", "version": "1", "runtimeVersion": "1"},
            "limits": {"maxFrameBytes": 2048, "maxPageSize": 100,
                       "eventReplay": answered >= "1.3", "idempotencyCacheEntries": 100},
            "features": []});
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        let got = session.inspect(Direction::RuntimeToHost, &line(&answer));
        assert_eq!(got.info.method.as_deref(), Some("initialize"));
        got.violations
    }

    fn codes(violations: &[Violation]) -> Vec<&str> {
        violations.iter().map(|v| v.code.as_str()).collect()
    }

    #[test]
    fn the_version_is_learned_from_the_initialize_pair() {
        let session = Session::new();
        assert_eq!(session.version(), None);
        initialize(&session, &["1.3"], "1.3");
        assert_eq!(session.version(), Some(ProtocolVersion::V1_3));
        // resume exists in 1.3, so a resume request is valid; on 1.2 it would not be.
        let resume = json!({"jsonrpc": "2.0", "id": 2, "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&resume));
        assert_eq!(checked.violations, []);
        assert_eq!(checked.version, ProtocolVersion::V1_3);
    }

    #[test]
    fn a_method_the_version_lacks_is_named() {
        let session = Session::new();
        initialize(&session, &["1.2"], "1.2");
        let resume = json!({"jsonrpc": "2.0", "id": 2, "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&resume));
        assert_eq!(codes(&checked.violations), ["proxy.schema"]);
        assert_eq!(
            checked.violations[0].message,
            "runtime.events.resume is not a method of version 1.2"
        );
    }

    #[test]
    fn an_answer_with_a_version_not_offered_is_reported() {
        let session = Session::new();
        let violations = initialize(&session, &["1.3"], "1.2");
        assert_eq!(codes(&violations), ["proxy.version"]);
        assert_eq!(session.version(), Some(ProtocolVersion::V1_2));
    }

    #[test]
    fn a_bad_field_is_reported_where_it_is() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let start = json!({"jsonrpc": "2.0", "id": 7, "method": "turn.start", "params": {
            "requestId": THREAD, "threadId": THREAD, "turnId": "not-a-uuid",
            "input": {"text": "hi"}}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&start));
        assert_eq!(codes(&checked.violations), ["proxy.schema"]);
        for violation in &checked.violations {
            assert_eq!(violation.code, "proxy.schema");
            assert_eq!(violation.instance_path.as_deref(), Some("/params/turnId"));
            assert!(
                violation
                    .schema_path
                    .as_deref()
                    .unwrap()
                    .starts_with("/$defs/sharedUuid/"),
                "{violation:?}"
            );
        }
        assert_eq!(checked.info.id, Some(json!(7)));
        assert_eq!(checked.info.method.as_deref(), Some("turn.start"));
    }

    #[test]
    fn a_result_is_checked_against_the_method_it_answers() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let resume = json!({"jsonrpc": "2.0", "id": "r", "method": "runtime.events.resume",
            "params": {"threadId": THREAD, "afterCursor": null}});
        session.inspect(Direction::HostToRuntime, &line(&resume));
        // A valid result of another method.
        let answer =
            json!({"jsonrpc": "2.0", "id": "r", "result": {"accepted": true, "turnId": THREAD}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&answer));
        assert_eq!(
            checked.info.method.as_deref(),
            Some("runtime.events.resume")
        );
        assert!(
            codes(&checked.violations)
                .iter()
                .all(|c| *c == "proxy.result")
        );
        assert!(!checked.violations.is_empty());
    }

    #[test]
    fn direction_and_correlation_are_checked() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let stray = json!({"jsonrpc": "2.0", "id": 99, "result": {"resolved": true}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&stray));
        assert!(codes(&checked.violations).contains(&"proxy.unmatched-response"));
        let request = json!({"jsonrpc": "2.0", "id": 5, "method": "thread.list", "params": {}});
        let checked = session.inspect(Direction::RuntimeToHost, &line(&request));
        assert!(codes(&checked.violations).contains(&"proxy.direction"));
        let notification = json!({"jsonrpc": "2.0", "method": "runtime.event", "params": {}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&notification));
        assert!(codes(&checked.violations).contains(&"proxy.direction"));
    }

    #[test]
    fn a_host_frame_over_the_runtimes_limit_is_reported() {
        let session = Session::new();
        initialize(&session, &["1.3"], "1.3");
        let create = json!({"jsonrpc": "2.0", "id": 3, "method": "thread.create",
            "params": {"requestId": THREAD, "title": "x".repeat(3000)}});
        let checked = session.inspect(Direction::HostToRuntime, &line(&create));
        assert!(codes(&checked.violations).contains(&"proxy.frame-over-limit"));
    }

    #[test]
    fn a_line_that_is_not_json_is_reported() {
        let session = Session::new();
        let checked = session.inspect(Direction::HostToRuntime, b"{not json");
        assert_eq!(checked.frame, None);
        assert_eq!(codes(&checked.violations), ["proxy.not-json"]);
    }
}

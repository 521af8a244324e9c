//! Violations: what kind of thing is wrong with a frame, with its stable code, and one thing
//! wrong with it (its message and, for schema issues, the pointers into the frame and the
//! export), every text cut at a bounded length.

use std::fmt;

use agentwire_roll::schema::SchemaIssue;
use serde::{Deserialize, Serialize};
/// Longest message and JSON Pointer a violation keeps, in characters; longer ones are cut
/// with an ellipsis.
const MAX_VIOLATION_TEXT_CHARS: usize = 512;

fn bounded(text: String) -> String {
    if text.chars().count() <= MAX_VIOLATION_TEXT_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_VIOLATION_TEXT_CHARS).collect();
    out.push('…');
    out
}

/// What kind of thing is wrong with a frame; each has a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViolationKind {
    /// The line is not JSON (`proxy.not-json`).
    NotJson,
    /// The line is longer than the proxy's line limit: forwarded, not checked
    /// (`proxy.line-too-long`).
    LineTooLong,
    /// A host frame longer than the runtime's `limits.maxFrameBytes` (`proxy.frame-over-limit`).
    FrameOverLimit,
    /// The frame breaks the version's schema (`proxy.schema`).
    Schema,
    /// A success result that is not a result of the method it answers (`proxy.result`).
    Result,
    /// A message its sender may not send: a host method from the runtime, a server request or a
    /// notification from the host (`proxy.direction`).
    Direction,
    /// A response to no request the other side sent (`proxy.unmatched-response`).
    UnmatchedResponse,
    /// `initialize` answered a version that was not offered, or no version of the protocol
    /// (`proxy.version`).
    Version,
}

impl ViolationKind {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            ViolationKind::NotJson => "proxy.not-json",
            ViolationKind::LineTooLong => "proxy.line-too-long",
            ViolationKind::FrameOverLimit => "proxy.frame-over-limit",
            ViolationKind::Schema => "proxy.schema",
            ViolationKind::Result => "proxy.result",
            ViolationKind::Direction => "proxy.direction",
            ViolationKind::UnmatchedResponse => "proxy.unmatched-response",
            ViolationKind::Version => "proxy.version",
        }
    }
}

/// One thing wrong with a frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// Stable code (`proxy.schema`, …; see [`ViolationKind::code`]).
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// JSON Pointer into the frame, for schema issues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_path: Option<String>,
    /// JSON Pointer into the version's export (the keyword that failed), for schema issues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_path: Option<String>,
}

impl Violation {
    /// A violation without a position.
    pub fn new(kind: ViolationKind, message: impl Into<String>) -> Violation {
        Violation {
            code: kind.code().to_owned(),
            message: bounded(message.into()),
            instance_path: None,
            schema_path: None,
        }
    }

    /// A schema issue of the part of the frame at `instance` (the issue's schema path is
    /// already a pointer into the whole export).
    pub(super) fn issue(kind: ViolationKind, issue: SchemaIssue, instance: &str) -> Violation {
        Violation {
            code: kind.code().to_owned(),
            message: bounded(issue.message),
            instance_path: Some(bounded(format!("{instance}{}", issue.instance_path))),
            schema_path: Some(bounded(issue.schema_path)),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.code)?;
        if let Some(path) = self.instance_path.as_deref() {
            let path = if path.is_empty() { "(root)" } else { path };
            write!(f, "{path}: ")?;
        }
        f.write_str(&self.message)
    }
}

//! Wire versions and what each one offers: method and server-request registries, capability
//! flags, required handlers, features, error-code registries and `limits` keys.

use std::fmt;
use std::str::FromStr;

use crate::errors::RollErrorCode;
pub use crate::methods::Method;
use crate::registry::wire_enum;

/// One wire version of the Roll runtime protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    V1_0,
    V1_1,
    V1_2,
    V1_3,
    V1_4,
    V1_5,
}

/// Every supported version, newest first: the order a runtime prefers.
pub const SUPPORTED_VERSIONS: [ProtocolVersion; 6] = [
    ProtocolVersion::V1_5,
    ProtocolVersion::V1_4,
    ProtocolVersion::V1_3,
    ProtocolVersion::V1_2,
    ProtocolVersion::V1_1,
    ProtocolVersion::V1_0,
];

/// The newest schema this crate knows; says nothing about what a given peer implements.
pub const LATEST_VERSION: ProtocolVersion = ProtocolVersion::V1_5;

/// The version the version-less parsers are frozen at, so hosts written for it keep working.
pub const COMPATIBILITY_FACADE_VERSION: ProtocolVersion = ProtocolVersion::V1_1;

impl ProtocolVersion {
    /// The wire spelling, e.g. `"1.3"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V1_0 => "1.0",
            ProtocolVersion::V1_1 => "1.1",
            ProtocolVersion::V1_2 => "1.2",
            ProtocolVersion::V1_3 => "1.3",
            ProtocolVersion::V1_4 => "1.4",
            ProtocolVersion::V1_5 => "1.5",
        }
    }

    /// Parses the exact wire spelling; anything else (`"1.6"`, `"1"`, `"1.30"`) is `None`.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        SUPPORTED_VERSIONS.into_iter().find(|v| v.as_str() == text)
    }

    /// Every version older than this one, newest first.
    pub fn older(self) -> impl Iterator<Item = ProtocolVersion> {
        SUPPORTED_VERSIONS.into_iter().filter(move |v| *v < self)
    }

    /// The capability flags of this version.
    pub fn capabilities(self) -> Capabilities {
        let v = self;
        Capabilities {
            server_requests: v >= ProtocolVersion::V1_1,
            server_request_capability_negotiation: v >= ProtocolVersion::V1_2,
            approval_resolved_events: v >= ProtocolVersion::V1_1,
            client_approval_responses: v == ProtocolVersion::V1_0,
            durable_events: v >= ProtocolVersion::V1_3,
            attachments: v >= ProtocolVersion::V1_4,
            app_output: v >= ProtocolVersion::V1_5,
        }
    }

    /// Client-to-runtime methods in this version's registry, in registry order.
    pub fn methods(self) -> impl Iterator<Item = Method> {
        Method::ALL.into_iter().filter(move |m| m.since() <= self)
    }

    /// Runtime-to-client server requests in this version's registry, in registry order.
    pub fn server_request_methods(self) -> impl Iterator<Item = ServerRequestMethod> {
        ServerRequestMethod::ALL
            .into_iter()
            .filter(move |m| m.since() <= self)
    }

    /// Server requests a client must handle before it may advertise this version.
    pub fn required_server_request_methods(self) -> &'static [ServerRequestMethod] {
        match self {
            ProtocolVersion::V1_1 => &[ServerRequestMethod::ApprovalRequest],
            _ => &[],
        }
    }

    /// Feature names a runtime of this version may announce, in wire order.
    pub fn features(self) -> impl Iterator<Item = Feature> {
        Feature::ALL.into_iter().filter(move |f| f.since() <= self)
    }

    /// Error codes in this version's registry, in registry order.
    pub fn error_codes(self) -> impl Iterator<Item = RollErrorCode> {
        RollErrorCode::ALL
            .into_iter()
            .filter(move |c| c.since() <= self)
    }

    /// Keys of `initialize` result `limits` in this version.
    pub fn limits_keys(self) -> &'static [&'static str] {
        const BASE: &[&str] = &[
            "maxFrameBytes",
            "maxPageSize",
            "eventReplay",
            "idempotencyCacheEntries",
        ];
        const WITH_ATTACHMENTS: &[&str] = &[
            "maxFrameBytes",
            "maxPageSize",
            "eventReplay",
            "idempotencyCacheEntries",
            "maxAttachmentBytes",
            "maxAttachmentChunkBytes",
            "maxTurnAttachments",
            "maxStagedAttachments",
        ];
        if self >= ProtocolVersion::V1_4 {
            WITH_ATTACHMENTS
        } else {
            BASE
        }
    }

    /// Whether a client advertising this version must accept a 17 MiB inbound frame.
    pub fn requires_large_inbound_frames(self) -> bool {
        self >= ProtocolVersion::V1_3
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not a supported wire version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported protocol version {0:?} (supported: 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)")]
pub struct UnsupportedVersion(pub String);

impl FromStr for ProtocolVersion {
    type Err = UnsupportedVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ProtocolVersion::parse(text).ok_or_else(|| UnsupportedVersion(text.to_owned()))
    }
}

/// Capability flags of one version (upstream `RUNTIME_PROTOCOL_CAPABILITIES`, plus the
/// features later versions introduced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub server_requests: bool,
    pub server_request_capability_negotiation: bool,
    pub approval_resolved_events: bool,
    pub client_approval_responses: bool,
    pub durable_events: bool,
    pub attachments: bool,
    pub app_output: bool,
}

wire_enum! {
    /// A runtime-to-client server request.
    ServerRequestMethod {
        ApprovalRequest = "approval.request", since V1_1,
        UserInputRequest = "userInput.request", since V1_2,
    }
}

wire_enum! {
    /// A runtime feature announced in the `initialize` result.
    Feature {
        ThreadManagement = "thread-management", since V1_0,
        Snapshots = "snapshots", since V1_0,
        Turns = "turns", since V1_0,
        Approvals = "approvals", since V1_0,
        ToolStreaming = "tool-streaming", since V1_0,
        ReasoningSummary = "reasoning-summary", since V1_0,
        OperationProjection = "operation-projection", since V1_0,
        ProcessLocalSequence = "process-local-sequence", since V1_0,
        Attachments = "attachments", since V1_4,
        AppOutput = "app-output", since V1_5,
    }
}

/// The two notifications, both sent by the runtime.
pub const NOTIFICATION_RUNTIME_EVENT: &str = "runtime.event";
/// Cancels a pending server request (1.1+).
pub const NOTIFICATION_SERVER_REQUEST_CANCEL: &str = "runtime.serverRequest.cancel";

//! Wire versions and what each one offers: method and server-request registries, capability
//! flags, required handlers, features, error-code registries and `limits` keys.

use std::fmt;
use std::str::FromStr;

use crate::errors::RollErrorCode;

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

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $wire:literal since $since:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in registry order.
            pub const ALL: [$name; [$($wire),+].len()] = [$($name::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }

            /// The first version that has it.
            pub fn since(self) -> ProtocolVersion {
                match self { $($name::$variant => ProtocolVersion::$since),+ }
            }

            /// Looks a wire name up (in any version).
            pub fn from_wire(name: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|m| m.as_str() == name)
            }

            /// Whether `version` has it.
            pub fn is_available(self, version: ProtocolVersion) -> bool {
                self.since() <= version
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// A client-to-runtime method.
    Method {
        Initialize = "initialize" since V1_0,
        ClientCapabilitiesSet = "client.capabilities.set" since V1_2,
        ThreadList = "thread.list" since V1_0,
        ThreadCreate = "thread.create" since V1_0,
        ThreadOpen = "thread.open" since V1_0,
        ThreadSnapshot = "thread.snapshot" since V1_0,
        ThreadRename = "thread.rename" since V1_0,
        ThreadDelete = "thread.delete" since V1_0,
        ThreadDetach = "thread.detach" since V1_0,
        ThreadCapabilities = "thread.capabilities" since V1_0,
        RuntimeEventsResume = "runtime.events.resume" since V1_3,
        TurnStart = "turn.start" since V1_0,
        TurnCancel = "turn.cancel" since V1_0,
        ApprovalRespond = "approval.respond" since V1_0,
        OperationGet = "operation.get" since V1_0,
        OperationResultGet = "operation.result.get" since V1_5,
        AttachmentStage = "attachment.stage" since V1_4,
        AttachmentChunk = "attachment.chunk" since V1_4,
        AttachmentCommit = "attachment.commit" since V1_4,
        AttachmentRelease = "attachment.release" since V1_4,
    }
}

impl Method {
    /// Whether the method carries a `requestId` and is de-duplicated by it.
    pub fn is_idempotent_mutation(self) -> bool {
        matches!(
            self,
            Method::ThreadCreate
                | Method::ThreadRename
                | Method::ThreadDelete
                | Method::ThreadDetach
                | Method::TurnStart
                | Method::TurnCancel
                | Method::ApprovalRespond
                | Method::AttachmentStage
                | Method::AttachmentChunk
                | Method::AttachmentCommit
                | Method::AttachmentRelease
        )
    }

    /// Reads the official client retries once when the error is `retryable`.
    pub fn is_retryable_read(self) -> bool {
        matches!(
            self,
            Method::ThreadList
                | Method::ThreadSnapshot
                | Method::ThreadCapabilities
                | Method::OperationGet
        )
    }

    /// Whether a runtime of `version` serves the method (present in the registry and not
    /// answered `CAPABILITY_UNAVAILABLE`, as `approval.respond` is from 1.1 on).
    pub fn is_served(self, version: ProtocolVersion) -> bool {
        let answered_unavailable =
            self == Method::ApprovalRespond && !version.capabilities().client_approval_responses;
        self.is_available(version) && !answered_unavailable
    }

    /// The feature a runtime must announce before the method may be called.
    pub fn required_feature(self) -> Option<Feature> {
        match self {
            Method::AttachmentStage
            | Method::AttachmentChunk
            | Method::AttachmentCommit
            | Method::AttachmentRelease => Some(Feature::Attachments),
            Method::OperationResultGet => Some(Feature::AppOutput),
            _ => None,
        }
    }
}

wire_enum! {
    /// A runtime-to-client server request.
    ServerRequestMethod {
        ApprovalRequest = "approval.request" since V1_1,
        UserInputRequest = "userInput.request" since V1_2,
    }
}

wire_enum! {
    /// A runtime feature announced in the `initialize` result.
    Feature {
        ThreadManagement = "thread-management" since V1_0,
        Snapshots = "snapshots" since V1_0,
        Turns = "turns" since V1_0,
        Approvals = "approvals" since V1_0,
        ToolStreaming = "tool-streaming" since V1_0,
        ReasoningSummary = "reasoning-summary" since V1_0,
        OperationProjection = "operation-projection" since V1_0,
        ProcessLocalSequence = "process-local-sequence" since V1_0,
        Attachments = "attachments" since V1_4,
        AppOutput = "app-output" since V1_5,
    }
}

/// The two notifications, both sent by the runtime.
pub const NOTIFICATION_RUNTIME_EVENT: &str = "runtime.event";
/// Cancels a pending server request (1.1+).
pub const NOTIFICATION_SERVER_REQUEST_CANCEL: &str = "runtime.serverRequest.cancel";

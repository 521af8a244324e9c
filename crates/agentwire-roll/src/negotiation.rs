//! Version and capability negotiation of one connection: `initialize`, the 17 MiB rule,
//! `client.capabilities.set` with its monotonic revision, the ACK, and when the runtime may send
//! interactions. [`Connection`] is the runtime's view as a state machine; the free functions
//! are what a client needs.

use std::collections::BTreeSet;

use crate::constants::{
    MAX_CAPABILITY_METHOD_CHARS, MAX_CAPABILITY_METHODS, MIN_CLIENT_INBOUND_FRAME_BYTES_V13,
};
use crate::errors::{JSONRPC_INVALID_PARAMS, JSONRPC_METHOD_NOT_FOUND, RollErrorCode};
use crate::version::{Method, ProtocolVersion, SUPPORTED_VERSIONS, ServerRequestMethod};

/// Why a negotiation step was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NegotiationError {
    /// None of the client's versions is supported.
    #[error("no protocol version in common (client offered {offered:?})")]
    VersionUnsupported { offered: Vec<String> },
    /// `initialize` was called a second time; nothing changed.
    #[error("initialize may be called only once per connection")]
    AlreadyInitialized,
    /// A method other than `initialize` came first.
    #[error("initialize must be the first call")]
    InitializeRequired,
    /// The method is not in the negotiated version's registry.
    #[error("method {method} does not exist in protocol {version}")]
    MethodNotFound {
        method: String,
        version: ProtocolVersion,
    },
    /// The method exists but this connection does not serve it (e.g. `approval.respond` on 1.1+).
    #[error("method {method} is not available on protocol {version}")]
    CapabilityUnavailable {
        method: String,
        version: ProtocolVersion,
    },
    /// Params of `client.capabilities.set` break its rules (revision < 1, too many or too long
    /// names, duplicates).
    #[error("invalid client.capabilities.set params: {0}")]
    InvalidCapabilities(String),
    /// A lower revision, or the same revision with a different method set.
    #[error("capability revision {revision} conflicts with the current revision {current}")]
    RevisionConflict { revision: u64, current: u64 },
    /// A client advertised 1.3+ with an inbound frame budget below 17 MiB.
    #[error(
        "advertising {version} promises to receive {required}-byte frames, but the inbound budget is {budget}"
    )]
    InboundBudgetTooSmall {
        version: ProtocolVersion,
        budget: u64,
        required: u64,
    },
    /// A client advertised a version without a handler that version requires.
    #[error("advertising {version} requires a {method} handler")]
    MissingRequiredHandler {
        version: ProtocolVersion,
        method: ServerRequestMethod,
    },
    /// The ACK echoes another revision than the one requested (client side).
    #[error("capability ACK revision {got} does not match the requested {requested}")]
    AckRevisionMismatch { requested: u64, got: u64 },
    /// The ACK accepts a method the client did not request (client side).
    #[error("capability ACK accepts {0}, which was not requested")]
    AckUnrequestedMethod(String),
    /// The runtime may not send this server request now.
    #[error("server request {method} is not allowed: {reason}")]
    ServerRequestNotAllowed {
        method: ServerRequestMethod,
        reason: &'static str,
    },
}

impl NegotiationError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            NegotiationError::VersionUnsupported { .. } => "roll.negotiation.version-unsupported",
            NegotiationError::AlreadyInitialized => "roll.negotiation.already-initialized",
            NegotiationError::InitializeRequired => "roll.negotiation.initialize-required",
            NegotiationError::MethodNotFound { .. } => "roll.negotiation.method-not-found",
            NegotiationError::CapabilityUnavailable { .. } => {
                "roll.negotiation.capability-unavailable"
            }
            NegotiationError::InvalidCapabilities(_) => "roll.negotiation.invalid-capabilities",
            NegotiationError::RevisionConflict { .. } => "roll.negotiation.revision-conflict",
            NegotiationError::InboundBudgetTooSmall { .. } => {
                "roll.negotiation.inbound-budget-too-small"
            }
            NegotiationError::MissingRequiredHandler { .. } => {
                "roll.negotiation.missing-required-handler"
            }
            NegotiationError::AckRevisionMismatch { .. } => {
                "roll.negotiation.ack-revision-mismatch"
            }
            NegotiationError::AckUnrequestedMethod(_) => "roll.negotiation.ack-unrequested-method",
            NegotiationError::ServerRequestNotAllowed { .. } => {
                "roll.negotiation.server-request-not-allowed"
            }
        }
    }

    /// The `rollCode` a runtime answers with, when the error is a Roll domain error.
    pub fn roll_code(&self) -> Option<RollErrorCode> {
        match self {
            NegotiationError::VersionUnsupported { .. } => {
                Some(RollErrorCode::PROTOCOL_VERSION_UNSUPPORTED)
            }
            NegotiationError::AlreadyInitialized
            | NegotiationError::CapabilityUnavailable { .. } => {
                Some(RollErrorCode::CAPABILITY_UNAVAILABLE)
            }
            NegotiationError::InitializeRequired => Some(RollErrorCode::INITIALIZE_REQUIRED),
            NegotiationError::InvalidCapabilities(_)
            | NegotiationError::InboundBudgetTooSmall { .. }
            | NegotiationError::MissingRequiredHandler { .. } => {
                Some(RollErrorCode::INVALID_PARAMS)
            }
            NegotiationError::RevisionConflict { .. } => {
                Some(RollErrorCode::CAPABILITY_REVISION_CONFLICT)
            }
            NegotiationError::MethodNotFound { .. }
            | NegotiationError::AckRevisionMismatch { .. }
            | NegotiationError::AckUnrequestedMethod(_)
            | NegotiationError::ServerRequestNotAllowed { .. } => None,
        }
    }

    /// The JSON-RPC `error.code` a runtime answers with.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            NegotiationError::MethodNotFound { .. }
            | NegotiationError::ServerRequestNotAllowed { .. } => JSONRPC_METHOD_NOT_FOUND,
            NegotiationError::AckRevisionMismatch { .. }
            | NegotiationError::AckUnrequestedMethod(_) => JSONRPC_INVALID_PARAMS,
            other => other
                .roll_code()
                .map_or(JSONRPC_INVALID_PARAMS, RollErrorCode::jsonrpc_code),
        }
    }
}

/// Picks the version: the first of the client's list (in the client's order) the runtime
/// supports. Unknown entries such as `"2.0"` are skipped.
pub fn negotiate_version<S: AsRef<str>>(
    offered: &[S],
    supported: &[ProtocolVersion],
) -> Result<ProtocolVersion, NegotiationError> {
    offered
        .iter()
        .filter_map(|v| ProtocolVersion::parse(v.as_ref()))
        .find(|v| supported.contains(v))
        .ok_or_else(|| NegotiationError::VersionUnsupported {
            offered: offered.iter().map(|v| v.as_ref().to_owned()).collect(),
        })
}

/// The versions a client may advertise, newest first: 1.3+ only with an inbound budget of at
/// least 17 MiB, and each version only when the client handles its required server requests.
pub fn advertisable_versions(
    inbound_frame_budget: u64,
    handlers: &[ServerRequestMethod],
) -> Vec<ProtocolVersion> {
    SUPPORTED_VERSIONS
        .into_iter()
        .filter(|v| check_advertised_version(*v, inbound_frame_budget, handlers).is_ok())
        .collect()
}

fn check_advertised_version(
    version: ProtocolVersion,
    inbound_frame_budget: u64,
    handlers: &[ServerRequestMethod],
) -> Result<(), NegotiationError> {
    if version.requires_large_inbound_frames()
        && inbound_frame_budget < MIN_CLIENT_INBOUND_FRAME_BYTES_V13
    {
        return Err(NegotiationError::InboundBudgetTooSmall {
            version,
            budget: inbound_frame_budget,
            required: MIN_CLIENT_INBOUND_FRAME_BYTES_V13,
        });
    }
    if let Some(method) = version
        .required_server_request_methods()
        .iter()
        .find(|m| !handlers.contains(m))
    {
        return Err(NegotiationError::MissingRequiredHandler {
            version,
            method: *method,
        });
    }
    Ok(())
}

/// Checks an advertisement against what the client declared it can do; a runtime that knows the
/// client's inbound budget (an in-process or declared transport) refuses an inconsistent one.
pub fn check_advertisement<S: AsRef<str>>(
    offered: &[S],
    inbound_frame_budget: u64,
    handlers: &[ServerRequestMethod],
) -> Result<(), NegotiationError> {
    for version in offered
        .iter()
        .filter_map(|v| ProtocolVersion::parse(v.as_ref()))
    {
        check_advertised_version(version, inbound_frame_budget, handlers)?;
    }
    Ok(())
}

/// A client's outbound frame limit after `initialize`: the smaller of its own budget and the
/// runtime's `limits.maxFrameBytes`. Advertising 1.3+ never raises it.
pub fn outbound_frame_limit(local_budget: u64, runtime_max_frame_bytes: u64) -> u64 {
    local_budget.min(runtime_max_frame_bytes)
}

/// The runtime's answer to `client.capabilities.set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityAck {
    /// The requested revision, echoed.
    pub revision: u64,
    /// The requested methods the runtime knows, in registry order.
    pub accepted: Vec<ServerRequestMethod>,
}

/// The ACK for a request: the revision echoed and the intersection with `version`'s registry in
/// registry order; unknown names are simply not accepted.
pub fn capability_ack<S: AsRef<str>>(
    version: ProtocolVersion,
    revision: u64,
    requested: &[S],
) -> CapabilityAck {
    let accepted = version
        .server_request_methods()
        .filter(|m| requested.iter().any(|r| r.as_ref() == m.as_str()))
        .collect();
    CapabilityAck { revision, accepted }
}

/// Client side: checks an ACK against the request and returns the accepted set. Only a revision
/// mismatch or an un-requested method is a violation; order and omissions are not.
pub fn check_capability_ack<S: AsRef<str>, T: AsRef<str>>(
    requested_revision: u64,
    requested: &[S],
    ack_revision: u64,
    ack_methods: &[T],
) -> Result<BTreeSet<ServerRequestMethod>, NegotiationError> {
    if ack_revision != requested_revision {
        return Err(NegotiationError::AckRevisionMismatch {
            requested: requested_revision,
            got: ack_revision,
        });
    }
    let mut accepted = BTreeSet::new();
    for name in ack_methods {
        let name = name.as_ref();
        let known = ServerRequestMethod::from_wire(name);
        match known {
            Some(method) if requested.iter().any(|r| r.as_ref() == name) => {
                accepted.insert(method);
            }
            _ => return Err(NegotiationError::AckUnrequestedMethod(name.to_owned())),
        }
    }
    Ok(accepted)
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Nothing but `initialize` is allowed.
    AwaitingInitialize,
    /// 1.2+: initialized, but no interaction may be sent before the capability ACK.
    AwaitingCapabilities,
    /// Interactions for accepted methods may be sent (1.0 has none, 1.1 only approvals).
    InteractionReady,
}

/// What a successful `client.capabilities.set` changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityUpdate {
    /// The answer to send; it must be written before any later interaction frame.
    pub ack: CapabilityAck,
    /// Methods accepted before and not any more: their pending interactions are aborted and late
    /// results discarded.
    pub revoked: Vec<ServerRequestMethod>,
    /// Same revision and same set as before: an idempotent retry that changed nothing.
    pub retry: bool,
}

/// The runtime's view of one connection's negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    supported: Vec<ProtocolVersion>,
    version: Option<ProtocolVersion>,
    state: ConnectionState,
    revision: u64,
    requested: BTreeSet<String>,
    accepted: Vec<ServerRequestMethod>,
}

impl Default for Connection {
    fn default() -> Self {
        Connection::new()
    }
}

impl Connection {
    /// A fresh connection of a runtime that supports every version.
    pub fn new() -> Connection {
        Connection::with_supported(&SUPPORTED_VERSIONS)
    }

    /// A fresh connection of a runtime that supports only `supported`.
    pub fn with_supported(supported: &[ProtocolVersion]) -> Connection {
        Connection {
            supported: supported.to_vec(),
            version: None,
            state: ConnectionState::AwaitingInitialize,
            revision: 0,
            requested: BTreeSet::new(),
            accepted: Vec::new(),
        }
    }

    /// The state.
    pub fn state(&self) -> ConnectionState {
        self.state
    }

    /// The negotiated version, once `initialize` succeeded.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The last accepted capability revision (0 before the first).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The server requests the runtime may currently send, in registry order.
    pub fn accepted(&self) -> &[ServerRequestMethod] {
        &self.accepted
    }

    /// Handles `initialize`: fixes the version for the connection. 1.0 and 1.1 are
    /// interaction-ready at once (1.1's `approval.request` handler is mandatory); 1.2+ wait for
    /// the capability ACK.
    pub fn initialize<S: AsRef<str>>(
        &mut self,
        offered: &[S],
    ) -> Result<ProtocolVersion, NegotiationError> {
        if self.version.is_some() {
            return Err(NegotiationError::AlreadyInitialized);
        }
        let version = negotiate_version(offered, &self.supported)?;
        self.version = Some(version);
        if version.capabilities().server_request_capability_negotiation {
            self.state = ConnectionState::AwaitingCapabilities;
        } else {
            self.state = ConnectionState::InteractionReady;
            self.accepted = version.required_server_request_methods().to_vec();
        }
        Ok(version)
    }

    /// Checks that a client call may be dispatched: after `initialize`, in the version's
    /// registry, and served on this version.
    pub fn check_call(&self, method: &str) -> Result<Method, NegotiationError> {
        let Some(version) = self.version else {
            return match Method::from_wire(method) {
                Some(Method::Initialize) => Ok(Method::Initialize),
                _ => Err(NegotiationError::InitializeRequired),
            };
        };
        let found = Method::from_wire(method)
            .filter(|m| m.is_available(version))
            .ok_or_else(|| NegotiationError::MethodNotFound {
                method: method.to_owned(),
                version,
            })?;
        if found == Method::Initialize {
            return Err(NegotiationError::AlreadyInitialized);
        }
        if !found.is_served(version) {
            return Err(NegotiationError::CapabilityUnavailable {
                method: method.to_owned(),
                version,
            });
        }
        Ok(found)
    }

    /// Handles `client.capabilities.set`.
    pub fn set_capabilities<S: AsRef<str>>(
        &mut self,
        revision: u64,
        methods: &[S],
    ) -> Result<CapabilityUpdate, NegotiationError> {
        let version = self.version.ok_or(NegotiationError::InitializeRequired)?;
        if !Method::ClientCapabilitiesSet.is_available(version) {
            return Err(NegotiationError::MethodNotFound {
                method: Method::ClientCapabilitiesSet.as_str().to_owned(),
                version,
            });
        }
        if revision < 1 {
            return Err(NegotiationError::InvalidCapabilities(
                "revision must be at least 1".to_owned(),
            ));
        }
        if methods.len() > MAX_CAPABILITY_METHODS {
            return Err(NegotiationError::InvalidCapabilities(format!(
                "at most {MAX_CAPABILITY_METHODS} methods, got {}",
                methods.len()
            )));
        }
        let mut set = BTreeSet::new();
        for name in methods {
            let name = name.as_ref();
            let length = crate::constants::js_length(name);
            if length == 0 || length > MAX_CAPABILITY_METHOD_CHARS {
                return Err(NegotiationError::InvalidCapabilities(format!(
                    "method names must have 1..{MAX_CAPABILITY_METHOD_CHARS} characters"
                )));
            }
            if !set.insert(name.to_owned()) {
                return Err(NegotiationError::InvalidCapabilities(format!(
                    "duplicate method {name:?}"
                )));
            }
        }
        if revision < self.revision || (revision == self.revision && set != self.requested) {
            return Err(NegotiationError::RevisionConflict {
                revision,
                current: self.revision,
            });
        }
        let ack = capability_ack(version, revision, methods);
        let retry = revision == self.revision;
        let revoked = self
            .accepted
            .iter()
            .copied()
            .filter(|m| !ack.accepted.contains(m))
            .collect();
        self.revision = revision;
        self.requested = set;
        self.accepted = ack.accepted.clone();
        self.state = ConnectionState::InteractionReady;
        Ok(CapabilityUpdate {
            ack,
            revoked,
            retry,
        })
    }

    /// Checks that the runtime may send `method` now: interaction-ready and accepted.
    pub fn check_server_request(
        &self,
        method: ServerRequestMethod,
    ) -> Result<(), NegotiationError> {
        let not_allowed = |reason| NegotiationError::ServerRequestNotAllowed { method, reason };
        let version = self
            .version
            .ok_or_else(|| not_allowed("the connection is not initialized"))?;
        if !method.is_available(version) {
            return Err(not_allowed(
                "the negotiated version has no such server request",
            ));
        }
        if self.state != ConnectionState::InteractionReady {
            return Err(not_allowed(
                "the client has not acknowledged its capabilities yet",
            ));
        }
        if !self.accepted.contains(&method) {
            return Err(not_allowed("the client did not accept this method"));
        }
        Ok(())
    }
}

//! Negotiating the connection: `initialize` (the versions offered, the answer checked against
//! them, the outbound frame limit fixed) and, on 1.2+, `client.capabilities.set` with the
//! server-request handlers the host registered, its ACK checked and revoked handlers aborted.

use std::collections::BTreeSet;
use std::sync::Arc;

use agentwire_roll::negotiation::{
    advertisable_versions, check_advertisement, check_capability_ack, outbound_frame_limit,
};
use agentwire_roll::parse::ParseError;
use agentwire_roll::types::{ClientCapabilitiesSetParams, InitializeParams, InitializeResult};
use agentwire_roll::{
    LATEST_VERSION, Method, ProtocolVersion, ServerRequestMethod, request, schema,
};
use serde_json::Value;

use super::calls::{decode, validate_result};
use super::{
    ClientCore, ClientError, InitializeOptions, Initialized, Interactions, PendingCapabilities,
    Phase, ProtocolViolation, RollClient, Session, lock,
};

impl ClientCore {
    async fn initialize(
        &self,
        options: InitializeOptions,
        interactions: &Interactions,
    ) -> Result<Initialized, ClientError> {
        let budget = self.shared.settings.max_frame_bytes;
        let budget_u64 = u64::try_from(budget).unwrap_or(u64::MAX);
        let handlers = interactions.methods();
        let offered: Vec<String> = match options.versions {
            None => advertisable_versions(budget_u64, &handlers)
                .into_iter()
                .map(|v| v.as_str().to_owned())
                .collect(),
            Some(versions) => {
                check_advertisement(&versions, budget_u64, &handlers)
                    .map_err(ClientError::Advertisement)?;
                versions
            }
        };
        let method = Method::Initialize;
        let params = InitializeParams {
            protocol_versions: offered.clone(),
            client: options.client,
        };
        let params = serde_json::to_value(&params).map_err(|e| ClientError::EncodeParams {
            method,
            message: e.to_string(),
        })?;
        // The shape of initialize never changed across versions.
        schema::validate_definition(LATEST_VERSION, &method.params_definition(), &params).map_err(
            |issues| ClientError::InvalidParams {
                method,
                error: ParseError::Schema {
                    version: LATEST_VERSION,
                    issues,
                },
            },
        )?;
        let result = self.send(method, &params, budget).await?;
        let answered = result.get("protocolVersion").and_then(Value::as_str);
        let version = answered
            .and_then(ProtocolVersion::parse)
            .filter(|v| offered.iter().any(|o| o == v.as_str()));
        let Some(version) = version else {
            let answered = answered.map(str::to_owned);
            return Err(self
                .violate(ProtocolViolation::VersionNotOffered { answered })
                .await);
        };
        let typed: InitializeResult =
            match validate_result(version, method, &result).and_then(|()| decode(result)) {
                Ok(typed) => typed,
                Err(error) => {
                    return Err(self
                        .violate(ProtocolViolation::InitializeResult(error))
                        .await);
                }
            };
        let outbound = outbound_frame_limit(budget_u64, typed.limits.max_frame_bytes);
        let outbound_frame_limit = usize::try_from(outbound).unwrap_or(usize::MAX);
        let negotiated = version.capabilities().server_request_capability_negotiation;
        {
            let mut state = lock(&self.shared.state);
            state.session = Some(Arc::new(Session {
                version,
                result: typed.clone(),
                outbound_limit: outbound_frame_limit,
            }));
            state.phase = Phase::Ready;
            if !negotiated {
                state.accepted = version
                    .server_request_methods()
                    .filter(|m| interactions.handles(*m))
                    .collect();
            }
        }
        self.shared.initialized.notify_waiters();
        tracing::info!(%version, runtime = %typed.runtime_instance_id, "initialized");
        let accepted = if negotiated {
            self.negotiate(interactions.clone()).await?
        } else {
            lock(&self.shared.state).accepted.clone()
        };
        Ok(Initialized {
            version,
            result: typed,
            offered,
            accepted,
            outbound_frame_limit,
        })
    }

    /// `client.capabilities.set` with the next revision (1.2+; the caller holds the capability
    /// lock).
    async fn negotiate(
        &self,
        interactions: Interactions,
    ) -> Result<BTreeSet<ServerRequestMethod>, ClientError> {
        let requested = interactions.methods();
        let names: Vec<String> = requested.iter().map(|m| m.as_str().to_owned()).collect();
        let revision = {
            let mut state = lock(&self.shared.state);
            state.revision += 1;
            state.pending = Some(PendingCapabilities {
                interactions: interactions.clone(),
                requested: requested.iter().copied().collect(),
            });
            state.revision
        };
        let params = ClientCapabilitiesSetParams {
            revision,
            server_request_methods: names.clone(),
        };
        let outcome = self
            .invoke::<request::ClientCapabilitiesSet>(params, true)
            .await;
        let clear_pending = || lock(&self.shared.state).pending = None;
        let ack = match outcome {
            Ok(ack) => ack,
            Err(ClientError::InvalidResult { error, .. }) => {
                clear_pending();
                return Err(self
                    .violate(ProtocolViolation::CapabilityResult(error))
                    .await);
            }
            Err(error) => {
                clear_pending();
                return Err(error);
            }
        };
        let acked: Vec<&str> = ack
            .accepted_server_request_methods
            .iter()
            .map(|m| m.as_str())
            .collect();
        let accepted = match check_capability_ack(revision, &names, ack.revision, &acked) {
            Ok(accepted) => accepted,
            Err(error) => {
                clear_pending();
                return Err(self.violate(ProtocolViolation::CapabilityAck(error)).await);
            }
        };
        let revoked: BTreeSet<ServerRequestMethod> = {
            let mut state = lock(&self.shared.state);
            let revoked = state.accepted.difference(&accepted).copied().collect();
            state.accepted = accepted.clone();
            state.interactions = interactions;
            state.pending = None;
            revoked
        };
        self.shared.abort_revoked(&self.peer, &revoked);
        tracing::info!(revision, accepted = ?accepted, "server-request capabilities acknowledged");
        Ok(accepted)
    }
}

impl RollClient {
    /// `initialize`, first and once, then on 1.2+ `client.capabilities.set` with the registered
    /// handlers (revision 1). Afterwards the outbound frame limit is
    /// `min(local budget, limits.maxFrameBytes)`.
    ///
    /// # Errors
    /// [`ClientError::AlreadyInitialized`]; [`ClientError::Advertisement`] for explicit versions
    /// the local budget or the handlers do not allow (nothing is sent); the runtime's error
    /// (e.g. `PROTOCOL_VERSION_UNSUPPORTED`; `initialize` may then be tried again);
    /// [`ClientError::ProtocolViolation`] for an answer the protocol forbids (an un-offered
    /// version, an invalid result, a capability ACK with another revision or an un-requested
    /// method), which closes the connection.
    pub async fn initialize(&self, options: InitializeOptions) -> Result<Initialized, ClientError> {
        let _serial = self.core.shared.capability_lock.lock().await;
        if self.core.peer.is_closed() {
            return Err(self.core.closed_error());
        }
        let interactions = {
            let mut state = lock(&self.core.shared.state);
            if state.phase != Phase::Fresh {
                return Err(ClientError::AlreadyInitialized);
            }
            state.phase = Phase::Initializing;
            state.interactions.clone()
        };
        let outcome = self.core.initialize(options, &interactions).await;
        if outcome.is_err() {
            let mut state = lock(&self.core.shared.state);
            if state.phase == Phase::Initializing {
                state.phase = Phase::Fresh;
            }
        }
        self.core.shared.initialized.notify_waiters();
        outcome
    }

    /// Replaces the server-request handlers. Before `initialize` they are only stored; on 1.2+
    /// `client.capabilities.set` is sent with the next revision and the ACK checked; running
    /// handlers of methods the runtime no longer accepts are aborted. Returns what the runtime
    /// may now send.
    ///
    /// # Errors
    /// On 1.1, [`ClientError::RequiredHandler`] without an `approval.request` handler; on 1.2+
    /// the call's errors, and [`ClientError::ProtocolViolation`] for a bad ACK (the connection
    /// closes).
    pub async fn set_handlers(
        &self,
        interactions: Interactions,
    ) -> Result<BTreeSet<ServerRequestMethod>, ClientError> {
        let _serial = self.core.shared.capability_lock.lock().await;
        let version = {
            let mut state = lock(&self.core.shared.state);
            match &state.session {
                Some(session) => session.version,
                None => {
                    state.interactions = interactions;
                    return Ok(BTreeSet::new());
                }
            }
        };
        if self.core.peer.is_closed() {
            return Err(self.core.closed_error());
        }
        if version.capabilities().server_request_capability_negotiation {
            return self.core.negotiate(interactions).await;
        }
        if let Some(method) = version
            .required_server_request_methods()
            .iter()
            .find(|m| !interactions.handles(**m))
        {
            return Err(ClientError::RequiredHandler {
                version,
                method: *method,
            });
        }
        let mut state = lock(&self.core.shared.state);
        state.accepted = version
            .server_request_methods()
            .filter(|m| interactions.handles(*m))
            .collect();
        state.interactions = interactions;
        Ok(state.accepted.clone())
    }
}

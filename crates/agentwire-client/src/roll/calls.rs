//! One call under the negotiated version: refused before sending when the version does not
//! serve it, the runtime lacks its feature, the params are invalid or the frame is over the
//! outbound limit; its result validated and decoded; a retryable read retried once; and the
//! connection closed on a protocol violation.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentwire_jsonrpc::{CallError, Id};
use agentwire_roll::parse::ParseError;
use agentwire_roll::{Method, ProtocolVersion, RollMethod, schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ClientCore, ClientError, CloseReason, ProtocolViolation, RemoteError, Session, lock};

/// Counts the bytes a value serialises to, without keeping them.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(super) fn json_length<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// The encoded length of a request, counting the longest numeric id (our ids are numbers).
fn request_frame_length(method: &str, params: &Value) -> usize {
    const FIXED: usize = r#"{"jsonrpc":"2.0","id":,"method":,"params":}"#.len();
    const LONGEST_ID: usize = "18446744073709551615".len();
    FIXED
        .saturating_add(LONGEST_ID)
        .saturating_add(json_length(method))
        .saturating_add(json_length(params))
}

/// The encoded length of the answer to a server request.
pub(super) fn response_frame_length(id: &Id, result: &Value) -> usize {
    const FIXED: usize = r#"{"jsonrpc":"2.0","id":,"result":}"#.len();
    FIXED
        .saturating_add(json_length(id))
        .saturating_add(json_length(result))
}

pub(super) fn validate_result(
    version: ProtocolVersion,
    method: Method,
    result: &Value,
) -> Result<(), ParseError> {
    schema::validate_definition(version, &method.result_definition(), result)
        .map_err(|issues| ParseError::Schema { version, issues })
}

pub(super) fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ParseError> {
    serde_json::from_value(value).map_err(|e| ParseError::Decode(e.to_string()))
}

impl ClientCore {
    pub(super) fn session(&self) -> Result<Arc<Session>, ClientError> {
        if self.peer.is_closed() {
            return Err(self.closed_error());
        }
        lock(&self.shared.state)
            .session
            .clone()
            .ok_or(ClientError::NotInitialized)
    }

    pub(super) fn closed_error(&self) -> ClientError {
        let reason = lock(&self.shared.state)
            .close_reason
            .clone()
            .unwrap_or_else(|| CloseReason::Disconnected("the connection closed".to_owned()));
        ClientError::Closed {
            reason,
            stderr_tail: self.shared.stderr_tail(),
        }
    }

    /// Records the violation and closes the connection: every pending call fails with
    /// [`ClientError::Closed`] naming it.
    pub(super) async fn violate(&self, violation: ProtocolViolation) -> ClientError {
        tracing::error!(code = violation.code(), %violation, "protocol violation; closing the connection");
        self.shared
            .record_close(CloseReason::Violation(violation.clone()));
        let peer = self.peer.clone();
        // Closing starts at once; writing what is queued may take longer and need not be
        // waited for.
        tokio::spawn(async move { peer.close().await });
        self.peer.closed().await;
        ClientError::ProtocolViolation(violation)
    }

    /// Waits until every notification read so far was handled. The transport hands a
    /// response to its caller directly but notifications through an ordered queue, so the
    /// events a runtime sent before an answer may still be queued when the answer arrives.
    pub(super) async fn settle_notifications(&self) {
        let read = self.peer.stats().notifications_received;
        loop {
            let handled = self.shared.notification_handled.notified();
            tokio::pin!(handled);
            handled.as_mut().enable();
            if self.shared.handled_notifications.load(Ordering::SeqCst) >= read
                || self.peer.is_closed()
            {
                return;
            }
            tokio::select! {
                _ = handled => {}
                _ = self.peer.closed() => return,
            }
        }
    }

    pub(super) async fn send(
        &self,
        method: Method,
        params: &Value,
        limit: usize,
    ) -> Result<Value, ClientError> {
        let length = request_frame_length(method.as_str(), params);
        if length > limit {
            return Err(ClientError::OutboundTooLarge {
                method,
                length,
                limit,
            });
        }
        let timeout = self.shared.settings.request_timeout;
        match self
            .peer
            .request_with::<_, Value>(method.as_str(), params, timeout)
            .await
        {
            Ok(result) => Ok(result),
            Err(CallError::Remote(error)) => Err(ClientError::Remote {
                method,
                error: Box::new(RemoteError::from_error_object(error)),
            }),
            Err(CallError::Timeout { timeout_ms }) => {
                Err(ClientError::Timeout { method, timeout_ms })
            }
            Err(CallError::Closed) => Err(self.closed_error()),
            Err(other) => Err(ClientError::Transport(other)),
        }
    }

    /// One call under the negotiated version: refused before sending when the version does not
    /// serve it, the runtime lacks its feature or the params are invalid; the result validated;
    /// retryable reads retried once.
    pub(super) async fn request(
        &self,
        method: Method,
        params: Value,
        internal: bool,
    ) -> Result<Value, ClientError> {
        if !internal {
            let instead = match method {
                Method::Initialize => Some("RollClient::initialize"),
                Method::ClientCapabilitiesSet => Some("RollClient::set_handlers"),
                _ => None,
            };
            if let Some(instead) = instead {
                return Err(ClientError::ReservedMethod { method, instead });
            }
        }
        let session = self.session()?;
        let version = session.version;
        if !method.is_served(version) {
            return Err(ClientError::MethodUnavailable { method, version });
        }
        if let Some(feature) = method.required_feature()
            && !session
                .result
                .features
                .iter()
                .any(|f| f.as_str() == feature.as_str())
        {
            return Err(ClientError::FeatureUnavailable { method, feature });
        }
        schema::validate_definition(version, &method.params_definition(), &params).map_err(
            |issues| ClientError::InvalidParams {
                method,
                error: ParseError::Schema { version, issues },
            },
        )?;
        let mut retried = false;
        loop {
            match self.send(method, &params, session.outbound_limit).await {
                Ok(result) => {
                    validate_result(version, method, &result)
                        .map_err(|error| ClientError::InvalidResult { method, error })?;
                    return Ok(result);
                }
                Err(error) if !retried && method.is_retryable_read() && error.is_retryable() => {
                    retried = true;
                    tracing::debug!(%method, %error, "retryable read failed; retrying once");
                    tokio::time::sleep(self.shared.settings.read_retry_delay).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    pub(super) async fn invoke<M: RollMethod>(
        &self,
        params: M::Params,
        internal: bool,
    ) -> Result<M::Result, ClientError> {
        let method = M::METHOD;
        let params = serde_json::to_value(&params).map_err(|e| ClientError::EncodeParams {
            method,
            message: e.to_string(),
        })?;
        let result = self.request(method, params, internal).await?;
        decode(result).map_err(|error| ClientError::InvalidResult { method, error })
    }

    pub(super) async fn call<M: RollMethod>(
        &self,
        params: M::Params,
    ) -> Result<M::Result, ClientError> {
        self.invoke::<M>(params, false).await
    }
}

//! What the runtime says without being asked: every valid `runtime.event` envelope, in arrival
//! order, through one bounded queue ([`ClientEvent`]) together with what the client dropped,
//! rejected or aborted; and the dispatch of the runtime's notifications.
//!
//! The queue never blocks the connection: when it is full the event is dropped and counted,
//! and a [`ClientEvent::Lagged`] with the count comes before the next event that fits. A host
//! that needs every durable event of a thread follows it instead
//! ([`crate::roll::RollClient::follow`]), which has its own bounded window and recovers from
//! what it misses.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_jsonrpc::Peer;
use agentwire_roll::ids::InteractionId;
use agentwire_roll::parse::parse_event_envelope;
use agentwire_roll::types::{Durability, RuntimeEventEnvelope};
use agentwire_roll::version::{NOTIFICATION_RUNTIME_EVENT, NOTIFICATION_SERVER_REQUEST_CANCEL};
use agentwire_roll::{JsonRpcId, ServerRequestMethod};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::calls::json_length;
use super::{Shared, lock};

/// One item of the event queue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A `runtime.event` envelope, valid under the negotiated version (durable or ephemeral).
    Runtime(Box<RuntimeEventEnvelope>),
    /// The queue was full: this many items were dropped just before this one.
    Lagged {
        /// Items dropped.
        missed: u64,
    },
    /// Something the runtime sent, or a handler answered, broke the protocol and was dropped
    /// (a notification), answered with an error (a server request), or replaced by `-32603`
    /// (a handler's answer).
    Rejected {
        /// The notification or server-request method.
        method: String,
        /// Stable code of what is wrong (`roll.parse.schema`, `roll.user_input.*`, …).
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The runtime cancelled a server request (or revoked its capability): its handler was
    /// aborted and nothing will be answered.
    InteractionCancelled {
        /// The server request.
        method: ServerRequestMethod,
        /// Its JSON-RPC id.
        id: JsonRpcId,
        /// Its interaction (1.2+).
        interaction_id: Option<InteractionId>,
        /// The runtime's reason.
        reason: String,
    },
}

/// Counters of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Valid runtime events received.
    pub events_received: u64,
    /// Queue items dropped because the queue was full.
    pub events_dropped: u64,
    /// Notifications, server requests and handler answers rejected.
    pub rejected: u64,
}

pub(super) struct EventSink {
    tx: mpsc::Sender<ClientEvent>,
    missed: Mutex<u64>,
    received: AtomicU64,
    dropped: AtomicU64,
    rejected: AtomicU64,
}

impl EventSink {
    pub(super) fn new(tx: mpsc::Sender<ClientEvent>) -> EventSink {
        EventSink {
            tx,
            missed: Mutex::new(0),
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    pub(super) fn stats(&self) -> ClientStats {
        ClientStats {
            events_received: self.received.load(Ordering::Relaxed),
            events_dropped: self.dropped.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

impl Shared {
    /// Queues an item without waiting; a full queue drops it (see the module docs).
    pub(super) fn emit(&self, event: ClientEvent) {
        let sink = &self.events;
        let mut missed = lock(&sink.missed);
        if *missed > 0 {
            match sink.tx.try_send(ClientEvent::Lagged { missed: *missed }) {
                Ok(()) => *missed = 0,
                Err(TrySendError::Full(_)) => {
                    *missed += 1;
                    sink.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(TrySendError::Closed(_)) => return,
            }
        }
        match sink.tx.try_send(event) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(_)) => {
                *missed += 1;
                sink.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Reports something that broke the protocol.
    pub(super) fn reject(&self, method: &str, code: &'static str, message: &str) {
        tracing::warn!(method, code, message, "rejected");
        self.events.rejected.fetch_add(1, Ordering::Relaxed);
        self.emit(ClientEvent::Rejected {
            method: method.to_owned(),
            code,
            message: message.to_owned(),
        });
    }

    /// Every notification the transport reads comes here, in order, and is counted once
    /// handled (see [`super::ClientCore::settle_notifications`]).
    pub(super) fn notification(&self, peer: &Peer, method: &str, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        match method {
            NOTIFICATION_RUNTIME_EVENT => self.runtime_event(&params),
            NOTIFICATION_SERVER_REQUEST_CANCEL => self.server_request_cancelled(peer, &params),
            other => self.reject(
                other,
                "client.roll.unknown-notification",
                "not a notification of the protocol",
            ),
        }
        self.handled_notifications.fetch_add(1, Ordering::SeqCst);
        self.notification_handled.notify_waiters();
    }

    fn runtime_event(&self, params: &Value) {
        let Some(version) = self.version() else {
            self.reject(
                NOTIFICATION_RUNTIME_EVENT,
                "client.roll.not-initialized",
                "an event before initialize",
            );
            return;
        };
        let envelope = match parse_event_envelope(version, params) {
            Ok(envelope) => envelope,
            Err(error) => {
                self.reject(NOTIFICATION_RUNTIME_EVENT, error.code(), &error.to_string());
                return;
            }
        };
        self.events.received.fetch_add(1, Ordering::Relaxed);
        if envelope.durability == Some(Durability::Durable) && envelope.cursor.is_some() {
            let follower = lock(&self.followers).get(&envelope.thread_id).cloned();
            if let Some(follower) = follower {
                follower.event(Box::new(envelope.clone()), json_length(params));
            }
        }
        self.emit(ClientEvent::Runtime(Box::new(envelope)));
    }
}

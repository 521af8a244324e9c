//! Server requests of a connection: an interaction delivered as the negotiated version's
//! request, its answer awaited and checked against what was asked (failing closed), withdrawn
//! when it is resolved elsewhere, and dropped when the connection closes.

use std::sync::Arc;

use agentwire_jsonrpc::{CallError, PendingCall};
use agentwire_roll::approval::ApprovalDecision;
use agentwire_roll::parse::{ServerRequestResult, parse_server_request_result};
use agentwire_roll::project::{
    project_server_request_cancel_params, project_server_request_params,
};
use agentwire_roll::user_input::{Control, UserInputResult, normalize_user_input_result_for_form};
use agentwire_roll::{ProtocolVersion, ServerRequestMethod};
use agentwire_runtime::{Interaction, InteractionKind, Resolution};
use serde_json::{Value, json};

use super::super::wire;
use super::{Delivery, Session, lock};

impl Session {
    /// Sends an interaction as a server request, if the client accepts its method now and it
    /// is not already out.
    pub(super) async fn deliver(self: &Arc<Self>, thread_id: &str, interaction: Interaction) {
        let Some(version) = self.version() else {
            return;
        };
        let Some(peer) = self.peer.get() else {
            return;
        };
        let Some(method) = ServerRequestMethod::from_wire(wire::interaction_method(&interaction))
        else {
            return;
        };
        if lock(&self.conn).check_server_request(method).is_err() {
            return;
        }
        if interaction.expires_at_ms <= self.face.runtime.now_ms() {
            return;
        }
        // An interaction read back after this connection fell behind may have been resolved
        // since: only one still pending is sent (one resolved later is withdrawn as usual).
        let pending = self
            .face
            .runtime
            .inspect(thread_id, |state| {
                state.pending.contains_key(&interaction.id)
            })
            .await;
        if !matches!(pending, Ok(true)) {
            return;
        }
        {
            let mut deliveries = lock(&self.deliveries);
            if deliveries.contains_key(&interaction.id) {
                return;
            }
            deliveries.insert(
                interaction.id.clone(),
                Delivery {
                    thread_id: thread_id.to_owned(),
                    method,
                    approval_id: interaction.ask.approval_id().map(str::to_owned),
                    rpc_id: None,
                    task: None,
                    withdrawn: None,
                    answered: false,
                },
            );
        }
        let params = match project_server_request_params(
            method.as_str(),
            &wire::server_request_params(thread_id, &interaction),
            version,
        ) {
            Ok(params) => params,
            Err(error) => {
                lock(&self.deliveries).remove(&interaction.id);
                tracing::debug!(%error, "interaction not deliverable on this version");
                return;
            }
        };
        // Human interactions wait for the person, not for a request timeout.
        let call = match peer.start_request(method.as_str(), &params, None).await {
            Ok(call) => call,
            Err(error) => {
                lock(&self.deliveries).remove(&interaction.id);
                tracing::warn!(%error, "could not send {}", method.as_str());
                return;
            }
        };
        let rpc_id = call.id().clone();
        let interaction_id = interaction.id.clone();
        let session = Arc::clone(self);
        let owner = thread_id.to_owned();
        let task =
            tokio::spawn(
                async move { session.await_answer(owner, interaction, method, call).await },
            );
        let withdrawn = {
            let mut deliveries = lock(&self.deliveries);
            match deliveries.get_mut(&interaction_id) {
                Some(delivery) => {
                    delivery.rpc_id = Some(rpc_id);
                    delivery.task = Some(task.abort_handle());
                    delivery
                        .withdrawn
                        .take()
                        .map(|reason| (reason, deliveries.remove(&interaction_id)))
                }
                None => None,
            }
        };
        if let Some((reason, Some(delivery))) = withdrawn {
            task.abort();
            self.send_cancel(&interaction_id, &delivery, &reason);
        }
    }

    pub(super) async fn await_answer(
        self: Arc<Self>,
        thread_id: String,
        interaction: Interaction,
        method: ServerRequestMethod,
        call: PendingCall,
    ) {
        let outcome = call.answer().await;
        match lock(&self.deliveries).get_mut(&interaction.id) {
            Some(delivery) => delivery.answered = true,
            // Withdrawn (resolved otherwise, revoked, disconnected): a late answer is dropped.
            None => return,
        }
        // However the answer is taken, the delivery goes once it is (also when this task is
        // aborted, as the connection closes).
        let _answered = Forget {
            deliveries: &self.deliveries,
            interaction_id: &interaction.id,
        };
        let Some(version) = self.version() else {
            return;
        };
        let runtime = &self.face.runtime;
        let taken = match outcome {
            Ok(value) => resolution_of(version, method, &interaction, &value),
            Err(CallError::Closed) => return,
            Err(CallError::Remote(error)) => Err(format!(
                "the client answered {} with error {}: {}",
                method.as_str(),
                error.code,
                error.message
            )),
            Err(other) => Err(format!("{} failed: {other}", method.as_str())),
        };
        let result = match taken {
            Ok(resolution) => {
                runtime
                    .resolve(&thread_id, &interaction.id, resolution)
                    .await
            }
            Err(reason) => {
                tracing::warn!(interaction = %interaction.id, %reason, "failing closed");
                runtime
                    .fail_interaction(&thread_id, &interaction.id, &reason)
                    .await
            }
        };
        if let Err(error) = result {
            tracing::debug!(%error, "the interaction ended before the answer was taken");
        }
    }

    /// The interaction ended without this connection's answer: its server request is
    /// withdrawn with `runtime.serverRequest.cancel`.
    pub(super) fn withdraw(&self, interaction_id: &str, resolution: &Resolution) {
        let reason = match resolution {
            Resolution::Expired => "the interaction expired".to_owned(),
            Resolution::Cancelled { reason } if !reason.is_empty() => reason.clone(),
            _ => "the interaction was resolved".to_owned(),
        };
        let delivery = {
            let mut deliveries = lock(&self.deliveries);
            match deliveries.get_mut(interaction_id) {
                // Answered: the client has nothing left to withdraw, and the task records it.
                Some(d) if d.answered => None,
                Some(d) if d.rpc_id.is_none() => {
                    d.withdrawn = Some(reason.clone());
                    None
                }
                Some(_) => deliveries.remove(interaction_id),
                None => None,
            }
        };
        if let Some(delivery) = delivery {
            if let Some(task) = &delivery.task {
                task.abort();
            }
            self.send_cancel(interaction_id, &delivery, &reason);
        }
    }

    pub(super) fn send_cancel(&self, interaction_id: &str, delivery: &Delivery, reason: &str) {
        let (Some(version), Some(peer)) = (self.version(), self.peer.get()) else {
            return;
        };
        let mut full = json!({"interactionId": interaction_id, "reason": reason});
        if let Some(id) = &delivery.rpc_id {
            full["serverRequestId"] = serde_json::to_value(id).unwrap_or(Value::Null);
        }
        if let Some(approval_id) = &delivery.approval_id {
            full["approvalId"] = json!(approval_id);
        }
        let Ok(params) = project_server_request_cancel_params(&full, version) else {
            return;
        };
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify("runtime.serverRequest.cancel", &params).await;
        });
    }

    /// The connection closed: its server requests are gone. The interactions stay pending and
    /// are delivered again (new request id, same interaction id) on the next connection.
    pub(super) fn disconnect(&self) {
        for (_, delivery) in lock(&self.deliveries).drain() {
            if let Some(task) = delivery.task {
                task.abort();
            }
        }
    }
}

/// Removes an answered delivery once its answer is taken, or its task is dropped.
struct Forget<'a> {
    deliveries: &'a std::sync::Mutex<std::collections::HashMap<String, Delivery>>,
    interaction_id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut deliveries = lock(self.deliveries);
        if deliveries
            .get(self.interaction_id)
            .is_some_and(|delivery| delivery.answered)
        {
            deliveries.remove(self.interaction_id);
        }
    }
}

/// What a client's answer to a server request resolves, or why it cannot be taken (the
/// runtime then fails closed).
fn resolution_of(
    version: ProtocolVersion,
    method: ServerRequestMethod,
    interaction: &Interaction,
    value: &Value,
) -> Result<Resolution, String> {
    let parsed = parse_server_request_result(version, method.as_str(), value)
        .map_err(|e| format!("invalid {} result: {e}", method.as_str()))?;
    match (parsed, &interaction.ask) {
        (
            ServerRequestResult::Approval(ApprovalDecision::Approve {}),
            InteractionKind::Approval { .. },
        ) => Ok(Resolution::Approved),
        (
            ServerRequestResult::Approval(ApprovalDecision::Reject { reason }),
            InteractionKind::Approval { .. },
        ) => Ok(Resolution::Rejected { reason }),
        (ServerRequestResult::UserInput(result), InteractionKind::UserInput { controls, .. }) => {
            let controls: Vec<Control> = serde_json::from_value(controls.clone())
                .map_err(|e| format!("the form cannot be read back: {e}"))?;
            match normalize_user_input_result_for_form(&controls, result)
                .map_err(|e| format!("the submitted values do not fit the form: {e}"))?
            {
                UserInputResult::Submitted { values } => Ok(Resolution::Submitted {
                    values: serde_json::to_value(values).unwrap_or(Value::Null),
                }),
                UserInputResult::Cancelled { reason } => Ok(Resolution::Cancelled {
                    reason: reason.unwrap_or_else(|| "the user closed the form".to_owned()),
                }),
            }
        }
        _ => Err("the answer does not match the interaction".to_owned()),
    }
}

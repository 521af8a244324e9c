//! The method table served: [`RollHandler`] on a [`Call`], one method per client request, each
//! taking the table's typed params and answering its typed result. The thread reads are in
//! `threads`, the replay in `events`, the attachment methods in `attachments`.

use agentwire_jsonrpc::ErrorObject;
use agentwire_roll::approval::{ApprovalRespondParams, ApprovalVerdict};
use agentwire_roll::constants::{self, js_length};
use agentwire_roll::project::{project_initialize, project_operation};
use agentwire_roll::types::*;
use agentwire_roll::{RollErrorCode, RollHandler};
use agentwire_runtime::{Resolution, RuntimeError, TurnInput as CoreTurnInput};

use super::super::wire;
use super::attached::Attaching;
use super::{Call, lock};

type Reply<T> = Result<T, ErrorObject>;

impl RollHandler for Call {
    type Error = ErrorObject;

    async fn initialize(&self, params: InitializeParams) -> Reply<InitializeResult> {
        let session = &self.session;
        for (key, value) in [
            ("name", &params.client.name),
            ("version", &params.client.version),
        ] {
            let length = js_length(value.trim());
            if length == 0 || length > 100 {
                return Err(session.err(
                    RollErrorCode::INVALID_PARAMS,
                    format!("client.{key} has 1 to 100 characters after trimming"),
                ));
            }
        }
        // The lock is released before an error is built (building it reads the version).
        let negotiated = lock(&session.conn).initialize(&params.protocol_versions);
        let version = negotiated.map_err(|e| session.negotiation_error(&e))?;
        let config = &session.face.config;
        tracing::info!(version = %version, client = %params.client.name, "initialized");
        let result = InitializeResult {
            protocol_version: version.as_str().to_owned(),
            runtime_instance_id: wire::wire_value(
                "a runtime instance id",
                session.face.runtime.instance_id(),
            )
            .map_err(|e| session.wire_error(&e))?,
            server: ServerInfo {
                name: config.server_name.clone(),
                version: config.server_version.clone(),
                runtime_version: config.runtime_version.clone(),
            },
            features: session.features(version),
            limits: Limits {
                max_frame_bytes: config.max_frame_bytes,
                max_page_size: config.max_page_size,
                event_replay: version.capabilities().durable_events,
                idempotency_cache_entries: session.face.runtime.idempotency().limits().entries
                    as u64,
                // Every version's keys; the projection keeps the ones `version` has.
                max_attachment_bytes: Some(constants::MAX_ATTACHMENT_BYTES),
                max_attachment_chunk_bytes: Some(constants::MAX_ATTACHMENT_CHUNK_BYTES),
                max_turn_attachments: Some(constants::MAX_TURN_ATTACHMENTS as u64),
                max_staged_attachments: Some(constants::MAX_STAGED_ATTACHMENTS as u64),
            },
        };
        if !version.capabilities().server_request_capability_negotiation {
            // 1.1 is interaction-ready at once: pending interactions follow the answer.
            session.deliver_pending_after(&self.ctx);
        }
        Ok(project_initialize(result, version))
    }

    async fn client_capabilities_set(
        &self,
        params: ClientCapabilitiesSetParams,
    ) -> Reply<ClientCapabilitiesSetResult> {
        let session = &self.session;
        let updated =
            lock(&session.conn).set_capabilities(params.revision, &params.server_request_methods);
        let update = updated.map_err(|e| session.negotiation_error(&e))?;
        for method in &update.revoked {
            session.revoke(*method);
        }
        session.deliver_pending_after(&self.ctx);
        let accepted = update
            .ack
            .accepted
            .iter()
            .map(|m| wire::wire_value::<ServerRequestMethodName>("a server request", m.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| session.wire_error(&e))?;
        Ok(ClientCapabilitiesSetResult {
            revision: update.ack.revision,
            accepted_server_request_methods: accepted,
        })
    }

    async fn thread_list(&self, params: ThreadListParams) -> Reply<ThreadListResult> {
        self.session.thread_list(params)
    }

    async fn thread_create(&self, params: ThreadCreateParams) -> Reply<ThreadResult> {
        let session = &self.session;
        let title = params
            .title
            .as_deref()
            .map(|t| session.title(t))
            .transpose()?;
        let id = session
            .face
            .runtime
            .create_thread(title, None)
            .await
            .map_err(|e| session.runtime_error(&e))?;
        session.attach(&id);
        session.thread_result(&id)
    }

    async fn thread_open(&self, params: ThreadIdParams) -> Reply<Box<ThreadSnapshot>> {
        let session = &self.session;
        let thread_id = params.thread_id.as_str();
        // Attached first: an event committed while the snapshot is read is then sent live (and
        // may also be in the snapshot) rather than missed.
        let attaching = Attaching::new(&session.attached, thread_id);
        let snapshot = session
            .snapshot(
                self.version,
                &ThreadSnapshotParams {
                    thread_id: params.thread_id.clone(),
                    message_before_sequence: None,
                    operation_before_sequence: None,
                    limit: None,
                    recovery: None,
                },
            )
            .await;
        if snapshot.is_ok() {
            attaching.keep();
        }
        snapshot
    }

    async fn thread_snapshot(&self, params: ThreadSnapshotParams) -> Reply<Box<ThreadSnapshot>> {
        self.session.snapshot(self.version, &params).await
    }

    async fn thread_rename(&self, params: ThreadRenameParams) -> Reply<ThreadResult> {
        let session = &self.session;
        let title = session.title(&params.title)?;
        session
            .face
            .runtime
            .rename_thread(params.thread_id.as_str(), title)
            .await
            .map_err(|e| session.runtime_error(&e))?;
        session.thread_result(params.thread_id.as_str())
    }

    async fn thread_delete(&self, params: ThreadMutationParams) -> Reply<ThreadDeleteResult> {
        let session = &self.session;
        let thread_id = params.thread_id.as_str();
        session
            .face
            .runtime
            .delete_thread(thread_id)
            .await
            .map_err(|e| session.runtime_error(&e))?;
        lock(&session.attached).remove(thread_id);
        if let Some(store) = &session.face.config.attachments
            && let Err(error) = store.release_thread(thread_id).await
        {
            tracing::warn!(%error, "could not release a deleted thread's attachments");
        }
        Ok(ThreadDeleteResult { deleted: true })
    }

    async fn thread_detach(&self, params: ThreadMutationParams) -> Reply<ThreadDetachResult> {
        let session = &self.session;
        let thread_id = params.thread_id.as_str();
        session.ensure_thread(thread_id)?;
        let detached = lock(&session.attached).remove(thread_id);
        Ok(ThreadDetachResult { detached })
    }

    async fn thread_capabilities(&self, params: ThreadIdParams) -> Reply<ThreadCapabilitiesResult> {
        self.session.ensure_thread(params.thread_id.as_str())?;
        Ok(ThreadCapabilitiesResult {
            manifest: self.session.face.config.manifest.clone(),
        })
    }

    async fn runtime_events_resume(
        &self,
        params: RuntimeEventsResumeParams,
    ) -> Reply<RuntimeEventsResumeResult> {
        self.session.resume(&self.ctx, self.version, params).await
    }

    async fn turn_start(&self, params: TurnStartParams) -> Reply<TurnStartResult> {
        let session = &self.session;
        let thread_id = params.thread_id.as_str();
        let ids: Vec<String> = params
            .input
            .attachments
            .iter()
            .flatten()
            .map(|id| id.as_str().to_owned())
            .collect();
        if params.input.text.is_empty() && ids.is_empty() {
            return Err(session.err(
                RollErrorCode::INVALID_PARAMS,
                "a turn needs text or attachments",
            ));
        }
        let parts = if ids.is_empty() {
            Vec::new()
        } else {
            session
                .attachment_store()?
                .for_turn(thread_id, &ids)
                .await
                .map_err(|e| session.attachment_error(&e))?
        };
        let accepted = TurnStartResult {
            accepted: true,
            turn_id: params.turn_id.clone(),
        };
        // Attached before the turn starts, so its first events reach this connection.
        let attaching = Attaching::new(&session.attached, thread_id);
        let input = CoreTurnInput {
            text: params.input.text,
            attachments: parts,
        };
        match session
            .face
            .runtime
            .start_turn(thread_id, params.turn_id.as_str(), input)
            .await
        {
            // A second start of the same turn is a retry: the first start stands.
            Ok(()) | Err(RuntimeError::TurnAlreadyStarted { .. }) => {
                attaching.keep();
                Ok(accepted)
            }
            Err(error) => Err(session.runtime_error(&error)),
        }
    }

    async fn turn_cancel(&self, params: TurnCancelParams) -> Reply<TurnCancelResult> {
        let session = &self.session;
        let cancelling = session
            .face
            .runtime
            .cancel_turn(params.thread_id.as_str(), params.turn_id.as_str())
            .await
            .map_err(|e| session.runtime_error(&e))?;
        Ok(TurnCancelResult { cancelling })
    }

    async fn approval_respond(
        &self,
        params: ApprovalRespondParams,
    ) -> Reply<ApprovalRespondResult> {
        let session = &self.session;
        let (thread_id, turn_id, approval_id) = (
            params.thread_id.as_str(),
            params.turn_id.as_str(),
            params.approval_id.as_str(),
        );
        let pending = session
            .face
            .runtime
            .inspect(thread_id, |state| {
                state
                    .pending
                    .values()
                    .find(|i| i.ask.approval_id() == Some(approval_id) && i.turn_id == turn_id)
                    .map(|i| i.id.clone())
            })
            .await
            .map_err(|e| session.runtime_error(&e))?;
        let Some(interaction_id) = pending else {
            return Err(session.err(
                RollErrorCode::APPROVAL_NOT_FOUND,
                format!("approval {approval_id} is not pending on turn {turn_id}"),
            ));
        };
        let resolution = match params.decision {
            ApprovalVerdict::Approve => Resolution::Approved,
            ApprovalVerdict::Reject => Resolution::Rejected {
                reason: params.reason,
            },
        };
        session
            .face
            .runtime
            .resolve(thread_id, &interaction_id, resolution)
            .await
            .map_err(|e| session.runtime_error(&e))?;
        Ok(ApprovalRespondResult { resolved: true })
    }

    async fn operation_get(&self, params: OperationParams) -> Reply<OperationGetResult> {
        let session = &self.session;
        let operation = match session.operation(&params).await? {
            Some((op, sequence, at)) => Some(project_operation(
                wire::operation_view(sequence, &op, at).map_err(|e| session.wire_error(&e))?,
                self.version,
            )),
            None => None,
        };
        Ok(OperationGetResult { operation })
    }

    async fn operation_result_get(
        &self,
        params: OperationParams,
    ) -> Reply<OperationResultGetResult> {
        let session = &self.session;
        let result = match session.operation(&params).await? {
            Some((op, _, at)) => Some(
                wire::operation_result_view(&params.thread_id, &op, at)
                    .map_err(|e| session.wire_error(&e))?,
            ),
            None => None,
        };
        Ok(OperationResultGetResult { result })
    }

    async fn attachment_stage(
        &self,
        params: AttachmentStageParams,
    ) -> Reply<AttachmentStageResult> {
        self.session.attachment_stage(params).await
    }

    async fn attachment_chunk(
        &self,
        params: AttachmentChunkParams,
    ) -> Reply<AttachmentChunkResult> {
        self.session.attachment_chunk(params).await
    }

    async fn attachment_commit(&self, params: AttachmentParams) -> Reply<AttachmentCommitResult> {
        self.session.attachment_commit(params).await
    }

    async fn attachment_release(&self, params: AttachmentParams) -> Reply<AttachmentReleaseResult> {
        self.session.attachment_release(params).await
    }
}

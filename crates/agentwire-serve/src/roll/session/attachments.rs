//! The attachment methods of a connection: staging, committing and releasing the runtime's
//! attachments, answered `CAPABILITY_UNAVAILABLE` when the runtime keeps none.

use agentwire_jsonrpc::ErrorObject;
use agentwire_roll::RollErrorCode;
use agentwire_roll::ids::ThreadId;
use agentwire_roll::types::{
    AttachmentChunkParams, AttachmentChunkResult, AttachmentCommitResult, AttachmentParams,
    AttachmentReleaseResult, AttachmentSource, AttachmentStageParams, AttachmentStageResult,
};
use agentwire_runtime::{AttachmentError, AttachmentStore, StageRequest, StageSource};
use serde_json::json;

use super::super::{roll_error, wire};
use super::Session;

/// The Roll code of the attachment errors that have one of their own: one each.
fn roll_code(error: &AttachmentError) -> Option<RollErrorCode> {
    Some(match error {
        AttachmentError::NotFound { .. } => RollErrorCode::ATTACHMENT_NOT_FOUND,
        AttachmentError::NotCommitted { .. } => RollErrorCode::ATTACHMENT_NOT_COMMITTED,
        AttachmentError::TooLarge { .. } => RollErrorCode::ATTACHMENT_TOO_LARGE,
        AttachmentError::TypeUnsupported { .. } => RollErrorCode::ATTACHMENT_TYPE_UNSUPPORTED,
        AttachmentError::HashMismatch { .. } => RollErrorCode::ATTACHMENT_HASH_MISMATCH,
        AttachmentError::QuotaExceeded { .. } => RollErrorCode::ATTACHMENT_QUOTA_EXCEEDED,
        AttachmentError::UploadIncomplete { .. } => RollErrorCode::ATTACHMENT_UPLOAD_INCOMPLETE,
        AttachmentError::PathRejected { .. } => RollErrorCode::ATTACHMENT_PATH_REJECTED,
        _ => return None,
    })
}

impl Session {
    pub(super) fn attachment_store(&self) -> Result<&AttachmentStore, ErrorObject> {
        self.face.config.attachments.as_ref().ok_or_else(|| {
            self.err(
                RollErrorCode::CAPABILITY_UNAVAILABLE,
                "this runtime does not accept attachments",
            )
        })
    }

    pub(super) fn attachment_error(&self, error: &AttachmentError) -> ErrorObject {
        let code = match roll_code(error) {
            Some(code) => code,
            None if error.is_invalid_params() => RollErrorCode::INVALID_PARAMS,
            None => {
                tracing::error!(%error, code = error.code(), "the attachment store failed");
                RollErrorCode::INTERNAL_ERROR
            }
        };
        roll_error(
            self.error_version(),
            code,
            error.to_string(),
            Some(json!({"code": error.code()})),
        )
    }

    /// The store, after checking that `thread_id` is served (attachments belong to a thread).
    fn store_of(&self, thread_id: &ThreadId) -> Result<&AttachmentStore, ErrorObject> {
        let store = self.attachment_store()?;
        self.ensure_thread(thread_id.as_str())?;
        Ok(store)
    }

    pub(super) async fn attachment_stage(
        &self,
        params: AttachmentStageParams,
    ) -> Result<AttachmentStageResult, ErrorObject> {
        let store = self.store_of(&params.thread_id)?;
        let source = match (params.source, params.source_path) {
            (AttachmentSource::LocalPath, Some(path)) => {
                StageSource::LocalPath(std::path::PathBuf::from(path))
            }
            (AttachmentSource::Chunks, None) => StageSource::Chunks,
            _ => {
                return Err(self.err(
                    RollErrorCode::INVALID_PARAMS,
                    "source local-path needs sourcePath; source chunks forbids it",
                ));
            }
        };
        let request = StageRequest {
            file_name: params.file_name,
            media_type: params.media_type.as_str().to_owned(),
            bytes: params.bytes,
            sha256: params.sha_256,
            source,
        };
        let staged = store
            .stage(params.thread_id.as_str(), request)
            .await
            .map_err(|e| self.attachment_error(&e))?;
        Ok(AttachmentStageResult {
            attachment_id: self
                .wire(wire::wire_value("an attachment id", &staged.attachment_id))?,
            state: self.wire(wire::wire_value(
                "an attachment state",
                staged.state.as_str(),
            ))?,
            descriptor: staged
                .descriptor
                .as_ref()
                .map(|d| self.wire(wire::attachment_descriptor(d)))
                .transpose()?,
        })
    }

    pub(super) async fn attachment_chunk(
        &self,
        params: AttachmentChunkParams,
    ) -> Result<AttachmentChunkResult, ErrorObject> {
        use base64::Engine as _;
        let store = self.store_of(&params.thread_id)?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(&params.data_base_64)
            .map_err(|e| self.err(RollErrorCode::INVALID_PARAMS, format!("dataBase64: {e}")))?;
        let progress = store
            .chunk(
                params.thread_id.as_str(),
                params.attachment_id.as_str(),
                params.sequence,
                &data,
            )
            .await
            .map_err(|e| self.attachment_error(&e))?;
        Ok(AttachmentChunkResult {
            received_bytes: progress.received_bytes,
            next_sequence: progress.next_sequence,
        })
    }

    pub(super) async fn attachment_commit(
        &self,
        params: AttachmentParams,
    ) -> Result<AttachmentCommitResult, ErrorObject> {
        let store = self.store_of(&params.thread_id)?;
        let descriptor = store
            .commit(params.thread_id.as_str(), params.attachment_id.as_str())
            .await
            .map_err(|e| self.attachment_error(&e))?;
        Ok(AttachmentCommitResult {
            descriptor: self.wire(wire::attachment_descriptor(&descriptor))?,
        })
    }

    pub(super) async fn attachment_release(
        &self,
        params: AttachmentParams,
    ) -> Result<AttachmentReleaseResult, ErrorObject> {
        let store = self.store_of(&params.thread_id)?;
        let released = store
            .release(params.thread_id.as_str(), params.attachment_id.as_str())
            .await
            .map_err(|e| self.attachment_error(&e))?;
        Ok(AttachmentReleaseResult { released })
    }

    fn wire<T>(&self, built: Result<T, wire::WireError>) -> Result<T, ErrorObject> {
        built.map_err(|e| self.wire_error(&e))
    }
}

//! The attachment methods of a connection: staging, committing and releasing the runtime's
//! attachments, answered `CAPABILITY_UNAVAILABLE` when the runtime keeps none.

use agentwire_jsonrpc::ErrorObject;
use agentwire_roll::{Method, RollErrorCode};
use agentwire_runtime::{AttachmentError, AttachmentStore, StageRequest, StageSource};
use serde_json::{Value, json};

use super::super::{roll_error, wire};
use super::{Answer, Session, str_param};

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

    pub(super) async fn attachment(&self, method: Method, params: &Value) -> Answer {
        let store = self.attachment_store()?;
        let thread_id = str_param(params, "threadId");
        // Attachments belong to a served thread.
        self.ensure_thread(thread_id)?;
        let attachment_id = str_param(params, "attachmentId");
        match method {
            Method::AttachmentStage => {
                let source = match (str_param(params, "source"), params.get("sourcePath")) {
                    ("local-path", Some(Value::String(path))) => {
                        StageSource::LocalPath(std::path::PathBuf::from(path))
                    }
                    ("chunks", None) => StageSource::Chunks,
                    _ => {
                        return Err(self.err(
                            RollErrorCode::INVALID_PARAMS,
                            "source local-path needs sourcePath; source chunks forbids it",
                        ));
                    }
                };
                let request = StageRequest {
                    file_name: str_param(params, "fileName").to_owned(),
                    media_type: str_param(params, "mediaType").to_owned(),
                    bytes: params.get("bytes").and_then(Value::as_u64).unwrap_or(0),
                    sha256: str_param(params, "sha256").to_owned(),
                    source,
                };
                let staged = store
                    .stage(thread_id, request)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                let mut out =
                    json!({"attachmentId": staged.attachment_id, "state": staged.state.as_str()});
                if let Some(descriptor) = &staged.descriptor {
                    out["descriptor"] = wire::attachment_descriptor(descriptor);
                }
                Ok(out)
            }
            Method::AttachmentChunk => {
                use base64::Engine as _;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(str_param(params, "dataBase64"))
                    .map_err(|e| {
                        self.err(RollErrorCode::INVALID_PARAMS, format!("dataBase64: {e}"))
                    })?;
                let sequence = params.get("sequence").and_then(Value::as_u64).unwrap_or(0);
                let progress = store
                    .chunk(thread_id, attachment_id, sequence, &data)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(
                    json!({"receivedBytes": progress.received_bytes, "nextSequence": progress.next_sequence}),
                )
            }
            Method::AttachmentCommit => {
                let descriptor = store
                    .commit(thread_id, attachment_id)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(json!({"descriptor": wire::attachment_descriptor(&descriptor)}))
            }
            _ => {
                let released = store
                    .release(thread_id, attachment_id)
                    .await
                    .map_err(|e| self.attachment_error(&e))?;
                Ok(json!({"released": released}))
            }
        }
    }
}

//! The thread reads of a connection: one thread's summary, the paged thread list and the
//! thread snapshot (full or recovery), each projected for the negotiated version.

use agentwire_jsonrpc::ErrorObject;
use agentwire_roll::constants::DEFAULT_PAGE_LIMIT;
use agentwire_roll::project::project_thread_snapshot;
use agentwire_roll::{ProtocolVersion, RollErrorCode};
use serde_json::{Value, json};

use super::super::wire::{self, SnapshotPaging};
use super::{Answer, Session};

impl Session {
    pub(super) async fn thread_result(&self, thread_id: &str) -> Answer {
        let summary = self
            .face
            .runtime
            .inspect(thread_id, |state| wire::summary_of(thread_id, state))
            .await
            .map_err(|e| self.runtime_error(&e))?;
        Ok(json!({"thread": wire::thread_summary(&summary)}))
    }

    pub(super) fn page_limit(&self, params: &Value) -> Result<usize, ErrorObject> {
        let limit = params
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_PAGE_LIMIT);
        if limit == 0 || limit > self.face.config.max_page_size {
            return Err(self.err(
                RollErrorCode::INVALID_PARAMS,
                format!("limit must be 1 to {}", self.face.config.max_page_size),
            ));
        }
        Ok(usize::try_from(limit).unwrap_or(usize::MAX))
    }

    pub(super) async fn thread_list(&self, params: &Value) -> Answer {
        let limit = self.page_limit(params)?;
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(digits) => digits.parse::<usize>().unwrap_or(usize::MAX),
        };
        let summaries = self.face.runtime.summaries().await;
        let end = start.saturating_add(limit).min(summaries.len());
        let items: Vec<Value> = summaries
            .get(start.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(wire::thread_summary)
            .collect();
        let next = (end < summaries.len()).then(|| end.to_string());
        Ok(json!({"items": items, "nextCursor": next}))
    }

    pub(super) fn event_cursor(&self, thread_id: &str, timeline_len: usize) -> Option<String> {
        timeline_len
            .checked_sub(1)
            .map(|last| self.face.cursor(thread_id, last as u64).as_str().to_owned())
    }

    pub(super) async fn snapshot(
        &self,
        version: ProtocolVersion,
        thread_id: &str,
        params: &Value,
    ) -> Answer {
        let limit = self.page_limit(params)?;
        let recovery = params.get("recovery") == Some(&Value::Bool(true));
        let paging = SnapshotPaging {
            message_before: params.get("messageBeforeSequence").and_then(Value::as_u64),
            operation_before: params
                .get("operationBeforeSequence")
                .and_then(Value::as_u64),
            limit,
        };
        let snapshot = self
            .face
            .runtime
            .inspect(thread_id, |state| {
                let cursor = self.event_cursor(thread_id, state.timeline.len());
                if recovery {
                    wire::recovery_snapshot(thread_id, state, cursor)
                } else {
                    wire::full_snapshot(thread_id, state, paging, cursor)
                }
            })
            .await
            .map_err(|e| self.runtime_error(&e))?;
        Ok(project_thread_snapshot(&snapshot, version))
    }
}

//! The thread reads of a connection: one thread's summary, the paged thread list and the
//! thread snapshot (full or recovery), each projected for the negotiated version.

use agentwire_jsonrpc::ErrorObject;
use agentwire_roll::constants::DEFAULT_PAGE_LIMIT;
use agentwire_roll::project::project_snapshot;
use agentwire_roll::types::{
    ThreadListParams, ThreadListResult, ThreadResult, ThreadSnapshot, ThreadSnapshotParams,
};
use agentwire_roll::{EventCursor, ProtocolVersion, RollErrorCode};

use super::super::wire::{self, SnapshotPaging};
use super::Session;

impl Session {
    pub(super) fn thread_result(&self, thread_id: &str) -> Result<ThreadResult, ErrorObject> {
        let summary = self
            .face
            .runtime
            .summary(thread_id)
            .map_err(|e| self.runtime_error(&e))?;
        Ok(ThreadResult {
            thread: wire::thread_summary(&summary).map_err(|e| self.wire_error(&e))?,
        })
    }

    /// A page size: the protocol's default when absent, at most `limits.maxPageSize`.
    fn page_limit(&self, limit: Option<u64>) -> Result<usize, ErrorObject> {
        let limit = limit.unwrap_or(DEFAULT_PAGE_LIMIT);
        if limit == 0 || limit > self.face.config.max_page_size {
            return Err(self.err(
                RollErrorCode::INVALID_PARAMS,
                format!("limit must be 1 to {}", self.face.config.max_page_size),
            ));
        }
        Ok(usize::try_from(limit).unwrap_or(usize::MAX))
    }

    /// A page of the thread list, oldest first. The cursor is the key of the page's last
    /// thread (creation time and id), so a thread deleted between two pages hides no other;
    /// a cursor this runtime did not give out is `INVALID_PARAMS`.
    pub(super) fn thread_list(
        &self,
        params: ThreadListParams,
    ) -> Result<ThreadListResult, ErrorObject> {
        let limit = self.page_limit(params.limit)?;
        let after = match params.cursor.as_deref() {
            None => None,
            Some(cursor) => Some(parse_list_cursor(cursor).ok_or_else(|| {
                self.err(
                    RollErrorCode::INVALID_PARAMS,
                    "cursor is not a thread list cursor",
                )
            })?),
        };
        let (page, more) = self.face.runtime.summaries_after(
            after.as_ref().map(|(at, id)| (*at, id.as_str())),
            limit,
            // A thread whose id is not a Roll thread id (another face's host chose it) is
            // not served over Roll.
            |summary| wire::is_thread_id(&summary.id),
        );
        let next_cursor = more
            .then(|| page.last())
            .flatten()
            .map(|last| list_cursor(last.created_at_ms, &last.id));
        let items = page
            .iter()
            .map(wire::thread_summary)
            .collect::<Result<_, _>>()
            .map_err(|e| self.wire_error(&e))?;
        Ok(ThreadListResult { items, next_cursor })
    }

    /// The cursor of a thread's last timeline event, `None` before its first.
    pub(super) fn event_cursor(&self, thread_id: &str, timeline_len: usize) -> Option<EventCursor> {
        timeline_len
            .checked_sub(1)
            .map(|last| self.face.cursor(thread_id, last as u64))
    }

    /// `thread.snapshot` (and `thread.open`): full or recovery, in `version`'s form.
    pub(super) async fn snapshot(
        &self,
        version: ProtocolVersion,
        params: &ThreadSnapshotParams,
    ) -> Result<Box<ThreadSnapshot>, ErrorObject> {
        let limit = self.page_limit(params.limit)?;
        let paging = SnapshotPaging {
            message_before: params.message_before_sequence,
            operation_before: params.operation_before_sequence,
            limit,
        };
        let thread_id = &params.thread_id;
        let snapshot = self
            .face
            .runtime
            .inspect(thread_id.as_str(), |state| {
                let cursor = self.event_cursor(thread_id.as_str(), state.timeline.len());
                if params.recovery == Some(true) {
                    wire::recovery_snapshot(thread_id, state, cursor)
                } else {
                    wire::full_snapshot(thread_id, state, paging, cursor)
                }
            })
            .await
            .map_err(|e| self.runtime_error(&e))?
            .map_err(|e| self.wire_error(&e))?;
        Ok(Box::new(project_snapshot(snapshot, version)))
    }
}

/// Digits of a thread list cursor's creation time.
const CURSOR_TIME_DIGITS: usize = 20;

/// A thread list cursor: the key of the last thread of a page (its creation time, then each
/// byte of its id as three digits), in the decimal digits Roll's cursors are made of.
fn list_cursor(created_at_ms: u64, thread_id: &str) -> String {
    let mut out = format!("{created_at_ms:0width$}", width = CURSOR_TIME_DIGITS);
    for byte in thread_id.bytes() {
        out.push_str(&format!("{byte:03}"));
    }
    out
}

/// The key a thread list cursor carries, if it is one [`list_cursor`] writes.
fn parse_list_cursor(cursor: &str) -> Option<(u64, String)> {
    if cursor.len() <= CURSOR_TIME_DIGITS
        || !(cursor.len() - CURSOR_TIME_DIGITS).is_multiple_of(3)
        || !cursor.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (at, id) = cursor.split_at(CURSOR_TIME_DIGITS);
    let bytes = id
        .as_bytes()
        .chunks(3)
        .map(|digits| std::str::from_utf8(digits).ok()?.parse::<u8>().ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((at.parse().ok()?, String::from_utf8(bytes).ok()?))
}

#[cfg(test)]
mod tests {
    use super::{list_cursor, parse_list_cursor};

    #[test]
    fn list_cursors_round_trip_and_refuse_what_they_are_not() {
        let cursor = list_cursor(1_796_514_537_533, "0a78539a-é");
        assert!(cursor.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(
            parse_list_cursor(&cursor),
            Some((1_796_514_537_533, "0a78539a-é".to_owned()))
        );
        for bad in [
            "",
            "2",
            "12345678901234567890",
            "1234567890123456789012",
            "0000000000000000000125600",
        ] {
            assert_eq!(parse_list_cursor(bad), None, "{bad}");
        }
    }
}

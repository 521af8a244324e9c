//! What a connection reports about itself: counters of lines, bytes and rejected input, and
//! events for input that was dropped (oversize, unparsable or invalid lines, stray responses).

use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_schema::JsonError;

use crate::error::ErrorObject;
use crate::message::Id;

/// Something a connection dropped or could not act on. Counters in [`Stats`] are exact; the
/// event stream is a bounded broadcast, so a slow subscriber may miss old events.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A line over the inbound frame limit was skipped.
    OversizeLine {
        /// Its byte length (line ending excluded).
        length: u64,
        /// The limit.
        limit: usize,
    },
    /// A line that is not JSON was dropped without a reply.
    UnparsableLine {
        /// Its byte length.
        length: usize,
        /// Why it does not parse (code, offset or position).
        error: JsonError,
    },
    /// Well-formed JSON that is not a valid JSON-RPC message.
    InvalidMessage {
        /// The id, when one could be read.
        id: Option<Id>,
        /// Why.
        reason: &'static str,
        /// Whether a `-32600` reply was sent.
        replied: bool,
    },
    /// A batch on a profile that does not allow them.
    BatchRejected {
        /// Number of elements.
        len: usize,
        /// Whether a `-32600` reply was sent.
        replied: bool,
    },
    /// An error response with `id: null`: it answers no request that can be identified.
    UncorrelatedError(ErrorObject),
    /// A response whose id matches no waiting request (unknown, timed out or already answered).
    UnknownResponse {
        /// Its id.
        id: Id,
    },
    /// A request was answered `-32001` because the inbound queue was full.
    Overloaded {
        /// Its id.
        id: Id,
    },
    /// The connection closed.
    Closed {
        /// Why (e.g. "end of input", an I/O error, "closed locally").
        reason: String,
    },
}

impl Event {
    /// Stable code of the event.
    pub fn code(&self) -> &'static str {
        match self {
            Event::OversizeLine { .. } => "jsonrpc.oversize-line",
            Event::UnparsableLine { .. } => "jsonrpc.unparsable-line",
            Event::InvalidMessage { .. } => "jsonrpc.invalid-message",
            Event::BatchRejected { .. } => "jsonrpc.batch-rejected",
            Event::UncorrelatedError(_) => "jsonrpc.uncorrelated-error",
            Event::UnknownResponse { .. } => "jsonrpc.unknown-response",
            Event::Overloaded { .. } => "jsonrpc.overloaded",
            Event::Closed { .. } => "jsonrpc.closed",
        }
    }
}

/// A snapshot of a connection's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Non-blank lines read (oversize lines included).
    pub lines_read: u64,
    /// Bytes of those lines (line endings excluded).
    pub bytes_read: u64,
    /// Lines over the inbound frame limit.
    pub oversize_lines: u64,
    /// Lines that are not JSON.
    pub unparsable_lines: u64,
    /// JSON lines that are not valid JSON-RPC messages (batch elements included).
    pub invalid_messages: u64,
    /// Requests received.
    pub requests_received: u64,
    /// Notifications received.
    pub notifications_received: u64,
    /// Responses received (matched or not).
    pub responses_received: u64,
    /// Responses that matched no waiting request.
    pub unknown_responses: u64,
    /// Requests answered `-32001`.
    pub overloaded_replies: u64,
    /// Lines written.
    pub lines_written: u64,
    /// Bytes written (line feeds included).
    pub bytes_written: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) lines_read: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) oversize_lines: AtomicU64,
    pub(crate) unparsable_lines: AtomicU64,
    pub(crate) invalid_messages: AtomicU64,
    pub(crate) requests_received: AtomicU64,
    pub(crate) notifications_received: AtomicU64,
    pub(crate) responses_received: AtomicU64,
    pub(crate) unknown_responses: AtomicU64,
    pub(crate) overloaded_replies: AtomicU64,
    pub(crate) lines_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            lines_read: get(&self.lines_read),
            bytes_read: get(&self.bytes_read),
            oversize_lines: get(&self.oversize_lines),
            unparsable_lines: get(&self.unparsable_lines),
            invalid_messages: get(&self.invalid_messages),
            requests_received: get(&self.requests_received),
            notifications_received: get(&self.notifications_received),
            responses_received: get(&self.responses_received),
            unknown_responses: get(&self.unknown_responses),
            overloaded_replies: get(&self.overloaded_replies),
            lines_written: get(&self.lines_written),
            bytes_written: get(&self.bytes_written),
        }
    }
}

//! The JSON-RPC transport's tests, one binary: the framer and decoder alone, the peer over real
//! transports, and interop with other languages' NDJSON readers.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod framing;
mod interop;
mod peer;
mod stdio;

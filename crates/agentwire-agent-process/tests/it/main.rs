//! The agent process adapter's tests, one binary: agent processes through the real runtime over
//! a SQLite log, and the agent protocol's schema, fixtures and documented messages.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod process;

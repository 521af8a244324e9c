//! The runtime's tests, one binary: the core without I/O, the running core over a real SQLite
//! log, and attachments.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod attachments;
mod core;
mod decisions;
mod human_tasks;
mod pipeline;
mod running;
mod subscriptions;

//! The event log's tests, one binary (the kill -9 test is its own harness-less binary): the
//! shared contract on both engines, and what each engine does beyond it.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod conformance;
mod engines;

//! The client's tests, one binary: the recovery manager against the resume rules, and the Roll
//! client against a scripted runtime.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod proxy;
mod recovery;
mod roll_client;

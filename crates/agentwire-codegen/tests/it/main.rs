//! The generators' tests, one binary: snapshots of each construct, the project's own protocols,
//! the real schemas compiled in every language, the generated validators against reference
//! validators, and fixture round trips.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod kotlin;
mod own_protocols;
mod real_schemas;
mod round_trips;
mod snapshots;
mod validators;

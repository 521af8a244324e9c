//! The integration tests of agentwire-roll, one module per area; test data lives in the
//! repository's `protocols/roll-runtime/` and the peers' fixtures.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cursor;
mod exports;
mod forms_and_approvals;
mod generated;
mod limits;
mod method_table;
mod negotiation;
mod own_fixtures;
mod projection;
mod upstream_fixtures;

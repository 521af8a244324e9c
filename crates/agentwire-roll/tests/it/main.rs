//! The integration tests of agentwire-roll, one module per area; test data lives in the
//! repository's `protocols/roll-runtime/` and the peers' fixtures.

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

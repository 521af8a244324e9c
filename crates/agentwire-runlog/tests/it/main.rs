//! The integration tests of agentwire-runlog, one module per concern, in one test binary.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod by_line;
mod coerce_rules;
mod derive;
mod fast_reader;
mod html_page;
mod live;
mod properties;
mod schema_document;
mod seed_example;
mod streaming;
mod support;

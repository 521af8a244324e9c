//! The integration tests of agentwire-runlog, one module per concern, in one test binary.

mod by_line;
mod coerce_rules;
mod derive;
mod fast_reader;
mod live;
mod properties;
mod schema_document;
mod seed_example;
mod streaming;
mod support;

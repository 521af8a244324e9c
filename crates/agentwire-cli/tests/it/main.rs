//! The command-line tests, one binary: each module drives the `agentwire` binary through one
//! command or workflow, as a user or another program would.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod app_server_edges;
mod app_server_human_tasks;
mod app_server_schema;
mod app_server_sdk;
mod baseline_cli;
mod client_e2e;
mod compat_cli;
mod conformance_cli;
mod demo_cli;
mod digest_fmt;
mod error_codes;
mod events_cli;
mod fatal_errors;
mod gateway_face;
mod gateway_real;
mod gateway_schema;
mod gen_cli;
mod hostile_cli;
mod lint_cli;
mod project_cli;
mod proxy_cli;
mod roll_runtime_cli;
mod runlog_cli;
mod runlog_html;
mod runlog_memory;
mod schema_cli;
mod serve_roll;
mod validate_cli;
mod validate_stream;
mod versions_cli;

//! Test support for the agentwire workspace: repository paths, external test tools, the real
//! protocol artifacts, and cross-validator runners (Ajv, Python `jsonschema`, the ChainlessChain
//! SDK's own validator).
//!
//! This crate is a dev-dependency only (`agentwire-testkit.workspace = true` under
//! `[dev-dependencies]`). It installs nothing: `scripts/install-test-tools.sh` (run by
//! `scripts/test.sh` and `.ci/run`) puts every tool and artifact under `.tools/`. When something is
//! missing, the functions here panic with a message that names the missing tool and the install
//! command, so that a test never passes by skipping its check.
//!
//! Overview:
//! - paths: [`repo_root`], [`tools_dir`], [`shared_dir`], [`peer_fixture`], [`files_with_extension`]
//! - tools: [`require_node`], [`node_script`], [`require_node_module`], [`require_tsc`],
//!   [`require_python`], [`python_script`], [`require_mypy`], [`require_kotlinc`], [`require_kotlin`],
//!   [`require_chromium`], [`chromium_headless`], [`require_openclaw`] (the real OpenClaw CLI and
//!   gateway)
//! - namespaces: [`LoopbackNamespace`], loopback only, `/tmp` and `HOME` in a scratch folder, shared
//!   by the processes of one test (`tools/ns/loopback.sh`)
//! - artifacts: [`openclaw_schema_path`], [`chainlesschain_schema_path`],
//!   [`chainlesschain_published_digest`]
//! - cross-validators: [`ajv_verdicts`], [`py_jsonschema_verdicts`], [`cc_sdk_verdicts`], all
//!   returning one [`Verdict`] per instance, many instances per process start
//! - fixtures: [`roll_upstream_fixtures`], [`roll_own_fixtures`], the Roll fixture walk (folder →
//!   version, name → verdict)
//! - servers: [`postgres_server`], a private PostgreSQL cluster per test binary
//! - helpers: [`run_ok`], [`read_json`], [`write_temp_json`]
//! - command-line runs: [`Cli`] (arguments, directory, standard input; fails on a panic),
//!   [`dir_with`], [`utf8`]
//! - the runtime core's tests (feature `runtime`): `runtime::input`, `runtime::until` (what is
//!   published until an event arrives), `runtime::is_turn_end`

mod artifacts;
mod cli;
mod json_paths;
mod namespace;
mod paths;
mod postgres;
mod process;
mod roll_fixtures;
#[cfg(feature = "runtime")]
pub mod runtime;
mod tools;
mod verdicts;

pub use artifacts::{
    CHAINLESSCHAIN_DEFINITION_COUNT, CHAINLESSCHAIN_SCHEMA_DIGEST, OPENCLAW_SCHEMA_SHA256,
    chainlesschain_published_digest, chainlesschain_schema_path, openclaw_schema_path, sha256_hex,
};
pub use cli::{Cli, dir_with, utf8};
pub use json_paths::{value_at_path_mut, value_paths};
pub use namespace::LoopbackNamespace;
pub use paths::{files_with_extension, peer_fixture, repo_root, shared_dir, tools_dir};
pub use postgres::{
    AW_EVENTS_COLUMNS, POSTGRES_BINDIR, PostgresServer, multi_row_insert, postgres_server,
};
pub use process::{read_json, run_ok, write_temp_json};
pub use roll_fixtures::{
    ROLL_UPSTREAM_FOLDERS, ROLL_VERSIONS, RollFixture, roll_own_fixtures, roll_upstream_fixtures,
};
pub use tools::{
    CHROMIUM_HEADLESS_FLAGS, OpenClaw, chromium_headless, node_script, python_script,
    require_chromium, require_kotlin, require_kotlinc, require_mypy, require_node,
    require_node_module, require_openclaw, require_python, require_tsc,
};
pub use verdicts::{Verdict, ajv_verdicts, cc_sdk_verdicts, py_jsonschema_verdicts};

/// The command that installs every test tool, named in every "missing" message.
pub const INSTALL_COMMAND: &str = "scripts/install-test-tools.sh";

/// Panics with the standard message for a missing test tool.
///
/// `what` says what the installer puts in place, e.g. "Node.js packages into .tools/node".
#[track_caller]
pub fn missing_tool(tool: &str, what: &str, detail: &str) -> ! {
    panic!("missing test tool {tool}: run {INSTALL_COMMAND} (it installs {what}); {detail}")
}

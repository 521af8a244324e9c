//! The real protocol artifacts published by others, as installed by the test-tool installer:
//! OpenClaw's `protocol.schema.json` (npm) and the ChainlessChain canonical schema (PyPI SDK).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest as _, Sha256};

use crate::missing_tool;
use crate::paths::tools_dir;
use crate::tools::require_node_module;

/// SHA-256 (hex) of `protocol.schema.json` in `@openclaw/gateway-protocol@2026.9.1`.
pub const OPENCLAW_SCHEMA_SHA256: &str =
    "971f2c0d2f0e267a062213b21a398518849c019d2cff1c1d54ff6ee1af7cddf1";

/// The digest `chainlesschain-agent-sdk==0.2.9` publishes for its canonical schema.
pub const CHAINLESSCHAIN_SCHEMA_DIGEST: &str =
    "sha256:ff1860d17b798060c95cce217ff27bef2f99e209dcb369cf2d70514a4d6f08d7";

/// Number of `$defs` in the ChainlessChain canonical schema of SDK 0.2.9.
pub const CHAINLESSCHAIN_DEFINITION_COUNT: usize = 127;

const CC_SCHEMA_FILE: &str = "cc-agent-protocol.schema.json";
const CC_DIGEST_FILE: &str = "cc-agent-protocol.digest";
const CC_WHAT: &str =
    "chainlesschain-agent-sdk into .tools/venv and extracts its schema into .tools/artifacts";

/// Lowercase hex SHA-256 of a file's bytes.
///
/// # Panics
/// When the file cannot be read.
pub fn sha256_hex(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    };
    Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Path of OpenClaw's `protocol.schema.json` (draft-07, 877 definitions), checked against
/// [`OPENCLAW_SCHEMA_SHA256`].
///
/// # Panics
/// When the npm package is not installed or the file's hash differs.
pub fn openclaw_schema_path() -> PathBuf {
    static CHECKED: OnceLock<PathBuf> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let path =
                require_node_module("@openclaw/gateway-protocol").join("protocol.schema.json");
            if !path.is_file() {
                missing_tool(
                    "OpenClaw protocol.schema.json",
                    "@openclaw/gateway-protocol@2026.9.1 into .tools/node",
                    &format!("{} does not exist", path.display()),
                );
            }
            let actual = sha256_hex(&path);
            if actual != OPENCLAW_SCHEMA_SHA256 {
                panic!(
                    "{} has sha256 {actual}, expected {OPENCLAW_SCHEMA_SHA256}: the installed \
                     @openclaw/gateway-protocol is not 2026.9.1; rerun {}",
                    path.display(),
                    crate::INSTALL_COMMAND
                );
            }
            path
        })
        .clone()
}

/// Path of the ChainlessChain canonical schema (JSON Schema 2020-12, 127 `$defs`) extracted from
/// `CC_AGENT_PROTOCOL_SCHEMA` of `chainlesschain-agent-sdk==0.2.9`.
///
/// # Panics
/// When the installer has not extracted it.
pub fn chainlesschain_schema_path() -> PathBuf {
    artifact(CC_SCHEMA_FILE)
}

/// The digest the SDK publishes for its schema (`CC_AGENT_PROTOCOL_SCHEMA_DIGEST`), read from
/// the installed package's extract, e.g. `sha256:ff18…`.
///
/// # Panics
/// When the installer has not extracted it.
pub fn chainlesschain_published_digest() -> String {
    let path = artifact(CC_DIGEST_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().to_owned(),
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    }
}

fn artifact(name: &str) -> PathBuf {
    let path = tools_dir().join("artifacts").join(name);
    if !path.is_file() {
        missing_tool(
            "ChainlessChain schema",
            CC_WHAT,
            &format!("{} does not exist", path.display()),
        );
    }
    path
}

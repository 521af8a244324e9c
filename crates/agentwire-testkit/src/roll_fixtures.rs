//! The Roll Runtime fixture walk: every fixture file of the peers' `roll-agent/fixtures/` and of
//! our `protocols/roll-runtime/fixtures/`, with the wire version its folder (or its own
//! `params.protocolVersion`) gives it and the verdict its name says.

use std::path::PathBuf;

use serde_json::Value;

use crate::paths::{files_with_extension, peer_fixture, repo_root};
use crate::process::read_json;

/// The Roll wire versions, oldest first.
pub const ROLL_VERSIONS: [&str; 6] = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

/// The peers' fixture folders under `roll-agent/fixtures/` and the version each speaks: the
/// frozen `v1` folder is 1.1 (its messages include the 1.1 server requests).
pub const ROLL_UPSTREAM_FOLDERS: [(&str, &str); 5] = [
    ("v1", "1.1"),
    ("v1.2", "1.2"),
    ("v1.3", "1.3"),
    ("v1.4", "1.4"),
    ("v1.5", "1.5"),
];

/// One fixture file.
#[derive(Debug, Clone)]
pub struct RollFixture {
    /// Where the file is.
    pub path: PathBuf,
    /// The folder it is in (`v1`, `v1.2`, …).
    pub folder: String,
    /// The file name (`valid-…json` or `invalid-…json`).
    pub file_name: String,
    /// The version of its folder.
    pub folder_version: &'static str,
    /// The message.
    pub message: Value,
    /// Whether the name says the message is valid (`valid-` prefix).
    pub valid: bool,
}

impl RollFixture {
    fn read(path: PathBuf, folder: &str, folder_version: &'static str) -> RollFixture {
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        RollFixture {
            message: read_json(&path),
            valid: file_name.starts_with("valid-"),
            folder: folder.to_owned(),
            file_name,
            folder_version,
            path,
        }
    }

    /// `folder/file`, for messages that name a fixture.
    pub fn name(&self) -> String {
        format!("{}/{}", self.folder, self.file_name)
    }

    /// The version the message is read at: its own `params.protocolVersion` when that is a Roll
    /// version, else its folder's.
    pub fn version(&self) -> &str {
        match self
            .message
            .pointer("/params/protocolVersion")
            .and_then(Value::as_str)
        {
            Some(stated) if ROLL_VERSIONS.contains(&stated) => stated,
            _ => self.folder_version,
        }
    }
}

/// Every fixture of the peers' `roll-agent/fixtures/` folders, folder by folder in
/// [`ROLL_UPSTREAM_FOLDERS`] order, files sorted by name.
///
/// # Panics
/// When a folder is missing (the peers' artifacts are not installed).
pub fn roll_upstream_fixtures() -> Vec<RollFixture> {
    let mut out = Vec::new();
    for (folder, version) in ROLL_UPSTREAM_FOLDERS {
        let dir = peer_fixture(format!("roll-agent/fixtures/{folder}"));
        for path in files_with_extension(&dir, "json") {
            out.push(RollFixture::read(path, folder, version));
        }
    }
    out
}

/// Every fixture of our `protocols/roll-runtime/fixtures/v<version>/` folders, oldest version
/// first, files sorted by name.
pub fn roll_own_fixtures() -> Vec<RollFixture> {
    let mut out = Vec::new();
    for version in ROLL_VERSIONS {
        let folder = format!("v{version}");
        let dir = repo_root()
            .join("protocols/roll-runtime/fixtures")
            .join(&folder);
        for path in files_with_extension(&dir, "json") {
            out.push(RollFixture::read(path, &folder, version));
        }
    }
    out
}

//! Locations the tests read from: the repository root, the `.tools/` install folder and the
//! `shared/` folder next to the repository that holds the peers' published fixtures.

use std::path::{Path, PathBuf};

/// Overrides the folder the test tools were installed into (default `<repo>/.tools`).
pub(crate) const TOOLS_DIR_ENV: &str = "AGENTWIRE_TOOLS_DIR";

/// Overrides the `shared/` folder (default `<repo>/../shared`).
pub(crate) const SHARED_DIR_ENV: &str = "AGENTWIRE_SHARED_DIR";

/// The root of the agentwire repository (the folder holding the workspace `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    // This crate always sits at <repo>/crates/agentwire-testkit.
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    match manifest_dir.parent().and_then(Path::parent) {
        Some(root) => root.to_path_buf(),
        None => panic!(
            "agentwire-testkit is not inside <repo>/crates/: {}",
            manifest_dir.display()
        ),
    }
}

/// The folder the test tools are installed into: `$AGENTWIRE_TOOLS_DIR` or `<repo>/.tools`.
pub fn tools_dir() -> PathBuf {
    match std::env::var_os(TOOLS_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => repo_root().join(".tools"),
    }
}

/// The `shared/` folder beside the repository root (`<repo>/../shared`), or
/// `$AGENTWIRE_SHARED_DIR`.
///
/// # Panics
/// When the folder does not exist: the peers' fixtures are part of the test input.
pub fn shared_dir() -> PathBuf {
    let dir = match std::env::var_os(SHARED_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => match repo_root().parent() {
            Some(parent) => parent.join("shared"),
            None => panic!("the repository root has no parent folder to hold shared/"),
        },
    };
    if !dir.is_dir() {
        panic!(
            "missing shared folder {}: the tests read the peers' fixtures from shared/peers/ \
             beside the repository root (or set {SHARED_DIR_ENV})",
            dir.display()
        );
    }
    dir
}

/// A file or folder under `shared/peers/`, e.g. `peer_fixture("roll-agent/fixtures/v1.2")`.
///
/// # Panics
/// When the path does not exist.
pub fn peer_fixture(rel_path: impl AsRef<Path>) -> PathBuf {
    let path = shared_dir().join("peers").join(rel_path.as_ref());
    if !path.exists() {
        panic!("missing peer fixture {}", path.display());
    }
    path
}

/// The files directly inside `dir` whose name ends with `.<extension>`, sorted by file name so
/// that test order and snapshots are stable.
///
/// # Panics
/// When `dir` cannot be read.
pub fn files_with_extension(dir: impl AsRef<Path>, extension: &str) -> Vec<PathBuf> {
    let dir = dir.as_ref();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => panic!("cannot read folder {}: {error}", dir.display()),
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| match entry {
            Ok(entry) => entry.path(),
            Err(error) => panic!("cannot read folder {}: {error}", dir.display()),
        })
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == extension))
        .collect();
    files.sort();
    files
}

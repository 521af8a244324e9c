//! Running external commands and moving JSON through files, with failures that show everything
//! needed to understand them (command line, exit status, stdout, stderr).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::NamedTempFile;

/// Runs `command` to completion and returns its output.
///
/// # Panics
/// When the command cannot start or exits unsuccessfully; the message holds the command line,
/// the exit status, stdout and stderr.
#[track_caller]
pub fn run_ok(command: &mut Command) -> Output {
    let output = match command.output() {
        Ok(output) => output,
        Err(error) => panic!("cannot start {command:?}: {error}"),
    };
    if !output.status.success() {
        panic!(
            "{command:?} failed with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// Reads and parses a JSON file (object key order is kept).
///
/// # Panics
/// When the file cannot be read or is not JSON.
#[track_caller]
pub fn read_json(path: impl AsRef<Path>) -> Value {
    let path = path.as_ref();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    };
    match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => panic!("{} is not JSON: {error}", path.display()),
    }
}

/// Writes `value` as compact JSON to a new temporary `.json` file, deleted when the handle drops.
/// Use it to hand an in-memory schema to [`crate::ajv_verdicts`] or
/// [`crate::py_jsonschema_verdicts`].
///
/// # Panics
/// When the file cannot be written.
#[track_caller]
pub fn write_temp_json(value: &Value) -> NamedTempFile {
    let mut file = temp_file(".json");
    if let Err(error) = serde_json::to_writer(&mut file, value).map_err(std::io::Error::from) {
        panic!("cannot write {}: {error}", file.path().display());
    }
    flush(&mut file);
    file
}

/// Writes `values` as NDJSON (one compact JSON text per line) to a new temporary file.
#[track_caller]
pub(crate) fn write_temp_ndjson(values: &[Value]) -> NamedTempFile {
    let mut file = temp_file(".ndjson");
    for value in values {
        let written = serde_json::to_writer(&mut file, value)
            .map_err(std::io::Error::from)
            .and_then(|()| file.write_all(b"\n"));
        if let Err(error) = written {
            panic!("cannot write {}: {error}", file.path().display());
        }
    }
    flush(&mut file);
    file
}

#[track_caller]
fn temp_file(suffix: &str) -> NamedTempFile {
    match tempfile::Builder::new()
        .prefix("agentwire-")
        .suffix(suffix)
        .tempfile()
    {
        Ok(file) => file,
        Err(error) => panic!("cannot create a temporary file: {error}"),
    }
}

#[track_caller]
fn flush(file: &mut NamedTempFile) {
    if let Err(error) = file.flush() {
        panic!("cannot write {}: {error}", file.path().display());
    }
}
